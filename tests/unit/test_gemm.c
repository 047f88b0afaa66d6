/* test_gemm.c — the OpenCL GEMM templates (gemm.cl, and gemm_cpu.cl, the default on a CPU
 * device) are correct on the OpenCL device for every layout, over awkward shapes (1x1x1, primes,
 * tall-skinny, k >> m, n, padded leading dimensions), for each template's defaults and for
 * configurations covering every parameter value. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/ops/gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape {
    int64_t m, n, k, pad; /* pad: extra elements on every leading dimension */
} shape;

static const shape g_shapes[] = {
    {1, 1, 1, 0},       {1, 1, 7, 0},    {7, 5, 3, 0},     {13, 17, 19, 0},
    {31, 1, 97, 0},     {1, 257, 3, 0},  {67, 73, 129, 3}, {128, 128, 128, 0},
    {100, 200, 300, 0}, {3, 1000, 2, 0}, {5, 7, 2000, 0},  {64, 64, 64, 5},
};
#define NSHAPES (sizeof g_shapes / sizeof g_shapes[0])

typedef struct fixture {
    at_context *ctx;
    at_template *t;
    char dir[64];
} fixture;

/* The template under test: each group of tests runs once per template. */
static const char *g_template = "gemm";

static int setup(void **state)
{
    static fixture f;
    snprintf(f.dir, sizeof f.dir, "/tmp/at-test-gemm-XXXXXX");
    if (!mkdtemp(f.dir)) return -1;
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = f.dir};
    if (at_context_create(&o, &f.ctx) != AT_OK) {
        fprintf(stderr, "context: %s\n", at_context_last_error(f.ctx));
        return -1;
    }
    if (at_template_load(g_template, "opencl", &f.t) != AT_OK) return -1;
    if (at_template_bind_device(f.t, &f.ctx->info) != AT_OK) return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    at_template_free(f->t);
    at_context_destroy(f->ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    return system(cmd);
}

