/* gemm_mma.cu — tunable tensor-core GEMM template (CUDA, sm_80 and later) for 16-bit operands.
 *
 *   C = alpha * op(A) * op(B) + beta * C        all matrices row-major, elements 16-bit
 *
 *   A(i,p) = TA ? A[p*lda + i] : A[i*lda + p]   op(A) is M x K
 *   B(p,j) = TB ? B[j*ldb + p] : B[p*ldb + j]   op(B) is K x N
 *   C(i,j) = C[i*ldc + j]                       C is M x N; not read when beta == 0
 *
 * Elements are raw 16-bit patterns (unsigned short): IEEE half when DT = 0, bfloat16 when
 * DT = 1. Products accumulate in f32; alpha and beta apply in f32 and C is rounded to nearest
 * even once. No CUDA headers are used: conversions are inline PTX `cvt` and bit manipulation.
 *
 * Structure. A block computes a BM x BN tile of C with (BM/WM) x (BN/WN) warps, each owning a
 * WM x WN warp tile made of (WM/16) x (WN/8) mma.m16n8k16 tiles whose f32 accumulators stay in
 * registers. K advances in BK steps through a STAGES-deep ring of shared-memory stages filled
 * by 16-byte `cp.async.cg` copies (one commit group per K tile, `cp.async.wait_group STAGES-2`
 * before each step), so STAGES-1 tiles are in flight while one is consumed. Operand fragments
 * come from shared memory with `ldmatrix.x4`; a tile is stored exactly as it lies in global
 * memory (its contiguous dimension contiguous in shared memory too), and `ldmatrix.trans`
 * serves the layouts where the contiguous dimension is not the one mma wants (A when TA = 1,
 * B when TB = 0).
 *
 * Shared-memory layout. A stage holds A as [BM][BK] (TA = 0) or [BK][BM] (TA = 1) and B as
 * [BK][BN] (TB = 0) or [BN][BK] (TB = 1), in rows of R = cols/8 16-byte chunks. With SWIZZLE = 1
 * chunk c of row r is stored at chunk c ^ f(r), f chosen so that the eight rows one ldmatrix
 * matrix reads (8 consecutive rows, same logical chunk) land in eight distinct 16-byte bank
 * groups: f(r) = r & 7 when R >= 8, else (r / (8/R)) & (R-1) (the 8/R rows sharing a 128-byte
 * line already differ in their line offset). No padding, so shared memory is exactly
 * STAGES * (BM + BN) * BK * 2 bytes. SWIZZLE = 0 is the plain layout (bank conflicts).
 *
 * Misaligned operands (run-time slow path). cp.async needs 16-byte aligned global addresses:
 * a chunk of 8 elements starts at base + row*ld + 8c, aligned exactly when the base is 16-byte
 * aligned and ld % 8 == 0. Each block tests this once for A and B together (a uniform branch,
 * the same answer in every block); if it fails, the block stages its tiles with 16-bit global
 * loads and 16-byte shared stores instead (synchronous, so slower, but with the same pipeline
 * and edge handling). lda/ldb are not problem variables of the space, hence the run-time test.
 * The C epilogue likewise uses 32-bit accesses (column pairs) only when C is 4-byte aligned and
 * ldc is even, else 16-bit accesses.
 *
 * Split-K (SPLITK > 1). Grid dimension 2 splits K into SPLITK ranges of TPS = ceil(KT/SPLITK)
 * whole BK tiles (KT = ceil(K/BK)); the last ranges may be short or empty (K < SPLITK*BK, or KT
 * not a multiple), and an empty range still takes part in the reduction. The kernel then takes
 * one more argument, WS: a workspace of T*(BM*BN + 1) f32 words for T = ceil(M/BM)*ceil(N/BN)
 * tiles, all zero before the launch: T partial tiles of BM*BN floats, then T arrival counters.
 * Each block adds its f32 accumulators into its tile's partial with atomicAdd (fragment order:
 * word (((mi*NI + ni)*4 + e)*THREADS + tid), so a warp's atomics are 128 contiguous bytes),
 * then __threadfence() and one atomicAdd on the tile's counter. The block that arrives last
 * (counter == SPLITK-1) fences again, takes the sums with atomicExch(.., 0) — reading them
 * and leaving zeros behind — and resets the counter, then runs the ordinary epilogue
 * (alpha*acc + beta*C, C unread when beta == 0). No block ever waits for another, so there is
 * no deadlock whatever the scheduling, and the workspace is all zero again when the kernel
 * returns: it is cleared once when allocated, never per launch. Launches that share one
 * workspace must not overlap (one stream).
 *
 * Edges. Copies past the M/N/K bounds read nothing and zero-fill shared memory (cp.async's
 * src-size operand; a chunk cut by the bound copies just its valid elements), so partial tiles
 * contribute zeros; stores are guarded. EDGE_M/EDGE_N/EDGE_K = 0 compile the checks away.
 *
 * Tuning parameters (-D; constraints in gemm_mma.yaml):
 *   BM, BN    block tile of C          BK       K tile (multiple of 16)
 *   WM, WN    warp tile (multiples of 16)       STAGES   pipeline depth (2..4)
 *   SWIZZLE   1: XOR-swizzled shared tiles (conflict-free ldmatrix); 0: plain
 *   SPLITK    K ranges reduced through the workspace (1: direct, no workspace)
 * Problem defines (gemm_problem.h): TA, TB (layouts as above), EDGE_M/N/K, DT (0 f16, 1 bf16),
 * IDX64 (64-bit element offsets). Launch (OpenCL convention): local = [32*(BM/WM)*(BN/WN), 1, 1],
 * global = [ceil(n/BN) * local0, ceil(m/BM), SPLITK]: block x walks N, y walks M, z walks K.
 *
 * The PTX primitives are wrapped in at_* functions in the shared headers of templates/common/
 * (cuda_async.h: shared addresses, cp.async, st.shared; cuda_f16.h: conversions; cuda_mma.h:
 * ldmatrix and mma; cuda_splitk.h: split-K atomics). Defining AT_PTX_EMULATE before
 * including this file replaces all of them (and the preamble macros) with a host emulation. */

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
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#include "gemm_problem.h" /* the problem defines TA, TB, EDGE_M/N/K, DT, IDX64; idx_t */

