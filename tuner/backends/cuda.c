/* cuda.c — the CUDA backend: NVRTC compiles to CUBIN for an explicit sm_XX[a] target with no
 * device needed; the driver API (libcuda.so.1) loads modules, moves buffers and times kernels with
 * events. Both libraries are loaded with dlopen and no CUDA header is needed to build. What CUDA
 * and HIP do alike (the device layer, compiling, loading) is in gpu.c; this file describes the
 * driver and NVRTC to it and keeps what is CUDA's own.
 *
 * Environment: AUTOTUNE_CUDA_LIBRARY names the driver library to dlopen instead of "libcuda.so.1";
 * AUTOTUNE_NVRTC_LIBRARY names NVRTC instead of "libnvrtc.so.13" (then "libnvrtc.so.12"). When
 * set, only that path is tried. Each is read once, at the first use of its library.
 *
 * probe() needs both the driver with a device and NVRTC; open_target() needs only NVRTC, so a
 * machine without a GPU compiles (and reads the ptxas resource report) for any accepted target. */
#define _GNU_SOURCE
#include "cuda_report.h"
#include "gpu.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the few CUDA and NVRTC declarations we need (values from cuda.h / nvrtc.h, CUDA 13) --- */

typedef int CUresult; /* an enum in cuda.h; CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
/* Opaque handles, as void * so the calls taking them fit gpu.h's table as they are. */
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUfunction;

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
    CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120,
} CUdevice_attribute;

typedef enum CUfunction_attribute {
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
} CUfunction_attribute;

/* cuLaunchKernelEx's launch description (CUlaunchConfig, CUlaunchAttribute and its value union,
 * padded to 64 bytes and 8-byte aligned, in cuda.h), with the one attribute used here. */
#define AT_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4
typedef struct CUlaunchAttribute {
    int id;
    char pad[4];
    union {
        char pad[64];
        void *align;
        struct {
            unsigned int x, y, z;
        } clusterDim;
    } value;
} CUlaunchAttribute;
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute as in cuda.h");
typedef struct CUlaunchConfig {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

/* cuTensorMapEncodeTiled's enums (CUtensorMapDataType, ...Interleave, ...Swizzle,
 * ...L2promotion, ...FloatOOBfill in cuda.h), passed as int like the enums they are. */
enum {
    AT_CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
    AT_CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7,
    AT_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
    AT_CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
    AT_CU_TENSOR_MAP_SWIZZLE_NONE = 0, /* then _32B, _64B, _128B: 1, 2, 3 */
    AT_CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
    AT_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0, /* out of bounds reads zeros */
};

#define AT_CU_STREAM_DEFAULT 0x0 /* a blocking stream: ordered with the synchronous copies */
#define AT_CU_EVENT_DEFAULT  0x0 /* timing enabled */

typedef int nvrtcResult; /* an enum in nvrtc.h; NVRTC_SUCCESS = 0 */
typedef void *nvrtcProgram;
#define AT_NVRTC_SUCCESS 0

/* ---- symbol tables ------------------------------------------------------------------------ */

/* The driver calls this file makes itself: X(field, exported symbol, return type, parameters).
 * The exported names are the ones cuda.h maps the plain names to (cuMemAlloc → cuMemAlloc_v2). */
#define AT_CU_SYMBOLS(X)                                                                           \
    X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult, const char **))                       \
    X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice *, int))                                     \
    X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char *, int, CUdevice))                       \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult,                                      \
      (int *, CUdevice_attribute, CUdevice))                                                       \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, (size_t *, CUdevice))                     \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext *, CUdevice))     \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice))             \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext))                                   \
    X(cuCtxGetDevice, "cuCtxGetDevice", CUresult, (CUdevice *))                                    \
    X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream *, unsigned int))                      \
    X(cuEventCreate, "cuEventCreate", CUresult, (CUevent *, unsigned int))                         \
    X(cuFuncGetAttribute, "cuFuncGetAttribute", CUresult,                                          \
      (int *, CUfunction_attribute, CUfunction))                                                   \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult, (CUfunction, CUfunction_attribute, int)) \
    X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr *, size_t))                              \
    X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                                          \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", CUresult, (CUdeviceptr, const void *, size_t))              \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", CUresult, (void *, CUdeviceptr, size_t))                    \
    X(cuMemsetD8Async, "cuMemsetD8Async", CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))

