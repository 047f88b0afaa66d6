/* tune.c — the tune loop (a search strategy proposes, an evaluator answers, the loop keeps the
 * count, the best, the trajectory, progress and cancellation), the device evaluator (resume
 * from the database, compile in the pool while the device times, record every outcome), and a
 * template's tuning run on either the device or the replay device. */
#include "tuner/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the loop ------------------------------------------------------------------------------- */

void at_loop_clear(at_loop *l)
{
    free(l->traj_evals);
    free(l->traj_config);
    free(l->measured_s);
    memset(l, 0, sizeof *l);
}

double at_loop_expect(const at_loop *l, const at_loop_env *env)
{
    if (l->nmeasured_s == 0) return env ? env->estimate_s : 0;
    double v[64]; /* the median of the last 64 is plenty */
    size_t n = l->nmeasured_s < 64 ? l->nmeasured_s : 64;
    memcpy(v, l->measured_s + (l->nmeasured_s - n), n * sizeof *v);
    qsort(v, n, sizeof *v, at_cmp_double);
    return v[n / 2];
}

/* Takes the outcome of one config: counts it, keeps the best and the trajectory, tells the
 * search. */
static at_status account(at_loop *l, at_search *s, size_t c, const at_result_rec *rec)
{
    l->evaluated++;
    if (rec->status != AT_RS_OK) {
        l->failed++;
        if (!l->first_failure[0])
            snprintf(l->first_failure, sizeof l->first_failure, "%s: %s",
                     at_result_status_name(rec->status), rec->reason);
    } else {
        /* The fastest few, for a proxy's confirmation. */
        size_t i = l->ntop < AT_LOOP_TOP ? l->ntop++ : AT_LOOP_TOP;
        for (; i > 0 && rec->median_us < l->top_us[i - 1]; i--)
            if (i < AT_LOOP_TOP) l->top[i] = l->top[i - 1], l->top_us[i] = l->top_us[i - 1];
        if (i < AT_LOOP_TOP) l->top[i] = c, l->top_us[i] = rec->median_us;
    }
    if (rec->status == AT_RS_OK && (!l->have_best || rec->median_us < l->best_rec.median_us)) {
        l->have_best = 1;
        l->best = c;
        l->best_rec = *rec;
        size_t n = l->ntrajectory + 1;
        int64_t *e = realloc(l->traj_evals, n * sizeof *e);
        if (e) l->traj_evals = e;
        size_t *k = realloc(l->traj_config, n * sizeof *k);
        if (k) l->traj_config = k;
        if (!e || !k) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
        l->traj_evals[l->ntrajectory] = l->evaluated;
        l->traj_config[l->ntrajectory++] = c;
    }
    at_search_report(s, c, rec->status == AT_RS_OK ? rec->median_us : INFINITY);
    return AT_OK;
}

at_search_options at_search_options_of(const at_tune_options *opts)
{
    at_search_options so = {.strategy = opts->strategy,
                            .seed = opts->seed,
                            .max_evals = opts->max_evals,
                            .max_seconds = opts->max_seconds,
                            .no_improve = opts->no_improve};
    return so;
}

/* Tells the progress hooks of the outcome of config c. */
static void report_progress(const at_tune_options *opts, const at_loop_env *env, const at_loop *l,
                            double t0, size_t c, const at_result_rec *rec)
{
    double elapsed = at_now() - t0, eta = 0;
    double best_us = l->have_best ? l->best_rec.median_us : 0;
    if (opts->progress) {
        if (opts->max_evals > 0 && l->evaluated < opts->max_evals)
            eta = elapsed / (double)l->evaluated * (double)(opts->max_evals - l->evaluated);
        if (opts->max_seconds > 0 && (eta == 0 || opts->max_seconds - elapsed < eta))
            eta = opts->max_seconds > elapsed ? opts->max_seconds - elapsed : 0;
        opts->progress(opts->progress_user, l->evaluated, opts->max_evals, best_us, elapsed, eta);
    }
    if (!opts->on_candidate) return;
    char config[512] = "";
    if (env && env->space && env->configs)
        at_config_format(env->space, env->configs + c * env->space->nparams, config, sizeof config);
    double flops = env ? env->flops : 0;
    at_tune_progress p = {.done = l->evaluated,
                          .budget = opts->max_evals,
                          .best_us = best_us,
                          .best_gflops = best_us > 0 && flops > 0 ? flops / (best_us * 1e3) : 0,
                          .elapsed_s = elapsed,
                          .budget_s = opts->max_seconds,
                          .estimate_s = at_loop_expect(l, env),
                          .problem = env && env->problem ? env->problem : "",
                          .config = config,
                          .status = at_result_status_name(rec->status),
                          .time_us = rec->status == AT_RS_OK ? rec->median_us : 0,
                          .proxy = ""};
    opts->on_candidate(opts->progress_user, &p);
}

