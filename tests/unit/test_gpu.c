/* test_gpu.c — the layer the CUDA and HIP backends share (tuner/backends/gpu.c), on the host: a
 * fake runtime and a fake compiler stand in for the vendor's, so the event-timed launch (the
 * order of its calls, the time, every failure), buffers, compile-only devices, the compile flow
 * (options, defines, log, hooks, code) and libraries loaded once are checked without a GPU. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/backends/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a fake runtime ----------------------------------------------------------------------- */

struct at_bdev {
    at_gpu_dev gpu;
    int activations;
};

#define FAKE_ERR 700

static char g_trace[4096]; /* the fake calls made, in order, space-separated */
static const char *g_fail; /* the fake call that fails with FAKE_ERR; NULL: none */
static at_bdev *g_dev;     /* names the events in the trace */

static int step(const char *call)
{
    size_t n = strlen(g_trace);
    snprintf(g_trace + n, sizeof g_trace - n, "%s%s", n ? " " : "", call);
    return g_fail && strcmp(g_fail, call) == 0 ? FAKE_ERR : 0;
}

static void reset(const char *fail)
{
    g_trace[0] = '\0';
    g_fail = fail;
}

static const char *event_name(void *e)
{
    return !g_dev ? "?" : e == g_dev->gpu.ev_start ? "start" : e == g_dev->gpu.ev_end ? "end" : "?";
}

static struct {
    void *fn, *stream, **params;
    unsigned int grid[3], block[3], shared;
    size_t ncopy;   /* set by a test: how many of params to copy (they are freed after) */
    void *copy[64]; /* params[0 .. ncopy) */
} g_launch;

static const char *f_error_name(int r) { return r == FAKE_ERR ? "FAKE_ERROR_700" : NULL; }
static int f_activate(at_bdev *d)
{
    d->activations++;
    return step("activate");
}
static int f_stream_create(void **s)
{
    *s = (void *)(uintptr_t)0x5000;
    return step("stream_create");
}
static int f_event_create(void **e)
{
    static uintptr_t n;
    *e = (void *)(0xe000 + ++n);
    return step("event_create");
}
static int f_stream_sync(void *s)
{
    return step(s == (void *)(uintptr_t)0x5000 ? "sync" : "sync?");
}
static int f_stream_destroy(void *s)
{
    (void)s;
    return step("stream_destroy");
}
static int f_event_destroy(void *e)
{
    (void)e;
    return step("event_destroy");
}
static int f_event_record(void *e, void *s)
{
    char call[64];
    snprintf(call, sizeof call, "record(%s%s)", event_name(e),
             s == g_dev->gpu.stream ? "" : ",other stream");
    return step(call);
}
static int f_event_sync(void *e)
{
    char call[64];
    snprintf(call, sizeof call, "event_sync(%s)", event_name(e));
    return step(call);
}
static int f_event_elapsed(float *ms, void *a, void *b)
{
    *ms = a == g_dev->gpu.ev_start && b == g_dev->gpu.ev_end ? 1.25f : -1.0f;
    return step("elapsed");
}
static int f_device_sync(void) { return step("device_sync"); }
static int f_mem_alloc(void **p, size_t bytes)
{
    int r = step("alloc");
    *p = r ? NULL : calloc(1, bytes); /* host memory plays the device's */
    return r;
}
static int f_mem_free(void *p)
{
    free(p);
    return step("free");
}
static int f_copy_in(void *stream, void *dst, size_t off, const void *src, size_t bytes)
{
    (void)stream;
    memcpy((char *)dst + off, src, bytes);
    return step("copy_in");
}
static int f_copy_out(void *stream, void *dst, const void *src, size_t off, size_t bytes)
{
    (void)stream;
    memcpy(dst, (const char *)src + off, bytes);
    return step("copy_out");
}
static int f_fill(void *p, unsigned char v, size_t bytes, void *stream)
{
    (void)stream;
    memset(p, v, bytes);
    return step("fill");
}
static int f_module_load(void **m, const void *image)
{
    *m = (void *)image;
    return step("module_load");
}
static int f_module_unload(void *m)
{
    (void)m;
    return step("module_unload");
}
static int f_module_function(void **fn, void *m, const char *name)
{
    (void)m;
    *fn = (void *)(uintptr_t)0xf00;
    return step(strcmp(name, "k") == 0 ? "module_function" : "module_function?");
}
static int f_launch(void *fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                    unsigned int by, unsigned int bz, unsigned int shared, void *stream,
                    void **params, void **extra)
{
    g_launch.fn = fn;
    g_launch.stream = stream;
    g_launch.params = params;
    for (size_t i = 0; i < g_launch.ncopy && i < 64; i++) g_launch.copy[i] = params[i];
    g_launch.grid[0] = gx, g_launch.grid[1] = gy, g_launch.grid[2] = gz;
    g_launch.block[0] = bx, g_launch.block[1] = by, g_launch.block[2] = bz;
    g_launch.shared = shared;
    return extra ? -1 : step("launch");
}
static unsigned int g_cluster; /* the last launch_cluster's cluster size */
static int f_launch_cluster(void *fn, const unsigned int grid[3], const unsigned int block[3],
                            unsigned int cluster, unsigned int shared, void *stream, void **params)
{
    g_cluster = cluster;
    g_launch.fn = fn;
    g_launch.stream = stream;
    g_launch.params = params;
    memcpy(g_launch.grid, grid, sizeof g_launch.grid);
    memcpy(g_launch.block, block, sizeof g_launch.block);
    g_launch.shared = shared;
    return step("launch_cluster");
}
static int f_init(unsigned int flags) { return flags ? -1 : step("init"); }
static int f_version(int *v)
{
    *v = 42;
    return step("version");
}
static int g_ndevs = 2;
static int f_device_count(int *n)
{
    *n = g_ndevs;
    return step("device_count");
}

