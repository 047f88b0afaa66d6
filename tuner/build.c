/* build.c — the builder: compiles configurations in a thread pool (compiling never needs the
 * device), keeps compiled binaries in the database so a later process skips the compiler,
 * checks what the compiler reports against the device, makes ready-to-launch kernels, and
 * compiles whole spaces for a target without a device. */
#define _POSIX_C_SOURCE 200809L
#include "tuner/pipeline.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the binaries table -------------------------------------------------------------------- */

/* Binaries are trusted for the exact source, options, device and compiler. */
static void binary_key(at_context *ctx, const char *source, const char *options, char out[17])
{
    uint64_t h = at_hash_str(AT_HASH_SEED, source);
    h = at_hash_str(h, options);
    h = at_hash_str(h, ctx->info.key);
    h = at_hash_str(h, ctx->ops->compiler_version(ctx->dev));
    at_hash_hex(h, out);
}

void at_binary_store(at_context *ctx, const char *source, const char *options, at_bprog *prog)
{
    void *bin = NULL;
    size_t len = 0;
    char key[17];
    binary_key(ctx, source, options, key);
    /* A binary that cannot be stored only costs a compile later. */
    if (ctx->ops->program_binary(prog, &bin, &len) == AT_OK)
        at_db_put_binary(ctx->db, key, bin, len);
    free(bin);
}

/* The stored binary for source and options, loaded; NULL when there is none or the device
 * rejects it (stale or foreign: compiling from source is the answer). */
static at_bprog *binary_load(at_context *ctx, const char *source, const char *options,
                             const char *kernel)
{
    char key[17];
    binary_key(ctx, source, options, key);
    void *bin = NULL;
    size_t len = 0;
    at_bprog *prog = NULL;
    char *log = NULL;
    if (at_db_get_binary(ctx->db, key, &bin, &len) == AT_OK &&
        ctx->ops->load_binary(ctx->dev, bin, len, kernel, &prog, &log) != AT_OK)
        prog = NULL;
    free(log);
    free(bin);
    at_errclear();
    return prog;
}

/* ---- kernels ------------------------------------------------------------------------------- */

at_status at_kernel_build(at_context *ctx, at_template *t, const at_problem *p, const char *config,
                          at_kernel **out)
{
    *out = NULL;
    at_space *s = t->space;
    int64_t cfg[AT_MAX_PARAMS];
    char why[512], options[4096];
    AT_TRY(at_config_parse(s, config, cfg));
    if (!at_space_valid(s, cfg, why, sizeof why))
        return at_fail(AT_ERR_INVALID_ARG, "configuration %s is not valid for %s: %s", config,
                       s->name, why);
    AT_TRY(at_config_defines(s, cfg, options, sizeof options));
    at_kernel *k = calloc(1, sizeof *k);
    if (!k) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    k->ctx = ctx;
    k->recycles = ctx->recycles;
    k->dims = s->launch_dims;
    snprintf(k->config, sizeof k->config, "%s", config);
    snprintf(k->template_name, sizeof k->template_name, "%s", t->name);
    at_status st =
        (k->problem = at_problem_resolve(p)) ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; st == AT_OK && i < s->nargs; i++) {
        k->args[i] = s->args[i];
        k->args[i].tmap = NULL; /* the space's: resolved into k->maps below */
        if (s->args[i].name && !(k->args[i].name = at_strdup(s->args[i].name)))
            st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
        else
            k->nargs++;
    }
    if (st == AT_OK) st = at_args_maps(s, cfg, k->problem, k->maps);
    if (st == AT_OK) st = at_space_launch(s, cfg, k->global, k->local);
    size_t ws_bytes = 0, scratch_bytes = 0;
    if (st == AT_OK) st = at_space_memory(s, cfg, &k->shared_bytes, &ws_bytes, &scratch_bytes);
    if (st == AT_OK) st = at_space_cluster(s, cfg, &k->cluster);
    if (st == AT_OK) {
        k->prog = binary_load(ctx, t->source, options, s->kernel);
        k->from_binary = k->prog != NULL;
    }
    if (st == AT_OK && !k->prog) {
        char *log = NULL;
        st = ctx->ops->compile(ctx->dev, t->source, options, s->kernel, &k->prog, &log);
        if (st == AT_OK) at_binary_store(ctx, t->source, options, k->prog);
        free(log);
    }
    /* made at the first launch (a cached kernel is never launched), zeroed, scratch included */
    k->ws_bytes = ws_bytes + scratch_bytes;
    k->refs = 1;
    if (st != AT_OK) {
        at_kernel_destroy(k);
        return st;
    }
    *out = k;
    return AT_OK;
}

at_kernel *at_kernel_share(at_kernel *base)
{
    at_kernel *k = malloc(sizeof *k);
    if (!k) return NULL;
    /* Everything before base: refs is counted by other threads meanwhile. */
    memcpy(k, base, offsetof(at_kernel, base));
    k->base = base;
    k->refs = 0;
    memset(&k->workspace, 0, sizeof k->workspace);
    __atomic_add_fetch(&base->refs, 1, __ATOMIC_RELAXED);
    return k;
}

