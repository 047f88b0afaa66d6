/* gemm_wgmma.cu — tunable Hopper (sm_90a) tensor-core GEMM template for 16-bit operands, built
 * on wgmma.mma_async with both operands read from shared memory through matrix descriptors.
 *
 *   C = alpha * op(A) * op(B) + beta * C        all matrices row-major, elements 16-bit
 *
 *   A(i,p) = TA ? A[p*lda + i] : A[i*lda + p]   op(A) is M x K
 *   B(p,j) = TB ? B[j*ldb + p] : B[p*ldb + j]   op(B) is K x N
 *   C(i,j) = C[i*ldc + j]                       C is M x N; not read when beta == 0
 *
 * Same arguments, problem variables and element conventions as gemm_mma.cu (raw 16-bit
 * patterns: IEEE half when DT = 0, bfloat16 when DT = 1; f32 accumulation; one rounding of C).
 *
 * Structure. A block of WGS consumer warpgroups (128 threads each) computes a BM x BN tile of C;
 * warpgroup g owns rows [g*BM/WGS, (g+1)*BM/WGS), covered by MT = BM/WGS/64 m64 tiles times
 * NT = BN/WN wgmma tiles of m64 x WN, whose f32 accumulators (MT*NT*WN/2 per thread) stay in
 * registers. K advances in BK steps through a STAGES-deep ring of shared-memory stages in
 * dynamic shared memory (up to the 227 KiB opt-in), filled by every thread with 16-byte
 * `cp.async.cg` copies, one commit group per K tile. Per K tile each warpgroup issues
 * BK/16 x MT x NT `wgmma.mma_async` (after `wgmma.fence`), commits them as one group and waits
 * with `wgmma.wait_group 1`: the MMAs of tile kt run while tile kt+1 is waited for and tiles up
 * to kt+STAGES-2 are being copied. Ring invariant: the copy issued in iteration kt goes to the
 * stage of tile kt-2, whose MMAs every warpgroup retired (wait_group 1 at the end of kt-1)
 * before the barrier of iteration kt; so STAGES-2 tiles are in flight while one is consumed and
 * one is being retired (STAGES >= 3).
 *
 * Shared-memory layout (the canonical wgmma layouts; PTX ISA "Shared Memory Matrix Layout",
 * CUTLASS cute GMMA::Layout_{K,MN}_SW{64,128}_Atom). Swizzling is the hardware's: in every
 * SW-byte swizzle atom (SW = 128 or 64), byte address bits [4, 4+log2(SW/16)) are XORed with
 * bits [7, ...): phys = addr ^ (((addr >> 7) & (SW/16 - 1)) << 4), on 1024-byte aligned atoms.
 *   K-major operand (A when TA = 0, B when TB = 1): rows are M (N), each row holds KSW =
 *     min(BK, 64) consecutive k (KSW*2 = SW bytes); BK/KSW such column blocks one after the
 *     other. Descriptor: start = block + row0*SW + (k0 % KSW)*2, SBO = 8*SW (the next 8 rows),
 *     LBO unused (16), swizzle 128B (BK >= 64) or 64B (BK = 32); transpose bit 0.
 *   MN-major operand (A when TA = 1, B when TB = 0): blocks of 64 M (N) columns, each BK rows
 *     (k) of 128 bytes; 128B swizzle. Descriptor: start = block + k0*128, LBO = BK*128 (the
 *     next 64 columns), SBO = 1024 (the next 8 k); transpose bit 1.
 * The global tile is copied in 16-byte chunks along its contiguous dimension, which is the
 * contiguous dimension of these layouts too, so a chunk lands whole in one swizzled slot.
 *
 * Misaligned operands and edges: as gemm_mma (a uniform run-time test for 16-byte aligned
 * A/B/lda/ldb picks cp.async or synchronous 16-bit loads + 16-byte shared stores; copies past
 * the M/N/K bounds zero-fill through cp.async's src-size), except that the test is made once,
 * before the K loop, which exists in both versions (at_mainloop<VEC>), so the cp.async loop
 * carries none of the fallback's instructions. Each thread's copy addresses (at_loader) and
 * the wgmma descriptors are worked out before the loop. Both paths write shared memory with
 * the generic proxy; each thread's `fence.proxy.async.shared::cta` before the barrier makes the
 * writes visible to wgmma (async proxy).
 *
 * Epilogue: straight from the accumulator fragments (m64nNk16 D layout: register r of thread t
 * is row 16*(t/32) + (t%32)/4 + 8*((r/2)%2), column 8*(r/4) + 2*(t%4) + r%2) to global memory,
 * column pairs with 32-bit accesses when C allows; alpha/beta in f32, C not read when
 * beta == 0, rows/columns past M/N skipped. With STORE = 1 and beta == 0 the tile goes
 * through shared memory and the TMA instead (at_store_tile): the accumulators, alpha applied and
 * rounded, are written in the layout of the C tensor map's boxes, {64 columns, BM rows} with the
 * 128B swizzle (conflict-free 32-bit stores), into a buffer of their own after the ring, and one
 * thread stores the boxes with cp.async.bulk.tensor; the TMA clips them at M and N. beta != 0
 * keeps the register epilogue (a uniform run-time branch; docs/cuda.md says why).
 *
 * Split-K (SPLITK > 1): block z of the grid's third dimension takes K tiles
 * [z*KTS, (z+1)*KTS), KTS = ceil(ceil(K/BK)/SPLITK), and the kernel takes one more argument,
 * `ws`: a zeroed workspace of ceil(M/BM)*ceil(N/BN) f32 tiles of BM x BN followed by one int
 * counter per tile. Each split adds its partial tile there (atomicAdd), fences, and counts
 * itself in; the split that arrives last reads the sums while zeroing them (atomicExch),
 * writes alpha*sum + beta*C, and zeroes the counter, so the workspace is all zero again.
 *
 * Tuning parameters (-D; constraints in gemm_wgmma.yaml):
 *   BM, BN  block tile of C   BK  K tile (32 or 64)   WN  N of the wgmma instruction
 *   WGS     consumer warpgroups (1 or 2), stacked along M    STAGES  ring depth (>= 3)
 *   SPLITK  K splits (1: none)   GROUP_M  tile rows per band of the block order (1: row-major)
 *   SWAP    1: C^T = op(B)^T op(A)^T, BM along n and BN along m (small m; see below)
 *   LOAD    0: cp.async by every thread; 1: TMA by thread 0 into a ring guarded by
 *           mbarriers (at_mainloop_tma), two tensor-map arguments after the others, 16*STAGES
 *           more bytes of shared memory; 2: the same fed by a producer warpgroup of its own
 *           (THREADS = 128*(WGS+1), setmaxnreg); the maps are `tensormap:` arguments of
 *           the YAML, encoded by the host per launch (docs/cuda.md)
 *   PERSIST 1: a persistent grid (at_sched): min(tiles, SMs) blocks, block b computing tiles b,
 *           b + grid, ... in GROUP_M's order; correct for any grid size. With LOAD = 0 the ring
 *           drains per tile (a barrier before the next tile's first copies); with LOAD = 1, 2
 *           the ring positions and barrier phases run on across tiles, so the producer loads
 *           the next tile's first stages while the consumers finish this one. Not with SPLITK.
 *   STORE   1: the TMA-store epilogue above (LOAD >= 1, not SWAP: TMA has no transpose, not
 *           SPLITK), a third tensor map `tma_c` after the others, BM*BN*2 + 1024 more bytes of
 *           shared memory (the barriers' kilobyte, then the C buffer).
 *   CLUSTER 2: 2x1 thread-block clusters (LOAD >= 1, no split-K; the launch's cluster
 *           attribute): the two CTAs of a cluster take adjacent tile rows 2u, 2u + 1 of one tile
 *           column (at_sched hands out such pairs, "units"), each loads its own A box and half
 *           of the shared B box, multicast into both CTAs' rings; a stage is refilled only when
 *           the consumers of both CTAs released it (each arrives on its own and its peer's empty
 *           barrier). With an odd number of tile rows the last pair's second tile lies past M:
 *           its A is TMA's zero fill, it still loads its half of B and takes part in every
 *           barrier, and stores nothing. Cluster barriers after the barriers' init and before
 *           exit (docs/cuda.md).
 * Problem defines: TA, TB, EDGE_M/N/K, DT, IDX64 (gemm_problem.h).
 * Launch: local = [128*WGS, 1, 1], global = [ceil(n/BN) * local0, ceil(m/BM), SPLITK] (m and n
 * exchanged with SWAP; PERSIST: [min(tiles, SMs) * local0, 1, 1]; CLUSTER = 2: [2 * ceil(n/BN),
 * ceil(m/2BM)] blocks, or 2 * min(units, SMs / 2) persistent ones, in clusters of [2, 1, 1]),
 * dynamic shared memory
 * STAGES*(BM+BN)*BK*2 + 1024 bytes (the 1024 align the ring to the swizzle atoms). Everything
 * above is said in the kernel's view: with SWAP its M is the problem's n, its A the problem's B,
 * and so on.
 *
 * The PTX primitives are wrapped in at_* functions in the shared headers of templates/common/:
 * wgmma, its fences, the layouts and descriptors in cuda_wgmma.h (which attention_wgmma.cu uses
 * too), the rest in cuda_async.h, cuda_f16.h, cuda_splitk.h, as in gemm_mma.cu.
 * Defining AT_PTX_EMULATE before including this file replaces all of them (and the preamble
 * macros) with a host emulation (tests/unit/wgmma_emu/emu.h). */