/* Driver calls newer than the oldest driver we run on (absent: NULL, and what needs them is
 * unavailable): cuTensorMapEncodeTiled and cuLaunchKernelEx came with CUDA 12. */
#define AT_CU_OPTIONAL(X)                                                                          \
    X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", CUresult,                                  \
      (void *, int, unsigned int, void *, const uint64_t *, const uint64_t *, const uint32_t *,    \
       const uint32_t *, int, int, int, int))                                                      \
    X(cuLaunchKernelEx, "cuLaunchKernelEx", CUresult,                                              \
      (const CUlaunchConfig *, CUfunction, void **, void **))

/* The driver calls gpu.c makes, which have its signature: X(slot of AT_GPU_CALLS, exported
 * symbol). cuEventElapsedTime keeps its original export, which every driver has (CUDA 13
 * headers add a _v2 only drivers from 12.8 on have). */
#define AT_CU_SHARED(X)                                                                            \
    X(init, "cuInit")                                                                              \
    X(version, "cuDriverGetVersion")                                                               \
    X(device_count, "cuDeviceGetCount")                                                            \
    X(device_sync, "cuCtxSynchronize")                                                             \
    X(stream_sync, "cuStreamSynchronize")                                                          \
    X(stream_destroy, "cuStreamDestroy_v2")                                                        \
    X(event_destroy, "cuEventDestroy_v2")                                                          \
    X(event_record, "cuEventRecord")                                                               \
    X(event_sync, "cuEventSynchronize")                                                            \
    X(event_elapsed, "cuEventElapsedTime")                                                         \
    X(module_load, "cuModuleLoadData")                                                             \
    X(module_unload, "cuModuleUnload")                                                             \
    X(module_function, "cuModuleGetFunction")                                                      \
    X(launch, "cuLaunchKernel")

/* NVRTC's, likewise: its own calls, and those with gpu.h's signature (AT_GPU_RTC_CALLS). */
#define AT_NVRTC_SYMBOLS(X)                                                                        \
    X(nvrtcAddNameExpression, "nvrtcAddNameExpression", nvrtcResult, (nvrtcProgram, const char *)) \
    X(nvrtcGetLoweredName, "nvrtcGetLoweredName", nvrtcResult,                                     \
      (nvrtcProgram, const char *, const char **))
#define AT_NVRTC_SHARED(X)                                                                         \
    X(version, "nvrtcVersion")                                                                     \
    X(create, "nvrtcCreateProgram")                                                                \
    X(destroy, "nvrtcDestroyProgram")                                                              \
    X(compile, "nvrtcCompileProgram")                                                              \
    X(log_size, "nvrtcGetProgramLogSize")                                                          \
    X(log, "nvrtcGetProgramLog")                                                                   \
    X(code_size, "nvrtcGetCUBINSize")                                                              \
    X(code, "nvrtcGetCUBIN")

static struct {
    AT_CU_SYMBOLS(AT_DL_FIELD)
    AT_CU_OPTIONAL(AT_DL_FIELD)
} cu;
static struct {
    AT_NVRTC_SYMBOLS(AT_DL_FIELD)
} nv;

static at_gpu_api g_cu; /* the driver, as gpu.c sees it (defined below) */
static at_gpu_rtc g_nv; /* NVRTC */

/* ---- devices and errors ------------------------------------------------------------------- */

