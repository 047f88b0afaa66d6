/* opencl.c — the OpenCL backend: loads the ICD loader with dlopen, enumerates every device of
 * every platform, compiles from source or binary, moves buffers and times kernels by profiling.
 *
 * Environment: AUTOTUNE_OPENCL_LIBRARY names the OpenCL library to dlopen instead of
 * "libOpenCL.so.1" (then "libOpenCL.so"); when set, only that path is tried. It is read once, at
 * the first probe of the process. */
#define _GNU_SOURCE
#include "tuner/backend.h"

#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- symbol table ------------------------------------------------------------------------- */

/* Every OpenCL entry point the backend uses: one list, the struct and the loader come from it. */
#define AT_CL_SYMBOLS(X)                                                                           \
    X(clGetPlatformIDs)                                                                            \
    X(clGetPlatformInfo)                                                                           \
    X(clGetDeviceIDs)                                                                              \
    X(clGetDeviceInfo)                                                                             \
    X(clCreateContext)                                                                             \
    X(clRetainContext)                                                                             \
    X(clReleaseContext)                                                                            \
    X(clCreateCommandQueue)                                                                        \
    X(clRetainCommandQueue)                                                                        \
    X(clReleaseCommandQueue)                                                                       \
    X(clGetCommandQueueInfo)                                                                       \
    X(clCreateProgramWithSource)                                                                   \
    X(clCreateProgramWithBinary)                                                                   \
    X(clBuildProgram)                                                                              \
    X(clGetProgramBuildInfo)                                                                       \
    X(clGetProgramInfo)                                                                            \
    X(clReleaseProgram)                                                                            \
    X(clCreateKernel)                                                                              \
    X(clGetKernelWorkGroupInfo)                                                                    \
    X(clReleaseKernel)                                                                             \
    X(clSetKernelArg)                                                                              \
    X(clCreateBuffer)                                                                              \
    X(clCreateSubBuffer)                                                                           \
    X(clReleaseMemObject)                                                                          \
    X(clEnqueueWriteBuffer)                                                                        \
    X(clEnqueueReadBuffer)                                                                         \
    X(clEnqueueFillBuffer)                                                                         \
    X(clEnqueueNDRangeKernel)                                                                      \
    X(clWaitForEvents)                                                                             \
    X(clGetEventProfilingInfo)                                                                     \
    X(clReleaseEvent)                                                                              \
    X(clFinish)

/* __typeof__ is accepted by GCC and Clang even with -std=c11. */
#define AT_CL_FIELD(name) __typeof__(&name) name;
static struct {
    AT_CL_SYMBOLS(AT_CL_FIELD)
} cl;
#undef AT_CL_FIELD

/* ---- CL error names ----------------------------------------------------------------------- */

