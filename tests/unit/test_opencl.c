/* test_opencl.c — the OpenCL backend on this machine's device (PoCL in CI): probe, properties,
 * compile, binaries, buffers, timed launches, errors, concurrent compiles and the missing-library
 * path. Run: ./build/tests/test_opencl */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the four headers it needs */

#include "tests/unit/test_support.h"
#include "tuner/backend.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const at_backend_ops *B = &at_opencl_backend;
static at_bdev *g_dev;

static const char *VADD_SRC =
    "__kernel void vadd(__global const float *a, __global const float *b, __global float *c,\n"
    "                   int n)\n"
    "{\n"
    "    int i = get_global_id(0);\n"
    "    if (i < n) c[i] = a[i] + SCALE * b[i];\n"
    "}\n";

/* ---- helpers ------------------------------------------------------------------------------ */

static at_bprog *compile_ok(const char *src, const char *opts, const char *name)
{
    return at_test_compile_ok(B, g_dev, src, opts, name);
}

/* Runs c = a + scale * b on n floats with program p and checks the result; *ms gets the time. */
static void run_vadd(at_bprog *p, int n, float scale, double *ms)
{
    size_t bytes = (size_t)n * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    for (int i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = (float)(2 * i + 1);
        c[i] = -1.0f;
    }
    at_bbuf da, db, dc;
    assert_int_equal(B->buffer_alloc(g_dev, bytes, &da), AT_OK);
    assert_int_equal(B->buffer_alloc(g_dev, bytes, &db), AT_OK);
    assert_int_equal(B->buffer_alloc(g_dev, bytes, &dc), AT_OK);
    assert_int_equal(B->buffer_write(g_dev, da, 0, a, bytes), AT_OK);
    assert_int_equal(B->buffer_write(g_dev, db, 0, b, bytes), AT_OK);
    at_karg args[4] = {{sizeof(void *), &da.handle},
                       {sizeof(void *), &db.handle},
                       {sizeof(void *), &dc.handle},
                       {sizeof(int), &n}};
    size_t global[3] = {((size_t)n + 63) / 64 * 64, 1, 1}, local[3] = {64, 1, 1};
    at_status s = B->launch(g_dev, p, args, 4, global, local, 1, 1, 0, NULL, ms);
    if (s != AT_OK) fail_msg("launch: %s", at_errmsg());
    assert_int_equal(B->buffer_read(g_dev, dc, 0, c, bytes), AT_OK);
    for (int i = 0; i < n; i++) assert_true(c[i] == a[i] + scale * b[i]);
    B->buffer_free(g_dev, da);
    B->buffer_free(g_dev, db);
    B->buffer_free(g_dev, dc);
    free(a);
    free(b);
    free(c);
}

/* ---- missing library (in a fresh process: the probe result is cached per process) ---------- */

/* argv[1] of the re-executed child; it checks the probe under AUTOTUNE_OPENCL_LIBRARY. */
#define CHILD_FLAG "--probe-child"

static int child_main(const char *expect)
{
    char why[512] = "";
    at_status s = B->probe(why, sizeof why);
    at_bdev *d = NULL;
    at_device_info info;
    int ok = s == AT_ERR_NO_BACKEND && strstr(why, expect) && strstr(at_errmsg(), expect) &&
             B->device_count() == 0 && B->open(0, &d) == AT_ERR_NO_BACKEND && !d &&
             B->device_info(0, &info) == AT_ERR_NO_BACKEND &&
             B->probe(NULL, 0) == AT_ERR_NO_BACKEND; /* idempotent */
    if (!ok) fprintf(stderr, "child: status %d, why \"%s\", expected \"%s\"\n", s, why, expect);
    return ok ? 0 : 1;
}

static void run_child(const char *lib, const char *expect)
{
    const char *const argv[] = {"test_opencl", CHILD_FLAG, expect, NULL};
    at_test_run_child("AUTOTUNE_OPENCL_LIBRARY", lib, argv);
}

static void test_missing_library(void **state)
{
    (void)state;
    run_child("/nonexistent/libOpenCL.so", "/nonexistent/libOpenCL.so");
}

