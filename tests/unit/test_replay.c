/* test_replay.c — the replay device: Kernel Tuner cache files (plain, gzip'd, real ones) and
 * our results database loaded as recorded spaces, replays that reproduce the recorded best,
 * and the errors on bad input. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cache/db.h"
#include "cache/recording.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char g_dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/at-replay-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_file(const char *name, const char *text, int gz)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzputs(f, text), (int)strlen(text));
        gzclose(f);
    } else {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* Values out of order, a string parameter, a failure, an InvalidConfig and a record without
 * per-parameter fields (its key says the values). */
static const char KT[] =
    "{\"device_name\": \"Test GPU\", \"kernel_name\": \"conv\", \"tune_params_keys\": [\"bx\", "
    "\"mode\", \"f\"],\n"
    " \"tune_params\": {\"bx\": [64, 16, 32], \"mode\": [\"fast\", \"safe\"], \"f\": [1.5]},\n"
    " \"cache\": {\n"
    "  \"16,fast,1.5\": {\"bx\": 16, \"mode\": \"fast\", \"f\": 1.5, \"time\": 3.0,\n"
    "                 \"compile_time\": 2000, \"benchmark_time\": 1000},\n"
    "  \"32,fast,1.5\": {\"bx\": 32, \"mode\": \"fast\", \"f\": 1.5, \"time\": 2.5},\n"
    "  \"64,fast,1.5\": {\"bx\": 64, \"mode\": \"fast\", \"f\": 1.5, \"time\": "
    "\"CompilationFailedConfig\"},\n"
    "  \"16,safe,1.5\": {\"bx\": 16, \"mode\": \"safe\", \"f\": 1.5, \"time\": "
    "\"InvalidConfig\"},\n"
    "  \"32,safe,1.5\": {\"time\": 1.25},\n"
    "  \"64,safe,1.5\": {\"bx\": 64, \"mode\": \"safe\", \"f\": 1.5, \"time\": 4}}}\n";

static void check_kt(const at_recording *r)
{
    assert_string_equal(r->format, "kerneltuner");
    assert_string_equal(r->device, "Test GPU");
    assert_string_equal(r->objective, "time");
    assert_int_equal(r->nparams, 3);
    assert_int_equal(r->nconfigs, 5); /* InvalidConfig is not part of the space */
    assert_int_equal(r->nfailed, 1);
    assert_true(r->have_optimum);
    char cfg[256];
    at_recording_config(r, r->optimum, cfg, sizeof cfg);
    assert_string_equal(cfg, "bx=32,mode=safe,f=1.5");
    assert_true(r->value[r->optimum] == 1.25);
    /* Value text and numbers as the file gives them, in its order. */
    assert_string_equal(r->values[0][0], "64");
    assert_true(r->numeric[0][1] == 16);
    assert_true(isnan(r->numeric[1][0]));
    assert_string_equal(r->values[2][0], "1.5");
    for (size_t i = 0; i < r->nconfigs; i++) {
        at_recording_config(r, i, cfg, sizeof cfg);
        if (strcmp(cfg, "bx=64,mode=fast,f=1.5") == 0) {
            assert_true(isinf(r->cost[i]));
            assert_string_equal(r->status[i], "CompilationFailedConfig");
        }
        if (strcmp(cfg, "bx=16,mode=fast,f=1.5") == 0) assert_true(fabs(r->eval_s[i] - 3.0) < 1e-9);
    }
}

static void test_kt_plain_and_gzip(void **state)
{
    (void)state;
    for (int gz = 0; gz < 2; gz++) {
        at_recording *r = NULL;
        assert_int_equal(
            at_recording_load(write_file(gz ? "kt.json.gz" : "kt.json", KT, gz), NULL, &r), AT_OK);
        check_kt(r);
        at_recording_free(r);
    }
}