struct at_bdev {
    at_gpu_dev gpu; /* first: what gpu.c uses */
    CUdevice dev;
    CUcontext ctx; /* the primary context, retained; or the caller's (borrowed) */
    bool borrowed; /* ctx is the caller's (open_native): never released, reset or destroyed */
    int64_t smem_default, smem_optin; /* shared bytes per block: without and with opting in */
};

/* "CUDA_ERROR_ILLEGAL_ADDRESS" from the driver itself; NULL if it does not know. */
static const char *cu_error_name(int r)
{
    const char *s = NULL;
    return cu.cuGetErrorName && cu.cuGetErrorName(r, &s) == 0 ? s : NULL;
}

/* A failed driver call: status s, message "CUDA <call> failed: <CUDA_ERROR_NAME>". */
static at_status cu_fail(at_status s, const char *call, CUresult r)
{
    return at_gpu_api_fail(&g_cu, s, call, "", r);
}

static at_status nv_fail(const char *call, nvrtcResult r)
{
    return at_gpu_rtc_fail(&g_nv, call, r);
}

/* ---- what gpu.c calls that is not the driver's own signature ------------------------------- */

static CUdeviceptr devptr(const void *handle) { return (CUdeviceptr)(uintptr_t)handle; }

static int cu_activate(at_bdev *d) { return cu.cuCtxSetCurrent(d->ctx); }
static int cu_stream_create(void **stream)
{
    return cu.cuStreamCreate(stream, AT_CU_STREAM_DEFAULT);
}
static int cu_event_create(void **event) { return cu.cuEventCreate(event, AT_CU_EVENT_DEFAULT); }

static int cu_mem_alloc(void **ptr, size_t bytes)
{
    CUdeviceptr p = 0;
    CUresult r = cu.cuMemAlloc(&p, bytes);
    *ptr = (void *)(uintptr_t)p;
    return r;
}

static int cu_mem_free(void *ptr) { return cu.cuMemFree(devptr(ptr)); }

/* The synchronous copies run on the legacy default stream, which waits for work on our
 * (blocking) stream first: a read sees every kernel queued before it. */
static int cu_copy_in(void *stream, void *dst, size_t off, const void *src, size_t bytes)
{
    (void)stream;
    return cu.cuMemcpyHtoD(devptr(dst) + off, src, bytes);
}

static int cu_copy_out(void *stream, void *dst, const void *src, size_t off, size_t bytes)
{
    (void)stream;
    return cu.cuMemcpyDtoH(dst, devptr(src) + off, bytes);
}

static int cu_fill(void *ptr, unsigned char value, size_t bytes, void *stream)
{
    return cu.cuMemsetD8Async(devptr(ptr), value, bytes, stream);
}

/* A launch in clusters of cluster x 1 x 1 blocks (gpu.h's launch_cluster). Without the driver's
 * cuLaunchKernelEx device_info says cluster 0, so no space offers one; asked anyway, the
 * driver's own "not supported". */
static int cu_launch_cluster(void *fn, const unsigned int grid[3], const unsigned int block[3],
                             unsigned int cluster, unsigned int shared_bytes, void *stream,
                             void **params)
{
    if (!cu.cuLaunchKernelEx) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = AT_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    const CUlaunchConfig c = {grid[0],  grid[1],      grid[2], block[0], block[1],
                              block[2], shared_bytes, stream,  &attr,    1};
    return cu.cuLaunchKernelEx(&c, fn, params, NULL);
}

/* Static __shared__ is capped at 48 KB by the compiler; only dynamic shared memory can use the
 * rest of the opt-in limit, and only after this attribute is raised, so raise it to all that
 * the kernel's static use leaves. Harmless for launches with no dynamic memory. */
