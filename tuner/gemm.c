/* gemm.c — the GEMM problem: validation, database key, CPU reference, and the buffers and
 * correctness check the pipeline uses to test every candidate. */
#include "tuner.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_layouts[] = {"nn", "nt", "tn", "tt"};
static const char *const g_dtypes[] = {"f32", "f16", "bf16"};

const char *at_layout_name(at_layout l) { return (unsigned)l < 4 ? g_layouts[l] : "?"; }
const char *at_dtype_name(at_dtype d) { return (unsigned)d < 3 ? g_dtypes[d] : "?"; }

static int trans_a(const at_gemm_problem *g)
{
    return g->layout == AT_LAYOUT_TN || g->layout == AT_LAYOUT_TT;
}
static int trans_b(const at_gemm_problem *g)
{
    return g->layout == AT_LAYOUT_NT || g->layout == AT_LAYOUT_TT;
}

/* Packed leading dimensions where the caller gave 0. */
static void resolve_ld(const at_gemm_problem *g, int64_t *lda, int64_t *ldb, int64_t *ldc)
{
    *lda = g->lda ? g->lda : (trans_a(g) ? g->m : g->k);
    *ldb = g->ldb ? g->ldb : (trans_b(g) ? g->k : g->n);
    *ldc = g->ldc ? g->ldc : g->n;
}

at_status at_gemm_validate(const at_gemm_problem *g, const at_context *ctx)
{
    const int64_t max = 2147483647;
    if (!g) return at_fail(AT_ERR_INVALID_ARG, "no problem given");
    const struct {
        const char *name;
        int64_t v;
    } dims[] = {{"m", g->m}, {"n", g->n}, {"k", g->k}};
    for (int i = 0; i < 3; i++)
        if (dims[i].v < 1 || dims[i].v > max)
            return at_fail(AT_ERR_INVALID_ARG, "%s = %lld is out of range (1 to %lld)",
                           dims[i].name, (long long)dims[i].v, (long long)max);
    if ((unsigned)g->layout > AT_LAYOUT_TT)
        return at_fail(AT_ERR_INVALID_ARG, "layout %d is not one of nn, nt, tn, tt",
                       (int)g->layout);
    if ((unsigned)g->dtype > AT_DTYPE_BF16)
        return at_fail(AT_ERR_INVALID_ARG, "dtype %d is not one of f32, f16, bf16", (int)g->dtype);
    if (ctx && g->dtype != AT_DTYPE_F32)
        return at_fail(AT_ERR_UNSUPPORTED, "dtype %s is not supported on the %s backend (f32 only)",
                       at_dtype_name(g->dtype), ctx->info.backend);
    int64_t lda, ldb, ldc;
    resolve_ld(g, &lda, &ldb, &ldc);
    const struct {
        const char *name;
        int64_t v, min;
    } lds[] = {{"lda", lda, trans_a(g) ? g->m : g->k},
               {"ldb", ldb, trans_b(g) ? g->k : g->n},
               {"ldc", ldc, g->n}};
    for (int i = 0; i < 3; i++)
        if (lds[i].v < lds[i].min || lds[i].v > max)
            return at_fail(AT_ERR_INVALID_ARG, "%s = %lld is out of range (%lld to %lld)",
                           lds[i].name, (long long)lds[i].v, (long long)lds[i].min, (long long)max);
    if (!isfinite(g->alpha) || !isfinite(g->beta))
        return at_fail(AT_ERR_INVALID_ARG, "alpha and beta must be finite");
    return AT_OK;
}

void at_gemm_key(const at_gemm_problem *g, char *buf, size_t len)
{
    snprintf(buf, len, "gemm/%s/%s/%lldx%lldx%lld", at_dtype_name(g->dtype),
             at_layout_name(g->layout), (long long)g->m, (long long)g->n, (long long)g->k);
}

at_status at_gemm_bind(const at_gemm_problem *g, at_space *s)
{
    AT_TRY(at_space_set(s, "m", g->m));
    AT_TRY(at_space_set(s, "n", g->n));
    AT_TRY(at_space_set(s, "k", g->k));
    AT_TRY(at_space_set(s, "ta", trans_a(g)));
    AT_TRY(at_space_set(s, "tb", trans_b(g)));
    /* Offsets need 64 bits when an operand, with its leading dimension, spans 2^31 elements. */
    int64_t lda, ldb, ldc;
    resolve_ld(g, &lda, &ldb, &ldc);
    double span = fmax(fmax((double)(trans_a(g) ? g->k : g->m) * (double)lda,
                            (double)(trans_b(g) ? g->n : g->k) * (double)ldb),
                       (double)g->m * (double)ldc);
    AT_TRY(at_space_set(s, "big", span >= 2147483648.0));
    return AT_OK;
}

