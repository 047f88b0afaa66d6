/* bundle.h — the portable bundle (docs/shipping.md): a database's results and best entries as
 * gzip-compressed JSON Lines with each record's device identity and template, written in key
 * order; reading one back (checked whole before anything is written), the conflict rule of
 * import and merge, counts per operation, device and template, and bundle layers (a bundle
 * imported once into a private read-only copy under the user's cache). What only the tuner
 * knows (the operations, which template trusts which hash) comes in through hooks. */
#ifndef AT_BUNDLE_H
#define AT_BUNDLE_H

#include "cache/db.h"

#define AT_BUNDLE_FORMAT  "autotune-bundle"
#define AT_BUNDLE_VERSION 1

typedef struct at_bundle_hooks {
    /* 1 when this library knows operation op (NULL: every operation is taken). */
    int (*known_op)(void *user, const char *op);
    /* 1 when the template called name on backend trusts results tuned with template hash hash
     * (its own hash, or one its `supersedes:` lists); NULL: no best entry is trusted. */
    int (*trusted)(void *user, const char *name, const char *backend, const char *hash);
    void *user;
} at_bundle_hooks;

typedef struct at_bundle_filter {
    const char *op;     /* NULL: every operation */
    const char *device; /* fnmatch pattern against the device key and name; NULL: all */
    int best_only;
} at_bundle_filter;

/* Writes db's records that f selects (NULL: all) as a bundle at out_path ("-": stdout);
 * *records (may be NULL): how many. Records skipped as damaged are counted on db
 * (at_db_skipped). AT_ERR_IO when the file cannot be written. */
at_status at_bundle_export(at_db *db, const at_bundle_filter *f, const char *out_path,
                           int64_t *records);

/* The records of some inputs, read and checked, ready to be written. */
typedef struct at_bundle_set at_bundle_set;

/* Reads inputs[0..n): bundle files ("-": stdin) or database directories (holding data.mdb),
 * told apart by content, into one set. Everything is checked: a bundle's header (format, a
 * version this reader reads, the record count against the lines), every line (a JSON object
 * with the required fields of its table), the operation (hooks->known_op), a gzip stream that
 * ends early. AT_ERR_INVALID_ARG naming the input and the line; AT_ERR_DB* for a database. */
at_status at_bundle_read(const char *const *inputs, size_t n, const at_bundle_hooks *hooks,
                         at_bundle_set **out);
void at_bundle_set_free(at_bundle_set *set); /* accepts NULL */
/* Writes set into db in one transaction, each record by the rule of prefer against the others
 * with its key (in the set and in db): records equal to what db holds are not written. */
at_status at_bundle_apply(at_db *db, const at_bundle_set *set, at_prefer prefer,
                          const at_bundle_hooks *hooks, at_import_report *rep);

/* Counts db's records (at_db_stats). */
at_status at_bundle_stats(at_db *db, at_db_stats *out);

/* Opens the bundle at bundle_path as a read-only database: a private copy, imported once, under
 * <at_cache_dir()>/layers/<16 hex digits of at_hash of its real path, size, mtime (ns) and
 * inode>/, which later opens (any process) use directly. The copy is written under a temporary
 * name and renamed into place, so a half-written copy is never opened; two processes doing it at
 * once both succeed. When the cache cannot be written, the copy is made in $TMPDIR (or /tmp)
 * and removed when the database is closed. The bundle is only read. Its records are checked as
 * at_bundle_read does, but not their operations (a record of an operation this library does not
 * know is kept, and answers no lookup). AT_ERR_INVALID_ARG, AT_ERR_DB*, with why. */
at_status at_bundle_layer_open(const char *bundle_path, at_db **out, char *why, size_t whylen);

#endif