static at_status raise_dynamic_shared(at_bprog *p)
{
    at_bdev *d = p->dev;
    if (d->smem_optin <= d->smem_default) return AT_OK;
    int static_smem = 0;
    CUresult r = cu.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, p->fn);
    if (r != 0) return cu_fail(AT_ERR_COMPILE, "cuFuncGetAttribute(SHARED_SIZE_BYTES)", r);
    int64_t dyn = d->smem_optin - static_smem;
    if (dyn > 0) {
        r = cu.cuFuncSetAttribute(p->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn);
        if (r != 0)
            return cu_fail(AT_ERR_COMPILE, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", r);
    }
    return AT_OK;
}

/* The calls gpu.c makes that this file wraps, the driver's signature being another:
 * X(slot of AT_GPU_CALLS, the driver call it makes, the wrapper). */
#define AT_CU_WRAPPED(X)                                                                           \
    X(activate, "cuCtxSetCurrent", cu_activate)                                                    \
    X(stream_create, "cuStreamCreate", cu_stream_create)                                           \
    X(event_create, "cuEventCreate", cu_event_create)                                              \
    X(mem_alloc, "cuMemAlloc", cu_mem_alloc)                                                       \
    X(mem_free, "cuMemFree", cu_mem_free)                                                          \
    X(copy_in, "cuMemcpyHtoD", cu_copy_in)                                                         \
    X(copy_out, "cuMemcpyDtoH", cu_copy_out)                                                       \
    X(fill, "cuMemsetD8Async", cu_fill)

/* ---- NVRTC's own steps -------------------------------------------------------------------- */

/* Naming the kernel makes a missing one a compile error, and tells its symbol. */
static at_status nv_name_kernel(void *prog, const char *kernel)
{
    nvrtcResult r = nv.nvrtcAddNameExpression(prog, kernel);
    return r == AT_NVRTC_SUCCESS ? AT_OK : nv_fail("nvrtcAddNameExpression", r);
}

/* A binary is later looked up by the kernel's plain name: C++ mangling would hide it. */
static at_status nv_check_extern_c(void *prog, const char *kernel)
{
    const char *lowered = NULL;
    nvrtcResult r = nv.nvrtcGetLoweredName(prog, kernel, &lowered);
    if (r != AT_NVRTC_SUCCESS) return nv_fail("nvrtcGetLoweredName", r);
    if (!lowered || strcmp(lowered, kernel) != 0)
        return at_fail(AT_ERR_COMPILE,
                       "kernel %s is not extern \"C\" (its symbol is %s); declare it "
                       "extern \"C\" __global__",
                       kernel, lowered ? lowered : "unknown");
    return AT_OK;
}

/* ---- the driver and NVRTC, described to gpu.c --------------------------------------------- */

#define AT_CU_OWN_ROW(field, sym, ret, params) {sym, &cu.field},
#define AT_CU_SHARED_ROW(slot, sym)            {sym, &g_cu.fn.slot},

#define AT_NV_OWN_ROW(field, sym, ret, params) {sym, &nv.field},
#define AT_NV_SHARED_ROW(slot, sym)            {sym, &g_nv.fn.slot},

static const at_dl_sym g_cu_syms[] = {AT_CU_SYMBOLS(AT_CU_OWN_ROW) AT_CU_SHARED(AT_CU_SHARED_ROW)};
static const at_dl_sym g_cu_opt[] = {AT_CU_OPTIONAL(AT_CU_OWN_ROW)};
static const at_dl_sym g_nv_syms[] = {AT_NVRTC_SHARED(AT_NV_SHARED_ROW) AT_NVRTC_SYMBOLS(
    AT_NV_OWN_ROW){"nvrtcGetErrorString", &g_nv.error_name}};
static const char *const g_cu_names[] = {"libcuda.so.1", NULL};
static const char *const g_nv_names[] = {"libnvrtc.so.13", "libnvrtc.so.12", NULL};
/* Where a driver or NVRTC not on the loader's path usually is: the toolkit's folders, the
 * container runtime's driver folder, and NVIDIA's pip wheels (nvidia-cuda-nvrtc: cu13/lib for
 * CUDA 13, cuda_nvrtc/lib for 12) in a Python environment (PyTorch's) on PATH. */
