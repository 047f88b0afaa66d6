/* hip.c — the HIP backend: hipRTC compiles to an AMDGPU code object for an explicit gfx target
 * with no device needed; the HIP runtime (libamdhip64) loads modules, moves buffers and times
 * kernels with events. Both are loaded with dlopen and no ROCm header is needed to build.
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
#include "hip_meta.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;

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

typedef int hiprtcResult; /* HIPRTC_SUCCESS = 0 */
typedef struct _hiprtcProgram *hiprtcProgram;
#define AT_HIPRTC_SUCCESS 0

/* ---- symbol tables ------------------------------------------------------------------------ */

/* X(field, exported symbol, return type, parameters) */
#define AT_HIP_SYMBOLS(X)                                                                          \
    X(hipGetErrorName, "hipGetErrorName", const char *, (hipError_t))                              \
    X(hipInit, "hipInit", hipError_t, (unsigned int))                                              \
    X(hipRuntimeGetVersion, "hipRuntimeGetVersion", hipError_t, (int *))                           \
    X(hipDriverGetVersion, "hipDriverGetVersion", hipError_t, (int *))                             \
    X(hipGetDeviceCount, "hipGetDeviceCount", hipError_t, (int *))                                 \
    X(hipSetDevice, "hipSetDevice", hipError_t, (int))                                             \
    X(hipDeviceGet, "hipDeviceGet", hipError_t, (hipDevice_t *, int))                              \
    X(hipDeviceGetName, "hipDeviceGetName", hipError_t, (char *, int, hipDevice_t))                \
    X(hipDeviceGetAttribute, "hipDeviceGetAttribute", hipError_t,                                  \
      (int *, hipDeviceAttribute_t, int))                                                          \
    X(hipGetDeviceProperties, "hipGetDeviceProperties", hipError_t, (void *, int))                 \
    X(hipDeviceTotalMem, "hipDeviceTotalMem", hipError_t, (size_t *, hipDevice_t))                 \
    X(hipDeviceSynchronize, "hipDeviceSynchronize", hipError_t, (void))                            \
    X(hipStreamCreate, "hipStreamCreate", hipError_t, (hipStream_t *))                             \
    X(hipStreamDestroy, "hipStreamDestroy", hipError_t, (hipStream_t))                             \
    X(hipStreamSynchronize, "hipStreamSynchronize", hipError_t, (hipStream_t))                     \
    X(hipEventCreate, "hipEventCreate", hipError_t, (hipEvent_t *))                                \
    X(hipEventDestroy, "hipEventDestroy", hipError_t, (hipEvent_t))                                \
    X(hipEventRecord, "hipEventRecord", hipError_t, (hipEvent_t, hipStream_t))                     \
    X(hipEventSynchronize, "hipEventSynchronize", hipError_t, (hipEvent_t))                        \
    X(hipEventElapsedTime, "hipEventElapsedTime", hipError_t, (float *, hipEvent_t, hipEvent_t))   \
    X(hipModuleLoadData, "hipModuleLoadData", hipError_t, (hipModule_t *, const void *))           \
    X(hipModuleUnload, "hipModuleUnload", hipError_t, (hipModule_t))                               \
    X(hipModuleGetFunction, "hipModuleGetFunction", hipError_t,                                    \
      (hipFunction_t *, hipModule_t, const char *))                                                \
    X(hipModuleLaunchKernel, "hipModuleLaunchKernel", hipError_t,                                  \
      (hipFunction_t, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,        \
       unsigned int, unsigned int, hipStream_t, void **, void **))                                 \
    X(hipMalloc, "hipMalloc", hipError_t, (void **, size_t))                                       \
    X(hipFree, "hipFree", hipError_t, (void *))                                                    \
    X(hipMemcpyHtoD, "hipMemcpyHtoD", hipError_t, (hipDeviceptr_t, void *, size_t))                \
    X(hipMemcpyDtoH, "hipMemcpyDtoH", hipError_t, (void *, hipDeviceptr_t, size_t))                \
    X(hipMemsetD8Async, "hipMemsetD8Async", hipError_t,                                            \
      (hipDeviceptr_t, unsigned char, size_t, hipStream_t))

