/* test_db_safety.c — the store under what a machine does to it: a full file system (creating a
 * database, filling one), kill -9 while writing, reader slots of killed readers, two opens of
 * one database in a process, read-only databases (file system, permissions), keys longer than
 * LMDB allows, the binaries' header. The file-system tests mount a small tmpfs and need root;
 * they skip without it. */
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
#include "tuner/tuner.h" /* the context's database handle */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBLEM "gemm/f32/nn/16x16x16"
#define DEVICE  "opencl/Test Platform/test device/4"
#define THASH   "0123456789abcdef"

/* ---- helpers ---------------------------------------------------------------------------- */

static char *rkey(int i)
{
    char config[32];
    snprintf(config, sizeof config, "BM=%d", i);
    return at_db_result_key(PROBLEM, DEVICE, THASH, config);
}

static at_result_rec rec(int i)
{
    at_result_rec r = {.status = AT_RS_OK, .median_us = i + 0.5, .reps = i, .when = i};
    return r;
}

static void put(at_db *db, int i)
{
    char *key = rkey(i);
    at_result_rec r = rec(i);
    at_status s = at_db_put_results(db, 1, &key, &r);
    if (s != AT_OK) fail_msg("put %d: %s", i, at_errmsg());
    free(key);
}

/* 1 when result i reads back as written. */
static int has(at_db *db, int i)
{
    char *key = rkey(i);
    at_result_rec back, want = rec(i);
    int ok = at_db_get_result(db, key, &back) == AT_OK && back.reps == want.reps &&
             back.median_us == want.median_us;
    free(key);
    return ok;
}

/* The child's outcome: a status, a count, a message. */
typedef struct outcome {
    at_status s;
    int n;
    char why[1024];
} outcome;

typedef void (*child_fn)(const char *path, outcome *o);
typedef struct child_call {
    child_fn fn;
    const char *path;
} child_call;

static void call(const void *arg, void *out)
{
    const child_call *c = arg;
    c->fn(c->path, out);
}

/* Runs fn on path in a forked child that must exit normally. */
static outcome child(child_fn fn, const char *path)
{
    child_call c = {fn, path};
    outcome o = {.s = 1};
    in_child(call, &c, &o, sizeof o);
    return o;
}

/* A tmpfs of size bytes mounted at path; 0 when this process may not mount (then the test is
 * skipped). Unmounted by teardown. */
static char g_mounts[4][512];
static int mount_tmpfs(const char *path, const char *size)
{
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=0755", size);
    assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
    if (mount("tmpfs", path, "tmpfs", 0, opts) != 0) {
        print_message("skipped: cannot mount a tmpfs here (%s)\n", strerror(errno));
        return 0;
    }
    for (int i = 0; i < 4; i++)
        if (!g_mounts[i][0]) {
            snprintf(g_mounts[i], sizeof g_mounts[i], "%s", path);
            break;
        }
    return 1;
}

static void stop_writers(void);

static int teardown(void **state)
{
    stop_writers();
    for (int i = 0; i < 4; i++)
        if (g_mounts[i][0]) {
            umount2(g_mounts[i], MNT_DETACH);
            g_mounts[i][0] = '\0';
        }
    return remove_tmp(state);
}

/* ---- a full file system ----------------------------------------------------------------- */

static void create_db(const char *path, outcome *o)
{
    at_db *db = NULL;
    o->s = at_db_open(path, AT_DB_READWRITE, &db);
    snprintf(o->why, sizeof o->why, "%s", o->s ? at_errmsg() : "");
    at_db_close(db);
}

/* Results with long reasons, one write transaction each, until a write fails. */
static void fill_db(const char *path, outcome *o)
{
    at_db *db = NULL;
    o->s = at_db_open(path, AT_DB_READWRITE, &db);
    for (o->n = 0; o->s == AT_OK && o->n < 100000; o->n++) {
        char *key = rkey(o->n);
        at_result_rec r = rec(o->n);
        r.status = AT_RS_COMPILE_ERROR;
        memset(r.reason, 'x', sizeof r.reason - 1);
        o->s = at_db_put_results(db, 1, &key, &r);
        free(key);
    }
    o->n--; /* the last one failed */
    snprintf(o->why, sizeof o->why, "%s", at_errmsg());
    at_db_close(db);
}

/* Every result fill_db wrote before the failure is there, and one more write still fails the
 * same way (or succeeds if it fits) without a signal. */