static void test_missing_symbol(void **state)
{
    (void)state;
    run_child("libc.so.6", "clGetPlatformIDs"); /* a library that is not OpenCL */
}

/* ---- device ------------------------------------------------------------------------------- */

static int setup_device(void **state)
{
    (void)state;
    char why[512];
    if (B->probe(why, sizeof why) != AT_OK) {
        fprintf(stderr, "OpenCL probe failed: %s\n", why);
        return -1;
    }
    if (B->device_count() < 1 || B->open(0, &g_dev) != AT_OK) {
        fprintf(stderr, "no OpenCL device: %s\n", at_errmsg());
        return -1;
    }
    return 0;
}

static int teardown_device(void **state)
{
    (void)state;
    B->close(g_dev);
    g_dev = NULL;
    return 0;
}

static void test_probe_and_registry(void **state)
{
    (void)state;
    char why[256] = "x";
    assert_int_equal(B->probe(why, sizeof why), AT_OK);
    assert_string_equal(why, "");
    assert_int_equal(B->probe(NULL, 0), AT_OK);
    assert_true(B->device_count() >= 1);
    assert_ptr_equal(at_backend_find("opencl"), &at_opencl_backend);
    assert_null(at_backend_find("nope"));
    assert_null(at_backend_find(NULL));
    const at_backend_ops *const *list = at_backend_list();
    int n = 0, last_is_opencl = 0;
    for (; list[n]; n++) last_is_opencl = list[n] == &at_opencl_backend;
    assert_true(n >= 1);
    assert_true(last_is_opencl);
}

static void test_device_info(void **state)
{
    (void)state;
    at_device_info info;
    assert_int_equal(B->device_info(0, &info), AT_OK);
    assert_string_equal(info.backend, "opencl");
    assert_string_equal(info.arch, "");
    assert_true(info.name[0] && info.name[0] != ' ');
    assert_true(info.platform[0]);
    assert_true(info.vendor[0]);
    assert_true(info.driver[0]);
    assert_true(info.compute_units >= 1);
    assert_true(info.max_work_group_size >= 1);
    assert_true(info.max_work_item_sizes[0] >= 1);
    assert_true(info.local_mem_bytes > 0);
    assert_int_equal(info.max_shared_optin, info.local_mem_bytes); /* no opt-in on OpenCL */
    assert_true(info.global_mem_bytes > 0);
    assert_true(info.max_alloc_bytes > 0 && info.max_alloc_bytes <= info.global_mem_bytes);
    assert_true(info.clock_mhz >= 0);
    assert_int_equal(info.warp_size, info.is_cpu ? 1 : 32);
    char key[640];
    snprintf(key, sizeof key, "opencl/%s/%s/%lld", info.platform, info.name,
             (long long)info.compute_units);
    assert_string_equal(info.key, key);
    size_t len = strlen(info.name);
    assert_true(info.name[len - 1] != ' ');
    if (getenv("AT_TEST_VERBOSE"))
        printf("key %s\ndriver %s\ncompiler %s\n", info.key, info.driver,
               B->compiler_version(g_dev));
}

static void test_bad_device(void **state)
{
    (void)state;
    at_device_info info;
    at_bdev *d = (at_bdev *)1;
    int n = B->device_count();
    assert_int_equal(B->device_info(n, &info), AT_ERR_NO_DEVICE);
    assert_int_equal(B->device_info(-1, &info), AT_ERR_NO_DEVICE);
    assert_int_equal(B->open(n, &d), AT_ERR_NO_DEVICE);
    assert_null(d);
    assert_non_null(strstr(at_errmsg(), "no OpenCL device"));
}

static void test_open_close(void **state)
{
    (void)state;
    at_bdev *d = NULL;
    assert_int_equal(B->open(0, &d), AT_OK);
    assert_non_null(d);
    assert_non_null(B->native_context(d));
    assert_non_null(B->native_queue(d));
    const char *v = B->compiler_version(d);
    assert_non_null(strstr(v, " / "));
    assert_int_equal(B->finish(d), AT_OK);
    B->close(d);
    B->close(NULL);
    B->program_free(NULL);
}

