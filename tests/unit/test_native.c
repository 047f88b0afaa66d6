/* test_native.c — bring your own context (at_context_options.native_*) on OpenCL: the test makes
 * its own cl_context and cl_command_queue, hands them to at_context_create, tunes, gets and
 * launches a GEMM on buffers it made with clCreateBuffer, checks C against the host, and after
 * at_context_destroy its queue and context still work and hold the references they held before.
 * Bad handles and a mismatched device index are AT_ERR_INVALID_ARG. Skips (77) without an
 * OpenCL device. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/tmpdir.h"

#include "autotune.h"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cl_device_id g_dev;

static cl_uint refs_of_context(cl_context c)
{
    cl_uint n = 0;
    assert_int_equal(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL),
                     CL_SUCCESS);
    return n;
}

static cl_uint refs_of_queue(cl_command_queue q)
{
    cl_uint n = 0;
    assert_int_equal(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL),
                     CL_SUCCESS);
    return n;
}

/* Options for a context on the test's queue q of context c, in the test's directory. */
static at_context_options native_options(void **state, cl_context c, cl_command_queue q)
{
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .device = -1, .db_path = *state};
    o.db_search_path = "";
    o.native_context = c;
    o.native_queue = q;
    return o;
}

static void test_bad_handles(void **state)
{
    cl_int err;
    cl_context c = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &err);
    cl_context other = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(c, g_dev, 0, &err);
    assert_true(c && other && q);
    cl_uint c_refs = refs_of_context(c), q_refs = refs_of_queue(q);
    at_context_options o = native_options(state, c, q);
    at_context *ctx = NULL;
    at_device_desc d;
    int n = 0;
    while (at_device_query("opencl", n, &d) == AT_OK) n++;
    o.device = n; /* not the queue's device */
    assert_int_equal(at_context_create(&o, &ctx), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "native queue is on device 0"));
    at_context_destroy(ctx);
    o.device = -1;
    o.native_context = other; /* the queue is not of this context */
    assert_int_equal(at_context_create(&o, &ctx), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "another cl_context"));
    at_context_destroy(ctx);
    o.native_context = c;
    o.native_queue = NULL; /* a context alone */
    assert_int_equal(at_context_create(&o, &ctx), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "native_queue"));
    at_context_destroy(ctx);
    o.native_queue = q;
    o.backend = AT_BACKEND_AUTO; /* which runtime the handles are of must be said */
    assert_int_equal(at_context_create(&o, &ctx), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "AT_BACKEND_AUTO"));
    at_context_destroy(ctx);
    /* Nothing was kept. */
    assert_int_equal(refs_of_context(c), c_refs);
    assert_int_equal(refs_of_queue(q), q_refs);
    clReleaseCommandQueue(q);
    clReleaseContext(other);
    clReleaseContext(c);
}