#define AT_HIPRTC_SYMBOLS(X)                                                                       \
    X(hiprtcVersion, "hiprtcVersion", hiprtcResult, (int *, int *))                                \
    X(hiprtcGetErrorString, "hiprtcGetErrorString", const char *, (hiprtcResult))                  \
    X(hiprtcCreateProgram, "hiprtcCreateProgram", hiprtcResult,                                    \
      (hiprtcProgram *, const char *, const char *, int, const char *const *,                      \
       const char *const *))                                                                       \
    X(hiprtcDestroyProgram, "hiprtcDestroyProgram", hiprtcResult, (hiprtcProgram *))               \
    X(hiprtcCompileProgram, "hiprtcCompileProgram", hiprtcResult,                                  \
      (hiprtcProgram, int, const char *const *))                                                   \
    X(hiprtcGetCodeSize, "hiprtcGetCodeSize", hiprtcResult, (hiprtcProgram, size_t *))             \
    X(hiprtcGetCode, "hiprtcGetCode", hiprtcResult, (hiprtcProgram, char *))                       \
    X(hiprtcGetProgramLogSize, "hiprtcGetProgramLogSize", hiprtcResult, (hiprtcProgram, size_t *)) \
    X(hiprtcGetProgramLog, "hiprtcGetProgramLog", hiprtcResult, (hiprtcProgram, char *))

#define AT_DL_FIELD(field, sym, ret, params) ret(*field) params;
static struct {
    AT_HIP_SYMBOLS(AT_DL_FIELD)
} hip;
static struct {
    AT_HIPRTC_SYMBOLS(AT_DL_FIELD)
} rtc;
#undef AT_DL_FIELD

/* ---- error names -------------------------------------------------------------------------- */

/* The library's own name for error r ("hipErrorInvalidDevice"), else "<api> error <r>". Both
 * libraries number their errors as int. */
static const char *errname(const char *(*name_of)(int), const char *api, int r, char buf[32])
{
    const char *s = name_of ? name_of(r) : NULL;
    if (s) return s;
    snprintf(buf, 32, "%s error %d", api, r);
    return buf;
}
#define hip_errname(r, buf) errname(hip.hipGetErrorName, "HIP", (r), (buf))
#define rtc_errname(r, buf) errname(rtc.hiprtcGetErrorString, "hipRTC", (r), (buf))

/* A failed call: status s, message "<api> <call> failed: <error name>". */
static at_status api_fail(at_status s, const char *(*name_of)(int), const char *api,
                          const char *call, int r)
{
    char buf[32];
    return at_fail(s, "%s %s failed: %s", api, call, errname(name_of, api, r, buf));
}
#define hip_fail(s, call, r) api_fail((s), hip.hipGetErrorName, "HIP", (call), (r))
#define rtc_fail(s, call, r) api_fail((s), rtc.hiprtcGetErrorString, "hipRTC", (call), (r))

/* ---- loading ------------------------------------------------------------------------------ */

/* The runtime: loaded, initialised and with at least one device, or g_hip_why says why not. */
static pthread_once_t g_hip_once = PTHREAD_ONCE_INIT;
static at_status g_hip_status = AT_ERR_NO_BACKEND;
static char g_hip_why[1024];
static int g_ndevs;
static int g_runtime_version; /* HIP_VERSION: major * 10^7 + minor * 10^5 + patch */

static void hip_load_once(void)
{
    static const char *const names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
                                        "libamdhip64.so"};
    const char *used = NULL;
    void *lib = at_dl_open("AUTOTUNE_HIP_LIBRARY", names, sizeof names / sizeof names[0], &used,
                           g_hip_why, sizeof g_hip_why);
    if (!lib) return;
#define AT_HIP_LOAD(field, sym, ret, params)                                                       \
    if (at_dl_symbol(lib, used, sym, &hip.field, g_hip_why, sizeof g_hip_why) != 0) {              \
        memset(&hip, 0, sizeof hip);                                                               \
        dlclose(lib);                                                                              \
        return;                                                                                    \
    }
    AT_HIP_SYMBOLS(AT_HIP_LOAD)
#undef AT_HIP_LOAD

    char buf[32];
    hipError_t r = hip.hipInit(0);
    if (r != 0) { /* no device, no amdgpu kernel driver, no access to /dev/kfd... */
        snprintf(g_hip_why, sizeof g_hip_why, "hipInit failed: %s (%s)", hip_errname(r, buf), used);
        return;
    }
    if (hip.hipRuntimeGetVersion(&g_runtime_version) != 0) g_runtime_version = 0;
    int n = 0;
    r = hip.hipGetDeviceCount(&n);
    if (r != 0) {
        snprintf(g_hip_why, sizeof g_hip_why, "hipGetDeviceCount failed: %s", hip_errname(r, buf));
        return;
    }
    if (n <= 0) {
        snprintf(g_hip_why, sizeof g_hip_why, "the HIP runtime reports no device");
        return;
    }
    g_ndevs = n;
    g_hip_status = AT_OK;
    g_hip_why[0] = '\0';
}

static at_status ensure_hip(void)
{
    pthread_once(&g_hip_once, hip_load_once);
    if (g_hip_status != AT_OK) return at_fail(g_hip_status, "HIP unavailable: %s", g_hip_why);
    return AT_OK;
}

