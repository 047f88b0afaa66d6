/* hip.c — the HIP backend: hipRTC compiles to an AMDGPU code object for an explicit gfx target
 * with no device needed; the HIP runtime (libamdhip64) loads modules, moves buffers and times
 * kernels with events. Both are loaded with dlopen and no ROCm header is needed to build. What
 * HIP and CUDA do alike (the device layer, compiling, loading) is in gpu.c; this file describes
 * the runtime and hipRTC to it and keeps what is HIP's own.
 *
 * Environment: AUTOTUNE_HIP_LIBRARY names the runtime to dlopen instead of "libamdhip64.so.7"
 * (then .so.6, .so.5, .so); AUTOTUNE_HIPRTC_LIBRARY names hipRTC instead of "libhiprtc.so.7"
 * (then libhiprtc.so.6, libhiprtc.so, and libamdhip64.so.5 / .so, which carry hipRTC on ROCm 5).
 * When set, only that path is tried. Each is read once, at the first use of its library.
 *
 * probe() needs the runtime with a device and hipRTC; open_target() needs only hipRTC. Resources
 * (VGPRs, AGPRs, SGPRs, LDS, scratch, spills) come from the code object's metadata note
 * (hip_meta.c), for compiled and for loaded binaries alike.
 *
 * Targets the compiler crashes on (ROCm 5.2's hipRTC aborts on gfx940/941/942 and gfx11xx) are
 * found by compiling a probe kernel for the target in a child process, once per target: a crash
 * there becomes "compiler does not support this target" instead of killing the tool.
 *
 * Not verified on hardware (no AMD GPU where this was written): everything after compiling —
 * device properties, module loading, launches, events, faults. See docs/hip.md. */
#define _GNU_SOURCE
#include "gpu.h"
#include "hip_meta.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the few HIP and hipRTC declarations we need (values from hip_runtime_api.h, ROCm 5.2;
 * the attribute numbers are the same in ROCm 6) ---------------------------------------------- */

typedef int hipError_t; /* an enum; hipSuccess = 0 */
typedef int hipDevice_t;
typedef void *hipDeviceptr_t;

typedef enum hipDeviceAttribute_t {
    hipDeviceAttributeClockRate = 5, /* kHz */
    hipDeviceAttributeL2CacheSize = 19,
    hipDeviceAttributeMaxBlockDimX = 26,
    hipDeviceAttributeMaxBlockDimY = 27,
    hipDeviceAttributeMaxBlockDimZ = 28,
    hipDeviceAttributeMaxThreadsPerBlock = 56,
    hipDeviceAttributeMultiprocessorCount = 63,
    hipDeviceAttributeMaxRegistersPerBlock = 71,
    hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
    hipDeviceAttributeWarpSize = 87,
} hipDeviceAttribute_t;

/* hipDeviceProp_t as hipGetDeviceProperties fills it: the R0000 layout, which ROCm 6 and later
 * keep under that exported name (their headers map the plain name to ...R0600). Only the name
 * (offset 0) and gcnArchName are read; the buffer is larger than the struct (792 bytes). */
#define AT_HIP_PROPS_BYTES       4096
#define AT_HIP_PROP_GCN_ARCHNAME 396 /* offsetof(hipDeviceProp_t, gcnArchName), ROCm 5.2 */

/* hipRTC results are int: HIPRTC_SUCCESS = 0 */
typedef void *hiprtcProgram;
#define AT_HIPRTC_SUCCESS 0

/* ---- symbol tables ------------------------------------------------------------------------ */

/* The runtime calls this file makes itself: X(field, exported symbol, return type, parameters). */
#define AT_HIP_SYMBOLS(X)                                                                          \
    X(hipDriverGetVersion, "hipDriverGetVersion", hipError_t, (int *))                             \
    X(hipSetDevice, "hipSetDevice", hipError_t, (int))                                             \
    X(hipDeviceGet, "hipDeviceGet", hipError_t, (hipDevice_t *, int))                              \
    X(hipDeviceGetName, "hipDeviceGetName", hipError_t, (char *, int, hipDevice_t))                \
    X(hipDeviceGetAttribute, "hipDeviceGetAttribute", hipError_t,                                  \
      (int *, hipDeviceAttribute_t, int))                                                          \
    X(hipGetDeviceProperties, "hipGetDeviceProperties", hipError_t, (void *, int))                 \
    X(hipDeviceTotalMem, "hipDeviceTotalMem", hipError_t, (size_t *, hipDevice_t))                 \
    X(hipMemcpyHtoD, "hipMemcpyHtoD", hipError_t, (hipDeviceptr_t, void *, size_t))                \
    X(hipMemcpyDtoH, "hipMemcpyDtoH", hipError_t, (void *, hipDeviceptr_t, size_t))