static void fill(float *x, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* Runs one configuration on one problem and compares with the CPU reference. Returns 1 if
 * the configuration is valid for the problem (and was checked), 0 if the space excludes it. */
static int check_one(fixture *f, const char *config, const shape *s, at_layout layout, float beta)
{
    at_gemm_problem g = {
        .m = s->m, .n = s->n, .k = s->k, .layout = layout, .alpha = 1.5f, .beta = beta};
    int ta = layout == AT_LAYOUT_TN || layout == AT_LAYOUT_TT;
    int tb = layout == AT_LAYOUT_NT || layout == AT_LAYOUT_TT;
    g.lda = (ta ? g.m : g.k) + s->pad;
    g.ldb = (tb ? g.k : g.n) + s->pad;
    g.ldc = g.n + s->pad;
    assert_int_equal(at_gemm_bind(&g, f->t->space), AT_OK);
    int64_t cfg[AT_MAX_PARAMS];
    assert_int_equal(at_config_parse(f->t->space, config, cfg), AT_OK);
    if (!at_space_valid(f->t->space, cfg, NULL, 0)) return 0;

    size_t na = (size_t)((ta ? g.k : g.m) * g.lda), nb = (size_t)((tb ? g.n : g.k) * g.ldb);
    size_t nc = (size_t)(g.m * g.ldc);
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *ref = malloc(nc * 4);
    double *bound = malloc(nc * sizeof *bound);
    fill(a, na, 1);
    fill(b, nb, 2);
    fill(c, nc, 3);
    memcpy(ref, c, nc * 4);
    at_gemm_reference(&g, a, b, ref, bound, NULL, 0);
    /* With beta == 0, C must not be read: NaN in it must not reach the result. */
    if (beta == 0.0f)
        for (size_t i = 0; i < nc; i++) c[i] = NAN;

    at_kernel *k = NULL;
    at_problem gp = at_problem_view(&at_op_gemm, &g);
    at_status st = at_kernel_build(f->ctx, f->t, &gp, config, &k);
    if (st != AT_OK) fail_msg("build %s: %s", config, at_errmsg());
    at_buffer *da, *db, *dc;
    assert_int_equal(at_buffer_create(f->ctx, na * 4, &da), AT_OK);
    assert_int_equal(at_buffer_create(f->ctx, nb * 4, &db), AT_OK);
    assert_int_equal(at_buffer_create(f->ctx, nc * 4, &dc), AT_OK);
    assert_int_equal(at_buffer_write(da, 0, a, na * 4), AT_OK);
    /* A launch on another B first: what a kernel keeps in its workspace from one launch (gemm_cpu's
     * shared packs) must not reach the next. */
    float *b2 = malloc(nb * 4);
    for (size_t i = 0; i < nb; i++) b2[i] = -b[i];
    assert_int_equal(at_buffer_write(db, 0, b2, nb * 4), AT_OK);
    free(b2);
    for (int run = 0; run < 2; run++) {
        if (run) assert_int_equal(at_buffer_write(db, 0, b, nb * 4), AT_OK);
        assert_int_equal(at_buffer_write(dc, 0, c, nc * 4), AT_OK);
        assert_int_equal(at_gemm_launch(k, at_buffer_devptr(da), at_buffer_devptr(db),
                                        at_buffer_devptr(dc), NULL),
                         AT_OK);
    }
    assert_int_equal(at_buffer_read(dc, 0, c, nc * 4), AT_OK);

    double tol = at_gemm_tolerance(g.k, g.dtype), worst = 0;
    for (int64_t i = 0; i < g.m; i++)
        for (int64_t j = 0; j < g.n; j++) {
            size_t x = (size_t)(i * g.ldc + j);
            double e = fabs((double)c[x] - ref[x]) / fmax(bound[x], 1e-30);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    if (!(worst <= tol))
        fail_msg("%s %s %lldx%lldx%lld pad %lld beta %g: max rel error %g > %g", config,
                 at_layout_name(layout), (long long)g.m, (long long)g.n, (long long)g.k,
                 (long long)s->pad, beta, worst, tol);
    at_buffer_destroy(da);
    at_buffer_destroy(db);
    at_buffer_destroy(dc);
    at_kernel_destroy(k);
    free(a);
    free(b);
    free(c);
    free(ref);
    free(bound);
    return 1;
}

/* The built-in default, then for every value of every parameter the first enumerated configuration
 * that uses it, so every value is compiled and checked at least once. The space is enumerated
 * for each layout, since some values exist for one layout only (gemm_cpu: DOT = 1, nt). */
static size_t pick_configs(fixture *f, char (*out)[512], size_t max)
{
    at_space *s = f->t->space;
    size_t n = 0;
    for (int l = 0; l < 4; l++) {
        at_gemm_problem g = {.m = 67, .n = 73, .k = 129, .layout = (at_layout)l};
        at_gemm_bind(&g, s);
        /* The built-in default (the library's fallback kernel); the others are tuning seeds. */
        if (n == 0) at_config_format(s, s->defaults, out[n++], 512);
        int64_t *cfgs = NULL;
        size_t nc = 0;
        assert_int_equal(at_space_enumerate(s, &cfgs, NULL, &nc), AT_OK);
        assert_true(nc > 0);
        for (size_t p = 0; p < s->nparams; p++) {
            for (size_t v = 0; v < s->params[p].nvalues; v++) {
                int64_t want = s->params[p].values[v];
                int covered = 0;
                for (size_t i = 0; i < n && !covered; i++) {
                    int64_t cfg[AT_MAX_PARAMS];
                    at_config_parse(s, out[i], cfg);
                    covered = cfg[p] == want;
                }
                /* Spread the picks through the space rather than always taking the first. */
                for (size_t i = 0; i < nc && !covered && n < max; i++) {
                    size_t j = (i * 7919 + v * 104729 + p * 31) % nc;
                    if (cfgs[j * s->nparams + p] != want) continue;
                    at_config_format(s, cfgs + j * s->nparams, out[n++], 512);
                    covered = 1;
                }
            }
        }
        free(cfgs);
    }
    return n;
}

static void test_gemm_correct_on_awkward_shapes(void **state)
{
    fixture *f = *state;
    static char configs[64][512];
    size_t n = pick_configs(f, configs, 64);
    size_t checked = 0;
    for (size_t c = 0; c < n; c++) {
        size_t mine = 0;
        for (size_t s = 0; s < NSHAPES; s++) {
            /* Every configuration sees every layout across the shapes; where the space excludes
             * the configuration for this layout (gemm_cpu: PB = 0 with B stored N x K), the next
             * layout that admits it. */
            for (size_t l = 0; l < 4; l++) {
                at_layout layout = (at_layout)((s + c + l) % 4);
                if (check_one(f, configs[c], &g_shapes[s], layout, (s + c) % 2 ? 0.5f : 0.0f)) {
                    mine++;
                    break;
                }
            }
        }
        /* Spaces may exclude a configuration for small problems (gemm_cpu: row strips wholly
         * past M), never for most of these shapes. */
        if (mine < 3) fail_msg("%s: checked on %zu shapes only", configs[c], mine);
        checked += mine;
    }
    print_message("%s: checked %zu (configuration, shape, layout) cases over %zu configurations\n",
                  g_template, checked, n);
}

static void test_default_kernel_every_layout(void **state)
{
    fixture *f = *state;
    char config[512];
    at_config_format(f->t->space, f->t->space->defaults, config, sizeof config);
    for (int l = 0; l < 4; l++) {
        const shape s = {33, 65, 17, 0};
        assert_int_equal(check_one(f, config, &s, (at_layout)l, 0.25f), 1);
    }
}

/* gemm_cpu's column strips (NT > 1: one packed A panel shared by NT packed B panels): ragged
 * ends of N inside a work-item's block (a strip partly past N, strips wholly past it), every
 * layout, beta 0 and not. */
static void test_cpu_column_strips(void **state)
{
    fixture *f = *state;
    static const char *configs[] = {
        "VW=8,RS=4,NV=1,MT=2,NT=4,KC=64,PA=1,PB=1,UK=1,GM=0,DOT=0,SP=0",     /* 32 columns */
        "VW=16,RS=6,NV=2,MT=4,NT=2,KC=128,PA=1,PB=0,UK=2,GM=1,DOT=0,SP=0",   /* B in place */
        "VW=16,RS=6,NV=4,MT=32,NT=16,KC=256,PA=1,PB=1,UK=4,GM=1,DOT=0,SP=0", /* 1024 columns */
        "VW=16,RS=14,NV=2,MT=2,NT=8,KC=64,PA=1,PB=1,UK=1,GM=0,DOT=0,SP=0",
        /* shared packs: both panels; A's only (B in place); B's only (A in place) */
        "VW=8,RS=4,NV=1,MT=2,NT=4,KC=64,PA=1,PB=1,UK=1,GM=0,DOT=0,SP=1",
        "VW=16,RS=6,NV=2,MT=4,NT=2,KC=128,PA=1,PB=0,UK=2,GM=1,DOT=0,SP=1",
        "VW=16,RS=8,NV=1,MT=2,NT=1,KC=64,PA=0,PB=1,UK=2,GM=1,DOT=0,SP=1",
    };
    static const shape shapes[] = {{67, 73, 129, 3}, {3, 1000, 2, 0}, {1, 257, 3, 0}};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        size_t checked = 0;
        /* two layouts per shape, all four over the shapes; the first shape (k = 129: whole
         * VW x VW blocks for the transposing pack of B) in a layout with B stored N x K */
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t i = 0; i < 2; i++) {
                const at_layout l = (at_layout)((c + s + i) % 4);
                checked += (size_t)check_one(f, configs[c], &shapes[s], l, i ? 0.5f : 0.0f);
            }
        if (checked < 2) fail_msg("%s: checked on %zu cases only", configs[c], checked);
    }
}

