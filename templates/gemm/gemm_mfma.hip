/* gemm_mfma.hip — tunable matrix-core GEMM template (HIP, AMD CDNA: gfx908, gfx90a, gfx94x) for
 * 16-bit operands.
 *
 *   C = alpha * op(A) * op(B) + beta * C        all matrices row-major, elements 16-bit
 *
 *   A(i,p) = TA ? A[p*lda + i] : A[i*lda + p]   op(A) is M x K
 *   B(p,j) = TB ? B[j*ldb + p] : B[p*ldb + j]   op(B) is K x N
 *   C(i,j) = C[i*ldc + j]                       C is M x N; not read when beta == 0
 *
 * Elements are raw 16-bit patterns (unsigned short): IEEE half when DT = 0, bfloat16 when
 * DT = 1. Products accumulate in f32 in MFMA accumulators; alpha and beta apply in f32 and C is
 * rounded to nearest even once. The same arguments as gemm_mma.cu (the CUDA template), so one
 * problem definition serves both.
 *
 * Structure. A block of WAVES = (BM/WM) x (BN/WN) wavefronts of 64 computes a BM x BN tile of C;
 * each wave owns a WM x WN wave tile made of (WM/MFMA) x (WN/MFMA) MFMA tiles of MFMA x MFMA
 * (32: v_mfma_f32_32x32x8, 16 accumulators per lane; 16: v_mfma_f32_16x16x16, 4 per lane).
 * K advances in BK steps through two LDS stages (double buffering): while the waves multiply
 * out of one stage, each thread holds the next tile's elements in registers (loaded from global
 * memory before the multiply, so the loads are in flight during it) and writes them into the
 * other stage afterwards; one barrier per K step.
 *
 * Global loads. When A and B are 16-byte aligned and lda, ldb are multiples of 8 (a uniform test
 * made once, before the K loop: the kernel holds two instances of the loop, at_mainloop<WIDE>),
 * tiles move in 16-byte units (at_wide_unit): a K-contiguous operand (A with TA = 0, B with
 * TB = 1) as 8 k of one row, one global_load_dwordx4 and one 16-byte LDS write (ds_write_b128,
 * or ds_write2_b64 when the padded row is not a multiple of 16 bytes); an MN-contiguous one as
 * 8 rows x 4 k, four 16-byte loads transposed in registers (v_perm_b32, at_wide_pair) into
 * eight 8-byte LDS writes. At the matrix edges a unit with any element inside is loaded whole (it
 * cannot cross a page: 16 bytes at a 16-byte aligned address) and the elements outside are zeroed.
 * Otherwise every element is a 16-bit load and a 16-bit LDS write (at_stage), issued after the
 * MFMAs (the slow path keeps no registers across them).
 *
 * LDS layout. Both tiles are stored K-contiguous whatever the global layout: A as [BM][LDK] and
 * B as [BN][LDK] with LDK = BK + 4 * PAD, so each lane's MFMA operand (KL consecutive k of one
 * row or column) is one 8-byte (KL = 4) or 4-byte (KL = 2) LDS read. PAD = 1 shifts successive
 * rows by 8 bytes, which spreads the transposing stores (TA = 1, TB = 0) and the operand reads
 * over the banks.
 *
 * MFMA operand and result layouts and the instructions (f16 everywhere, bf16 _1k from gfx90a,
 * the older bf16 forms with 2 elements per lane on gfx908; BF16_1K selects): see
 * templates/common/hip_mfma.h, which this template shares with attention_mfma.hip. The index
 * functions below compose them into the block's tiles; tests/unit/test_hip_mfma.c runs them on
 * the host against an independent model of the instruction and a reference GEMM.
 *
 * Edges. Loads past the M/N/K bounds read nothing and write zeros to LDS, so partial tiles
 * contribute zeros; stores are guarded. EDGE_M/EDGE_N/EDGE_K = 0 compile the checks away.
 *
 * Tuning parameters (-D; constraints in gemm_mfma.yaml): BM, BN (block tile), BK (K step, a
 * multiple of the instruction's K), WM, WN (wave tile, multiples of MFMA), MFMA (16 or 32), PAD.
 * Problem defines: TA, TB, EDGE_M/N/K, DT (0 f16, 1 bf16), IDX64 (64-bit offsets), all in
 * gemm_problem.h, and BF16_1K.
 * Launch: local = [64 * WAVES, 1], global = [ceil(n/BN) * local0, ceil(m/BM)]. The space
 * defines AT_MAX_THREADS = THREADS, so KERNEL carries __launch_bounds__(THREADS): without it HIP
 * assumes 1024-thread blocks and caps the kernel at 128 VGPRs, and large wave tiles spill.
 *
 * Defining AT_MFMA_HOST before including this file gives only the index functions, as plain C,
 * for the host emulation test. */

