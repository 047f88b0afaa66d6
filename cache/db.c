/* db.c — the LMDB store: one environment per database file and process, shared by the handles
 * opened on it; named tables meta, results, best, binaries, devices and checks. Values of
 * results, best, devices and checks are versioned one-line text records (record.h), binaries carry
 * a length and a checksum, the schema version is in meta (docs/database.md). A file is checked
 * (dbfile.h) before LMDB maps it. Every write is one write transaction; MDB_MAP_FULL grows the map
 * and retries the whole batch. */
#define _GNU_SOURCE
#include "db.h"

#include "cache/dbfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#define AT_DB_INITIAL_MAP ((size_t)64 << 20)
#define AT_DB_MAX_MAP     ((size_t)1 << 40)
#define AT_DB_MAX_RETRIES 64
/* Free space a new database needs: the lock file, the meta pages and the first tables, with
 * room to spare. LMDB writes the data file with write(), so a full disk is an error there; the
 * lock file is written through a mapping, so its blocks are allocated before LMDB maps it. */
#define AT_DB_MIN_FREE   ((uint64_t)256 << 10)
#define AT_DB_LOCK_BYTES 8192 /* LMDB's lock file for its default 126 readers */

enum { T_META, T_RESULTS, T_BEST, T_BINARIES, T_DEVICES, T_CHECKS, T_COUNT };
static const char *const k_tables[T_COUNT] = {"meta",     "results", "best",
                                              "binaries", "devices", "checks"};
/* Tables from T_NEW on came with schema 2.1: a file of an older minor does not have them until
 * its first write transaction creates them; until then they read as empty. */
#define T_NEW T_DEVICES

/* One LMDB environment per database in this process (LMDB forbids opening a file twice in one
 * process: closing one handle would drop the other's locks). Opens of one directory, found by
 * device and inode, share it and count references. */
typedef struct shared_env {
    MDB_env *env;
    MDB_dbi dbi[T_COUNT];
    dev_t dev;
    ino_t ino;
    pid_t pid;            /* the process that opened it: a child after fork() opens its own */
    int readonly;         /* opened MDB_RDONLY */
    int ready;            /* the tables are open: write transactions check the schema first */
    unsigned tables_open; /* bit t: dbi[t] is open (a table of a newer minor may be absent) */
    int refs;
    char *file;           /* path/data.mdb as first opened, for messages */
    char *remove_dir;     /* at_db_set_temporary: the directory removed with the environment */
    pthread_mutex_t lock; /* one transaction at a time per environment */
    struct shared_env *next;
} shared_env;

struct at_db {
    shared_env *e;
    char *path;      /* as this handle was opened, for messages */
    int readonly;    /* this handle refuses writes */
    char *ro_reason; /* why, when read-write was asked for and the file is not writable */
    size_t skipped;  /* records scans skipped as damaged since the last at_db_skipped */
    at_sbuf note;    /* the first few of them */
};

static shared_env *g_envs;
static pthread_mutex_t g_envs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* Set while a scan callback runs on this thread, so re-entry fails instead of deadlocking. */
static _Thread_local const shared_env *t_scanning;

/* ---- small helpers ---------------------------------------------------------------------- */

static at_status mdb_fail(const at_db *db, const char *op, int rc)
{
    if (rc == ENOMEM) return at_fail(AT_ERR_NO_MEMORY, "%s: %s: out of memory", db->path, op);
    return at_fail(AT_ERR_DB, "database %s: %s failed: %s", db->path, op, mdb_strerror(rc));
}

static at_status enter(at_db *db)
{
    if (!db) return at_fail(AT_ERR_INVALID_ARG, "database handle is NULL");
    if (t_scanning == db->e)
        return at_fail(AT_ERR_INVALID_ARG, "database %s used from inside its own scan callback",
                       db->path);
    pthread_mutex_lock(&db->e->lock);
    return AT_OK;
}

static void leave(at_db *db) { pthread_mutex_unlock(&db->e->lock); }

static at_status check_key(at_db *db, const char *key)
{
    if (!key || !*key) return at_fail(AT_ERR_INVALID_ARG, "database key is empty");
    size_t n = strlen(key);
    size_t max = (size_t)mdb_env_get_maxkeysize(db->e->env);
    if (n > max)
        return at_fail(AT_ERR_INVALID_ARG, "database key too long (%zu bytes > %zu): %.80s...", n,
                       max, key);
    return AT_OK;
}

/* ---- transactions ----------------------------------------------------------------------- */

/* Begins a transaction; adopts a map grown by another process (MDB_MAP_RESIZED) and frees the
 * reader slots of dead processes when the table is full. */
static at_status txn_begin(at_db *db, unsigned flags, MDB_txn **txn)
{
    int dead = 0;
    for (int tries = 0;; tries++) {
        int rc = mdb_txn_begin(db->e->env, NULL, flags, txn);
        if (rc == MDB_SUCCESS) return AT_OK;
        if (rc == MDB_MAP_RESIZED && tries < AT_DB_MAX_RETRIES) {
            rc = mdb_env_set_mapsize(db->e->env, 0);
            if (rc == MDB_SUCCESS) continue;
            return mdb_fail(db, "adopting the grown map size", rc);
        }
        if (rc == MDB_READERS_FULL && tries == 0 &&
            mdb_reader_check(db->e->env, &dead) == MDB_SUCCESS && dead > 0)
            continue;
        return mdb_fail(
            db, flags & MDB_RDONLY ? "begin read transaction" : "begin write transaction", rc);
    }
}

static at_status grow_map(at_db *db)
{
    MDB_envinfo info;
    int rc = mdb_env_info(db->e->env, &info);
    if (rc != MDB_SUCCESS) return mdb_fail(db, "reading the map size", rc);
    size_t cur = info.me_mapsize;
    if (cur >= AT_DB_MAX_MAP)
        return at_fail(AT_ERR_DB, "database %s is full: map full at %zu bytes (limit reached)",
                       db->path, cur);
    rc = mdb_env_set_mapsize(db->e->env, cur * 2);
    if (rc != MDB_SUCCESS) return mdb_fail(db, "growing the map", rc);
    return AT_OK;
}

/* The body of a write transaction. Returns AT_OK or an error; on an LMDB error it stores the
 * code in *mdb_rc (so MDB_MAP_FULL can be retried). */
typedef at_status (*write_fn)(at_db *db, MDB_txn *txn, void *ctx, int *mdb_rc);

static at_status meta_sync(at_db *db, MDB_txn *txn, int *mdb_rc);

/* Creates the tables of a newer minor that the file does not have yet (bits in *created). */
static at_status create_missing(at_db *db, MDB_txn *txn, unsigned *created, int *mdb_rc)
{
    for (int t = T_NEW; t < T_COUNT; t++) {
        if (db->e->tables_open & (1u << t)) continue;
        int rc = mdb_dbi_open(txn, k_tables[t], MDB_CREATE, &db->e->dbi[t]);
        if (rc != MDB_SUCCESS) {
            *mdb_rc = rc;
            return mdb_fail(db, "creating a table", rc);
        }
        db->e->tables_open |= 1u << t;
        *created |= 1u << t;
    }
    return AT_OK;
}

