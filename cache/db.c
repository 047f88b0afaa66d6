/* db.c — the LMDB store: one environment per directory, named tables meta, results, best and
 * binaries. Values of results and best are versioned one-line text records (record.h), the
 * schema version is in meta (docs/database.md); binaries are raw bytes. Every write is one write
 * transaction; MDB_MAP_FULL grows the map and retries the whole batch. */
#define _GNU_SOURCE
#include "db.h"

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
#include <sys/types.h>
#include <unistd.h>

#define AT_DB_INITIAL_MAP ((size_t)64 << 20)
#define AT_DB_MAX_MAP     ((size_t)1 << 40)
#define AT_DB_MAX_RETRIES 64

/* LMDB's on-disk meta page (64-bit layout): page header 16 bytes, then MDB_meta. */
#define LMDB_MAGIC        0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
#define LMDB_OFF_MAGIC    16
#define LMDB_OFF_VERSION  20
#define LMDB_OFF_PSIZE    40 /* mm_dbs[FREE_DBI].md_pad holds the page size */

enum { T_META, T_RESULTS, T_BEST, T_BINARIES, T_COUNT };
static const char *const k_tables[T_COUNT] = {"meta", "results", "best", "binaries"};

struct at_db {
    MDB_env *env;
    MDB_dbi dbi[T_COUNT];
    char *path;
    char *file; /* path/data.mdb, for messages */
    int readonly;
    int ready;            /* the tables are open: write transactions check the schema first */
    pthread_mutex_t lock; /* one transaction at a time per handle */
};

/* Set while a scan callback runs on this thread, so re-entry fails instead of deadlocking. */
static _Thread_local const at_db *t_scanning;

/* ---- small helpers ---------------------------------------------------------------------- */

static at_status mdb_fail(const at_db *db, const char *op, int rc)
{
    if (rc == ENOMEM) return at_fail(AT_ERR_NO_MEMORY, "%s: %s: out of memory", db->path, op);
    return at_fail(AT_ERR_DB, "database %s: %s failed: %s", db->path, op, mdb_strerror(rc));
}

static at_status enter(at_db *db)
{
    if (!db) return at_fail(AT_ERR_INVALID_ARG, "database handle is NULL");
    if (t_scanning == db)
        return at_fail(AT_ERR_INVALID_ARG, "database %s used from inside its own scan callback",
                       db->path);
    pthread_mutex_lock(&db->lock);
    return AT_OK;
}

static void leave(at_db *db) { pthread_mutex_unlock(&db->lock); }

static at_status check_key(at_db *db, const char *key)
{
    if (!key || !*key) return at_fail(AT_ERR_INVALID_ARG, "database key is empty");
    size_t n = strlen(key);
    size_t max = (size_t)mdb_env_get_maxkeysize(db->env);
    if (n > max)
        return at_fail(AT_ERR_INVALID_ARG, "database key too long (%zu bytes > %zu): %.80s...", n,
                       max, key);
    return AT_OK;
}

/* ---- transactions ----------------------------------------------------------------------- */

/* Begins a transaction; adopts a map grown by another process (MDB_MAP_RESIZED). */
static at_status txn_begin(at_db *db, unsigned flags, MDB_txn **txn)
{
    for (int tries = 0;; tries++) {
        int rc = mdb_txn_begin(db->env, NULL, flags, txn);
        if (rc == MDB_SUCCESS) return AT_OK;
        if (rc == MDB_MAP_RESIZED && tries < AT_DB_MAX_RETRIES) {
            rc = mdb_env_set_mapsize(db->env, 0);
            if (rc == MDB_SUCCESS) continue;
            return mdb_fail(db, "adopting the grown map size", rc);
        }
        return mdb_fail(
            db, flags & MDB_RDONLY ? "begin read transaction" : "begin write transaction", rc);
    }
}

static at_status grow_map(at_db *db)
{
    MDB_envinfo info;
    int rc = mdb_env_info(db->env, &info);
    if (rc != MDB_SUCCESS) return mdb_fail(db, "reading the map size", rc);
    size_t cur = info.me_mapsize;
    if (cur >= AT_DB_MAX_MAP)
        return at_fail(AT_ERR_DB, "database %s: map full at %zu bytes (limit reached)", db->path,
                       cur);
    rc = mdb_env_set_mapsize(db->env, cur * 2);
    if (rc != MDB_SUCCESS) return mdb_fail(db, "growing the map", rc);
    return AT_OK;
}