/* hipRTC, on its own: compiling needs no device. */
static pthread_once_t g_rtc_once = PTHREAD_ONCE_INIT;
static at_status g_rtc_status = AT_ERR_NO_BACKEND;
static char g_rtc_why[1024];
static char g_rtc_version[160]; /* "hipRTC 0.2112 (libamdhip64.so.5.2.21153)" */

static void rtc_load_once(void)
{
    static const char *const names[] = {"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so",
                                        "libamdhip64.so.5", "libamdhip64.so"};
    const char *used = NULL;
    void *lib = at_dl_open("AUTOTUNE_HIPRTC_LIBRARY", names, sizeof names / sizeof names[0], &used,
                           g_rtc_why, sizeof g_rtc_why);
    if (!lib) return;
#define AT_RTC_LOAD(field, sym, ret, params)                                                       \
    if (at_dl_symbol(lib, used, sym, &rtc.field, g_rtc_why, sizeof g_rtc_why) != 0) {              \
        memset(&rtc, 0, sizeof rtc);                                                               \
        dlclose(lib);                                                                              \
        return;                                                                                    \
    }
    AT_HIPRTC_SYMBOLS(AT_RTC_LOAD)
#undef AT_RTC_LOAD

    int major = 0, minor = 0;
    hiprtcResult r = rtc.hiprtcVersion(&major, &minor);
    if (r != AT_HIPRTC_SUCCESS) {
        char buf[32];
        snprintf(g_rtc_why, sizeof g_rtc_why, "hiprtcVersion failed: %s (%s)", rtc_errname(r, buf),
                 used);
        return;
    }
    /* hiprtcVersion alone does not tell ROCm releases apart (ROCm 5.2 answers 0.2112), so the
     * version also names the library file the compiler lives in, which carries the release. */
    const char *file = used;
    char real[PATH_MAX];
    Dl_info di;
    void *sym = NULL;
    memcpy(&sym, &rtc.hiprtcCompileProgram, sizeof sym);
    if (dladdr(sym, &di) && di.dli_fname && realpath(di.dli_fname, real)) {
        const char *slash = strrchr(real, '/');
        file = slash ? slash + 1 : real;
    }
    snprintf(g_rtc_version, sizeof g_rtc_version, "hipRTC %d.%d (%s)", major, minor, file);
    g_rtc_status = AT_OK;
    g_rtc_why[0] = '\0';
}

static at_status ensure_hiprtc(void)
{
    pthread_once(&g_rtc_once, rtc_load_once);
    if (g_rtc_status != AT_OK) return at_fail(g_rtc_status, "hipRTC unavailable: %s", g_rtc_why);
    return AT_OK;
}

/* Usable means a device to run on and a compiler for it. */
static at_status hip_probe(char *why, size_t whylen)
{
    at_status s = ensure_hip();
    const char *reason = g_hip_why;
    if (s == AT_OK) {
        s = ensure_hiprtc();
        reason = g_rtc_why;
    }
    if (why && whylen) snprintf(why, whylen, "%s", s == AT_OK ? "" : reason);
    return s;
}

static int hip_device_count(void) { return hip_probe(NULL, 0) == AT_OK ? g_ndevs : 0; }

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
        int ok = rtc.hiprtcCreateProgram(&prog, g_probe_src, "at_probe.hip", 0, NULL, NULL) ==
                     AT_HIPRTC_SUCCESS &&
                 rtc.hiprtcCompileProgram(prog, 1, argv) == AT_HIPRTC_SUCCESS &&
                 rtc.hiprtcGetCodeSize(prog, &len) == AT_HIPRTC_SUCCESS && len > 0;
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
                 g_rtc_version, WTERMSIG(st), arch);
        s = AT_ERR_UNSUPPORTED;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(why, sizeof why,
                 "compiler does not support this target: %s cannot compile a probe kernel for %s",
                 g_rtc_version, arch);
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
    if (idx < 0 || idx >= g_ndevs)
        return at_fail(AT_ERR_NO_DEVICE, "no HIP device %d (%d found)", idx, g_ndevs);
    return AT_OK;
}