static at_status write_txn(at_db *db, write_fn fn, void *ctx)
{
    if (db->readonly && db->ro_reason)
        return at_fail(AT_ERR_DB, "database %s is read-only (%s): nothing is stored", db->path,
                       db->ro_reason);
    if (db->readonly) return at_fail(AT_ERR_DB, "database %s is open read-only", db->path);
    for (int tries = 0;; tries++) {
        MDB_txn *txn = NULL;
        AT_TRY(txn_begin(db, 0, &txn));
        int mrc = MDB_SUCCESS;
        unsigned created = 0;
        at_status s = db->e->ready ? meta_sync(db, txn, &mrc) : AT_OK;
        if (s == AT_OK && db->e->ready) s = create_missing(db, txn, &created, &mrc);
        if (s == AT_OK) s = fn(db, txn, ctx, &mrc);
        if (s == AT_OK) {
            mrc = mdb_txn_commit(txn);
            if (mrc == MDB_SUCCESS) return AT_OK;
            s = mdb_fail(db, "commit", mrc);
        } else {
            mdb_txn_abort(txn);
        }
        db->e->tables_open &= ~created; /* LMDB closed the handles the transaction opened */
        if (mrc == MDB_MAP_FULL && tries < AT_DB_MAX_RETRIES) {
            AT_TRY(grow_map(db));
            continue;
        }
        return s;
    }
}

/* Puts key = v in table; with MDB_RESERVE, v->mv_data then points at the space to fill. */
static at_status put_one(at_db *db, MDB_txn *txn, int table, const char *key, MDB_val *v,
                         unsigned flags, int *mdb_rc)
{
    MDB_val k = {strlen(key), (void *)key};
    int rc = mdb_put(txn, db->e->dbi[table], &k, v, flags);
    if (rc == MDB_SUCCESS) return AT_OK;
    *mdb_rc = rc;
    if (rc == MDB_MAP_FULL) return at_fail(AT_ERR_DB, "database %s: map full", db->path);
    return at_fail(AT_ERR_DB, "database %s: writing %s '%s' failed: %s", db->path, k_tables[table],
                   key, mdb_strerror(rc));
}

static at_status put_text(at_db *db, MDB_txn *txn, int table, const char *key, const char *text,
                          size_t len, int *mdb_rc)
{
    MDB_val v = {len, (void *)text};
    return put_one(db, txn, table, key, &v, 0, mdb_rc);
}

/* Reads key from table into a malloc'd, NUL-terminated copy. */
static at_status get_copy(at_db *db, int table, const char *key, char **out, size_t *len)
{
    if (!(db->e->tables_open & (1u << table)))
        return at_fail(AT_ERR_NOT_FOUND, "no %s entry for '%s' in %s", k_tables[table], key,
                       db->path);
    MDB_txn *txn = NULL;
    AT_TRY(txn_begin(db, MDB_RDONLY, &txn));
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(txn, db->e->dbi[table], &k, &v);
    at_status s = AT_OK;
    if (rc == MDB_NOTFOUND) {
        s = at_fail(AT_ERR_NOT_FOUND, "no %s entry for '%s' in %s", k_tables[table], key, db->path);
    } else if (rc != MDB_SUCCESS) {
        s = at_fail(AT_ERR_DB, "database %s: reading %s '%s' failed: %s", db->path, k_tables[table],
                    key, mdb_strerror(rc));
    } else {
        char *p = malloc(v.mv_size + 1);
        if (!p) {
            s = at_fail(AT_ERR_NO_MEMORY, "out of memory reading %zu bytes from %s", v.mv_size,
                        db->path);
        } else {
            memcpy(p, v.mv_data, v.mv_size);
            p[v.mv_size] = '\0';
            *out = p;
            if (len) *len = v.mv_size;
        }
    }
    mdb_txn_abort(txn);
    return s;
}

/* get_copy of a checked key, under the environment's lock. */
static at_status get_locked(at_db *db, int table, const char *key, char **out, size_t *len)
{
    AT_TRY(enter(db));
    at_status s = check_key(db, key);
    if (s == AT_OK) s = get_copy(db, table, key, out, len);
    leave(db);
    return s;
}

/* ---- open / close ----------------------------------------------------------------------- */

/* errno of a failed system call, for at_db_open's read-only fallback. */
static at_status sys_fail(int *err, int e, const char *fmt, const char *path)
{
    *err = e;
    return at_fail(AT_ERR_DB, fmt, path, strerror(e));
}

static at_status mkdir_p(const char *path, int *err)
{
    char *tmp = at_strdup(path);
    if (!tmp) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/') tmp[--n] = '\0';
    for (char *p = tmp + 1;; p++) {
        int last = (*p == '\0');
        if (*p == '/' || last) {
            char saved = *p;
            *p = '\0';
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST) {
                at_status s = sys_fail(err, errno, "cannot create database directory %s: %s", tmp);
                free(tmp);
                return s;
            }
            *p = saved;
        }
        if (last) break;
    }
    free(tmp);
    struct stat st;
    if (stat(path, &st) != 0)
        return sys_fail(err, errno, "cannot use database directory %s: %s", path);
    if (!S_ISDIR(st.st_mode))
        return sys_fail(err, ENOTDIR, "cannot use database directory %s: %s", path);
    return AT_OK;
}

/* A new database needs AT_DB_MIN_FREE bytes on its file system. */
static at_status check_free_space(const char *path, int *err)
{
    struct statvfs sv;
    if (statvfs(path, &sv) != 0) return AT_OK; /* unknown: LMDB reports what fails */
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    if (avail >= AT_DB_MIN_FREE) return AT_OK;
    *err = ENOSPC;
    return at_fail(AT_ERR_DB, "cannot create database %s: %s (%llu KiB free, %llu KiB needed)",
                   path, strerror(ENOSPC), (unsigned long long)(avail >> 10),
                   (unsigned long long)(AT_DB_MIN_FREE >> 10));
}

/* LMDB writes its lock file through a shared mapping: on a full file system a write to a page
 * that has no block yet is SIGBUS. Its blocks are allocated here first (creating it as LMDB
 * would), without changing its size or contents: another process may be using it. An open that
 * fails here (a read-only file system, another user's database) is left to LMDB. */
static at_status prepare_lock_file(const char *path, int *err)
{
    char *lock = at_asprintf("%s/lock.mdb", path);
    if (!lock) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    at_status s = AT_OK;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        off_t n = st.st_size > 0 ? st.st_size : AT_DB_LOCK_BYTES;
        if (fallocate(fd, 0, 0, n) != 0 && errno == ENOSPC)
            s = sys_fail(err, ENOSPC, "cannot open database %s: %s (lock.mdb)", path);
    }
    if (fd >= 0) close(fd);
    free(lock);
    return s;
}

/* 1 when path/lock.mdb exists and this process may write it (LMDB's reader slots). */
static int layer_lock_usable(const char *path)
{
    char *lock = at_asprintf("%s/lock.mdb", path);
    int ok = lock && access(lock, R_OK | W_OK) == 0;
    free(lock);
    return ok;
}

