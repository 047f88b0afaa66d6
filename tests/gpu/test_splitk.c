/* test_splitk.c — split-K configs of gemm_mma on a real CUDA device, checked against the CPU
 * reference: the LLM shapes (on a row sample), K smaller than SPLITK*BK (empty ranges), edges,
 * beta 0 and not, every layout, f16 and bf16, and two launches in a row on one workspace that
 * must be all zero again after each. Configs are built directly (not through the space's
 * constraints), so edge cases the tuner would never pick are run too. Without a GPU it only
 * compiles the configs for sm_90a (when NVRTC is there) and exits 77 (ctest: skipped). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/test_support.h"
#include "tuner/ops/gemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static at_context g_ctx;
static char g_no_device[512]; /* why no CUDA device can be used; "" when one can */

static int setup(void **state)
{
    (void)state;
    char why[256];
    g_ctx.ops = &at_cuda_backend;
    if (g_ctx.ops->probe(why, sizeof why) != AT_OK || g_ctx.ops->device_count() < 1) {
        snprintf(g_no_device, sizeof g_no_device, "no usable CUDA device: %s", why);
        return 0;
    }
    /* A device that is there must open: a failure here fails the test. */
    if (g_ctx.ops->device_info(0, &g_ctx.info) != AT_OK || g_ctx.ops->open(0, &g_ctx.dev) != AT_OK)
        g_ctx.dev = NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (g_ctx.dev) g_ctx.ops->close(g_ctx.dev);
    return 0;
}

static float rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 4503599627370496.0 - 1.0);
}

/* n values in [-1, 1] exactly representable in d, and their device form in dev. */
static float *inputs(size_t n, uint64_t seed, at_dtype d, void *dev)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = rnd(&seed);
    at_dtype_from_f32(d, x, dev, n);
    at_dtype_to_f32(d, dev, x, n);
    return x;
}

/* Runs config on problem p twice (the second on the workspace the first left) and checks C
 * against the reference on a sample of rows, and the workspace against zero, each time. */
