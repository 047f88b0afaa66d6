/* test_rowsum.c — the second operation end to end on the OpenCL device through the library's
 * generic calls and its own typed ones: problems from text, tune with report and cache hit,
 * get with its fallbacks, launch on the caller's buffers, bad problems, the database keys. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/tmpdir.h"

#include "rowsum.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A context on the OpenCL device with its database in the test's directory. */
static at_context *open_ctx(void **state)
{
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = *state};
    at_context *ctx = NULL;
    at_status s = at_context_create(&o, &ctx);
    if (s != AT_OK) fail_msg("context: %s", at_context_last_error(ctx));
    return ctx;
}

static void test_registered(void **state)
{
    (void)state;
    int gemm = 0, rowsum = 0;
    for (const char *const *op = at_operations(); *op; op++) {
        gemm += strcmp(*op, "gemm") == 0;
        rowsum += strcmp(*op, "rowsum") == 0;
    }
    assert_int_equal(gemm, 1);
    assert_int_equal(rowsum, 1);
    assert_string_equal(at_operation_buffers("rowsum")[1], "Y");
    at_field_desc d;
    assert_int_equal(at_operation_field("rowsum", 0, &d), AT_OK);
    assert_string_equal(d.name, "rows");
    assert_int_equal(at_operation_field("rowsum", 4, &d), AT_ERR_NOT_FOUND);
}

static void test_problem_from_text(void **state)
{
    (void)state;
    at_problem *p = NULL;
    char buf[64];
    assert_int_equal(at_problem_create("rowsum", &p), AT_OK);
    assert_int_equal(at_problem_key(p, buf, sizeof buf), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_problem_last_error(), "rowsum needs rows"));
    assert_int_equal(at_problem_set(p, "rows", "0"), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_problem_last_error(), "rows '0' is not an integer from 1"));
    assert_int_equal(at_problem_set(p, "depth", "3"), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_problem_last_error(), "no field 'depth'"));
    assert_int_equal(at_problem_set(p, "rows", "300"), AT_OK);
    assert_int_equal(at_problem_set(p, "cols", "77"), AT_OK);
    assert_int_equal(at_problem_key(p, buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "rowsum/300x77");
    assert_int_equal(at_problem_get(p, "alpha", buf, sizeof buf), AT_OK);
    assert_string_equal(buf, "1");
    assert_string_equal(at_problem_operation(p), "rowsum");
    at_problem_destroy(p);
}

/* Launches k on fresh buffers holding x (rows x cols) and checks Y against the CPU. */
static void launch_and_check(at_context *ctx, at_kernel *k, const rowsum_problem *q)
{
    size_t nx = (size_t)(q->rows * q->cols), ny = (size_t)q->rows;
    float *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 19) - 9.0f;
    at_buffer *bx, *by;
    assert_int_equal(at_buffer_create(ctx, nx * 4, &bx), AT_OK);
    assert_int_equal(at_buffer_create(ctx, ny * 4, &by), AT_OK);
    assert_int_equal(at_buffer_write(bx, 0, x, nx * 4), AT_OK);
    /* The generic call wants every buffer of the operation. */
    const at_devptr one[1] = {at_buffer_devptr(bx)};
    assert_int_equal(at_kernel_launch(k, one, 1, NULL), AT_ERR_INVALID_ARG);
    assert_int_equal(rowsum_launch(k, at_buffer_devptr(bx), at_buffer_devptr(by), NULL), AT_OK);
    assert_int_equal(at_context_synchronize(ctx), AT_OK);
    assert_int_equal(at_buffer_read(by, 0, y, ny * 4), AT_OK);
    for (int64_t i = 0; i < q->rows; i++) {
        double want = 0;
        for (int64_t j = 0; j < q->cols; j++) want += x[i * q->cols + j];
        want *= q->alpha;
        if (fabs(y[i] - want) > 1e-3 * (1 + fabs(want)))
            fail_msg("row %lld: %g, want %g (%s)", (long long)i, y[i], want, at_kernel_config(k));
    }
    at_buffer_destroy(bx);
    at_buffer_destroy(by);
    free(x);
    free(y);
}