/* Reads the integer meta/key (>= lo); an absent optional key reads as lo. */
static at_status meta_int(at_db *db, MDB_txn *txn, MDB_dbi meta, const char *key, int required,
                          int64_t lo, int64_t *out)
{
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(txn, meta, &k, &v);
    if (rc == MDB_NOTFOUND && !required) {
        *out = lo;
        return AT_OK;
    }
    if (rc != MDB_SUCCESS)
        return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s: %s)", db->e->file,
                       key, mdb_strerror(rc));
    char buf[32];
    if (v.mv_size == 0 || v.mv_size >= sizeof buf)
        return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (bad %s value)",
                       db->e->file, key);
    memcpy(buf, v.mv_data, v.mv_size);
    buf[v.mv_size] = '\0';
    if (at_parse_i64(buf, lo, INT64_MAX, out) != 0)
        return at_fail(AT_ERR_DB_CORRUPT,
                       "%s is not an autotune database (%s '%s' is not a number)", db->e->file, key,
                       buf);
    return AT_OK;
}

/* The file's schema: `schema` (major, required) and `schema_minor` (0 when absent, as in
 * schema 1). A newer major than ours is AT_ERR_DB_VERSION. */
static at_status read_schema(at_db *db, MDB_txn *txn, MDB_dbi meta, int64_t *major, int64_t *minor)
{
    AT_TRY(meta_int(db, txn, meta, "schema", 1, 1, major));
    if (*major > AT_DB_SCHEMA)
        return at_fail(AT_ERR_DB_VERSION,
                       "%s was written by a newer autotune (schema %lld > %d); upgrade autotune "
                       "or use another --db",
                       db->e->file, (long long)*major, AT_DB_SCHEMA);
    return meta_int(db, txn, meta, "schema_minor", 0, 0, minor);
}

/* Writes this release's schema into meta: for a new file, or upgrading an older one. */
static at_status put_schema(at_db *db, MDB_txn *txn, int *mdb_rc)
{
    char major[24], minor[24];
    snprintf(major, sizeof major, "%d", AT_DB_SCHEMA);
    snprintf(minor, sizeof minor, "%d", AT_DB_SCHEMA_MINOR);
    AT_TRY(put_text(db, txn, T_META, "schema", major, strlen(major), mdb_rc));
    return put_text(db, txn, T_META, "schema_minor", minor, strlen(minor), mdb_rc);
}

/* First in every write transaction: refuses a file another process has moved to a newer major
 * since we opened it, and upgrades an older schema or minor. Only meta changes: records of
 * every version are read, and each record written is the current version. */
static at_status meta_sync(at_db *db, MDB_txn *txn, int *mdb_rc)
{
    int64_t major, minor;
    AT_TRY(read_schema(db, txn, db->e->dbi[T_META], &major, &minor));
    if (major == AT_DB_SCHEMA && minor >= AT_DB_SCHEMA_MINOR) return AT_OK;
    return put_schema(db, txn, mdb_rc);
}

typedef enum { META_OK, META_EMPTY } meta_state;

/* Reads meta in a read transaction: META_EMPTY for a brand-new environment (no tables at all),
 * META_OK for a schema we read; errors for anything else. */
static at_status check_meta(at_db *db, meta_state *state)
{
    MDB_txn *txn = NULL;
    AT_TRY(txn_begin(db, MDB_RDONLY, &txn));
    at_status s = AT_OK;
    MDB_dbi meta;
    int rc = mdb_dbi_open(txn, "meta", 0, &meta);
    if (rc == MDB_NOTFOUND) {
        MDB_stat ms;
        MDB_dbi main_dbi;
        rc = mdb_dbi_open(txn, NULL, 0, &main_dbi);
        if (rc == MDB_SUCCESS) rc = mdb_stat(txn, main_dbi, &ms);
        if (rc != MDB_SUCCESS)
            s = at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s)", db->e->file,
                        mdb_strerror(rc));
        else if (ms.ms_entries == 0)
            *state = META_EMPTY;
        else
            s = at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (no meta table)",
                        db->e->file);
    } else if (rc != MDB_SUCCESS) {
        s = at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (meta table: %s)",
                    db->e->file, mdb_strerror(rc));
    } else {
        int64_t major, minor;
        s = read_schema(db, txn, meta, &major, &minor);
        if (s == AT_OK) *state = META_OK;
    }
    mdb_txn_abort(txn);
    return s;
}

/* Creates the tables and writes meta if it is still missing (another process may have won). */
static at_status init_body(at_db *db, MDB_txn *txn, void *unused, int *mdb_rc)
{
    (void)unused;
    for (int t = 0; t < T_COUNT; t++) {
        int rc = mdb_dbi_open(txn, k_tables[t], MDB_CREATE, &db->e->dbi[t]);
        if (rc != MDB_SUCCESS) {
            *mdb_rc = rc;
            return mdb_fail(db, "creating a table", rc);
        }
    }
    MDB_val k = {6, "schema"}, v;
    int rc = mdb_get(txn, db->e->dbi[T_META], &k, &v);
    if (rc == MDB_SUCCESS) return AT_OK; /* initialised concurrently; checked again below */
    if (rc != MDB_NOTFOUND) {
        *mdb_rc = rc;
        return mdb_fail(db, "reading meta", rc);
    }
    const char *by = "autotune " AT_VERSION_STRING;
    AT_TRY(put_schema(db, txn, mdb_rc));
    return put_text(db, txn, T_META, "created_by", by, strlen(by), mdb_rc);
}

/* Opens the table handles (they exist once meta is valid; those of a newer minor may not). */
static at_status open_tables(at_db *db)
{
    MDB_txn *txn = NULL;
    AT_TRY(txn_begin(db, MDB_RDONLY, &txn));
    for (int t = 0; t < T_COUNT; t++) {
        int rc = mdb_dbi_open(txn, k_tables[t], 0, &db->e->dbi[t]);
        if (rc == MDB_SUCCESS) db->e->tables_open |= 1u << t;
        if (rc == MDB_NOTFOUND && t >= T_NEW) continue;
        if (rc != MDB_SUCCESS) {
            mdb_txn_abort(txn);
            return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (table %s: %s)",
                           db->e->file, k_tables[t], mdb_strerror(rc));
        }
    }
    int rc = mdb_txn_commit(txn); /* keeps the handles */
    if (rc != MDB_SUCCESS) return mdb_fail(db, "opening tables", rc);
    return AT_OK;
}

/* mdb_env_open with our settings. A read-only open where the lock file cannot be written
 * (another user's database) or has no room (a full disk) goes on without it (MDB_NOLOCK): it
 * then does not hold its snapshot against a writer in another process. */
