/* test_cuda.c — the CUDA backend without a GPU: probe and the missing-library paths, NVRTC
 * compiles for real targets (sm_80, sm_90a) through open_target, the ptxas resource report,
 * CUBIN binaries, compile errors, unknown targets and concurrent compiles. The device half
 * (open, buffers, launches) needs a GPU and is exercised by the device tests there.
 * Without NVRTC the rest runs and the program exits 77 (ctest: skipped).
 * Run: ./build/tests/test_cuda (AT_TEST_VERBOSE=1 prints compile times). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the four headers it needs */

#include "tests/unit/test_support.h"
#include "tuner/backend.h"
#include "tuner/backends/cuda_report.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const at_backend_ops *B = &at_cuda_backend;

/* A block-wide tree reduction through TILE floats of static shared memory, in a loop. */
static const char *REDUCE_SRC =
    "extern \"C\" __global__ void reduce_tile(const float *in, float *out, int n)\n"
    "{\n"
    "    __shared__ float tile[TILE];\n"
    "    float acc = 0.0f;\n"
    "    for (int base = blockIdx.x * TILE; base < n; base += gridDim.x * TILE) {\n"
    "        int i = base + (int)threadIdx.x;\n"
    "        tile[threadIdx.x] = i < n ? in[i] : 0.0f;\n"
    "        __syncthreads();\n"
    "        for (int s = TILE / 2; s > 0; s >>= 1) {\n"
    "            if ((int)threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];\n"
    "            __syncthreads();\n"
    "        }\n"
    "        if (threadIdx.x == 0) acc += tile[0] * SCALE;\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (threadIdx.x == 0) out[blockIdx.x] = acc;\n"
    "}\n";

static char g_no_nvrtc[512]; /* why NVRTC is not there; "" when it is */

static bool verbose(void) { return getenv("AT_TEST_VERBOSE") != NULL; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static at_bdev *open_target_ok(const char *arch)
{
    at_bdev *d = NULL;
    at_status s = B->open_target(arch, NULL, &d);
    if (s != AT_OK) fail_msg("open_target(%s): %d %s", arch, s, at_errmsg());
    assert_non_null(d);
    return d;
}

static at_bprog *compile_ok(at_bdev *d, const char *src, const char *opts, const char *name)
{
    return at_test_compile_ok(B, d, src, opts, name);
}

/* ---- missing libraries (in a fresh process: each library is loaded once per process) ------- */

#define CHILD_FLAG "--cuda-child"

/* mode "nvrtc": open_target fails naming expect; mode "cuda": probe fails naming expect. */
static int child_main(const char *mode, const char *expect)
{
    at_bdev *d = NULL;
    char why[512] = "";
    int ok;
    if (strcmp(mode, "nvrtc") == 0) {
        at_status s = B->open_target("sm_90a", NULL, &d);
        ok = s == AT_ERR_NO_BACKEND && !d && strstr(at_errmsg(), expect) &&
             B->open_target("sm_80", NULL, &d) == AT_ERR_NO_BACKEND && !d; /* idempotent */
        if (!ok) fprintf(stderr, "child: open_target %d, \"%s\"\n", s, at_errmsg());
    } else {
        at_status s = B->probe(why, sizeof why);
        ok = s == AT_ERR_NO_BACKEND && strstr(why, expect) && strstr(at_errmsg(), expect) &&
             B->device_count() == 0 && B->open(0, &d) == AT_ERR_NO_BACKEND && !d &&
             B->probe(NULL, 0) == AT_ERR_NO_BACKEND;
        if (!ok) fprintf(stderr, "child: probe %d, why \"%s\"\n", s, why);
    }
    if (!ok) fprintf(stderr, "child: expected \"%s\"\n", expect);
    return ok ? 0 : 1;
}

static void run_child(const char *mode, const char *lib, const char *expect)
{
    const char *const argv[] = {"test_cuda", CHILD_FLAG, mode, expect, NULL};
    at_test_run_child(
        strcmp(mode, "nvrtc") == 0 ? "AUTOTUNE_NVRTC_LIBRARY" : "AUTOTUNE_CUDA_LIBRARY", lib, argv);
}

static void test_missing_nvrtc(void **state)
{
    (void)state;
    run_child("nvrtc", "/nonexistent/libnvrtc.so", "/nonexistent/libnvrtc.so");
}

static void test_nvrtc_missing_symbol(void **state)
{
    (void)state;
    run_child("nvrtc", "libc.so.6", "nvrtcVersion"); /* a library that is not NVRTC */
}

static void test_missing_driver_override(void **state)
{
    (void)state;
    run_child("cuda", "/nonexistent/libcuda.so.1", "/nonexistent/libcuda.so.1");
    run_child("cuda", "libc.so.6", "cuGetErrorName");
}

/* ---- probe and registry ------------------------------------------------------------------- */

static void test_probe_without_driver(void **state)
{
    (void)state;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        dlclose(lib);
        print_message("libcuda.so.1 loads here; the no-driver assertions are skipped\n");
        skip();
    }
    char why[512] = "";
    assert_int_equal(B->probe(why, sizeof why), AT_ERR_NO_BACKEND);
    if (verbose()) print_message("probe: %s\n", why);
    assert_non_null(strstr(why, "cannot load libcuda.so.1"));
    assert_non_null(strstr(at_errmsg(), "libcuda.so.1"));
    assert_int_equal(B->device_count(), 0);
    at_bdev *d = NULL;
    at_device_info info;
    assert_int_equal(B->open(0, &d), AT_ERR_NO_BACKEND);
    assert_null(d);
    assert_int_equal(B->device_info(0, &info), AT_ERR_NO_BACKEND);
}