static void count_db(const char *path, outcome *o)
{
    at_db *db = NULL;
    o->s = at_db_open(path, AT_DB_READONLY, &db);
    snprintf(o->why, sizeof o->why, "%s", o->s ? at_errmsg() : "");
    int count = 0;
    char **keys = NULL;
    size_t n = 0;
    if (o->s == AT_OK) o->s = at_db_keys(db, "results", NULL, &keys, &n);
    for (size_t i = 0; i < n; i++) {
        at_result_rec r;
        count += at_db_get_result(db, keys[i], &r) == AT_OK;
    }
    at_db_keys_free(keys, n);
    o->n = count;
    at_db_close(db);
}

/* Fills the file system of path with a file until no block is left. */
static void fill_fs(const char *filler)
{
    int fd = open(filler, O_WRONLY | O_CREAT | O_APPEND, 0644);
    assert_true(fd >= 0);
    static char zeros[4096];
    while (write(fd, zeros, sizeof zeros) > 0) continue;
    while (write(fd, zeros, 1) > 0) continue;
    close(fd);
}

static void open_writable_or_not(const char *path, outcome *o)
{
    at_db *db = NULL;
    o->s = at_db_open(path, AT_DB_WRITABLE_OR_READONLY, &db);
    snprintf(o->why, sizeof o->why, "%s", o->s ? at_errmsg() : at_db_readonly_reason(db));
    at_db_close(db);
}

static void test_disk_full(void **state)
{
    char *fs = sub(state, "fs"), *db = sub(state, "fs/db"), *filler = sub(state, "fs/filler"),
         *lock = sub(state, "fs/db/lock.mdb");
    if (!mount_tmpfs(fs, "1m")) {
        free(fs);
        free(db);
        free(filler);
        free(lock);
        skip();
    }
    /* Full: creating a database is refused with the cause, before LMDB maps anything (LMDB's
     * lock file is a mapping: writing to it on a full file system would be SIGBUS). */
    fill_fs(filler);
    outcome o = child(create_db, db);
    assert_int_equal(o.s, AT_ERR_DB);
    assert_non_null(strstr(o.why, "No space left on device"));
    assert_non_null(strstr(o.why, db));

    /* Room for a database but not for what is written into it: the write that does not fit
     * fails with the cause, and everything written before it is there. */
    assert_int_equal(unlink(filler), 0);
    o = child(fill_db, db);
    print_message("disk full after %d results: %s\n", o.n, o.why);
    assert_int_equal(o.s, AT_ERR_DB);
    assert_non_null(strstr(o.why, "No space left on device"));
    assert_true(o.n > 100);
    int written = o.n;
    o = child(count_db, db);
    assert_int_equal(o.s, AT_OK);
    assert_int_equal(o.n, written);

    /* Full, and the lock file gone (it is recreated at will): a read-write open says why, a
     * read-only one answers (without a lock file), the fallback opens it read-only. */
    fill_fs(filler);
    assert_int_equal(unlink(lock), 0);
    fill_fs(filler);
    o = child(create_db, db);
    assert_int_equal(o.s, AT_ERR_DB);
    assert_non_null(strstr(o.why, "No space left on device"));
    o = child(count_db, db);
    assert_int_equal(o.s, AT_OK);
    assert_int_equal(o.n, written);
    o = child(open_writable_or_not, db);
    assert_int_equal(o.s, AT_OK);
    assert_non_null(strstr(o.why, "No space left on device"));
    free(fs);
    free(db);
    free(filler);
    free(lock);
}

/* ---- kill -9 ---------------------------------------------------------------------------- */

static void test_kill9(void **state)
{
    char *path = sub(state, "db");
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    at_db_close(db);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* One result per write transaction; each acknowledged once at_db_put_results returned. */
        close(fd[0]);
        if (at_db_open(path, AT_DB_READWRITE, &db) != AT_OK) _exit(1);
        for (int i = 0;; i++) {
            put(db, i);
            if (write(fd[1], &i, sizeof i) != sizeof i) _exit(2);
        }
    }
    close(fd[1]);
    int acked = -1, i;
    while (acked < 100 && read(fd[0], &i, sizeof i) == sizeof i) acked = i;
    kill(pid, SIGKILL);
    while (read(fd[0], &i, sizeof i) == sizeof i) acked = i;
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    /* Nothing committed is lost; the file opens and takes writes. */
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    for (i = 0; i <= acked; i++)
        if (!has(db, i)) fail_msg("result %d of %d acknowledged is lost", i, acked + 1);
    put(db, 1000000);
    at_db_close(db);
    free(path);
}

