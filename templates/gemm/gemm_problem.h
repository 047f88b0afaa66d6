/* gemm_problem.h — the problem defines of every GEMM template (gemm.cl, gemm_mma.cu,
 * gemm_wgmma.cu, gemm_mfma.hip), with defaults so a template also compiles stand-alone, and the
 * offset type.
 *
 * The space computes them from the problem (`defines:` in each template's YAML):
 *   TA, TB          1: op(A) = A^T (A stored K x M), op(B) = B^T (B stored N x K)
 *   EDGE_M/N/K      0: the dimension is a multiple of its block tile, bounds checks compile away
 *   DT              the 16-bit templates' element type of A, B and C: 0 IEEE half, 1 bfloat16
 *                   (raw 16-bit patterns); gemm.cl is f32 and does not read it
 *   IDX64           1: an operand spans 2^31 elements or more, so element offsets are 64-bit
 * OpenCL C, CUDA/HIP C++ and plain C: tests/unit/test_hip_mfma.c includes gemm_mfma.hip, and so
 * this file, from C. */
#ifndef AT_GEMM_PROBLEM_H
#define AT_GEMM_PROBLEM_H

#ifndef TA
#define TA 0
#endif
#ifndef TB
#define TB 0
#endif
#ifndef EDGE_M
#define EDGE_M 1
#endif
#ifndef EDGE_N
#define EDGE_N 1
#endif
#ifndef EDGE_K
#define EDGE_K 1
#endif
#ifndef DT
#define DT 0
#endif
#ifndef IDX64
#define IDX64 0
#endif

/* An element offset into A, B or C. 32-bit arithmetic is measurably cheaper where it suffices;
 * `long` is 64-bit in OpenCL C and in CUDA/HIP on LP64 hosts. */
#if IDX64
typedef long idx_t;
#else
typedef int idx_t;
#endif

#endif
