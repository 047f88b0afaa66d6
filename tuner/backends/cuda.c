/* cuda.c — the CUDA backend: NVRTC compiles to CUBIN for an explicit sm_XX[a] target with no
 * device needed; the driver API (libcuda.so.1) loads modules, moves buffers and times kernels with
 * events. Both libraries are loaded with dlopen and no CUDA header is needed to build.
 *
 * Environment: AUTOTUNE_CUDA_LIBRARY names the driver library to dlopen instead of "libcuda.so.1";
 * AUTOTUNE_NVRTC_LIBRARY names NVRTC instead of "libnvrtc.so.13" (then "libnvrtc.so.12"). When
 * set, only that path is tried. Each is read once, at the first use of its library.
 *
 * probe() needs both the driver with a device and NVRTC; open_target() needs only NVRTC, so a
 * machine without a GPU compiles (and reads the ptxas resource report) for any accepted target. */
#define _GNU_SOURCE
#include "cuda_report.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the few CUDA and NVRTC declarations we need (values from cuda.h / nvrtc.h, CUDA 13) --- */

typedef int CUresult; /* an enum in cuda.h; CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

typedef enum CUdevice_attribute {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13, /* kHz */
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
} CUdevice_attribute;

typedef enum CUfunction_attribute {
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
} CUfunction_attribute;

#define AT_CU_STREAM_DEFAULT 0x0 /* a blocking stream: ordered with the synchronous copies */
#define AT_CU_EVENT_DEFAULT  0x0 /* timing enabled */

typedef int nvrtcResult; /* an enum in nvrtc.h; NVRTC_SUCCESS = 0 */
typedef struct _nvrtcProgram *nvrtcProgram;
#define AT_NVRTC_SUCCESS 0

/* ---- symbol tables ------------------------------------------------------------------------ */

/* X(field, exported symbol, return type, parameters). The exported names are the ones cuda.h
 * maps the plain names to (cuMemAlloc → cuMemAlloc_v2); cuEventElapsedTime keeps its original
 * export, which every driver has (CUDA 13 headers add a _v2 only drivers from 12.8 on have). */
#define AT_CU_SYMBOLS(X)                                                                           \
    X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult, const char **))                       \
    X(cuInit, "cuInit", CUresult, (unsigned int))                                                  \
    X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int *))                                 \
    X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int *))                                     \
    X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice *, int))                                     \
    X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char *, int, CUdevice))                       \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult,                                      \
      (int *, CUdevice_attribute, CUdevice))                                                       \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, (size_t *, CUdevice))                     \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext *, CUdevice))     \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice))             \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext))                                   \
    X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream *, unsigned int))                      \
    X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream))                                 \
    X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream))                            \
    X(cuEventCreate, "cuEventCreate", CUresult, (CUevent *, unsigned int))                         \
    X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent))                                    \
    X(cuEventRecord, "cuEventRecord", CUresult, (CUevent, CUstream))                               \
    X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent))                               \
    X(cuEventElapsedTime, "cuEventElapsedTime", CUresult, (float *, CUevent, CUevent))             \
    X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule *, const void *))                  \
    X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule))                                      \
    X(cuModuleGetFunction, "cuModuleGetFunction", CUresult,                                        \
      (CUfunction *, CUmodule, const char *))                                                      \
    X(cuFuncGetAttribute, "cuFuncGetAttribute", CUresult,                                          \
      (int *, CUfunction_attribute, CUfunction))                                                   \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult, (CUfunction, CUfunction_attribute, int)) \
    X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                                  \
      (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,           \
       unsigned int, unsigned int, CUstream, void **, void **))                                    \
    X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr *, size_t))                              \
    X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                                          \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", CUresult, (CUdeviceptr, const void *, size_t))              \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", CUresult, (void *, CUdeviceptr, size_t))                    \
    X(cuMemsetD8Async, "cuMemsetD8Async", CUresult,                                                \
      (CUdeviceptr, unsigned char, size_t, CUstream))                                              \
    X(cuCtxSynchronize, "cuCtxSynchronize", CUresult, (void))

#define AT_NVRTC_SYMBOLS(X)                                                                        \
    X(nvrtcVersion, "nvrtcVersion", nvrtcResult, (int *, int *))                                   \
    X(nvrtcGetErrorString, "nvrtcGetErrorString", const char *, (nvrtcResult))                     \
    X(nvrtcCreateProgram, "nvrtcCreateProgram", nvrtcResult,                                       \
      (nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *)) \
    X(nvrtcDestroyProgram, "nvrtcDestroyProgram", nvrtcResult, (nvrtcProgram *))                   \
    X(nvrtcCompileProgram, "nvrtcCompileProgram", nvrtcResult,                                     \
      (nvrtcProgram, int, const char *const *))                                                    \
    X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", nvrtcResult, (nvrtcProgram, size_t *))               \
    X(nvrtcGetCUBIN, "nvrtcGetCUBIN", nvrtcResult, (nvrtcProgram, char *))                         \
    X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", nvrtcResult, (nvrtcProgram, size_t *))     \
    X(nvrtcGetProgramLog, "nvrtcGetProgramLog", nvrtcResult, (nvrtcProgram, char *))               \
    X(nvrtcAddNameExpression, "nvrtcAddNameExpression", nvrtcResult, (nvrtcProgram, const char *)) \
    X(nvrtcGetLoweredName, "nvrtcGetLoweredName", nvrtcResult,                                     \
      (nvrtcProgram, const char *, const char **))