static int env_open(shared_env *e, const char *path, int readonly, int exists, int nolock)
{
    unsigned flags = (readonly ? MDB_RDONLY : 0) | (nolock ? MDB_NOLOCK : 0);
    for (;;) {
        int rc = mdb_env_create(&e->env);
        if (rc == MDB_SUCCESS) rc = mdb_env_set_maxdbs(e->env, T_COUNT + 4);
        if (rc == MDB_SUCCESS && !exists) rc = mdb_env_set_mapsize(e->env, AT_DB_INITIAL_MAP);
        if (rc == MDB_SUCCESS) rc = mdb_env_open(e->env, path, flags, 0666);
        if (rc == MDB_SUCCESS) return rc;
        if (e->env) mdb_env_close(e->env);
        e->env = NULL;
        if (!(rc == EACCES && readonly && !(flags & MDB_NOLOCK))) return rc;
        flags |= MDB_NOLOCK;
    }
}

/* Opens the environment of db's directory (db->e is new and empty): the file checked, LMDB
 * opened, stale reader slots freed, meta read (and written for a new database), tables opened.
 * *err: the errno of a failure that a read-only open might not meet. *checked: 1 when the file
 * exists and passed at_dbfile_check, set here and taken as given (not checked again) by the
 * read-only open that follows a failed read-write one. */
static at_status open_env(at_db *db, int readonly, int *checked, int *err)
{
    shared_env *e = db->e;
    int exists = *checked;
    if (!exists) AT_TRY(at_dbfile_check(e->file, &exists));
    *checked = exists;
    if (readonly && !exists)
        return at_fail(AT_ERR_DB, "no database at %s (data.mdb is empty)", db->path);
    if (!readonly && !exists) AT_TRY(check_free_space(db->path, err));
    /* A layer's folder is never written: its lock file is used only when it is there and
     * writable, and never created. */
    at_status s = readonly == AT_DB_LAYER ? (layer_lock_usable(db->path) ? AT_OK : AT_ERR_DB)
                                          : prepare_lock_file(db->path, err);
    if (s != AT_OK && !readonly) return s;
    int rc = env_open(e, db->path, readonly, exists, s != AT_OK);
    if (rc != MDB_SUCCESS) {
        if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == EINVAL)
            return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s)", e->file,
                           mdb_strerror(rc));
        *err = rc;
        return at_fail(AT_ERR_DB, "cannot open database %s: %s", db->path, mdb_strerror(rc));
    }
    int dead = 0;
    mdb_reader_check(e->env, &dead); /* slots of processes killed while reading */
    meta_state state = META_OK;
    AT_TRY(check_meta(db, &state));
    if (state == META_EMPTY) {
        if (readonly)
            return at_fail(AT_ERR_DB, "no database at %s (the environment is empty)", db->path);
        AT_TRY(write_txn(db, init_body, NULL));
        AT_TRY(check_meta(db, &state));
    }
    AT_TRY(open_tables(db));
    e->ready = 1;

    /* Existing files keep their recorded map size; never start below the initial size. */
    MDB_envinfo info;
    if (!readonly && mdb_env_info(e->env, &info) == MDB_SUCCESS &&
        info.me_mapsize < AT_DB_INITIAL_MAP) {
        if ((rc = mdb_env_set_mapsize(e->env, AT_DB_INITIAL_MAP)) != MDB_SUCCESS)
            return mdb_fail(db, "setting the map size", rc);
    }
    return AT_OK;
}

static void env_free(shared_env *e)
{
    if (!e) return;
    if (e->env) mdb_env_close(e->env);
    if (e->remove_dir) {
        char *f = at_asprintf("%s/data.mdb", e->remove_dir);
        char *l = at_asprintf("%s/lock.mdb", e->remove_dir);
        if (f) unlink(f);
        if (l) unlink(l);
        rmdir(e->remove_dir);
        free(f);
        free(l);
        free(e->remove_dir);
    }
    pthread_mutex_destroy(&e->lock);
    free(e->file);
    free(e);
}

void at_db_set_temporary(at_db *db)
{
    if (!db || enter(db) != AT_OK) return;
    if (!db->e->remove_dir) db->e->remove_dir = at_strdup(db->path);
    leave(db);
}

/* A fork() while another thread holds the registry leaves the child a usable one. */
static void envs_lock(void) { pthread_mutex_lock(&g_envs_lock); }
static void envs_unlock(void) { pthread_mutex_unlock(&g_envs_lock); }
static void atfork_init(void) { pthread_atfork(envs_lock, envs_unlock, envs_unlock); }

/* A new handle on path: the process's environment of that directory, or a new one (*checked as
 * for open_env). */
static at_status open_handle(const char *path, int readonly, int *checked, int *err, at_db **out)
{
    at_db *db = calloc(1, sizeof *db);
    if (!db || !(db->path = at_strdup(path))) {
        free(db);
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    db->readonly = readonly;
    char *file = at_asprintf("%s/data.mdb", path);
    struct stat st;
    at_status s = file ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s == AT_OK && readonly) {
        int e = 0;
        if (stat(path, &st) != 0)
            e = errno;
        else if (!S_ISDIR(st.st_mode))
            e = ENOTDIR;
        else if (stat(file, &st) != 0)
            e = errno;
        if (e) s = at_fail(AT_ERR_DB, "no database at %s (%s)", path, strerror(e));
    } else if (s == AT_OK) {
        s = mkdir_p(path, err);
    }
    if (s == AT_OK && stat(path, &st) != 0)
        s = at_fail(AT_ERR_DB, "cannot use database directory %s: %s", path, strerror(errno));
    if (s != AT_OK) {
        free(file);
        at_db_close(db);
        return s;
    }

    pthread_once(&g_atfork_once, atfork_init);
    envs_lock();
    shared_env *e = g_envs;
    while (e && !(e->dev == st.st_dev && e->ino == st.st_ino && e->pid == getpid())) e = e->next;
    if (e && e->readonly && !readonly) {
        *err = -1;
        s = at_fail(AT_ERR_DB,
                    "database %s is open read-only in this process (LMDB opens a file once per "
                    "process): close it before opening it read-write",
                    path);
    } else if (e) {
        e->refs++;
        db->e = e;
    } else if (!(e = calloc(1, sizeof *e))) {
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    } else {
        *e = (shared_env){.dev = st.st_dev,
                          .ino = st.st_ino,
                          .pid = getpid(),
                          .readonly = readonly,
                          .refs = 1,
                          .file = file};
        file = NULL;
        pthread_mutex_init(&e->lock, NULL);
        db->e = e;
        s = open_env(db, readonly, checked, err);
        if (s == AT_OK) {
            e->next = g_envs;
            g_envs = e;
        } else {
            db->e = NULL;
            env_free(e);
        }
    }
    envs_unlock();
    free(file);
    if (s != AT_OK) {
        at_db_close(db);
        return s;
    }
    *out = db;
    return AT_OK;
}

