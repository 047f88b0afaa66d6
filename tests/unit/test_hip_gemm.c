/* test_hip_gemm.c — the GEMM templates compile with hipRTC for AMD targets without a GPU: the
 * portable f32 template through the HIP preamble and the MFMA template for f16 and bf16 (a small
 * spread of each space per target, layout and edge pattern; the whole spaces are `ctest -L slow`),
 * and the spaces pick the right instructions per architecture. Without hipRTC the rest runs and the
 * program exits 77 (ctest: skipped). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/test_support.h"
#include "tuner/ops/gemm.h"

#include <stdlib.h>
#include <string.h>

static char g_no_hiprtc[512]; /* why hipRTC is not there; "" when it is */

static void compile_sample(const char *arch, at_dtype dtype, at_layout layout, int64_t m, int64_t n,
                           int64_t k, int64_t count)
{
    at_gemm_problem p = {.m = m, .n = n, .k = k, .dtype = dtype, .layout = layout, .alpha = 1};
    at_compile_report r;
    char why[1024] = "";
    at_status s = at_gemm_compile_space("hip", arch, &p, count, 7, 0, &r, why, sizeof why);
    if (s != AT_OK) fail_msg("%s: %s", arch, why);
    if (r.compile_errors) fail_msg("%s %s: %s", arch, at_layout_name(layout), r.first_error);
    assert_int_equal(r.attempted, count);
    assert_int_equal(r.compiled + r.resource_rejected, count);
    assert_true(r.space > 100);
}

static void test_gemm_compiles_for_gfx90a_and_gfx908(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_hiprtc);
    compile_sample("gfx90a", AT_DTYPE_F32, AT_LAYOUT_NN, 1024, 1024, 1024, 1); /* no edges */
    compile_sample("gfx90a", AT_DTYPE_F32, AT_LAYOUT_TT, 1000, 999, 77, 2);    /* every edge */
    const char *archs[] = {"gfx90a", "gfx908"};
    for (int a = 0; a < 2; a++) {
        compile_sample(archs[a], AT_DTYPE_F16, AT_LAYOUT_NT, 4096, 4096, 4096, 1);
        compile_sample(archs[a], AT_DTYPE_BF16, AT_LAYOUT_TN, 1000, 999, 77, 1);
    }
}

static void test_mfma_space_per_architecture(void **state)
{
    (void)state;
    /* Which template a dtype gets on gfx90a: tests/unit/test_registry.c. */
    AT_TEST_NEED(g_no_hiprtc);
    at_gemm_problem p = {.m = 64, .n = 64, .k = 64, .dtype = AT_DTYPE_F16, .alpha = 1};
    at_compile_report r;
    char why[1024] = "";
    /* RDNA (wave32, no MFMA; gfx1030 compiles here): the MFMA space is empty, nothing compiles. */
    assert_int_equal(at_gemm_compile_space("hip", "gfx1030", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_OK);
    assert_int_equal(r.space, 0);
    assert_int_equal(r.attempted, 0);
    /* gfx90a has the space in full. */
    assert_int_equal(at_gemm_compile_space("hip", "gfx90a", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_OK);
    assert_true(r.space >= 200 && r.space <= 1000);
    /* bf16 on gfx908 compiles with the older instructions (the _1k ones do not exist there). */
    p.dtype = AT_DTYPE_BF16;
    assert_int_equal(at_gemm_compile_space("hip", "gfx908", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_OK);
    assert_int_equal(r.compile_errors, 0);
}

static void test_bad_targets(void **state)
{
    (void)state;
    at_gemm_problem p = {.m = 64, .n = 64, .k = 64, .alpha = 1};
    at_compile_report r;
    char why[512] = "";
    assert_int_equal(at_gemm_compile_space("hip", "sm_80", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "gfx90a"));
}

int main(void)
{
    at_test_have_compiler(&at_hip_backend, "gfx90a", g_no_hiprtc, sizeof g_no_hiprtc);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_targets),
        cmocka_unit_test(test_mfma_space_per_architecture),
        cmocka_unit_test(test_gemm_compiles_for_gfx90a_and_gfx908),
    };
    return at_test_exit(cmocka_run_group_tests(tests, NULL, NULL), g_no_hiprtc);
}