/* ---- defaults, so the file also compiles stand-alone --------------------------------------- */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 64
#endif
#ifndef WN
#define WN 128
#endif
#ifndef WGS
#define WGS 1
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#ifndef GROUP_M
#define GROUP_M 1
#endif
#ifndef SWAP
#define SWAP 0
#endif
#ifndef LOAD
#define LOAD 0 /* 0: cp.async by every thread; 1: TMA by one thread into an mbarrier ring; 2: the
                 * same from a producer warpgroup of its own (warp specialization) */
#endif
#ifndef PERSIST
#define PERSIST 0 /* 1: a persistent grid, each block taking tiles b, b + grid, ... (at_sched) */
#endif
#ifndef STORE
#define STORE 0 /* 1: the epilogue stores C through shared memory with TMA (at_store_tile) */
#endif
#if PERSIST && SPLITK > 1
#error "PERSIST with split-K is not supported (the space constrains it out)"
#endif
#if STORE && (LOAD == 0 || SWAP || SPLITK > 1)
#error "STORE needs LOAD >= 1, and neither SWAP nor split-K (the space constrains them out)"
#endif
#ifndef CLUSTER
#define CLUSTER 1 /* 2: 2x1 clusters sharing the B tile by multicast (LOAD >= 1) */
#endif
#if CLUSTER != 1 && (CLUSTER != 2 || LOAD == 0 || SPLITK > 1)
#error "CLUSTER is 1, or 2 with LOAD >= 1 and no split-K (the space constrains the rest out)"
#endif
#include "gemm_problem.h" /* the problem defines TA, TB, EDGE_M/N/K, DT, IDX64; idx_t */

/* ---- the kernel's view of the problem ------------------------------------------------------- */
/* SWAP = 1 computes C^T = op(B)^T * op(A)^T: the kernel's M side (the m64 wgmma rows, BM) runs
 * along the problem's n and its N side (BN, WN) along m, so a small m (decode) fills the
 * instruction's flexible N instead of wasting most of its 64 rows. Its A is the problem's B
 * (op(B)^T(j, p) = op(B)(p, j): transposed exactly when B is not), its B the problem's A, and
 * its C(i, j) is C[j*ldc + i]. KTA/KTB and KEDGE_M/N are the layouts and edges in that view;
 * the space's EDGE_M (EDGE_N) is the problem's m (n) against the tile that covers it. */
#if SWAP
#define KTA     (1 - TB)
#define KTB     (1 - TA)
#define KEDGE_M EDGE_N
#define KEDGE_N EDGE_M
#else
#define KTA     TA
#define KTB     TB
#define KEDGE_M EDGE_M
#define KEDGE_N EDGE_N
#endif