static int g_loaded_calls, g_verify_calls;
static at_status f_loaded(at_bprog *p)
{
    (void)p;
    g_loaded_calls++;
    return AT_OK;
}
static at_status f_verify(at_bprog *p)
{
    g_verify_calls++;
    return p->code_len >= 4 && memcmp(p->code, "CODE", 4) == 0
               ? AT_OK
               : at_fail(AT_ERR_COMPILE, "verify: not CODE");
}

static at_gpu_api g_api = {
    .lib = {.name = "FAKE"},
    .error_name = f_error_name,
    .fn = {.activate = f_activate,
           .init = f_init,
           .version = f_version,
           .device_count = f_device_count,
           .device_sync = f_device_sync,
           .stream_create = f_stream_create,
           .stream_sync = f_stream_sync,
           .stream_destroy = f_stream_destroy,
           .event_create = f_event_create,
           .event_destroy = f_event_destroy,
           .event_record = f_event_record,
           .event_sync = f_event_sync,
           .event_elapsed = f_event_elapsed,
           .mem_alloc = f_mem_alloc,
           .mem_free = f_mem_free,
           .copy_in = f_copy_in,
           .copy_out = f_copy_out,
           .fill = f_fill,
           .module_load = f_module_load,
           .module_unload = f_module_unload,
           .module_function = f_module_function,
           .launch = f_launch},
    .call = {.activate = "fakeSetDevice",
             .init = "fakeInit",
             .device_count = "fakeGetDeviceCount",
             .device_sync = "fakeDeviceSynchronize",
             .stream_create = "fakeStreamCreate",
             .stream_sync = "fakeStreamSynchronize",
             .event_create = "fakeEventCreate",
             .event_record = "fakeEventRecord",
             .event_sync = "fakeEventSynchronize",
             .event_elapsed = "fakeEventElapsedTime",
             .mem_alloc = "fakeMalloc",
             .copy_in = "fakeMemcpyHtoD",
             .copy_out = "fakeMemcpyDtoH",
             .fill = "fakeMemset",
             .module_load = "fakeModuleLoadData",
             .module_function = "fakeModuleGetFunction",
             .launch = "fakeLaunchKernel"},
    .provider = "the fake runtime",
    .loaded = f_loaded,
    .verify = f_verify,
};

/* ---- a fake compiler ---------------------------------------------------------------------- */

static struct {
    char src[4096], file[128], argv[1024];
    int serial_held; /* the compile ran with the serial mutex held */
    const char *log; /* the log the compile leaves */
} g_cc;
static pthread_mutex_t g_serial = PTHREAD_MUTEX_INITIALIZER;
static at_gpu_rtc g_rtc;

static int c_create(void **prog, const char *src, const char *name, int nh, const char *const *h,
                    const char *const *hn)
{
    (void)nh, (void)h, (void)hn;
    snprintf(g_cc.src, sizeof g_cc.src, "%s", src);
    snprintf(g_cc.file, sizeof g_cc.file, "%s", name);
    *prog = (void *)(uintptr_t)0xc0de;
    return step("create");
}
static int c_destroy(void **prog)
{
    *prog = NULL;
    return step("destroy");
}
static int c_compile(void *prog, int argc, const char *const *argv)
{
    (void)prog;
    g_cc.argv[0] = '\0';
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(g_cc.argv);
        snprintf(g_cc.argv + n, sizeof g_cc.argv - n, "%s[%s]", i ? " " : "", argv[i]);
    }
    g_cc.serial_held = g_rtc.serial && pthread_mutex_trylock(g_rtc.serial) == EBUSY;
    return step("compile");
}
static int c_log_size(void *prog, size_t *n)
{
    (void)prog;
    *n = g_cc.log ? strlen(g_cc.log) + 1 : 0;
    return 0;
}
static int c_log(void *prog, char *log)
{
    (void)prog;
    strcpy(log, g_cc.log);
    return 0;
}
static int c_code_size(void *prog, size_t *n)
{
    (void)prog;
    *n = 8;
    return step("code_size");
}
static int c_code(void *prog, char *code)
{
    (void)prog;
    memcpy(code, "CODE1234", 8);
    return step("code");
}
static int c_version(int *major, int *minor)
{
    *major = 3;
    *minor = 14;
    return step("rtc_version");
}
static at_status c_before(void *prog, const char *kernel)
{
    (void)prog;
    step("before");
    return strcmp(kernel, "k") == 0 ? AT_OK : at_fail(AT_ERR_COMPILE, "before: no kernel");
}
static at_status c_after(void *prog, const char *kernel)
{
    (void)prog, (void)kernel;
    return step("after") ? at_fail(AT_ERR_COMPILE, "after: refused") : AT_OK;
}

static const char *const g_fixed[] = {"-O3", "--std=c++17", NULL};
static at_gpu_rtc g_rtc = {
    .lib = {.name = "FAKERTC", .mu = PTHREAD_MUTEX_INITIALIZER, .tried = true, .status = AT_OK},
    .error_name = f_error_name,
    .fn = {.version = c_version,
           .create = c_create,
           .destroy = c_destroy,
           .compile = c_compile,
           .log_size = c_log_size,
           .log = c_log,
           .code_size = c_code_size,
           .code = c_code},
    .call = {.version = "fakertcVersion",
             .create = "fakertcCreateProgram",
             .code_size = "fakertcGetCodeSize",
             .code = "fakertcGetCode"},
    .file_ext = ".fk",
    .arch_flag = "--arch=",
    .fixed = g_fixed,
    .code_name = "fake binary",
    .version_name = "fakertc",
    .before = c_before,
    .after = c_after,
};

/* ---- helpers ------------------------------------------------------------------------------ */

