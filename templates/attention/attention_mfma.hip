/* attention_mfma.hip — tunable fused attention forward (FlashAttention-2) for AMD matrix cores
 * (HIP, CDNA: gfx908, gfx90a, gfx94x; wave64) with 16-bit Q, K, V, O and f32 accumulation.
 *
 *   O   = softmax(Q K^T * scale [+ causal mask]) V     per batch and query head
 *   LSE = log(sum_j exp(s_j - max)) + max              f32, natural log
 *
 * The contract (buffers, strides, causal alignment, the split-KV workspace) is docs/attention.md.
 * Elements are raw 16-bit patterns (unsigned short): IEEE half when DT = 0, bfloat16 when DT = 1.
 *
 * Structure. A block of WAVES wavefronts of 64 takes BQ query rows of one (batch, head); each
 * wave owns WQ = BQ / WAVES of them, TQ = WQ / MFMA instruction tiles, and walks the keys in
 * tiles of BKV staged in LDS, which all the block's waves share. Each wave computes the scores
 * transposed, S^T = K Q^T (A = K from LDS, B = Q^T from registers, loaded once), so that an
 * accumulator lane holds ONE query row (its column l % MFMA) and several keys of it: the row max
 * and the rescaling are per-lane scalars, the max needs one cross-lane step (lanes l ^ 32, and
 * l ^ 16 for MFMA 16) and the row sum none until the end (each lane sums its own keys; the
 * rescaling factor is the same in every lane of a row).
 *
 * P needs no trip through LDS. O^T = V^T P^T takes P^T as the B operand, and an accumulator
 * lane's registers 4c .. 4c+3 hold keys c*4G + (l / MFMA)*4 + 0..3 (G = 64 / MFMA) of its query,
 * which is exactly what lane l must give as B(k, l % MFMA) when the instruction's k is mapped to
 * the key c*4G + (k / KL)*4 + h*KL + k % KL — a permutation of the keys of that chunk, and a sum
 * over keys does not care about their order, as long as the A operand (V^T, read from LDS) uses
 * the same one. KL = 4 (f16, bf16_1k) takes a chunk in one instruction (h = 0); KL = 2 (bf16 on
 * gfx908) in two (h = 0, 1). So the exponentials go from the S accumulators to 16-bit B
 * fragments in the same lane. at_pv_key is the mapping; the host emulation checks it.
 *
 * LDS. The K tile as [BKV][LDK] (LDK = D + 4*PAD, head dim contiguous: an S operand is one 8-byte
 * read), V transposed as [D][LDV] (LDV = BKV + 4*PAD, keys contiguous: a PV operand is one 8- or
 * 4-byte read). Threads stage 4 keys x 4 head dims at a time (8-byte global reads when the
 * strides and pointers allow, else 2-byte ones; V is transposed in registers). STAGES = 2 double
 * buffers: the next tile's global loads are in flight during the MFMAs and land in the other
 * stage, one barrier per tile; STAGES = 1 keeps the register prefetch but waits for every wave
 * before overwriting the one stage (two barriers, half the LDS, for D = 128 and 256).
 *
 * Online softmax in the log2 domain: s2 = (q . k) * scale * log2(e); per tile the new row max m,
 * alpha = exp2(m_old - m) rescales the row's sum and its O accumulators, p = exp2(s2 - m). A row
 * that has seen only masked keys keeps m = -inf and uses 0 as its reference, so no NaN arises.
 * LSE = (m + log2(l)) * ln(2).
 *
 * Causal (bottom-right: query i sees keys j <= i + seq_kv - seq). A block walks only the key
 * tiles up to its last row's diagonal; a wave skips the MFMAs of a tile that lies wholly past its
 * own last row (it still stages and meets the barriers); the mask is applied only on tiles that
 * cross the diagonal of the wave's first row or the end of the keys (EDGE_KV).
 *
 * Split-KV (SPLIT > 1, decode). Grid dimension 0 holds SPLIT blocks per query block, each taking
 * an even share of the block's key tiles (the last shares may be short or empty). The workspace
 * (f32 words) holds for every (batch*head, query block) group SPLIT partials of BQ*(D + 2) words
 * (O unnormalised [BQ][D], then the rows' max m in the log2 domain, then their sums l), then one
 * int counter per group. A block stores its partial, fences, and counts itself in; the block that
 * arrives last fences again, takes every split's partial with atomicExch(.., 0) — reading it and
 * leaving zeros — computes each row's weights exp2(m_s - M) / L in LDS, writes O and LSE and
 * resets the counter: the workspace is zero again when the kernel returns. No block waits for
 * another (no deadlock whatever the scheduling); launches that share a workspace must not overlap.
 *
 * Edges. Q rows past seq and K/V rows past seq_kv read as zeros; scores of keys past seq_kv are
 * masked; rows of O and LSE past seq are not written. EDGE_Q / EDGE_KV = 0 compile that away.
 *
 * Tuning parameters (-D; constraints in attention_mfma.yaml): BQ, BKV, WAVES, MFMA (16 or 32:
 * the instruction v_mfma_f32_{16x16x16,32x32x8}{f16,bf16_1k}, as gemm_mfma), PAD, STAGES, SPLIT.
 * Problem defines (attention_problem.h): HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, DT, IDX64; and
 * BF16_1K. Launch: local = [64 * WAVES, 1], global = [ceil(seq/BQ) * SPLIT * local0,
 * batch * heads]. AT_MAX_THREADS = THREADS gives the kernel __launch_bounds__(THREADS) (hip.h).
 *
 * Defining AT_MFMA_HOST before including this file gives only the index and softmax functions,
 * as plain C, for the host emulation (tests/unit/test_hip_attention.c). */

