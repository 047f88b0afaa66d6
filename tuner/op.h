/* op.h — operations (GEMM, and whatever comes next) behind one descriptor and a static registry:
 * everything the generic code (get/tune/fallback, the pipeline, the store) needs of a problem,
 * so that it never names an operation. docs/adding-an-operation.md says how to add one. */
#ifndef AT_OP_H
#define AT_OP_H

#include "tuner/backend.h"
#include "tuner/space/space.h"

#define AT_MAX_BUFFERS 8
#define AT_MAX_FIELDS  24

/* A field of an operation's problem: the public description and where its value lives in the
 * typed problem struct (int64_t for AT_FIELD_INT, an int-sized enum for AT_FIELD_CHOICE, int for
 * AT_FIELD_FLAG, float for AT_FIELD_REAL). */
typedef struct at_op_field {
    at_field_desc d;
    size_t offset;
} at_op_field;

/* One buffer of a checked run: host values (f32, exactly representable in dtype) that are
 * uploaded in the element type before every checked run, and for outputs read back afterwards.
 * NaN in an output's init marks values the kernel must not read (they poison a wrong result). */
typedef struct at_op_buffer {
    at_dtype dtype;
    size_t count; /* elements */
    float *init;
    int output;
    /* Optional, for an output: the check reads only these rows (row r is elements
     * [r * row_stride, r * row_stride + row_len)), so only they are read back (a big output is
     * never moved whole); nrows 0: the whole buffer. With row_stride 1, rows are where each row
     * starts (elements). The rows belong to the operation's data. */
    const int64_t *rows;
    size_t nrows, row_stride, row_len;
} at_op_buffer;

/* The host side of checking candidates on one problem: buffers in role order, and the
 * operation's own reference and check state in self. */
typedef struct at_op_data {
    at_op_buffer buf[AT_MAX_BUFFERS];
    void *self;
} at_op_data;

typedef struct at_op {
    const char *name; /* "gemm" */
    const char *help; /* what it computes, for --help */
    size_t size;      /* bytes of the typed problem (at_gemm_problem) */
    const at_op_field *fields;
    size_t nfields;
    const char *const *roles; /* buffers in at_kernel_launch order, NULL-terminated */
    /* Checks a problem; AT_ERR_INVALID_ARG names the field and the accepted range. */
    at_status (*validate)(const void *p);
    /* The database key of the problem, "gemm/f32/nn/MxNxK". */
    void (*key)(const void *p, char *buf, size_t len);
    /* Optional: sets the fields of p (made with its defaults) that database key `key` names,
     * with at_problem_set; AT_ERR_INVALID_ARG when key is not one of this operation's. The
     * inverse of key: at_problem_from_key checks the round trip. */
    at_status (*parse_key)(const char *key, at_problem *p);
    /* How far the problem with database key `key` (same operation) is from p, for the
     * nearest-shape fallback; INFINITY when it cannot stand in for p (another dtype, layout). */
    double (*distance)(const void *p, const char *key);
    /* The element type name that selects a template by its `dtypes:` ("f16"). */
    const char *(*dtype)(const void *p);
    /* Sets the problem variables a template's space declares. */
    at_status (*bind)(const void *p, at_space *s);
    /* The value of a scalar kernel argument by name (`i32: m`, `f32: alpha`); AT_ERR_TEMPLATE
     * for a name the operation does not have. Integers in *i, reals in *f. */
    at_status (*scalar)(const void *p, const char *name, int64_t *i, double *f);
    /* The buffers of a checked run in role order — dtype, count, output; nothing allocated —
     * so that their sizes are checked against the device before any memory is spent. */
    at_status (*layout)(const void *p, at_op_buffer *out);
    /* Fills d: inputs, outputs' initial contents, and the reference to check against. */
    at_status (*data_make)(const void *p, at_op_data *d);
    /* Compares the outputs read back (f32, one array per buffer, NULL for inputs) with the
     * reference. */
    at_status (*check)(const void *p, const at_op_data *d, float *const *out, double *max_rel_error,
                       int *ok);
    void (*data_free)(at_op_data *d); /* frees the buffers' init and self */
    /* Work and traffic of one run, for GFLOP/s and GB/s. */
    double (*flops)(const void *p);
    double (*bytes)(const void *p);
    /* Optional: a predicted cost per config of a bound space (lower is better), the model
     * search's prior; NULL or AT_ERR_UNSUPPORTED for none. */
    at_status (*prior)(const void *p, const at_space *s, const at_device_info *d,
                       const int64_t *configs, size_t n, double *out);
    /* Optional: for a problem too big to time whole within a budget, the database key of a
     * smaller problem of this operation whose candidates rank like p's (the same tile grid),
     * with about `fraction` of its work, s being the space bound to p; AT_ERR_UNSUPPORTED when
     * none is worth it. GEMM: a slice of K, a multiple of the space's largest BK. */
    at_status (*proxy)(const void *p, const at_space *s, double fraction, char *key, size_t len);
} at_op;

