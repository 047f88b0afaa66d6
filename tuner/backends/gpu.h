/* gpu.h — what the CUDA and HIP backends share (internal to tuner/backends/): loading a runtime
 * and its compiler with dlopen, once; a device layer over a table of the vendor's calls (stream,
 * timing events, buffers, modules, the event-timed launch, error messages); compiling with a
 * runtime compiler (options, log, code); and the device limits both runtimes report.
 *
 * Each backend describes its runtime (at_gpu_api) and its compiler (at_gpu_rtc): the calls that
 * have the generic signature come straight from the library (at_dl_sym rows point dlsym at the
 * slots), the others are the backend's small wrappers. Its struct at_bdev starts with an
 * at_gpu_dev; struct at_bprog is the one below. The backend keeps what really differs: device
 * discovery and properties, targets, resources, its own hooks. */
#ifndef AT_GPU_H
#define AT_GPU_H

#include "tuner/backend.h"

#include <pthread.h>
#include <stdbool.h>

/* ---- libraries loaded once ---------------------------------------------------------------- */

/* One symbol to take from a library: its exported name and the function pointer it fills. */
typedef struct at_dl_sym {
    const char *name;
    void *slot;
} at_dl_sym;

/* A backend's own symbol list is X(field, exported symbol, return type, parameters); this makes
 * the field of its table. */
#define AT_DL_FIELD(field, sym, ret, params) ret(*field) params;

/* A vendor library, loaded at its first use, once per process (initialised with AT_GPU_LIB). */
typedef struct at_gpu_lib {
    const char *name;         /* "NVRTC": starts its messages ("NVRTC unavailable: ...") */
    const char *env;          /* a path in this variable is the only one tried */
    const char *const *names; /* file names to try, most wanted first, NULL-ended */
    /* Folders searched for names when none loads by its bare name (the loader's path and
     * ld.so.cache), NULL-ended glob patterns: "$VAR/..." starts from that variable (skipped
     * when unset), "@python/..." from the prefix of each python3 on PATH (the folder above its
     * bin/: a virtual environment's pip wheels); matches are tried newest name first. */
    const char *const *places;
    const at_dl_sym *syms; /* every symbol it must have, in the order they are checked */
    size_t nsyms;
    const at_dl_sym *opt; /* symbols it may lack (calls newer than the oldest version we load):
                           * their slots stay NULL when absent */
    size_t nopt;
    /* Runs once the symbols are there (cuInit, a version), used naming the file loaded: 0, or
     * -1 with l->why set. NULL: nothing to run. */
    int (*start)(struct at_gpu_lib *l, const char *used);
    pthread_mutex_t mu;
    bool tried;
    at_status status; /* AT_OK once loaded and started */
    char why[1024];   /* why not */
    char path[1024];  /* the file loaded, a full path where the loader says it ("" if none) */
    char looked[768]; /* where it was looked for, for messages ("" when the bare name loaded) */
} at_gpu_lib;

/* An at_gpu_lib's initializer: its name, variable, file names, folders to search, symbols (an
 * array) and start. */
#define AT_GPU_LIB(name_, env_, names_, places_, syms_, start_)                                    \
    {                                                                                              \
        .name = (name_), .env = (env_), .names = (names_), .places = (places_), .syms = (syms_),   \
        .nsyms = sizeof(syms_) / sizeof(syms_)[0], .start = (start_),                              \
        .mu = PTHREAD_MUTEX_INITIALIZER                                                            \
    }
/* The same with optional symbols (an array) too. */
#define AT_GPU_LIB_OPT(name_, env_, names_, places_, syms_, opt_, start_)                          \
    {                                                                                              \
        .name = (name_), .env = (env_), .names = (names_), .places = (places_), .syms = (syms_),   \
        .nsyms = sizeof(syms_) / sizeof(syms_)[0], .opt = (opt_),                                  \
        .nopt = sizeof(opt_) / sizeof(opt_)[0], .start = (start_), .mu = PTHREAD_MUTEX_INITIALIZER \
    }

/* Loads l the first time (every symbol, the optional ones, then start); AT_OK, or l's status
 * with the message "<name> unavailable: <why>". On a missing symbol the library is closed and
 * every slot of syms is NULL again. Thread-safe. */
at_status at_gpu_lib_load(at_gpu_lib *l);

/* ---- errors ------------------------------------------------------------------------------- */

/* name_of(r) (the library's own name for error r) when it has one, else "<api> error <r>" in
 * buf. name_of may be NULL. */
