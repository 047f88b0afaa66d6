/* tuner.h — internal seams of the library: the context, templates and their registry, element
 * types, kernels, and the pipeline's entry points (build, run, tune). Nothing here is public. */
#ifndef AT_TUNER_H
#define AT_TUNER_H

#include "base/util.h"
#include "cache/db.h"
#include "tuner/backend.h"
#include "tuner/layers.h"
#include "tuner/op.h"
#include "tuner/space/space.h"

#include <stdio.h>

struct at_context {
    const at_backend_ops *ops;
    at_bdev *dev;
    at_device_info info;
    at_db *db;
    char *db_path;
    int compile_threads;
    int device_index;
    int native; /* dev holds the caller's handles (native_context/queue): never recycled */
    /* How often dev was closed and opened again after a fault (in-process runs, worker.c):
     * what was made on an earlier dev (a kernel's program, its workspace) is gone with it. */
    unsigned recycles;
    /* The environment's controls, read at creation: AUTOTUNE_TUNING=0 (no tuning: at_get never
     * tunes, at_tune answers only from the databases), AUTOTUNE_DB_READONLY=1 (the user's
     * database is opened as a layer is, nothing written, and no tuning) and AUTOTUNE_BUDGET (the
     * default budget of a tuning run given none; 0 and 0: the search's own default). */
    int no_tuning;
    const char *no_tuning_why; /* the variable that turned tuning off, for the messages */
    int db_readonly;
    int log_level; /* AUTOTUNE_LOG: 0 quiet, 1 lookups and tuning runs, 2 every candidate */
    int64_t env_evals;
    double env_seconds;
    char last_error[4096];
    at_layers layers;     /* db, then the read-only layers of the search path */
    at_device_rec id;     /* this device's identity: its family and vendor for the chain */
    struct at_memo *memo; /* lookups and checks answered in this process (api.c) */
    /* Called right after a tuning run stores a results or best record (table "results" or
     * "best"), with its key and text as the database holds them: the fleet forwards them to the
     * rank that writes the database (tuner/cli/fleet.c). NULL: none. */
    void (*on_store)(void *user, const char *table, const char *key, const char *value_text);
    void *on_store_user;
};

