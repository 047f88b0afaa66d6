/* attention.cl — tunable f32 attention forward (FlashAttention) in the portable dialect
 * (templates/common/opencl.h; the contract is docs/attention.md).
 *
 *   O[b,h,i,:] = softmax_j(scale * Q[b,h,i,:] . K[b,g,j,:]) V[b,g,j,:]     g = h / (H / G)
 *   LSE[b,h,i] = log(sum_j exp(s_j - max)) + max                          (natural log)
 *   causal: query i sees keys j <= i + (seq_kv - seq) (bottom-right alignment)
 *
 * A work-group owns BQ rows; each of its BQ/RQ work-items owns RQ of them outright (all HEAD_DIM
 * columns of their O accumulator, their running max m and sum l) and walks the keys in tiles of
 * BKV, so without staging there is no barrier and no sharing between work-items at all (what
 * PoCL runs fastest). A row is a query of one (batch, head); with PACK the rows of a block are
 * the (head, query) pairs of one key/value head's group, so the group's query heads share each
 * K/V tile (decode with grouped-query attention reads K and V once, not H/G times).
 *
 * Per key tile and work-item:
 *   scores  s[r][j] = Q_r . K_j (Q pre-scaled by scale * log2(e), so the softmax is in exp2)
 *           LKV = 0: dot products along the head dimension, VW-wide vectors, VB keys at a time,
 *                    one horizontal sum per (row, key);
 *           LKV = 1: the K tile is staged transposed in local memory (Ks[p][j]), so the scores
 *                    are a small GEMM vectorised along the keys (VB vectors of VW keys);
 *   softmax masked keys get -inf (a finite sentinel), m' = max(m, max_j s), p = exp2(s - m'),
 *           l = l * exp2(m - m') + sum_j p;
 *   O       acc = acc * exp2(m - m') + P V, VW-wide along the head dimension, VB vectors at a time
 *           (V from the staged tile with LKV, else straight from global memory).
 * At the end O = acc / l and LSE = (m + log2 l) * ln 2.
 *
 * Causal: a work-item (with LKV, the whole work-group) stops after the last key tile its rows
 * can see, so whole tiles past the diagonal are never read.
 *
 * Split-KV (SPLIT > 1, decode): the grid's dimension 2 splits the visible keys into SPLIT ranges
 * of whole tiles. Each work-item writes its rows' partial (unnormalised acc, m, l) to the
 * workspace, fences, and counts itself in on its own counter (one per work-item of a query
 * block, so no barrier is needed); the last of the SPLIT to arrive combines the partials, writes
 * O and LSE, zeroes the partials and resets the counter, leaving the workspace as it found it.
 *
 * Tuning parameters (-D, integers; constraints in attention.yaml):
 *   BQ      rows per work-group              RQ      rows per work-item (BQ / RQ work-items)
 *   BKV     keys per tile                    VW      vector width (1, 2, 4, 8, 16)
 *   VB      vectors per register block       LKV     1: stage K (transposed) and V in local memory
 *   UNROLL  unroll factor of the inner loops SPLIT   split-KV factor (1: none)
 *   PACK    1: a block's rows are the (head, query) pairs of a key/value head's group
 * Problem defines (attention_problem.h): HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, IDX64.
 */

#include "attention_problem.h" /* HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, IDX64, idx_t */

/* ---- derived constants ----------------------------------------------------------------------- */
#define D       HEAD_DIM
#define THREADS (BQ / RQ)      /* work-items per work-group (local dimension 0) */
#define NEG     (-3.0e38f)     /* the score of a masked key (finite: no inf - inf) */
#define LOG2E   1.4426950408889634f
#define LN2     0.6931471805599453f

typedef VTYPE(VW) floatv;