/* ---- derived constants ----------------------------------------------------------------------- */
#if LOAD == 2
#define THREADS (128 * (WGS + 1)) /* WGS consumer warpgroups, then one producer */
#else
#define THREADS (128 * WGS)
#endif
#define CONSUMERS (128 * WGS) /* threads that compute (and own accumulators) */
#define WG_ROWS (BM / WGS)    /* rows of C per warpgroup */
#define MT      (WG_ROWS / 64) /* m64 tiles per warpgroup */
#define NT      (BN / WN)      /* wgmma tiles along N */
#define KSW     (BK < 64 ? BK : 64) /* k per swizzled row of a K-major operand */
#define A_BYTES (BM * BK * 2)  /* one stage of A, and of B */
#define B_BYTES (BN * BK * 2)
#define STAGE_BYTES (A_BYTES + B_BYTES)
#define GROUP_U     ((GROUP_M + CLUSTER - 1) / CLUSTER) /* GROUP_M's band in units (CLUSTER rows) */

#include "../common/cuda_async.h"  /* at_smem_addr, cp.async, at_stage_chunk16 */
#include "../common/cuda_f16.h"    /* AT_MMA_TYPE, at_to_f32, at_from_f32 */
#include "../common/cuda_splitk.h" /* split-K workspace atomics */
#include "../common/cuda_wgmma.h"  /* wgmma, its fences, layouts and descriptors */
#if LOAD >= 1
#include "../common/cuda_tma.h" /* TMA, mbarriers, setmaxnreg, clusters */
#endif
#if CLUSTER > 1
#define AT_RANK() ((int)at_cluster_rank()) /* this CTA's tile row in its cluster's unit */
#else
#define AT_RANK() 0
#endif

/* ---- the operand tiles' descriptors ---------------------------------------------------------- */
#if KTA
#define AT_DESC_A(t, m0, k0) at_desc_mn<BK>((t), (m0), (k0))
#define AT_KOFF_A(k0)        at_koff_mn(k0)
#else
#define AT_DESC_A(t, m0, k0) at_desc_k<BM, KSW>((t), (m0), (k0))
#define AT_KOFF_A(k0)        at_koff_k<BM, KSW>(k0)
#endif
#if KTB
#define AT_DESC_B(t, n0, k0) at_desc_k<BN, KSW>((t), (n0), (k0))
#define AT_KOFF_B(k0)        at_koff_k<BN, KSW>(k0)
#else
#define AT_DESC_B(t, n0, k0) at_desc_mn<BK>((t), (n0), (k0))
#define AT_KOFF_B(k0)        at_koff_mn(k0)
#endif

/* ---- global -> shared staging ---------------------------------------------------------------- */

/* One thread's share of staging one operand's ROWS x COLS global tiles into the ring, its
 * addresses worked out once before the K loop. The tile's element (r, c) is
 * g[(row0 + r) * ld + col0 + c], zero past nrows (checked when ER) or ncols (when EC); it is
 * copied in 16-byte chunks of 8 elements along c, chunk cc of row r to off(r, cc) in the stage
 * (KMAJ: rows are M or N and c is k, at_off_k; else rows are k and c is M or N, at_off_mn).
 * Consecutive threads take consecutive chunks, so a thread's chunks share one column (tid % R)
 * and lie DR rows apart: one pointer, one row stride, and (when DR is a multiple of the 8-row
 * swizzle period) one shared offset plus constants. The next K tile is kstep elements on (BK
 * columns when KMAJ, BK rows otherwise). */
template <int ROWS_, int COLS, int KMAJ_, int ER_, int EC_> struct at_loader {
    static constexpr int ROWS = ROWS_, KMAJ = KMAJ_, ER = ER_, EC = EC_;
    static constexpr int R = COLS / 8;                            /* chunks per row */
    static constexpr int NC = (ROWS * R + THREADS - 1) / THREADS; /* chunks per thread */
    static constexpr int DR = THREADS / R;                 /* rows between a thread's chunks */
    static constexpr int PART = (ROWS * R) % THREADS != 0; /* a tile smaller than one pass */
    static_assert(THREADS % R == 0, "whole rows per pass");
    static constexpr int DR_ATOMS = DR % 8 == 0; /* DR rows move by whole swizzle atoms */

    const unsigned short *g;  /* the matrix: a valid, aligned address for chunks with no data */
    const unsigned short *p;  /* this thread's first chunk in the first K tile */
    idx_t rstep, kstep;       /* DR rows; one K tile (elements) */
    int rows_left, cols_left; /* rows and columns from this thread's first chunk on */
    int r0, cc0, soff;        /* its row and chunk in the tile; its byte offset in a stage */
};

/* Byte offset in a stage of chunk cc of row r of the tile L stages. */
template <class L> INLINE int at_load_off(const int r, const int cc)
{
    return L::KMAJ ? at_off_k<L::ROWS, KSW>(r, cc * 8) : at_off_mn<BK>(cc * 8, r);
}

/* l = this thread's share of the tiles of matrix m whose first K tile starts at (row0, col0). */
template <class L>
INLINE void at_load_init(L &l, const unsigned short *RESTRICT m, const idx_t ld, const int row0,
                         const int col0, const int nrows, const int ncols, const int tid)
{
    l.r0 = tid / L::R;
    l.cc0 = tid % L::R;
    l.g = m;
    l.p = m + ((idx_t)(row0 + l.r0) * ld + col0 + l.cc0 * 8);
    l.rstep = (idx_t)L::DR * ld;
    l.kstep = L::KMAJ ? (idx_t)BK : (idx_t)BK * ld;
    l.rows_left = nrows - row0 - l.r0;
    l.cols_left = ncols - col0 - l.cc0 * 8;
    l.soff = at_load_off<L>(l.r0, l.cc0);
}

/* K tile t (counted from the first) of l into the stage at dst; VEC: cp.async, else synchronous
 * 16-bit loads (at_stage_chunk16). */