/* ---- the registry -------------------------------------------------------------------------- */

extern const at_op at_op_gemm;
extern const at_op at_op_attention;

/* The operation by name; NULL if none. */
const at_op *at_op_find(const char *name);
/* Adds an operation defined outside the library (tests, tools) — call before any other use,
 * e.g. from a constructor. AT_ERR_INVALID_ARG for a duplicate name or a full table. */
at_status at_op_register(const at_op *op);
/* The number of op's buffers: its roles up to the NULL (0 without roles). Not bounded: more
 * than AT_MAX_BUFFERS is what at_op_register refuses. */
size_t at_op_nroles(const at_op *op);

/* ---- problems ------------------------------------------------------------------------------ */

struct at_problem {
    const at_op *op;
    void *data;   /* op->size bytes: the typed problem */
    uint64_t set; /* fields set explicitly (bit i: field i) */
};

/* A problem viewing a typed struct the caller owns (every field counts as set); a value, never
 * given to at_problem_destroy, which frees what at_problem_create and at_problem_resolve make. */
at_problem at_problem_view(const at_op *op, const void *typed);
/* A copy of p with its defaults applied ("=m"), owning its data; NULL when out of memory. */
at_problem *at_problem_resolve(const at_problem *p);
/* Every field's value as text after the operation's name ("gemm,64,64,64,..."): what tells
 * two resolved problems apart (the database key leaves out some fields, e.g. GEMM's lda). */
void at_problem_signature(const at_problem *p, char *buf, size_t len);
/* Checks every field is set and valid (the operation's validate). */
at_status at_problem_validate(const at_problem *p);

/* ---- kernel arguments ---------------------------------------------------------------------- */

#define AT_MAX_TMAPS 8 /* tensor maps one launch passes (a template may list more: `when:`) */

/* One launch's arguments built from a template's `arguments:` list. */
typedef struct at_arglist {
    at_karg a[AT_MAX_ARGS];
    union {
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
        void *ptr;
    } v[AT_MAX_ARGS];
    size_t n;
    /* encoded tensor maps, at_arglist_map's 64-byte aligned slots (an arglist may live in
     * malloc'd memory, which _Alignas does not align) */
    unsigned char mapbuf[(AT_MAX_TMAPS + 1) * AT_TMAP_BYTES];
    size_t nmaps;
} at_arglist;

/* The next tensor-map slot of l (AT_TMAP_BYTES, 64-byte aligned, zeroed); NULL when all
 * AT_MAX_TMAPS are taken. */
unsigned char *at_arglist_map(at_arglist *l);

/* What tensor-map arguments are made from: their descriptions for the config (at_args_maps, one
 * per argument of the list) and the device that encodes them (ops NULL: zeroed placeholders,
 * for a list whose maps the device half encodes). */
typedef struct at_tmap_src {
    const at_tmap_desc *desc;
    const at_backend_ops *ops;
    at_bdev *dev;
} at_tmap_src;

/* Builds the arguments of a template's list (`arguments:`, nargs entries) for problem p:
 * buffers by role from handles (in the operation's role order; NULL: placeholders), scalars
 * from the operation, the workspace when ws is not NULL (a config whose `workspace:` is 0 takes
 * none), tensor maps from maps (those whose `when:` is false left out; maps NULL: every one a
 * zeroed placeholder, as when no config is known yet). The one argument builder: tuning, the
 * library's launch and the test fake all use it. AT_ERR_TEMPLATE names a role or scalar the
 * operation does not have; a map the device cannot encode fails as at_tmap_encode says. */
at_status at_args_build(const at_arg *args, size_t nargs, const at_problem *p, void *const *handles,
                        const void *ws, const at_tmap_src *maps, at_arglist *out);
/* The tensor-map arguments of space s (bound to p) at config cfg, one desc per argument (other
 * kinds left zero). AT_ERR_TEMPLATE naming the argument when a value is out of range (sizes
 * and box below 1, ld below cols, swizzle not 0, 32, 64 or 128, a role p does not have). */
at_status at_args_maps(const at_space *s, const int64_t *cfg, const at_problem *p,
                       at_tmap_desc *out);
/* Encodes desc for the buffer at handle into out (AT_TMAP_BYTES) with ops' encode_tensor_map;
 * AT_ERR_UNSUPPORTED when the backend has none. */
at_status at_tmap_encode(const at_backend_ops *ops, at_bdev *dev, const at_tmap_desc *desc,
                         const void *handle, void *out);
/* The position of an argument (kind and name; any name for the workspace) in a list of nargs
 * built with no workspace skipped, -1 if absent. */
int at_args_index(const at_arg *args, size_t nargs, at_arg_kind kind, const char *name);

#endif
