/* replay.c — the replay device: an evaluator that answers every proposed configuration from a
 * recorded space (our results database, or a Kernel Tuner cache file) instead of compiling and
 * running it, so the same tune loop replays a run offline (Kernel Tuner's simulation mode):
 * `autotune replay FILE` on the recording's own space, `autotune gemm --replay DB` on a
 * template's space. */
#include "tuner/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NOT_RECORDED ((size_t)-1)

/* ---- the evaluator ------------------------------------------------------------------------- */

static int replay_submit(at_evaluator *e, size_t c, at_result_rec *rec)
{
    at_replay_eval *x = (at_replay_eval *)e;
    const at_recording *r = x->r;
    size_t k = x->configs ? x->configs[c] : c;
    memset(rec, 0, sizeof *rec);
    if (k == NOT_RECORDED) {
        rec->status = AT_RS_LAUNCH_ERROR;
        snprintf(rec->reason, sizeof rec->reason, "not recorded in %s", x->source);
        return 1;
    }
    x->seconds += r->eval_s[k];
    if (r->recs) *rec = r->recs[k];
    if (!isfinite(r->cost[k])) { /* failed when recorded, or no usable time */
        if (rec->status == AT_RS_OK) rec->status = AT_RS_LAUNCH_ERROR;
        if (!rec->reason[0])
            snprintf(rec->reason, sizeof rec->reason, "%s",
                     r->status[k] ? r->status[k] : "no time recorded");
        return 1;
    }
    rec->status = AT_RS_OK;
    rec->median_us = r->cost[k]; /* what the search compares: lower is better */
    return 1;
}

static at_status replay_next(at_evaluator *e, double best_us, size_t *c, at_result_rec *rec)
{
    (void)e, (void)best_us, (void)c, (void)rec;
    return at_fail(AT_ERR_INTERNAL, "the replay device answers at once");
}

void at_replay_eval_init(at_replay_eval *e, const at_recording *r, const size_t *configs,
                         const char *source)
{
    /* One at a time: each proposal sees every result before it, as on a serial device. */
    *e =
        (at_replay_eval){{.submit = replay_submit, .next = replay_next, .lookahead = 1, .batch = 1},
                         r,
                         configs,
                         source,
                         0};
}

double at_replay_clock(void *replay_eval) { return ((at_replay_eval *)replay_eval)->seconds; }

