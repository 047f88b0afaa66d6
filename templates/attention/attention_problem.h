/* attention_problem.h — the problem defines of every attention template, with defaults so a
 * template also compiles stand-alone, and the offset type (docs/attention.md).
 *
 * The space computes them from the problem (`defines:` in each template's YAML):
 *   HEAD_DIM        D, the head dimension (contiguous in every buffer)
 *   CAUSAL          1: query i sees keys j <= i + (seq_kv - seq) (bottom-right alignment)
 *   EDGE_Q, EDGE_KV 0: seq / seq_kv are multiples of the template's query / key block, so the
 *                   bound checks compile away
 *   DT              the 16-bit templates' element type of Q, K, V and O: 0 IEEE half,
 *                   1 bfloat16; f32 templates do not read it
 *   IDX64           1: an element offset into Q, K, V or O can reach 2^31, so offsets are 64-bit
 * OpenCL C, CUDA/HIP C++ and plain C (host emulations include the templates). */
#ifndef AT_ATTENTION_PROBLEM_H
#define AT_ATTENTION_PROBLEM_H

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef EDGE_Q
#define EDGE_Q 1
#endif
#ifndef EDGE_KV
#define EDGE_KV 1
#endif
#ifndef DT
#define DT 0
#endif
#ifndef IDX64
#define IDX64 0
#endif

#if IDX64
typedef long idx_t;
#else
typedef int idx_t;
#endif

#endif