#define AT_DL_FIELD(field, sym, ret, params) ret(*field) params;
static struct {
    AT_CU_SYMBOLS(AT_DL_FIELD)
} cu;
static struct {
    AT_NVRTC_SYMBOLS(AT_DL_FIELD)
} nv;
#undef AT_DL_FIELD

/* ---- error names -------------------------------------------------------------------------- */

/* "CUDA_ERROR_ILLEGAL_ADDRESS" from the driver itself; "CUDA error 123" if it does not know. */
static const char *cu_errname(CUresult r, char buf[32])
{
    const char *s = NULL;
    if (cu.cuGetErrorName && cu.cuGetErrorName(r, &s) == 0 && s) return s;
    snprintf(buf, 32, "CUDA error %d", (int)r);
    return buf;
}

/* A failed driver call: status s, message "CUDA <call> failed: <CUDA_ERROR_NAME>". */
static at_status cu_fail(at_status s, const char *call, CUresult r)
{
    char buf[32];
    return at_fail(s, "CUDA %s failed: %s", call, cu_errname(r, buf));
}

static const char *nv_errname(nvrtcResult r, char buf[32])
{
    const char *s = nv.nvrtcGetErrorString ? nv.nvrtcGetErrorString(r) : NULL;
    if (s) return s;
    snprintf(buf, 32, "NVRTC error %d", (int)r);
    return buf;
}

static at_status nv_fail(at_status s, const char *call, nvrtcResult r)
{
    char buf[32];
    return at_fail(s, "NVRTC %s failed: %s", call, nv_errname(r, buf));
}

/* ---- loading ------------------------------------------------------------------------------ */

/* The driver: loaded, initialised and with at least one device, or g_cu_why says why not. */
static pthread_once_t g_cu_once = PTHREAD_ONCE_INIT;
static at_status g_cu_status = AT_ERR_NO_BACKEND;
static char g_cu_why[1024];
static int g_ndevs;
static int g_driver_version; /* 13000 for CUDA 13.0 */

static void cu_load_once(void)
{
    static const char *const names[] = {"libcuda.so.1"};
    const char *used = NULL;
    void *lib = at_dl_open("AUTOTUNE_CUDA_LIBRARY", names, 1, &used, g_cu_why, sizeof g_cu_why);
    if (!lib) return;
#define AT_CU_LOAD(field, sym, ret, params)                                                        \
    if (at_dl_symbol(lib, used, sym, &cu.field, g_cu_why, sizeof g_cu_why) != 0) {                 \
        memset(&cu, 0, sizeof cu);                                                                 \
        dlclose(lib);                                                                              \
        return;                                                                                    \
    }
    AT_CU_SYMBOLS(AT_CU_LOAD)
#undef AT_CU_LOAD

    char buf[32];
    CUresult r = cu.cuInit(0);
    if (r != 0) { /* no device, no kernel module, driver older than the library... */
        snprintf(g_cu_why, sizeof g_cu_why, "cuInit failed: %s (%s)", cu_errname(r, buf), used);
        return;
    }
    if (cu.cuDriverGetVersion(&g_driver_version) != 0) g_driver_version = 0;
    int n = 0;
    r = cu.cuDeviceGetCount(&n);
    if (r != 0) {
        snprintf(g_cu_why, sizeof g_cu_why, "cuDeviceGetCount failed: %s", cu_errname(r, buf));
        return;
    }
    if (n <= 0) {
        snprintf(g_cu_why, sizeof g_cu_why, "the CUDA driver reports no device");
        return;
    }
    g_ndevs = n;
    g_cu_status = AT_OK;
    g_cu_why[0] = '\0';
}

static at_status ensure_cuda(void)
{
    pthread_once(&g_cu_once, cu_load_once);
    if (g_cu_status != AT_OK) return at_fail(g_cu_status, "CUDA unavailable: %s", g_cu_why);
    return AT_OK;
}

/* NVRTC, on its own: compiling needs no driver. */
static pthread_once_t g_nv_once = PTHREAD_ONCE_INIT;
static at_status g_nv_status = AT_ERR_NO_BACKEND;
static char g_nv_why[1024];
static char g_nv_version[32]; /* "nvrtc 13.0" */

static void nv_load_once(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
    const char *used = NULL;
    void *lib = at_dl_open("AUTOTUNE_NVRTC_LIBRARY", names, 2, &used, g_nv_why, sizeof g_nv_why);
    if (!lib) return;
#define AT_NV_LOAD(field, sym, ret, params)                                                        \
    if (at_dl_symbol(lib, used, sym, &nv.field, g_nv_why, sizeof g_nv_why) != 0) {                 \
        memset(&nv, 0, sizeof nv);                                                                 \
        dlclose(lib);                                                                              \
        return;                                                                                    \
    }
    AT_NVRTC_SYMBOLS(AT_NV_LOAD)
#undef AT_NV_LOAD

    int major = 0, minor = 0;
    nvrtcResult r = nv.nvrtcVersion(&major, &minor);
    if (r != AT_NVRTC_SUCCESS) {
        char buf[32];
        snprintf(g_nv_why, sizeof g_nv_why, "nvrtcVersion failed: %s (%s)", nv_errname(r, buf),
                 used);
        return;
    }
    snprintf(g_nv_version, sizeof g_nv_version, "nvrtc %d.%d", major, minor);
    g_nv_status = AT_OK;
    g_nv_why[0] = '\0';
}

