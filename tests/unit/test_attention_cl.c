/* test_attention_cl.c — the portable attention template (templates/attention/attention.cl) is
 * correct on the OpenCL device: configurations run live through the tuning pipeline's checked
 * run (outputs NaN-poisoned, guard zones, inputs unchanged, the workspace left zeroed, O and LSE
 * against the operation's CPU reference) on awkward shapes — one query, one key, primes,
 * seq_kv != seq with and without causal, grouped- and multi-query heads, batch 3, both layouts,
 * head dims 64, 80, 128 and 256 — and split-KV configurations on decode shapes.
 *
 * Default run: the template's defaults on every shape, and a spread of configurations covering
 * every value of every parameter, each on a few shapes where its space admits it.
 * `test_attention_cl --all` (ctest -L slow): every configuration of the space on the decode
 * shape and a prefill shape. Skipped (77) without an OpenCL device. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_support.h"
#include "tuner/ops/attention.h"
#include "tuner/pipeline.h"

#include <stdlib.h>
#include <string.h>

typedef struct shape {
    int64_t batch, heads, kv_heads, seq, seq_kv, head_dim;
    int causal;
    at_attention_layout layout;
} shape;

#define BSHD AT_ATTENTION_BSHD
#define BHSD AT_ATTENTION_BHSD

static const shape g_shapes[] = {
    {1, 2, 2, 1, 1, 64, 0, BSHD},    /* one query, one key */
    {1, 2, 2, 2, 37, 64, 1, BHSD},   /* causal, seq_kv (prime) > seq */
    {3, 2, 2, 17, 17, 128, 1, BSHD}, /* batch 3, causal square */
    {1, 32, 8, 5, 29, 64, 0, BSHD},  /* GQA 32/8 */
    {1, 8, 1, 17, 61, 128, 1, BHSD}, /* MQA 8/1, causal, seq_kv != seq */
    {2, 4, 4, 61, 40, 64, 0, BSHD},  /* seq (prime) > seq_kv, full */
    {1, 3, 3, 2, 83, 80, 0, BHSD},   /* head dim 80 */
    {1, 2, 1, 7, 19, 256, 1, BSHD},  /* head dim 256, causal */
    {1, 4, 1, 1, 700, 128, 0, BSHD}, /* decode, MQA: split-KV (packed) */
    {1, 2, 2, 1, 523, 64, 1, BHSD},  /* decode, causal, prime keys: split-KV */
    {2, 4, 2, 1, 97, 128, 0, BHSD},  /* decode, GQA, batch 2 */
    {1, 4, 2, 67, 67, 64, 1, BSHD},  /* prefill, GQA, causal: room for every block size */
};
#define NSHAPES (sizeof g_shapes / sizeof g_shapes[0])
_Static_assert(NSHAPES == 12, "DECODE and PREFILL index g_shapes");
#define DECODE        8  /* a shape the configurations are picked on (SPLIT > 1 and PACK valid) */
#define DECODE_CAUSAL 9  /* split-KV with a causal limit and prime keys */
#define PREFILL       11 /* ... and the one for every other value */
#define MAXCASES      64 /* configurations per shape */

typedef struct fixture {
    at_context *ctx;
    at_template *t;
    at_pool *pool;
    char dir[64];
    char missing[256]; /* why the tests are skipped; "" if they run */
} fixture;

static int g_all;     /* --all: the whole space */
static fixture g_fix; /* static: its missing reason outlives the run */

static at_attention_problem problem_of(const shape *s)
{
    return (at_attention_problem){.batch = s->batch,
                                  .heads = s->heads,
                                  .kv_heads = s->kv_heads,
                                  .seq = s->seq,
                                  .seq_kv = s->seq_kv,
                                  .head_dim = s->head_dim,
                                  .causal = s->causal,
                                  .dtype = AT_DTYPE_F32,
                                  .layout = s->layout};
}

static void bind(fixture *f, const shape *s)
{
    at_attention_problem p = problem_of(s);
    assert_int_equal(at_op_attention.bind(&p, f->t->space), AT_OK);
}