static int64_t dev_attr(int idx, hipDeviceAttribute_t a)
{
    int v = 0;
    return hip.hipDeviceGetAttribute(&v, a, idx) == 0 ? (int64_t)v : 0;
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
    snprintf(out->driver, sizeof out->driver, "HIP runtime %d.%d.%d", g_runtime_version / 10000000,
             (g_runtime_version / 100000) % 100, g_runtime_version % 100000);
    out->compute_units = dev_attr(idx, hipDeviceAttributeMultiprocessorCount);
    out->max_work_group_size = dev_attr(idx, hipDeviceAttributeMaxThreadsPerBlock);
    out->max_work_item_sizes[0] = dev_attr(idx, hipDeviceAttributeMaxBlockDimX);
    out->max_work_item_sizes[1] = dev_attr(idx, hipDeviceAttributeMaxBlockDimY);
    out->max_work_item_sizes[2] = dev_attr(idx, hipDeviceAttributeMaxBlockDimZ);
    out->local_mem_bytes = dev_attr(idx, hipDeviceAttributeMaxSharedMemoryPerBlock);
    out->max_shared_optin = out->local_mem_bytes; /* AMD has no opt-in beyond the block's LDS */
    out->max_registers_per_block = dev_attr(idx, hipDeviceAttributeMaxRegistersPerBlock);
    out->l2_bytes = dev_attr(idx, hipDeviceAttributeL2CacheSize);
    size_t total = 0;
    if (hip.hipDeviceTotalMem(&total, dev) == 0) out->global_mem_bytes = (int64_t)total;
    out->max_alloc_bytes = out->global_mem_bytes;
    out->clock_mhz = dev_attr(idx, hipDeviceAttributeClockRate) / 1000;
    out->warp_size = dev_attr(idx, hipDeviceAttributeWarpSize);
    out->is_cpu = false;
    /* A tuned result holds for one architecture with its features, CU count, LDS and wave. */
    snprintf(out->key, sizeof out->key, "hip/%s/%s/%lld/lds%lld/w%lld", out->arch, out->name,
             (long long)out->compute_units, (long long)out->local_mem_bytes,
             (long long)out->warp_size);
    return AT_OK;
}

/* ---- open device or target ---------------------------------------------------------------- */

struct at_bdev {
    bool compile_only; /* from open_target(): no stream or events */
    char arch[64];     /* "gfx90a:sramecc+:xnack-": the --offload-arch of every compile */
    int idx;           /* the HIP device ordinal */
    hipStream_t stream;
    hipEvent_t ev_start, ev_end;
    pthread_mutex_t timing_mu; /* one pair of events: timed launches take turns */
    bool mu_ok;
};

struct at_bprog {
    at_bdev *dev;
    void *code; /* the code object (ELF) */
    size_t code_len;
    char *log; /* hipRTC's log (warnings); NULL for a loaded binary */
    at_amdgpu_kernel_meta meta;
    bool have_meta;
    hipModule_t module;
    hipFunction_t fn;
    char name[];
};

/* AT_OK if d runs kernels; a compile-only target answers AT_ERR_UNSUPPORTED. */
static at_status need_device(at_bdev *d, const char *what)
{
    if (!d) return at_fail(AT_ERR_INVALID_ARG, "%s: NULL device", what);
    if (d->compile_only)
        return at_fail(AT_ERR_UNSUPPORTED, "%s: the HIP target %s is compile-only (open_target)",
                       what, d->arch);
    hipError_t r = hip.hipSetDevice(d->idx); /* the calling thread may be new */
    return r == 0 ? AT_OK : hip_fail(AT_ERR_LAUNCH, "hipSetDevice", r);
}

static void hip_close(at_bdev *d)
{
    if (!d) return;
    if (!d->compile_only && hip.hipSetDevice(d->idx) == 0) {
        if (d->stream) hip.hipStreamSynchronize(d->stream);
        if (d->ev_start) hip.hipEventDestroy(d->ev_start);
        if (d->ev_end) hip.hipEventDestroy(d->ev_end);
        if (d->stream) hip.hipStreamDestroy(d->stream);
    }
    if (d->mu_ok) pthread_mutex_destroy(&d->timing_mu);
    free(d);
}

static at_status hip_open(int idx, at_bdev **out)
{
    *out = NULL;
    AT_TRY(check_index(idx));
    at_bdev *d = calloc(1, sizeof *d);
    if (!d) return at_fail(AT_ERR_NO_MEMORY, "out of memory opening HIP device %d", idx);
    d->idx = idx;
    if (pthread_mutex_init(&d->timing_mu, NULL) != 0) {
        free(d);
        return at_fail(AT_ERR_NO_MEMORY, "cannot create a mutex for HIP device %d", idx);
    }
    d->mu_ok = true;
    at_status s = device_arch(idx, d->arch, sizeof d->arch);
    if (s == AT_OK) s = ensure_hiprtc();
    if (s == AT_OK) s = probe_target(d->arch);
    const char *call = NULL;
    hipError_t r = 0;
    if (s != AT_OK) {
    } else if ((r = hip.hipSetDevice(idx)) != 0)
        call = "hipSetDevice";
    else if ((r = hip.hipStreamCreate(&d->stream)) != 0) {
        d->stream = NULL;
        call = "hipStreamCreate";
    } else if ((r = hip.hipEventCreate(&d->ev_start)) != 0) {
        d->ev_start = NULL;
        call = "hipEventCreate";
    } else if ((r = hip.hipEventCreate(&d->ev_end)) != 0) {
        d->ev_end = NULL;
        call = "hipEventCreate";
    }
    if (call) s = hip_fail(AT_ERR_NO_DEVICE, call, r);
    if (s != AT_OK) {
        hip_close(d);
        return s;
    }
    *out = d;
    return AT_OK;
}

