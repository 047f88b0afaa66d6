/* test_hip.c — the HIP backend without an AMD GPU: hipRTC compiles for gfx90a and gfx908, the
 * code object's metadata gives the resources (checked on objects compiled here, and on damaged
 * ones), bad targets and sources are clear errors, a target the compiler crashes on is reported
 * and the process lives on, and a compile-only target refuses device work. Without hipRTC the
 * rest runs and the program exits 77 (ctest: skipped). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/test_support.h"
#include "tuner/backends/hip_meta.h"

#include <stdlib.h>
#include <string.h>

static const at_backend_ops *B = &at_hip_backend;

static at_bdev *open_or_skip(const char *arch, at_device_info *info)
{
    at_bdev *d = NULL;
    at_status s = B->open_target(arch, info, &d);
    if (s != AT_OK) return NULL;
    return d;
}

static int have_hiprtc(void)
{
    at_bdev *d = open_or_skip("gfx90a", NULL);
    B->close(d);
    return d != NULL;
}

static char g_no_hiprtc[512]; /* why hipRTC is not there; "" when it is */

/* A kernel with 1 KiB of static LDS, a private array indexed at run time (so it lives in
 * scratch) and a block-size bound. */
static const char k_src[] =
    "extern \"C\" __global__ __launch_bounds__(256) void k(float *x, int i) {\n"
    "  __shared__ float s[256];\n"
    "  float p[64];\n"
    "  for (int j = 0; j < 64; ++j) p[j] = x[j * 3 + threadIdx.x];\n"
    "  s[threadIdx.x] = p[i & 63];\n"
    "  __syncthreads();\n"
    "  x[threadIdx.x] = s[255 - threadIdx.x] * 2.0f;\n"
    "}\n";

static void test_no_device_is_unavailable_with_a_reason(void **state)
{
    (void)state;
    char why[512] = "";
    at_status s = B->probe(why, sizeof why);
    if (s == AT_OK) skip(); /* a machine with an AMD GPU */
    assert_int_equal(s, AT_ERR_NO_BACKEND);
    assert_true(strlen(why) > 0);
    assert_int_equal(B->device_count(), 0);
    at_device_info info;
    assert_int_not_equal(B->device_info(0, &info), AT_OK);
    at_bdev *d = NULL;
    assert_int_not_equal(B->open(0, &d), AT_OK);
    assert_null(d);
}

static void test_bad_targets(void **state)
{
    (void)state;
    const char *bad[] = {"gfx90b",  "sm_80", "gfx90a:foo+",      "gfx90a:xnack",
                         "gfx90a:", "gfx",   "gfx90a:sramecc+:", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        at_bdev *d = NULL;
        assert_int_equal(B->open_target(bad[i], NULL, &d), AT_ERR_INVALID_ARG);
        assert_null(d);
        assert_non_null(strstr(at_errmsg(), "gfx90a"));
    }
    at_bdev *d = NULL;
    assert_int_equal(B->open_target(NULL, NULL, &d), AT_ERR_INVALID_ARG);
}