#define AT_CL_ERRORS(X)                                                                            \
    X(CL_SUCCESS)                                                                                  \
    X(CL_DEVICE_NOT_FOUND)                                                                         \
    X(CL_DEVICE_NOT_AVAILABLE)                                                                     \
    X(CL_COMPILER_NOT_AVAILABLE)                                                                   \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE)                                                            \
    X(CL_OUT_OF_RESOURCES)                                                                         \
    X(CL_OUT_OF_HOST_MEMORY)                                                                       \
    X(CL_PROFILING_INFO_NOT_AVAILABLE)                                                             \
    X(CL_MEM_COPY_OVERLAP)                                                                         \
    X(CL_IMAGE_FORMAT_MISMATCH)                                                                    \
    X(CL_IMAGE_FORMAT_NOT_SUPPORTED)                                                               \
    X(CL_BUILD_PROGRAM_FAILURE)                                                                    \
    X(CL_MAP_FAILURE)                                                                              \
    X(CL_MISALIGNED_SUB_BUFFER_OFFSET)                                                             \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                                                \
    X(CL_COMPILE_PROGRAM_FAILURE)                                                                  \
    X(CL_LINKER_NOT_AVAILABLE)                                                                     \
    X(CL_LINK_PROGRAM_FAILURE)                                                                     \
    X(CL_DEVICE_PARTITION_FAILED)                                                                  \
    X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)                                                            \
    X(CL_INVALID_VALUE)                                                                            \
    X(CL_INVALID_DEVICE_TYPE)                                                                      \
    X(CL_INVALID_PLATFORM)                                                                         \
    X(CL_INVALID_DEVICE)                                                                           \
    X(CL_INVALID_CONTEXT)                                                                          \
    X(CL_INVALID_QUEUE_PROPERTIES)                                                                 \
    X(CL_INVALID_COMMAND_QUEUE)                                                                    \
    X(CL_INVALID_HOST_PTR)                                                                         \
    X(CL_INVALID_MEM_OBJECT)                                                                       \
    X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)                                                          \
    X(CL_INVALID_IMAGE_SIZE)                                                                       \
    X(CL_INVALID_SAMPLER)                                                                          \
    X(CL_INVALID_BINARY)                                                                           \
    X(CL_INVALID_BUILD_OPTIONS)                                                                    \
    X(CL_INVALID_PROGRAM)                                                                          \
    X(CL_INVALID_PROGRAM_EXECUTABLE)                                                               \
    X(CL_INVALID_KERNEL_NAME)                                                                      \
    X(CL_INVALID_KERNEL_DEFINITION)                                                                \
    X(CL_INVALID_KERNEL)                                                                           \
    X(CL_INVALID_ARG_INDEX)                                                                        \
    X(CL_INVALID_ARG_VALUE)                                                                        \
    X(CL_INVALID_ARG_SIZE)                                                                         \
    X(CL_INVALID_KERNEL_ARGS)                                                                      \
    X(CL_INVALID_WORK_DIMENSION)                                                                   \
    X(CL_INVALID_WORK_GROUP_SIZE)                                                                  \
    X(CL_INVALID_WORK_ITEM_SIZE)                                                                   \
    X(CL_INVALID_GLOBAL_OFFSET)                                                                    \
    X(CL_INVALID_EVENT_WAIT_LIST)                                                                  \
    X(CL_INVALID_EVENT)                                                                            \
    X(CL_INVALID_OPERATION)                                                                        \
    X(CL_INVALID_GL_OBJECT)                                                                        \
    X(CL_INVALID_BUFFER_SIZE)                                                                      \
    X(CL_INVALID_MIP_LEVEL)                                                                        \
    X(CL_INVALID_GLOBAL_WORK_SIZE)                                                                 \
    X(CL_INVALID_PROPERTY)                                                                         \
    X(CL_INVALID_IMAGE_DESCRIPTOR)                                                                 \
    X(CL_INVALID_COMPILER_OPTIONS)                                                                 \
    X(CL_INVALID_LINKER_OPTIONS)                                                                   \
    X(CL_INVALID_DEVICE_PARTITION_COUNT)

/* "CL_INVALID_WORK_GROUP_SIZE" for -54; "CL error -1234" for a code it does not know. */
static const char *ocl_errname(cl_int err, char buf[32])
{
    switch (err) {
#define AT_CL_CASE(code)                                                                           \
    case code:                                                                                     \
        return #code;
        AT_CL_ERRORS(AT_CL_CASE)
#undef AT_CL_CASE
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
        snprintf(buf, 32, "CL error %d", (int)err);
        return buf;
    }
}

/* A failed CL call: status s, message "<call>: <CL_NAME>". */
static at_status ocl_fail(at_status s, const char *call, cl_int err)
{
    char buf[32];
    return at_fail(s, "OpenCL %s failed: %s", call, ocl_errname(err, buf));
}

/* ---- loading and enumeration -------------------------------------------------------------- */

typedef struct ocl_dev_entry {
    cl_platform_id platform;
    cl_device_id device;
} ocl_dev_entry;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static at_status g_status = AT_ERR_NO_BACKEND;
static char g_why[1024];
static void *g_lib;
static ocl_dev_entry *g_devs;
static int g_ndevs;

static void load_once(void)
{
    const char *env = getenv("AUTOTUNE_OPENCL_LIBRARY");
    const char *names[2] = {"libOpenCL.so.1", "libOpenCL.so"};
    size_t nnames = 2;
    if (env && *env) {
        names[0] = env;
        nnames = 1;
    }
    const char *used = NULL;
    for (size_t i = 0; i < nnames && !g_lib; i++) {
        g_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (g_lib)
            used = names[i];
        else if (i == 0) { /* keep the first reason: it names the library we wanted most */
            const char *e = dlerror();
            snprintf(g_why, sizeof g_why, "cannot load %s: %s", names[i], e ? e : "unknown error");
        }
    }
    if (!g_lib) return;

#define AT_CL_LOAD(name)                                                                             \
    {                                                                                                \
        void *sym = dlsym(g_lib, #name);                                                             \
        if (!sym) {                                                                                  \
            const char *e = dlerror();                                                               \
            snprintf(g_why, sizeof g_why, "%s lacks %s: %s", used, #name, e ? e : "not found");      \
            dlclose(g_lib);                                                                          \
            g_lib = NULL;                                                                            \
            return;                                                                                  \
        }                                                                                            \
        memcpy(&cl.name, &sym, sizeof sym); /* object → function pointer without a cast warning */ \
    }
    AT_CL_SYMBOLS(AT_CL_LOAD)
#undef AT_CL_LOAD

    /* No platform (the ICD loader says CL_PLATFORM_NOT_FOUND_KHR) is a usable backend with no
     * devices, not a missing one. */
    g_status = AT_OK;
    g_why[0] = '\0';
    cl_uint np = 0;
    if (cl.clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) return;
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return;
    if (cl.clGetPlatformIDs(np, plats, NULL) != CL_SUCCESS) {
        free(plats);
        return;
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || !nd)
            continue;
        cl_device_id *ids = calloc(nd, sizeof *ids);
        ocl_dev_entry *grown = realloc(g_devs, (size_t)(g_ndevs + (int)nd) * sizeof *grown);
        if (!ids || !grown) {
            free(ids);
            if (grown) g_devs = grown;
            break;
        }
        g_devs = grown;
        if (cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, &nd) == CL_SUCCESS) {
            for (cl_uint i = 0; i < nd; i++)
                g_devs[g_ndevs++] = (ocl_dev_entry){.platform = plats[p], .device = ids[i]};
        }
        free(ids);
    }
    free(plats);
}

