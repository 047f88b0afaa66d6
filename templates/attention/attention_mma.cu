/* attention_mma.cu — tunable tensor-core attention forward template (CUDA, sm_80 and later) for
 * 16-bit Q, K, V, O, FlashAttention-2 style (docs/attention.md has the operation's contract):
 *
 *   O = softmax(Q K^T * scale [+ causal mask]) V       f32 accumulation, O rounded once
 *   LSE = log(sum_j exp(s_j - max)) + max               f32, natural log, s = the scaled scores
 *
 * Elements are raw 16-bit patterns (unsigned short): IEEE half when DT = 0, bfloat16 when
 * DT = 1. No CUDA headers are used: conversions and tensor-core instructions are inline PTX.
 *
 * Structure. A block owns BQ query rows of one (batch, head) and WARPS warps, warp w the MI*16
 * rows from w*MI*16 (MI = BQ / (16*WARPS), 1 or 2). The Q tile is staged once; its mma A
 * fragments stay in registers (QREG = 1) or are re-read from shared memory with ldmatrix for
 * every K tile (QREG = 0, fewer registers: head dim 256). Keys advance in tiles of BKV: K and V
 * tiles go through a STAGES-deep ring in dynamic shared memory filled with 16-byte cp.async
 * copies, K and V in separate commit groups, so S = Q K^T of tile t starts as soon as K_t has
 * landed while V_t is still in flight. Per tile, a warp computes S (mma.m16n8k16, K fragments by
 * ldmatrix) into f32 registers, multiplies by scale*log2(e) (the softmax runs in base 2: one
 * MUFU.EX2 per score), updates its rows' running max m and sum l (max over the 4 lanes of a
 * row by two butterfly shuffles; l stays a per-lane partial sum until the end), rescales the O
 * accumulators by 2^(m_old - m_new), and turns P = 2^(s - m) into A fragments of the P V mma in
 * registers: the C layout of two adjacent n8 tiles of S is the A layout of a 16 x 16 tile of P
 * (common/cuda_mma.h), so P never touches shared memory. V fragments come from ldmatrix.trans
 * (V is stored [key][d], the mma wants B = V with k = key). Finally l is summed over the row's
 * lanes, O = acc / l and LSE = (m + log2 l) * ln 2.
 *
 * Pipeline, tile t of a block's T (stage t % STAGES): wait until K_t has landed (cp.async
 * wait_group 2*STAGES-3: V_t and the later tiles may still be pending), barrier (everyone's
 * copies are visible and everyone has left tile t-1, whose stage is refilled next), issue K and
 * V of tile t+STAGES-1, compute S and the softmax, wait until V_t has landed (wait_group
 * 2*STAGES-2), barrier, O += P V_t. One commit group per K and per V copy, empty ones included,
 * so the wait counts hold at the end too.
 *
 * Masks and edges. Causal (bottom-right aligned): query row i sees key j when j <= i + off,
 * off = seq_kv - seq. A block stops at the tile holding key min(q0 + BQ, seq) - 1 + off (tiles
 * past its last row's diagonal are skipped) and masks only the tiles that cross the diagonal of
 * its first row (k0 + BKV - 1 > q0 + off); causal blocks are numbered in reverse so the longest
 * rows start first. Keys past seq_kv (the last tile when EDGE_KV) are masked too, and their K/V
 * rows staged as zeros (cp.async's src-size), so no garbage meets P = 0; Q rows past seq are
 * zero, computed and never stored. EDGE_Q / EDGE_KV = 0 compile those checks away. A row whose
 * keys are all masked so far keeps m = -inf; the exponent base is then 0, so no inf - inf.
 *
 * Shared memory: Q [BQ][D], then STAGES K tiles [BKV][D], then STAGES V tiles, 16-bit, rows of
 * R = D/8 16-byte chunks. SWIZZLE = 1 stores chunk c of row r at c ^ (r & 7) within the row's
 * whole groups of 8 chunks and at c ^ ((r / (8/T)) & (T-1)) within a last partial group of T
 * chunks (T = R % 8: 2 for D = 80, 4 for D = 32 and 96), so the 8 rows one ldmatrix matrix
 * reads fall in distinct bank groups; SWIZZLE = 0 is the plain layout (bank conflicts).
 * Bytes: 2*BQ*D + 4*STAGES*BKV*D.
 *
 * Misaligned operands (run-time slow path): cp.async needs 16-byte aligned sources, i.e. Q, K, V
 * 16-byte aligned and every stride a multiple of 8 elements. Otherwise (a uniform branch) tiles
 * are staged with 16-bit loads and 16-byte shared stores (cuda_async.h). O is stored in 32-bit
 * pairs when O is 4-byte aligned and its strides even, else in 16-bit halves.
 *
 * Split-KV decode (SPLIT > 1): grid dimension 1 splits a block's key tiles into SPLIT ranges of
 * ceil(T/SPLIT) tiles (the last may be short or empty). The kernel then takes the workspace WS,
 * all zero at launch: for each of the NUM_GROUPS(0) (batch, head, query block) tiles, SPLIT
 * slots of BQ*(D+8) f32 — a block's unnormalised O accumulators, row max m and row sum l (log2
 * units) in fragment order, word i*THREADS + tid, so a warp's stores are contiguous — and after
 * all slots one int counter per tile. A block stores its slot (an empty range stores m = -inf,
 * l = 0, O = 0), fences, and counts itself in (at_count_in); the block that arrives last fences
 * again, combines every slot with at_take (reading and leaving zeros: m = max m_s, l = sum
 * 2^(m_s - m) l_s, O likewise), resets the counter and runs the ordinary epilogue. No block waits
 * for another; the workspace is all zero again when the kernel returns (launches sharing one
 * workspace must not overlap).
 *
 * Tuning parameters (-D; constraints in attention_mma.yaml):
 *   BQ       query rows per block        WARPS    warps per block (BQ = 16 * MI * WARPS)
 *   BKV      keys per K/V tile           STAGES   K/V ring depth (>= 2)
 *   SWIZZLE  1: XOR-swizzled tiles       QREG     1: Q fragments kept in registers
 *   SPLIT    split-KV ranges (1: none, no workspace)
 * Problem defines (attention_problem.h): HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, DT, IDX64.
 * Launch (OpenCL convention): local = [32*WARPS, 1, 1], global = [ceil(seq/BQ) * batch*heads *
 * local0, SPLIT, 1]: block x is (batch*head) * ceil(seq/BQ) + query block, so the blocks of one
 * head, which read the same K and V, run together; y is the key split. Dynamic shared memory as
 * above.
 *
 * The PTX primitives are at_* functions of templates/common/ (cuda_async.h: cp.async; cuda_f16.h:
 * conversions; cuda_mma.h: ldmatrix, mma, shuffle, exp2, packing; cuda_splitk.h: the workspace
 * atomics). Defining AT_PTX_EMULATE before including this file replaces all of them (and the
 * preamble macros) with a host emulation (tests/unit/mma_emu). */

