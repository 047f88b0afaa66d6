/* backend.h — the one vtable every device backend implements (CUDA, HIP, OpenCL).
 * Backends know nothing of the search or the database; the pipeline knows no vendor. */
#ifndef AT_BACKEND_H
#define AT_BACKEND_H

#include "base/util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct at_device_info {
    char backend[16]; /* "opencl" */
    char name[256];   /* device name */
    char vendor[256];
    char platform[256]; /* OpenCL platform name, "" elsewhere */
    char driver[256];   /* driver / runtime version */
    char arch[64];      /* compile target: "sm_90a", "gfx90a", "" for OpenCL */
    char key[640];      /* database device key: "opencl/<platform>/<name>/<cu>" */
    int64_t compute_units;
    int64_t max_work_group_size;
    int64_t max_work_item_sizes[3];
    int64_t local_mem_bytes;  /* shared / local memory per block a static declaration gets */
    int64_t max_shared_optin; /* per block with opt-in dynamic shared memory (CUDA); elsewhere
                               * the same as local_mem_bytes */
    int64_t global_mem_bytes;
    int64_t max_alloc_bytes;
    int64_t clock_mhz;
    int64_t warp_size;               /* 1 for a CPU */
    int64_t max_registers_per_block; /* 0 when the backend does not say (OpenCL) */
    int64_t l2_bytes;                /* last-level cache of the device, 0 if unknown */
    bool is_cpu;                     /* compiling competes with timing for the same cores */
    /* CPU devices (the host's cores): per-core data caches, from the host's sysfs since OpenCL
     * reports only the last level; 0 if unknown or not a CPU. */
    int64_t l1_bytes, core_l2_bytes;
    int64_t vector_width; /* native float vector width (OpenCL); 0 if unknown */
    /* 1: the device takes tensor maps (encode_tensor_map works: CUDA with the driver's
     * cuTensorMapEncodeTiled and compute capability >= 9.0, or a compile-only sm_90+ target) */
    int64_t tma;
    /* 1: launches take thread-block clusters (launch()'s cluster > 1: CUDA with the driver's
     * cuLaunchKernelEx and compute capability >= 9.0, or a compile-only sm_90+ target) */
    int64_t cluster;
} at_device_info;

typedef struct at_bdev at_bdev;   /* an open device: context + queue */
typedef struct at_bprog at_bprog; /* a compiled program with its one kernel */

/* A device buffer: the backend's native handle (cl_mem; a CUdeviceptr cast to a pointer). */
typedef struct at_bbuf {
    void *handle;
    size_t bytes;
} at_bbuf;

/* One kernel argument: bytes at ptr (for a buffer, ptr points to the native handle). */
typedef struct at_karg {
    size_t size;
    const void *ptr;
} at_karg;

/* A 2-D tiled tensor map for bulk tensor copies (CUDA's CUtensorMap, read by TMA), resolved
 * for one configuration: the tensor is `rows` rows of `cols` contiguous elements of dtype,
 * ld_bytes apart, in the buffer of role `buffer`; a copy moves box[0] x box[1] elements
 * (columns x rows), swizzled in `swizzle`-byte spans (0: none, 32, 64, 128). */
typedef struct at_tmap_desc {
    uint64_t cols, rows, ld_bytes;
    uint32_t box[2];
    uint32_t swizzle;
    uint16_t buffer; /* role index */
    uint8_t dtype;   /* at_dtype */
    uint8_t present; /* 0: the config takes no such argument (its `when:` is false) */
} at_tmap_desc;

#define AT_TMAP_BYTES 128 /* an encoded map, passed by value, 64-byte aligned */

/* What the compiler reports a kernel uses; fields are -1 when the backend does not know. */
typedef struct at_resources {
    int64_t registers;    /* per thread */
    int64_t spill_bytes;  /* spill stores + loads, bytes per thread */
    int64_t shared_bytes; /* static shared / local memory per block */
    int64_t local_bytes;  /* private (stack) memory per thread */
    int64_t max_threads;  /* the largest work-group this kernel can run; 0 or -1: unknown */
    int64_t serialized;   /* 1: ptxas serialized the kernel's wgmma pipeline (CUDA C7515) */
} at_resources;

