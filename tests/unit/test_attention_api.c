/* test_attention_api.c — the typed attention calls on the OpenCL device: tune, get with each
 * fallback (hit, nearest shape, default, none), the launch on the caller's buffers checked
 * against the reference for a kernel that came from a neighbour's tuning, and bad input as
 * status codes. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/tmpdir.h"

#include "tuner/ops/attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static at_context *open_ctx(void **state)
{
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = *state};
    at_context *ctx = NULL;
    if (at_context_create(&o, &ctx) != AT_OK) fail_msg("context: %s", at_context_last_error(ctx));
    return ctx;
}

static at_attention_problem shape(int64_t seq, int64_t seq_kv, int causal)
{
    return (at_attention_problem){.batch = 1,
                                  .heads = 4,
                                  .kv_heads = 2,
                                  .seq = seq,
                                  .seq_kv = seq_kv,
                                  .head_dim = 64,
                                  .causal = causal,
                                  .dtype = AT_DTYPE_F32,
                                  .layout = AT_ATTENTION_BSHD};
}

/* Runs k on p with the operation's own inputs and checks O and LSE against the reference. */
static void launch_and_check(at_context *ctx, at_kernel *k, const at_attention_problem *p)
{
    const at_op *op = &at_op_attention;
    at_op_data d;
    assert_int_equal(op->data_make(p, &d), AT_OK);
    at_buffer *b[5];
    at_devptr ptr[5];
    for (int i = 0; i < 5; i++) {
        assert_int_equal(at_buffer_create(ctx, d.buf[i].count * 4, &b[i]), AT_OK);
        assert_int_equal(at_buffer_write(b[i], 0, d.buf[i].init, d.buf[i].count * 4), AT_OK);
        ptr[i] = at_buffer_devptr(b[i]);
    }
    assert_int_equal(at_attention_launch(k, ptr[0], ptr[1], ptr[2], ptr[3], ptr[4], NULL), AT_OK);
    float *out[5] = {0};
    for (int i = 3; i < 5; i++) {
        out[i] = malloc(d.buf[i].count * 4);
        assert_int_equal(at_buffer_read(b[i], 0, out[i], d.buf[i].count * 4), AT_OK);
    }
    double err;
    int ok;
    assert_int_equal(op->check(p, &d, out, &err, &ok), AT_OK);
    if (!ok) fail_msg("%s: error %g", at_kernel_config(k), err);
    for (int i = 0; i < 5; i++) at_buffer_destroy(b[i]);
    free(out[3]), free(out[4]);
    op->data_free(&d);
}

static void test_get_fallbacks(void **state)
{
    at_context *ctx = open_ctx(state);
    at_attention_problem tuned = shape(33, 47, 1), near = shape(40, 50, 1);
    at_kernel *k = NULL;
    at_source src;
    /* Nothing tuned yet: the template's default, or nothing when no fallback is allowed. */
    assert_int_equal(at_attention_get(ctx, &near, AT_GET_NO_FALLBACK, &k, &src), AT_ERR_NOT_FOUND);
    assert_int_equal(at_attention_get(ctx, &near, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_DEFAULT);
    launch_and_check(ctx, k, &near);
    at_kernel_destroy(k);

    at_tune_options o = {.strategy = "random", .max_evals = 3, .seed = 3};
    at_tune_report r;
    assert_int_equal(at_attention_tune(ctx, &tuned, &o, &r, NULL), AT_OK);
    assert_true(r.best_time_us > 0);
    assert_int_equal(at_attention_get(ctx, &tuned, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_HIT);
    assert_string_equal(at_kernel_config(k), r.best_config);
    launch_and_check(ctx, k, &tuned);
    at_kernel_destroy(k);
    /* A neighbour takes the tuned config; it must still be right on its own shape. */
    assert_int_equal(at_attention_get(ctx, &near, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_NEAREST);
    assert_string_equal(at_kernel_config(k), r.best_config);
    launch_and_check(ctx, k, &near);
    at_kernel_destroy(k);
    /* Not causal: another kind of problem, no neighbour. */
    at_attention_problem full = shape(40, 50, 0);
    assert_int_equal(at_attention_get(ctx, &full, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_DEFAULT);
    launch_and_check(ctx, k, &full);
    at_kernel_destroy(k);
    at_context_destroy(ctx);
}

static void test_bad_input(void **state)
{
    at_context *ctx = open_ctx(state);
    at_kernel *k = NULL;
    at_attention_problem p = shape(8, 8, 0);
    p.head_dim = 100;
    assert_int_equal(at_attention_get(ctx, &p, 0, &k, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "head-dim = 100 is not supported"));
    p = shape(8, 4, 1);
    assert_int_equal(at_attention_tune(ctx, &p, NULL, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "seq-kv = 4 < seq = 8 with causal"));
    assert_int_equal(at_attention_get(ctx, NULL, 0, &k, NULL), AT_ERR_INVALID_ARG);
    p = shape(8, 8, 0);
    p.dtype = AT_DTYPE_F16; /* no 16-bit template on OpenCL */
    assert_int_equal(at_attention_get(ctx, &p, 0, &k, NULL), AT_ERR_UNSUPPORTED);
    p.dtype = AT_DTYPE_F32;
    assert_int_equal(at_attention_get(ctx, &p, 0, &k, NULL), AT_OK);
    at_devptr none = {0};
    assert_int_equal(at_attention_launch(k, none, none, none, none, none, NULL),
                     AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "buffer Q passed to at_attention_launch"));
    at_kernel_destroy(k);
    at_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_fallbacks),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, make_tmp, remove_tmp);
}
