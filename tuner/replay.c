/* replay.c — the replay device: a tuning run answered from a recorded space (Kernel Tuner cache
 * JSON or our results database) instead of a device, so strategies are compared offline
 * (Kernel Tuner's simulation mode). */
#include "cache/recording.h"
#include "search/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static at_status oom(void) { return at_fail(AT_ERR_NO_MEMORY, "out of memory"); }

static at_search_space recording_space(const at_recording *r)
{
    at_search_space s = {r->nconfigs, r->nparams, r->idx, r->nvalues,
                         (const double *const *)r->numeric};
    return s;
}

void at_replay_report_clear(at_replay_report *rep)
{
    if (!rep) return;
    free(rep->trajectory_evals);
    free(rep->trajectory_best);
    rep->trajectory_evals = NULL;
    rep->trajectory_best = NULL;
    rep->ntrajectory = 0;
}

static at_status replay_run(const at_recording *r, const at_tune_options *o, at_replay_report *rep)
{
    double t0 = at_now();
    at_search_space sp = recording_space(r);
    at_search_options so = {.strategy = o->strategy,
                            .seed = o->seed,
                            .max_evals = o->max_evals,
                            .no_improve = o->no_improve};
    at_search *s = NULL;
    AT_TRY(at_search_create(&sp, &so, &s));
    size_t cap = 64;
    rep->trajectory_evals = malloc(cap * sizeof *rep->trajectory_evals);
    rep->trajectory_best = malloc(cap * sizeof *rep->trajectory_best);
    if (!rep->trajectory_evals || !rep->trajectory_best) {
        at_search_free(s);
        return oom();
    }
    double best_cost = INFINITY;
    size_t c, best = 0;
    /* One at a time: each proposal sees every result before it, as on a serial device. */
    while (at_search_propose(s, 1, &c) == 1) {
        rep->evaluated++;
        rep->simulated_seconds += r->eval_s[c];
        if (r->status[c] || !isfinite(r->cost[c])) rep->failed++;
        at_search_report(s, c, r->cost[c]);
        if (r->cost[c] < best_cost) {
            best_cost = r->cost[c];
            best = c;
            if (rep->ntrajectory == cap) {
                cap *= 2;
                int64_t *ne = realloc(rep->trajectory_evals, cap * sizeof *ne);
                if (ne) rep->trajectory_evals = ne;
                double *nb = realloc(rep->trajectory_best, cap * sizeof *nb);
                if (nb) rep->trajectory_best = nb;
                if (!ne || !nb) {
                    at_search_free(s);
                    return oom();
                }
            }
            rep->trajectory_evals[rep->ntrajectory] = rep->evaluated;
            rep->trajectory_best[rep->ntrajectory++] = r->value[c];
        }
        if (o->max_seconds > 0 && rep->simulated_seconds >= o->max_seconds) break;
    }
    at_search_free(s);
    if (isfinite(best_cost)) {
        rep->found = 1;
        rep->best = r->value[best];
        at_recording_config(r, best, rep->best_config, sizeof rep->best_config);
    }
    rep->seconds = at_now() - t0;
    return AT_OK;
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
    }
    at_recording_free(r);
    return st;
}