/* ---- derived constants ----------------------------------------------------------------------- */
#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define THREADS (32 * WARPS_M * WARPS_N)
#define MI      (WM / 16) /* mma tiles per warp along M */
#define NI      (WN / 8)  /* mma tiles per warp along N (even: ldmatrix.x4 loads two) */

/* Shared tiles, in 16-bit elements: rows x cols, cols contiguous (as in global memory). */
#if TA
#define A_ROWS BK
#define A_COLS BM
#else
#define A_ROWS BM
#define A_COLS BK
#endif
#if TB
#define B_ROWS BN
#define B_COLS BK
#else
#define B_ROWS BK
#define B_COLS BN
#endif
#define A_TILE (A_ROWS * A_COLS)
#define B_TILE (B_ROWS * B_COLS)

#include "../common/cuda_async.h"  /* at_smem_addr, cp.async, at_stage_chunk16 */
#include "../common/cuda_f16.h"    /* AT_MMA_TYPE, at_to_f32, at_from_f32 */
#include "../common/cuda_mma.h"    /* ldmatrix, mma */
#include "../common/cuda_splitk.h" /* split-K workspace atomics */

/* ---- shared-memory addressing ---------------------------------------------------------------- */

/* Byte offset of logical 16-byte chunk c of row r in a tile with R chunks per row. */
template <int R> INLINE int at_chunk_off(const int r, const int c)
{
#if SWIZZLE
    constexpr int DIV = R >= 8 ? 1 : 8 / R;
    constexpr int MASK = (R >= 8 ? 8 : R) - 1;
    return (r * R + (c ^ ((r / DIV) & MASK))) * 16;
#else
    return (r * R + c) * 16;
#endif
}

/* ---- global -> shared staging ---------------------------------------------------------------- */

/* at_stage_tile (cuda_async.h) into a tile of R = COLS / 8 chunks a row laid out by
 * at_chunk_off. vec: cp.async (needs 16-byte aligned chunks); else 16-bit loads. */
template <int ROWS, int COLS, int ER, int EC>
INLINE void at_stage(const at_saddr dst, const unsigned short *RESTRICT g, const idx_t ld,
                     const int row0, const int col0, const int nrows, const int ncols,
                     const int tid, const bool vec)
{
    at_stage_tile<ROWS, COLS, THREADS, ER, EC>(
        dst, g, ld, row0, col0, nrows, ncols, tid, vec,
        [](const int r, const int cc) { return at_chunk_off<COLS / 8>(r, cc); });
}

/* ---- the kernel ------------------------------------------------------------------------------ */
KERNEL void gemm_mma(const int M, const int N, const int K, const float alpha, const float beta,
                     const unsigned short *__restrict__ A, const int lda,
                     const unsigned short *__restrict__ B, const int ldb, unsigned short *C,
                     const int ldc
#if SPLITK > 1
                     ,
                     float *__restrict__ WS
#endif
)
{
    alignas(128) LOCAL unsigned short smem[STAGES * (A_TILE + B_TILE)];

    const int tid = LOCAL_ID(0);
    const int lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp % WARPS_M) * WM; /* warp tile origin within the block tile */
    const int wn0 = (warp / WARPS_M) * WN;
    const int bm = GROUP_ID(1) * BM, bn = GROUP_ID(0) * BN;