/* ---- defaults, so the file also compiles stand-alone --------------------------------------- */
#ifndef BQ
#define BQ 128
#endif
#ifndef BKV
#define BKV 64
#endif
#ifndef WAVES
#define WAVES 4
#endif
#ifndef MFMA
#define MFMA 32
#endif
#ifndef PAD
#define PAD 1
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#include "attention_problem.h" /* HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, DT, IDX64; idx_t */
#ifndef BF16_1K
#define BF16_1K 1
#endif

#include "../common/hip_mfma.h" /* MFMA layouts, the instruction, 16-bit conversions */

/* ---- index and softmax functions (device and host) ----------------------------------------- */
#define AT_NEG_INF (-__builtin_inff())
#define AT_LOG2E   1.4426950408889634f
#define AT_LN2     0.6931471805599453f

/* The geometry of one configuration; on the device every field is a compile-time constant. */
typedef struct at_attn_cfg {
    int bq, bkv, waves, mfma, kl, d, ldk, ldv, split;
} at_attn_cfg;

/* Key tiles the query block [q0, q0 + BQ) needs: all of them, or with CAUSAL those up to the
 * diagonal of its last row (seq_kv >= seq, so that row sees key 0 at least). */
AT_HD int at_attn_tiles(const at_attn_cfg *c, const int causal, const int q0, const int seq,
                        const int seq_kv)
{
    int n = (seq_kv + c->bkv - 1) / c->bkv;
    if (causal) {
        const int last_row = (q0 + c->bq < seq ? q0 + c->bq : seq) - 1;
        const int nc = (last_row + seq_kv - seq) / c->bkv + 1;
        if (nc < n) n = nc;
    }
    return n;
}

/* The key tiles [*t0, *t1) of split sp of n tiles: even shares, the last ones short or empty. */
AT_HD void at_attn_split(const at_attn_cfg *c, const int n, const int sp, int *t0, int *t1)
{
    const int per = (n + c->split - 1) / c->split;
    *t0 = sp * per < n ? sp * per : n;
    *t1 = *t0 + per < n ? *t0 + per : n;
}