/* ---- what the dialect lacks: exp2/log2, lane reductions, atomics ---------------------------- */
#ifdef AT_OPENCL_H
INLINE float at_exp2(const float x) { return exp2(x); }
INLINE float at_log2(const float x) { return log2(x); }
INLINE floatv vexp2(const floatv x) { return exp2(x); } /* PoCL vectorises these */
INLINE floatv vmax(const floatv a, const floatv b) { return fmax(a, b); }
/* OpenCL 1.2 atomics on global ints; mem_fence orders this work-item's global accesses. */
#define FENCE_GLOBAL()   mem_fence(CLK_GLOBAL_MEM_FENCE)
#define COUNT_IN(p)      atomic_inc((volatile GLOBAL int *)(p)) /* the arrivals before this one */
#define COUNT_RESET(p)   atomic_xchg((volatile GLOBAL int *)(p), 0)
#define TAKE(p)          at_take(p)
INLINE float at_take(GLOBAL float *p) /* *p, leaving 0 (after the fence, plain accesses do) */
{
    const float v = *p;
    *p = 0.0f;
    return v;
}
#else /* CUDA, HIP */
INLINE float at_exp2(const float x) { return exp2f(x); }
INLINE float at_log2(const float x) { return log2f(x); }
INLINE floatv vexp2(const floatv x)
{
    float t[VW];
    VSTORE(VW, x, 0, t);
    AT_UNROLL(VW)
    for (int l = 0; l < VW; ++l)
        t[l] = exp2f(t[l]);
    return VLOAD(VW, 0, t);
}
INLINE floatv vmax(const floatv a, const floatv b)
{
    float s[VW], t[VW];
    VSTORE(VW, a, 0, s);
    VSTORE(VW, b, 0, t);
    AT_UNROLL(VW)
    for (int l = 0; l < VW; ++l)
        s[l] = fmaxf(s[l], t[l]);
    return VLOAD(VW, 0, s);
}
/* Through L2: another block's partials are read (and cleared) by atomics, not a stale L1. */
#define FENCE_GLOBAL()   __threadfence()
#define COUNT_IN(p)      atomicAdd((p), 1)
#define COUNT_RESET(p)   atomicExch((p), 0)
#define TAKE(p)          atomicExch((p), 0.0f)
#endif

/* Sum and maximum of a vector's lanes. */
INLINE float hsum(const floatv x)
{
    float t[VW];
    VSTORE(VW, x, 0, t);
    float s = t[0];
    AT_UNROLL(VW)
    for (int l = 1; l < VW; ++l)
        s += t[l];
    return s;
}
INLINE float hmax(const floatv x)
{
    float t[VW];
    VSTORE(VW, x, 0, t);
    float s = t[0];
    AT_UNROLL(VW)
    for (int l = 1; l < VW; ++l)
        s = t[l] > s ? t[l] : s;
    return s;
}

/* ---- one key tile ---------------------------------------------------------------------------- */

/* Folds the keys [j0, j0 + BKV) into the work-item's rows: scores, masked online softmax, O.
 * kbase: the key/value head's offset in K and V; kv_hi: the end of the keys this tile may take
 * (seq_kv, or the split's end), lim[r]: the row's first invisible key (causal). */