/* ---- opens while others write ------------------------------------------------------------ */

/* Writer processes, stopped by the test or, if it fails first, by teardown. */
static pid_t g_writers[2];
static void stop_writers(void)
{
    for (int w = 0; w < 2; w++)
        if (g_writers[w] > 0) {
            kill(g_writers[w], SIGKILL);
            waitpid(g_writers[w], NULL, 0);
            g_writers[w] = 0;
        }
}

/* What a writer commits: a batch of results with long keys and reasons at random places, now and
 * then a binary; pages are freed and reused all along. */
static at_status churn(at_db *db)
{
    char *keys[20];
    at_result_rec recs[20];
    char name[300];
    size_t n = 1 + rnd() % 250;
    for (size_t j = 0; j < n; j++) name[j] = (char)('a' + rnd() % 3);
    name[n] = '\0';
    for (int j = 0; j < 20; j++) {
        recs[j] = rec(j);
        memset(recs[j].reason, 'r', rnd() % 500);
        if (asprintf(&keys[j], "%s|%d", name, j) < 0) return AT_ERR_NO_MEMORY;
    }
    at_status s = at_db_put_results(db, 20, keys, recs);
    for (int j = 0; j < 20; j++) free(keys[j]);
    static char bin[200000];
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)(rnd() % 16));
    if (s == AT_OK && rnd() % 4 == 0) s = at_db_put_binary(db, hash, bin, rnd() % sizeof bin);
    return s;
}

/* Two processes write all along while this one opens the database again and again: each open
 * checks the file while pages are freed and rewritten, and is never refused for it. */
static void test_open_while_writing(void **state)
{
    char *path = sub(state, "db");
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    for (int i = 0; i < 200; i++) assert_int_equal(churn(db), AT_OK);
    put(db, 1);
    at_db_close(db);
    fflush(NULL);
    for (int w = 0; w < 2; w++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        g_writers[w] = pid;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* ends with the test, whatever happens to it */
            if (at_db_open(path, AT_DB_READWRITE, &db) != AT_OK) _exit(1);
            g_rng += (uint64_t)w + 1;
            while (churn(db) == AT_OK) continue;
            _exit(1);
        }
    }
    double end = at_now() + 2;
    int opens = 0;
    while (at_now() < end) {
        at_status s = at_db_open(path, AT_DB_READONLY, &db);
        if (s != AT_OK) fail_msg("open %d while writing: %s", opens, at_errmsg());
        assert_true(has(db, 1));
        at_db_close(db);
        opens++;
    }
    stop_writers();
    print_message("%d opens while two processes wrote\n", opens);
    free(path);
}

/* ---- reader slots of killed processes ----------------------------------------------------- */

static void read_one(const char *path, outcome *o)
{
    at_db *db = NULL;
    o->s = at_db_open(path, AT_DB_READONLY, &db);
    if (o->s == AT_OK) o->n = has(db, 1);
    snprintf(o->why, sizeof o->why, "%s", o->s ? at_errmsg() : "");
    /* No at_db_close: the process dies holding its reader slot, as a killed one does. */
}

static void test_stale_readers(void **state)
{
    char *path = sub(state, "db");
    at_db *db = NULL;
    /* Held open here, so the lock file's reader table outlives the children. */
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    put(db, 1);
    for (int i = 0; i < 140; i++) { /* LMDB has 126 slots */
        outcome o = child(read_one, path);
        if (o.s != AT_OK) fail_msg("reader %d: %s", i, o.why);
        assert_int_equal(o.n, 1);
    }
    assert_true(has(db, 1));
    at_db_close(db);
    free(path);
}

/* ---- one environment per database and process --------------------------------------------- */

static int get_in_scan(void *user, const char *key, const char *value)
{
    (void)key;
    (void)value;
    at_result_rec r;
    /* Another handle on the same database, from inside a scan: refused, not a deadlock. */
    assert_int_equal(at_db_get_result(user, "x", &r), AT_ERR_INVALID_ARG);
    return 1;
}

static at_status read_in(at_db *db, void *arg)
{
    (void)arg;
    return has(db, 1) ? AT_OK : AT_ERR_NOT_FOUND;
}