/* The limits every device of a target shares (AMD CDNA/RDNA ISA guides), for compiling and
 * checking candidates without a device. */
static void target_limits(const struct target *t, const char *arch, at_device_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "hip");
    snprintf(out->name, sizeof out->name, "%s (compile only)", arch);
    snprintf(out->vendor, sizeof out->vendor, "AMD");
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    snprintf(out->key, sizeof out->key, "hip/%s/compile-only/0", arch);
    out->max_work_group_size = 1024;
    out->max_work_item_sizes[0] = out->max_work_item_sizes[1] = out->max_work_item_sizes[2] = 1024;
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
    AT_TRY(ensure_hiprtc());
    AT_TRY(probe_target(arch));
    at_bdev *d = calloc(1, sizeof *d);
    if (!d) return at_fail(AT_ERR_NO_MEMORY, "out of memory opening HIP target %s", arch);
    d->compile_only = true;
    snprintf(d->arch, sizeof d->arch, "%s", arch);
    if (info) target_limits(t, arch, info);
    *out = d;
    return AT_OK;
}

static const char *hip_compiler_version(at_bdev *d)
{
    (void)d;
    return g_rtc_status == AT_OK ? g_rtc_version : "";
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

static void hip_program_free(at_bprog *p)
{
    if (!p) return;
    if (p->module && hip.hipSetDevice(p->dev->idx) == 0) hip.hipModuleUnload(p->module);
    free(p->code);
    free(p->log);
    free(p);
}

/* Reads the kernel's metadata from p's code object: AT_ERR_COMPILE if the kernel is not in it. */
static at_status read_meta(at_bprog *p)
{
    char why[256];
    if (at_amdgpu_read_meta(p->code, p->code_len, p->name, &p->meta, why, sizeof why) != 0)
        return at_fail(AT_ERR_COMPILE, "code object for %s: %s%s", p->name, why,
                       strstr(why, "no kernel") ? " (declare it extern \"C\" __global__)" : "");
    p->have_meta = true;
    return AT_OK;
}

/* Loads p's code object on p's device and finds its kernel. */
static at_status load_module(at_bprog *p)
{
    at_bdev *d = p->dev;
    AT_TRY(need_device(d, "load"));
    hipError_t r = hip.hipModuleLoadData(&p->module, p->code);
    if (r != 0) {
        p->module = NULL;
        char buf[32];
        return at_fail(AT_ERR_COMPILE,
                       "HIP hipModuleLoadData (%zu-byte code object, device %s) "
                       "failed: %s",
                       p->code_len, d->arch, hip_errname(r, buf));
    }
    r = hip.hipModuleGetFunction(&p->fn, p->module, p->name);
    if (r != 0) {
        char buf[32];
        return at_fail(AT_ERR_COMPILE, "HIP hipModuleGetFunction(\"%s\") failed: %s", p->name,
                       hip_errname(r, buf));
    }
    return AT_OK;
}

/* hipRTC's log (malloc'd; NULL if it has none). */
static char *program_log(hiprtcProgram prog)
{
    size_t n = 0;
    if (rtc.hiprtcGetProgramLogSize(prog, &n) != AT_HIPRTC_SUCCESS || n == 0) return NULL;
    char *log = malloc(n + 1);
    if (!log) return NULL;
    if (rtc.hiprtcGetProgramLog(prog, log) != AT_HIPRTC_SUCCESS) n = 0;
    log[n] = '\0';
    return log;
}

/* The fixed options, then the caller's split on white space (its values hold no spaces). The
 * caller's -D options are not passed on but moved into *defines as #define lines to put before
 * the source: hipRTC on ROCm 5 pre-includes the HIP headers, and a -D of a name those headers
 * use (a template parameter named V, say) would break them; in the source, after them, it
 * cannot. (ROCm 6 and later behave the same with either form.) */
static const char **build_options(const char *arch_opt, char *user, int *argc, char **defines)
{
    static const char *const fixed[] = {"-O3", "-std=c++17"};
    size_t nfixed = sizeof fixed / sizeof fixed[0];
    size_t cap = 1 + nfixed + strlen(user) / 2 + 1;
    const char **argv = calloc(cap, sizeof *argv);
    if (!argv) return NULL;
    int n = 0;
    argv[n++] = arch_opt;
    for (size_t i = 0; i < nfixed; i++) argv[n++] = fixed[i];
    size_t dcap = strlen(user) * 2 + 64, dlen = 0;
    char *defs = malloc(dcap);
    if (!defs) {
        free(argv);
        return NULL;
    }
    defs[0] = '\0';
    char *save = NULL;
    for (char *tok = strtok_r(user, " \t\r\n", &save); tok;
         tok = strtok_r(NULL, " \t\r\n", &save)) {
        if (strncmp(tok, "-D", 2) != 0 || !tok[2]) {
            argv[n++] = tok;
            continue;
        }
        const char *eq = strchr(tok + 2, '=');
        int name_len = eq ? (int)(eq - tok - 2) : (int)strlen(tok + 2);
        dlen += (size_t)snprintf(defs + dlen, dcap - dlen, "#define %.*s %s\n", name_len, tok + 2,
                                 eq ? eq + 1 : "1");
    }
    *argc = n;
    *defines = defs;
    return argv;
}

static at_status hip_compile(at_bdev *d, const char *src, const char *options,
                             const char *kernel_name, at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !src || !kernel_name)
        return at_fail(AT_ERR_INVALID_ARG, "compile: NULL device, source or kernel name");
    AT_TRY(ensure_hiprtc());

    char arch_opt[96], file[128];
    snprintf(arch_opt, sizeof arch_opt, "--offload-arch=%s", d->arch);
    snprintf(file, sizeof file, "%s.hip", kernel_name);
    char *user = at_strdup(options ? options : ""), *defines = NULL, *full = NULL;
    int argc = 0;
    const char **argv = user ? build_options(arch_opt, user, &argc, &defines) : NULL;
    if (argv) full = at_asprintf("%s#line 1\n%s", defines, src);
    at_bprog *p = prog_new(d, kernel_name);
    if (!full || !p) {
        free(user);
        free(argv);
        free(defines);
        free(full);
        free(p);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory compiling %s", kernel_name);
    }

    /* ROCm 5.2's hipRTC is not thread-safe: concurrent compiles from the pool corrupted its heap
     * ("double free or corruption" during a whole-space compile), so compiles take turns. */
    static pthread_mutex_t compile_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&compile_mu);
    hiprtcProgram prog = NULL;
    at_status s = AT_OK;
    hiprtcResult r = rtc.hiprtcCreateProgram(&prog, full, file, 0, NULL, NULL);
    if (r != AT_HIPRTC_SUCCESS) {
        prog = NULL;
        s = rtc_fail(AT_ERR_COMPILE, "hiprtcCreateProgram", r);
        goto done;
    }
    r = rtc.hiprtcCompileProgram(prog, argc, argv);
    p->log = program_log(prog);
    if (r != AT_HIPRTC_SUCCESS) {
        char head[2048], buf[32];
        at_log_head(p->log, head, sizeof head);
        s = at_fail(AT_ERR_COMPILE, "hipRTC compile of %s for %s failed (%s)%s%s", kernel_name,
                    d->arch, rtc_errname(r, buf), head[0] ? ":\n" : "", head);
        if (log) {
            *log = p->log;
            p->log = NULL;
        }
        goto done;
    }
    size_t len = 0;
    if ((r = rtc.hiprtcGetCodeSize(prog, &len)) != AT_HIPRTC_SUCCESS) {
        s = rtc_fail(AT_ERR_COMPILE, "hiprtcGetCodeSize", r);
        goto done;
    }
    if (len == 0) {
        s = at_fail(AT_ERR_COMPILE, "hipRTC gave no code object for %s (target %s)", kernel_name,
                    d->arch);
        goto done;
    }
    if (!(p->code = malloc(len))) {
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory for a %zu-byte code object", len);
        goto done;
    }
    if ((r = rtc.hiprtcGetCode(prog, p->code)) != AT_HIPRTC_SUCCESS) {
        s = rtc_fail(AT_ERR_COMPILE, "hiprtcGetCode", r);
        goto done;
    }
    p->code_len = len;
    /* The metadata names every kernel: a missing (or mangled) one is a compile error here. */
    s = read_meta(p);
    if (s == AT_OK && !d->compile_only) s = load_module(p);