static at_status ensure_nvrtc(void)
{
    pthread_once(&g_nv_once, nv_load_once);
    if (g_nv_status != AT_OK) return at_fail(g_nv_status, "NVRTC unavailable: %s", g_nv_why);
    return AT_OK;
}

/* Usable means a device to run on and a compiler for it. */
static at_status cuda_probe(char *why, size_t whylen)
{
    at_status s = ensure_cuda();
    const char *reason = g_cu_why;
    if (s == AT_OK) {
        s = ensure_nvrtc();
        reason = g_nv_why;
    }
    if (why && whylen) snprintf(why, whylen, "%s", s == AT_OK ? "" : reason);
    return s;
}

static int cuda_device_count(void) { return cuda_probe(NULL, 0) == AT_OK ? g_ndevs : 0; }

static at_status get_device(int idx, CUdevice *out)
{
    AT_TRY(cuda_probe(NULL, 0));
    if (idx < 0 || idx >= g_ndevs)
        return at_fail(AT_ERR_NO_DEVICE, "no CUDA device %d (%d found)", idx, g_ndevs);
    CUresult r = cu.cuDeviceGet(out, idx);
    return r == 0 ? AT_OK : cu_fail(AT_ERR_NO_DEVICE, "cuDeviceGet", r);
}

/* ---- targets ------------------------------------------------------------------------------ */