/* The runtime calls gpu.c makes, which have its signature: X(slot of AT_GPU_CALLS, symbol). */
#define AT_HIP_SHARED(X)                                                                           \
    X(init, "hipInit")                                                                             \
    X(version, "hipRuntimeGetVersion") /* HIP_VERSION: major * 10^7 + minor * 10^5 + patch */      \
    X(device_count, "hipGetDeviceCount")                                                           \
    X(device_sync, "hipDeviceSynchronize")                                                         \
    X(stream_create, "hipStreamCreate")                                                            \
    X(stream_sync, "hipStreamSynchronize")                                                         \
    X(stream_destroy, "hipStreamDestroy")                                                          \
    X(event_create, "hipEventCreate")                                                              \
    X(event_destroy, "hipEventDestroy")                                                            \
    X(event_record, "hipEventRecord")                                                              \
    X(event_sync, "hipEventSynchronize")                                                           \
    X(event_elapsed, "hipEventElapsedTime")                                                        \
    X(mem_alloc, "hipMalloc")                                                                      \
    X(mem_free, "hipFree")                                                                         \
    X(fill, "hipMemsetD8Async")                                                                    \
    X(module_load, "hipModuleLoadData")                                                            \
    X(module_unload, "hipModuleUnload")                                                            \
    X(module_function, "hipModuleGetFunction")                                                     \
    X(launch, "hipModuleLaunchKernel")

/* hipRTC's, likewise: all have gpu.h's signature (AT_GPU_RTC_CALLS). */
#define AT_HIPRTC_SHARED(X)                                                                        \
    X(version, "hiprtcVersion")                                                                    \
    X(create, "hiprtcCreateProgram")                                                               \
    X(destroy, "hiprtcDestroyProgram")                                                             \
    X(compile, "hiprtcCompileProgram")                                                             \
    X(log_size, "hiprtcGetProgramLogSize")                                                         \
    X(log, "hiprtcGetProgramLog")                                                                  \
    X(code_size, "hiprtcGetCodeSize")                                                              \
    X(code, "hiprtcGetCode")

static struct {
    AT_HIP_SYMBOLS(AT_DL_FIELD)
} hip;

static at_gpu_api g_hip; /* the runtime, as gpu.c sees it (defined below) */
static at_gpu_rtc g_rtc; /* hipRTC */

/* ---- devices, errors and what differs ------------------------------------------------------ */

struct at_bdev {
    at_gpu_dev gpu; /* first: what gpu.c uses */
    int idx;        /* the HIP device ordinal */
};

/* A failed runtime call: status s, message "HIP <call> failed: <hipError name>". */
static at_status hip_fail(at_status s, const char *call, hipError_t r)
{
    return at_gpu_api_fail(&g_hip, s, call, "", r);
}

static int hip_activate(at_bdev *d) { return hip.hipSetDevice(d->idx); }

/* Copies wait for our stream first, so they are ordered with the kernels queued on it whatever
 * the runtime's null-stream semantics. */
static int hip_copy_in(void *stream, void *dst, size_t off, const void *src, size_t bytes)
{
    hipError_t r = g_hip.fn.stream_sync(stream);
    return r != 0 ? r : hip.hipMemcpyHtoD((char *)dst + off, (void *)(uintptr_t)src, bytes);
}

static int hip_copy_out(void *stream, void *dst, const void *src, size_t off, size_t bytes)
{
    hipError_t r = g_hip.fn.stream_sync(stream);
    return r != 0 ? r : hip.hipMemcpyDtoH(dst, (char *)(uintptr_t)src + off, bytes);
}