static at_status ensure_loaded(void)
{
    pthread_once(&g_once, load_once);
    if (g_status != AT_OK) return at_fail(g_status, "OpenCL unavailable: %s", g_why);
    return AT_OK;
}

static at_status ocl_probe(char *why, size_t whylen)
{
    at_status s = ensure_loaded();
    if (why && whylen) snprintf(why, whylen, "%s", s == AT_OK ? "" : g_why);
    return s;
}

static int ocl_device_count(void) { return ensure_loaded() == AT_OK ? g_ndevs : 0; }

static at_status get_entry(int idx, ocl_dev_entry *out)
{
    AT_TRY(ensure_loaded());
    if (idx < 0 || idx >= g_ndevs)
        return at_fail(AT_ERR_NO_DEVICE, "no OpenCL device %d (%d found)", idx, g_ndevs);
    *out = g_devs[idx];
    return AT_OK;
}

/* ---- device properties -------------------------------------------------------------------- */

/* snprintf that truncates on purpose (long driver strings), without format-truncation noise. */
static void fmt_into(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fmt_into(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

/* Copies src without surrounding white space into dst (always NUL-terminated). */
static void copy_trimmed(char *dst, size_t cap, const char *src)
{
    while (*src == ' ' || *src == '\t' || *src == '\n' || *src == '\r') src++;
    size_t n = strlen(src);
    while (n &&
           (src[n - 1] == ' ' || src[n - 1] == '\t' || src[n - 1] == '\n' || src[n - 1] == '\r'))
        n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void dev_str(cl_device_id d, cl_device_info what, char *dst, size_t cap)
{
    char buf[1024] = "";
    if (cl.clGetDeviceInfo(d, what, sizeof buf - 1, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
    buf[sizeof buf - 1] = '\0';
    copy_trimmed(dst, cap, buf);
}

static void plat_str(cl_platform_id p, cl_platform_info what, char *dst, size_t cap)
{
    char buf[1024] = "";
    if (cl.clGetPlatformInfo(p, what, sizeof buf - 1, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
    buf[sizeof buf - 1] = '\0';
    copy_trimmed(dst, cap, buf);
}

static int64_t dev_ulong(cl_device_id d, cl_device_info what)
{
    cl_ulong v = 0;
    return cl.clGetDeviceInfo(d, what, sizeof v, &v, NULL) == CL_SUCCESS ? (int64_t)v : 0;
}

static int64_t dev_uint(cl_device_id d, cl_device_info what)
{
    cl_uint v = 0;
    return cl.clGetDeviceInfo(d, what, sizeof v, &v, NULL) == CL_SUCCESS ? (int64_t)v : 0;
}

static bool dev_is_cpu(cl_device_id d)
{
    cl_device_type type = 0;
    return cl.clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS &&
           (type & CL_DEVICE_TYPE_CPU);
}

/* The per-core L1 data and L2 cache sizes of the host, for an OpenCL CPU device (which runs on
 * the host's cores): OpenCL reports only the last-level cache. Linux sysfs, cpu0; 0 when not
 * there. */
static void host_caches(int64_t *l1, int64_t *l2)
{
    *l1 = *l2 = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], text[64] = "";
        int level = 0;
        long long kib = 0;
        const char *fields[] = {"level", "type", "size"};
        for (int f = 0; f < 3; f++) {
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i,
                     fields[f]);
            FILE *fp = fopen(path, "r");
            if (!fp) return;
            char line[64] = "";
            if (!fgets(line, sizeof line, fp)) line[0] = '\0';
            fclose(fp);
            if (f == 0) level = atoi(line);
            if (f == 1) snprintf(text, sizeof text, "%s", line);
            if (f == 2) kib = atoll(line); /* "48K" */
        }
        if (level == 1 && strncmp(text, "Data", 4) == 0) *l1 = kib * 1024;
        if (level == 2 && strncmp(text, "Instruction", 11) != 0) *l2 = kib * 1024;
    }
}

static at_status ocl_device_info(int idx, at_device_info *out)
{
    ocl_dev_entry e = {0};
    AT_TRY(get_entry(idx, &e));
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "opencl");
    dev_str(e.device, CL_DEVICE_NAME, out->name, sizeof out->name);
    dev_str(e.device, CL_DEVICE_VENDOR, out->vendor, sizeof out->vendor);
    plat_str(e.platform, CL_PLATFORM_NAME, out->platform, sizeof out->platform);
    char drv[128], pver[256];
    dev_str(e.device, CL_DRIVER_VERSION, drv, sizeof drv);
    plat_str(e.platform, CL_PLATFORM_VERSION, pver, sizeof pver);
    fmt_into(out->driver, sizeof out->driver, "%s (%s)", drv, pver);
    out->arch[0] = '\0';

    out->compute_units = dev_uint(e.device, CL_DEVICE_MAX_COMPUTE_UNITS);
    size_t wg = 0;
    if (cl.clGetDeviceInfo(e.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) ==
        CL_SUCCESS)
        out->max_work_group_size = (int64_t)wg;
    cl_uint dims = (cl_uint)dev_uint(e.device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
    if (dims > 0) {
        size_t *sizes = calloc(dims, sizeof *sizes);
        if (sizes && cl.clGetDeviceInfo(e.device, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                                        dims * sizeof *sizes, sizes, NULL) == CL_SUCCESS) {
            for (cl_uint i = 0; i < dims && i < 3; i++)
                out->max_work_item_sizes[i] = (int64_t)sizes[i];
        }
        free(sizes);
    }
    out->local_mem_bytes = dev_ulong(e.device, CL_DEVICE_LOCAL_MEM_SIZE);
    out->max_shared_optin = out->local_mem_bytes;
    out->global_mem_bytes = dev_ulong(e.device, CL_DEVICE_GLOBAL_MEM_SIZE);
    out->l2_bytes = dev_ulong(e.device, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE);
    out->max_alloc_bytes = dev_ulong(e.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    out->clock_mhz = dev_uint(e.device, CL_DEVICE_MAX_CLOCK_FREQUENCY);
    out->is_cpu = dev_is_cpu(e.device);
    /* The real SIMD width is a per-kernel query (CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE);
     * 32 is right for NVIDIA and a safe tile multiple elsewhere. */
    out->warp_size = out->is_cpu ? 1 : 32;
    out->vector_width = dev_uint(e.device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT);
    if (out->is_cpu) host_caches(&out->l1_bytes, &out->core_l2_bytes);
    fmt_into(out->key, sizeof out->key, "opencl/%s/%s/%lld", out->platform, out->name,
             (long long)out->compute_units);
    return AT_OK;
}

/* ---- open device -------------------------------------------------------------------------- */

struct at_bdev {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    bool borrowed;     /* ctx and queue are the caller's (open_native): retained, not made */
    int cpu_threads;   /* a CPU device: the threads that run its kernels; else 0 */
    char version[768]; /* facts_of() */
};

struct at_bprog {
    at_bdev *dev;
    cl_program program;
    cl_kernel kernel;
    pthread_mutex_t args_mu; /* clSetKernelArg + enqueue of one kernel object are not thread-safe */
};

static void ocl_close(at_bdev *d)
{
    if (!d) return;
    if (d->queue) {
        if (!d->borrowed) cl.clFinish(d->queue); /* the caller's queue is the caller's to wait */
        cl.clReleaseCommandQueue(d->queue);
    }
    if (d->ctx) cl.clReleaseContext(d->ctx);
    free(d);
}

/* What an open device keeps of its facts: the threads of a CPU device (its compute units, the
 * worker threads of PoCL's pthread device), and d->version, the platform, driver and device
 * versions (part of the binaries' key). */
static void facts_of(at_bdev *d)
{
    if (dev_is_cpu(d->device))
        d->cpu_threads = (int)dev_uint(d->device, CL_DEVICE_MAX_COMPUTE_UNITS);
    char pver[256], drv[128], dver[256];
    plat_str(d->platform, CL_PLATFORM_VERSION, pver, sizeof pver);
    dev_str(d->device, CL_DRIVER_VERSION, drv, sizeof drv);
    dev_str(d->device, CL_DEVICE_VERSION, dver, sizeof dver);
    fmt_into(d->version, sizeof d->version, "%s / %s / %s", pver, drv, dver);
}

static at_status ocl_open(int idx, at_bdev **out)
{
    *out = NULL;
    ocl_dev_entry e = {0};
    AT_TRY(get_entry(idx, &e));
    at_bdev *d = calloc(1, sizeof *d);
    if (!d) return at_fail(AT_ERR_NO_MEMORY, "out of memory opening OpenCL device %d", idx);
    d->platform = e.platform;
    d->device = e.device;
    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)e.platform, 0};
    d->ctx = cl.clCreateContext(props, 1, &e.device, NULL, NULL, &err);
    if (!d->ctx || err != CL_SUCCESS) {
        ocl_close(d);
        return ocl_fail(AT_ERR_NO_DEVICE, "clCreateContext", err);
    }
    d->queue = cl.clCreateCommandQueue(d->ctx, e.device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (!d->queue || err != CL_SUCCESS) {
        ocl_close(d);
        return ocl_fail(AT_ERR_NO_DEVICE, "clCreateCommandQueue", err);
    }
    facts_of(d);
    *out = d;
    return AT_OK;
}

/* The caller's queue (and context: NULL takes the queue's) retained, on the device they were
 * made for; *idx: the index asked (-1: any), then the device's index. */
static at_status ocl_open_native(void *context, void *queue, int *idx, at_bdev **out)
{
    *out = NULL;
    AT_TRY(ensure_loaded());
    if (!queue)
        return at_fail(AT_ERR_INVALID_ARG,
                       "OpenCL: native_queue (a cl_command_queue) is needed with native handles");
    cl_command_queue q = queue;
    cl_context qc = NULL;
    cl_device_id dev = NULL;
    cl_int err = cl.clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qc, &qc, NULL);
    if (err == CL_SUCCESS)
        err = cl.clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
    if (err != CL_SUCCESS) return ocl_fail(AT_ERR_INVALID_ARG, "clGetCommandQueueInfo", err);
    if (context && (cl_context)context != qc)
        return at_fail(AT_ERR_INVALID_ARG,
                       "OpenCL: native_queue belongs to another cl_context than native_context");
    int found = -1;
    for (int i = 0; i < g_ndevs && found < 0; i++)
        if (g_devs[i].device == dev) found = i;
    AT_TRY(at_native_device("OpenCL", found, g_ndevs, idx));
    at_bdev *d = calloc(1, sizeof *d);
    if (!d) return at_fail(AT_ERR_NO_MEMORY, "out of memory opening OpenCL device %d", found);
    d->platform = g_devs[found].platform;
    d->device = dev;
    d->borrowed = true;
    /* Retained here, released at close: what the caller made stays the caller's. */
    if ((err = cl.clRetainContext(qc)) != CL_SUCCESS) {
        free(d);
        return ocl_fail(AT_ERR_INVALID_ARG, "clRetainContext", err);
    }
    d->ctx = qc;
    if ((err = cl.clRetainCommandQueue(q)) != CL_SUCCESS) {
        ocl_close(d);
        return ocl_fail(AT_ERR_INVALID_ARG, "clRetainCommandQueue", err);
    }
    d->queue = q;
    facts_of(d);
    *out = d;
    return AT_OK;
}

static const char *ocl_compiler_version(at_bdev *d) { return d ? d->version : ""; }

/* ---- programs ----------------------------------------------------------------------------- */

static char *build_log(at_bdev *d, cl_program prog)
{
    size_t n = 0;
    if (cl.clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS)
        return NULL;
    char *log = malloc(n + 1);
    if (!log) return NULL;
    if (cl.clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) != CL_SUCCESS)
        n = 0;
    log[n] = '\0';
    return log;
}

/* Builds prog for d's device and takes kernel_name; takes ownership of prog. what: "source" or
 * "binary", for the messages. */
static at_status build_and_wrap(at_bdev *d, cl_program prog, const char *options,
                                const char *kernel_name, const char *what, at_bprog **out,
                                char **log)
{
    cl_int err = cl.clBuildProgram(prog, 1, &d->device, options ? options : "", NULL, NULL);
    if (err != CL_SUCCESS) {
        char *l = build_log(d, prog);
        char head[2048], buf[32];
        at_log_head(l, head, sizeof head);
        at_status s = at_fail(AT_ERR_COMPILE, "OpenCL build of %s failed (%s)%s%s", what,
                              ocl_errname(err, buf), head[0] ? ":\n" : "", head);
        if (log)
            *log = l;
        else
            free(l);
        cl.clReleaseProgram(prog);
        return s;
    }
    cl_kernel k = cl.clCreateKernel(prog, kernel_name, &err);
    if (!k || err != CL_SUCCESS) {
        char buf[32];
        at_status s = at_fail(AT_ERR_COMPILE, "OpenCL clCreateKernel(\"%s\") failed: %s",
                              kernel_name, ocl_errname(err, buf));
        cl.clReleaseProgram(prog);
        return s;
    }
    at_bprog *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->args_mu, NULL) != 0) {
        free(p);
        cl.clReleaseKernel(k);
        cl.clReleaseProgram(prog);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory wrapping an OpenCL program");
    }
    p->dev = d;
    p->program = prog;
    p->kernel = k;
    *out = p;
    return AT_OK;
}