static const char *const g_cu_places[] = {"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib",
                                          "/usr/lib/wsl/lib", "/usr/lib64", NULL};
static const char *const g_nv_places[] = {
    "$CUDA_HOME/lib64",
    "$CUDA_HOME/lib",
    "$CUDA_PATH/lib64",
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/lib",
    "/usr/local/cuda-1[0-9]*/lib64",
    "/usr/local/cuda-1[0-9]*/lib",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/opt/cuda/lib64",
    "$VIRTUAL_ENV/lib/python3*/site-packages/nvidia/cu13/lib",
    "$VIRTUAL_ENV/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib",
    "@python/lib/python3*/*-packages/nvidia/cu13/lib",
    "@python/lib/python3*/*-packages/nvidia/cuda_nvrtc/lib",
    "$CONDA_PREFIX/lib",
    NULL};
static const char *const g_nv_fixed[] = {"--std=c++17", "-default-device", "--ptxas-options=-v",
                                         NULL};

/* NVRTC found in a folder off the loader's path (a pip wheel's): it opens its builtins by their
 * bare name, which the loader would not find there; loaded first from the same folder, they
 * are found by that name. Then the version, as for any compiler. */
static int nv_start(at_gpu_lib *l, const char *used)
{
    const char *slash = strrchr(l->path, '/');
    if (l->path[0] == '/' && slash && strcmp(used, l->path) == 0) {
        char pattern[sizeof l->path + 32];
        snprintf(pattern, sizeof pattern, "%.*s/libnvrtc-builtins.so.*", (int)(slash - l->path),
                 l->path);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc; i++)
                if (!strstr(g.gl_pathv[i], ".alt.")) (void)dlopen(g.gl_pathv[i], RTLD_NOW);
            globfree(&g);
        }
    }
    return at_gpu_rtc_start(l, used);
}

static at_gpu_api g_cu = {
    .lib = AT_GPU_LIB_OPT("CUDA", "AUTOTUNE_CUDA_LIBRARY", g_cu_names, g_cu_places, g_cu_syms,
                          g_cu_opt, at_gpu_runtime_start),
    .error_name = cu_error_name,
    .fn = {AT_CU_WRAPPED(AT_GPU_WRAPPER)}, /* the rest from libcuda (g_cu_syms) */
    .call = {AT_CU_SHARED(AT_GPU_SYMBOL_NAME) AT_CU_WRAPPED(AT_GPU_WRAPPER_NAME)},
    .provider = "the CUDA driver",
    .launch_cluster = cu_launch_cluster,
    .launch_cluster_call = "cuLaunchKernelEx",
    .loaded = raise_dynamic_shared,
};

/* NVRTC, on its own: compiling needs no driver. */
static at_gpu_rtc g_nv = {
    .lib =
        AT_GPU_LIB("NVRTC", "AUTOTUNE_NVRTC_LIBRARY", g_nv_names, g_nv_places, g_nv_syms, nv_start),
    .call = {AT_NVRTC_SHARED(AT_GPU_SYMBOL_NAME)},
    .file_ext = ".cu",
    .arch_flag = "-arch=",
    .fixed = g_nv_fixed,
    .code_name = "CUBIN",
    .version_name = "nvrtc",
    .before = nv_name_kernel,
    .after = nv_check_extern_c,
};

/* Usable means a device to run on and a compiler for it. */
static at_status cuda_probe(char *why, size_t whylen)
{
    return at_gpu_probe(&g_cu, &g_nv, why, whylen);
}

static int cuda_device_count(void) { return cuda_probe(NULL, 0) == AT_OK ? g_cu.ndevs : 0; }

