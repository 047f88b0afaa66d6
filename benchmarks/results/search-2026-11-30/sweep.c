/* sweep.c — evaluations until a strategy's best is within 5 % and 1 % of a recorded space's
 * optimum, for seeds 1..N, on Kernel Tuner cache files: the same loop as `autotune replay`
 * (one proposal at a time, each answered from the file), without reloading the file per seed.
 *   cc -O2 -o sweep sweep.c -I. -Iinclude -Ituner build/libautotune.a -lcjson -lz -llmdb \
 *      -lyaml -lm -ldl -lpthread
 *   ./sweep STRATEGY SEEDS FILE...      (PRIOR=1: the GEMM cost model's prior on CLBlast files)
 * Prints one summary line per file and a "raw" line with every seed's two counts. */
#include "search/replay.h"
#include "tuner/costmodel.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return (x>y)-(x<y);}
int main(int argc, char **argv){
  const char *strat = argv[1]; int nseeds = atoi(argv[2]);
  for (int f = 3; f < argc; f++) {
    at_recording *r; if (at_recording_load(argv[f], NULL, &r)) { printf("load fail %s\n", at_errmsg()); return 1; }
    at_search_space sp = at_recording_space(r);
    double opt = r->cost[r->optimum];
    double *prior = NULL;
    if (getenv("PRIOR") && strstr(argv[f], "gemm")) {
      at_device_info d = {0}; d.compute_units = strstr(argv[f], "3090") ? 82 : 68; d.warp_size = 32; d.local_mem_bytes = 49152;
      prior = malloc(r->nconfigs * sizeof *prior);
      size_t np = r->nparams; int J[32];
      const char *nm[] = {"MWG","NWG","KWG","MDIMC","NDIMC","VWM","VWN","SA","SB"};
      for (int q = 0; q < 9; q++) { J[q] = -1; for (size_t j = 0; j < np; j++) if (!strcmp(r->names[j], nm[q])) J[q] = (int)j; }
      for (size_t i = 0; i < r->nconfigs; i++) {
        double v[9]; for (int q = 0; q < 9; q++) v[q] = r->numeric[J[q]][r->idx[i*np+J[q]]];
        at_gemm_cost_in c = {4096,4096,4096,(int64_t)v[0],(int64_t)v[1],(int64_t)v[2],(int64_t)(v[3]*v[4]),(int64_t)(4*(v[7]*v[2]*v[0]+v[8]*v[2]*v[1])),(int64_t)(v[5]<v[6]?v[5]:v[6]),4};
        prior[i] = at_gemm_cost(&c, &d);
      }
      /* rank correlation-ish: where does the optimum rank? */
      size_t better = 0; for (size_t i = 0; i < r->nconfigs; i++) better += prior[i] < prior[r->optimum];
      printf("optimum's prior rank %zu of %zu\n", better, r->nconfigs);
    }
    double e5[200], e1[200]; double t0 = at_now();
    for (int sd = 0; sd < nseeds; sd++) {
      at_search_options o = {.strategy = strat, .seed = (uint64_t)sd + 1, .prior = prior};
      at_search *s; if (at_search_create(&sp, &o, &s)) { printf("%s\n", at_errmsg()); return 1; }
      size_t c; int64_t n = 0; double best = INFINITY; e5[sd] = e1[sd] = NAN;
      while (at_search_propose(s, 1, &c) == 1) {
        n++; at_search_report(s, c, r->cost[c]);
        if (r->cost[c] < best) best = r->cost[c];
        if (isnan(e5[sd]) && best <= opt * 1.05) e5[sd] = (double)n;
        if (isnan(e1[sd]) && best <= opt * 1.01) { e1[sd] = (double)n; break; }
      }
      at_search_free(s);
    }
    double dt = (at_now() - t0) / nseeds;
    const char *bn = strrchr(argv[f], '/'); bn = bn ? bn + 1 : argv[f];
    printf("raw %s %s %zu", strat, bn, r->nconfigs);
    for (int sd = 0; sd < nseeds; sd++) printf(" %.0f/%.0f", e5[sd], e1[sd]);
    printf("\n");
    qsort(e5, nseeds, sizeof(double), cmpd); qsort(e1, nseeds, sizeof(double), cmpd);
    int p90 = (int)ceil(0.9 * nseeds) - 1;
    const char *b = strrchr(argv[f], '/'); b = b ? b + 1 : argv[f];
    printf("%-12s %-34s n=%5zu  5%%: med %6.0f (%5.2f%%) p90 %6.0f (%5.2f%%)  1%%: med %6.0f (%5.2f%%) p90 %6.0f  %.3fs/run\n",
           strat, b, r->nconfigs, e5[nseeds/2], 100*e5[nseeds/2]/r->nconfigs, e5[p90], 100*e5[p90]/r->nconfigs,
           e1[nseeds/2], 100*e1[nseeds/2]/r->nconfigs, e1[p90], dt);
    at_recording_free(r); free(prior);
  }
  return 0;
}
