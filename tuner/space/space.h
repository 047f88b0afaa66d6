/* space.h — tuning spaces: integer expressions and the YAML description of a template's space. */
#ifndef AT_SPACE_H
#define AT_SPACE_H

#include "base/util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AT_MAX_PARAMS 32
#define AT_MAX_VALUES 64

/* ---- expressions ------------------------------------------------------------------------ *
 * Integer (int64) expressions: literals, identifiers (letters, digits, '_' and '.', e.g.
 * `device.max_work_group_size`), unary - ! ~, binary * / % + - << >> < <= > >= == != & ^ | && ||,
 * the conditional `c ? a : b`, parentheses, and the functions min(a,b), max(a,b),
 * ceil_div(a,b), pow2(a) (1 if a is a power of two), log2(a) (floor). C precedence.
 * Identifiers are bound to slots when parsed, so evaluation is an array lookup. */
typedef struct at_expr at_expr;

/* Maps an identifier to a slot index; returns -1 if unknown. */
typedef int (*at_expr_resolve_fn)(void *user, const char *name);

/* Parses text. On failure returns AT_ERR_TEMPLATE with a message naming the position and the
 * unknown identifier or unexpected token. */
at_status at_expr_parse(const char *text, at_expr_resolve_fn resolve, void *user, at_expr **out);
/* Evaluates with slot values. Division or modulo by zero and overflow yield *ok = false. */
int64_t at_expr_eval(const at_expr *e, const int64_t *slots, bool *ok);
const char *at_expr_text(const at_expr *e); /* the source text */
void at_expr_free(at_expr *e);              /* accepts NULL */

/* ---- spaces ----------------------------------------------------------------------------- */

typedef struct at_param {
    char *name;
    int64_t values[AT_MAX_VALUES];
    size_t nvalues;
} at_param;

typedef struct at_named_expr {
    char *name;
    at_expr *expr;
} at_named_expr;

/* One kernel argument of `arguments:`, in the kernel's parameter order. */
typedef enum at_arg_kind {
    AT_ARG_BUFFER,    /* `buffer: ROLE`: a device buffer of the operation, by role ("A") */
    AT_ARG_SCALAR,    /* `i32|i64|f32|f64: NAME`: a value of the problem by name ("m", "alpha") */
    AT_ARG_WORKSPACE, /* `workspace`: the zeroed scratch, passed only when `workspace:` > 0 */
    /* `tensormap: {buffer: ROLE, cols:, rows:, ld:, box: [cols, rows], swizzle:, when:}`: a
     * 2-D tiled tensor map of a buffer (CUDA's CUtensorMap for TMA, 128 bytes by value), built
     * per launch by the backend for the buffer's device address from expressions over the
     * config, problem and device (at_args_maps); passed only when `when:` (default 1) holds. */
    AT_ARG_TENSORMAP,
} at_arg_kind;

typedef enum at_arg_type { AT_ARG_I32, AT_ARG_I64, AT_ARG_F32, AT_ARG_F64 } at_arg_type;

/* The expressions of a `tensormap:` argument, in elements: the tensor is `rows` rows of `cols`
 * contiguous elements, `ld` elements apart; a copy moves a box of box[0] columns x box[1]
 * rows, swizzled in `swizzle`-byte spans (0: none). `when` (NULL: always) says whether a
 * config takes the argument at all. */
enum {
    AT_TMAP_COLS,
    AT_TMAP_ROWS,
    AT_TMAP_LD,
    AT_TMAP_BOX0,
    AT_TMAP_BOX1,
    AT_TMAP_SWIZZLE,
    AT_TMAP_WHEN,
    AT_TMAP_NEXPR
};

typedef struct at_arg {
    at_arg_kind kind;
    at_arg_type type; /* AT_ARG_SCALAR only */
    char *name;       /* role or value name (a tensor map's buffer); NULL for the workspace */
    at_expr **tmap;   /* AT_ARG_TENSORMAP: AT_TMAP_NEXPR expressions owned by the space (the
                       * copies an at_kernel keeps share them: NULL there) */
} at_arg;

#define AT_MAX_ARGS 32

/* A loaded space. Slots: [0, nparams) are the parameters, then the problem variables (in
 * `problem:` order), then the device variables (`device.NAME`), then the derived values (in
 * `derived:` order, each may use the slots before it). */