template <bool VEC, class L> INLINE void at_load_stage(const L &l, const at_saddr dst, const int t)
{
    const unsigned short *q = l.p + t * l.kstep;
    const int cl = l.cols_left - (L::KMAJ ? t * BK : 0), rl = l.rows_left - (L::KMAJ ? 0 : t * BK);
    const int nc = L::EC ? MIN(MAX(cl, 0), 8) : 8; /* the same for all of this thread's chunks */
    AT_UNROLL(L::NC)
    for (int i = 0; i < L::NC; ++i) {
        if (L::PART && l.r0 + i * L::DR >= L::ROWS) break; /* past the tile (small B tiles) */
        const int n = L::ER && i * L::DR >= rl ? 0 : nc;
        const int o = L::DR_ATOMS ? l.soff + at_load_off<L>(i * L::DR, 0)
                                  : at_load_off<L>(l.r0 + i * L::DR, l.cc0);
        at_stage_chunk16(dst + o, n > 0 ? q + i * l.rstep : l.g, n, VEC);
    }
}
#if KTA
typedef at_loader<BK, BM, 0, EDGE_K, KEDGE_M> at_load_a;
#else
typedef at_loader<BM, BK, 1, KEDGE_M, EDGE_K> at_load_a;
#endif
#if KTB
typedef at_loader<BN, BK, 1, KEDGE_N, EDGE_K> at_load_b;
#else
typedef at_loader<BK, BN, 0, EDGE_K, KEDGE_N> at_load_b;
static_assert(BN >= 64, "an MN-major B tile is made of 64-column swizzle atoms");
#endif

/* ---- accumulators ---------------------------------------------------------------------------- */

/* at_fence_reg on each of this thread's accumulators (around the asynchronous MMAs). */
INLINE void at_fence_acc(float (&acc)[MT][NT][WN / 2])
{
    AT_UNROLL(MT)
    for (int mt = 0; mt < MT; ++mt)
        AT_UNROLL(NT)
        for (int nt = 0; nt < NT; ++nt)
            AT_UNROLL(WN / 2)
            for (int r = 0; r < WN / 2; ++r)
                at_fence_reg(acc[mt][nt][r]);
}

/* ---- the block's tile ------------------------------------------------------------------------ */

/* Tile pid (tile row tm, column tn) of the gx x gy tiles of C. Blocks start in the order of
 * their linear index, dimension 0 (N) fastest, and a wave takes consecutive pids; with
 * GROUP_M = 1 tile pid is row pid / gx, so the blocks of one wave cover a few tile rows and
 * every column of B, which then streams from memory again each wave. GROUP_M > 1 walks bands of
 * GROUP_M tile rows column by column (as Triton's grouped ordering does): a wave covers about
 * GROUP_M rows and waves/GROUP_M columns, and the A and B panels it reads stay in L2. A
 * bijection of [0, gx * gy) onto the tiles. */
INLINE void at_tile_of(const int pid, const int gx, const int gy, int &tm, int &tn)
{
#if GROUP_U > 1
    const int band = GROUP_U * gx;
    const int first = pid / band * GROUP_U;    /* the band's first tile row */
    const int rows = MIN(gy - first, GROUP_U); /* its tile rows (the last band may be short) */
    tm = first + pid % band % rows;
    tn = pid % band / rows;
#else
    (void)gy;
    tm = pid / gx;
    tn = pid % gx;
#endif
}

/* The tiles a block computes, in order. Without PERSIST the grid covers the gx x gy tiles of C
 * and a block takes the one of its linear index (pid = x + y * gx) through at_tile_of (with
 * GROUP_M = 1, straight from its grid position). With PERSIST the grid is one-dimensional,
 * min(tiles, SMs) blocks, and block b takes tiles b, b + grid, b + 2 * grid, ...: the tiles of
 * a wave are consecutive in the same order, so GROUP_M's bands keep their L2 reuse. Used as
 *   for (at_sched s = at_sched_init(M, N); at_sched_next(s, tm, tn);) ...
 * which the compiler resolves to one pass without PERSIST.
 * CLUSTER > 1: the scheduler hands out units of CLUSTER adjacent tile rows of one tile column
 * (tile rows u*CLUSTER .. u*CLUSTER + CLUSTER-1), the same unit to the CTAs of a cluster, each
 * taking the row of its rank: at_tile_of (and GROUP_M's bands, GROUP_U units) run over units,
 * the grid's dimension 0 counts CTAs (CLUSTER per unit; its clusters are consecutive blocks),
 * and a persistent cluster c of the grid's NUM_GROUPS(0)/CLUSTER takes units c, c + that, ...
 * Both CTAs so walk the same units and K tiles, as their shared B loads and barriers need. */
struct at_sched {
    int pid, tiles, gx, gy; /* the next unit's linear index; the units (gx columns, gy rows) */
};

INLINE at_sched at_sched_init(const int km, const int kn)
{
#if PERSIST
    const int gx = (kn + BN - 1) / BN, gy = (km + BM * CLUSTER - 1) / (BM * CLUSTER);
    return at_sched{GROUP_ID(0) / CLUSTER, gx * gy, gx, gy};
#else
    (void)km, (void)kn;
    return at_sched{0, 1, 0, 0};
#endif
}

INLINE bool at_sched_next(at_sched &s, int &tm, int &tn)
{
    if (s.pid >= s.tiles) return false;
#if PERSIST
    at_tile_of(s.pid, s.gx, s.gy, tm, tn);
    s.pid += NUM_GROUPS(0) / CLUSTER;
#elif GROUP_U > 1
    at_tile_of(GROUP_ID(0) / CLUSTER + GROUP_ID(1) * (NUM_GROUPS(0) / CLUSTER),
               NUM_GROUPS(0) / CLUSTER, NUM_GROUPS(1), tm, tn);
    s.pid++;
#else
    tm = GROUP_ID(1);
    tn = GROUP_ID(0) / CLUSTER;
    s.pid++;
#endif
    tm = tm * CLUSTER + AT_RANK(); /* the unit's row of this CTA */
    return true;
}

/* ---- the K loop ------------------------------------------------------------------------------ */

/* acc += one K tile's MMAs from the ring stage at `so` (16-byte units from the descriptors da,
 * db), issued and committed as one group; acc is overwritten on the first tile (accumulate 0). */
INLINE void at_tile_mma(float (&acc)[MT][NT][WN / 2], const at_desc (&da)[MT],
                        const at_desc (&db)[NT], const unsigned so, const bool accumulate)
{
    at_fence_acc(acc);
    at_wgmma_fence();
    AT_UNROLL(BK / 16)
    for (int kk = 0; kk < BK / 16; ++kk)
        AT_UNROLL(MT)
        for (int mt = 0; mt < MT; ++mt)
            AT_UNROLL(NT)
            for (int nt = 0; nt < NT; ++nt)
                at_wgmma<WN, KTA, 1 - KTB>(acc[mt][nt],
                                           at_desc_add(da[mt], so + AT_KOFF_A(kk * 16) / 16),
                                           at_desc_add(db[nt], so + AT_KOFF_B(kk * 16) / 16),
                                           accumulate || kk > 0);
    at_wgmma_commit();
}

