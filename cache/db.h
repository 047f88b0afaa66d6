/* db.h — the LMDB store: meta, results (every measurement), best (per problem and device),
 * binaries (compiled code by hash). Keys are readable text so prefix scans and `db list` work. */
#ifndef AT_DB_H
#define AT_DB_H

#include "base/util.h"

#include <stddef.h>
#include <stdint.h>

#define AT_DB_SCHEMA       1 /* the major version: a newer one is refused */
#define AT_DB_SCHEMA_MINOR 0 /* fields added that older readers skip */

typedef struct at_db at_db;

/* Candidate outcome; the names are part of the JSON/CLI contract. */
typedef enum at_result_status {
    AT_RS_OK = 0,
    AT_RS_COMPILE_ERROR,
    AT_RS_RESOURCE_LIMIT,
    AT_RS_LAUNCH_ERROR,
    AT_RS_WRONG_RESULT,
    AT_RS_TIMEOUT,
    AT_RS_CRASHED,
    AT_RS_COUNT
} at_result_status;
const char *at_result_status_name(at_result_status s); /* "ok", "compile_error", ... */
int at_result_status_parse(const char *name);          /* -1 if unknown */

typedef struct at_result_rec {
    at_result_status status;
    double median_us, min_us, max_us; /* kernel time; 0 when not measured */
    int64_t reps;                     /* timed repetitions (0 when not timed) */
    int early_stop;                   /* 1: stopped timing early, clearly slower than the best */
    double max_rel_error;             /* against the reference; 0 when not checked */
    double compile_ms;
    int64_t when;     /* unix time */
    char reason[512]; /* "" for ok; the first line(s) of the error otherwise */
} at_result_rec;

typedef struct at_best_rec {
    char config[512];       /* "BM=64,BN=64,..." */
    char template_hash[17]; /* hex */
    char template_name[64]; /* the template tuned ("gemm_mma"); "" in records before it */
    int64_t space;          /* valid configurations of the space tuned; 0: unknown */
    double time_us, gflops, max_rel_error;
    int64_t when;
    char compiler[256]; /* compiler version */
    char driver[256];   /* driver version */
} at_best_rec;

/* Opens (creating if needed unless readonly) the database directory at path (LMDB
 * environment: path/data.mdb). Checks `meta`: a missing schema on a new file is written; a
 * newer schema gives AT_ERR_DB_VERSION; a file that is not LMDB or whose tables are damaged
 * gives AT_ERR_DB_CORRUPT; an unwritable or missing path AT_ERR_DB. Never modifies a file it
 * rejects. Many processes may open and write one database at once (LMDB locks), but one process
 * holds at most one handle per path (LMDB forbids opening an environment twice in a process),
 * and a handle must not be used across fork(). A handle may be shared by threads: its calls
 * are serialised. */
at_status at_db_open(const char *path, int readonly, at_db **out);
void at_db_close(at_db *db); /* accepts NULL */
const char *at_db_path(const at_db *db);
/* The default path: $AUTOTUNE_DB, else $XDG_CACHE_HOME/autotune, else $HOME/.cache/autotune.
 * malloc'd. */
char *at_db_default_path(void);

/* Keys. results: "<problem>|<device>|<template hash>|<config>"; best: "<problem>|<device>". */
char *at_db_result_key(const char *problem, const char *device, const char *thash,
                       const char *config);
char *at_db_best_key(const char *problem, const char *device);

/* Writes n results in one write transaction. Grows the map on MDB_MAP_FULL. */
at_status at_db_put_results(at_db *db, size_t n, char *const *keys, const at_result_rec *recs);
/* AT_ERR_NOT_FOUND on a miss. */
at_status at_db_get_result(at_db *db, const char *key, at_result_rec *out);

/* Stores best unless the stored entry (same template hash) is faster and force is 0. */
at_status at_db_put_best(at_db *db, const char *key, const at_best_rec *rec, int force);
at_status at_db_get_best(at_db *db, const char *key, at_best_rec *out);

at_status at_db_put_binary(at_db *db, const char *hash, const void *bin, size_t len);
/* *bin malloc'd. AT_ERR_NOT_FOUND on a miss. */
at_status at_db_get_binary(at_db *db, const char *hash, void **bin, size_t *len);

/* Calls fn for every entry of table ("meta", "results", "best", "binaries") whose key starts
 * with prefix (NULL: all), in key order. value is a readable one-line text rendering (for
 * binaries: "<n> bytes"). A non-zero return from fn stops the scan. fn must not call other
 * at_db functions on the same handle (they fail with AT_ERR_INVALID_ARG); unknown table:
 * AT_ERR_INVALID_ARG. */
typedef int (*at_db_visit_fn)(void *user, const char *key, const char *value);
at_status at_db_scan(at_db *db, const char *table, const char *prefix, at_db_visit_fn fn,
                     void *user);

/* The keys of table that start with prefix (NULL: all), in key order: *keys is a malloc'd
 * array of *n malloc'd strings (NULL when none); free them with at_db_keys_free. */
at_status at_db_keys(at_db *db, const char *table, const char *prefix, char ***keys, size_t *n);
void at_db_keys_free(char **keys, size_t n);

/* Readable renderings used by scan and `db show`, and their parsers. */
void at_result_rec_format(const at_result_rec *r, char *buf, size_t len);
void at_best_rec_format(const at_best_rec *r, char *buf, size_t len);

#endif
