/* test_db_damage.c — no file on disk crashes autotune: damaged databases made here from a good
 * one (truncated inside the meta pages, after them and mid data; garbage after valid meta pages
 * or in one page; damaged records and binaries; a newer schema; random byte damage) are opened
 * through every entry point that opens a database (at_db_open read-write and read-only,
 * at_db_visit, at_db_export_kernel_tuner, at_recording_load, at_context_create). Each open runs
 * in a forked child that must exit normally, and ends in a clear status. AT_TEST_VERBOSE=1
 * prints each outcome. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tmpdir.h"

#include "dbtest.h"

#include "autotune.h"
#include "cache/db.h"
#include "cache/recording.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBLEM "gemm/f32/nn/64x64x64"
#define DEVICE  "opencl/Test Platform/test device/4"
#define THASH   "0123456789abcdef"
enum { N_RESULTS = 3000, PAGE = 4096 };

/* ---- helpers ---------------------------------------------------------------------------- */

static char *result_key(int i)
{
    char config[64];
    snprintf(config, sizeof config, "BM=%d,BN=%d,BK=%d", 8 << (i % 5), i / 5, i % 7);
    return at_db_result_key(PROBLEM, DEVICE, THASH, config);
}

/* A good database at dir/good: N_RESULTS results (branch pages), two best entries, a small
 * binary and a large one (overflow pages). Returns its data.mdb's bytes. */
static char *make_good(void **state, size_t *n)
{
    char *path = sub(state, "good");
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    static char *keys[N_RESULTS];
    static at_result_rec recs[N_RESULTS];
    for (int i = 0; i < N_RESULTS; i++) {
        recs[i] = (at_result_rec){.status = i % 9 ? AT_RS_OK : AT_RS_COMPILE_ERROR,
                                  .median_us = 10 + i,
                                  .min_us = 9 + i,
                                  .max_us = 11 + i,
                                  .reps = 5,
                                  .when = 1700000000 + i};
        if (recs[i].status != AT_RS_OK)
            snprintf(recs[i].reason, sizeof recs[i].reason, "error %d", i);
        keys[i] = result_key(i);
    }
    for (int i = 0; i < N_RESULTS; i += 100)
        assert_int_equal(at_db_put_results(db, 100, keys + i, recs + i), AT_OK);
    for (int i = 0; i < N_RESULTS; i++) free(keys[i]);
    at_best_rec b = {.config = "BM=8,BN=0,BK=0", .template_hash = THASH, .time_us = 10};
    char *key = at_db_best_key(PROBLEM, DEVICE);
    assert_int_equal(at_db_put_best(db, key, &b, 0), AT_OK);
    free(key);
    key = at_db_best_key("gemm/f32/nn/8x8x8", DEVICE);
    assert_int_equal(at_db_put_best(db, key, &b, 0), AT_OK);
    free(key);
    unsigned char big[100000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)rnd();
    assert_int_equal(at_db_put_binary(db, "00000000000000aa", big, 100), AT_OK);
    assert_int_equal(at_db_put_binary(db, "00000000000000bb", big, sizeof big), AT_OK);
    at_db_close(db);
    char *file = sub(state, "good/data.mdb"), *data = NULL;
    assert_int_equal(at_read_file(file, &data, n), AT_OK);
    free(file);
    free(path);
    return data;
}

/* A database directory name holding a data.mdb of n bytes of data. Returns its path. */
static char *make_db(void **state, const char *name, const char *data, size_t n)
{
    char *path = sub(state, name), *file = NULL, *lock = NULL;
    assert_true(asprintf(&file, "%s/data.mdb", path) > 0 &&
                asprintf(&lock, "%s/lock.mdb", path) > 0);
    mkdir(path, 0755);
    unlink(lock);
    write_file(file, data, n);
    free(file);
    free(lock);
    return path;
}

/* A database directory name holding a copy of the good database. */
static char *good_copy(void **state, const char *name)
{
    size_t n = 0;
    char *good = make_good(state, &n), *path = make_db(state, name, good, n);
    free(good);
    return path;
}