static void run_case(const char *config, at_dtype dt, at_layout lay, int m, int n, int k,
                     float beta)
{
    const at_backend_ops *B = g_ctx.ops;
    at_gemm_problem p = {
        .m = m, .n = n, .k = k, .dtype = dt, .layout = lay, .alpha = 1.25f, .beta = beta};
    at_template *t = NULL;
    assert_int_equal(at_template_load("gemm_mma", "cuda", &t), AT_OK);
    assert_int_equal(at_template_bind_device(t, &g_ctx.info), AT_OK);
    assert_int_equal(at_gemm_bind(&p, t->space), AT_OK);
    int64_t cfg[AT_MAX_PARAMS];
    char options[4096];
    size_t g[3], l[3], shared = 0, wsb = 0;
    assert_int_equal(at_config_parse(t->space, config, cfg), AT_OK);
    assert_int_equal(at_config_defines(t->space, cfg, options, sizeof options), AT_OK);
    assert_int_equal(at_space_launch(t->space, cfg, g, l), AT_OK);
    assert_int_equal(at_space_memory(t->space, cfg, &shared, &wsb, NULL), AT_OK);
    at_bprog *prog = NULL;
    char *log = NULL;
    if (B->compile(g_ctx.dev, t->source, options, "gemm_mma", &prog, &log) != AT_OK)
        fail_msg("%s: %s", config, log ? log : at_errmsg());
    free(log);

    const int ta = lay == AT_LAYOUT_TN || lay == AT_LAYOUT_TT;
    const int tb = lay == AT_LAYOUT_NT || lay == AT_LAYOUT_TT;
    int lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    size_t big = na > nb ? na : nb;
    big = big > nc ? big : nc;
    uint16_t *stage = malloc(big * 2);
    assert_non_null(stage);
    at_bbuf da, db, dc, ws = {0};
    assert_int_equal(B->buffer_alloc(g_ctx.dev, na * 2, &da), AT_OK);
    assert_int_equal(B->buffer_alloc(g_ctx.dev, nb * 2, &db), AT_OK);
    assert_int_equal(B->buffer_alloc(g_ctx.dev, nc * 2, &dc), AT_OK);
    float *a = inputs(na, 1, dt, stage);
    assert_int_equal(B->buffer_write(g_ctx.dev, da, 0, stage, na * 2), AT_OK);
    float *b = inputs(nb, 2, dt, stage);
    assert_int_equal(B->buffer_write(g_ctx.dev, db, 0, stage, nb * 2), AT_OK);
    float *c0 = inputs(nc, 3, dt, stage);
    if (wsb) assert_int_equal(at_workspace_ensure(&g_ctx, &ws, wsb), AT_OK);

    /* reference on up to 48 rows spread over M, the first and last included */
    size_t nrows = m < 48 ? (size_t)m : 48;
    int64_t *rows = malloc(nrows * sizeof *rows);
    float *ref = malloc(nc * sizeof *ref), *out = malloc(nc * sizeof *out);
    double *bound = calloc(nc, sizeof *bound);
    assert_true(rows && ref && out && bound);
    for (size_t r = 0; r < nrows; r++)
        rows[r] = nrows == 1 ? 0 : (int64_t)(r * (size_t)(m - 1) / (nrows - 1));
    memcpy(ref, c0, nc * sizeof *ref);
    at_gemm_reference(&p, a, b, ref, bound, rows, nrows);
    const double tol = at_gemm_tolerance(k, dt);

    int M = m, N = n, K = k;
    const at_karg args[] = {{sizeof M, &M},           {sizeof N, &N},
                            {sizeof K, &K},           {sizeof(float), &p.alpha},
                            {sizeof(float), &p.beta}, {sizeof(void *), &da.handle},
                            {sizeof lda, &lda},       {sizeof(void *), &db.handle},
                            {sizeof ldb, &ldb},       {sizeof(void *), &dc.handle},
                            {sizeof ldc, &ldc},       {sizeof(void *), &ws.handle}};
    const size_t nargs = sizeof args / sizeof args[0] - (wsb ? 0 : 1);
    for (int rep = 0; rep < 2; rep++) {
        if (beta == 0.0f)
            for (size_t i = 0; i < nc; i++) out[i] = NAN; /* C must not be read */
        else
            memcpy(out, c0, nc * sizeof *out);
        at_dtype_from_f32(dt, out, stage, nc);
        assert_int_equal(B->buffer_write(g_ctx.dev, dc, 0, stage, nc * 2), AT_OK);
        at_status s = B->launch(g_ctx.dev, prog, args, nargs, g, l, t->space->launch_dims, 1,
                                shared, NULL, NULL);
        if (s == AT_OK) s = B->finish(g_ctx.dev);
        if (s != AT_OK) fail_msg("%s %dx%dx%d: launch: %s", config, m, n, k, at_errmsg());
        assert_int_equal(B->buffer_read(g_ctx.dev, dc, 0, stage, nc * 2), AT_OK);
        at_dtype_to_f32(dt, stage, out, nc);
        for (size_t r = 0; r < nrows; r++)
            for (int j = 0; j < n; j++) {
                size_t i = (size_t)rows[r] * (size_t)n + (size_t)j;
                double e = fabs((double)out[i] - ref[i]) / fmax(bound[i], 1e-30);
                if (!(e <= tol))
                    fail_msg("%s %s %s %dx%dx%d beta %g launch %d: C(%lld,%d) = %g, want %g",
                             config, at_dtype_name(dt), at_layout_name(lay), m, n, k, (double)beta,
                             rep + 1, (long long)rows[r], j, (double)out[i], (double)ref[i]);
            }
        if (wsb) {
            unsigned char *w = malloc(wsb);
            assert_non_null(w);
            assert_int_equal(B->buffer_read(g_ctx.dev, ws, 0, w, wsb), AT_OK);
            size_t dirty = 0;
            for (size_t i = 0; i < wsb; i++) dirty += w[i] != 0;
            free(w);
            if (dirty)
                fail_msg("%s %dx%dx%d: %zu workspace bytes left nonzero", config, m, n, k, dirty);
        }
    }
    at_workspace_ensure(&g_ctx, &ws, 0);
    B->buffer_free(g_ctx.dev, da);
    B->buffer_free(g_ctx.dev, db);
    B->buffer_free(g_ctx.dev, dc);
    B->program_free(prog);
    at_template_free(t);
    free(a);
    free(b);
    free(c0);
    free(stage);
    free(rows);
    free(ref);
    free(out);
    free(bound);
}

