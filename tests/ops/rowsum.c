/* rowsum.c — the test suite's own second operation: Y[i] = alpha * sum_j X[i, j], row-major,
 * f32. It is registered from outside the library (a constructor calling at_op_register) and
 * tuned through the same CLI verb and library calls as GEMM, touching nothing in the pipeline,
 * store, search, space loader or backends: the proof that an operation plugs in along
 * docs/adding-an-operation.md. Its template is tests/ops/templates/rowsum/. */
#include "rowsum.h"

#include "tuner/op.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM_MAX INT64_C(2147483647)

static int64_t ld_of(const rowsum_problem *p) { return p->ld ? p->ld : p->cols; }

static at_status validate(const void *v)
{
    const rowsum_problem *p = v;
    if (p->rows < 1 || p->rows > DIM_MAX)
        return at_fail(AT_ERR_INVALID_ARG, "rows = %lld is out of range (1 to %lld)",
                       (long long)p->rows, (long long)DIM_MAX);
    if (p->cols < 1 || p->cols > DIM_MAX)
        return at_fail(AT_ERR_INVALID_ARG, "cols = %lld is out of range (1 to %lld)",
                       (long long)p->cols, (long long)DIM_MAX);
    if (ld_of(p) < p->cols)
        return at_fail(AT_ERR_INVALID_ARG, "ld = %lld is less than cols = %lld", (long long)p->ld,
                       (long long)p->cols);
    if (!isfinite(p->alpha)) return at_fail(AT_ERR_INVALID_ARG, "alpha must be finite");
    return AT_OK;
}

static void key(const void *v, char *buf, size_t len)
{
    const rowsum_problem *p = v;
    snprintf(buf, len, "rowsum/%lldx%lld", (long long)p->rows, (long long)p->cols);
}

static at_status parse_key(const char *k, at_problem *p)
{
    char r[24], c[24], rest;
    if (sscanf(k, "rowsum/%23[0-9]x%23[0-9]%c", r, c, &rest) != 2)
        return at_fail(AT_ERR_INVALID_ARG, "'%s' is not a rowsum key (rowsum/ROWSxCOLS)", k);
    AT_TRY(at_problem_set(p, "rows", r));
    return at_problem_set(p, "cols", c);
}

static double distance(const void *v, const char *k)
{
    const rowsum_problem *p = v;
    long long r, c;
    char rest;
    if (sscanf(k, "rowsum/%lldx%lld%c", &r, &c, &rest) != 2 || r < 1 || c < 1) return INFINITY;
    return fabs(log((double)r / (double)p->rows)) + fabs(log((double)c / (double)p->cols));
}

static at_status bind(const void *v, at_space *s)
{
    const rowsum_problem *p = v;
    AT_TRY(at_space_set(s, "rows", p->rows));
    return at_space_set(s, "cols", p->cols);
}

static at_status scalar(const void *v, const char *name, int64_t *i, double *f)
{
    const rowsum_problem *p = v;
    if (strcmp(name, "alpha") == 0) {
        *f = p->alpha;
        return AT_OK;
    }
    *i = strcmp(name, "rows") == 0   ? p->rows
         : strcmp(name, "cols") == 0 ? p->cols
         : strcmp(name, "ld") == 0   ? ld_of(p)
                                     : -1;
    return *i < 0 ? AT_ERR_TEMPLATE : AT_OK;
}

/* The reference sums and their error bounds, kept to check candidates. */
typedef struct ref {
    double *sum, *bound;
} ref;

static void data_free(at_op_data *d)
{
    free(d->buf[0].init);
    free(d->buf[1].init);
    ref *r = d->self;
    if (r) {
        free(r->sum);
        free(r->bound);
        free(r);
    }
    memset(d, 0, sizeof *d);
}

/* X (rows x ld) and Y (rows, the output). */
static at_status layout(const void *v, at_op_buffer *out)
{
    const rowsum_problem *p = v;
    out[0] =
        (at_op_buffer){.dtype = AT_DTYPE_F32, .count = (size_t)(p->rows * ld_of(p)), .output = 0};
    out[1] = (at_op_buffer){.dtype = AT_DTYPE_F32, .count = (size_t)p->rows, .output = 1};
    return AT_OK;
}