static at_status ocl_compile(at_bdev *d, const char *src, const char *options,
                             const char *kernel_name, at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !src || !kernel_name)
        return at_fail(AT_ERR_INVALID_ARG, "compile: NULL device, source or kernel name");
    cl_int err = CL_SUCCESS;
    cl_program prog = cl.clCreateProgramWithSource(d->ctx, 1, &src, NULL, &err);
    if (!prog || err != CL_SUCCESS)
        return ocl_fail(AT_ERR_COMPILE, "clCreateProgramWithSource", err);
    return build_and_wrap(d, prog, options, kernel_name, "source", out, log);
}

static at_status ocl_program_binary(at_bprog *p, void **bin, size_t *len)
{
    *bin = NULL;
    *len = 0;
    cl_uint ndev = 0;
    cl_int err = cl.clGetProgramInfo(p->program, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev, NULL);
    if (err != CL_SUCCESS) return ocl_fail(AT_ERR_COMPILE, "clGetProgramInfo(NUM_DEVICES)", err);
    if (ndev != 1) return at_fail(AT_ERR_INTERNAL, "OpenCL program has %u devices", ndev);
    size_t size = 0;
    err = cl.clGetProgramInfo(p->program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL);
    if (err != CL_SUCCESS) return ocl_fail(AT_ERR_COMPILE, "clGetProgramInfo(BINARY_SIZES)", err);
    if (size == 0) return at_fail(AT_ERR_UNSUPPORTED, "the OpenCL driver gives no program binary");
    unsigned char *buf = malloc(size);
    if (!buf) return at_fail(AT_ERR_NO_MEMORY, "out of memory for a %zu-byte binary", size);
    unsigned char *bins[1] = {buf};
    err = cl.clGetProgramInfo(p->program, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL);
    if (err != CL_SUCCESS) {
        free(buf);
        return ocl_fail(AT_ERR_COMPILE, "clGetProgramInfo(BINARIES)", err);
    }
    *bin = buf;
    *len = size;
    return AT_OK;
}

