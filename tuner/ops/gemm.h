/* gemm.h — the GEMM operation's own helpers (tests use them too): validation, key, the problem
 * variables of its spaces, the CPU reference and its tolerance. */
#ifndef AT_OPS_GEMM_H
#define AT_OPS_GEMM_H

#include "tuner/tuner.h"

/* Checks sizes, layout, dtype and leading dimensions; AT_ERR_INVALID_ARG names the field. */
at_status at_gemm_validate(const at_gemm_problem *p);
/* Problem key "gemm/f32/nn/MxNxK". */
void at_gemm_key(const at_gemm_problem *p, char *buf, size_t len);
const char *at_layout_name(at_layout l);
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

#endif