/* The compile targets open_target() accepts. */
static const char *const g_targets[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
#define AT_TARGETS_TEXT "sm_80, sm_86, sm_89, sm_90, sm_90a"

static bool known_target(const char *arch)
{
    for (size_t i = 0; i < sizeof g_targets / sizeof g_targets[0]; i++)
        if (strcmp(arch, g_targets[i]) == 0) return true;
    return false;
}

/* "sm_86" for compute capability 8.6; "sm_90a" for 9.0, so Hopper kernels may use wgmma/TMA. */
static void arch_for(int major, int minor, char *dst, size_t cap)
{
    snprintf(dst, cap, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
}

/* ---- device properties -------------------------------------------------------------------- */

static int64_t dev_attr(CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    return cu.cuDeviceGetAttribute(&v, a, dev) == 0 ? (int64_t)v : 0;
}

static at_status cuda_device_info(int idx, at_device_info *out)
{
    CUdevice dev = 0;
    AT_TRY(get_device(idx, &dev));
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "cuda");
    CUresult r = cu.cuDeviceGetName(out->name, (int)sizeof out->name - 1, dev);
    if (r != 0) return cu_fail(AT_ERR_NO_DEVICE, "cuDeviceGetName", r);
    out->name[sizeof out->name - 1] = '\0';
    snprintf(out->vendor, sizeof out->vendor, "NVIDIA");
    snprintf(out->driver, sizeof out->driver, "CUDA driver %d.%d", g_driver_version / 1000,
             (g_driver_version % 1000) / 10);
    arch_for((int)dev_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
             (int)dev_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), out->arch,
             sizeof out->arch);
    out->compute_units = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    out->max_work_group_size = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    out->max_work_item_sizes[0] = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
    out->max_work_item_sizes[1] = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
    out->max_work_item_sizes[2] = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
    /* Templates declare static __shared__ arrays, which CUDA caps at the default per-block
     * limit (48 KB); opting in to more (227 KB on an H200) needs dynamic shared memory. */
    out->local_mem_bytes = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    out->max_shared_optin = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    if (out->max_shared_optin < out->local_mem_bytes) out->max_shared_optin = out->local_mem_bytes;
    out->max_registers_per_block = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    out->l2_bytes = dev_attr(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    size_t total = 0;
    if (cu.cuDeviceTotalMem(&total, dev) == 0) out->global_mem_bytes = (int64_t)total;
    out->max_alloc_bytes = out->global_mem_bytes;
    out->clock_mhz = dev_attr(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000;
    out->warp_size = dev_attr(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    out->is_cpu = false;
    snprintf(out->key, sizeof out->key, "cuda/%s/%s/%lld", out->arch, out->name,
             (long long)out->compute_units);
    return AT_OK;
}

/* ---- open device or target ---------------------------------------------------------------- */

struct at_bdev {
    bool compile_only; /* from open_target(): no context, stream or events */
    char arch[16];     /* "sm_90a": the -arch of every compile */
    CUdevice dev;
    CUcontext ctx; /* the primary context, retained */
    CUstream stream;
    CUevent ev_start, ev_end;
    pthread_mutex_t timing_mu; /* one pair of events: timed launches take turns */
    bool mu_ok;
    int64_t smem_default, smem_optin; /* shared bytes per block: without and with opting in */
};

struct at_bprog {
    at_bdev *dev;
    void *cubin;
    size_t cubin_len;
    char *log; /* NVRTC's log with the ptxas report; NULL for a loaded binary */
    CUmodule module;
    CUfunction fn;
    char name[];
};

static void cuda_close(at_bdev *d)
{
    if (!d) return;
    if (!d->compile_only && d->ctx) {
        cu.cuCtxSetCurrent(d->ctx);
        if (d->stream) cu.cuStreamSynchronize(d->stream);
        if (d->ev_start) cu.cuEventDestroy(d->ev_start);
        if (d->ev_end) cu.cuEventDestroy(d->ev_end);
        if (d->stream) cu.cuStreamDestroy(d->stream);
        cu.cuDevicePrimaryCtxRelease(d->dev);
    }
    if (d->mu_ok) pthread_mutex_destroy(&d->timing_mu);
    free(d);
}

static at_status cuda_open(int idx, at_bdev **out)
{
    *out = NULL;
    CUdevice dev = 0;
    AT_TRY(get_device(idx, &dev));
    at_bdev *d = calloc(1, sizeof *d);
    if (!d) return at_fail(AT_ERR_NO_MEMORY, "out of memory opening CUDA device %d", idx);
    d->dev = dev;
    if (pthread_mutex_init(&d->timing_mu, NULL) != 0) {
        free(d);
        return at_fail(AT_ERR_NO_MEMORY, "cannot create a mutex for CUDA device %d", idx);
    }
    d->mu_ok = true;
    arch_for((int)dev_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
             (int)dev_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), d->arch,
             sizeof d->arch);
    d->smem_default = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    d->smem_optin = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);

    const char *call = NULL;
    CUresult r = 0;
    if ((r = cu.cuDevicePrimaryCtxRetain(&d->ctx, dev)) != 0) {
        d->ctx = NULL;
        call = "cuDevicePrimaryCtxRetain";
    } else if ((r = cu.cuCtxSetCurrent(d->ctx)) != 0)
        call = "cuCtxSetCurrent";
    else if ((r = cu.cuStreamCreate(&d->stream, AT_CU_STREAM_DEFAULT)) != 0) {
        d->stream = NULL;
        call = "cuStreamCreate";
    } else if ((r = cu.cuEventCreate(&d->ev_start, AT_CU_EVENT_DEFAULT)) != 0) {
        d->ev_start = NULL;
        call = "cuEventCreate";
    } else if ((r = cu.cuEventCreate(&d->ev_end, AT_CU_EVENT_DEFAULT)) != 0) {
        d->ev_end = NULL;
        call = "cuEventCreate";
    }
    if (call) {
        at_status s = cu_fail(AT_ERR_NO_DEVICE, call, r);
        cuda_close(d);
        return s;
    }
    *out = d;
    return AT_OK;
}

/* The limits every device of a target shares (CUDA programming guide, compute capabilities
 * 8.x and 9.0), for compiling and checking candidates without a device. */
static void target_limits(const char *arch, at_device_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "cuda");
    snprintf(out->name, sizeof out->name, "%s (compile only)", arch);
    snprintf(out->vendor, sizeof out->vendor, "NVIDIA");
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    snprintf(out->key, sizeof out->key, "cuda/%s/compile-only/0", arch);
    out->max_work_group_size = 1024;
    out->max_work_item_sizes[0] = out->max_work_item_sizes[1] = 1024;
    out->max_work_item_sizes[2] = 64;
    out->local_mem_bytes = 48 * 1024;
    /* opt-in shared memory per block: 227 KB on 9.0, 163 KB on 8.0 (and 8.7), 99 KB on 8.6/8.9 */
    out->max_shared_optin = strncmp(arch, "sm_90", 5) == 0 ? 227 * 1024
                            : strcmp(arch, "sm_80") == 0   ? 163 * 1024
                                                           : 99 * 1024;
    out->max_registers_per_block = 64 * 1024;
    out->warp_size = 32;
}

static at_status cuda_open_target(const char *arch, at_device_info *info, at_bdev **out)
{
    *out = NULL;
    if (!arch || !known_target(arch))
        return at_fail(AT_ERR_INVALID_ARG,
                       "unknown CUDA target '%s' (accepted: " AT_TARGETS_TEXT ")",
                       arch ? arch : "(null)");
    AT_TRY(ensure_nvrtc());
    at_bdev *d = calloc(1, sizeof *d);
    if (!d) return at_fail(AT_ERR_NO_MEMORY, "out of memory opening CUDA target %s", arch);
    d->compile_only = true;
    snprintf(d->arch, sizeof d->arch, "%s", arch);
    if (info) target_limits(arch, info);
    *out = d;
    return AT_OK;
}

static const char *cuda_compiler_version(at_bdev *d)
{
    (void)d;
    return g_nv_status == AT_OK ? g_nv_version : "";
}

/* AT_OK if d runs kernels; a compile-only target answers AT_ERR_UNSUPPORTED. */
static at_status need_device(at_bdev *d, const char *what)
{
    if (!d) return at_fail(AT_ERR_INVALID_ARG, "%s: NULL device", what);
    if (d->compile_only)
        return at_fail(AT_ERR_UNSUPPORTED, "%s: the CUDA target %s is compile-only (open_target)",
                       what, d->arch);
    CUresult r = cu.cuCtxSetCurrent(d->ctx); /* the calling thread may be new */
    return r == 0 ? AT_OK : cu_fail(AT_ERR_LAUNCH, "cuCtxSetCurrent", r);
}

