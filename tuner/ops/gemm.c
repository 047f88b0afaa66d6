/* gemm.c — the GEMM problem: validation, database key, CPU reference, and the buffers and
 * correctness check the pipeline uses to test every candidate. */
#include "tuner/ops/gemm_cost.h"
#include "tuner/tuner.h"

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
    if (ctx && !at_gemm_template_name(g->dtype, ctx->info.backend, ctx->info.arch))
        return at_fail(AT_ERR_UNSUPPORTED,
                       "dtype %s is not supported on the %s backend (f32 only; f16 and bf16 "
                       "need the cuda or hip backend)",
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

const char *at_gemm_template_name(at_dtype d, const char *backend, const char *arch)
{
    if (d == AT_DTYPE_F32) return "gemm";
    /* f16 and bf16 run on matrix units: tensor cores on CUDA — wgmma on Hopper (sm_90a, the
     * arch the backend picks for compute capability 9.0), mma.sync elsewhere — MFMA on HIP. */
    if (strcmp(backend, "cuda") == 0)
        return arch && strcmp(arch, "sm_90a") == 0 ? "gemm_wgmma" : "gemm_mma";
    return strcmp(backend, "hip") == 0 ? "gemm_mfma" : NULL;
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
    /* The 16-bit templates take the element type as a problem variable (0 f16, 1 bf16). */
    if (g->dtype != AT_DTYPE_F32) AT_TRY(at_space_set(s, "dt", g->dtype == AT_DTYPE_BF16));
    return AT_OK;
}

double at_gemm_tolerance(int64_t k, at_dtype d)
{
    /* Rounding in an f32 dot product grows like sqrt(k) * eps for inputs of mixed sign; a
     * wrong kernel (a missed tile, a stale value) is off by orders of magnitude more. A 16-bit
     * output adds its own rounding: half an ulp of the result. */
    double out = d == AT_DTYPE_F16 ? 0x1p-11 : d == AT_DTYPE_BF16 ? 0x1p-8 : 0.0;
    return 32.0 * FLT_EPSILON * sqrt((double)k) + 1e-6 + out;
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

/* ---- 16-bit element types ------------------------------------------------------------------- */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even, as the GPUs' conversions do. */
static uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

static uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflows to infinity */
    if (mag < 0x38800000u) {                                   /* subnormal or zero in f16 */
        if (mag < 0x33000000u) return (uint16_t)sign;
        uint32_t m = (mag & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(mag >> 23); /* 14..24 */
        uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1);
        uint32_t h = m >> shift;
        if (rest > half || (rest == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((mag >> 13) - (112u << 10)); /* rebias exponent 127 -> 15 */
    uint32_t rest = mag & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) return (sign ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f; /* 2^-24 */
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

size_t at_dtype_size(at_dtype d) { return d == AT_DTYPE_F32 ? 4 : 2; }

void at_dtype_from_f32(at_dtype d, const float *src, void *dst, size_t n)
{
    uint16_t *h = dst;
    if (d == AT_DTYPE_F32)
        memcpy(dst, src, n * 4);
    else if (d == AT_DTYPE_F16)
        for (size_t i = 0; i < n; i++) h[i] = f32_to_f16(src[i]);
    else
        for (size_t i = 0; i < n; i++) h[i] = f32_to_bf16(src[i]);
}

void at_dtype_to_f32(at_dtype d, const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    if (d == AT_DTYPE_F32)
        memcpy(dst, src, n * 4);
    else if (d == AT_DTYPE_F16)
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(h[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(h[i]);
}

/* ---- the problem the pipeline drives ------------------------------------------------------- */

typedef struct gemm_self {
    at_gemm_problem g;
    int64_t lda, ldb, ldc;
    size_t na, nb, nc; /* elements */
    float *a, *b, *c0, *ref, *out;
    void *stage; /* device-format copy of one operand (16-bit types) */
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

static at_status gemm_prior(at_problem *p, const at_space *s, const at_device_info *d,
                            const int64_t *configs, size_t n, double *out)
{
    (void)p;
    return at_gemm_cost_prior(s, d, configs, n, out);
}

/* Host floats to a device buffer in the problem's element type, and back. */
static at_status upload(gemm_self *g, at_context *ctx, at_bbuf b, const float *src, size_t n)
{
    at_dtype_from_f32(g->g.dtype, src, g->stage, n);
    return ctx->ops->buffer_write(ctx->dev, b, 0, g->stage, n * at_dtype_size(g->g.dtype));
}

static at_status download(gemm_self *g, at_context *ctx, at_bbuf b, float *dst, size_t n)
{
    AT_TRY(ctx->ops->buffer_read(ctx->dev, b, 0, g->stage, n * at_dtype_size(g->g.dtype)));
    at_dtype_to_f32(g->g.dtype, g->stage, dst, n);
    return AT_OK;
}

/* Random values in [-1, 1], exactly representable in the element type, so the reference sees
 * the very inputs the device does. */
static void fill_inputs(float *x, size_t n, uint64_t seed, at_dtype d, void *stage)
{
    fill_random(x, n, seed);
    at_dtype_from_f32(d, x, stage, n);
    at_dtype_to_f32(d, stage, x, n);
}

static at_status gemm_prepare(at_problem *p, at_context *ctx)
{
    gemm_self *g = p->self;
    const at_gemm_problem *q = &g->g;
    const size_t es = at_dtype_size(q->dtype);
    g->na = (size_t)((trans_a(q) ? q->k : q->m) * g->lda);
    g->nb = (size_t)((trans_b(q) ? q->n : q->k) * g->ldb);
    g->nc = (size_t)(q->m * g->ldc);
    size_t most = g->na > g->nb ? g->na : g->nb;
    most = most > g->nc ? most : g->nc;
    g->a = malloc(g->na * sizeof(float));
    g->b = malloc(g->nb * sizeof(float));
    g->c0 = malloc(g->nc * sizeof(float));
    g->ref = malloc(g->nc * sizeof(float));
    g->out = malloc(g->nc * sizeof(float));
    g->stage = malloc(most * es);
    g->bound = calloc(g->nc, sizeof(double));
    /* Above ~1e9 multiply-adds the CPU reference checks a spread of rows, always including
     * the first and the last (where edge tiles are). */
    double work = (double)q->m * (double)q->n * (double)q->k;
    g->nrows = work > 1073741824.0 ? (size_t)fmax(16.0, 1073741824.0 / ((double)q->n * q->k))
                                   : (size_t)q->m;
    if (g->nrows > (size_t)q->m) g->nrows = (size_t)q->m;
    g->rows = malloc(g->nrows * sizeof *g->rows);
    if (!g->a || !g->b || !g->c0 || !g->ref || !g->out || !g->stage || !g->bound || !g->rows)
        return at_fail(AT_ERR_NO_MEMORY, "out of host memory for a %s problem", p->key);
    for (size_t r = 0; r < g->nrows; r++)
        g->rows[r] =
            g->nrows == 1 ? 0 : (int64_t)((double)r * (double)(q->m - 1) / (double)(g->nrows - 1));
    fill_inputs(g->a, g->na, 1, q->dtype, g->stage);
    fill_inputs(g->b, g->nb, 2, q->dtype, g->stage);
    fill_inputs(g->c0, g->nc, 3, q->dtype, g->stage);
    memcpy(g->ref, g->c0, g->nc * sizeof(float));
    at_gemm_reference(q, g->a, g->b, g->ref, g->bound, g->rows, g->nrows);

    const at_backend_ops *ops = ctx->ops;
    AT_TRY(ops->buffer_alloc(ctx->dev, g->na * es, &g->da));
    AT_TRY(ops->buffer_alloc(ctx->dev, g->nb * es, &g->db));
    AT_TRY(ops->buffer_alloc(ctx->dev, g->nc * es, &g->dc));
    AT_TRY(upload(g, ctx, g->da, g->a, g->na));
    AT_TRY(upload(g, ctx, g->db, g->b, g->nb));
    return upload(g, ctx, g->dc, g->c0, g->nc);
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
        return upload(g, ctx, g->dc, g->out, g->nc);
    }
    return upload(g, ctx, g->dc, g->c0, g->nc);
}

static at_status gemm_check(at_problem *p, at_context *ctx, double *max_rel_error, int *ok)
{
    gemm_self *g = p->self;
    AT_TRY(download(g, ctx, g->dc, g->out, g->nc));
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
    *ok = worst <= at_gemm_tolerance(g->g.k, g->g.dtype);
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
    free(g->stage);
    free(g->bound);
    free(g->rows);
    g->a = g->b = g->c0 = g->ref = g->out = NULL;
    g->stage = NULL;
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
    p->prior = gemm_prior;
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