static at_status ocl_load_binary(at_bdev *d, const void *bin, size_t len, const char *kernel_name,
                                 at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !kernel_name) return at_fail(AT_ERR_INVALID_ARG, "load_binary: NULL argument");
    if (!bin || len == 0) return at_fail(AT_ERR_COMPILE, "load_binary: empty binary");
    cl_int err = CL_SUCCESS, bstatus = CL_SUCCESS;
    const unsigned char *b = bin;
    cl_program prog = cl.clCreateProgramWithBinary(d->ctx, 1, &d->device, &len, &b, &bstatus, &err);
    if (!prog || err != CL_SUCCESS || bstatus != CL_SUCCESS) {
        if (prog) cl.clReleaseProgram(prog);
        return ocl_fail(AT_ERR_COMPILE, "clCreateProgramWithBinary",
                        err != CL_SUCCESS ? err : bstatus);
    }
    return build_and_wrap(d, prog, NULL, kernel_name, "binary", out, log);
}

static void ocl_program_free(at_bprog *p)
{
    if (!p) return;
    if (p->kernel) cl.clReleaseKernel(p->kernel);
    if (p->program) cl.clReleaseProgram(p->program);
    pthread_mutex_destroy(&p->args_mu);
    free(p);
}

/* ---- buffers ------------------------------------------------------------------------------ */

