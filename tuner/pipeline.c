/* pipeline.c — the candidate pipeline: propose (search) → constraints → compile (thread pool)
 * → run once and compare with the reference → time → record (LMDB) → report (search).
 * Vendor-neutral: it drives a backend through its vtable and a problem through at_problem. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "tuner/tuner.h"

#include "search/search.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define AT_BATCH_WRITE      8       /* results per write transaction */
#define AT_MIN_TIME_S       0.1     /* time each candidate at least this long ... */
#define AT_MIN_REPS         3       /* ... and at least this many times ... */
#define AT_MAX_REPS         50      /* ... but no more than this */
#define AT_EARLY_STOP_RATIO 2.0     /* stop timing a candidate this much slower than the best */
#define AT_TIMEOUT_MS       20000.0 /* one run longer than this is a timeout */

/* ---- compiled programs and the binaries table --------------------------------------------- */

/* Binaries are trusted for the exact source, options, device and compiler. */
static void binary_key(at_context *ctx, const char *source, const char *options, char out[17])
{
    uint64_t h = at_hash_str(AT_HASH_SEED, source);
    h = at_hash_str(h, options);
    h = at_hash_str(h, ctx->info.key);
    h = at_hash_str(h, ctx->ops->compiler_version(ctx->dev));
    at_hash_hex(h, out);
}

static void store_binary(at_context *ctx, const char *source, const char *options, at_bprog *prog)
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

at_status at_kernel_build(at_context *ctx, at_template *t, const at_gemm_problem *g,
                          const char *config, at_kernel **out)
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
    k->problem = *g;
    k->dims = s->launch_dims;
    snprintf(k->config, sizeof k->config, "%s", config);
    at_status st = at_space_launch(s, cfg, k->global, k->local);
    size_t ws_bytes = 0;
    if (st == AT_OK) st = at_space_memory(s, cfg, &k->shared_bytes, &ws_bytes);

    char key[17];
    binary_key(ctx, t->source, options, key);
    void *bin = NULL;
    size_t len = 0;
    char *log = NULL;
    if (st == AT_OK && at_db_get_binary(ctx->db, key, &bin, &len) == AT_OK) {
        /* A stale or foreign binary is not fatal: compile from source instead. */
        if (ctx->ops->load_binary(ctx->dev, bin, len, s->kernel, &k->prog, &log) != AT_OK)
            k->prog = NULL;
        free(log);
        log = NULL;
        free(bin);
    }
    if (st == AT_OK && !k->prog) {
        st = ctx->ops->compile(ctx->dev, t->source, options, s->kernel, &k->prog, &log);
        if (st == AT_OK) store_binary(ctx, t->source, options, k->prog);
        free(log);
    }
    if (st == AT_OK && ws_bytes) st = at_workspace_ensure(ctx, &k->workspace, ws_bytes);
    if (st != AT_OK) {
        at_kernel_destroy(k);
        return st;
    }
    *out = k;
    return AT_OK;
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

/* ---- the compile pool --------------------------------------------------------------------- */

typedef struct job {
    size_t cfg; /* index in the enumerated space */
    char config[512];
    char options[4096];
    at_bprog *prog;
    at_status status;
    char reason[512];
    double compile_ms;
    int done;
} job;

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    job **jobs; /* in submission order */
    size_t submitted, started, cap;
    int stop;
    at_context *ctx;
    const char *source, *kernel;
    pthread_t *threads;
    int nthreads;
} pool;

static void first_lines(const char *log, char *out, size_t len)
{
    /* Keep the start of a compiler log, on one line: it names the first error. */
    at_log_head(log && *log ? log : at_errmsg(), out, len);
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\t') *c = ' ';
}

