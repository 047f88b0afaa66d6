/* attention_wgmma.cu — tunable Hopper (sm_90a) fused attention forward for 16-bit Q, K, V, O
 * (FlashAttention-3 style): both matrix products on wgmma.mma_async, P fed from registers.
 *
 *   O = softmax(Q K^T * scale [+ causal mask]) V,  LSE = log(sum_j exp(s_j - max)) + max
 *
 * per batch b and query head h; key/value head h / (heads / kv_heads). Contract (buffers,
 * strides, causal alignment, the split-KV workspace): docs/attention.md. Elements are raw 16-bit
 * patterns (IEEE half when DT = 0, bfloat16 when DT = 1), accumulation in f32, LSE in f32.
 *
 * Structure. A block of WGS = BQ/64 warpgroups (128 threads each) owns BQ query rows of one
 * (b, h); warpgroup g owns rows [64g, 64g+64). The Q tile is staged once into shared memory; the
 * K and V tiles (BKV keys each) go through a STAGES-deep ring of shared-memory stages filled by
 * every thread with 16-byte cp.async copies, one commit group per key tile (Q joins the first).
 * Per key tile each warpgroup
 *   1. S = Q K^T: HEAD_DIM/16 wgmma m64nBKVk16, A (Q) and B (K) from shared memory through
 *      descriptors, committed and waited for;
 *   2. online softmax in registers, in the log2 domain: x = s * scale * log2(e), keys past
 *      seq_kv and (causal) past the diagonal get -inf on the tiles that have such keys only;
 *      the row max over the four threads of a quad by two butterfly shuffles; p = ex2(x - max);
 *      the running sums stay per thread until the end;
 *   3. rescales O by ex2(old max - new max) and rounds P into the 16-bit A-operand registers of
 *      the next product: the f32 registers 8j..8j+7 of the S fragment, packed in pairs, are the
 *      A fragment of keys 16j..16j+15 (the layouts coincide, templates/common/cuda_wgmma.h);
 *   4. O += P V: BKV/16 wgmma m64nHEAD_DIMk16 with A from registers and B (V) from shared memory,
 *      MN-major (the transpose bit: V is staged as it lies in memory, head dimension
 *      contiguous); committed, not waited for.
 * OVERLAP = 0 runs the steps in that order (step 4 of tile t runs while tile t+1's S is issued
 * and waited for). OVERLAP = 1 (FlashAttention-3's intra-warpgroup overlap) issues step 4 of
 * tile t-1 right behind step 1 of tile t and waits for S alone (wait_group 1), so the softmax
 * of tile t (MUFU, FMA) runs while the tensor cores do tile t-1's P V; before step 3 touches O
 * and P it waits for that P V (wait_group 0); the last tile's P V follows the loop. Same
 * registers (S, O and P of one tile each), more code (step 4 appears twice).
 * Ring invariant (as gemm_wgmma.cu): the copy issued in iteration t goes to the stage of tile
 * t-2, whose K (step 1 of t-2) and V (step 4 of t-2, retired by a wait of iteration t-1 in
 * either order) every warpgroup is done with by the barrier of iteration t; STAGES-2 tiles are
 * in flight while one is consumed and one is being retired (STAGES >= 3).
 *
 * Causal: key tiles wholly past the block's last row's diagonal are never loaded or computed;
 * the tiles that cross a diagonal (and the last, partial key tile when EDGE_KV) are masked, the
 * others are not (a block-uniform test). A row that has seen no key yet keeps max -inf and takes
 * 0 as its exponent base, so masked keys contribute exactly 0.
 *
 * Shared-memory layouts (cuda_wgmma.h): Q (BQ x HEAD_DIM) and K (BKV x HEAD_DIM) K-major with
 * 128-byte swizzled rows of 64 elements (HEAD_DIM/64 column blocks); V (BKV rows of HEAD_DIM)
 * MN-major: blocks of 64 head-dimension columns, BKV rows of 128 bytes each, 128B swizzle. Each
 * 16-byte chunk of a global row (8 consecutive head-dimension elements) lands whole in one
 * swizzled slot in all three.
 *
 * Misaligned operands: a uniform run-time test (every stride a multiple of 8 elements and Q, K,
 * V 16-byte aligned) picks cp.async or synchronous 16-bit loads + 16-byte shared stores; rows
 * past seq / seq_kv are zero-filled. Both write shared memory with the generic proxy; each
 * thread's fence.proxy.async before the barrier makes the writes visible to wgmma.
 *
 * Epilogue: O = acc / sum straight from the fragments (column pairs as one 32-bit store when O
 * and its strides allow), rows past seq skipped; LSE = (max + log2(sum)) * ln 2 by the first
 * thread of each quad.
 *
 * Split-KV (SPLIT > 1, flash-decoding): block z of the grid's third dimension takes key tiles
 * [z*TS, (z+1)*TS) of the block's (causally limited) tiles, TS = ceil(tiles/SPLIT), and the
 * kernel takes `ws`: a zeroed workspace of ceil(seq/BQ)*batch*heads query-block entries, each
 * SPLIT partials of BQ*(HEAD_DIM+2) f32 (O unnormalised, BQ x HEAD_DIM; then the row maxima in
 * the log2 domain; then the row sums), followed by one int counter per query block. Each split
 * adds its partial into its own slot (atomicAdd onto zero; a split with no key writes max -inf),
 * fences and counts itself in; the split that arrives last takes every partial (atomicExch,
 * leaving zero), weighs split s by ex2(max_s - max) / sum (the first thread of each quad works
 * the weights out and shares them through shared memory), writes O and LSE and resets the
 * counter, so the workspace is all zero again.
 *
 * Tuning parameters (-D; constraints in attention_wgmma.yaml):
 *   BQ      query rows per block: 64 per warpgroup (64 or 128)
 *   BKV     keys per K/V tile, the N of the S wgmma (64 or 128)
 *   STAGES  K/V ring depth (>= 3)
 *   SPLIT   key splits (1: none)
 *   OVERLAP 1: the softmax of a tile overlaps the previous tile's P V (above)
 * Problem defines: HEAD_DIM (64 or 128), CAUSAL, EDGE_Q, EDGE_KV, DT, IDX64 (attention_problem.h).
 * Launch: local = [128*BQ/64, 1, 1], global = [ceil(seq/BQ) * local0, batch*heads, SPLIT],
 * dynamic shared memory (BQ + 2*STAGES*BKV)*HEAD_DIM*2 + 1024 bytes (the 1024 align the tiles to
 * the swizzle atoms).
 *
 * The PTX primitives are wrapped in at_* functions: the shuffle, ex2 and lg2 below, the rest in
 * templates/common/ (cuda_wgmma.h, cuda_async.h, cuda_f16.h, cuda_splitk.h, as gemm_wgmma.cu).
 * Defining AT_PTX_EMULATE before including this file replaces all of them (and the preamble
 * macros) with a host emulation (tests/unit/wgmma_emu/emu.h). */