/* ---- entry points, each run in a forked child ----------------------------------------------- */

static int count_fn(void *user, const char *key, const char *value)
{
    (void)key;
    (void)value;
    (*(int *)user)++;
    return 0;
}

/* Reads everything an open database holds, as the pipeline and the CLI would: every table
 * scanned, every result, best entry and binary read back; then, read-write, one write. */
static at_status read_all(at_db *db, int write)
{
    static const char *const tables[] = {"meta", "results", "best", "binaries"};
    for (int t = 0; t < 4; t++) {
        char **keys = NULL;
        size_t n = 0;
        AT_TRY(at_db_keys(db, tables[t], NULL, &keys, &n));
        for (size_t i = 0; i < n; i++) {
            at_result_rec r;
            at_best_rec b;
            void *bin = NULL;
            size_t len = 0;
            if (t == 1) at_db_get_result(db, keys[i], &r);
            if (t == 2) at_db_get_best(db, keys[i], &b);
            if (t == 3 && at_db_get_binary(db, keys[i], &bin, &len) == AT_OK) free(bin);
        }
        at_db_keys_free(keys, n);
    }
    if (!write) return AT_OK;
    at_result_rec r = {.status = AT_RS_TIMEOUT, .when = 1};
    char *key = result_key(N_RESULTS + 1);
    at_status s = at_db_put_results(db, 1, &key, &r);
    free(key);
    return s;
}

typedef enum { EP_OPEN_RW, EP_OPEN_RO, EP_VISIT, EP_EXPORT, EP_RECORDING, EP_CONTEXT, EP_COUNT } ep;
static const char *const k_ep_names[EP_COUNT] = {"at_db_open rw",     "at_db_open ro",
                                                 "at_db_visit",       "db export",
                                                 "at_recording_load", "at_context_create"};

/* Runs entry point e on the database at path; the message goes to why. */
static at_status run_ep(ep e, const char *path, char *why, size_t len)
{
    at_status s = AT_OK;
    why[0] = '\0';
    if (e == EP_OPEN_RW || e == EP_OPEN_RO) {
        at_db *db = NULL;
        s = at_db_open(path, e == EP_OPEN_RW ? AT_DB_READWRITE : AT_DB_READONLY, &db);
        if (s == AT_OK) s = read_all(db, e == EP_OPEN_RW);
        if (s == AT_OK)
            at_db_skipped(db, why, len);
        else
            snprintf(why, len, "%s", at_errmsg());
        at_db_close(db);
    } else if (e == EP_VISIT) {
        /* As db list and db show do: one read-only open per table; the notes collected. */
        int n = 0;
        static const char *const tables[] = {"best", "results", "binaries", "meta"};
        for (int t = 0; t < 4 && s == AT_OK; t++) {
            char note[512];
            s = at_db_visit(path, tables[t], NULL, count_fn, &n, note, sizeof note);
            if (s != AT_OK || note[0])
                snprintf(why + strlen(why), len - strlen(why), "%s%s", why[0] ? "; " : "", note);
        }
    } else if (e == EP_EXPORT) {
        s = at_db_export_kernel_tuner(path, PROBLEM, NULL, NULL, "/dev/null", why, len);
    } else if (e == EP_RECORDING) {
        at_recording *rec = NULL;
        s = at_recording_load(path, PROBLEM "|", &rec);
        snprintf(why, len, "%s", s == AT_OK ? rec->note : at_errmsg());
        at_recording_free(rec);
    } else {
        at_context_options o = {.db_path = path};
        at_context *ctx = NULL;
        s = at_context_create(&o, &ctx);
        snprintf(why, len, "%s", at_context_last_error(ctx));
        at_context_destroy(ctx);
    }
    return s;
}

typedef struct outcome {
    at_status s;
    char why[1024];
} outcome;

typedef struct call {
    ep e;
    const char *path;
} call;

static void run_call(const void *arg, void *out)
{
    const call *c = arg;
    outcome *o = out;
    o->s = run_ep(c->e, c->path, o->why, sizeof o->why);
}