done:
    if (prog) rtc.hiprtcDestroyProgram(&prog);
    pthread_mutex_unlock(&compile_mu);
    free(argv);
    free(user);
    free(defines);
    free(full);
    if (s != AT_OK) {
        hip_program_free(p);
        return s;
    }
    *out = p;
    return AT_OK;
}

static at_status hip_program_binary(at_bprog *p, void **bin, size_t *len)
{
    *bin = NULL;
    *len = 0;
    if (!p || !p->code) return at_fail(AT_ERR_INVALID_ARG, "program_binary: no program");
    void *copy = malloc(p->code_len);
    if (!copy) return at_fail(AT_ERR_NO_MEMORY, "out of memory for a %zu-byte binary", p->code_len);
    memcpy(copy, p->code, p->code_len);
    *bin = copy;
    *len = p->code_len;
    return AT_OK;
}

static at_status hip_load_binary(at_bdev *d, const void *bin, size_t len, const char *kernel_name,
                                 at_bprog **out, char **log)
{
    *out = NULL;
    if (log) *log = NULL;
    if (!d || !kernel_name) return at_fail(AT_ERR_INVALID_ARG, "load_binary: NULL argument");
    AT_TRY(need_device(d, "load_binary"));
    if (!bin || len == 0) return at_fail(AT_ERR_COMPILE, "load_binary: empty binary");
    at_bprog *p = prog_new(d, kernel_name);
    if (!p || !(p->code = malloc(len))) {
        free(p);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory loading a %zu-byte binary", len);
    }
    memcpy(p->code, bin, len);
    p->code_len = len;
    at_status s = read_meta(p); /* a damaged binary is refused before the runtime sees it */
    if (s == AT_OK) s = load_module(p);
    if (s != AT_OK) {
        hip_program_free(p);
        return s;
    }
    *out = p;
    return AT_OK;
}

