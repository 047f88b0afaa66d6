/* attention.c — the attention operation: O = softmax(Q K^T * scale [+ causal mask]) V and the
 * log-sum-exp of each row (docs/attention.md). Its fields, validation, database key and
 * nearest-shape distance, the problem variables it binds into a template's space, the kernel
 * scalars (sizes, the resolved scale, strides of either layout), the CPU reference and check of
 * O and LSE, and the typed public calls (at_attention_*) over the generic ones. */
#include "tuner/ops/attention.h"

#include "tuner/ops/attention_cost.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_layouts[] = {"bshd", "bhsd", NULL};
static const int64_t g_head_dims[] = {32, 64, 80, 96, 128, 256};

#define DIM_MAX INT64_C(2147483647) /* kernels take 32-bit sizes */
/* Elements of one buffer: offsets reach the kernels as 64-bit strides. */
#define ELEMS_MAX 4503599627370496.0 /* 2^52 */

static double q_elems(const at_attention_problem *p)
{
    return (double)p->batch * (double)p->seq * (double)p->heads * (double)p->head_dim;
}
static double kv_elems(const at_attention_problem *p)
{
    return (double)p->batch * (double)p->seq_kv * (double)p->kv_heads * (double)p->head_dim;
}

at_status at_attention_validate(const at_attention_problem *p)
{
    if (!p) return at_fail(AT_ERR_INVALID_ARG, "no problem given");
    const struct {
        const char *name;
        int64_t v;
    } dims[] = {{"batch", p->batch}, {"heads", p->heads},   {"kv-heads", p->kv_heads},
                {"seq", p->seq},     {"seq-kv", p->seq_kv}, {"head-dim", p->head_dim}};
    for (int i = 0; i < 6; i++)
        if (dims[i].v < 1 || dims[i].v > DIM_MAX)
            return at_fail(AT_ERR_INVALID_ARG, "%s = %lld is out of range (1 to %lld)",
                           dims[i].name, (long long)dims[i].v, (long long)DIM_MAX);
    int dim_ok = 0;
    for (size_t i = 0; i < sizeof g_head_dims / sizeof g_head_dims[0]; i++)
        dim_ok |= p->head_dim == g_head_dims[i];
    if (!dim_ok)
        return at_fail(AT_ERR_INVALID_ARG,
                       "head-dim = %lld is not supported (32, 64, 80, 96, 128 or 256)",
                       (long long)p->head_dim);
    if (p->kv_heads > p->heads || p->heads % p->kv_heads != 0)
        return at_fail(AT_ERR_INVALID_ARG,
                       "heads = %lld is not a multiple of kv-heads = %lld (grouped-query "
                       "attention shares each key/value head among heads / kv-heads query heads)",
                       (long long)p->heads, (long long)p->kv_heads);
    if (p->causal && p->seq_kv < p->seq)
        return at_fail(AT_ERR_INVALID_ARG,
                       "seq-kv = %lld < seq = %lld with causal: the mask is aligned bottom-right "
                       "(query i sees keys up to i + seq-kv - seq), so the first rows would see "
                       "no key",
                       (long long)p->seq_kv, (long long)p->seq);
    if (p->causal != 0 && p->causal != 1)
        return at_fail(AT_ERR_INVALID_ARG, "causal = %d is not 0 or 1", p->causal);
    if ((unsigned)p->dtype > AT_DTYPE_BF16)
        return at_fail(AT_ERR_INVALID_ARG, "dtype %d is not one of f32, f16, bf16", (int)p->dtype);
    if ((unsigned)p->layout > AT_ATTENTION_BHSD)
        return at_fail(AT_ERR_INVALID_ARG, "layout %d is not one of bshd, bhsd", (int)p->layout);
    if (!isfinite(p->scale) || p->scale < 0)
        return at_fail(AT_ERR_INVALID_ARG, "scale = %g is not a finite number >= 0 (0: 1/sqrt(d))",
                       (double)p->scale);
    if (q_elems(p) > ELEMS_MAX || kv_elems(p) > ELEMS_MAX)
        return at_fail(AT_ERR_INVALID_ARG, "the problem's buffers are too large (over 2^52 "
                                           "elements)");
    return AT_OK;
}