INLINE void attention_tile(float *RESTRICT acc, float *RESTRICT m, float *RESTRICT l,
                           const float *RESTRICT q, float *RESTRICT s, const int *lim,
                           GLOBAL const float *RESTRICT K, GLOBAL const float *RESTRICT V,
                           const idx_t kbase, const idx_t kv_ss, const int j0, const int kv_hi,
                           LOCAL_PTR float *Ks, LOCAL_PTR float *Vs, const int tid)
{
#if LKV
    /* ---- stage K transposed (Ks[p][j]) and V (Vs[j][p]); keys past kv_hi are clamped ---- */
    BARRIER(); /* the previous tile's readers are done */
    AT_UNROLL(1)
    for (int u = tid; u < BKV * (D / VW); u += THREADS) {
        const int j = u / (D / VW), c = (u % (D / VW)) * VW;
        const int jj = MIN(j0 + j, kv_hi - 1);
        const idx_t off = kbase + (idx_t)jj * kv_ss + c;
        const floatv kv = VLOAD(VW, 0, K + off);
        float t[VW];
        VSTORE(VW, kv, 0, t);
        AT_UNROLL(VW)
        for (int e = 0; e < VW; ++e)
            Ks[(c + e) * BKV + j] = t[e];
        VSTORE(VW, VLOAD(VW, 0, V + off), 0, Vs + j * D + c);
    }
    BARRIER();

    /* ---- scores: a (RQ x D) . (D x BKV) product along the keys ---- */
    AT_UNROLL(1)
    for (int jc = 0; jc < BKV; jc += VW * VB) {
        floatv sa[RQ][VB];
        AT_UNROLL(RQ)
        for (int r = 0; r < RQ; ++r) {
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                sa[r][b] = VBCAST(VW, 0.0f);
        }
        AT_UNROLL(UNROLL)
        for (int p = 0; p < D; ++p) {
            floatv kt[VB];
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                kt[b] = VLOAD(VW, 0, Ks + p * BKV + jc + b * VW);
            AT_UNROLL(RQ)
            for (int r = 0; r < RQ; ++r) {
                const floatv qv = VBCAST(VW, q[r * D + p]);
                AT_UNROLL(VB)
                for (int b = 0; b < VB; ++b)
                    sa[r][b] = VFMA(qv, kt[b], sa[r][b]);
            }
        }
        AT_UNROLL(RQ)
        for (int r = 0; r < RQ; ++r) {
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                VSTORE(VW, sa[r][b], 0, s + r * BKV + jc + b * VW);
        }
    }
#else
    /* ---- scores: dot products along the head dimension, VB keys at a time ---- */
    AT_UNROLL(1)
    for (int j = 0; j < BKV; j += VB) {
        idx_t koff[VB];
        AT_UNROLL(VB)
        for (int b = 0; b < VB; ++b) {
            const int jj = (EDGE_KV || SPLIT > 1) ? MIN(j0 + j + b, kv_hi - 1) : j0 + j + b;
            koff[b] = kbase + (idx_t)jj * kv_ss;
        }
        floatv sa[RQ][VB];
        AT_UNROLL(RQ)
        for (int r = 0; r < RQ; ++r) {
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                sa[r][b] = VBCAST(VW, 0.0f);
        }
        AT_UNROLL(UNROLL)
        for (int c = 0; c < D; c += VW) {
            floatv kv[VB];
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                kv[b] = VLOAD(VW, 0, K + koff[b] + c);
            AT_UNROLL(RQ)
            for (int r = 0; r < RQ; ++r) {
                const floatv qv = VLOAD(VW, 0, q + r * D + c);
                AT_UNROLL(VB)
                for (int b = 0; b < VB; ++b)
                    sa[r][b] = VFMA(qv, kv[b], sa[r][b]);
            }
        }
        AT_UNROLL(RQ)
        for (int r = 0; r < RQ; ++r) {
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                s[r * BKV + j + b] = hsum(sa[r][b]);
        }
    }
#endif

    /* ---- masked online softmax (scores in log2 units) ---- */
    float alpha[RQ];
    AT_UNROLL(RQ)
    for (int r = 0; r < RQ; ++r) {
#if CAUSAL || EDGE_KV || SPLIT > 1
        const int vis = MIN(lim[r], kv_hi) - j0; /* keys of the tile this row sees */
        if (vis < BKV)
            for (int j = MAX(vis, 0); j < BKV; ++j)
                s[r * BKV + j] = NEG;
#endif
        floatv mv = VLOAD(VW, 0, s + r * BKV);
        for (int j = VW; j < BKV; j += VW)
            mv = vmax(mv, VLOAD(VW, 0, s + r * BKV + j));
        const float mt = hmax(mv);
        const float mn = mt > m[r] ? mt : m[r];
        const float ms = mn == NEG ? 0.0f : mn; /* no key seen yet: everything stays 0 */
        floatv sum = VBCAST(VW, 0.0f);
        for (int j = 0; j < BKV; j += VW) {
            const floatv pv = vexp2(VLOAD(VW, 0, s + r * BKV + j) - VBCAST(VW, ms));
            VSTORE(VW, pv, 0, s + r * BKV + j);
            sum = sum + pv;
        }
        alpha[r] = at_exp2(m[r] - ms);
        l[r] = l[r] * alpha[r] + hsum(sum);
        m[r] = mn;
    }

    /* ---- acc = acc * alpha + P V, VW * VB columns at a time ---- */
    AT_UNROLL(1)
    for (int c = 0; c < D; c += VW * VB) {
        floatv oa[RQ][VB];
        AT_UNROLL(RQ)
        for (int r = 0; r < RQ; ++r) {
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                oa[r][b] = VLOAD(VW, 0, acc + r * D + c + b * VW) * VBCAST(VW, alpha[r]);
        }
        AT_UNROLL(UNROLL)
        for (int j = 0; j < BKV; ++j) {
#if LKV
            LOCAL_PTR const float *vrow = Vs + j * D + c;
#else
            const int jj = (EDGE_KV || SPLIT > 1) ? MIN(j0 + j, kv_hi - 1) : j0 + j;
            GLOBAL const float *vrow = V + kbase + (idx_t)jj * kv_ss + c;
#endif
            floatv vv[VB];
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                vv[b] = VLOAD(VW, 0, vrow + b * VW);
            AT_UNROLL(RQ)
            for (int r = 0; r < RQ; ++r) {
                const floatv pv = VBCAST(VW, s[r * BKV + j]);
                AT_UNROLL(VB)
                for (int b = 0; b < VB; ++b)
                    oa[r][b] = VFMA(pv, vv[b], oa[r][b]);
            }
        }
        AT_UNROLL(RQ)
        for (int r = 0; r < RQ; ++r) {
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                VSTORE(VW, oa[r][b], 0, acc + r * D + c + b * VW);
        }
    }
}