static void test_problem_keys(void **state)
{
    (void)state;
    char key[256];
    at_gemm_problem g = {.m = 8192, .n = 28672, .k = 8192, .layout = AT_LAYOUT_TN};
    at_gemm_key(&g, key, sizeof key);
    assert_string_equal(key, "gemm/f32/tn/8192x28672x8192");
    g.dtype = AT_DTYPE_BF16;
    g.layout = AT_LAYOUT_NT;
    g.k = 1;
    at_gemm_key(&g, key, sizeof key);
    assert_string_equal(key, "gemm/bf16/nt/8192x28672x1");
    /* Keys of one dtype and layout share a prefix, which nearest-shape lookup scans. */
    char *best = at_db_best_key(key, "opencl/Portable Computing Language/cpu/2");
    assert_string_equal(best, "gemm/bf16/nt/8192x28672x1|opencl/Portable Computing Language/cpu/2");
    free(best);
}

static void test_validate_names_the_field(void **state)
{
    (void)state;
    at_gemm_problem g = {.m = 4, .n = 4, .k = 4, .alpha = 1};
    assert_int_equal(at_gemm_validate(&g), AT_OK);
    g.n = 0;
    assert_int_equal(at_gemm_validate(&g), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "n = 0"));
    g.n = 4;
    g.k = 2147483648LL;
    assert_int_equal(at_gemm_validate(&g), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "k = 2147483648"));
    g.k = 4;
    g.layout = AT_LAYOUT_TN;
    g.lda = 3; /* A is k x m: lda >= m */
    assert_int_equal(at_gemm_validate(&g), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "lda = 3"));
    g.lda = 0;
    g.beta = NAN;
    assert_int_equal(at_gemm_validate(&g), AT_ERR_INVALID_ARG);
}

