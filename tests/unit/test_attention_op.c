/* test_attention_op.c — the attention operation without a device: validation and its messages,
 * problems from text (the causal flag), keys and the nearest-shape distance, the strides of both
 * layouts, the CPU reference on rows whose answer is known (uniform scores, causal visibility,
 * the grouped-query head mapping, a two-key softmax), and the check: the reference passes, a
 * small error in O or LSE, a NaN or a wrong row fails. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/op.h"
#include "tuner/ops/attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static at_attention_problem base(void)
{
    return (at_attention_problem){.batch = 2,
                                  .heads = 4,
                                  .kv_heads = 2,
                                  .seq = 5,
                                  .seq_kv = 7,
                                  .head_dim = 32,
                                  .dtype = AT_DTYPE_F32,
                                  .layout = AT_ATTENTION_BSHD};
}

/* p must be refused with a message containing want. */
static void refused(at_attention_problem p, const char *want)
{
    assert_int_equal(at_attention_validate(&p), AT_ERR_INVALID_ARG);
    if (!strstr(at_errmsg(), want)) fail_msg("'%s' does not say '%s'", at_errmsg(), want);
}

static void test_validate(void **state)
{
    (void)state;
    at_attention_problem p = base();
    assert_int_equal(at_attention_validate(&p), AT_OK);
    p.head_dim = 48;
    refused(p, "head-dim = 48 is not supported (32, 64, 80, 96, 128 or 256)");
    p = base();
    p.kv_heads = 3;
    refused(p, "heads = 4 is not a multiple of kv-heads = 3");
    p.kv_heads = 8;
    refused(p, "heads = 4 is not a multiple of kv-heads = 8");
    p = base();
    p.seq = 0;
    refused(p, "seq = 0 is out of range");
    p = base();
    p.batch = -1;
    refused(p, "batch = -1 is out of range");
    p = base();
    p.causal = 1;
    p.seq_kv = 4;
    refused(p, "seq-kv = 4 < seq = 5 with causal");
    p.seq_kv = 5; /* equal lengths: the plain lower triangle */
    assert_int_equal(at_attention_validate(&p), AT_OK);
    p = base();
    p.scale = -1;
    refused(p, "scale = -1 is not a finite number >= 0");
    p = base();
    p.layout = 2;
    refused(p, "layout 2 is not one of bshd, bhsd");
}

