/* gemm.c — the GEMM operation: C = alpha*op(A)*op(B) + beta*C, row-major. Its fields,
 * validation, database key and nearest-shape distance, the problem variables it binds into a
 * template's space, the CPU reference and check every candidate is compared with, its cost-model
 * prior, and the typed public calls (at_gemm_*) over the generic ones. */
#include "tuner/ops/gemm.h"

#include "tuner/ops/gemm_cost.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_layouts[] = {"nn", "nt", "tn", "tt", NULL};

const char *at_layout_name(at_layout l) { return (unsigned)l < 4 ? g_layouts[l] : "?"; }

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

#define DIM_MAX INT64_C(2147483647) /* kernels take 32-bit sizes */

at_status at_gemm_validate(const at_gemm_problem *g)
{
    if (!g) return at_fail(AT_ERR_INVALID_ARG, "no problem given");
    const struct {
        const char *name;
        int64_t v;
    } dims[] = {{"m", g->m}, {"n", g->n}, {"k", g->k}};
    for (int i = 0; i < 3; i++)
        if (dims[i].v < 1 || dims[i].v > DIM_MAX)
            return at_fail(AT_ERR_INVALID_ARG, "%s = %lld is out of range (1 to %lld)",
                           dims[i].name, (long long)dims[i].v, (long long)DIM_MAX);
    if ((unsigned)g->layout > AT_LAYOUT_TT)
        return at_fail(AT_ERR_INVALID_ARG, "layout %d is not one of nn, nt, tn, tt",
                       (int)g->layout);
    if ((unsigned)g->dtype > AT_DTYPE_BF16)
        return at_fail(AT_ERR_INVALID_ARG, "dtype %d is not one of f32, f16, bf16", (int)g->dtype);
    int64_t lda, ldb, ldc;
    resolve_ld(g, &lda, &ldb, &ldc);
    const struct {
        const char *name;
        int64_t v, min;
    } lds[] = {{"lda", lda, trans_a(g) ? g->m : g->k},
               {"ldb", ldb, trans_b(g) ? g->k : g->n},
               {"ldc", ldc, g->n}};
    for (int i = 0; i < 3; i++)
        if (lds[i].v < lds[i].min || lds[i].v > DIM_MAX)
            return at_fail(AT_ERR_INVALID_ARG, "%s = %lld is out of range (%lld to %lld)",
                           lds[i].name, (long long)lds[i].v, (long long)lds[i].min,
                           (long long)DIM_MAX);
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
    /* The 16-bit templates take the element type as a problem variable (0 f16, 1 bf16). */
    if (g->dtype != AT_DTYPE_F32) AT_TRY(at_space_set(s, "dt", g->dtype == AT_DTYPE_BF16));
    /* The leading dimensions, for templates that declare them: a tensor map (TMA) needs rows
     * 16-byte aligned, and its row stride comes from them. */
    if (at_space_has_problem(s, "lda")) AT_TRY(at_space_set(s, "lda", lda));
    if (at_space_has_problem(s, "ldb")) AT_TRY(at_space_set(s, "ldb", ldb));
    if (at_space_has_problem(s, "ldc")) AT_TRY(at_space_set(s, "ldc", ldc));
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

/* ---- the operation's descriptor ------------------------------------------------------------ */

static at_status op_validate(const void *p) { return at_gemm_validate(p); }

static void op_key(const void *p, char *buf, size_t len) { at_gemm_key(p, buf, len); }

/* Log-ratio distance over m, n, k to a tuned key of the same dtype and layout. */
static double op_distance(const void *p, const char *key)
{
    const at_gemm_problem *g = p;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gemm/%s/%s/", at_dtype_name(g->dtype),
             at_layout_name(g->layout));
    long long m, n, k;
    char rest;
    if (strncmp(key, prefix, strlen(prefix)) != 0 ||
        sscanf(key + strlen(prefix), "%lldx%lldx%lld%c", &m, &n, &k, &rest) != 3 || m < 1 ||
        n < 1 || k < 1)
        return INFINITY;
    return fabs(log((double)m / (double)g->m)) + fabs(log((double)n / (double)g->n)) +
           fabs(log((double)k / (double)g->k));
}