static void test_kt_rate_objective(void **state)
{
    (void)state;
    const char *json = "{\"tune_params_keys\": [\"a\"], \"tune_params\": {\"a\": [1, 2, 3]},"
                       " \"objective\": \"GFLOP/s\", \"cache\": {"
                       "\"1\": {\"a\": 1, \"GFLOP/s\": 100}, \"2\": {\"a\": 2, \"GFLOP/s\": 300},"
                       "\"3\": {\"a\": 3, \"GFLOP/s\": 200}}}";
    at_recording *r = NULL;
    assert_int_equal(at_recording_load(write_file("rate.json", json, 0), NULL, &r), AT_OK);
    assert_true(r->higher_better);
    assert_true(r->value[r->optimum] == 300);
    assert_true(r->cost[r->optimum] < r->cost[0]);
    at_recording_free(r);
}

static void expect_error(const char *name, const char *text, const char *want)
{
    at_recording *r = NULL;
    at_status st = at_recording_load(write_file(name, text, 0), NULL, &r);
    assert_int_equal(st, AT_ERR_INVALID_ARG);
    assert_null(r);
    if (!strstr(at_errmsg(), want)) fail_msg("'%s' lacks '%s'", at_errmsg(), want);
}

static void test_kt_bad_input(void **state)
{
    (void)state;
    expect_error("trunc.json", "{\"tune_params_keys\": [\"a\"], \"cache\": {", "malformed JSON");
    expect_error("nokeys.json", "{\"cache\": {}}", "no \"tune_params_keys\"");
    expect_error("noparams.json", "{\"tune_params_keys\": [\"a\"], \"cache\": {}}",
                 "no \"tune_params\"");
    expect_error("empty.json",
                 "{\"tune_params_keys\": [\"a\"], \"tune_params\": {\"a\": [1]}, \"cache\": {}}",
                 "holds no configuration");
    expect_error("foreign.json",
                 "{\"tune_params_keys\": [\"a\"], \"tune_params\": {\"a\": [1]}, \"cache\": "
                 "{\"7\": {\"a\": 7, \"time\": 1}}}",
                 "parameter a is missing or not one of");
    expect_error("text.txt", "hello", "neither Kernel Tuner cache JSON");
    at_recording *r = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/absent.json", g_dir);
    assert_int_equal(at_recording_load(path, NULL, &r), AT_ERR_IO);
}

static void test_kt_replay_reproduces_optimum(void **state)
{
    (void)state;
    const char *path = write_file("kt.json", KT, 0);
    at_tune_options o = {.strategy = "exhaustive"};
    at_replay_report rep;
    char why[256];
    assert_int_equal(at_replay_file(path, NULL, &o, &rep, why, sizeof why), AT_OK);
    assert_int_equal(rep.space, 5);
    assert_int_equal(rep.evaluated, 5);
    assert_int_equal(rep.failed, 1);
    assert_true(rep.found && rep.best == 1.25 && rep.optimum == 1.25);
    assert_string_equal(rep.best_config, rep.optimum_config);
    assert_true(rep.ntrajectory >= 2);
    assert_true(rep.trajectory_best[rep.ntrajectory - 1] == 1.25);
    for (size_t i = 1; i < rep.ntrajectory; i++) {
        assert_true(rep.trajectory_evals[i] > rep.trajectory_evals[i - 1]);
        assert_true(rep.trajectory_best[i] < rep.trajectory_best[i - 1]);
    }
    at_replay_report_clear(&rep);
    o.strategy = "simplex";
    assert_int_equal(at_replay_file(path, NULL, &o, &rep, why, sizeof why), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(why, "simplex"));
}

/* Our own database: two recorded spaces; a selection picks one. */
static void put(at_db *db, const char *problem, const char *config, at_result_status st, double us)
{
    at_result_rec r = {.status = st, .median_us = us, .reps = 3, .compile_ms = 100};
    char *key = at_db_result_key(problem, "opencl/P/dev/4", "0123456789abcdef", config);
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    free(key);
}

