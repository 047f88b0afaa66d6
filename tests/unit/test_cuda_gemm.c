/* test_cuda_gemm.c — the portable GEMM template compiles with NVRTC for real CUDA targets
 * without a GPU (a spread of its space per target, every layout and edge pattern), and
 * candidates are rejected by their compiler-reported resources. Skips without NVRTC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/tuner.h"

#include <stdlib.h>
#include <string.h>

static int have_nvrtc(void)
{
    at_bdev *d = NULL;
    if (at_cuda_backend.open_target("sm_80", NULL, &d) != AT_OK) return 0;
    at_cuda_backend.close(d);
    return 1;
}

static void compile_sample(const char *arch, at_dtype dtype, at_layout layout, int64_t m, int64_t n,
                           int64_t k)
{
    at_gemm_problem p = {.m = m, .n = n, .k = k, .dtype = dtype, .layout = layout, .alpha = 1};
    at_compile_report r;
    char why[1024] = "";
    /* wgmma kernels take ~3 s each to compile: fewer of them (ctest -L slow compiles all) */
    const int hopper16 = strcmp(arch, "sm_90a") == 0 && dtype != AT_DTYPE_F32,
              want = hopper16 ? 3 : 6;
    at_status s = at_gemm_compile_space("cuda", arch, &p, want, 1, 0, &r, why, sizeof why);
    if (s != AT_OK) fail_msg("%s: %s", arch, why);
    if (r.compile_errors) fail_msg("%s %s: %s", arch, at_layout_name(layout), r.first_error);
    assert_int_equal(r.attempted, want);
    assert_int_equal(r.compiled + r.resource_rejected, want);
    assert_true(r.space > 100);
    /* the Hopper template: no spills and no serialized wgmma (C7515) anywhere in its space */
    if (hopper16) assert_int_equal(r.resource_rejected, 0);
}

static void test_gemm_compiles_for_sm80_and_sm90a(void **state)
{
    (void)state;
    if (!have_nvrtc()) skip();
    const char *archs[] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++) {
        for (int d = 0; d < 3; d++) { /* f32: portable template; f16, bf16: mma.sync, and wgmma
                                       * on sm_90a */
            compile_sample(archs[a], (at_dtype)d, AT_LAYOUT_NN, 1024, 1024, 1024); /* no edges */
            compile_sample(archs[a], (at_dtype)d, AT_LAYOUT_TT, 1000, 999, 77);    /* every edge */
        }
    }
    compile_sample("sm_80", AT_DTYPE_F32, AT_LAYOUT_NT, 33, 65, 4096);
    compile_sample("sm_90a", AT_DTYPE_BF16, AT_LAYOUT_TN, 4096, 64, 31);
}

static void test_bad_targets(void **state)
{
    (void)state;
    at_gemm_problem p = {.m = 64, .n = 64, .k = 64, .alpha = 1};
    at_compile_report r;
    char why[512] = "";
    if (have_nvrtc()) {
        assert_int_equal(at_gemm_compile_space("cuda", "sm_75", &p, 1, 0, 0, &r, why, sizeof why),
                         AT_ERR_INVALID_ARG);
        assert_non_null(strstr(why, "sm_90a"));
    }
    assert_int_equal(at_gemm_compile_space("opencl", "sm_80", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_ERR_UNSUPPORTED);
    assert_int_equal(at_gemm_compile_space("metal", "x", &p, 1, 0, 0, &r, why, sizeof why),
                     AT_ERR_NO_BACKEND);
}

static void test_resource_rules(void **state)
{
    (void)state;
    at_device_info d = {.max_registers_per_block = 65536};
    char why[256];
    at_resources ok = {.registers = 64, .spill_bytes = 0, .shared_bytes = 0, .local_bytes = 0};
    assert_true(at_resources_fit(&d, &ok, 1024, why, sizeof why));
    at_resources heavy = {.registers = 128, .spill_bytes = 0};
    assert_false(at_resources_fit(&d, &heavy, 1024, why, sizeof why));
    assert_non_null(strstr(why, "128 registers x 1024 threads"));
    at_resources spills = {.registers = 255, .spill_bytes = 152};
    assert_false(at_resources_fit(&d, &spills, 64, why, sizeof why));
    assert_non_null(strstr(why, "spills 152 bytes"));
    at_resources unknown = {.registers = -1, .spill_bytes = -1};
    assert_true(at_resources_fit(&d, &unknown, 1024, why, sizeof why));
    at_resources small_group = {.registers = -1, .spill_bytes = -1, .max_threads = 256};
    assert_false(at_resources_fit(&d, &small_group, 512, why, sizeof why));
    assert_non_null(strstr(why, "limit of 256"));
    assert_true(at_resources_fit(&d, &small_group, 256, why, sizeof why));
    at_resources serial = {.registers = 182, .spill_bytes = 0, .serialized = 1};
    assert_false(at_resources_fit(&d, &serial, 128, why, sizeof why));
    assert_non_null(strstr(why, "serialized"));
    at_device_info opencl = {0}; /* no register budget known */
    assert_true(at_resources_fit(&opencl, &heavy, 1024, why, sizeof why));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_rules),
        cmocka_unit_test(test_bad_targets),
        cmocka_unit_test(test_gemm_compiles_for_sm80_and_sm90a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