/* ---- defaults, so the file also compiles stand-alone --------------------------------------- */
#ifndef BQ
#define BQ 128
#endif
#ifndef BKV
#define BKV 128
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef OVERLAP
#define OVERLAP 1
#endif
#include "attention_problem.h" /* HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, DT, IDX64; idx_t */

#if HEAD_DIM != 64 && HEAD_DIM != 128
#error "attention_wgmma takes HEAD_DIM 64 or 128"
#endif

/* ---- derived constants ----------------------------------------------------------------------- */
#define WGS         (BQ / 64) /* warpgroups, 64 query rows each */
#define THREADS     (128 * WGS)
#define KSW         64        /* head-dimension elements per 128-byte swizzled row of Q and K */
#define Q_BYTES     (BQ * HEAD_DIM * 2)
#define KV_BYTES    (BKV * HEAD_DIM * 2) /* one K tile, and one V tile */
#define STAGE_BYTES (2 * KV_BYTES)
#define PART        (BQ * (HEAD_DIM + 2)) /* f32 of one split's partial (split-KV) */

#include "../common/cuda_async.h"  /* at_smem_addr, cp.async, at_stage_tile */
#include "../common/cuda_f16.h"    /* AT_MMA_TYPE, at_to_f32, at_from_f32 */
#include "../common/cuda_splitk.h" /* split-KV workspace atomics */
#include "../common/cuda_wgmma.h"  /* wgmma, its fences, layouts and descriptors */

