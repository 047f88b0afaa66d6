/* api.c — the public library API (include/autotune.h): contexts; get (hit, nearest, default or
 * tune), tune (cache hit, or the pipeline) and launch for every
 * operation; buffers; discovery. Every failure leaves its detailed message on the context. */
#define _XOPEN_SOURCE 700
#include "tuner/pipeline.h"

#include "cache/bundle.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- errors ------------------------------------------------------------------------------- */

const char *at_strerror(at_status s)
{
    switch (s) {
    case AT_OK:
        return "success";
    case AT_ERR_INVALID_ARG:
        return "invalid argument";
    case AT_ERR_NO_MEMORY:
        return "out of memory";
    case AT_ERR_NO_BACKEND:
        return "backend not available";
    case AT_ERR_NO_DEVICE:
        return "no such device";
    case AT_ERR_COMPILE:
        return "kernel compilation failed";
    case AT_ERR_LAUNCH:
        return "kernel launch or device operation failed";
    case AT_ERR_DB:
        return "database cannot be opened, read or written";
    case AT_ERR_DB_CORRUPT:
        return "database file is corrupt";
    case AT_ERR_DB_VERSION:
        return "database was written by a newer autotune";
    case AT_ERR_NOT_FOUND:
        return "not found";
    case AT_ERR_TEMPLATE:
        return "kernel template or tuning space is malformed";
    case AT_ERR_IO:
        return "file input/output error";
    case AT_ERR_UNSUPPORTED:
        return "not supported";
    case AT_ERR_NO_VALID_CONFIG:
        return "no valid configuration";
    case AT_ERR_INTERNAL:
        return "internal error";
    case AT_ERR_INTERRUPTED:
        return "interrupted";
    case AT_ERR_DEVICE_LOST:
        return "device context lost";
    }
    return "unknown status";
}

const char *at_version(void) { return AT_VERSION_STRING; }

const char *at_source_name(at_source s)
{
    static const char *const names[] = {"exact", "nearest-shape", "default",
                                        "tuned", "same-arch",     "vendor"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

void at_log(const at_context *ctx, int level, const char *fmt, ...)
{
    if (!ctx || level > ctx->log_level) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "autotune: %s\n", line);
}

#define AT_STR_(x) #x
#define AT_STR(x)  AT_STR_(x)
const char *at_db_schema_version(void)
{
    return AT_STR(AT_DB_SCHEMA) "." AT_STR(AT_DB_SCHEMA_MINOR);
}

at_status at_ctx_fail(at_context *ctx, at_status s)
{
    if (ctx && s != AT_OK) snprintf(ctx->last_error, sizeof ctx->last_error, "%s", at_errmsg());
    return s;
}

const char *at_context_last_error(const at_context *ctx) { return ctx ? ctx->last_error : ""; }

/* ---- the memo: lookups, checks and kernels of this process ---------------------------------- */

#define MEMO_BUCKETS 1024

typedef struct memo_entry {
    struct memo_entry *next;
    /* "L<flags>|<signature>" a lookup, "C|..." a check, "K|<signature>|<template>|<hash>|
     * <config>" a built kernel */
    char *key;
    at_status status; /* AT_OK or AT_ERR_NOT_FOUND (a lookup); AT_OK or not (a check) */
    at_lookup_info info;
    at_kernel *kernel; /* a "K" entry's kernel: the memo holds one reference */
} memo_entry;

struct at_memo {
    pthread_mutex_t lock;
    /* Recursive: the slow paths (the chain, builds, tuning) take turns under it, so calls on
     * one context from several threads are safe; hot answers take only `lock`. */
    pthread_mutex_t slow;
    memo_entry *b[MEMO_BUCKETS];
};

static at_status memo_create(at_context *ctx)
{
    if (!(ctx->memo = calloc(1, sizeof *ctx->memo)))
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&ctx->memo->lock, NULL);
    pthread_mutex_init(&ctx->memo->slow, &a);
    pthread_mutexattr_destroy(&a);
    return AT_OK;
}

static void memo_entry_free(memo_entry *e)
{
    at_kernel_destroy(e->kernel);
    free(e->key);
    free(e);
}

static void memo_free(at_context *ctx)
{
    if (!ctx->memo) return;
    for (size_t i = 0; i < MEMO_BUCKETS; i++)
        for (memo_entry *e = ctx->memo->b[i], *next; e; e = next) {
            next = e->next;
            memo_entry_free(e);
        }
    pthread_mutex_destroy(&ctx->memo->lock);
    pthread_mutex_destroy(&ctx->memo->slow);
    free(ctx->memo);
    ctx->memo = NULL;
}

/* The slow paths take turns (a context made by hand, in tests, has no memo: nothing to do). */
static void slow_lock(at_context *ctx)
{
    if (ctx->memo) pthread_mutex_lock(&ctx->memo->slow);
}
static void slow_unlock(at_context *ctx)
{
    if (ctx->memo) pthread_mutex_unlock(&ctx->memo->slow);
}

/* 1 and the stored outcome when key is in the memo; kernel (may be NULL): a new kernel sharing
 * the entry's (NULL when out of memory). */
static int memo_get(at_context *ctx, const char *key, at_status *status, at_lookup_info *info,
                    at_kernel **kernel)
{
    struct at_memo *m = ctx->memo;
    int found = 0;
    if (!m) return 0; /* a context made by hand (tests) */
    pthread_mutex_lock(&m->lock);
    memo_entry **pe = &m->b[at_hash_str(AT_HASH_SEED, key) % MEMO_BUCKETS];
    for (memo_entry *e; (e = *pe) && !found; pe = &e->next)
        if (strcmp(e->key, key) == 0 && e->kernel && e->kernel->recycles != ctx->recycles) {
            *pe = e->next; /* built on a device since recycled: built again */
            memo_entry_free(e);
            break;
        } else if (strcmp(e->key, key) == 0) {
            found = 1;
            *status = e->status;
            if (info) *info = e->info;
            if (kernel) *kernel = e->kernel ? at_kernel_share(e->kernel) : NULL;
        }
    pthread_mutex_unlock(&m->lock);
    return found;
}

/* Remembers an outcome, and takes the reference of kernel (may be NULL) (out of memory: not
 * remembered, asked again next time). */
static void memo_put(at_context *ctx, const char *key, at_status status, const at_lookup_info *info,
                     at_kernel *kernel)
{
    struct at_memo *m = ctx->memo;
    memo_entry *e = m ? calloc(1, sizeof *e) : NULL;
    if (!e || !(e->key = at_strdup(key))) {
        free(e);
        at_kernel_destroy(kernel);
        return;
    }
    e->status = status;
    if (info) e->info = *info;
    e->kernel = kernel;
    pthread_mutex_lock(&m->lock);
    memo_entry **b = &m->b[at_hash_str(AT_HASH_SEED, key) % MEMO_BUCKETS];
    e->next = *b;
    *b = e;
    pthread_mutex_unlock(&m->lock);
}

/* Forgets the entries whose key starts with prefix: "L", every lookup (a tuning run may change
 * the answer of its problem and of every problem whose nearest shape it now is); "K|<sig>|",
 * the kernels of a problem. A forgotten kernel lives on in the kernels that share it. */
static void memo_forget(at_context *ctx, const char *prefix)
{
    struct at_memo *m = ctx->memo;
    size_t n = strlen(prefix);
    if (!m) return;
    memo_entry *gone = NULL;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < MEMO_BUCKETS; i++)
        for (memo_entry **pe = &m->b[i]; *pe;) {
            memo_entry *e = *pe;
            if (strncmp(e->key, prefix, n) == 0) {
                *pe = e->next;
                e->next = gone;
                gone = e;
            } else {
                pe = &e->next;
            }
        }
    pthread_mutex_unlock(&m->lock);
    for (memo_entry *next; gone; gone = next) {
        next = gone->next;
        memo_entry_free(gone);
    }
}

/* ---- context ------------------------------------------------------------------------------ */

static const char *const g_kind_names[] = {"auto", "cuda", "hip", "opencl"};