at_status at_tune_loop(at_search *s, at_evaluator *e, const at_tune_options *opts,
                       const at_loop_env *env, at_loop *l)
{
    memset(l, 0, sizeof *l);
    double t0 = env && env->t0 > 0 ? env->t0 : at_now();
    double budget = env ? env->budget_s : 0;
    size_t queued = 0;
    at_status st = AT_OK;
    while (st == AT_OK) {
        if (opts->cancel && *opts->cancel) {
            l->cancelled = 1;
            break;
        }
        /* Within the budget, a candidate is started only when the time left covers what one
         * is expected to take, once there is a best: a run ends with something measured. */
        double expect = at_loop_expect(l, env);
        if (budget > 0 && l->have_best && at_now() - t0 + expect > budget) {
            l->budget_stopped = 1;
            break;
        }
        /* Keep the evaluator fed (continuously, or one batch at a time on a CPU device). */
        if (!e->batch || queued == 0) {
            size_t c;
            while (st == AT_OK && queued < e->lookahead && at_search_propose(s, 1, &c)) {
                at_result_rec rec = {0};
                int now = e->submit(e, c, &rec);
                if (now < 0)
                    st = (at_status)now;
                else if (now)
                    st = account(l, s, c, &rec);
                else
                    queued++;
            }
        }
        if (st != AT_OK || queued == 0) break; /* the search is done */
        size_t c;
        at_result_rec rec = {0};
        e->deadline = budget > 0 && l->have_best ? t0 + budget : 0;
        e->expect_s = expect;
        e->not_started = 0;
        e->measure_s = 0;
        at_status ns = e->next(e, l->have_best ? l->best_rec.median_us : 0, &c, &rec);
        queued--;
        if (ns == AT_ERR_INTERRUPTED) {
            l->cancelled = 1;
            break;
        }
        if ((st = ns) != AT_OK) break; /* the run's own failure: a write, the device */
        if (e->not_started) {
            l->budget_stopped = 1;
            break;
        }
        if (e->measure_s > 0) {
            double *m = realloc(l->measured_s, (l->nmeasured_s + 1) * sizeof *m);
            if (!m) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
            l->measured_s = m;
            l->measured_s[l->nmeasured_s++] = e->measure_s;
        }
        st = account(l, s, c, &rec);
        report_progress(opts, env, l, t0, c, &rec);
    }
    return st;
}

/* ---- the device evaluator ------------------------------------------------------------------- */

/* Tells the context's store hook (the fleet) of a record just stored in table: a result (r),
 * a best entry (b) or a device (dv), the others NULL. */
static void stored(at_context *ctx, const char *table, const char *key, const at_result_rec *r,
                   const at_best_rec *b, const at_device_rec *dv)
{
    if (!ctx->on_store) return;
    at_sbuf text = {0};
    if (r) at_result_rec_append(&text, r);
    if (b) at_best_rec_append(&text, b);
    if (dv) at_device_rec_append(&text, dv);
    if (!text.oom) ctx->on_store(ctx->on_store_user, table, key, at_sb_str(&text));
    at_sb_free(&text);
}

typedef struct device_eval {
    at_evaluator ev;
    at_context *ctx;
    at_template *t;
    const char *problem_key;
    const int64_t *configs; /* the enumerated space */
    int force;
    const volatile int *cancel;
    at_pool *pool;
    at_runner runner;
    at_job **queue; /* submitted, oldest first: a ring of ev.lookahead */
    size_t head, count;
    int64_t measured;
    at_bprog *best_prog; /* the best candidate's program: its binary is stored at the end */
    char best_options[4096];
} device_eval;