/* acc = the block's K tiles [0, KT) of op(A) * op(B) through the ring at `ring`. VEC: the copies
 * are cp.async, else synchronous loads (misaligned A/B/lda/ldb); the kernel picks one of the two
 * loops once, so neither carries the other's instructions. */
template <bool VEC>
INLINE void at_mainloop(float (&acc)[MT][NT][WN / 2], const at_load_a &la, const at_load_b &lb,
                        const at_saddr ring, const int KT, const int tid)
{
#define AT_SA(s) (ring + (s) * STAGE_BYTES)
#define AT_SB(s) (ring + (s) * STAGE_BYTES + A_BYTES)
    AT_UNROLL(STAGES - 2)
    for (int s = 0; s < STAGES - 2; ++s) {
        if (s < KT) {
            at_load_stage<VEC>(la, AT_SA(s), s);
            at_load_stage<VEC>(lb, AT_SB(s), s);
        }
        at_cp_commit();
    }

    /* the descriptors of stage 0, k 0; another stage or k step moves only their start address */
    const int m_wg = (tid / 128) * WG_ROWS; /* this warpgroup's rows in the block tile */
    at_desc da[MT], db[NT];
    AT_UNROLL(MT)
    for (int mt = 0; mt < MT; ++mt) da[mt] = AT_DESC_A(AT_SA(0), m_wg + mt * 64, 0);
    AT_UNROLL(NT)
    for (int nt = 0; nt < NT; ++nt) db[nt] = AT_DESC_B(AT_SB(0), nt * WN, 0);

    AT_UNROLL(1)
    for (int kt = 0; kt < KT; ++kt) {
        at_cp_wait<STAGES - 3>(); /* this thread's copies of tile kt have landed */
        at_fence_proxy_async();   /* ... and are visible to wgmma */
        BARRIER();                /* everyone's; and every warpgroup retired tile kt-2 */
        {
            const int nk = kt + STAGES - 2;
            if (nk < KT) {
                at_load_stage<VEC>(la, AT_SA(nk % STAGES), nk);
                at_load_stage<VEC>(lb, AT_SB(nk % STAGES), nk);
            }
            at_cp_commit();
        }
        const unsigned so = (kt % STAGES) * (STAGE_BYTES / 16); /* in 16-byte units */
        at_tile_mma(acc, da, db, so, kt > 0);
        at_wgmma_wait<1>(); /* tile kt-1's MMAs are done: its stage may be refilled */
    }
    at_wgmma_wait<0>();
    at_cp_wait<0>(); /* only empty groups remain; keeps the exit clean */
#undef AT_SA
#undef AT_SB
}

#if LOAD >= 1
/* ---- the K loop fed by TMA (LOAD = 1, 2) ----------------------------------------------------- */

/* The tensor maps the host builds for LOAD = 1 (in the kernel's view, docs/cuda.md): a K-major
 * operand is a {K, rows} tensor read in one box {KSW, rows} per stage (KSW*2 bytes = the
 * swizzle span, as at_off_k lays it out); an MN-major one a {rows, K} tensor read in boxes
 * {64, BK}, box j landing 64 columns on (at_off_mn's blocks). Out of bounds is zero, and the
 * bytes still count, so every stage expects STAGE_BYTES.
 * CLUSTER > 1: the B map's box is 1/CLUSTER of the above along its outer dimension (rows of a
 * K-major tile, k rows of an MN-major one); CTA r loads part r of each box and multicasts it to
 * the whole cluster, where it lands at the same offset (the parts are whole swizzle atoms, so
 * the stage's layout is the same as from one box), and every CTA's full barrier gets all of
 * B's bytes: STAGE_BYTES still. */
#if CLUSTER > 1
#define AT_TMA_B1(dst, c0, c1, bar)                                                                \
    at_tma_load_2d_mc((dst), &tma_b, (c0), (c1), (bar), (1 << CLUSTER) - 1)
#else
#define AT_TMA_B1(dst, c0, c1, bar) at_tma_load_2d((dst), &tma_b, (c0), (c1), (bar))
#endif
#if KTA
#define AT_TMA_A(dst, k0, bar)                                                                     \
    for (int j = 0; j < BM / 64; ++j)                                                              \
    at_tma_load_2d((dst) + j * (BK * 128), &tma_a, bm + 64 * j, (k0), (bar))
#else
#define AT_TMA_A(dst, k0, bar) at_tma_load_2d((dst), &tma_a, (k0), bm, (bar))
#endif
#if KTB
static_assert(B_BYTES / CLUSTER % 1024 == 0, "a CTA's part of B is whole 1024-byte atoms");
#define AT_TMA_B(dst, k0, bar)                                                                     \
    AT_TMA_B1((dst) + AT_RANK() * (B_BYTES / CLUSTER), (k0), bn + AT_RANK() * (BN / CLUSTER), (bar))
#else
#define AT_TMA_B(dst, k0, bar)                                                                     \
    for (int j = 0; j < BN / 64; ++j)                                                              \
    AT_TMA_B1((dst) + j * (BK * 128) + AT_RANK() * (BK / CLUSTER * 128), bn + 64 * j,              \
              (k0) + AT_RANK() * (BK / CLUSTER), (bar))
#endif

/* The ring's barriers, after its stages: full[s] (one arrival, the producer's expect_tx, plus
 * the copies' bytes) and empty[s] (every consumer thread of every CTA of the cluster, once the
 * MMAs that read stage s have retired: a part of B multicast by either CTA overwrites the
 * stage in both). Tile t uses stage t % STAGES in lap t / STAGES (cuda_tma.h). */
#define AT_FULL(ring, s)  ((ring) + STAGES * STAGE_BYTES + 8 * (s))
#define AT_EMPTY(ring, s) ((ring) + STAGES * STAGE_BYTES + 8 * (STAGES + (s)))