/* The body of a write transaction. Returns AT_OK or an error; on an LMDB error it stores the
 * code in *mdb_rc (so MDB_MAP_FULL can be retried). */
typedef at_status (*write_fn)(at_db *db, MDB_txn *txn, void *ctx, int *mdb_rc);

static at_status meta_sync(at_db *db, MDB_txn *txn, int *mdb_rc);

static at_status write_txn(at_db *db, write_fn fn, void *ctx)
{
    if (db->readonly) return at_fail(AT_ERR_DB, "database %s is open read-only", db->path);
    for (int tries = 0;; tries++) {
        MDB_txn *txn = NULL;
        AT_TRY(txn_begin(db, 0, &txn));
        int mrc = MDB_SUCCESS;
        at_status s = db->ready ? meta_sync(db, txn, &mrc) : AT_OK;
        if (s == AT_OK) s = fn(db, txn, ctx, &mrc);
        if (s == AT_OK) {
            mrc = mdb_txn_commit(txn);
            if (mrc == MDB_SUCCESS) return AT_OK;
            s = mdb_fail(db, "commit", mrc);
        } else {
            mdb_txn_abort(txn);
        }
        if (mrc == MDB_MAP_FULL && tries < AT_DB_MAX_RETRIES) {
            AT_TRY(grow_map(db));
            continue;
        }
        return s;
    }
}

static at_status put_one(at_db *db, MDB_txn *txn, MDB_dbi dbi, const char *key, const void *val,
                         size_t len, int *mdb_rc, const char *what)
{
    MDB_val k = {strlen(key), (void *)key}, v = {len, (void *)val};
    int rc = mdb_put(txn, dbi, &k, &v, 0);
    if (rc != MDB_SUCCESS) {
        *mdb_rc = rc;
        if (rc == MDB_MAP_FULL) return at_fail(AT_ERR_DB, "database %s: map full", db->path);
        return at_fail(AT_ERR_DB, "database %s: writing %s '%s' failed: %s", db->path, what, key,
                       mdb_strerror(rc));
    }
    return AT_OK;
}

/* Reads key from table into a malloc'd, NUL-terminated copy. */
static at_status get_copy(at_db *db, int table, const char *key, char **out, size_t *len)
{
    MDB_txn *txn = NULL;
    AT_TRY(txn_begin(db, MDB_RDONLY, &txn));
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(txn, db->dbi[table], &k, &v);
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

/* get_copy of a checked key, under the handle's lock. */
static at_status get_locked(at_db *db, int table, const char *key, char **out, size_t *len)
{
    AT_TRY(enter(db));
    at_status s = check_key(db, key);
    if (s == AT_OK) s = get_copy(db, table, key, out, len);
    leave(db);
    return s;
}

/* ---- open / close ----------------------------------------------------------------------- */

static at_status mkdir_p(const char *path)
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
                int e = errno;
                at_status s =
                    at_fail(AT_ERR_DB, "cannot create database directory %s: %s", tmp, strerror(e));
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
        return at_fail(AT_ERR_DB, "cannot use database directory %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return at_fail(AT_ERR_DB, "cannot use database directory %s: %s", path, strerror(ENOTDIR));
    return AT_OK;
}

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Checks, without LMDB, that file looks like an LMDB data file: two meta pages with LMDB's
 * magic and data version. *exists is 0 when there is no file or it is empty (a new database). */
static at_status precheck_file(const char *file, int *exists)
{
    *exists = 0;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return AT_OK;
        return at_fail(AT_ERR_DB, "cannot read %s: %s", file, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return at_fail(AT_ERR_DB, "cannot stat %s: %s", file, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (not a regular file)",
                       file);
    }
    if (st.st_size == 0) {
        close(fd);
        return AT_OK;
    }
    *exists = 1;
    unsigned char hdr[64];
    ssize_t got = pread(fd, hdr, sizeof hdr, 0);
    const char *why = NULL;
    char whybuf[128];
    uint32_t psize = 0;
    if (got < (ssize_t)sizeof hdr) {
        why = "truncated: shorter than an LMDB meta page";
    } else if (rd32(hdr + LMDB_OFF_MAGIC) != LMDB_MAGIC) {
        why = "no LMDB magic";
    } else if (rd32(hdr + LMDB_OFF_VERSION) != LMDB_DATA_VERSION) {
        snprintf(whybuf, sizeof whybuf, "unsupported LMDB data version %u",
                 rd32(hdr + LMDB_OFF_VERSION));
        why = whybuf;
    } else {
        psize = rd32(hdr + LMDB_OFF_PSIZE);
        if (psize < 512 || psize > 65536 || (psize & (psize - 1)) != 0) {
            snprintf(whybuf, sizeof whybuf, "bad page size %u", psize);
            why = whybuf;
        } else if ((uint64_t)st.st_size < 2ull * psize) {
            snprintf(whybuf, sizeof whybuf, "truncated: %lld bytes, less than two %u-byte pages",
                     (long long)st.st_size, psize);
            why = whybuf;
        } else {
            got = pread(fd, hdr, sizeof hdr, psize);
            if (got < (ssize_t)sizeof hdr || rd32(hdr + LMDB_OFF_MAGIC) != LMDB_MAGIC ||
                rd32(hdr + LMDB_OFF_VERSION) != LMDB_DATA_VERSION)
                why = "second meta page damaged";
        }
    }
    close(fd);
    if (why) return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s)", file, why);
    return AT_OK;
}