at_status at_db_open(const char *path, int mode, at_db **out)
{
    if (!out) return at_fail(AT_ERR_INVALID_ARG, "at_db_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return at_fail(AT_ERR_INVALID_ARG, "database path is empty");
    if (mode != AT_DB_READWRITE && mode != AT_DB_READONLY && mode != AT_DB_WRITABLE_OR_READONLY &&
        mode != AT_DB_LAYER)
        return at_fail(AT_ERR_INVALID_ARG, "at_db_open: unknown mode %d", mode);
    int err = 0, checked = 0;
    if (mode == AT_DB_LAYER) return open_handle(path, AT_DB_LAYER, &checked, &err, out);
    at_status s = open_handle(path, mode == AT_DB_READONLY, &checked, &err, out);
    if (s == AT_OK || mode != AT_DB_WRITABLE_OR_READONLY || s != AT_ERR_DB ||
        (err != EACCES && err != EPERM && err != EROFS && err != ENOSPC && err != -1))
        return s;
    /* Not writable here: read-only, saying why; when that fails too, the first error stands
     * unless the second says more (a damaged or newer file). */
    char why[1024];
    snprintf(why, sizeof why, "%s", at_errmsg());
    int rw_err = err;
    at_status r = open_handle(path, 1, &checked, &err, out);
    if (r != AT_OK) return r == AT_ERR_DB ? at_fail(s, "%s", why) : r;
    (*out)->ro_reason = rw_err == -1
                            ? at_strdup("it is open read-only elsewhere in this process")
                            : at_asprintf("cannot write to %s: %s", path, strerror(rw_err));
    if (!(*out)->ro_reason) {
        at_db_close(*out);
        *out = NULL;
        return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    }
    return AT_OK;
}

void at_db_close(at_db *db)
{
    if (!db) return;
    shared_env *e = db->e;
    if (e) {
        envs_lock();
        if (--e->refs == 0) {
            shared_env **p = &g_envs;
            while (*p && *p != e) p = &(*p)->next;
            if (*p) *p = e->next;
            env_free(e);
        }
        envs_unlock();
    }
    free(db->path);
    free(db->ro_reason);
    at_sb_free(&db->note);
    free(db);
}

const char *at_db_path(const at_db *db) { return db ? db->path : NULL; }

const char *at_db_readonly_reason(const at_db *db)
{
    if (!db) return NULL;
    if (db->ro_reason) return db->ro_reason;
    return db->readonly ? "opened read-only" : NULL;
}

char *at_db_default_path(void)
{
    const char *v = getenv("AUTOTUNE_DB");
    if (v && *v) return at_strdup(v);
    return at_cache_dir();
}

char *at_cache_dir(void)
{
    const char *v = getenv("XDG_CACHE_HOME");
    if (v && v[0] == '/') return at_asprintf("%s/autotune", v);
    v = getenv("HOME");
    if (!v || !*v) {
        struct passwd *pw = getpwuid(getuid());
        v = pw ? pw->pw_dir : NULL;
    }
    if (v && *v) return at_asprintf("%s/.cache/autotune", v);
    return NULL;
}

at_status at_db_read(const char *path, at_status (*fn)(at_db *db, void *arg), void *arg, char *why,
                     size_t whylen)
{
    at_db *db = NULL;
    char *def = path ? NULL : at_db_default_path();
    at_status s = path || def ? at_db_open(path ? path : def, AT_DB_READONLY, &db)
                              : at_fail(AT_ERR_DB, "no database path: HOME is not set");
    if (s == AT_OK) s = fn(db, arg);
    if (s != AT_OK && why) snprintf(why, whylen, "%s", at_errmsg());
    if (s == AT_OK && why && whylen) why[0] = '\0';
    if (s == AT_OK && why) at_db_skipped(db, why, whylen);
    at_db_close(db);
    free(def);
    return s;
}

/* ---- records skipped as damaged --------------------------------------------------------- */

#define AT_DB_NOTE_MAX 3 /* records named in a note; the rest are counted */

/* Control bytes as '?': damaged text is shown, never sent to a terminal as it is. */
static void printable(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) p[i] = '?';
}

/* Counts a record a reader skipped; under the environment's lock. */
static void note_skip(at_db *db, const char *table, const char *key, const char *why)
{
    size_t from = db->note.n;
    if (db->skipped++ < AT_DB_NOTE_MAX) {
        at_sb_printf(&db->note, "%s%s '%.200s': %.300s", from ? "; " : "", table, key, why);
        if (!db->note.oom) printable(db->note.p + from, db->note.n - from);
    }
}

void at_db_skip(at_db *db, const char *table, const char *key, const char *why)
{
    if (!db || !table || !key || !why || enter(db) != AT_OK) return;
    note_skip(db, table, key, why);
    leave(db);
}

size_t at_db_skipped(at_db *db, char *note, size_t len)
{
    if (!db || enter(db) != AT_OK) return 0;
    size_t n = db->skipped;
    if (note && len && n)
        snprintf(note, len, "%s: skipped %zu damaged record%s (%s%s)", db->path, n,
                 n == 1 ? "" : "s", at_sb_str(&db->note), n > AT_DB_NOTE_MAX ? "; ..." : "");
    else if (note && len)
        note[0] = '\0';
    db->skipped = 0;
    at_sb_clear(&db->note);
    leave(db);
    return n;
}
/* ---- records ---------------------------------------------------------------------------- */

/* A record type of a table: its text form (cache/record.h) behind untyped pointers. */
typedef struct rec_kind {
    int table;
    const char *what;
    void (*append)(at_sbuf *b, const void *rec);
    at_status (*parse)(const char *text, size_t len, void *out);
} rec_kind;

static void result_append(at_sbuf *b, const void *r) { at_result_rec_append(b, r); }
static void best_append(at_sbuf *b, const void *r) { at_best_rec_append(b, r); }
static at_status result_parse(const char *t, size_t n, void *r)
{
    return at_result_rec_parse(t, n, r);
}
static at_status best_parse(const char *t, size_t n, void *r) { return at_best_rec_parse(t, n, r); }
static void device_append(at_sbuf *b, const void *r) { at_device_rec_append(b, r); }
static at_status device_parse(const char *t, size_t n, void *r)
{
    return at_device_rec_parse(t, n, r);
}

static const rec_kind k_result_kind = {T_RESULTS, "result", result_append, result_parse};
static const rec_kind k_best_kind = {T_BEST, "best", best_append, best_parse};
static const rec_kind k_device_kind = {T_DEVICES, "device", device_append, device_parse};
static const rec_kind k_check_kind = {T_CHECKS, "check", result_append, result_parse};
/* The kind of each table's records; NULL for meta and binaries. */
static const rec_kind *const k_kinds[T_COUNT] = {[T_RESULTS] = &k_result_kind,
                                                 [T_BEST] = &k_best_kind,
                                                 [T_DEVICES] = &k_device_kind,
                                                 [T_CHECKS] = &k_check_kind};

/* Room for a parsed record of any kind. */
typedef union any_rec {
    at_result_rec r;
    at_best_rec b;
    at_device_rec d;
} any_rec;

/* Prefixes the record parser's message with the database and the key. */
static at_status record_fail(at_status s, const at_db *db, const rec_kind *k, const char *key,
                             const char *how)
{
    char why[512];
    snprintf(why, sizeof why, "%s", at_errmsg());
    return at_fail(s, "database %s: %s '%s' %s: %s", db->path, k->what, key, how, why);
}

/* Appends rec's text to b and parses it back: a record a reader would call damaged (a status
 * out of range, a hash that is not one token) is refused before anything is written. */