static const char *const configs[] = {
    "BM=32,BN=128,BK=32,WM=32,WN=32,STAGES=3,SWIZZLE=1,SPLITK=4",
    "BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=2,SWIZZLE=1,SPLITK=2",
    "BM=64,BN=64,BK=64,WM=32,WN=32,STAGES=3,SWIZZLE=1,SPLITK=8",
    "BM=128,BN=128,BK=16,WM=64,WN=32,STAGES=4,SWIZZLE=0,SPLITK=16",
    "BM=128,BN=128,BK=32,WM=64,WN=64,STAGES=3,SWIZZLE=1,SPLITK=1",
};

/* No device: the configs must at least compile (for sm_90a, every edge). */
static void compile_only(void)
{
    at_device_info info;
    at_bdev *d = NULL;
    char why[512];
    if (!at_test_have_compiler(&at_cuda_backend, "sm_90a", why, sizeof why)) return;
    assert_int_equal(at_cuda_backend.open_target("sm_90a", &info, &d), AT_OK);
    at_gemm_problem p = {.m = 37, .n = 200, .k = 5, .dtype = AT_DTYPE_BF16, .alpha = 1};
    at_template *t = NULL;
    assert_int_equal(at_template_load("gemm_mma", "cuda", &t), AT_OK);
    assert_int_equal(at_template_bind_device(t, &info), AT_OK);
    assert_int_equal(at_gemm_bind(&p, t->space), AT_OK);
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        int64_t cfg[AT_MAX_PARAMS];
        char options[4096], *log = NULL;
        at_bprog *prog = NULL;
        assert_int_equal(at_config_parse(t->space, configs[c], cfg), AT_OK);
        assert_int_equal(at_config_defines(t->space, cfg, options, sizeof options), AT_OK);
        if (at_cuda_backend.compile(d, t->source, options, "gemm_mma", &prog, &log) != AT_OK)
            fail_msg("%s: %s", configs[c], log ? log : at_errmsg());
        free(log);
        at_cuda_backend.program_free(prog);
    }
    at_template_free(t);
    at_cuda_backend.close(d);
}

static void test_splitk_on_device(void **state)
{
    (void)state;
    if (g_no_device[0]) {
        compile_only();
        skip();
    }
    if (!g_ctx.dev) fail_msg("CUDA device 0 is there but does not open: %s", at_errmsg());
    static const struct {
        int m, n, k;
        at_layout lay;
        float beta;
    } shapes[] = {
        {16, 8192, 8192, AT_LAYOUT_NN, 0.0f},    /* the small-m LLM shape */
        {4096, 1024, 14336, AT_LAYOUT_NT, 0.5f}, /* the large-k LLM shape (a row sample) */
        {37, 200, 5, AT_LAYOUT_TN, 0.5f},        /* K < SPLITK*BK: empty ranges */
        {1, 1, 1, AT_LAYOUT_TT, 0.0f},
        {130, 260, 1000, AT_LAYOUT_TT, -1.0f}, /* 1000 = 31.25 tiles of 32: ragged ranges */
    };
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            run_case(configs[c], (c + s) % 2 ? AT_DTYPE_BF16 : AT_DTYPE_F16, shapes[s].lay,
                     shapes[s].m, shapes[s].n, shapes[s].k, shapes[s].beta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_splitk_on_device)};
    return at_test_exit(cmocka_run_group_tests(tests, setup, teardown), g_no_device);
}
