/* gemm_cpu.cl — f32 GEMM template for OpenCL on CPUs (PoCL): one work-item, a CPU sgemm
 * micro-kernel over packed panels. Docs: docs/gemm-cpu.md.
 *
 *   C = alpha * op(A) * op(B) + beta * C        all matrices row-major (layouts as in gemm.cl)
 *
 * Shaped like OpenBLAS's and BLIS's AVX-512 sgemm rather than like a GPU kernel. A work-item
 * owns an MB x NC block of C (MB = RS * MT rows, NC = NT column strips of NB = NV * VW) and
 * walks K in blocks of KC. For each K block it copies the KC x MB panel of op(A) into a
 * contiguous private array (PA); then for each of its NT column strips the KC x NB panel of
 * op(B) (PB; transposing it when B is stored N x K), and for each of its MT row strips it runs
 * the micro-kernel: an RS x NV register tile of VW-wide vectors (RS * NV accumulators: 14 x 2
 * or 6 x 4 zmm of 16 floats fill AVX-512's 32 registers), one broadcast of A and NV vector loads
 * of B per k-step, UK k-steps per loop iteration. No barrier and no local memory: PoCL compiles the work-item as straight-line
 * vector code and runs one work-item per work-group.
 *
 * Packing turns the per-k-step jumps of ldb (one 4-KiB page per k-step at n = 1024, which the
 * L1 cache and TLB cannot hold) into a walk through a few KiB, and makes op(B) in either layout
 * a contiguous vector read. The micro-kernel's partial sums of one K block go to C: the first
 * block writes alpha * acc + beta * C, the later ones add alpha * acc, so C is read before the
 * first write only when beta != 0.
 *
 * Tuning parameters (-D; constraints in gemm_cpu.yaml):
 *   VW      vector width in floats (8: AVX2 ymm, 16: AVX-512 zmm)
 *   RS, NV  micro-tile: RS rows x NV vectors (accumulators RS * NV, kept in registers)
 *   MT      row strips per work-item (MB = RS * MT rows share one packed B panel)
 *   NT      column strips per work-item (NC = NB * NT columns share one packed A panel: with
 *           NT = 1 every work-item of a block row packs the A panel again, N / NB times over a
 *           K block; NT > 1 needs PA)
 *   KC      K block: the packed panels hold KC k-steps
 *   PA, PB  1: pack the op(A) / op(B) panel per K block; 0: read it in place (PA needs ta = 1
 *           to be a contiguous copy; PB = 0 needs tb = 0)
 *   UK      unroll factor of the micro-kernel's k loop
 *   GM      1: work-item index 0 runs along M (consecutive work-items read the same B panel
 *           while it is in cache); 0: along N
 *   DOT     1 (ta = 0, tb = 1 only, no packing): the micro-kernel runs its vectors along K
 *           instead: RS rows of A and NV columns of op(B) (rows of the stored B) are read as
 *           contiguous VW-float runs, acc[r][c] += a[r] * b[c] lane-wise, the lanes summed at the
 *           end: an RS x NV block of C per strip, no transpose and no packing (the nt layout
 *           with few rows, e.g. a 16-token LLM layer, where packing B costs more than it saves)
 *   SP      1: the packed panels are shared: each is packed once, into the scratch after the
 *           workspace's panel states, by the work-items that first need it, and read there by
 *           all of them (below, "shared packs"); 0: every work-item packs its own, privately
 * Problem defines (gemm_problem.h): TA, TB, EDGE_M/N/K (m, n, k not multiples of MB, NB, KC),
 * IDX64.
 */

#include "gemm_problem.h"

#define NB (DOT ? NV : NV * VW) /* columns of C per packed B panel (a column strip) */
#define NC (NB * NT)             /* columns of C per work-item: NT column strips */
#define MB (RS * MT)             /* rows of C per work-item */

typedef VTYPE(VW) floatv;

#ifndef SP
#define SP 0
#endif
#if SP
#define PACKED GLOBAL /* the packed panels: the workspace's, shared by the work-items */
#else
#define PACKED /* the packed panels: private arrays of the work-item */
#endif

/* Packing reads rows of A and B from beyond the L2 at large sizes, one page per row when the
 * leading dimension is 4 KiB or more (the hardware prefetchers stop at page boundaries): touch
 * the row PF_ROWS ahead, a cache line at a time, while copying this one (+10 % at 4096^3 tn,
 * measured with the CPU time; docs/gemm-cpu.md). A prefetch never faults, also past the end. */