static char *result_key(device_eval *d, size_t c)
{
    char config[512];
    at_config_format(d->t->space, d->configs + c * d->t->space->nparams, config, sizeof config);
    return at_db_result_key(d->problem_key, d->ctx->info.key, d->t->hash, config);
}

static int device_submit(at_evaluator *e, size_t c, at_result_rec *rec)
{
    device_eval *d = (device_eval *)e;
    char *key = result_key(d, c);
    /* Measured before: resume without measuring again. */
    int known = !d->force && key && at_db_get_result(d->ctx->db, key, rec) == AT_OK;
    free(key);
    if (known) return 1;
    at_job *j = malloc(sizeof *j);
    if (!j) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    at_pool_submit(d->pool, d->t->space, c, d->configs + c * d->t->space->nparams, j);
    d->queue[(d->head + d->count++) % d->ev.lookahead] = j;
    return 0;
}

static at_status device_next(at_evaluator *e, double best_us, size_t *c, at_result_rec *rec)
{
    device_eval *d = (device_eval *)e;
    at_job *j = d->queue[d->head];
    /* Compiling on the cores that also run the kernel (a CPU device) would skew the timing:
     * the whole batch is compiled before any of it is timed. */
    for (size_t q = 0; q < (d->ev.batch ? d->count : 1); q++)
        if (at_pool_wait(d->pool, d->queue[(d->head + q) % d->ev.lookahead], d->cancel))
            return at_fail(AT_ERR_INTERRUPTED, "interrupted");
    if (d->ev.deadline > 0 && j->status == AT_OK && at_now() + d->ev.expect_s > d->ev.deadline) {
        d->ev.not_started = 1; /* it stays queued: device_close frees it */
        return AT_OK;
    }
    d->head = (d->head + 1) % d->ev.lookahead;
    d->count--;
    *c = j->cfg;
    const int64_t when = at_unix_time();
    at_status st = AT_OK;
    if (j->status != AT_OK) {
        rec->status = AT_RS_COMPILE_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "%s", j->reason);
    } else {
        double t0 = at_now();
        st = at_runner_measure(&d->runner, d->t, d->configs + j->cfg * d->t->space->nparams,
                               j->prog, best_us, rec);
        d->ev.measure_s = at_now() - t0;
    }
    rec->when = when; /* after the measurement, which sets the whole record */
    rec->compile_ms = j->compile_ms;
    snprintf(rec->template_name, sizeof rec->template_name, "%s", d->t->name);
    char *key = st == AT_OK
                    ? at_db_result_key(d->problem_key, d->ctx->info.key, d->t->hash, j->config)
                    : NULL;
    if (st == AT_OK) {
        d->measured++;
        /* Stored at once, so a killed run loses at most the candidate in flight; a write that
         * fails stops the run with its cause. */
        st = key ? at_db_put_results(d->ctx->db, 1, &key, rec) : AT_ERR_INVALID_ARG;
        if (st == AT_OK) stored(d->ctx, "results", key, rec, NULL, NULL);
        at_log(d->ctx, 2, "candidate %s: %s, %.3f us%s%s", j->config,
               at_result_status_name(rec->status), rec->median_us, rec->reason[0] ? ": " : "",
               rec->reason);
    }
    free(key);
    if (st == AT_OK && rec->status == AT_RS_OK && (best_us <= 0 || rec->median_us < best_us)) {
        /* Keep the best program so its binary can be stored without compiling again. */
        d->ctx->ops->program_free(d->best_prog);
        d->best_prog = j->prog;
        j->prog = NULL;
        snprintf(d->best_options, sizeof d->best_options, "%s", j->options);
    }
    d->ctx->ops->program_free(j->prog);
    free(j);
    return st;
}

static void device_close(device_eval *d)
{
    at_pool_stop(d->pool);
    for (size_t q = 0; d->queue && q < d->count; q++) {
        at_job *j = d->queue[(d->head + q) % d->ev.lookahead];
        d->ctx->ops->program_free(j->prog);
        free(j);
    }
    free(d->queue);
    d->ctx->ops->program_free(d->best_prog);
    at_runner_close(&d->runner);
}

/* ---- a template's tuning run ---------------------------------------------------------------- */