static at_status data_make(const void *v, at_op_data *d)
{
    const rowsum_problem *p = v;
    memset(d, 0, sizeof *d);
    layout(v, d->buf);
    const size_t nx = d->buf[0].count, ny = d->buf[1].count;
    ref *r = calloc(1, sizeof *r);
    d->self = r;
    d->buf[0].init = malloc(nx * sizeof(float));
    d->buf[1].init = malloc(ny * sizeof(float));
    if (r) {
        r->sum = malloc(ny * sizeof *r->sum);
        r->bound = malloc(ny * sizeof *r->bound);
    }
    if (!r || !r->sum || !r->bound || !d->buf[0].init || !d->buf[1].init) {
        data_free(d);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < nx; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        d->buf[0].init[i] = (float)((double)(s >> 11) / 4503599627370496.0 - 1.0);
    }
    for (int64_t i = 0; i < p->rows; i++) {
        double sum = 0, bound = 0;
        for (int64_t j = 0; j < p->cols; j++) {
            double x = d->buf[0].init[i * ld_of(p) + j];
            sum += x;
            bound += fabs(x);
        }
        r->sum[i] = p->alpha * sum;
        r->bound[i] = fabs(p->alpha) * bound;
        d->buf[1].init[i] = NAN; /* the kernel writes Y without reading it */
    }
    return AT_OK;
}

static at_status check(const void *v, const at_op_data *d, float *const *out, double *err, int *ok)
{
    const rowsum_problem *p = v;
    const ref *r = d->self;
    double worst = 0;
    for (int64_t i = 0; i < p->rows; i++) {
        double e = fabs((double)out[1][i] - r->sum[i]) / fmax(r->bound[i], 1e-30);
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    *err = worst;
    *ok = worst <= 1e-5 + 8.0 * 1.2e-7 * sqrt((double)p->cols);
    return AT_OK;
}

static double flops(const void *v)
{
    const rowsum_problem *p = v;
    return (double)p->rows * (double)p->cols;
}

static double bytes(const void *v)
{
    const rowsum_problem *p = v;
    return 4.0 * ((double)p->rows * (double)p->cols + (double)p->rows);
}

#define F(field) offsetof(rowsum_problem, field)
static const at_op_field fields[] = {
    {{.name = "rows",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .example = "256",
      .shape = 1,
      .help = "rows of X (and elements of Y)"},
     F(rows)},
    {{.name = "cols",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .example = "256",
      .shape = 1,
      .help = "columns of X: the length of each sum"},
     F(cols)},
    {{.name = "alpha", .kind = AT_FIELD_REAL, .def = "1", .help = "Y = alpha * row sums"},
     F(alpha)},
    {{.name = "ld",
      .kind = AT_FIELD_INT,
      .lo = 0,
      .hi = DIM_MAX,
      .def = "0",
      .help = "leading dimension of X; 0: packed"},
     F(ld)},
};
#undef F

static const char *const roles[] = {"X", "Y", NULL};

const at_op rowsum_op = {
    .name = "rowsum",
    .help = "Tunes Y = alpha * (the sums of the rows of X), f32, row-major (the test suite's\n"
            "second operation).",
    .size = sizeof(rowsum_problem),
    .fields = fields,
    .nfields = sizeof fields / sizeof fields[0],
    .roles = roles,
    .validate = validate,
    .key = key,
    .parse_key = parse_key,
    .distance = distance,
    .bind = bind,
    .scalar = scalar,
    .layout = layout,
    .data_make = data_make,
    .check = check,
    .data_free = data_free,
    .flops = flops,
    .bytes = bytes,
};

__attribute__((constructor)) static void register_rowsum(void)
{
    if (at_op_register(&rowsum_op) != AT_OK) {
        fprintf(stderr, "rowsum: %s\n", at_errmsg());
        abort();
    }
}

/* ---- the typed calls --------------------------------------------------------------------------
 */

at_status rowsum_tune(at_context *ctx, const rowsum_problem *p, const at_tune_options *opts,
                      at_tune_report *report, at_kernel **out)
{
    at_problem q = at_problem_view(&rowsum_op, p);
    return at_tune(ctx, p ? &q : NULL, opts, report, out);
}

at_status rowsum_get(at_context *ctx, const rowsum_problem *p, unsigned flags, at_kernel **out,
                     at_source *source)
{
    at_problem q = at_problem_view(&rowsum_op, p);
    return at_get(ctx, p ? &q : NULL, flags, out, source);
}

at_status rowsum_launch(at_kernel *k, at_devptr x, at_devptr y, void *stream)
{
    const at_devptr bufs[2] = {x, y};
    return at_kernel_launch(k, bufs, 2, stream);
}
