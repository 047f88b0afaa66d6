/* autotune.h — the public C API of autotune: tuned kernels (GEMM, and any operation through the
 * generic calls) on the caller's own buffers.
 *
 * Structs the caller fills (options) are zero-initialised and only ever grow into their
 * reserved space; structs the library fills (reports, descriptions) keep reserved space for the
 * same reason, so a program built against this header keeps working with later libraries. */
#ifndef AUTOTUNE_H
#define AUTOTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AT_VERSION_STRING "0.2.0"

/* Status codes. AT_OK is zero; every error is negative. at_strerror() gives fixed text,
 * at_context_last_error() the detailed message of the last failure on a context. */
typedef enum at_status {
    AT_OK = 0,
    AT_ERR_INVALID_ARG = -1,  /* a bad argument: size, layout, dtype, option */
    AT_ERR_NO_MEMORY = -2,    /* host allocation failed */
    AT_ERR_NO_BACKEND = -3,   /* the backend's runtime library is not on this machine */
    AT_ERR_NO_DEVICE = -4,    /* the backend has no such device */
    AT_ERR_COMPILE = -5,      /* the runtime compiler rejected a kernel */
    AT_ERR_LAUNCH = -6,       /* a launch or a device operation failed */
    AT_ERR_DB = -7,           /* the database could not be opened, read or written */
    AT_ERR_DB_CORRUPT = -8,   /* the database file is not a valid autotune database */
    AT_ERR_DB_VERSION = -9,   /* the database was written by a newer schema */
    AT_ERR_NOT_FOUND = -10,   /* no entry (database miss, no tuned kernel and tuning not allowed) */
    AT_ERR_TEMPLATE = -11,    /* a template or its tuning space is malformed */
    AT_ERR_IO = -12,          /* a file could not be read or written */
    AT_ERR_UNSUPPORTED = -13, /* valid request this build or device cannot serve */
    AT_ERR_NO_VALID_CONFIG = -14, /* every candidate failed or the space is empty */
    AT_ERR_INTERNAL = -15,        /* a bug in autotune */
    AT_ERR_INTERRUPTED = -16,     /* tuning was cancelled; what was measured is saved */
    AT_ERR_DEVICE_LOST = -17      /* a kernel fault left the device context unusable */
} at_status;

typedef enum at_backend_kind {
    AT_BACKEND_AUTO = 0, /* GPU backends first, OpenCL last; AUTOTUNE_BACKEND overrides */
    AT_BACKEND_CUDA = 1,
    AT_BACKEND_HIP = 2,
    AT_BACKEND_OPENCL = 3
} at_backend_kind;

typedef enum at_dtype { AT_DTYPE_F32 = 0, AT_DTYPE_F16 = 1, AT_DTYPE_BF16 = 2 } at_dtype;

/* Row-major operands; 'n' keeps the operand as stored, 't' transposes it:
 * nn: A is m x k, B is k x n.  tn: A is k x m.  nt: B is n x k. */
typedef enum at_layout {
    AT_LAYOUT_NN = 0,
    AT_LAYOUT_NT = 1,
    AT_LAYOUT_TN = 2,
    AT_LAYOUT_TT = 3
} at_layout;

/* Where at_gemm_get / at_get found its kernel. */
typedef enum at_source {
    AT_SOURCE_HIT = 0,       /* tuned entry for this exact problem and device */
    AT_SOURCE_NEAREST = 1,   /* tuned entry of the nearest shape on this device */
    AT_SOURCE_DEFAULT = 2,   /* the template's built-in default configuration */
    AT_SOURCE_TUNED = 3,     /* tuned on the spot (AT_GET_ALLOW_TUNE) */
    AT_SOURCE_SAME_ARCH = 4, /* tuned on another device of this architecture (docs/shipping.md) */
    AT_SOURCE_VENDOR = 5     /* tuned on another device of this vendor */
} at_source;

typedef struct at_context at_context; /* a backend, a device, a database */
typedef struct at_kernel at_kernel;   /* a compiled, configured, ready-to-launch kernel */
typedef struct at_buffer at_buffer;   /* a device buffer made by the helpers below */

/* Kernels and threads.
 *
 * Ownership: every at_kernel the library returns (at_*_get, at_*_tune) is the caller's, to
 * at_kernel_destroy once, before destroying its context. It is a light handle: the compiled
 * program belongs to the context's kernel cache (keyed by the problem's every field, the
 * template and its version, and the config) and is shared, reference-counted, by every handle
 * made from it, so a repeated get of a problem costs a lookup in memory (about 1-2 us) rather
 * than a build. at_kernel_destroy gives the handle's reference back; the program is freed with
 * the last of them, or with the context. A tuning run on the context drops the cached kernels
 * of its problem (and every memoised lookup); handles already out keep their program.
 * What is a handle's own: its workspace (split-K, split-KV: a zeroed device buffer made at its
 * first launch) and its at_kernel_info.
 *
 * Thread safety: calls on one context from several threads are safe: gets and lookups answered
 * from memory run at once; the chain, builds, tuning and verify take turns. Launches of
 * distinct kernels from several threads are safe (they may share a program); launches of one
 * at_kernel must not overlap (its workspace; the same stream, or synchronise) and it must not
 * be destroyed while another thread launches it. at_context_destroy must not race with any
 * other call on the context or its kernels and buffers. at_context_last_error is the context's
 * last failure from any thread: read it when no other thread may fail meanwhile. */