/* ---- defaults, so the file also compiles stand-alone --------------------------------------- */
#ifndef BQ
#define BQ 64
#endif
#ifndef BKV
#define BKV 64
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef QREG
#define QREG 1
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#include "attention_problem.h" /* HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, DT, IDX64; idx_t */

/* ---- derived constants ----------------------------------------------------------------------- */
#define THREADS (32 * WARPS)
#define MI      (BQ / (16 * WARPS)) /* m16 row tiles per warp */
#define DK      (HEAD_DIM / 16)     /* k16 steps of S = Q K^T */
#define DN      (HEAD_DIM / 8)      /* n8 tiles of O (even: ldmatrix.x4 loads two) */
#define NS      (BKV / 8)           /* n8 tiles of S (even) */
#define KS      (BKV / 16)          /* k16 steps of O += P V */
#define RQ      (HEAD_DIM / 8)      /* 16-byte chunks per row of every tile */
#define Q_TILE  (BQ * HEAD_DIM)     /* elements */
#define KV_TILE (BKV * HEAD_DIM)
#define NVALS   (MI * (DN * 4 + 4)) /* split-KV slot words per thread: O, m, l */

#include "../common/cuda_async.h"  /* at_smem_addr, cp.async, at_stage_tile */
#include "../common/cuda_f16.h"    /* AT_MMA_TYPE, at_from_f32 */
#include "../common/cuda_mma.h"    /* ldmatrix, mma, shuffle, exp2, packing */
#include "../common/cuda_splitk.h" /* split-KV workspace atomics */

static_assert(BQ == 16 * MI * WARPS && (MI == 1 || MI == 2), "BQ must be 16 or 32 rows a warp");
static_assert(HEAD_DIM % 16 == 0 && BKV % 16 == 0, "head dim and BKV: multiples of 16");
static_assert(HEAD_DIM % 64 == 0 || HEAD_DIM % 64 == 16 || HEAD_DIM % 64 == 32,
              "head dim % 64 must be 0, 16 or 32 (whole swizzle groups, or a tail of 2 or 4)");