/* Runs e in a forked child, which must exit normally. */
static outcome isolated(ep e, const char *path, const char *label)
{
    call c = {e, path};
    outcome o = {.s = 1};
    in_child(run_call, &c, &o, sizeof o);
    if (getenv("AT_TEST_VERBOSE"))
        print_message("%-34s %-18s %-19s %s\n", label, k_ep_names[e],
                      o.s == AT_OK ? "AT_OK" : at_strerror(o.s), o.why);
    return o;
}

/* Whether at_context_create can reach the database here (a backend with a device). */
static int have_device(void)
{
    static int have = -1;
    if (have < 0) {
        at_backend_desc b[8];
        int n = 0;
        have = 0;
        if (at_backends_query(b, 8, &n) == AT_OK)
            for (int i = 0; i < n; i++) have |= b[i].available && b[i].ndevices > 0;
    }
    return have;
}

/* A status for expect_all: whatever a reader can meet without a crash (found, damaged, absent). */
#define ANY_CLEAR 1

/* Every entry point on the database at path ends in status want, its message holding text. */
static void expect_all(const char *path, const char *label, at_status want, const char *text)
{
    for (ep e = 0; e < EP_COUNT; e++) {
        if (e == EP_CONTEXT && !have_device()) continue;
        outcome o = isolated(e, path, label);
        int ok = want == ANY_CLEAR
                     ? o.s == AT_OK || o.s == AT_ERR_DB_CORRUPT || o.s == AT_ERR_NOT_FOUND
                     : o.s == want && strstr(o.why, text);
        if (!ok)
            fail_msg("%s: %s gave %d (%s), expected %d with '%s'", label, k_ep_names[e], o.s, o.why,
                     want, text);
    }
}

/* ---- damaged files ---------------------------------------------------------------------- */

static void test_truncated(void **state)
{
    size_t n = 0;
    char *good = make_good(state, &n);
    assert_true(n > 100 * PAGE);
    const struct {
        const char *label;
        size_t size;
    } cuts[] = {
        {"truncated inside meta page 0", 100},
        {"truncated inside meta page 1", PAGE + 100},
        {"truncated after the meta pages", 2 * PAGE},
        {"truncated after 3 pages", 3 * PAGE},
        {"truncated mid data", n / 2},
        {"truncated by one page", n - PAGE},
        {"truncated by one byte", n - 1},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char *path = make_db(state, "cut", good, cuts[i].size);
        expect_all(path, cuts[i].label, AT_ERR_DB_CORRUPT, "is not an autotune database");
        /* The file is left as it was. */
        char *file = sub(state, "cut/data.mdb"), *now = NULL;
        size_t m = 0;
        assert_int_equal(at_read_file(file, &now, &m), AT_OK);
        assert_int_equal(m, cuts[i].size);
        assert_memory_equal(now, good, m);
        free(now);
        free(file);
        free(path);
    }
    free(good);
}

static void test_garbage_pages(void **state)
{
    size_t n = 0;
    char *good = make_good(state, &n);
    char *bad = malloc(n);

    /* Valid meta pages, garbage after them. */
    memcpy(bad, good, n);
    for (size_t i = 2 * PAGE; i < n; i++) bad[i] = (char)rnd();
    char *path = make_db(state, "garbage", bad, n);
    expect_all(path, "garbage after the meta pages", AT_ERR_DB_CORRUPT,
               "is not an autotune database");
    free(path);

    /* Zeros after the meta pages (a file whose blocks were never written). */
    memset(bad + 2 * PAGE, 0, n - 2 * PAGE);
    path = make_db(state, "garbage", bad, n);
    expect_all(path, "zeros after the meta pages", AT_ERR_DB_CORRUPT,
               "is not an autotune database");
    free(path);

    /* One page of garbage: each of the first pages in turn (tables' roots and branches), one in
     * the middle, the last. A page of a large value's only (a binary's) still opens: the
     * binary's checksum catches it. */
    const size_t pages[] = {2, 3, 4, 5, 6, 7, 8, n / PAGE / 2, n / PAGE - 1};
    for (size_t p = 0; p < sizeof pages / sizeof pages[0]; p++) {
        memcpy(bad, good, n);
        for (size_t i = 0; i < PAGE; i++) bad[pages[p] * PAGE + i] = (char)rnd();
        path = make_db(state, "garbage", bad, n);
        char label[64];
        snprintf(label, sizeof label, "garbage page %zu of %zu", pages[p], n / PAGE);
        expect_all(path, label, ANY_CLEAR, "");
        free(path);
    }
    free(bad);
    free(good);
}