static void test_database(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/db", g_dir);
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, 0, &db), AT_OK);
    put(db, "gemm/f32/nn/8x8x8", "BM=64,VW=1", AT_RS_OK, 30);
    put(db, "gemm/f32/nn/8x8x8", "BM=16,VW=2", AT_RS_OK, 20);
    put(db, "gemm/f32/nn/8x8x8", "BM=8,VW=1", AT_RS_COMPILE_ERROR, 0);
    put(db, "gemm/f32/nn/8x8x8", "BM=16,VW=1", AT_RS_OK, 25);
    put(db, "gemm/f32/nn/9x9x9", "BM=16,VW=1", AT_RS_OK, 5);
    at_db_close(db);

    at_recording *r = NULL;
    assert_int_equal(at_recording_load(path, NULL, &r), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "more than one recorded space"));
    assert_int_equal(at_recording_load(path, "gemm/f32/nn/8x8x8|", &r), AT_OK);
    assert_string_equal(r->format, "autotune");
    assert_string_equal(r->device, "opencl/P/dev/4");
    assert_int_equal(r->nconfigs, 4);
    assert_int_equal(r->nfailed, 1);
    /* Values sorted numerically, so neighbours are adjacent values. */
    assert_int_equal(r->nvalues[0], 3);
    assert_string_equal(r->values[0][0], "8");
    assert_string_equal(r->values[0][2], "64");
    char cfg[128];
    at_recording_config(r, r->optimum, cfg, sizeof cfg);
    assert_string_equal(cfg, "BM=16,VW=2");
    assert_true(r->value[r->optimum] == 20);
    at_recording_free(r);

    assert_int_equal(at_recording_load(path, "gemm/f32/nn/7", &r), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "has no results starting with 'gemm/f32/nn/7'"));

    /* The data file itself says it is LMDB: the same database. */
    char file[600];
    snprintf(file, sizeof file, "%s/data.mdb", path);
    assert_int_equal(at_recording_load(file, "gemm/f32/nn/9x9x9", &r), AT_OK);
    assert_int_equal(r->nconfigs, 1);
    at_recording_free(r);
    snprintf(file, sizeof file, "%s/copy.mdb", g_dir);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s/data.mdb' '%s'", path, file);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(at_recording_load(file, NULL, &r), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "is an LMDB file but not"));

    at_tune_options o = {.strategy = "model", .seed = 3};
    at_replay_report rep;
    assert_int_equal(at_replay_file(path, "gemm/f32/nn/8x8x8", &o, &rep, NULL, 0), AT_OK);
    assert_int_equal(rep.evaluated, 4);
    assert_string_equal(rep.best_config, "BM=16,VW=2");
    at_replay_report_clear(&rep);
}

/* A real recording (CI has ../shared beside the repository; AUTOTUNE_SPACES overrides). */
static void test_real_recording(void **state)
{
    (void)state;
    char path[1024];
    const char *dir = getenv("AUTOTUNE_SPACES");
    snprintf(path, sizeof path, "%s%s/gemm-clblast-RTX_3090.json.gz", dir ? dir : AT_SOURCE_DIR,
             dir ? "" : "/../shared/spaces");
    if (access(path, R_OK) != 0) {
        print_message("skipped: %s is absent\n", path);
        skip();
    }
    at_recording *r = NULL;
    assert_int_equal(at_recording_load(path, NULL, &r), AT_OK);
    assert_int_equal(r->nconfigs, 17956);
    assert_int_equal(r->nparams, 15);
    assert_int_equal(r->nfailed, 0);
    assert_true(fabs(r->value[r->optimum] - 5.658) < 1e-3);
    at_recording_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kt_plain_and_gzip),
        cmocka_unit_test(test_kt_rate_objective),
        cmocka_unit_test(test_kt_bad_input),
        cmocka_unit_test(test_kt_replay_reproduces_optimum),
        cmocka_unit_test(test_database),
        cmocka_unit_test(test_real_recording),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