static at_status op_parse_key(const char *key, at_problem *p)
{
    char dt[8], lay[4], m[24], n[24], k[24], rest;
    if (sscanf(key, "gemm/%7[^/]/%3[^/]/%23[0-9]x%23[0-9]x%23[0-9]%c", dt, lay, m, n, k, &rest) !=
        5)
        return at_fail(AT_ERR_INVALID_ARG, "'%s' is not a GEMM key (gemm/DTYPE/LAYOUT/MxNxK)", key);
    AT_TRY(at_problem_set(p, "dtype", dt));
    AT_TRY(at_problem_set(p, "layout", lay));
    AT_TRY(at_problem_set(p, "m", m));
    AT_TRY(at_problem_set(p, "n", n));
    return at_problem_set(p, "k", k);
}

static const char *op_dtype(const void *p)
{
    return at_dtype_name(((const at_gemm_problem *)p)->dtype);
}

static at_status op_bind(const void *p, at_space *s) { return at_gemm_bind(p, s); }

static at_status op_scalar(const void *p, const char *name, int64_t *i, double *f)
{
    const at_gemm_problem *g = p;
    int64_t ld[3];
    resolve_ld(g, &ld[0], &ld[1], &ld[2]);
    const struct {
        const char *name;
        int64_t v;
    } ints[] = {{"m", g->m},    {"n", g->n},    {"k", g->k},
                {"lda", ld[0]}, {"ldb", ld[1]}, {"ldc", ld[2]}};
    for (size_t j = 0; j < sizeof ints / sizeof ints[0]; j++)
        if (strcmp(name, ints[j].name) == 0) {
            *i = ints[j].v;
            *f = (double)ints[j].v;
            return AT_OK;
        }
    if (strcmp(name, "alpha") == 0 || strcmp(name, "beta") == 0) {
        *f = strcmp(name, "alpha") == 0 ? g->alpha : g->beta;
        *i = (int64_t)*f;
        return AT_OK;
    }
    return AT_ERR_TEMPLATE;
}

static double op_flops(const void *p)
{
    const at_gemm_problem *g = p;
    return 2.0 * (double)g->m * (double)g->n * (double)g->k;
}

static double op_bytes(const void *p)
{
    const at_gemm_problem *g = p;
    double e = (double)at_dtype_size(g->dtype), c = (double)g->m * (double)g->n;
    return e * ((double)g->m * (double)g->k + (double)g->k * (double)g->n +
                (g->beta != 0.0f ? 2.0 : 1.0) * c);
}

static at_status op_prior(const void *p, const at_space *s, const at_device_info *d,
                          const int64_t *configs, size_t n, double *out)
{
    (void)p;
    return at_gemm_cost_prior(s, d, configs, n, out);
}

/* What is kept to check a candidate: the reference on a spread of rows and its error bound. */
typedef struct gemm_check {
    float *ref;
    double *bound;
    int64_t *rows;
    size_t nrows;
    int64_t ldc;
} gemm_check;

static void op_data_free(at_op_data *d)
{
    for (int i = 0; i < AT_MAX_BUFFERS; i++) free(d->buf[i].init);
    gemm_check *c = d->self;
    if (c) {
        free(c->ref);
        free(c->bound);
        free(c->rows);
        free(c);
    }
    memset(d, 0, sizeof *d);
}

/* A (op(A) m x k), B (op(B) k x n) and C (m x n, the output), with their leading dimensions. */
static at_status op_layout(const void *p, at_op_buffer *out)
{
    const at_gemm_problem *q = p;
    int64_t lda, ldb, ldc;
    resolve_ld(q, &lda, &ldb, &ldc);
    out[0] = (at_op_buffer){
        .dtype = q->dtype, .count = (size_t)((trans_a(q) ? q->k : q->m) * lda), .output = 0};
    out[1] = (at_op_buffer){
        .dtype = q->dtype, .count = (size_t)((trans_b(q) ? q->n : q->k) * ldb), .output = 0};
    out[2] = (at_op_buffer){.dtype = q->dtype, .count = (size_t)(q->m * ldc), .output = 1};
    return AT_OK;
}