const char *at_gpu_errname(const char *(*name_of)(int), const char *api, int r, char buf[32]);

/* ---- the runtime -------------------------------------------------------------------------- */

/* The runtime calls the device layer makes, with the signature each must have: handles are
 * void *, a device pointer is the void * of an at_bbuf, and the result is the runtime's error
 * code (0: success). X(slot, parameters). */
#define AT_GPU_CALLS(X)                                                                            \
    X(activate, (at_bdev * d)) /* makes d's device current on the calling thread */                \
    X(init, (unsigned int flags))                                                                  \
    X(version, (int *version))        /* the runtime's version number */                           \
    X(device_count, (int *count))     /* devices it can use */                                     \
    X(device_sync, (void))            /* waits for the device; reports a fault */                  \
    X(stream_create, (void **stream)) /* blocking: ordered with the synchronous copies */          \
    X(stream_sync, (void *stream))                                                                 \
    X(stream_destroy, (void *stream))                                                              \
    X(event_create, (void **event)) /* with timing */                                              \
    X(event_destroy, (void *event))                                                                \
    X(event_record, (void *event, void *stream))                                                   \
    X(event_sync, (void *event))                                                                   \
    X(event_elapsed, (float *ms, void *start, void *end))                                          \
    X(mem_alloc, (void **ptr, size_t bytes))                                                       \
    X(mem_free, (void *ptr))                                                                       \
    /* the synchronous copies, ordered after the work queued on stream */                          \
    X(copy_in, (void *stream, void *dst, size_t off, const void *src, size_t bytes))               \
    X(copy_out, (void *stream, void *dst, const void *src, size_t off, size_t bytes))              \
    X(fill, (void *ptr, unsigned char value, size_t bytes, void *stream)) /* async */              \
    X(module_load, (void **module, const void *image))                                             \
    X(module_unload, (void *module))                                                               \
    X(module_function, (void **fn, void *module, const char *name))                                \
    X(launch, (void *fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,       \
               unsigned int by, unsigned int bz, unsigned int shared_bytes, void *stream,          \
               void **params, void **extra))

#define AT_GPU_SLOT(slot, params) int(*slot) params;
#define AT_GPU_NAME(slot, params) const char *slot;

/* For a backend's lists of the calls it gives gpu.c: X(slot, symbol) rows name the library's
 * function a slot gets (by dlsym), X(slot, name, wrapper) rows the backend's wrapper for a slot
 * and the call it makes. These make the initializers of fn and call from them. */
#define AT_GPU_SYMBOL_NAME(slot, sym)            .slot = sym,
#define AT_GPU_WRAPPER_NAME(slot, name, wrapper) .slot = name,
#define AT_GPU_WRAPPER(slot, name, wrapper)      .slot = wrapper,

typedef struct at_gpu_api {
    at_gpu_lib lib;                   /* the runtime library; lib.name ("CUDA") starts messages */
    const char *(*error_name)(int r); /* the runtime's name for error r; NULL: it has none */
    struct {
        AT_GPU_CALLS(AT_GPU_SLOT)
    } fn; /* from the library (lib.syms point here) or the backend's wrappers */
    struct {
        AT_GPU_CALLS(AT_GPU_NAME)
    } call;               /* each call's name in the runtime ("cuEventRecord"), for messages */
    const char *provider; /* "the CUDA driver": "... reports no device" */
    /* Optional: a launch as fn.launch's, in thread-block clusters of cluster x 1 x 1 blocks
     * (CUDA: cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION); its name for
     * messages. NULL: the runtime has no clusters, and launches of cluster > 1 are refused. */
    int (*launch_cluster)(void *fn, const unsigned int grid[3], const unsigned int block[3],
                          unsigned int cluster, unsigned int shared_bytes, void *stream,
                          void **params);
    const char *launch_cluster_call;
    /* Optional: after a module's kernel is found (CUDA raises its dynamic shared memory). */
    at_status (*loaded)(at_bprog *p);
    /* Optional: checks a program's code before it is loaded or kept (HIP reads its metadata). */
    at_status (*verify)(at_bprog *p);
    int version; /* fn.version's answer once started (0: unknown) */
    int ndevs;   /* devices once started */
} at_gpu_api;

/* The start of a runtime's library (lib.start; l is the at_gpu_api's lib): fn.init(0),
 * fn.version (0 if it does not say) and at least one device from fn.device_count. */
int at_gpu_runtime_start(at_gpu_lib *l, const char *used);
/* A failed runtime call: status s, message "<lib.name> <call><note> failed: <error name>". */
at_status at_gpu_api_fail(const at_gpu_api *api, at_status s, const char *call, const char *note,
                          int r);