static at_status append_record(const at_db *db, const rec_kind *k, at_sbuf *b, const char *key,
                               const void *rec)
{
    size_t from = b->n;
    k->append(b, rec);
    if (b->oom) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    any_rec back;
    at_status s = k->parse(b->p + from, b->n - from, &back);
    return s == AT_OK ? AT_OK : record_fail(AT_ERR_INVALID_ARG, db, k, key, "cannot be stored");
}

/* Reads the record at key and parses it into out. */
static at_status get_record(at_db *db, const rec_kind *k, const char *key, void *out)
{
    if (!out) return at_fail(AT_ERR_INVALID_ARG, "reading %s: out is NULL", k->what);
    char *text = NULL;
    size_t len = 0;
    at_status s = get_locked(db, k->table, key, &text, &len);
    if (s != AT_OK) return s;
    s = k->parse(text, len, out);
    if (s != AT_OK) s = record_fail(s, db, k, key, "does not parse");
    free(text);
    return s;
}

/* ---- results ---------------------------------------------------------------------------- */

typedef struct results_ctx {
    int table;
    size_t n;
    char *const *keys;
    const char *text;  /* every record's text, one after another */
    const size_t *end; /* end[i]: where record i's text ends */
} results_ctx;

static at_status results_body(at_db *db, MDB_txn *txn, void *vctx, int *mdb_rc)
{
    results_ctx *c = vctx;
    for (size_t i = 0; i < c->n; i++) {
        size_t from = i ? c->end[i - 1] : 0;
        AT_TRY(put_text(db, txn, c->table, c->keys[i], c->text + from, c->end[i] - from, mdb_rc));
    }
    return AT_OK;
}

/* Writes n records of kind k (recs: an array of records of size bytes each) in one transaction. */
static at_status put_records(at_db *db, const rec_kind *k, size_t n, char *const *keys,
                             const void *recs, size_t size)
{
    if (n == 0) return AT_OK;
    if (!keys || !recs) return at_fail(AT_ERR_INVALID_ARG, "writing %s: NULL argument", k->what);
    AT_TRY(enter(db));
    at_sbuf text = {0};
    size_t *end = malloc(n * sizeof *end);
    at_status s = end ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n && s == AT_OK; i++) {
        s = check_key(db, keys[i]);
        if (s == AT_OK) s = append_record(db, k, &text, keys[i], (const char *)recs + i * size);
        end[i] = text.n;
    }
    results_ctx c = {k->table, n, keys, text.p, end};
    if (s == AT_OK) s = write_txn(db, results_body, &c);
    at_sb_free(&text);
    free(end);
    leave(db);
    return s;
}

at_status at_db_put_results(at_db *db, size_t n, char *const *keys, const at_result_rec *recs)
{
    return put_records(db, &k_result_kind, n, keys, recs, sizeof *recs);
}

at_status at_db_get_result(at_db *db, const char *key, at_result_rec *out)
{
    return get_record(db, &k_result_kind, key, out);
}

/* ---- a batch of records as text ------------------------------------------------------- */

typedef struct texts_ctx {
    size_t n;
    const at_db_text *w;
    const int *table; /* each entry's table */
    at_db_decide_fn decide;
    void *user;
    size_t written;
} texts_ctx;

static at_status texts_body(at_db *db, MDB_txn *txn, void *vctx, int *mdb_rc)
{
    texts_ctx *c = vctx;
    c->written = 0; /* the body runs again after the map grew */
    for (size_t i = 0; i < c->n; i++) {
        const at_db_text *w = &c->w[i];
        MDB_val k = {strlen(w->key), (void *)w->key}, v;
        int rc = mdb_get(txn, db->e->dbi[c->table[i]], &k, &v);
        if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) {
            *mdb_rc = rc;
            return mdb_fail(db, "reading", rc);
        }
        int put = 1;
        if (c->decide) {
            put = c->decide(c->user, i, rc == MDB_SUCCESS ? v.mv_data : NULL,
                            rc == MDB_SUCCESS ? v.mv_size : 0);
            if (put < 0) return (at_status)put;
        }
        if (!put) continue;
        AT_TRY(put_text(db, txn, c->table[i], w->key, w->text, strlen(w->text), mdb_rc));
        c->written++;
    }
    return AT_OK;
}

at_status at_db_put_texts(at_db *db, size_t n, const at_db_text *w, at_db_decide_fn decide,
                          void *user, size_t *written)
{
    if (written) *written = 0;
    if (n == 0) return AT_OK;
    if (!w) return at_fail(AT_ERR_INVALID_ARG, "at_db_put_texts: NULL argument");
    int *table = malloc(n * sizeof *table);
    if (!table) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    AT_TRY(enter(db));
    at_status s = AT_OK;
    for (size_t i = 0; i < n && s == AT_OK; i++) {
        table[i] = -1;
        for (int t = 0; t < T_COUNT; t++)
            if (k_kinds[t] && w[i].table && strcmp(w[i].table, k_tables[t]) == 0) table[i] = t;
        if (table[i] < 0) {
            s = at_fail(AT_ERR_INVALID_ARG, "database %s: no records of table '%s' can be written",
                        db->path, w[i].table ? w[i].table : "(null)");
            break;
        }
        s = check_key(db, w[i].key);
        any_rec back;
        const rec_kind *k = k_kinds[table[i]];
        if (s == AT_OK && (!w[i].text || k->parse(w[i].text, strlen(w[i].text), &back) != AT_OK))
            s = record_fail(AT_ERR_INVALID_ARG, db, k, w[i].key, "cannot be stored");
    }
    texts_ctx c = {n, w, table, decide, user, 0};
    if (s == AT_OK) s = write_txn(db, texts_body, &c);
    leave(db);
    free(table);
    if (s == AT_OK && written) *written = c.written;
    return s;
}

/* ---- devices and checks (schema 2.1) ----------------------------------------------------- */

at_status at_db_put_device(at_db *db, const char *device_key, const at_device_rec *r)
{
    char *const keys[1] = {(char *)device_key};
    return put_records(db, &k_device_kind, 1, keys, r, sizeof *r);
}

at_status at_db_get_device(at_db *db, const char *device_key, at_device_rec *out)
{
    return get_record(db, &k_device_kind, device_key, out);
}

at_status at_db_put_check(at_db *db, const char *result_key, const at_result_rec *r)
{
    char *const keys[1] = {(char *)result_key};
    return put_records(db, &k_check_kind, 1, keys, r, sizeof *r);
}

at_status at_db_get_check(at_db *db, const char *result_key, at_result_rec *out)
{
    return get_record(db, &k_check_kind, result_key, out);
}

/* ---- best ------------------------------------------------------------------------------- */

typedef struct best_ctx {
    const char *key;
    const at_best_rec *rec;
    int force;
    at_sbuf text;
} best_ctx;