static at_status ocl_buffer_alloc(at_bdev *d, size_t bytes, at_bbuf *out)
{
    out->handle = NULL;
    out->bytes = 0;
    if (bytes == 0) return at_fail(AT_ERR_INVALID_ARG, "buffer_alloc: zero bytes");
    cl_int err = CL_SUCCESS;
    cl_mem m = cl.clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (!m || err != CL_SUCCESS) {
        char buf[32];
        return at_fail(AT_ERR_LAUNCH, "OpenCL clCreateBuffer(%zu bytes) failed: %s", bytes,
                       ocl_errname(err, buf));
    }
    out->handle = m;
    out->bytes = bytes;
    return AT_OK;
}

static at_status ocl_buffer_write(at_bdev *d, at_bbuf b, size_t off, const void *src, size_t bytes)
{
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_write"));
    if (bytes == 0) return AT_OK;
    cl_int err = cl.clEnqueueWriteBuffer(d->queue, (cl_mem)b.handle, CL_TRUE, off, bytes, src, 0,
                                         NULL, NULL);
    return err == CL_SUCCESS ? AT_OK : ocl_fail(AT_ERR_LAUNCH, "clEnqueueWriteBuffer", err);
}

static at_status ocl_buffer_read(at_bdev *d, at_bbuf b, size_t off, void *dst, size_t bytes)
{
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_read"));
    if (bytes == 0) return AT_OK;
    cl_int err =
        cl.clEnqueueReadBuffer(d->queue, (cl_mem)b.handle, CL_TRUE, off, bytes, dst, 0, NULL, NULL);
    return err == CL_SUCCESS ? AT_OK : ocl_fail(AT_ERR_LAUNCH, "clEnqueueReadBuffer", err);
}