static void *pool_main(void *arg)
{
    pool *pl = arg;
    pthread_mutex_lock(&pl->mu);
    for (;;) {
        while (!pl->stop && pl->started == pl->submitted) pthread_cond_wait(&pl->work, &pl->mu);
        if (pl->stop) break;
        job *j = pl->jobs[pl->started++];
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

static at_status pool_start(pool *pl, at_context *ctx, const char *source, const char *kernel,
                            int nthreads, size_t cap)
{
    memset(pl, 0, sizeof *pl);
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->work, NULL);
    pthread_cond_init(&pl->done, NULL);
    pl->ctx = ctx;
    pl->source = source;
    pl->kernel = kernel;
    pl->cap = cap;
    pl->jobs = calloc(cap ? cap : 1, sizeof *pl->jobs);
    pl->threads = calloc((size_t)nthreads, sizeof *pl->threads);
    if (!pl->jobs || !pl->threads) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&pl->threads[i], NULL, pool_main, pl) != 0) break;
        pl->nthreads++;
    }
    return pl->nthreads ? AT_OK : at_fail(AT_ERR_INTERNAL, "cannot start compile threads");
}

static void pool_submit(pool *pl, job *j)
{
    pthread_mutex_lock(&pl->mu);
    pl->jobs[pl->submitted++] = j;
    pthread_cond_signal(&pl->work);
    pthread_mutex_unlock(&pl->mu);
}

static void pool_wait(pool *pl, job *j)
{
    pthread_mutex_lock(&pl->mu);
    while (!j->done) pthread_cond_wait(&pl->done, &pl->mu);
    pthread_mutex_unlock(&pl->mu);
}

static void pool_stop(pool *pl)
{
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
}

/* ---- measuring one candidate -------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A launch failed: a fault that poisoned the context (CUDA's sticky errors) makes the
 * candidate `crashed` and the device lost; anything else is the candidate's launch_error. */
static void launch_failed(at_context *ctx, at_result_rec *rec, int *lost)
{
    char why[sizeof rec->reason];
    snprintf(why, sizeof why, "%s", at_errmsg());
    if (ctx->ops->check && ctx->ops->check(ctx->dev) == AT_ERR_DEVICE_LOST) {
        rec->status = AT_RS_CRASHED;
        *lost = 1;
    } else {
        rec->status = AT_RS_LAUNCH_ERROR;
    }
    snprintf(rec->reason, sizeof rec->reason, "%s", why);
}

/* Bytes of the first ws_bytes of ws that are not zero (reads it back); -1 if it cannot be read
 * (a fault), with at_errmsg() saying why. */
static int64_t workspace_dirty(at_context *ctx, at_bbuf ws, size_t ws_bytes)
{
    unsigned char *h = malloc(ws_bytes);
    if (!h) return at_fail(AT_ERR_NO_MEMORY, "out of memory reading a workspace"), -1;
    int64_t dirty = -1;
    if (ctx->ops->buffer_read(ctx->dev, ws, 0, h, ws_bytes) == AT_OK) {
        dirty = 0;
        for (size_t i = 0; i < ws_bytes; i++) dirty += h[i] != 0;
    }
    free(h);
    return dirty;
}

/* How one candidate is launched: geometry, dynamic shared memory and its workspace. */
typedef struct launch_cfg {
    size_t global[3], local[3], dims, shared_bytes;
    const at_bbuf *ws; /* NULL: the kernel takes no workspace */
    size_t ws_bytes;
} launch_cfg;

/* Runs a compiled candidate once against the reference, then times it, flushing the cache
 * before each timed run when flush is given. A workspace is zeroed before the checked run (the
 * candidate before may have left it dirty) and must be all zero after it. Every outcome goes
 * into rec; nothing here fails the run, but *lost says the device context must be recycled. */