static void test_registry(void **state)
{
    (void)state;
    assert_ptr_equal(at_backend_find("cuda"), &at_cuda_backend);
    const at_backend_ops *const *list = at_backend_list();
    int cuda_at = -1, opencl_at = -1;
    for (int i = 0; list[i]; i++) {
        if (list[i] == &at_cuda_backend) cuda_at = i;
        if (list[i] == &at_opencl_backend) opencl_at = i;
    }
    assert_true(cuda_at >= 0 && opencl_at > cuda_at); /* GPU first */
    /* Every slot is filled. */
    assert_non_null(B->open_target);
    assert_non_null(B->resources);
    assert_non_null(B->native_queue);
}

/* A compile-only target knows its shared memory limits: 48 KiB static, the opt-in per arch. */
static void test_target_shared_limits(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    static const struct {
        const char *arch;
        int64_t optin;
    } t[] = {{"sm_80", 163 * 1024}, {"sm_86", 99 * 1024}, {"sm_90a", 227 * 1024}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        at_device_info info;
        at_bdev *d = NULL;
        assert_int_equal(B->open_target(t[i].arch, &info, &d), AT_OK);
        assert_int_equal(info.local_mem_bytes, 48 * 1024);
        assert_int_equal(info.max_shared_optin, t[i].optin);
        B->close(d);
    }
}

/* ---- compiling for real targets without a device ------------------------------------------ */

static void check_target(const char *arch)
{
    at_bdev *d = open_target_ok(arch);
    assert_true(strncmp(B->compiler_version(d), "nvrtc ", 6) == 0);
    double t0 = now_s();
    at_bprog *p = compile_ok(d, REDUCE_SRC, "-DTILE=256 -DSCALE=2.0f", "reduce_tile");
    double dt = now_s() - t0;
    if (verbose()) print_message("%s: compiled in %.3f s (%s)\n", arch, dt, B->compiler_version(d));

    at_resources r;
    assert_int_equal(B->resources(p, &r), AT_OK);
    if (verbose())
        print_message("%s: %lld registers, %lld spill, %lld shared, %lld local\n", arch,
                      (long long)r.registers, (long long)r.spill_bytes, (long long)r.shared_bytes,
                      (long long)r.local_bytes);
    assert_true(r.registers > 0);
    assert_int_equal(r.shared_bytes, 256 * 4);
    assert_int_equal(r.spill_bytes, 0);
    assert_int_equal(r.local_bytes, 0);

    void *bin = NULL;
    size_t len = 0;
    assert_int_equal(B->program_binary(p, &bin, &len), AT_OK);
    assert_true(len > 64);
    assert_memory_equal(bin,
                        "\x7f"
                        "ELF",
                        4);
    free(bin);

    /* A compile-only handle runs nothing. */
    at_bbuf buf;
    assert_int_equal(B->buffer_alloc(d, 64, &buf), AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "compile-only"));
    size_t g[3] = {256, 1, 1}, l[3] = {256, 1, 1};
    assert_int_equal(B->launch(d, p, NULL, 0, g, l, 1, 1, 0, NULL, NULL), AT_ERR_UNSUPPORTED);
    at_bprog *q = NULL;
    assert_int_equal(B->load_binary(d,
                                    "\x7f"
                                    "ELF",
                                    4, "reduce_tile", &q, NULL),
                     AT_ERR_UNSUPPORTED);
    assert_null(q);
    assert_int_equal(B->finish(d), AT_ERR_UNSUPPORTED);
    assert_null(B->native_context(d));
    assert_null(B->native_queue(d));
    B->program_free(p);
    B->close(d);
}

