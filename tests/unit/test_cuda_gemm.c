/* test_cuda_gemm.c — the portable GEMM template compiles with NVRTC for real CUDA targets
 * without a GPU (a spread of its space per target, every layout and edge pattern), as do the
 * split-K and persistent parts of the tensor-core spaces, and candidates are rejected by their
 * compiler-reported resources. Without NVRTC the rest runs and
 * the program exits 77 (ctest: skipped). */
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

static char g_no_nvrtc[512]; /* why NVRTC is not there; "" when it is */

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
    AT_TEST_NEED(g_no_nvrtc);
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

/* Checks a config's launch geometry and workspace (what its part of the space promises). */
typedef void (*launch_check)(const at_space *s, const int64_t *cfg, const size_t g[3],
                             const size_t l[3], size_t ws);

/* Compiles `count` configs of the template whose parameter `param` is above `above`, spread
 * through that part of the space for the problem, with NVRTC for arch; every one must compile,
 * fit (no spill, no serialized wgmma) and pass check. */
static void compile_where(const char *name, const char *param, int64_t above, launch_check check,
                          const char *arch, at_dtype dtype, at_layout layout, int64_t m, int64_t n,
                          int64_t k, size_t count)
{
    at_gemm_problem p = {.m = m, .n = n, .k = k, .dtype = dtype, .layout = layout, .alpha = 1};
    at_device_info info;
    at_bdev *d = NULL;
    at_template *t = NULL;
    assert_int_equal(at_cuda_backend.open_target(arch, &info, &d), AT_OK);
    assert_int_equal(at_template_load(name, "cuda", &t), AT_OK);
    assert_int_equal(at_template_bind_device(t, &info), AT_OK);
    assert_int_equal(at_gemm_bind(&p, t->space), AT_OK);
    int64_t *cfgs = NULL, v = 0;
    size_t n_all = 0, n_sel = 0;
    assert_int_equal(at_space_enumerate(t->space, &cfgs, NULL, &n_all), AT_OK);
    size_t *sel = malloc((n_all + 1) * sizeof *sel);
    assert_non_null(sel);
    for (size_t i = 0; i < n_all; i++) {
        assert_int_equal(at_space_value(t->space, cfgs + i * t->space->nparams, param, &v), AT_OK);
        if (v > above) sel[n_sel++] = i;
    }
    if (n_sel < count)
        fail_msg("%s %s %lldx%lldx%lld: only %zu configs with %s > %lld", name, arch, (long long)m,
                 (long long)n, (long long)k, n_sel, param, (long long)above);
    for (size_t c = 0; c < count; c++) {
        const int64_t *cfg = cfgs + sel[c * n_sel / count] * t->space->nparams;
        char config[512], options[4096], why[512] = "";
        at_config_format(t->space, cfg, config, sizeof config);
        assert_int_equal(at_config_defines(t->space, cfg, options, sizeof options), AT_OK);
        size_t g[3], l[3], ws = 0, shared = 0;
        assert_int_equal(at_space_launch(t->space, cfg, g, l), AT_OK);
        assert_int_equal(at_space_memory(t->space, cfg, &shared, &ws), AT_OK);
        check(t->space, cfg, g, l, ws);
        at_bprog *prog = NULL;
        char *log = NULL;
        if (at_cuda_backend.compile(d, t->source, options, name, &prog, &log) != AT_OK)
            fail_msg("%s %s: %s", arch, config, log ? log : at_errmsg());
        at_resources r;
        assert_int_equal(at_cuda_backend.resources(prog, &r), AT_OK);
        if (!at_resources_fit(&info, &r, (int64_t)l[0], why, sizeof why))
            fail_msg("%s %s: %s", arch, config, why);
        free(log);
        at_cuda_backend.program_free(prog);
    }
    free(sel);
    free(cfgs);
    at_template_free(t);
    at_cuda_backend.close(d);
}

static int64_t value(const at_space *s, const int64_t *cfg, const char *name)
{
    int64_t v = 0;
    assert_int_equal(at_space_value(s, cfg, name, &v), AT_OK);
    return v;
}