static void measure(at_context *ctx, at_problem *p, at_bprog *prog, const launch_cfg *lc,
                    double best_us, const at_bbuf *flush, at_result_rec *rec, int *lost)
{
    at_karg args[33];
    size_t nargs = p->args(p, args);
    if (lc->ws) args[nargs++] = (at_karg){sizeof(void *), &lc->ws->handle};
    double ms = 0;
    at_status s = p->reset(p, ctx);
    if (s == AT_OK && lc->ws) s = ctx->ops->buffer_fill(ctx->dev, *lc->ws, 0);
    if (s == AT_OK)
        s = ctx->ops->launch(ctx->dev, prog, args, nargs, lc->global, lc->local, lc->dims,
                             lc->shared_bytes, NULL, &ms);
    if (s != AT_OK) {
        launch_failed(ctx, rec, lost);
        return;
    }
    int ok = 0;
    s = p->check(p, ctx, &rec->max_rel_error, &ok);
    if (s != AT_OK) { /* an asynchronous fault shows up on the read */
        launch_failed(ctx, rec, lost);
        return;
    }
    if (!ok) {
        rec->status = AT_RS_WRONG_RESULT;
        snprintf(rec->reason, sizeof rec->reason, "max relative error %.3g exceeds the tolerance",
                 rec->max_rel_error);
        return;
    }
    int64_t dirty = lc->ws ? workspace_dirty(ctx, *lc->ws, lc->ws_bytes) : 0;
    if (dirty < 0) {
        launch_failed(ctx, rec, lost);
        return;
    }
    if (dirty > 0) { /* the next launch would start from garbage */
        rec->status = AT_RS_WRONG_RESULT;
        snprintf(rec->reason, sizeof rec->reason,
                 "left %lld of its %zu workspace bytes nonzero (it must clean up)",
                 (long long)dirty, lc->ws_bytes);
        return;
    }
    if (ms > AT_TIMEOUT_MS) {
        rec->status = AT_RS_TIMEOUT;
        snprintf(rec->reason, sizeof rec->reason, "one run took %.0f ms (limit %.0f ms)", ms,
                 AT_TIMEOUT_MS);
        return;
    }
    /* The checked run doubles as the warm-up. */
    double times[AT_MAX_REPS];
    int n = 0;
    double total = 0, min = ms;
    rec->status = AT_RS_OK;
    if (best_us > 0 && ms * 1e3 > AT_EARLY_STOP_RATIO * best_us) {
        times[n++] = ms;
        rec->early_stop = 1;
    }
    while (!rec->early_stop && n < AT_MAX_REPS &&
           (n < AT_MIN_REPS || total < AT_MIN_TIME_S * 1e3)) {
        /* Operands larger than the cache would otherwise be timed warm after the first run. */
        if (flush) s = ctx->ops->buffer_fill(ctx->dev, *flush, (unsigned char)n);
        if (s == AT_OK)
            s = ctx->ops->launch(ctx->dev, prog, args, nargs, lc->global, lc->local, lc->dims,
                                 lc->shared_bytes, NULL, &ms);
        if (s != AT_OK) {
            launch_failed(ctx, rec, lost);
            return;
        }
        times[n++] = ms;
        total += ms;
        if (ms < min) min = ms;
        if (best_us > 0 && n >= 2 && min * 1e3 > AT_EARLY_STOP_RATIO * best_us) rec->early_stop = 1;
    }
    qsort(times, (size_t)n, sizeof times[0], cmp_double);
    rec->reps = n;
    rec->median_us = times[n / 2] * 1e3;
    rec->min_us = times[0] * 1e3;
    rec->max_us = times[n - 1] * 1e3;
}

/* ---- resources ---------------------------------------------------------------------------- */

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

/* Checks a compiled candidate's resources where the backend reports them; 1 if it may run. */
static int candidate_fits(at_context *ctx, at_bprog *prog, const size_t local[3], char *why,
                          size_t whylen)
{
    at_resources res;
    if (!ctx->ops->resources || ctx->ops->resources(prog, &res) != AT_OK) return 1;
    return at_resources_fit(&ctx->info, &res, (int64_t)(local[0] * local[1] * local[2]), why,
                            whylen);
}

