/* test_api.c — the public library API on the OpenCL device: context errors, get with its
 * fallbacks (default, hit, nearest, no-fallback), tune with report and cache hit, resume after
 * cancel, bad problems, buffer range checks, the environment's controls (tuning off, budget,
 * read-only database). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/tmpdir.h"

#include "autotune.h"
#include "tuner/tuner.h" /* at_kernel's from_binary: the binaries table was really used */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A context on the OpenCL device with its database in the test's directory. */
static at_context *open_ctx(void **state)
{
    at_context_options o = {.backend = AT_BACKEND_OPENCL, .db_path = *state};
    at_context *ctx = NULL;
    at_status s = at_context_create(&o, &ctx);
    if (s != AT_OK) fail_msg("context: %s", at_context_last_error(ctx));
    return ctx;
}

static void test_context_errors(void **state)
{
    (void)state;
    at_context *ctx = NULL;
    at_context_options o = {.backend = AT_BACKEND_CUDA, .db_path = *state};
    assert_int_equal(at_context_create(&o, &ctx), AT_ERR_NO_BACKEND);
    assert_non_null(strstr(at_context_last_error(ctx), "cuda"));
    at_context_destroy(ctx);

    o.backend = AT_BACKEND_OPENCL;
    o.device = 99;
    assert_int_equal(at_context_create(&o, &ctx), AT_ERR_NO_DEVICE);
    assert_non_null(strstr(at_context_last_error(ctx), "device 99"));
    at_context_destroy(ctx);

    o.device = 0;
    o.db_path = "/proc/no-such-autotune-db";
    assert_int_equal(at_context_create(&o, &ctx), AT_ERR_DB);
    assert_non_null(strstr(at_context_last_error(ctx), "/proc/no-such-autotune-db"));
    at_context_destroy(ctx);
    at_context_destroy(NULL);
    assert_string_equal(at_strerror(AT_ERR_DB_VERSION), "database was written by a newer autotune");
}

static void test_bad_problems(void **state)
{
    (void)state;
    at_context *ctx = open_ctx(state);
    at_kernel *k = NULL;
    at_gemm_problem p = {.m = 0, .n = 4, .k = 4, .alpha = 1};
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "m = 0"));
    p.m = 4;
    p.dtype = AT_DTYPE_F16;
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k, NULL), AT_ERR_UNSUPPORTED);
    p.dtype = AT_DTYPE_F32;
    p.lda = 2; /* < k */
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "lda"));
    p.lda = 0;
    p.layout = (at_layout)9;
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k, NULL), AT_ERR_INVALID_ARG);
    assert_null(k);
    at_tune_options t = {.strategy = "nope"};
    p.layout = AT_LAYOUT_NN;
    assert_int_equal(at_gemm_tune(ctx, &p, &t, NULL, NULL), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_context_last_error(ctx), "nope"));
    at_context_destroy(ctx);
}