double at_gemm_tolerance(int64_t k)
{
    /* Rounding in an f32 dot product grows like sqrt(k) * eps for inputs of mixed sign; a
     * wrong kernel (a missed tile, a stale value) is off by orders of magnitude more. */
    return 32.0 * FLT_EPSILON * sqrt((double)k) + 1e-6;
}

void at_gemm_reference(const at_gemm_problem *g, const float *a, const float *b, float *c,
                       double *bound, const int64_t *rows, size_t nrows)
{
    int64_t lda, ldb, ldc;
    resolve_ld(g, &lda, &ldb, &ldc);
    const int ta = trans_a(g), tb = trans_b(g);
    const int64_t n = g->n, k = g->k;
    double *acc = malloc((size_t)n * sizeof *acc);
    double *abs_acc = malloc((size_t)n * sizeof *abs_acc);
    if (!acc || !abs_acc) {
        free(acc);
        free(abs_acc);
        return;
    }
    size_t count = rows ? nrows : (size_t)g->m;
    for (size_t r = 0; r < count; r++) {
        int64_t i = rows ? rows[r] : (int64_t)r;
        for (int64_t j = 0; j < n; j++) acc[j] = abs_acc[j] = 0.0;
        /* i-p-j order keeps the inner loop on contiguous memory for nn and tn. */
        for (int64_t p = 0; p < k; p++) {
            double av = ta ? a[p * lda + i] : a[i * lda + p];
            if (tb) {
                for (int64_t j = 0; j < n; j++) {
                    double t = av * b[j * ldb + p];
                    acc[j] += t;
                    abs_acc[j] += fabs(t);
                }
            } else {
                const float *brow = b + p * ldb;
                for (int64_t j = 0; j < n; j++) {
                    double t = av * brow[j];
                    acc[j] += t;
                    abs_acc[j] += fabs(t);
                }
            }
        }
        for (int64_t j = 0; j < n; j++) {
            double c0 = g->beta != 0.0f ? (double)c[i * ldc + j] : 0.0;
            double v = (double)g->alpha * acc[j] + (double)g->beta * c0;
            if (bound)
                bound[i * ldc + j] = fabs((double)g->alpha) * abs_acc[j] + fabs(g->beta * c0);
            c[i * ldc + j] = (float)v;
        }
    }
    free(acc);
    free(abs_acc);
}

/* ---- the problem the pipeline drives ------------------------------------------------------- */

typedef struct gemm_self {
    at_gemm_problem g;
    int64_t lda, ldb, ldc;
    size_t na, nb, nc; /* elements */
    float *a, *b, *c0, *ref, *out;
    double *bound;
    int64_t *rows;
    size_t nrows;
    at_bbuf da, db, dc;
    int M, N, K, LDA, LDB, LDC;
} gemm_self;

static uint64_t rng_state(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill_random(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(rng_state(&s) >> 11) / 4503599627370496.0 - 1.0);
}

static at_status gemm_bind(at_problem *p, at_space *s)
{
    return at_gemm_bind(&((gemm_self *)p->self)->g, s);
}

static at_status gemm_prepare(at_problem *p, at_context *ctx)
{
    gemm_self *g = p->self;
    const at_gemm_problem *q = &g->g;
    g->na = (size_t)((trans_a(q) ? q->k : q->m) * g->lda);
    g->nb = (size_t)((trans_b(q) ? q->n : q->k) * g->ldb);
    g->nc = (size_t)(q->m * g->ldc);
    g->a = malloc(g->na * sizeof(float));
    g->b = malloc(g->nb * sizeof(float));
    g->c0 = malloc(g->nc * sizeof(float));
    g->ref = malloc(g->nc * sizeof(float));
    g->out = malloc(g->nc * sizeof(float));
    g->bound = calloc(g->nc, sizeof(double));
    /* Above ~1e9 multiply-adds the CPU reference checks a spread of rows, always including
     * the first and the last (where edge tiles are). */
    double work = (double)q->m * (double)q->n * (double)q->k;
    g->nrows = work > 1073741824.0 ? (size_t)fmax(16.0, 1073741824.0 / ((double)q->n * q->k))
                                   : (size_t)q->m;
    if (g->nrows > (size_t)q->m) g->nrows = (size_t)q->m;
    g->rows = malloc(g->nrows * sizeof *g->rows);
    if (!g->a || !g->b || !g->c0 || !g->ref || !g->out || !g->bound || !g->rows)
        return at_fail(AT_ERR_NO_MEMORY, "out of host memory for a %s problem", p->key);
    for (size_t r = 0; r < g->nrows; r++)
        g->rows[r] =
            g->nrows == 1 ? 0 : (int64_t)((double)r * (double)(q->m - 1) / (double)(g->nrows - 1));
    fill_random(g->a, g->na, 1);
    fill_random(g->b, g->nb, 2);
    fill_random(g->c0, g->nc, 3);
    memcpy(g->ref, g->c0, g->nc * sizeof(float));
    at_gemm_reference(q, g->a, g->b, g->ref, g->bound, g->rows, g->nrows);

    const at_backend_ops *ops = ctx->ops;
    AT_TRY(ops->buffer_alloc(ctx->dev, g->na * sizeof(float), &g->da));
    AT_TRY(ops->buffer_alloc(ctx->dev, g->nb * sizeof(float), &g->db));
    AT_TRY(ops->buffer_alloc(ctx->dev, g->nc * sizeof(float), &g->dc));
    AT_TRY(ops->buffer_write(ctx->dev, g->da, 0, g->a, g->na * sizeof(float)));
    AT_TRY(ops->buffer_write(ctx->dev, g->db, 0, g->b, g->nb * sizeof(float)));
    return ops->buffer_write(ctx->dev, g->dc, 0, g->c0, g->nc * sizeof(float));
}