typedef struct at_backend_ops {
    const char *name; /* "opencl" */
    /* Loads the runtime (dlopen). AT_OK if usable; else AT_ERR_NO_BACKEND with why. Idempotent. */
    at_status (*probe)(char *why, size_t whylen);
    /* Number of devices (0 if none). */
    int (*device_count)(void);
    /* Properties of device idx, without opening it. */
    at_status (*device_info)(int idx, at_device_info *out);
    /* Opens device idx: context and an in-order queue with profiling. */
    at_status (*open)(int idx, at_bdev **out);
    /* Opens the device of the caller's own handles (at_context_options.native_*): OpenCL a
     * cl_command_queue and its cl_context (NULL: the queue's), CUDA a CUcontext and a CUstream
     * (NULL: a stream of ours in it), HIP NULL and a hipStream_t. *idx is the device index asked
     * (-1: the handles'), then the handles' device index; a mismatch or bad handles are
     * AT_ERR_INVALID_ARG. close() never destroys, resets or releases more than open_native
     * retained. NULL: the backend cannot. */
    at_status (*open_native)(void *context, void *queue, int *idx, at_bdev **out);
    /* A compile-only handle for an explicit target ("sm_90a", "gfx90a"): compile, program_binary
     * and resources work, nothing else; no device or driver needed. info gets the limits every
     * device of that target has (compute_units 0: unknown). NULL for backends that only compile
     * for a present device (OpenCL). */
    at_status (*open_target)(const char *arch, at_device_info *info, at_bdev **out);
    void (*close)(at_bdev *d); /* accepts NULL */
    /* "PoCL 3.1 LLVM 15" — part of the binary cache key. */
    const char *(*compiler_version)(at_bdev *d);
    /* Compiles src with options and gets kernel_name. Thread-safe: several compiles may run at
     * once on one device. On failure returns AT_ERR_COMPILE and *log (malloc'd, may be NULL)
     * holds the compiler's log. */
    at_status (*compile)(at_bdev *d, const char *src, const char *options, const char *kernel_name,
                         at_bprog **out, char **log);
    /* The compiled binary (malloc'd) so a later process can skip compiling. */
    at_status (*program_binary)(at_bprog *p, void **bin, size_t *len);
    /* Loads a binary from program_binary(). AT_ERR_COMPILE if the device rejects it. */
    at_status (*load_binary)(at_bdev *d, const void *bin, size_t len, const char *kernel_name,
                             at_bprog **out, char **log);
    void (*program_free)(at_bprog *p); /* accepts NULL */
    /* Resources the compiler reported for the program's kernel; AT_ERR_UNSUPPORTED if none. */
    at_status (*resources)(at_bprog *p, at_resources *out);
    at_status (*buffer_alloc)(at_bdev *d, size_t bytes, at_bbuf *out);
    at_status (*buffer_write)(at_bdev *d, at_bbuf b, size_t off, const void *src, size_t bytes);
    at_status (*buffer_read)(at_bdev *d, at_bbuf b, size_t off, void *dst, size_t bytes);
    void (*buffer_free)(at_bdev *d, at_bbuf b);
    /* A buffer for bytes at offset off of b, for kernels (guard zones around a checked run's
     * buffers: the kernel gets the middle of a larger allocation). off is a multiple of 4096.
     * Freed with view_free (NULL: nothing to free) before b. */
    at_status (*buffer_view)(at_bdev *d, at_bbuf b, size_t off, size_t bytes, at_bbuf *out);
    void (*view_free)(at_bdev *d, at_bbuf view);
    /* Sets every byte of b, asynchronously on the device's queue (used to flush caches). */
    at_status (*buffer_fill)(at_bdev *d, at_bbuf b, unsigned char value);
    /* Enqueues the kernel on stream (NULL: the device's queue). global is the total number of
     * work-items per dimension and local the group size (OpenCL convention; CUDA's grid is
     * ceil(global / local)). shared_bytes: dynamic shared memory per block (CUDA's
     * sharedMemBytes; OpenCL rejects nonzero with AT_ERR_UNSUPPORTED). cluster: blocks per
     * thread-block cluster along dimension 0 (`launch: cluster:`; 1: none); a backend or device
     * without clusters (device_info's cluster 0) refuses > 1 with AT_ERR_UNSUPPORTED. If ms is
     * not NULL, waits for it and stores the device-measured kernel time in milliseconds
     * (profiling events). */
    at_status (*launch)(at_bdev *d, at_bprog *p, const at_karg *args, size_t nargs,
                        const size_t global[3], const size_t local[3], size_t dims, size_t cluster,
                        size_t shared_bytes, void *stream, double *ms);
    /* AT_OK, or AT_ERR_DEVICE_LOST when a kernel fault left the context unusable (CUDA's sticky
     * errors). NULL: the backend's contexts survive faults. */
    at_status (*check)(at_bdev *d);
    /* Waits for all work queued on the device's queue. */
    at_status (*finish)(at_bdev *d);
    /* Optional (NULL: no tensor maps): encodes desc for the buffer at device address handle into
     * out (AT_TMAP_BYTES, 64-byte aligned). AT_ERR_UNSUPPORTED when the driver cannot;
     * AT_ERR_INVALID_ARG naming what the hardware refuses (an address or row stride not a
     * multiple of 16 bytes, a box too large). Host-only: needs no stream. */
    at_status (*encode_tensor_map)(at_bdev *d, const at_tmap_desc *desc, const void *handle,
                                   void *out);
    /* Native handles for the public API: (cl_context, cl_command_queue). */
    void *(*native_context)(at_bdev *d);
    void *(*native_queue)(at_bdev *d);
} at_backend_ops;