static void test_compile_sm80(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    check_target("sm_80");
}

static void test_compile_sm90a(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    check_target("sm_90a");
}

/* The sm_90a-only path: wgmma-era code is not needed, but a -D that changes shared use is. */
static void test_defines_change_resources(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    at_bdev *d = open_target_ok("sm_90");
    at_bprog *p = compile_ok(d, REDUCE_SRC, "  -DTILE=1024\t-DSCALE=1.0f  ", "reduce_tile");
    at_resources r;
    assert_int_equal(B->resources(p, &r), AT_OK);
    assert_int_equal(r.shared_bytes, 1024 * 4);
    B->program_free(p);
    B->close(d);
}

static void test_compile_errors(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    at_bdev *d = open_target_ok("sm_86");
    at_bprog *p = NULL;
    char *log = NULL;

    /* A syntax error: the log says where. */
    const char *bad = "extern \"C\" __global__ void k(int *x) { x[0] = undefined_thing; }\n";
    assert_int_equal(B->compile(d, bad, "", "k", &p, &log), AT_ERR_COMPILE);
    assert_null(p);
    assert_non_null(log);
    assert_non_null(strstr(log, "undefined_thing"));
    assert_non_null(strstr(at_errmsg(), "undefined_thing"));
    assert_non_null(strstr(at_errmsg(), "sm_86"));
    free(log);
    log = NULL;

    /* No such kernel in a source that compiles. */
    assert_int_equal(B->compile(d, REDUCE_SRC, "-DTILE=64 -DSCALE=1", "nothere", &p, &log),
                     AT_ERR_COMPILE);
    assert_null(p);
    assert_non_null(log);
    assert_non_null(strstr(log, "nothere"));
    free(log);
    log = NULL;

    /* A C++-mangled kernel cannot be found again in a cached binary. */
    const char *mangled = "__global__ void m(int *x) { x[0] = 1; }\n";
    assert_int_equal(B->compile(d, mangled, NULL, "m", &p, NULL), AT_ERR_COMPILE);
    assert_null(p);
    assert_non_null(strstr(at_errmsg(), "extern \"C\""));

    /* An option NVRTC rejects. */
    assert_int_equal(
        B->compile(d, REDUCE_SRC, "-DTILE=64 -DSCALE=1 --no-such-option", "reduce_tile", &p, &log),
        AT_ERR_COMPILE);
    assert_null(p);
    free(log);

    assert_int_equal(B->compile(d, NULL, "", "k", &p, NULL), AT_ERR_INVALID_ARG);
    B->close(d);
}

static void test_unknown_targets(void **state)
{
    (void)state;
    const char *bad[] = {"sm_75x", "gfx90a", "sm_75", "sm_100a", "", "sm_90a "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        at_bdev *d = (at_bdev *)&d; /* must be reset to NULL */
        assert_int_equal(B->open_target(bad[i], NULL, &d), AT_ERR_INVALID_ARG);
        assert_null(d);
        assert_non_null(strstr(at_errmsg(), "sm_80, sm_86, sm_89, sm_90, sm_90a"));
    }
    at_bdev *d = NULL;
    assert_int_equal(B->open_target(NULL, NULL, &d), AT_ERR_INVALID_ARG);
    B->close(NULL);
    B->program_free(NULL);
}

/* ---- concurrent compiles ------------------------------------------------------------------ */

typedef struct job {
    at_bdev *dev;
    int tile;
    int failures;
    int64_t shared;
} job;

static void *compile_thread(void *arg)
{
    job *j = arg;
    char opts[64];
    snprintf(opts, sizeof opts, "-DTILE=%d -DSCALE=3.0f", j->tile);
    for (int rep = 0; rep < 2; rep++) {
        at_bprog *p = NULL;
        char *log = NULL;
        at_resources r;
        if (B->compile(j->dev, REDUCE_SRC, opts, "reduce_tile", &p, &log) != AT_OK ||
            B->resources(p, &r) != AT_OK || r.registers <= 0)
            j->failures++;
        else
            j->shared = r.shared_bytes;
        free(log);
        B->program_free(p);
    }
    return NULL;
}