/* A line on stderr ("autotune: ...") when level <= the context's AUTOTUNE_LOG level. */
void at_log(const at_context *ctx, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the thread's last detailed message on the context and returns s. */
at_status at_ctx_fail(at_context *ctx, at_status s);

/* The identity of a live device for the devices table: backend, name, arch and units from
 * info, vendor and family as at_device_rec_fill makes them from a key (an OpenCL device's
 * vendor is its platform name), info's driver, compiler; when 0. */
void at_device_rec_from_info(const at_device_info *info, const char *compiler, at_device_rec *out);

/* ---- element types ------------------------------------------------------------------------- */

extern const char *const at_dtype_table[]; /* "f32", "f16", "bf16", NULL: the one table */
const char *at_dtype_name(at_dtype d);
/* Element size, and conversions between f32 and an element type (round to nearest even). */
size_t at_dtype_size(at_dtype d);
void at_dtype_from_f32(at_dtype d, const float *src, void *dst, size_t n);
void at_dtype_to_f32(at_dtype d, const void *src, float *dst, size_t n);
/* n pseudo-random values in [-1, 1] from seed, each exactly representable in d, so a CPU
 * reference sees the very inputs the device does. */
void at_dtype_fill_random(float *x, size_t n, uint64_t seed, at_dtype d);

/* ---- templates ----------------------------------------------------------------------------- */

typedef struct at_template {
    at_space *space;
    char *source;  /* backend preamble + kernel source + included helpers, ready to compile */
    char hash[17]; /* the source and the space's fingerprint: results are trusted only for it */
    char name[64]; /* `name:` */
} at_template;

/* Loads the template named name (its YAML `name:`, in any operation folder) with the preamble of
 * a backend: from the folders in $AUTOTUNE_TEMPLATE_PATH (':'-separated) when set, else from the
 * copies embedded at build time. AT_ERR_TEMPLATE if there is no such template. */
at_status at_template_load(const char *name, const char *backend, at_template **out);
void at_template_free(at_template *t);
/* 1 if results tuned with the template version hash hold for t: its own, or one it supersedes
 * (an earlier version of the same code and space). */
int at_template_trusts(const at_template *t, const char *hash);
/* The template for problem p on a device (backend and compile target of info): the one named
 * (checked to implement p's operation and element type there; AT_ERR_INVALID_ARG otherwise),
 * else the highest `priority:` of those that apply (AT_ERR_UNSUPPORTED, naming what there is,
 * when none does). Its name goes to out. */
at_status at_template_select(const at_problem *p, const at_device_info *info, const char *name,
                             char *out, size_t len);
/* Selects, loads and binds a template for p on a device: device variables, problem variables,
 * and a check that its `arguments:` are the operation's. */
at_status at_template_for(const at_problem *p, const at_device_info *info, const char *name,
                          at_template **out);
/* Sets the device variables of a space from a device's properties. */
at_status at_template_bind_device(at_template *t, const at_device_info *info);

/* ---- kernels ------------------------------------------------------------------------------- */

struct at_kernel {
    at_context *ctx;
    at_bprog *prog;
    at_problem *problem; /* resolved, owned: the values scalar arguments are made from */
    char config[512];
    char template_name[64];
    at_arg args[AT_MAX_ARGS]; /* the template's argument list (names owned; tmap NULL) */
    size_t nargs;
    at_tmap_desc maps[AT_MAX_ARGS]; /* its tensor maps at this config, encoded per launch */
    size_t global[3], local[3], dims;
    size_t shared_bytes; /* dynamic shared memory per block (`launch: shared:`) */
    size_t cluster;      /* blocks per cluster, dimension 0 (`launch: cluster:`) */
    at_bbuf workspace;   /* zeroed scratch (`workspace:`), the trailing argument; NULL handle:
                          * none. The kernel leaves it zeroed, so it is cleared only once. */
    int from_binary;     /* 1: loaded from the binaries table, not compiled */
    at_lookup_info info; /* where its config came from (at_kernel_info) */
    size_t ws_bytes;     /* the workspace's size: allocated at the first launch */
    unsigned recycles;   /* ctx->recycles when it was built: another value, it is stale */
    /* A kernel handed out from the context's kernel cache shares the program, the argument
     * names and the problem of base (one reference); NULL: it owns them. */
    struct at_kernel *base;
    int refs; /* of a kernel that owns its program: 1 + the kernels sharing it (atomic) */
};

/* Compiles (or loads from the binaries table) template t (bound to p and ctx's device) at a
 * configuration string, and makes a kernel (one reference, no workspace yet). */
at_status at_kernel_build(at_context *ctx, at_template *t, const at_problem *p, const char *config,
                          at_kernel **out);
/* A new kernel sharing base's program (base gains a reference; at_kernel_destroy gives it
 * back), with its own workspace, made at its first launch. NULL when out of memory. */
at_kernel *at_kernel_share(at_kernel *base);

/* Makes *ws a zeroed device buffer of at least bytes (reallocated when smaller; 0 bytes frees
 * it), waiting until the zeroing is done so any stream may use it. */
at_status at_workspace_ensure(at_context *ctx, at_bbuf *ws, size_t bytes);

/* 1 if a compiled kernel fits the device: no spills, no serialized wgmma, static shared memory
 * within local_mem_bytes, a work-group the kernel can run, registers x threads within the
 * block's register budget. Otherwise 0 and why says which limit. Unknown counts pass. */
int at_resources_fit(const at_device_info *info, const at_resources *r, int64_t threads, char *why,
                     size_t whylen);

/* Compiles configurations of t's space (bound to a problem and ctx->info) on ctx's device or
 * compile-only target, without running them; see at_compile_space. */
at_status at_pipeline_compile(at_context *ctx, at_template *t, int64_t limit, uint64_t seed,
                              at_compile_report *rep);

/* Tunes problem p with template t (already bound to p and the device): on the device, or
 * answered from opts->replay_db's records. The report's template name, space_total and seconds
 * are at_tune's to fill. */
/* The configs of best entries for p on the search path that a tuning run of t tries first
 * (docs/shipping.md): this problem's entries on this device whose template version t no longer
 * trusts, and those of other devices of this family, still valid in t's space; up to cap of
 * them into out (t->space->nparams values each), nearest database first. Returns the count. */
size_t at_seed_configs(at_context *ctx, const at_template *t, const at_problem *p, int64_t *out,
                       size_t cap);

/* A related task of p for a warm start (docs/search.md, "Transfer"): the results of t's
 * template (by name) in a database on the search path for a neighbouring shape on this device, or
 * for p's shape on another device of its family or vendor. */
typedef struct at_related {
    struct at_recording *rec; /* its results (owned) */
    char problem[256], device[256];
} at_related;

/* Up to cap related tasks of p for t (AT_TRANSFER_MAX): the 3 nearest shapes tuned on this
 * device (log-shape distance, nearest database first), then p's shape on up to 2 other devices
 * of this family, then of this vendor. Unreadable entries are passed over. Returns the count. */
size_t at_related_results(at_context *ctx, const at_template *t, const at_problem *p,
                          at_related *out, size_t cap);
void at_related_free(at_related *r, size_t n);

at_status at_pipeline_tune(at_context *ctx, at_template *t, const at_problem *p,
                           const at_tune_options *opts, at_tune_report *rep, char *best_config,
                           size_t best_len);

#endif