extern const at_backend_ops at_opencl_backend;
extern const at_backend_ops at_cuda_backend;
extern const at_backend_ops at_hip_backend;

/* For open_native: the device index of the caller's handles is found (found, -1: none of the
 * backend's ndevs devices) and agrees with the index asked (*idx, -1: any); then *idx is it.
 * Else AT_ERR_INVALID_ARG saying which. */
at_status at_native_device(const char *backend, int found, int ndevs, int *idx);
/* The first lines of a compiler log (at most 8), trimmed, into dst. */
void at_log_head(const char *log, char *dst, size_t cap);
/* AT_ERR_INVALID_ARG naming `what` unless [off, off + bytes) lies inside buffer b. */
at_status at_bbuf_check(at_bbuf b, size_t off, size_t bytes, const char *what);

/* Blocks (grid) and block sizes of a GPU launch of global work-items in blocks of local, for
 * dims 1..3 (unused dimensions 1); AT_ERR_INVALID_ARG for sizes a launch cannot take. */
at_status at_launch_shape(const size_t global[3], const size_t local[3], size_t dims,
                          unsigned int grid[3], unsigned int block[3]);
/* The argument-pointer array cuLaunchKernel / hipModuleLaunchKernel take: stack (cap entries)
 * when it is large enough, else malloc'd (free it when it is not stack); NULL when out of
 * memory. */
void **at_launch_params(const at_karg *args, size_t nargs, void **stack, size_t cap);

/* dlopens env_var's path if set, else the first of names that loads; *used names it. On failure
 * why says why the first (most wanted) name failed. */
void *at_dl_open(const char *env_var, const char *const *names, size_t nnames, const char **used,
                 char *why, size_t whylen);
/* Fills *slot (a function pointer) with sym from lib; -1 and why if lib lacks it. */
int at_dl_symbol(void *lib, const char *used, const char *sym, void *slot, char *why,
                 size_t whylen);

/* Backend by name ("opencl", "cuda", "hip"); NULL if this build has no such backend. */
const at_backend_ops *at_backend_find(const char *name);
/* All backends compiled in, in automatic-choice order (GPU first, OpenCL last), NULL-ended. */
const at_backend_ops *const *at_backend_list(void);

#endif