/* A device pointer in the backend's native form: a cl_mem for OpenCL, a CUdeviceptr for CUDA,
 * a hipDeviceptr_t for HIP. Make one with the helpers below. */
typedef struct at_devptr {
    void *handle; /* cl_mem, or the device address cast to a pointer */
} at_devptr;

/* From a handle (cl_mem) or from a device address (CUdeviceptr, hipDeviceptr_t). */
static inline at_devptr at_devptr_from_handle(void *handle)
{
    at_devptr d = {handle};
    return d;
}
static inline at_devptr at_devptr_from_address(uint64_t address)
{
    at_devptr d = {(void *)(uintptr_t)address};
    return d;
}

/* Zero-initialise, then set what you need: fields are only ever appended. */
typedef struct at_context_options {
    at_backend_kind backend; /* AT_BACKEND_AUTO by default */
    int device;              /* device index within the backend, 0 by default */
    const char *db_path;     /* NULL: $AUTOTUNE_DB, $XDG_CACHE_HOME/autotune, ~/.cache/autotune */
    int compile_threads;     /* 0: one per core */
    /* The read-only databases searched after db_path (docs/shipping.md), ':'-separated: database
     * directories, bundle files, folders of them. NULL: $AUTOTUNE_DB_PATH, then the shipped
     * folder ($AUTOTUNE_SHIPPED_DB, default the installed share/autotune/db); "": none. */
    const char *db_search_path;
    /* Bring your own context: the caller's native handles, which the context's kernels are
     * built in and launched on (stream NULL), on the caller's buffers. OpenCL: a
     * cl_command_queue (required) and its cl_context (NULL: the queue's), retained at create
     * and released at destroy, never finished or released beyond that. CUDA: a CUcontext
     * (required) and a CUstream (NULL: a stream autotune makes in that context and destroys);
     * the context is made current on the calling threads, never destroyed, reset or released.
     * HIP: NULL and a hipStream_t (required), device naming its device. With either set,
     * backend must be named (not AUTO) and device must be the handles' device index, or -1 to
     * take theirs (AT_ERR_INVALID_ARG otherwise; HIP needs it). Tuning still runs candidates in
     * a worker process on its own context (AUTOTUNE_ISOLATION=0: on the caller's queue, which
     * must then time kernels: OpenCL's CL_QUEUE_PROFILING_ENABLE); a fault that leaves the caller's
     * context unusable (CUDA's sticky errors, with AUTOTUNE_ISOLATION=0) is AT_ERR_DEVICE_LOST and
     * is not recovered. Taken from reserved: the struct's size is unchanged. */
    void *native_context;
    void *native_queue;
    void *reserved[5]; /* zero */
} at_context_options;

typedef struct at_gemm_problem {
    int64_t m, n, k; /* each >= 1 */
    at_dtype dtype;  /* only AT_DTYPE_F32 on OpenCL */
    at_layout layout;
    float alpha, beta;     /* C = alpha * op(A) * op(B) + beta * C */
    int64_t lda, ldb, ldc; /* leading dimensions in elements; 0 means packed */
} at_gemm_problem;

/* Fused attention forward: O = softmax(Q K^T * scale [+ causal mask]) V per (batch, head), and
 * LSE, the natural log of each row's softmax denominator (max + log(sum), over the scaled
 * scores), which combining partial results or a backward pass needs. docs/attention.md. */
typedef enum at_attention_layout {
    AT_ATTENTION_BSHD = 0, /* (batch, seq, heads, head_dim) contiguous: PyTorch's (B, S, H, D) */
    AT_ATTENTION_BHSD = 1  /* (batch, heads, seq, head_dim) contiguous */
} at_attention_layout;

typedef struct at_attention_problem {
    int64_t batch;    /* >= 1 */
    int64_t heads;    /* query heads H >= 1 */
    int64_t kv_heads; /* key/value heads G: H % G == 0 (G == H: multi-head, 1: multi-query);
                       * query head h reads key/value head h / (H / G) */
    int64_t seq;      /* query length S >= 1 */
    int64_t seq_kv;   /* key length S2 >= 1; >= S when causal */
    int64_t head_dim; /* D: 32, 64, 80, 96, 128 or 256 */
    int causal;       /* 1: query i sees keys j <= i + (S2 - S) (the bottom-right alignment of
                       * FlashAttention 2.1+ and PyTorch's causal_lower_right) */
    at_dtype dtype;   /* of Q, K, V and O (only AT_DTYPE_F32 on OpenCL); LSE is always f32 */
    at_attention_layout layout; /* of Q, K, V and O alike; LSE is (batch, heads, seq) */
    float scale;                /* 0: 1/sqrt(head_dim) */
} at_attention_problem;

/* Flags of at_gemm_get(). On a miss, ALLOW_TUNE tunes now (default options) instead of falling
 * back; NO_FALLBACK returns AT_ERR_NOT_FOUND rather than a nearest-shape or default kernel. */
#define AT_GET_ALLOW_TUNE  1u
#define AT_GET_NO_FALLBACK 2u

/* What a tuning run reports as it goes (at_tune_options.on_candidate): once before the first
 * candidate (done 0, config "": the up-front estimate), then after each one evaluated. */