/* ---- meta: the schema ------------------------------------------------------------------- */

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
        return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s: %s)", db->file, key,
                       mdb_strerror(rc));
    char buf[32];
    if (v.mv_size == 0 || v.mv_size >= sizeof buf)
        return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (bad %s value)", db->file,
                       key);
    memcpy(buf, v.mv_data, v.mv_size);
    buf[v.mv_size] = '\0';
    if (at_parse_i64(buf, lo, INT64_MAX, out) != 0)
        return at_fail(AT_ERR_DB_CORRUPT,
                       "%s is not an autotune database (%s '%s' is not a number)", db->file, key,
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
                       db->file, (long long)*major, AT_DB_SCHEMA);
    return meta_int(db, txn, meta, "schema_minor", 0, 0, minor);
}

/* Writes this release's schema into meta: for a new file, or upgrading an older one. */
static at_status put_schema(at_db *db, MDB_txn *txn, MDB_dbi meta, int *mdb_rc)
{
    char major[24], minor[24];
    snprintf(major, sizeof major, "%d", AT_DB_SCHEMA);
    snprintf(minor, sizeof minor, "%d", AT_DB_SCHEMA_MINOR);
    AT_TRY(put_one(db, txn, meta, "schema", major, strlen(major), mdb_rc, "meta"));
    return put_one(db, txn, meta, "schema_minor", minor, strlen(minor), mdb_rc, "meta");
}

/* First in every write transaction: refuses a file another process has moved to a newer major
 * since we opened it, and upgrades an older schema or minor. Only meta changes: records of
 * every version are read, and each record written is the current version. */
static at_status meta_sync(at_db *db, MDB_txn *txn, int *mdb_rc)
{
    int64_t major, minor;
    AT_TRY(read_schema(db, txn, db->dbi[T_META], &major, &minor));
    if (major == AT_DB_SCHEMA && minor >= AT_DB_SCHEMA_MINOR) return AT_OK;
    return put_schema(db, txn, db->dbi[T_META], mdb_rc);
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
            s = at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s)", db->file,
                        mdb_strerror(rc));
        else if (ms.ms_entries == 0)
            *state = META_EMPTY;
        else
            s = at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (no meta table)",
                        db->file);
    } else if (rc != MDB_SUCCESS) {
        s = at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (meta table: %s)", db->file,
                    mdb_strerror(rc));
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
    MDB_dbi meta;
    int rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &meta);
    if (rc != MDB_SUCCESS) {
        *mdb_rc = rc;
        return mdb_fail(db, "creating table meta", rc);
    }
    MDB_val k = {6, "schema"}, v;
    rc = mdb_get(txn, meta, &k, &v);
    if (rc == MDB_SUCCESS) return AT_OK; /* initialised concurrently; checked again below */
    if (rc != MDB_NOTFOUND) {
        *mdb_rc = rc;
        return mdb_fail(db, "reading meta", rc);
    }
    for (int t = T_RESULTS; t < T_COUNT; t++) {
        MDB_dbi d;
        rc = mdb_dbi_open(txn, k_tables[t], MDB_CREATE, &d);
        if (rc != MDB_SUCCESS) {
            *mdb_rc = rc;
            return mdb_fail(db, "creating a table", rc);
        }
    }
    const char *by = "autotune " AT_VERSION_STRING;
    AT_TRY(put_schema(db, txn, meta, mdb_rc));
    return put_one(db, txn, meta, "created_by", by, strlen(by), mdb_rc, "meta");
}

