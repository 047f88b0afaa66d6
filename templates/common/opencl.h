/* opencl.h — OpenCL C preamble of the portable kernel dialect.
 *
 * Prepended to every template source (templates/<name>.cl) when the OpenCL backend compiles it.
 * A template only uses the names below, never raw OpenCL builtins, so a CUDA or HIP preamble can
 * provide the same names (the way CLBlast runs its OpenCL kernels under CUDA) and the template
 * body compiles unchanged. Tuning parameters arrive as -D defines after this file.
 *
 * Conventions a backend preamble must keep:
 *   - index queries return int (a grid larger than 2^31 work-items per dimension is unsupported);
 *   - dimension 0 is the fastest-varying one (CUDA x);
 *   - VLOAD/VSTORE need only element (float) alignment, like OpenCL vloadn/vstoren, and accept
 *     global, local and private pointers;
 *   - vector types support + - * with each other, and VBCAST turns a scalar into a vector. */
#ifndef AT_OPENCL_H
#define AT_OPENCL_H

/* Templates test compile-time switches in ordinary conditions (`EDGE_M && row >= M`) and give
 * unroll hints the optimizer cannot always honour (a partial K tile): both are intended, and
 * PoCL would print a warning to the tuner's terminal for each candidate. */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#pragma clang diagnostic ignored "-Wconstant-logical-operand"
#endif

/* ---- address spaces and qualifiers ---------------------------------------------------------- */
#define KERNEL    __kernel   /* an entry point (CUDA: extern "C" __global__) */
#define GLOBAL    __global   /* device memory buffer argument */
#define LOCAL     __local    /* declares a work-group shared array (CUDA: __shared__) */
#define LOCAL_PTR __local    /* qualifies a pointer into LOCAL memory (CUDA: nothing) */
#define CONSTANT  __constant /* read-only constant memory */
#define RESTRICT  restrict   /* the pointer does not alias another argument */
/* A helper function; forced inline so private arrays passed by pointer stay in registers. */
#define INLINE static inline __attribute__((always_inline))

/* ---- synchronisation and work-item geometry -------------------------------------------------- */
#define BARRIER()     barrier(CLK_LOCAL_MEM_FENCE) /* work-group barrier + local memory fence */
#define LOCAL_ID(d)   ((int)get_local_id(d))       /* work-item index in its group (threadIdx) */
#define GROUP_ID(d)   ((int)get_group_id(d))       /* group index in the grid (blockIdx) */
#define LOCAL_SIZE(d) ((int)get_local_size(d))     /* work-items per group (blockDim) */
#define NUM_GROUPS(d) ((int)get_num_groups(d))     /* groups in the grid (gridDim) */
#define GLOBAL_ID(d)  ((int)get_global_id(d))      /* GROUP_ID * LOCAL_SIZE + LOCAL_ID */

/* ---- integer helpers ------------------------------------------------------------------------- */
#define MIN(a, b) min((a), (b)) /* int minimum */
#define MAX(a, b) max((a), (b)) /* int maximum */

/* ---- token helpers --------------------------------------------------------------------------- */
#define AT_CAT_(a, b) a##b
#define AT_CAT(a, b)  AT_CAT_(a, b) /* pastes after expanding macro arguments (e.g. VW) */
#define AT_PRAGMA(x)  _Pragma(#x)
/* Unroll the next loop n times: AT_UNROLL(UNROLL) -> _Pragma("unroll 4"). n is macro-expanded
 * before stringizing, so tuning parameters work; AT_UNROLL(1) keeps the loop rolled. */
#define AT_UNROLL(n) AT_PRAGMA(unroll n)

/* ---- float vectors of width 1, 2, 4, 8, 16 --------------------------------------------------- */
/* VTYPE(w): the float vector type of width w (VTYPE(1) is plain float). */
#define AT_VTYPE_1  float
#define AT_VTYPE_2  float2
#define AT_VTYPE_4  float4
#define AT_VTYPE_8  float8
#define AT_VTYPE_16 float16
#define VTYPE(w)    AT_CAT(AT_VTYPE_, w)

/* VLOAD(w, idx, ptr): the w floats ptr[idx*w .. idx*w+w-1] as a VTYPE(w). */
#define AT_VLOAD_1(i, p)   ((p)[(i)])
#define AT_VLOAD_2(i, p)   vload2((i), (p))
#define AT_VLOAD_4(i, p)   vload4((i), (p))
#define AT_VLOAD_8(i, p)   vload8((i), (p))
#define AT_VLOAD_16(i, p)  vload16((i), (p))
#define VLOAD(w, idx, ptr) AT_CAT(AT_VLOAD_, w)(idx, ptr)

/* VSTORE(w, val, idx, ptr): writes the VTYPE(w) val to ptr[idx*w .. idx*w+w-1]. */
#define AT_VSTORE_1(v, i, p)     ((p)[(i)] = (v))
#define AT_VSTORE_2(v, i, p)     vstore2((v), (i), (p))
#define AT_VSTORE_4(v, i, p)     vstore4((v), (i), (p))
#define AT_VSTORE_8(v, i, p)     vstore8((v), (i), (p))
#define AT_VSTORE_16(v, i, p)    vstore16((v), (i), (p))
#define VSTORE(w, val, idx, ptr) AT_CAT(AT_VSTORE_, w)(val, idx, ptr)

/* VBCAST(w, x): the scalar x in every lane of a VTYPE(w). */
#define VBCAST(w, x) ((VTYPE(w))(x))

/* VFMA(a, b, c): a * b + c, fused where the hardware can, on scalars or same-width vectors. */
#define VFMA(a, b, c) fma((a), (b), (c))

#endif
