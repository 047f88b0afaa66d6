/* proxy_sim.c — multi-fidelity by replay: how many full-size evaluations does screening on a
 * cheaper proxy of a problem (a K-slice of a GEMM) and then confirming on the problem itself
 * need to hold a config within 5 % of the problem's optimum, against searching the problem
 * directly, and at what loss. Both spaces are recordings of the same configs (Kernel Tuner
 * cache files, e.g. `autotune db export --kernel-tuner` of two exhaustive runs).
 *
 *   cc -O2 -o proxy_sim benchmarks/search/proxy_sim.c -I. -Iinclude build/libautotune.a \
 *      -lcjson -lz -llmdb -lyaml -lm -ldl -lpthread
 *   ./proxy_sim FULL PROXY SEEDS BUDGET...
 *
 * Direct: the default strategy on FULL, one proposal at a time, until within 5 % (full-size
 * evaluations and their recorded seconds). Screen-then-confirm, per proxy BUDGET: the default
 * strategy on PROXY for BUDGET evaluations, then its measured configs in order of proxy time
 * are confirmed on FULL until one is within 5 % (full-size evaluations; seconds: the proxy's and
 * the confirmations'); and the loss of confirming only the proxy's best 1 and best 3 (what
 * tuner/tune.c does): their best full time over the optimum. Medians over seeds 1..SEEDS. */
#include "cache/recording.h"
#include "search/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The config of f with the parameter values (by text) of config i of p; SIZE_MAX if none. */
static size_t match(const at_recording *f, const at_recording *p, size_t i)
{
    for (size_t c = 0; c < f->nconfigs; c++) {
        size_t j = 0;
        for (; j < f->nparams; j++) {
            size_t q = 0;
            while (q < p->nparams && strcmp(p->names[q], f->names[j])) q++;
            if (q == p->nparams) return SIZE_MAX;
            if (strcmp(f->values[j][f->idx[c * f->nparams + j]],
                       p->values[q][p->idx[i * p->nparams + q]]))
                break;
        }
        if (j == f->nparams) return c;
    }
    return SIZE_MAX;
}

typedef struct measured {
    double cost;
    size_t c;
} measured;

static int cmpm(const void *a, const void *b)
{
    const measured *x = a, *y = b;
    return (x->cost > y->cost) - (x->cost < y->cost);
}

/* Runs the default strategy on r for at most budget evaluations (0: until within 5 % of the
 * optimum); fills what it measured; returns the count. */
static size_t search(const at_recording *r, uint64_t seed, size_t budget, measured *out, int stop5)
{
    at_search_space sp = {r->nconfigs, r->nparams, r->idx, r->nvalues,
                          (const double *const *)r->numeric};
    at_search_options o = {.seed = seed, .max_evals = (int64_t)budget};
    at_search *s;
    if (at_search_create(&sp, &o, &s)) return 0;
    size_t c, k = 0;
    double opt = r->cost[r->optimum];
    while (at_search_propose(s, 1, &c) == 1) {
        at_search_report(s, c, r->cost[c]);
        out[k].c = c, out[k].cost = r->cost[c];
        k++;
        if (stop5 && r->cost[c] <= opt * 1.05) break;
    }
    at_search_free(s);
    return k;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s FULL PROXY SEEDS BUDGET...\n", argv[0]);
        return 2;
    }
    at_recording *f, *p;
    if (at_recording_load(argv[1], NULL, &f) || at_recording_load(argv[2], NULL, &p)) {
        fprintf(stderr, "proxy_sim: %s\n", at_errmsg());
        return 1;
    }
    int nseeds = atoi(argv[3]);
    if (nseeds < 1 || !f->have_optimum || !p->have_optimum) {
        fprintf(stderr, "proxy_sim: SEEDS must be positive and both spaces hold a success\n");
        return 2;
    }
    size_t *map = malloc(p->nconfigs * sizeof *map);
    measured *m = malloc((f->nconfigs + p->nconfigs) * sizeof *m);
    double *a = malloc(nseeds * sizeof *a), *b = malloc(nseeds * sizeof *b);
    double *l1 = malloc(nseeds * sizeof *l1), *l3 = malloc(nseeds * sizeof *l3);
    for (size_t i = 0; i < p->nconfigs; i++) {
        map[i] = match(f, p, i);
        if (map[i] == SIZE_MAX) {
            fprintf(stderr, "proxy_sim: proxy config %zu is not in %s\n", i, argv[1]);
            return 1;
        }
    }
    double opt = f->cost[f->optimum];
    /* How the proxy ranks the problem's configs: the full rank of the proxy's optimum. */
    size_t rank = 0;
    for (size_t c = 0; c < f->nconfigs; c++) rank += f->cost[c] < f->cost[map[p->optimum]];
    printf("full %s: %zu configs, optimum %.4g; proxy %s: %zu configs, optimum %.4g; the "
           "proxy's optimum is %.1f%% slower on the full problem (rank %zu)\n",
           argv[1], f->nconfigs, opt, argv[2], p->nconfigs, p->cost[p->optimum],
           100 * (f->cost[map[p->optimum]] / opt - 1), rank + 1);
    for (int sd = 0; sd < nseeds; sd++) {
        size_t k = search(f, (uint64_t)sd + 1, 0, m, 1);
        a[sd] = (double)k;
        b[sd] = 0;
        for (size_t i = 0; i < k; i++) b[sd] += f->eval_s[m[i].c];
    }
    double direct_n = median(a, nseeds), direct_s = median(b, nseeds);
    printf("direct on the full problem: median %.1f full-size evaluations, %.1f recorded s\n",
           direct_n, direct_s);
    for (int q = 4; q < argc; q++) {
        size_t budget = (size_t)atol(argv[q]);
        double *ps = malloc(nseeds * sizeof *ps);
        for (int sd = 0; sd < nseeds; sd++) {
            size_t k = search(p, (uint64_t)sd + 1, budget, m, 0);
            double secs = 0;
            for (size_t i = 0; i < k; i++) secs += p->eval_s[m[i].c];
            ps[sd] = secs;
            qsort(m, k, sizeof *m, cmpm);
            size_t n = 0;
            double best = INFINITY;
            l1[sd] = l3[sd] = NAN;
            a[sd] = NAN;
            for (size_t i = 0; i < k; i++) {
                size_t c = map[m[i].c];
                n++;
                secs += f->eval_s[c];
                if (f->cost[c] < best) best = f->cost[c];
                if (n == 1) l1[sd] = best / opt;
                if (n == 3 || (n < 3 && i + 1 == k)) l3[sd] = best / opt;
                if (best <= opt * 1.05 && isnan(a[sd])) {
                    a[sd] = (double)n;
                    b[sd] = secs;
                }
            }
            if (isnan(l3[sd])) l3[sd] = best / opt;
            if (isnan(a[sd])) a[sd] = INFINITY, b[sd] = INFINITY; /* never within 5 % */
        }
        double pn = median(ps, nseeds);
        printf("screen on the proxy, %zu evaluations (median %.1f recorded s), then confirm: "
               "median %.1f full-size evaluations to 5 %% (%.1f recorded s in all); confirming "
               "the proxy's best 1: median loss %.1f %%, best 3: %.1f %%\n",
               budget, pn, median(a, nseeds), median(b, nseeds), 100 * (median(l1, nseeds) - 1),
               100 * (median(l3, nseeds) - 1));
        free(ps);
    }
    free(map), free(m), free(a), free(b), free(l1), free(l3);
    at_recording_free(f);
    at_recording_free(p);
    return 0;
}