typedef struct at_tune_progress {
    int64_t done;       /* candidates evaluated so far */
    int64_t budget;     /* the evaluation budget (0: none) */
    double best_us;     /* the best time so far (0: none yet) */
    double best_gflops; /* at the best time (0: none yet) */
    double elapsed_s;   /* seconds since the run started */
    double budget_s;    /* the seconds budget (0: none) */
    /* The seconds one candidate is expected to take (its checked run and timed repetitions):
     * the median of those measured, before any the up-front estimate (flops at the device's
     * nominal rate); 0 when unknown. */
    double estimate_s;
    const char *problem; /* the problem's database key */
    const char *config;  /* the candidate just evaluated ("" before the first) */
    const char *status;  /* its outcome ("ok", "timeout", ...; "" before the first) */
    double time_us;      /* its time (0 when it failed) */
    /* Before the first: the key of the smaller problem candidates are timed on, the best few
     * then confirmed on the problem (docs/search.md); "" when none. */
    const char *proxy;
    int64_t reserved[7];
} at_tune_progress;

typedef struct at_tune_options {
    const char *strategy; /* one of at_tune_strategies(); NULL: the first, the default */
    int64_t max_evals;    /* 0: the default budget (60 s; exhaustive: the whole space) */
    double max_seconds;   /* 0: the default budget */
    uint64_t seed;        /* 0: a fixed default seed */
    int force;            /* re-measure even if the database has results */
    /* Progress callback after each measured candidate; may be NULL. */
    /* done: candidates evaluated; budget: the evaluation budget (0: none); eta_s: estimated
     * seconds left (from the evaluation or time budget, whichever ends first; 0 if unknown). */
    void (*progress)(void *user, int64_t done, int64_t budget, double best_us, double elapsed_s,
                     double eta_s);
    void *progress_user;
    /* When *cancel becomes non-zero the run stops after the candidate in hand; everything
     * measured so far is in the database and the next run resumes from it. May be NULL. */
    const volatile int *cancel;
    int64_t no_improve; /* stop after this many evaluations without a better time; 0: off */
    /* A results database to answer from instead of the device: every proposed config gets its
     * recorded outcome for this problem, device and template (a config without a record counts
     * as failed, "not recorded"); nothing is compiled, run or stored. NULL: tune for real. */
    const char *replay_db;
    /* The template to tune, by name ("gemm_mma"); NULL: the one the registry picks for the
     * operation, element type, backend and architecture. A name that does not implement the
     * problem on this device is AT_ERR_INVALID_ARG (e.g. falling back from gemm_wgmma to
     * gemm_mma on sm_90a is allowed; gemm_mma on OpenCL is not). */
    const char *template_name;
    /* The absolute limit on one run of a candidate, in seconds; 0: 20 s, or three times the
     * up-front estimate of one run when that is more. */
    double run_limit_s;
    /* A candidate whose run takes more than this many times the best time so far is stopped
     * and recorded as a timeout (not retried on resume unless force); 0: 10; negative: off. */
    double slowdown_limit;
    /* Called as progress is, with more detail (may be NULL; progress_user is its user). */
    void (*on_candidate)(void *user, const at_tune_progress *p);
    /* 1: time every candidate on the problem itself, never on a proxy (docs/search.md). */
    int no_proxy;
    /* 1: no warm start from the results of related problems and devices (docs/search.md,
     * "Transfer"). */
    int no_transfer;
    /* at_replay_file only: recorded spaces of the same kernel on another device or shape (files
     * as at_replay_file reads them) to warm-start the replayed search from. */
    const char *const *transfer;
    size_t ntransfer;
    /* A tuning run: NULL, or room for AT_TRANSFER_MAX entries where the run writes the sources
     * of its warm start (the report says how many). */
    struct at_transfer_source *transfer_out;
    /* zero; the fields above were taken from it (no_transfer shares no_proxy's word) */
    void *reserved[1];
} at_tune_options;

/* The most sources a tuning run's warm start takes: the 3 nearest shapes tuned on this device
 * and this shape tuned on 2 other devices of its family or vendor. */
#define AT_TRANSFER_MAX 5

/* A warm start's source (docs/search.md, "Transfer"): what it was, whether it was used, and
 * its weight at the end of the run. */
typedef struct at_transfer_source at_transfer_source;
struct at_transfer_source {
    char name[512];   /* a file, or "PROBLEM on DEVICE" */
    int used;         /* 1: given to the search; 0: refused, reason says why */
    char reason[256]; /* why it was refused ("" when used) */
    int64_t configs;  /* its results that are configs of this space */
    int64_t pairs;    /* configs measured here that it has: what its weight was judged on */
    double weight;    /* Kendall's tau of its times with these on the pairs (1 below 5 pairs;
                         <= 0: ignored by the model) */
};