static void test_own_queue(void **state)
{
    cl_int err;
    cl_context c = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &err);
    assert_non_null(c);
    /* No profiling: the caller's queue is as the caller made it (tuning times in its worker). */
    cl_command_queue q = clCreateCommandQueue(c, g_dev, 0, &err);
    assert_non_null(q);

    enum { M = 45, N = 30, K = 19 };
    float a[M * K], b[K * N], c0[M * N], out[M * N], want[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 9) - 4.0f;
    for (int i = 0; i < M * N; i++) c0[i] = (float)(i % 3);
    at_gemm_problem p = {.m = M, .n = N, .k = K, .alpha = 2, .beta = 0.5f};
    /* Two launches: C = 2 A B + 0.5 (2 A B + 0.5 C0). */
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int q2 = 0; q2 < K; q2++) s += (double)a[i * K + q2] * b[q2 * N + j];
            float once = (float)(2 * s + 0.5 * c0[i * N + j]);
            want[i * N + j] = (float)(2 * s + 0.5 * once);
        }
    cl_mem A = clCreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof a, a, &err);
    cl_mem B = clCreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof b, b, &err);
    cl_mem C = clCreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof c0, c0, &err);
    assert_true(A && B && C);
    /* The context's references (the queue's count is not compared here: PoCL keeps references
     * to a queue from the last command on each buffer; test_bad_handles compares it). */
    cl_uint c_refs = refs_of_context(c);

    at_context_options o = native_options(state, c, q);
    at_context *ctx = NULL;
    if (at_context_create(&o, &ctx) != AT_OK) fail_msg("context: %s", at_context_last_error(ctx));
    assert_ptr_equal(at_context_native_context(ctx), c);
    assert_ptr_equal(at_context_native_queue(ctx), q);
    at_tune_options t = {.strategy = "random", .max_evals = 3, .seed = 5};
    at_tune_report r;
    at_kernel *tuned = NULL, *k = NULL;
    at_source src;
    if (at_gemm_tune(ctx, &p, &t, &r, &tuned) != AT_OK)
        fail_msg("tune: %s", at_context_last_error(ctx));
    assert_int_equal(r.measured, 3);
    assert_int_equal(at_gemm_get(ctx, &p, AT_GET_NO_FALLBACK, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_HIT);
    /* On the context's queue (the caller's), then on the caller's queue named. */
    assert_int_equal(at_gemm_launch(k, at_devptr_from_handle(A), at_devptr_from_handle(B),
                                    at_devptr_from_handle(C), NULL),
                     AT_OK);
    assert_int_equal(at_gemm_launch(tuned, at_devptr_from_handle(A), at_devptr_from_handle(B),
                                    at_devptr_from_handle(C), q),
                     AT_OK);
    assert_int_equal(clEnqueueReadBuffer(q, C, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL),
                     CL_SUCCESS);
    for (int i = 0; i < M * N; i++) assert_float_equal(out[i], want[i], 1e-3);
    at_kernel_destroy(k);
    at_kernel_destroy(tuned);
    at_context_destroy(ctx);

    /* The caller's queue and context are as they were: usable, the context with its own
     * references. */
    memset(out, 0, sizeof out);
    assert_int_equal(clEnqueueReadBuffer(q, C, CL_FALSE, 0, sizeof out, out, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clFinish(q), CL_SUCCESS);
    assert_float_equal(out[M * N - 1], want[M * N - 1], 1e-3);
    assert_int_equal(refs_of_context(c), c_refs);
    clReleaseMemObject(A);
    clReleaseMemObject(B);
    clReleaseMemObject(C);
    clReleaseCommandQueue(q);
    clReleaseContext(c);
}

/* Candidates that crash and hang (tests/faulty's gemm_faulty) tuned on the caller's queue: they
 * run in a worker process with a context of its own, so the fault and the watchdog's kill are
 * recorded outcomes (crashed, timeout), the run goes on to the correct candidate, and the
 * caller's context and queue are untouched and usable. */
static void test_faults_leave_callers_context(void **state)
{
    cl_int err;
    cl_context c = clCreateContext(NULL, 1, &g_dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(c, g_dev, 0, &err);
    assert_true(c && q);
    float host[64];
    for (int i = 0; i < 64; i++) host[i] = (float)i;
    cl_mem buf =
        clCreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
    assert_non_null(buf);
    cl_uint c_refs = refs_of_context(c);
    setenv("AUTOTUNE_TEMPLATE_PATH",
           AT_SOURCE_DIR "/tests/faulty/templates:" AT_SOURCE_DIR "/templates", 1);
    at_context_options o = native_options(state, c, q);
    at_context *ctx = NULL;
    if (at_context_create(&o, &ctx) != AT_OK) fail_msg("context: %s", at_context_last_error(ctx));
    /* FAULT 0 correct, 3 hangs, 4 writes far out of bounds (SIGSEGV in the worker) */
    at_gemm_problem p = {.m = 33, .n = 17, .k = 9, .alpha = 1};
    at_tune_options t = {.strategy = "exhaustive",
                         .template_name = "gemm_faulty",
                         .run_limit_s = 1,
                         .slowdown_limit = 1e9}; /* no relative stop: FAULT=8 is slow but ok */
    at_tune_report r;
    if (at_gemm_tune(ctx, &p, &t, &r, NULL) != AT_OK)
        fail_msg("tune: %s", at_context_last_error(ctx));
    assert_string_equal(r.best_config, "FAULT=0");
    assert_int_equal(r.evaluated, 10);
    assert_int_equal(r.failed, 8);
    at_context_destroy(ctx);
    setenv("AUTOTUNE_TEMPLATE_PATH", AT_SOURCE_DIR "/templates", 1);
    float out[64] = {0};
    assert_int_equal(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clFinish(q), CL_SUCCESS);
    assert_true(out[63] == 63.0f);
    assert_int_equal(refs_of_context(c), c_refs);
    clReleaseMemObject(buf);
    clReleaseCommandQueue(q);
    clReleaseContext(c);
}

int main(void)
{
    /* Device 0 of autotune's enumeration: the first device of the first platform with one. */
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) np = 0;
    for (cl_uint i = 0; i < np && !g_dev; i++)
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &g_dev, NULL) != CL_SUCCESS)
            g_dev = NULL;
    if (!g_dev) {
        fprintf(stderr, "SKIPPED: no OpenCL device\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_handles, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_own_queue, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_faults_leave_callers_context, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
