/* sweep.c — a development harness for search strategies: evaluations until a strategy's best is
 * within 5 % and 1 % of a recorded space's optimum, seeds 1..N, each file loaded once. The loop
 * is `autotune replay`'s (one proposal at a time, each answered from the file) and the budget
 * run.sh's (10 % of the space, at least 200, at most the space; a run that does not get there
 * counts as its budget), so its medians match run.sh's without its per-seed process start.
 *
 *   cc -O2 -o sweep benchmarks/search/sweep.c -I. -Iinclude build/libautotune.a \
 *      -lcjson -lz -llmdb -lyaml -lmsgpackc -lm -ldl -lpthread
 *   ./sweep STRATEGY SEEDS FILE...
 *
 * FIRST_SEED=F runs seeds F..F+SEEDS-1 instead of 1..SEEDS (a second seed range, to check that
 * a gain is not the first range's luck).
 * SKIP_FAILED=1 leaves the configs recorded as failed out of the space (what Kernel Tuner's
 * simulation mode does); the share is still of the whole space. TRANSFER=SOURCE warm-starts
 * every run from that recording (as `autotune replay FILE --transfer SOURCE`; a source of other
 * parameters is an error here). Prints one line per file and a "raw" line with every seed's two
 * counts. */
#include "cache/recording.h"
#include "search/search.h"
#include "search/transfer.h"
#include "tuner/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s STRATEGY SEEDS FILE...\n", argv[0]);
        return 2;
    }
    const char *strat = argv[1];
    int nseeds = atoi(argv[2]);
    if (nseeds < 1 || nseeds > 1000) return 2;
    int skip = getenv("SKIP_FAILED") && atoi(getenv("SKIP_FAILED"));
    int first = getenv("FIRST_SEED") ? atoi(getenv("FIRST_SEED")) : 1;
    if (first < 1) return 2;
    const char *xfile = getenv("TRANSFER");
    at_recording *xr = NULL;
    if (xfile && *xfile && at_recording_load(xfile, NULL, &xr)) {
        fprintf(stderr, "sweep: %s\n", at_errmsg());
        return 1;
    }
    double all5 = 0, all1 = 0;
    double *med5 = calloc((size_t)argc, sizeof *med5);
    int nfiles = 0;
    for (int f = 3; f < argc; f++) {
        at_recording *r;
        if (at_recording_load(argv[f], NULL, &r)) {
            fprintf(stderr, "sweep: %s\n", at_errmsg());
            return 1;
        }
        at_search_space sp = {r->nconfigs, r->nparams, r->idx, r->nvalues,
                              (const double *const *)r->numeric};
        size_t np = r->nparams, n = r->nconfigs, *map = malloc(n * sizeof *map), m = 0;
        uint16_t *idx = malloc(n * np * sizeof *idx);
        for (size_t i = 0; i < n; i++) {
            if (skip && !isfinite(r->cost[i])) continue;
            memcpy(idx + m * np, r->idx + i * np, np * sizeof *idx);
            map[m++] = i;
        }
        sp.idx = idx;
        sp.nconfigs = m;
        double opt = r->cost[r->optimum];
        at_search_source src = {0};
        size_t *xcfg = NULL;
        double *xtm = NULL;
        if (xr) {
            at_transfer_params tp = at_recording_transfer_params(r),
                               xp = at_recording_transfer_params(xr);
            char why[256] = "";
            if (at_transfer_map(&tp, &sp, &xp, xr->idx, xr->cost, xr->nconfigs, &xcfg, &xtm, &src.n,
                                why, sizeof why)) {
                fprintf(stderr, "sweep: %s: %s %s\n", argv[f], why, at_errmsg());
                return 1;
            }
            src.config = xcfg;
            src.time = xtm;
        }
        size_t budget = n / 10 > 200 ? (n + 9) / 10 : 200;
        if (budget > m) budget = m;
        double *e5 = malloc(nseeds * sizeof *e5), *e1 = malloc(nseeds * sizeof *e1);
        double t0 = at_now();
        for (int sd = 0; sd < nseeds; sd++) {
            at_search_options o = {
                .strategy = strat, .seed = (uint64_t)(sd + first), .max_evals = (int64_t)budget};
            if (xr) o.sources = &src, o.nsources = 1;
            at_search *s;
            if (at_search_create(&sp, &o, &s)) {
                fprintf(stderr, "sweep: %s\n", at_errmsg());
                return 1;
            }
            size_t c;
            int64_t k = 0;
            double best = INFINITY;
            e5[sd] = e1[sd] = (double)budget;
            while (at_search_propose(s, 1, &c) == 1) {
                k++;
                double y = r->cost[map[c]];
                at_search_report(s, c, y);
                if (y < best) best = y;
                if (best <= opt * 1.05 && e5[sd] == (double)budget && k < (int64_t)budget)
                    e5[sd] = (double)k;
                if (best <= opt * 1.01) {
                    e1[sd] = (double)k;
                    if (e5[sd] > (double)k) e5[sd] = (double)k;
                    break;
                }
            }
            at_search_free(s);
        }
        double dt = (at_now() - t0) / nseeds;
        const char *bn = strrchr(argv[f], '/');
        bn = bn ? bn + 1 : argv[f];
        printf("raw %s %s %zu", strat, bn, n);
        for (int sd = 0; sd < nseeds; sd++) printf(" %.0f/%.0f", e5[sd], e1[sd]);
        printf("\n");
        qsort(e5, nseeds, sizeof *e5, cmpd);
        qsort(e1, nseeds, sizeof *e1, cmpd);
        double q5 = nseeds % 2 ? e5[nseeds / 2] : (e5[nseeds / 2 - 1] + e5[nseeds / 2]) / 2;
        double q1 = nseeds % 2 ? e1[nseeds / 2] : (e1[nseeds / 2 - 1] + e1[nseeds / 2]) / 2;
        int p90 = (int)ceil(0.9 * nseeds) - 1;
        printf("%-10s %-36s n=%5zu  5%%: med %6.1f (%5.2f%%) p90 %5.0f  1%%: med %6.1f (%5.2f%%) "
               "%.3fs/run\n",
               strat, bn, n, q5, 100 * q5 / n, e5[p90], q1, 100 * q1 / n, dt);
        fflush(stdout);
        med5[nfiles++] = q5 / n;
        all5 += q5 / n, all1 += q1 / n;
        free(e5), free(e1), free(idx), free(map), free(xcfg), free(xtm);
        at_recording_free(r);
    }
    qsort(med5, nfiles, sizeof *med5, cmpd);
    printf("median over %d files of the 5%% medians: %.3f%%\n", nfiles,
           100 * (nfiles % 2 ? med5[nfiles / 2] : (med5[nfiles / 2 - 1] + med5[nfiles / 2]) / 2));
    free(med5);
    at_recording_free(xr);
    return 0;
}