/* The backend to use: the one asked for, or the first available with a device. */
static at_status pick_backend(at_backend_kind kind, const at_backend_ops **out)
{
    const char *env = getenv("AUTOTUNE_BACKEND");
    const char *want = NULL;
    if ((unsigned)kind > AT_BACKEND_OPENCL)
        return at_fail(AT_ERR_INVALID_ARG, "backend %d is not one of auto, cuda, hip, opencl",
                       (int)kind);
    if (kind != AT_BACKEND_AUTO)
        want = g_kind_names[kind];
    else if (env && *env && strcmp(env, "auto") != 0)
        want = env;
    char why[512] = "";
    if (want) {
        const at_backend_ops *ops = at_backend_find(want);
        if (!ops) {
            if (strcmp(want, "cuda") && strcmp(want, "hip") && strcmp(want, "opencl"))
                return at_fail(AT_ERR_INVALID_ARG,
                               "unknown backend '%s' (AUTOTUNE_BACKEND or --backend: auto, cuda, "
                               "hip, opencl)",
                               want);
            return at_fail(
                AT_ERR_NO_BACKEND,
                "backend '%s' is not available: this build of autotune has no %s backend", want,
                want);
        }
        if (ops->probe(why, sizeof why) != AT_OK)
            return at_fail(AT_ERR_NO_BACKEND, "backend '%s' is not available: %s", want, why);
        *out = ops;
        return AT_OK;
    }
    for (const at_backend_ops *const *b = at_backend_list(); *b; b++) {
        if ((*b)->probe(why, sizeof why) == AT_OK && (*b)->device_count() > 0) {
            *out = *b;
            return AT_OK;
        }
    }
    return at_fail(AT_ERR_NO_BACKEND,
                   "no backend with a device is available (autotune devices says why)");
}

/* The environment's controls (README, "Environment"), in the spirit of PyTorch TunableOp's. */
static at_status read_environment(at_context *ctx)
{
    const char *tuning = getenv("AUTOTUNE_TUNING"), *budget = getenv("AUTOTUNE_BUDGET"),
               *log = getenv("AUTOTUNE_LOG"), *ro = getenv("AUTOTUNE_DB_READONLY");
    if (log && *log) {
        if (strlen(log) != 1 || log[0] < '0' || log[0] > '2')
            return at_fail(AT_ERR_INVALID_ARG,
                           "AUTOTUNE_LOG='%s' is not 0 (quiet), 1 (lookups and tuning runs) or 2 "
                           "(also every candidate)",
                           log);
        ctx->log_level = log[0] - '0';
    }
    if (tuning && *tuning) {
        if (strcmp(tuning, "0") && strcmp(tuning, "1"))
            return at_fail(AT_ERR_INVALID_ARG,
                           "AUTOTUNE_TUNING='%s' is not 0 (never tune) or 1 (tune when asked)",
                           tuning);
        ctx->no_tuning = tuning[0] == '0';
        ctx->no_tuning_why = "AUTOTUNE_TUNING=0";
    }
    if (ro && *ro) {
        if (strcmp(ro, "0") && strcmp(ro, "1"))
            return at_fail(AT_ERR_INVALID_ARG,
                           "AUTOTUNE_DB_READONLY='%s' is not 1 (never write the database) or 0",
                           ro);
        if (ro[0] == '1') {
            ctx->db_readonly = ctx->no_tuning = 1;
            ctx->no_tuning_why = "AUTOTUNE_DB_READONLY=1";
        }
    }
    if (budget && *budget && at_parse_budget(budget, &ctx->env_evals, &ctx->env_seconds))
        return at_fail(AT_ERR_INVALID_ARG,
                       "AUTOTUNE_BUDGET='%s' is not a count of evaluations (N >= 1) or of seconds "
                       "(Ns, e.g. 90s)",
                       budget);
    return AT_OK;
}

