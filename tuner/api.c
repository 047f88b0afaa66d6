/* api.c — the public library API (include/autotune.h): contexts; get (hit, nearest, default or
 * tune), tune (cache hit, or the pipeline) and launch for every
 * operation; buffers; discovery. Every failure leaves its detailed message on the context. */
#include "tuner/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

at_status at_context_create(const at_context_options *opts, at_context **out)
{
    at_context_options o = {0};
    if (opts) o = *opts;
    at_context *ctx = calloc(1, sizeof *ctx);
    *out = ctx;
    if (!ctx) return AT_ERR_NO_MEMORY;
    at_errclear();
    at_status s = pick_backend(o.backend, &ctx->ops);
    if (s == AT_OK) {
        int n = ctx->ops->device_count();
        if (o.device < 0 || o.device >= n)
            s = at_fail(AT_ERR_NO_DEVICE, "device %d does not exist: backend %s has %d device%s",
                        o.device, ctx->ops->name, n, n == 1 ? "" : "s");
    }
    if (s == AT_OK) s = ctx->ops->device_info(o.device, &ctx->info);
    if (s == AT_OK) {
        ctx->db_path = o.db_path ? at_strdup(o.db_path) : at_db_default_path();
        if (!ctx->db_path) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    /* A database this process cannot write still answers lookups: writes then fail with the
     * reason (at_db_readonly_reason). */
    if (s == AT_OK) s = at_db_open(ctx->db_path, AT_DB_WRITABLE_OR_READONLY, &ctx->db);
    if (s == AT_OK) s = ctx->ops->open(o.device, &ctx->dev);
    ctx->device_index = o.device;
    ctx->compile_threads = o.compile_threads;
    return at_ctx_fail(ctx, s);
}

void at_context_destroy(at_context *ctx)
{
    if (!ctx) return;
    if (ctx->ops && ctx->dev) ctx->ops->close(ctx->dev);
    at_db_close(ctx->db);
    free(ctx->db_path);
    free(ctx);
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

/* The database's best entry for p on this device. */
static int lookup_best(at_context *ctx, const at_problem *p, at_best_rec *b)
{
    char pkey[256];
    p->op->key(p->data, pkey, sizeof pkey);
    char *key = at_db_best_key(pkey, ctx->info.key);
    int hit = key && at_db_get_best(ctx->db, key, b) == AT_OK;
    free(key);
    at_errclear();
    return hit;
}

/* 1 if results tuned with the template version `hash` hold for t (at_template_trusts). */
static int trusts(const at_template *t, const char *hash) { return at_template_trusts(t, hash); }

/* The template a best entry was tuned with, if it still serves p here and is the same version
 * (an entry from before templates were named was made with the default choice). */
static at_template *best_template(at_context *ctx, const at_problem *p, const at_best_rec *b)
{
    at_template *t = NULL;
    if (at_template_for(p, &ctx->info, b->template_name[0] ? b->template_name : NULL, &t) !=
        AT_OK) {
        at_errclear();
        return NULL;
    }
    if (trusts(t, b->template_hash)) return t;
    at_template_free(t);
    return NULL;
}

/* The tuned entry of the nearest problem (the operation's distance) on this device, made with
 * template t and valid for p. */
static int lookup_nearest(at_context *ctx, const at_problem *p, const at_template *t,
                          at_best_rec *out)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s/", p->op->name);
    char **keys = NULL;
    size_t n = 0;
    int found = 0;
    double best = INFINITY;
    /* LMDB allows one read transaction per thread: the keys first, then their records. */
    if (at_db_keys(ctx->db, "best", prefix, &keys, &n) == AT_OK) {
        for (size_t i = 0; i < n; i++) {
            at_best_key k;
            if (at_best_key_split(keys[i], &k) != AT_OK || !at_key_part_is(k.device, ctx->info.key))
                continue;
            char *problem_key = at_key_part_dup(k.problem);
            double d = problem_key ? p->op->distance(p->data, problem_key) : INFINITY;
            free(problem_key);
            at_best_rec b;
            int64_t cfg[AT_MAX_PARAMS];
            if (!(d < best) || at_db_get_best(ctx->db, keys[i], &b) != AT_OK) continue;
            if (!trusts(t, b.template_hash)) continue;
            if (at_config_parse(t->space, b.config, cfg) != AT_OK ||
                !at_space_valid(t->space, cfg, NULL, 0))
                continue;
            best = d;
            *out = b;
            found = 1;
        }
    }
    at_db_keys_free(keys, n);
    at_errclear();
    return found;
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

/* The space's size before its constraints, as the reports' int64_t (saturating). */
static int64_t space_total(const at_space *s)
{
    const uint64_t n = at_space_total(s);
    return n > INT64_MAX ? INT64_MAX : (int64_t)n;
}

static void default_tune_options(const at_tune_options *in, at_tune_options *o)
{
    if (in) *o = *in;
    /* Without a budget, a search stops after a minute; exhaustive runs to the end. */
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
    default_tune_options(opts, &o);
    at_problem *p = NULL;
    at_template *t = NULL;
    at_best_rec b;
    char config[512] = "";
    at_status s = ready(ctx);
    if (s == AT_OK) s = resolved(problem, &p);
    /* A cache hit: the stored best, made with a template that still serves the problem here
     * at the same version (the one asked for, when one is). */
    if (s == AT_OK && !o.force && !o.replay_db && lookup_best(ctx, p, &b) &&
        (t = best_template(ctx, p, &b)) && o.template_name &&
        strcmp(t->name, o.template_name) != 0) {
        at_template_free(t);
        t = NULL;
    }
    if (t) {
        /* Nothing is compiled, unless the caller wants the kernel and its binary is not in the
         * database. */
        rep->cache_hit = 1;
        rep->space = b.space;
        rep->best_time_us = b.time_us;
        rep->best_gflops = b.gflops;
        rep->best_gbytes_per_s = p->op->bytes(p->data) / (b.time_us * 1e3);
        rep->best_max_rel_error = b.max_rel_error;
        snprintf(rep->best_config, sizeof rep->best_config, "%s", b.config);
        snprintf(config, sizeof config, "%s", b.config);
    } else if (s == AT_OK) {
        s = at_template_for(p, &ctx->info, o.template_name, &t);
        /* Candidates run in a worker process: a fault is recorded against the candidate that
         * made it, and the worker replaced (tuner/worker.c). */
        if (s == AT_OK) s = at_pipeline_tune(ctx, t, p, &o, rep, config, sizeof config);
    }
    if (t) {
        snprintf(rep->template_name, sizeof rep->template_name, "%s", t->name);
        rep->space_total = space_total(t->space);
    }
    if (s == AT_OK && out) s = at_kernel_build(ctx, t, p, config, out);
    at_template_free(t);
    at_problem_destroy(p);
    rep->seconds = at_now() - t0;
    return at_ctx_fail(ctx, s);
}

at_status at_get(at_context *ctx, const at_problem *problem, unsigned flags, at_kernel **out,
                 at_source *source)
{
    *out = NULL;
    at_problem *p = NULL;
    at_template *t = NULL;
    at_status s = ready(ctx);
    if (s == AT_OK) s = resolved(problem, &p);
    at_best_rec b;
    char config[512] = "";
    at_source src = AT_SOURCE_HIT;
    if (s == AT_OK && lookup_best(ctx, p, &b) && (t = best_template(ctx, p, &b))) {
        snprintf(config, sizeof config, "%s", b.config);
    } else if (s == AT_OK && (s = at_template_for(p, &ctx->info, NULL, &t)) != AT_OK) {
        /* no template serves the problem here */
    } else if (s == AT_OK && (flags & AT_GET_ALLOW_TUNE)) {
        at_template_free(t);
        at_problem_destroy(p);
        if (source) *source = AT_SOURCE_TUNED;
        return at_tune(ctx, problem, NULL, NULL, out);
    } else if (s == AT_OK && (flags & AT_GET_NO_FALLBACK)) {
        char key[256];
        p->op->key(p->data, key, sizeof key);
        s = at_fail(AT_ERR_NOT_FOUND, "no tuned entry for %s on %s", key, ctx->info.key);
    } else if (s == AT_OK && lookup_nearest(ctx, p, t, &b)) {
        src = AT_SOURCE_NEAREST;
        snprintf(config, sizeof config, "%s", b.config);
    } else if (s == AT_OK) {
        src = AT_SOURCE_DEFAULT;
        s = default_config(t, config, sizeof config);
    }
    if (s == AT_OK) s = at_kernel_build(ctx, t, p, config, out);
    if (s == AT_OK && source) *source = src;
    at_template_free(t);
    at_problem_destroy(p);
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
    /* The workspace (split-K partial sums) is the argument of kernels that take one. */
    if (s == AT_OK)
        s = at_args_build(k->args, k->nargs, k->problem, handles, k->workspace.handle, &args);
    at_context *ctx = k->ctx;
    if (s == AT_OK)
        s = ctx->ops->launch(ctx->dev, k->prog, args.a, args.n, k->global, k->local, k->dims,
                             k->shared_bytes, stream, NULL);
    return at_ctx_fail(ctx, s);
}

const char *at_kernel_config(const at_kernel *k) { return k ? k->config : ""; }
const char *at_kernel_template(const at_kernel *k) { return k ? k->template_name : ""; }

void at_kernel_destroy(at_kernel *k)
{
    if (!k) return;
    if (k->prog) k->ctx->ops->program_free(k->prog);
    if (k->workspace.handle) k->ctx->ops->buffer_free(k->ctx->dev, k->workspace);
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
            d->why[0] = '\0';
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

at_status at_db_visit(const char *path, const char *table, const char *prefix,
                      int (*visit)(void *user, const char *key, const char *value), void *user,
                      char *why, size_t whylen)
{
    visit_args a = {table, prefix, visit, user};
    return at_db_read(path, visit_in, &a, why, whylen);
}

char *at_db_default_location(void) { return at_db_default_path(); }

const char *const *at_tune_strategies(void) { return at_search_strategies(); }