/* The calls gpu.c makes that this file wraps: X(slot, the runtime call it makes, the wrapper). */
#define AT_HIP_WRAPPED(X)                                                                          \
    X(activate, "hipSetDevice", hip_activate)                                                      \
    X(copy_in, "hipMemcpyHtoD", hip_copy_in)                                                       \
    X(copy_out, "hipMemcpyDtoH", hip_copy_out)

/* Reads the kernel's metadata from p's code object: AT_ERR_COMPILE if the kernel is not in it.
 * The metadata names every kernel, so a missing (or mangled) one is a compile error here, and a
 * damaged binary is refused before the runtime sees it. */
static at_status read_meta(at_bprog *p)
{
    at_amdgpu_kernel_meta *m = malloc(sizeof *m);
    if (!m) return at_fail(AT_ERR_NO_MEMORY, "out of memory reading the metadata of %s", p->name);
    char why[256];
    if (at_amdgpu_read_meta(p->code, p->code_len, p->name, m, why, sizeof why) != 0) {
        free(m);
        return at_fail(AT_ERR_COMPILE, "code object for %s: %s%s", p->name, why,
                       strstr(why, "no kernel") ? " (declare it extern \"C\" __global__)" : "");
    }
    free(p->meta);
    p->meta = m;
    return AT_OK;
}

/* hiprtcVersion alone does not tell ROCm releases apart (Debian's ROCm 5.2 answers 9.0), so the
 * version also names the library file the compiler lives in, which carries the release:
 * "hipRTC 9.0 (libamdhip64.so.5.2.21153)". */
static int rtc_start(at_gpu_lib *l, const char *used)
{
    if (at_gpu_rtc_start(l, used) != 0) return -1;
    const char *file = used;
    char real[PATH_MAX];
    Dl_info di;
    void *sym = NULL;
    memcpy(&sym, &g_rtc.fn.compile, sizeof sym);
    if (dladdr(sym, &di) && di.dli_fname && realpath(di.dli_fname, real)) {
        const char *slash = strrchr(real, '/');
        file = slash ? slash + 1 : real;
    }
    size_t n = strlen(g_rtc.version);
    snprintf(g_rtc.version + n, sizeof g_rtc.version - n, " (%s)", file);
    return 0;
}

/* ---- the runtime and hipRTC, described to gpu.c ------------------------------------------- */

#define AT_HIP_OWN_ROW(field, sym, ret, params) {sym, &hip.field},
#define AT_HIP_SHARED_ROW(slot, sym)            {sym, &g_hip.fn.slot},
#define AT_RTC_SHARED_ROW(slot, sym)            {sym, &g_rtc.fn.slot},

static const at_dl_sym g_hip_syms[] = {{"hipGetErrorName", &g_hip.error_name},
                                       AT_HIP_SYMBOLS(AT_HIP_OWN_ROW)
                                           AT_HIP_SHARED(AT_HIP_SHARED_ROW)};
static const at_dl_sym g_rtc_syms[] = {
    AT_HIPRTC_SHARED(AT_RTC_SHARED_ROW){"hiprtcGetErrorString", &g_rtc.error_name}};
static const char *const g_hip_names[] = {"libamdhip64.so.7", "libamdhip64.so.6",
                                          "libamdhip64.so.5", "libamdhip64.so", NULL};
static const char *const g_rtc_names[] = {"libhiprtc.so.7",   "libhiprtc.so.6", "libhiprtc.so",
                                          "libamdhip64.so.5", "libamdhip64.so", NULL};
/* ROCm's folders, for a runtime not on the loader's path. */
static const char *const g_hip_places[] = {"$ROCM_PATH/lib", "$HIP_PATH/lib", "/opt/rocm/lib",
                                           "/opt/rocm-*/lib", NULL};
static const char *const g_rtc_fixed[] = {"-O3", "-std=c++17", NULL};
/* ROCm 5.2's hipRTC is not thread-safe: concurrent compiles from the pool corrupted its heap
 * ("double free or corruption" during a whole-space compile), so compiles take turns. */
static pthread_mutex_t g_compile_mu = PTHREAD_MUTEX_INITIALIZER;