typedef struct at_tune_report {
    /* valid configurations in the space; on a cache hit the count recorded when it was tuned
     * (0 when the record predates it) */
    int64_t space;
    int64_t space_total; /* configurations before constraints */
    int64_t evaluated;   /* candidates evaluated (measured now or found in the database) */
    int64_t measured;    /* candidates measured in this call */
    int64_t failed;      /* candidates whose status is not ok */
    int cache_hit;       /* 1: answered from the database's best entry, nothing compiled */
    double best_time_us;
    double best_gflops;
    double best_max_rel_error;
    char best_config[512];    /* "BM=64,BN=64,..." */
    double seconds;           /* wall time of the call */
    char template_name[64];   /* the template tuned (or that the cache hit was tuned with) */
    double best_gbytes_per_s; /* the operation's bytes moved per second at the best time */
    /* configs tried first because a database on the search path has them for this problem: a
     * stale template version's, or another device's of this family (docs/shipping.md) */
    int64_t seeds;
    double budget_s;        /* the seconds budget of the run (0: none, or an evaluation budget) */
    double overrun_s;       /* seconds the run went past budget_s (0: within it) */
    double estimate_s;      /* the up-front estimate of one candidate's seconds (0: none made) */
    int64_t budget_stopped; /* 1: stopped because the next candidate would not fit the budget */
    int64_t slow_stopped;   /* candidates stopped at the slowdown limit */
    /* A problem too big for its budget: the proxy candidates were timed on (its own results and
     * best in the database), how many were, and how many of its best were confirmed on the
     * problem itself (the rest of the report is the confirmation's); "" and 0 when none. */
    char proxy_problem[48];
    int64_t proxy_evaluated;
    int64_t proxy_confirmed;
    /* The warm start (docs/search.md, "Transfer"): the sources given to the search (their
     * details in opts->transfer_out), how many of the first 10 proposals were their best
     * configs and how many proposals were the probe's moves around them; 0 when there was none
     * (--no-transfer, nothing related in the databases). */
    int32_t transfer_sources;
    int32_t first_picks_from_sources;
    int64_t probe_picks; /* taken from reserved: the size is unchanged */
} at_tune_report;

/* ---- context ---------------------------------------------------------------------------- */

/* Opens a backend, a device and the database. A database this process cannot write (a read-only
 * file system, another user's files, a full disk) is opened read-only: lookups work, and what
 * would be stored fails with AT_ERR_DB saying why. Returns AT_ERR_NO_BACKEND, AT_ERR_NO_DEVICE,
 * AT_ERR_DB, AT_ERR_DB_CORRUPT (a damaged database file), AT_ERR_DB_VERSION or
 * AT_ERR_INVALID_ARG; on failure *out is a context that only carries the error message (read it,
 * then destroy it) or NULL without memory. */
at_status at_context_create(const at_context_options *opts, at_context **out);
void at_context_destroy(at_context *ctx); /* accepts NULL */
/* The detailed message of the last failure on ctx (a compiler log, a path); "" if none. */
const char *at_context_last_error(const at_context *ctx);
/* Database i on the context's search path: 0 the user's, then the read-only layers in the
 * order they are searched (a bundle layer by its file); NULL past the last. */
const char *at_context_database(const at_context *ctx, size_t i);
/* What at_context_create skipped on the search path (damaged or unreadable layers), one line
 * each, for the caller to show as warnings; "" when nothing. */
const char *at_context_warnings(const at_context *ctx);
/* "opencl", "cuda" or "hip"; the device's readable name; the device key used in the database. */
const char *at_context_backend(const at_context *ctx);
const char *at_context_device_name(const at_context *ctx);
const char *at_context_device_key(const at_context *ctx);
/* The backend's native handles: OpenCL cl_context and cl_command_queue; CUDA CUcontext and
 * CUstream; HIP NULL (no context object) and hipStream_t. */
void *at_context_native_context(const at_context *ctx);
void *at_context_native_queue(const at_context *ctx);

/* ---- GEMM ------------------------------------------------------------------------------- */

/* A ready kernel for the problem, from the fallback chain over the user's database and the
 * read-only layers (docs/shipping.md): the tuned entry of this problem on this device (exact),
 * else tuned now when flags has AT_GET_ALLOW_TUNE, else the nearest tuned shape on this device
 * (same dtype and layout, log-ratio distance), else the nearest shape tuned on another device
 * of this architecture (same-arch), then of this vendor, else the template's first valid
 * default configuration. Only an entry whose template version the template serving the problem
 * here trusts and whose config is valid for p counts; one not measured on this device is first
 * compiled and run once on p against the reference (stored, so it is done once). *source (may
 * be NULL) says which level; at_kernel_info says more. A repeated get of a problem is answered
 * from the context's memory: the lookup memo and the kernel cache (a new handle on the program
 * built the first time). Returns AT_ERR_INVALID_ARG (out NULL too), AT_ERR_UNSUPPORTED,
 * AT_ERR_NOT_FOUND (AT_GET_NO_FALLBACK: exact only), AT_ERR_COMPILE, AT_ERR_DB. */
at_status at_gemm_get(at_context *ctx, const at_gemm_problem *p, unsigned flags, at_kernel **out,
                      at_source *source);
/* Tunes the problem on the context's device, records every measurement and the best in the
 * database, and returns the best kernel in *out (may be NULL). report may be NULL. */
at_status at_gemm_tune(at_context *ctx, const at_gemm_problem *p, const at_tune_options *opts,
                       at_tune_report *report, at_kernel **out);
/* Launches C = alpha*op(A)*op(B) + beta*C on the caller's buffers (elements of p->dtype;
 * 16-byte aligned addresses take the fast path for f16/bf16). stream: a cl_command_queue of the
 * context's cl_context or a CUstream of its CUDA context, or NULL for the context's own.
 * Asynchronous. A kernel with a workspace (split-K) uses the one zeroed device buffer kept with
 * it: launches of one at_kernel must not run concurrently (same stream, or synchronise). */
