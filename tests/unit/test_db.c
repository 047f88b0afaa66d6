/* test_db.c — the LMDB store: open/create, records, batches, best rule, binaries, scans, map
 * growth, rejected files left untouched, concurrent writers. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tmpdir.h"

#include "dbtest.h"

#include "cache/db.h"

#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------------------- */

/* The whole file, for byte-for-byte comparison. */
static char *slurp(const char *path, size_t *n)
{
    char *d = NULL;
    assert_int_equal(at_read_file(path, &d, n), AT_OK);
    return d;
}

static void assert_file_is(const char *path, const char *data, size_t n)
{
    size_t m = 0;
    char *now = slurp(path, &m);
    assert_int_equal(m, n);
    assert_true(memcmp(now, data, n) == 0);
    assert_true(at_hash(AT_HASH_SEED, now, m) == at_hash(AT_HASH_SEED, data, n));
    free(now);
}

static at_db *open_ok(const char *path)
{
    at_db *db = NULL;
    at_status s = at_db_open(path, 0, &db);
    if (s != AT_OK) fprintf(stderr, "at_db_open: %s\n", at_errmsg());
    assert_int_equal(s, AT_OK);
    assert_non_null(db);
    return db;
}

static at_result_rec sample_result(int i)
{
    at_result_rec r;
    memset(&r, 0, sizeof r);
    r.status = (at_result_status)(i % AT_RS_COUNT);
    r.median_us = 100.0 + i * 0.1;
    r.min_us = 99.0 + i / 3.0;
    r.max_us = 1e3 + i;
    r.reps = 5 + i;
    r.early_stop = i & 1;
    r.max_rel_error = 1.2e-6 * (i + 1);
    r.compile_ms = 800.25 + i;
    r.when = 1700000000 + i;
    if (r.status != AT_RS_OK) snprintf(r.reason, sizeof r.reason, "failure %d", i);
    return r;
}

static void assert_result_equal(const at_result_rec *a, const at_result_rec *b)
{
    assert_int_equal(a->status, b->status);
    assert_true(a->median_us == b->median_us);
    assert_true(a->min_us == b->min_us);
    assert_true(a->max_us == b->max_us);
    assert_int_equal(a->reps, b->reps);
    assert_int_equal(a->early_stop, b->early_stop);
    assert_true(a->max_rel_error == b->max_rel_error);
    assert_true(a->compile_ms == b->compile_ms);
    assert_int_equal(a->when, b->when);
    assert_string_equal(a->reason, b->reason);
}

static at_best_rec sample_best(const char *hash, double t)
{
    at_best_rec b;
    memset(&b, 0, sizeof b);
    snprintf(b.config, sizeof b.config, "BM=64,BN=64,BK=16,name=\"x\\y\"");
    snprintf(b.template_hash, sizeof b.template_hash, "%s", hash);
    b.time_us = t;
    b.gflops = 1234.5678;
    b.max_rel_error = 3.5e-7;
    b.when = 1700000123;
    snprintf(b.compiler, sizeof b.compiler, "nvrtc 12.4 \"release\"");
    snprintf(b.driver, sizeof b.driver, "550.54.15");
    return b;
}

typedef struct collect {
    int n, stop_after;
    char keys[64][128];
    char values[64][600];
} collect;