#define PF_ROWS 16
#define PREFETCH(p) __builtin_prefetch((const float *)(ulong)(p))

/* ---- packing --------------------------------------------------------------------------------- */

/* TRANSPOSE(r): r[i][j] <- r[j][i] for a VW x VW block in VW vectors, in log2(VW) stages; the
 * stage of distance d swaps bit d of the row and of the lane index: rows i and i + d (i & d = 0)
 * exchange their off-diagonal d-lane blocks (lo: lane e from row i when e & d = 0, else lane
 * e - d of row i + d; hi: lane e + d of row i, else lane e of row i + d). Constant shuffles:
 * vpermt2ps / vshufps / vunpck on AVX-512, no memory. */
#define TR_STAGE(r, d)                                                                           \
    AT_UNROLL(VW)                                                                                \
    for (int i = 0; i < VW; ++i)                                                                 \
        if (!(i & d)) {                                                                          \
            const floatv lo = r[i], hi = r[i + d];                                               \
            r[i] = __builtin_shufflevector(lo, hi, TR_LO##d);                                    \
            r[i + d] = __builtin_shufflevector(lo, hi, TR_HI##d);                                \
        }
#if VW == 16
#define TR_LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define TR_HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define TR_LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define TR_HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define TR_LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define TR_HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define TR_LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define TR_HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#define TRANSPOSE(r)                                                                             \
    do {                                                                                         \
        TR_STAGE(r, 8) TR_STAGE(r, 4) TR_STAGE(r, 2) TR_STAGE(r, 1)                              \
    } while (0)
#elif VW == 8
#define TR_LO4 0, 1, 2, 3, 8, 9, 10, 11
#define TR_HI4 4, 5, 6, 7, 12, 13, 14, 15
#define TR_LO2 0, 1, 8, 9, 4, 5, 12, 13
#define TR_HI2 2, 3, 10, 11, 6, 7, 14, 15
#define TR_LO1 0, 8, 2, 10, 4, 12, 6, 14
#define TR_HI1 1, 9, 3, 11, 5, 13, 7, 15
#define TRANSPOSE(r)                                                                             \
    do {                                                                                         \
        TR_STAGE(r, 4) TR_STAGE(r, 2) TR_STAGE(r, 1)                                             \
    } while (0)
#endif

/* Bp[p * NB + j] = op(B)(k0 + p, col0 + j) for p < kb, j < NB; columns past N are zero. */
INLINE void pack_b(PACKED float *Bp, GLOBAL const float *RESTRICT B, const int ldb, const int N,
                   const int k0, const int kb, const int col0)
{
#if TB
    /* B stored N x K: each column of op(B) is contiguous along K. Per VW columns and VW k-steps:
     * VW vector loads along K, a VW x VW transpose in registers, VW vector stores along the
     * panel's rows (scalar stores were one store per element: a third of the micro-kernel's
     * time at 2048^3). Columns past N repeat the last column: they only feed columns of C that
     * are never stored. */
    AT_UNROLL(1)
    for (int j0 = 0; j0 < NB; j0 += VW) {
        long off[VW];
        AT_UNROLL(VW)
        for (int c = 0; c < VW; ++c)
            off[c] = (long)(EDGE_N ? MIN(col0 + j0 + c, N - 1) : col0 + j0 + c) * ldb + k0;
        int p = 0;
        AT_UNROLL(1)
        for (; p + VW <= kb; p += VW) {
            floatv r[VW];
            AT_UNROLL(VW)
            for (int c = 0; c < VW; ++c)
                r[c] = VLOAD(VW, 0, B + off[c] + p);
            TRANSPOSE(r);
            AT_UNROLL(VW)
            for (int l = 0; l < VW; ++l)
                VSTORE(VW, r[l], 0, Bp + (p + l) * NB + j0);
        }
        for (; p < kb; ++p) {
            AT_UNROLL(VW)
            for (int c = 0; c < VW; ++c)
                Bp[p * NB + j0 + c] = B[off[c] + p];
        }
    }
#else
    AT_UNROLL(1)
    for (int p = 0; p < kb; ++p) {
        GLOBAL const float *RESTRICT src = B + (idx_t)(k0 + p) * ldb + col0;
        AT_UNROLL(1)
        for (int j = 0; j < NB; j += 16)
            PREFETCH(src + (long)PF_ROWS * ldb + j);
        AT_UNROLL(NV)
        for (int v = 0; v < NV; ++v) {
            floatv x;
            const int avail = EDGE_N ? N - (col0 + v * VW) : VW;
            if (avail >= VW) {
                x = VLOAD(VW, 0, src + v * VW);
            } else {
                float t[VW];
                AT_UNROLL(VW)
                for (int l = 0; l < VW; ++l)
                    t[l] = l < avail ? src[v * VW + l] : 0.0f;
                x = VLOAD(VW, 0, t);
            }
            VSTORE(VW, x, 0, Bp + p * NB + v * VW);
        }
    }
#endif
}

/* The KC x MB panel of op(A) at (row0, k0), kb k-steps, in the layout its storage copies to
 * without a transpose: A stored M x K (ta = 0): Ap[i * KC + p], each row a contiguous run (the
 * rows of a strip are then KC floats apart, not lda: at lda = 1024 the 14 rows of a strip map to
 * one L1 set); A stored K x M (ta = 1): Ap[p * MB + i]. Rows past M are clamped (read, never
 * stored). */
INLINE void pack_a(PACKED float *Ap, GLOBAL const float *RESTRICT A, const int lda, const int M,
                   const int k0, const int kb, const int row0)
{
#if SP
    /* A shared panel is packed once and read by N / NC work-items: it takes the layout the
     * micro-kernel reads best whatever the copy costs, strip by strip, the RS values of each
     * k-step together: Ap[(s * KC + p) * RS + r] for row s * RS + r (a line every 16 / RS
     * k-steps, in order; the two layouts above cost tn and tt a line per k-step or RS streams) */
    AT_UNROLL(1)
    for (int s = 0; s < MT; ++s) {
        idx_t off[RS];
        AT_UNROLL(RS)
        for (int r = 0; r < RS; ++r) {
            const int row = EDGE_M ? MIN(row0 + s * RS + r, M - 1) : row0 + s * RS + r;
            off[r] = TA ? (idx_t)k0 * lda + row : (idx_t)row * lda + k0;
        }
        PACKED float *dst = Ap + (long)s * KC * RS;
        AT_UNROLL(1)
        for (int p = 0; p < kb; ++p) {
            AT_UNROLL(RS)
            for (int r = 0; r < RS; ++r)
                dst[p * RS + r] = A[off[r] + (TA ? (idx_t)p * lda : p)];
        }
    }
#elif TA
    AT_UNROLL(1)
    for (int p = 0; p < kb; ++p) {
        GLOBAL const float *RESTRICT src = A + (idx_t)(k0 + p) * lda;
        AT_UNROLL(1)
        for (int i = 0; i < MB; i += 16)
            PREFETCH(src + (long)PF_ROWS * lda + row0 + i);
        if (!EDGE_M || row0 + MB <= M) {
            AT_UNROLL(1)
            for (int i = 0; i + VW <= MB; i += VW)
                VSTORE(VW, VLOAD(VW, 0, src + row0 + i), 0, Ap + p * MB + i);
            AT_UNROLL(1)
            for (int i = MB - MB % VW; i < MB; ++i)
                Ap[p * MB + i] = src[row0 + i];
        } else {
            AT_UNROLL(1)
            for (int i = 0; i < MB; ++i)
                Ap[p * MB + i] = src[MIN(row0 + i, M - 1)];
        }
    }
#else
    AT_UNROLL(1)
    for (int i = 0; i < MB; ++i) {
        const int row = EDGE_M ? MIN(row0 + i, M - 1) : row0 + i;
        GLOBAL const float *RESTRICT src = A + (idx_t)row * lda + k0;
        AT_UNROLL(1)
        for (int p = 0; p < kb; p += 16)
            PREFETCH(src + (long)PF_ROWS * lda + p);
        int p = 0;
        AT_UNROLL(1)
        for (; p + VW <= kb; p += VW)
            VSTORE(VW, VLOAD(VW, 0, src + p), 0, Ap + i * KC + p);
        for (; p < kb; ++p)
            Ap[i * KC + p] = src[p];
    }
#endif
}

#if SP
/* ---- shared packs ------------------------------------------------------------------------------
 * Every panel of op(A) (row block x K block) and of op(B) (column strip x K block) is packed
 * once into the workspace and read there by all the work-items that need it, instead of once
 * by each of them (M / MB times over for a B panel, N / NC for an A panel). A panel's state is
 * four ints at the workspace's head: chunks claimed, chunks packed, users done. A work-item
 * that needs the panel claims chunks of CH k-steps until none is left and packs each (so two
 * work-items that arrive together pack half each), then waits for the chunks others claimed:
 * they are being packed by running work-items that wait for nothing, so the wait ends. The last
 * of the panel's users resets its state, so the head is zero again after every launch; the
 * panels themselves are scratch and are never read before they are packed. */
#define CH 32 /* k-steps per chunk: a multiple of VW, and KC a multiple of CH */
#define SHARED_PACK(f, kb, PACK_CHUNK)                                                           \
    do {                                                                                         \
        const int nch_ = ((kb) + CH - 1) / CH;                                                   \
        for (int ch_; (ch_ = atomic_inc(&(f)[0])) < nch_;) {                                     \
            const int c0 = ch_ * CH, cl = MIN(CH, (kb) - c0);                                   \
            PACK_CHUNK;                                                                          \
            mem_fence(CLK_GLOBAL_MEM_FENCE);                                                     \
            atomic_inc(&(f)[1]);                                                                 \
        }                                                                                        \
        while (atomic_add(&(f)[1], 0) < nch_)                                                    \
            ;                                                                                    \
        mem_fence(CLK_GLOBAL_MEM_FENCE);                                                         \
    } while (0)
/* One user of the panel is done; the last one resets its state. */
#define SHARED_DONE(f, users)                                                                    \
    do {                                                                                         \
        if (atomic_inc(&(f)[2]) == (users)-1) {                                                  \
            atomic_xchg(&(f)[0], 0);                                                             \
            atomic_xchg(&(f)[1], 0);                                                             \
            atomic_xchg(&(f)[2], 0);                                                             \
        }                                                                                        \
    } while (0)
#endif

/* ---- the kernel ------------------------------------------------------------------------------ */

KERNEL void gemm_cpu(const int M, const int N, const int K, const float alpha, const float beta,
                     GLOBAL const float *RESTRICT A, const int lda,
                     GLOBAL const float *RESTRICT B, const int ldb, GLOBAL float *C,
                     const int ldc
#if SP
                     ,
                     GLOBAL int *ws
#endif
)
{
    const int gx = GROUP_ID(0), gy = GROUP_ID(1);
    const int row0 = (GM ? gx : gy) * MB; /* origin of the work-item's block in C */
    const int colw = (GM ? gy : gx) * NC;

#if SP
    /* the workspace: panel states (A's, then B's), then the A panels, then the B panels */
    const int nkb = (K + KC - 1) / KC, nrb = (M + MB - 1) / MB, nsb = (N + NB - 1) / NB;
    GLOBAL int *const fa = ws;
    GLOBAL int *const fb = fa + 4 * PA * nkb * nrb;
    GLOBAL float *const pa0 = (GLOBAL float *)(fb + 4 * PB * nkb * nsb);
    GLOBAL float *const pb0 = pa0 + (long)PA * nkb * nrb * KC * MB;
#else
#if PB
    float Bp[KC * NB];
#endif
#if PA
    float Ap[KC * MB];
#endif
#endif

#if DOT
    /* ---- dot products along K (ta = 0, tb = 1) --------------------------------------------- */
    const int col0 = colw; /* NT == 1 */
    AT_UNROLL(1)
    for (int mt = 0; mt < MT; ++mt) {
        const int r0 = row0 + mt * RS;
        if (EDGE_M && r0 >= M)
            break;
        long aoff[RS], boff[NV]; /* rows of A and of the stored B (clamped at the edges) */
        AT_UNROLL(RS)
        for (int r = 0; r < RS; ++r)
            aoff[r] = (long)(EDGE_M ? MIN(r0 + r, M - 1) : r0 + r) * lda;
        AT_UNROLL(NV)
        for (int c = 0; c < NV; ++c)
            boff[c] = (long)(EDGE_N ? MIN(col0 + c, N - 1) : col0 + c) * ldb;
        floatv acc[RS][NV];
        AT_UNROLL(RS)
        for (int r = 0; r < RS; ++r) {
            AT_UNROLL(NV)
            for (int c = 0; c < NV; ++c)
                acc[r][c] = VBCAST(VW, 0.0f);
        }
        const int kv = K - K % VW; /* the K range read as whole vectors */
        AT_UNROLL(UK)
        for (int p = 0; p < kv; p += VW) {
            floatv a[RS], b[NV];
            AT_UNROLL(RS)
            for (int r = 0; r < RS; ++r)
                a[r] = VLOAD(VW, 0, A + aoff[r] + p);
            AT_UNROLL(NV)
            for (int c = 0; c < NV; ++c)
                b[c] = VLOAD(VW, 0, B + boff[c] + p);
            AT_UNROLL(RS)
            for (int r = 0; r < RS; ++r) {
                AT_UNROLL(NV)
                for (int c = 0; c < NV; ++c)
                    acc[r][c] = VFMA(a[r], b[c], acc[r][c]);
            }
        }
        AT_UNROLL(RS)
        for (int r = 0; r < RS; ++r) {
            const int row = r0 + r;
            if (EDGE_M && row >= M)
                break;
            AT_UNROLL(NV)
            for (int c = 0; c < NV; ++c) {
                const int col = col0 + c;
                if (EDGE_N && col >= N)
                    break;
                float t[VW];
                VSTORE(VW, acc[r][c], 0, t);
                float x = 0.0f;
                AT_UNROLL(VW)
                for (int l = 0; l < VW; ++l)
                    x += t[l];
                for (int p = kv; p < K; ++p) /* the K tail */
                    x = VFMA(A[aoff[r] + p], B[boff[c] + p], x);
                GLOBAL float *dst = C + (idx_t)row * ldc + col;
                *dst = beta != 0.0f ? VFMA(beta, *dst, alpha * x) : alpha * x;
            }
        }
    }
#else
    AT_UNROLL(1)
    for (int k0 = 0; k0 < K; k0 += KC) {
        const int kb = (EDGE_K && K - k0 < KC) ? K - k0 : KC;
#if PA && SP
        const long qa = (long)(k0 / KC) * nrb + row0 / MB;
        PACKED float *const Ap = pa0 + qa * (KC * MB);
        SHARED_PACK(fa + 4 * qa, kb,
                    pack_a(Ap + c0 * RS, A, lda, M, k0 + c0, cl, row0));
#elif PA
        pack_a(Ap, A, lda, M, k0, kb, row0);
#endif
        /* the NT column strips share the packed A panel; each packs its own B panel, which the
         * MT row strips share */
        AT_UNROLL(1)
        for (int nt = 0; nt < NT; ++nt) {
            const int col0 = colw + nt * NB;
            if (EDGE_N && col0 >= N)
                break;
#if PB && SP
            const long qb = (long)(k0 / KC) * nsb + col0 / NB;
            PACKED float *const Bp = pb0 + qb * (KC * NB);
            SHARED_PACK(fb + 4 * qb, kb, pack_b(Bp + c0 * NB, B, ldb, N, k0 + c0, cl, col0));
#elif PB
            pack_b(Bp, B, ldb, N, k0, kb, col0);
#endif
#if PB && TB && !SP
            /* The next B panel's source (the next strip of this K block, else the first of the
             * next K block): NB rows of the stored B, KC floats each. Its transposing pack reads
             * VW of them at once, 16 lines from as many pages with nothing to compute meanwhile;
             * so each row strip below first sends its share of those lines on their way to the
             * cache, and they arrive while it computes (+17-25 % at 4096^3 nt/tt). */
            const int nlast = nt + 1 == NT || (EDGE_N && col0 + NB >= N);
            const int kn = nlast ? k0 + KC : k0, cn = nlast ? colw : col0 + NB;
#endif
            AT_UNROLL(1)
            for (int mt = 0; mt < MT; ++mt) {
                const int r0 = row0 + mt * RS; /* the strip's first row */
                if (EDGE_M && r0 >= M)
                    break;
#if PB && TB && !SP
                if (kn < K) {
                    AT_UNROLL(1)
                    for (int c = mt * NB / MT; c < (mt + 1) * NB / MT; ++c) {
                        GLOBAL const float *RESTRICT src = B + (long)MIN(cn + c, N - 1) * ldb + kn;
                        AT_UNROLL(1)
                        for (int q = 0; q < KC; q += 16)
                            PREFETCH(src + q);
                    }
                }
#endif

                /* where row r of op(A) is read at k-step p: ap[aoff[r]], ap advancing by astep;
                 * loop-invariant 64-bit offsets, so each read is one base + index * 4 address */
                long aoff[RS];
                AT_UNROLL(RS)
                for (int r = 0; r < RS; ++r) {
#if PA && SP
                    aoff[r] = (long)mt * KC * RS + r;
#elif PA
                    aoff[r] = TA ? mt * RS + r : (mt * RS + r) * KC;
#else
                    const int row = EDGE_M ? MIN(r0 + r, M - 1) : r0 + r;
                    aoff[r] = TA ? (long)row : (long)row * lda;
#endif
                }
#if PA
                const PACKED float *ap = Ap;
                const long astep = SP ? RS : TA ? MB : 1;
#else
                GLOBAL const float *RESTRICT ap = A + (TA ? (idx_t)k0 * lda : (idx_t)k0);
                const long astep = TA ? (long)lda : 1;
#endif
#if PB
                const PACKED float *bp = Bp;
                const long bstep = NB;
#else
                GLOBAL const float *RESTRICT bp = B + (idx_t)k0 * ldb + col0;
                const long bstep = ldb;
#endif

                floatv acc[RS][NV];
                AT_UNROLL(RS)
                for (int r = 0; r < RS; ++r) {
                    AT_UNROLL(NV)
                    for (int v = 0; v < NV; ++v)
                        acc[r][v] = VBCAST(VW, 0.0f);
                }

                /* the micro-kernel: RS broadcasts, NV vector loads, RS * NV FMAs per k-step */
                AT_UNROLL(UK)
                for (int p = 0; p < kb; ++p) {
                    floatv b[NV];
                    AT_UNROLL(NV)
                    for (int v = 0; v < NV; ++v) {
#if PB || !EDGE_N
                        b[v] = VLOAD(VW, 0, bp + v * VW);
#else
                        const int avail = N - (col0 + v * VW);
                        float t[VW];
                        AT_UNROLL(VW)
                        for (int l = 0; l < VW; ++l)
                            t[l] = l < avail ? bp[v * VW + l] : 0.0f;
                        b[v] = VLOAD(VW, 0, t);
#endif
                    }
                    AT_UNROLL(RS)
                    for (int r = 0; r < RS; ++r) {
                        const floatv a = VBCAST(VW, ap[aoff[r]]);
                        AT_UNROLL(NV)
                        for (int v = 0; v < NV; ++v)
                            acc[r][v] = VFMA(a, b[v], acc[r][v]);
                    }
                    ap += astep;
                    bp += bstep;
                }

                /* the strip's partial sums into C: the first K block writes alpha * acc + beta * C,
                 * the later ones add alpha * acc */
                AT_UNROLL(RS)
                for (int r = 0; r < RS; ++r) {
                    const int row = r0 + r;
                    if (EDGE_M && row >= M)
                        break;
                    AT_UNROLL(NV)
                    for (int v = 0; v < NV; ++v) {
                        const int col = col0 + v * VW;
                        const int avail = EDGE_N ? N - col : VW;
                        if (avail <= 0)
                            break;
                        GLOBAL float *dst = C + (idx_t)row * ldc + col;
                        floatv o = VBCAST(VW, alpha) * acc[r][v];
                        const float add = k0 > 0 ? 1.0f : beta; /* weight of what C holds */
                        if (avail >= VW) {
                            if (add != 0.0f)
                                o = VFMA(VBCAST(VW, add), VLOAD(VW, 0, dst), o);
                            VSTORE(VW, o, 0, dst);
                        } else {
                            float t[VW];
                            VSTORE(VW, o, 0, t);
                            for (int l = 0; l < avail; ++l)
                                dst[l] = add != 0.0f ? VFMA(add, dst[l], t[l]) : t[l];
                        }
                    }
                }
            }
#if PB && SP
            SHARED_DONE(fb + 4 * qb, nrb); /* every block row of C reads the B panel */
#endif
        }
#if PA && SP
        SHARED_DONE(fa + 4 * qa, (N + NC - 1) / NC); /* every block column reads the A panel */
#endif
    }
#endif
}