/* ---- programs ----------------------------------------------------------------------------- */

static at_bprog *prog_new(at_bdev *d, const char *kernel_name)
{
    size_t n = strlen(kernel_name) + 1;
    at_bprog *p = calloc(1, sizeof *p + n);
    if (!p) return NULL;
    p->dev = d;
    memcpy(p->name, kernel_name, n);
    return p;
}

static void cuda_program_free(at_bprog *p)
{
    if (!p) return;
    if (p->module && cu.cuCtxSetCurrent(p->dev->ctx) == 0) cu.cuModuleUnload(p->module);
    free(p->cubin);
    free(p->log);
    free(p);
}

/* Loads p's CUBIN on p's device and finds its kernel. */
static at_status load_module(at_bprog *p)
{
    at_bdev *d = p->dev;
    AT_TRY(need_device(d, "load"));
    CUresult r = cu.cuModuleLoadData(&p->module, p->cubin);
    if (r != 0) {
        p->module = NULL;
        char buf[32];
        return at_fail(AT_ERR_COMPILE,
                       "CUDA cuModuleLoadData (%zu-byte binary, device %s) failed: %s",
                       p->cubin_len, d->arch, cu_errname(r, buf));
    }
    r = cu.cuModuleGetFunction(&p->fn, p->module, p->name);
    if (r != 0) {
        char buf[32];
        return at_fail(AT_ERR_COMPILE, "CUDA cuModuleGetFunction(\"%s\") failed: %s", p->name,
                       cu_errname(r, buf));
    }
    /* Static __shared__ is capped at 48 KB by the compiler; only dynamic shared memory can use
     * the rest of the opt-in limit, and only after this attribute is raised, so raise it to all
     * that the kernel's static use leaves. Harmless for launches with no dynamic memory. */
    if (d->smem_optin > d->smem_default) {
        int static_smem = 0;
        r = cu.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, p->fn);
        if (r != 0) return cu_fail(AT_ERR_COMPILE, "cuFuncGetAttribute(SHARED_SIZE_BYTES)", r);
        int64_t dyn = d->smem_optin - static_smem;
        if (dyn > 0) {
            r = cu.cuFuncSetAttribute(p->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      (int)dyn);
            if (r != 0)
                return cu_fail(AT_ERR_COMPILE, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                               r);
        }
    }
    return AT_OK;
}

/* NVRTC's log (malloc'd; NULL if it has none). */
static char *program_log(nvrtcProgram prog)
{
    size_t n = 0;
    if (nv.nvrtcGetProgramLogSize(prog, &n) != AT_NVRTC_SUCCESS || n == 0) return NULL;
    char *log = malloc(n + 1);
    if (!log) return NULL;
    if (nv.nvrtcGetProgramLog(prog, log) != AT_NVRTC_SUCCESS) n = 0;
    log[n] = '\0';
    return log;
}

/* The fixed options, then the caller's split on white space (its values hold no spaces). */
static const char **build_options(const char *arch_opt, char *user, int *argc)
{
    static const char *const fixed[] = {"--std=c++17", "-default-device", "--ptxas-options=-v"};
    size_t nfixed = sizeof fixed / sizeof fixed[0];
    size_t cap = 1 + nfixed + strlen(user) / 2 + 1;
    const char **argv = calloc(cap, sizeof *argv);
    if (!argv) return NULL;
    int n = 0;
    argv[n++] = arch_opt;
    for (size_t i = 0; i < nfixed; i++) argv[n++] = fixed[i];
    char *save = NULL;
    for (char *tok = strtok_r(user, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save))
        argv[n++] = tok;
    *argc = n;
    return argv;
}

