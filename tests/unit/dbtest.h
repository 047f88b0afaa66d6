/* dbtest.h — what the database tests share: paths in the test's directory, whole files, raw
 * LMDB reads and writes (records as autotune would never write them), and running a step in a
 * forked child that must exit normally. Include after cmocka.h and tmpdir.h, in a file that
 * defines _GNU_SOURCE. */
#ifndef AT_TEST_DBTEST_H
#define AT_TEST_DBTEST_H

#include <lmdb.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* name in the test's directory (make_tmp), malloc'd. */
static inline char *sub(void **state, const char *name)
{
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", (const char *)*state, name) > 0);
    return p;
}

static inline void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* A repeatable sequence of pseudo-random numbers (xorshift). */
static uint64_t g_rng = 88172645463325252ull;
static inline uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Raw LMDB on the database at path, which must not be open in this process: table/key = len
 * bytes of value; with get, *value is instead set to a malloc'd copy of what is stored. */
static inline void raw_access(const char *path, const char *table, const char *key, void **value,
                              size_t *len, int get)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_open(env, path, get ? MDB_RDONLY : 0, 0666), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, get ? MDB_RDONLY : 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, table, get ? 0 : MDB_CREATE, &dbi), 0);
    MDB_val k = {strlen(key), (void *)key}, v = {*len, *value};
    if (get) {
        assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
        *value = malloc(v.mv_size + 1);
        memcpy(*value, v.mv_data, v.mv_size);
        *len = v.mv_size;
        mdb_txn_abort(txn);
    } else {
        assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
    }
    mdb_env_close(env);
}

static inline void raw_put_bytes(const char *path, const char *table, const char *key,
                                 const void *value, size_t len)
{
    void *v = (void *)value;
    raw_access(path, table, key, &v, &len, 0);
}

static inline void raw_put(const char *path, const char *table, const char *key, const char *value)
{
    raw_put_bytes(path, table, key, value, strlen(value));
}

/* Runs fn(arg, out) in a forked child and copies the size bytes it leaves in out back; fails
 * the test (naming the signal) unless the child exits normally. The child does not catch the
 * signals of a crash, as cmocka does in the test process: they end it. */
static inline void in_child(void (*fn)(const void *arg, void *out), const void *arg, void *out,
                            size_t size)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const int sigs[] = {SIGBUS, SIGSEGV, SIGABRT, SIGILL, SIGFPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
        close(fd[0]);
        fn(arg, out);
        _exit(write(fd[1], out, size) == (ssize_t)size ? 0 : 3);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got < size && (r = read(fd[0], (char *)out + got, size - got)) > 0) got += (size_t)r;
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st))
        fail_msg("the child was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(got, size);
}

#endif