at_status at_context_create(const at_context_options *opts, at_context **out)
{
    at_context_options o = {0};
    if (opts) o = *opts;
    at_context *ctx = calloc(1, sizeof *ctx);
    *out = ctx;
    if (!ctx) return AT_ERR_NO_MEMORY;
    at_errclear();
    int native = o.native_context || o.native_queue;
    at_status s = AT_OK;
    if (native && o.backend == AT_BACKEND_AUTO)
        s = at_fail(AT_ERR_INVALID_ARG, "native handles need a backend (not AT_BACKEND_AUTO)");
    if (s == AT_OK) s = pick_backend(o.backend, &ctx->ops);
    if (s == AT_OK && native && !ctx->ops->open_native)
        s = at_fail(AT_ERR_UNSUPPORTED, "the %s backend cannot take native handles",
                    ctx->ops->name);
    /* The caller's handles first: they say which device it is (-1: theirs). */
    if (s == AT_OK && native)
        s = ctx->ops->open_native(o.native_context, o.native_queue, &o.device, &ctx->dev);
    if (s == AT_OK) {
        int n = ctx->ops->device_count();
        if (o.device < 0 || o.device >= n)
            s = at_fail(AT_ERR_NO_DEVICE, "device %d does not exist: backend %s has %d device%s",
                        o.device, ctx->ops->name, n, n == 1 ? "" : "s");
    }
    if (s == AT_OK) s = ctx->ops->device_info(o.device, &ctx->info);
    if (s == AT_OK) s = read_environment(ctx);
    if (s == AT_OK) {
        ctx->db_path = o.db_path ? at_strdup(o.db_path) : at_db_default_path();
        if (!ctx->db_path) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    /* A database this process cannot write still answers lookups: writes then fail with the
     * reason (at_db_readonly_reason). AUTOTUNE_DB_READONLY=1: opened as a layer is, nothing in
     * its folder created or written (not even LMDB's lock file). */
    if (s == AT_OK && ctx->db_readonly) {
        s = at_db_open(ctx->db_path, AT_DB_LAYER, &ctx->db);
        if (s != AT_OK) {
            char why[1024];
            snprintf(why, sizeof why, "%s", at_errmsg());
            s = at_fail(s, "AUTOTUNE_DB_READONLY=1 and the database cannot be read: %s", why);
        }
    } else if (s == AT_OK) {
        s = at_db_open(ctx->db_path, AT_DB_WRITABLE_OR_READONLY, &ctx->db);
    }
    /* The read-only layers: what cannot be opened is skipped (at_context_warnings says why). */
    if (s == AT_OK) s = at_layers_open(&ctx->layers, ctx->db, ctx->db_path, o.db_search_path);
    if (s == AT_OK) s = memo_create(ctx);
    if (s == AT_OK) at_device_rec_from_info(&ctx->info, "", &ctx->id);
    if (s == AT_OK && !native) s = ctx->ops->open(o.device, &ctx->dev);
    ctx->device_index = o.device;
    ctx->native = native;
    ctx->compile_threads = o.compile_threads;
    return at_ctx_fail(ctx, s);
}

void at_context_destroy(at_context *ctx)
{
    if (!ctx) return;
    if (ctx->ops && ctx->dev) ctx->ops->close(ctx->dev);
    memo_free(ctx);
    at_layers_close(&ctx->layers);
    at_db_close(ctx->db);
    free(ctx->db_path);
    free(ctx);
}

const char *at_context_database(const at_context *ctx, size_t i)
{
    return ctx && i < ctx->layers.n ? ctx->layers.path[i] : NULL;
}

const char *at_context_warnings(const at_context *ctx)
{
    return ctx ? at_sb_str(&ctx->layers.warn) : "";
}

const char *at_context_backend(const at_context *ctx) { return ctx->info.backend; }
const char *at_context_device_name(const at_context *ctx) { return ctx->info.name; }
const char *at_context_device_key(const at_context *ctx) { return ctx->info.key; }
void *at_context_native_context(const at_context *ctx)
{
    return ctx->dev ? ctx->ops->native_context(ctx->dev) : NULL;
}
void *at_context_native_queue(const at_context *ctx)
{
    return ctx->dev ? ctx->ops->native_queue(ctx->dev) : NULL;
}

at_status at_context_synchronize(at_context *ctx)
{
    return at_ctx_fail(ctx, ctx->ops->finish(ctx->dev));
}

static at_status ready(at_context *ctx)
{
    if (!ctx) return at_fail(AT_ERR_INVALID_ARG, "no context");
    if (!ctx->dev)
        return at_fail(AT_ERR_INVALID_ARG, "the context failed to open: %s", ctx->last_error);
    return AT_OK;
}

/* ---- get, tune and the fallbacks, for every operation --------------------------------------- */

/* The problem with its defaults applied and checked, owned by the caller. */
static at_status resolved(const at_problem *p, at_problem **out)
{
    *out = NULL;
    if (!p) return at_fail(AT_ERR_INVALID_ARG, "no problem given");
    if (!(*out = at_problem_resolve(p))) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    at_status s = at_problem_validate(*out);
    if (s != AT_OK) {
        at_problem_destroy(*out);
        *out = NULL;
    }
    return s;
}

/* 1 if results tuned with the template version `hash` hold for t (at_template_trusts). */
static int trusts(const at_template *t, const char *hash) { return at_template_trusts(t, hash); }

/* ---- the fallback chain (docs/shipping.md) -------------------------------------------------- */

enum { LV_EXACT, LV_NEAREST, LV_ARCH, LV_VENDOR, LV_DEFAULT, LV_COUNT };
static const at_source k_level_source[LV_COUNT] = {
    AT_SOURCE_HIT, AT_SOURCE_NEAREST, AT_SOURCE_SAME_ARCH, AT_SOURCE_VENDOR, AT_SOURCE_DEFAULT};

/* The databases on the path: the user's, then the layers (a context made by hand has only
 * its db). */
static size_t ndbs(const at_context *ctx) { return ctx->layers.n ? ctx->layers.n : 1; }
static at_db *db_at(const at_context *ctx, size_t i) { return i ? ctx->layers.db[i] : ctx->db; }
static const char *db_path_at(const at_context *ctx, size_t i)
{
    return ctx->layers.n ? ctx->layers.path[i] : at_db_path(ctx->db);
}

/* A best entry that may answer for p: database, key, level and distance. */
typedef struct cand {
    size_t db;
    char *key;
    int level;
    double dist;
    size_t seq; /* key order within its database */
} cand;

typedef struct cands {
    cand *c;
    size_t n, cap;
} cands;

static void cands_free(cands *cs)
{
    for (size_t i = 0; i < cs->n; i++) free(cs->c[i].key);
    free(cs->c);
    memset(cs, 0, sizeof *cs);
}

/* Level first, then the nearest problem, then the earlier database. */
static int cand_cmp(const void *va, const void *vb)
{
    const cand *a = va, *b = vb;
    if (a->level != b->level) return a->level < b->level ? -1 : 1;
    if (a->dist != b->dist) return a->dist < b->dist ? -1 : 1;
    if (a->db != b->db) return a->db < b->db ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The level a device stands at for this one: LV_NEAREST (this device), LV_ARCH (its family),
 * LV_VENDOR, or -1. */
static int device_level(const at_context *ctx, at_key_part dev)
{
    if (at_key_part_is(dev, ctx->info.key)) return LV_NEAREST;
    char *d = at_key_part_dup(dev);
    if (!d) return -1;
    at_device_rec id;
    at_device_rec_from_key(d, &id);
    free(d);
    if (strcmp(id.family, ctx->id.family) == 0) return LV_ARCH;
    return strcmp(id.vendor, ctx->id.vendor) == 0 ? LV_VENDOR : -1;
}

static at_status cands_push(cands *cs, size_t db, const char *key, int level, double dist)
{
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? 2 * cs->cap : 16;
        cand *c = realloc(cs->c, cap * sizeof *c);
        if (!c) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        cs->c = c;
        cs->cap = cap;
    }
    char *k = at_strdup(key);
    if (!k) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    cs->c[cs->n] = (cand){db, k, level, dist, cs->n};
    cs->n++;
    return AT_OK;
}

/* The best entries of every database on the path at levels lo..hi (<= LV_VENDOR) for p,
 * sorted. A database that cannot be read is passed over. */
static at_status gather(at_context *ctx, const at_problem *p, const char *pkey, int lo, int hi,
                        cands *cs)
{
    memset(cs, 0, sizeof *cs);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s/", p->op->name);
    at_status s = AT_OK;
    for (size_t i = 0; i < ndbs(ctx) && s == AT_OK; i++) {
        if (hi == LV_EXACT) { /* one key per database */
            char *key = at_db_best_key(pkey, ctx->info.key);
            s = key ? cands_push(cs, i, key, LV_EXACT, 0) : AT_ERR_INVALID_ARG;
            free(key);
            continue;
        }
        char **keys = NULL;
        size_t n = 0;
        if (at_db_keys(db_at(ctx, i), "best", prefix, &keys, &n) != AT_OK) at_errclear();
        for (size_t k = 0; k < n && s == AT_OK; k++) {
            at_best_key bk;
            if (at_best_key_split(keys[k], &bk) != AT_OK) continue;
            int level = device_level(ctx, bk.device);
            if (level < 0) continue;
            char *problem = at_key_part_dup(bk.problem);
            double d = problem ? p->op->distance(p->data, problem) : INFINITY;
            free(problem);
            if (!isfinite(d)) continue;
            if (level == LV_NEAREST && d == 0) level = LV_EXACT;
            if (level >= lo && level <= hi) s = cands_push(cs, i, keys[k], level, d);
        }
        at_db_keys_free(keys, n);
    }
    if (cs->n) qsort(cs->c, cs->n, sizeof *cs->c, cand_cmp);
    return s;
}

/* The templates a walk loaded, by the name a best entry gives ("": the registry's choice). */
#define TCACHE 8
typedef struct tcache {
    char name[TCACHE][64];
    at_template *t[TCACHE];
    int tried[TCACHE];
} tcache;

/* The template a database entry was tuned with: its name, or for an entry from before templates
 * were named (autotune 0.1: GEMM on OpenCL, one template) the template named after the
 * operation ("gemm"), not today's default for the device (gemm_cpu on a CPU). */
static const char *entry_template(const at_problem *p, const char *name)
{
    return name[0] ? name : p->op->name;
}

static at_template *template_named(at_context *ctx, const at_problem *p, tcache *tc,
                                   const char *name)
{
    size_t i = 0;
    for (; i < TCACHE && tc->tried[i]; i++)
        if (strcmp(tc->name[i], name) == 0) return tc->t[i];
    if (i == TCACHE) return NULL;
    tc->tried[i] = 1;
    snprintf(tc->name[i], sizeof tc->name[i], "%s", name);
    if (at_template_for(p, &ctx->info, entry_template(p, name), &tc->t[i]) != AT_OK) at_errclear();
    return tc->t[i];
}

static void tcache_free(tcache *tc)
{
    for (size_t i = 0; i < TCACHE; i++) at_template_free(tc->t[i]);
}

/* 1 when config of t passes on p here: measured ok on this device in the user's database, or
 * checked ok before (this process's memo, then the user's checks table), or now by one checked
 * run (compiled, run once on p against the reference; stored in the checks table). *checked: 1
 * when it was not measured here. */
static int config_passes(at_context *ctx, at_template *t, const at_problem *p, const char *pkey,
                         const char *config, int *checked)
{
    *checked = 0;
    char *rkey = at_db_result_key(pkey, ctx->info.key, t->hash, config);
    at_result_rec r;
    if (rkey && at_db_get_result(ctx->db, rkey, &r) == AT_OK) {
        free(rkey);
        return r.status == AT_RS_OK;
    }
    free(rkey);
    at_errclear();
    *checked = 1;
    char sig[768], key[1536];
    at_problem_signature(p, sig, sizeof sig);
    snprintf(key, sizeof key, "C|%s|%s|%s", sig, t->hash, config);
    at_status st;
    if (memo_get(ctx, key, &st, NULL, NULL)) return st == AT_OK;
    /* Checked before by any process: the user's checks table. */
    rkey = at_db_result_key(pkey, ctx->info.key, t->hash, config);
    int known = rkey && at_db_get_check(ctx->db, rkey, &r) == AT_OK;
    at_errclear();
    /* The problem itself, not a smaller one: whether a config is right depends on the shape
     * (edge tiles, split-K remainders, alignment), which is what the check is for. */
    if (!known && at_config_run(ctx, t, p, config, 0, &r) != AT_OK) {
        at_errclear(); /* the run could not be made: not remembered, not an answer */
        free(rkey);
        return 0;
    }
    /* Stored so it is done once (a read-only database: for this process only). */
    if (!known && rkey && !at_db_readonly_reason(ctx->db) &&
        at_db_put_check(ctx->db, rkey, &r) != AT_OK)
        at_errclear();
    free(rkey);
    memo_put(ctx, key, r.status == AT_RS_OK ? AT_OK : AT_ERR_NO_VALID_CONFIG, NULL, NULL);
    return r.status == AT_RS_OK;
}

/* An answer of the chain: where it came from, its record, its template (owned). */
typedef struct answer {
    at_lookup_info info;
    at_best_rec b;
    at_template *t;
} answer;

/* The first candidate (in order) whose template serves p here, trusts its version, and whose
 * config is valid for p and passes here; only_template: of that template only. */
static int walk(at_context *ctx, const at_problem *p, const char *pkey, const cands *cs,
                const char *only_template, answer *a)
{
    tcache tc = {0};
    int found = 0;
    for (size_t i = 0; i < cs->n && !found; i++) {
        const cand *c = &cs->c[i];
        at_best_rec b;
        if (at_db_get_best(db_at(ctx, c->db), c->key, &b) != AT_OK) {
            at_errclear();
            continue;
        }
        at_template *t = template_named(ctx, p, &tc, b.template_name);
        int64_t cfg[AT_MAX_PARAMS];
        if (!t || !trusts(t, b.template_hash) ||
            (only_template && strcmp(t->name, only_template)) ||
            at_config_parse(t->space, b.config, cfg) != AT_OK ||
            !at_space_valid(t->space, cfg, NULL, 0)) {
            at_errclear();
            continue;
        }
        int checked = 0;
        if (!(c->db == 0 && c->level <= LV_NEAREST) &&
            !config_passes(ctx, t, p, pkey, b.config, &checked))
            continue;
        found = 1;
        at_best_key bk;
        at_best_key_split(c->key, &bk);
        at_lookup_info *in = &a->info;
        memset(in, 0, sizeof *in);
        in->source = k_level_source[c->level];
        snprintf(in->database, sizeof in->database, "%s", db_path_at(ctx, c->db));
        snprintf(in->device_key, sizeof in->device_key, "%.*s", (int)bk.device.n, bk.device.s);
        snprintf(in->problem_key, sizeof in->problem_key, "%.*s", (int)bk.problem.n, bk.problem.s);
        snprintf(in->config, sizeof in->config, "%s", b.config);
        snprintf(in->template_name, sizeof in->template_name, "%s", t->name);
        snprintf(in->template_hash, sizeof in->template_hash, "%s", b.template_hash);
        in->time_us = b.time_us;
        in->validated = checked;
        a->b = b;
        for (size_t j = 0; j < TCACHE; j++) /* the answer keeps its template */
            if (tc.t[j] == t) tc.t[j] = NULL;
        a->t = t;
    }
    tcache_free(&tc);
    return found;
}

/* The first valid default of the template serving p (only_template: that one). */
static at_status default_answer(at_context *ctx, const at_problem *p, const char *only_template,
                                answer *a);

/* The chain from level lo to hi for p (resolved and valid). AT_ERR_NOT_FOUND when no level
 * answers. */
static at_status chain(at_context *ctx, const at_problem *p, int lo, int hi,
                       const char *only_template, answer *a)
{
    memset(a, 0, sizeof *a);
    char pkey[256];
    p->op->key(p->data, pkey, sizeof pkey);
    /* The exact level first on its own: one key per database, no scan of the others. */
    if (lo == LV_EXACT && hi > LV_EXACT) {
        at_status s = chain(ctx, p, LV_EXACT, LV_EXACT, only_template, a);
        if (s != AT_ERR_NOT_FOUND) return s;
        lo = LV_NEAREST;
    }
    if (lo <= LV_VENDOR) {
        cands cs;
        at_status s = gather(ctx, p, pkey, lo, hi < LV_VENDOR ? hi : LV_VENDOR, &cs);
        int found = s == AT_OK && walk(ctx, p, pkey, &cs, only_template, a);
        cands_free(&cs);
        if (s != AT_OK || found) return s;
    }
    if (hi >= LV_DEFAULT) return default_answer(ctx, p, only_template, a);
    return at_fail(AT_ERR_NOT_FOUND, "no tuned entry for %s on %s", pkey, ctx->info.key);
}

size_t at_seed_configs(at_context *ctx, const at_template *t, const at_problem *p, int64_t *out,
                       size_t cap)
{
    char pkey[256];
    p->op->key(p->data, pkey, sizeof pkey);
    cands cs;
    size_t n = 0, np = t->space->nparams;
    if (gather(ctx, p, pkey, LV_EXACT, LV_ARCH, &cs) != AT_OK) at_errclear();
    for (size_t i = 0; i < cs.n && n < cap; i++) {
        const cand *c = &cs.c[i];
        at_best_rec b;
        if (c->dist != 0 || c->level == LV_NEAREST ||
            at_db_get_best(db_at(ctx, c->db), c->key, &b) != AT_OK ||
            (b.template_name[0] && strcmp(b.template_name, t->name) != 0) ||
            (c->level == LV_EXACT && trusts(t, b.template_hash)))
            continue; /* a trusted entry of this device is an answer, not a seed */
        int64_t *cfg = out + n * np;
        if (at_config_parse(t->space, b.config, cfg) != AT_OK ||
            !at_space_valid(t->space, cfg, NULL, 0))
            continue;
        int dup = 0;
        for (size_t j = 0; j < n && !dup; j++) dup = !memcmp(out + j * np, cfg, np * sizeof *cfg);
        if (!dup) n++;
    }
    at_errclear();
    cands_free(&cs);
    return n;
}

size_t at_related_results(at_context *ctx, const at_template *t, const at_problem *p,
                          at_related *out, size_t cap)
{
    char pkey[256];
    p->op->key(p->data, pkey, sizeof pkey);
    cands cs;
    size_t n = 0, nshapes = 0, ndevices = 0;
    if (gather(ctx, p, pkey, LV_NEAREST, LV_VENDOR, &cs) != AT_OK) at_errclear();
    for (size_t i = 0; i < cs.n && n < cap; i++) {
        const cand *c = &cs.c[i];
        /* Neighbouring shapes on this device; this shape on other devices. */
        int shape = c->level == LV_NEAREST && c->dist > 0,
            device = c->level > LV_NEAREST && c->dist == 0;
        if ((shape && nshapes == 3) || (device && ndevices == 2) || (!shape && !device)) continue;
        at_best_rec b;
        at_best_key bk;
        if (at_db_get_best(db_at(ctx, c->db), c->key, &b) != AT_OK ||
            (b.template_name[0] && strcmp(b.template_name, t->name) != 0) ||
            at_best_key_split(c->key, &bk) != AT_OK) {
            at_errclear();
            continue;
        }
        at_related *r = &out[n];
        memset(r, 0, sizeof *r);
        snprintf(r->problem, sizeof r->problem, "%.*s", (int)bk.problem.n, bk.problem.s);
        snprintf(r->device, sizeof r->device, "%.*s", (int)bk.device.n, bk.device.s);
        int dup = 0; /* the same task in two databases: the nearer one's */
        for (size_t j = 0; j < n && !dup; j++)
            dup = !strcmp(out[j].problem, r->problem) && !strcmp(out[j].device, r->device);
        char *prefix = dup ? NULL : at_db_results_prefix(r->problem, r->device, b.template_hash);
        if (!prefix || at_recording_from_db(db_at(ctx, c->db), prefix, &r->rec) != AT_OK) {
            free(prefix);
            at_errclear();
            continue;
        }
        free(prefix);
        nshapes += shape;
        ndevices += device;
        n++;
    }
    cands_free(&cs);
    return n;
}

void at_related_free(at_related *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) at_recording_free(r[i].rec);
}