static at_gpu_api g_hip = {
    .lib = AT_GPU_LIB("HIP", "AUTOTUNE_HIP_LIBRARY", g_hip_names, g_hip_places, g_hip_syms,
                      at_gpu_runtime_start),
    .fn = {AT_HIP_WRAPPED(AT_GPU_WRAPPER)}, /* the rest from the library (g_hip_syms) */
    .call = {AT_HIP_SHARED(AT_GPU_SYMBOL_NAME) AT_HIP_WRAPPED(AT_GPU_WRAPPER_NAME)},
    .provider = "the HIP runtime",
    .verify = read_meta,
};

/* hipRTC, on its own: compiling needs no device. The caller's -D options are not passed on but
 * become #define lines before the source: hipRTC on ROCm 5 pre-includes the HIP headers, and a
 * -D of a name those headers use (a template parameter named V, say) would break them; in the
 * source, after them, it cannot. (ROCm 6 and later behave the same with either form.) */
static at_gpu_rtc g_rtc = {
    .lib = AT_GPU_LIB("hipRTC", "AUTOTUNE_HIPRTC_LIBRARY", g_rtc_names, g_hip_places, g_rtc_syms,
                      rtc_start),
    .call = {AT_HIPRTC_SHARED(AT_GPU_SYMBOL_NAME)},
    .file_ext = ".hip",
    .arch_flag = "--offload-arch=",
    .fixed = g_rtc_fixed,
    .code_name = "code object",
    .version_name = "hipRTC",
    .defines_in_source = true,
    .serial = &g_compile_mu,
};

/* Usable means a device to run on and a compiler for it. */
static at_status hip_probe(char *why, size_t whylen)
{
    return at_gpu_probe(&g_hip, &g_rtc, why, whylen);
}

static int hip_device_count(void) { return hip_probe(NULL, 0) == AT_OK ? g_hip.ndevs : 0; }

/* ---- targets ------------------------------------------------------------------------------ */

/* The processors open_target() accepts, with what every device of one has. regs: VGPRs x lanes
 * x SIMDs of a CU that one work-group may use (gfx90a/gfx94x: a unified file of 512 VGPRs per
 * lane; gfx908: 256 architectural VGPRs, the AGPRs apart; RDNA: unknown here, 0). */
static const struct target {
    const char *name;
    int wave;
    int64_t lds;
    int64_t regs;
} g_targets[] = {
    {"gfx908", 64, 65536, 256 * 64 * 4}, {"gfx90a", 64, 65536, 512 * 64 * 4},
    {"gfx940", 64, 65536, 512 * 64 * 4}, {"gfx941", 64, 65536, 512 * 64 * 4},
    {"gfx942", 64, 65536, 512 * 64 * 4}, {"gfx1030", 32, 65536, 0},
    {"gfx1100", 32, 65536, 0},
};
#define AT_TARGETS_TEXT                                                                            \
    "gfx908, gfx90a, gfx940, gfx941, gfx942, gfx1030, gfx1100, each optionally with feature "      \
    "suffixes such as :sramecc+:xnack-"

/* The entry for arch ("gfx90a:sramecc+:xnack-": processor, then :feature+ or :feature-), or
 * NULL when the processor is unknown or a suffix is malformed. */
static const struct target *find_target(const char *arch)
{
    size_t base = strcspn(arch, ":");
    const struct target *t = NULL;
    for (size_t i = 0; i < sizeof g_targets / sizeof g_targets[0]; i++)
        if (strlen(g_targets[i].name) == base && strncmp(arch, g_targets[i].name, base) == 0)
            t = &g_targets[i];
    for (const char *p = arch + base; t && *p;) {
        p++; /* the ':' */
        size_t n = strcspn(p, ":+-");
        bool feature =
            (n == 7 && strncmp(p, "sramecc", 7) == 0) || (n == 5 && strncmp(p, "xnack", 5) == 0);
        if (!feature || (p[n] != '+' && p[n] != '-')) return NULL;
        p += n + 1;
        if (*p && *p != ':') return NULL;
    }
    return t;
}

/* ---- the crash probe ---------------------------------------------------------------------- */

static const char g_probe_src[] =
    "extern \"C\" __global__ void at_probe(float *x) { x[0] = 1.0f; }";