static void ocl_buffer_free(at_bdev *d, at_bbuf b)
{
    (void)d;
    if (b.handle) cl.clReleaseMemObject((cl_mem)b.handle);
}

static at_status ocl_buffer_view(at_bdev *d, at_bbuf b, size_t off, size_t bytes, at_bbuf *out)
{
    (void)d;
    out->handle = NULL;
    out->bytes = 0;
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_view"));
    if (bytes == 0) return at_fail(AT_ERR_INVALID_ARG, "buffer_view: zero bytes");
    cl_buffer_region region = {off, bytes};
    cl_int err = CL_SUCCESS;
    cl_mem m = cl.clCreateSubBuffer((cl_mem)b.handle, CL_MEM_READ_WRITE,
                                    CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (!m || err != CL_SUCCESS) return ocl_fail(AT_ERR_LAUNCH, "clCreateSubBuffer", err);
    out->handle = m;
    out->bytes = bytes;
    return AT_OK;
}

/* ---- launch ------------------------------------------------------------------------------- */

static at_status ocl_launch(at_bdev *d, at_bprog *p, const at_karg *args, size_t nargs,
                            const size_t global[3], const size_t local[3], size_t dims,
                            size_t cluster, size_t shared_bytes, void *stream, double *ms)
{
    if (!d || !p || !global || (nargs && !args))
        return at_fail(AT_ERR_INVALID_ARG, "launch: NULL argument");
    if (dims < 1 || dims > 3) return at_fail(AT_ERR_INVALID_ARG, "launch: %zu dimensions", dims);
    if (cluster > 1) /* device.cluster is 0 here: a space never offers it */
        return at_fail(AT_ERR_UNSUPPORTED,
                       "launch: clusters of %zu blocks (a CUDA sm_90 feature) on OpenCL", cluster);
    /* OpenCL sizes local memory statically or through __local arguments; no template uses
     * those, so a dynamic size is a template error, not something to ignore silently. */
    if (shared_bytes)
        return at_fail(AT_ERR_UNSUPPORTED,
                       "launch: %zu bytes of dynamic shared memory (a CUDA feature) on OpenCL",
                       shared_bytes);
    cl_command_queue q = stream ? (cl_command_queue)stream : d->queue;
    /* A CPU device shares its cores with whatever else runs: on a loaded machine its event time
     * holds the time other processes took the cores from it, and the tuner would time the load.
     * The scheduler counts that wait per thread; at_unloaded_ms takes it out. */
    at_sched_acct acct0, acct1;
    const bool unload = ms && d->cpu_threads > 0 && at_sched_account(&acct0);
    const double host0 = at_now();
    cl_event ev = NULL;
    cl_int err = CL_SUCCESS;
    char buf[32];

    /* The arguments live in the kernel object until the enqueue copies them: hold the lock over
     * both so two threads launching the same program do not mix their arguments. */
    pthread_mutex_lock(&p->args_mu);
    for (size_t i = 0; i < nargs; i++) {
        err = cl.clSetKernelArg(p->kernel, (cl_uint)i, args[i].size, args[i].ptr);
        if (err != CL_SUCCESS) {
            pthread_mutex_unlock(&p->args_mu);
            return at_fail(AT_ERR_LAUNCH, "OpenCL clSetKernelArg(arg %zu, %zu bytes) failed: %s", i,
                           args[i].size, ocl_errname(err, buf));
        }
    }
    err = cl.clEnqueueNDRangeKernel(q, p->kernel, (cl_uint)dims, NULL, global, local, 0, NULL,
                                    ms ? &ev : NULL);
    pthread_mutex_unlock(&p->args_mu);
    if (err != CL_SUCCESS) {
        char geo[160];
        int n = snprintf(geo, sizeof geo, "global %zu", global[0]);
        for (size_t i = 1; i < dims; i++)
            n += snprintf(geo + n, sizeof geo - (size_t)n, "x%zu", global[i]);
        if (local) {
            n += snprintf(geo + n, sizeof geo - (size_t)n, ", local %zu", local[0]);
            for (size_t i = 1; i < dims; i++)
                n += snprintf(geo + n, sizeof geo - (size_t)n, "x%zu", local[i]);
        }
        return at_fail(AT_ERR_LAUNCH, "OpenCL clEnqueueNDRangeKernel (%s) failed: %s", geo,
                       ocl_errname(err, buf));
    }
    if (!ms) return AT_OK;

    at_status s = AT_OK;
    cl_ulong t0 = 0, t1 = 0;
    err = cl.clWaitForEvents(1, &ev);
    const double host_ms = (at_now() - host0) * 1e3;
    const bool unloaded = unload && at_sched_account(&acct1);
    if (err != CL_SUCCESS)
        s = ocl_fail(AT_ERR_LAUNCH, "clWaitForEvents (kernel execution)", err);
    else if ((err = cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                               NULL)) != CL_SUCCESS ||
             (err = cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                               NULL)) != CL_SUCCESS)
        s = ocl_fail(AT_ERR_LAUNCH, "clGetEventProfilingInfo (queue without profiling?)", err);
    else {
        *ms = t1 > t0 ? (double)(t1 - t0) * 1e-6 : 0.0;
        if (unloaded) *ms = at_unloaded_ms(*ms, host_ms, &acct0, &acct1, d->cpu_threads);
    }
    cl.clReleaseEvent(ev);
    return s;
}

