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

/* Element e (0 .. BM*BK-1) of the A tile a block stages: its row (M) and k within the tile.
 * Consecutive e follow the global contiguous dimension (k when TA = 0, m when TA = 1), so
 * consecutive threads read consecutive addresses. */
AT_HD void at_stage_a(const at_mfma_cfg *c, const int e, int *row, int *k)
{
    if (c->ta) {
        *row = e % c->bm;
        *k = e / c->bm;
    } else {
        *row = e / c->bk;
        *k = e % c->bk;
    }
}

/* Element e of the B tile: its column (N) and k (k contiguous when TB = 1, n when TB = 0). */
AT_HD void at_stage_b(const at_mfma_cfg *c, const int e, int *col, int *k)
{
    if (c->tb) {
        *col = e / c->bk;
        *k = e % c->bk;
    } else {
        *col = e % c->bn;
        *k = e / c->bn;
    }
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
#define LOADS_A (BM * BK / THREADS)
#define LOADS_B (BN * BK / THREADS)

/* ---- the kernel ------------------------------------------------------------------------------ */
KERNEL void gemm_mfma(const int M, const int N, const int K, const float alpha, const float beta,
                      const unsigned short *RESTRICT A, const int lda,
                      const unsigned short *RESTRICT B, const int ldb, unsigned short *C,
                      const int ldc)
{
    constexpr at_mfma_cfg cfg = {BM, BN, BK, WM, WN, MFMA, KL, LDK, THREADS, TA, TB};
    /* 16-byte aligned: operands are read as 8-byte (KL = 4) or 4-byte (KL = 2) vectors, whose
     * offsets are multiples of their size (LDK and KI are multiples of 4 elements). */
    alignas(16) LOCAL short sa[2][BM * LDK];
    alignas(16) LOCAL short sb[2][BN * LDK];

    const int tid = LOCAL_ID(0);
    const int lane = tid % 64, wave = tid / 64;
    const int wm0 = at_wave_m0(&cfg, wave), wn0 = at_wave_n0(&cfg, wave);
    const int bm = GROUP_ID(1) * BM, bn = GROUP_ID(0) * BN;
    const int KT = (K + BK - 1) / BK;

    short ra[LOADS_A], rb[LOADS_B]; /* the next tile, in flight */

    /* Global -> registers for the tile at k0, zero outside the matrices. */
#define AT_LOAD_TILES(k0)                                                                          \
    do {                                                                                           \
        AT_UNROLL(LOADS_A)                                                                         \
        for (int s = 0; s < LOADS_A; ++s) {                                                        \
            int r, kk;                                                                             \
            at_stage_a(&cfg, tid + s * THREADS, &r, &kk);                                          \
            const int gi = bm + r, gp = (k0) + kk;                                                 \
            const bool in = (!EDGE_M || gi < M) && (!EDGE_K || gp < K);                            \
            ra[s] = in ? (short)A[TA ? (idx_t)gp * lda + gi : (idx_t)gi * lda + gp] : (short)0;    \
        }                                                                                          \
        AT_UNROLL(LOADS_B)                                                                         \
        for (int s = 0; s < LOADS_B; ++s) {                                                        \
            int c, kk;                                                                             \
            at_stage_b(&cfg, tid + s * THREADS, &c, &kk);                                          \
            const int gj = bn + c, gp = (k0) + kk;                                                 \
            const bool in = (!EDGE_N || gj < N) && (!EDGE_K || gp < K);                            \
            rb[s] = in ? (short)B[TB ? (idx_t)gj * ldb + gp : (idx_t)gp * ldb + gj] : (short)0;    \
        }                                                                                          \
    } while (0)

    /* Registers -> LDS stage st, K-contiguous. */
#define AT_STORE_TILES(st)                                                                         \
    do {                                                                                           \
        AT_UNROLL(LOADS_A)                                                                         \
        for (int s = 0; s < LOADS_A; ++s) {                                                        \
            int r, kk;                                                                             \
            at_stage_a(&cfg, tid + s * THREADS, &r, &kk);                                          \
            sa[st][r * LDK + kk] = ra[s];                                                          \
        }                                                                                          \
        AT_UNROLL(LOADS_B)                                                                         \
        for (int s = 0; s < LOADS_B; ++s) {                                                        \
            int c, kk;                                                                             \
            at_stage_b(&cfg, tid + s * THREADS, &c, &kk);                                          \
            sb[st][c * LDK + kk] = rb[s];                                                          \
        }                                                                                          \
    } while (0)

    at_accv acc[TM][TN];
    AT_UNROLL(TM)
    for (int i = 0; i < TM; ++i) {
        AT_UNROLL(TN)
        for (int j = 0; j < TN; ++j) acc[i][j] = (at_accv)(0.0f);
    }

    AT_LOAD_TILES(0);
    AT_STORE_TILES(0);
    BARRIER();

    const int rc = at_frag_rc(&cfg, lane), k_lane = at_frag_k(&cfg, lane, 0);
    for (int kt = 0; kt < KT; ++kt) {
        const int st = kt & 1;
        if (kt + 1 < KT) AT_LOAD_TILES((kt + 1) * BK);

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
        if (kt + 1 < KT) AT_STORE_TILES(st ^ 1);
        BARRIER();
    }
#undef AT_LOAD_TILES
#undef AT_STORE_TILES

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