INLINE void at_tma_init(const at_saddr ring, const int tid)
{
    if (tid == 0) {
        AT_UNROLL(STAGES)
        for (int s = 0; s < STAGES; ++s) {
            at_mbar_init(AT_FULL(ring, s), 1);
            at_mbar_init(AT_EMPTY(ring, s), CONSUMERS * CLUSTER);
        }
        at_fence_mbar_init();
    }
#if CLUSTER > 1
    at_cluster_sync(); /* the peer's barriers too, before its first multicast or arrival */
#else
    BARRIER();
#endif
}

/* A consumer thread releases stage s: the MMAs that read it have retired. With clusters, on
 * the peer's empty barrier as well, since the peer's producer multicasts into this ring. */
INLINE void at_release(const at_saddr ring, const int s)
{
    at_mbar_arrive(AT_EMPTY(ring, s));
#if CLUSTER > 1
    at_mbar_arrive_cluster(at_mapa(AT_EMPTY(ring, s), AT_RANK() ^ 1));
#endif
}

/* The producer's step: K tile kt of the problem (its K coordinate kt * BK) of the tile at rows
 * bm, columns bn into ring position t (stage t % STAGES, lap t / STAGES), once the consumers
 * released the stage's previous lap. One thread. */
INLINE void at_tma_issue(const at_tmap &tma_a, const at_tmap &tma_b, const at_saddr ring,
                         const int bm, const int bn, const int kt, const int t)
{
    const int s = t % STAGES;
    at_mbar_wait(AT_EMPTY(ring, s), ((t / STAGES) & 1) ^ 1);
    at_mbar_arrive_expect_tx(AT_FULL(ring, s), STAGE_BYTES);
    AT_TMA_A(ring + s * STAGE_BYTES, kt * BK, AT_FULL(ring, s));
    AT_TMA_B(ring + s * STAGE_BYTES + A_BYTES, kt * BK, AT_FULL(ring, s));
}

/* The producer's position in the block's work: K tile kt (of the KT from kt0 on) of tile
 * (tm, tn), ring position t; `more` until it is past the block's last tile. The ring positions
 * run on across tiles (PERSIST), so the producer fills the next tile's first stages while the
 * consumers still work on this one, and every barrier keeps its phase sequence. */
struct at_cursor {
    at_sched s;
    int tm, tn, kt, t;
    bool more;
};

INLINE void at_cursor_init(at_cursor &c, const int km, const int kn, const int KT)
{
    c.s = at_sched_init(km, kn);
    c.tm = c.tn = c.kt = c.t = 0;
    c.more = KT > 0 && at_sched_next(c.s, c.tm, c.tn);
}

/* Issues the cursor's K tile and moves it on. */
INLINE void at_produce(at_cursor &c, const at_tmap &tma_a, const at_tmap &tma_b,
                       const at_saddr ring, const int kt0, const int KT)
{
    at_tma_issue(tma_a, tma_b, ring, c.tm * BM, c.tn * BN, kt0 + c.kt, c.t);
    c.t++;
    if (++c.kt == KT) {
        c.kt = 0;
        c.more = at_sched_next(c.s, c.tm, c.tn);
    }
}

/* acc = one tile's KT K tiles from the TMA ring at `ring` (at_tma_init done), starting at ring
 * position t (updated: the next tile starts where this one ends). Every position consumed is
 * released once on its empty barrier: tile kt's after the MMAs of kt+1 were issued and kt's
 * retired (wait_group 1), the last one after wait_group 0, so the next tile (PERSIST) finds
 * its stages released. LOAD = 1: thread 0 also produces through the cursor c, STAGES - 1
 * positions ahead (the first STAGES - 1 issued by the kernel before the first tile), into the
 * next tile's K tiles when this one's are all issued; LOAD = 2: a producer warpgroup of its own
 * does (the kernel). */
INLINE void at_mainloop_tma(float (&acc)[MT][NT][WN / 2], const at_tmap &tma_a,
                            const at_tmap &tma_b, const at_saddr ring, const int kt0,
                            const int KT, const int tid, int &t
#if LOAD == 1
                            ,
                            at_cursor &c
#endif
)
{
#if LOAD != 1
    (void)tma_a, (void)tma_b, (void)kt0;
#endif
    const int m_wg = (tid / 128) * WG_ROWS;
    at_desc da[MT], db[NT];
    AT_UNROLL(MT)
    for (int mt = 0; mt < MT; ++mt) da[mt] = AT_DESC_A(ring, m_wg + mt * 64, 0);
    AT_UNROLL(NT)
    for (int nt = 0; nt < NT; ++nt) db[nt] = AT_DESC_B(ring + A_BYTES, nt * WN, 0);

    AT_UNROLL(1)
    for (int kt = 0; kt < KT; ++kt, ++t) {
        at_mbar_wait(AT_FULL(ring, t % STAGES), (t / STAGES) & 1); /* tile kt has landed */
        const unsigned so = (t % STAGES) * (STAGE_BYTES / 16);
        at_tile_mma(acc, da, db, so, kt > 0);
        at_wgmma_wait<1>(); /* tile kt-1's MMAs are done: release its stage */
        if (kt > 0) at_release(ring, (t - 1) % STAGES);
#if LOAD == 1
        if (tid == 0 && c.more && c.t < t + STAGES) at_produce(c, tma_a, tma_b, ring, kt0, KT);
#endif
    }
    at_wgmma_wait<0>();
    if (KT > 0) at_release(ring, (t - 1) % STAGES);
}
#undef AT_TMA_A
#undef AT_TMA_B
#undef AT_TMA_B1
#undef AT_FULL
#undef AT_EMPTY
#endif

/* ---- epilogue ------------------------------------------------------------------------------- */

/* Calls f(mt, nt, r, i, j) for each column pair (registers r, r+1 of wgmma tile (mt, nt)) of
 * this thread's accumulators: C(i, j) and C(i, j+1) in block-tile coordinates. */
template <typename F> INLINE void at_for_pairs(const int tid, F f)
{
    const int wg = tid / 128, w = (tid % 128) / 32, lane = tid % 32;
    AT_UNROLL(MT)
    for (int mt = 0; mt < MT; ++mt)
        AT_UNROLL(NT)
        for (int nt = 0; nt < NT; ++nt)
            AT_UNROLL(WN / 4)
            for (int r = 0; r < WN / 2; r += 2)
                f(mt, nt, r, wg * WG_ROWS + mt * 64 + w * 16 + lane / 4 + 8 * ((r / 2) % 2),
                  nt * WN + (r / 4) * 8 + (lane % 4) * 2);
}