static void test_concurrent_compiles(void **state)
{
    (void)state;
    AT_TEST_NEED(g_no_nvrtc);
    at_bdev *d80 = open_target_ok("sm_80"), *d90 = open_target_ok("sm_90a");
    job jobs[4] = {{d80, 64, 0, 0}, {d90, 128, 0, 0}, {d80, 256, 0, 0}, {d90, 512, 0, 0}};
    pthread_t th[4];
    double t0 = now_s();
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, compile_thread, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    if (verbose()) print_message("8 compiles on 4 threads: %.3f s\n", now_s() - t0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(jobs[i].failures, 0);
        assert_int_equal(jobs[i].shared, jobs[i].tile * 4);
    }
    B->close(d80);
    B->close(d90);
}

/* ---- the ptxas report parser on captured logs (NVRTC 13.0) -------------------------------- */

static const char *LOG_TWO_KERNELS =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'spill' for 'sm_90a'\n"
    "ptxas info    : Function properties for spill\n"
    "ptxas         .     1024 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 0 barriers, 1024 bytes cumulative stack size\n"
    "ptxas info    : Compile time = 180.309 ms\n"
    "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
    "ptxas info    : Function properties for k\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 15 registers, used 1 barriers, 4096 bytes smem\n"
    "ptxas info    : Compile time = 3.584 ms\n";

static const char *LOG_SPILLS =
    "ptxas info    : Overriding maximum register limit 256 for 'heavy' with  24 of maxrregcount "
    "option\r\n"
    "ptxas info    : 0 bytes gmem\r\n"
    "ptxas info    : Compiling entry function 'heavy' for 'sm_90a'\r\n"
    "ptxas info    : Function properties for heavy\r\n"
    "ptxas         .     624 bytes stack frame, 964 bytes spill stores, 1000 bytes spill loads\r\n"
    "ptxas info    : Used 24 registers, used 0 barriers, 624 bytes cumulative stack size\r\n"
    "ptxas info    : Compile time = 91.296 ms\r\n";

/* sm_80 adds cmem; a non-inlined device function reports its own frame first. */
static const char *LOG_SM80_DEVFN =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Function properties for _Z6helperPf\n"
    "ptxas         .     48 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
    "ptxas info    : Compiling entry function 'gemm' for 'sm_80'\n"
    "ptxas info    : Function properties for gemm\n"
    "ptxas         .     16 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 364 bytes cmem[0]\n"
    "ptxas info    : Compile time = 2.512 ms\n";

/* ptxas (CUDA 13) on a wgmma kernel whose MMAs it had to serialize (gemm_wgmma, an early
 * version, compiled with nvcc -Xptxas -v). */
static const char *LOG_WGMMA_SERIALIZED =
    "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
    "serialized due to non wgmma instructions defining accumulator registers of a wgmma between "
    "start and end of the pipeline stage in the function 'gemm_wgmma'\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'gemm_wgmma' for 'sm_90a'\n"
    "ptxas info    : Function properties for gemm_wgmma\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 182 registers, used 1 barriers\n";

/* The report of kernel in log, field by field: registers, spill, shared, local, max_threads,
 * serialized. */
static void expect_report(const char *log, const char *kernel, at_resources want)
{
    at_resources r;
    assert_int_equal(at_cuda_parse_ptxas(log, kernel, &r), 0);
    assert_int_equal(r.registers, want.registers);
    assert_int_equal(r.spill_bytes, want.spill_bytes);
    assert_int_equal(r.shared_bytes, want.shared_bytes);
    assert_int_equal(r.local_bytes, want.local_bytes);
    assert_int_equal(r.max_threads, want.max_threads);
    assert_int_equal(r.serialized, want.serialized);
}