/* An opened fake device ("fk1"): its stream and events made. */
static at_bdev *open_dev(void)
{
    at_bdev *d = NULL;
    assert_int_equal(at_gpu_dev_new(sizeof *d, &g_api, &g_rtc, "fk1", false, &d), AT_OK);
    g_dev = d;
    reset(NULL);
    assert_int_equal(at_gpu_dev_start(d), AT_OK);
    assert_string_equal(g_trace, "activate stream_create event_create event_create");
    assert_non_null(d->gpu.ev_start);
    assert_ptr_not_equal(d->gpu.ev_start, d->gpu.ev_end);
    return d;
}

static void close_dev(at_bdev *d)
{
    reset(NULL);
    at_gpu_dev_stop(d);
    assert_string_equal(g_trace, "sync event_destroy event_destroy stream_destroy");
    at_gpu_dev_free(d);
    g_dev = NULL;
}

/* A loaded program of kernel "k" on d, as compile or load_binary leave it. */
static at_bprog *loaded_prog(at_bdev *d)
{
    at_bprog *p = calloc(1, sizeof *p + 2);
    assert_non_null(p);
    p->dev = d;
    p->fn = (void *)(uintptr_t)0xf00;
    strcpy(p->name, "k");
    return p;
}

/* ---- the event-timed launch --------------------------------------------------------------- */

static const size_t G[3] = {100, 6, 1}, L[3] = {32, 2, 1};

static void test_timed_launch(void **state)
{
    (void)state;
    at_bdev *d = open_dev();
    at_bprog *p = loaded_prog(d);
    int a = 1;
    const at_karg args[1] = {{sizeof a, &a}};
    double ms = 0;
    reset(NULL);
    assert_int_equal(at_gpu_launch(d, p, args, 1, G, L, 2, 1, 4096, NULL, &ms), AT_OK);
    assert_string_equal(g_trace, "activate record(start) launch record(end) event_sync(end) "
                                 "elapsed");
    assert_true(ms == 1.25);
    assert_ptr_equal(g_launch.fn, p->fn);
    assert_ptr_equal(g_launch.stream, d->gpu.stream); /* NULL: the device's queue */
    assert_int_equal(g_launch.grid[0], 4);            /* ceil(100 / 32) */
    assert_int_equal(g_launch.grid[1], 3);
    assert_int_equal(g_launch.grid[2], 1);
    assert_int_equal(g_launch.block[0], 32);
    assert_int_equal(g_launch.block[1], 2);
    assert_int_equal(g_launch.shared, 4096);

    /* Untimed, on another stream, no arguments: the launch alone. */
    void *other = (void *)(uintptr_t)0x6000;
    reset(NULL);
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 1, 1, 0, other, NULL), AT_OK);
    assert_string_equal(g_trace, "activate launch");
    assert_ptr_equal(g_launch.stream, other);
    assert_null(g_launch.params);
    assert_int_equal(g_launch.grid[1], 1); /* one dimension */

    /* Timed on another stream: the events go on that stream. */
    reset(NULL);
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 1, 1, 0, other, &ms), AT_OK);
    assert_string_equal(g_trace, "activate record(start,other stream) launch record(end,other "
                                 "stream) event_sync(end) elapsed");
    free(p);
    close_dev(d);
}

/* Each step that fails stops the launch there, with its status, the call's name and the
 * runtime's error name; the time is not written; the events are free for the next launch. */
static void test_timed_launch_failures(void **state)
{
    (void)state;
    static const struct {
        const char *fail, *trace, *msg;
    } c[] = {
        {"record(start)", "activate record(start)",
         "FAKE fakeEventRecord (start) failed: FAKE_ERROR_700"},
        {"launch", "activate record(start) launch",
         "FAKE fakeLaunchKernel(k, grid 4x3x1, block 32x2x1, 0 bytes dynamic shared) failed: "
         "FAKE_ERROR_700"},
        {"record(end)", "activate record(start) launch record(end)",
         "FAKE fakeEventRecord (end) failed"},
        {"event_sync(end)", "activate record(start) launch record(end) event_sync(end)",
         "FAKE fakeEventSynchronize (kernel execution) failed"},
        {"elapsed", "activate record(start) launch record(end) event_sync(end) elapsed",
         "FAKE fakeEventElapsedTime failed"},
    };
    at_bdev *d = open_dev();
    at_bprog *p = loaded_prog(d);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        double ms = -7;
        reset(c[i].fail);
        assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 2, 1, 0, NULL, &ms), AT_ERR_LAUNCH);
        assert_string_equal(g_trace, c[i].trace);
        if (!strstr(at_errmsg(), c[i].msg)) fail_msg("\"%s\" lacks \"%s\"", at_errmsg(), c[i].msg);
        assert_true(ms == -7);
        /* The timing mutex was released: it can be taken now. */
        assert_int_equal(pthread_mutex_trylock(&d->gpu.timing_mu), 0);
        pthread_mutex_unlock(&d->gpu.timing_mu);
    }
    /* An activation that fails: AT_ERR_LAUNCH before anything is queued. */
    reset("activate");
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 2, 1, 0, NULL, NULL), AT_ERR_LAUNCH);
    assert_string_equal(g_trace, "activate");
    assert_non_null(strstr(at_errmsg(), "FAKE fakeSetDevice failed: FAKE_ERROR_700"));
    free(p);
    close_dev(d);
}