static at_status get_device(int idx, CUdevice *out)
{
    AT_TRY(cuda_probe(NULL, 0));
    if (idx < 0 || idx >= g_cu.ndevs)
        return at_fail(AT_ERR_NO_DEVICE, "no CUDA device %d (%d found)", idx, g_cu.ndevs);
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

static int64_t dev_attr(int dev, int a)
{
    int v = 0;
    return cu.cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev) == 0 ? (int64_t)v : 0;
}

static void device_arch(CUdevice dev, char *dst, size_t cap)
{
    arch_for((int)dev_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
             (int)dev_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), dst, cap);
}

static const at_gpu_attrs g_attrs = {
    .compute_units = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    .max_threads = CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
    .block_x = CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
    .block_y = CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
    .block_z = CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
    /* Templates declare static __shared__ arrays, which CUDA caps at the default per-block
     * limit (48 KB); opting in to more (227 KB on an H200) needs dynamic shared memory. */
    .shared = CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
    .registers = CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
    .l2 = CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
    .clock_khz = CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
    .warp = CU_DEVICE_ATTRIBUTE_WARP_SIZE,
};

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
    snprintf(out->driver, sizeof out->driver, "CUDA driver %d.%d", g_cu.version / 1000,
             (g_cu.version % 1000) / 10);
    device_arch(dev, out->arch, sizeof out->arch);
    size_t total = 0;
    if (cu.cuDeviceTotalMem(&total, dev) != 0) total = 0;
    at_gpu_device_limits(out, &g_attrs, dev_attr, dev, (int64_t)total);
    out->max_shared_optin = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    if (out->max_shared_optin < out->local_mem_bytes) out->max_shared_optin = out->local_mem_bytes;
    snprintf(out->key, sizeof out->key, "cuda/%s/%s/%lld", out->arch, out->name,
             (long long)out->compute_units);
    out->tma = cu.cuTensorMapEncodeTiled != NULL &&
               dev_attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) >= 9;
    out->cluster =
        cu.cuLaunchKernelEx != NULL && dev_attr(dev, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) > 0;
    return AT_OK;
}

/* ---- open device or target ---------------------------------------------------------------- */

static void cuda_close(at_bdev *d)
{
    if (d && !d->gpu.compile_only && d->ctx) {
        cu_activate(d);
        at_gpu_dev_stop(d);
        if (!d->borrowed) cu.cuDevicePrimaryCtxRelease(d->dev);
    }
    at_gpu_dev_free(d);
}

/* Device dev in context ctx (NULL: its primary context, retained) on stream (NULL: one of
 * ours). */
static at_status open_in(CUdevice dev, CUcontext ctx, CUstream stream, at_bdev **out)
{
    *out = NULL;
    char arch[16];
    device_arch(dev, arch, sizeof arch);
    at_bdev *d = NULL;
    AT_TRY(at_gpu_dev_new(sizeof *d, &g_cu, &g_nv, arch, false, &d));
    d->dev = dev;
    d->smem_default = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    d->smem_optin = dev_attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    d->borrowed = ctx != NULL;
    d->ctx = ctx;
    d->gpu.stream = stream;
    d->gpu.borrowed_stream = stream != NULL;
    at_status s = AT_OK;
    CUresult r = ctx ? 0 : cu.cuDevicePrimaryCtxRetain(&d->ctx, dev);
    if (r != 0) {
        d->ctx = NULL;
        s = cu_fail(AT_ERR_NO_DEVICE, "cuDevicePrimaryCtxRetain", r);
    } else
        s = at_gpu_dev_start(d); /* current, stream, events */
    if (s != AT_OK) {
        cuda_close(d);
        return s;
    }
    *out = d;
    return AT_OK;
}

static at_status cuda_open(int idx, at_bdev **out)
{
    *out = NULL;
    CUdevice dev = 0;
    AT_TRY(get_device(idx, &dev));
    return open_in(dev, NULL, NULL, out);
}