static at_status op_data_make(const void *p, at_op_data *d)
{
    const at_gemm_problem *q = p;
    int64_t lda, ldb, ldc;
    resolve_ld(q, &lda, &ldb, &ldc);
    memset(d, 0, sizeof *d);
    op_layout(p, d->buf);
    const size_t na = d->buf[0].count, nb = d->buf[1].count, nc = d->buf[2].count;
    gemm_check *c = calloc(1, sizeof *c);
    d->self = c;
    for (int i = 0; i < 3; i++) d->buf[i].init = malloc(d->buf[i].count * sizeof(float));
    /* Above ~1e9 multiply-adds the CPU reference checks a spread of rows, always including
     * the first and the last (where edge tiles are). */
    double work = (double)q->m * (double)q->n * (double)q->k;
    size_t nrows = work > 1073741824.0 ? (size_t)fmax(16.0, 1073741824.0 / ((double)q->n * q->k))
                                       : (size_t)q->m;
    if (nrows > (size_t)q->m) nrows = (size_t)q->m;
    if (c) {
        c->ref = malloc(nc * sizeof(float));
        c->bound = calloc(nc, sizeof(double));
        c->rows = malloc(nrows * sizeof *c->rows);
        c->nrows = nrows;
        c->ldc = ldc;
    }
    if (!c || !c->ref || !c->bound || !c->rows || !d->buf[0].init || !d->buf[1].init ||
        !d->buf[2].init) {
        op_data_free(d);
        return at_fail(AT_ERR_NO_MEMORY, "out of host memory for a GEMM problem of %lldx%lldx%lld",
                       (long long)q->m, (long long)q->n, (long long)q->k);
    }
    for (size_t r = 0; r < nrows; r++)
        c->rows[r] =
            nrows == 1 ? 0 : (int64_t)((double)r * (double)(q->m - 1) / (double)(nrows - 1));
    at_dtype_fill_random(d->buf[0].init, na, 1, q->dtype);
    at_dtype_fill_random(d->buf[1].init, nb, 2, q->dtype);
    at_dtype_fill_random(c->ref, nc, 3, q->dtype);
    /* With beta == 0 the kernel must not read C: give it NaN so a kernel that does shows up. */
    for (size_t i = 0; i < nc; i++) d->buf[2].init[i] = q->beta == 0.0f ? NAN : c->ref[i];
    at_gemm_reference(q, d->buf[0].init, d->buf[1].init, c->ref, c->bound, c->rows, c->nrows);
    if (nrows < (size_t)q->m) { /* only the checked rows of C come back */
        d->buf[2].rows = c->rows;
        d->buf[2].nrows = nrows;
        d->buf[2].row_stride = (size_t)ldc;
        d->buf[2].row_len = (size_t)q->n;
    }
    return AT_OK;
}