#if STORE
/* ---- the TMA-store epilogue (STORE = 1) --------------------------------------------------- */

/* The C buffer: after the ring and the kilobyte that holds its barriers (16 * STAGES bytes),
 * so 1024-byte aligned as the 128B swizzle needs. BN/64 boxes of {64 columns, BM rows}, box jb at
 * jb * BM * 128: the layout of a K-major tile of BM rows with 64 "k" per swizzled row, so
 * element (i, j) of the block tile is at at_off_k<BM, 64>(i, j) (its low bits pass the
 * swizzle unchanged). A warp's 32-bit stores of one register pair cover 8 rows x 16 bytes,
 * which the swizzle puts in 8 different 16-byte bank groups: no conflict. */
#define AT_CBUF(ring) ((ring) + STAGES * STAGE_BYTES + 1024)
static_assert(16 * STAGES <= 1024, "the ring's barriers fit before the C buffer");
static_assert(BN % 64 == 0, "whole 64-column boxes of C");

/* The block tile at (bm, bn) of C = alpha * acc through the buffer at cbuf and the tensor map
 * of C ({N, M}, box {64, BM}, 128B swizzle), by the CONSUMERS threads. Thread 0 issues the
 * stores and owns their bulk group: it first waits until the previous tile's stores have read
 * the buffer (PERSIST), and the kernel waits for the last ones before it exits. */
INLINE void at_store_tile(float (&acc)[MT][NT][WN / 2], const at_tmap &tma_c, const at_saddr cbuf,
                          const int bm, const int bn, const int kn, const float alpha,
                          const int tid)
{
    if (tid == 0) at_bulk_wait_read<0>(); /* the buffer is free */
    at_bar_sync<1, CONSUMERS>();          /* ... for everyone (the producer may have left) */
    at_for_pairs(tid, [&](int mt, int nt, int r, int i, int j) {
        const unsigned v = (unsigned)at_from_f32(alpha * acc[mt][nt][r]) |
                           ((unsigned)at_from_f32(alpha * acc[mt][nt][r + 1]) << 16);
        at_st_shared32(cbuf + at_off_k<BM, 64>(i, j), v);
    });
    at_fence_proxy_async();      /* this thread's writes are visible to the TMA (async proxy) */
    at_bar_sync<1, CONSUMERS>(); /* ... everyone's */
    if (tid == 0) {
        AT_UNROLL(BN / 64)
        for (int jb = 0; jb < BN / 64; ++jb)
            if (!KEDGE_N || bn + 64 * jb < kn) /* a box wholly past N stores nothing */
                at_tma_store_2d(&tma_c, bn + 64 * jb, bm, cbuf + jb * (BM * 128));
        at_bulk_commit();
    }
}
#endif

/* *p = v (+ beta * *p) */
INLINE void at_store1(unsigned short *p, float v, const float beta)
{
    if (beta != 0.0f) v += beta * at_to_f32(*p);
    *p = at_from_f32(v);
}

/* The kernel's C(i, j) = v0 (+ beta*C), C(i, j+1) = v1 (+ beta*C) where inside its M x N; v
 * already scaled. Without SWAP that is C[i*ldc + j] and the next element (one 32-bit access
 * when cvec); with SWAP, C[j*ldc + i] and C[(j+1)*ldc + i]. */
INLINE void at_store_pair(unsigned short *C, const int ldc, const int M, const int N,
                          const int i, const int j, float v0, float v1, const float beta,
                          const bool cvec)
{
    if ((KEDGE_M && i >= M) || (KEDGE_N && j >= N)) return;
#if SWAP
    (void)cvec;
    at_store1(C + ((idx_t)j * ldc + i), v0, beta);
    if (!KEDGE_N || j + 1 < N) at_store1(C + ((idx_t)(j + 1) * ldc + i), v1, beta);
#else
    unsigned short *p = C + ((idx_t)i * ldc + j);
    if (!KEDGE_N || j + 1 < N) {
        if (cvec) {
            unsigned *q = (unsigned *)p;
            if (beta != 0.0f) {
                const unsigned old = *q;
                v0 += beta * at_to_f32((unsigned short)(old & 0xffffu));
                v1 += beta * at_to_f32((unsigned short)(old >> 16));
            }
            *q = (unsigned)at_from_f32(v0) | ((unsigned)at_from_f32(v1) << 16);
            return;
        }
        at_store1(p + 1, v1, beta);
    }
    at_store1(p, v0, beta);
#endif
}