/* The first of the template's defaults valid for this problem and device. */
static at_status default_config(const at_template *t, char *buf, size_t len)
{
    const at_space *s = t->space;
    for (size_t d = 0; d < s->ndefaults; d++) {
        const int64_t *cfg = s->defaults + d * s->nparams;
        if (at_space_valid(s, cfg, NULL, 0)) {
            at_config_format(s, cfg, buf, len);
            return AT_OK;
        }
    }
    return at_fail(AT_ERR_NO_VALID_CONFIG,
                   "none of the %s template's defaults is valid for this problem on this device",
                   s->name);
}

static at_status default_answer(at_context *ctx, const at_problem *p, const char *only_template,
                                answer *a)
{
    AT_TRY(at_template_for(p, &ctx->info, only_template, &a->t));
    at_lookup_info *in = &a->info;
    memset(in, 0, sizeof *in);
    in->source = AT_SOURCE_DEFAULT;
    p->op->key(p->data, in->problem_key, sizeof in->problem_key);
    snprintf(in->template_name, sizeof in->template_name, "%s", a->t->name);
    snprintf(in->template_hash, sizeof in->template_hash, "%s", a->t->hash);
    return default_config(a->t, in->config, sizeof in->config);
}

/* The space's size before its constraints, as the reports' int64_t (saturating). */
static int64_t space_total(const at_space *s)
{
    const uint64_t n = at_space_total(s);
    return n > INT64_MAX ? INT64_MAX : (int64_t)n;
}

