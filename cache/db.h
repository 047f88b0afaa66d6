/* db.h — the LMDB store: meta, results (every measurement), best (per problem and device),
 * binaries (compiled code by hash). Keys are readable text so prefix scans and `db list` work. */
#ifndef AT_DB_H
#define AT_DB_H

#include "base/util.h"
#include "cache/keys.h"
#include "cache/record.h"

#include <stddef.h>
#include <stdint.h>

/* The schema version in meta (docs/database.md): a reader refuses a file whose major is newer
 * than its own; a minor change is one every reader of the same major handles by the record
 * rules (unknown fields skipped, missing optional ones defaulted). */
#define AT_DB_SCHEMA       2
#define AT_DB_SCHEMA_MINOR 0

typedef struct at_db at_db;

/* Opens (creating if needed unless readonly) the database directory at path (LMDB environment:
 * path/data.mdb). Checks `meta`: a new file gets schema AT_DB_SCHEMA; a newer schema major gives
 * AT_ERR_DB_VERSION (the message names the file, its schema and ours); a file that is not LMDB or
 * whose tables are damaged gives AT_ERR_DB_CORRUPT; an unwritable or missing path AT_ERR_DB. Never
 * modifies a file it rejects, and opening writes nothing to an existing file: an older schema is
 * upgraded in meta by the first write transaction (records stay as they are; every version is
 * read). Every write transaction checks the schema again and fails with AT_ERR_DB_VERSION if
 * another process moved the file to a newer major. Many processes may open and write one database
 * at once (LMDB locks), but one process holds at most one handle per path (LMDB forbids opening an
 * environment twice in a process), and a handle must not be used across fork(). A handle may be
 * shared by threads: its calls are serialised. */
at_status at_db_open(const char *path, int readonly, at_db **out);
void at_db_close(at_db *db); /* accepts NULL */
const char *at_db_path(const at_db *db);
/* The default path: $AUTOTUNE_DB, else $XDG_CACHE_HOME/autotune, else $HOME/.cache/autotune.
 * malloc'd. */
char *at_db_default_path(void);
/* Opens the database at path (NULL: the default path) read-only, runs fn on it and closes it;
 * the message of a failure goes to why (may be NULL). For one-shot readers (list, export). */
at_status at_db_read(const char *path, at_status (*fn)(at_db *db, void *arg), void *arg, char *why,
                     size_t whylen);

/* Keys are built and split by cache/keys.h (at_db_result_key, at_db_best_key, ...). */

/* Writes n results in one write transaction. Grows the map on MDB_MAP_FULL. A record that would
 * not read back (a status out of range, a negative count) is AT_ERR_INVALID_ARG and nothing is
 * written. */
at_status at_db_put_results(at_db *db, size_t n, char *const *keys, const at_result_rec *recs);
/* AT_ERR_NOT_FOUND on a miss; a stored record that does not parse (record.h) AT_ERR_DB_CORRUPT
 * or AT_ERR_DB_VERSION, with a message naming the key. */
at_status at_db_get_result(at_db *db, const char *key, at_result_rec *out);

/* Stores best unless the stored entry (same template hash) is faster and force is 0; a stored
 * entry that does not parse is replaced only with force (else AT_ERR_DB_CORRUPT). A record that
 * would not read back (a template hash that is not one bare token) is AT_ERR_INVALID_ARG. */
at_status at_db_put_best(at_db *db, const char *key, const at_best_rec *rec, int force);
/* As at_db_get_result. */
at_status at_db_get_best(at_db *db, const char *key, at_best_rec *out);

at_status at_db_put_binary(at_db *db, const char *hash, const void *bin, size_t len);
/* *bin malloc'd. AT_ERR_NOT_FOUND on a miss. */
at_status at_db_get_binary(at_db *db, const char *hash, void **bin, size_t *len);

/* Calls fn for every entry of table ("meta", "results", "best", "binaries") whose key starts
 * with prefix (NULL: all), in key order. value is the stored text as one line (records as
 * written, "v1 ..." or "v2 ...", control bytes as '?'; for binaries: "<n> bytes"). A non-zero
 * return from fn stops the scan. fn must not call other at_db functions on the same handle (they
 * fail with AT_ERR_INVALID_ARG); unknown table: AT_ERR_INVALID_ARG. */
typedef int (*at_db_visit_fn)(void *user, const char *key, const char *value);
at_status at_db_scan(at_db *db, const char *table, const char *prefix, at_db_visit_fn fn,
                     void *user);

/* The keys of table that start with prefix (NULL: all), in key order: *keys is a malloc'd
 * array of *n malloc'd strings (NULL when none); free them with at_db_keys_free. */
at_status at_db_keys(at_db *db, const char *table, const char *prefix, char ***keys, size_t *n);
void at_db_keys_free(char **keys, size_t n);

#endif