/* Compiles a trivial kernel for arch in a child process, once per target per process: AT_OK if
 * it compiled; AT_ERR_UNSUPPORTED if hipRTC crashed or refused the target. */
static at_status probe_target(const char *arch)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        char arch[64];
        at_status status;
        char why[256];
    } cache[16];
    static int ncache;

    pthread_mutex_lock(&mu);
    for (int i = 0; i < ncache; i++) {
        if (strcmp(cache[i].arch, arch) == 0) {
            at_status s = cache[i].status;
            char why[256];
            snprintf(why, sizeof why, "%s", cache[i].why);
            pthread_mutex_unlock(&mu);
            return s == AT_OK ? AT_OK : at_fail(s, "%s", why);
        }
    }
    char opt[96], why[256] = "";
    snprintf(opt, sizeof opt, "--offload-arch=%s", arch);
    at_status s = AT_OK;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* the child: its crash report would only confuse, so it goes nowhere */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, STDERR_FILENO);
            dup2(null, STDOUT_FILENO);
        }
        hiprtcProgram prog = NULL;
        const char *argv[] = {opt};
        size_t len = 0;
        int ok = g_rtc.fn.create(&prog, g_probe_src, "at_probe.hip", 0, NULL, NULL) ==
                     AT_HIPRTC_SUCCESS &&
                 g_rtc.fn.compile(prog, 1, argv) == AT_HIPRTC_SUCCESS &&
                 g_rtc.fn.code_size(prog, &len) == AT_HIPRTC_SUCCESS && len > 0;
        _exit(ok ? 0 : 3);
    }
    int st = 0;
    if (pid < 0) {
        snprintf(why, sizeof why, "cannot fork to probe hipRTC on target %s", arch);
        s = AT_ERR_NO_MEMORY;
    } else if (waitpid(pid, &st, 0) != pid) {
        snprintf(why, sizeof why, "lost the hipRTC probe process for target %s", arch);
        s = AT_ERR_COMPILE;
    } else if (WIFSIGNALED(st)) {
        snprintf(why, sizeof why,
                 "compiler does not support this target: %s crashed (signal %d) compiling a "
                 "probe kernel for %s",
                 g_rtc.version, WTERMSIG(st), arch);
        s = AT_ERR_UNSUPPORTED;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(why, sizeof why,
                 "compiler does not support this target: %s cannot compile a probe kernel for %s",
                 g_rtc.version, arch);
        s = AT_ERR_UNSUPPORTED;
    }
    if (s != AT_ERR_NO_MEMORY && ncache < (int)(sizeof cache / sizeof cache[0])) {
        snprintf(cache[ncache].arch, sizeof cache[ncache].arch, "%s", arch);
        cache[ncache].status = s;
        snprintf(cache[ncache].why, sizeof cache[ncache].why, "%s", why);
        ncache++;
    }
    pthread_mutex_unlock(&mu);
    return s == AT_OK ? AT_OK : at_fail(s, "%s", why);
}

/* ---- device properties -------------------------------------------------------------------- */

static at_status check_index(int idx)
{
    AT_TRY(hip_probe(NULL, 0));
    if (idx < 0 || idx >= g_hip.ndevs)
        return at_fail(AT_ERR_NO_DEVICE, "no HIP device %d (%d found)", idx, g_hip.ndevs);
    return AT_OK;
}

static int64_t dev_attr(int idx, int a)
{
    int v = 0;
    return hip.hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)a, idx) == 0 ? (int64_t)v : 0;
}

/* The full target of device idx ("gfx942:sramecc+:xnack-") from its gcnArchName. */
static at_status device_arch(int idx, char *dst, size_t cap)
{
    static char props[AT_HIP_PROPS_BYTES];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    memset(props, 0, sizeof props);
    hipError_t r = hip.hipGetDeviceProperties(props, idx);
    props[AT_HIP_PROP_GCN_ARCHNAME + 255] = '\0';
    snprintf(dst, cap, "%s", props + AT_HIP_PROP_GCN_ARCHNAME);
    pthread_mutex_unlock(&mu);
    if (r != 0) return hip_fail(AT_ERR_NO_DEVICE, "hipGetDeviceProperties", r);
    if (strncmp(dst, "gfx", 3) != 0)
        return at_fail(AT_ERR_NO_DEVICE, "HIP device %d reports no gfx architecture ('%.32s')", idx,
                       dst);
    return AT_OK;
}