/* The kernel cache's key of p's kernel at an answer's template version and config. */
static void kernel_key(const char *sig, const at_lookup_info *info, char *key, size_t len)
{
    snprintf(key, len, "K|%s|%s|%s|%s", sig, info->template_name, info->template_hash,
             info->config);
}

/* A kernel for p (resolved, valid) at the answer info: shared from the context's kernel cache,
 * else built (with template t, or the one info names when t is NULL) and cached. */
static at_status kernel_for(at_context *ctx, at_template *t, const at_problem *p,
                            const at_lookup_info *info, at_kernel **out)
{
    char sig[768], key[1536];
    at_problem_signature(p, sig, sizeof sig);
    kernel_key(sig, info, key, sizeof key);
    at_status s = AT_OK;
    *out = NULL;
    slow_lock(ctx);
    if (memo_get(ctx, key, &s, NULL, out)) { /* built by another thread meanwhile */
        slow_unlock(ctx);
        return *out ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    at_template *own = NULL;
    at_kernel *base = NULL;
    if (!t) s = at_template_for(p, &ctx->info, info->template_name, &own);
    if (s == AT_OK) s = at_kernel_build(ctx, t ? t : own, p, info->config, &base);
    at_template_free(own);
    if (s == AT_OK) {
        base->info = *info;
        /* A context made by hand (tests) keeps no cache: the kernel is the caller's. */
        *out = ctx->memo ? at_kernel_share(base) : base;
        if (!*out) {
            at_kernel_destroy(base);
            s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
        } else if (ctx->memo) {
            memo_put(ctx, key, AT_OK, NULL, base);
        }
    }
    slow_unlock(ctx);
    return s;
}

static void default_tune_options(const at_context *ctx, const at_tune_options *in,
                                 at_tune_options *o)
{
    if (in) *o = *in;
    /* Without a budget: AUTOTUNE_BUDGET, else a search stops after a minute (exhaustive runs to
     * the end). */
    if (o->max_evals <= 0 && o->max_seconds <= 0 && ctx) {
        o->max_evals = ctx->env_evals;
        o->max_seconds = ctx->env_seconds;
    }
    if (o->max_evals <= 0 && o->max_seconds <= 0)
        o->max_seconds = at_search_default_seconds(o->strategy);
    if (!o->seed) o->seed = 1;
}

at_status at_tune(at_context *ctx, const at_problem *problem, const at_tune_options *opts,
                  at_tune_report *report, at_kernel **out)
{
    at_tune_report rep_local;
    at_tune_report *rep = report ? report : &rep_local;
    memset(rep, 0, sizeof *rep);
    if (out) *out = NULL;
    double t0 = at_now();
    at_tune_options o = {0};
    default_tune_options(ctx, opts, &o);
    at_problem *p = NULL;
    answer a = {0};
    at_template *t = NULL;
    char config[512] = "";
    at_status s = ready(ctx);
    if (s == AT_OK) s = resolved(problem, &p);
    if (s == AT_OK) slow_lock(ctx);
    /* A cache hit: an exact entry of any database on the path, made with a template that still
     * serves the problem here at a trusted version (the one asked for, when one is), and
     * checked on this device when it was not measured here. */
    int hit = s == AT_OK && !o.force && !o.replay_db &&
              chain(ctx, p, LV_EXACT, LV_EXACT, o.template_name, &a) == AT_OK;
    if (s == AT_OK) at_errclear(); /* a miss is no failure */
    if (s == AT_OK && !hit && ctx->no_tuning && !o.replay_db) {
        char pkey[256];
        p->op->key(p->data, pkey, sizeof pkey);
        s = at_fail(AT_ERR_NOT_FOUND,
                    "tuning is off (%s) and no database has an entry for %s on %s",
                    ctx->no_tuning_why, pkey, ctx->info.key);
    }
    if (hit) {
        /* Nothing is compiled, unless the caller wants the kernel and its binary is not in the
         * database. */
        const at_best_rec *b = &a.b;
        t = a.t;
        rep->cache_hit = 1;
        rep->space = b->space;
        rep->best_time_us = b->time_us;
        rep->best_gflops = b->gflops;
        rep->best_gbytes_per_s = p->op->bytes(p->data) / (b->time_us * 1e3);
        rep->best_max_rel_error = b->max_rel_error;
        snprintf(rep->best_config, sizeof rep->best_config, "%s", b->config);
        snprintf(config, sizeof config, "%s", b->config);
        at_log(ctx, 1, "tune %s: from %s, %s (%.3f us as recorded)", a.info.problem_key,
               a.info.database, b->config, b->time_us);
    } else if (s == AT_OK) {
        char pkey[256];
        p->op->key(p->data, pkey, sizeof pkey);
        s = at_template_for(p, &ctx->info, o.template_name, &t);
        if (s == AT_OK)
            at_log(ctx, 1,
                   "tune %s: template %s on %s, strategy %s, budget %lld evaluations / %g s", pkey,
                   t->name, ctx->info.key, o.strategy ? o.strategy : at_tune_strategies()[0],
                   (long long)o.max_evals, o.max_seconds);
        /* Candidates run in a worker process: a fault is recorded against the candidate that
         * made it, and the worker replaced (tuner/worker.c). */
        if (s == AT_OK) s = at_pipeline_tune(ctx, t, p, &o, rep, config, sizeof config);
        if (!o.replay_db) { /* the answers may have changed; this problem's kernels too */
            char sig[768], kprefix[800];
            at_problem_signature(p, sig, sizeof sig);
            snprintf(kprefix, sizeof kprefix, "K|%s|", sig);
            memo_forget(ctx, "L");
            memo_forget(ctx, kprefix);
        }
        a.info = (at_lookup_info){.source = AT_SOURCE_TUNED, .time_us = rep->best_time_us};
        snprintf(a.info.database, sizeof a.info.database, "%s", at_db_path(ctx->db));
        snprintf(a.info.device_key, sizeof a.info.device_key, "%s", ctx->info.key);
        snprintf(a.info.problem_key, sizeof a.info.problem_key, "%s", pkey);
        snprintf(a.info.config, sizeof a.info.config, "%s", config);
        if (t) {
            snprintf(a.info.template_name, sizeof a.info.template_name, "%s", t->name);
            snprintf(a.info.template_hash, sizeof a.info.template_hash, "%s", t->hash);
        }
    }
    if (t) {
        snprintf(rep->template_name, sizeof rep->template_name, "%s", t->name);
        rep->space_total = space_total(t->space);
    }
    if (s == AT_OK && out) s = kernel_for(ctx, t, p, &a.info, out);
    if (p) slow_unlock(ctx);
    at_template_free(t);
    at_problem_destroy(p);
    rep->seconds = at_now() - t0;
    if (rep->budget_s > 0 && rep->seconds > rep->budget_s)
        rep->overrun_s = rep->seconds - rep->budget_s;
    if (!rep->cache_hit && rep->evaluated)
        at_log(ctx, 1,
               "tuned: %s, %.3f us (%lld evaluated, %lld measured, %lld failed) in %.1f s: %s",
               rep->best_config[0] ? rep->best_config : "no best", rep->best_time_us,
               (long long)rep->evaluated, (long long)rep->measured, (long long)rep->failed,
               rep->seconds, s == AT_OK ? "ok" : at_strerror(s));
    return at_ctx_fail(ctx, s);
}

/* at_lookup on a resolved, valid problem whose signature is sig. */
static at_status lookup(at_context *ctx, const at_problem *p, const char *sig, unsigned flags,
                        at_lookup_info *out)
{
    char key[1024], pkey[256];
    unsigned f = flags & AT_GET_NO_FALLBACK;
    snprintf(key, sizeof key, "L%u|%s", f, sig);
    at_status s;
    int found = memo_get(ctx, key, &s, out, NULL);
    if (!found) { /* the chain, one thread at a time; another may have answered meanwhile */
        slow_lock(ctx);
        found = memo_get(ctx, key, &s, out, NULL);
        answer a;
        if (!found) {
            s = chain(ctx, p, LV_EXACT, f ? LV_EXACT : LV_DEFAULT, NULL, &a);
            at_template_free(a.t);
            if (s == AT_OK) *out = a.info;
            if (s == AT_OK && ctx->log_level >= 1) {
                p->op->key(p->data, pkey, sizeof pkey);
                at_log(ctx, 1, "lookup %s: %s %s, %s%s%s (%s)", pkey, at_source_name(a.info.source),
                       a.info.problem_key, a.info.config, a.info.database[0] ? " from " : "",
                       a.info.database, a.info.validated ? "checked here" : "as recorded");
            }
            if (s == AT_OK || s == AT_ERR_NOT_FOUND) memo_put(ctx, key, s, &a.info, NULL);
        }
        slow_unlock(ctx);
        if (!found) return s;
    }
    if (s == AT_ERR_NOT_FOUND) {
        p->op->key(p->data, pkey, sizeof pkey);
        return at_fail(s, "no tuned entry for %s on %s", pkey, ctx->info.key);
    }
    return s;
}

at_status at_lookup(at_context *ctx, const at_problem *problem, unsigned flags, at_lookup_info *out)
{
    if (out) memset(out, 0, sizeof *out);
    at_problem *p = NULL;
    at_status s = ready(ctx);
    if (s == AT_OK && !out) s = at_fail(AT_ERR_INVALID_ARG, "at_lookup: out is NULL");
    if (s == AT_OK) s = resolved(problem, &p);
    char sig[768];
    if (s == AT_OK) at_problem_signature(p, sig, sizeof sig);
    if (s == AT_OK) s = lookup(ctx, p, sig, flags, out);
    at_problem_destroy(p);
    return at_ctx_fail(ctx, s);
}

at_status at_lookup_levels(at_context *ctx, const at_problem *problem, at_lookup_info out[5],
                           int found[5])
{
    at_problem *p = NULL;
    at_status s = ready(ctx);
    if (s == AT_OK) s = resolved(problem, &p);
    slow_lock(ctx);
    for (int lv = 0; lv < LV_COUNT; lv++) {
        answer a;
        found[lv] = 0;
        memset(&out[lv], 0, sizeof out[lv]);
        at_status r = s == AT_OK ? chain(ctx, p, lv, lv, NULL, &a) : s;
        if (s != AT_OK) continue;
        at_template_free(a.t);
        if (r == AT_OK) {
            found[lv] = 1;
            out[lv] = a.info;
        } else if (r != AT_ERR_NOT_FOUND && r != AT_ERR_NO_VALID_CONFIG) {
            s = r;
        }
    }
    slow_unlock(ctx);
    at_problem_destroy(p);
    if (s == AT_OK) at_errclear();
    return at_ctx_fail(ctx, s);
}

at_status at_kernel_info(const at_kernel *k, at_lookup_info *out)
{
    if (!k || !out) return at_fail(AT_ERR_INVALID_ARG, "at_kernel_info: NULL argument");
    *out = k->info;
    return AT_OK;
}

at_status at_get(at_context *ctx, const at_problem *problem, unsigned flags, at_kernel **out,
                 at_source *source)
{
    if (out) *out = NULL;
    at_problem *p = NULL;
    at_lookup_info info;
    char sig[768], key[1536];
    at_status s = ready(ctx);
    if (s == AT_OK && !out) s = at_fail(AT_ERR_INVALID_ARG, "at_get: out is NULL");
    if (s == AT_OK) s = resolved(problem, &p);
    if (s == AT_OK) at_problem_signature(p, sig, sizeof sig);
    /* ALLOW_TUNE: an exact entry, else tune now (not with tuning off: the chain). */
    if (s == AT_OK && ctx->no_tuning) flags &= ~AT_GET_ALLOW_TUNE;
    if (s == AT_OK)
        s = lookup(ctx, p, sig, flags & AT_GET_ALLOW_TUNE ? AT_GET_NO_FALLBACK : flags, &info);
    if (s == AT_ERR_NOT_FOUND && (flags & AT_GET_ALLOW_TUNE)) {
        at_problem_destroy(p);
        if (source) *source = AT_SOURCE_TUNED;
        return at_tune(ctx, problem, NULL, NULL, out);
    }
    /* A hot get: the kernel cache shares the program built before (no template, no build). */
    at_status ks;
    if (s == AT_OK) kernel_key(sig, &info, key, sizeof key);
    if (s == AT_OK && !memo_get(ctx, key, &ks, NULL, out))
        s = kernel_for(ctx, NULL, p, &info, out);
    else if (s == AT_OK && !*out)
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK) (*out)->info = info;
    if (s == AT_OK && source) *source = info.source;
    at_problem_destroy(p);
    return at_ctx_fail(ctx, s);
}