static void test_launch_arguments(void **state)
{
    (void)state;
    at_bdev *d = open_dev();
    at_bprog *p = loaded_prog(d);
    /* More arguments than the stack array holds: each pointer reaches the launch. */
    int v[40];
    at_karg args[40];
    for (int i = 0; i < 40; i++) {
        v[i] = i;
        args[i] = (at_karg){sizeof v[i], &v[i]};
    }
    g_launch.ncopy = 40;
    assert_int_equal(at_gpu_launch(d, p, args, 40, G, L, 1, 1, 0, NULL, NULL), AT_OK);
    g_launch.ncopy = 0;
    for (int i = 0; i < 40; i++) assert_ptr_equal(g_launch.copy[i], &v[i]);
    /* Refused before the runtime is asked. */
    reset(NULL);
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 1, 1, (size_t)UINT_MAX + 1, NULL, NULL),
                     AT_ERR_INVALID_ARG);
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 4, 1, 0, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_int_equal(at_gpu_launch(d, p, NULL, 1, G, L, 1, 1, 0, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_int_equal(at_gpu_launch(NULL, p, NULL, 0, G, L, 1, 1, 0, NULL, NULL),
                     AT_ERR_INVALID_ARG);
    /* Thread-block clusters: refused by a runtime without them, else through its
     * launch_cluster with the grid, the cluster size and the shared bytes; a cluster that does
     * not divide the grid's dimension 0 is refused before the runtime is asked. */
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 2, 2, 0, NULL, NULL), AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "no thread-block clusters"));
    g_api.launch_cluster = f_launch_cluster;
    g_api.launch_cluster_call = "fakeLaunchKernelEx";
    reset(NULL);
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 2, 2, 4096, NULL, NULL), AT_OK);
    assert_string_equal(g_trace, "activate launch_cluster");
    assert_int_equal(g_cluster, 2);
    assert_int_equal(g_launch.grid[0], 4);
    assert_int_equal(g_launch.grid[1], 3);
    assert_int_equal(g_launch.shared, 4096);
    reset(NULL);
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 2, 3, 0, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "do not divide"));
    assert_null(strstr(g_trace, "launch"));
    reset("launch_cluster");
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 2, 2, 0, NULL, NULL), AT_ERR_LAUNCH);
    assert_non_null(
        strstr(at_errmsg(), "fakeLaunchKernelEx(k, grid 4x3x1, block 32x2x1, cluster 2x1x1"));
    g_api.launch_cluster = NULL;
    g_api.launch_cluster_call = NULL;
    reset(NULL);
    p->fn = NULL;
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 1, 1, 0, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "not loaded"));
    assert_null(strstr(g_trace, "launch"));
    free(p);
    close_dev(d);
}

/* ---- devices and buffers ------------------------------------------------------------------ */

static void test_buffers(void **state)
{
    (void)state;
    at_bdev *d = open_dev();
    at_bbuf b;
    reset(NULL);
    assert_int_equal(at_gpu_buffer_alloc(d, 64, &b), AT_OK);
    assert_int_equal(b.bytes, 64);
    const char in[8] = "abcdefg";
    char out[8] = "";
    assert_int_equal(at_gpu_buffer_write(d, b, 10, in, 8), AT_OK);
    assert_int_equal(at_gpu_buffer_read(d, b, 10, out, 8), AT_OK);
    assert_memory_equal(in, out, 8);
    assert_string_equal(g_trace, "activate alloc activate copy_in activate copy_out");
    /* Out of range or empty: the runtime is not asked. */
    reset(NULL);
    assert_int_equal(at_gpu_buffer_write(d, b, 60, in, 8), AT_ERR_INVALID_ARG);
    assert_int_equal(at_gpu_buffer_read(d, b, 0, out, 0), AT_OK);
    assert_null(strstr(g_trace, "copy"));
    assert_int_equal(at_gpu_buffer_fill(d, b, 0xab), AT_OK);
    assert_int_equal(((unsigned char *)b.handle)[63], 0xab);
    reset("copy_in");
    assert_int_equal(at_gpu_buffer_write(d, b, 0, in, 8), AT_ERR_LAUNCH);
    assert_non_null(strstr(at_errmsg(), "FAKE fakeMemcpyHtoD failed: FAKE_ERROR_700"));
    reset(NULL);
    at_gpu_buffer_free(d, b);
    assert_string_equal(g_trace, "activate free");
    at_bbuf none = {0};
    assert_int_equal(at_gpu_buffer_alloc(d, 0, &none), AT_ERR_INVALID_ARG);
    reset("alloc");
    assert_int_equal(at_gpu_buffer_alloc(d, 16, &none), AT_ERR_LAUNCH);
    assert_non_null(strstr(at_errmsg(), "FAKE fakeMalloc(16 bytes) failed"));
    assert_null(none.handle);
    assert_null(at_gpu_native_queue(NULL));
    assert_ptr_equal(at_gpu_native_queue(d), d->gpu.stream);
    close_dev(d);
}

static void test_check_finish_and_start(void **state)
{
    (void)state;
    at_bdev *d = open_dev();
    reset(NULL);
    assert_int_equal(at_gpu_finish(d), AT_OK);
    assert_int_equal(at_gpu_check(d), AT_OK);
    assert_string_equal(g_trace, "activate sync activate device_sync");
    reset("device_sync"); /* a sticky fault */
    assert_int_equal(at_gpu_check(d), AT_ERR_DEVICE_LOST);
    assert_non_null(strstr(at_errmsg(), "fakeDeviceSynchronize failed: FAKE_ERROR_700"));
    reset("sync");
    assert_int_equal(at_gpu_finish(d), AT_ERR_LAUNCH);
    close_dev(d);

    /* A start that fails at an event keeps what it made, for the close to destroy. */
    at_bdev *e = NULL;
    assert_int_equal(at_gpu_dev_new(sizeof *e, &g_api, &g_rtc, "fk1", false, &e), AT_OK);
    g_dev = e;
    reset("event_create");
    assert_int_equal(at_gpu_dev_start(e), AT_ERR_NO_DEVICE);
    assert_non_null(strstr(at_errmsg(), "FAKE fakeEventCreate failed: FAKE_ERROR_700"));
    assert_null(e->gpu.ev_start);
    assert_non_null(e->gpu.stream);
    reset(NULL);
    at_gpu_dev_stop(e);
    assert_string_equal(g_trace, "sync stream_destroy");
    at_gpu_dev_free(e);
    at_gpu_dev_free(NULL);
    g_dev = NULL;
}