at_status at_workspace_ensure(at_context *ctx, at_bbuf *ws, size_t bytes)
{
    if (ws->handle && ws->bytes >= bytes && bytes) return AT_OK;
    if (ws->handle) ctx->ops->buffer_free(ctx->dev, *ws);
    memset(ws, 0, sizeof *ws);
    if (!bytes) return AT_OK;
    AT_TRY(ctx->ops->buffer_alloc(ctx->dev, bytes, ws));
    at_status s = ctx->ops->buffer_fill(ctx->dev, *ws, 0);
    if (s == AT_OK) s = ctx->ops->finish(ctx->dev);
    if (s != AT_OK) {
        ctx->ops->buffer_free(ctx->dev, *ws);
        memset(ws, 0, sizeof *ws);
    }
    return s;
}

/* ---- the compile pool ---------------------------------------------------------------------- */

struct at_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    at_job **jobs; /* in submission order */
    size_t submitted, started, cap;
    int stop;
    at_context *ctx;
    const char *source, *kernel;
    pthread_t *threads;
    int nthreads;
};

int at_compile_threads(const at_context *ctx)
{
    int n = ctx->compile_threads > 0 ? ctx->compile_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

static void first_lines(const char *log, char *out, size_t len)
{
    /* Keep the start of a compiler log, on one line: it names the first error. */
    at_log_head(log && *log ? log : at_errmsg(), out, len);
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\t') *c = ' ';
}

static void *pool_main(void *arg)
{
    at_pool *pl = arg;
    pthread_mutex_lock(&pl->mu);
    for (;;) {
        while (!pl->stop && pl->started == pl->submitted) pthread_cond_wait(&pl->work, &pl->mu);
        if (pl->stop) break;
        at_job *j = pl->jobs[pl->started++];
        pthread_mutex_unlock(&pl->mu);

        char *log = NULL;
        double t0 = at_now();
        j->status =
            pl->ctx->ops->compile(pl->ctx->dev, pl->source, j->options, pl->kernel, &j->prog, &log);
        j->compile_ms = (at_now() - t0) * 1e3;
        if (j->status != AT_OK) first_lines(log, j->reason, sizeof j->reason);
        free(log);

        pthread_mutex_lock(&pl->mu);
        j->done = 1;
        pthread_cond_broadcast(&pl->done);
    }
    pthread_mutex_unlock(&pl->mu);
    return NULL;
}

at_status at_pool_start(at_context *ctx, const char *source, const char *kernel, int nthreads,
                        at_pool **out)
{
    at_pool *pl = calloc(1, sizeof *pl);
    *out = pl;
    if (!pl) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->work, NULL);
    pthread_cond_init(&pl->done, NULL);
    pl->ctx = ctx;
    pl->source = source;
    pl->kernel = kernel;
    pl->threads = calloc((size_t)nthreads, sizeof *pl->threads);
    if (!pl->threads) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&pl->threads[i], NULL, pool_main, pl) != 0) break;
        pl->nthreads++;
    }
    return pl->nthreads ? AT_OK : at_fail(AT_ERR_INTERNAL, "cannot start compile threads");
}

void at_pool_submit(at_pool *pl, const at_space *s, size_t i, const int64_t *cfg, at_job *j)
{
    memset(j, 0, sizeof *j);
    j->cfg = i;
    at_config_format(s, cfg, j->config, sizeof j->config);
    if (at_config_defines(s, cfg, j->options, sizeof j->options) != AT_OK) {
        j->done = 1;
        j->status = AT_ERR_TEMPLATE;
        snprintf(j->reason, sizeof j->reason, "%s", at_errmsg());
        return;
    }
    pthread_mutex_lock(&pl->mu);
    if (pl->submitted == pl->cap) {
        size_t cap = pl->cap ? pl->cap * 2 : 64;
        at_job **nj = realloc(pl->jobs, cap * sizeof *nj);
        if (!nj) {
            pthread_mutex_unlock(&pl->mu);
            j->done = 1;
            j->status = at_fail(AT_ERR_NO_MEMORY, "out of memory");
            snprintf(j->reason, sizeof j->reason, "out of memory");
            return;
        }
        pl->jobs = nj;
        pl->cap = cap;
    }
    pl->jobs[pl->submitted++] = j;
    pthread_cond_signal(&pl->work);
    pthread_mutex_unlock(&pl->mu);
}

