/* cuda.h — CUDA C++ preamble of the portable kernel dialect.
 *
 * Prepended to every template source (templates/<name>.cl) when the CUDA backend compiles it with
 * NVRTC (--std=c++17 -default-device -arch=sm_XX, then the -D tuning parameters). It provides
 * exactly the names of templates/common/opencl.h, with the same semantics, so the template body
 * compiles unchanged; see opencl.h for the contract. Launch geometry follows OpenCL: local size
 * = blockDim, global size = total work-items, grid = ceil(global / local).
 *
 * Conventions kept (as in opencl.h):
 *   - index queries return int (a grid larger than 2^31 work-items per dimension is unsupported);
 *   - dimension 0 is the fastest-varying one (CUDA x); dimensions >= 3 answer like OpenCL's
 *     (id 0, size 1);
 *   - VLOAD/VSTORE need only element (float) alignment, like OpenCL vloadn/vstoren, and accept
 *     global, shared and private pointers (CUDA generic pointers): they move lane by lane
 *     (with alignment unknown, ptxas keeps 32-bit accesses: no LDG.128/LDS.128);
 *   - vector types support + - * with each other (and with a scalar, as in OpenCL C), and
 *     VBCAST turns a scalar into a vector.
 * CUDA has float2/float4 but no float8/float16 and no vector arithmetic, so this file defines
 * at_float8/at_float16 (with OpenCL's .lo/.hi halves) and the operators for all of them.
 * `long` is 64-bit as in OpenCL C only on LP64 hosts (Linux); templates use it for 64-bit
 * offsets. Internal names start with at_/AT_. */
#ifndef AT_CUDA_H
#define AT_CUDA_H

/* ---- address spaces and qualifiers ---------------------------------------------------------- */
/* An entry point; extern "C" keeps its name unmangled for cuModuleGetFunction. If the backend
 * defines AT_MAX_THREADS (-DAT_MAX_THREADS=n, the work-group size), the kernel also gets
 * __launch_bounds__(n) so ptxas keeps its register use launchable with n threads. Without it a
 * kernel may use up to 255 registers and fail to launch with a large block (too many resources):
 * the backend should then check CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK against the local size. */
#ifdef AT_MAX_THREADS
#define KERNEL extern "C" __global__ __launch_bounds__(AT_MAX_THREADS)
#else
#define KERNEL extern "C" __global__
#endif
#define GLOBAL                 /* device memory buffer argument (CUDA: generic pointer) */
#define LOCAL     __shared__   /* declares a work-group shared array inside a kernel */
#define LOCAL_PTR              /* qualifies a pointer into LOCAL memory (generic pointer) */
#define CONSTANT  const        /* read-only data (kernel arguments and program-scope tables) */
#define RESTRICT  __restrict__ /* the pointer does not alias another argument */
/* A helper function; forced inline so private arrays passed by pointer stay in registers. Not
 * `static` (unlike opencl.h): NVRTC warns (#177-D) about every unreferenced static function, and
 * some helpers go unused in some configurations (gemm.cl's stage_tile when SA = SB = 0); an
 * unreferenced inline function draws no warning and emits no code. The same holds for the at_
 * helpers below. Helpers may take pointers into LOCAL memory (generic pointers in CUDA). */
#define INLINE __device__ __forceinline__

/* ---- synchronisation and work-item geometry -------------------------------------------------- */
#define BARRIER() __syncthreads() /* work-group barrier + shared memory fence */

