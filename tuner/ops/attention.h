/* attention.h — the attention operation's own helpers (tests use them too): validation, key,
 * strides, the CPU reference of one row and the check's tolerances (docs/attention.md). */
#ifndef AT_OPS_ATTENTION_H
#define AT_OPS_ATTENTION_H

#include "tuner/tuner.h"

/* Checks sizes, head_dim, the head grouping, causal against the lengths, dtype, layout and
 * scale; AT_ERR_INVALID_ARG names the field. */
at_status at_attention_validate(const at_attention_problem *p);
/* Problem key "attention/f32/bshd/d64/causal/1x8x8/512x512": dtype, layout, head_dim, causal
 * or full, batch x heads x kv_heads, seq x seq_kv. */
void at_attention_key(const at_attention_problem *p, char *buf, size_t len);
/* The scale the kernels get: p->scale, or 1/sqrt(head_dim) when it is 0. */
float at_attention_scale(const at_attention_problem *p);

/* Element strides of Q and O (qs) and of K and V (kvs): {batch, head, seq}; head_dim is 1. */
typedef struct at_attention_strides {
    int64_t q[3], kv[3];
} at_attention_strides;
at_attention_strides at_attention_strides_of(const at_attention_problem *p);

/* The CPU reference of one row (batch b, query head h, query i): o[head_dim] (f32 of a double
 * computation), bound[head_dim] = sum_j p_j |v_j| (the scale of o's terms, for the check) and
 * *lse; scratch holds seq_kv doubles. A two-pass softmax in double: max first, then sums. */
void at_attention_reference_row(const at_attention_problem *p, const float *q, const float *k,
                                const float *v, int64_t b, int64_t h, int64_t i, float *o,
                                double *bound, double *lse, double *scratch);
/* Tolerances: |o - ref| <= tol_o * bound per element, |lse - ref| <= tol_lse * (1 + |ref|). */
void at_attention_tolerance(const at_attention_problem *p, double *tol_o, double *tol_lse);

#endif
