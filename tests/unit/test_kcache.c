/* test_kcache.c — the context's kernel cache on the OpenCL device (include/autotune.h, "Kernels"):
 * a repeated get shares the built program, each kernel stays launchable until it is destroyed
 * in any order, a tuning run replaces the problem's cached kernel, and gets and launches from
 * several threads on one context give right results; attention's gets share likewise. Skips (77)
 * without an OpenCL device. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/tmpdir.h"

#include "autotune.h"
#include "tuner/tuner.h" /* at_kernel's program: shared or not */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A context on the OpenCL device with its database in the test's directory and no layers. */
static at_context *open_ctx(void **state)
{
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = *state, .db_search_path = ""};
    at_context *ctx = NULL;
    at_status s = at_context_create(&o, &ctx);
    if (s != AT_OK) fail_msg("context: %s", at_context_last_error(ctx));
    return ctx;
}

/* Runs k (a GEMM of p, nn, packed) on fresh buffers: 0 when C matches the host's, else -1.
 * No cmocka assertion: the threads of test_threads call it too. */
static int gemm_run(at_context *ctx, at_kernel *k, const at_gemm_problem *p, int seed)
{
    size_t m = (size_t)p->m, n = (size_t)p->n, kk = (size_t)p->k;
    float *a = malloc(m * kk * sizeof *a), *b = malloc(kk * n * sizeof *b),
          *c = malloc(m * n * sizeof *c), *want = malloc(m * n * sizeof *want);
    at_buffer *A = NULL, *B = NULL, *C = NULL;
    int bad = !a || !b || !c || !want;
    for (size_t i = 0; !bad && i < m * kk; i++) a[i] = (float)((i * 7 + (size_t)seed) % 11) - 5;
    for (size_t i = 0; !bad && i < kk * n; i++) b[i] = (float)((i * 5 + (size_t)seed) % 9) - 4;
    for (size_t i = 0; !bad && i < m * n; i++) c[i] = (float)(i % 3);
    for (size_t i = 0; !bad && i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t q = 0; q < kk; q++) s += (double)a[i * kk + q] * b[q * n + j];
            want[i * n + j] = (float)(p->alpha * s + p->beta * c[i * n + j]);
        }
    bad = bad || at_buffer_create(ctx, m * kk * 4, &A) || at_buffer_create(ctx, kk * n * 4, &B) ||
          at_buffer_create(ctx, m * n * 4, &C) || at_buffer_write(A, 0, a, m * kk * 4) ||
          at_buffer_write(B, 0, b, kk * n * 4) || at_buffer_write(C, 0, c, m * n * 4) ||
          at_gemm_launch(k, at_buffer_devptr(A), at_buffer_devptr(B), at_buffer_devptr(C), NULL) ||
          at_buffer_read(C, 0, c, m * n * 4);
    for (size_t i = 0; !bad && i < m * n; i++)
        bad = c[i] < want[i] - 1e-3f || c[i] > want[i] + 1e-3f;
    at_buffer_destroy(A);
    at_buffer_destroy(B);
    at_buffer_destroy(C);
    free(a);
    free(b);
    free(c);
    free(want);
    return bad ? -1 : 0;
}

static void check_gemm(at_context *ctx, at_kernel *k, const at_gemm_problem *p, int seed)
{
    if (gemm_run(ctx, k, p, seed) != 0) fail_msg("GEMM: %s", at_context_last_error(ctx));
}