/* ---- compile and launch ------------------------------------------------------------------- */

/* A thread that spends 50 ms of its own CPU time, then waits to be told to end. */
typedef struct {
    int burnt, done;
} burner;

static void *burn(void *arg)
{
    burner *t = arg;
    struct timespec ts;
    double start = -1.0, now = 0.0;
    do {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
        if (start < 0) start = now;
    } while (now - start < 0.05);
    __atomic_store_n(&t->burnt, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&t->done, __ATOMIC_ACQUIRE)) sched_yield();
    return NULL;
}

static void test_vadd_timed(void **state)
{
    (void)state;
    at_bprog *p = compile_ok(VADD_SRC, "-DSCALE=2.0f", "vadd");
    double ms = -1.0;
    run_vadd(p, 1 << 16, 2.0f, &ms);
    assert_true(ms > 0.0);
    assert_true(ms < 10000.0);
    run_vadd(p, 1000, 2.0f, NULL); /* untimed, asynchronous; the blocking read orders it */
    /* On an explicit stream (the device's own queue, passed as a native handle). */
    at_bbuf c;
    assert_int_equal(B->buffer_alloc(g_dev, 64 * sizeof(float), &c), AT_OK);
    int n = 0; /* nothing to do, but a valid launch */
    at_karg args[4] = {{sizeof(void *), &c.handle},
                       {sizeof(void *), &c.handle},
                       {sizeof(void *), &c.handle},
                       {sizeof(int), &n}};
    size_t global[3] = {64, 1, 1};
    assert_int_equal(
        B->launch(g_dev, p, args, 4, global, NULL, 1, 1, 0, B->native_queue(g_dev), NULL), AT_OK);
    assert_int_equal(B->finish(g_dev), AT_OK);
    B->buffer_free(g_dev, c);
    /* The compiled kernel's limits, for rejecting candidates before launch. */
    at_resources r;
    assert_int_equal(B->resources(p, &r), AT_OK);
    assert_true(r.max_threads >= 1);
    assert_true(r.shared_bytes >= 0);
    B->program_free(p);
}

/* A CPU device's timing on a loaded machine: the scheduler's waits taken out (at_unloaded_ms),
 * by the numbers, and the account it reads (at_sched_account) on a thread of this process. */
static void test_unloaded_time(void **state)
{
    (void)state;
    const at_sched_acct zero = {0, 0, 0};
    const at_sched_acct quiet = {20000000, 0, 0}; /* 2 threads x 10 ms on a core, no wait */
    assert_float_equal(at_unloaded_ms(10.0, 10.2, &zero, &quiet, 2), 10.0, 1e-9);
    /* each thread waited 20 ms for a core: 30 ms of event time is 10.2 of the host's 30.2 */
    const at_sched_acct loaded = {20000000, 40000000, 0};
    assert_float_equal(at_unloaded_ms(30.0, 30.2, &zero, &loaded, 2), 10.2, 1e-9);
    /* in whole nanoseconds, as event times are (records print microseconds to 3 decimals) */
    assert_float_equal(at_unloaded_ms(30.0, 30.2000004, &zero, &loaded, 2), 10.2, 1e-9);
    /* the calling thread waited 5 ms for a core after the run: not the run's time */
    const at_sched_acct late = {20000000, 40000000, 5000000};
    assert_float_equal(at_unloaded_ms(30.0, 35.0, &zero, &late, 2), 10.0, 1e-9);
    /* waits beyond the run (threads spinning for work) never take it below its work */
    const at_sched_acct spin = {20000000, 80000000, 0};
    assert_float_equal(at_unloaded_ms(30.0, 30.0, &zero, &spin, 2), 10.0, 1e-9);
    assert_float_equal(at_unloaded_ms(30.0, 30.0, &zero, &loaded, 0), 30.0, 1e-9);

    at_sched_acct a, b;
    if (!at_sched_account(&a)) skip(); /* a kernel without scheduler statistics */
    burner t = {0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, burn, &t), 0);
    while (!__atomic_load_n(&t.burnt, __ATOMIC_ACQUIRE)) sched_yield();
    assert_true(at_sched_account(&b)); /* while the thread lives: its account is in /proc */
    __atomic_store_n(&t.done, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    assert_true(b.run - a.run >= 40000000); /* its 50 ms on a core, counted as another thread's */
    assert_true(b.wait >= a.wait);
    assert_true(b.self_wait >= a.self_wait);
}