/* ---- the tuning loop ----------------------------------------------------------------------- */

typedef struct run_state {
    at_context *ctx;
    at_template *t;
    at_problem *p;
    int64_t *configs; /* enumerated valid configs */
    size_t nconfigs;
    char *keys[AT_BATCH_WRITE];
    at_result_rec recs[AT_BATCH_WRITE];
    size_t nbatch;
    at_status write_error;
    /* best so far */
    int have_best;
    size_t best_cfg;
    at_result_rec best_rec;
    at_bprog *best_prog;
    char best_options[4096];
    int64_t evaluated, measured, failed;
    char first_failure[512];
} run_state;

static void flush_batch(run_state *r)
{
    if (r->nbatch && r->write_error == AT_OK) {
        at_status s = at_db_put_results(r->ctx->db, r->nbatch, r->keys, r->recs);
        if (s != AT_OK) r->write_error = s;
    }
    for (size_t i = 0; i < r->nbatch; i++) free(r->keys[i]);
    r->nbatch = 0;
}

static char *result_key(run_state *r, const char *config)
{
    return at_db_result_key(r->p->key, r->ctx->info.key, r->t->hash, config);
}

/* Takes the outcome of one config: counts it, keeps the best, tells the search. */
static void account(run_state *r, at_search *search, size_t cfg, const at_result_rec *rec)
{
    r->evaluated++;
    if (rec->status != AT_RS_OK) {
        r->failed++;
        if (!r->first_failure[0])
            snprintf(r->first_failure, sizeof r->first_failure, "%s: %s",
                     at_result_status_name(rec->status), rec->reason);
    } else if (!r->have_best || rec->median_us < r->best_rec.median_us) {
        r->have_best = 1;
        r->best_cfg = cfg;
        r->best_rec = *rec;
    }
    at_search_report(search, cfg, rec->status == AT_RS_OK ? rec->median_us : INFINITY);
}

static void record(run_state *r, const char *config, const at_result_rec *rec)
{
    r->keys[r->nbatch] = result_key(r, config);
    r->recs[r->nbatch] = *rec;
    if (r->keys[r->nbatch]) r->nbatch++;
    if (r->nbatch == AT_BATCH_WRITE) flush_batch(r);
}

static int index_of(const run_state *r, const int64_t *cfg, size_t nparams)
{
    for (size_t i = 0; i < r->nconfigs; i++)
        if (memcmp(r->configs + i * nparams, cfg, nparams * sizeof *cfg) == 0) return (int)i;
    return -1;
}

typedef struct prefix_probe {
    int found;
    char other_hash[17];
    const char *hash;
} prefix_probe;

static int probe_hash(void *user, const char *key, const char *value)
{
    (void)value;
    prefix_probe *pp = user;
    /* key: problem|device|hash|config */
    const char *h = strchr(key, '|');
    h = h ? strchr(h + 1, '|') : NULL;
    if (!h) return 0;
    h++;
    if (strncmp(h, pp->hash, 16) == 0 && h[16] == '|') {
        pp->found = 1;
        return 1;
    }
    if (!pp->other_hash[0]) snprintf(pp->other_hash, sizeof pp->other_hash, "%.16s", h);
    return 0;
}

/* Opens the database a run replays from (the context's own handle when it is the same one,
 * since LMDB opens an environment once per process) and checks that it holds results for this
 * problem, device and template. */
