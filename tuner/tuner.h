/* tuner.h — internal seams between the library API, the candidate pipeline, the templates and
 * the problems (GEMM now, attention later). Nothing here is public. */
#ifndef AT_TUNER_H
#define AT_TUNER_H

#include "cache/db.h"
#include "tuner/space/space.h"
#include "tuner/backend.h"
#include "base/util.h"

#include <stdio.h>

struct at_context {
    const at_backend_ops *ops;
    at_bdev *dev;
    at_device_info info;
    at_db *db;
    char *db_path;
    int compile_threads;
    int device_index;
    char last_error[4096];
};

/* Records the thread's last detailed message on the context and returns s. */
at_status at_ctx_fail(at_context *ctx, at_status s);

/* ---- templates ---------------------------------------------------------------------------- */

typedef struct at_template {
    at_space *space;
    char *source;  /* backend preamble + kernel source, ready to compile */
    char hash[17]; /* hash of source and space text: results are trusted only for it */
} at_template;

/* Loads templates/<name>.yaml and its source for a backend, from $AUTOTUNE_TEMPLATE_PATH when
 * set, else from the copies embedded at build time. */
at_status at_template_load(const char *name, const char *backend, at_template **out);
void at_template_free(at_template *t);
/* Sets the device variables of a space from a device's properties. */
at_status at_template_bind_device(at_template *t, const at_device_info *info);

/* ---- problems ----------------------------------------------------------------------------- */

/* What the pipeline needs of a problem, whatever the kernel: its variables, its buffers and
 * arguments, and a check of a candidate's output against the reference. */
typedef struct at_problem {
    const char *template_name;
    char key[256]; /* "gemm/f32/nn/1024x1024x1024" */
    /* Sets the problem's variables in the space. */
    at_status (*bind)(struct at_problem *p, at_space *s);
    /* Allocates and fills device buffers, computes the reference. */
    at_status (*prepare)(struct at_problem *p, at_context *ctx);
    /* Arguments of one launch on the prepared buffers. */
    size_t (*args)(struct at_problem *p, at_karg *args);
    /* Restores the output buffer before a checked run. */
    at_status (*reset)(struct at_problem *p, at_context *ctx);
    /* Reads the output and compares it with the reference. */
    at_status (*check)(struct at_problem *p, at_context *ctx, double *max_rel_error, int *ok);
    void (*release)(struct at_problem *p, at_context *ctx);
    /* A predicted cost per config of the bound space (lower is better, any scale) from a
     * problem-specific cost model, the search's prior; NULL, or AT_ERR_UNSUPPORTED, for none. */
    at_status (*prior)(struct at_problem *p, const at_space *s, const at_device_info *d,
                       const int64_t *configs, size_t n, double *out);
    void *self;
} at_problem;

/* ---- GEMM --------------------------------------------------------------------------------- */

/* Checks sizes, layout, dtype and leading dimensions; AT_ERR_INVALID_ARG names the field. */
at_status at_gemm_validate(const at_gemm_problem *p, const at_context *ctx);
/* Problem key "gemm/f32/nn/MxNxK". */
void at_gemm_key(const at_gemm_problem *p, char *buf, size_t len);
const char *at_layout_name(at_layout l);
const char *at_dtype_name(at_dtype d);
/* The problem for the pipeline (random inputs in [-1, 1] with a fixed seed). */
at_status at_gemm_problem_make(const at_gemm_problem *g, at_problem **out);
void at_gemm_problem_free(at_problem *p);
/* Binds the GEMM problem variables (m n k ta tb big, and dt for 16-bit types) in a space. */
at_status at_gemm_bind(const at_gemm_problem *g, at_space *s);
/* The CPU reference: C = alpha*op(A)*op(B) + beta*C for the rows in rows[0..nrows) (all rows
 * if rows is NULL), double accumulation; also the per-element error bound sum |alpha a b| +
 * |beta c| into bound (same shape as C, may be NULL). */
void at_gemm_reference(const at_gemm_problem *g, const float *a, const float *b, float *c,
                       double *bound, const int64_t *rows, size_t nrows);
/* Relative error tolerance for a dot product of length k accumulated in f32, with the output
 * rounded to d. */
double at_gemm_tolerance(int64_t k, at_dtype d);
/* The template for a dtype on a backend and compile target ("gemm", "gemm_mma", "gemm_wgmma" for
 * sm_90a), NULL if there is none. arch may be NULL (not Hopper). */
const char *at_gemm_template_name(at_dtype d, const char *backend, const char *arch);
/* Element size, and conversions between f32 and an element type (round to nearest even). */
size_t at_dtype_size(at_dtype d);
void at_dtype_from_f32(at_dtype d, const float *src, void *dst, size_t n);
void at_dtype_to_f32(at_dtype d, const void *src, float *dst, size_t n);

/* ---- kernels and the pipeline ------------------------------------------------------------- */

struct at_kernel {
    at_context *ctx;
    at_bprog *prog;
    at_gemm_problem problem;
    char config[512];
    size_t global[3], local[3], dims;
    size_t shared_bytes; /* dynamic shared memory per block (`launch: shared:`) */
    at_bbuf workspace;   /* zeroed scratch (`workspace:`), the trailing argument; NULL handle:
                          * none. The kernel leaves it zeroed, so it is cleared only once. */
};

/* Compiles (or loads from the binaries table) the template at a configuration string for a
 * bound space, and makes a kernel. */
at_status at_kernel_build(at_context *ctx, at_template *t, const at_gemm_problem *g,
                          const char *config, at_kernel **out);

/* Makes *ws a zeroed device buffer of at least bytes (reallocated when smaller; 0 bytes frees
 * it), waiting until the zeroing is done so any stream may use it. */
at_status at_workspace_ensure(at_context *ctx, at_bbuf *ws, size_t bytes);

/* 1 if a compiled kernel fits the device: no spills, no serialized wgmma, static shared memory
 * within local_mem_bytes, a work-group the kernel can run, registers x threads within the
 * block's register budget. Otherwise 0 and why says which
 * limit. Unknown counts pass. */
int at_resources_fit(const at_device_info *info, const at_resources *r, int64_t threads, char *why,
                     size_t whylen);

/* Compiles configurations of t's space (bound to a problem and ctx->info) on ctx's device or
 * compile-only target, without running them; see at_gemm_compile_space. */
at_status at_pipeline_compile(at_context *ctx, at_template *t, int64_t limit, uint64_t seed,
                              at_compile_report *rep);

/* Tunes problem p with template t (already bound to p and the device). */
at_status at_pipeline_tune(at_context *ctx, at_template *t, at_problem *p,
                           const at_tune_options *opts, at_tune_report *rep, char *best_config,
                           size_t best_len);

#endif
