/* db.h — the LMDB store: meta, results (every measurement), best (per problem and device),
 * binaries (compiled code by hash), devices (each device's identity) and checks (validations of
 * configs measured elsewhere). Keys are readable text so prefix scans and `db list` work. */
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
#define AT_DB_SCHEMA_MINOR 1

typedef struct at_db at_db;

/* How at_db_open opens a database. */
enum {
    AT_DB_READWRITE = 0, /* creating it if needed */
    AT_DB_READONLY = 1,  /* it must exist; every write fails with AT_ERR_DB */
    /* Read-write; when that fails because the file system is read-only or full, or the files
     * or the directory are not writable (EROFS, ENOSPC, EACCES, EPERM), or the database is open
     * read-only in this process, read-only instead: at_db_readonly_reason() then says why, and
     * every write fails with AT_ERR_DB and that reason. */
    AT_DB_WRITABLE_OR_READONLY = 2,
    /* Read-only, and nothing in its folder is created or written: a layer of the search path
     * (docs/shipping.md). LMDB's lock file is used when it is there and writable, else the
     * database is read without locks (MDB_NOLOCK). */
    AT_DB_LAYER = 3
};

/* Opens the database directory at path (LMDB environment: path/data.mdb) as mode says. Before
 * LMDB maps an existing file, the file is checked so that LMDB cannot fault on it (dbfile.h): a
 * damaged, truncated or foreign file gives AT_ERR_DB_CORRUPT. Checks `meta`: a new file gets
 * schema AT_DB_SCHEMA; a newer schema major gives AT_ERR_DB_VERSION (the message names the file,
 * its schema and ours); a file whose tables are damaged gives AT_ERR_DB_CORRUPT; an unwritable or
 * missing path AT_ERR_DB, as does creating a database on a file system with less than 256 KiB
 * free ("No space left on device"). Never modifies a file it rejects, and opening writes nothing
 * to an existing file: an older schema is upgraded in meta by the first write transaction
 * (records stay as they are; every version is read). Every write transaction checks the schema
 * again and fails with AT_ERR_DB_VERSION if another process moved the file to a newer major.
 * Reader slots left by killed processes are freed on open.
 *
 * Many processes may open and write one database at once (LMDB locks). Within a process, opens
 * of one directory (the same device and inode, whatever the path's spelling) share one LMDB
 * environment, as LMDB requires; each handle is closed on its own. A read-only open of a database
 * open read-write in the process shares it (and refuses writes); a read-write open of one open
 * only read-only is AT_ERR_DB (AT_DB_WRITABLE_OR_READONLY: read-only). A handle must not be used
 * across fork(); a child opens its own. Handles may be shared by threads: the calls on one
 * database are serialised. */
at_status at_db_open(const char *path, int mode, at_db **out);
void at_db_close(at_db *db); /* accepts NULL */
const char *at_db_path(const at_db *db);
/* NULL when db takes writes; else why not: "opened read-only", or for AT_DB_WRITABLE_OR_READONLY
 * the reason ("cannot write to PATH: Read-only file system"). */
const char *at_db_readonly_reason(const at_db *db);
/* The default path: $AUTOTUNE_DB, else $XDG_CACHE_HOME/autotune, else $HOME/.cache/autotune.
 * malloc'd. */
char *at_db_default_path(void);
/* The user's cache folder: $XDG_CACHE_HOME/autotune (an absolute $XDG_CACHE_HOME), else
 * $HOME/.cache/autotune (the password entry's home without $HOME); NULL when there is none.
 * malloc'd. The default database lives there; bundle layers under its layers/. */
char *at_cache_dir(void);
/* Marks db's directory as temporary: its files and the directory are removed when the last
 * handle on it closes (a private copy nothing else opens). */
void at_db_set_temporary(at_db *db);
/* Opens the database at path (NULL: the default path) read-only, runs fn on it and closes it.
 * On failure the message goes to why (may be NULL); on success why is "" or the note of
 * at_db_skipped (records skipped as damaged), for the caller to print as a warning. For one-shot
 * readers (list, export). */
at_status at_db_read(const char *path, at_status (*fn)(at_db *db, void *arg), void *arg, char *why,
                     size_t whylen);

/* Readers that can go on past a damaged record (at_db_scan, at_db_keys, at_db_results, the Kernel
 * Tuner export) skip it and count it on the handle. at_db_skipped returns how many were skipped
 * since the last call (and starts counting again) and writes a note naming the first few to note
 * (may be NULL):
 * "PATH: skipped 2 damaged records (results 'KEY': why; best 'KEY': why)"; "" when none. */
size_t at_db_skipped(at_db *db, char *note, size_t len);
/* Counts a record the caller skipped as damaged (table, key, why) in the same note. */
void at_db_skip(at_db *db, const char *table, const char *key, const char *why);

/* Keys are built and split by cache/keys.h (at_db_result_key, at_db_best_key, ...). */

/* Writes n results in one write transaction, committed (synced to disk) before it returns: a
 * process killed afterwards loses none of them, one killed before loses all n. Grows the map on
 * MDB_MAP_FULL. A record that would not read back (a status out of range, a negative count) or a
 * key over LMDB's 511 bytes (keys from cache/keys.h always fit) is AT_ERR_INVALID_ARG and nothing
 * is written. A write that fails is AT_ERR_DB with the cause in at_errmsg(): the system's
 * ("No space left on device"), a full map that cannot grow ("is full"), the read-only reason;
 * the caller stops there and reports it before calling anything else that sets the message. */
