/* test_kt_export.c — the Kernel Tuner cache export of a results database: records, failures,
 * parameter values, selection by problem, device and template, and bad input. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tmpdir.h"

#include "cache/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define P  "gemm/f32/nn/8x8x8"
#define D1 "opencl/dev/one/2"
#define D2 "cuda/sm_90a/two/132"

static void put(at_db *db, const char *problem, const char *dev, const char *hash,
                const char *config, at_result_status st, double us, const char *reason)
{
    at_result_rec r = {.status = st,
                       .median_us = us,
                       .min_us = us,
                       .max_us = us,
                       .reps = 10,
                       .compile_ms = 12.5,
                       .when = 1700000000};
    snprintf(r.reason, sizeof r.reason, "%s", reason);
    char *key = at_db_result_key(problem, dev, hash, config);
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    free(key);
}

/* A database with one space (5 configs, 3 failed) and distractors around it. */
static char *fill(void **state)
{
    char *path = NULL;
    assert_true(asprintf(&path, "%s/db", (const char *)*state) > 0);
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, 0, &db), AT_OK);
    put(db, P, D1, "aaaa", "BM=16,V=x", AT_RS_OK, 250.0, "");
    put(db, P, D1, "aaaa", "BM=8,V=x", AT_RS_OK, 125.5, "");
    put(db, P, D1, "aaaa", "BM=32,V=x", AT_RS_COMPILE_ERROR, 0, "error: \"bad\"\nline 2");
    put(db, P, D1, "aaaa", "BM=64,V=y", AT_RS_RESOURCE_LIMIT, 0, "too many threads");
    put(db, P, D1, "aaaa", "BM=128,V=y", AT_RS_CRASHED, 0, "signal 11");
    put(db, "gemm/f32/nn/8x8x80", D1, "aaaa", "BM=4,V=x", AT_RS_OK, 1.0, ""); /* prefix twin */
    at_db_close(db);
    return path;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_export_space(void **state)
{
    char *db = fill(state), *out = NULL, why[512] = "";
    assert_true(asprintf(&out, "%s/kt.json", (const char *)*state) > 0);
    assert_int_equal(at_db_export_kernel_tuner(db, P, NULL, NULL, out, why, sizeof why), AT_OK);
    const char *j = slurp(out);
    assert_non_null(strstr(j, "\"device_name\": \"" D1 "\""));
    assert_non_null(strstr(j, "\"kernel_name\": \"gemm\""));
    assert_non_null(strstr(j, "\"problem_size\": [8, 8, 8]"));
    assert_non_null(strstr(j, "\"tune_params_keys\": [\"BM\", \"V\"]"));
    /* numeric values sorted as numbers, other values as strings */
    assert_non_null(strstr(j, "\"BM\": [8, 16, 32, 64, 128]"));
    assert_non_null(strstr(j, "\"V\": [\"x\", \"y\"]"));
    /* times in ms; the failures named as Kernel Tuner names them, the reason escaped */
    assert_non_null(
        strstr(j, "\"8,x\": {\"BM\": 8, \"V\": \"x\", \"time\": 0.1255, \"times\": [0.1255]"));
    assert_non_null(strstr(j, "\"16,x\": {\"BM\": 16, \"V\": \"x\", \"time\": 0.25,"));
    assert_non_null(strstr(j, "\"time\": \"CompilationFailedConfig\""));
    assert_non_null(strstr(j, "\"time\": \"InvalidConfig\""));
    assert_non_null(strstr(j, "\"time\": \"RuntimeFailedConfig\""));
    assert_non_null(strstr(j, "\"reason\": \"error: \\\"bad\\\"\\u000aline 2\""));
    assert_non_null(strstr(j, "\"timestamp\": \"2023-11-14 22:13:20+00:00\""));
    assert_null(strstr(j, "\"4,x\"")); /* the 8x8x80 problem is not part of it */
    size_t n = 0;
    for (const char *p = j; (p = strstr(p, "\"compile_time\"")); p++) n++;
    assert_int_equal(n, 5);
    free(out);
    free(db);
}

static void test_select_device_and_template(void **state)
{
    char *db = fill(state), *out = NULL, why[512] = "";
    assert_true(asprintf(&out, "%s/kt.json", (const char *)*state) > 0);
    at_db *h = NULL;
    assert_int_equal(at_db_open(db, 0, &h), AT_OK);
    put(h, P, D2, "aaaa", "BM=16,V=x", AT_RS_OK, 9.0, "");
    at_db_close(h);
    assert_int_equal(at_db_export_kernel_tuner(db, P, NULL, NULL, out, why, sizeof why),
                     AT_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "several devices"));
    assert_non_null(strstr(why, D1));
    assert_non_null(strstr(why, D2));
    assert_int_equal(at_db_export_kernel_tuner(db, P, D2, NULL, out, why, sizeof why), AT_OK);
    assert_non_null(strstr(slurp(out), "\"time\": 0.009,"));

    assert_int_equal(at_db_open(db, 0, &h), AT_OK);
    put(h, P, D2, "bbbb", "BM=16,V=x", AT_RS_OK, 7.0, "");
    at_db_close(h);
    assert_int_equal(at_db_export_kernel_tuner(db, P, D2, NULL, out, why, sizeof why),
                     AT_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "several template versions"));
    assert_int_equal(at_db_export_kernel_tuner(db, P, D2, "bbbb", out, why, sizeof why), AT_OK);
    assert_non_null(strstr(slurp(out), "\"time\": 0.007,"));
    assert_int_equal(at_db_export_kernel_tuner(db, P, D2, "cccc", out, why, sizeof why),
                     AT_ERR_NOT_FOUND);
    free(out);
    free(db);
}

static void test_bad_input(void **state)
{
    char *db = fill(state), *out = NULL, why[512] = "";
    assert_true(asprintf(&out, "%s/no/such/dir/kt.json", (const char *)*state) > 0);
    assert_int_equal(
        at_db_export_kernel_tuner(db, "gemm/f32/nn/8x8", NULL, NULL, NULL, why, sizeof why),
        AT_ERR_NOT_FOUND);
    assert_non_null(strstr(why, "no results for problem 'gemm/f32/nn/8x8'"));
    assert_int_equal(at_db_export_kernel_tuner(db, "", NULL, NULL, NULL, why, sizeof why),
                     AT_ERR_INVALID_ARG);
    assert_int_equal(at_db_export_kernel_tuner(db, P "|x", NULL, NULL, NULL, why, sizeof why),
                     AT_ERR_INVALID_ARG);
    assert_int_equal(at_db_export_kernel_tuner(db, P, NULL, NULL, out, why, sizeof why), AT_ERR_IO);
    assert_non_null(strstr(why, "cannot write"));
    char *missing = NULL;
    assert_true(asprintf(&missing, "%s/none", (const char *)*state) > 0);
    assert_int_not_equal(at_db_export_kernel_tuner(missing, P, NULL, NULL, NULL, why, sizeof why),
                         AT_OK);
    free(missing);
    free(out);
    free(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_export_space, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_select_device_and_template, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_bad_input, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