int at_pool_wait(at_pool *pl, at_job *j, const volatile int *cancel)
{
    int cancelled = 0;
    pthread_mutex_lock(&pl->mu);
    while (!j->done && !(cancelled = cancel && *cancel)) {
        /* Looks at the cancel flag ten times a second: a signal handler cannot signal a cond. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&pl->done, &pl->mu, &ts);
    }
    pthread_mutex_unlock(&pl->mu);
    return cancelled;
}

void at_pool_stop(at_pool *pl)
{
    if (!pl) return;
    pthread_mutex_lock(&pl->mu);
    pl->stop = 1;
    pthread_cond_broadcast(&pl->work);
    pthread_mutex_unlock(&pl->mu);
    for (int i = 0; i < pl->nthreads; i++) pthread_join(pl->threads[i], NULL);
    /* Jobs never started are still owned by the caller's list; nothing to free here. */
    pthread_cond_destroy(&pl->work);
    pthread_cond_destroy(&pl->done);
    pthread_mutex_destroy(&pl->mu);
    free(pl->jobs);
    free(pl->threads);
    free(pl);
}

/* ---- resources ----------------------------------------------------------------------------- */

int at_resources_fit(const at_device_info *info, const at_resources *r, int64_t threads, char *why,
                     size_t whylen)
{
    if (r->spill_bytes > 0) {
        snprintf(why, whylen, "spills %lld bytes per thread (%lld registers)",
                 (long long)r->spill_bytes, (long long)r->registers);
        return 0;
    }
    if (r->shared_bytes > 0 && info->local_mem_bytes > 0 &&
        r->shared_bytes > info->local_mem_bytes) {
        snprintf(why, whylen, "%lld bytes of static shared memory exceed the %lld of a block",
                 (long long)r->shared_bytes, (long long)info->local_mem_bytes);
        return 0;
    }
    if (r->serialized > 0) {
        snprintf(why, whylen, "ptxas serialized its wgmma.mma_async instructions (C7515)");
        return 0;
    }
    if (r->max_threads > 0 && threads > r->max_threads) {
        snprintf(why, whylen, "a work-group of %lld exceeds the kernel's limit of %lld",
                 (long long)threads, (long long)r->max_threads);
        return 0;
    }
    if (info->max_registers_per_block > 0 && r->registers > 0 &&
        r->registers * threads > info->max_registers_per_block) {
        snprintf(why, whylen, "%lld registers x %lld threads exceed the %lld registers of a block",
                 (long long)r->registers, (long long)threads,
                 (long long)info->max_registers_per_block);
        return 0;
    }
    return 1;
}

int at_candidate_fits(at_context *ctx, at_bprog *prog, const size_t local[3], char *why,
                      size_t whylen)
{
    at_resources res;
    if (!ctx->ops->resources || ctx->ops->resources(prog, &res) != AT_OK) return 1;
    return at_resources_fit(&ctx->info, &res, (int64_t)(local[0] * local[1] * local[2]), why,
                            whylen);
}

/* ---- compiling a space without running it -------------------------------------------------- */

at_status at_pipeline_compile(at_context *ctx, at_template *t, int64_t limit, uint64_t seed,
                              at_compile_report *rep)
{
    at_space *s = t->space;
    const size_t np = s->nparams;
    int64_t *configs = NULL;
    size_t n = 0;
    memset(rep, 0, sizeof *rep);
    snprintf(rep->template_name, sizeof rep->template_name, "%s", t->name);
    AT_TRY(at_space_enumerate(s, &configs, NULL, &n));
    rep->space = (int64_t)n;
    size_t count = limit > 0 && (size_t)limit < n ? (size_t)limit : n;
    at_job *jobs = calloc(count ? count : 1, sizeof *jobs);
    at_pool *pl = NULL;
    at_status st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (jobs) st = at_pool_start(ctx, t->source, s->kernel, at_compile_threads(ctx), &pl);
    double t0 = at_now();
    /* An even spread through the space (first parameter slowest), shifted by the seed. */
    size_t stride = count ? n / count : 1, shift = stride > 1 ? (size_t)(seed % stride) : 0;
    for (size_t i = 0; st == AT_OK && i < count; i++) {
        size_t c = i * stride + shift;
        at_pool_submit(pl, s, c, configs + c * np, &jobs[i]);
    }
    for (size_t i = 0; st == AT_OK && i < count; i++) {
        at_job *j = &jobs[i];
        at_pool_wait(pl, j, NULL);
        rep->attempted++;
        size_t global[3], local[3];
        char why[512];
        if (j->status != AT_OK) {
            rep->compile_errors++;
            if (!rep->first_error[0])
                snprintf(rep->first_error, sizeof rep->first_error, "%s: %s", j->config, j->reason);
        } else if (at_space_launch(s, configs + j->cfg * np, global, local) == AT_OK &&
                   !at_candidate_fits(ctx, j->prog, local, why, sizeof why)) {
            rep->resource_rejected++;
            if (!rep->first_rejection[0])
                snprintf(rep->first_rejection, sizeof rep->first_rejection, "%s: %s", j->config,
                         why);
        } else {
            rep->compiled++;
        }
        ctx->ops->program_free(j->prog);
        j->prog = NULL;
    }
    rep->seconds = at_now() - t0;
    at_pool_stop(pl);
    free(jobs);
    free(configs);
    return st;
}