/* d need not be a literal; with a constant d the switch folds to one special register. */
__device__ __forceinline__ int at_local_id(const int d)
{
    return d == 0 ? (int)threadIdx.x : d == 1 ? (int)threadIdx.y : d == 2 ? (int)threadIdx.z : 0;
}
__device__ __forceinline__ int at_group_id(const int d)
{
    return d == 0 ? (int)blockIdx.x : d == 1 ? (int)blockIdx.y : d == 2 ? (int)blockIdx.z : 0;
}
__device__ __forceinline__ int at_local_size(const int d)
{
    return d == 0 ? (int)blockDim.x : d == 1 ? (int)blockDim.y : d == 2 ? (int)blockDim.z : 1;
}
__device__ __forceinline__ int at_num_groups(const int d)
{
    return d == 0 ? (int)gridDim.x : d == 1 ? (int)gridDim.y : d == 2 ? (int)gridDim.z : 1;
}
#define LOCAL_ID(d)   at_local_id(d)   /* work-item index in its group (threadIdx) */
#define GROUP_ID(d)   at_group_id(d)   /* group index in the grid (blockIdx) */
#define LOCAL_SIZE(d) at_local_size(d) /* work-items per group (blockDim) */
#define NUM_GROUPS(d) at_num_groups(d) /* groups in the grid (gridDim) */
/* GROUP_ID * LOCAL_SIZE + LOCAL_ID (the backend launches without a global offset) */
#define GLOBAL_ID(d) (at_group_id(d) * at_local_size(d) + at_local_id(d))

/* ---- integer helpers ------------------------------------------------------------------------- */
#define MIN(a, b) min((a), (b)) /* int minimum (CUDA's overloaded min, like OpenCL's) */
#define MAX(a, b) max((a), (b)) /* int maximum */

/* ---- token helpers --------------------------------------------------------------------------- */
#define AT_CAT_(a, b) a##b
#define AT_CAT(a, b)  AT_CAT_(a, b) /* pastes after expanding macro arguments (e.g. VW) */
#define AT_PRAGMA(x)  _Pragma(#x)
/* Unroll the next loop n times: AT_UNROLL(UNROLL) -> _Pragma("unroll 4"). n is macro-expanded
 * before stringizing, so tuning parameters work; AT_UNROLL(1) keeps the loop rolled. */
#define AT_UNROLL(n) AT_PRAGMA(unroll n)

/* ---- float vectors of width 1, 2, 4, 8, 16 --------------------------------------------------- */
/* Widths 8 and 16: two halves, named like OpenCL's .lo/.hi. (float2/float4 are CUDA's, with
 * .x .y .z .w as in OpenCL.) */
struct at_float8 {
    float4 lo, hi;
};
struct at_float16 {
    at_float8 lo, hi;
};

/* VTYPE(w): the float vector type of width w (VTYPE(1) is plain float). */
#define AT_VTYPE_1  float
#define AT_VTYPE_2  float2
#define AT_VTYPE_4  float4
#define AT_VTYPE_8  at_float8
#define AT_VTYPE_16 at_float16
#define VTYPE(w)    AT_CAT(AT_VTYPE_, w)

/* Lane-wise operators of OpenCL C: vector op vector, vector op scalar, scalar op vector, unary
 * minus and the compound assignments. AT_VOPS2/4 spell out the lanes; AT_VOPSH recurses into
 * the .lo/.hi halves. */
#define AT_VOPS2(V, OP)                                                                            \
    __device__ __forceinline__ V operator OP(const V a, const V b)                                 \
    {                                                                                              \
        return make_float2(a.x OP b.x, a.y OP b.y);                                                \
    }
#define AT_VOPS4(V, OP)                                                                            \
    __device__ __forceinline__ V operator OP(const V a, const V b)                                 \
    {                                                                                              \
        return make_float4(a.x OP b.x, a.y OP b.y, a.z OP b.z, a.w OP b.w);                        \
    }
#define AT_VOPSH(V, OP)                                                                            \
    __device__ __forceinline__ V operator OP(const V a, const V b)                                 \
    {                                                                                              \
        V r;                                                                                       \
        r.lo = a.lo OP b.lo;                                                                       \
        r.hi = a.hi OP b.hi;                                                                       \
        return r;                                                                                  \
    }