/* 1 where query i must not see key j. */
AT_HD int at_attn_masked(const int causal, const int edge_kv, const int i, const int j,
                         const int seq, const int seq_kv)
{
    return (edge_kv && j >= seq_kv) || (causal && j > i + (seq_kv - seq));
}

/* Staging unit u of a K/V tile (4 keys x 4 head dims): its first key and first head dim.
 * Consecutive units walk the head dim, so consecutive threads read consecutive addresses. */
AT_HD void at_attn_unit(const at_attn_cfg *c, const int u, int *key, int *d)
{
    *key = 4 * (u / (c->d / 4));
    *d = 4 * (u % (c->d / 4));
}

/* The key (within its MFMA-key tile) behind element t of lane l's PV operands in chunk ch, half
 * h: accumulator register 4ch + h*KL + t of the S^T tile (see the top of the file). */
AT_HD int at_pv_key(const at_attn_cfg *c, const int lane, const int ch, const int h, const int t)
{
    return ch * 4 * (64 / c->mfma) + (lane / c->mfma) * 4 + h * c->kl + t;
}

/* One online-softmax step of a row: the running max *m (log2 domain) meets the tile's row max
 * mx. Returns alpha, the factor of the old sum and accumulators; *ref is the reference of this
 * tile's exponents (0 while the row has seen only masked keys: exp2(-inf - 0) = 0, no NaN). */
AT_HD float at_softmax_step(float *m, const float mx, float *ref)
{
    const float mn = *m > mx ? *m : mx;
    *ref = mn == AT_NEG_INF ? 0.0f : mn;
    const float alpha = exp2f(*m - *ref);
    *m = mn;
    return alpha;
}

/* LSE (natural log) of a row from its max m (log2 domain) and sum l. */
AT_HD float at_attn_lse(const float m, const float l) { return (m + log2f(l)) * AT_LN2; }

/* The split-KV combine of one row: from the splits' maxima m[s] (log2 domain) and sums l[s], the
 * weights w[s] of their unnormalised outputs; returns the row's LSE. A split that saw only
 * masked keys (m = -inf, l = 0) weighs 0. */
AT_HD float at_attn_combine(const int n, const float *m, const float *l, float *w)
{
    float mx = AT_NEG_INF, sum = 0.0f;
    for (int s = 0; s < n; ++s) mx = m[s] > mx ? m[s] : mx;
    const float ref = mx == AT_NEG_INF ? 0.0f : mx;
    for (int s = 0; s < n; ++s) {
        w[s] = exp2f(m[s] - ref);
        sum += l[s] * w[s];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int s = 0; s < n; ++s) w[s] *= inv;
    return at_attn_lse(ref, sum);
}

#ifndef AT_MFMA_HOST
/* ---- derived constants ----------------------------------------------------------------------- */
#define D       HEAD_DIM
#define THREADS (64 * WAVES)
#define WQ      (BQ / WAVES)   /* query rows per wave */
#define TQ      (WQ / MFMA)    /* instruction tiles per wave along the queries */
#define TK      (BKV / MFMA)   /* ... along a key tile */
#define TD      (D / MFMA)     /* ... along the head dim (the rows of O^T) */
#define KL      AT_MFMA_KL
#define KI      (KL * (64 / MFMA)) /* head dims of one S instruction */
#define ACC     AT_MFMA_ACC
#define LDK     (D + 4 * PAD)
#define LDV     (BKV + 4 * PAD)
#define NUNITS  (BKV * D / 16) /* staging units of a tile */
#define UNITS   ((NUNITS + THREADS - 1) / THREADS)

#include "../common/cuda_splitk.h" /* device-scope atomics of the split reduction */

/* 4 consecutive 16-bit elements from global memory; vec: 8-byte aligned. Zeros when !in. */
INLINE at_short4 at_load4(const unsigned short *p, const bool vec, const bool in)
{
    at_short4 r = (at_short4)(0);
    if (in) {
        if (vec) {
            r = *(const at_short4 *)p;
        } else {
            r.x = (short)p[0];
            r.y = (short)p[1];
            r.z = (short)p[2];
            r.w = (short)p[3];
        }
    }
    return r;
}