/* Opens the four table handles (they exist once meta is valid). */
static at_status open_tables(at_db *db)
{
    MDB_txn *txn = NULL;
    AT_TRY(txn_begin(db, MDB_RDONLY, &txn));
    for (int t = 0; t < T_COUNT; t++) {
        int rc = mdb_dbi_open(txn, k_tables[t], 0, &db->dbi[t]);
        if (rc != MDB_SUCCESS) {
            mdb_txn_abort(txn);
            return at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (table %s: %s)",
                           db->file, k_tables[t], mdb_strerror(rc));
        }
    }
    int rc = mdb_txn_commit(txn); /* keeps the handles */
    if (rc != MDB_SUCCESS) return mdb_fail(db, "opening tables", rc);
    return AT_OK;
}

at_status at_db_open(const char *path, int readonly, at_db **out)
{
    if (!out) return at_fail(AT_ERR_INVALID_ARG, "at_db_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return at_fail(AT_ERR_INVALID_ARG, "database path is empty");

    char *file = at_asprintf("%s/data.mdb", path);
    if (!file) return at_fail(AT_ERR_NO_MEMORY, "out of memory");
    at_status s = AT_OK;
    at_db *db = NULL;
    int exists = 0;

    if (readonly) {
        struct stat st;
        int e = 0;
        if (stat(path, &st) != 0)
            e = errno;
        else if (!S_ISDIR(st.st_mode))
            e = ENOTDIR;
        else if (stat(file, &st) != 0)
            e = errno;
        if (e) {
            s = at_fail(AT_ERR_DB, "no database at %s (%s)", path, strerror(e));
            goto fail;
        }
    } else if ((s = mkdir_p(path)) != AT_OK) {
        goto fail;
    }
    if ((s = precheck_file(file, &exists)) != AT_OK) goto fail;
    if (readonly && !exists) {
        s = at_fail(AT_ERR_DB, "no database at %s (data.mdb is empty)", path);
        goto fail;
    }

    db = calloc(1, sizeof *db);
    if (!db || !(db->path = at_strdup(path))) {
        s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    db->file = file;
    file = NULL;
    db->readonly = readonly;
    pthread_mutex_init(&db->lock, NULL);
    int rc = mdb_env_create(&db->env);
    if (rc != MDB_SUCCESS) {
        s = mdb_fail(db, "creating the environment", rc);
        goto fail;
    }
    if ((rc = mdb_env_set_maxdbs(db->env, T_COUNT + 4)) != MDB_SUCCESS) {
        s = mdb_fail(db, "setting maxdbs", rc);
        goto fail;
    }
    if (!exists && (rc = mdb_env_set_mapsize(db->env, AT_DB_INITIAL_MAP)) != MDB_SUCCESS) {
        s = mdb_fail(db, "setting the map size", rc);
        goto fail;
    }
    rc = mdb_env_open(db->env, path, readonly ? MDB_RDONLY : 0, 0666);
    if (rc != MDB_SUCCESS) {
        if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == EINVAL)
            s = at_fail(AT_ERR_DB_CORRUPT, "%s is not an autotune database (%s)", db->file,
                        mdb_strerror(rc));
        else
            s = at_fail(AT_ERR_DB, "cannot open database %s: %s", path, mdb_strerror(rc));
        goto fail;
    }

    meta_state state = META_OK;
    if ((s = check_meta(db, &state)) != AT_OK) goto fail;
    if (state == META_EMPTY) {
        if (readonly) {
            s = at_fail(AT_ERR_DB, "no database at %s (the environment is empty)", path);
            goto fail;
        }
        if ((s = write_txn(db, init_body, NULL)) != AT_OK) goto fail;
        if ((s = check_meta(db, &state)) != AT_OK) goto fail;
    }
    if ((s = open_tables(db)) != AT_OK) goto fail;
    db->ready = 1;

    /* Existing files keep their recorded map size; never start below the initial size. */
    MDB_envinfo info;
    if (!readonly && mdb_env_info(db->env, &info) == MDB_SUCCESS &&
        info.me_mapsize < AT_DB_INITIAL_MAP) {
        if ((rc = mdb_env_set_mapsize(db->env, AT_DB_INITIAL_MAP)) != MDB_SUCCESS) {
            s = mdb_fail(db, "setting the map size", rc);
            goto fail;
        }
    }
    free(file);
    *out = db;
    return AT_OK;

fail:
    free(file);
    at_db_close(db);
    return s;
}

void at_db_close(at_db *db)
{
    if (!db) return;
    if (db->env) mdb_env_close(db->env);
    if (db->path) pthread_mutex_destroy(&db->lock);
    free(db->path);
    free(db->file);
    free(db);
}

const char *at_db_path(const at_db *db) { return db ? db->path : NULL; }

char *at_db_default_path(void)
{
    const char *v = getenv("AUTOTUNE_DB");
    if (v && *v) return at_strdup(v);
    v = getenv("XDG_CACHE_HOME");
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
    at_status s = path || def ? at_db_open(path ? path : def, 1, &db)
                              : at_fail(AT_ERR_DB, "no database path: HOME is not set");
    if (s == AT_OK) s = fn(db, arg);
    if (s != AT_OK && why) snprintf(why, whylen, "%s", at_errmsg());
    at_db_close(db);
    free(def);
    return s;
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

static const rec_kind k_result_kind = {T_RESULTS, "result", result_append, result_parse};
static const rec_kind k_best_kind = {T_BEST, "best", best_append, best_parse};

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
    union {
        at_result_rec r;
        at_best_rec b;
    } back;
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
        AT_TRY(put_one(db, txn, db->dbi[T_RESULTS], c->keys[i], c->text + from, c->end[i] - from,
                       mdb_rc, "result"));
    }
    return AT_OK;
}