/* ---- defaults, so the file also compiles stand-alone --------------------------------------- */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef MFMA
#define MFMA 32
#endif
#ifndef PAD
#define PAD 1
#endif
#include "gemm_problem.h" /* the problem defines TA, TB, EDGE_M/N/K, DT, IDX64; idx_t */
#ifndef BF16_1K
#define BF16_1K 1
#endif

/* ---- index functions (device and host) ----------------------------------------------------- */
#include "../common/hip_mfma.h" /* MFMA layouts, the instruction, 16-bit conversions */

/* The geometry of one configuration; on the device every field is a compile-time constant. */
typedef struct at_mfma_cfg {
    int bm, bn, bk, wm, wn, mfma, kl, ldk, threads, ta, tb;
} at_mfma_cfg;

/* Lane groups of an instruction (64 / MFMA) and its K (KL per lane times the groups). */
AT_HD int at_groups(const at_mfma_cfg *c) { return 64 / c->mfma; }
AT_HD int at_kinstr(const at_mfma_cfg *c) { return c->kl * (64 / c->mfma); }

/* Element e (0 .. rows*BK-1) of a tile of `rows` rows (M of A, N of B) by BK k that the 16-bit
 * path stages: its row and k within the tile. mnc: the operand is contiguous along the rows in
 * memory (A when TA = 1, B when TB = 0). Consecutive e follow the global contiguous dimension,
 * so consecutive threads read consecutive addresses. */
AT_HD void at_stage(const int rows, const int bk, const int mnc, const int e, int *row, int *k)
{
    if (mnc) {
        *row = e % rows;
        *k = e / rows;
    } else {
        *row = e / bk;
        *k = e % bk;
    }
}

/* The 16-byte path stages a tile in units: a K-contiguous operand (mnc = 0) in units of 1 row x
 * 8 k (one 16-byte load, one 16-byte LDS write, or two 8-byte ones when LDK is not a multiple
 * of 8); an MN-contiguous one (mnc = 1) in units of 8 rows x 4 k (four 16-byte loads, one per k,
 * transposed in registers into eight 8-byte LDS writes, the 4 k of one row each). Element (q, e)
 * of a unit (load q, 16-bit element e of it) is at row + (mnc ? e : 0), k + (mnc ? q : e). */
AT_HD int at_wide_units(const int rows, const int bk, const int mnc)
{
    return rows * bk / (mnc ? 32 : 8);
}
/* Unit u's origin; consecutive units follow the global contiguous dimension. */
AT_HD void at_wide_unit(const int rows, const int bk, const int mnc, const int u, int *row, int *k)
{
    if (mnc) {
        *row = u % (rows / 8) * 8;
        *k = u / (rows / 8) * 4;
    } else {
        *row = u / (bk / 8);
        *k = u % (bk / 8) * 8;
    }
}
/* Of the 8 elements of a 16-byte load starting at index `start` along a dimension of `bound`,
 * how many are inside; the others are set to zero (the load itself stays inside the 16-byte
 * aligned chunk of a valid element, so it never crosses a page). */