static void test_compile_error(void **state)
{
    (void)state;
    const char *bad = "__kernel void bad(__global float *x) { x[0] = undefined_thing_42; }\n";
    at_bprog *p = (at_bprog *)1;
    char *log = NULL;
    assert_int_equal(B->compile(g_dev, bad, "", "bad", &p, &log), AT_ERR_COMPILE);
    assert_null(p);
    assert_non_null(log);
    assert_non_null(strstr(log, "undefined_thing_42"));
    assert_non_null(strstr(at_errmsg(), "undefined_thing_42"));
    free(log);
    /* Without a log pointer, and with a kernel name that is not in the program. */
    assert_int_equal(B->compile(g_dev, bad, NULL, "bad", &p, NULL), AT_ERR_COMPILE);
    assert_int_equal(B->compile(g_dev, VADD_SRC, "-DSCALE=2.0f", "nosuch", &p, &log),
                     AT_ERR_COMPILE);
    assert_non_null(strstr(at_errmsg(), "CL_INVALID_KERNEL_NAME"));
    free(log);
}

static void test_binary_roundtrip(void **state)
{
    (void)state;
    at_bprog *p = compile_ok(VADD_SRC, "-DSCALE=3.0f", "vadd");
    void *bin = NULL;
    size_t len = 0;
    assert_int_equal(B->program_binary(p, &bin, &len), AT_OK);
    assert_non_null(bin);
    assert_true(len > 0);
    B->program_free(p);
    at_bprog *q = NULL;
    char *log = NULL;
    at_status s = B->load_binary(g_dev, bin, len, "vadd", &q, &log);
    if (s != AT_OK) fail_msg("load_binary: %s", at_errmsg());
    free(log);
    double ms = 0;
    run_vadd(q, 4096, 3.0f, &ms);
    assert_true(ms > 0.0);
    B->program_free(q);
    free(bin);
}

static void test_garbage_binary(void **state)
{
    (void)state;
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 131 + 7);
    at_bprog *p = (at_bprog *)1;
    char *log = NULL;
    assert_int_equal(B->load_binary(g_dev, junk, sizeof junk, "vadd", &p, &log), AT_ERR_COMPILE);
    assert_null(p);
    free(log);
    assert_int_equal(B->load_binary(g_dev, junk, 0, "vadd", &p, NULL), AT_ERR_COMPILE);
    assert_int_equal(B->load_binary(g_dev, junk, 16, "vadd", &p, NULL), AT_ERR_COMPILE);
}

static void test_invalid_launch(void **state)
{
    (void)state;
    at_device_info info;
    assert_int_equal(B->device_info(0, &info), AT_OK);
    at_bprog *p = compile_ok(VADD_SRC, "-DSCALE=2.0f", "vadd");
    at_bbuf c;
    assert_int_equal(B->buffer_alloc(g_dev, 64, &c), AT_OK);
    int n = 0;
    at_karg args[4] = {{sizeof(void *), &c.handle},
                       {sizeof(void *), &c.handle},
                       {sizeof(void *), &c.handle},
                       {sizeof(int), &n}};
    size_t big = (size_t)info.max_work_group_size * 2;
    size_t global[3] = {big, 1, 1}, local[3] = {big, 1, 1};
    double ms = 0;
    assert_int_equal(B->launch(g_dev, p, args, 4, global, local, 1, 1, 0, NULL, &ms),
                     AT_ERR_LAUNCH);
    assert_non_null(strstr(at_errmsg(), "clEnqueueNDRangeKernel"));
    assert_non_null(strstr(at_errmsg(), "CL_INVALID_WORK_"));
    /* A wrong argument size names the argument. */
    at_karg wrong[4] = {args[0], args[1], args[2], {sizeof(char), &n}};
    assert_int_equal(B->launch(g_dev, p, wrong, 4, global, NULL, 1, 1, 0, NULL, NULL),
                     AT_ERR_LAUNCH);
    assert_non_null(strstr(at_errmsg(), "clSetKernelArg(arg 3"));
    assert_non_null(strstr(at_errmsg(), "CL_INVALID_ARG_SIZE"));
    assert_int_equal(B->launch(g_dev, p, args, 4, global, NULL, 0, 1, 0, NULL, NULL),
                     AT_ERR_INVALID_ARG);
    /* Dynamic shared memory is CUDA's: OpenCL refuses it rather than ignore it. */
    assert_int_equal(B->launch(g_dev, p, args, 4, global, NULL, 1, 1, 1024, NULL, NULL),
                     AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "1024 bytes of dynamic shared memory"));
    /* ... and so are thread-block clusters (no space offers them here: device.cluster is 0) */
    assert_int_equal(B->launch(g_dev, p, args, 4, global, NULL, 1, 2, 0, NULL, NULL),
                     AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "clusters of 2 blocks"));
    B->buffer_free(g_dev, c);
    B->program_free(p);
}