at_status at_gemm_launch(at_kernel *k, at_devptr a, at_devptr b, at_devptr c, void *stream);
/* The configuration string of a kernel, "BM=64,BN=64,...". */
const char *at_kernel_config(const at_kernel *k);
/* Releases a kernel handle (see "Kernels and threads" above); accepts NULL. */
void at_kernel_destroy(at_kernel *k);

/* ---- attention --------------------------------------------------------------------------- */

/* As at_gemm_get / at_gemm_tune, for attention: the same fallback chain, the nearest shape
 * being one of the same dtype, layout, head_dim, causal and head grouping. */
at_status at_attention_get(at_context *ctx, const at_attention_problem *p, unsigned flags,
                           at_kernel **out, at_source *source);
at_status at_attention_tune(at_context *ctx, const at_attention_problem *p,
                            const at_tune_options *opts, at_tune_report *report, at_kernel **out);
/* Launches attention on the caller's buffers: q, o (batch*seq*heads*head_dim elements of
 * p->dtype), k, v (batch*seq_kv*kv_heads*head_dim), lse (batch*heads*seq f32). Asynchronous;
 * a split-KV kernel's workspace is kept with it, as at_gemm_launch's split-K one. */
at_status at_attention_launch(at_kernel *k, at_devptr q, at_devptr kk, at_devptr v, at_devptr o,
                              at_devptr lse, void *stream);

/* ---- buffers ---------------------------------------------------------------------------- */

at_status at_buffer_create(at_context *ctx, size_t bytes, at_buffer **out);
at_status at_buffer_write(at_buffer *b, size_t offset, const void *src, size_t bytes);
at_status at_buffer_read(at_buffer *b, size_t offset, void *dst, size_t bytes);
at_devptr at_buffer_devptr(const at_buffer *b);
void at_buffer_destroy(at_buffer *b); /* accepts NULL */
/* Waits for everything queued on the context's queue. */
at_status at_context_synchronize(at_context *ctx);

/* ---- discovery: backends, devices, spaces, databases --------------------------------------- */

typedef struct at_backend_desc {
    char name[16]; /* "opencl" */
    int available; /* 1 if its runtime loaded */
    int ndevices;
    char why[512]; /* why it is unavailable; when available "" or which files it loaded */
} at_backend_desc;

typedef struct at_device_desc {
    char backend[16];
    int index;
    char name[256];
    char vendor[256];
    char driver[256];
    char key[640]; /* the database's device key */
    int64_t compute_units, max_work_group_size, local_mem_bytes, global_mem_bytes;
    int is_cpu;
    char arch[64]; /* compile target: "sm_90a", "gfx90a", "" for OpenCL */
    int64_t tma;   /* 1: it takes tensor maps (CUDA TMA: compute capability >= 9.0 and a driver
                    * with cuTensorMapEncodeTiled), which gemm_wgmma's LOAD 1 and 2 need */
    /* 1: it launches thread-block clusters (CUDA: compute capability >= 9.0 and a driver with
     * cuLaunchKernelEx), which gemm_wgmma's CLUSTER needs */
    int64_t cluster;
    int64_t reserved[6];
} at_device_desc;

/* Fills up to max entries (every backend this build knows) and sets *n. */
at_status at_backends_query(at_backend_desc *out, int max, int *n);
/* Properties of device index of the named backend, without opening it. */
at_status at_device_query(const char *backend, int index, at_device_desc *out);

typedef struct at_space_info {
    int64_t total; /* configurations before constraints */
    int64_t valid; /* after constraints, for this problem on this device */
    int nparams;
    char params[1024];      /* "BM=16|32|64|128 BN=..." */
    char template_name[64]; /* the template counted */
    int64_t reserved[8];
} at_space_info;

/* Counts the GEMM space for p on ctx's device; if visit is not NULL, calls it for each valid
 * config string (stop by returning non-zero). at_space_count is the generic form. */
at_status at_gemm_space(at_context *ctx, const at_gemm_problem *p, at_space_info *info,
                        int (*visit)(void *user, const char *config), void *user);

typedef struct at_compile_report {
    int64_t space;             /* valid configurations for the problem on the target */
    int64_t attempted;         /* configurations compiled (an even spread when limited) */
    int64_t compiled;          /* compiled and within the target's resources */
    int64_t compile_errors;    /* rejected by the compiler */
    int64_t resource_rejected; /* spills, or registers over the block's budget */
    double seconds;            /* wall time of the compiles */
    char first_error[512];     /* the first compile error's message, "" if none */
    char first_rejection[512]; /* the first resource rejection, "" if none */
    char template_name[64];    /* the template compiled */
    int64_t reserved[8];
} at_compile_report;

/* Compiles the GEMM space for p for an explicit target of a backend without any device
 * (backend "cuda", arch "sm_90a"), checks each kernel's compiler-reported resources against the
 * target, and counts the outcomes. limit > 0 compiles that many configurations spread evenly
 * through the space (offset by seed); 0 compiles all. threads 0: one per core. Returns
 * AT_ERR_INVALID_ARG (unknown arch), AT_ERR_NO_BACKEND (no compiler), AT_ERR_UNSUPPORTED (the
 * backend compiles only for present devices), with the detail in why. */
at_status at_gemm_compile_space(const char *backend, const char *arch, const at_gemm_problem *p,
                                int64_t limit, uint64_t seed, int threads, at_compile_report *out,
                                char *why, size_t whylen);
/* at_compile_space is the generic form (and takes a template name). */