static void test_report_parser(void **state)
{
    (void)state;
    expect_report(LOG_WGMMA_SERIALIZED, "gemm_wgmma", (at_resources){182, 0, 0, 0, -1, 1});
    expect_report(LOG_TWO_KERNELS, "k", (at_resources){15, 0, 4096, 0, -1, 0});
    /* a stack frame without spills */
    expect_report(LOG_TWO_KERNELS, "spill", (at_resources){32, 0, 0, 1024, -1, 0});
    expect_report(LOG_TWO_KERNELS, NULL, (at_resources){32, 0, 0, 1024, -1, 0}); /* the first */
    expect_report(LOG_SPILLS, "heavy", (at_resources){24, 964 + 1000, 0, 624, -1, 0});
    expect_report(LOG_SM80_DEVFN, "gemm", (at_resources){40, 16, 8192, 16, -1, 0});

    at_resources r;
    /* Not there, prefixes of a name, no report at all. */
    assert_int_equal(at_cuda_parse_ptxas(LOG_TWO_KERNELS, "nothere", &r), -1);
    assert_int_equal(r.registers, -1);
    assert_int_equal(r.shared_bytes, -1);
    assert_int_equal(at_cuda_parse_ptxas(LOG_TWO_KERNELS, "spil", &r), -1);
    assert_int_equal(at_cuda_parse_ptxas(LOG_SPILLS, "heav", &r), -1);
    assert_int_equal(at_cuda_parse_ptxas("", "k", &r), -1);
    assert_int_equal(at_cuda_parse_ptxas(NULL, "k", &r), -1);
    assert_int_equal(at_cuda_parse_ptxas("x.cu(1): error: nope\n", NULL, &r), -1);
    assert_int_equal(at_cuda_parse_ptxas("ptxas info    : Compiling entry function 'k' for "
                                         "'sm_80'\nptxas info    : Used many registers\n",
                                         "k", &r),
                     -1);
}

/* ---- main --------------------------------------------------------------------------------- */

/* The launch geometry CUDA and HIP share: partial blocks round up, bad sizes are refused. */
static void test_launch_shape(void **state)
{
    (void)state;
    unsigned int grid[3], block[3];
    const size_t global[3] = {10, 3, 4}, local[3] = {4, 1, 1};
    assert_int_equal(at_launch_shape(global, local, 2, grid, block), AT_OK);
    assert_int_equal(grid[0], 3);
    assert_int_equal(grid[1], 3);
    assert_int_equal(grid[2], 1); /* unused dimension */
    assert_int_equal(block[0], 4);
    assert_int_equal(block[2], 1);
    assert_int_equal(at_launch_shape(global, local, 3, grid, block), AT_OK);
    assert_int_equal(grid[2], 4);
    assert_int_equal(at_launch_shape(global, local, 4, grid, block), AT_ERR_INVALID_ARG);
    assert_int_equal(at_launch_shape(global, NULL, 1, grid, block), AT_ERR_INVALID_ARG);
    const size_t zero[3] = {4, 0, 1};
    assert_int_equal(at_launch_shape(global, zero, 2, grid, block), AT_ERR_INVALID_ARG);
    const size_t huge[3] = {(size_t)UINT_MAX * 8, 1, 1}; /* 2^33 blocks of 4 */
    assert_int_equal(at_launch_shape(huge, local, 1, grid, block), AT_ERR_INVALID_ARG);

    int a = 1, b = 2;
    const at_karg args[2] = {{sizeof a, &a}, {sizeof b, &b}};
    void *stack[1];
    void **params = at_launch_params(args, 1, stack, 1);
    assert_ptr_equal(params, stack);
    assert_ptr_equal(params[0], &a);
    params = at_launch_params(args, 2, stack, 1); /* more than the stack holds */
    assert_non_null(params);
    assert_ptr_not_equal(params, stack);
    assert_ptr_equal(params[1], &b);
    free(params);
}

/* The caller's context is required; without a driver the handles cannot be checked (the rest
 * waits for a GPU: the device derived from the context, a mismatch, the stream kept). */
static void test_native_handles(void **state)
{
    (void)state;
    at_bdev *d = NULL;
    int idx = -1;
    void *stream = (void *)(uintptr_t)0x5712;
    assert_int_equal(at_cuda_backend.open_native(NULL, stream, &idx, &d), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "native_context"));
    assert_null(d);
    assert_int_equal(idx, -1);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], CHILD_FLAG) == 0) return child_main(argv[2], argv[3]);
    at_test_have_compiler(B, "sm_80", g_no_nvrtc, sizeof g_no_nvrtc);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_shape),
        cmocka_unit_test(test_missing_nvrtc),
        cmocka_unit_test(test_nvrtc_missing_symbol),
        cmocka_unit_test(test_missing_driver_override),
        cmocka_unit_test(test_probe_without_driver),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_native_handles),
        cmocka_unit_test(test_compile_sm80),
        cmocka_unit_test(test_compile_sm90a),
        cmocka_unit_test(test_defines_change_resources),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_unknown_targets),
        cmocka_unit_test(test_concurrent_compiles),
        cmocka_unit_test(test_report_parser),
        cmocka_unit_test(test_target_shared_limits),
    };
    return at_test_exit(cmocka_run_group_tests(tests, NULL, NULL), g_no_nvrtc);
}