/* What the compiled kernel allows: its largest work-group (a device may lower it below the
 * device maximum for a kernel that needs many registers) and its local and private memory. */
static at_status ocl_resources(at_bprog *p, at_resources *out)
{
    *out = (at_resources){-1, -1, -1, -1, -1, 0};
    size_t wg = 0;
    cl_ulong lmem = 0, pmem = 0;
    cl_int err = cl.clGetKernelWorkGroupInfo(p->kernel, p->dev->device, CL_KERNEL_WORK_GROUP_SIZE,
                                             sizeof wg, &wg, NULL);
    if (err != CL_SUCCESS) return ocl_fail(AT_ERR_UNSUPPORTED, "clGetKernelWorkGroupInfo", err);
    out->max_threads = (int64_t)wg;
    if (cl.clGetKernelWorkGroupInfo(p->kernel, p->dev->device, CL_KERNEL_LOCAL_MEM_SIZE,
                                    sizeof lmem, &lmem, NULL) == CL_SUCCESS)
        out->shared_bytes = (int64_t)lmem;
    if (cl.clGetKernelWorkGroupInfo(p->kernel, p->dev->device, CL_KERNEL_PRIVATE_MEM_SIZE,
                                    sizeof pmem, &pmem, NULL) == CL_SUCCESS)
        out->local_bytes = (int64_t)pmem;
    return AT_OK;
}

static at_status ocl_buffer_fill(at_bdev *d, at_bbuf b, unsigned char value)
{
    AT_TRY(at_bbuf_check(b, 0, b.bytes, "buffer_fill"));
    cl_int err =
        cl.clEnqueueFillBuffer(d->queue, (cl_mem)b.handle, &value, 1, 0, b.bytes, 0, NULL, NULL);
    return err == CL_SUCCESS ? AT_OK : ocl_fail(AT_ERR_LAUNCH, "clEnqueueFillBuffer", err);
}

static at_status ocl_finish(at_bdev *d)
{
    cl_int err = cl.clFinish(d->queue);
    return err == CL_SUCCESS ? AT_OK : ocl_fail(AT_ERR_LAUNCH, "clFinish", err);
}

static void *ocl_native_context(at_bdev *d) { return d ? (void *)d->ctx : NULL; }
static void *ocl_native_queue(at_bdev *d) { return d ? (void *)d->queue : NULL; }

const at_backend_ops at_opencl_backend = {
    .name = "opencl",
    .probe = ocl_probe,
    .device_count = ocl_device_count,
    .device_info = ocl_device_info,
    .open = ocl_open,
    .open_native = ocl_open_native,
    .close = ocl_close,
    .compiler_version = ocl_compiler_version,
    .compile = ocl_compile,
    .program_binary = ocl_program_binary,
    .load_binary = ocl_load_binary,
    .program_free = ocl_program_free,
    .buffer_alloc = ocl_buffer_alloc,
    .buffer_write = ocl_buffer_write,
    .buffer_read = ocl_buffer_read,
    .buffer_free = ocl_buffer_free,
    .buffer_view = ocl_buffer_view,
    .view_free = ocl_buffer_free,
    .buffer_fill = ocl_buffer_fill,
    .resources = ocl_resources,
    .launch = ocl_launch,
    .finish = ocl_finish,
    .native_context = ocl_native_context,
    .native_queue = ocl_native_queue,
};