static at_status cuda_compile(at_bdev *d, const char *src, const char *options,
                              const char *kernel_name, at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !src || !kernel_name)
        return at_fail(AT_ERR_INVALID_ARG, "compile: NULL device, source or kernel name");
    AT_TRY(ensure_nvrtc());

    char arch_opt[32], file[128];
    snprintf(arch_opt, sizeof arch_opt, "-arch=%s", d->arch);
    snprintf(file, sizeof file, "%s.cu", kernel_name);
    char *user = at_strdup(options ? options : "");
    int argc = 0;
    const char **argv = user ? build_options(arch_opt, user, &argc) : NULL;
    at_bprog *p = prog_new(d, kernel_name);
    if (!argv || !p) {
        free(user);
        free(argv);
        free(p);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory compiling %s", kernel_name);
    }

    nvrtcProgram prog = NULL;
    at_status s = AT_OK;
    nvrtcResult r = nv.nvrtcCreateProgram(&prog, src, file, 0, NULL, NULL);
    if (r != AT_NVRTC_SUCCESS) {
        prog = NULL;
        s = nv_fail(AT_ERR_COMPILE, "nvrtcCreateProgram", r);
        goto done;
    }
    /* Naming the kernel makes a missing one a compile error, and tells its symbol. */
    if ((r = nv.nvrtcAddNameExpression(prog, kernel_name)) != AT_NVRTC_SUCCESS) {
        s = nv_fail(AT_ERR_COMPILE, "nvrtcAddNameExpression", r);
        goto done;
    }
    r = nv.nvrtcCompileProgram(prog, argc, argv);
    p->log = program_log(prog);
    if (r != AT_NVRTC_SUCCESS) {
        char head[2048], buf[32];
        at_log_head(p->log, head, sizeof head);
        s = at_fail(AT_ERR_COMPILE, "NVRTC compile of %s for %s failed (%s)%s%s", kernel_name,
                    d->arch, nv_errname(r, buf), head[0] ? ":\n" : "", head);
        if (log) {
            *log = p->log;
            p->log = NULL;
        }
        goto done;
    }
    /* A binary is later looked up by the kernel's plain name: C++ mangling would hide it. */
    const char *lowered = NULL;
    if ((r = nv.nvrtcGetLoweredName(prog, kernel_name, &lowered)) != AT_NVRTC_SUCCESS) {
        s = nv_fail(AT_ERR_COMPILE, "nvrtcGetLoweredName", r);
        goto done;
    }
    if (!lowered || strcmp(lowered, kernel_name) != 0) {
        s = at_fail(AT_ERR_COMPILE,
                    "kernel %s is not extern \"C\" (its symbol is %s); declare it "
                    "extern \"C\" __global__",
                    kernel_name, lowered ? lowered : "unknown");
        goto done;
    }
    size_t len = 0;
    if ((r = nv.nvrtcGetCUBINSize(prog, &len)) != AT_NVRTC_SUCCESS) {
        s = nv_fail(AT_ERR_COMPILE, "nvrtcGetCUBINSize", r);
        goto done;
    }
    if (len == 0) {
        s = at_fail(AT_ERR_COMPILE, "NVRTC gave no CUBIN for %s (is %s a real target?)",
                    kernel_name, d->arch);
        goto done;
    }
    if (!(p->cubin = malloc(len))) {
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory for a %zu-byte CUBIN", len);
        goto done;
    }
    if ((r = nv.nvrtcGetCUBIN(prog, p->cubin)) != AT_NVRTC_SUCCESS) {
        s = nv_fail(AT_ERR_COMPILE, "nvrtcGetCUBIN", r);
        goto done;
    }
    p->cubin_len = len;
    if (!d->compile_only) s = load_module(p);

done:
    if (prog) nv.nvrtcDestroyProgram(&prog);
    free(argv);
    free(user);
    if (s != AT_OK) {
        cuda_program_free(p);
        return s;
    }
    *out = p;
    return AT_OK;
}

static at_status cuda_program_binary(at_bprog *p, void **bin, size_t *len)
{
    *bin = NULL;
    *len = 0;
    if (!p || !p->cubin) return at_fail(AT_ERR_INVALID_ARG, "program_binary: no program");
    void *copy = malloc(p->cubin_len);
    if (!copy)
        return at_fail(AT_ERR_NO_MEMORY, "out of memory for a %zu-byte binary", p->cubin_len);
    memcpy(copy, p->cubin, p->cubin_len);
    *bin = copy;
    *len = p->cubin_len;
    return AT_OK;
}

static at_status cuda_load_binary(at_bdev *d, const void *bin, size_t len, const char *kernel_name,
                                  at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !kernel_name) return at_fail(AT_ERR_INVALID_ARG, "load_binary: NULL argument");
    AT_TRY(need_device(d, "load_binary"));
    if (!bin || len == 0) return at_fail(AT_ERR_COMPILE, "load_binary: empty binary");
    at_bprog *p = prog_new(d, kernel_name);
    if (!p || !(p->cubin = malloc(len))) {
        free(p);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory loading a %zu-byte binary", len);
    }
    memcpy(p->cubin, bin, len);
    p->cubin_len = len;
    at_status s = load_module(p);
    if (s != AT_OK) {
        cuda_program_free(p);
        return s;
    }
    *out = p;
    return AT_OK;
}

/* From the ptxas report when the program was compiled here; from the loaded function's
 * attributes otherwise (those do not tell spills). */
static at_status cuda_resources(at_bprog *p, at_resources *out)
{
    *out = (at_resources){-1, -1, -1, -1, -1, 0};
    if (!p) return at_fail(AT_ERR_INVALID_ARG, "resources: NULL program");
    if (p->log && at_cuda_parse_ptxas(p->log, p->name, out) == 0) return AT_OK;
    if (p->fn && cu.cuCtxSetCurrent(p->dev->ctx) == 0) {
        int regs = 0, smem = 0, local = 0;
        CUresult r = cu.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, p->fn);
        if (r == 0) r = cu.cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, p->fn);
        if (r == 0) r = cu.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, p->fn);
        if (r != 0) return cu_fail(AT_ERR_UNSUPPORTED, "cuFuncGetAttribute", r);
        *out = (at_resources){regs, -1, smem, local, -1, 0};
        return AT_OK;
    }
    return at_fail(AT_ERR_UNSUPPORTED, "no ptxas report for kernel %s", p->name);
}

/* ---- buffers ------------------------------------------------------------------------------ */

static CUdeviceptr devptr(at_bbuf b) { return (CUdeviceptr)(uintptr_t)b.handle; }