/* The caller's stream (open_native): used, never made, synchronised at stop or destroyed. */
static void test_borrowed_stream(void **state)
{
    (void)state;
    at_bdev *d = NULL;
    assert_int_equal(at_gpu_dev_new(sizeof *d, &g_api, &g_rtc, "fk1", false, &d), AT_OK);
    g_dev = d;
    void *theirs = (void *)(uintptr_t)0x5712;
    d->gpu.stream = theirs;
    d->gpu.borrowed_stream = true;
    reset(NULL);
    assert_int_equal(at_gpu_dev_start(d), AT_OK);
    assert_string_equal(g_trace, "activate event_create event_create");
    assert_ptr_equal(at_gpu_native_queue(d), theirs);
    reset(NULL);
    at_gpu_dev_stop(d);
    assert_string_equal(g_trace, "event_destroy event_destroy");
    at_gpu_dev_free(d);
    g_dev = NULL;
}

/* A compile-only target runs nothing and never touches the runtime. */
static void test_compile_only(void **state)
{
    (void)state;
    at_bdev *d = NULL;
    assert_int_equal(at_gpu_dev_new(sizeof *d, &g_api, &g_rtc, "fk9", true, &d), AT_OK);
    g_dev = d;
    at_bprog *p = loaded_prog(d);
    at_bbuf b;
    reset(NULL);
    assert_int_equal(at_gpu_buffer_alloc(d, 64, &b), AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "buffer_alloc: the FAKE target fk9 is compile-only"));
    assert_int_equal(at_gpu_launch(d, p, NULL, 0, G, L, 1, 1, 0, NULL, NULL), AT_ERR_UNSUPPORTED);
    assert_int_equal(at_gpu_finish(d), AT_ERR_UNSUPPORTED);
    assert_int_equal(at_gpu_check(d), AT_ERR_UNSUPPORTED);
    at_bprog *q = NULL;
    assert_int_equal(at_gpu_load_binary(d, "CODE", 4, "k", &q, NULL), AT_ERR_UNSUPPORTED);
    assert_null(q);
    assert_null(at_gpu_native_queue(d));
    assert_string_equal(g_trace, "");
    assert_int_equal(d->activations, 0);
    assert_false(d->gpu.mu_ok);
    free(p);
    at_gpu_dev_free(d);
    g_dev = NULL;
}

/* ---- compiling ---------------------------------------------------------------------------- */

static void test_options(void **state)
{
    (void)state;
    const char *const fixed[] = {"-O3", NULL};
    char user[] = " -DBM=64\t-DFLAG -O2 -D  -DV=2.0f\n";
    char *defs = NULL;
    int argc = 0;
    const char **argv = at_gpu_options("--arch=x", fixed, user, &argc, &defs);
    assert_non_null(argv);
    assert_int_equal(argc, 4);
    assert_string_equal(argv[0], "--arch=x");
    assert_string_equal(argv[1], "-O3");
    assert_string_equal(argv[2], "-O2");
    assert_string_equal(argv[3], "-D"); /* no name: passed on as it is */
    assert_string_equal(defs, "#define BM 64\n#define FLAG 1\n#define V 2.0f\n");
    free(argv);
    free(defs);

    /* Without defines, every token is an option. */
    char user2[] = "-DBM=64 -DX";
    argv = at_gpu_options("-arch=y", NULL, user2, &argc, NULL);
    assert_int_equal(argc, 3);
    assert_string_equal(argv[2], "-DX");
    free(argv);

    /* With defines asked for and no -D option, the defines are "" (not NULL). */
    char user3[] = "-O1";
    argv = at_gpu_options("a", NULL, user3, &argc, &defs);
    assert_int_equal(argc, 2);
    assert_non_null(defs);
    assert_string_equal(defs, "");
    free(argv);
    free(defs);

    /* Many short -D options: each "-DX" (4 bytes with its space) becomes 12 bytes of #define. */
    char many[4 * 300 + 1] = "";
    for (int i = 0; i < 300; i++) strcat(many, "-DX ");
    argv = at_gpu_options("a", NULL, many, &argc, &defs);
    assert_int_equal(argc, 1);
    assert_int_equal(strlen(defs), 300 * strlen("#define X 1\n"));
    free(argv);
    free(defs);
}

static at_bprog *compile(at_bdev *d, const char *src, const char *opts, const char *name,
                         at_status want, char **log)
{
    at_bprog *p = (at_bprog *)&p; /* must be reset */
    at_status s = at_gpu_compile(d, src, opts, name, &p, log);
    if (s != want) fail_msg("compile: %d, want %d: %s", s, want, at_errmsg());
    if (s != AT_OK) assert_null(p);
    return p;
}