/* split-K: grid z = SPLITK, blocks of depth 1, a workspace */
static void check_splitk(const at_space *s, const int64_t *cfg, const size_t g[3],
                         const size_t l[3], size_t ws)
{
    assert_int_equal(g[2], (size_t)value(s, cfg, "SPLITK"));
    assert_int_equal(l[2], 1);
    assert_true(ws > 0);
}

static void compile_splitk(const char *arch, at_dtype dtype, at_layout layout, int64_t m, int64_t n,
                           int64_t k, size_t count)
{
    compile_where("gemm_mma", "SPLITK", 1, check_splitk, arch, dtype, layout, m, n, k, count);
}

/* Split-K configs for the small-m and large-k LLM shapes and edge shapes (K not a multiple of
 * BK, ranges that end up empty), both targets, both 16-bit types, all layouts between them. */
static void test_splitk_compiles(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    compile_splitk("sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN, 16, 8192, 8192, 2);
    compile_splitk("sm_80", AT_DTYPE_F16, AT_LAYOUT_NT, 4096, 1024, 14336, 1);
    compile_splitk("sm_80", AT_DTYPE_BF16, AT_LAYOUT_TN, 17, 999, 777, 1);
    compile_splitk("sm_90a", AT_DTYPE_F16, AT_LAYOUT_TT, 100, 300, 1000, 1);
}

static void test_bad_targets(void **state)
{
    (void)state;
    at_gemm_problem p = {.m = 64, .n = 64, .k = 64, .alpha = 1};
    at_compile_report r;
    char why[512] = "";
    if (!g_no_nvrtc[0]) {
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
    at_device_info sm = {.local_mem_bytes = 48 * 1024};
    at_resources smem = {.registers = -1, .spill_bytes = -1, .shared_bytes = 48 * 1024 + 4};
    assert_false(at_resources_fit(&sm, &smem, 256, why, sizeof why));
    assert_non_null(strstr(why, "49156 bytes of static shared memory"));
    smem.shared_bytes = 48 * 1024;
    assert_true(at_resources_fit(&sm, &smem, 256, why, sizeof why));
    at_resources serial = {.registers = 182, .spill_bytes = 0, .serialized = 1};
    assert_false(at_resources_fit(&d, &serial, 128, why, sizeof why));
    assert_non_null(strstr(why, "serialized"));
    at_device_info opencl = {0}; /* no register budget known */
    assert_true(at_resources_fit(&opencl, &heavy, 1024, why, sizeof why));
}

/* persistent (PERSIST): one row of min(tiles, SMs) blocks (132 SMs for a compile-only sm_90a
 * target), more tiles than blocks, no split-K and no workspace */
static void check_persist(const at_space *s, const int64_t *cfg, const size_t g[3],
                          const size_t l[3], size_t ws)
{
    const int64_t tiles = value(s, cfg, "TILES");
    assert_true(tiles > 132);
    assert_int_equal(g[0], 132 * l[0]);
    assert_int_equal(g[1], 1);
    assert_int_equal(g[2], 1);
    assert_int_equal(ws, 0);
}

/* Persistent configs of gemm_wgmma compile for sm_90a with no spill and no C7515 and launch
 * one wave: grids of more than one wave, without and with every edge. */
static void test_persistent_compiles(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    compile_where("gemm_wgmma", "PERSIST", 0, check_persist, "sm_90a", AT_DTYPE_BF16, AT_LAYOUT_NN,
                  8192, 8192, 8192, 2);
    compile_where("gemm_wgmma", "PERSIST", 0, check_persist, "sm_90a", AT_DTYPE_F16, AT_LAYOUT_TT,
                  4000, 3999, 777, 1);
}

int main(void)
{
    at_test_have_compiler(&at_cuda_backend, "sm_80", g_no_nvrtc, sizeof g_no_nvrtc);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_rules),
        cmocka_unit_test(test_bad_targets),
        cmocka_unit_test(test_gemm_compiles_for_sm80_and_sm90a),
        cmocka_unit_test(test_splitk_compiles),
        cmocka_unit_test(test_persistent_compiles),
    };
    return at_test_exit(cmocka_run_group_tests(tests, NULL, NULL), g_no_nvrtc);
}
