/* gemm.cl — tunable f32 GEMM template in the portable dialect (see templates/common/opencl.h).
 *
 *   C = alpha * op(A) * op(B) + beta * C        all matrices row-major
 *
 *   A(i,p) = TA ? A[p*lda + i] : A[i*lda + p]   op(A) is M x K
 *   B(p,j) = TB ? B[j*ldb + p] : B[p*ldb + j]   op(B) is K x N
 *   C(i,j) = C[i*ldc + j]                       C is M x N; not read when beta == 0
 *
 * Each work-group computes a BM x BN block of C, walking K in steps of BK. Each work-item owns
 * a TM x TN sub-block held in registers as TM rows of TN/VW vectors of width VW. Work-items are
 * laid out (BN/TN) along local dimension 0 (N) and (BM/TM) along dimension 1 (M), so that
 * consecutive work-items touch consecutive columns of B and C (coalescing on GPUs, and PoCL's
 * implicit vectorisation across work-items on CPUs).
 *
 * Tuning parameters (-D, all integers; constraints live in gemm.yaml):
 *   BM, BN   block tile of C per work-group        BK      K step per iteration
 *   TM, TN   C elements per work-item in M / N     VW      vector width of the N strip (1,2,4,8)
 *   STRN     0: a work-item's TN columns are contiguous; 1: its TN/VW vectors are strided by
 *            (BN/TN)*VW columns, so neighbouring work-items read neighbouring vectors
 *   SA, SB   1: stage the A / B tile in local memory; 0: read operands straight from global
 *   PAD      extra local-memory column per row of a staged tile (bank conflicts)
 *   UNROLL   unroll factor of the inner K loop
 * (On PoCL, SA = SB = 0 is fastest: with a barrier in the kernel PoCL runs the inner K loop
 * horizontally across work-items and spills the accumulators every step. GPUs want SA/SB.)
 * Problem defines (computed by gemm.yaml; gemm_problem.h): TA, TB (layouts as above),
 * EDGE_M/N/K (0: the dimension is a multiple of its block tile, no bound checks), IDX64.
 */

#include "gemm_problem.h" /* the problem defines TA, TB, EDGE_M/N/K, IDX64 and idx_t */

/* ---- derived constants ----------------------------------------------------------------------- */
#define TX (BN / TN)       /* work-items along N (local dimension 0) */
#define TY (BM / TM)       /* work-items along M (local dimension 1) */
#define THREADS (TX * TY)  /* work-group size */
#define NV (TN / VW)       /* vectors per work-item row */
#define LDAS (BM + PAD)    /* row stride of the staged A tile, stored K-major: As[p][i] */
#define LDBS (BN + PAD)    /* row stride of the staged B tile: Bs[p][j] */

/* Column (within the block) of a work-item's vector v. */
#if STRN
#define COLV(tx, v) ((((v) * TX) + (tx)) * VW)
#else
#define COLV(tx, v) ((tx) * TN + (v) * VW)
#endif

typedef VTYPE(VW) floatv;

/* ---- edge-aware loads and stores ------------------------------------------------------------- */

/* VW consecutive floats src[off .. off+VW-1], of which only the first `avail` exist; the others
 * read as zero. With avail == VW known at compile time this is one vector load. */
INLINE floatv load_contig(GLOBAL const float *RESTRICT src, const idx_t off, const int avail)
{
    if (avail >= VW)
        return VLOAD(VW, 0, src + off);
    float t[VW];
    AT_UNROLL(VW)
    for (int l = 0; l < VW; ++l)
        t[l] = (l < avail) ? src[off + l] : 0.0f;
    return VLOAD(VW, 0, t);
}

/* VW floats src[off + l*stride] (a gather, for operands that run across rows in memory); lanes
 * l >= avail read as zero. */
INLINE floatv load_strided(GLOBAL const float *RESTRICT src, const idx_t off, const idx_t stride,
                           const int avail)
{
    float t[VW];
    AT_UNROLL(VW)
    for (int l = 0; l < VW; ++l)
        t[l] = (l < avail) ? src[off + l * stride] : 0.0f;
    return VLOAD(VW, 0, t);
}