/* ---- the compiler ------------------------------------------------------------------------- */

/* The compiler calls (NVRTC's, hipRTC's), as at_gpu_api's: X(slot, parameters). */
#define AT_GPU_RTC_CALLS(X)                                                                        \
    X(version, (int *major, int *minor))                                                           \
    X(create, (void **prog, const char *src, const char *name, int nheaders,                       \
               const char *const *headers, const char *const *include_names))                      \
    X(destroy, (void **prog))                                                                      \
    X(compile, (void *prog, int nopts, const char *const *opts))                                   \
    X(log_size, (void *prog, size_t *bytes))                                                       \
    X(log, (void *prog, char *log))                                                                \
    X(code_size, (void *prog, size_t *bytes))                                                      \
    X(code, (void *prog, char *code))

typedef struct at_gpu_rtc {
    at_gpu_lib lib; /* lib.name ("NVRTC") starts messages */
    const char *(*error_name)(int r);
    struct {
        AT_GPU_RTC_CALLS(AT_GPU_SLOT)
    } fn;
    struct {
        AT_GPU_RTC_CALLS(AT_GPU_NAME)
    } call;
    const char *file_ext;     /* ".cu": a program is named after its kernel */
    const char *arch_flag;    /* "-arch=": the device's arch follows */
    const char *const *fixed; /* options before the caller's, NULL-ended */
    const char *code_name;    /* "CUBIN": what it makes, in messages */
    const char *version_name; /* "nvrtc": version is "nvrtc <major>.<minor>" */
    /* The caller's -D options become #define lines before the source (hipRTC: see hip.c). */
    bool defines_in_source;
    pthread_mutex_t *serial; /* when set, compiles take turns under it */
    /* Optional: before compiling (NVRTC names the kernel) and after (NVRTC checks it is
     * extern "C"); AT_OK or a compile error. */
    at_status (*before)(void *prog, const char *kernel);
    at_status (*after)(void *prog, const char *kernel);
    char version[160]; /* "nvrtc 13.0", set by lib.start */
} at_gpu_rtc;

/* The start of a compiler's library (lib.start; l is the at_gpu_rtc's lib): its version. */
int at_gpu_rtc_start(at_gpu_lib *l, const char *used);
/* A failed compiler call: AT_ERR_COMPILE, message "<lib.name> <call> failed: <error name>". */
at_status at_gpu_rtc_fail(const at_gpu_rtc *cc, const char *call, int r);

/* Usable: rt's library with a device, then cc's. why gets the reason it is not ("" if it is). */
at_status at_gpu_probe(at_gpu_api *rt, at_gpu_rtc *cc, char *why, size_t whylen);

/* The compiler's argv: arch_opt, fixed, then user (modified) split on white space (its values
 * hold no spaces). With defines not NULL, the -D options go there instead, as malloc'd
 * "#define NAME VALUE" lines. The array is malloc'd; NULL when out of memory. */
const char **at_gpu_options(const char *arch_opt, const char *const *fixed, char *user, int *argc,
                            char **defines);

/* ---- devices and programs ----------------------------------------------------------------- */

/* The first member of a GPU backend's struct at_bdev. */
typedef struct at_gpu_dev {
    const at_gpu_api *api;
    at_gpu_rtc *rtc;
    bool compile_only;    /* from open_target(): no stream or events */
    char arch[64];        /* the target of every compile: "sm_90a", "gfx90a:sramecc+:xnack-" */
    void *stream;         /* the device's queue */
    bool borrowed_stream; /* stream is the caller's (open_native): never synchronised at stop
                           * nor destroyed */
    void *ev_start, *ev_end;
    pthread_mutex_t timing_mu; /* one pair of events: timed launches take turns */
    bool mu_ok;
} at_gpu_dev;

/* A compiled or loaded program with its one kernel (both GPU backends). */
struct at_bprog {
    at_bdev *dev;
    void *code; /* CUBIN or code object */
    size_t code_len;
    char *log; /* the compiler's log; NULL for a loaded binary */
    void *module;
    void *fn;
    void *meta; /* the backend's malloc'd data about the kernel (HIP: its metadata), or NULL */
    char name[];
};

/* A zeroed device of size bytes (the backend's struct at_bdev) for arch; with its timing mutex
 * unless compile_only. */
at_status at_gpu_dev_new(size_t size, const at_gpu_api *api, at_gpu_rtc *rtc, const char *arch,
                         bool compile_only, at_bdev **out);