static void test_compile(void **state)
{
    (void)state;
    at_bdev *d = open_dev();
    g_loaded_calls = g_verify_calls = 0;
    g_cc.log = "warning: fine\n";
    reset(NULL);
    at_bprog *p = compile(d, "SRC", "-DA=1 -w", "k", AT_OK, NULL);
    assert_string_equal(g_trace, "create before compile after code_size code activate "
                                 "module_load module_function destroy");
    assert_string_equal(g_cc.src, "SRC");
    assert_string_equal(g_cc.file, "k.fk");
    assert_string_equal(g_cc.argv, "[--arch=fk1] [-O3] [--std=c++17] [-DA=1] [-w]");
    assert_false(g_cc.serial_held);
    assert_int_equal(p->code_len, 8);
    assert_string_equal(p->log, "warning: fine\n");
    assert_non_null(p->fn);
    assert_int_equal(g_verify_calls, 1);
    assert_int_equal(g_loaded_calls, 1);
    void *bin = NULL;
    size_t len = 0;
    assert_int_equal(at_gpu_program_binary(p, &bin, &len), AT_OK);
    assert_int_equal(len, 8);
    assert_memory_equal(bin, "CODE1234", 8);
    reset(NULL);
    at_gpu_program_free(p);
    assert_string_equal(g_trace, "activate module_unload");

    /* The same code loaded as a binary: verified, loaded, no log. */
    reset(NULL);
    at_bprog *q = NULL;
    assert_int_equal(at_gpu_load_binary(d, bin, len, "k", &q, NULL), AT_OK);
    assert_string_equal(g_trace, "activate activate module_load module_function");
    assert_null(q->log);
    at_gpu_program_free(q);
    assert_int_equal(at_gpu_load_binary(d, "JUNK", 4, "k", &q, NULL), AT_ERR_COMPILE);
    assert_non_null(strstr(at_errmsg(), "verify: not CODE"));
    assert_null(q);
    assert_int_equal(at_gpu_load_binary(d, bin, 0, "k", &q, NULL), AT_ERR_COMPILE);
    free(bin);

    /* A failed compile: the log goes to the caller, its head into the message. */
    g_cc.log = "k.fk(3): error: undefined_thing\n";
    char *log = NULL;
    reset("compile");
    compile(d, "SRC", NULL, "k", AT_ERR_COMPILE, &log);
    assert_string_equal(g_trace, "create before compile destroy");
    assert_string_equal(log, "k.fk(3): error: undefined_thing\n");
    assert_non_null(strstr(at_errmsg(), "FAKERTC compile of k for fk1 failed (FAKE_ERROR_700):\n"
                                        "k.fk(3): error: undefined_thing"));
    free(log);
    g_cc.log = NULL;

    /* The hooks and the other calls stop the compile with their own message. */
    reset(NULL);
    compile(d, "SRC", NULL, "other", AT_ERR_COMPILE, NULL);
    assert_string_equal(g_trace, "create before destroy");
    reset("after");
    compile(d, "SRC", NULL, "k", AT_ERR_COMPILE, NULL);
    assert_non_null(strstr(at_errmsg(), "after: refused"));
    reset("create");
    compile(d, "SRC", NULL, "k", AT_ERR_COMPILE, NULL);
    assert_string_equal(g_trace, "create"); /* nothing to destroy */
    assert_non_null(strstr(at_errmsg(), "FAKERTC fakertcCreateProgram failed: FAKE_ERROR_700"));
    reset("code");
    compile(d, "SRC", NULL, "k", AT_ERR_COMPILE, NULL);
    assert_non_null(strstr(at_errmsg(), "fakertcGetCode failed"));
    reset("module_load");
    compile(d, "SRC", NULL, "k", AT_ERR_COMPILE, NULL);
    assert_non_null(strstr(at_errmsg(), "FAKE fakeModuleLoadData (8-byte fake binary, device fk1) "
                                        "failed: FAKE_ERROR_700"));
    compile(NULL, "SRC", NULL, "k", AT_ERR_INVALID_ARG, NULL);
    compile(d, NULL, NULL, "k", AT_ERR_INVALID_ARG, NULL);
    close_dev(d);
}

/* hipRTC's way: -D options become #define lines before the source, compiles take turns, and a
 * compile-only target keeps the code without loading it. */
static void test_compile_defines_in_source(void **state)
{
    (void)state;
    at_bdev *d = NULL;
    assert_int_equal(at_gpu_dev_new(sizeof *d, &g_api, &g_rtc, "fk9", true, &d), AT_OK);
    g_dev = d;
    g_rtc.defines_in_source = true;
    g_rtc.serial = &g_serial;
    g_rtc.before = g_rtc.after = NULL;
    g_verify_calls = 0;
    reset(NULL);
    at_bprog *p = compile(d, "SRC\n", "-DBM=64 -w -DT", "k", AT_OK, NULL);
    assert_string_equal(g_cc.src, "#define BM 64\n#define T 1\n#line 1\nSRC\n");
    assert_string_equal(g_cc.argv, "[--arch=fk9] [-O3] [--std=c++17] [-w]");
    assert_true(g_cc.serial_held);
    assert_int_equal(pthread_mutex_trylock(&g_serial), 0); /* released */
    pthread_mutex_unlock(&g_serial);
    assert_string_equal(g_trace, "create compile code_size code destroy");
    assert_int_equal(g_verify_calls, 1); /* the code is checked even when not loaded */
    assert_null(p->module);
    at_gpu_program_free(p);
    g_rtc.defines_in_source = false;
    g_rtc.serial = NULL;
    g_rtc.before = c_before;
    g_rtc.after = c_after;
    at_gpu_dev_free(d);
    g_dev = NULL;
}

/* ---- libraries, runtimes, limits ---------------------------------------------------------- */

static double (*g_cos)(double);
static double (*g_sin)(double);
static int g_start_result;
static int lib_start(at_gpu_lib *l, const char *used)
{
    if (g_start_result) snprintf(l->why, sizeof l->why, "start refused %s", used);
    return g_start_result;
}