void at_attention_key(const at_attention_problem *p, char *buf, size_t len)
{
    snprintf(buf, len, "attention/%s/%s/d%lld/%s/%lldx%lldx%lld/%lldx%lld", at_dtype_name(p->dtype),
             (unsigned)p->layout < 2 ? g_layouts[p->layout] : "?", (long long)p->head_dim,
             p->causal ? "causal" : "full", (long long)p->batch, (long long)p->heads,
             (long long)p->kv_heads, (long long)p->seq, (long long)p->seq_kv);
}

float at_attention_scale(const at_attention_problem *p)
{
    return p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)p->head_dim));
}

at_attention_strides at_attention_strides_of(const at_attention_problem *p)
{
    const int64_t d = p->head_dim;
    at_attention_strides s;
    if (p->layout == AT_ATTENTION_BHSD) {
        s = (at_attention_strides){{p->heads * p->seq * d, p->seq * d, d},
                                   {p->kv_heads * p->seq_kv * d, p->seq_kv * d, d}};
    } else {
        s = (at_attention_strides){{p->seq * p->heads * d, d, p->heads * d},
                                   {p->seq_kv * p->kv_heads * d, d, p->kv_heads * d}};
    }
    return s;
}

/* The keys query row i sees: [0, visible). */
static int64_t visible_keys(const at_attention_problem *p, int64_t i)
{
    if (!p->causal) return p->seq_kv;
    int64_t last = i + p->seq_kv - p->seq; /* validate keeps it >= 0 */
    return last + 1 < p->seq_kv ? last + 1 : p->seq_kv;
}

void at_attention_reference_row(const at_attention_problem *p, const float *q, const float *k,
                                const float *v, int64_t b, int64_t h, int64_t i, float *o,
                                double *bound, double *lse, double *scratch)
{
    const at_attention_strides st = at_attention_strides_of(p);
    const int64_t d = p->head_dim, g = h / (p->heads / p->kv_heads), n = visible_keys(p, i);
    const float *qr = q + b * st.q[0] + h * st.q[1] + i * st.q[2];
    const float *kb = k + b * st.kv[0] + g * st.kv[1];
    const float *vb = v + b * st.kv[0] + g * st.kv[1];
    const double scale = at_attention_scale(p);
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        const float *kr = kb + j * st.kv[2];
        double s = 0;
        for (int64_t x = 0; x < d; x++) s += (double)qr[x] * kr[x];
        scratch[j] = s * scale;
        if (scratch[j] > m) m = scratch[j];
    }
    double l = 0;
    for (int64_t j = 0; j < n; j++) l += (scratch[j] = exp(scratch[j] - m));
    for (int64_t x = 0; x < d; x++) {
        double acc = 0, abs_acc = 0;
        for (int64_t j = 0; j < n; j++) {
            double t = scratch[j] * vb[j * st.kv[2] + x];
            acc += t;
            abs_acc += fabs(t);
        }
        o[x] = (float)(acc / l);
        bound[x] = abs_acc / l;
    }
    *lse = m + log(l);
}

void at_attention_tolerance(const at_attention_problem *p, double *tol_o, double *tol_lse)
{
    /* f32 rounding in the scores (a dot product of head_dim terms) and in the sums over the
     * keys grows like sqrt(n) * eps. A 16-bit kernel rounds P to the element type for the PV
     * product (the FlashAttention recipe) and rounds O: a few ulps of the type, relative to
     * sum p |v|. A wrong kernel (a missed tile, a stale rescale) is off by far more. */
    double f32 = 32.0 * FLT_EPSILON * (sqrt((double)p->seq_kv) + sqrt((double)p->head_dim));
    double ulp = p->dtype == AT_DTYPE_F16 ? 0x1p-11 : p->dtype == AT_DTYPE_BF16 ? 0x1p-8 : 0.0;
    *tol_o = f32 + 4.0 * ulp + 1e-6;
    *tol_lse = f32 + 1e-5;
}

/* ---- the operation's descriptor ------------------------------------------------------------ */

static at_status op_validate(const void *p) { return at_attention_validate(p); }

static void op_key(const void *p, char *buf, size_t len) { at_attention_key(p, buf, len); }