/* Writes the first `avail` lanes of v to dst[off ..]. */
INLINE void store_contig(GLOBAL float *dst, const idx_t off, const floatv v, const int avail)
{
    if (avail >= VW) {
        VSTORE(VW, v, 0, dst + off);
        return;
    }
    float t[VW];
    VSTORE(VW, v, 0, t);
    for (int l = 0; l < avail; ++l)
        dst[off + l] = t[l];
}

/* ---- staging a tile in local memory ---------------------------------------------------------- */

/* Copies an R x C tile from global memory, element (r, c) = src[(r0+r)*ld + c0+c], into local
 * memory as dst[r*lds + c] or, when trans, dst[c*lds + r]. Elements with r0+r >= rlim (checked
 * when rcheck) or c0+c >= clim (when ccheck) are zero-filled. The whole work-group cooperates:
 * units of VW elements along the contiguous global dimension c, consecutive work-items taking
 * consecutive units so global reads are contiguous. All size arguments are compile-time
 * constants after inlining, so the index arithmetic and unused checks fold away. */
INLINE void stage_tile(LOCAL_PTR float *dst, const int lds, const int trans,
                       GLOBAL const float *RESTRICT src, const idx_t ld, const int r0,
                       const int rlim, const int rcheck, const int c0, const int clim,
                       const int ccheck, const int R, const int C, const int tid)
{
    const int units = R * (C / VW);
    AT_UNROLL(1)
    for (int u = tid; u < units; u += THREADS) {
        const int r = u / (C / VW);
        const int c = (u % (C / VW)) * VW;
        int avail = VW;
        int gr = r0 + r, gc = c0 + c;
        if (ccheck) {
            avail = MIN(avail, clim - gc);
            gc = MIN(gc, clim - 1); /* keep the address in range even when nothing is read */
        }
        if (rcheck && gr >= rlim) {
            avail = 0;
            gr = rlim - 1;
        }
        const floatv v = load_contig(src, (idx_t)gr * ld + gc, avail);
        if (trans) {
            /* transposing into local memory: scatter the lanes down a column */
            float t[VW];
            VSTORE(VW, v, 0, t);
            AT_UNROLL(VW)
            for (int l = 0; l < VW; ++l)
                dst[(c + l) * lds + r] = t[l];
        } else {
            VSTORE(VW, v, 0, dst + r * lds + c);
        }
    }
}

/* ---- one K tile: stage, then multiply-accumulate --------------------------------------------- */

/* Accumulates the k range [k0, k0 + kb) into acc. kcheck marks the last, partial tile (only
 * with EDGE_K): kb < BK, staged elements beyond K are zero-filled and the inner loop stops at
 * kb. The first barrier keeps the previous tile's readers ahead of the new writes. */
INLINE void gemm_tile(floatv acc[TM][NV], const int kcheck, const int k0, const int kb,
                      const int M, const int N, const int K,
                      GLOBAL const float *RESTRICT A, const int lda,
                      GLOBAL const float *RESTRICT B, const int ldb,
                      LOCAL_PTR float *As, LOCAL_PTR float *Bs, const idx_t aoff[TM],
                      const int row0, const int col0, const int tx, const int ty, const int tid)
{
#if SA || SB
    BARRIER();
#endif
#if SA
#if TA
    stage_tile(As, LDAS, 0, A, lda, k0, K, kcheck, row0, M, EDGE_M, BK, BM, tid);
#else
    stage_tile(As, LDAS, 1, A, lda, row0, M, EDGE_M, k0, K, kcheck, BM, BK, tid);
#endif
#endif
#if SB
#if TB
    stage_tile(Bs, LDBS, 1, B, ldb, col0, N, EDGE_N, k0, K, kcheck, BN, BK, tid);
#else
    stage_tile(Bs, LDBS, 0, B, ldb, k0, K, kcheck, col0, N, EDGE_N, BK, BN, tid);
#endif
#endif
#if SA || SB
    BARRIER();
#endif

    AT_UNROLL(UNROLL)
    for (int p = 0; p < kb; ++p) {
        /* the work-item's TM values of column p of the A tile */
        float a[TM];
        AT_UNROLL(TM)
        for (int i = 0; i < TM; ++i) {
#if SA
            a[i] = As[p * LDAS + ty * TM + i];
#elif TA
            a[i] = A[(idx_t)(k0 + p) * lda + aoff[i]];
#else
            a[i] = A[aoff[i] + (k0 + p)];
#endif
        }
        /* its NV vectors of row p of the B tile */
        floatv b[NV];
        AT_UNROLL(NV)
        for (int v = 0; v < NV; ++v) {
#if SB
            b[v] = VLOAD(VW, 0, Bs + p * LDBS + COLV(tx, v));
#else
            const int col = col0 + COLV(tx, v);
            /* columns past N read as zero (their results are never stored) */
            const int avail = EDGE_N ? N - col : VW;
            const int colc = EDGE_N ? MIN(col, N - 1) : col;
#if TB
            b[v] = load_strided(B, (idx_t)colc * ldb + (k0 + p), ldb, avail);
#else
            b[v] = load_contig(B, (idx_t)(k0 + p) * ldb + colc, avail);
#endif
#endif
        }
        /* rank-1 update of the TM x TN register block */
        AT_UNROLL(TM)
        for (int i = 0; i < TM; ++i) {
            AT_UNROLL(NV)
            for (int v = 0; v < NV; ++v)
                acc[i][v] = VFMA(VBCAST(VW, a[i]), b[v], acc[i][v]);
        }
    }
}

