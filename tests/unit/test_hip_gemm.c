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

#include <stdio.h>
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

/* Compiles one configuration of gemm_mfma (valid for the problem on arch) and returns its
 * resources; it must fit the target (no spills, no scratch). With AT_HIP_OBJ_DIR set, the code
 * object is also written there as <arch>_<dtype>_<layout>_<config>.co for a disassembler
 * (docs/hip.md: the instruction counts of the main loop). */
static at_resources compile_config(const char *arch, at_dtype dtype, at_layout layout, int64_t m,
                                   int64_t n, int64_t k, const char *config)
{
    const at_backend_ops *b = &at_hip_backend;
    at_device_info info;
    at_bdev *d = NULL;
    assert_int_equal(b->open_target(arch, &info, &d), AT_OK);
    at_template *t = NULL;
    assert_int_equal(at_template_load("gemm_mfma", "hip", &t), AT_OK);
    assert_int_equal(at_template_bind_device(t, &info), AT_OK);
    at_gemm_problem g = {.m = m, .n = n, .k = k, .dtype = dtype, .layout = layout, .alpha = 1};
    assert_int_equal(at_gemm_bind(&g, t->space), AT_OK);
    int64_t cfg[AT_MAX_PARAMS];
    char why[512] = "", options[4096];
    assert_int_equal(at_config_parse(t->space, config, cfg), AT_OK);
    if (!at_space_valid(t->space, cfg, why, sizeof why)) fail_msg("%s %s: %s", arch, config, why);
    assert_int_equal(at_config_defines(t->space, cfg, options, sizeof options), AT_OK);
    at_bprog *prog = NULL;
    char *log = NULL;
    if (b->compile(d, t->source, options, t->space->kernel, &prog, &log) != AT_OK)
        fail_msg("%s %s: %s", arch, config, log ? log : at_errmsg());
    free(log);
    at_resources r;
    assert_int_equal(b->resources(prog, &r), AT_OK);
    int64_t threads = 0;
    assert_int_equal(at_space_value(t->space, cfg, "THREADS", &threads), AT_OK);
    if (getenv("AT_HIP_REPORT"))
        print_message("%s %s %s %s: %lld VGPRs, spill %lld, scratch %lld: %s\n", arch,
                      at_dtype_name(dtype), at_layout_name(layout), config, (long long)r.registers,
                      (long long)r.spill_bytes, (long long)r.local_bytes,
                      at_resources_fit(&info, &r, threads, why, sizeof why) ? "fits" : why);
    else if (!at_resources_fit(&info, &r, threads, why, sizeof why))
        fail_msg("%s %s %s: %s", arch, at_dtype_name(dtype), config, why);
    else
        assert_int_equal(r.local_bytes, 0); /* no scratch */
    const char *dir = getenv("AT_HIP_OBJ_DIR");
    void *bin = NULL;
    size_t len = 0;
    if (dir && *dir && b->program_binary(prog, &bin, &len) == AT_OK) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_%s_%s_%s.co", dir, arch, at_dtype_name(dtype),
                 at_layout_name(layout), config);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(bin, 1, len, f);
            fclose(f);
        }
        print_message("%s: %lld VGPRs, %lld bytes LDS\n", path, (long long)r.registers,
                      (long long)r.shared_bytes);
    }
    free(bin);
    b->program_free(prog);
    at_template_free(t);
    b->close(d);
    return r;
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

/* Configurations the ISA counts in docs/hip.md are taken from; each must compile without
 * spills or scratch. */
static void test_mfma_configs_compile(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_hiprtc);
    const char *def = "BM=128,BN=128,BK=32,WM=64,WN=64,MFMA=32,PAD=1";
    compile_config("gfx90a", AT_DTYPE_F16, AT_LAYOUT_NN, 4096, 4096, 4096, def);
    compile_config("gfx90a", AT_DTYPE_F16, AT_LAYOUT_TN, 4096, 4096, 4096, def);
    /* 256x256 tiles of 8 waves of 128x64, with a K edge on the 16-byte path's K-contiguous B
     * (tn); gfx908 256x128 */
    const char *w8 = "BM=256,BN=256,BK=32,WM=128,WN=64,MFMA=32,PAD=0";
    compile_config("gfx90a", AT_DTYPE_F16, AT_LAYOUT_NT, 4096, 4096, 4096, w8);
    compile_config("gfx90a", AT_DTYPE_BF16, AT_LAYOUT_TN, 4096, 4096, 77, w8);
    compile_config("gfx908", AT_DTYPE_BF16, AT_LAYOUT_NN, 4096, 4096, 4096,
                   "BM=256,BN=128,BK=32,WM=128,WN=64,MFMA=32,PAD=1");
    if (getenv("AT_HIP_REPORT")) { /* docs/hip.md: which large tiles spill where */
        const char *more[] = {w8, "BM=256,BN=256,BK=16,WM=64,WN=128,MFMA=16,PAD=1",
                              "BM=256,BN=256,BK=32,WM=64,WN=128,MFMA=16,PAD=0"};
        for (int i = 0; i < 3; i++)
            compile_config("gfx90a", AT_DTYPE_F16, AT_LAYOUT_NN, 1000, 999, 77, more[i]);
    }
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
        cmocka_unit_test(test_mfma_configs_compile),
    };
    return at_test_exit(cmocka_run_group_tests(tests, NULL, NULL), g_no_hiprtc);
}