/* Log-ratio distance over batch * heads, seq, seq_kv and the head grouping to a tuned key of
 * the same dtype, layout, head_dim and causality. */
static double op_distance(const void *p, const char *key)
{
    const at_attention_problem *a = p;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "attention/%s/%s/d%lld/%s/", at_dtype_name(a->dtype),
             g_layouts[a->layout], (long long)a->head_dim, a->causal ? "causal" : "full");
    long long b, h, g, s, s2;
    char rest;
    if (strncmp(key, prefix, strlen(prefix)) != 0 ||
        sscanf(key + strlen(prefix), "%lldx%lldx%lld/%lldx%lld%c", &b, &h, &g, &s, &s2, &rest) !=
            5 ||
        b < 1 || h < 1 || g < 1 || s < 1 || s2 < 1)
        return INFINITY;
    return fabs(log((double)(b * h) / ((double)a->batch * (double)a->heads))) +
           fabs(log((double)s / (double)a->seq)) + fabs(log((double)s2 / (double)a->seq_kv)) +
           fabs(log((double)(h / g) / (double)(a->heads / a->kv_heads)));
}

static at_status op_parse_key(const char *key, at_problem *p)
{
    char dt[8], lay[8], d[24], mask[8], b[24], h[24], g[24], sq[24], skv[24], rest;
    if (sscanf(key,
               "attention/%7[^/]/%7[^/]/d%23[0-9]/%7[^/]/%23[0-9]x%23[0-9]x%23[0-9]/"
               "%23[0-9]x%23[0-9]%c",
               dt, lay, d, mask, b, h, g, sq, skv, &rest) != 9 ||
        (strcmp(mask, "causal") != 0 && strcmp(mask, "full") != 0))
        return at_fail(AT_ERR_INVALID_ARG,
                       "'%s' is not an attention key "
                       "(attention/DTYPE/LAYOUT/dD/causal|full/BxHxG/SxS2)",
                       key);
    AT_TRY(at_problem_set(p, "dtype", dt));
    AT_TRY(at_problem_set(p, "layout", lay));
    AT_TRY(at_problem_set(p, "head-dim", d));
    AT_TRY(at_problem_set(p, "causal", strcmp(mask, "causal") == 0 ? "1" : "0"));
    AT_TRY(at_problem_set(p, "batch", b));
    AT_TRY(at_problem_set(p, "heads", h));
    AT_TRY(at_problem_set(p, "kv-heads", g));
    AT_TRY(at_problem_set(p, "seq", sq));
    return at_problem_set(p, "seq-kv", skv);
}

static const char *op_dtype(const void *p)
{
    return at_dtype_name(((const at_attention_problem *)p)->dtype);
}

static at_status op_bind(const void *p, at_space *s)
{
    const at_attention_problem *a = p;
    AT_TRY(at_space_set(s, "sq", a->seq));
    AT_TRY(at_space_set(s, "skv", a->seq_kv));
    AT_TRY(at_space_set(s, "d", a->head_dim));
    AT_TRY(at_space_set(s, "causal", a->causal));
    AT_TRY(at_space_set(s, "bh", a->batch * a->heads));
    AT_TRY(at_space_set(s, "group", a->heads / a->kv_heads));
    AT_TRY(at_space_set(s, "big", fmax(q_elems(a), kv_elems(a)) >= 2147483648.0));
    /* The 16-bit templates take the element type as a problem variable (0 f16, 1 bf16). */
    if (a->dtype != AT_DTYPE_F32) AT_TRY(at_space_set(s, "dt", a->dtype == AT_DTYPE_BF16));
    return AT_OK;
}