/* Random damage: a few bytes anywhere in the used pages, many times; every entry point reads
 * all it can and writes, in a child that must exit normally whatever the outcome. */
static void test_random_damage(void **state)
{
    size_t n = 0;
    char *good = make_good(state, &n);
    char *bad = malloc(n);
    int opened = 0, refused = 0;
    const char *env = getenv("AT_TEST_DAMAGE_ITERATIONS"); /* more, by hand */
    int iters = env ? atoi(env) : 150;
    for (int iter = 0; iter < iters; iter++) {
        memcpy(bad, good, n);
        int hits = 1 + (int)(rnd() % 4);
        for (int h = 0; h < hits; h++) {
            /* Mostly page headers and node tables, where LMDB looks first, and the meta pages'
             * fields (transaction, last page, the tables' roots and depths). */
            size_t page = rnd() % (n / PAGE), off = rnd() % 3 ? rnd() % 64 : rnd() % PAGE;
            if (rnd() % 8 == 0) {
                page = rnd() % 2;
                off = 16 + rnd() % 136;
            }
            size_t len = 1 + rnd() % 8;
            for (size_t i = 0; i < len && page * PAGE + off + i < n; i++)
                bad[page * PAGE + off + i] ^= (char)(1 + rnd() % 255);
        }
        char *path = make_db(state, "random", bad, n);
        char label[64];
        snprintf(label, sizeof label, "random damage #%d", iter);
        outcome o = isolated(iter % 2 ? EP_OPEN_RW : EP_OPEN_RO, path, label);
        if (o.s == AT_ERR_DB_CORRUPT && strstr(o.why, "is not an autotune database")) refused++;
        if (o.s == AT_OK) opened++;
        if (iter % 10 == 0) {
            isolated(EP_EXPORT, path, label);
            isolated(EP_RECORDING, path, label);
        }
        free(path);
    }
    print_message("random damage: %d opened and read, %d refused as damaged, %d other\n", opened,
                  refused, iters - opened - refused);
    free(bad);
    free(good);
}

/* ---- damaged records, a newer schema ---------------------------------------------------- */