AT_HD int at_wide_valid(const int start, const int bound)
{
    return bound - start >= 8 ? 8 : bound - start < 0 ? 0 : bound - start;
}
/* The register transposition of an MN-contiguous unit: dword d (0 or 1) of the 8-byte LDS write
 * of the unit's row e holds element e of loads 2d (low half) and 2d + 1 (high half); x and y are
 * dword e / 2 of those loads. One v_perm_b32 (byte i of the result = byte sel.byte[i] of the
 * 8 bytes {y: 7..4, x: 3..0}); the host emulation supplies the instruction as AT_HOST_PERM, from
 * the ISA's description. */
AT_HD unsigned at_wide_pair(const unsigned x, const unsigned y, const int e)
{
    const unsigned sel = e & 1 ? 0x07060302u : 0x05040100u; /* high or low halves */
#ifdef AT_MFMA_HOST
    return AT_HOST_PERM(y, x, sel);
#else
    return __builtin_amdgcn_perm(y, x, sel);
#endif
}

/* The uniform test that picks the 16-byte path: A and B 16-byte aligned and lda, ldb multiples
 * of 8 elements, so every unit's loads are aligned (ld_or = lda | ldb, addr_or = A | B). */
AT_HD int at_wide_ok(const int ld_or, const unsigned long long addr_or)
{
    return (ld_or & 7) == 0 && (addr_or & 15) == 0;
}

/* Operand element t of lane l: its row of A (column of B) within the instruction tile... */
AT_HD int at_frag_rc(const at_mfma_cfg *c, const int lane) { return at_mfma_rc(c->mfma, lane); }
/* ... and its k within the instruction's K. */
AT_HD int at_frag_k(const at_mfma_cfg *c, const int lane, const int t)
{
    return at_mfma_k(c->mfma, c->kl, lane, t);
}
/* Accumulator r of lane l: its row and column within the instruction's MFMA x MFMA tile. */
AT_HD int at_acc_row(const at_mfma_cfg *c, const int lane, const int r)
{
    return at_mfma_acc_row(c->mfma, lane, r);
}
AT_HD int at_acc_col(const at_mfma_cfg *c, const int lane)
{
    return at_mfma_acc_col(c->mfma, lane);
}
/* The wave tile's origin within the block tile. */
AT_HD int at_wave_m0(const at_mfma_cfg *c, const int wave)
{
    return (wave % (c->bm / c->wm)) * c->wm;
}
AT_HD int at_wave_n0(const at_mfma_cfg *c, const int wave)
{
    return (wave / (c->bm / c->wm)) * c->wn;
}

#ifndef AT_MFMA_HOST
/* ---- derived constants ----------------------------------------------------------------------- */
#define WAVES   ((BM / WM) * (BN / WN))
#define THREADS (64 * WAVES)
#define TM      (WM / MFMA) /* instruction tiles per wave along M */
#define TN      (WN / MFMA) /* ... along N */
#define KL      AT_MFMA_KL
#define KI      (KL * (64 / MFMA))
#define LDK     (BK + 4 * PAD)
#define ACC     AT_MFMA_ACC /* accumulators per lane per instruction tile */

/* ---- staging of one operand --------------------------------------------------------------- */
typedef unsigned short at_h8 __attribute__((ext_vector_type(8)));
typedef unsigned short at_h4 __attribute__((ext_vector_type(4)));
typedef unsigned at_u4 __attribute__((ext_vector_type(4)));
typedef unsigned at_u2 __attribute__((ext_vector_type(2)));

/* One operand's K tile: ROWS rows (BM of A, BN of B) by BK k; MNC: contiguous along the rows in
 * memory (A with TA, B without TB); ER: rows past the matrix exist (EDGE_M, EDGE_N). The 16-byte
 * path loads the next tile into registers in units (at_wide_unit) and stores it later; the
 * 16-bit path copies element by element (at_stage). The global offset of (row r, k p) is
 * p * ld + r when MNC, else r * ld + p. */
