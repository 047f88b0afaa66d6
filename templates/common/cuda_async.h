/* cuda_async.h — global -> shared memory staging for the CUDA templates (sm_80 and later):
 * PTX wrappers for shared-memory addresses, cp.async and 16-byte shared stores, and the copies
 * of one 16-byte chunk and of a whole tile built on them, shared by gemm_mma.cu and
 * gemm_wgmma.cu.
 *
 * A host emulation defines AT_PTX_EMULATE and its own at_saddr, at_smem_addr, at_cp_async16,
 * at_cp_commit, at_cp_wait, at_st_shared16 and at_st_shared32 before including a template
 * (tests/unit/wgmma_emu/emu.h); at_stage_chunk16 and at_stage_tile then run on them unchanged. */
#ifndef AT_CUDA_ASYNC_H
#define AT_CUDA_ASYNC_H

/* ---- PTX primitives -------------------------------------------------------------------------- */
#ifndef AT_PTX_EMULATE
typedef unsigned at_saddr; /* a shared-memory (state space) byte address */

/* Dynamic shared memory (launch `shared:` bytes), 16-byte aligned. */
#define AT_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]

INLINE at_saddr at_smem_addr(const void *p)
{
    at_saddr a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

/* 16 bytes from global src to shared dst, of which the first `bytes` (0..16) are read and the
 * rest zero-filled. src must be 16-byte aligned (a valid address even when bytes == 0). */
INLINE void at_cp_async16(const at_saddr dst, const void *src, const int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
                 : "memory");
}
/* Closes this thread's group of cp.async copies; at_cp_wait<N> waits until at most N of its
 * groups are still in flight. */
INLINE void at_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> INLINE void at_cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

INLINE void at_st_shared16(const at_saddr dst, const unsigned w0, const unsigned w1,
                           const unsigned w2, const unsigned w3)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w0), "r"(w1), "r"(w2),
                 "r"(w3)
                 : "memory");
}
/* One 32-bit word (two 16-bit elements) to shared memory at dst (4-byte aligned). */
INLINE void at_st_shared32(const at_saddr dst, const unsigned w)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(dst), "r"(w) : "memory");
}
#endif /* AT_PTX_EMULATE */

/* ---- staging one chunk ----------------------------------------------------------------------- */

/* One 16-byte chunk of 8 16-bit elements into shared memory at dst: the first n (0..8) from src,
 * the rest zero. vec: cp.async, asynchronous (src 16-byte aligned, and a valid address even when
 * n == 0); else 16-bit loads and one 16-byte shared store, synchronous (any src alignment). */
INLINE void at_stage_chunk16(const at_saddr dst, const unsigned short *src, const int n,
                             const bool vec)
{
    if (vec) {
        at_cp_async16(dst, src, n * 2);
    } else {
        unsigned w[4];
        AT_UNROLL(4)
        for (int j = 0; j < 4; ++j) {
            const unsigned lo = 2 * j < n ? src[2 * j] : 0u;
            const unsigned hi = 2 * j + 1 < n ? src[2 * j + 1] : 0u;
            w[j] = lo | (hi << 16);
        }
        at_st_shared16(dst, w[0], w[1], w[2], w[3]);
    }
}

/* ---- staging a tile -------------------------------------------------------------------------- */

/* Stages the tile whose element (r, c) is g[(row0 + r) * ld + col0 + c] (r < ROWS, c < COLS),
 * zero where row0 + r >= nrows (checked when ER) or col0 + c >= ncols (when EC), in chunks of 8
 * elements along c: chunk cc of row r (elements c = 8 cc ..) goes to dst + off(r, cc), the
 * template's shared layout. NTHREADS threads cooperate, consecutive threads on consecutive chunks.
 * vec: cp.async (16-byte aligned chunks); else 16-bit loads and 16-byte shared stores. */
template <int ROWS, int COLS, int NTHREADS, int ER, int EC, class Idx, class Off>
INLINE void at_stage_tile(const at_saddr dst, const unsigned short *RESTRICT g, const Idx ld,
                          const int row0, const int col0, const int nrows, const int ncols,
                          const int tid, const bool vec, const Off off)
{
    constexpr int R = COLS / 8;
    constexpr int CH = ROWS * R;
    AT_UNROLL((CH + NTHREADS - 1) / NTHREADS)
    for (int i = 0; i < (CH + NTHREADS - 1) / NTHREADS; ++i) {
        const int c = tid + i * NTHREADS;
        if (CH % NTHREADS == 0 || c < CH) {
            const int r = c / R, cc = c % R;
            const int gr = row0 + r, gc = col0 + cc * 8;
            int n = 8;
            if (ER && gr >= nrows) n = 0;
            if (EC) n = MIN(n, MAX(ncols - gc, 0));
            /* nothing to read: point at the (valid, aligned) base instead */
            const unsigned short *src = n > 0 ? g + ((Idx)gr * ld + gc) : g;
            at_stage_chunk16(dst + off(r, cc), src, n, vec);
        }
    }
}

#endif