static at_status best_body(at_db *db, MDB_txn *txn, void *vctx, int *mdb_rc)
{
    best_ctx *c = vctx;
    MDB_val k = {strlen(c->key), (void *)c->key}, v;
    int rc = mdb_get(txn, db->e->dbi[T_BEST], &k, &v);
    if (rc == MDB_SUCCESS && !c->force) {
        at_best_rec old;
        at_status s = at_best_rec_parse(v.mv_data, v.mv_size, &old);
        if (s != AT_OK)
            return record_fail(s, db, &k_best_kind, c->key,
                               "does not parse (use force to replace it)");
        if (strcmp(old.template_hash, c->rec->template_hash) == 0 && old.time_us < c->rec->time_us)
            return AT_OK; /* keep the faster stored entry */
    } else if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) {
        *mdb_rc = rc;
        return mdb_fail(db, "reading best", rc);
    }
    return put_text(db, txn, T_BEST, c->key, c->text.p, c->text.n, mdb_rc);
}

at_status at_db_put_best(at_db *db, const char *key, const at_best_rec *rec, int force)
{
    if (!rec) return at_fail(AT_ERR_INVALID_ARG, "at_db_put_best: rec is NULL");
    AT_TRY(enter(db));
    at_status s = check_key(db, key);
    best_ctx c = {key, rec, force, {0}};
    if (s == AT_OK) s = append_record(db, &k_best_kind, &c.text, key, rec);
    if (s == AT_OK) s = write_txn(db, best_body, &c);
    at_sb_free(&c.text);
    leave(db);
    return s;
}

at_status at_db_get_best(at_db *db, const char *key, at_best_rec *out)
{
    return get_record(db, &k_best_kind, key, out);
}

/* ---- binaries --------------------------------------------------------------------------- */

/* A stored binary is a 24-byte header and the code: "\x89ATB", the format (u32, 2), the code's
 * length (u64) and CRC-32 (u32), 4 zero bytes; little-endian. Format 1 is autotune 0.1's bare
 * code: it cannot be checked, so it is never handed out (the kernel is compiled again). */
#define BIN_MAGIC                                                                                  \
    "\x89"                                                                                         \
    "ATB"
#define BIN_FORMAT 2
#define BIN_HEADER 24

typedef enum { BIN_OK, BIN_ABSENT, BIN_DAMAGED } bin_state;

static void le_put(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t le_get(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n; i--;) v = v << 8 | p[i];
    return v;
}

static void bin_header(unsigned char h[BIN_HEADER], const void *code, size_t len)
{
    memset(h, 0, BIN_HEADER);
    memcpy(h, BIN_MAGIC, 4);
    le_put(h + 4, BIN_FORMAT, 4);
    le_put(h + 8, len, 8);
    le_put(h + 16, crc32_z(0, code, len), 4);
}

/* What a stored value of n bytes is: BIN_OK with the code's length in *len, else why not. */
static bin_state bin_parse(const unsigned char *v, size_t n, size_t *len, char *why, size_t whylen)
{
    if (n < 4 || memcmp(v, BIN_MAGIC, 4) != 0) {
        snprintf(why, whylen, "no header (autotune 0.1): compiled again");
        return BIN_ABSENT;
    }
    if (n < BIN_HEADER) {
        snprintf(why, whylen, "truncated header (%zu bytes)", n);
        return BIN_DAMAGED;
    }
    uint64_t format = le_get(v + 4, 4), want = le_get(v + 8, 8);
    if (format > BIN_FORMAT) {
        snprintf(why, whylen, "format %llu, newer than this autotune's %d: compiled again",
                 (unsigned long long)format, BIN_FORMAT);
        return BIN_ABSENT;
    }
    if (format != BIN_FORMAT) {
        snprintf(why, whylen, "unknown format %llu", (unsigned long long)format);
        return BIN_DAMAGED;
    }
    if (want != n - BIN_HEADER) {
        snprintf(why, whylen, "truncated: %zu bytes of code stored, the header says %llu",
                 n - BIN_HEADER, (unsigned long long)want);
        return BIN_DAMAGED;
    }
    if (le_get(v + 16, 4) != crc32_z(0, v + BIN_HEADER, want)) {
        snprintf(why, whylen, "checksum mismatch");
        return BIN_DAMAGED;
    }
    *len = want;
    return BIN_OK;
}

typedef struct bin_ctx {
    const char *hash;
    const void *bin;
    size_t len;
    unsigned char head[BIN_HEADER];
} bin_ctx;

static at_status bin_body(at_db *db, MDB_txn *txn, void *vctx, int *mdb_rc)
{
    bin_ctx *c = vctx;
    MDB_val v = {BIN_HEADER + c->len, NULL};
    AT_TRY(put_one(db, txn, T_BINARIES, c->hash, &v, MDB_RESERVE, mdb_rc));
    memcpy(v.mv_data, c->head, BIN_HEADER);
    memcpy((unsigned char *)v.mv_data + BIN_HEADER, c->bin, c->len);
    return AT_OK;
}

at_status at_db_put_binary(at_db *db, const char *hash, const void *bin, size_t len)
{
    if (!bin && len) return at_fail(AT_ERR_INVALID_ARG, "at_db_put_binary: bin is NULL");
    bin_ctx c = {hash, bin ? bin : "", len, {0}};
    bin_header(c.head, c.bin, len);
    AT_TRY(enter(db));
    at_status s = check_key(db, hash);
    if (s == AT_OK) s = write_txn(db, bin_body, &c);
    leave(db);
    return s;
}

at_status at_db_get_binary(at_db *db, const char *hash, void **bin, size_t *len)
{
    if (!bin || !len) return at_fail(AT_ERR_INVALID_ARG, "at_db_get_binary: NULL argument");
    char *data = NULL, why[160];
    size_t n = 0, code = 0;
    AT_TRY(get_locked(db, T_BINARIES, hash, &data, &n));
    bin_state st = bin_parse((const unsigned char *)data, n, &code, why, sizeof why);
    if (st != BIN_OK) {
        free(data);
        return at_fail(st == BIN_ABSENT ? AT_ERR_NOT_FOUND : AT_ERR_DB_CORRUPT,
                       "database %s: binary '%s' %s: %s", db->path, hash,
                       st == BIN_ABSENT ? "is not used" : "is damaged", why);
    }
    memmove(data, data + BIN_HEADER, code);
    data[code] = '\0';
    *bin = data;
    *len = code;
    return AT_OK;
}

/* ---- scan ------------------------------------------------------------------------------- */

/* Replaces b's text with v as one line (control bytes become '?'); -1 when out of memory. */
static int line_copy(at_sbuf *b, const void *v, size_t n)
{
    at_sb_clear(b);
    at_sb_put(b, v, n);
    if (b->oom) return -1;
    printable(b->p, b->n);
    return 0;
}

/* 1 when a key holds a control byte: a reader could not look it up by its text. */
static int key_unusable(const MDB_val *k)
{
    for (size_t i = 0; i < k->mv_size; i++) {
        unsigned char c = ((const unsigned char *)k->mv_data)[i];
        if (c < 0x20 || c == 0x7f) return 1;
    }
    return 0;
}

/* The text a scan shows for a value of table t: the record as stored, or for a binary its size;
 * a results or best record is parsed into *rec. 1 (with why) for a record a reader cannot use: it
 * is skipped. */