static void test_library_loading(void **state)
{
    (void)state;
    static const char *const names[] = {"libm.so.6", NULL};
    static const at_dl_sym syms[] = {{"cos", &g_cos}, {"sin", &g_sin}};
    static const at_dl_sym missing[] = {{"cos", &g_cos}, {"at_no_such_symbol", &g_sin}};
    at_gpu_lib ok = AT_GPU_LIB("LIBM", "AT_TEST_GPU_LIBRARY", names, NULL, syms, lib_start);
    unsetenv("AT_TEST_GPU_LIBRARY");
    g_start_result = 0;
    assert_int_equal(at_gpu_lib_load(&ok), AT_OK);
    assert_true(g_cos(0.0) == 1.0 && g_sin(0.0) == 0.0);
    g_start_result = -1; /* loaded once: not started again */
    assert_int_equal(at_gpu_lib_load(&ok), AT_OK);

    at_gpu_lib lacks = AT_GPU_LIB("LIBM", "AT_TEST_GPU_LIBRARY", names, NULL, missing, NULL);
    assert_int_equal(at_gpu_lib_load(&lacks), AT_ERR_NO_BACKEND);
    assert_non_null(strstr(at_errmsg(), "LIBM unavailable: libm.so.6 lacks at_no_such_symbol"));
    assert_null(g_cos); /* every slot cleared */

    /* optional symbols (cuTensorMapEncodeTiled before CUDA 12): absent, the slot is NULL and
     * the library loads all the same */
    static double (*tan_fn)(double) = NULL, (*none_fn)(double) = (double (*)(double))1;
    static const at_dl_sym opt[] = {{"at_no_such_symbol", &none_fn}, {"tan", &tan_fn}};
    at_gpu_lib optional =
        AT_GPU_LIB_OPT("LIBM", "AT_TEST_GPU_LIBRARY", names, NULL, syms, opt, NULL);
    assert_int_equal(at_gpu_lib_load(&optional), AT_OK);
    assert_null(none_fn);
    assert_non_null(tan_fn);
    assert_true(tan_fn(0.0) == 0.0 && g_cos(0.0) == 1.0);
    assert_string_equal(optional.why, "");

    at_gpu_lib refused = AT_GPU_LIB("LIBM", "AT_TEST_GPU_LIBRARY", names, NULL, syms, lib_start);
    assert_int_equal(at_gpu_lib_load(&refused), AT_ERR_NO_BACKEND);
    assert_string_equal(refused.why, "start refused libm.so.6");

    /* A path in the variable is the only one tried. The probe: a runtime, then its compiler;
     * why is the reason of the first that is not there. */
    setenv("AT_TEST_GPU_LIBRARY", "/nonexistent/libm.so", 1);
    at_gpu_api rt = {.lib = AT_GPU_LIB("RT", "AT_TEST_GPU_LIBRARY", names, NULL, syms, NULL)};
    char why[256] = "x";
    assert_int_equal(at_gpu_probe(&rt, &g_rtc, why, sizeof why), AT_ERR_NO_BACKEND);
    assert_non_null(strstr(why, "cannot load /nonexistent/libm.so"));
    assert_non_null(strstr(at_errmsg(), "RT unavailable: cannot load /nonexistent/libm.so"));
    assert_int_equal(at_gpu_probe(&rt, &g_rtc, why, sizeof why), AT_ERR_NO_BACKEND); /* once */
    unsetenv("AT_TEST_GPU_LIBRARY");
    at_gpu_api rt2 = {.lib = AT_GPU_LIB("RT", "AT_TEST_GPU_LIBRARY", names, NULL, syms, NULL)};
    assert_int_equal(at_gpu_probe(&rt2, &g_rtc, why, sizeof why), AT_OK); /* g_rtc is loaded */
    assert_non_null(strstr(why, "RT: /")); /* what it loaded, by full path */
    assert_non_null(strstr(why, "libm.so.6"));
}

/* A library not on the loader's path: found in a place, a folder pattern or a Python
 * environment's (the folder above a python3 on PATH); else the message says where it looked. */