static void test_16bit_conversions(void **state)
{
    (void)state;
    const float in[] = {1.0f,          -2.0f,
                        0.1f,          65504.0f,
                        70000.0f,      5.9604644775390625e-8f,
                        0.0f,          1.0009765625f /* 1 + 2^-10 */,
                        1.00048828125f /* tie: to even */};
    const uint16_t f16[] = {0x3c00, 0xc000, 0x2e66, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x3c01, 0x3c00};
    const uint16_t bf16[] = {0x3f80, 0xc000, 0x3dcd, 0x4780, 0x4789,
                             0x3380, 0x0000, 0x3f80, 0x3f80};
    uint16_t h[9];
    at_dtype_from_f32(AT_DTYPE_F16, in, h, 9);
    for (int i = 0; i < 9; i++)
        if (h[i] != f16[i]) fail_msg("f16(%g) = %#x, want %#x", in[i], h[i], f16[i]);
    at_dtype_from_f32(AT_DTYPE_BF16, in, h, 9);
    for (int i = 0; i < 9; i++)
        if (h[i] != bf16[i]) fail_msg("bf16(%g) = %#x, want %#x", in[i], h[i], bf16[i]);
    /* Every f16 value survives a round trip through f32. */
    for (uint32_t u = 0; u < 0x10000; u++) {
        uint16_t x = (uint16_t)u, y;
        float f;
        if ((x & 0x7c00) == 0x7c00 && (x & 0x3ff)) continue; /* NaN payloads */
        at_dtype_to_f32(AT_DTYPE_F16, &x, &f, 1);
        at_dtype_from_f32(AT_DTYPE_F16, &f, &y, 1);
        if (x != y) fail_msg("f16 %#x -> %g -> %#x", x, f, y);
    }
    float nan = NAN, back;
    at_dtype_from_f32(AT_DTYPE_BF16, &nan, h, 1);
    at_dtype_to_f32(AT_DTYPE_BF16, h, &back, 1);
    assert_true(isnan(back));
    assert_true(at_gemm_tolerance(1024, AT_DTYPE_BF16) > at_gemm_tolerance(1024, AT_DTYPE_F32));
    /* Which template a dtype gets on each backend: tests/unit/test_registry.c. */
}

static int setup_cpu(void **state)
{
    g_template = "gemm_cpu";
    return setup(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_16bit_conversions),
        cmocka_unit_test(test_problem_keys),
        cmocka_unit_test(test_validate_names_the_field),
        cmocka_unit_test(test_default_kernel_every_layout),
        cmocka_unit_test(test_gemm_correct_on_awkward_shapes),
    };
    const struct CMUnitTest cpu_tests[] = {
        cmocka_unit_test(test_default_kernel_every_layout),
        cmocka_unit_test(test_gemm_correct_on_awkward_shapes),
        cmocka_unit_test(test_cpu_column_strips),
    };
    /* AT_TEST_FILTER=name runs one test (cmocka's pattern). */
    if (getenv("AT_TEST_FILTER")) cmocka_set_test_filter(getenv("AT_TEST_FILTER"));
    int failed = cmocka_run_group_tests_name("gemm", tests, setup, teardown);
    return failed | cmocka_run_group_tests_name("gemm_cpu", cpu_tests, setup_cpu, teardown);
}