/* ---- verify --------------------------------------------------------------------------------- */

/* Re-measures one best entry of this device (key bkey of database i) into e. */
static at_status verify_one(at_context *ctx, size_t i, const char *bkey, double max_slowdown,
                            at_verify_entry *e)
{
    at_best_key bk;
    at_best_rec b;
    memset(e, 0, sizeof *e);
    snprintf(e->database, sizeof e->database, "%s", db_path_at(ctx, i));
    snprintf(e->problem_key, sizeof e->problem_key, "%s", bkey);
    if (at_best_key_split(bkey, &bk) != AT_OK || at_db_get_best(db_at(ctx, i), bkey, &b) != AT_OK) {
        e->failed = 1;
        snprintf(e->reason, sizeof e->reason, "%s", at_errmsg());
        return AT_OK;
    }
    snprintf(e->problem_key, sizeof e->problem_key, "%.*s", (int)bk.problem.n, bk.problem.s);
    snprintf(e->template_name, sizeof e->template_name, "%s", b.template_name);
    snprintf(e->config, sizeof e->config, "%s", b.config);
    snprintf(e->recorded_driver, sizeof e->recorded_driver, "%s", b.driver);
    snprintf(e->recorded_compiler, sizeof e->recorded_compiler, "%s", b.compiler);
    e->recorded_us = b.time_us;
    e->driver_changed = b.driver[0] && strcmp(b.driver, ctx->info.driver) != 0;
    e->compiler_changed =
        b.compiler[0] && strcmp(b.compiler, ctx->ops->compiler_version(ctx->dev)) != 0;
    at_problem *p = NULL;
    at_template *t = NULL;
    at_status s = at_problem_from_key(e->problem_key, &p);
    if (s == AT_OK) s = at_template_for(p, &ctx->info, entry_template(p, b.template_name), &t);
    if (s != AT_OK) {
        e->failed = 1;
        snprintf(e->reason, sizeof e->reason, "%s", at_errmsg());
    } else if (!trusts(t, b.template_hash)) {
        e->failed = 1;
        snprintf(e->reason, sizeof e->reason,
                 "tuned with version %s of the %s template, which is now %s", b.template_hash,
                 t->name, t->hash);
    } else {
        at_result_rec r;
        s = at_config_run(ctx, t, p, b.config, 1, &r);
        if (s == AT_OK && r.status != AT_RS_OK) {
            e->failed = 1;
            snprintf(e->reason, sizeof e->reason, "%s: %s", at_result_status_name(r.status),
                     r.reason);
        } else if (s == AT_OK) {
            e->measured_us = r.median_us;
            e->slower = b.time_us > 0 && r.median_us > b.time_us * max_slowdown;
        } else if (s == AT_ERR_UNSUPPORTED || s == AT_ERR_INVALID_ARG) {
            /* the problem cannot be run here (its buffers exceed the device): the entry's */
            e->failed = 1;
            snprintf(e->reason, sizeof e->reason, "%s", at_errmsg());
        }
    }
    if (s == AT_OK && !e->template_name[0] && t)
        snprintf(e->template_name, sizeof e->template_name, "%s", t->name);
    at_template_free(t);
    at_problem_destroy(p);
    /* A key or template that cannot be read is the entry's failure; the device's is the run's. */
    return s == AT_OK || e->failed ? AT_OK : s;
}