static void test_compile_and_read_metadata(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_hiprtc);
    const char *archs[] = {"gfx90a", "gfx908", "gfx90a:sramecc+:xnack-"};
    for (int a = 0; a < 3; a++) {
        at_device_info info;
        at_bdev *d = open_or_skip(archs[a], &info);
        assert_non_null(d);
        assert_int_equal(info.warp_size, 64);
        assert_int_equal(info.local_mem_bytes, 65536);
        assert_string_equal(info.arch, archs[a]);
        assert_non_null(strstr(B->compiler_version(d), "hipRTC"));

        at_bprog *p = NULL;
        char *log = NULL;
        at_status s = B->compile(d, k_src, "-DUNUSED=1", "k", &p, &log);
        if (s != AT_OK) fail_msg("%s: %s", archs[a], at_errmsg());
        at_resources r;
        assert_int_equal(B->resources(p, &r), AT_OK);
        assert_int_equal(r.shared_bytes, 1024);
        assert_true(r.registers > 0 && r.registers <= 512);
        assert_int_equal(r.max_threads, 256);
        assert_true(r.local_bytes >= 256); /* the 64-float private array */
        assert_int_equal(r.spill_bytes, 0);

        void *bin = NULL;
        size_t len = 0;
        assert_int_equal(B->program_binary(p, &bin, &len), AT_OK);
        at_amdgpu_kernel_meta m;
        char why[256];
        assert_int_equal(at_amdgpu_read_meta(bin, len, "k", &m, why, sizeof why), 0);
        assert_int_equal(m.wavefront_size, 64);
        assert_true(m.sgprs > 0);
        assert_non_null(strstr(m.target, archs[a]));
        assert_int_equal(at_amdgpu_read_meta(bin, len, NULL, &m, why, sizeof why), 0);
        assert_int_not_equal(at_amdgpu_read_meta(bin, len, "other", &m, why, sizeof why), 0);
        assert_non_null(strstr(why, "no kernel other"));

        /* Damaged objects: refused with a reason, never read out of bounds (ASan watches). */
        assert_int_not_equal(at_amdgpu_read_meta(bin, 40, "k", &m, why, sizeof why), 0);
        for (size_t cut = 64; cut < len; cut += len / 7)
            at_amdgpu_read_meta(bin, cut, "k", &m, why, sizeof why);
        unsigned char *bad = malloc(len);
        memcpy(bad, bin, len);
        bad[1] = 'X';
        assert_int_not_equal(at_amdgpu_read_meta(bad, len, "k", &m, why, sizeof why), 0);
        assert_non_null(strstr(why, "not an ELF"));
        memcpy(bad, bin, len);
        for (size_t i = 0; i + 6 < len; i++) /* break the note's owner name */
            if (memcmp(bad + i, "AMDGPU", 7) == 0) bad[i] = 'X';
        assert_int_not_equal(at_amdgpu_read_meta(bad, len, "k", &m, why, sizeof why), 0);
        assert_non_null(strstr(why, "no AMDGPU metadata"));
        free(bad);
        assert_int_not_equal(at_amdgpu_read_meta(NULL, 0, "k", &m, why, sizeof why), 0);

        /* A compile-only target refuses device work. */
        at_bprog *q = NULL;
        assert_int_equal(B->load_binary(d, bin, len, "k", &q, NULL), AT_ERR_UNSUPPORTED);
        at_bbuf buf;
        assert_int_equal(B->buffer_alloc(d, 64, &buf), AT_ERR_UNSUPPORTED);
        free(bin);
        free(log);
        B->program_free(p);
        B->close(d);
    }
}

static void test_compile_errors(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_hiprtc);
    at_bdev *d = open_or_skip("gfx90a", NULL);
    at_bprog *p = NULL;
    char *log = NULL;
    assert_int_equal(
        B->compile(d, "extern \"C\" __global__ void k(float *x) { x[0] = y; }", "", "k", &p, &log),
        AT_ERR_COMPILE);
    assert_null(p);
    assert_non_null(log);
    assert_non_null(strstr(log, "error"));
    assert_non_null(strstr(at_errmsg(), "gfx90a"));
    free(log);
    /* Not extern "C": the mangled name is not the kernel's, which the metadata shows. */
    assert_int_equal(
        B->compile(d, "__global__ void k(float *x) { x[0] = 1.0f; }", "", "k", &p, NULL),
        AT_ERR_COMPILE);
    assert_non_null(strstr(at_errmsg(), "extern \"C\""));
    /* Options reach the compiler. */
    assert_int_equal(B->compile(d,
                                "#ifndef V\n#error V missing\n#endif\n"
                                "extern \"C\" __global__ void k(float *x) { x[0] = V; }",
                                "-DV=2.0f", "k", &p, NULL),
                     AT_OK);
    B->program_free(p);
    B->close(d);
}

/* ROCm 5.2's hipRTC aborts on gfx94x and gfx11xx: the probe child takes the crash and the
 * target is refused with a reason. A newer hipRTC may compile them; then they must work. */