static void test_shared_program(void **state)
{
    at_context *ctx = open_ctx(state);
    at_gemm_problem p = {.m = 33, .n = 20, .k = 17, .alpha = 1.5f, .beta = 0.5f};
    at_kernel *k1 = NULL, *k2 = NULL, *k3 = NULL;
    at_source src;
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k1, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_DEFAULT);
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k2, &src), AT_OK);
    assert_ptr_not_equal(k1, k2);
    assert_ptr_equal(k1->prog, k2->prog); /* built once */
    assert_string_equal(at_kernel_config(k1), at_kernel_config(k2));
    /* Another problem (here only beta differs) has its own entry. */
    at_gemm_problem q = p;
    q.beta = 0;
    assert_int_equal(at_gemm_get(ctx, &q, 0, &k3, NULL), AT_OK);
    assert_ptr_not_equal(k3->prog, k1->prog);
    /* Destroyed in any order, the others still run. */
    at_kernel_destroy(k1);
    check_gemm(ctx, k2, &p, 1);
    check_gemm(ctx, k3, &q, 2);
    at_kernel_destroy(k3);
    at_kernel_destroy(k2);
    /* The generic and the typed calls share one cache. */
    at_problem *g = NULL;
    static const char *const fields[][2] = {
        {"m", "33"}, {"n", "20"}, {"k", "17"}, {"alpha", "1.5"}, {"beta", "0.5"}};
    assert_int_equal(at_problem_create("gemm", &g), AT_OK);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        assert_int_equal(at_problem_set(g, fields[i][0], fields[i][1]), AT_OK);
    assert_int_equal(at_get(ctx, g, 0, &k1, NULL), AT_OK);
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k2, NULL), AT_OK);
    assert_ptr_equal(k1->prog, k2->prog);
    at_kernel_destroy(k1);
    at_kernel_destroy(k2);
    at_problem_destroy(g);
    assert_int_equal(at_gemm_get(ctx, &p, 0, NULL, NULL), AT_ERR_INVALID_ARG);
    /* Attention's gets too. */
    at_attention_problem ap = {
        .batch = 1, .heads = 2, .kv_heads = 2, .seq = 5, .seq_kv = 7, .head_dim = 32};
    assert_int_equal(at_attention_get(ctx, &ap, 0, &k1, NULL), AT_OK);
    assert_int_equal(at_attention_get(ctx, &ap, 0, &k2, NULL), AT_OK);
    assert_ptr_equal(k1->prog, k2->prog);
    at_kernel_destroy(k1);
    at_kernel_destroy(k2);
    at_context_destroy(ctx);
}

static void test_tune_replaces(void **state)
{
    at_context *ctx = open_ctx(state);
    at_gemm_problem p = {.m = 40, .n = 24, .k = 31, .alpha = 1};
    at_kernel *old = NULL, *k = NULL, *tuned = NULL;
    at_source src;
    assert_int_equal(at_gemm_get(ctx, &p, 0, &old, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_DEFAULT);
    char def[512];
    snprintf(def, sizeof def, "%s", at_kernel_config(old));
    /* A tuning run whose best is not the default: the default is not among its candidates. */
    at_tune_options t = {.strategy = "random", .max_evals = 3, .seed = 7};
    at_tune_report r;
    assert_int_equal(at_gemm_tune(ctx, &p, &t, &r, &tuned), AT_OK);
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_HIT);
    assert_string_equal(at_kernel_config(k), r.best_config);
    assert_ptr_equal(k->prog, tuned->prog); /* the tuned kernel was cached */
    if (strcmp(def, r.best_config) != 0) assert_ptr_not_equal(k->prog, old->prog);
    /* A kernel from before the run keeps its program. */
    check_gemm(ctx, old, &p, 3);
    check_gemm(ctx, k, &p, 4);
    at_kernel_destroy(old);
    at_kernel_destroy(tuned);
    at_kernel_destroy(k);
    at_context_destroy(ctx);
}

typedef struct worker {
    at_context *ctx;
    int seed;
    at_status status;
} worker;

/* Gets (alternating two problems) and launches its own kernels on its own buffers. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 40 && w->status == AT_OK; i++) {
        at_gemm_problem p = {.m = 24 + 8 * (i % 2), .n = 16, .k = 9, .alpha = 1};
        at_kernel *k = NULL;
        w->status = at_gemm_get(w->ctx, &p, 0, &k, NULL);
        if (w->status == AT_OK && i % 10 == 0 && gemm_run(w->ctx, k, &p, w->seed + i) != 0)
            w->status = AT_ERR_INTERNAL;
        at_kernel_destroy(k);
    }
    return NULL;
}

static void test_threads(void **state)
{
    at_context *ctx = open_ctx(state);
    enum { N = 4 };
    pthread_t th[N];
    worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){ctx, i, AT_OK};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (w[i].status != AT_OK) fail_msg("thread %d: %s", i, at_context_last_error(ctx));
    }
    at_context_destroy(ctx);
}

int main(void)
{
    at_device_desc d;
    if (at_device_query("opencl", 0, &d) != AT_OK) {
        fprintf(stderr, "SKIPPED: no OpenCL device\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shared_program, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_tune_replaces, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_threads, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