/* the rest, given V op V and the broadcast at_bcast(V, x) */
#define AT_VOPS_REST(V, OP)                                                                        \
    __device__ __forceinline__ V operator OP(const V a, const float b)                             \
    {                                                                                              \
        return a OP at_bcast(V(), b);                                                              \
    }                                                                                              \
    __device__ __forceinline__ V operator OP(const float a, const V b)                             \
    {                                                                                              \
        return at_bcast(V(), a) OP b;                                                              \
    }                                                                                              \
    __device__ __forceinline__ V &operator OP##=(V &a, const V b) { return a = a OP b; }           \
    __device__ __forceinline__ V &operator OP##=(V &a, const float b)                              \
    {                                                                                              \
        return a = a OP at_bcast(V(), b);                                                          \
    }

/* at_bcast(tag, x): x in every lane of the tag's type (the tag only selects the overload). */
__device__ __forceinline__ float at_bcast(const float, const float x) { return x; }
__device__ __forceinline__ float2 at_bcast(const float2, const float x)
{
    return make_float2(x, x);
}
__device__ __forceinline__ float4 at_bcast(const float4, const float x)
{
    return make_float4(x, x, x, x);
}
__device__ __forceinline__ at_float8 at_bcast(const at_float8, const float x)
{
    at_float8 r;
    r.lo = r.hi = make_float4(x, x, x, x);
    return r;
}
__device__ __forceinline__ at_float16 at_bcast(const at_float16, const float x)
{
    at_float16 r;
    r.lo = r.hi = at_bcast(at_float8(), x);
    return r;
}

AT_VOPS2(float2, +)
AT_VOPS2(float2, -)
AT_VOPS2(float2, *)
AT_VOPS4(float4, +)
AT_VOPS4(float4, -)
AT_VOPS4(float4, *)
AT_VOPSH(at_float8, +)
AT_VOPSH(at_float8, -)
AT_VOPSH(at_float8, *)
AT_VOPSH(at_float16, +)
AT_VOPSH(at_float16, -)
AT_VOPSH(at_float16, *)
AT_VOPS_REST(float2, +)
AT_VOPS_REST(float2, -)
AT_VOPS_REST(float2, *)
AT_VOPS_REST(float4, +)
AT_VOPS_REST(float4, -)
AT_VOPS_REST(float4, *)
AT_VOPS_REST(at_float8, +)
AT_VOPS_REST(at_float8, -)
AT_VOPS_REST(at_float8, *)
AT_VOPS_REST(at_float16, +)
AT_VOPS_REST(at_float16, -)
AT_VOPS_REST(at_float16, *)

__device__ __forceinline__ float2 operator-(const float2 a) { return make_float2(-a.x, -a.y); }
__device__ __forceinline__ float4 operator-(const float4 a)
{
    return make_float4(-a.x, -a.y, -a.z, -a.w);
}
__device__ __forceinline__ at_float8 operator-(const at_float8 a)
{
    at_float8 r;
    r.lo = -a.lo;
    r.hi = -a.hi;
    return r;
}
__device__ __forceinline__ at_float16 operator-(const at_float16 a)
{
    at_float16 r;
    r.lo = -a.lo;
    r.hi = -a.hi;
    return r;
}

/* VLOAD(w, idx, ptr): the w floats ptr[idx*w .. idx*w+w-1] as a VTYPE(w). Element-wise, so only
 * float alignment is required (as OpenCL vloadn); ptr may be global, shared or private. */