static int scan_value(int t, const MDB_val *v, any_rec *rec, char *text, size_t len,
                      const void **out, size_t *n, char *why, size_t whylen)
{
    *out = v->mv_data;
    *n = v->mv_size;
    if (k_kinds[t]) {
        at_status s = k_kinds[t]->parse(v->mv_data, v->mv_size, rec);
        if (s != AT_OK) snprintf(why, whylen, "%s", at_errmsg());
        return s != AT_OK;
    }
    if (t != T_BINARIES) return 0;
    size_t code = 0;
    char w[160];
    bin_state st = bin_parse(v->mv_data, v->mv_size, &code, w, sizeof w);
    if (st == BIN_DAMAGED) snprintf(why, whylen, "binary is damaged: %s", w);
    if (st == BIN_OK) snprintf(text, len, "%zu bytes", code);
    if (st == BIN_ABSENT) snprintf(text, len, "%zu bytes, %s", v->mv_size, w);
    *out = text;
    *n = strlen(text);
    return st == BIN_DAMAGED;
}

/* What a scan hands its visitor for each entry it keeps: the key and the value as at_db_scan
 * shows them, and for results and best the parsed record (NULL for meta and binaries). */
typedef int (*scan_fn)(void *user, const char *key, const char *value, const any_rec *rec);

/* at_db_scan of table t, its arguments checked. */
static at_status scan(at_db *db, int t, const char *prefix, scan_fn fn, void *user)
{
    AT_TRY(enter(db));
    size_t plen = prefix ? strlen(prefix) : 0;
    if (plen > (size_t)mdb_env_get_maxkeysize(db->e->env) || !(db->e->tables_open & (1u << t))) {
        leave(db);
        return AT_OK; /* no key can start with it, or a table the file does not have yet */
    }
    MDB_txn *txn = NULL;
    at_status s = txn_begin(db, MDB_RDONLY, &txn);
    if (s != AT_OK) {
        leave(db);
        return s;
    }
    MDB_cursor *cur = NULL;
    int rc = mdb_cursor_open(txn, db->e->dbi[t], &cur);
    if (rc != MDB_SUCCESS) {
        mdb_txn_abort(txn);
        leave(db);
        return mdb_fail(db, "opening a cursor", rc);
    }
    MDB_val k = {plen, (void *)prefix}, v;
    rc = plen ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    at_sbuf kbuf = {0}, vbuf = {0};
    any_rec rec;
    while (rc == MDB_SUCCESS) {
        if (plen && (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0)) break;
        char text[256], why[512];
        const void *vp = v.mv_data;
        size_t vn = v.mv_size;
        int skip = key_unusable(&k);
        if (skip)
            snprintf(why, sizeof why, "the key holds control bytes");
        else
            skip = scan_value(t, &v, &rec, text, sizeof text, &vp, &vn, why, sizeof why);
        if (line_copy(&kbuf, k.mv_data, k.mv_size) || line_copy(&vbuf, vp, vn)) {
            s = at_fail(AT_ERR_NO_MEMORY, "out of memory scanning %s", db->path);
            break;
        }
        if (skip) {
            note_skip(db, k_tables[t], at_sb_str(&kbuf), why);
        } else {
            t_scanning = db->e;
            int stop = fn(user, at_sb_str(&kbuf), at_sb_str(&vbuf), k_kinds[t] ? &rec : NULL);
            t_scanning = NULL;
            if (stop) break;
        }
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    if (s == AT_OK && rc != MDB_SUCCESS && rc != MDB_NOTFOUND) s = mdb_fail(db, "scanning", rc);
    at_sb_free(&kbuf);
    at_sb_free(&vbuf);
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    leave(db);
    return s;
}

typedef struct visit_ctx {
    at_db_visit_fn fn;
    void *user;
} visit_ctx;

static int visit(void *user, const char *key, const char *value, const any_rec *rec)
{
    (void)rec;
    const visit_ctx *c = user;
    return c->fn(c->user, key, value);
}

at_status at_db_scan(at_db *db, const char *table, const char *prefix, at_db_visit_fn fn,
                     void *user)
{
    if (!table || !fn) return at_fail(AT_ERR_INVALID_ARG, "at_db_scan: NULL argument");
    int t = -1;
    for (int i = 0; i < T_COUNT; i++)
        if (strcmp(table, k_tables[i]) == 0) t = i;
    if (t < 0)
        return at_fail(AT_ERR_INVALID_ARG,
                       "unknown database table '%s' (meta, results, best, binaries, devices, "
                       "checks)",
                       table);
    visit_ctx c = {fn, user};
    return scan(db, t, prefix, visit, &c);
}
/* ---- key lists ------------------------------------------------------------------------------ */

typedef struct key_list {
    char **keys;
    at_result_rec *recs; /* at_db_results: each key's record */
    size_t n, cap;
    int oom;
} key_list;

/* Appends key (and with rec, its record) to l; 1 when out of memory, which stops the scan. */
static int list_add(key_list *l, const char *key, const at_result_rec *rec)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **k = realloc(l->keys, cap * sizeof *k);
        if (k) l->keys = k;
        at_result_rec *r = k && rec ? realloc(l->recs, cap * sizeof *r) : NULL;
        if (r) l->recs = r;
        if (!k || (rec && !r)) {
            l->oom = 1;
            return 1;
        }
        l->cap = cap;
    }
    if (!(l->keys[l->n] = at_strdup(key))) {
        l->oom = 1;
        return 1;
    }
    if (rec) l->recs[l->n] = *rec;
    l->n++;
    return 0;
}

static int add_key(void *user, const char *key, const char *value)
{
    (void)value;
    return list_add(user, key, NULL);
}

static int add_result(void *user, const char *key, const char *value, const any_rec *rec)
{
    (void)value;
    return list_add(user, key, &rec->r);
}

/* Hands l's arrays to the caller after a scan that ended in s; none after a failure. */
static at_status list_take(key_list *l, at_status s, char ***keys, at_result_rec **recs, size_t *n)
{
    if (s == AT_OK && l->oom) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s != AT_OK) {
        at_db_keys_free(l->keys, l->n);
        free(l->recs);
        *l = (key_list){0};
    }
    *keys = l->keys;
    if (recs) *recs = l->recs;
    *n = l->n;
    return s;
}

at_status at_db_keys(at_db *db, const char *table, const char *prefix, char ***keys, size_t *n)
{
    key_list l = {0};
    at_status s = at_db_scan(db, table, prefix, add_key, &l);
    return list_take(&l, s, keys, NULL, n);
}

at_status at_db_results(at_db *db, const char *prefix, char ***keys, at_result_rec **recs,
                        size_t *n)
{
    if (!keys || !recs || !n) return at_fail(AT_ERR_INVALID_ARG, "at_db_results: NULL argument");
    key_list l = {0};
    at_status s = scan(db, T_RESULTS, prefix, add_result, &l);
    return list_take(&l, s, keys, recs, n);
}

void at_db_keys_free(char **keys, size_t n)
{
    for (size_t i = 0; keys && i < n; i++) free(keys[i]);
    free(keys);
}