#if SPLITK > 1 /* this block's K tiles: [kt0, kt0 + KT), possibly empty */
    const int TPS = ((K + BK - 1) / BK + SPLITK - 1) / SPLITK;
    const int kt0 = GROUP_ID(2) * TPS;
    const int KT = MAX(MIN((K + BK - 1) / BK - kt0, TPS), 0);
#else
    const int kt0 = 0;
    const int KT = (K + BK - 1) / BK;
#endif

    /* the same in every thread and block: a uniform branch */
    const bool vec = ((lda | ldb) & 7) == 0 &&
                     (((unsigned long long)A | (unsigned long long)B) & 15) == 0;

    const at_saddr sA = at_smem_addr(smem);
    const at_saddr sB = sA + STAGES * A_TILE * 2;

    /* stage s <- K tile starting at k0 (one commit group per call site) */
#if TA
#define AT_STAGE_A(s, k0)                                                                          \
    at_stage<A_ROWS, A_COLS, EDGE_K, EDGE_M>(sA + (s) * (A_TILE * 2), A, lda, (k0), bm, K, M,     \
                                             tid, vec)
#else
#define AT_STAGE_A(s, k0)                                                                          \
    at_stage<A_ROWS, A_COLS, EDGE_M, EDGE_K>(sA + (s) * (A_TILE * 2), A, lda, bm, (k0), M, K,     \
                                             tid, vec)
#endif
#if TB
#define AT_STAGE_B(s, k0)                                                                          \
    at_stage<B_ROWS, B_COLS, EDGE_N, EDGE_K>(sB + (s) * (B_TILE * 2), B, ldb, bn, (k0), N, K,     \
                                             tid, vec)
#else
#define AT_STAGE_B(s, k0)                                                                          \
    at_stage<B_ROWS, B_COLS, EDGE_K, EDGE_N>(sB + (s) * (B_TILE * 2), B, ldb, (k0), bn, K, N,     \
                                             tid, vec)
#endif

    AT_UNROLL(STAGES - 1)
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) {
            AT_STAGE_A(s, (kt0 + s) * BK);
            AT_STAGE_B(s, (kt0 + s) * BK);
        }
        at_cp_commit();
    }

    float acc[MI][NI][4];
    AT_UNROLL(MI)
    for (int mi = 0; mi < MI; ++mi)
        AT_UNROLL(NI)
        for (int ni = 0; ni < NI; ++ni)
            AT_UNROLL(4)
            for (int e = 0; e < 4; ++e)
                acc[mi][ni][e] = 0.0f;

    /* Per-lane ldmatrix coordinates (see at_ldsm_x4): matrix q = lane >> 3, row lane & 7.
     * A fragment registers: q = (rows 0-7 | 8-15) x (k 0-7 | 8-15), rows fastest; B (two n8
     * tiles per x4): q = (k 0-7 | 8-15) x (n 0-7 | 8-15), k fastest. */
    const int lr = lane & 7, lq0 = (lane >> 3) & 1, lq1 = lane >> 4;

    AT_UNROLL(1)
    for (int kt = 0; kt < KT; ++kt) {
        at_cp_wait<STAGES - 2>(); /* this thread's copies of tile kt have landed */
        BARRIER();                /* ... everyone's; and stage (kt-1) % STAGES is free */
        {
            const int nk = kt + STAGES - 1;
            if (nk < KT) {
                AT_STAGE_A(nk % STAGES, (kt0 + nk) * BK);
                AT_STAGE_B(nk % STAGES, (kt0 + nk) * BK);
            }
            at_cp_commit();
        }
        const int st = kt % STAGES;
        const at_saddr a_st = sA + st * (A_TILE * 2);
        const at_saddr b_st = sB + st * (B_TILE * 2);

        AT_UNROLL(BK / 16)
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned af[MI][4], bf[NI][2];
            AT_UNROLL(MI)
            for (int mi = 0; mi < MI; ++mi) {
#if TA /* [BK][BM]: stored rows are k; .trans */
                at_ldsm_x4_trans(af[mi], a_st + at_chunk_off<A_COLS / 8>(
                                                    kk * 16 + lq1 * 8 + lr,
                                                    (wm0 + mi * 16) / 8 + lq0));
#else /* [BM][BK]: stored rows are m */
                at_ldsm_x4(af[mi], a_st + at_chunk_off<A_COLS / 8>(wm0 + mi * 16 + lq0 * 8 + lr,
                                                                   kk * 2 + lq1));
#endif
            }
            AT_UNROLL(NI / 2)
            for (int nj = 0; nj < NI / 2; ++nj) {
                unsigned t[4];
#if TB /* [BN][BK]: stored rows are n */
                at_ldsm_x4(t, b_st + at_chunk_off<B_COLS / 8>(wn0 + nj * 16 + lq1 * 8 + lr,
                                                              kk * 2 + lq0));
#else /* [BK][BN]: stored rows are k; .trans */
                at_ldsm_x4_trans(t, b_st + at_chunk_off<B_COLS / 8>(kk * 16 + lq0 * 8 + lr,
                                                                    (wn0 + nj * 16) / 8 + lq1));
#endif
                bf[2 * nj][0] = t[0];
                bf[2 * nj][1] = t[1];
                bf[2 * nj + 1][0] = t[2];
                bf[2 * nj + 1][1] = t[3];
            }
            AT_UNROLL(MI)
            for (int mi = 0; mi < MI; ++mi)
                AT_UNROLL(NI)
                for (int ni = 0; ni < NI; ++ni)
                    at_mma(acc[mi][ni], af[mi], bf[ni]);
        }
    }
    at_cp_wait<0>(); /* only empty groups remain; keeps the exit clean */