typedef struct at_space {
    char *name;      /* `name:` e.g. "gemm_mma" */
    char *operation; /* `operation:` the operation it implements, e.g. "gemm"; NULL if absent */
    char *kernel;    /* `kernel:` the kernel function's name */
    char *source;    /* `source:` the kernel file, relative to the YAML file, e.g. "gemm.cl" */
    /* Where the template applies (NULL lists: everywhere): `backends:` ("cuda"), `dtypes:`
     * ("f16"), `archs:` (compile targets "sm_90a"; "gfx90a" also matches "gfx90a:xnack-"), and
     * `device_types:` ("cpu", "gpu": the kind of device, for backends such as OpenCL that run
     * on both) and `priority:` (the highest-priority template that applies is the default
     * choice). */
    char **backends, **dtypes, **archs, **device_types;
    size_t nbackends, ndtypes, narchs, ndevice_types;
    /* `supersedes:` hashes of earlier versions of this template whose tuned results stay valid
     * for it (the same code and space, written down by the template's author). */
    char **supersedes;
    size_t nsupersedes;
    int64_t priority;
    at_arg args[AT_MAX_ARGS]; /* `arguments:` */
    size_t nargs;
    at_param params[AT_MAX_PARAMS];
    size_t nparams;
    char **problem_vars;
    size_t nproblem; /* `problem:` list, e.g. m n k ta tb */
    char **device_vars;
    size_t ndevice; /* `device:` list, without the "device." prefix */
    at_named_expr *derived;
    size_t nderived;
    at_expr **constraints;
    size_t nconstraints;
    at_named_expr *defines;
    size_t ndefines;    /* extra -D NAME=value, evaluated per candidate */
    at_expr *global[3]; /* `launch: global:` 1 to 3 expressions; missing dims are NULL (=1) */
    at_expr *local[3];  /* `launch: local:` */
    size_t launch_dims;
    at_expr *shared;    /* `launch: shared:` dynamic shared memory bytes per block; NULL = 0 */
    at_expr *cluster;   /* `launch: cluster:` blocks per cluster along dimension 0; NULL = 1 */
    at_expr *workspace; /* `workspace:` bytes of zeroed scratch the kernel takes; NULL = 0 */
    at_expr *scratch;   /* `scratch:` bytes after the workspace, of no set value; NULL = 0 */
    int64_t *defaults;
    size_t ndefaults; /* `defaults:` list of full configs, nparams each */
    size_t nslots;
    int64_t *fixed; /* current values of every slot outside the parameters (problem, device) */
} at_space;

/* Parses a space from YAML text (libyaml). Errors (AT_ERR_TEMPLATE) name the line and key. */
at_status at_space_load(const char *yaml, size_t len, at_space **out);
void at_space_free(at_space *s); /* accepts NULL */

/* Sets a problem variable ("m") or a device variable ("device.local_mem_bytes" or
 * "local_mem_bytes"). AT_ERR_INVALID_ARG if the space has no such variable. Unset ones are 0. */
at_status at_space_set(at_space *s, const char *name, int64_t value);

/* 1 if the space declares problem variable name (`problem:`): for variables only some of an
 * operation's templates use. */
int at_space_has_problem(const at_space *s, const char *name);

/* Number of configurations before constraints (product of value counts; saturates). */
uint64_t at_space_total(const at_space *s);

/* Fills slots (s->nslots) for the config (s->nparams values): parameters, fixed values, derived.
 * Returns false when a derived value cannot be evaluated (division by zero). */
bool at_space_slots(const at_space *s, const int64_t *cfg, int64_t *slots);
/* True if every constraint holds; otherwise why (may be NULL) names the first failing one. */
bool at_space_valid(const at_space *s, const int64_t *cfg, char *why, size_t whylen);

/* Every valid configuration, in lexicographic order of value indices (first parameter
 * slowest). *configs is malloc'd, n * nparams values. Also the per-parameter value index form
 * for the search (*idx, n * nparams uint16, may be NULL). */
at_status at_space_enumerate(const at_space *s, int64_t **configs, uint16_t **idx, size_t *n);

/* Launch geometry for a config. */
at_status at_space_launch(const at_space *s, const int64_t *cfg, size_t global[3], size_t local[3]);
/* Dynamic shared memory bytes per block (`launch: shared:`), workspace bytes (`workspace:`, zero
 * before a launch and left zero by it) and scratch bytes (`scratch:`, after the workspace in the
 * same buffer, their contents undefined before and after) of a config; 0 where the space has
 * none. Any output may be NULL. AT_ERR_TEMPLATE when one is negative or cannot be evaluated. */
at_status at_space_memory(const at_space *s, const int64_t *cfg, size_t *shared, size_t *workspace,
                          size_t *scratch);
/* Blocks per thread-block cluster along dimension 0 (`launch: cluster:`; 1 where the space has
 * none) of a config. AT_ERR_TEMPLATE when it is not positive, cannot be evaluated, or does not
 * divide the grid's blocks along dimension 0 (global[0] / local[0]). */
at_status at_space_cluster(const at_space *s, const int64_t *cfg, size_t *cluster);
/* A hash of what a configuration's code and results depend on: the kernel name, parameters and
 * their values, problem and device variables, derived values, constraints, defines, launch,
 * workspace and arguments — not comments, formatting, defaults or where the template applies. */
uint64_t at_space_fingerprint(const at_space *s, uint64_t seed);
/* 1 if list (n names) is empty or holds name; for `archs:` an entry also matches name followed
 * by ":features". */
int at_space_lists(char *const *list, size_t n, const char *name, int arch);

/* The AT_TMAP_NEXPR values of tensor-map argument `arg` (AT_ARG_TENSORMAP) for a config, `when`
 * 1 when absent. AT_ERR_TEMPLATE naming the argument and key when one cannot be evaluated. */
at_status at_space_tmap(const at_space *s, const int64_t *cfg, size_t arg, int64_t *out);

/* Value of any slot by name (parameter, problem, device or derived) for a config. */
at_status at_space_value(const at_space *s, const int64_t *cfg, const char *name, int64_t *out);

/* "BM=64,BN=32,..." in parameter order. Returns the length written (truncates safely). */
size_t at_config_format(const at_space *s, const int64_t *cfg, char *buf, size_t len);
/* Parses "BM=64,BN=32,..."; every parameter must appear once with an allowed value. */
at_status at_config_parse(const at_space *s, const char *text, int64_t *cfg);
/* "-DBM=64 -DBN=32 ... -DEDGE_M=1" for the compiler: parameters then `defines:`. */
at_status at_config_defines(const at_space *s, const int64_t *cfg, char *buf, size_t len);

#endif