/* A device's nominal rate in GFLOP/s for the up-front estimate: PoCL on a few CPU cores, or a
 * mid-range GPU's f32 rate (the estimate only has to tell seconds from minutes). */
static double nominal_gflops(const at_device_info *info) { return info->is_cpu ? 50.0 : 10000.0; }

/* The up-front estimate of one candidate's seconds: its checked run and its timed repetitions
 * (at least 3 and 0.1 s of them; one for a run of a second or more: tuner/worker.c) at the
 * device's nominal rate. */
static double estimate_candidate(const at_problem *p, const at_device_info *info, double *run_s)
{
    *run_s = p->op->flops(p->data) / (nominal_gflops(info) * 1e9);
    return *run_s + (*run_s >= 1.0 ? *run_s : fmax(3.0 * *run_s, 0.1));
}

static int index_of(const int64_t *configs, size_t n, const int64_t *cfg, size_t np)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(configs + i * np, cfg, np * sizeof *cfg) == 0) return (int)i;
    return -1;
}

/* The warm start of a tuning run: the related tasks' results mapped onto this space. */
typedef struct warm_start {
    at_related rel[AT_TRANSFER_MAX];
    size_t nrel;
    at_search_source src[AT_TRANSFER_MAX];
    size_t *cfg[AT_TRANSFER_MAX];
    double *tm[AT_TRANSFER_MAX];
    size_t nsrc;
    at_transfer_source info[AT_TRANSFER_MAX]; /* of each used source */
} warm_start;

static void warm_free(warm_start *w)
{
    at_related_free(w->rel, w->nrel);
    for (size_t i = 0; i < w->nsrc; i++) free(w->cfg[i]), free(w->tm[i]);
    w->nrel = w->nsrc = 0;
}

/* Gathers the related tasks of p (at_related_results) and maps each onto the space ss of t (a
 * source of other parameters, or with no config in the space, is dropped). */