static at_status replay_open(at_context *ctx, at_template *t, at_problem *p, const char *path,
                             at_db **out, int *own)
{
    char *want = realpath(path, NULL), *have = realpath(at_db_path(ctx->db), NULL);
    int same = want && have && strcmp(want, have) == 0;
    free(want);
    free(have);
    *own = 0;
    *out = NULL;
    at_db *db = ctx->db;
    if (!same) {
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return at_fail(AT_ERR_INVALID_ARG, "--replay %s: no such database directory", path);
        AT_TRY(at_db_open(path, 1, &db));
    }
    char prefix[1024];
    snprintf(prefix, sizeof prefix, "%s|%s|", p->key, ctx->info.key);
    prefix_probe pp = {.hash = t->hash};
    at_status st = at_db_scan(db, "results", prefix, probe_hash, &pp);
    if (st == AT_OK && !pp.found)
        st = pp.other_hash[0]
                 ? at_fail(AT_ERR_INVALID_ARG,
                           "the replay database %s has results for %s on %s only from another "
                           "template version (%s, this one is %s)",
                           path, p->key, ctx->info.key, pp.other_hash, t->hash)
                 : at_fail(AT_ERR_INVALID_ARG,
                           "the replay database %s has no results for %s on device %s", path,
                           p->key, ctx->info.key);
    if (st != AT_OK) {
        if (!same) at_db_close(db);
        return st;
    }
    *out = db;
    *own = !same;
    return AT_OK;
}