at_status at_db_put_results(at_db *db, size_t n, char *const *keys, const at_result_rec *recs)
{
    if (n == 0) return AT_OK;
    if (!keys || !recs) return at_fail(AT_ERR_INVALID_ARG, "at_db_put_results: NULL argument");
    AT_TRY(enter(db));
    at_sbuf text = {0};
    size_t *end = malloc(n * sizeof *end);
    at_status s = end ? AT_OK : at_fail(AT_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n && s == AT_OK; i++) {
        s = check_key(db, keys[i]);
        if (s == AT_OK) s = append_record(db, &k_result_kind, &text, keys[i], &recs[i]);
        end[i] = text.n;
    }
    results_ctx c = {n, keys, text.p, end};
    if (s == AT_OK) s = write_txn(db, results_body, &c);
    at_sb_free(&text);
    free(end);
    leave(db);
    return s;
}

at_status at_db_get_result(at_db *db, const char *key, at_result_rec *out)
{
    return get_record(db, &k_result_kind, key, out);
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
    int rc = mdb_get(txn, db->dbi[T_BEST], &k, &v);
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
    return put_one(db, txn, db->dbi[T_BEST], c->key, c->text.p, c->text.n, mdb_rc, "best");
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

typedef struct bin_ctx {
    const char *hash;
    const void *bin;
    size_t len;
} bin_ctx;

static at_status bin_body(at_db *db, MDB_txn *txn, void *vctx, int *mdb_rc)
{
    bin_ctx *c = vctx;
    return put_one(db, txn, db->dbi[T_BINARIES], c->hash, c->bin, c->len, mdb_rc, "binary");
}

at_status at_db_put_binary(at_db *db, const char *hash, const void *bin, size_t len)
{
    if (!bin && len) return at_fail(AT_ERR_INVALID_ARG, "at_db_put_binary: bin is NULL");
    AT_TRY(enter(db));
    at_status s = check_key(db, hash);
    bin_ctx c = {hash, bin ? bin : "", len};
    if (s == AT_OK) s = write_txn(db, bin_body, &c);
    leave(db);
    return s;
}

at_status at_db_get_binary(at_db *db, const char *hash, void **bin, size_t *len)
{
    if (!bin || !len) return at_fail(AT_ERR_INVALID_ARG, "at_db_get_binary: NULL argument");
    char *data = NULL;
    size_t n = 0;
    AT_TRY(get_locked(db, T_BINARIES, hash, &data, &n));
    *bin = data;
    *len = n;
    return AT_OK;
}

/* ---- scan ------------------------------------------------------------------------------- */

/* Replaces b's text with v as one line (control bytes become '?'); -1 when out of memory. */
static int line_copy(at_sbuf *b, const void *v, size_t n)
{
    at_sb_clear(b);
    at_sb_put(b, v, n);
    for (size_t i = 0; i < b->n && !b->oom; i++)
        if ((unsigned char)b->p[i] < 0x20 || b->p[i] == 0x7f) b->p[i] = '?';
    return b->oom ? -1 : 0;
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
                       "unknown database table '%s' (meta, results, best, binaries)", table);
    AT_TRY(enter(db));
    size_t plen = prefix ? strlen(prefix) : 0;
    if (plen > (size_t)mdb_env_get_maxkeysize(db->env)) {
        leave(db);
        return AT_OK; /* no key can start with it */
    }
    MDB_txn *txn = NULL;
    at_status s = txn_begin(db, MDB_RDONLY, &txn);
    if (s != AT_OK) {
        leave(db);
        return s;
    }
    MDB_cursor *cur = NULL;
    int rc = mdb_cursor_open(txn, db->dbi[t], &cur);
    if (rc != MDB_SUCCESS) {
        mdb_txn_abort(txn);
        leave(db);
        return mdb_fail(db, "opening a cursor", rc);
    }
    MDB_val k = {plen, (void *)prefix}, v;
    rc = plen ? mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    at_sbuf kbuf = {0}, vbuf = {0};
    while (rc == MDB_SUCCESS) {
        if (plen && (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0)) break;
        char sizebuf[48];
        const void *vp = v.mv_data;
        size_t vn = v.mv_size;
        if (t == T_BINARIES) {
            snprintf(sizebuf, sizeof sizebuf, "%zu bytes", v.mv_size);
            vp = sizebuf;
            vn = strlen(sizebuf);
        }
        if (line_copy(&kbuf, k.mv_data, k.mv_size) || line_copy(&vbuf, vp, vn)) {
            s = at_fail(AT_ERR_NO_MEMORY, "out of memory scanning %s", db->path);
            break;
        }
        t_scanning = db;
        int stop = fn(user, at_sb_str(&kbuf), at_sb_str(&vbuf));
        t_scanning = NULL;
        if (stop) break;
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

/* ---- key lists ------------------------------------------------------------------------------ */

typedef struct key_list {
    char **keys;
    size_t n, cap;
    int oom;
} key_list;

static int add_key(void *user, const char *key, const char *value)
{
    (void)value;
    key_list *l = user;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **k = realloc(l->keys, cap * sizeof *k);
        if (!k) {
            l->oom = 1;
            return 1;
        }
        l->keys = k;
        l->cap = cap;
    }
    if (!(l->keys[l->n] = at_strdup(key))) {
        l->oom = 1;
        return 1;
    }
    l->n++;
    return 0;
}

at_status at_db_keys(at_db *db, const char *table, const char *prefix, char ***keys, size_t *n)
{
    key_list l = {0};
    at_status s = at_db_scan(db, table, prefix, add_key, &l);
    if (s == AT_OK && l.oom) s = at_fail(AT_ERR_NO_MEMORY, "out of memory");
    if (s != AT_OK) {
        at_db_keys_free(l.keys, l.n);
        l.keys = NULL;
        l.n = 0;
    }
    *keys = l.keys;
    *n = l.n;
    return s;
}

void at_db_keys_free(char **keys, size_t n)
{
    for (size_t i = 0; keys && i < n; i++) free(keys[i]);
    free(keys);
}