/* ---- PTX primitives: shuffle, exp2, log2, -inf, packing (common/cuda_warp.h) ----------------- */
#include "../common/cuda_warp.h"
#ifdef AT_PTX_EMULATE
INLINE unsigned at_pack2(const float lo, const float hi)
{
    return (unsigned)at_from_f32(lo) | ((unsigned)at_from_f32(hi) << 16);
}
#endif /* AT_PTX_EMULATE */

/* ---- fragments ------------------------------------------------------------------------------- */

/* Max and sum over the four threads of a quad: the threads that share a fragment row. */
INLINE float at_quad_max(float v)
{
    v = fmaxf(v, at_shfl_xor(v, 1));
    return fmaxf(v, at_shfl_xor(v, 2));
}
INLINE float at_quad_sum(float v)
{
    v += at_shfl_xor(v, 1);
    return v + at_shfl_xor(v, 2);
}

/* p[0], p[1] = v0, v1 rounded; one 32-bit store when vec (p 4-byte aligned). */
INLINE void at_store_pair(unsigned short *p, const float v0, const float v1, const bool vec)
{
    if (vec) {
        *(unsigned *)p = at_pack2(v0, v1);
    } else {
        p[0] = at_from_f32(v0);
        p[1] = at_from_f32(v1);
    }
}