static_assert(STAGES >= 2, "STAGES >= 2");

/* ---- shared-memory addressing ---------------------------------------------------------------- */

/* Byte offset of logical 16-byte chunk c of row r in a tile of RQ chunks a row (see the top). */
INLINE int at_tile_off(const int r, const int c)
{
#if SWIZZLE
    constexpr int FULL = RQ & ~7, TAIL = RQ & 7;
    constexpr int TDIV = 8 / (TAIL ? TAIL : 8), TMASK = TAIL ? TAIL - 1 : 0;
    const int s = c < FULL ? c ^ (r & 7) : FULL + ((c - FULL) ^ ((r / TDIV) & TMASK));
    return (r * RQ + s) * 16;
#else
    return (r * RQ + c) * 16;
#endif
}

/* Rows row0.. of a [rows][HEAD_DIM] operand (row stride ld) into a ROWS-row tile at dst, rows
 * from nrows on zero (checked when ER). vec: cp.async; else 16-bit loads. */
template <int ROWS, int ER>
INLINE void at_stage_rows(const at_saddr dst, const unsigned short *RESTRICT g, const idx_t ld,
                          const int row0, const int nrows, const int tid, const bool vec)
{
    at_stage_tile<ROWS, HEAD_DIM, THREADS, ER, 0>(
        dst, g, ld, row0, 0, nrows, HEAD_DIM, tid, vec,
        [](const int r, const int cc) { return at_tile_off(r, cc); });
}