template <int ROWS, bool MNC, bool ER> struct at_tile {
    static constexpr int UNITS = ROWS * BK / (MNC ? 32 : 8);
    static constexpr int NW = (UNITS + THREADS - 1) / THREADS; /* units per thread */
    static constexpr int NS = ROWS * BK / THREADS;             /* 16-bit elements per thread */
    at_h8 w[NW][MNC ? 4 : 1];                                  /* 16-byte path only */

    INLINE static idx_t off(const int r, const int p, const int ld)
    {
        return MNC ? (idx_t)p * ld + r : (idx_t)r * ld + p;
    }
    /* The offset of (r, p) within a tile, from its origin: nonnegative, so unsigned unless
     * IDX64, which lets a load take a 32-bit offset from a uniform base. */
#if IDX64
    typedef idx_t at_toff;
#else
    typedef unsigned at_toff;
#endif
    INLINE static at_toff toff(const int r, const int p, const int ld)
    {
        return (at_toff)off(r, p, ld);
    }

    /* Global -> registers: the tile whose first row is r0 and first k is k0; zeros outside the
     * R x K matrix. */
    INLINE void load(const unsigned short *RESTRICT g, const int ld, const int r0, const int R,
                     const int k0, const int K, const int tid)
    {
        /* addresses: the tile's origin and each load's row of units are uniform (scalar), a
         * unit's offset within the tile is the thread's own and the same in every K step */
        const unsigned short *gt = g + off(r0, k0, ld);
        AT_UNROLL(NW)
        for (int s = 0; s < NW; ++s) {
            const int u = tid + s * THREADS;
            if (UNITS % THREADS != 0 && u >= UNITS) break; /* fewer units than threads */
            int r, kk;
            at_wide_unit(ROWS, BK, MNC, u, &r, &kk);
            const int gr = r0 + r, gk = k0 + kk;
            const int nr = ER ? at_wide_valid(gr, R) : 8;
            const at_toff o = toff(r, kk, ld);
            AT_UNROLL(4)
            for (int q = 0; q < (MNC ? 4 : 1); ++q) {
                const bool in = (!ER || nr > 0) && (!EDGE_K || gk + q < K);
                const unsigned short *gq = gt + (MNC ? (idx_t)q * ld : 0);
                at_h8 v = in ? *(const at_h8 *)(gq + o) : (at_h8)(0);
                const int n = MNC ? nr : EDGE_K ? at_wide_valid(gk, K) : 8;
                if ((MNC ? ER : EDGE_K) && n < 8) {
                    AT_UNROLL(8)
                    for (int e = 0; e < 8; ++e)
                        if (e >= n) v[e] = 0;
                }
                w[s][q] = v;
            }
        }
    }

    /* Registers -> LDS tile st ([ROWS][LDK], K-contiguous). */
    INLINE void store(short *st, const int tid) const
    {
        AT_UNROLL(NW)
        for (int s = 0; s < NW; ++s) {
            const int u = tid + s * THREADS;
            if (UNITS % THREADS != 0 && u >= UNITS) break;
            int r, kk;
            at_wide_unit(ROWS, BK, MNC, u, &r, &kk);
            if constexpr (MNC) {
                at_u4 d[4];
                AT_UNROLL(4)
                for (int q = 0; q < 4; ++q) d[q] = __builtin_bit_cast(at_u4, w[s][q]);
                AT_UNROLL(8)
                for (int e = 0; e < 8; ++e)
                    *(at_u2 *)&st[(r + e) * LDK + kk] =
                        (at_u2){at_wide_pair(d[0][e / 2], d[1][e / 2], e),
                                at_wide_pair(d[2][e / 2], d[3][e / 2], e)};
            } else if constexpr (LDK % 8 == 0) {
                *(at_h8 *)&st[r * LDK + kk] = w[s][0];
            } else {
                *(at_h4 *)&st[r * LDK + kk] = w[s][0].lo;
                *(at_h4 *)&st[r * LDK + kk + 4] = w[s][0].hi;
            }
        }
    }

    /* The 16-bit path: global -> LDS tile st element by element, with nothing held in between
     * (called after the MFMAs). Unrolled by 8 only: fully unrolled, the compiler hoisted all NS
     * element addresses out of the K loop into live registers, and 256x256 tiles with a K edge
     * spilled. The addresses are a uniform tile origin plus toff. */
    INLINE void copy(short *st, const unsigned short *RESTRICT g, const int ld, const int r0,
                     const int R, const int k0, const int K, const int tid) const
    {
        const unsigned short *gt = g + off(r0, k0, ld);
        AT_UNROLL(8)
        for (int s = 0; s < NS; ++s) {
            int r, kk;
            at_stage(ROWS, BK, MNC, tid + s * THREADS, &r, &kk);
            const bool in = (!ER || r0 + r < R) && (!EDGE_K || k0 + kk < K);
            const at_toff o = toff(r, kk, ld);
            st[r * LDK + kk] = in ? (short)gt[o] : (short)0;
        }
    }
};