static at_status op_scalar(const void *p, const char *name, int64_t *i, double *f)
{
    const at_attention_problem *a = p;
    const at_attention_strides st = at_attention_strides_of(a);
    const struct {
        const char *name;
        int64_t v;
    } ints[] = {{"batch", a->batch}, {"heads", a->heads},   {"kv_heads", a->kv_heads},
                {"seq", a->seq},     {"seq_kv", a->seq_kv}, {"head_dim", a->head_dim},
                {"q_sb", st.q[0]},   {"q_sh", st.q[1]},     {"q_ss", st.q[2]},
                {"kv_sb", st.kv[0]}, {"kv_sh", st.kv[1]},   {"kv_ss", st.kv[2]}};
    for (size_t j = 0; j < sizeof ints / sizeof ints[0]; j++)
        if (strcmp(name, ints[j].name) == 0) {
            *i = ints[j].v;
            *f = (double)ints[j].v;
            return AT_OK;
        }
    if (strcmp(name, "scale") == 0) {
        *f = at_attention_scale(a);
        *i = 0;
        return AT_OK;
    }
    return AT_ERR_TEMPLATE;
}

/* Query-key pairs computed: all of them, or those on and below the bottom-right diagonal. */
static double pairs(const at_attention_problem *a)
{
    double s = (double)a->seq, s2 = (double)a->seq_kv;
    return a->causal ? s * s2 - s * (s - 1) / 2 : s * s2;
}

static double op_flops(const void *p)
{
    const at_attention_problem *a = p;
    return 4.0 * (double)a->batch * (double)a->heads * (double)a->head_dim * pairs(a);
}

static double op_bytes(const void *p)
{
    const at_attention_problem *a = p;
    return (double)at_dtype_size(a->dtype) * (2.0 * q_elems(a) + 2.0 * kv_elems(a)) +
           4.0 * (double)a->batch * (double)a->heads * (double)a->seq;
}

static at_status op_prior(const void *p, const at_space *s, const at_device_info *d,
                          const int64_t *configs, size_t n, double *out)
{
    (void)p;
    return at_attention_cost_prior(s, d, configs, n, out);
}

/* What is kept to check a candidate: the reference on a spread of rows. A row r is
 * (b * heads + h) * seq + i. */
typedef struct attention_check {
    int64_t *rows;
    size_t nrows;
    int64_t *at;   /* where each row starts in O (elements): the rows read back, when sampled */
    float *o;      /* nrows x head_dim */
    double *bound; /* nrows x head_dim */
    double *lse;   /* nrows */
} attention_check;

static void op_data_free(at_op_data *d)
{
    for (int i = 0; i < AT_MAX_BUFFERS; i++) free(d->buf[i].init);
    attention_check *c = d->self;
    if (c) {
        free(c->rows);
        free(c->at);
        free(c->o);
        free(c->bound);
        free(c->lse);
        free(c);
    }
    memset(d, 0, sizeof *d);
}