#if SPLITK > 1
    /* Split-K reduction (see the top of the file); every block returns but the last. */
    {
        const long tiles = (long)NUM_GROUPS(0) * NUM_GROUPS(1);
        const long tile = (long)GROUP_ID(1) * NUM_GROUPS(0) + GROUP_ID(0);
        float *wt = WS + tile * (BM * BN) + tid;
        int *count = (int *)(WS + tiles * (BM * BN)) + tile;
        float *accf = &acc[0][0][0]; /* accf[(mi*NI + ni)*4 + e]; fully unrolled: registers */
        if (KT > 0) {                /* an empty range adds only zeros: it just counts itself */
            AT_UNROLL(MI * NI * 4)
            for (int i = 0; i < MI * NI * 4; ++i)
                at_red_add(wt + i * THREADS, accf[i]);
        }
        /* The arrival flag lives in the (now idle) stage memory: a static variable of its own
         * would push 48 KiB configs past the static shared-memory limit. */
        volatile int *last = (volatile int *)smem;
        at_fence_device(); /* this thread's partial sums are visible before the block counts */
        BARRIER();       /* ... and every warp is done with the stages */
        if (tid == 0) *last = at_count_in(count) == SPLITK - 1;
        BARRIER();
        if (!*last) return;
        at_fence_device(); /* the other blocks' sums are seen after their counts */
        AT_UNROLL(MI * NI * 4)
        for (int i = 0; i < MI * NI * 4; ++i)
            accf[i] = at_take(wt + i * THREADS);
        if (tid == 0) at_count_reset(count);
    }
#endif

    /* Epilogue: accumulator e of tile (mi, ni) is C(row g + 8*(e>>1), col 2*t + (e&1)). */
    const int g = lane >> 2, t4 = lane & 3;
    const bool cvec = (ldc & 1) == 0 && ((unsigned long long)C & 3) == 0;
    AT_UNROLL(MI)
    for (int mi = 0; mi < MI; ++mi) {
        AT_UNROLL(2)
        for (int h = 0; h < 2; ++h) {
            const int i = bm + wm0 + mi * 16 + g + 8 * h;
            if (EDGE_M && i >= M) continue;
            unsigned short *crow = C + (idx_t)i * ldc;
            AT_UNROLL(NI)
            for (int ni = 0; ni < NI; ++ni) {
                const int j = bn + wn0 + ni * 8 + 2 * t4;
                float v0 = alpha * acc[mi][ni][2 * h], v1 = alpha * acc[mi][ni][2 * h + 1];
                if (!EDGE_N || j + 1 < N) {
                    if (cvec) {
                        unsigned *p = (unsigned *)(crow + j);
                        if (beta != 0.0f) {
                            const unsigned old = *p;
                            v0 += beta * at_to_f32((unsigned short)(old & 0xffffu));
                            v1 += beta * at_to_f32((unsigned short)(old >> 16));
                        }
                        *p = (unsigned)at_from_f32(v0) | ((unsigned)at_from_f32(v1) << 16);
                    } else {
                        if (beta != 0.0f) {
                            v0 += beta * at_to_f32(crow[j]);
                            v1 += beta * at_to_f32(crow[j + 1]);
                        }
                        crow[j] = at_from_f32(v0);
                        crow[j + 1] = at_from_f32(v1);
                    }
                } else if (j < N) {
                    if (beta != 0.0f) v0 += beta * at_to_f32(crow[j]);
                    crow[j] = at_from_f32(v0);
                }
            }
        }
    }
#undef AT_STAGE_A
#undef AT_STAGE_B
}