/* The caller's context (required) and stream (NULL: one of ours in that context). */
static at_status cuda_open_native(void *context, void *queue, int *idx, at_bdev **out)
{
    *out = NULL;
    if (!context)
        return at_fail(AT_ERR_INVALID_ARG,
                       "CUDA: native_context (a CUcontext) is needed with native handles");
    AT_TRY(cuda_probe(NULL, 0));
    CUdevice dev = 0;
    CUresult r = cu.cuCtxSetCurrent(context);
    if (r == 0) r = cu.cuCtxGetDevice(&dev);
    if (r != 0) return cu_fail(AT_ERR_INVALID_ARG, "cuCtxGetDevice (native_context)", r);
    int found = -1;
    for (int i = 0; i < g_cu.ndevs && found < 0; i++) {
        CUdevice di = 0;
        if (cu.cuDeviceGet(&di, i) == 0 && di == dev) found = i;
    }
    AT_TRY(at_native_device("CUDA", found, g_cu.ndevs, idx));
    return open_in(dev, context, queue, out);
}

/* The limits every device of a target shares (CUDA programming guide, compute capabilities
 * 8.x and 9.0), for compiling and checking candidates without a device. */
static void target_limits(const char *arch, at_device_info *out)
{
    at_gpu_target_info(out, "cuda", "NVIDIA", arch);
    out->max_work_item_sizes[2] = 64;
    out->local_mem_bytes = 48 * 1024;
    /* opt-in shared memory per block: 227 KB on 9.0, 163 KB on 8.0 (and 8.7), 99 KB on 8.6/8.9 */
    out->max_shared_optin = strncmp(arch, "sm_90", 5) == 0 ? 227 * 1024
                            : strcmp(arch, "sm_80") == 0   ? 163 * 1024
                                                           : 99 * 1024;
    out->max_registers_per_block = 64 * 1024;
    out->warp_size = 32;
    out->tma = strncmp(arch, "sm_9", 4) == 0;     /* TMA from compute capability 9.0 on */
    out->cluster = strncmp(arch, "sm_9", 4) == 0; /* ... and thread-block clusters */
}

static at_status cuda_open_target(const char *arch, at_device_info *info, at_bdev **out)
{
    *out = NULL;
    if (!arch || !known_target(arch))
        return at_fail(AT_ERR_INVALID_ARG,
                       "unknown CUDA target '%s' (accepted: " AT_TARGETS_TEXT ")",
                       arch ? arch : "(null)");
    AT_TRY(at_gpu_lib_load(&g_nv.lib));
    AT_TRY(at_gpu_dev_new(sizeof **out, &g_cu, &g_nv, arch, true, out));
    if (info) target_limits(arch, info);
    return AT_OK;
}

/* From the ptxas report when the program was compiled here; from the loaded function's
 * attributes otherwise (those do not tell spills). */
