/* shapes.h — shape lists (docs/shipping.md "Shape lists"): a YAML list of problems, read into an
 * expanded, de-duplicated list, for `autotune tune --shapes`, its shards and the fleet. */
#ifndef AT_SHAPES_H
#define AT_SHAPES_H

#include "autotune.h"

#include <stddef.h>

/* A list may expand to at most this many problems (a typo in a list of lists is caught early). */
#define AT_SHAPES_MAX 100000

typedef struct at_shapes {
    size_t n;
    at_problem **problems; /* in list order (the first place of a duplicate), each valid */
    char **keys;           /* their database keys, "gemm/f32/nt/16x4096x4096" */
} at_shapes;

/* Reads the list at path. Each item is a one-key map naming the operation, whose value maps the
 * operation's problem fields (its CLI option names; '_' may stand for '-': kv_heads) to a value
 * or a list of values; lists expand to their product in the order written, the last varying
 * fastest. Values are checked by the operation (at_problem_set, at_problem_key). A problem
 * listed twice is kept once, at its first place. AT_ERR_IO when the file cannot be read;
 * AT_ERR_INVALID_ARG, with "PATH:LINE:COLUMN: why" in at_errmsg(), for bad YAML, a file that is
 * not a list or an empty one, an unknown operation or field, a bad value, a problem missing a
 * field or more than AT_SHAPES_MAX problems. On failure *out is empty. */
at_status at_shapes_load(const char *path, at_shapes *out);
void at_shapes_free(at_shapes *s); /* accepts an empty list; leaves it empty */

#endif