static int setup(void **state)
{
    fixture *f = &g_fix;
    *state = f;
    /* Runs in this process: a worker's watchdog (2 s for a first run here) can stop a candidate
     * that PoCL is still compiling for its work-group size on a loaded machine; a run is then
     * judged by its measured time instead. ctest's timeout stands in for the watchdog. */
    setenv("AUTOTUNE_ISOLATION", "off", 1);
    snprintf(f->dir, sizeof f->dir, "/tmp/at-test-attn-cl-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = f->dir};
    if (at_context_create(&o, &f->ctx) != AT_OK) {
        snprintf(f->missing, sizeof f->missing, "no OpenCL device: %s", at_errmsg());
        return 0;
    }
    if (at_template_load("attention", "opencl", &f->t) != AT_OK) return -1;
    if (at_template_bind_device(f->t, &f->ctx->info) != AT_OK) return -1;
    if (at_pool_start(f->ctx, f->t->source, f->t->space->kernel, at_compile_threads(f->ctx),
                      &f->pool) != AT_OK)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->pool) at_pool_stop(f->pool);
    at_template_free(f->t);
    at_context_destroy(f->ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    return system(cmd);
}

/* Compiles configs[0..n) (each valid for shape s) and runs each once through the checked run;
 * every one must come out ok. Returns n. */
static size_t run_configs(fixture *f, const shape *s, const int64_t *configs, size_t n)
{
    at_space *sp = f->t->space;
    bind(f, s);
    at_attention_problem p = problem_of(s);
    at_problem pv = at_problem_view(&at_op_attention, &p);
    at_job *jobs = calloc(n, sizeof *jobs);
    assert_non_null(jobs);
    /* all submitted first: the pool compiles ahead while the runs go on */
    for (size_t c = 0; c < n; c++)
        at_pool_submit(f->pool, sp, c, configs + c * sp->nparams, &jobs[c]);
    at_runner r;
    if (at_runner_open(&r, f->ctx, &pv, NULL) != AT_OK) fail_msg("runner: %s", at_errmsg());
    for (size_t c = 0; c < n; c++) {
        at_job *j = &jobs[c];
        assert_int_equal(at_pool_wait(f->pool, j, NULL), 0);
        char key[256];
        at_attention_key(&p, key, sizeof key);
        if (j->status != AT_OK) fail_msg("%s %s: compile error: %s", key, j->config, j->reason);
        at_result_rec rec = {0};
        /* a tiny best time: one timed repetition is enough here */
        assert_int_equal(
            at_runner_measure(&r, f->t, configs + c * sp->nparams, j->prog, 1e-3, &rec), AT_OK);
        if (rec.status != AT_RS_OK)
            fail_msg("%s %s: %s: %s", key, j->config, at_result_status_name(rec.status),
                     rec.reason);
        f->ctx->ops->program_free(j->prog);
    }
    at_runner_close(&r);
    free(jobs);
    return n;
}

/* The template's defaults that its space admits on this device and shape. */
static size_t valid_defaults(fixture *f, int64_t *out)
{
    at_space *sp = f->t->space;
    size_t n = 0;
    for (size_t d = 0; d < sp->ndefaults; d++) {
        const int64_t *cfg = sp->defaults + d * sp->nparams;
        if (!at_space_valid(sp, cfg, NULL, 0)) continue;
        memcpy(out + n++ * sp->nparams, cfg, sp->nparams * sizeof *cfg);
    }
    return n;
}

static void test_defaults_on_every_shape(void **state)
{
    fixture *f = *state;
    AT_TEST_NEED(f->missing);
    int64_t cfgs[16 * AT_MAX_PARAMS];
    size_t checked = 0;
    for (size_t s = 0; s < NSHAPES; s++) {
        bind(f, &g_shapes[s]);
        size_t n = valid_defaults(f, cfgs);
        /* the first CPU default is the library's kernel for every problem */
        assert_true(n >= 1);
        checked += run_configs(f, &g_shapes[s], cfgs, n);
    }
    print_message("checked %zu (default, shape) cases\n", checked);
}

/* The shapes configurations are picked on: every block size fits the prefill one, SPLIT > 1 and
 * PACK the decode ones; the others only admit small blocks or narrow register blocks. */
static const size_t g_pick_from[] = {PREFILL, DECODE, DECODE_CAUSAL, 6, 7};
#define NPICK_FROM (sizeof g_pick_from / sizeof g_pick_from[0])

/* Spread picks from the space: on each shape of g_pick_from, for every value of every parameter
 * that the space admits there, a configuration using it (*from: the shape each was picked on).
 * --all: every configuration of the prefill and the decode shape. */
static size_t pick_configs(fixture *f, int64_t **out, size_t **from)
{
    at_space *sp = f->t->space;
    const size_t np = sp->nparams;
    size_t n = 0, cap = 256;
    int64_t *picks = malloc(cap * np * sizeof *picks);
    size_t *pf = malloc(cap * sizeof *pf);
    assert_true(picks && pf);
    for (size_t k = 0; k < (g_all ? 2 : NPICK_FROM); k++) {
        const size_t shape = g_pick_from[k], first = n;
        bind(f, &g_shapes[shape]);
        int64_t *cfgs = NULL;
        size_t nc = 0;
        assert_int_equal(at_space_enumerate(sp, &cfgs, NULL, &nc), AT_OK);
        assert_true(nc > 0);
        for (size_t p = 0; p < np; p++)
            for (size_t v = 0; v < sp->params[p].nvalues || (g_all && p == 0 && v < nc); v++) {
                if (n == cap) {
                    cap *= 2;
                    picks = realloc(picks, cap * np * sizeof *picks);
                    pf = realloc(pf, cap * sizeof *pf);
                    assert_true(picks && pf);
                }
                if (g_all) { /* every configuration, once */
                    if (p) break;
                    memcpy(picks + n * np, cfgs + v * np, np * sizeof *cfgs);
                    pf[n++] = shape;
                    continue;
                }
                const int64_t want = sp->params[p].values[v];
                int covered = 0;
                for (size_t i = first; i < n && !covered; i++) covered = picks[i * np + p] == want;
                for (size_t i = 0; i < nc && !covered; i++) {
                    const size_t j = (i * 7919 + v * 104729 + p * 31) % nc;
                    if (cfgs[j * np + p] != want) continue;
                    memcpy(picks + n * np, cfgs + j * np, np * sizeof *cfgs);
                    pf[n++] = shape;
                    covered = 1;
                }
            }
        free(cfgs);
    }
    *out = picks;
    *from = pf;
    return n;
}

static void test_configurations_on_awkward_shapes(void **state)
{
    fixture *f = *state;
    AT_TEST_NEED(f->missing);
    at_space *sp = f->t->space;
    int64_t *picks = NULL;
    size_t *from = NULL;
    const size_t np = pick_configs(f, &picks, &from);
    /* The shapes each pick runs on: the one it was picked on, the causal decode shape when it
     * splits the keys, and (default run, every third pick) the next shape, counting from its
     * index, that admits it. */
    const size_t np_ = sp->nparams;
    int split_p = -1;
    for (size_t p = 0; p < np_; p++)
        if (!strcmp(sp->params[p].name, "SPLIT")) split_p = (int)p;
    assert_true(split_p >= 0);
    unsigned char *want = calloc(NSHAPES * np, 1);
    assert_non_null(want);
    for (size_t c = 0; c < np; c++) {
        const int64_t *cfg = picks + c * np_;
        int extra = 0;
        for (size_t k = 0; k < NSHAPES; k++) {
            const size_t s = (c + k) % NSHAPES;
            bind(f, &g_shapes[s]);
            if (!at_space_valid(sp, cfg, NULL, 0)) continue;
            const int must = s == from[c] || (s == DECODE_CAUSAL && cfg[split_p] > 1);
            if (must || (!g_all && c % 3 == 0 && extra < 1)) {
                extra += !must;
                want[s * np + c] = 1;
            }
        }
    }
    int64_t *batch = malloc(np * np_ * sizeof *batch);
    assert_non_null(batch);
    size_t checked = 0, shapes_hit[NSHAPES] = {0};
    for (size_t s = 0; s < NSHAPES; s++) {
        size_t n = 0;
        for (size_t c = 0; c < np; c++)
            if (want[s * np + c]) memcpy(batch + n++ * np_, picks + c * np_, np_ * sizeof *picks);
        /* in slices, so a whole-space run keeps its compiled programs few */
        for (size_t o = 0; o < n; o += MAXCASES)
            checked +=
                run_configs(f, &g_shapes[s], batch + o * np_, n - o < MAXCASES ? n - o : MAXCASES);
        shapes_hit[s] = n;
    }
    free(want);
    for (size_t s = 0; s < NSHAPES; s++)
        print_message("shape %zu: %zu configs\n", s, shapes_hit[s]);
    print_message("checked %zu (configuration, shape) cases over %zu configurations\n", checked,
                  np);
    /* the picks cover split-KV, and each was checked on a shape */
    assert_true(shapes_hit[DECODE_CAUSAL] > 0);
    assert_true(checked >= np);
    free(batch);
    free(picks);
    free(from);
}

int main(int argc, char **argv)
{
    g_all = argc > 1 && !strcmp(argv[1], "--all");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_on_every_shape),
        cmocka_unit_test(test_configurations_on_awkward_shapes),
    };
    /* AT_TEST_FILTER=name runs one test (cmocka's pattern). */
    if (getenv("AT_TEST_FILTER")) cmocka_set_test_filter(getenv("AT_TEST_FILTER"));
    const int failed = cmocka_run_group_tests(tests, setup, teardown);
    return at_test_exit(failed, g_fix.missing);
}