static const at_gpu_attrs g_attrs = {
    .compute_units = hipDeviceAttributeMultiprocessorCount,
    .max_threads = hipDeviceAttributeMaxThreadsPerBlock,
    .block_x = hipDeviceAttributeMaxBlockDimX,
    .block_y = hipDeviceAttributeMaxBlockDimY,
    .block_z = hipDeviceAttributeMaxBlockDimZ,
    .shared = hipDeviceAttributeMaxSharedMemoryPerBlock,
    .registers = hipDeviceAttributeMaxRegistersPerBlock,
    .l2 = hipDeviceAttributeL2CacheSize,
    .clock_khz = hipDeviceAttributeClockRate,
    .warp = hipDeviceAttributeWarpSize,
};

int64_t at_hip_last_level_cache(const char *arch, int64_t l2)
{
    /* The memory-side Infinity Cache (MALL) per family, the largest part of each: MI300A/X
     * (gfx940-942) and MI350/355X (gfx950) 256 MiB; RDNA2 (gfx103x) up to 128 MiB, RDNA3 (gfx110x)
     * up to 96, RDNA4 (gfx120x) 64. CDNA1/2 (gfx908, gfx90a) have none: their L2 is the last level.
     */
    static const struct {
        const char *prefix;
        int64_t mib;
    } mall[] = {{"gfx94", 256}, {"gfx95", 256}, {"gfx103", 128}, {"gfx110", 96}, {"gfx120", 64}};
    int64_t llc = l2 > 0 ? l2 : 0;
    for (size_t i = 0; arch && i < sizeof mall / sizeof mall[0]; i++)
        if (strncmp(arch, mall[i].prefix, strlen(mall[i].prefix)) == 0 && mall[i].mib << 20 > llc)
            llc = mall[i].mib << 20;
    return llc;
}

static at_status hip_device_info(int idx, at_device_info *out)
{
    AT_TRY(check_index(idx));
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "hip");
    hipDevice_t dev = 0;
    hipError_t r = hip.hipDeviceGet(&dev, idx);
    if (r == 0) r = hip.hipDeviceGetName(out->name, (int)sizeof out->name - 1, dev);
    if (r != 0) return hip_fail(AT_ERR_NO_DEVICE, "hipDeviceGetName", r);
    out->name[sizeof out->name - 1] = '\0';
    AT_TRY(device_arch(idx, out->arch, sizeof out->arch));
    snprintf(out->vendor, sizeof out->vendor, "AMD");
    snprintf(out->driver, sizeof out->driver, "HIP runtime %d.%d.%d", g_hip.version / 10000000,
             (g_hip.version / 100000) % 100, g_hip.version % 100000);
    size_t total = 0;
    if (hip.hipDeviceTotalMem(&total, dev) != 0) total = 0;
    at_gpu_device_limits(out, &g_attrs, dev_attr, idx, (int64_t)total);
    out->max_shared_optin = out->local_mem_bytes; /* AMD has no opt-in beyond the block's LDS */
    /* HIP reports the L2 only (4 MiB on MI300X); the timing flush must cover the Infinity Cache */
    out->l2_bytes = at_hip_last_level_cache(out->arch, out->l2_bytes);
    /* A tuned result holds for one architecture with its features, CU count, LDS and wave. */
    snprintf(out->key, sizeof out->key, "hip/%s/%s/%lld/lds%lld/w%lld", out->arch, out->name,
             (long long)out->compute_units, (long long)out->local_mem_bytes,
             (long long)out->warp_size);
    return AT_OK;
}

/* ---- open device or target ---------------------------------------------------------------- */

static void hip_close(at_bdev *d)
{
    if (d && !d->gpu.compile_only && hip_activate(d) == 0) at_gpu_dev_stop(d);
    at_gpu_dev_free(d);
}