static void test_buffer_offsets(void **state)
{
    (void)state;
    at_bbuf b;
    assert_int_equal(B->buffer_alloc(g_dev, 64, &b), AT_OK);
    assert_int_equal(b.bytes, 64);
    unsigned char zero[64] = {0}, part[16], all[64];
    for (int i = 0; i < 16; i++) part[i] = (unsigned char)(i + 1);
    assert_int_equal(B->buffer_write(g_dev, b, 0, zero, 64), AT_OK);
    assert_int_equal(B->buffer_write(g_dev, b, 8, part, 16), AT_OK);
    assert_int_equal(B->buffer_read(g_dev, b, 0, all, 64), AT_OK);
    for (int i = 0; i < 64; i++)
        assert_int_equal(all[i], i >= 8 && i < 24 ? (unsigned char)(i - 7) : 0);
    unsigned char four[4];
    assert_int_equal(B->buffer_read(g_dev, b, 10, four, 4), AT_OK);
    assert_memory_equal(four, part + 2, 4);
    assert_int_equal(B->buffer_write(g_dev, b, 60, part, 8), AT_ERR_INVALID_ARG);
    assert_int_equal(B->buffer_read(g_dev, b, 65, four, 0), AT_ERR_INVALID_ARG);
    assert_int_equal(B->buffer_read(g_dev, b, 64, four, 0), AT_OK);
    B->buffer_free(g_dev, b);
    at_bbuf z;
    assert_int_equal(B->buffer_alloc(g_dev, 0, &z), AT_ERR_INVALID_ARG);
}

/* ---- threads ------------------------------------------------------------------------------ */

typedef struct compile_job {
    int index;
    unsigned nonce;
    at_status status;
    char err[256];
    at_bprog *prog;
} compile_job;

static void *compile_thread(void *arg)
{
    compile_job *j = arg;
    char src[512], opts[64], name[32];
    /* Distinct sources (and a per-run nonce) so PoCL's kernel cache cannot serve them. */
    snprintf(name, sizeof name, "k%d", j->index);
    snprintf(src, sizeof src,
             "__kernel void %s(__global float *x) { int i = get_global_id(0);\n"
             "  x[i] = x[i] * %d.0f + NONCE; }\n",
             name, j->index + 2);
    snprintf(opts, sizeof opts, "-DNONCE=%u.0f", j->nonce);
    char *log = NULL;
    j->status = B->compile(g_dev, src, opts, name, &j->prog, &log);
    snprintf(j->err, sizeof j->err, "%s", at_errmsg());
    free(log);
    return NULL;
}