/* ---- the K loop ------------------------------------------------------------------------------ */
/* acc += the block's op(A) op(B) over all of K, through the two LDS stages sa, sb. WIDE: the
 * 16-byte staging (aligned operands), whose next tile is loaded before the MFMAs and stays in
 * flight during them; else 16-bit, loaded after the MFMAs and stored at once, so this slow path
 * (misaligned operands) holds no staging registers across them and large tiles do not spill in
 * it. The kernel picks one instance before the loop, so neither carries the other's instructions
 * or registers. */
template <bool WIDE>
INLINE void at_mainloop(at_accv (&acc)[TM][TN], short (*sa)[BM * LDK], short (*sb)[BN * LDK],
                        const unsigned short *RESTRICT A, const int lda,
                        const unsigned short *RESTRICT B, const int ldb, const int M, const int N,
                        const int K, const int bm, const int bn, const int tid, const int lane,
                        const int wm0, const int wn0)
{
    constexpr at_mfma_cfg cfg = {BM, BN, BK, WM, WN, MFMA, KL, LDK, THREADS, TA, TB};
    const int KT = (K + BK - 1) / BK;
    at_tile<BM, TA != 0, EDGE_M != 0> ta; /* the next tiles, in flight */
    at_tile<BN, TB == 0, EDGE_N != 0> tb;

    if constexpr (WIDE) {
        ta.load(A, lda, bm, M, 0, K, tid);
        tb.load(B, ldb, bn, N, 0, K, tid);
        ta.store(sa[0], tid);
        tb.store(sb[0], tid);
    } else {
        ta.copy(sa[0], A, lda, bm, M, 0, K, tid);
        tb.copy(sb[0], B, ldb, bn, N, 0, K, tid);
    }
    BARRIER();

    const int rc = at_frag_rc(&cfg, lane), k_lane = at_frag_k(&cfg, lane, 0);
    for (int kt = 0; kt < KT; ++kt) {
        const int st = kt & 1;
        if (WIDE && kt + 1 < KT) { /* in flight during the MFMAs */
            ta.load(A, lda, bm, M, (kt + 1) * BK, K, tid);
            tb.load(B, ldb, bn, N, (kt + 1) * BK, K, tid);
        }

        AT_UNROLL(BK / KI)
        for (int ks = 0; ks < BK / KI; ++ks) {
            at_frag fa[TM], fb[TN];
            AT_UNROLL(TM)
            for (int i = 0; i < TM; ++i)
                fa[i] = *(const at_frag *)&sa[st][(wm0 + i * MFMA + rc) * LDK + ks * KI + k_lane];
            AT_UNROLL(TN)
            for (int j = 0; j < TN; ++j)
                fb[j] = *(const at_frag *)&sb[st][(wn0 + j * MFMA + rc) * LDK + ks * KI + k_lane];
            AT_UNROLL(TM)
            for (int i = 0; i < TM; ++i) {
                AT_UNROLL(TN)
                for (int j = 0; j < TN; ++j) acc[i][j] = at_mfma(fa[i], fb[j], acc[i][j]);
            }
        }

        /* The other stage was last read in step kt - 1, which ended with a barrier. */
        if (kt + 1 < KT) {
            if constexpr (WIDE) {
                ta.store(sa[st ^ 1], tid);
                tb.store(sb[st ^ 1], tid);
            } else { /* the slow path holds no registers across the MFMAs */
                ta.copy(sa[st ^ 1], A, lda, bm, M, (kt + 1) * BK, K, tid);
                tb.copy(sb[st ^ 1], B, ldb, bn, N, (kt + 1) * BK, K, tid);
            }
        }
        BARRIER();
    }
}