/* Kernel arguments in the template's order: M N K alpha beta A lda B ldb C ldc. */
static size_t gemm_args(at_problem *p, at_karg *args)
{
    gemm_self *g = p->self;
    const at_karg a[] = {{sizeof(int), &g->M},        {sizeof(int), &g->N},
                         {sizeof(int), &g->K},        {sizeof(float), &g->g.alpha},
                         {sizeof(float), &g->g.beta}, {sizeof(void *), &g->da.handle},
                         {sizeof(int), &g->LDA},      {sizeof(void *), &g->db.handle},
                         {sizeof(int), &g->LDB},      {sizeof(void *), &g->dc.handle},
                         {sizeof(int), &g->LDC}};
    memcpy(args, a, sizeof a);
    return sizeof a / sizeof a[0];
}

static at_status gemm_reset(at_problem *p, at_context *ctx)
{
    gemm_self *g = p->self;
    /* With beta == 0 the kernel must not read C: give it NaN so a kernel that does shows up. */
    if (g->g.beta == 0.0f) {
        for (size_t i = 0; i < g->nc; i++) g->out[i] = NAN;
        return ctx->ops->buffer_write(ctx->dev, g->dc, 0, g->out, g->nc * sizeof(float));
    }
    return ctx->ops->buffer_write(ctx->dev, g->dc, 0, g->c0, g->nc * sizeof(float));
}

static at_status gemm_check(at_problem *p, at_context *ctx, double *max_rel_error, int *ok)
{
    gemm_self *g = p->self;
    AT_TRY(ctx->ops->buffer_read(ctx->dev, g->dc, 0, g->out, g->nc * sizeof(float)));
    double worst = 0.0;
    for (size_t r = 0; r < g->nrows; r++) {
        size_t row = (size_t)g->rows[r] * (size_t)g->ldc;
        for (int64_t j = 0; j < g->g.n; j++) {
            double d = fabs((double)g->out[row + j] - (double)g->ref[row + j]);
            double e = d / fmax(g->bound[row + j], 1e-30);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    }
    *max_rel_error = worst;
    *ok = worst <= at_gemm_tolerance(g->g.k);
    return AT_OK;
}

static void gemm_release(at_problem *p, at_context *ctx)
{
    gemm_self *g = p->self;
    if (ctx) {
        if (g->da.handle) ctx->ops->buffer_free(ctx->dev, g->da);
        if (g->db.handle) ctx->ops->buffer_free(ctx->dev, g->db);
        if (g->dc.handle) ctx->ops->buffer_free(ctx->dev, g->dc);
    }
    memset(&g->da, 0, sizeof g->da);
    memset(&g->db, 0, sizeof g->db);
    memset(&g->dc, 0, sizeof g->dc);
    free(g->a);
    free(g->b);
    free(g->c0);
    free(g->ref);
    free(g->out);
    free(g->bound);
    free(g->rows);
    g->a = g->b = g->c0 = g->ref = g->out = NULL;
    g->bound = NULL;
    g->rows = NULL;
}

at_status at_gemm_problem_make(const at_gemm_problem *q, at_problem **out)
{
    at_problem *p = calloc(1, sizeof *p);
    gemm_self *g = calloc(1, sizeof *g);
    if (!p || !g) {
        free(p);
        free(g);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    g->g = *q;
    resolve_ld(q, &g->lda, &g->ldb, &g->ldc);
    g->M = (int)q->m;
    g->N = (int)q->n;
    g->K = (int)q->k;
    g->LDA = (int)g->lda;
    g->LDB = (int)g->ldb;
    g->LDC = (int)g->ldc;
    p->template_name = "gemm";
    at_gemm_key(q, p->key, sizeof p->key);
    p->bind = gemm_bind;
    p->prepare = gemm_prepare;
    p->args = gemm_args;
    p->reset = gemm_reset;
    p->check = gemm_check;
    p->release = gemm_release;
    p->self = g;
    *out = p;
    return AT_OK;
}

void at_gemm_problem_free(at_problem *p)
{
    if (!p) return;
    gemm_release(p, NULL);
    free(p->self);
    free(p);
}