static void test_shared_env(void **state)
{
    char *path = sub(state, "db"), *alias = NULL, *link = sub(state, "link");
    at_db *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &a), AT_OK);
    /* Other spellings of the same directory: the same environment. */
    assert_true(asprintf(&alias, "%s/./db/", (const char *)*state) > 0);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(at_db_open(alias, AT_DB_READWRITE, &b), AT_OK);
    assert_int_equal(at_db_open(link, AT_DB_READONLY, &c), AT_OK);
    put(a, 1);
    assert_true(has(b, 1) && has(c, 1));
    put(b, 2);
    assert_true(has(a, 2));
    /* The read-only handle shares the read-write environment and refuses writes. */
    char *key = rkey(3);
    at_result_rec r = rec(3);
    assert_int_equal(at_db_put_results(c, 1, &key, &r), AT_ERR_DB);
    assert_non_null(strstr(at_errmsg(), "read-only"));
    assert_string_equal(at_db_readonly_reason(c), "opened read-only");
    assert_null(at_db_readonly_reason(a));
    assert_int_equal(at_db_scan(a, "results", NULL, get_in_scan, b), AT_OK);
    /* A one-shot reader while it is open read-write. */
    char why[256] = "x";
    assert_int_equal(at_db_read(path, read_in, NULL, why, sizeof why), AT_OK);
    assert_string_equal(why, "");
    /* Closing one handle leaves the others working. */
    at_db_close(a);
    assert_true(has(b, 2) && has(c, 1));
    put(b, 4);
    at_db_close(b);
    assert_true(has(c, 4));
    at_db_close(c);

    /* Open read-only first: a read-write open is refused, saying why; the fallback mode opens
     * it read-only with that reason. */
    assert_int_equal(at_db_open(path, AT_DB_READONLY, &c), AT_OK);
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &d), AT_ERR_DB);
    assert_null(d);
    assert_non_null(strstr(at_errmsg(), "open read-only in this process"));
    assert_int_equal(at_db_open(path, AT_DB_WRITABLE_OR_READONLY, &d), AT_OK);
    assert_non_null(strstr(at_db_readonly_reason(d), "read-only elsewhere in this process"));
    assert_true(has(d, 4));
    assert_int_equal(at_db_put_results(d, 1, &key, &r), AT_ERR_DB);
    assert_non_null(strstr(at_errmsg(), "read-only elsewhere in this process"));
    at_db_close(c);
    at_db_close(d);
    /* All closed: a read-write open works again. */
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &a), AT_OK);
    put(a, 3);
    at_db_close(a);
    free(key);
    free(alias);
    free(link);
    free(path);
}

/* ---- read-only databases ------------------------------------------------------------------ */

/* The database at path, not writable here, still answers; writes fail saying why. */
static void read_only_checks(const char *path, outcome *o)
{
    at_db *db = NULL;
    o->s = at_db_open(path, AT_DB_READWRITE, &db);
    if (o->s != AT_ERR_DB) {
        snprintf(o->why, sizeof o->why, "read-write open gave %d", o->s);
        return;
    }
    o->s = at_db_open(path, AT_DB_WRITABLE_OR_READONLY, &db);
    if (o->s != AT_OK) {
        snprintf(o->why, sizeof o->why, "fallback open: %s", at_errmsg());
        return;
    }
    o->n = has(db, 1);
    char *key = rkey(2);
    at_result_rec r = rec(2);
    at_status s = at_db_put_results(db, 1, &key, &r);
    snprintf(o->why, sizeof o->why, "%d|%s|%s", s, at_db_readonly_reason(db), at_errmsg());
    free(key);
    at_db_close(db);
    if (at_db_open(path, AT_DB_READONLY, &db) != AT_OK) o->n = 0;
    at_db_close(db);
}

/* A context on such a database opens it read-only and answers from it. */
static void context_checks(const char *path, outcome *o)
{
    at_context_options opts = {.db_path = path};
    at_context *ctx = NULL;
    o->s = at_context_create(&opts, &ctx);
    if (o->s == AT_OK) {
        o->n = has(ctx->db, 1);
        snprintf(o->why, sizeof o->why, "%s", at_db_readonly_reason(ctx->db));
    } else {
        snprintf(o->why, sizeof o->why, "%s", at_context_last_error(ctx));
    }
    at_context_destroy(ctx);
}

