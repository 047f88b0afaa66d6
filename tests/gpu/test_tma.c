/* test_tma.c — gemm_wgmma's TMA configurations (LOAD 1: a ring fed by thread 0; LOAD 2: a
 * producer warpgroup with setmaxnreg) on a real CUDA device of compute capability 9.0, through
 * the tuner's own path: each config compiled, its tensor maps encoded by the device half for its
 * buffers (cuTensorMapEncodeTiled), run once and checked against the reference with guard zones
 * and NaN-poisoned outputs, as a tuning run checks a candidate. Every layout, edges, SWAP for
 * small m, split-K with LOAD 2, the TMA-store epilogue (STORE) with beta 0 and, through its
 * register epilogue, beta != 0, 2x1 clusters with multicast (CLUSTER), both 16-bit types. Then
 * a tuned-kernel launch on the caller's buffers: an aligned one runs, a misaligned A is refused
 * with a clear status. Without such a device it exits 77 (ctest: skipped); the configs' compiles
 * are checked by test_cuda_gemm. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/gpu/tma_cases.h"
#include "tests/unit/test_support.h"
#include "tests/unit/tmpdir.h"
#include "tuner/ops/gemm.h"
#include "tuner/pipeline.h"
#include "tuner/tuner.h"

static at_context *g_ctx;
static char g_no_device[512]; /* why no TMA device can be used; "" when one can */

static int setup(void **state)
{
    make_tmp(state);
    /* runs in this process: one context for all (a fault fails the test anyway) */
    setenv("AUTOTUNE_ISOLATION", "off", 1);
    at_context_options o = {.backend = AT_BACKEND_CUDA, .db_path = *state, .db_search_path = ""};
    if (at_context_create(&o, &g_ctx) != AT_OK) {
        snprintf(g_no_device, sizeof g_no_device, "no usable CUDA device: %s", at_errmsg());
        return 0;
    }
    if (!g_ctx->info.tma)
        snprintf(g_no_device, sizeof g_no_device, "%s (%s) has no TMA", g_ctx->info.name,
                 g_ctx->info.arch);
    return 0;
}

static int teardown(void **state)
{
    at_context_destroy(g_ctx);
    return remove_tmp(state);
}

/* config of gemm_wgmma on the problem, checked once as a tuning run checks a candidate; 1 when
 * it ran, 0 when the config is not valid for the problem. */
static int check_config(const char *config, at_dtype dt, at_layout lay, int m, int n, int k,
                        float beta)
{
    at_gemm_problem g = {
        .m = m, .n = n, .k = k, .dtype = dt, .layout = lay, .alpha = 1.25f, .beta = beta};
    at_problem p = at_problem_view(&at_op_gemm, &g);
    at_template *t = NULL;
    assert_int_equal(at_template_for(&p, &g_ctx->info, "gemm_wgmma", &t), AT_OK);
    int64_t cfg[AT_MAX_PARAMS];
    assert_int_equal(at_config_parse(t->space, config, cfg), AT_OK);
    int valid = at_space_valid(t->space, cfg, NULL, 0);
    if (valid) {
        at_result_rec rec;
        assert_int_equal(at_config_run(g_ctx, t, &p, config, 0, &rec), AT_OK);
        if (rec.status != AT_RS_OK)
            fail_msg("%s %s %s %dx%dx%d beta %g: %s", config, at_dtype_name(dt),
                     at_layout_name(lay), m, n, k, (double)beta, rec.reason);
    }
    at_template_free(t);
    return valid;
}

static void test_tma_configs(void **state)
{
    (void)state;
    if (g_no_device[0]) skip();
    size_t ran = 0;
    /* every config on every other shape (about 20 s on the GPU machine: a compile each) */
    for (size_t c = 0; c < AT_TMA_NCONFIGS; c++)
        for (size_t s = c % 2; s < AT_TMA_NSHAPES; s += 2)
            ran += (size_t)check_config(at_tma_configs[c], AT_TMA_DTYPE(c, s), at_tma_shapes[s].lay,
                                        at_tma_shapes[s].m, at_tma_shapes[s].n, at_tma_shapes[s].k,
                                        at_tma_shapes[s].beta);
    assert_int_equal(ran, AT_TMA_RUNS); /* test_cuda_gemm checks the count without a device */
}

/* The library's launch on the caller's buffers: the maps encoded for them. */
static void test_tma_launch(void **state)
{
    (void)state;
    if (g_no_device[0]) skip();
    const int m = 256, n = 256, k = 256;
    at_gemm_problem g = {.m = m, .n = n, .k = k, .dtype = AT_DTYPE_BF16, .alpha = 1.0f};
    at_problem p = at_problem_view(&at_op_gemm, &g);
    at_template *t = NULL;
    assert_int_equal(at_template_for(&p, &g_ctx->info, "gemm_wgmma", &t), AT_OK);
    at_kernel *kn = NULL;
    assert_int_equal(at_kernel_build(g_ctx, t, &p,
                                     "BM=128,BN=128,BK=64,WN=128,WGS=1,STAGES=4,SPLITK=1,"
                                     "GROUP_M=1,SWAP=0,LOAD=2,PERSIST=0,STORE=0,CLUSTER=1",
                                     &kn),
                     AT_OK);
    uint16_t *h = malloc((size_t)m * k * 2);
    assert_non_null(h);
    for (int i = 0; i < m * k; i++) h[i] = 0x3f80; /* bf16 1.0 */
    at_buffer *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(at_buffer_create(g_ctx, (size_t)m * k * 2 + 16, &a), AT_OK);
    assert_int_equal(at_buffer_create(g_ctx, (size_t)k * n * 2, &b), AT_OK);
    assert_int_equal(at_buffer_create(g_ctx, (size_t)m * n * 2, &c), AT_OK);
    assert_int_equal(at_buffer_write(a, 0, h, (size_t)m * k * 2), AT_OK);
    assert_int_equal(at_buffer_write(b, 0, h, (size_t)k * n * 2), AT_OK);
    const at_devptr pa = at_buffer_devptr(a), pb = at_buffer_devptr(b), pc = at_buffer_devptr(c);
    assert_int_equal(at_gemm_launch(kn, pa, pb, pc, NULL), AT_OK);
    assert_int_equal(at_buffer_read(c, 0, h, (size_t)m * n * 2), AT_OK);
    for (int i = 0; i < m * n; i++) assert_int_equal(h[i], 0x4380); /* bf16 256.0 */
    const at_devptr odd = {(char *)pa.handle + 2};
    assert_int_equal(at_gemm_launch(kn, odd, pb, pc, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(g_ctx), "tensor map of buffer A"));
    at_buffer_destroy(a);
    at_buffer_destroy(b);
    at_buffer_destroy(c);
    at_kernel_destroy(kn);
    at_template_free(t);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tma_configs),
                                       cmocka_unit_test(test_tma_launch)};
    return at_test_exit(cmocka_run_group_tests(tests, setup, teardown), g_no_device);
}