/* ---- the kernel ------------------------------------------------------------------------------ */
/* setmaxnreg needs a register cap at entry: 64 K registers over THREADS, one block per SM */
#if LOAD == 2 && !defined(AT_PTX_EMULATE) && !defined(AT_MAX_THREADS)
#define AT_BOUNDS __launch_bounds__(THREADS, 1)
#else
#define AT_BOUNDS
#endif
KERNEL AT_BOUNDS void gemm_wgmma(const int M, const int N, const int K, const float alpha,
                                 const float beta, const unsigned short *__restrict__ A,
                                 const int lda, const unsigned short *__restrict__ B, const int ldb,
                                 unsigned short *C, const int ldc
#if SPLITK > 1
                                 ,
                                 float *ws
#endif
#if LOAD >= 1
                                 ,
                                 const AT_GRID_CONSTANT at_tmap tma_a,
                                 const AT_GRID_CONSTANT at_tmap tma_b
#endif
#if STORE
                                 ,
                                 const AT_GRID_CONSTANT at_tmap tma_c
#endif
)
{
    AT_DYN_SMEM(at_dsmem);
    const int tid = LOCAL_ID(0);
#if SWAP
    const int km = N, kn = M;
#else
    const int km = M, kn = N;
#endif
    /* K tiles of each of this block's tiles: all, or its split's share */
    const int KT_ALL = (K + BK - 1) / BK;
#if SPLITK > 1
    const int KTS = (KT_ALL + SPLITK - 1) / SPLITK;
    const int kt0 = MIN(GROUP_ID(2) * KTS, KT_ALL);
    const int KT = MIN(KT_ALL - kt0, KTS);
#else
    const int kt0 = 0, KT = KT_ALL;
#endif

    /* the same in every thread and block: a uniform branch, taken once outside the K loop */
    const bool vec = ((lda | ldb) & 7) == 0 &&
                     (((unsigned long long)A | (unsigned long long)B) & 15) == 0;

    /* the ring, aligned to the 1024-byte swizzle atoms (the launch adds 1024 bytes for this) */
    const at_saddr ring = (at_smem_addr(at_dsmem) + 1023u) & ~1023u;

#if LOAD >= 1
    (void)vec; /* the operands are in the tensor maps */
    at_tma_init(ring, tid);
    int t = 0; /* the consumers' ring position, carried across this block's tiles */
#if LOAD == 2
    /* warp specialization: the last warpgroup only loads, one thread issuing every K tile of
     * every tile of the block once its stage is released, and gives its registers to the
     * consumers; it leaves here, so none of the code after this branch has to fit its 40
     * registers */
    if (tid >= CONSUMERS) {
        at_setmaxnreg_dec<40>();
        if (tid == CONSUMERS) {
            at_cursor c;
            at_cursor_init(c, km, kn, KT);
            while (c.more) at_produce(c, tma_a, tma_b, ring, kt0, KT);
        }
#if CLUSTER > 1
        at_cluster_sync(); /* the kernel's end (below), with the consumers */
#endif
        return;
    }
    at_setmaxnreg_inc<232>(); /* 2 x 128 x 232 + 128 x 40 <= 64 K registers */
#else
    at_cursor c; /* thread 0's, STAGES - 1 ring positions ahead of the consumers */
    at_cursor_init(c, km, kn, KT);
    if (tid == 0)
        while (c.more && c.t < STAGES - 1) at_produce(c, tma_a, tma_b, ring, kt0, KT);
#endif
#endif

    int tm, tn;
    for (at_sched s = at_sched_init(km, kn); at_sched_next(s, tm, tn);) {
        const int bm = tm * BM, bn = tn * BN;
        /* Not zeroed: the first MMAs overwrite them (acc_in = 0). Zeroing them here makes ptxas
         * serialize the wgmma pipeline (C7515) in many configurations. With no K tile at all
         * (an empty split) they are never read. */
        float acc[MT][NT][WN / 2];
#if LOAD >= 1
        at_mainloop_tma(acc, tma_a, tma_b, ring, kt0, KT, tid, t
#if LOAD == 1
                        ,
                        c
#endif
        );
#else
#if PERSIST
        BARRIER(); /* every warpgroup retired the previous tile's MMAs: the ring may refill */
#endif
#if SWAP
        const int klda = ldb, kldb = lda;
        const unsigned short *ka = B, *kb = A;
#else
        const int klda = lda, kldb = ldb;
        const unsigned short *ka = A, *kb = B;
#endif
        at_load_a la;
        at_load_b lb;
#if KTA
        at_load_init(la, ka, klda, kt0 * BK, bm, K, km, tid);
#else
        at_load_init(la, ka, klda, bm, kt0 * BK, km, K, tid);
#endif
#if KTB
        at_load_init(lb, kb, kldb, bn, kt0 * BK, kn, K, tid);
#else
        at_load_init(lb, kb, kldb, kt0 * BK, bn, K, kn, tid);
#endif
        if (vec)
            at_mainloop<true>(acc, la, lb, ring, KT, tid);
        else
            at_mainloop<false>(acc, la, lb, ring, KT, tid);
#endif
        at_fence_acc(acc);
#if CLUSTER > 1
        if (bm >= km) continue; /* the second tile of a ragged last unit: nothing to store */
#endif

        const bool cvec = (ldc & 1) == 0 && ((unsigned long long)C & 3) == 0;
#if SPLITK > 1
        /* Add the partial tile into the workspace; the last split to arrive finishes the tile
         * (one tile per block: PERSIST excludes split-K). */
        const int tile = tn + tm * NUM_GROUPS(0);
        float *part = ws + (idx_t)tile * (BM * BN);
        int *count = (int *)(ws + (idx_t)NUM_GROUPS(0) * NUM_GROUPS(1) * (BM * BN)) + tile;
        at_for_pairs(tid, [&](int mt, int nt, int r, int i, int j) {
            if (KT == 0 || (KEDGE_M && bm + i >= km) || (KEDGE_N && bn + j >= kn)) return;
            at_red_add(part + i * BN + j, acc[mt][nt][r]);
            at_red_add(part + i * BN + j + 1, acc[mt][nt][r + 1]);
        });
        at_fence_device(); /* this thread's adds are visible device-wide before it counts in */
        LOCAL int last;
#if LOAD == 2
#define AT_EPI_BARRIER() at_bar_sync<1, CONSUMERS>() /* the producer has left */
#else
#define AT_EPI_BARRIER() BARRIER()
#endif
        AT_EPI_BARRIER();
        if (tid == 0) last = at_count_in(count) == SPLITK - 1;
        AT_EPI_BARRIER();
#undef AT_EPI_BARRIER
        if (!last) return;
        at_fence_device(); /* the other splits' adds are visible to the reads below */
        at_for_pairs(tid, [&](int mt, int nt, int r, int i, int j) {
            (void)mt;
            (void)nt;
            (void)r;
            if ((KEDGE_M && bm + i >= km) || (KEDGE_N && bn + j >= kn)) return;
            const float v0 = at_take(part + i * BN + j), v1 = at_take(part + i * BN + j + 1);
            at_store_pair(C, ldc, km, kn, bm + i, bn + j, alpha * v0, alpha * v1, beta, cvec);
        });
        if (tid == 0) at_count_reset(count);
#else
#if STORE
        if (beta == 0.0f) { /* uniform: every tile of the launch takes the same epilogue */
            at_store_tile(acc, tma_c, AT_CBUF(ring), bm, bn, kn, alpha, tid);
            continue;
        }
#endif
        at_for_pairs(tid, [&](int mt, int nt, int r, int i, int j) {
            at_store_pair(C, ldc, km, kn, bm + i, bn + j, alpha * acc[mt][nt][r],
                          alpha * acc[mt][nt][r + 1], beta, cvec);
        });
#endif
    }
#if STORE
    if (tid == 0) at_bulk_wait<0>(); /* the stores are done before the shared memory goes */
#endif
#if CLUSTER > 1
    /* not before the peer is done: its consumers' last releases arrive on this CTA's barriers */
    at_cluster_sync();
#endif
}