/* From the code object's metadata, for compiled and loaded programs alike. */
static at_status hip_resources(at_bprog *p, at_resources *out)
{
    *out = (at_resources){-1, -1, -1, -1, -1, 0};
    if (!p) return at_fail(AT_ERR_INVALID_ARG, "resources: NULL program");
    if (!p->have_meta) return at_fail(AT_ERR_UNSUPPORTED, "no metadata for kernel %s", p->name);
    at_amdgpu_meta_resources(&p->meta, out);
    return AT_OK;
}

/* ---- buffers ------------------------------------------------------------------------------ */

static hipDeviceptr_t devptr(at_bbuf b, size_t off) { return (char *)b.handle + off; }

static at_status hip_buffer_alloc(at_bdev *d, size_t bytes, at_bbuf *out)
{
    out->handle = NULL;
    out->bytes = 0;
    AT_TRY(need_device(d, "buffer_alloc"));
    if (bytes == 0) return at_fail(AT_ERR_INVALID_ARG, "buffer_alloc: zero bytes");
    void *ptr = NULL;
    hipError_t r = hip.hipMalloc(&ptr, bytes);
    if (r != 0) {
        char buf[32];
        return at_fail(AT_ERR_LAUNCH, "HIP hipMalloc(%zu bytes) failed: %s", bytes,
                       hip_errname(r, buf));
    }
    out->handle = ptr;
    out->bytes = bytes;
    return AT_OK;
}

/* Copies wait for our stream first, so they are ordered with the kernels queued on it whatever
 * the runtime's null-stream semantics. */
static at_status hip_buffer_write(at_bdev *d, at_bbuf b, size_t off, const void *src, size_t bytes)
{
    AT_TRY(need_device(d, "buffer_write"));
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_write"));
    if (bytes == 0) return AT_OK;
    hipError_t r = hip.hipStreamSynchronize(d->stream);
    if (r == 0) r = hip.hipMemcpyHtoD(devptr(b, off), (void *)(uintptr_t)src, bytes);
    return r == 0 ? AT_OK : hip_fail(AT_ERR_LAUNCH, "hipMemcpyHtoD", r);
}

static at_status hip_buffer_read(at_bdev *d, at_bbuf b, size_t off, void *dst, size_t bytes)
{
    AT_TRY(need_device(d, "buffer_read"));
    AT_TRY(at_bbuf_check(b, off, bytes, "buffer_read"));
    if (bytes == 0) return AT_OK;
    hipError_t r = hip.hipStreamSynchronize(d->stream);
    if (r == 0) r = hip.hipMemcpyDtoH(dst, devptr(b, off), bytes);
    return r == 0 ? AT_OK : hip_fail(AT_ERR_LAUNCH, "hipMemcpyDtoH", r);
}

static void hip_buffer_free(at_bdev *d, at_bbuf b)
{
    if (!b.handle || need_device(d, "buffer_free") != AT_OK) return;
    hip.hipFree(b.handle);
}

static at_status hip_buffer_fill(at_bdev *d, at_bbuf b, unsigned char value)
{
    AT_TRY(need_device(d, "buffer_fill"));
    hipError_t r = hip.hipMemsetD8Async(devptr(b, 0), value, b.bytes, d->stream);
    return r == 0 ? AT_OK : hip_fail(AT_ERR_LAUNCH, "hipMemsetD8Async", r);
}

/* ---- launch ------------------------------------------------------------------------------- */

#define AT_MAX_STACK_ARGS 32