/* Device idx on stream (NULL: one of ours). */
static at_status open_on(int idx, void *stream, at_bdev **out)
{
    *out = NULL;
    AT_TRY(check_index(idx));
    char arch[64];
    at_status s = device_arch(idx, arch, sizeof arch);
    at_bdev *d = NULL;
    if (s == AT_OK) s = at_gpu_dev_new(sizeof *d, &g_hip, &g_rtc, arch, false, &d);
    if (s != AT_OK) return s;
    d->idx = idx;
    d->gpu.stream = stream;
    d->gpu.borrowed_stream = stream != NULL;
    s = probe_target(d->gpu.arch);           /* hipRTC is loaded: check_index probed it */
    if (s == AT_OK) s = at_gpu_dev_start(d); /* current, stream, events */
    if (s != AT_OK) {
        hip_close(d);
        return s;
    }
    *out = d;
    return AT_OK;
}

static at_status hip_open(int idx, at_bdev **out) { return open_on(idx, NULL, out); }

/* The caller's stream (required) on the device it names: HIP has no context object, and the
 * device of a stream is not asked of the runtime (hipStreamGetDevice is ROCm 6), so the index
 * must be given. */
static at_status hip_open_native(void *context, void *queue, int *idx, at_bdev **out)
{
    *out = NULL;
    if (context)
        return at_fail(AT_ERR_INVALID_ARG, "HIP has no context object: native_context must be "
                                           "NULL (native_queue is the hipStream_t)");
    if (!queue)
        return at_fail(AT_ERR_INVALID_ARG,
                       "HIP: native_queue (a hipStream_t) is needed with native handles");
    if (*idx < 0)
        return at_fail(AT_ERR_INVALID_ARG,
                       "HIP: device must be the index of the native stream's device (not -1)");
    return open_on(*idx, queue, out);
}

/* The limits every device of a target shares (AMD CDNA/RDNA ISA guides), for compiling and
 * checking candidates without a device. */
static void target_limits(const struct target *t, const char *arch, at_device_info *out)
{
    at_gpu_target_info(out, "hip", "AMD", arch);
    out->max_work_item_sizes[2] = 1024;
    out->local_mem_bytes = t->lds;
    out->max_shared_optin = t->lds;
    out->max_registers_per_block = t->regs;
    out->warp_size = t->wave;
}

static at_status hip_open_target(const char *arch, at_device_info *info, at_bdev **out)
{
    *out = NULL;
    const struct target *t = arch && strlen(arch) < 64 ? find_target(arch) : NULL;
    if (!t)
        return at_fail(AT_ERR_INVALID_ARG,
                       "unknown HIP target '%s' (accepted: " AT_TARGETS_TEXT ")",
                       arch ? arch : "(null)");
    AT_TRY(at_gpu_lib_load(&g_rtc.lib));
    AT_TRY(probe_target(arch));
    AT_TRY(at_gpu_dev_new(sizeof **out, &g_hip, &g_rtc, arch, true, out));
    if (info) target_limits(t, arch, info);
    return AT_OK;
}

/* From the code object's metadata, for compiled and loaded programs alike. */
static at_status hip_resources(at_bprog *p, at_resources *out)
{
    *out = (at_resources){-1, -1, -1, -1, -1, 0};
    if (!p) return at_fail(AT_ERR_INVALID_ARG, "resources: NULL program");
    if (!p->meta) return at_fail(AT_ERR_UNSUPPORTED, "no metadata for kernel %s", p->name);
    at_amdgpu_meta_resources(p->meta, out);
    return AT_OK;
}

/* HIP has no context object to hand out (the device is the calling thread's current one). An
 * error that survives a device-wide synchronisation (check(), in gpu.c) means the device is
 * unusable for this context; the caller recycles it. (A GPU memory fault may instead end the
 * process: the HSA runtime's default reaction; see docs/hip.md.) */
static void *hip_native_context(at_bdev *d)
{
    (void)d;
    return NULL;
}

const at_backend_ops at_hip_backend = {
    .name = "hip",
    .probe = hip_probe,
    .device_count = hip_device_count,
    .device_info = hip_device_info,
    .open = hip_open,
    .open_native = hip_open_native,
    .open_target = hip_open_target,
    .close = hip_close,
    .resources = hip_resources,
    .native_context = hip_native_context,
    AT_GPU_BACKEND_SLOTS,
};