at_status at_verify(at_context *ctx, const char *op, double max_slowdown,
                    int (*visit)(void *user, const at_verify_entry *e), void *user,
                    int64_t *flagged)
{
    *flagged = 0;
    AT_TRY(ready(ctx));
    if (!(max_slowdown > 1) || !isfinite(max_slowdown))
        return at_ctx_fail(ctx, at_fail(AT_ERR_INVALID_ARG,
                                        "the slowdown allowed must be a number above 1, not %g",
                                        max_slowdown));
    if (op && !at_op_find(op))
        return at_ctx_fail(ctx, at_fail(AT_ERR_INVALID_ARG, "unknown operation '%s'", op));
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s/", op ? op : "");
    at_status s = AT_OK;
    int stop = 0;
    slow_lock(ctx);
    for (size_t i = 0; i < ndbs(ctx) && s == AT_OK && !stop; i++) {
        char **keys = NULL;
        size_t n = 0;
        s = at_db_keys(db_at(ctx, i), "best", op ? prefix : NULL, &keys, &n);
        for (size_t k = 0; k < n && s == AT_OK && !stop; k++) {
            at_best_key bk;
            if (at_best_key_split(keys[k], &bk) != AT_OK ||
                !at_key_part_is(bk.device, ctx->info.key))
                continue;
            at_verify_entry e;
            s = verify_one(ctx, i, keys[k], max_slowdown, &e);
            if (s != AT_OK) break;
            if (e.slower || e.failed || e.driver_changed || e.compiler_changed) (*flagged)++;
            if (visit) stop = visit(user, &e);
        }
        at_db_keys_free(keys, n);
    }
    slow_unlock(ctx);
    return at_ctx_fail(ctx, s);
}

at_status at_kernel_launch(at_kernel *k, const at_devptr *buffers, size_t nbuffers, void *stream)
{
    if (!k) return at_fail(AT_ERR_INVALID_ARG, "no kernel");
    const at_op *op = k->problem->op;
    size_t nroles = at_op_nroles(op);
    void *handles[AT_MAX_BUFFERS];
    at_status s = AT_OK;
    if (!buffers || nbuffers != nroles)
        s = at_fail(AT_ERR_INVALID_ARG, "a %s kernel takes %zu buffers, %zu were passed", op->name,
                    nroles, buffers ? nbuffers : 0);
    for (size_t i = 0; s == AT_OK && i < nroles; i++)
        if (!(handles[i] = buffers[i].handle))
            s = at_fail(AT_ERR_INVALID_ARG, "buffer %s passed to at_%s_launch is NULL",
                        op->roles[i], op->name);
    at_arglist args;
    at_context *ctx = k->ctx;
    if (s == AT_OK && k->recycles != ctx->recycles)
        s = at_fail(AT_ERR_DEVICE_LOST,
                    "this kernel was built before a faulting candidate made autotune close and "
                    "reopen the %s device: get it again (at_%s_get)",
                    ctx->ops->name, op->name);
    /* The workspace (split-K partial sums) is the argument of kernels that take one; each
     * at_kernel makes its own at its first launch. */
    if (s == AT_OK && k->ws_bytes && !k->workspace.handle)
        s = at_workspace_ensure(ctx, &k->workspace, k->ws_bytes);
    /* Tensor maps (TMA) are encoded for the caller's buffers at every launch: a host call,
     * no device work; a buffer the hardware cannot map (not 16-byte aligned) fails here. */
    const at_tmap_src maps = {k->maps, ctx->ops, ctx->dev};
    if (s == AT_OK)
        s = at_args_build(k->args, k->nargs, k->problem, handles, k->workspace.handle, &maps,
                          &args);
    if (s == AT_OK)
        s = ctx->ops->launch(ctx->dev, k->prog, args.a, args.n, k->global, k->local, k->dims,
                             k->cluster, k->shared_bytes, stream, NULL);
    return at_ctx_fail(ctx, s);
}

const char *at_kernel_config(const at_kernel *k) { return k ? k->config : ""; }
const char *at_kernel_template(const at_kernel *k) { return k ? k->template_name : ""; }