at_status at_db_put_results(at_db *db, size_t n, char *const *keys, const at_result_rec *recs);
/* AT_ERR_NOT_FOUND on a miss; a stored record that does not parse (record.h) AT_ERR_DB_CORRUPT
 * or AT_ERR_DB_VERSION, with a message naming the key. */
at_status at_db_get_result(at_db *db, const char *key, at_result_rec *out);

/* The devices table (schema 2.1): the identity of the device with key device_key (as
 * at_db_device_key makes it: the device part of the other keys; record.h), written when it
 * tunes. Errors as at_db_put_results / at_db_get_result (AT_ERR_NOT_FOUND on a
 * miss, also in a file older than 2.1). */
at_status at_db_put_device(at_db *db, const char *device_key, const at_device_rec *r);
at_status at_db_get_device(at_db *db, const char *device_key, at_device_rec *out);
/* The checks table (schema 2.1): the outcome of validating a config tuned elsewhere on this
 * device, a results record under the results key of this device. Errors as above. */
at_status at_db_put_check(at_db *db, const char *result_key, const at_result_rec *r);
at_status at_db_get_check(at_db *db, const char *result_key, at_result_rec *out);

/* One write of at_db_put_texts: a record's text for a table of records ("results", "best",
 * "devices", "checks"). */
typedef struct at_db_text {
    const char *table;
    const char *key;
    const char *text; /* "v2 ...", as the table's codec (record.h) writes it */
} at_db_text;
/* Decides, inside the write transaction, whether entry i replaces what its table holds at its
 * key (stored: the text there, len bytes; NULL when there is none): 1 to write it, 0 to keep
 * what is stored, a negative at_status (set with at_fail) to abort the whole batch. It must not
 * call at_db functions; it may be called again for the same entries (the map grew). */
typedef int (*at_db_decide_fn)(void *user, size_t i, const char *stored, size_t len);
/* Writes the n entries that decide (NULL: all) accepts in one write transaction, all or none;
 * *written (may be NULL): how many. Every text is parsed first: one that does not parse, an
 * unknown table or a bad key is AT_ERR_INVALID_ARG naming it and nothing is written. A
 * transaction that changes nothing leaves the file as it was (LMDB commits nothing). Errors as
 * at_db_put_results. */
at_status at_db_put_texts(at_db *db, size_t n, const at_db_text *w, at_db_decide_fn decide,
                          void *user, size_t *written);

/* Stores best unless the stored entry (same template hash) is faster and force is 0; a stored
 * entry that does not parse is replaced only with force (else AT_ERR_DB_CORRUPT). A record that
 * would not read back (a template hash that is not one bare token) is AT_ERR_INVALID_ARG. */
at_status at_db_put_best(at_db *db, const char *key, const at_best_rec *rec, int force);
/* As at_db_get_result. */
at_status at_db_get_best(at_db *db, const char *key, at_best_rec *out);

/* Stores len bytes of compiled code under hash with a header: a format version, the length and
 * a CRC-32 (docs/database.md). Errors as at_db_put_results. */
at_status at_db_put_binary(at_db *db, const char *hash, const void *bin, size_t len);
/* The code stored under hash, checked against its header: *bin malloc'd (with a NUL after the
 * len bytes). AT_ERR_NOT_FOUND on a miss, and for a binary this release does not use: written
 * without a header (autotune 0.1) or in a newer format (the caller compiles again);
 * AT_ERR_DB_CORRUPT, naming the key, for one whose length or checksum does not match (truncated
 * or damaged): never handed out. */
at_status at_db_get_binary(at_db *db, const char *hash, void **bin, size_t *len);

/* Calls fn for every entry of table ("meta", "results", "best", "binaries", "devices",
 * "checks") whose key starts with prefix (NULL: all), in key order. value is the stored text as
 * one line (records as written, "v1 ..." or "v2 ...", control bytes as '?'; for binaries:
 * "<n> bytes" of code, or "<n> bytes, no header (autotune 0.1): compiled again"). A record that
 * does not parse, or a binary whose header does not match, is skipped and counted
 * (at_db_skipped). A table the file does not have yet (devices and checks before 2.1) is empty. A
 * non-zero return from fn stops the scan. fn must not call other at_db functions on the same
 * database (they fail with AT_ERR_INVALID_ARG); unknown table: AT_ERR_INVALID_ARG. */
typedef int (*at_db_visit_fn)(void *user, const char *key, const char *value);
at_status at_db_scan(at_db *db, const char *table, const char *prefix, at_db_visit_fn fn,
                     void *user);

/* The keys of table that start with prefix (NULL: all), in key order, as at_db_scan visits them
 * (damaged records skipped): *keys is a malloc'd array of *n malloc'd strings (NULL when none);
 * free them with at_db_keys_free. */
at_status at_db_keys(at_db *db, const char *table, const char *prefix, char ***keys, size_t *n);
void at_db_keys_free(char **keys, size_t n);
/* The results whose keys start with prefix (NULL: all), with their records, read in one scan:
 * the keys as at_db_keys(db, "results", prefix, ...) lists them (damaged records skipped and
 * counted), and (*recs)[i] the parsed record of (*keys)[i]. *recs is a malloc'd array (NULL when
 * none; free() it), the keys are freed with at_db_keys_free. */
at_status at_db_results(at_db *db, const char *prefix, char ***keys, at_result_rec **recs,
                        size_t *n);

#endif