static at_status cuda_buffer_alloc(at_bdev *d, size_t bytes, at_bbuf *out)
{
    out->handle = NULL;
    out->bytes = 0;
    AT_TRY(need_device(d, "buffer_alloc"));
    if (bytes == 0) return at_fail(AT_ERR_INVALID_ARG, "buffer_alloc: zero bytes");
    CUdeviceptr ptr = 0;
    CUresult r = cu.cuMemAlloc(&ptr, bytes);
    if (r != 0) {
        char buf[32];
        return at_fail(AT_ERR_LAUNCH, "CUDA cuMemAlloc(%zu bytes) failed: %s", bytes,
                       cu_errname(r, buf));
    }
    out->handle = (void *)(uintptr_t)ptr;
    out->bytes = bytes;
    return AT_OK;
}

/* The synchronous copies run on the legacy default stream, which waits for work on our
 * (blocking) stream first: a read sees every kernel queued before it. */
static at_status cuda_buffer_write(at_bdev *d, at_bbuf b, size_t off, const void *src, size_t bytes)
{
    AT_TRY(need_device(d, "buffer_write"));
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_write"));
    if (bytes == 0) return AT_OK;
    CUresult r = cu.cuMemcpyHtoD(devptr(b) + off, src, bytes);
    return r == 0 ? AT_OK : cu_fail(AT_ERR_LAUNCH, "cuMemcpyHtoD", r);
}

static at_status cuda_buffer_read(at_bdev *d, at_bbuf b, size_t off, void *dst, size_t bytes)
{
    AT_TRY(need_device(d, "buffer_read"));
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_read"));
    if (bytes == 0) return AT_OK;
    CUresult r = cu.cuMemcpyDtoH(dst, devptr(b) + off, bytes);
    return r == 0 ? AT_OK : cu_fail(AT_ERR_LAUNCH, "cuMemcpyDtoH", r);
}

static void cuda_buffer_free(at_bdev *d, at_bbuf b)
{
    if (!b.handle || need_device(d, "buffer_free") != AT_OK) return;
    cu.cuMemFree(devptr(b));
}

/* ---- launch ------------------------------------------------------------------------------- */

#define AT_MAX_STACK_ARGS 32

static at_status cuda_launch(at_bdev *d, at_bprog *p, const at_karg *args, size_t nargs,
                             const size_t global[3], const size_t local[3], size_t dims,
                             size_t shared_bytes, void *stream, double *ms)
{
    if (!d || !p || !global || (nargs && !args))
        return at_fail(AT_ERR_INVALID_ARG, "launch: NULL argument");
    AT_TRY(need_device(d, "launch"));
    if (!p->fn) return at_fail(AT_ERR_INVALID_ARG, "launch: program %s is not loaded", p->name);

    unsigned int grid[3], block[3];
    AT_TRY(at_launch_shape(global, local, dims, grid, block));
    /* cuLaunchKernel reads each argument's bytes through these pointers and copies them. */
    void *stack_params[AT_MAX_STACK_ARGS];
    void **params = at_launch_params(args, nargs, stack_params, AT_MAX_STACK_ARGS);
    if (!params) return at_fail(AT_ERR_NO_MEMORY, "launch: out of memory for %zu arguments", nargs);

    CUstream s = stream ? (CUstream)stream : d->stream;
    at_status st = AT_OK;
    CUresult r = 0;
    if (ms) pthread_mutex_lock(&d->timing_mu);
    if (ms && (r = cu.cuEventRecord(d->ev_start, s)) != 0)
        st = cu_fail(AT_ERR_LAUNCH, "cuEventRecord (start)", r);
    if (st == AT_OK &&
        (r = cu.cuLaunchKernel(p->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                               (unsigned int)shared_bytes, s, nargs ? params : NULL, NULL)) != 0) {
        char buf[32];
        st = at_fail(AT_ERR_LAUNCH,
                     "CUDA cuLaunchKernel(%s, grid %ux%ux%u, block %ux%ux%u, %zu bytes dynamic "
                     "shared) failed: %s",
                     p->name, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes,
                     cu_errname(r, buf));
    }
    if (ms && st == AT_OK) {
        float f = 0.0f;
        if ((r = cu.cuEventRecord(d->ev_end, s)) != 0)
            st = cu_fail(AT_ERR_LAUNCH, "cuEventRecord (end)", r);
        else if ((r = cu.cuEventSynchronize(d->ev_end)) != 0)
            st = cu_fail(AT_ERR_LAUNCH, "cuEventSynchronize (kernel execution)", r);
        else if ((r = cu.cuEventElapsedTime(&f, d->ev_start, d->ev_end)) != 0)
            st = cu_fail(AT_ERR_LAUNCH, "cuEventElapsedTime", r);
        else
            *ms = (double)f;
    }
    if (ms) pthread_mutex_unlock(&d->timing_mu);
    if (params != stack_params) free(params);
    return st;
}

static at_status cuda_buffer_fill(at_bdev *d, at_bbuf b, unsigned char value)
{
    AT_TRY(need_device(d, "buffer_fill"));
    CUresult r = cu.cuMemsetD8Async(devptr(b), value, b.bytes, d->stream);
    return r == 0 ? AT_OK : cu_fail(AT_ERR_LAUNCH, "cuMemsetD8Async", r);
}

/* A fault (illegal address, launch failure) is sticky: every later call on the context fails,
 * so the caller must recycle it. */