static at_status op_check(const void *p, const at_op_data *d, float *const *out,
                          double *max_rel_error, int *ok)
{
    const at_gemm_problem *q = p;
    const gemm_check *c = d->self;
    const float *got = out[2];
    double worst = 0.0;
    for (size_t r = 0; r < c->nrows; r++) {
        size_t row = (size_t)c->rows[r] * (size_t)c->ldc;
        for (int64_t j = 0; j < q->n; j++) {
            double diff = fabs((double)got[row + j] - (double)c->ref[row + j]);
            double e = diff / fmax(c->bound[row + j], 1e-30);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    }
    *max_rel_error = worst;
    *ok = worst <= at_gemm_tolerance(q->k, q->dtype);
    return AT_OK;
}

#define F(field) offsetof(at_gemm_problem, field)
static const at_op_field g_fields[] = {
    {{.name = "m",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .example = "1024",
      .shape = 1,
      .help = "rows of C and of op(A)"},
     F(m)},
    {{.name = "n",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .example = "1024",
      .shape = 1,
      .help = "columns of C and of op(B)"},
     F(n)},
    {{.name = "k",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .def = "=m",
      .shape = 1,
      .help = "the inner dimension; defaults to m"},
     F(k)},
    {{.name = "dtype",
      .kind = AT_FIELD_CHOICE,
      .choices = at_dtype_table,
      .def = "f32",
      .shape = 1,
      .help = "element type (f16/bf16 on CUDA and HIP, f32 accumulation)"},
     F(dtype)},
    {{.name = "layout",
      .kind = AT_FIELD_CHOICE,
      .choices = g_layouts,
      .def = "nn",
      .shape = 1,
      .help = "n: operand as stored, t: transposed (A then B)"},
     F(layout)},
    {{.name = "alpha", .kind = AT_FIELD_REAL, .def = "1", .help = "C = alpha*op(A)*op(B) + ..."},
     F(alpha)},
    {{.name = "beta", .kind = AT_FIELD_REAL, .def = "0", .help = "... + beta*C"}, F(beta)},
    {{.name = "lda",
      .kind = AT_FIELD_INT,
      .lo = 0,
      .hi = DIM_MAX,
      .def = "0",
      .help = "leading dimension of A in elements; 0: packed"},
     F(lda)},
    {{.name = "ldb",
      .kind = AT_FIELD_INT,
      .lo = 0,
      .hi = DIM_MAX,
      .def = "0",
      .help = "leading dimension of B; 0: packed"},
     F(ldb)},
    {{.name = "ldc",
      .kind = AT_FIELD_INT,
      .lo = 0,
      .hi = DIM_MAX,
      .def = "0",
      .help = "leading dimension of C; 0: packed"},
     F(ldc)},
};
#undef F

static const char *const g_roles[] = {"A", "B", "C", NULL};

/* The proxy of a GEMM: K cut to a multiple of the largest K step of the space, BK (gemm.cl and
 * the GPU templates) or KC (gemm_cpu's K block), so every config's K loop runs whole tiles over
 * the same M x N grid of work-groups; at least one step, less than half of K. */
static at_status op_proxy(const void *p, const at_space *s, double fraction, char *key, size_t len)
{
    at_gemm_problem q = *(const at_gemm_problem *)p;
    int64_t step = 0;
    for (size_t j = 0; j < s->nparams; j++)
        if (strcmp(s->params[j].name, "BK") == 0 || strcmp(s->params[j].name, "KC") == 0)
            for (size_t v = 0; v < s->params[j].nvalues; v++)
                if (s->params[j].values[v] > step) step = s->params[j].values[v];
    if (step <= 0) return at_fail(AT_ERR_UNSUPPORTED, "the space has no BK or KC to slice K by");
    int64_t k = (int64_t)((double)q.k * fraction) / step * step;
    if (k < step) k = step;
    if (2 * k > q.k) return at_fail(AT_ERR_UNSUPPORTED, "K is too small to slice");
    q.k = k;
    q.lda = q.ldb = q.ldc = 0; /* packed, as the key's problem */
    at_gemm_key(&q, key, len);
    return AT_OK;
}

const at_op at_op_gemm = {
    .name = "gemm",
    .help =
        "Tunes C = A*B (C = alpha*op(A)*op(B) + beta*C in the library; row-major; f32 on\n"
        "every backend, f16/bf16 on CUDA and HIP with f32 accumulation) for one problem on one\n"
        "device.",
    .size = sizeof(at_gemm_problem),
    .fields = g_fields,
    .nfields = sizeof g_fields / sizeof g_fields[0],
    .roles = g_roles,
    .validate = op_validate,
    .key = op_key,
    .parse_key = op_parse_key,
    .distance = op_distance,
    .dtype = op_dtype,
    .bind = op_bind,
    .scalar = op_scalar,
    .layout = op_layout,
    .data_make = op_data_make,
    .check = op_check,
    .data_free = op_data_free,
    .flops = op_flops,
    .bytes = op_bytes,
    .prior = op_prior,
    .proxy = op_proxy,
};

/* ---- the typed public calls ---------------------------------------------------------------- */

at_status at_gemm_get(at_context *ctx, const at_gemm_problem *p, unsigned flags, at_kernel **out,
                      at_source *source)
{
    at_problem q = at_problem_view(&at_op_gemm, p);
    return at_get(ctx, p ? &q : NULL, flags, out, source);
}

at_status at_gemm_tune(at_context *ctx, const at_gemm_problem *p, const at_tune_options *opts,
                       at_tune_report *report, at_kernel **out)
{
    at_problem q = at_problem_view(&at_op_gemm, p);
    return at_tune(ctx, p ? &q : NULL, opts, report, out);
}

at_status at_gemm_launch(at_kernel *k, at_devptr a, at_devptr b, at_devptr c, void *stream)
{
    const at_devptr bufs[3] = {a, b, c};
    return at_kernel_launch(k, bufs, 3, stream);
}

at_status at_gemm_space(at_context *ctx, const at_gemm_problem *p, at_space_info *info,
                        int (*visit)(void *user, const char *config), void *user)
{
    at_problem q = at_problem_view(&at_op_gemm, p);
    return at_space_count(ctx, p ? &q : NULL, NULL, info, visit, user);
}

at_status at_gemm_compile_space(const char *backend, const char *arch, const at_gemm_problem *p,
                                int64_t limit, uint64_t seed, int threads, at_compile_report *out,
                                char *why, size_t whylen)
{
    at_problem q = at_problem_view(&at_op_gemm, p);
    return at_compile_space(backend, arch, p ? &q : NULL, NULL, limit, seed, threads, out, why,
                            whylen);
}
