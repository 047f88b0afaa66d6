/* layers.h — the databases a context reads (docs/shipping.md, "Layered lookup"): the user's
 * (writable) first, then the read-only layers of the search path, opened once per context and
 * never written. */
#ifndef AT_LAYERS_H
#define AT_LAYERS_H

#include "base/sbuf.h"
#include "cache/db.h"

typedef struct at_layers {
    at_db **db;   /* db[0]: the user's database (not owned); then the layers, in path order */
    char **path;  /* what each came from: a database directory or a bundle file */
    size_t n;     /* 1 + layers */
    at_sbuf warn; /* entries skipped as damaged or unreadable, one line each ("" when none) */
} at_layers;

/* Opens the layers after user (the context's database, at path user_path): search_path when not
 * NULL (':'-separated; "" for none), else $AUTOTUNE_DB_PATH's entries then $AUTOTUNE_SHIPPED_DB
 * (unset: the installed folder, found where a moved install has it; empty: none). An entry is a
 * database directory, a bundle file, or a folder of those (entries sorted by name). A missing entry
 * is skipped silently, a damaged one with a line in warn; a layer that is the user's database or an
 * earlier layer is skipped. Fails only when out of memory. */
at_status at_layers_open(at_layers *l, at_db *user, const char *user_path, const char *search_path);
void at_layers_close(at_layers *l);

#endif