/* ---- the kernel ------------------------------------------------------------------------------ */
KERNEL void attention_mma(const unsigned short *RESTRICT Q, const unsigned short *RESTRICT K,
                          const unsigned short *RESTRICT V, unsigned short *RESTRICT O,
                          float *RESTRICT LSE, const int heads, const int kv_heads, const int seq,
                          const int seq_kv, const float scale, const long q_sb, const long q_sh,
                          const long q_ss, const long kv_sb, const long kv_sh, const long kv_ss
#if SPLIT > 1
                          ,
                          float *RESTRICT WS
#endif
)
{
    AT_DYN_SMEM(smem);
    const int tid = LOCAL_ID(0);
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;                      /* fragment row / column pair */
    const int lr = lane & 7, lq0 = (lane >> 3) & 1, lq1 = lane >> 4; /* ldmatrix row, matrix */

    /* this block: query block qb of (batch b, head h), key/value head kvh */
    const int nqb = (seq + BQ - 1) / BQ;
    const int bhi = GROUP_ID(0) / nqb;
#if CAUSAL
    const int qb = nqb - 1 - GROUP_ID(0) % nqb; /* the longest rows first */
#else
    const int qb = GROUP_ID(0) % nqb;
#endif
    const int b = bhi / heads, h = bhi % heads;
    const int kvh = h / (heads / kv_heads);
    const int q0 = qb * BQ, wq0 = warp * (16 * MI);
    const idx_t qss = (idx_t)q_ss, kss = (idx_t)kv_ss;
    const unsigned short *Qb = Q + ((idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh);
    const unsigned short *Kb = K + ((idx_t)b * (idx_t)kv_sb + (idx_t)kvh * (idx_t)kv_sh);
    const unsigned short *Vb = V + ((idx_t)b * (idx_t)kv_sb + (idx_t)kvh * (idx_t)kv_sh);

    /* key tiles [t0, t0 + T) of this block */
    const int off = seq_kv - seq;
#if CAUSAL
    const int kv_end = MIN(seq_kv, MIN(q0 + BQ, seq) + off);
#else
    const int kv_end = seq_kv;
#endif
    const int NT = (kv_end + BKV - 1) / BKV;
#if SPLIT > 1
    const int TPS = (NT + SPLIT - 1) / SPLIT;
    const int t0 = MIN(GROUP_ID(1) * TPS, NT);
    const int T = MIN(NT - t0, TPS);
#else
    const int t0 = 0, T = NT;
#endif

    /* the same in every thread and block: a uniform branch */
    const bool vec = ((q_sb | q_sh | q_ss | kv_sb | kv_sh | kv_ss) & 7) == 0 &&
                     (((unsigned long long)Q | (unsigned long long)K | (unsigned long long)V) &
                      15) == 0;

    const at_saddr sQ = at_smem_addr(smem);
    const at_saddr sK = sQ + Q_TILE * 2;
    const at_saddr sV = sK + STAGES * KV_TILE * 2;

    /* K and V of key tile t0 + i into stage s: two commit groups, empty past the range */
#define AT_STAGE_KV(s, i)                                                                          \
    do {                                                                                           \
        if ((i) < T)                                                                               \
            at_stage_rows<BKV, EDGE_KV>(sK + (s) * (KV_TILE * 2), Kb, kss, (t0 + (i)) * BKV,      \
                                        seq_kv, tid, vec);                                         \
        at_cp_commit();                                                                            \
        if ((i) < T)                                                                               \
            at_stage_rows<BKV, EDGE_KV>(sV + (s) * (KV_TILE * 2), Vb, kss, (t0 + (i)) * BKV,      \
                                        seq_kv, tid, vec);                                         \
        at_cp_commit();                                                                            \
    } while (0)

    at_stage_rows<BQ, EDGE_Q>(sQ, Qb, qss, q0, seq, tid, vec);
    at_cp_commit();
    AT_UNROLL(STAGES - 1)
    for (int s = 0; s < STAGES - 1; ++s) AT_STAGE_KV(s, s);

    at_cp_wait<2 * (STAGES - 1)>(); /* Q has landed */
    BARRIER();
#if QREG
    unsigned qf[MI][DK][4]; /* A fragments of Q, for the whole block */
    AT_UNROLL(MI)
    for (int mi = 0; mi < MI; ++mi)
        AT_UNROLL(DK)
        for (int kk = 0; kk < DK; ++kk)
            at_ldsm_x4(qf[mi][kk], sQ + at_tile_off(wq0 + mi * 16 + lq0 * 8 + lr, kk * 2 + lq1));
#endif

    const float sl2 = scale * 1.4426950408889634f; /* scores in log2 units */
    const float ninf = at_neg_inf();
    float o[MI][DN][4], m[MI][2], l[MI][2];
    AT_UNROLL(MI)
    for (int mi = 0; mi < MI; ++mi) {
        AT_UNROLL(DN)
        for (int dn = 0; dn < DN; ++dn)
            AT_UNROLL(4)
            for (int e = 0; e < 4; ++e)
                o[mi][dn][e] = 0.0f;
        m[mi][0] = m[mi][1] = ninf;
        l[mi][0] = l[mi][1] = 0.0f;
    }

    AT_UNROLL(1)
    for (int t = 0; t < T; ++t) {
        const int st = t % STAGES;
        const int k0 = (t0 + t) * BKV;
        at_cp_wait<2 * STAGES - 3>(); /* this thread's K_t has landed */
        BARRIER();                    /* everyone's; and tile t-1's stage is free */
        AT_STAGE_KV((t + STAGES - 1) % STAGES, t + STAGES - 1);

        /* S = Q K_t^T */
        const at_saddr k_st = sK + st * (KV_TILE * 2);
        float s[MI][NS][4];
        AT_UNROLL(MI)
        for (int mi = 0; mi < MI; ++mi)
            AT_UNROLL(NS)
            for (int ns = 0; ns < NS; ++ns)
                AT_UNROLL(4)
                for (int e = 0; e < 4; ++e)
                    s[mi][ns][e] = 0.0f;
        AT_UNROLL(DK)
        for (int kk = 0; kk < DK; ++kk) {
#if QREG
#define AT_QF(mi) qf[mi][kk]
#else
            unsigned qa[MI][4];
            AT_UNROLL(MI)
            for (int mi = 0; mi < MI; ++mi)
                at_ldsm_x4(qa[mi], sQ + at_tile_off(wq0 + mi * 16 + lq0 * 8 + lr, kk * 2 + lq1));
#define AT_QF(mi) qa[mi]
#endif
            AT_UNROLL(NS / 2)
            for (int nj = 0; nj < NS / 2; ++nj) {
                unsigned kf[4]; /* B fragments of keys 16nj.. (K stored [key][d]: rows are n) */
                at_ldsm_x4(kf, k_st + at_tile_off(nj * 16 + lq1 * 8 + lr, kk * 2 + lq0));
                AT_UNROLL(MI)
                for (int mi = 0; mi < MI; ++mi) {
                    at_mma(s[mi][2 * nj], AT_QF(mi), kf);
                    at_mma(s[mi][2 * nj + 1], AT_QF(mi), kf + 2);
                }
            }
#undef AT_QF
        }

        /* scale, mask, online softmax; s becomes P (log2 units: p = 2^(s - m)) */
        const bool mask = (CAUSAL && k0 + BKV - 1 > q0 + off) || (EDGE_KV && k0 + BKV > seq_kv);
        AT_UNROLL(MI)
        for (int mi = 0; mi < MI; ++mi)
            AT_UNROLL(NS)
            for (int ns = 0; ns < NS; ++ns)
                AT_UNROLL(4)
                for (int e = 0; e < 4; ++e) {
                    float x = s[mi][ns][e] * sl2;
                    if (mask) {
                        const int i = q0 + wq0 + mi * 16 + g + 8 * (e >> 1);
                        const int j = k0 + ns * 8 + 2 * t4 + (e & 1);
                        if ((CAUSAL && j > i + off) || (EDGE_KV && j >= seq_kv)) x = ninf;
                    }
                    s[mi][ns][e] = x;
                }
        AT_UNROLL(MI)
        for (int mi = 0; mi < MI; ++mi)
            AT_UNROLL(2)
            for (int r = 0; r < 2; ++r) {
                float mx = m[mi][r];
                AT_UNROLL(NS)
                for (int ns = 0; ns < NS; ++ns)
                    mx = fmaxf(mx, fmaxf(s[mi][ns][2 * r], s[mi][ns][2 * r + 1]));
                mx = fmaxf(mx, at_shfl_xor(mx, 1)); /* the row's 4 lanes */
                mx = fmaxf(mx, at_shfl_xor(mx, 2));
                const float base = mx == ninf ? 0.0f : mx; /* no key yet: no inf - inf */
                const float corr = at_exp2(m[mi][r] - base);
                m[mi][r] = mx;
                AT_UNROLL(DN)
                for (int dn = 0; dn < DN; ++dn) {
                    o[mi][dn][2 * r] *= corr;
                    o[mi][dn][2 * r + 1] *= corr;
                }
                float sum = 0.0f;
                AT_UNROLL(NS)
                for (int ns = 0; ns < NS; ++ns)
                    AT_UNROLL(2)
                    for (int e = 0; e < 2; ++e) {
                        const float p = at_exp2(s[mi][ns][2 * r + e] - base);
                        s[mi][ns][2 * r + e] = p;
                        sum += p;
                    }
                l[mi][r] = l[mi][r] * corr + sum;
            }

        at_cp_wait<2 * STAGES - 2>(); /* this thread's V_t has landed */
        BARRIER();                    /* everyone's */

        /* O += P V_t: P's A fragments are S's C fragments, packed (V stored [key][d]: .trans) */
        const at_saddr v_st = sV + st * (KV_TILE * 2);
        AT_UNROLL(KS)
        for (int kk = 0; kk < KS; ++kk) {
            unsigned pa[MI][4];
            AT_UNROLL(MI)
            for (int mi = 0; mi < MI; ++mi) {
                pa[mi][0] = at_pack2(s[mi][2 * kk][0], s[mi][2 * kk][1]);
                pa[mi][1] = at_pack2(s[mi][2 * kk][2], s[mi][2 * kk][3]);
                pa[mi][2] = at_pack2(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
                pa[mi][3] = at_pack2(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
            }
            AT_UNROLL(DN / 2)
            for (int dj = 0; dj < DN / 2; ++dj) {
                unsigned vf[4]; /* B fragments of d columns 16dj.. */
                at_ldsm_x4_trans(vf, v_st + at_tile_off(kk * 16 + lq0 * 8 + lr, dj * 2 + lq1));
                AT_UNROLL(MI)
                for (int mi = 0; mi < MI; ++mi) {
                    at_mma(o[mi][2 * dj], pa[mi], vf);
                    at_mma(o[mi][2 * dj + 1], pa[mi], vf + 2);
                }
            }
        }
    }
    at_cp_wait<0>(); /* only empty groups remain; keeps the exit clean */
#undef AT_STAGE_KV

    /* the row sums over the row's 4 lanes */
    AT_UNROLL(MI)
    for (int mi = 0; mi < MI; ++mi)
        AT_UNROLL(2)
        for (int r = 0; r < 2; ++r) {
            l[mi][r] += at_shfl_xor(l[mi][r], 1);
            l[mi][r] += at_shfl_xor(l[mi][r], 2);
        }

#if SPLIT > 1
    /* Split-KV combination (see the top of the file); every block returns but the last. */
    {
        const long tiles = (long)NUM_GROUPS(0);
        const long tile = (long)GROUP_ID(0);
        float *slots = WS + tile * (SPLIT * NVALS * THREADS) + tid;
        int *count = (int *)(WS + tiles * (SPLIT * NVALS * THREADS)) + tile;
        float *mine = slots + GROUP_ID(1) * (NVALS * THREADS);
        AT_UNROLL(MI)
        for (int mi = 0; mi < MI; ++mi) {
            AT_UNROLL(DN * 4)
            for (int i = 0; i < DN * 4; ++i)
                mine[(mi * DN * 4 + i) * THREADS] = o[mi][i / 4][i % 4];
            AT_UNROLL(2)
            for (int r = 0; r < 2; ++r) {
                mine[(MI * DN * 4 + mi * 4 + r) * THREADS] = m[mi][r];
                mine[(MI * DN * 4 + mi * 4 + 2 + r) * THREADS] = l[mi][r];
            }
        }
        /* The arrival flag lives in the (now idle) Q tile. */
        volatile int *last = (volatile int *)smem;
        at_fence_device(); /* this thread's slot is visible before the block counts */
        BARRIER();         /* ... and every warp is done with shared memory */
        if (tid == 0) *last = at_count_in(count) == SPLIT - 1;
        BARRIER();
        if (!*last) return;
        at_fence_device(); /* the other blocks' slots are seen after their counts */
        AT_UNROLL(MI)
        for (int mi = 0; mi < MI; ++mi) {
            AT_UNROLL(DN * 4)
            for (int i = 0; i < DN * 4; ++i)
                o[mi][i / 4][i % 4] = 0.0f;
            m[mi][0] = m[mi][1] = ninf;
            l[mi][0] = l[mi][1] = 0.0f;
        }
        AT_UNROLL(1)
        for (int sp = 0; sp < SPLIT; ++sp) {
            float *src = slots + sp * (NVALS * THREADS);
            AT_UNROLL(MI)
            for (int mi = 0; mi < MI; ++mi) {
                float cm[2], cs[2];
                AT_UNROLL(2)
                for (int r = 0; r < 2; ++r) {
                    const float ms = at_take(src + (MI * DN * 4 + mi * 4 + r) * THREADS);
                    const float ls = at_take(src + (MI * DN * 4 + mi * 4 + 2 + r) * THREADS);
                    const float mx = fmaxf(m[mi][r], ms);
                    const float base = mx == ninf ? 0.0f : mx;
                    cm[r] = at_exp2(m[mi][r] - base);
                    cs[r] = at_exp2(ms - base);
                    m[mi][r] = mx;
                    l[mi][r] = l[mi][r] * cm[r] + ls * cs[r];
                }
                AT_UNROLL(DN * 4)
                for (int i = 0; i < DN * 4; ++i) {
                    const int r = (i % 4) >> 1;
                    const float x = at_take(src + (mi * DN * 4 + i) * THREADS);
                    o[mi][i / 4][i % 4] = o[mi][i / 4][i % 4] * cm[r] + x * cs[r];
                }
            }
        }
        if (tid == 0) at_count_reset(count);
    }
#endif

    /* Epilogue: O = acc / l (accumulator e of tile dn: row g + 8*(e>>1), column 8dn + 2t4 +
     * (e&1)), LSE by one lane of the row. */
    unsigned short *Ob = O + ((idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh);
    const bool ovec = ((q_sb | q_sh | q_ss) & 1) == 0 && ((unsigned long long)O & 3) == 0;
    AT_UNROLL(MI)
    for (int mi = 0; mi < MI; ++mi)
        AT_UNROLL(2)
        for (int r = 0; r < 2; ++r) {
            const int i = q0 + wq0 + mi * 16 + g + 8 * r;
            if (EDGE_Q && i >= seq) continue;
            const float inv = l[mi][r] > 0.0f ? 1.0f / l[mi][r] : 0.0f;
            unsigned short *orow = Ob + (idx_t)i * qss;
            AT_UNROLL(DN)
            for (int dn = 0; dn < DN; ++dn) {
                const int j = dn * 8 + 2 * t4;
                const float v0 = o[mi][dn][2 * r] * inv, v1 = o[mi][dn][2 * r + 1] * inv;
                if (ovec) {
                    *(unsigned *)(orow + j) = at_pack2(v0, v1);
                } else {
                    orow[j] = at_from_f32(v0);
                    orow[j + 1] = at_from_f32(v1);
                }
            }
            if (t4 == 0)
                LSE[(idx_t)bhi * seq + i] =
                    l[mi][r] > 0.0f ? (m[mi][r] + log2f(l[mi][r])) * 0.6931471805599453f : ninf;
        }
}