static int collect_fn(void *user, const char *key, const char *value)
{
    collect *c = user;
    if (c->n < 64) {
        snprintf(c->keys[c->n], sizeof c->keys[0], "%s", key);
        snprintf(c->values[c->n], sizeof c->values[0], "%s", value);
    }
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

static int count_fn(void *user, const char *key, const char *value)
{
    (void)key;
    (void)value;
    (*(int *)user)++;
    return 0;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_open_create(void **state)
{
    char *path = sub(state, "a/b/db");
    at_db *db = open_ok(path);
    assert_string_equal(at_db_path(db), path);
    collect c = {0};
    assert_int_equal(at_db_scan(db, "meta", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.keys[0], "created_by");
    assert_string_equal(c.values[0], "autotune " AT_VERSION_STRING);
    assert_string_equal(c.keys[1], "schema");
    assert_string_equal(c.values[1], "2");
    assert_string_equal(c.keys[2], "schema_minor");
    assert_string_equal(c.values[2], "1");
    at_db_close(db);
    at_db_close(NULL);

    char *file = sub(state, "a/b/db/data.mdb");
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    /* LMDB's meta page: magic at offset 16 of page 0 (and of page 1). */
    size_t n = 0;
    unsigned char *d = (unsigned char *)slurp(file, &n);
    uint32_t magic, psize;
    memcpy(&magic, d + 16, 4);
    memcpy(&psize, d + 40, 4);
    assert_true(magic == 0xBEEFC0DEu);
    assert_true(n >= 2 * (size_t)psize);
    memcpy(&magic, d + psize + 16, 4);
    assert_true(magic == 0xBEEFC0DEu);
    free(d);
    free(file);

    /* Reopen, also read-only. */
    db = open_ok(path);
    at_db_close(db);
    assert_int_equal(at_db_open(path, 1, &db), AT_OK);
    at_result_rec r = sample_result(0);
    char *key = "k";
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_ERR_DB);
    at_db_close(db);
    free(path);
}

static void test_results_roundtrip(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    at_result_rec r = sample_result(3);
    r.status = AT_RS_WRONG_RESULT;
    r.median_us = 0.1;
    r.min_us = 1e-300;
    r.max_us = 123456.7890123;
    r.max_rel_error = 1.0 / 3.0;
    r.reps = 0;
    r.when = -5;
    snprintf(r.reason, sizeof r.reason,
             "error: \"x\" differs\nat C[3,4] \\ got 1.5\twant 2\r\x01 end");
    char *key = at_db_result_key("gemm/f32/nn/64x64x64", "opencl/pocl/cpu", "0123456789abcdef",
                                 "BM=16,BN=16");
    assert_string_equal(key, "gemm/f32/nn/64x64x64|opencl/pocl/cpu|0123456789abcdef|BM=16,BN=16");
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    at_result_rec back;
    assert_int_equal(at_db_get_result(db, key, &back), AT_OK);
    assert_result_equal(&r, &back);

    char text[2048];
    at_result_rec_format(&r, text, sizeof text);
    assert_null(strchr(text, '\n'));
    assert_non_null(strstr(text, "v2 status=wrong_result median_us=0.10000000000000001 "));
    assert_non_null(strstr(text, "reason=\"error: \\\"x\\\" differs\\nat C[3,4] \\\\ got"));
    /* Truncation into a small buffer stays NUL-terminated. */
    char small[10];
    at_result_rec_format(&r, small, sizeof small);
    assert_string_equal(small, "v2 status");

    /* Overwrite with a new measurement. */
    r = sample_result(0);
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    assert_int_equal(at_db_get_result(db, key, &back), AT_OK);
    assert_result_equal(&r, &back);

    /* Status names. */
    for (int i = 0; i < AT_RS_COUNT; i++)
        assert_int_equal(at_result_status_parse(at_result_status_name((at_result_status)i)), i);
    assert_string_equal(at_result_status_name(AT_RS_COMPILE_ERROR), "compile_error");
    assert_string_equal(at_result_status_name(AT_RS_CRASHED), "crashed");
    assert_int_equal(at_result_status_parse("OK"), -1);
    assert_int_equal(at_result_status_parse(NULL), -1);

    /* Bad arguments. */
    char *empty = "";
    assert_int_equal(at_db_put_results(db, 1, &empty, &r), AT_ERR_INVALID_ARG);
    char longkey[600];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    char *lk = longkey;
    assert_int_equal(at_db_put_results(db, 1, &lk, &r), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "too long"));
    assert_int_equal(at_db_put_results(db, 0, NULL, NULL), AT_OK);
    at_db_close(db);

    /* A stored value that does not parse is corrupt, not silently zero. */
    raw_put(path, "results", "bad|value", "v1 status=ok median_us=abc");
    raw_put(path, "results", "bad|trail",
            "v1 status=ok median_us=1 min_us=1 max_us=1 reps=1 "
            "early_stop=0 err=0 compile_ms=0 when=0 reason=\"\" x");
    db = open_ok(path);
    assert_int_equal(at_db_get_result(db, "bad|value", &back), AT_ERR_DB_CORRUPT);
    assert_int_equal(at_db_get_result(db, "bad|trail", &back), AT_ERR_DB_CORRUPT);
    at_db_close(db);
    free(key);
    free(path);
}

static void test_results_batch(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    enum { N = 1000 };
    char **keys = calloc(N, sizeof *keys);
    at_result_rec *recs = calloc(N, sizeof *recs);
    for (int i = 0; i < N; i++) {
        char cfg[32];
        snprintf(cfg, sizeof cfg, "BM=%04d", i);
        keys[i] = at_db_result_key("gemm/f32/nn/128x128x128", "dev", "00000000000000aa", cfg);
        recs[i] = sample_result(i);
    }
    assert_int_equal(at_db_put_results(db, N, keys, recs), AT_OK);
    for (int i = 0; i < N; i++) {
        at_result_rec back;
        assert_int_equal(at_db_get_result(db, keys[i], &back), AT_OK);
        assert_result_equal(&recs[i], &back);
    }
    int count = 0;
    assert_int_equal(at_db_scan(db, "results", "gemm/f32/nn/128x128x128|", count_fn, &count),
                     AT_OK);
    assert_int_equal(count, N);
    /* A bad key fails the whole batch before anything is written. */
    char *bad[2] = {"gemm|new", ""};
    assert_int_equal(at_db_put_results(db, 2, bad, recs), AT_ERR_INVALID_ARG);
    at_result_rec back;
    assert_int_equal(at_db_get_result(db, "gemm|new", &back), AT_ERR_NOT_FOUND);
    for (int i = 0; i < N; i++) free(keys[i]);
    free(keys);
    free(recs);
    at_db_close(db);
    free(path);
}

static void test_get_miss(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    at_result_rec r;
    at_best_rec b;
    void *bin = NULL;
    size_t len = 0;
    assert_int_equal(at_db_get_result(db, "nope", &r), AT_ERR_NOT_FOUND);
    assert_non_null(strstr(at_errmsg(), "nope"));
    assert_int_equal(at_db_get_best(db, "nope", &b), AT_ERR_NOT_FOUND);
    assert_int_equal(at_db_get_binary(db, "nope", &bin, &len), AT_ERR_NOT_FOUND);
    assert_null(bin);
    at_db_close(db);
    free(path);
}

static void test_best(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    char *key = at_db_best_key("gemm/f32/nn/64x64x64", "opencl/pocl/cpu");
    assert_string_equal(key, "gemm/f32/nn/64x64x64|opencl/pocl/cpu");
    at_best_rec b = sample_best("0123456789abcdef", 50.5), back;
    assert_int_equal(at_db_put_best(db, key, &b, 0), AT_OK);
    assert_int_equal(at_db_get_best(db, key, &back), AT_OK);
    assert_string_equal(back.config, b.config);
    assert_string_equal(back.template_hash, b.template_hash);
    assert_true(back.time_us == b.time_us);
    assert_true(back.gflops == b.gflops);
    assert_true(back.max_rel_error == b.max_rel_error);
    assert_int_equal(back.when, b.when);
    assert_string_equal(back.compiler, b.compiler);
    assert_string_equal(back.driver, b.driver);

    char text[4096];
    at_best_rec_format(&b, text, sizeof text);
    assert_null(strchr(text, '\n'));
    assert_non_null(strstr(text, "config=\"BM=64,BN=64,BK=16,name=\\\"x\\\\y\\\"\" "
                                 "hash=0123456789abcdef time_us=50.5 "));
    assert_non_null(strstr(text, "driver=\"550.54.15\""));

    /* Slower, same template: the stored faster entry stays. */
    at_best_rec slow = sample_best("0123456789abcdef", 80.0);
    snprintf(slow.config, sizeof slow.config, "BM=32");
    assert_int_equal(at_db_put_best(db, key, &slow, 0), AT_OK);
    assert_int_equal(at_db_get_best(db, key, &back), AT_OK);
    assert_true(back.time_us == 50.5);
    assert_string_equal(back.config, b.config);

    /* Faster, same template: replaced. */
    at_best_rec fast = sample_best("0123456789abcdef", 40.0);
    snprintf(fast.config, sizeof fast.config, "BM=128");
    assert_int_equal(at_db_put_best(db, key, &fast, 0), AT_OK);
    assert_int_equal(at_db_get_best(db, key, &back), AT_OK);
    assert_true(back.time_us == 40.0);
    assert_string_equal(back.config, "BM=128");

    /* Slower but force: replaced. */
    assert_int_equal(at_db_put_best(db, key, &slow, 1), AT_OK);
    assert_int_equal(at_db_get_best(db, key, &back), AT_OK);
    assert_true(back.time_us == 80.0);

    /* Another template hash (the old entry is stale): replaced even if slower. */
    at_best_rec other = sample_best("fedcba9876543210", 90.0);
    assert_int_equal(at_db_put_best(db, key, &other, 0), AT_OK);
    assert_int_equal(at_db_get_best(db, key, &back), AT_OK);
    assert_string_equal(back.template_hash, "fedcba9876543210");
    assert_true(back.time_us == 90.0);

    /* A hash that would break the text form. */
    at_best_rec badhash = sample_best("ab cd", 1.0);
    assert_int_equal(at_db_put_best(db, key, &badhash, 1), AT_ERR_INVALID_ARG);

    collect c = {0};
    assert_int_equal(at_db_scan(db, "best", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.keys[0], key);
    assert_non_null(strstr(c.values[0], "hash=fedcba9876543210 time_us=90 "));
    at_db_close(db);

    /* A damaged stored best: get reports corrupt; put without force refuses, with force fixes. */
    raw_put(path, "best", key, "v1 config=\"unterminated");
    db = open_ok(path);
    assert_int_equal(at_db_get_best(db, key, &back), AT_ERR_DB_CORRUPT);
    assert_int_equal(at_db_put_best(db, key, &b, 0), AT_ERR_DB_CORRUPT);
    assert_int_equal(at_db_put_best(db, key, &b, 1), AT_OK);
    assert_int_equal(at_db_get_best(db, key, &back), AT_OK);
    at_db_close(db);
    free(key);
    free(path);
}

static void test_binaries(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    size_t n = 1 << 20;
    unsigned char *bin = malloc(n);
    for (size_t i = 0; i < n; i++) bin[i] = (unsigned char)((i * 2654435761u) >> 13);
    memset(bin + 100, 0, 64);
    assert_int_equal(at_db_put_binary(db, "00000000deadbeef", bin, n), AT_OK);
    void *back = NULL;
    size_t len = 0;
    assert_int_equal(at_db_get_binary(db, "00000000deadbeef", &back, &len), AT_OK);
    assert_int_equal(len, n);
    assert_true(memcmp(back, bin, n) == 0);
    free(back);

    assert_int_equal(at_db_put_binary(db, "empty", NULL, 0), AT_OK);
    assert_int_equal(at_db_get_binary(db, "empty", &back, &len), AT_OK);
    assert_int_equal(len, 0);
    free(back);

    collect c = {0};
    assert_int_equal(at_db_scan(db, "binaries", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.keys[0], "00000000deadbeef");
    assert_string_equal(c.values[0], "1048576 bytes");
    assert_string_equal(c.values[1], "0 bytes");
    free(bin);
    at_db_close(db);
    free(path);
}

static int reenter_fn(void *user, const char *key, const char *value)
{
    (void)key;
    (void)value;
    at_db *db = user;
    at_result_rec r;
    assert_int_equal(at_db_get_result(db, "x", &r), AT_ERR_INVALID_ARG);
    return 1;
}

static void test_scan(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    const char *names[] = {"b|2", "a|1", "ab|0", "b|10", "b|1", "c", "b"};
    enum { N = sizeof names / sizeof names[0] };
    at_result_rec recs[N];
    char *keys[N];
    for (int i = 0; i < N; i++) {
        recs[i] = sample_result(i);
        keys[i] = (char *)names[i];
    }
    assert_int_equal(at_db_put_results(db, N, keys, recs), AT_OK);

    collect c = {0};
    assert_int_equal(at_db_scan(db, "results", "b|", collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.keys[0], "b|1");
    assert_string_equal(c.keys[1], "b|10");
    assert_string_equal(c.keys[2], "b|2");
    char expect[2048];
    at_result_rec_format(&recs[4], expect, sizeof expect);
    assert_string_equal(c.values[0], expect);

    memset(&c, 0, sizeof c);
    assert_int_equal(at_db_scan(db, "results", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, N);
    const char *order[] = {"ab|0", "a|1", "b", "b|1", "b|10", "b|2", "c"};
    for (int i = 0; i < N; i++) assert_string_equal(c.keys[i], order[i]);

    memset(&c, 0, sizeof c);
    assert_int_equal(at_db_scan(db, "results", "", collect_fn, &c), AT_OK);
    assert_int_equal(c.n, N);

    /* Early stop. */
    memset(&c, 0, sizeof c);
    c.stop_after = 2;
    assert_int_equal(at_db_scan(db, "results", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 2);

    /* No match: after the last key, and between keys. */
    memset(&c, 0, sizeof c);
    assert_int_equal(at_db_scan(db, "results", "zzz", collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 0);
    assert_int_equal(at_db_scan(db, "results", "aa", collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 0);
    assert_int_equal(at_db_scan(db, "best", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 0);

    assert_int_equal(at_db_scan(db, "nosuch", NULL, collect_fn, &c), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "nosuch"));

    /* The keys with their records, in one scan. */
    char **found = NULL;
    at_result_rec *got = NULL;
    size_t n = 0;
    assert_int_equal(at_db_results(db, "b|", &found, &got, &n), AT_OK);
    assert_int_equal(n, 3);
    assert_string_equal(found[0], "b|1");
    assert_string_equal(found[2], "b|2");
    assert_result_equal(&got[0], &recs[4]);
    assert_result_equal(&got[1], &recs[3]);
    assert_result_equal(&got[2], &recs[0]);
    at_db_keys_free(found, n);
    free(got);
    assert_int_equal(at_db_results(db, NULL, &found, &got, &n), AT_OK);
    assert_int_equal(n, N);
    for (int i = 0; i < N; i++) assert_string_equal(found[i], order[i]);
    at_db_keys_free(found, n);
    free(got);
    assert_int_equal(at_db_results(db, "zzz", &found, &got, &n), AT_OK);
    assert_int_equal(n, 0);
    assert_null(found);
    assert_null(got);
    assert_int_equal(at_db_scan(db, "results", NULL, reenter_fn, db), AT_OK);
    at_db_close(db);
    free(path);
}

static void test_reopen_persists(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    char *keys[3] = {"p|d|h|1", "p|d|h|2", "p|d|h|3"};
    at_result_rec recs[3] = {sample_result(1), sample_result(2), sample_result(3)};
    assert_int_equal(at_db_put_results(db, 2, keys, recs), AT_OK);
    at_best_rec b = sample_best("00000000000000ff", 12.0);
    assert_int_equal(at_db_put_best(db, "p|d", &b, 0), AT_OK);
    assert_int_equal(at_db_put_binary(db, "bin", "\0\1\2", 3), AT_OK);
    at_db_close(db);

    /* A resumed run sees what the first one measured and adds the rest. */
    db = open_ok(path);
    at_result_rec back;
    assert_int_equal(at_db_get_result(db, keys[0], &back), AT_OK);
    assert_result_equal(&recs[0], &back);
    assert_int_equal(at_db_get_result(db, keys[1], &back), AT_OK);
    assert_int_equal(at_db_get_result(db, keys[2], &back), AT_ERR_NOT_FOUND);
    assert_int_equal(at_db_put_results(db, 1, &keys[2], &recs[2]), AT_OK);
    at_db_close(db);

    assert_int_equal(at_db_open(path, 1, &db), AT_OK);
    int count = 0;
    assert_int_equal(at_db_scan(db, "results", "p|d|h|", count_fn, &count), AT_OK);
    assert_int_equal(count, 3);
    at_best_rec bb;
    assert_int_equal(at_db_get_best(db, "p|d", &bb), AT_OK);
    assert_true(bb.time_us == 12.0);
    void *bin = NULL;
    size_t len = 0;
    assert_int_equal(at_db_get_binary(db, "bin", &bin, &len), AT_OK);
    assert_int_equal(len, 3);
    assert_true(memcmp(bin, "\0\1\2", 3) == 0);
    free(bin);
    at_db_close(db);
    free(path);
}

static void test_map_growth(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    enum { NB = 50 };
    size_t n = 4u << 20;
    unsigned char *bin = malloc(n);
    for (int i = 0; i < NB; i++) {
        memset(bin, i + 1, n);
        memcpy(bin, &i, sizeof i);
        char key[32];
        snprintf(key, sizeof key, "blob%02d", i);
        at_status s = at_db_put_binary(db, key, bin, n);
        if (s != AT_OK) fprintf(stderr, "put_binary: %s\n", at_errmsg());
        assert_int_equal(s, AT_OK);
    }
    for (int i = 0; i < NB; i++) {
        char key[32];
        snprintf(key, sizeof key, "blob%02d", i);
        void *back = NULL;
        size_t len = 0;
        assert_int_equal(at_db_get_binary(db, key, &back, &len), AT_OK);
        assert_int_equal(len, n);
        int j;
        memcpy(&j, back, sizeof j);
        assert_int_equal(j, i);
        assert_int_equal(((unsigned char *)back)[n - 1], (unsigned char)(i + 1));
        free(back);
    }

    int count = 0;
    assert_int_equal(at_db_scan(db, "binaries", "blob", count_fn, &count), AT_OK);
    assert_int_equal(count, NB);
    at_db_close(db);
    char *file = sub(state, "db/data.mdb");
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_true(st.st_size > (200 << 20));
    free(file);
    free(path);

    /* A fresh database nearly full (56 MiB of 64), then one batch of results that does not
     * fit: the map grows mid-batch and the whole batch is retried. */
    path = sub(state, "db2");
    db = open_ok(path);
    free(bin);
    n = 56u << 20;
    bin = calloc(1, n);
    assert_non_null(bin);
    assert_int_equal(at_db_put_binary(db, "fill", bin, n), AT_OK);
    free(bin);
    enum { NR = 40000 };
    char **keys = calloc(NR, sizeof *keys);
    at_result_rec *recs = calloc(NR, sizeof *recs);
    for (int i = 0; i < NR; i++) {
        assert_true(asprintf(&keys[i], "big|%06d", i) > 0);
        recs[i] = sample_result(i);
        recs[i].status = AT_RS_COMPILE_ERROR;
        memset(recs[i].reason, 'r', sizeof recs[i].reason - 1);
        recs[i].reason[sizeof recs[i].reason - 1] = '\0';
    }
    at_status s = at_db_put_results(db, NR, keys, recs);
    if (s != AT_OK) fprintf(stderr, "put_results: %s\n", at_errmsg());
    assert_int_equal(s, AT_OK);
    at_db_close(db);

    db = open_ok(path);
    at_result_rec back;
    assert_int_equal(at_db_get_result(db, keys[0], &back), AT_OK);
    assert_result_equal(&recs[0], &back);
    assert_int_equal(at_db_get_result(db, keys[NR - 1], &back), AT_OK);
    assert_result_equal(&recs[NR - 1], &back);
    count = 0;
    assert_int_equal(at_db_scan(db, "results", "big|", count_fn, &count), AT_OK);
    assert_int_equal(count, NR);
    at_db_close(db);
    for (int i = 0; i < NR; i++) free(keys[i]);
    free(keys);
    free(recs);
    free(path);
}

static void test_garbage_file(void **state)
{
    char *path = sub(state, "db");
    assert_int_equal(mkdir(path, 0755), 0);
    char *file = sub(state, "db/data.mdb");
    char garbage[8192];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof garbage; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        garbage[i] = (char)(x >> 24);
    }
    write_file(file, garbage, sizeof garbage);
    at_db *db = (at_db *)1;
    assert_int_equal(at_db_open(path, 0, &db), AT_ERR_DB_CORRUPT);
    assert_null(db);
    assert_non_null(strstr(at_errmsg(), "is not an autotune database"));
    assert_non_null(strstr(at_errmsg(), file));
    assert_file_is(file, garbage, sizeof garbage);
    assert_int_equal(at_db_open(path, 1, &db), AT_ERR_DB_CORRUPT);
    assert_file_is(file, garbage, sizeof garbage);

    /* Garbage after a valid-looking first meta page: LMDB's own check rejects it. */
    uint32_t magic = 0xBEEFC0DEu, version = 1, psize = 4096;
    memcpy(garbage + 16, &magic, 4);
    memcpy(garbage + 20, &version, 4);
    memcpy(garbage + 40, &psize, 4);
    write_file(file, garbage, sizeof garbage);
    assert_int_equal(at_db_open(path, 0, &db), AT_ERR_DB_CORRUPT);
    assert_file_is(file, garbage, sizeof garbage);
    free(file);
    free(path);
}

static void test_truncated_file(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    at_result_rec r = sample_result(1);
    char *key = "k";
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    at_db_close(db);
    char *file = sub(state, "db/data.mdb");
    size_t n = 0;
    char *full = slurp(file, &n);
    assert_true(n > 4096 + 200);

    size_t cuts[] = {100, 4096 + 100};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_file(file, full, cuts[i]);
        db = (at_db *)1;
        assert_int_equal(at_db_open(path, 0, &db), AT_ERR_DB_CORRUPT);
        assert_null(db);
        assert_non_null(strstr(at_errmsg(), "is not an autotune database"));
        assert_file_is(file, full, cuts[i]);
    }
    free(full);
    free(file);
    free(path);
}

/* ---- keys (cache/keys.h) ------------------------------------------------------------------ */

static void assert_part(at_key_part p, const char *want) { assert_true(at_key_part_is(p, want)); }

static void test_keys(void **state)
{
    (void)state;
    char *k = at_db_result_key("gemm/f32/nn/8x8x8", "cuda/sm_90a/H200/132", "0123456789abcdef",
                               "BM=64,BN=32");
    assert_string_equal(k, "gemm/f32/nn/8x8x8|cuda/sm_90a/H200/132|0123456789abcdef|BM=64,BN=32");
    at_result_key rk;
    assert_int_equal(at_result_key_split(k, &rk), AT_OK);
    assert_part(rk.problem, "gemm/f32/nn/8x8x8");
    assert_part(rk.device, "cuda/sm_90a/H200/132");
    assert_part(rk.thash, "0123456789abcdef");
    assert_part(rk.config, "BM=64,BN=32");
    assert_false(at_key_part_is(rk.thash, "0123456789abcde"));
    assert_false(at_key_part_eq(rk.problem, rk.device));
    char *cfg = at_key_part_dup(rk.config);
    char *names[4], *values[4];
    assert_int_equal(at_config_split(cfg, names, values, 4), 2);
    assert_string_equal(names[1], "BN");
    assert_string_equal(values[1], "32");
    free(cfg);
    free(k);

    /* The config is the last part: it may hold '|'; the other parts may not. */
    assert_int_equal(at_result_key_split("p|d|h|A=x|y", &rk), AT_OK);
    assert_part(rk.config, "A=x|y");
    k = at_db_result_key("p", "d", "h", "A=x|y");
    assert_string_equal(k, "p|d|h|A=x|y");
    free(k);
    assert_null(at_db_result_key("p", "dev|ice", "h", "A=1"));
    assert_non_null(strstr(at_errmsg(), "device 'dev|ice'"));
    assert_null(at_db_result_key("p", "d", "", "A=1"));
    assert_non_null(strstr(at_errmsg(), "template hash is empty"));
    assert_null(at_db_result_key("p", NULL, "h", "A=1"));
    assert_null(at_db_best_key("a|b", "d"));

    k = at_db_best_key("gemm/f32/nn/8x8x8", "opencl/pocl/cpu/2");
    at_best_key bk;
    assert_int_equal(at_best_key_split(k, &bk), AT_OK);
    assert_part(bk.problem, "gemm/f32/nn/8x8x8");
    assert_part(bk.device, "opencl/pocl/cpu/2");
    free(k);

    k = at_db_results_prefix("p", NULL, NULL);
    assert_string_equal(k, "p|");
    free(k);
    k = at_db_results_prefix("p", "d", NULL);
    assert_string_equal(k, "p|d|");
    free(k);
    k = at_db_results_prefix("p", "d", "h");
    assert_string_equal(k, "p|d|h|");
    free(k);

    /* Malformed keys are reported, never read past. */
    const char *bad_results[] = {"", "p", "p|d", "p|d|h", "p|d|h|", "|d|h|c", "p||h|c", "p|d||c"};
    for (size_t i = 0; i < sizeof bad_results / sizeof bad_results[0]; i++) {
        assert_int_equal(at_result_key_split(bad_results[i], &rk), AT_ERR_DB_CORRUPT);
        assert_non_null(strstr(at_errmsg(), "malformed results key"));
    }
    const char *bad_best[] = {"", "p", "p|", "|d", "p|d|x"};
    for (size_t i = 0; i < sizeof bad_best / sizeof bad_best[0]; i++) {
        assert_int_equal(at_best_key_split(bad_best[i], &bk), AT_ERR_DB_CORRUPT);
        assert_non_null(strstr(at_errmsg(), bad_best[i]));
    }
    assert_int_equal(at_result_key_split(NULL, &rk), AT_ERR_INVALID_ARG);
    assert_int_equal(at_best_key_split("p|d", NULL), AT_ERR_INVALID_ARG);

    char bad_cfg[][16] = {"", "A", "=1", "A=1,", "A=1,B"};
    for (size_t i = 0; i < sizeof bad_cfg / sizeof bad_cfg[0]; i++)
        assert_int_equal(at_config_split(bad_cfg[i], names, values, 4), -1);
    char many[] = "A=1,B=2,C=3";
    assert_int_equal(at_config_split(many, names, values, 2), -1);
}

/* ---- records (cache/record.h) ------------------------------------------------------------- */

static void test_record_tolerant(void **state)
{
    char *path = sub(state, "db");
    at_db_close(open_ok(path));
    /* As a newer minor version might write them: unknown fields, bare and quoted, anywhere. */
    raw_put(path, "results", "r|extra",
            "v2 future=1 status=wrong_result median_us=5 note=\"a \\\"q\\\" b=c\" min_us=4 "
            "reason=\"boom\" empty= tail=\"\"");
    /* Missing optional fields, any order, an old tag. */
    raw_put(path, "results", "r|sparse", "v1 reason=\"x\" status=timeout");
    raw_put(path, "best", "b|extra",
            "v2 hash=00aa zz=\"x y\" config=\"BM=1\" time_us=3 template=\"gemm_mma\" space=96 "
            "more=-2");
    raw_put(path, "best", "b|old", "v1 config=\"BM=2\" hash=00bb");
    /* Required fields missing, a newer record version, damage. */
    raw_put(path, "results", "r|nostatus", "v2 median_us=3 reason=\"\"");
    raw_put(path, "best", "b|nohash", "v2 config=\"BM=1\" time_us=1");
    raw_put(path, "best", "b|noconfig", "v2 hash=00aa");
    raw_put(path, "results", "r|v3", "v3 status=ok brand_new=1");
    raw_put(path, "results", "r|notag", "status=ok");
    raw_put(path, "results", "r|twice", "v2 status=ok status=timeout");
    raw_put(path, "results", "r|quotednum", "v2 status=ok median_us=\"5\"");
    raw_put(path, "results", "r|barestr", "v2 status=ok reason=x");
    raw_put(path, "results", "r|badquote", "v2 status=ok other=\"open");
    raw_put(path, "results", "r|badstatus", "v2 status=fine");
    raw_put(path, "results", "r|negreps", "v2 status=ok reps=-1");
    at_db *db = open_ok(path);

    at_result_rec r;
    assert_int_equal(at_db_get_result(db, "r|extra", &r), AT_OK);
    assert_int_equal(r.status, AT_RS_WRONG_RESULT);
    assert_true(r.median_us == 5 && r.min_us == 4 && r.max_us == 0);
    assert_string_equal(r.reason, "boom");
    assert_int_equal(at_db_get_result(db, "r|sparse", &r), AT_OK);
    assert_int_equal(r.status, AT_RS_TIMEOUT);
    assert_true(r.median_us == 0 && r.compile_ms == 0 && r.max_rel_error == 0);
    assert_int_equal(r.reps, 0);
    assert_int_equal(r.early_stop, 0);
    assert_int_equal(r.when, 0);
    assert_string_equal(r.reason, "x");

    at_best_rec b;
    assert_int_equal(at_db_get_best(db, "b|extra", &b), AT_OK);
    assert_string_equal(b.config, "BM=1");
    assert_string_equal(b.template_hash, "00aa");
    assert_string_equal(b.template_name, "gemm_mma");
    assert_int_equal(b.space, 96);
    assert_true(b.time_us == 3 && b.gflops == 0);
    assert_int_equal(at_db_get_best(db, "b|old", &b), AT_OK);
    assert_string_equal(b.config, "BM=2");
    assert_string_equal(b.template_name, "");
    assert_int_equal(b.space, 0);
    assert_string_equal(b.compiler, "");

    /* at_db_results lists what at_db_keys lists, with the records, and skips the same. */
    char **keys = NULL, **rkeys = NULL, note[2048], rnote[2048];
    at_result_rec *recs = NULL;
    size_t nk = 0, nr = 0;
    assert_int_equal(at_db_keys(db, "results", "r|", &keys, &nk), AT_OK);
    size_t skipped = at_db_skipped(db, note, sizeof note);
    assert_int_equal(at_db_results(db, "r|", &rkeys, &recs, &nr), AT_OK);
    assert_int_equal(at_db_skipped(db, rnote, sizeof rnote), skipped);
    assert_int_equal(skipped, 9);
    assert_string_equal(rnote, note);
    assert_int_equal(nr, nk);
    assert_int_equal(nr, 2);
    for (size_t i = 0; i < nr; i++) {
        assert_string_equal(rkeys[i], keys[i]);
        assert_int_equal(at_db_get_result(db, keys[i], &r), AT_OK);
        assert_result_equal(&recs[i], &r);
    }
    at_db_keys_free(keys, nk);
    at_db_keys_free(rkeys, nr);
    free(recs);

    assert_int_equal(at_db_get_result(db, "r|nostatus", &r), AT_ERR_DB_CORRUPT);
    assert_non_null(strstr(at_errmsg(), "'r|nostatus'"));
    assert_non_null(strstr(at_errmsg(), "required field status is missing"));
    assert_int_equal(at_db_get_best(db, "b|nohash", &b), AT_ERR_DB_CORRUPT);
    assert_non_null(strstr(at_errmsg(), "'b|nohash'"));
    assert_non_null(strstr(at_errmsg(), "required field hash"));
    assert_int_equal(at_db_get_best(db, "b|noconfig", &b), AT_ERR_DB_CORRUPT);
    assert_non_null(strstr(at_errmsg(), "required field config"));
    assert_int_equal(at_db_get_result(db, "r|v3", &r), AT_ERR_DB_VERSION);
    assert_non_null(strstr(at_errmsg(), "'r|v3'"));
    assert_non_null(strstr(at_errmsg(), "v3 is newer"));
    const char *damaged[] = {"r|notag",    "r|twice",     "r|quotednum", "r|barestr",
                             "r|badquote", "r|badstatus", "r|negreps"};
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        assert_int_equal(at_db_get_result(db, damaged[i], &r), AT_ERR_DB_CORRUPT);
        assert_non_null(strstr(at_errmsg(), damaged[i]));
    }
    /* put_best over a record it cannot read: refused without force. */
    at_best_rec nb = sample_best("00aa", 1.0);
    assert_int_equal(at_db_put_best(db, "b|nohash", &nb, 0), AT_ERR_DB_CORRUPT);
    assert_int_equal(at_db_put_best(db, "b|nohash", &nb, 1), AT_OK);
    /* A record that would not read back is never written. */
    at_result_rec neg = sample_result(0);
    neg.reps = -3;
    char *key = "r|new";
    assert_int_equal(at_db_put_results(db, 1, &key, &neg), AT_ERR_INVALID_ARG);
    assert_non_null(strstr(at_errmsg(), "'r|new' cannot be stored"));
    neg = sample_result(0);
    neg.status = AT_RS_COUNT;
    assert_int_equal(at_db_put_results(db, 1, &key, &neg), AT_ERR_INVALID_ARG);
    assert_int_equal(at_db_get_result(db, key, &r), AT_ERR_NOT_FOUND);
    at_db_close(db);

    /* The parser alone: the text need not be NUL-terminated. */
    const char text[] = "v2 status=ok median_us=7 reason=\"r\"XXXX";
    assert_int_equal(at_result_rec_parse(text, sizeof text - 5, &r), AT_OK);
    assert_string_equal(r.reason, "r");
    assert_int_equal(at_result_rec_parse(text, 13, &r), AT_OK);             /* "v2 status=ok " */
    assert_int_equal(at_result_rec_parse(text, 12, &r), AT_OK);             /* "v2 status=ok" */
    assert_int_equal(at_result_rec_parse(text, 11, &r), AT_ERR_DB_CORRUPT); /* "status=o" */
    assert_int_equal(at_result_rec_parse(text, 0, &r), AT_ERR_DB_CORRUPT);
    free(path);
}

static void test_best_new_fields(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    at_best_rec b = sample_best("0123456789abcdef", 10.0), back;
    snprintf(b.template_name, sizeof b.template_name, "gemm_mma");
    b.space = 128436;
    assert_int_equal(at_db_put_best(db, "p|d", &b, 0), AT_OK);
    assert_int_equal(at_db_get_best(db, "p|d", &back), AT_OK);
    assert_string_equal(back.template_name, "gemm_mma");
    assert_int_equal(back.space, 128436);
    assert_string_equal(back.config, b.config);
    char text[4096];
    at_best_rec_format(&b, text, sizeof text);
    assert_true(strncmp(text, "v2 config=", 10) == 0);
    assert_non_null(strstr(text, " template=\"gemm_mma\" space=128436"));
    b.space = -1;
    assert_int_equal(at_db_put_best(db, "p|d", &b, 1), AT_ERR_INVALID_ARG);
    at_db_close(db);
    free(path);
}

/* The value of meta/key, "" when absent. */
static void meta_value(at_db *db, const char *key, char *out, size_t len)
{
    collect c = {0};
    assert_int_equal(at_db_scan(db, "meta", key, collect_fn, &c), AT_OK);
    snprintf(out, len, "%s", "");
    for (int i = 0; i < c.n && i < 64; i++)
        if (strcmp(c.keys[i], key) == 0) snprintf(out, len, "%s", c.values[i]);
}

/* Schema 2.1: a results record names its template; one without (2.0) still reads. */
static void test_result_template(void **state)
{
    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    at_result_rec r = sample_result(0), back;
    snprintf(r.template_name, sizeof r.template_name, "gemm_mma");
    char *key = "p|d|h|A=1";
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    assert_int_equal(at_db_get_result(db, key, &back), AT_OK);
    assert_string_equal(back.template_name, "gemm_mma");
    char text[4096];
    at_result_rec_format(&r, text, sizeof text);
    assert_non_null(strstr(text, " template=\"gemm_mma\""));
    const char *old = "v2 status=ok median_us=2 when=5 reason=\"\"";
    assert_int_equal(at_result_rec_parse(old, strlen(old), &back), AT_OK);
    assert_string_equal(back.template_name, "");
    assert_true(back.median_us == 2.0);
    /* checks: results records of their own table */
    assert_int_equal(at_db_get_check(db, key, &back), AT_ERR_NOT_FOUND);
    r.status = AT_RS_WRONG_RESULT;
    assert_int_equal(at_db_put_check(db, key, &r), AT_OK);
    assert_int_equal(at_db_get_check(db, key, &back), AT_OK);
    assert_int_equal(back.status, AT_RS_WRONG_RESULT);
    assert_int_equal(at_db_get_result(db, key, &back), AT_OK);
    assert_int_equal(back.status, AT_RS_OK);
    collect c = {0};
    assert_int_equal(at_db_scan(db, "checks", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.keys[0], key);
    at_db_close(db);
    free(path);
}

static void test_device_rec(void **state)
{
    at_device_rec d;
    at_device_rec_from_key("cuda/sm_90a/NVIDIA H100 80GB HBM3/132", &d);
    assert_string_equal(d.backend, "cuda");
    assert_string_equal(d.arch, "sm_90a");
    assert_string_equal(d.family, "sm_90a");
    assert_string_equal(d.name, "NVIDIA H100 80GB HBM3");
    assert_string_equal(d.vendor, "NVIDIA");
    assert_int_equal(d.units, 132);
    assert_string_equal(d.driver, "");
    at_device_rec_from_key("hip/gfx90a/AMD Instinct MI210/104/lds65536/w64", &d);
    assert_string_equal(d.backend, "hip");
    assert_string_equal(d.arch, "gfx90a");
    assert_string_equal(d.family, "gfx90a");
    assert_string_equal(d.name, "AMD Instinct MI210");
    assert_string_equal(d.vendor, "AMD");
    assert_int_equal(d.units, 104);
    const char *pocl = "opencl/Portable Computing Language/"
                       "pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.1GHz/2";
    at_device_rec_from_key(pocl, &d);
    assert_string_equal(d.backend, "opencl");
    assert_string_equal(d.arch, "");
    assert_string_equal(d.vendor, "Portable Computing Language");
    assert_string_equal(d.name, "pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.1GHz");
    assert_string_equal(d.family, "skylake-avx512");
    assert_int_equal(d.units, 2);
    at_device_rec_from_key("opencl/Portable Computing Language/cpu-haswell-AMD EPYC/16", &d);
    assert_string_equal(d.family, "haswell");
    /* a name with '/' in it; another platform: the family is the name */
    at_device_rec_from_key("opencl/NVIDIA CUDA/GeForce A/B/46", &d);
    assert_string_equal(d.name, "GeForce A/B");
    assert_string_equal(d.vendor, "NVIDIA CUDA");
    assert_string_equal(d.family, "GeForce A/B");
    assert_int_equal(d.units, 46);
    at_device_rec_from_key("nonsense", &d);
    assert_string_equal(d.backend, "nonsense");
    assert_string_equal(d.name, "");

    /* The record's text, and through the table. */
    at_device_rec_from_key(pocl, &d);
    snprintf(d.driver, sizeof d.driver, "3.1 \"debian\"");
    snprintf(d.compiler, sizeof d.compiler, "OpenCL C 1.2");
    d.when = 1796095646;
    at_sbuf b = {0};
    at_device_rec_append(&b, &d);
    assert_true(strncmp(at_sb_str(&b), "v2 backend=opencl name=\"pthread-", 32) == 0);
    at_device_rec back;
    assert_int_equal(at_device_rec_parse(b.p, b.n, &back), AT_OK);
    assert_memory_equal(&back, &d, sizeof d);
    at_sb_free(&b);
    const char *bad = "v2 name=\"x\"";
    assert_int_equal(at_device_rec_parse(bad, strlen(bad), &back), AT_ERR_DB_CORRUPT);
    assert_non_null(strstr(at_errmsg(), "backend"));

    char *path = sub(state, "db");
    at_db *db = open_ok(path);
    char *key = at_db_device_key(pocl + 0);
    assert_string_equal(key, pocl);
    assert_int_equal(at_db_get_device(db, key, &back), AT_ERR_NOT_FOUND);
    assert_int_equal(at_db_put_device(db, key, &d), AT_OK);
    memset(&back, 0, sizeof back);
    assert_int_equal(at_db_get_device(db, key, &back), AT_OK);
    assert_memory_equal(&back, &d, sizeof d);
    free(key);
    /* A long device key is stored as the other keys store it. */
    char lng[400];
    memset(lng, 'x', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    key = at_db_device_key(lng);
    assert_int_equal(strlen(key), AT_KEY_PART_MAX);
    char *bkey = at_db_best_key("p", lng);
    assert_string_equal(bkey + 2, key);
    free(bkey);
    free(key);
    at_db_close(db);
    free(path);
}

/* A file of schema 2.0 has no devices or checks table: they read as empty, and the first write
 * creates them and moves the minor to 1. */
static void test_minor_upgrade(void **state)
{
    char *path = sub(state, "db");
    assert_int_equal(mkdir(path, 0777), 0);
    raw_put(path, "meta", "schema", "2");
    raw_put(path, "meta", "schema_minor", "0");
    raw_put(path, "meta", "created_by", "autotune 0.2.0");
    raw_put(path, "results", "p|d|h|A=1", "v2 status=ok median_us=3 reason=\"\"");
    raw_put(path, "best", "p|d", "v2 config=\"A=1\" hash=h");
    raw_put(path, "binaries", "0123456789abcdef", "old");
    char *file = sub(state, "db/data.mdb");
    size_t n = 0;
    char *before = slurp(file, &n);
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READONLY, &db), AT_OK);
    at_device_rec d;
    at_result_rec r;
    assert_int_equal(at_db_get_device(db, "d", &d), AT_ERR_NOT_FOUND);
    assert_int_equal(at_db_get_check(db, "p|d|h|A=1", &r), AT_ERR_NOT_FOUND);
    collect c = {0};
    assert_int_equal(at_db_scan(db, "devices", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(at_db_scan(db, "checks", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 0);
    at_db_close(db);
    db = open_ok(path);
    at_db_close(db);
    assert_file_is(file, before, n); /* opening wrote nothing */
    db = open_ok(path);
    at_device_rec_from_key("cuda/sm_80/A100/108", &d);
    assert_int_equal(at_db_put_device(db, "d", &d), AT_OK);
    assert_int_equal(at_db_get_device(db, "d", &d), AT_OK);
    assert_string_equal(d.family, "sm_80");
    char v[32];
    meta_value(db, "schema_minor", v, sizeof v);
    assert_string_equal(v, "1");
    assert_int_equal(at_db_get_result(db, "p|d|h|A=1", &r), AT_OK);
    assert_int_equal(at_db_put_check(db, "p|d|h|A=1", &r), AT_OK);
    at_db_close(db);
    db = open_ok(path);
    assert_int_equal(at_db_get_check(db, "p|d|h|A=1", &r), AT_OK);
    at_db_close(db);
    free(before);
    free(file);
    free(path);
}

/* Sets meta/schema of the database at path (not open here) and checks that a read-write and a
 * read-only open both refuse it with AT_ERR_DB_VERSION and a message naming the file and
 * holding want, leaving data.mdb byte-for-byte as it was. */
static void assert_refused(const char *path, const char *file, const char *schema, const char *want)
{
    raw_put(path, "meta", "schema", schema);
    size_t n = 0;
    char *before = slurp(file, &n);
    for (int readonly = 0; readonly <= 1; readonly++) {
        at_db *db = (at_db *)1;
        assert_int_equal(at_db_open(path, readonly, &db), AT_ERR_DB_VERSION);
        assert_null(db);
        assert_non_null(strstr(at_errmsg(), file));
        assert_non_null(strstr(at_errmsg(), want));
        assert_file_is(file, before, n);
    }
    free(before);
}

static void test_newer_schema(void **state)
{
    char *path = sub(state, "db");
    at_db_close(open_ok(path));
    char *file = sub(state, "db/data.mdb");
    assert_refused(path, file, "99", "newer autotune (schema 99 > 2)");

    raw_put(path, "meta", "schema", "abc");
    size_t n = 0;
    char *before = slurp(file, &n);
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, 0, &db), AT_ERR_DB_CORRUPT);
    assert_non_null(strstr(at_errmsg(), "not a number"));
    assert_file_is(file, before, n);
    free(before);

    /* One major above ours. */
    assert_refused(path, file, "3", "(schema 3 > 2)");

    /* A newer minor of our major opens and is written; its minor is kept. */
    raw_put(path, "meta", "schema", "2");
    raw_put(path, "meta", "schema_minor", "9");
    db = open_ok(path);
    at_result_rec r = sample_result(2), back;
    char *key = "p|d|h|A=1";
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_OK);
    assert_int_equal(at_db_get_result(db, key, &back), AT_OK);
    char v[32];
    meta_value(db, "schema_minor", v, sizeof v);
    assert_string_equal(v, "9");
    at_db_close(db);

    /* Another process moves the file to a newer major while it is open here: the next write
     * is refused, nothing is written. */
    db = open_ok(path);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        raw_put(path, "meta", "schema", "3");
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    key = "p|d|h|A=2";
    assert_int_equal(at_db_put_results(db, 1, &key, &r), AT_ERR_DB_VERSION);
    assert_non_null(strstr(at_errmsg(), "(schema 3 > 2)"));
    assert_int_equal(at_db_get_result(db, key, &back), AT_ERR_NOT_FOUND);
    at_db_close(db);
    free(file);
    free(path);
}

static void test_foreign_lmdb(void **state)
{
    /* A valid LMDB file that is not ours. */
    char *path = sub(state, "db");
    assert_int_equal(mkdir(path, 0755), 0);
    raw_put(path, "other", "hello", "world");
    char *file = sub(state, "db/data.mdb");
    size_t n = 0;
    char *before = slurp(file, &n);
    at_db *db = (at_db *)1;
    assert_int_equal(at_db_open(path, 0, &db), AT_ERR_DB_CORRUPT);
    assert_null(db);
    assert_non_null(strstr(at_errmsg(), "no meta table"));
    assert_file_is(file, before, n);
    free(before);
    free(file);
    free(path);
}

static void test_unwritable_path(void **state)
{
    at_db *db = (at_db *)1;
    assert_int_equal(at_db_open("/proc/autotune-x", 0, &db), AT_ERR_DB);
    assert_null(db);
    assert_non_null(strstr(at_errmsg(), "/proc/autotune-x"));

    char *plain = sub(state, "plain");
    write_file(plain, "x", 1);
    char *under = sub(state, "plain/db");
    assert_int_equal(at_db_open(under, 0, &db), AT_ERR_DB);
    assert_non_null(strstr(at_errmsg(), "Not a directory"));
    assert_int_equal(at_db_open(plain, 0, &db), AT_ERR_DB);

    /* Read-only open of a path without a database. */
    char *none = sub(state, "none");
    assert_int_equal(at_db_open(none, 1, &db), AT_ERR_DB);
    assert_non_null(strstr(at_errmsg(), "no database at"));
    struct stat st;
    assert_int_equal(stat(none, &st), -1);
    assert_int_equal(mkdir(none, 0755), 0);
    assert_int_equal(at_db_open(none, 1, &db), AT_ERR_DB);
    assert_non_null(strstr(at_errmsg(), "no database at"));

    assert_int_equal(at_db_open("", 0, &db), AT_ERR_INVALID_ARG);
    assert_int_equal(at_db_open(NULL, 0, &db), AT_ERR_INVALID_ARG);
    free(none);
    free(under);
    free(plain);
}

static void test_default_path(void **state)
{
    (void)state;
    char *saved[3];
    const char *vars[3] = {"AUTOTUNE_DB", "XDG_CACHE_HOME", "HOME"};
    for (int i = 0; i < 3; i++) saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;

    setenv("AUTOTUNE_DB", "/x/db", 1);
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/x/home", 1);
    char *p = at_db_default_path();
    assert_string_equal(p, "/x/db");
    free(p);
    unsetenv("AUTOTUNE_DB");
    p = at_db_default_path();
    assert_string_equal(p, "/x/cache/autotune");
    free(p);
    unsetenv("XDG_CACHE_HOME");
    p = at_db_default_path();
    assert_string_equal(p, "/x/home/.cache/autotune");
    free(p);

    for (int i = 0; i < 3; i++) {
        if (saved[i])
            setenv(vars[i], saved[i], 1);
        else
            unsetenv(vars[i]);
        free(saved[i]);
    }
}

/* Writes batches of results and 4 MiB binaries under its own prefix; 0 on success. */
static int writer(const char *path, const char *who)
{
    at_db *db = NULL;
    if (at_db_open(path, 0, &db) != AT_OK) {
        fprintf(stderr, "%s: open: %s\n", who, at_errmsg());
        return 1;
    }
    enum { BATCHES = 20, PER = 100 };
    size_t n = 4u << 20;
    unsigned char *bin = malloc(n);
    int rc = 0;
    for (int b = 0; b < BATCHES && rc == 0; b++) {
        char *keys[PER];
        at_result_rec recs[PER];
        for (int i = 0; i < PER; i++) {
            keys[i] = NULL;
            if (asprintf(&keys[i], "%s|%02d|%03d", who, b, i) < 0) rc = 1;
            recs[i] = sample_result(b * PER + i);
        }
        if (rc == 0 && at_db_put_results(db, PER, keys, recs) != AT_OK) {
            fprintf(stderr, "%s: put_results: %s\n", who, at_errmsg());
            rc = 1;
        }
        for (int i = 0; i < PER; i++) free(keys[i]);
        if (rc == 0 && b % 2 == 0) {
            char key[64];
            snprintf(key, sizeof key, "%s-%02d", who, b);
            memset(bin, b, n);
            if (at_db_put_binary(db, key, bin, n) != AT_OK) {
                fprintf(stderr, "%s: put_binary: %s\n", who, at_errmsg());
                rc = 1;
            }
        }
    }
    free(bin);
    at_db_close(db);
    return rc;
}

static void test_concurrent_processes(void **state)
{
    char *path = sub(state, "db");
    at_db_close(open_ok(path));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(writer(path, "child"));
    int prc = writer(path, "parent");
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(prc, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    at_db *db = open_ok(path);
    int count = 0;
    assert_int_equal(at_db_scan(db, "results", "child|", count_fn, &count), AT_OK);
    assert_int_equal(count, 2000);
    count = 0;
    assert_int_equal(at_db_scan(db, "results", "parent|", count_fn, &count), AT_OK);
    assert_int_equal(count, 2000);
    collect c = {0};
    assert_int_equal(at_db_scan(db, "binaries", NULL, collect_fn, &c), AT_OK);
    assert_int_equal(c.n, 20);
    for (int i = 0; i < c.n; i++) assert_string_equal(c.values[i], "4194304 bytes");
    at_result_rec back, want = sample_result(19 * 100 + 99);
    assert_int_equal(at_db_get_result(db, "child|19|099", &back), AT_OK);
    assert_result_equal(&want, &back);
    at_db_close(db);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_create, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_results_roundtrip, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_results_batch, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_get_miss, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_best, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_binaries, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_scan, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_reopen_persists, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_map_growth, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_garbage_file, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_truncated_file, make_tmp, remove_tmp),
        cmocka_unit_test(test_keys),
        cmocka_unit_test_setup_teardown(test_record_tolerant, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_best_new_fields, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_newer_schema, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_result_template, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_device_rec, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_minor_upgrade, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_foreign_lmdb, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_unwritable_path, make_tmp, remove_tmp),
        cmocka_unit_test(test_default_path),
        cmocka_unit_test_setup_teardown(test_concurrent_processes, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