static at_status hip_launch(at_bdev *d, at_bprog *p, const at_karg *args, size_t nargs,
                            const size_t global[3], const size_t local[3], size_t dims,
                            size_t shared_bytes, void *stream, double *ms)
{
    if (!d || !p || !global || (nargs && !args))
        return at_fail(AT_ERR_INVALID_ARG, "launch: NULL argument");
    AT_TRY(need_device(d, "launch"));
    if (!p->fn) return at_fail(AT_ERR_INVALID_ARG, "launch: program %s is not loaded", p->name);
    if (shared_bytes > UINT_MAX)
        return at_fail(AT_ERR_INVALID_ARG, "launch: %zu bytes of dynamic LDS", shared_bytes);

    unsigned int grid[3], block[3];
    AT_TRY(at_launch_shape(global, local, dims, grid, block));
    /* hipModuleLaunchKernel reads each argument's bytes through these pointers. */
    void *stack_params[AT_MAX_STACK_ARGS];
    void **params = at_launch_params(args, nargs, stack_params, AT_MAX_STACK_ARGS);
    if (!params) return at_fail(AT_ERR_NO_MEMORY, "launch: out of memory for %zu arguments", nargs);

    hipStream_t s = stream ? (hipStream_t)stream : d->stream;
    at_status st = AT_OK;
    hipError_t r = 0;
    if (ms) pthread_mutex_lock(&d->timing_mu);
    if (ms && (r = hip.hipEventRecord(d->ev_start, s)) != 0)
        st = hip_fail(AT_ERR_LAUNCH, "hipEventRecord (start)", r);
    if (st == AT_OK && (r = hip.hipModuleLaunchKernel(
                            p->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                            (unsigned int)shared_bytes, s, nargs ? params : NULL, NULL)) != 0) {
        char buf[32];
        st = at_fail(AT_ERR_LAUNCH,
                     "HIP hipModuleLaunchKernel(%s, grid %ux%ux%u, block %ux%ux%u) failed: %s",
                     p->name, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                     hip_errname(r, buf));
    }
    if (ms && st == AT_OK) {
        float f = 0.0f;
        if ((r = hip.hipEventRecord(d->ev_end, s)) != 0)
            st = hip_fail(AT_ERR_LAUNCH, "hipEventRecord (end)", r);
        else if ((r = hip.hipEventSynchronize(d->ev_end)) != 0)
            st = hip_fail(AT_ERR_LAUNCH, "hipEventSynchronize (kernel execution)", r);
        else if ((r = hip.hipEventElapsedTime(&f, d->ev_start, d->ev_end)) != 0)
            st = hip_fail(AT_ERR_LAUNCH, "hipEventElapsedTime", r);
        else
            *ms = (double)f;
    }
    if (ms) pthread_mutex_unlock(&d->timing_mu);
    if (params != stack_params) free(params);
    return st;
}

/* An error that survives a device-wide synchronisation means the device is unusable for this
 * context; the caller recycles it. (A GPU memory fault may instead end the process: the HSA
 * runtime's default reaction; see docs/hip.md.) */
static at_status hip_check(at_bdev *d)
{
    AT_TRY(need_device(d, "check"));
    hipError_t r = hip.hipDeviceSynchronize();
    return r == 0 ? AT_OK : hip_fail(AT_ERR_DEVICE_LOST, "hipDeviceSynchronize", r);
}

static at_status hip_finish(at_bdev *d)
{
    AT_TRY(need_device(d, "finish"));
    hipError_t r = hip.hipStreamSynchronize(d->stream);
    return r == 0 ? AT_OK : hip_fail(AT_ERR_LAUNCH, "hipStreamSynchronize", r);
}

/* HIP has no context object to hand out (the device is the calling thread's current one). */
static void *hip_native_context(at_bdev *d)
{
    (void)d;
    return NULL;
}
static void *hip_native_queue(at_bdev *d) { return d ? (void *)d->stream : NULL; }

const at_backend_ops at_hip_backend = {
    .name = "hip",
    .probe = hip_probe,
    .device_count = hip_device_count,
    .device_info = hip_device_info,
    .open = hip_open,
    .open_target = hip_open_target,
    .close = hip_close,
    .compiler_version = hip_compiler_version,
    .compile = hip_compile,
    .program_binary = hip_program_binary,
    .load_binary = hip_load_binary,
    .program_free = hip_program_free,
    .resources = hip_resources,
    .buffer_alloc = hip_buffer_alloc,
    .buffer_write = hip_buffer_write,
    .buffer_read = hip_buffer_read,
    .buffer_free = hip_buffer_free,
    .buffer_fill = hip_buffer_fill,
    .check = hip_check,
    .launch = hip_launch,
    .finish = hip_finish,
    .native_context = hip_native_context,
    .native_queue = hip_native_queue,
};