static void test_library_search(void **state)
{
    (void)state;
    char real[PATH_MAX], dir[] = "/tmp/at-gpu-search-XXXXXX", path[PATH_MAX + 128];
    Dl_info info;
    void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(libm);
    assert_true(dladdr(dlsym(libm, "cos"), &info) && realpath(info.dli_fname, real));
    assert_non_null(mkdtemp(dir));
    /* <dir>/venv/bin/python3 and <dir>/venv/lib/python3.12/site-packages/nvidia/cu13/lib */
    const char *const mk[] = {"/venv",
                              "/venv/bin",
                              "/venv/lib",
                              "/venv/lib/python3.12",
                              "/venv/lib/python3.12/site-packages",
                              "/venv/lib/python3.12/site-packages/nvidia",
                              "/venv/lib/python3.12/site-packages/nvidia/cu13",
                              "/venv/lib/python3.12/site-packages/nvidia/cu13/lib",
                              "/cuda-13.1",
                              "/cuda-13.1/lib64"};
    for (size_t i = 0; i < sizeof mk / sizeof mk[0]; i++) {
        snprintf(path, sizeof path, "%s%s", dir, mk[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    snprintf(path, sizeof path, "%s/venv/bin/python3", dir);
    assert_int_equal(symlink("/bin/sh", path), 0);
    snprintf(path, sizeof path, "%s/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libatm.so.9",
             dir);
    assert_int_equal(symlink(real, path), 0);
    snprintf(path, sizeof path, "%s/cuda-13.1/lib64/libatm.so.9", dir);
    assert_int_equal(symlink(real, path), 0);

    static const char *const names[] = {"libatm.so.9", NULL}; /* no such soname: not by bare name */
    static const at_dl_sym syms[] = {{"cos", &g_cos}, {"sin", &g_sin}};
    char folders[PATH_MAX], old_path[4096];
    snprintf(folders, sizeof folders, "%s/cuda-1[0-9]*/lib64", dir);
    const char *const places[] = {"$AT_TEST_NO_SUCH_VAR/lib", folders,
                                  "@python/lib/python3*/*-packages/nvidia/cu13/lib", NULL};
    snprintf(old_path, sizeof old_path, "%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    snprintf(path, sizeof path, "/nonexistent/bin:%s/venv/bin:/usr/bin", dir);
    setenv("PATH", path, 1);
    unsetenv("AT_TEST_GPU_LIBRARY");

    /* the Python environment's wheel folder only */
    setenv("AUTOTUNE_LIBRARY_SEARCH", "python", 1);
    at_gpu_lib py = AT_GPU_LIB("ATM", "AT_TEST_GPU_LIBRARY", names, places, syms, NULL);
    assert_int_equal(at_gpu_lib_load(&py), AT_OK);
    assert_non_null(strstr(py.path, "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/"));
    assert_true(g_cos(0.0) == 1.0);

    /* every place: the folder pattern comes first */
    unsetenv("AUTOTUNE_LIBRARY_SEARCH");
    at_gpu_lib all = AT_GPU_LIB("ATM", "AT_TEST_GPU_LIBRARY", names, places, syms, NULL);
    assert_int_equal(at_gpu_lib_load(&all), AT_OK);
    assert_non_null(strstr(all.path, "/cuda-13.1/lib64/libatm.so.9"));

    /* nowhere: the loader, then each place, named in the message */
    snprintf(path, sizeof path, "%s/nothing/bin:/usr/bin", dir);
    setenv("PATH", path, 1);
    setenv("AUTOTUNE_LIBRARY_SEARCH", "loader,python", 1);
    at_gpu_lib none = AT_GPU_LIB("ATM", "AT_TEST_GPU_LIBRARY", names, places, syms, NULL);
    assert_int_equal(at_gpu_lib_load(&none), AT_ERR_NO_BACKEND);
    assert_non_null(strstr(at_errmsg(), "ATM unavailable: cannot load libatm.so.9"));
    assert_non_null(strstr(at_errmsg(), "looked in: the loader's path and cache (ldconfig); /usr/"
                                        "lib/python3*/*-packages/nvidia/cu13/lib"));

    setenv("PATH", old_path, 1);
    unsetenv("AUTOTUNE_LIBRARY_SEARCH");
    g_cos = NULL;
    g_sin = NULL;
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
    dlclose(libm);
}

static void test_runtime_start(void **state)
{
    (void)state;
    at_gpu_api api = g_api;
    reset(NULL);
    g_ndevs = 2;
    assert_int_equal(at_gpu_runtime_start(&api.lib, "libfake.so"), 0);
    assert_string_equal(g_trace, "init version device_count");
    assert_int_equal(api.version, 42);
    assert_int_equal(api.ndevs, 2);
    g_ndevs = 0;
    assert_int_equal(at_gpu_runtime_start(&api.lib, "libfake.so"), -1);
    assert_string_equal(api.lib.why, "the fake runtime reports no device");
    g_ndevs = 2;
    reset("init");
    assert_int_equal(at_gpu_runtime_start(&api.lib, "libfake.so"), -1);
    assert_string_equal(api.lib.why, "fakeInit failed: FAKE_ERROR_700 (libfake.so)");
    reset("device_count");
    assert_int_equal(at_gpu_runtime_start(&api.lib, "libfake.so"), -1);
    assert_string_equal(api.lib.why, "fakeGetDeviceCount failed: FAKE_ERROR_700");

    at_gpu_rtc cc = g_rtc;
    reset(NULL);
    assert_int_equal(at_gpu_rtc_start(&cc.lib, "libfakertc.so"), 0);
    assert_string_equal(cc.version, "fakertc 3.14");
    reset("rtc_version");
    assert_int_equal(at_gpu_rtc_start(&cc.lib, "libfakertc.so"), -1);
    assert_string_equal(cc.lib.why, "fakertcVersion failed: FAKE_ERROR_700 (libfakertc.so)");
    char buf[32];
    assert_string_equal(at_gpu_errname(NULL, "X", 3, buf), "X error 3");
    assert_string_equal(at_gpu_errname(f_error_name, "X", 3, buf), "X error 3");
    assert_string_equal(at_gpu_errname(f_error_name, "X", FAKE_ERR, buf), "FAKE_ERROR_700");
}

static int64_t attr_x10(int dev, int number) { return dev * 1000 + number * 10; }

static void test_limits(void **state)
{
    (void)state;
    const at_gpu_attrs a = {1, 2, 3, 4, 5, 6, 7, 8, 900, 10};
    at_device_info info;
    memset(&info, 0, sizeof info);
    info.is_cpu = true;
    at_gpu_device_limits(&info, &a, attr_x10, 1, 1 << 30);
    assert_int_equal(info.compute_units, 1010);
    assert_int_equal(info.max_work_group_size, 1020);
    assert_int_equal(info.max_work_item_sizes[0], 1030);
    assert_int_equal(info.max_work_item_sizes[2], 1050);
    assert_int_equal(info.local_mem_bytes, 1060);
    assert_int_equal(info.max_registers_per_block, 1070);
    assert_int_equal(info.l2_bytes, 1080);
    assert_int_equal(info.clock_mhz, 10); /* 10000 kHz */
    assert_int_equal(info.warp_size, 1100);
    assert_int_equal(info.global_mem_bytes, 1 << 30);
    assert_int_equal(info.max_alloc_bytes, 1 << 30);
    assert_false(info.is_cpu);

    at_gpu_target_info(&info, "fake", "Fakes Inc", "fk9");
    assert_string_equal(info.name, "fk9 (compile only)");
    assert_string_equal(info.key, "fake/fk9/compile-only/0");
    assert_string_equal(info.vendor, "Fakes Inc");
    assert_int_equal(info.max_work_group_size, 1024);
    assert_int_equal(info.max_work_item_sizes[1], 1024);
    assert_int_equal(info.compute_units, 0); /* unknown */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timed_launch),
        cmocka_unit_test(test_timed_launch_failures),
        cmocka_unit_test(test_launch_arguments),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_check_finish_and_start),
        cmocka_unit_test(test_borrowed_stream),
        cmocka_unit_test(test_compile_only),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_compile),
        cmocka_unit_test(test_compile_defines_in_source),
        cmocka_unit_test(test_library_loading),
        cmocka_unit_test(test_library_search),
        cmocka_unit_test(test_runtime_start),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