/* ---- the kernel ------------------------------------------------------------------------------ */

KERNEL void gemm(const int M, const int N, const int K, const float alpha, const float beta,
                 GLOBAL const float *RESTRICT A, const int lda, GLOBAL const float *RESTRICT B,
                 const int ldb, GLOBAL float *C, const int ldc)
{
    const int tx = LOCAL_ID(0), ty = LOCAL_ID(1);
    const int tid = ty * TX + tx;
    const int col0 = GROUP_ID(0) * BN; /* block origin in C */
    const int row0 = GROUP_ID(1) * BM;

#if SA
    LOCAL float As[BK * LDAS];
#else
    LOCAL_PTR float *As = 0;
#endif
#if SB
    LOCAL float Bs[BK * LDBS];
#else
    LOCAL_PTR float *Bs = 0;
#endif

    /* Offsets of this work-item's A rows for direct reads (SA == 0). Rows past M are clamped to
     * M - 1: the reads stay in bounds and the rows' results are never stored, so no check is
     * needed inside the K loop. */
    idx_t aoff[TM];
    AT_UNROLL(TM)
    for (int i = 0; i < TM; ++i) {
        const int row = EDGE_M ? MIN(row0 + ty * TM + i, M - 1) : row0 + ty * TM + i;
        aoff[i] = TA ? (idx_t)row : (idx_t)row * lda;
    }

    floatv acc[TM][NV];
    AT_UNROLL(TM)
    for (int i = 0; i < TM; ++i) {
        AT_UNROLL(NV)
        for (int v = 0; v < NV; ++v)
            acc[i][v] = VBCAST(VW, 0.0f);
    }

    /* K tiles. With EDGE_K the last one is partial: its staged elements beyond K are zero-filled
     * and its inner loop stops at K. One call site on purpose: a variant calling gemm_tile
     * twice (full tiles, then the tail) gave wrong results on PoCL 3.1 with optimisation on and
     * right ones with -cl-opt-disable. */
    for (int k0 = 0; k0 < K; k0 += BK) {
        const int kcheck = EDGE_K && K - k0 < BK;
        gemm_tile(acc, kcheck, k0, kcheck ? K - k0 : BK, M, N, K, A, lda, B, ldb, As, Bs, aoff,
                  row0, col0, tx, ty, tid);
    }

    /* ---- epilogue: C = alpha * acc + beta * C (C untouched by reads when beta == 0) ---------- */
    AT_UNROLL(TM)
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + ty * TM + i;
        AT_UNROLL(NV)
        for (int v = 0; v < NV; ++v) {
            const int col = col0 + COLV(tx, v);
            const int avail = EDGE_N ? N - col : VW;
            if ((EDGE_M && row >= M) || avail <= 0)
                continue; /* outside C */
            const idx_t off = (idx_t)row * ldc + col;
            floatv r = VBCAST(VW, alpha) * acc[i][v];
            if (beta != 0.0f)
                r = VFMA(VBCAST(VW, beta), load_contig(C, off, avail), r);
            store_contig(C, off, r, avail);
        }
    }
}
