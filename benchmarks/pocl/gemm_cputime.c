/* gemm_cputime.c — one gemm_cpu configuration (or OpenBLAS's sgemm) on one square problem,
 * timed by the process's CPU time as well as by the wall clock, for comparing configurations
 * on a machine shared with other jobs (docs/gemm-cpu.md, "Measuring on a shared machine").
 *
 *   build/benchmarks/gemm_cputime S LAYOUT REPS CONFIG|openblas [PAD]
 *
 * S: m = n = k; LAYOUT nn|nt|tn|tt; REPS timed calls after one untimed (the best is kept);
 * CONFIG a gemm_cpu configuration (`VW=16,RS=6,...`, every parameter); PAD extra elements on
 * every leading dimension. Prints GFLOP/s by the wall clock and by CPU time x 2 ("cpu2": what
 * the two cores would give uncontended; the CPU time of PoCL's worker threads or OpenBLAS's does
 * not grow when another process takes turns on the cores, the wall time does). The result is
 * not checked: the tuner's check and tests/unit/test_gemm.c do that. Set OPENBLAS_CORETYPE and
 * OPENBLAS_NUM_THREADS for OpenBLAS (benchmarks/pocl/README.md), AUTOTUNE_TEMPLATE_PATH for a
 * template under development. */
#define _POSIX_C_SOURCE 200809L
#include "tuner/ops/gemm.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- one call, timed ------------------------------------------------------------------------ */

typedef struct run {
    int ta, tb;
    int64_t s, ld;
    const float *a, *b;
    float *c;
    at_kernel *k; /* NULL: OpenBLAS */
    at_buffer *da, *db, *dc;
} run;

static int call(const run *r)
{
    if (!r->k) {
        cblas_sgemm(CblasRowMajor, r->ta ? CblasTrans : CblasNoTrans,
                    r->tb ? CblasTrans : CblasNoTrans, (int)r->s, (int)r->s, (int)r->s, 1.0f, r->a,
                    (int)r->ld, r->b, (int)r->ld, 0.0f, r->c, (int)r->ld);
        return 0;
    }
    if (at_gemm_launch(r->k, at_buffer_devptr(r->da), at_buffer_devptr(r->db),
                       at_buffer_devptr(r->dc), NULL) != AT_OK)
        return -1;
    return at_buffer_read(r->dc, 0, r->c, 4) == AT_OK ? 0 : -1; /* waits for the kernel */
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: gemm_cputime S nn|nt|tn|tt REPS CONFIG|openblas [PAD]\n");
        return 2;
    }
    run r = {.s = atoll(argv[1])};
    const char *lay = argv[2], *config = argv[4];
    const int reps = atoi(argv[3]);
    const int64_t pad = argc > 5 ? atoll(argv[5]) : 0;
    if (r.s < 1 || r.s > 65536 || reps < 1 || pad < 0 || strlen(lay) != 2 ||
        strspn(lay, "nt") != 2) {
        fprintf(stderr, "gemm_cputime: bad S (1-65536), LAYOUT, REPS (>= 1) or PAD (>= 0)\n");
        return 2;
    }
    r.ta = lay[0] == 't';
    r.tb = lay[1] == 't';
    r.ld = r.s + pad;
    const size_t n = (size_t)(r.s * r.ld);
    float *a = malloc(n * 4), *b = malloc(n * 4);
    r.c = malloc(n * 4);
    if (!a || !b || !r.c) return 1;
    srand(1);
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }
    r.a = a;
    r.b = b;

    at_context *ctx = NULL;
    at_template *t = NULL;
    char dir[] = "/tmp/gemm-cputime-XXXXXX"; /* the context's database: empty, removed after */
    if (strcmp(config, "openblas") != 0) {
        if (!mkdtemp(dir)) return 1;
        at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = dir};
        at_gemm_problem g = {
            .m = r.s, .n = r.s, .k = r.s, .alpha = 1, .lda = r.ld, .ldb = r.ld, .ldc = r.ld};
        g.layout =
            r.ta ? (r.tb ? AT_LAYOUT_TT : AT_LAYOUT_TN) : (r.tb ? AT_LAYOUT_NT : AT_LAYOUT_NN);
        if (at_context_create(&o, &ctx) != AT_OK ||
            at_template_load("gemm_cpu", "opencl", &t) != AT_OK ||
            at_template_bind_device(t, &ctx->info) != AT_OK ||
            at_gemm_bind(&g, t->space) != AT_OK) {
            fprintf(stderr, "gemm_cputime: %s\n", at_errmsg());
            return 1;
        }
        at_problem gp = at_problem_view(&at_op_gemm, &g);
        if (at_kernel_build(ctx, t, &gp, config, &r.k) != AT_OK ||
            at_buffer_create(ctx, n * 4, &r.da) != AT_OK ||
            at_buffer_create(ctx, n * 4, &r.db) != AT_OK ||
            at_buffer_create(ctx, n * 4, &r.dc) != AT_OK || at_buffer_write(r.da, 0, a, n * 4) ||
            at_buffer_write(r.db, 0, b, n * 4)) {
            fprintf(stderr, "gemm_cputime: %s: %s\n", config, at_errmsg());
            return 2;
        }
    }

    double wall = 1e30, cpu = 1e30;
    for (int i = 0; i <= reps; i++) {
        const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        if (call(&r) != 0) {
            fprintf(stderr, "gemm_cputime: launch: %s\n", at_errmsg());
            return 1;
        }
        const double w = now(CLOCK_MONOTONIC) - w0, c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (i == 0) continue; /* warm-up */
        if (w < wall) wall = w;
        if (c < cpu) cpu = c;
    }
    const double flop = 2.0 * (double)r.s * (double)r.s * (double)r.s;
    printf("%-64s wall %6.1f  cpu2 %6.1f GFLOP/s\n", config, flop / wall / 1e9,
           2 * flop / cpu / 1e9);

    if (r.k) {
        at_buffer_destroy(r.da);
        at_buffer_destroy(r.db);
        at_buffer_destroy(r.dc);
        at_kernel_destroy(r.k);
        at_template_free(t);
        at_context_destroy(ctx);
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) return 1;
    }
    free(a);
    free(b);
    free(r.c);
    return 0;
}