/* The max over the lanes of one query row (lanes l, l ^ 32 and, for MFMA 16, l ^ 16, l ^ 48). */
INLINE float at_row_max(float v)
{
    v = fmaxf(v, __shfl_xor(v, 32, 64));
#if MFMA == 16
    v = fmaxf(v, __shfl_xor(v, 16, 64));
#endif
    return v;
}
INLINE float at_row_sum(float v)
{
    v += __shfl_xor(v, 32, 64);
#if MFMA == 16
    v += __shfl_xor(v, 16, 64);
#endif
    return v;
}

/* ---- the kernel ------------------------------------------------------------------------------ */
KERNEL void attention_mfma(const unsigned short *RESTRICT Q, const unsigned short *RESTRICT K,
                           const unsigned short *RESTRICT V, unsigned short *RESTRICT O,
                           float *RESTRICT LSE, const int heads, const int kv_heads, const int seq,
                           const int seq_kv, const float scale, const long q_sb, const long q_sh,
                           const long q_ss, const long kv_sb, const long kv_sh, const long kv_ss
#if SPLIT > 1
                           ,
                           float *workspace
#endif
)
{
    constexpr at_attn_cfg cfg = {BQ, BKV, WAVES, MFMA, KL, D, LDK, LDV, SPLIT};
    /* 16-byte aligned: operands are 8-byte (KL = 4) or 4-byte (KL = 2) reads at offsets that are
     * multiples of their size (LDK, LDV and the key offsets are multiples of 4 elements). */
    alignas(16) LOCAL short ks[STAGES][BKV * LDK];
    alignas(16) LOCAL short vs[STAGES][D * LDV];

    const int tid = LOCAL_ID(0);
    const int lane = tid % 64, wave = tid / 64;
    const int bh = GROUP_ID(1), b = bh / heads, h = bh % heads;
    const int kvh = h / (heads / kv_heads);
    const int qb = GROUP_ID(0) / SPLIT, sp = GROUP_ID(0) % SPLIT;
    const int q0 = qb * BQ, wq0 = q0 + wave * WQ;
    const int off = seq_kv - seq; /* the causal diagonal: query i sees keys j <= i + off */
    const float c2 = scale * AT_LOG2E;

    const unsigned short *Qh = Q + (idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh;
    const unsigned short *Kh = K + (idx_t)b * (idx_t)kv_sb + (idx_t)kvh * (idx_t)kv_sh;
    const unsigned short *Vh = V + (idx_t)b * (idx_t)kv_sb + (idx_t)kvh * (idx_t)kv_sh;
    const idx_t qss = (idx_t)q_ss, kss = (idx_t)kv_ss;
    /* 8-byte staging reads when every row start is 8-byte aligned (the layouts of the contract
     * always are: D is a multiple of 16); the strides are run-time values, hence the test. */
    const bool vec = ((kv_sb | kv_sh | kv_ss) & 3) == 0 && ((unsigned long)K & 7) == 0 &&
                     ((unsigned long)V & 7) == 0;

    int t0, t1;
    at_attn_split(&cfg, at_attn_tiles(&cfg, CAUSAL, q0, seq, seq_kv), sp, &t0, &t1);

    /* ---- Q^T fragments (B operands of S^T), loaded once; rows past seq are zeros ---- */
    const int rc = at_mfma_rc(MFMA, lane), k_lane = at_mfma_k(MFMA, KL, lane, 0);
    at_frag qf[TQ][D / KI];
    AT_UNROLL(TQ)
    for (int iq = 0; iq < TQ; ++iq) {
        const int qi = wq0 + iq * MFMA + rc;
        AT_UNROLL((D / KI))
        for (int ds = 0; ds < D / KI; ++ds) {
            const unsigned short *p = Qh + (idx_t)qi * qss + ds * KI + k_lane;
            AT_UNROLL(KL)
            for (int t = 0; t < KL; ++t) qf[iq][ds][t] = (!EDGE_Q || qi < seq) ? (short)p[t] : 0;
        }
    }

    /* ---- staging: global -> registers (next tile in flight) -> LDS ---- */
    at_short4 rk[UNITS][4], rv[UNITS][4];
#define AT_LOAD_TILE(kv0)                                                                          \
    do {                                                                                           \
        AT_UNROLL(UNITS)                                                                           \
        for (int s = 0; s < UNITS; ++s) {                                                          \
            const int u = tid + s * THREADS;                                                       \
            int key, dd;                                                                           \
            at_attn_unit(&cfg, u, &key, &dd);                                                      \
            AT_UNROLL(4)                                                                           \
            for (int r = 0; r < 4; ++r) {                                                          \
                const int j = (kv0) + key + r;                                                     \
                const bool in = (NUNITS % THREADS == 0 || u < NUNITS) && (!EDGE_KV || j < seq_kv); \
                rk[s][r] = at_load4(Kh + (idx_t)j * kss + dd, vec, in);                            \
                rv[s][r] = at_load4(Vh + (idx_t)j * kss + dd, vec, in);                            \
            }                                                                                      \
        }                                                                                          \
    } while (0)
#define AT_STORE_TILE(st)                                                                          \
    do {                                                                                           \
        AT_UNROLL(UNITS)                                                                           \
        for (int s = 0; s < UNITS; ++s) {                                                          \
            const int u = tid + s * THREADS;                                                       \
            if (NUNITS % THREADS == 0 || u < NUNITS) {                                             \
                int key, dd;                                                                       \
                at_attn_unit(&cfg, u, &key, &dd);                                                  \
                AT_UNROLL(4)                                                                       \
                for (int r = 0; r < 4; ++r)                                                        \
                    *(at_short4 *)&ks[st][(key + r) * LDK + dd] = rk[s][r];                        \
                AT_UNROLL(4)                                                                       \
                for (int t = 0; t < 4; ++t)                                                        \
                    *(at_short4 *)&vs[st][(dd + t) * LDV + key] =                                  \
                        (at_short4)(rv[s][0][t], rv[s][1][t], rv[s][2][t], rv[s][3][t]);           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

    /* ---- running state: O^T accumulators, row max (log2 domain) and this lane's part of the
     * row sum, per query tile ---- */
    at_accv oacc[TD][TQ];
    float m[TQ], l[TQ];
    AT_UNROLL(TQ)
    for (int iq = 0; iq < TQ; ++iq) {
        m[iq] = AT_NEG_INF;
        l[iq] = 0.0f;
        AT_UNROLL(TD)
        for (int id = 0; id < TD; ++id) oacc[id][iq] = (at_accv)(0.0f);
    }

    if (t0 < t1) {
        AT_LOAD_TILE(t0 * BKV);
        AT_STORE_TILE(0);
    }
    BARRIER();

    for (int kt = t0; kt < t1; ++kt) {
        const int st = STAGES == 2 ? (kt - t0) & 1 : 0;
        const int kv0 = kt * BKV;
        if (kt + 1 < t1) AT_LOAD_TILE(kv0 + BKV);

        /* A tile wholly past the wave's last row (causal), or a wave wholly past seq, adds
         * nothing: skip its MFMAs, not the barriers. */
        const bool work = (!CAUSAL || kv0 <= wq0 + WQ - 1 + off) && (!EDGE_Q || wq0 < seq);
        if (work) {
            /* S^T = K Q^T for the tile */
            at_accv sacc[TK][TQ];
            AT_UNROLL(TK)
            for (int jk = 0; jk < TK; ++jk) {
                AT_UNROLL(TQ)
                for (int iq = 0; iq < TQ; ++iq) sacc[jk][iq] = (at_accv)(0.0f);
            }
            AT_UNROLL((D / KI))
            for (int ds = 0; ds < D / KI; ++ds) {
                AT_UNROLL(TK)
                for (int jk = 0; jk < TK; ++jk) {
                    const at_frag a =
                        *(const at_frag *)&ks[st][(jk * MFMA + rc) * LDK + ds * KI + k_lane];
                    AT_UNROLL(TQ)
                    for (int iq = 0; iq < TQ; ++iq)
                        sacc[jk][iq] = at_mfma(a, qf[iq][ds], sacc[jk][iq]);
                }
            }

            /* scale, mask (only where the tile crosses the diagonal or the end of the keys),
             * online softmax, P^T as 16-bit B fragments */
            const bool edge = (EDGE_KV && kv0 + BKV > seq_kv) ||
                              (CAUSAL && kv0 + BKV - 1 > wq0 + off);
            at_frag pf[TK][TQ][ACC / KL];
            AT_UNROLL(TQ)
            for (int iq = 0; iq < TQ; ++iq) {
                const int qi = wq0 + iq * MFMA + at_mfma_acc_col(MFMA, lane);
                float mx = AT_NEG_INF;
                AT_UNROLL(TK)
                for (int jk = 0; jk < TK; ++jk) {
                    AT_UNROLL(ACC)
                    for (int r = 0; r < ACC; ++r) {
                        float s = sacc[jk][iq][r] * c2;
                        if (edge) {
                            const int kj = kv0 + jk * MFMA + at_mfma_acc_row(MFMA, lane, r);
                            if (at_attn_masked(CAUSAL, EDGE_KV, qi, kj, seq, seq_kv))
                                s = AT_NEG_INF;
                        }
                        sacc[jk][iq][r] = s;
                        mx = fmaxf(mx, s);
                    }
                }
                float ref;
                const float alpha = at_softmax_step(&m[iq], at_row_max(mx), &ref);
                float sum = 0.0f;
                AT_UNROLL(TK)
                for (int jk = 0; jk < TK; ++jk) {
                    AT_UNROLL(ACC)
                    for (int r = 0; r < ACC; ++r) {
                        const float p = exp2f(sacc[jk][iq][r] - ref);
                        sum += p;
                        pf[jk][iq][r / KL][r % KL] = (short)at_from_f32(p);
                    }
                }
                l[iq] = l[iq] * alpha + sum;
                AT_UNROLL(TD)
                for (int id = 0; id < TD; ++id) oacc[id][iq] *= alpha;
            }

            /* O^T += V^T P^T: chunk ch of key tile jk, half h (see at_pv_key) */
            AT_UNROLL(TK)
            for (int jk = 0; jk < TK; ++jk) {
                AT_UNROLL((ACC / 4))
                for (int ch = 0; ch < ACC / 4; ++ch) {
                    AT_UNROLL((4 / KL))
                    for (int hh = 0; hh < 4 / KL; ++hh) {
                        const int key = jk * MFMA + at_pv_key(&cfg, lane, ch, hh, 0);
                        AT_UNROLL(TD)
                        for (int id = 0; id < TD; ++id) {
                            const at_frag a =
                                *(const at_frag *)&vs[st][(id * MFMA + rc) * LDV + key];
                            AT_UNROLL(TQ)
                            for (int iq = 0; iq < TQ; ++iq)
                                oacc[id][iq] =
                                    at_mfma(a, pf[jk][iq][(ch * 4) / KL + hh], oacc[id][iq]);
                        }
                    }
                }
            }
        }

        if (kt + 1 < t1) {
            if (STAGES == 1) BARRIER(); /* every wave is done with the one stage */
            AT_STORE_TILE(STAGES == 2 ? st ^ 1 : 0);
        }
        BARRIER();
    }
#undef AT_LOAD_TILE
#undef AT_STORE_TILE

    /* ---- epilogue: the row sums over the lanes, then O and LSE (or the split's partial) ---- */
    const int col = at_mfma_acc_col(MFMA, lane);
    AT_UNROLL(TQ)
    for (int iq = 0; iq < TQ; ++iq) l[iq] = at_row_sum(l[iq]);

#if SPLIT == 1
    AT_UNROLL(TQ)
    for (int iq = 0; iq < TQ; ++iq) {
        const int qi = wq0 + iq * MFMA + col;
        if (EDGE_Q && qi >= seq) continue;
        const float inv = 1.0f / l[iq];
        unsigned short *Or = O + (idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh + (idx_t)qi * qss;
        AT_UNROLL(TD)
        for (int id = 0; id < TD; ++id) {
            AT_UNROLL(ACC)
            for (int r = 0; r < ACC; ++r)
                Or[id * MFMA + at_mfma_acc_row(MFMA, lane, r)] = at_from_f32(oacc[id][iq][r] * inv);
        }
        if (lane < MFMA) LSE[(long)bh * seq + qi] = at_attn_lse(m[iq], l[iq]);
    }
#else
    {
        const long groups = (long)NUM_GROUPS(1) * (NUM_GROUPS(0) / SPLIT);
        const long group = (long)bh * (NUM_GROUPS(0) / SPLIT) + qb;
        float *wg = workspace + group * (SPLIT * BQ * (D + 2)); /* this group's SPLIT partials */
        int *count = (int *)(workspace + groups * (SPLIT * BQ * (D + 2))) + group;
        float *wp = wg + sp * (BQ * (D + 2));
        AT_UNROLL(TQ)
        for (int iq = 0; iq < TQ; ++iq) {
            const int row = wave * WQ + iq * MFMA + col;
            AT_UNROLL(TD)
            for (int id = 0; id < TD; ++id) {
                AT_UNROLL(ACC)
                for (int r = 0; r < ACC; ++r)
                    wp[row * D + id * MFMA + at_mfma_acc_row(MFMA, lane, r)] = oacc[id][iq][r];
            }
            if (lane < MFMA) {
                wp[BQ * D + row] = m[iq];
                wp[BQ * D + BQ + row] = l[iq];
            }
        }
        LOCAL float wts[BQ * SPLIT]; /* the rows' combine weights */
        LOCAL int last;
        at_fence_device(); /* this thread's partial is visible before the block counts */
        BARRIER();
        if (tid == 0) last = at_count_in(count) == SPLIT - 1;
        BARRIER();
        if (!last) return;
        at_fence_device(); /* the other blocks' partials are seen after their counts */
        for (int row = tid; row < BQ; row += THREADS) {
            float ms[SPLIT], ls[SPLIT], w[SPLIT];
            AT_UNROLL(SPLIT)
            for (int s = 0; s < SPLIT; ++s) {
                ms[s] = at_take(wg + s * (BQ * (D + 2)) + BQ * D + row);
                ls[s] = at_take(wg + s * (BQ * (D + 2)) + BQ * D + BQ + row);
            }
            const float lse = at_attn_combine(SPLIT, ms, ls, w);
            AT_UNROLL(SPLIT)
            for (int s = 0; s < SPLIT; ++s) wts[row * SPLIT + s] = w[s];
            if (!EDGE_Q || q0 + row < seq) LSE[(long)bh * seq + q0 + row] = lse;
        }
        BARRIER();
        unsigned short *Ob = O + (idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh;
        for (int e = tid; e < BQ * D; e += THREADS) {
            const int row = e / D, dd = e % D;
            float o = 0.0f;
            AT_UNROLL(SPLIT)
            for (int s = 0; s < SPLIT; ++s)
                o += at_take(wg + s * (BQ * (D + 2)) + e) * wts[row * SPLIT + s];
            if (!EDGE_Q || q0 + row < seq) Ob[(idx_t)(q0 + row) * qss + dd] = at_from_f32(o);
        }
        if (tid == 0) at_count_reset(count);
    }
#endif
}
#endif /* AT_MFMA_HOST */