/* Makes d current and creates its stream (unless it has the caller's) and events;
 * AT_ERR_NO_DEVICE naming the failed call. */
at_status at_gpu_dev_start(at_bdev *d);
/* Waits for d's stream and destroys its events and stream (d current); a caller's stream is
 * left as it is. */
void at_gpu_dev_stop(at_bdev *d);
/* The timing mutex and d itself; accepts NULL. */
void at_gpu_dev_free(at_bdev *d);
/* AT_OK if d runs kernels (and is now current); a compile-only target answers
 * AT_ERR_UNSUPPORTED, a failed activation AT_ERR_LAUNCH. */
at_status at_gpu_need_device(at_bdev *d, const char *what);

/* The attribute numbers, in the runtime's own numbering, of the limits both runtimes report. */
typedef struct at_gpu_attrs {
    int compute_units, max_threads, block_x, block_y, block_z, shared, registers, l2, clock_khz,
        warp;
} at_gpu_attrs;
/* The limits of device dev from attr(dev, number) (0 when unknown): compute units, work-group
 * and block sizes, shared memory per block, registers, L2, clock, warp; global memory and the
 * largest allocation are total_mem. Not a CPU. */
void at_gpu_device_limits(at_device_info *out, const at_gpu_attrs *a,
                          int64_t (*attr)(int dev, int number), int dev, int64_t total_mem);
/* The fields of a compile-only target that every backend fills alike (out is zeroed first):
 * backend, "<arch> (compile only)", vendor, arch, key "<backend>/<arch>/compile-only/0", and
 * blocks of up to 1024 threads, 1024 in x and y. */
void at_gpu_target_info(at_device_info *out, const char *backend, const char *vendor,
                        const char *arch);

/* ---- the backend slots both share --------------------------------------------------------- */

at_status at_gpu_compile(at_bdev *d, const char *src, const char *options, const char *kernel_name,
                         at_bprog **out, char **log);
at_status at_gpu_program_binary(at_bprog *p, void **bin, size_t *len);
at_status at_gpu_load_binary(at_bdev *d, const void *bin, size_t len, const char *kernel_name,
                             at_bprog **out, char **log);
void at_gpu_program_free(at_bprog *p);
at_status at_gpu_buffer_alloc(at_bdev *d, size_t bytes, at_bbuf *out);
at_status at_gpu_buffer_write(at_bdev *d, at_bbuf b, size_t off, const void *src, size_t bytes);
at_status at_gpu_buffer_read(at_bdev *d, at_bbuf b, size_t off, void *dst, size_t bytes);
/* A view is the device address plus the offset: nothing to create or free. */
at_status at_gpu_buffer_view(at_bdev *d, at_bbuf b, size_t off, size_t bytes, at_bbuf *out);
void at_gpu_buffer_free(at_bdev *d, at_bbuf b);
at_status at_gpu_buffer_fill(at_bdev *d, at_bbuf b, unsigned char value);
/* The event-timed launch: with ms, records the start event, launches, records the end event,
 * waits for it and stores the elapsed milliseconds, the device's two events taken in turns. */
at_status at_gpu_launch(at_bdev *d, at_bprog *p, const at_karg *args, size_t nargs,
                        const size_t global[3], const size_t local[3], size_t dims, size_t cluster,
                        size_t shared_bytes, void *stream, double *ms);
at_status at_gpu_check(at_bdev *d);  /* fn.device_sync: a failure is AT_ERR_DEVICE_LOST */
at_status at_gpu_finish(at_bdev *d); /* waits for the device's stream */
void *at_gpu_native_queue(at_bdev *d);
const char *at_gpu_compiler_version(at_bdev *d); /* the rtc's version */

/* The at_backend_ops slots above, for a GPU backend's initializer. */
#define AT_GPU_BACKEND_SLOTS                                                                       \
    .compile = at_gpu_compile, .program_binary = at_gpu_program_binary,                            \
    .load_binary = at_gpu_load_binary, .program_free = at_gpu_program_free,                        \
    .buffer_alloc = at_gpu_buffer_alloc, .buffer_write = at_gpu_buffer_write,                      \
    .buffer_read = at_gpu_buffer_read, .buffer_free = at_gpu_buffer_free,                          \
    .buffer_view = at_gpu_buffer_view, .buffer_fill = at_gpu_buffer_fill, .launch = at_gpu_launch, \
    .check = at_gpu_check, .finish = at_gpu_finish, .native_queue = at_gpu_native_queue,           \
    .compiler_version = at_gpu_compiler_version

#endif