static void test_crashing_targets_are_refused(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_hiprtc);
    at_bdev *d0 = open_or_skip("gfx90a", NULL);
    int rocm5 = strstr(B->compiler_version(d0), "libamdhip64.so.5") != NULL;
    B->close(d0);
    const char *targets[] = {"gfx942", "gfx1100", "gfx942"}; /* the second gfx942: cached */
    for (int i = 0; i < 3; i++) {
        at_bdev *d = NULL;
        at_status s = B->open_target(targets[i], NULL, &d);
        if (rocm5) {
            assert_int_equal(s, AT_ERR_UNSUPPORTED);
            assert_non_null(strstr(at_errmsg(), "compiler does not support this target"));
            assert_non_null(strstr(at_errmsg(), targets[i]));
            assert_null(d);
        } else if (s == AT_OK) {
            at_bprog *p = NULL;
            assert_int_equal(B->compile(d, k_src, "", "k", &p, NULL), AT_OK);
            B->program_free(p);
            B->close(d);
        }
    }
    /* The process is intact: gfx90a still compiles. */
    assert_true(have_hiprtc());
}

static void test_resources_from_metadata(void **state)
{
    (void)state;
    at_amdgpu_kernel_meta m = {.vgprs = 100,
                               .agprs = 28,
                               .sgprs = 40,
                               .vgpr_spills = 3,
                               .sgpr_spills = 9,
                               .lds_bytes = 4096,
                               .scratch_bytes = 12,
                               .max_flat_wg = 256};
    at_resources r;
    at_amdgpu_meta_resources(&m, &r);
    assert_int_equal(r.registers, 100);  /* .vgpr_count already includes the AGPRs */
    assert_int_equal(r.spill_bytes, 12); /* VGPR spills only: SGPRs spill into VGPR lanes */
    assert_int_equal(r.shared_bytes, 4096);
    assert_int_equal(r.local_bytes, 12);
    assert_int_equal(r.max_threads, 256);
    m.vgprs = -1; /* not in the note: unknown */
    at_amdgpu_meta_resources(&m, &r);
    assert_int_equal(r.registers, -1);
}

/* HIP's native handles: NULL and a stream, on a device the caller names (the rest waits for a
 * GPU: the stream used and kept). */
static void test_native_handles(void **state)
{
    (void)state;
    at_bdev *d = NULL;
    void *stream = (void *)(uintptr_t)0x5712;
    int idx = 0;
    assert_int_equal(at_hip_backend.open_native(stream, stream, &idx, &d), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "no context object"));
    assert_int_equal(at_hip_backend.open_native(NULL, NULL, &idx, &d), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "native_queue"));
    idx = -1;
    assert_int_equal(at_hip_backend.open_native(NULL, stream, &idx, &d), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "not -1"));
    assert_null(d);
}

/* The last-level cache the timing flush covers (twice its size, tuner/run.c): HIP reports only
 * the L2, so MI300-class parts get their 256 MiB Infinity Cache from the architecture. */
static void test_last_level_cache(void **state)
{
    (void)state;
    const int64_t mib = 1 << 20;
    assert_int_equal(at_hip_last_level_cache("gfx942:sramecc+:xnack-", 4 * mib), 256 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx940", 4 * mib), 256 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx950", 4 * mib), 256 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx942", 0), 256 * mib); /* L2 unknown */
    assert_int_equal(at_hip_last_level_cache("gfx90a:sramecc+:xnack-", 8 * mib), 8 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx908", 8 * mib), 8 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx1100", 6 * mib), 96 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx1030", 4 * mib), 128 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx942", 512 * mib), 512 * mib); /* larger L2 */
    assert_int_equal(at_hip_last_level_cache(NULL, 2 * mib), 2 * mib);
    assert_int_equal(at_hip_last_level_cache("gfx1150", -1), 0);
}

int main(void)
{
    at_test_have_compiler(B, "gfx90a", g_no_hiprtc, sizeof g_no_hiprtc);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_level_cache),
        cmocka_unit_test(test_no_device_is_unavailable_with_a_reason),
        cmocka_unit_test(test_bad_targets),
        cmocka_unit_test(test_native_handles),
        cmocka_unit_test(test_compile_and_read_metadata),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_crashing_targets_are_refused),
        cmocka_unit_test(test_resources_from_metadata),
    };
    return at_test_exit(cmocka_run_group_tests(tests, NULL, NULL), g_no_hiprtc);
}