at_status at_pipeline_tune(at_context *ctx, at_template *t, at_problem *p,
                           const at_tune_options *opts, at_tune_report *rep, char *best_config,
                           size_t best_len)
{
    at_space *s = t->space;
    const size_t np = s->nparams;
    double t0 = at_now();
    run_state r = {.ctx = ctx, .t = t, .p = p};
    uint16_t *idx = NULL;
    AT_TRY(at_space_enumerate(s, &r.configs, &idx, &r.nconfigs));
    rep->space = (int64_t)r.nconfigs;
    rep->space_total = (int64_t)(at_space_total(s) > INT64_MAX ? INT64_MAX : at_space_total(s));
    if (r.nconfigs == 0) {
        free(r.configs);
        free(idx);
        return at_fail(AT_ERR_NO_VALID_CONFIG,
                       "the %s space has no valid configuration for %s on %s", s->name, p->key,
                       ctx->info.name);
    }

    /* The template's defaults go first: known-good points give the early-stop rule a bar. */
    size_t *first = calloc(s->ndefaults + 1, sizeof *first), nfirst = 0;
    for (size_t d = 0; first && d < s->ndefaults; d++) {
        int i = index_of(&r, s->defaults + d * np, np);
        if (i >= 0) first[nfirst++] = (size_t)i;
    }
    /* The search sees value indices, the values themselves, and the cost model's prior. */
    size_t nvalues[AT_MAX_PARAMS];
    double vals[AT_MAX_PARAMS][AT_MAX_VALUES];
    const double *valp[AT_MAX_PARAMS];
    for (size_t j = 0; j < np; j++) {
        nvalues[j] = s->params[j].nvalues;
        for (size_t v = 0; v < nvalues[j]; v++) vals[j][v] = (double)s->params[j].values[v];
        valp[j] = vals[j];
    }
    double *prior = p->prior ? malloc(r.nconfigs * sizeof *prior) : NULL;
    if (prior && p->prior(p, s, &ctx->info, r.configs, r.nconfigs, prior) != AT_OK) {
        free(prior);
        prior = NULL;
        at_errclear();
    }
    at_search_space ss = {r.nconfigs, np, idx, nvalues, valp};
    at_search_options so = {.strategy = opts->strategy,
                            .seed = opts->seed,
                            .max_evals = opts->max_evals,
                            .max_seconds = opts->max_seconds,
                            .no_improve = opts->no_improve,
                            .first = first,
                            .nfirst = nfirst,
                            .prior = prior};
    at_search *search = NULL;
    at_status st = at_search_create(&ss, &so, &search);
    free(first);
    /* Replay: answered from a recorded database, so nothing is compiled or run. */
    at_db *replay = NULL;
    int replay_own = 0;
    if (st == AT_OK && opts->replay_db)
        st = replay_open(ctx, t, p, opts->replay_db, &replay, &replay_own);
    if (st == AT_OK && !replay) st = p->prepare(p, ctx);

    /* Compiling on the cores that also run the kernel (a CPU device) would skew the timing:
     * there the pool compiles a batch, then the batch is timed with the pool idle. */
    int overlap = !ctx->info.is_cpu;
    int nthreads =
        ctx->compile_threads > 0 ? ctx->compile_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nthreads < 1) nthreads = 1;
    size_t lookahead = (size_t)nthreads * 2;
    pool pl;
    int pool_up = 0;
    if (st == AT_OK && !replay) {
        st = pool_start(&pl, ctx, t->source, s->kernel, nthreads, r.nconfigs);
        pool_up = 1;
    }
    job **queue = calloc(r.nconfigs, sizeof *queue); /* submitted, in order */
    size_t qhead = 0, qtail = 0;
    if (st == AT_OK && !queue) st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    int cancelled = 0, lost = 0;
    /* On a GPU, a buffer twice the last-level cache is rewritten before each timed run. */
    at_bbuf flush = {0};
    at_bbuf ws = {0}; /* the largest workspace a candidate needed so far, zeroed */
    if (st == AT_OK && !ctx->info.is_cpu && ctx->info.l2_bytes > 0 && ctx->ops->buffer_fill &&
        ctx->ops->buffer_alloc(ctx->dev, (size_t)ctx->info.l2_bytes * 2, &flush) != AT_OK)
        flush.handle = NULL; /* no room: time without flushing */

    while (st == AT_OK && !lost) {
        if (opts->cancel && *opts->cancel) {
            cancelled = 1;
            break;
        }
        /* Feed the pool (continuously when compiling overlaps timing, else per batch). */
        if (overlap || qhead == qtail) {
            while (qtail - qhead < lookahead) {
                size_t c;
                if (at_search_propose(search, 1, &c) == 0) break;
                const int64_t *cfg = r.configs + c * np;
                char config[512];
                at_config_format(s, cfg, config, sizeof config);
                char *key = result_key(&r, config);
                at_result_rec old;
                if (replay) {
                    if (!key || at_db_get_result(replay, key, &old) != AT_OK) {
                        memset(&old, 0, sizeof old);
                        old.status = AT_RS_LAUNCH_ERROR;
                        snprintf(old.reason, sizeof old.reason, "not recorded in %s",
                                 opts->replay_db);
                    }
                    free(key);
                    account(&r, search, c, &old);
                    continue;
                }
                if (!opts->force && key && at_db_get_result(ctx->db, key, &old) == AT_OK) {
                    free(key); /* measured before: resume without measuring again */
                    account(&r, search, c, &old);
                    continue;
                }
                free(key);
                job *j = calloc(1, sizeof *j);
                if (!j) {
                    st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
                    break;
                }
                j->cfg = c;
                snprintf(j->config, sizeof j->config, "%s", config);
                if (at_config_defines(s, cfg, j->options, sizeof j->options) != AT_OK) {
                    j->done = 1;
                    j->status = AT_ERR_TEMPLATE;
                    snprintf(j->reason, sizeof j->reason, "%s", at_errmsg());
                    queue[qtail++] = j;
                    continue;
                }
                queue[qtail++] = j;
                pool_submit(&pl, j);
            }
        }
        if (qhead == qtail) break; /* the search is done */
        job *j = queue[qhead++];
        pool_wait(&pl, j);
        if (!overlap)
            for (size_t q = qhead; q < qtail; q++) pool_wait(&pl, queue[q]);

        at_result_rec rec = {0};
        rec.when = at_unix_time();
        rec.compile_ms = j->compile_ms;
        const int64_t *cfg = r.configs + j->cfg * np;
        launch_cfg lc = {.dims = s->launch_dims};
        if (j->status != AT_OK) {
            rec.status = AT_RS_COMPILE_ERROR;
            snprintf(rec.reason, sizeof rec.reason, "%s", j->reason);
        } else if (at_space_launch(s, cfg, lc.global, lc.local) != AT_OK ||
                   at_space_memory(s, cfg, &lc.shared_bytes, &lc.ws_bytes) != AT_OK) {
            rec.status = AT_RS_LAUNCH_ERROR;
            snprintf(rec.reason, sizeof rec.reason, "%s", at_errmsg());
        } else if (!candidate_fits(ctx, j->prog, lc.local, rec.reason, sizeof rec.reason)) {
            rec.status = AT_RS_RESOURCE_LIMIT; /* rejected before it reaches the device */
        } else if (lc.ws_bytes && at_workspace_ensure(ctx, &ws, lc.ws_bytes) != AT_OK) {
            launch_failed(ctx, &rec, &lost); /* no room for it, or a fault from before */
        } else {
            lc.ws = lc.ws_bytes ? &ws : NULL;
            measure(ctx, p, j->prog, &lc, r.have_best ? r.best_rec.median_us : 0,
                    flush.handle ? &flush : NULL, &rec, &lost);
        }
        r.measured++;
        int was_best = r.have_best ? (int)r.best_cfg : -1;
        account(&r, search, j->cfg, &rec);
        record(&r, j->config, &rec);
        if (r.have_best && (int)r.best_cfg != was_best && (int)r.best_cfg == (int)j->cfg) {
            /* Keep the best program so its binary can be stored without compiling again. */
            ctx->ops->program_free(r.best_prog);
            r.best_prog = j->prog;
            j->prog = NULL;
            snprintf(r.best_options, sizeof r.best_options, "%s", j->options);
        }
        ctx->ops->program_free(j->prog);
        free(j);
        queue[qhead - 1] = NULL;
        if (opts->progress) {
            double elapsed = at_now() - t0, eta = 0;
            if (opts->max_evals > 0 && r.evaluated < opts->max_evals)
                eta = elapsed / (double)r.evaluated * (double)(opts->max_evals - r.evaluated);
            if (opts->max_seconds > 0 && (eta == 0 || opts->max_seconds - elapsed < eta))
                eta = opts->max_seconds > elapsed ? opts->max_seconds - elapsed : 0;
            opts->progress(opts->progress_user, r.evaluated, opts->max_evals,
                           r.have_best ? r.best_rec.median_us : 0, elapsed, eta);
        }
    }
    if (pool_up) pool_stop(&pl);
    if (flush.handle) ctx->ops->buffer_free(ctx->dev, flush);
    if (ws.handle) ctx->ops->buffer_free(ctx->dev, ws);
    for (size_t q = qhead; queue && q < qtail; q++) {
        if (queue[q]) ctx->ops->program_free(queue[q]->prog);
        free(queue[q]);
    }
    free(queue);
    flush_batch(&r);
    if (st == AT_OK && r.write_error != AT_OK) st = r.write_error;

    if (st == AT_OK && !r.have_best && !lost)
        st = at_fail(
            AT_ERR_NO_VALID_CONFIG, "no candidate of %lld evaluated succeeded (first failure: %s)",
            (long long)r.evaluated, r.first_failure[0] ? r.first_failure : "none evaluated");
    if (st == AT_OK && r.have_best) {
        const int64_t *cfg = r.configs + r.best_cfg * np;
        double flops = at_space_flops(s, cfg);
        at_config_format(s, cfg, best_config, best_len);
        rep->best_time_us = r.best_rec.median_us;
        rep->best_gflops = flops / (r.best_rec.median_us * 1e3);
        rep->best_max_rel_error = r.best_rec.max_rel_error;
        snprintf(rep->best_config, sizeof rep->best_config, "%s", best_config);
        if (r.best_prog) store_binary(ctx, t->source, r.best_options, r.best_prog);
        if (!cancelled && !lost && !replay) {
            at_best_rec b = {0};
            snprintf(b.config, sizeof b.config, "%s", best_config);
            snprintf(b.template_hash, sizeof b.template_hash, "%s", t->hash);
            b.time_us = rep->best_time_us;
            b.gflops = rep->best_gflops;
            b.max_rel_error = rep->best_max_rel_error;
            b.when = at_unix_time();
            snprintf(b.compiler, sizeof b.compiler, "%s", ctx->ops->compiler_version(ctx->dev));
            snprintf(b.driver, sizeof b.driver, "%s", ctx->info.driver);
            char *key = at_db_best_key(p->key, ctx->info.key);
            st = key ? at_db_put_best(ctx->db, key, &b, opts->force)
                     : at_fail(AT_ERR_NO_MEMORY, "out of memory");
            free(key);
        }
    }
    ctx->ops->program_free(r.best_prog);
    if (replay_own) at_db_close(replay);
    if (!replay) p->release(p, ctx);
    at_search_free(search);
    free(prior);
    free(r.configs);
    free(idx);
    rep->evaluated = r.evaluated;
    rep->measured = r.measured;
    rep->failed = r.failed;
    rep->seconds = at_now() - t0;
    if (st == AT_OK && lost)
        st = at_fail(AT_ERR_DEVICE_LOST,
                     "a candidate crashed the device context after %lld candidates; "
                     "measurements are saved and a run on a new context resumes",
                     (long long)r.evaluated);
    if (st == AT_OK && cancelled)
        st = at_fail(AT_ERR_INTERRUPTED,
                     "interrupted after %lld candidates; measurements are saved "
                     "and the next run resumes",
                     (long long)r.evaluated);
    return st;
}