static int count_key(void *user, const char *key, const char *value)
{
    (void)value;
    (*(int *)user) += strncmp(key, "rowsum/300x77|", 14) == 0;
    return 0;
}

static void test_tune_get_launch(void **state)
{
    (void)state;
    at_context *ctx = open_ctx(state);
    at_kernel *k = NULL;
    at_source src;
    rowsum_problem q = {.rows = 300, .cols = 77, .alpha = 0.5f};

    /* Before tuning: no entry, a default kernel that is right. */
    assert_int_equal(rowsum_get(ctx, &q, AT_GET_NO_FALLBACK, &k, &src), AT_ERR_NOT_FOUND);
    assert_int_equal(rowsum_get(ctx, &q, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_DEFAULT);
    assert_string_equal(at_kernel_template(k), "rowsum");
    launch_and_check(ctx, k, &q);
    at_kernel_destroy(k);

    /* Tune through the generic call, from text. */
    at_problem *p = NULL;
    assert_int_equal(at_problem_create("rowsum", &p), AT_OK);
    assert_int_equal(at_problem_set(p, "rows", "300"), AT_OK);
    assert_int_equal(at_problem_set(p, "cols", "77"), AT_OK);
    assert_int_equal(at_problem_set(p, "alpha", "0.5"), AT_OK);
    at_tune_options t = {.strategy = "random", .max_evals = 6, .seed = 2};
    at_tune_report r;
    assert_int_equal(at_tune(ctx, p, &t, &r, &k), AT_OK);
    assert_int_equal(r.evaluated, 6);
    assert_int_equal(r.measured, 6);
    assert_string_equal(r.template_name, "rowsum");
    assert_true(r.space > 0 && r.space <= r.space_total);
    assert_true(r.best_time_us > 0 && r.best_gflops > 0 && r.best_gbytes_per_s > 0);
    assert_string_equal(at_kernel_config(k), r.best_config);
    launch_and_check(ctx, k, &q);
    at_kernel_destroy(k);

    /* Again: a cache hit that reports the space it had. */
    int64_t space = r.space;
    assert_int_equal(at_tune(ctx, p, &t, &r, NULL), AT_OK);
    assert_int_equal(r.cache_hit, 1);
    assert_int_equal(r.measured, 0);
    assert_int_equal(r.space, space);
    at_problem_destroy(p);

    /* Every measurement is in the store under the operation's key (read once the context, which
     * holds the database, is closed: LMDB opens an environment once per process). */
    int n = 0;
    char why[256];
    at_context_destroy(ctx);
    assert_int_equal(at_db_visit(*state, "results", "rowsum/", count_key, &n, why, sizeof why),
                     AT_OK);
    assert_int_equal(n, 6);

    /* A new context: the hit, then the nearest shape for a neighbour. */
    ctx = open_ctx(state);
    assert_int_equal(rowsum_get(ctx, &q, AT_GET_NO_FALLBACK, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_HIT);
    at_kernel_destroy(k);
    rowsum_problem near = {.rows = 310, .cols = 80, .alpha = -2.0f};
    assert_int_equal(rowsum_get(ctx, &near, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_NEAREST);
    launch_and_check(ctx, k, &near);
    at_kernel_destroy(k);
    at_context_destroy(ctx);
}

static void test_bad_problems(void **state)
{
    (void)state;
    at_context *ctx = open_ctx(state);
    at_kernel *k = NULL;
    rowsum_problem q = {.rows = 4, .cols = 0};
    assert_int_equal(rowsum_get(ctx, &q, 0, &k, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "cols = 0"));
    q.cols = 8;
    q.ld = 3;
    assert_int_equal(rowsum_tune(ctx, &q, NULL, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "ld = 3"));
    q.ld = 0;
    at_tune_options t = {.template_name = "gemm"};
    assert_int_equal(rowsum_tune(ctx, &q, &t, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "implements gemm, not rowsum"));
    assert_null(k);
    at_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registered),
        cmocka_unit_test(test_problem_from_text),
        cmocka_unit_test(test_tune_get_launch),
        cmocka_unit_test(test_bad_problems),
    };
    return cmocka_run_group_tests(tests, make_tmp, remove_tmp);
}