__device__ __forceinline__ float2 at_vload2(const size_t i, const float *p)
{
    p += i * 2;
    return make_float2(p[0], p[1]);
}
__device__ __forceinline__ float4 at_vload4(const size_t i, const float *p)
{
    p += i * 4;
    return make_float4(p[0], p[1], p[2], p[3]);
}
__device__ __forceinline__ at_float8 at_vload8(const size_t i, const float *p)
{
    at_float8 r;
    r.lo = at_vload4(2 * i, p);
    r.hi = at_vload4(2 * i + 1, p);
    return r;
}
__device__ __forceinline__ at_float16 at_vload16(const size_t i, const float *p)
{
    at_float16 r;
    r.lo = at_vload8(2 * i, p);
    r.hi = at_vload8(2 * i + 1, p);
    return r;
}
#define AT_VLOAD_1(i, p)   ((p)[(i)])
#define AT_VLOAD_2(i, p)   at_vload2((i), (p))
#define AT_VLOAD_4(i, p)   at_vload4((i), (p))
#define AT_VLOAD_8(i, p)   at_vload8((i), (p))
#define AT_VLOAD_16(i, p)  at_vload16((i), (p))
#define VLOAD(w, idx, ptr) AT_CAT(AT_VLOAD_, w)(idx, ptr)

/* VSTORE(w, val, idx, ptr): writes the VTYPE(w) val to ptr[idx*w .. idx*w+w-1], element-wise. */
__device__ __forceinline__ void at_vstore2(const float2 v, const size_t i, float *p)
{
    p += i * 2;
    p[0] = v.x;
    p[1] = v.y;
}
__device__ __forceinline__ void at_vstore4(const float4 v, const size_t i, float *p)
{
    p += i * 4;
    p[0] = v.x;
    p[1] = v.y;
    p[2] = v.z;
    p[3] = v.w;
}
__device__ __forceinline__ void at_vstore8(const at_float8 v, const size_t i, float *p)
{
    at_vstore4(v.lo, 2 * i, p);
    at_vstore4(v.hi, 2 * i + 1, p);
}
__device__ __forceinline__ void at_vstore16(const at_float16 v, const size_t i, float *p)
{
    at_vstore8(v.lo, 2 * i, p);
    at_vstore8(v.hi, 2 * i + 1, p);
}
#define AT_VSTORE_1(v, i, p)     ((p)[(i)] = (v))
#define AT_VSTORE_2(v, i, p)     at_vstore2((v), (i), (p))
#define AT_VSTORE_4(v, i, p)     at_vstore4((v), (i), (p))
#define AT_VSTORE_8(v, i, p)     at_vstore8((v), (i), (p))
#define AT_VSTORE_16(v, i, p)    at_vstore16((v), (i), (p))
#define VSTORE(w, val, idx, ptr) AT_CAT(AT_VSTORE_, w)(val, idx, ptr)

/* VBCAST(w, x): the scalar x in every lane of a VTYPE(w). */
#define VBCAST(w, x) at_bcast(VTYPE(w)(), (float)(x))

/* VFMA(a, b, c): a * b + c, fused (one rounding, like OpenCL fma), on scalars or same-width
 * vectors, lane by lane. */
__device__ __forceinline__ float at_vfma(const float a, const float b, const float c)
{
    return fmaf(a, b, c);
}
__device__ __forceinline__ float2 at_vfma(const float2 a, const float2 b, const float2 c)
{
    return make_float2(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y));
}
__device__ __forceinline__ float4 at_vfma(const float4 a, const float4 b, const float4 c)
{
    return make_float4(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y), fmaf(a.z, b.z, c.z),
                       fmaf(a.w, b.w, c.w));
}
__device__ __forceinline__ at_float8 at_vfma(const at_float8 a, const at_float8 b,
                                             const at_float8 c)
{
    at_float8 r;
    r.lo = at_vfma(a.lo, b.lo, c.lo);
    r.hi = at_vfma(a.hi, b.hi, c.hi);
    return r;
}
__device__ __forceinline__ at_float16 at_vfma(const at_float16 a, const at_float16 b,
                                              const at_float16 c)
{
    at_float16 r;
    r.lo = at_vfma(a.lo, b.lo, c.lo);
    r.hi = at_vfma(a.hi, b.hi, c.hi);
    return r;
}
#define VFMA(a, b, c) at_vfma((a), (b), (c))

#endif