static void test_problem_text(void **state)
{
    (void)state;
    at_problem *p = NULL;
    char buf[128];
    assert_int_equal(at_problem_create("attention", &p), AT_OK);
    assert_int_equal(at_problem_set(p, "heads", "32"), AT_OK);
    assert_int_equal(at_problem_set(p, "kv-heads", "8"), AT_OK);
    assert_int_equal(at_problem_set(p, "seq", "1"), AT_OK);
    assert_int_equal(at_problem_set(p, "seq-kv", "8192"), AT_OK);
    assert_int_equal(at_problem_set(p, "head-dim", "128"), AT_OK);
    assert_int_equal(at_problem_set(p, "causal", "yes"), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_problem_last_error(), "causal 'yes' is not 0, 1, false or true"));
    assert_int_equal(at_problem_set(p, "causal", "true"), AT_OK);
    assert_int_equal(at_problem_get(p, "causal", buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "1");
    assert_int_equal(at_problem_set(p, "dtype", "f16"), AT_OK);
    assert_int_equal(at_problem_key(p, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "attention/f16/bshd/d128/causal/1x32x8/1x8192");
    at_problem_destroy(p);
    /* The defaults: kv-heads and seq-kv follow heads and seq. */
    assert_int_equal(at_problem_create("attention", &p), AT_OK);
    assert_int_equal(at_problem_set(p, "heads", "8"), AT_OK);
    assert_int_equal(at_problem_set(p, "seq", "512"), AT_OK);
    assert_int_equal(at_problem_set(p, "head-dim", "64"), AT_OK);
    assert_int_equal(at_problem_key(p, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "attention/f32/bshd/d64/full/1x8x8/512x512");
    at_problem_destroy(p);
}

static void test_distance(void **state)
{
    (void)state;
    at_attention_problem p = base();
    const at_op *op = &at_op_attention;
    char key[128];
    at_attention_key(&p, key, sizeof key);
    assert_string_equal(key, "attention/f32/bshd/d32/full/2x4x2/5x7");
    assert_true(op->distance(&p, key) == 0.0);
    double near = op->distance(&p, "attention/f32/bshd/d32/full/2x4x2/10x7");
    assert_true(fabs(near - log(2.0)) < 1e-12);
    /* Grouping counts: 4 query heads over 1 key head instead of 2. */
    assert_true(op->distance(&p, "attention/f32/bshd/d32/full/2x4x1/5x7") > 0.5);
    assert_true(isinf(op->distance(&p, "attention/f32/bshd/d32/causal/2x4x2/5x7")));
    assert_true(isinf(op->distance(&p, "attention/f16/bshd/d32/full/2x4x2/5x7")));
    assert_true(isinf(op->distance(&p, "attention/f32/bhsd/d32/full/2x4x2/5x7")));
    assert_true(isinf(op->distance(&p, "attention/f32/bshd/d64/full/2x4x2/5x7")));
    assert_true(isinf(op->distance(&p, "attention/f32/bshd/d32/full/2x4x2/5x7x")));
}

static void test_strides(void **state)
{
    (void)state;
    at_attention_problem p = base(); /* B 2, S 5, S2 7, H 4, G 2, D 32 */
    at_attention_strides s = at_attention_strides_of(&p);
    const int64_t bshd_q[3] = {5 * 4 * 32, 32, 4 * 32}, bshd_kv[3] = {7 * 2 * 32, 32, 2 * 32};
    assert_memory_equal(s.q, bshd_q, sizeof bshd_q);
    assert_memory_equal(s.kv, bshd_kv, sizeof bshd_kv);
    p.layout = AT_ATTENTION_BHSD;
    s = at_attention_strides_of(&p);
    const int64_t bhsd_q[3] = {4 * 5 * 32, 5 * 32, 32}, bhsd_kv[3] = {2 * 7 * 32, 7 * 32, 32};
    assert_memory_equal(s.q, bhsd_q, sizeof bhsd_q);
    assert_memory_equal(s.kv, bhsd_kv, sizeof bhsd_kv);
    /* The kernels get them by name. */
    int64_t i;
    double f;
    assert_int_equal(at_op_attention.scalar(&p, "kv_sh", &i, &f), AT_OK);
    assert_int_equal(i, 7 * 32);
    assert_int_equal(at_op_attention.scalar(&p, "scale", &i, &f), AT_OK);
    assert_true(fabs(f - 1 / sqrt(32.0)) < 1e-7);
    p.scale = 0.5f;
    assert_int_equal(at_op_attention.scalar(&p, "scale", &i, &f), AT_OK);
    assert_true(f == 0.5);
    assert_int_equal(at_op_attention.scalar(&p, "alpha", &i, &f), AT_ERR_TEMPLATE);
}

/* Buffers of p filled by fill(b, s, head, x) for K and V; Q all zero (uniform scores). */
typedef struct bufs {
    float *q, *k, *v;
} bufs;

static bufs make(const at_attention_problem *p, float (*fk)(int64_t, int64_t, int64_t, int64_t),
                 float (*fv)(int64_t, int64_t, int64_t, int64_t))
{
    at_attention_strides st = at_attention_strides_of(p);
    size_t nq = (size_t)(p->batch * p->seq * p->heads * p->head_dim);
    size_t nkv = (size_t)(p->batch * p->seq_kv * p->kv_heads * p->head_dim);
    bufs b = {calloc(nq, 4), malloc(nkv * 4), malloc(nkv * 4)};
    for (int64_t x = 0; x < p->batch; x++)
        for (int64_t s = 0; s < p->seq_kv; s++)
            for (int64_t g = 0; g < p->kv_heads; g++)
                for (int64_t d = 0; d < p->head_dim; d++) {
                    int64_t o = x * st.kv[0] + g * st.kv[1] + s * st.kv[2] + d;
                    b.k[o] = fk(x, s, g, d);
                    b.v[o] = fv(x, s, g, d);
                }
    return b;
}

static float zero(int64_t b, int64_t s, int64_t g, int64_t d)
{
    (void)b, (void)s, (void)g, (void)d;
    return 0;
}
/* V = key position + 100 * kv head: the mean of what a row sees says which keys and head. */
static float position(int64_t b, int64_t s, int64_t g, int64_t d)
{
    (void)b, (void)d;
    return (float)s + 100.0f * (float)g;
}

static void test_reference_uniform(void **state)
{
    (void)state;
    for (int layout = 0; layout < 2; layout++)
        for (int causal = 0; causal < 2; causal++) {
            at_attention_problem p = base(); /* 4 query heads over 2 kv heads, S 5, S2 7 */
            p.layout = layout;
            p.causal = causal;
            bufs b = make(&p, zero, position);
            double scratch[7], bound[32], lse;
            float o[32];
            for (int64_t h = 0; h < 4; h++)
                for (int64_t i = 0; i < 5; i++) {
                    at_attention_reference_row(&p, b.q, b.k, b.v, 1, h, i, o, bound, &lse, scratch);
                    /* Equal scores: the mean of V over the visible keys [0, n). */
                    int64_t n = causal ? i + 7 - 5 + 1 : 7;
                    double want = (double)(n - 1) / 2 + 100.0 * (double)(h / 2);
                    assert_true(fabs(o[0] - want) < 1e-5 && fabs(o[31] - want) < 1e-5);
                    assert_true(fabs(lse - log((double)n)) < 1e-12);
                }
            free(b.q), free(b.k), free(b.v);
        }
}

/* Keys along dimension 0: key j has k[0] = j; the query's q[0] = 1; two keys. */
static float ramp(int64_t b, int64_t s, int64_t g, int64_t d)
{
    (void)b, (void)g;
    return d == 0 ? (float)s : 0.0f;
}

static void test_reference_softmax(void **state)
{
    (void)state;
    at_attention_problem p = {.batch = 1,
                              .heads = 1,
                              .kv_heads = 1,
                              .seq = 1,
                              .seq_kv = 2,
                              .head_dim = 64,
                              .scale = 0.5f};
    bufs b = make(&p, ramp, position);
    b.q[0] = 1;
    double scratch[2], bound[64], lse;
    float o[64];
    at_attention_reference_row(&p, b.q, b.k, b.v, 0, 0, 0, o, bound, &lse, scratch);
    /* Scores 0 and 0.5: p1 = e^0.5 / (1 + e^0.5); O = p1 (V is the key position). */
    double p1 = exp(0.5) / (1 + exp(0.5));
    assert_true(fabs(o[7] - p1) < 1e-7);
    assert_true(fabs(bound[7] - p1) < 1e-12);
    assert_true(fabs(lse - log(1 + exp(0.5))) < 1e-12);
    free(b.q), free(b.k), free(b.v);
}

/* The check on p's own data: the reference passes; then one change to out must fail. */
static void test_check(void **state)
{
    (void)state;
    at_attention_problem p = base();
    p.causal = 1;
    p.dtype = AT_DTYPE_F16;
    const at_op *op = &at_op_attention;
    at_op_data d;
    assert_int_equal(op->data_make(&p, &d), AT_OK);
    /* The inputs are f16 values and O, LSE start as NaN. */
    assert_true(isnan(d.buf[3].init[0]) && isnan(d.buf[4].init[0]));
    assert_int_equal(d.buf[4].dtype, AT_DTYPE_F32);
    size_t no = d.buf[3].count, nl = d.buf[4].count;
    float *o = malloc(no * 4), *l = malloc(nl * 4);
    double scratch[7], bound[32], lse;
    at_attention_strides st = at_attention_strides_of(&p);
    for (int64_t bb = 0; bb < 2; bb++)
        for (int64_t h = 0; h < 4; h++)
            for (int64_t i = 0; i < 5; i++) {
                at_attention_reference_row(&p, d.buf[0].init, d.buf[1].init, d.buf[2].init, bb, h,
                                           i, o + bb * st.q[0] + h * st.q[1] + i * st.q[2], bound,
                                           &lse, scratch);
                l[(bb * 4 + h) * 5 + i] = (float)lse;
            }
    float *out[5] = {NULL, NULL, NULL, o, l};
    double err;
    int ok;
    assert_int_equal(op->check(&p, &d, out, &err, &ok), AT_OK);
    assert_true(ok);
    double tol_o, tol_lse;
    at_attention_tolerance(&p, &tol_o, &tol_lse);
    /* A stale rescale is off by a factor; a one-ulp-of-f16 change is not. */
    const size_t at = (size_t)(st.q[0] + 3 * st.q[1] + 4 * st.q[2] + 5);
    const float keep = o[at];
    o[at] = keep * 1.05f + 0.05f;
    assert_int_equal(op->check(&p, &d, out, &err, &ok), AT_OK);
    assert_false(ok);
    assert_true(err > tol_o);
    o[at] = NAN;
    assert_int_equal(op->check(&p, &d, out, &err, &ok), AT_OK);
    assert_false(ok);
    assert_true(isinf(err));
    o[at] = keep;
    l[7] += 0.01f;
    assert_int_equal(op->check(&p, &d, out, &err, &ok), AT_OK);
    assert_false(ok);
    l[7] -= 0.01f;
    assert_int_equal(op->check(&p, &d, out, &err, &ok), AT_OK);
    assert_true(ok);
    free(o), free(l);
    op->data_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_problem_text),
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_strides),
        cmocka_unit_test(test_reference_uniform),
        cmocka_unit_test(test_reference_softmax),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