/* ---- replaying a template's space from our database ---------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The recording's entry of each of n configs of t's space (NOT_RECORDED where none). */
static at_status map_configs(const at_template *t, const int64_t *configs, size_t n,
                             const at_recording *r, size_t **out)
{
    size_t *map = malloc((n ? n : 1) * sizeof *map);
    char **names = calloc(r->nconfigs ? r->nconfigs : 1, sizeof *names);
    at_status st = map && names ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    /* Each recorded config text, followed by its index, sorted for lookups. */
    for (size_t i = 0; st == AT_OK && i < r->nconfigs; i++) {
        char buf[512];
        at_recording_config(r, i, buf, sizeof buf);
        if (!(names[i] = at_asprintf("%s%c%zu", buf, '\0', i)))
            st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    if (st == AT_OK) qsort(names, r->nconfigs, sizeof *names, cmp_str);
    for (size_t i = 0; st == AT_OK && i < n; i++) {
        char buf[512], *key = buf, **hit;
        at_config_format(t->space, configs + i * t->space->nparams, buf, sizeof buf);
        hit = bsearch(&key, names, r->nconfigs, sizeof *names, cmp_str);
        map[i] = hit ? (size_t)strtoull(*hit + strlen(*hit) + 1, NULL, 10) : NOT_RECORDED;
    }
    for (size_t i = 0; names && i < r->nconfigs; i++) free(names[i]);
    free(names);
    if (st != AT_OK) {
        free(map);
        return st;
    }
    *out = map;
    return AT_OK;
}

at_status at_replay_open_db(at_context *ctx, const at_template *t, const char *problem_key,
                            const char *path, const int64_t *configs, size_t n, at_recording **rec,
                            size_t **map)
{
    *rec = NULL;
    *map = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return at_fail(AT_ERR_INVALID_ARG, "--replay %s: no such database directory", path);
    /* The context's own database, when it is the same, shares its environment (cache/db.c). */
    at_db *db = NULL;
    if (at_db_open(path, AT_DB_READONLY, &db) != AT_OK) { /* the recording given is bad input */
        char why[1024];
        snprintf(why, sizeof why, "%s", at_errmsg());
        return at_fail(AT_ERR_INVALID_ARG, "--replay %s: %s", path, why);
    }
    char *space = at_db_results_prefix(problem_key, ctx->info.key, t->hash);
    char *any = at_db_results_prefix(problem_key, ctx->info.key, NULL);
    char **keys = NULL;
    size_t nkeys = 0;
    at_status st = space && any ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (st == AT_OK) st = at_recording_from_db(db, space, rec);
    if (st == AT_ERR_INVALID_ARG) {
        /* Nothing for this template version: say whether another version has results. */
        at_result_key k;
        st = at_db_keys(db, "results", any, &keys, &nkeys);
        if (st == AT_OK && nkeys && at_result_key_split(keys[0], &k) == AT_OK)
            st = at_fail(AT_ERR_INVALID_ARG,
                         "the replay database %s has results for %s on %s only from another "
                         "template version (%.*s, this one is %s)",
                         path, problem_key, ctx->info.key, (int)k.thash.n, k.thash.s, t->hash);
        else if (st == AT_OK)
            st = at_fail(AT_ERR_INVALID_ARG,
                         "the replay database %s has no results for %s on device %s", path,
                         problem_key, ctx->info.key);
    }
    if (st == AT_OK) st = map_configs(t, configs, n, *rec, map);
    if (st != AT_OK) {
        at_recording_free(*rec);
        *rec = NULL;
    }
    at_db_keys_free(keys, nkeys);
    free(space);
    free(any);
    at_db_close(db);
    return st;
}

/* ---- replaying a recorded space: `autotune replay FILE` ------------------------------------- */

void at_replay_report_clear(at_replay_report *rep)
{
    if (!rep) return;
    free(rep->trajectory_evals);
    free(rep->trajectory_best);
    free(rep->transfer);
    rep->trajectory_evals = NULL;
    rep->trajectory_best = NULL;
    rep->transfer = NULL;
    rep->ntrajectory = 0;
    rep->ntransfer = 0;
}

at_transfer_params at_recording_transfer_params(const at_recording *r)
{
    return (at_transfer_params){r->nparams, (const char *const *)r->names, r->nvalues,
                                (const char *const *const *)r->values};
}

/* The warm start of a replay: each recording of opts->transfer loaded and mapped onto r's space
 * (refused, with the reason in its entry, when it is another kernel or shares no config), as
 * sources for the search (src[i] with its arrays in cfg[i], tm[i], for the used ones). */
typedef struct replay_sources {
    at_search_source *src;
    size_t **cfg;
    double **tm;
    size_t n;
    size_t *entry; /* the report's entry of each used source */
} replay_sources;

static void sources_free(replay_sources *rs)
{
    for (size_t i = 0; i < rs->n; i++) free(rs->cfg[i]), free(rs->tm[i]);
    free(rs->src);
    free(rs->cfg);
    free(rs->tm);
    free(rs->entry);
    memset(rs, 0, sizeof *rs);
}

static at_status load_sources(const at_recording *r, const at_search_space *sp,
                              const at_tune_options *o, at_replay_report *rep, replay_sources *rs)
{
    memset(rs, 0, sizeof *rs);
    size_t k = o->ntransfer;
    if (!k) return AT_OK;
    rep->transfer = calloc(k, sizeof *rep->transfer);
    rs->src = calloc(k, sizeof *rs->src);
    rs->cfg = calloc(k, sizeof *rs->cfg);
    rs->tm = calloc(k, sizeof *rs->tm);
    rs->entry = calloc(k, sizeof *rs->entry);
    if (!rep->transfer || !rs->src || !rs->cfg || !rs->tm || !rs->entry)
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    rep->ntransfer = k;
    at_transfer_params tp = at_recording_transfer_params(r);
    for (size_t i = 0; i < k; i++) {
        at_transfer_source *e = &rep->transfer[i];
        snprintf(e->name, sizeof e->name, "%s", o->transfer[i]);
        at_recording *src = NULL;
        at_status st = at_recording_load(o->transfer[i], NULL, &src);
        if (st == AT_ERR_NO_MEMORY) return st;
        if (st != AT_OK) { /* an unreadable source is refused, not the replay */
            snprintf(e->reason, sizeof e->reason, "%s", at_errmsg());
            at_errclear();
            continue;
        }
        /* Kernel Tuner names the kernel: another one is refused whatever its parameters. */
        if (!strcmp(src->format, "kerneltuner") && !strcmp(r->format, "kerneltuner") &&
            src->kernel[0] && r->kernel[0] && strcmp(src->kernel, r->kernel) != 0) {
            snprintf(e->reason, sizeof e->reason, "it is kernel %s, this is %s", src->kernel,
                     r->kernel);
        } else {
            at_transfer_params sparams = at_recording_transfer_params(src);
            size_t n = 0, *cfg = NULL;
            double *tm = NULL;
            st = at_transfer_map(&tp, sp, &sparams, src->idx, src->cost, src->nconfigs, &cfg, &tm,
                                 &n, e->reason, sizeof e->reason);
            if (st == AT_OK) {
                e->used = 1;
                e->configs = (int64_t)n;
                rs->cfg[rs->n] = cfg;
                rs->tm[rs->n] = tm;
                rs->src[rs->n] = (at_search_source){n, cfg, tm};
                rs->entry[rs->n++] = i;
            } else if (st != AT_ERR_INVALID_ARG) {
                at_recording_free(src);
                return st;
            }
        }
        at_recording_free(src);
    }
    return AT_OK;
}

static at_status replay_run(const at_recording *r, const at_tune_options *o, at_replay_report *rep)
{
    double t0 = at_now();
    at_replay_eval ev;
    at_replay_eval_init(&ev, r, NULL, "the recording");
    at_search_space sp = {r->nconfigs, r->nparams, r->idx, r->nvalues,
                          (const double *const *)r->numeric};
    at_search_options so = at_search_options_of(o);
    so.clock = at_replay_clock; /* a seconds budget counts the recorded seconds */
    so.clock_user = &ev;
    replay_sources rs;
    at_status st = load_sources(r, &sp, o, rep, &rs);
    so.sources = rs.src;
    so.nsources = o->no_transfer ? 0 : rs.n;
    for (size_t i = 0; o->no_transfer && i < rs.n; i++) {
        rep->transfer[rs.entry[i]].used = 0;
        snprintf(rep->transfer[rs.entry[i]].reason, sizeof rep->transfer[0].reason,
                 "warm starts are off (--no-transfer)");
    }
    at_search *s = NULL;
    if (st == AT_OK) st = at_search_create(&sp, &so, &s);
    if (st != AT_OK) {
        sources_free(&rs);
        return st;
    }
    at_loop loop;
    st = at_tune_loop(s, &ev.ev, o, NULL, &loop);
    for (size_t i = 0; i < so.nsources; i++) {
        at_transfer_source *e = &rep->transfer[rs.entry[i]];
        size_t pairs = 0;
        at_search_source_weight(s, i, &e->weight, NULL, &pairs);
        e->pairs = (int64_t)pairs;
    }
    rep->first_picks_from_sources = at_search_first_from_sources(s);
    rep->probe_picks = at_search_probe_picks(s);
    at_search_free(s);
    sources_free(&rs);
    rep->evaluated = loop.evaluated;
    rep->failed = loop.failed;
    rep->simulated_seconds = ev.seconds;
    rep->trajectory_evals = malloc((loop.ntrajectory + 1) * sizeof *rep->trajectory_evals);
    rep->trajectory_best = malloc((loop.ntrajectory + 1) * sizeof *rep->trajectory_best);
    if (st == AT_OK && (!rep->trajectory_evals || !rep->trajectory_best))
        st = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; st == AT_OK && i < loop.ntrajectory; i++) {
        rep->trajectory_evals[i] = loop.traj_evals[i];
        rep->trajectory_best[i] = r->value[loop.traj_config[i]];
    }
    if (st == AT_OK) rep->ntrajectory = loop.ntrajectory;
    if (st == AT_OK && loop.have_best) {
        rep->found = 1;
        rep->best = r->value[loop.best];
        at_recording_config(r, loop.best, rep->best_config, sizeof rep->best_config);
    }
    at_loop_clear(&loop);
    rep->seconds = at_now() - t0;
    return st;
}