/* ---- the kernel ------------------------------------------------------------------------------ */

KERNEL void attention(GLOBAL const float *RESTRICT Q, GLOBAL const float *RESTRICT K,
                      GLOBAL const float *RESTRICT V, GLOBAL float *O, GLOBAL float *LSE,
                      const int heads, const int kv_heads, const int seq, const int seq_kv,
                      const float scale, const long q_sb, const long q_sh, const long q_ss,
                      const long kv_sb, const long kv_sh, const long kv_ss
#if SPLIT > 1
                      ,
                      GLOBAL float *workspace
#endif
)
{
    const int tid = LOCAL_ID(0);
    const int group = heads / kv_heads;
    /* dimension 1: (batch, head), or (batch, key/value head) with PACK */
#if PACK
    const int b = GROUP_ID(1) / kv_heads, g = GROUP_ID(1) % kv_heads;
    const int nrows = group * seq; /* row = (head within the group) * seq + query */
#else
    const int b = GROUP_ID(1) / heads, h0 = GROUP_ID(1) % heads, g = h0 / group;
    const int nrows = seq;
#endif
    const int row0 = GROUP_ID(0) * BQ + tid * RQ; /* this work-item's first row */
    const int off = seq_kv - seq;                 /* causal diagonal offset */

    /* The work-item's rows: Q/O offsets, LSE index, first invisible key. Rows past nrows are
     * clamped onto the last one (reads stay in bounds; they are never written). */
    idx_t qoff[RQ];
    int lsei[RQ], lim[RQ];
    int top = 0; /* the largest query index among the rows */
    AT_UNROLL(RQ)
    for (int r = 0; r < RQ; ++r) {
        const int row = EDGE_Q ? MIN(row0 + r, nrows - 1) : row0 + r;
#if PACK
        const int h = g * group + row / seq, i = row % seq;
#else
        const int h = h0, i = row;
#endif
        qoff[r] = (idx_t)b * (idx_t)q_sb + (idx_t)h * (idx_t)q_sh + (idx_t)i * (idx_t)q_ss;
        lsei[r] = (b * heads + h) * seq + i;
        lim[r] = CAUSAL ? MIN(seq_kv, i + off + 1) : seq_kv;
        top = MAX(top, i);
    }
#if LKV && CAUSAL
    /* the work-group walks its keys together: up to its last row's last visible key */
    {
        const int rl = MIN(GROUP_ID(0) * BQ + BQ - 1, nrows - 1), rf = GROUP_ID(0) * BQ;
#if PACK
        top = rf / seq != rl / seq ? seq - 1 : rl % seq;
#else
        top = rl;
        (void)rf;
#endif
    }
#endif
    const int kv_end = CAUSAL ? MIN(seq_kv, top + off + 1) : seq_kv;
    const idx_t kbase = (idx_t)b * (idx_t)kv_sb + (idx_t)g * (idx_t)kv_sh;

    /* the keys of this split: [kv_lo, kv_hi), whole tiles but the last */
#if SPLIT > 1
    const int chunk = (((kv_end + SPLIT - 1) / SPLIT + BKV - 1) / BKV) * BKV;
    const int kv_lo = MIN(GROUP_ID(2) * chunk, kv_end), kv_hi = MIN(kv_lo + chunk, kv_end);
#else
    const int kv_lo = 0, kv_hi = kv_end;
#endif

    /* Q rows, scaled so the scores come out in log2 units */
    const float qs = scale * LOG2E;
    float q[RQ * D], acc[RQ * D], s[RQ * BKV], m[RQ], l[RQ];
    AT_UNROLL(RQ)
    for (int r = 0; r < RQ; ++r) {
        for (int c = 0; c < D; c += VW) {
            VSTORE(VW, VLOAD(VW, 0, Q + qoff[r] + c) * VBCAST(VW, qs), 0, q + r * D + c);
            VSTORE(VW, VBCAST(VW, 0.0f), 0, acc + r * D + c);
        }
        m[r] = NEG;
        l[r] = 0.0f;
    }

#if LKV
    LOCAL float Ks[D * BKV];
    LOCAL float Vs[BKV * D];
#else
    LOCAL_PTR float *Ks = 0;
    LOCAL_PTR float *Vs = 0;
#endif
    /* One call site (gemm.cl found PoCL miscompiling a second one of its tile function). */
    for (int j0 = kv_lo; j0 < kv_hi; j0 += BKV)
        attention_tile(acc, m, l, q, s, lim, K, V, kbase, (idx_t)kv_ss, j0, kv_hi, Ks, Vs, tid);

    const int nvalid = EDGE_Q ? MIN(RQ, nrows - row0) : RQ; /* rows this work-item writes */
#if SPLIT > 1
    if (nvalid > 0) {
        /* partial: acc[RQ][D], m[RQ], l[RQ] per (work-item, split); counters after them */
        const int unit = (GROUP_ID(1) * NUM_GROUPS(0) + GROUP_ID(0)) * THREADS + tid;
        const int units = NUM_GROUPS(1) * NUM_GROUPS(0) * THREADS;
        const idx_t psize = RQ * (D + 2);
        GLOBAL float *part = workspace + (idx_t)unit * SPLIT * psize;
        GLOBAL int *counter = (GLOBAL int *)(workspace + (idx_t)units * SPLIT * psize) + unit;
        GLOBAL float *mine = part + GROUP_ID(2) * psize;
        for (int r = 0; r < nvalid; ++r) {
            for (int c = 0; c < D; ++c)
                mine[r * D + c] = acc[r * D + c];
            mine[RQ * D + r] = m[r];
            mine[RQ * D + RQ + r] = l[r];
        }
        FENCE_GLOBAL();
        if (COUNT_IN(counter) == SPLIT - 1) { /* the last split: combine */
            FENCE_GLOBAL();
            for (int r = 0; r < nvalid; ++r) {
                float ms[SPLIT], mx = NEG, lt = 0.0f;
                for (int sp = 0; sp < SPLIT; ++sp) {
                    ms[sp] = TAKE(part + sp * psize + RQ * D + r);
                    mx = ms[sp] > mx ? ms[sp] : mx;
                }
                for (int sp = 0; sp < SPLIT; ++sp) {
                    ms[sp] = at_exp2(ms[sp] - mx); /* the split's weight */
                    lt += ms[sp] * TAKE(part + sp * psize + RQ * D + RQ + r);
                }
                const float inv = 1.0f / lt;
                for (int c = 0; c < D; ++c) {
                    float o = 0.0f;
                    for (int sp = 0; sp < SPLIT; ++sp)
                        o += ms[sp] * TAKE(part + sp * psize + r * D + c);
                    O[qoff[r] + c] = o * inv;
                }
                LSE[lsei[r]] = (mx + at_log2(lt)) * LN2;
            }
            COUNT_RESET(counter);
        }
    }
#else
    AT_UNROLL(RQ)
    for (int r = 0; r < RQ; ++r) {
        if (r >= nvalid)
            break;
        const float inv = 1.0f / l[r];
        for (int c = 0; c < D; c += VW)
            VSTORE(VW, VLOAD(VW, 0, acc + r * D + c) * VBCAST(VW, inv), 0, O + qoff[r] + c);
        LSE[lsei[r]] = (m[r] + at_log2(l[r])) * LN2;
    }
#endif
}