static at_status cuda_check(at_bdev *d)
{
    AT_TRY(need_device(d, "check"));
    CUresult r = cu.cuCtxSynchronize();
    return r == 0 ? AT_OK : cu_fail(AT_ERR_DEVICE_LOST, "cuCtxSynchronize", r);
}

static at_status cuda_finish(at_bdev *d)
{
    AT_TRY(need_device(d, "finish"));
    CUresult r = cu.cuStreamSynchronize(d->stream);
    return r == 0 ? AT_OK : cu_fail(AT_ERR_LAUNCH, "cuStreamSynchronize", r);
}

static void *cuda_native_context(at_bdev *d) { return d ? (void *)d->ctx : NULL; }
static void *cuda_native_queue(at_bdev *d) { return d ? (void *)d->stream : NULL; }

/* ---- the ptxas report --------------------------------------------------------------------- */

/* The integer written just before `suffix` in line ("624 bytes stack frame"), or -1. */
static int64_t num_before(const char *line, const char *suffix)
{
    const char *at = strstr(line, suffix);
    if (!at) return -1;
    const char *p = at;
    while (p > line && p[-1] == ' ') p--;
    const char *end = p;
    while (p > line && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == end) return -1;
    return strtoll(p, NULL, 10);
}

/* Copies the quoted name after `marker` in line into name; 0 if found. */
static int quoted_after(const char *line, const char *marker, char *name, size_t cap)
{
    const char *p = strstr(line, marker);
    if (!p) return -1;
    p += strlen(marker);
    const char *q = strchr(p, '\'');
    if (!q || (size_t)(q - p) >= cap) return -1;
    memcpy(name, p, (size_t)(q - p));
    name[q - p] = '\0';
    return 0;
}

int at_cuda_parse_ptxas(const char *log, const char *kernel, at_resources *out)
{
    *out = (at_resources){-1, -1, -1, -1, -1, 0};
    if (!log) return -1;
    static const char entry_marker[] = "Compiling entry function '";
    static const char props_marker[] = "Function properties for ";
    char want[512] = "";
    if (kernel) {
        if (strlen(kernel) >= sizeof want) return -1;
        strcpy(want, kernel);
    }
    int in_entry = 0, entries_seen = 0, props_next = 0, found = 0;
    char line[1024], name[512];
    for (const char *p = log; *p && !found;) {
        size_t n = strcspn(p, "\r\n");
        size_t c = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, p, c);
        line[c] = '\0';
        p += n;
        while (*p == '\r' || *p == '\n') p++;

        if (quoted_after(line, entry_marker, name, sizeof name) == 0) {
            /* Without a kernel name the first entry function is the one. */
            if (!kernel && entries_seen++ == 0) strcpy(want, name);
            in_entry = strcmp(name, want) == 0;
            continue;
        }
        /* The properties block may come before its entry function's line (device functions are
         * listed the same way), so it is matched by name wherever it is. */
        const char *pr = strstr(line, props_marker);
        if (pr) {
            props_next = want[0] && strcmp(pr + strlen(props_marker), want) == 0;
            continue;
        }
        if (props_next && strstr(line, "bytes stack frame")) {
            props_next = 0;
            out->local_bytes = num_before(line, " bytes stack frame");
            int64_t st = num_before(line, " bytes spill stores");
            int64_t ld = num_before(line, " bytes spill loads");
            out->spill_bytes = st >= 0 && ld >= 0 ? st + ld : -1;
            continue;
        }
        props_next = 0;
        const char *used = strstr(line, "Used ");
        if (in_entry && used && strstr(used, " registers")) {
            char *end = NULL;
            long long regs = strtoll(used + 5, &end, 10);
            if (end == used + 5) continue;
            out->registers = regs;
            int64_t smem = num_before(line, " bytes smem");
            out->shared_bytes = smem >= 0 ? smem : 0;
            found = 1;
        }
    }
    if (!found) {
        *out = (at_resources){-1, -1, -1, -1, -1, 0};
        return -1;
    }
    /* "(C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to
     * ... in the function 'NAME'": the MMAs then wait for each other, a Hopper kernel's ruin. */
    for (const char *w = strstr(log, "instructions are serialized"); w;
         w = strstr(w + 1, "instructions are serialized")) {
        const char *eol = strchr(w, '\n');
        char fn[600];
        snprintf(fn, sizeof fn, "function '%s'", want);
        const char *f = strstr(w, fn);
        if (f && (!eol || f < eol)) out->serialized = 1;
    }
    return 0;
}

const at_backend_ops at_cuda_backend = {
    .name = "cuda",
    .probe = cuda_probe,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .open = cuda_open,
    .open_target = cuda_open_target,
    .close = cuda_close,
    .compiler_version = cuda_compiler_version,
    .compile = cuda_compile,
    .program_binary = cuda_program_binary,
    .load_binary = cuda_load_binary,
    .program_free = cuda_program_free,
    .resources = cuda_resources,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_write = cuda_buffer_write,
    .buffer_read = cuda_buffer_read,
    .buffer_free = cuda_buffer_free,
    .buffer_fill = cuda_buffer_fill,
    .check = cuda_check,
    .launch = cuda_launch,
    .finish = cuda_finish,
    .native_context = cuda_native_context,
    .native_queue = cuda_native_queue,
};