/* Visits the entries of a database table ("results", "best", "binaries", "meta") whose key
 * starts with prefix (NULL: all), as readable key and value text. Opens path read-only (a
 * database directory, or a bundle file read through its private copy, docs/shipping.md);
 * AT_ERR_DB, AT_ERR_DB_CORRUPT, AT_ERR_DB_VERSION with the detail in *why (may be NULL). A
 * damaged entry is skipped: on AT_OK, *why is "" or a warning naming what was skipped. */
at_status at_db_visit(const char *path, const char *table, const char *prefix,
                      int (*visit)(void *user, const char *key, const char *value), void *user,
                      char *why, size_t whylen);
/* NULL-terminated names of the search strategies at_tune_options.strategy accepts; the first
 * is the default ("model"). */
const char *const *at_tune_strategies(void);

/* ---- replay: a tuning run answered from a recorded space ---------------------------------- */

typedef struct at_replay_report {
    char format[16];      /* "kerneltuner" or "autotune" */
    char device[256];     /* the device that recorded it, as the file names it */
    char kernel[256];     /* Kernel Tuner's kernel name, or "problem|device|template hash" */
    char objective[64];   /* the recorded quantity: "time" (ms), "median_us", "GFLOP/s" ... */
    int64_t space;        /* configurations in the recording */
    int64_t space_failed; /* of which recorded as failed */
    int64_t evaluated;    /* configurations the strategy evaluated */
    int64_t failed;       /* of which recorded as failed */
    double optimum;       /* the recording's best objective value */
    char optimum_config[512];
    int found;   /* 1 if a configuration that succeeded was evaluated */
    double best; /* best objective value evaluated */
    char best_config[512];
    double simulated_seconds; /* recorded compile + benchmark time of what was evaluated */
    double seconds;           /* wall time of the replay (the search's own cost) */
    /* One entry at each improvement: evaluations so far and the best objective value then.
     * malloc'd; at_replay_report_clear frees them. */
    size_t ntrajectory;
    int64_t *trajectory_evals;
    double *trajectory_best;
    /* The warm start's sources (malloc'd, freed by at_replay_report_clear; none without
     * opts->transfer), how many of the first 10 proposals were their best configs and how many
     * proposals were the probe's one-parameter moves around them. */
    size_t ntransfer;
    at_transfer_source *transfer;
    int64_t first_picks_from_sources;
    int64_t probe_picks;
    int64_t reserved[4]; /* the four fields above were taken from it */
} at_replay_report;

/* Replays a tuning run with opts' strategy, seed and budgets (max_seconds counts the recorded
 * seconds of the evaluated configurations, not wall time; no budget: until the space is
 * exhausted) against the recorded space at path: Kernel Tuner cache JSON (plain or .gz) or an
 * autotune database directory, chosen by content. select picks one space of a database by a
 * prefix of "problem|device|template hash" (NULL: the database must hold one). Returns
 * AT_ERR_IO, AT_ERR_INVALID_ARG (malformed file, unknown strategy, selection), AT_ERR_DB*,
 * AT_ERR_NO_MEMORY, with the detail in *why (may be NULL); on success *why is "" or says which
 * damaged records of a database were skipped. */
at_status at_replay_file(const char *path, const char *select, const at_tune_options *opts,
                         at_replay_report *report, char *why, size_t whylen);
void at_replay_report_clear(at_replay_report *report); /* frees the trajectory */

/* The database path used when none is given. malloc'd; free() it. */
char *at_db_default_location(void);

/* Writes the measurements of one problem (key, e.g. "gemm/f32/nn/256x256x256") in database
 * path (NULL: the default) as a Kernel Tuner cache JSON file at out_path (NULL: stdout), so the
 * recorded space replays in Kernel Tuner's simulation mode and in `autotune replay`. device and
 * template_hash (NULL: any) select the results when the problem was tuned on several devices or
 * template versions; a file holds one of each, else AT_ERR_INVALID_ARG naming the choices.
 * Times are the medians in ms; a failed config's time is "CompilationFailedConfig",
 * "InvalidConfig" (rejected before launch) or "RuntimeFailedConfig". AT_ERR_NOT_FOUND when
 * nothing matches; AT_ERR_DB*, AT_ERR_IO, with the detail in *why (may be NULL). A damaged result
 * is left out: on AT_OK, *why is "" or a warning naming what was left out. */
at_status at_db_export_kernel_tuner(const char *path, const char *problem, const char *device,
                                    const char *template_hash, const char *out_path, char *why,
                                    size_t whylen);

/* ---- bundles: databases that travel (docs/shipping.md) ------------------------------------ */

/* Which of two records with the same key an import or merge keeps. */
typedef enum at_prefer {
    AT_PREFER_FASTER = 0,  /* trusted first, then the smaller time, the newer, the smaller text */
    AT_PREFER_NEWER = 1,   /* the newer `when`, ties as AT_PREFER_FASTER */
    AT_PREFER_EXISTING = 2 /* what the destination holds; AT_PREFER_FASTER among the inputs */
} at_prefer;

/* Counts of results and best entries: one per key once the inputs' duplicates are resolved,
 * imported + kept + unchanged. Device records are counted apart. */
typedef struct at_import_report {
    int64_t records;   /* results and best entries read from the inputs */
    int64_t imported;  /* written to the destination */
    int64_t kept;      /* the destination's own record kept (it wins by the rule) */
    int64_t unchanged; /* the same record was there already */
    int64_t devices;   /* device records written (a newer identity of a device) */
    int64_t reserved[4];
} at_import_report;