static void make_db_with_one(const char *path)
{
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    put(db, 1);
    at_db_close(db);
}

static void expect_read_only(const char *path, const char *cause)
{
    outcome o = child(read_only_checks, path);
    if (o.s != AT_OK) fail_msg("%s", o.why);
    assert_int_equal(o.n, 1);
    char want[256];
    snprintf(want, sizeof want, "%d|cannot write to %s: %s|", AT_ERR_DB, path, cause);
    if (strncmp(o.why, want, strlen(want)) != 0) fail_msg("got '%s', want '%s'", o.why, want);
    assert_non_null(strstr(o.why, "is read-only (cannot write to"));
    o = child(context_checks, path);
    if (o.s == AT_ERR_NO_BACKEND) return; /* no device here: the store checks above suffice */
    if (o.s != AT_OK) fail_msg("context: %s", o.why);
    assert_int_equal(o.n, 1);
    assert_non_null(strstr(o.why, cause));
}

static void test_read_only_fs(void **state)
{
    char *fs = sub(state, "fs"), *db = sub(state, "fs/db");
    if (!mount_tmpfs(fs, "4m")) {
        free(fs);
        free(db);
        skip();
    }
    make_db_with_one(db);
    assert_int_equal(mount("tmpfs", fs, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
    expect_read_only(db, strerror(EROFS));
    free(fs);
    free(db);
}

static void as_nobody(const char *path, outcome *o)
{
    if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
        o->s = AT_ERR_INTERNAL;
        snprintf(o->why, sizeof o->why, "setuid: %s", strerror(errno));
        return;
    }
    read_only_checks(path, o);
}

static void test_read_only_permissions(void **state)
{
    char *db = sub(state, "db");
    make_db_with_one(db);
    /* Another user's database: as root, a child that becomes nobody; otherwise files and
     * directory made read-only. The lock file cannot be written either. */
    assert_int_equal(chmod(*state, 0755), 0);
    if (getuid() != 0) {
        char *f = sub(state, "db/data.mdb"), *l = sub(state, "db/lock.mdb");
        assert_int_equal(chmod(f, 0444) | chmod(l, 0444) | chmod(db, 0555), 0);
        free(f);
        free(l);
    }
    outcome o = child(as_nobody, db);
    if (o.s != AT_OK) fail_msg("%s", o.why);
    assert_int_equal(o.n, 1);
    assert_non_null(strstr(o.why, "|cannot write to "));
    assert_non_null(strstr(o.why, strerror(EACCES)));
    chmod(db, 0755);
    free(db);
}

/* ---- long keys ---------------------------------------------------------------------------- */

static void test_long_keys(void **state)
{
    /* A 600-character device name (OpenCL allows any length), with multi-byte characters
     * around where it is cut; a config too long for what is left. */
    char device[700], name[601], config[700];
    for (int i = 0; i < 600; i++) name[i] = (char)('a' + i % 26);
    memcpy(name + 92, "\xc3\xa9\xc3\xa9\xc3\xa9", 6); /* "ééé", where the device is cut */
    name[600] = '\0';
    snprintf(device, sizeof device, "opencl/Platform/%s/8", name);
    int pos = 0;
    for (int i = 0; pos < 600; i++)
        pos += snprintf(config + pos, sizeof config - pos, "P%d=%d,", i, i);
    config[pos - 1] = '\0';

    char *key = at_db_result_key(PROBLEM, device, THASH, "BM=1"),
         *again = at_db_result_key(PROBLEM, device, THASH, "BM=1");
    assert_non_null(key);
    assert_true(strlen(key) <= AT_KEY_MAX);
    assert_string_equal(key, again); /* the same on build and lookup */
    at_result_key k;
    assert_int_equal(at_result_key_split(key, &k), AT_OK);
    assert_int_equal(k.device.n, AT_KEY_PART_MAX - 1); /* cut before the 'é' it would split */
    assert_true(at_key_part_shortened(k.device));
    assert_true(at_key_part_is(k.device, device));
    assert_true(at_key_part_is(k.problem, PROBLEM) && !at_key_part_shortened(k.problem));
    assert_true(at_key_part_is(k.config, "BM=1"));
    /* Another device with the same first bytes: another key. */
    device[strlen(device) - 3] ^= 1;
    char *other = at_db_result_key(PROBLEM, device, THASH, "BM=1");
    assert_string_not_equal(key, other);
    device[strlen(device) - 3] ^= 1;
    char *longcfg = at_db_result_key(PROBLEM, device, THASH, config);
    assert_true(strlen(longcfg) <= AT_KEY_MAX);
    assert_int_equal(at_result_key_split(longcfg, &k), AT_OK);
    assert_true(at_key_part_shortened(k.config));

    /* End to end in the store: results, a prefix scan, best, the export, a recorded space. */
    char *path = sub(state, "db");
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    char *keys[3] = {key, at_db_result_key(PROBLEM, device, THASH, "BM=2"), longcfg};
    at_result_rec recs[3] = {rec(1), rec(2), rec(3)};
    assert_int_equal(at_db_put_results(db, 2, keys, recs), AT_OK);
    at_result_rec back;
    assert_int_equal(at_db_get_result(db, key, &back), AT_OK);
    assert_int_equal(back.reps, 1);
    char *prefix = at_db_results_prefix(PROBLEM, device, THASH);
    char **found = NULL;
    size_t n = 0;
    assert_int_equal(at_db_keys(db, "results", prefix, &found, &n), AT_OK);
    assert_int_equal(n, 2);
    at_db_keys_free(found, n);
    char *bkey = at_db_best_key(PROBLEM, device);
    assert_true(strlen(bkey) <= AT_KEY_MAX);
    at_best_rec b = {.config = "BM=1", .template_hash = THASH, .time_us = 1.5}, bb;
    assert_int_equal(at_db_put_best(db, bkey, &b, 0), AT_OK);
    assert_int_equal(at_db_get_best(db, bkey, &bb), AT_OK);
    assert_true(bb.time_us == 1.5);
    at_recording *r = NULL;
    assert_int_equal(at_recording_load(path, prefix, &r), AT_OK);
    assert_int_equal(r->nconfigs, 2);
    at_recording_free(r);
    /* A result whose config was shortened is stored and read like any other... */
    assert_int_equal(at_db_put_results(db, 1, &longcfg, &recs[2]), AT_OK);
    assert_int_equal(at_db_get_result(db, longcfg, &back), AT_OK);
    at_db_close(db);

    /* ...but cannot give its values to the export: skipped, and said so. */
    char *out = sub(state, "kt.json"), why[1024] = "";
    at_status s = at_db_export_kernel_tuner(path, PROBLEM, device, NULL, out, why, sizeof why);
    if (s != AT_OK) fail_msg("export: %s", why);
    assert_non_null(strstr(why, "skipped 1 damaged record"));
    assert_non_null(strstr(why, "shortened"));
    char *json = NULL;
    assert_int_equal(at_read_file(out, &json, NULL), AT_OK);
    assert_non_null(strstr(json, "\"BM\": [1, 2]"));
    free(json);

    for (int i = 1; i < 2; i++) free(keys[i]);
    free(out);
    free(bkey);
    free(prefix);
    free(path);
    free(key);
    free(again);
    free(other);
    free(longcfg);
}

/* ---- binaries ----------------------------------------------------------------------------- */

static void test_binary_sizes(void **state)
{
    char *path = sub(state, "db");
    at_db *db = NULL;
    assert_int_equal(at_db_open(path, AT_DB_READWRITE, &db), AT_OK);
    const size_t sizes[] = {0, 1, 3, 23, 24, 25, 4000, 4096, 70000, 3 << 20};
    unsigned char *bin = malloc(3 << 20);
    for (size_t i = 0; i < (3u << 20); i++) bin[i] = (unsigned char)(i * 7 + (i >> 9));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char key[32];
        snprintf(key, sizeof key, "%016zx", sizes[i]);
        assert_int_equal(at_db_put_binary(db, key, bin, sizes[i]), AT_OK);
        void *back = NULL;
        size_t len = 99;
        assert_int_equal(at_db_get_binary(db, key, &back, &len), AT_OK);
        assert_int_equal(len, sizes[i]);
        assert_memory_equal(back, bin, len);
        free(back);
    }
    free(bin);
    at_db_close(db);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_disk_full, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_kill9, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_open_while_writing, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_stale_readers, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_shared_env, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_read_only_fs, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_read_only_permissions, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_long_keys, make_tmp, teardown),
        cmocka_unit_test_setup_teardown(test_binary_sizes, make_tmp, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