/* ---- the kernel ------------------------------------------------------------------------------ */
KERNEL void attention_wgmma(const unsigned short *__restrict__ Q,
                            const unsigned short *__restrict__ K,
                            const unsigned short *__restrict__ V, unsigned short *O, float *LSE,
                            const int heads, const int kv_heads, const int seq, const int seq_kv,
                            const float scale, const long q_sb, const long q_sh, const long q_ss,
                            const long kv_sb, const long kv_sh, const long kv_ss
#if SPLIT > 1
                            ,
                            float *ws
#endif
)
{
    AT_DYN_SMEM(at_dsmem);
    const int tid = LOCAL_ID(0), lane = tid % 32;
    const int qb = GROUP_ID(0), bh = GROUP_ID(1);
    const int b = bh / heads, h = bh % heads, hk = h / (heads / kv_heads);
    const int q0 = qb * BQ;
    const int diag = seq_kv - seq; /* causal: query i sees keys j <= i + diag */

    const unsigned short *Qb = Q + ((idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh);
    const idx_t kv_off = (idx_t)b * (idx_t)kv_sb + (idx_t)hk * (idx_t)kv_sh;
    const unsigned short *Kb = K + kv_off, *Vb = V + kv_off;

    /* key tiles of this block: up to the last key its last row sees; then its split's share */
    int nkv = (seq_kv + BKV - 1) / BKV;
#if CAUSAL
    nkv = MIN(nkv, (MIN(q0 + BQ, seq) - 1 + diag) / BKV + 1);
#endif
#if SPLIT > 1
    const int per = (nkv + SPLIT - 1) / SPLIT;
    const int t0 = MIN(GROUP_ID(2) * per, nkv), nt = MIN(nkv - t0, per);
#else
    const int t0 = 0, nt = nkv;
#endif

    /* the same in every thread and block: a uniform branch */
    const bool vec = ((q_sb | q_sh | q_ss | kv_sb | kv_sh | kv_ss) & 7) == 0 &&
                     (((unsigned long long)Q | (unsigned long long)K | (unsigned long long)V) &
                      15) == 0;

    /* Q, then the ring, aligned to the 1024-byte swizzle atoms (the launch adds 1024 bytes) */
    const at_saddr sQ = (at_smem_addr(at_dsmem) + 1023u) & ~1023u;
#define AT_SK(s) (sQ + Q_BYTES + (s) * STAGE_BYTES)
#define AT_SV(s) (AT_SK(s) + KV_BYTES)
    /* stage s <- key tile t (of this block's) */
#define AT_STAGE_KV(s, t)                                                                          \
    do {                                                                                           \
        at_stage_tile<BKV, HEAD_DIM, THREADS, EDGE_KV, 0>(                                         \
            AT_SK(s), Kb, (idx_t)kv_ss, (t) * BKV, 0, seq_kv, HEAD_DIM, tid, vec,                  \
            [](const int r, const int cc) { return at_off_k<BKV, KSW>(r, cc * 8); });            \
        at_stage_tile<BKV, HEAD_DIM, THREADS, EDGE_KV, 0>(                                         \
            AT_SV(s), Vb, (idx_t)kv_ss, (t) * BKV, 0, seq_kv, HEAD_DIM, tid, vec,                  \
            [](const int r, const int cc) { return at_off_mn<BKV>(cc * 8, r); });                \
    } while (0)

    if (nt > 0) /* in the first tile's group */
        at_stage_tile<BQ, HEAD_DIM, THREADS, EDGE_Q, 0>(
            sQ, Qb, (idx_t)q_ss, q0, 0, seq, HEAD_DIM, tid, vec,
            [](const int r, const int cc) { return at_off_k<BQ, KSW>(r, cc * 8); });
    AT_UNROLL(STAGES - 2)
    for (int s = 0; s < STAGES - 2; ++s) {
        if (s < nt) AT_STAGE_KV(s, t0 + s);
        at_cp_commit();
    }

    const int wg = tid / 128;
    const int r0 = wg * 64 + ((tid % 128) / 32) * 16 + lane / 4; /* rows r0, r0+8 of the block */
    const float sl2 = scale * 1.4426950408889634f;                /* scale * log2(e) */

    /* Not zeroed: the first tile's MMAs overwrite them (acc_in = 0); an empty split never
     * reads them. */
    float o[HEAD_DIM / 2];    /* O (m64 x HEAD_DIM fragment), unnormalised */
    float sc[BKV / 2];        /* S (m64 x BKV fragment), then P in f32 */
    unsigned pa[BKV / 16][4]; /* P rounded: the register A operand of keys 16j .. 16j+15 */
    float mx[2] = {at_neg_inf(), at_neg_inf()}; /* rows r0, r0+8: max of x so far */
    float sum[2] = {0.0f, 0.0f};                /* ... this thread's part of sum ex2(x - max) */

    /* O += P V over tile t's V, in stage s (acc_in 0 on the first tile) */
#define AT_PV(s, t)                                                                                \
    AT_UNROLL(BKV / 16)                                                                            \
    for (int j = 0; j < BKV / 16; ++j)                                                             \
        at_wgmma_rs<HEAD_DIM, 1>(o, pa[j], at_desc_mn<BKV>(AT_SV(s), 0, j * 16), (t) > 0 || j > 0)

    AT_UNROLL(1)
    for (int it = 0; it < nt; ++it) {
        at_cp_wait<STAGES - 3>(); /* this thread's copies of tile it (and Q) have landed */
        at_fence_proxy_async();   /* ... and are visible to wgmma */
        BARRIER();                /* everyone's; and every warpgroup retired tile it-2 */
        {
            const int nk = it + STAGES - 2;
            if (nk < nt) AT_STAGE_KV(nk % STAGES, t0 + nk);
            at_cp_commit();
        }
        const int st = it % STAGES;
        const int kv0 = (t0 + it) * BKV;

        /* 1. S = Q K^T; behind it, 4. of the previous tile: O += P V */
        at_fence_regs<BKV / 2>(sc);
        at_fence_regs<HEAD_DIM / 2>(o);
        at_wgmma_fence();
        AT_UNROLL(HEAD_DIM / 16)
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
            at_wgmma<BKV, 0, 0>(sc, at_desc_k<BQ, KSW>(sQ, wg * 64, kk * 16),
                                at_desc_k<BKV, KSW>(AT_SK(st), 0, kk * 16), kk > 0);
        at_wgmma_commit();
        if (OVERLAP && it > 0) {
            AT_PV((it + STAGES - 1) % STAGES, it - 1);
            at_wgmma_commit();
            at_wgmma_wait<1>(); /* S; the P V runs on during the softmax */
        } else {
            at_wgmma_wait<0>(); /* S (and without OVERLAP, the previous tile's P V) */
        }
        at_fence_regs<BKV / 2>(sc);

        /* 2. online softmax, log2 domain */
        const bool mask = (EDGE_KV && kv0 + BKV > seq_kv) || (CAUSAL && kv0 + BKV - 1 > q0 + diag);
        float tmax[2] = {at_neg_inf(), at_neg_inf()};
        AT_UNROLL(BKV / 2)
        for (int r = 0; r < BKV / 2; ++r) {
            float x = sc[r] * sl2;
            if (mask) {
                const int j = kv0 + 8 * (r / 4) + 2 * (lane % 4) + r % 2;
                const int i = q0 + r0 + 8 * ((r / 2) % 2);
                if ((EDGE_KV && j >= seq_kv) || (CAUSAL && j > i + diag)) x = at_neg_inf();
            }
            sc[r] = x;
            tmax[(r / 2) % 2] = fmaxf(tmax[(r / 2) % 2], x);
        }
        float alpha[2], base[2];
        AT_UNROLL(2)
        for (int hr = 0; hr < 2; ++hr) {
            const float m = fmaxf(mx[hr], at_quad_max(tmax[hr]));
            base[hr] = m == at_neg_inf() ? 0.0f : m; /* no key seen yet: every p is 0 */
            alpha[hr] = at_exp2(mx[hr] - base[hr]);
            mx[hr] = m;
            sum[hr] *= alpha[hr];
        }
        AT_UNROLL(BKV / 2)
        for (int r = 0; r < BKV / 2; ++r) {
            const float p = at_exp2(sc[r] - base[(r / 2) % 2]);
            sum[(r / 2) % 2] += p;
            sc[r] = p;
        }

        /* 3. once the P V is done: O rescaled, P into the A-operand registers */
        if (OVERLAP) at_wgmma_wait<0>();
        at_fence_regs<HEAD_DIM / 2>(o);
        at_fence_regs<BKV / 4>(&pa[0][0]); /* read by that P V until now */
        if (it > 0)
            AT_UNROLL(HEAD_DIM / 2)
            for (int r = 0; r < HEAD_DIM / 2; ++r)
                o[r] *= alpha[(r / 2) % 2];
        AT_UNROLL(BKV / 16)
        for (int j = 0; j < BKV / 16; ++j)
            AT_UNROLL(4)
            for (int q = 0; q < 4; ++q)
                pa[j][q] = at_pack2(sc[8 * j + 2 * q], sc[8 * j + 2 * q + 1]);
        if (!OVERLAP) { /* 4. O += P V, left running while the next tile's S is issued */
            at_fence_regs<HEAD_DIM / 2>(o);
            at_wgmma_fence();
            AT_PV(st, it);
            at_wgmma_commit();
        }
    }
    if (OVERLAP && nt > 0) { /* 4. of the last tile */
        at_fence_regs<HEAD_DIM / 2>(o);
        at_wgmma_fence();
        AT_PV((nt - 1) % STAGES, nt - 1);
        at_wgmma_commit();
    }
    at_wgmma_wait<0>();
    at_cp_wait<0>(); /* only empty groups remain; keeps the exit clean */
    at_fence_regs<HEAD_DIM / 2>(o);
#undef AT_PV
#undef AT_STAGE_KV
#undef AT_SK
#undef AT_SV

    float l[2];
    AT_UNROLL(2)
    for (int hr = 0; hr < 2; ++hr)
        l[hr] = at_quad_sum(sum[hr]);
    const bool ovec = ((q_sb | q_sh | q_ss) & 1) == 0 && ((unsigned long long)O & 3) == 0;
    unsigned short *Ob = O + ((idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh);
    float *Lb = LSE + (idx_t)bh * seq;
    const float ln2 = 0.6931471805599453f;

#if SPLIT > 1
    /* This split's partial into its slot; the last split to arrive finishes the query block. */
    const int tile = bh * NUM_GROUPS(0) + qb;
    float *part = ws + (idx_t)tile * (SPLIT * PART);
    int *count = (int *)(ws + (idx_t)NUM_GROUPS(0) * NUM_GROUPS(1) * (SPLIT * PART)) + tile;
    {
        float *mine = part + GROUP_ID(2) * PART;
        if (nt > 0)
            AT_UNROLL(HEAD_DIM / 4)
            for (int r = 0; r < HEAD_DIM / 2; r += 2) {
                const int i = r0 + 8 * ((r / 2) % 2), d = 8 * (r / 4) + 2 * (lane % 4);
                at_red_add(mine + i * HEAD_DIM + d, o[r]);
                at_red_add(mine + i * HEAD_DIM + d + 1, o[r + 1]);
            }
        if (lane % 4 == 0)
            AT_UNROLL(2)
            for (int hr = 0; hr < 2; ++hr) {
                at_red_add(mine + BQ * HEAD_DIM + r0 + 8 * hr, mx[hr]); /* -inf: no key */
                at_red_add(mine + BQ * HEAD_DIM + BQ + r0 + 8 * hr, l[hr]);
            }
    }
    at_fence_device(); /* this thread's adds are visible device-wide before it counts in */
    LOCAL int last;
    BARRIER();
    if (tid == 0) last = at_count_in(count) == SPLIT - 1;
    BARRIER();
    if (!last) return;
    at_fence_device(); /* the other splits' adds are visible to the reads below */

    /* the weights ex2(max_s - max) / sum of each row's splits, then its LSE, in shared memory
     * (the tiles are no longer read) */
    float *wsm = (float *)(at_dsmem + (sQ - at_smem_addr(at_dsmem)));
    if (lane % 4 == 0)
        AT_UNROLL(2)
        for (int hr = 0; hr < 2; ++hr) {
            const int i = r0 + 8 * hr;
            float ms[SPLIT], ls[SPLIT], m = at_neg_inf(), s = 0.0f;
            AT_UNROLL(SPLIT)
            for (int z = 0; z < SPLIT; ++z) {
                ms[z] = at_take(part + z * PART + BQ * HEAD_DIM + i);
                ls[z] = at_take(part + z * PART + BQ * HEAD_DIM + BQ + i);
                m = fmaxf(m, ms[z]);
            }
            AT_UNROLL(SPLIT)
            for (int z = 0; z < SPLIT; ++z) {
                ms[z] = m == at_neg_inf() ? 0.0f : at_exp2(ms[z] - m);
                s += ls[z] * ms[z];
            }
            AT_UNROLL(SPLIT)
            for (int z = 0; z < SPLIT; ++z)
                wsm[i * SPLIT + z] = s > 0.0f ? ms[z] / s : 0.0f;
            wsm[BQ * SPLIT + i] = (m + at_log2(s)) * ln2;
        }
    BARRIER();
    AT_UNROLL(HEAD_DIM / 4)
    for (int r = 0; r < HEAD_DIM / 2; r += 2) {
        const int i = r0 + 8 * ((r / 2) % 2), d = 8 * (r / 4) + 2 * (lane % 4);
        float v0 = 0.0f, v1 = 0.0f;
        AT_UNROLL(SPLIT)
        for (int z = 0; z < SPLIT; ++z) {
            const float w = wsm[i * SPLIT + z];
            v0 += w * at_take(part + z * PART + i * HEAD_DIM + d);
            v1 += w * at_take(part + z * PART + i * HEAD_DIM + d + 1);
        }
        if (!EDGE_Q || q0 + i < seq) at_store_pair(Ob + (idx_t)(q0 + i) * q_ss + d, v0, v1, ovec);
    }
    if (lane % 4 == 0)
        AT_UNROLL(2)
        for (int hr = 0; hr < 2; ++hr) {
            const int i = r0 + 8 * hr;
            if (!EDGE_Q || q0 + i < seq) Lb[q0 + i] = wsm[BQ * SPLIT + i];
        }
    if (tid == 0) at_count_reset(count);
#else
    AT_UNROLL(HEAD_DIM / 4)
    for (int r = 0; r < HEAD_DIM / 2; r += 2) {
        const int i = r0 + 8 * ((r / 2) % 2), d = 8 * (r / 4) + 2 * (lane % 4);
        const float inv = 1.0f / l[(r / 2) % 2];
        if (!EDGE_Q || q0 + i < seq)
            at_store_pair(Ob + (idx_t)(q0 + i) * q_ss + d, o[r] * inv, o[r + 1] * inv, ovec);
    }
    if (lane % 4 == 0)
        AT_UNROLL(2)
        for (int hr = 0; hr < 2; ++hr) {
            const int i = r0 + 8 * hr;
            if (!EDGE_Q || q0 + i < seq) Lb[q0 + i] = (mx[hr] + at_log2(l[hr])) * ln2;
        }
#endif
}