/* Writes the database at path (NULL: the default) as a bundle at out_path ("-": stdout):
 * gzip-compressed JSON Lines, a header line then one line per result and best entry in key
 * order, each with its device's identity and its template's name and hash. op (NULL: all)
 * keeps one operation's records; device (NULL: all) an fnmatch pattern matched against the
 * device key and the device name; best_only leaves the results out. *records (may be NULL):
 * how many were written. AT_ERR_IO, AT_ERR_DB*, with the detail in *why; on AT_OK *why is "" or
 * names damaged records left out. */
at_status at_db_export_bundle(const char *path, const char *out_path, const char *op,
                              const char *device, int best_only, int64_t *records, char *why,
                              size_t whylen);
/* Imports the bundles or databases inputs[0..n) (told apart by content; "-": a bundle on stdin)
 * into the database at path (NULL: the default; created when missing): every input is read and
 * checked first (a malformed, truncated or newer bundle, a record of an operation this library
 * does not know: AT_ERR_INVALID_ARG naming the file and line, and nothing is written), then
 * everything is written in one transaction by the rule prefer chooses. Importing the same
 * records twice writes nothing. `db import` is n = 1, `db merge` n >= 1. */
at_status at_db_import(const char *path, const char *const *inputs, size_t n, at_prefer prefer,
                       at_import_report *report, char *why, size_t whylen);

/* Records of a database counted by operation, device and template. */
typedef struct at_db_count {
    char name[640];         /* the operation, device key or template name ("" unknown) */
    int64_t results_ok;     /* results measured ok */
    int64_t results_failed; /* results of a failed candidate */
    int64_t best;           /* best entries */
} at_db_count;

typedef struct at_db_stats {
    at_db_count total;
    at_db_count *ops, *devices, *templates; /* malloc'd, sorted by name */
    size_t nops, ndevices, ntemplates;
    int64_t reserved[8];
} at_db_stats;

/* Counts the records of the database at path (NULL: the default). Errors as at_db_visit. */
at_status at_db_stats_read(const char *path, at_db_stats *out, char *why, size_t whylen);
void at_db_stats_clear(at_db_stats *s); /* frees the arrays */

/* ---- operations: any problem, generically -------------------------------------------------
 * Every operation (GEMM, ...) is described by its fields, so tools and bindings can build a
 * problem from text (a CLI option, a shape list) and tune, get and launch it without knowing the
 * operation. The typed calls above (at_gemm_*) are thin wrappers over these. */

typedef struct at_problem at_problem; /* an operation and the values of its fields */

typedef enum at_field_kind {
    AT_FIELD_INT = 0,    /* an integer in [lo, hi] */
    AT_FIELD_CHOICE = 1, /* one of choices[] */
    AT_FIELD_REAL = 2,   /* a finite number */
    AT_FIELD_FLAG = 3    /* 0 or 1 (also "false"/"true"); on the CLI a bare --name sets it */
} at_field_kind;

typedef struct at_field_desc {
    const char *name; /* "m" */
    at_field_kind kind;
    int64_t lo, hi;             /* AT_FIELD_INT: the accepted range */
    const char *const *choices; /* AT_FIELD_CHOICE: the names, NULL-terminated */
    const char *def;     /* the default as text; "=m": the value of field m; NULL: required */
    const char *example; /* a value for counting a space when none is given; NULL: none */
    int shape;           /* 1: identifies the problem (database key, CLI option, JSON) */
    const char *help;    /* one line */
    void *reserved[4];
} at_field_desc;

/* NULL-terminated names of the operations this library knows ("gemm", ...). */
const char *const *at_operations(void);
/* A paragraph saying what operation op computes; NULL for an unknown operation. */
const char *at_operation_help(const char *op);
/* Field i of operation op, in order; AT_ERR_NOT_FOUND past the last, AT_ERR_INVALID_ARG for an
 * unknown operation. */
at_status at_operation_field(const char *op, size_t i, at_field_desc *out);
/* The names of op's buffers in at_kernel_launch's order ("A", "B", "C"), NULL-terminated;
 * NULL for an unknown operation. */
const char *const *at_operation_buffers(const char *op);

/* A problem of operation op with every default set (required fields still unset). */
at_status at_problem_create(const char *op, at_problem **out);
/* Sets a field from text ("1024", "bf16", "0.5"); AT_ERR_INVALID_ARG names the field and what it
 * accepts. The last error's text is at_problem_last_error(). */
at_status at_problem_set(at_problem *p, const char *field, const char *value);
/* A field's value as text, defaults applied ("=m" resolved); "" for an unset required field. */
at_status at_problem_get(const at_problem *p, const char *field, char *buf, size_t len);
/* The operation's name. */
const char *at_problem_operation(const at_problem *p);
/* The problem's database key, "gemm/f32/nn/1024x1024x1024"; AT_ERR_INVALID_ARG (with the
 * message in at_problem_last_error) when a field is missing or out of range. */
at_status at_problem_key(const at_problem *p, char *buf, size_t len);
/* The detailed message of the last failure of at_problem_* on this thread. */
const char *at_problem_last_error(void);
void at_problem_destroy(at_problem *p); /* accepts NULL */