static at_status warm_gather(at_context *ctx, const at_template *t, const at_problem *p,
                             const at_search_space *ss, warm_start *w)
{
    memset(w, 0, sizeof *w);
    w->nrel = at_related_results(ctx, t, p, w->rel, AT_TRANSFER_MAX);
    if (!w->nrel) return AT_OK;
    const at_space *s = t->space;
    const size_t np = s->nparams;
    const char *names[AT_MAX_PARAMS];
    const char *const *values[AT_MAX_PARAMS];
    char *text = malloc(np * AT_MAX_VALUES * 24 + 1);
    const char **vp = malloc((np * AT_MAX_VALUES + 1) * sizeof *vp);
    if (!text || !vp) {
        free(text), free(vp);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    for (size_t j = 0; j < np; j++) {
        names[j] = s->params[j].name;
        for (size_t v = 0; v < s->params[j].nvalues; v++) {
            char *b = text + (j * AT_MAX_VALUES + v) * 24;
            snprintf(b, 24, "%lld", (long long)s->params[j].values[v]);
            vp[j * AT_MAX_VALUES + v] = b;
        }
        values[j] = vp + j * AT_MAX_VALUES;
    }
    at_transfer_params tp = {np, names, ss->nvalues, values};
    at_status st = AT_OK;
    for (size_t i = 0; i < w->nrel && st == AT_OK; i++) {
        const at_recording *r = w->rel[i].rec;
        at_transfer_params sp = at_recording_transfer_params(r);
        size_t n = 0, k = w->nsrc;
        char why[256];
        st = at_transfer_map(&tp, ss, &sp, r->idx, r->cost, r->nconfigs, &w->cfg[k], &w->tm[k], &n,
                             why, sizeof why);
        if (st == AT_ERR_INVALID_ARG) { /* another version's parameters: not a source */
            st = AT_OK;
            continue;
        }
        if (st != AT_OK) break;
        w->src[k] = (at_search_source){n, w->cfg[k], w->tm[k]};
        at_transfer_source *in = &w->info[k];
        snprintf(in->name, sizeof in->name, "%s on %s", w->rel[i].problem, w->rel[i].device);
        in->used = 1;
        in->configs = (int64_t)n;
        w->nsrc++;
    }
    free(text);
    free(vp);
    return st;
}

/* The fastest configs of a run, as text. */
typedef struct top_configs {
    char config[AT_LOOP_TOP][512];
    size_t n;
} top_configs;

/* Tunes p with t: the search over t's space, or when nonly > 0, exactly the configs only
 * (nonly of them, t's parameters each: a proxy's best, confirmed), those valid here. The
 * fastest few go to top when it is not NULL. */
static at_status tune_one(at_context *ctx, at_template *t, const at_problem *p,
                          const at_tune_options *opts, const int64_t *only, size_t nonly,
                          top_configs *top, at_tune_report *rep, char *best_config, size_t best_len)
{
    at_space *s = t->space;
    const size_t np = s->nparams;
    char pkey[256];
    p->op->key(p->data, pkey, sizeof pkey);
    int64_t *configs = NULL;
    uint16_t *idx = NULL;
    size_t n = 0;
    AT_TRY(at_space_enumerate(s, &configs, &idx, &n));
    rep->space = (int64_t)n;
    const double t_start = at_now();
    double run_s = 0;
    rep->estimate_s = opts->replay_db ? 0 : estimate_candidate(p, &ctx->info, &run_s);
    rep->budget_s = opts->max_seconds;
    if (n == 0) {
        free(configs);
        free(idx);
        return at_fail(AT_ERR_NO_VALID_CONFIG,
                       "the %s space has no valid configuration for %s on %s", s->name, pkey,
                       ctx->info.name);
    }

    /* Seeds first (configs the databases on the path hold for this problem from a stale
     * template version or another device of this family: likely good here), then the template's
     * defaults: known-good points give the early-stop rule a bar. */
    enum { MAX_SEEDS = 16 };
    int64_t seeds[MAX_SEEDS * AT_MAX_PARAMS];
    size_t nseeds = opts->replay_db || nonly ? 0 : at_seed_configs(ctx, t, p, seeds, MAX_SEEDS);
    const size_t nsrc = nonly ? nonly : nseeds + s->ndefaults;
    size_t *first = calloc(nsrc + 1, sizeof *first), nfirst = 0, nseed_first = 0;
    for (size_t d = 0; first && d < nsrc; d++) {
        const int64_t *cfg = nonly        ? only + d * np
                             : d < nseeds ? seeds + d * np
                                          : s->defaults + (d - nseeds) * np;
        int i = index_of(configs, n, cfg, np), dup = 0;
        for (size_t j = 0; j < nfirst && !dup; j++) dup = first[j] == (size_t)i;
        if (i >= 0 && !dup) first[nfirst++] = (size_t)i;
        if (d + 1 == nseeds) rep->seeds = (int64_t)(nseed_first = nfirst);
    }
    /* The search sees value indices, the values themselves, and the operation's prior. */
    size_t nvalues[AT_MAX_PARAMS];
    double vals[AT_MAX_PARAMS][AT_MAX_VALUES];
    const double *valp[AT_MAX_PARAMS];
    for (size_t j = 0; j < np; j++) {
        nvalues[j] = s->params[j].nvalues;
        for (size_t v = 0; v < nvalues[j]; v++) vals[j][v] = (double)s->params[j].values[v];
        valp[j] = vals[j];
    }
    double *prior = p->op->prior ? malloc(n * sizeof *prior) : NULL;
    if (prior && p->op->prior(p->data, s, &ctx->info, configs, n, prior) != AT_OK) {
        free(prior);
        prior = NULL;
        at_errclear();
    }

    /* The evaluator: the replay device answering from a database's records, or the device. */
    at_recording *recording = NULL;
    size_t *map = NULL;
    at_replay_eval replay;
    device_eval dev = {.ctx = ctx,
                       .t = t,
                       .problem_key = pkey,
                       .configs = configs,
                       .force = opts->force,
                       .cancel = opts->cancel};
    at_evaluator *ev = &dev.ev;
    at_status st = AT_OK;
    if (opts->replay_db) {
        st = at_replay_open_db(ctx, t, pkey, opts->replay_db, configs, n, &recording, &map);
        if (st == AT_OK) at_replay_eval_init(&replay, recording, map, opts->replay_db);
        ev = &replay.ev;
    } else if (at_db_readonly_reason(ctx->db)) {
        st = at_fail(AT_ERR_DB, "the database %s cannot store what a tuning run measures (%s)",
                     at_db_path(ctx->db), at_db_readonly_reason(ctx->db));
    } else {
        /* The device's identity, once per run, for bundles and the fallback chain. */
        at_device_rec drec;
        at_device_rec_from_info(&ctx->info, ctx->ops->compiler_version(ctx->dev), &drec);
        drec.when = at_unix_time();
        char *dkey = at_db_device_key(ctx->info.key);
        st = dkey ? at_db_put_device(ctx->db, dkey, &drec) : AT_ERR_INVALID_ARG;
        if (st == AT_OK) stored(ctx, "devices", dkey, NULL, NULL, &drec);
        free(dkey);
        int nthreads = at_compile_threads(ctx);
        /* Proposals made ahead are made blind: capped (8, on a GPU a quarter of an evaluation
         * budget) so that a model search learns from most of the budget. */
        size_t ahead = (size_t)nthreads * 2 < 8 ? (size_t)nthreads * 2 : 8;
        if (!ctx->info.is_cpu && opts->max_evals > 0 && ahead > (size_t)opts->max_evals / 4 + 1)
            ahead = (size_t)opts->max_evals / 4 + 1;
        dev.ev = (at_evaluator){.submit = device_submit,
                                .next = device_next,
                                .lookahead = ahead,
                                .batch = ctx->info.is_cpu};
        dev.queue = calloc(dev.ev.lookahead, sizeof *dev.queue);
        if (st == AT_OK && !dev.queue) st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
        if (st == AT_OK) st = at_runner_open(&dev.runner, ctx, p, opts->cancel);
        /* The per-run limits: absolute (at least three times the estimated run), and relative
         * to the best so far. */
        dev.runner.run_limit_ms = opts->run_limit_s > 0 ? opts->run_limit_s * 1e3
                                                        : fmax(AT_RUN_LIMIT_MS, 3.0 * run_s * 1e3);
        dev.runner.slowdown = opts->slowdown_limit == 0 ? AT_SLOWDOWN : opts->slowdown_limit;
        if (st == AT_OK) st = at_pool_start(ctx, t->source, s->kernel, nthreads, &dev.pool);
    }
    at_search_space ss = {n, np, idx, nvalues, valp};
    at_search_options so = at_search_options_of(opts);
    /* The warm start: the results of related tasks (docs/search.md, "Transfer"). Their best
     * configs take the defaults' place after the seeds: they give the early-stop rule its bar
     * as well and are likelier to be good here. */
    warm_start warm = {0};
    if (st == AT_OK && !opts->no_transfer && !opts->replay_db && !nonly)
        st = warm_gather(ctx, t, p, &ss, &warm);
    so.sources = warm.src;
    so.nsources = warm.nsrc;
    if (warm.nsrc) nfirst = nseed_first;
    so.first = first;
    so.nfirst = nfirst;
    if (nonly) so.max_evals = (int64_t)nfirst; /* those and no other */
    if (st == AT_OK && nonly && nfirst == 0)
        st = at_fail(AT_ERR_NO_VALID_CONFIG,
                     "none of the %zu configs to confirm is valid for %s on %s", nonly, pkey,
                     ctx->info.name);
    so.prior = prior;
    if (opts->replay_db) { /* a seconds budget counts the recorded seconds */
        so.clock = at_replay_clock;
        so.clock_user = &replay;
    }
    at_search *search = NULL;
    if (st == AT_OK) st = at_search_create(&ss, &so, &search);
    free(first);
    at_loop loop = {0};
    at_loop_env env = {.t0 = t_start,
                       .budget_s = opts->replay_db ? 0 : opts->max_seconds,
                       .estimate_s = rep->estimate_s,
                       .flops = p->op->flops(p->data),
                       .problem = pkey,
                       .space = s,
                       .configs = configs};
    if (st == AT_OK) st = at_tune_loop(search, ev, opts, &env, &loop);
    for (size_t i = 0; search && i < warm.nsrc; i++) {
        size_t pairs = 0;
        at_search_source_weight(search, i, &warm.info[i].weight, NULL, &pairs);
        warm.info[i].pairs = (int64_t)pairs;
        if (opts->transfer_out) opts->transfer_out[i] = warm.info[i];
    }
    rep->transfer_sources = (int32_t)warm.nsrc;
    rep->first_picks_from_sources = search ? (int32_t)at_search_first_from_sources(search) : 0;
    rep->probe_picks = search ? at_search_probe_picks(search) : 0;
    warm_free(&warm);
    /* A failed write stopped the run: nothing more is written, its message stays the one. */
    if (st == AT_OK && dev.best_prog && loop.have_best)
        at_binary_store(ctx, t->source, dev.best_options, dev.best_prog);
    rep->slow_stopped = dev.runner.slow_stopped;
    if (!opts->replay_db) device_close(&dev);

    if (st == AT_OK && !loop.have_best && !loop.cancelled)
        st = at_fail(AT_ERR_NO_VALID_CONFIG,
                     "no candidate of %lld evaluated succeeded (first failure: %s)",
                     (long long)loop.evaluated,
                     loop.first_failure[0] ? loop.first_failure : "none evaluated");
    if (st == AT_OK && loop.have_best) {
        at_config_format(s, configs + loop.best * np, best_config, best_len);
        rep->best_time_us = loop.best_rec.median_us;
        rep->best_gflops = p->op->flops(p->data) / (loop.best_rec.median_us * 1e3);
        rep->best_gbytes_per_s = p->op->bytes(p->data) / (loop.best_rec.median_us * 1e3);
        rep->best_max_rel_error = loop.best_rec.max_rel_error;
        snprintf(rep->best_config, sizeof rep->best_config, "%s", best_config);
        if (!loop.cancelled && !opts->replay_db) {
            at_best_rec b = {0};
            snprintf(b.config, sizeof b.config, "%s", best_config);
            snprintf(b.template_hash, sizeof b.template_hash, "%s", t->hash);
            snprintf(b.template_name, sizeof b.template_name, "%s", t->name);
            b.space = rep->space;
            b.time_us = rep->best_time_us;
            b.gflops = rep->best_gflops;
            b.max_rel_error = rep->best_max_rel_error;
            b.when = at_unix_time();
            snprintf(b.compiler, sizeof b.compiler, "%s", ctx->ops->compiler_version(ctx->dev));
            snprintf(b.driver, sizeof b.driver, "%s", ctx->info.driver);
            char *key = at_db_best_key(pkey, ctx->info.key);
            /* A key that cannot be made (at_errmsg says why) is a bad problem or device name. */
            st = key ? at_db_put_best(ctx->db, key, &b, opts->force) : AT_ERR_INVALID_ARG;
            if (st == AT_OK) stored(ctx, "best", key, NULL, &b, NULL);
            free(key);
        }
    }
    for (size_t i = 0; top && i < loop.ntop; i++)
        at_config_format(s, configs + loop.top[i] * np, top->config[i], sizeof top->config[i]);
    if (top) top->n = loop.ntop;
    at_search_free(search);
    at_recording_free(recording);
    free(map);
    free(prior);
    free(configs);
    free(idx);
    rep->evaluated = loop.evaluated;
    if (rep->seeds > loop.evaluated) rep->seeds = loop.evaluated; /* proposed first: tried */
    rep->measured = dev.measured;
    rep->failed = loop.failed;
    rep->budget_stopped = loop.budget_stopped;
    if (st == AT_ERR_INTERRUPTED && !loop.cancelled) /* while the device half was set up */
        st = at_fail(AT_ERR_INTERRUPTED, "interrupted before any candidate was measured");
    if (st == AT_OK && loop.cancelled)
        st = at_fail(AT_ERR_INTERRUPTED,
                     "interrupted after %lld candidates; measurements are saved "
                     "and the next run resumes",
                     (long long)loop.evaluated);
    at_loop_clear(&loop);
    return st;
}

/* Tells the progress hook before the first candidate: the problem, the budget, the estimate of
 * one candidate, and the proxy candidates are timed on ("" when none). */
static void announce(const at_tune_options *opts, const char *problem, double estimate_s,
                     const char *proxy)
{
    if (!opts->on_candidate) return;
    at_tune_progress p = {.budget = opts->max_evals,
                          .budget_s = opts->max_seconds,
                          .estimate_s = estimate_s,
                          .problem = problem,
                          .config = "",
                          .status = "",
                          .proxy = proxy};
    opts->on_candidate(opts->progress_user, &p);
}

/* A proxy is used when the budget covers fewer candidates of the problem than this ... */
#define PROXY_BELOW 8.0
/* ... and then gets the budget less what confirming its best takes (at most half), with one
 * proxy candidate sized to a sixteenth of its share. */
#define PROXY_COVERS 16.0

at_status at_pipeline_tune(at_context *ctx, at_template *t, const at_problem *p,
                           const at_tune_options *opts, at_tune_report *rep, char *best_config,
                           size_t best_len)
{
    char key[256], pkey[256] = "";
    p->op->key(p->data, key, sizeof key);
    double run_s = 0, est = opts->replay_db ? 0 : estimate_candidate(p, &ctx->info, &run_s);
    const double budget = opts->max_seconds, t0 = at_now();
    double reserve = fmin(AT_LOOP_TOP * est, budget / 2);
    int proxied = !opts->replay_db && !opts->no_proxy && p->op->proxy && budget > 0 &&
                  est * PROXY_BELOW > budget &&
                  p->op->proxy(p->data, t->space, (budget - reserve) / PROXY_COVERS / est, pkey,
                               sizeof pkey) == AT_OK;
    at_errclear(); /* no proxy is no failure */
    announce(opts, key, est, proxied ? pkey : "");
    if (!proxied) return tune_one(ctx, t, p, opts, NULL, 0, NULL, rep, best_config, best_len);

    /* The proxy: its own problem (its results and best are real ones, under its own key), its
     * own template bound to it, the budget less the confirmation's reserve. */
    at_problem *pp = NULL, *rp = NULL;
    at_template *tp = NULL;
    at_tune_report prep = {0};
    top_configs top = {0};
    char pbest[512];
    at_tune_options po = *opts;
    po.max_seconds = budget - reserve;
    at_status st = at_problem_from_key(pkey, &pp);
    if (st == AT_OK && !(rp = at_problem_resolve(pp)))
        st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (st == AT_OK) st = at_template_for(rp, &ctx->info, t->name, &tp);
    if (st == AT_OK) st = tune_one(ctx, tp, rp, &po, NULL, 0, &top, &prep, pbest, sizeof pbest);
    snprintf(rep->proxy_problem, sizeof rep->proxy_problem, "%s", pkey);
    rep->proxy_evaluated = prep.evaluated;

    /* Its best few, confirmed (checked and timed) on the problem itself in what is left. */
    int64_t only[AT_LOOP_TOP * AT_MAX_PARAMS];
    size_t nonly = 0;
    for (size_t i = 0; st == AT_OK && i < top.n; i++)
        if (at_config_parse(t->space, top.config[i], only + nonly * t->space->nparams) == AT_OK)
            nonly++;
    at_errclear();
    if (st == AT_OK && nonly == 0)
        st = at_fail(AT_ERR_NO_VALID_CONFIG, "no candidate of the proxy %s succeeded", pkey);
    if (st == AT_OK) {
        at_tune_options co = *opts;
        co.max_seconds = fmax(budget - (at_now() - t0), 1e-3); /* the first is measured */
        co.max_evals = 0;
        /* A run of the full problem may be slower per flop than the proxy's (its operands no
         * longer fit the caches): the absolute limit allows ten times the proxy's best scaled
         * to the full work. */
        double scaled_s = prep.best_time_us / 1e6 * p->op->flops(p->data) / rp->op->flops(rp->data);
        if (co.run_limit_s <= 0)
            co.run_limit_s = fmax(fmax(AT_RUN_LIMIT_MS / 1e3, 3 * run_s), 10 * scaled_s);
        st = tune_one(ctx, t, p, &co, only, nonly, NULL, rep, best_config, best_len);
        rep->proxy_confirmed = rep->evaluated;
        rep->transfer_sources = prep.transfer_sources; /* the search was the proxy's */
        rep->first_picks_from_sources = prep.first_picks_from_sources;
        rep->probe_picks = prep.probe_picks;
    } else {
        rep->measured = prep.measured; /* what an interrupt leaves: the proxy's work */
    }
    rep->budget_s = budget;
    rep->estimate_s = est;
    at_template_free(tp);
    at_problem_destroy(rp);
    at_problem_destroy(pp);
    return st;
}