static void test_get_tune_hit_nearest(void **state)
{
    (void)state;
    at_context *ctx = open_ctx(state);
    at_gemm_problem p = {.m = 40, .n = 24, .k = 31, .alpha = 1};
    at_kernel *k = NULL;
    at_source src;

    assert_int_equal(at_gemm_get(ctx, &p, AT_GET_NO_FALLBACK, &k, &src), AT_ERR_NOT_FOUND);
    assert_int_equal(at_gemm_get(ctx, &p, 0, &k, &src), AT_OK);
    assert_true(src == AT_SOURCE_DEFAULT || src == AT_SOURCE_NEAREST); /* not tuned */
    at_kernel_destroy(k);

    at_tune_options t = {.strategy = "random", .max_evals = 4, .seed = 3};
    at_tune_report r;
    assert_int_equal(at_gemm_tune(ctx, &p, &t, &r, &k), AT_OK);
    assert_int_equal(r.evaluated, 4);
    assert_int_equal(r.measured, 4);
    assert_int_equal(r.cache_hit, 0);
    assert_true(r.space > 0 && r.space <= r.space_total);
    assert_true(r.best_time_us > 0 && r.best_gflops > 0);
    assert_true(r.best_max_rel_error < 1e-4);
    assert_string_equal(at_kernel_config(k), r.best_config);
    at_kernel_destroy(k);

    /* A second tune is a cache hit: nothing measured. */
    assert_int_equal(at_gemm_tune(ctx, &p, &t, &r, NULL), AT_OK);
    assert_int_equal(r.cache_hit, 1);
    assert_int_equal(r.measured, 0);
    assert_true(r.seconds < 1.0);

    assert_int_equal(at_gemm_get(ctx, &p, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_HIT);
    at_kernel_destroy(k);

    /* A nearby shape falls back to the nearest tuned one. */
    at_gemm_problem q = p;
    q.m = 44;
    assert_int_equal(at_gemm_get(ctx, &q, 0, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_NEAREST);
    at_kernel_destroy(k);
    /* Another layout has no tuned neighbour. */
    q.layout = AT_LAYOUT_TT;
    assert_int_equal(at_gemm_get(ctx, &q, 0, &k, &src), AT_OK);
    assert_true(src == AT_SOURCE_DEFAULT || src == AT_SOURCE_NEAREST); /* not tuned */
    at_kernel_destroy(k);
    at_context_destroy(ctx);

    /* A new process (context) loads the tuned kernel from the binaries table. */
    ctx = open_ctx(state);
    assert_int_equal(at_gemm_get(ctx, &p, AT_GET_NO_FALLBACK, &k, &src), AT_OK);
    assert_int_equal(src, AT_SOURCE_HIT);
    assert_int_equal(k->from_binary, 1);
    at_kernel_destroy(k);
    at_context_destroy(ctx);
}

static void cancel_after_three(void *user, int64_t done, int64_t budget, double best, double t,
                               double eta)
{
    assert_int_equal(budget, 6);
    assert_true(best > 0 && t > 0 && eta > 0);
    if (done >= 3) *(volatile int *)user = 1;
}

static void test_cancel_then_resume(void **state)
{
    (void)state;
    at_context *ctx = open_ctx(state);
    at_gemm_problem p = {.m = 21, .n = 18, .k = 9, .alpha = 1, .beta = 0.5f};
    volatile int cancel = 0;
    at_tune_options t = {.strategy = "random",
                         .max_evals = 6,
                         .seed = 11,
                         .progress = cancel_after_three,
                         .progress_user = (void *)&cancel,
                         .cancel = &cancel};
    at_tune_report r;
    assert_int_equal(at_gemm_tune(ctx, &p, &t, &r, NULL), AT_ERR_INTERRUPTED);
    assert_int_equal(r.measured, 3);
    at_kernel *k = NULL;
    /* No best entry was written: the problem is still a miss. */
    assert_int_equal(at_gemm_get(ctx, &p, AT_GET_NO_FALLBACK, &k, NULL), AT_ERR_NOT_FOUND);

    /* The same run again measures only the three it had not reached. */
    t.progress = NULL;
    t.cancel = NULL;
    assert_int_equal(at_gemm_tune(ctx, &p, &t, &r, NULL), AT_OK);
    assert_int_equal(r.evaluated, 6);
    assert_int_equal(r.measured, 3);
    assert_int_equal(at_gemm_get(ctx, &p, AT_GET_NO_FALLBACK, &k, NULL), AT_OK);
    at_kernel_destroy(k);
    at_context_destroy(ctx);
}

static void test_buffers(void **state)
{
    (void)state;
    at_context *ctx = open_ctx(state);
    at_buffer *b = NULL;
    assert_int_equal(at_buffer_create(ctx, 0, &b), AT_ERR_INVALID_ARG);
    assert_int_equal(at_buffer_create(ctx, 64, &b), AT_OK);
    char in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = (char)i;
    assert_int_equal(at_buffer_write(b, 0, in, 64), AT_OK);
    assert_int_equal(at_buffer_write(b, 60, in, 8), AT_ERR_INVALID_ARG);
    assert_int_equal(at_buffer_read(b, 16, out, 16), AT_OK);
    assert_memory_equal(out, in + 16, 16);
    assert_non_null(at_buffer_devptr(b).handle);
    assert_ptr_equal(at_devptr_from_handle(at_buffer_devptr(b).handle).handle,
                     at_buffer_devptr(b).handle);
    assert_int_equal((uintptr_t)at_devptr_from_address(0x7f0000001000ull).handle,
                     0x7f0000001000ull);
    assert_non_null(at_context_native_context(ctx));
    assert_non_null(at_context_native_queue(ctx));
    assert_int_equal(at_context_synchronize(ctx), AT_OK);
    at_buffer_destroy(b);
    at_buffer_destroy(NULL);
    at_kernel_destroy(NULL);
    at_context_destroy(ctx);
}

/* The environment's controls: AUTOTUNE_TUNING=0 never tunes (a get that may tune falls back;
 * a tune answers only from the databases), AUTOTUNE_BUDGET is the default budget, and a bad
 * value of either is refused at context creation. */
static void test_environment(void **state)
{
    at_gemm_problem p = {.m = 21, .n = 13, .k = 8, .alpha = 1};
    at_kernel *k = NULL;
    at_source src = AT_SOURCE_HIT;
    at_tune_report rep;
    setenv("AUTOTUNE_TUNING", "0", 1);
    at_context *ctx = open_ctx(state);
    assert_int_equal(at_gemm_get(ctx, &p, AT_GET_ALLOW_TUNE, &k, &src), AT_OK);
    assert_true(src == AT_SOURCE_DEFAULT || src == AT_SOURCE_NEAREST); /* not tuned */
    at_kernel_destroy(k);
    assert_int_equal(at_gemm_tune(ctx, &p, NULL, &rep, NULL), AT_ERR_NOT_FOUND);
    assert_non_null(strstr(at_context_last_error(ctx), "AUTOTUNE_TUNING=0"));
    assert_int_equal(rep.measured, 0);
    at_context_destroy(ctx);

    setenv("AUTOTUNE_TUNING", "1", 1);
    setenv("AUTOTUNE_BUDGET", "2", 1);
    ctx = open_ctx(state);
    at_tune_options o = {.strategy = "random"};
    assert_int_equal(at_gemm_tune(ctx, &p, &o, &rep, NULL), AT_OK);
    assert_int_equal(rep.evaluated, 2);
    at_context_destroy(ctx);

    /* Tuned: with tuning off the entry still answers. */
    setenv("AUTOTUNE_TUNING", "0", 1);
    ctx = open_ctx(state);
    assert_int_equal(at_gemm_tune(ctx, &p, NULL, &rep, NULL), AT_OK);
    assert_int_equal(rep.cache_hit, 1);
    at_context_destroy(ctx);

    /* AUTOTUNE_DB_READONLY=1: the entry answers, nothing is tuned, and nothing in the
     * database's folder is created or written (not the lock file, not data.mdb). */
    unsetenv("AUTOTUNE_TUNING");
    setenv("AUTOTUNE_DB_READONLY", "1", 1);
    char lock[4096], data[4096];
    snprintf(lock, sizeof lock, "%s/lock.mdb", (const char *)*state);
    snprintf(data, sizeof data, "%s/data.mdb", (const char *)*state);
    assert_int_equal(unlink(lock), 0);
    struct stat before, after;
    assert_int_equal(stat(data, &before), 0);
    ctx = open_ctx(state);
    assert_int_equal(at_gemm_tune(ctx, &p, NULL, &rep, NULL), AT_OK);
    assert_int_equal(rep.cache_hit, 1);
    at_gemm_problem q = {.m = 19, .n = 13, .k = 8, .alpha = 1};
    assert_int_equal(at_gemm_get(ctx, &q, AT_GET_ALLOW_TUNE, &k, &src), AT_OK);
    assert_true(src == AT_SOURCE_DEFAULT || src == AT_SOURCE_NEAREST); /* not tuned */
    at_kernel_destroy(k);
    assert_int_equal(at_gemm_tune(ctx, &q, NULL, &rep, NULL), AT_ERR_NOT_FOUND);
    assert_non_null(strstr(at_context_last_error(ctx), "AUTOTUNE_DB_READONLY=1"));
    at_context_destroy(ctx);
    assert_int_equal(stat(data, &after), 0);
    assert_int_equal(access(lock, F_OK), -1);
    assert_int_equal(before.st_size, after.st_size);
    assert_true(before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
                before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
    /* It must exist: the message names the variable. */
    char missing[4096];
    snprintf(missing, sizeof missing, "%s/none", (const char *)*state);
    at_context_options mo = {.backend = AT_BACKEND_OPENCL, .db_path = missing};
    assert_int_equal(at_context_create(&mo, &ctx), AT_ERR_DB);
    assert_non_null(strstr(at_context_last_error(ctx), "AUTOTUNE_DB_READONLY=1"));
    at_context_destroy(ctx);
    unsetenv("AUTOTUNE_DB_READONLY");

    const char *bad[][2] = {{"AUTOTUNE_TUNING", "yes"},
                            {"AUTOTUNE_DB_READONLY", "yes"},
                            {"AUTOTUNE_BUDGET", "0"},
                            {"AUTOTUNE_BUDGET", "1.5"},
                            {"AUTOTUNE_BUDGET", "-3s"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsetenv("AUTOTUNE_TUNING");
        unsetenv("AUTOTUNE_BUDGET");
        unsetenv("AUTOTUNE_DB_READONLY");
        setenv(bad[i][0], bad[i][1], 1);
        at_context_options co = {.backend = AT_BACKEND_OPENCL, .db_path = *state};
        assert_int_equal(at_context_create(&co, &ctx), AT_ERR_INVALID_ARG);
        assert_non_null(strstr(at_context_last_error(ctx), bad[i][0]));
        at_context_destroy(ctx);
    }
    unsetenv("AUTOTUNE_TUNING");
    unsetenv("AUTOTUNE_BUDGET");
    unsetenv("AUTOTUNE_DB_READONLY");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_errors),
        cmocka_unit_test(test_bad_problems),
        cmocka_unit_test(test_get_tune_hit_nearest),
        cmocka_unit_test(test_cancel_then_resume),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_environment),
    };
    return cmocka_run_group_tests(tests, make_tmp, remove_tmp);
}