/* The generic forms of at_gemm_tune, at_gemm_get, at_gemm_space and at_gemm_compile_space. */
at_status at_tune(at_context *ctx, const at_problem *p, const at_tune_options *opts,
                  at_tune_report *report, at_kernel **out);
at_status at_get(at_context *ctx, const at_problem *p, unsigned flags, at_kernel **out,
                 at_source *source);
/* Where a kernel's configuration came from: the level of the fallback chain and the database
 * that answered (docs/shipping.md). */
typedef struct at_lookup_info {
    at_source source;
    char database[1024];   /* the path of the database or bundle that answered; "" for default */
    char device_key[640];  /* the device the entry was tuned on; "" for default */
    char problem_key[256]; /* the problem the entry was tuned for (nearest shape: another) */
    char config[512];      /* "BM=64,BN=64,..." */
    char template_name[64];
    char template_hash[17];
    double time_us; /* as recorded on its device; 0 for default */
    int validated;  /* 1: checked on this device on first use (not measured here) */
    int64_t reserved[8];
} at_lookup_info;

/* The answer at_get would build, without building it: the fallback chain over the user's
 * database and the read-only layers, validating a config not measured on this device (compile
 * and one checked run, stored so it is done once). A repeated lookup of a problem is answered
 * from an in-process memo. flags: AT_GET_NO_FALLBACK (exact entries only). AT_ERR_NOT_FOUND,
 * AT_ERR_INVALID_ARG, AT_ERR_UNSUPPORTED, AT_ERR_NO_VALID_CONFIG. */
at_status at_lookup(at_context *ctx, const at_problem *p, unsigned flags, at_lookup_info *out);
/* Where kernel k's configuration came from (as at_lookup; AT_SOURCE_TUNED for a kernel tuned on
 * the spot). */
at_status at_kernel_info(const at_kernel *k, at_lookup_info *out);

/* The answer of each level of the fallback chain for p on ctx's device, in chain order (exact,
 * nearest-shape, same-arch, vendor, default): found[i] is 1 when level i has one, and out[i]
 * is it (validated as at_lookup does). For `autotune db show`. Errors as at_lookup. */
at_status at_lookup_levels(at_context *ctx, const at_problem *p, at_lookup_info out[5],
                           int found[5]);

/* One best entry of this device re-measured by at_verify. */
typedef struct at_verify_entry {
    char database[1024]; /* the database on the search path holding it */
    char problem_key[256];
    char template_name[64];
    char config[512];
    double recorded_us; /* the entry's time_us */
    double measured_us; /* the median now (0 when it failed) */
    int slower;         /* measured_us > recorded_us * max_slowdown */
    int failed;         /* no longer compiles or fails its check, or its template version is no
                         * longer trusted: reason says which */
    int driver_changed, compiler_changed; /* recorded with another driver / compiler version */
    char reason[512];
    char recorded_driver[256], recorded_compiler[256];
    int64_t reserved[8];
} at_verify_entry;

/* Re-measures every best entry of ctx's device in the databases on its search path (of
 * operation op; NULL: all) with the tuning's compile, check and timing, stores nothing, and
 * calls visit for each (a non-zero return stops). *flagged counts the entries slower than
 * recorded by more than max_slowdown (> 1), failed or recorded with another driver or compiler.
 * AT_ERR_INVALID_ARG (op, max_slowdown), AT_ERR_DB*, a device failure. */
at_status at_verify(at_context *ctx, const char *op, double max_slowdown,
                    int (*visit)(void *user, const at_verify_entry *e), void *user,
                    int64_t *flagged);

/* The problem a database key names ("gemm/f32/nn/64x64x64"; fields the key does not hold take
 * their defaults). AT_ERR_INVALID_ARG (with at_problem_last_error) for a key that is not one,
 * AT_ERR_UNSUPPORTED for an operation that cannot read its keys. */
at_status at_problem_from_key(const char *key, at_problem **out);

/* template_name: NULL for the registry's choice. */
at_status at_space_count(at_context *ctx, const at_problem *p, const char *template_name,
                         at_space_info *info, int (*visit)(void *user, const char *config),
                         void *user);
at_status at_compile_space(const char *backend, const char *arch, const at_problem *p,
                           const char *template_name, int64_t limit, uint64_t seed, int threads,
                           at_compile_report *out, char *why, size_t whylen);
/* Launches a kernel of any operation on the caller's buffers, given in the order of
 * at_operation_buffers (GEMM: A, B, C); the problem's scalars were fixed when the kernel was
 * made. stream as for at_gemm_launch. */
at_status at_kernel_launch(at_kernel *k, const at_devptr *buffers, size_t nbuffers, void *stream);
/* The name of the template a kernel was made from ("gemm"). */
const char *at_kernel_template(const at_kernel *k);

/* ---- errors ----------------------------------------------------------------------------- */

const char *at_strerror(at_status s);
/* The name of a fallback level, as the CLI's JSON writes it: "exact", "nearest-shape",
 * "default", "tuned", "same-arch", "vendor"; "?" for another value. */
const char *at_source_name(at_source s);
/* The library's version ("0.2.0"); AT_VERSION_STRING is the header's. */
const char *at_version(void);
/* The database schema this library writes, "major.minor" ("2.0"): it reads any older schema
 * and refuses a newer major one (AT_ERR_DB_VERSION). */
const char *at_db_schema_version(void);

#ifdef __cplusplus
}
#endif
#endif