static at_status cuda_resources(at_bprog *p, at_resources *out)
{
    *out = (at_resources){-1, -1, -1, -1, -1, 0};
    if (!p) return at_fail(AT_ERR_INVALID_ARG, "resources: NULL program");
    if (p->log && at_cuda_parse_ptxas(p->log, p->name, out) == 0) return AT_OK;
    if (p->fn && cu_activate(p->dev) == 0) {
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

/* ---- tensor maps (TMA) -------------------------------------------------------------------- */

int at_cuda_tmap_call(const at_tmap_desc *t, uint64_t addr, at_cu_tmap_call *out, char *why,
                      size_t len)
{
    static const int types[] = {[AT_DTYPE_F32] = AT_CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                                [AT_DTYPE_F16] = AT_CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                [AT_DTYPE_BF16] = AT_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16};
    const uint64_t esize = t->dtype == AT_DTYPE_F32 ? 4 : 2;
    const uint32_t sw = t->swizzle;
    /* cuTensorMapEncodeTiled's requirements (cuda.h), said in our words */
    const char *bad = t->dtype > AT_DTYPE_BF16      ? "an element type it has no code for"
                      : addr % 16                   ? "the buffer's address is not 16-byte aligned"
                      : t->ld_bytes % 16            ? "its row stride is not a multiple of 16 bytes"
                      : t->ld_bytes >= (1ull << 40) ? "its row stride is 2^40 bytes or more"
                      : !t->cols || !t->rows || t->cols > (1ull << 32) || t->rows > (1ull << 32)
                          ? "a tensor size is 0 or above 2^32"
                      : !t->box[0] || !t->box[1] || t->box[0] > 256 || t->box[1] > 256
                          ? "a box size is 0 or above 256"
                      : t->box[0] * esize % 16 ? "a box row is not a multiple of 16 bytes"
                      : sw != 0 && sw != 32 && sw != 64 && sw != 128
                          ? "the swizzle is not 0, 32, 64 or 128 bytes"
                      : sw && t->box[0] * esize > sw ? "a box row is wider than the swizzle span"
                                                     : NULL;
    if (bad) {
        snprintf(why, len,
                 "cannot map %llu x %llu elements (row stride %llu bytes, box %u x %u, swizzle "
                 "%u) at 0x%llx for TMA: %s",
                 (unsigned long long)t->rows, (unsigned long long)t->cols,
                 (unsigned long long)t->ld_bytes, t->box[1], t->box[0], sw,
                 (unsigned long long)addr, bad);
        return -1;
    }
    *out = (at_cu_tmap_call){
        .dtype = types[t->dtype],
        .rank = 2,
        .dims = {t->cols, t->rows},
        .strides = {t->ld_bytes},
        .box = {t->box[0], t->box[1]},
        .elem_strides = {1, 1},
        .interleave = AT_CU_TENSOR_MAP_INTERLEAVE_NONE,
        .swizzle = sw == 0    ? AT_CU_TENSOR_MAP_SWIZZLE_NONE
                   : sw == 32 ? 1
                   : sw == 64 ? 2
                              : 3,
        .l2 = AT_CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        .oob = AT_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    };
    return 0;
}

/* A host call of the driver: no context or stream needed. */
static at_status cuda_encode_tensor_map(at_bdev *d, const at_tmap_desc *t, const void *handle,
                                        void *out)
{
    (void)d;
    if (!cu.cuTensorMapEncodeTiled)
        return at_fail(AT_ERR_UNSUPPORTED, "this CUDA driver has no cuTensorMapEncodeTiled "
                                           "(TMA needs a CUDA 12 or later driver)");
    at_cu_tmap_call c;
    char why[512];
    if (at_cuda_tmap_call(t, devptr(handle), &c, why, sizeof why) != 0)
        return at_fail(AT_ERR_INVALID_ARG, "%s", why);
    CUresult r = cu.cuTensorMapEncodeTiled(out, c.dtype, c.rank, (void *)(uintptr_t)handle, c.dims,
                                           c.strides, c.box, c.elem_strides, c.interleave,
                                           c.swizzle, c.l2, c.oob);
    return r == 0 ? AT_OK : cu_fail(AT_ERR_INVALID_ARG, "cuTensorMapEncodeTiled", r);
}

/* A fault (illegal address, launch failure) is sticky: every later call on the context fails,
 * so check() (cuCtxSynchronize, in gpu.c) reports it and the caller recycles the context (not
 * a borrowed one: that is AT_ERR_DEVICE_LOST, tuner/worker.c). */
static void *cuda_native_context(at_bdev *d) { return d ? (void *)d->ctx : NULL; }

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
    .open_native = cuda_open_native,
    .open_target = cuda_open_target,
    .close = cuda_close,
    .resources = cuda_resources,
    .native_context = cuda_native_context,
    .encode_tensor_map = cuda_encode_tensor_map,
    AT_GPU_BACKEND_SLOTS,
};