/* ---- the kernel ------------------------------------------------------------------------------ */
KERNEL void gemm_mfma(const int M, const int N, const int K, const float alpha, const float beta,
                      const unsigned short *RESTRICT A, const int lda,
                      const unsigned short *RESTRICT B, const int ldb, unsigned short *C,
                      const int ldc)
{
    constexpr at_mfma_cfg cfg = {BM, BN, BK, WM, WN, MFMA, KL, LDK, THREADS, TA, TB};
    /* 16-byte aligned: operands are read as 8-byte (KL = 4) or 4-byte (KL = 2) vectors, whose
     * offsets are multiples of their size (LDK and KI are multiples of 4 elements), and the
     * 16-byte path writes 8 or 16 bytes at multiples of their size. */
    alignas(16) LOCAL short sa[2][BM * LDK];
    alignas(16) LOCAL short sb[2][BN * LDK];

    const int tid = LOCAL_ID(0);
    const int lane = tid % 64, wave = tid / 64;
    const int wm0 = at_wave_m0(&cfg, wave), wn0 = at_wave_n0(&cfg, wave);
    const int bm = GROUP_ID(1) * BM, bn = GROUP_ID(0) * BN;

    at_accv acc[TM][TN];
    AT_UNROLL(TM)
    for (int i = 0; i < TM; ++i) {
        AT_UNROLL(TN)
        for (int j = 0; j < TN; ++j) acc[i][j] = (at_accv)(0.0f);
    }

    /* the same in every thread and block: a uniform branch, taken once before the K loop */
    if (at_wide_ok(lda | ldb, (unsigned long long)A | (unsigned long long)B))
        at_mainloop<true>(acc, sa, sb, A, lda, B, ldb, M, N, K, bm, bn, tid, lane, wm0, wn0);
    else
        at_mainloop<false>(acc, sa, sb, A, lda, B, ldb, M, N, K, bm, bn, tid, lane, wm0, wn0);

    /* ---- epilogue: C = alpha * acc + beta * C, rounded once ---- */
    const int col = at_acc_col(&cfg, lane);
    AT_UNROLL(TM)
    for (int i = 0; i < TM; ++i) {
        AT_UNROLL(TN)
        for (int j = 0; j < TN; ++j) {
            const int gj = bn + wn0 + j * MFMA + col;
            AT_UNROLL(ACC)
            for (int r = 0; r < ACC; ++r) {
                const int gi = bm + wm0 + i * MFMA + at_acc_row(&cfg, lane, r);
                if ((!EDGE_M || gi < M) && (!EDGE_N || gj < N)) {
                    const idx_t at = (idx_t)gi * ldc + gj;
                    float v = alpha * acc[i][j][r];
                    if (beta != 0.0f) v += beta * at_to_f32(C[at]);
                    C[at] = at_from_f32(v);
                }
            }
        }
    }
}
#endif /* AT_MFMA_HOST */