static at_status op_layout(const void *p, at_op_buffer *out)
{
    const at_attention_problem *a = p;
    const size_t nq = (size_t)q_elems(a), nkv = (size_t)kv_elems(a);
    out[0] = (at_op_buffer){.dtype = a->dtype, .count = nq, .output = 0};
    out[1] = (at_op_buffer){.dtype = a->dtype, .count = nkv, .output = 0};
    out[2] = (at_op_buffer){.dtype = a->dtype, .count = nkv, .output = 0};
    out[3] = (at_op_buffer){.dtype = a->dtype, .count = nq, .output = 1};
    out[4] = (at_op_buffer){
        .dtype = AT_DTYPE_F32, .count = (size_t)(a->batch * a->heads * a->seq), .output = 1};
    return AT_OK;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The rows to check: all of them up to ~2^28 multiply-adds of reference, else an even spread
 * of about that many, always with the first and last query rows of the first and the last
 * (batch, head) — where the edge tiles and the causal corners are. */
static size_t pick_rows(const at_attention_problem *a, int64_t *rows, size_t cap)
{
    const int64_t total = a->batch * a->heads * a->seq, s = a->seq, last_bh = total / s - 1;
    size_t n = 0;
    if ((size_t)total <= cap) {
        for (int64_t r = 0; r < total; r++) rows[n++] = r;
        return n;
    }
    const int64_t fixed[4] = {0, s - 1, last_bh * s, last_bh * s + s - 1};
    for (int i = 0; i < 4; i++) rows[n++] = fixed[i];
    for (size_t j = 0; n < cap; j++)
        rows[n++] = (int64_t)((double)j * (double)(total - 1) / (double)(cap - 5));
    qsort(rows, n, sizeof *rows, cmp_i64);
    size_t u = 0; /* drop repeats */
    for (size_t j = 0; j < n; j++)
        if (!u || rows[j] != rows[u - 1]) rows[u++] = rows[j];
    return u;
}

static at_status op_data_make(const void *p, at_op_data *d)
{
    const at_attention_problem *a = p;
    memset(d, 0, sizeof *d);
    op_layout(p, d->buf);
    attention_check *c = calloc(1, sizeof *c);
    d->self = c;
    for (int i = 0; i < 5; i++) d->buf[i].init = malloc(d->buf[i].count * sizeof(float));
    const double per_row = 2.0 * (double)a->seq_kv * (double)a->head_dim;
    const double total = (double)a->batch * (double)a->heads * (double)a->seq;
    size_t cap = (size_t)fmin(total, fmax(16.0, 268435456.0 / per_row));
    double *scratch = malloc((size_t)a->seq_kv * sizeof *scratch);
    if (c) {
        c->rows = malloc(cap * sizeof *c->rows);
        c->o = malloc(cap * (size_t)a->head_dim * sizeof *c->o);
        c->bound = malloc(cap * (size_t)a->head_dim * sizeof *c->bound);
        c->lse = malloc(cap * sizeof *c->lse);
    }
    int ok = c && c->rows && c->o && c->bound && c->lse && scratch;
    for (int i = 0; i < 5; i++) ok = ok && d->buf[i].init;
    if (!ok) {
        free(scratch);
        op_data_free(d);
        return at_fail(AT_ERR_NO_MEMORY, "out of host memory for an attention problem");
    }
    for (int i = 0; i < 3; i++)
        at_dtype_fill_random(d->buf[i].init, d->buf[i].count, (uint64_t)i + 1, a->dtype);
    /* O and LSE are only written: NaN shows a kernel that reads them. */
    for (int i = 3; i < 5; i++)
        for (size_t j = 0; j < d->buf[i].count; j++) d->buf[i].init[j] = NAN;
    c->nrows = pick_rows(a, c->rows, cap);
    const int64_t dim = a->head_dim;
    for (size_t r = 0; r < c->nrows; r++) {
        int64_t row = c->rows[r], i = row % a->seq, bh = row / a->seq;
        at_attention_reference_row(a, d->buf[0].init, d->buf[1].init, d->buf[2].init, bh / a->heads,
                                   bh % a->heads, i, c->o + r * (size_t)dim,
                                   c->bound + r * (size_t)dim, &c->lse[r], scratch);
    }
    free(scratch);
    /* A spread of rows: only they of O and LSE come back from a checked run (tuner/run.c). */
    if ((double)c->nrows < total && (c->at = malloc(c->nrows * sizeof *c->at)) != NULL) {
        const at_attention_strides st = at_attention_strides_of(a);
        for (size_t r = 0; r < c->nrows; r++) {
            int64_t row = c->rows[r], i = row % a->seq, bh = row / a->seq;
            c->at[r] = bh / a->heads * st.q[0] + bh % a->heads * st.q[1] + i * st.q[2];
        }
        d->buf[3].rows = c->at;
        d->buf[4].rows = c->rows;
        d->buf[3].nrows = d->buf[4].nrows = c->nrows;
        d->buf[3].row_stride = d->buf[4].row_stride = 1;
        d->buf[3].row_len = (size_t)dim;
        d->buf[4].row_len = 1;
    }
    return AT_OK;
}

static at_status op_check(const void *p, const at_op_data *d, float *const *out,
                          double *max_rel_error, int *ok)
{
    const at_attention_problem *a = p;
    const attention_check *c = d->self;
    const at_attention_strides st = at_attention_strides_of(a);
    double tol_o, tol_lse, worst_o = 0, worst_lse = 0;
    at_attention_tolerance(a, &tol_o, &tol_lse);
    const int64_t dim = a->head_dim;
    for (size_t r = 0; r < c->nrows; r++) {
        int64_t row = c->rows[r], i = row % a->seq, bh = row / a->seq;
        int64_t b = bh / a->heads, h = bh % a->heads;
        const float *o = out[3] + b * st.q[0] + h * st.q[1] + i * st.q[2];
        for (int64_t x = 0; x < dim; x++) {
            double e = fabs((double)o[x] - c->o[r * dim + x]) / fmax(c->bound[r * dim + x], 1e-30);
            if (!(e <= worst_o)) worst_o = isnan(e) ? INFINITY : e;
        }
        double e = fabs((double)out[4][row] - c->lse[r]) / (1.0 + fabs(c->lse[r]));
        if (!(e <= worst_lse)) worst_lse = isnan(e) ? INFINITY : e;
    }
    /* One figure for the record: the worse of the two, each against its own tolerance. */
    *max_rel_error = worst_lse / tol_lse > worst_o / tol_o ? worst_lse : worst_o;
    *ok = worst_o <= tol_o && worst_lse <= tol_lse;
    return AT_OK;
}

#define F(field) offsetof(at_attention_problem, field)
static const at_op_field g_fields[] = {
    {{.name = "batch",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .def = "1",
      .shape = 1,
      .help = "batch size"},
     F(batch)},
    {{.name = "heads",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .example = "8",
      .shape = 1,
      .help = "query heads"},
     F(heads)},
    {{.name = "kv-heads",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .def = "=heads",
      .shape = 1,
      .help = "key/value heads, dividing heads (1: multi-query); default heads"},
     F(kv_heads)},
    {{.name = "seq",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .example = "512",
      .shape = 1,
      .help = "query length"},
     F(seq)},
    {{.name = "seq-kv",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = DIM_MAX,
      .def = "=seq",
      .shape = 1,
      .help = "key/value length; default seq"},
     F(seq_kv)},
    {{.name = "head-dim",
      .kind = AT_FIELD_INT,
      .lo = 1,
      .hi = 256,
      .example = "64",
      .shape = 1,
      .help = "32, 64, 80, 96, 128 or 256"},
     F(head_dim)},
    {{.name = "causal",
      .kind = AT_FIELD_FLAG,
      .def = "0",
      .shape = 1,
      .help = "query i sees keys up to i + seq-kv - seq (bottom-right)"},
     F(causal)},
    {{.name = "dtype",
      .kind = AT_FIELD_CHOICE,
      .choices = at_dtype_table,
      .def = "f32",
      .shape = 1,
      .help = "of Q, K, V, O (f16/bf16: CUDA, HIP)"},
     F(dtype)},
    {{.name = "layout",
      .kind = AT_FIELD_CHOICE,
      .choices = g_layouts,
      .def = "bshd",
      .shape = 1,
      .help = "bshd: PyTorch's (B, S, H, D); bhsd: (B, H, S, D)"},
     F(layout)},
    {{.name = "scale",
      .kind = AT_FIELD_REAL,
      .def = "0",
      .help = "softmax scale of Q K^T; 0: 1/sqrt(head-dim)"},
     F(scale)},
};
#undef F

static const char *const g_roles[] = {"Q", "K", "V", "O", "LSE", NULL};

const at_op at_op_attention = {
    .name = "attention",
    .help = "Tunes fused attention O = softmax(Q K^T * scale [+ causal mask]) V, with the\n"
            "log-sum-exp of each row (f32 on every backend, f16/bf16 on CUDA and HIP with f32\n"
            "accumulation), for one problem on one device. docs/attention.md.",
    .size = sizeof(at_attention_problem),
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
};

/* ---- the typed public calls ---------------------------------------------------------------- */

at_status at_attention_get(at_context *ctx, const at_attention_problem *p, unsigned flags,
                           at_kernel **out, at_source *source)
{
    at_problem q = at_problem_view(&at_op_attention, p);
    return at_get(ctx, p ? &q : NULL, flags, out, source);
}

at_status at_attention_tune(at_context *ctx, const at_attention_problem *p,
                            const at_tune_options *opts, at_tune_report *report, at_kernel **out)
{
    at_problem q = at_problem_view(&at_op_attention, p);
    return at_tune(ctx, p ? &q : NULL, opts, report, out);
}

at_status at_attention_launch(at_kernel *k, at_devptr q, at_devptr kk, at_devptr v, at_devptr o,
                              at_devptr lse, void *stream)
{
    const at_devptr bufs[5] = {q, kk, v, o, lse};
    return at_kernel_launch(k, bufs, 5, stream);
}