static void test_concurrent_compiles(void **state)
{
    (void)state;
    enum { N = 4 };
    compile_job jobs[N];
    pthread_t th[N];
    unsigned nonce = (unsigned)time(NULL) ^ ((unsigned)getpid() << 8);
    for (int i = 0; i < N; i++) {
        jobs[i] = (compile_job){.index = i, .nonce = (nonce + (unsigned)i) % 100000};
        assert_int_equal(pthread_create(&th[i], NULL, compile_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < N; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < N; i++) {
        if (jobs[i].status != AT_OK) fail_msg("thread %d: %s", i, jobs[i].err);
        /* Each kernel computes x * (i + 2) + nonce. */
        float x[16];
        for (int k = 0; k < 16; k++) x[k] = (float)k;
        at_bbuf b;
        assert_int_equal(B->buffer_alloc(g_dev, sizeof x, &b), AT_OK);
        assert_int_equal(B->buffer_write(g_dev, b, 0, x, sizeof x), AT_OK);
        at_karg a = {sizeof(void *), &b.handle};
        size_t g[3] = {16, 1, 1};
        assert_int_equal(B->launch(g_dev, jobs[i].prog, &a, 1, g, NULL, 1, 1, 0, NULL, NULL),
                         AT_OK);
        assert_int_equal(B->buffer_read(g_dev, b, 0, x, sizeof x), AT_OK);
        for (int k = 0; k < 16; k++)
            assert_true(x[k] == (float)k * (float)(i + 2) + (float)jobs[i].nonce);
        B->buffer_free(g_dev, b);
        B->program_free(jobs[i].prog);
    }
}

typedef struct launch_job {
    at_bprog *prog;
    float scale;
    int failures;
} launch_job;

static void *launch_thread(void *arg)
{
    launch_job *j = arg;
    enum { n = 256 };
    float a[n], b[n], c[n];
    for (int i = 0; i < n; i++) a[i] = b[i] = (float)i;
    at_bbuf da, db, dc;
    if (B->buffer_alloc(g_dev, sizeof a, &da) || B->buffer_alloc(g_dev, sizeof b, &db) ||
        B->buffer_alloc(g_dev, sizeof c, &dc)) {
        j->failures++;
        return NULL;
    }
    B->buffer_write(g_dev, da, 0, a, sizeof a);
    B->buffer_write(g_dev, db, 0, b, sizeof b);
    int nn = n;
    at_karg args[4] = {{sizeof(void *), &da.handle},
                       {sizeof(void *), &db.handle},
                       {sizeof(void *), &dc.handle},
                       {sizeof(int), &nn}};
    size_t g[3] = {n, 1, 1};
    for (int r = 0; r < 20; r++) {
        memset(c, 0, sizeof c);
        B->buffer_write(g_dev, dc, 0, c, sizeof c);
        double ms = 0;
        if (B->launch(g_dev, j->prog, args, 4, g, NULL, 1, 1, 0, NULL, &ms) != AT_OK) j->failures++;
        B->buffer_read(g_dev, dc, 0, c, sizeof c);
        for (int i = 0; i < n; i++)
            if (c[i] != a[i] + 2.0f * b[i]) {
                j->failures++;
                break;
            }
    }
    B->buffer_free(g_dev, da);
    B->buffer_free(g_dev, db);
    B->buffer_free(g_dev, dc);
    return NULL;
}

/* Two threads launching one program with their own buffers must never swap arguments. */
static void test_concurrent_launches(void **state)
{
    (void)state;
    at_bprog *p = compile_ok(VADD_SRC, "-DSCALE=2.0f", "vadd");
    launch_job jobs[2] = {{p, 2.0f, 0}, {p, 2.0f, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, launch_thread, &jobs[i]), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(jobs[0].failures + jobs[1].failures, 0);
    B->program_free(p);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], CHILD_FLAG) == 0) return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library),     cmocka_unit_test(test_missing_symbol),
        cmocka_unit_test(test_probe_and_registry),  cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_bad_device),          cmocka_unit_test(test_open_close),
        cmocka_unit_test(test_vadd_timed),          cmocka_unit_test(test_unloaded_time),
        cmocka_unit_test(test_compile_error),       cmocka_unit_test(test_binary_roundtrip),
        cmocka_unit_test(test_garbage_binary),      cmocka_unit_test(test_invalid_launch),
        cmocka_unit_test(test_buffer_offsets),      cmocka_unit_test(test_concurrent_compiles),
        cmocka_unit_test(test_concurrent_launches),
    };
    return cmocka_run_group_tests(tests, setup_device, teardown_device);
}