/* ---- compiling a space without running it ------------------------------------------------- */

at_status at_pipeline_compile(at_context *ctx, at_template *t, int64_t limit, uint64_t seed,
                              at_compile_report *rep)
{
    at_space *s = t->space;
    const size_t np = s->nparams;
    int64_t *configs = NULL;
    size_t n = 0;
    memset(rep, 0, sizeof *rep);
    AT_TRY(at_space_enumerate(s, &configs, NULL, &n));
    rep->space = (int64_t)n;
    size_t count = limit > 0 && (size_t)limit < n ? (size_t)limit : n;
    job *jobs = calloc(count ? count : 1, sizeof *jobs);
    int nthreads =
        ctx->compile_threads > 0 ? ctx->compile_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    pool pl;
    at_status st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (jobs) st = pool_start(&pl, ctx, t->source, s->kernel, nthreads > 0 ? nthreads : 1, count);
    double t0 = at_now();
    /* An even spread through the space (first parameter slowest), shifted by the seed. */
    size_t stride = count ? n / count : 1, shift = stride > 1 ? (size_t)(seed % stride) : 0;
    for (size_t i = 0; st == AT_OK && i < count; i++) {
        job *j = &jobs[i];
        j->cfg = i * stride + shift;
        const int64_t *cfg = configs + j->cfg * np;
        at_config_format(s, cfg, j->config, sizeof j->config);
        if (at_config_defines(s, cfg, j->options, sizeof j->options) != AT_OK) {
            j->done = 1;
            j->status = AT_ERR_TEMPLATE;
            snprintf(j->reason, sizeof j->reason, "%s", at_errmsg());
            continue;
        }
        pool_submit(&pl, j);
    }
    for (size_t i = 0; st == AT_OK && i < count; i++) {
        job *j = &jobs[i];
        pool_wait(&pl, j);
        rep->attempted++;
        size_t global[3], local[3];
        char why[512];
        if (j->status != AT_OK) {
            rep->compile_errors++;
            if (!rep->first_error[0])
                snprintf(rep->first_error, sizeof rep->first_error, "%s: %s", j->config, j->reason);
        } else if (at_space_launch(s, configs + j->cfg * np, global, local) == AT_OK &&
                   !candidate_fits(ctx, j->prog, local, why, sizeof why)) {
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
    if (jobs) pool_stop(&pl);
    free(jobs);
    free(configs);
    return st;
}