void at_kernel_destroy(at_kernel *k)
{
    if (!k) return;
    /* A stale kernel's program and workspace were on a device that is gone: nothing of them can
     * be released any more (the backend would touch the freed device); their host memory is
     * left behind, a few KB once per recycle. */
    int stale = k->recycles != k->ctx->recycles;
    if (k->workspace.handle && !stale) k->ctx->ops->buffer_free(k->ctx->dev, k->workspace);
    if (k->base) { /* a handle on a cached program: its own memory, then the reference */
        at_kernel *base = k->base;
        free(k);
        at_kernel_destroy(base);
        return;
    }
    if (__atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (k->prog && !stale) k->ctx->ops->program_free(k->prog);
    for (size_t i = 0; i < k->nargs; i++) free(k->args[i].name);
    at_problem_destroy(k->problem);
    free(k);
}

at_status at_space_count(at_context *ctx, const at_problem *problem, const char *template_name,
                         at_space_info *info, int (*visit)(void *user, const char *config),
                         void *user)
{
    memset(info, 0, sizeof *info);
    at_problem *p = NULL;
    at_template *t = NULL;
    at_status s = ready(ctx);
    if (s == AT_OK) s = resolved(problem, &p);
    if (s == AT_OK) s = at_template_for(p, &ctx->info, template_name, &t);
    int64_t *configs = NULL;
    size_t n = 0;
    if (s == AT_OK) s = at_space_enumerate(t->space, &configs, NULL, &n);
    if (s == AT_OK) {
        const at_space *sp = t->space;
        snprintf(info->template_name, sizeof info->template_name, "%s", t->name);
        info->total = space_total(sp);
        info->valid = (int64_t)n;
        info->nparams = (int)sp->nparams;
        size_t off = 0;
        for (size_t j = 0; j < sp->nparams && off < sizeof info->params; j++) {
            off += (size_t)snprintf(info->params + off, sizeof info->params - off,
                                    "%s%s=", j ? " " : "", sp->params[j].name);
            for (size_t v = 0; v < sp->params[j].nvalues && off < sizeof info->params; v++)
                off += (size_t)snprintf(info->params + off, sizeof info->params - off, "%s%lld",
                                        v ? "|" : "", (long long)sp->params[j].values[v]);
        }
        char buf[512];
        for (size_t i = 0; visit && i < n; i++) {
            at_config_format(sp, configs + i * sp->nparams, buf, sizeof buf);
            if (visit(user, buf)) break;
        }
    }
    free(configs);
    at_template_free(t);
    at_problem_destroy(p);
    return at_ctx_fail(ctx, s);
}

at_status at_compile_space(const char *backend, const char *arch, const at_problem *problem,
                           const char *template_name, int64_t limit, uint64_t seed, int threads,
                           at_compile_report *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    at_context ctx = {.compile_threads = threads};
    at_problem *p = NULL;
    at_template *t = NULL;
    ctx.ops = backend ? at_backend_find(backend) : NULL;
    at_status s = AT_OK;
    if (!ctx.ops)
        s = at_fail(AT_ERR_NO_BACKEND, "this build of autotune has no %s backend",
                    backend ? backend : "(null)");
    else if (!ctx.ops->open_target)
        s = at_fail(AT_ERR_UNSUPPORTED,
                    "the %s backend compiles only for a present device: use --device, not --arch",
                    backend);
    if (s == AT_OK) s = ctx.ops->open_target(arch, &ctx.info, &ctx.dev);
    if (s == AT_OK) s = resolved(problem, &p);
    if (s == AT_OK) s = at_template_for(p, &ctx.info, template_name, &t);
    if (s == AT_OK) s = at_pipeline_compile(&ctx, t, limit, seed, out);
    if (s != AT_OK && why) snprintf(why, whylen, "%s", at_errmsg());
    at_template_free(t);
    at_problem_destroy(p);
    if (ctx.dev) ctx.ops->close(ctx.dev);
    return s;
}

/* ---- buffers -------------------------------------------------------------------------------- */

struct at_buffer {
    at_context *ctx;
    at_bbuf b;
};

at_status at_buffer_create(at_context *ctx, size_t bytes, at_buffer **out)
{
    *out = NULL;
    AT_TRY(ready(ctx));
    if (bytes == 0) return at_ctx_fail(ctx, at_fail(AT_ERR_INVALID_ARG, "a buffer of 0 bytes"));
    at_buffer *b = calloc(1, sizeof *b);
    if (!b) return AT_ERR_NO_MEMORY;
    b->ctx = ctx;
    at_status s = ctx->ops->buffer_alloc(ctx->dev, bytes, &b->b);
    if (s != AT_OK) {
        free(b);
        return at_ctx_fail(ctx, s);
    }
    *out = b;
    return AT_OK;
}

static at_status check_range(const at_buffer *b, size_t offset, size_t bytes)
{
    if (!b) return at_fail(AT_ERR_INVALID_ARG, "no buffer");
    if (offset > b->b.bytes || bytes > b->b.bytes - offset)
        return at_ctx_fail(b->ctx, at_fail(AT_ERR_INVALID_ARG,
                                           "range %zu+%zu is outside a buffer of %zu bytes", offset,
                                           bytes, b->b.bytes));
    return AT_OK;
}

at_status at_buffer_write(at_buffer *b, size_t offset, const void *src, size_t bytes)
{
    AT_TRY(check_range(b, offset, bytes));
    return at_ctx_fail(b->ctx, b->ctx->ops->buffer_write(b->ctx->dev, b->b, offset, src, bytes));
}

at_status at_buffer_read(at_buffer *b, size_t offset, void *dst, size_t bytes)
{
    AT_TRY(check_range(b, offset, bytes));
    return at_ctx_fail(b->ctx, b->ctx->ops->buffer_read(b->ctx->dev, b->b, offset, dst, bytes));
}

at_devptr at_buffer_devptr(const at_buffer *b)
{
    at_devptr d = {b ? b->b.handle : NULL};
    return d;
}

void at_buffer_destroy(at_buffer *b)
{
    if (!b) return;
    b->ctx->ops->buffer_free(b->ctx->dev, b->b);
    free(b);
}

/* ---- discovery --------------------------------------------------------------------------------
 */

at_status at_backends_query(at_backend_desc *out, int max, int *n)
{
    *n = 0;
    for (int i = 1; i < 4 && *n < max; i++) {
        at_backend_desc *d = &out[(*n)++];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "%s", g_kind_names[i]);
        const at_backend_ops *ops = at_backend_find(g_kind_names[i]);
        if (!ops) {
            snprintf(d->why, sizeof d->why, "this build of autotune has no %s backend",
                     g_kind_names[i]);
        } else if (ops->probe(d->why, sizeof d->why) == AT_OK) {
            d->available = 1;
            d->ndevices = ops->device_count();
            /* why keeps the probe's note on what it loaded (the GPU backends' files) */
            if (!d->ndevices)
                snprintf(d->why, sizeof d->why, "the runtime loaded but reports no device");
        }
    }
    return AT_OK;
}

at_status at_device_query(const char *backend, int index, at_device_desc *out)
{
    memset(out, 0, sizeof *out);
    const at_backend_ops *ops = backend ? at_backend_find(backend) : NULL;
    char why[512];
    if (!ops)
        return at_fail(AT_ERR_NO_BACKEND, "no backend '%s' in this build",
                       backend ? backend : "(null)");
    AT_TRY(ops->probe(why, sizeof why));
    at_device_info info;
    AT_TRY(ops->device_info(index, &info));
    snprintf(out->backend, sizeof out->backend, "%s", info.backend);
    out->index = index;
    snprintf(out->name, sizeof out->name, "%s", info.name);
    snprintf(out->vendor, sizeof out->vendor, "%s", info.vendor);
    snprintf(out->driver, sizeof out->driver, "%s", info.driver);
    snprintf(out->key, sizeof out->key, "%s", info.key);
    snprintf(out->arch, sizeof out->arch, "%s", info.arch);
    out->compute_units = info.compute_units;
    out->max_work_group_size = info.max_work_group_size;
    out->local_mem_bytes = info.local_mem_bytes;
    out->global_mem_bytes = info.global_mem_bytes;
    out->is_cpu = info.is_cpu;
    out->tma = info.tma;
    out->cluster = info.cluster;
    return AT_OK;
}

typedef struct visit_args {
    const char *table, *prefix;
    int (*visit)(void *user, const char *key, const char *value);
    void *user;
} visit_args;

static at_status visit_in(at_db *db, void *arg)
{
    const visit_args *a = arg;
    return at_db_scan(db, a->table, a->prefix, a->visit, a->user);
}

/* 1 if path is a regular file that starts as a bundle does (gzip's magic, or a JSON line); a
 * FIFO, a directory or any other file is left to at_db_read, which says what it is. */
static int is_bundle_file(const char *path)
{
    struct stat st;
    unsigned char head[2] = {0};
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    return (n == 2 && head[0] == 0x1f && head[1] == 0x8b) || (n >= 1 && head[0] == '{');
}

at_status at_db_visit(const char *path, const char *table, const char *prefix,
                      int (*visit)(void *user, const char *key, const char *value), void *user,
                      char *why, size_t whylen)
{
    visit_args a = {table, prefix, visit, user};
    if (!is_bundle_file(path)) return at_db_read(path, visit_in, &a, why, whylen);
    /* A bundle (a layer on the search path, or given as --db): its private copy. */
    at_db *db = NULL;
    at_status s = at_bundle_layer_open(path, &db, why, whylen);
    if (s == AT_OK) s = visit_in(db, &a);
    if (s != AT_OK && why) snprintf(why, whylen, "%s", at_errmsg());
    if (s == AT_OK && why && whylen) why[0] = '\0';
    if (s == AT_OK && why) at_db_skipped(db, why, whylen);
    at_db_close(db);
    return s;
}

char *at_db_default_location(void) { return at_db_default_path(); }

const char *const *at_tune_strategies(void) { return at_search_strategies(); }