at_status at_replay_file(const char *path, const char *select, const at_tune_options *opts,
                         at_replay_report *rep, char *why, size_t whylen)
{
    memset(rep, 0, sizeof *rep);
    at_tune_options o = {0};
    if (opts) o = *opts;
    if (!o.seed) o.seed = 1;
    at_recording *r = NULL;
    at_status st = path ? at_recording_load(path, select, &r)
                        : at_fail(AT_ERR_INVALID_ARG, "no recorded space given");
    if (st == AT_OK) {
        snprintf(rep->format, sizeof rep->format, "%s", r->format);
        snprintf(rep->device, sizeof rep->device, "%s", r->device);
        snprintf(rep->kernel, sizeof rep->kernel, "%s", r->kernel);
        snprintf(rep->objective, sizeof rep->objective, "%s", r->objective);
        rep->space = (int64_t)r->nconfigs;
        rep->space_failed = (int64_t)r->nfailed;
        if (r->have_optimum) {
            rep->optimum = r->value[r->optimum];
            at_recording_config(r, r->optimum, rep->optimum_config, sizeof rep->optimum_config);
        }
        st = replay_run(r, &o, rep);
    }
    if (st != AT_OK) {
        at_replay_report_clear(rep);
        if (why) snprintf(why, whylen, "%s", at_errmsg());
    } else if (why) {
        snprintf(why, whylen, "%s", r->note); /* records skipped as damaged, or "" */
    }
    at_recording_free(r);
    return st;
}