static void test_damaged_records(void **state)
{
    char *path = good_copy(state, "records");
    /* Raw LMDB (nothing is open here): a result that does not parse, a best entry without its
     * config, a binary with a truncated header, one without a header (0.1), the large one with
     * a byte changed, and a copy of it cut by 10 bytes. */
    char *rkey = result_key(7), *bkey = at_db_best_key(PROBLEM, DEVICE);
    raw_put(path, "results", rkey, "v2 median_us=3");
    raw_put(path, "best", bkey, "v2 hash=00");
    raw_put_bytes(path, "binaries", "00000000000000cc",
                  "\x89"
                  "ATB\2\0\0\0\xff\0\0\0\0\0\0\0",
                  16);
    raw_put(path, "binaries", "00000000000000dd",
            "\x7f"
            "ELF raw code of 0.1");
    void *v = NULL;
    size_t len = 0;
    raw_access(path, "binaries", "00000000000000bb", &v, &len, 1);
    raw_put_bytes(path, "binaries", "00000000000000ee", v, len - 10);
    ((unsigned char *)v)[5000] ^= 1;
    raw_put_bytes(path, "binaries", "00000000000000bb", v, len);
    free(v);

    /* Readers that can go on skip them and say so; the rest refuse them, naming the key. */
    outcome o = isolated(EP_OPEN_RO, path, "damaged records");
    assert_int_equal(o.s, AT_OK);
    assert_non_null(strstr(o.why, "skipped 5 damaged records"));
    o = isolated(EP_VISIT, path, "damaged records");
    assert_int_equal(o.s, AT_OK);
    assert_non_null(strstr(o.why, "skipped 1 damaged record ("));
    o = isolated(EP_EXPORT, path, "damaged records");
    assert_int_equal(o.s, AT_OK);
    assert_non_null(strstr(o.why, "skipped 1 damaged record (results '" PROBLEM));
    assert_non_null(strstr(o.why, "required field status"));
    o = isolated(EP_RECORDING, path, "damaged records");
    assert_int_equal(o.s, AT_OK);
    assert_non_null(strstr(o.why, "skipped 1 damaged record (results '" PROBLEM));
    assert_non_null(strstr(o.why, "required field status"));
    if (have_device()) assert_int_equal(isolated(EP_CONTEXT, path, "damaged records").s, AT_OK);

    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READONLY, &db), AT_OK);
    at_result_rec r;
    assert_int_equal(at_db_get_result(db, rkey, &r), AT_ERR_DB_CORRUPT);
    assert_non_null(strstr(at_errmsg(), rkey));
    free(rkey);
    at_best_rec b;
    assert_int_equal(at_db_get_best(db, bkey, &b), AT_ERR_DB_CORRUPT);
    assert_non_null(strstr(at_errmsg(), bkey));
    free(bkey);
    void *bin = NULL;
    const struct {
        const char *key;
        at_status s;
        const char *why;
    } bins[] = {{"00000000000000aa", AT_OK, ""},
                {"00000000000000bb", AT_ERR_DB_CORRUPT, "checksum mismatch"},
                {"00000000000000cc", AT_ERR_DB_CORRUPT, "truncated header"},
                {"00000000000000dd", AT_ERR_NOT_FOUND, "no header"},
                {"00000000000000ee", AT_ERR_DB_CORRUPT, "truncated: 99990 bytes of code"}};
    for (size_t i = 0; i < sizeof bins / sizeof bins[0]; i++) {
        bin = NULL;
        assert_int_equal(at_db_get_binary(db, bins[i].key, &bin, &len), bins[i].s);
        if (bins[i].s == AT_OK) {
            assert_int_equal(len, 100);
            free(bin);
            continue;
        }
        assert_null(bin);
        assert_non_null(strstr(at_errmsg(), bins[i].key));
        assert_non_null(strstr(at_errmsg(), bins[i].why));
    }
    at_db_close(db);
    free(path);
}

static void test_newer_schema(void **state)
{
    char *path = good_copy(state, "newer");
    raw_put(path, "meta", "schema", "3");
    expect_all(path, "newer schema", AT_ERR_DB_VERSION, "newer autotune (schema 3 > 2)");
    free(path);
}

/* An empty data.mdb is a new database for a read-write open, none for a read-only one; a file
 * that is not a regular file, or not LMDB, is refused. */
static void test_not_a_database(void **state)
{
    char *path = make_db(state, "empty", "", 0);
    assert_int_equal(isolated(EP_OPEN_RO, path, "empty data.mdb").s, AT_ERR_DB);
    assert_int_equal(isolated(EP_OPEN_RW, path, "empty data.mdb").s, AT_OK);
    free(path);
    char text[3 * PAGE];
    memset(text, 'x', sizeof text);
    path = make_db(state, "text", text, sizeof text);
    expect_all(path, "a text file", AT_ERR_DB_CORRUPT, "no LMDB magic");
    free(path);
    path = sub(state, "fifo");
    assert_int_equal(mkdir(path, 0755), 0);
    char *file = sub(state, "fifo/data.mdb");
    assert_int_equal(mkfifo(file, 0644), 0);
    expect_all(path, "a FIFO", AT_ERR_DB_CORRUPT, "not a regular file");
    free(file);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_truncated, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_garbage_pages, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_random_damage, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_damaged_records, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_newer_schema, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_not_a_database, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
