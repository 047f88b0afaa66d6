/* attention.cl — tunable f32 attention forward (FlashAttention) in the portable dialect
 * (templates/common/opencl.h; the contract is docs/attention.md).
 *
 *   O[b,h,i,:] = softmax_j(scale * Q[b,h,i,:] . K[b,g,j,:]) V[b,g,j,:]     g = h / (H / G)
 *   LSE[b,h,i] = log(sum_j exp(s_j - max)) + max                          (natural log)
 *   causal: query i sees keys j <= i + (seq_kv - seq) (bottom-right alignment)
 *
 * A work-group owns BQ rows; each of its BQ/RQ work-items owns RQ of them outright (all HEAD_DIM
 * columns of their O accumulator, their running max m and sum l) and walks the keys in tiles of
 * BKV. Without staging (LKV = 0) there is no barrier and nothing shared between work-items, which
 * is what PoCL runs fastest. A row is a query of one (batch, head); with PACK the rows of a block
 * are the (head, query) pairs of one key/value head's group, so the group's query heads share
 * each K/V read (decode with grouped-query attention reads K and V once, not H/G times).
 *
 * Vectors run across a work-item's rows: lane e of vector n is row n*VW + e. Q is kept transposed
 * (qt[p][r], scaled by scale * log2(e) so the softmax runs in exp2), the scores of a tile as
 * st[j][r] and the accumulator as ot[c][r], so every step is a vector operation with a broadcast
 * element of K or V, and the softmax (max, exp2, sums, rescale) needs no horizontal reduction:
 *   scores  st[j][:] = sum_p qt[p][:] * K[j][p]       VB keys at a time (register block)
 *   softmax masked keys get a finite -inf, m' = max(m, max_j st[j]), p = exp2(st - m'),
 *           l = l * exp2(m - m') + sum_j p
 *   O       ot[c][:] = ot[c][:] * exp2(m - m') + sum_j p[j][:] * V[j][c]    VB columns at a time
 * At the end O = ot / l (transposed back once) and LSE = (m + log2 l) * ln 2.
 *
 * Causal: a work-item (with LKV, the whole work-group) stops after the last key tile its rows
 * can see, so whole tiles past the diagonal are never read; only tiles crossing a row's diagonal
 * are masked.
 *
 * Split-KV (SPLIT > 1, decode): the grid's dimension 2 splits the visible keys into SPLIT ranges
 * of whole tiles. Each work-item writes its rows' partial (unnormalised O, m, l) to the
 * workspace, fences, and counts itself in on its own counter (one per work-item of a query
 * block, so no barrier is needed); the last of the SPLIT to arrive combines the partials, writes
 * O and LSE, zeroes the partials it read and resets the counter, leaving the workspace as it was.
 *
 * Tuning parameters (-D, integers; constraints in attention.yaml):
 *   BQ      rows per work-group              RQ      rows per work-item (BQ / RQ work-items),
 *                                                    a multiple of VW
 *   BKV     keys per tile                    VW      vector width across rows (1 .. 16)
 *   VB      register block: keys in the scores, head-dim columns in P V
 *   KB      keys per pass of P V over the head dim (KB = BKV: one pass)
 *   RG      row groups per work-item: each key tile is used by RG groups of RQ rows in turn
 *           (their Q, O, m, l apart), so K and V are streamed once per RQ * RG rows from L3
 *   LKV     1: stage the K and V tiles in local memory (shared by the work-group's work-items);
 *           2: copy them into the work-item's private memory (no barrier; contiguous rows)
 *   UNROLL  unroll factor of the inner loops SPLIT   split-KV factor (1: none)
 *   PACK    1: a block's rows are the (head, query) pairs of a key/value head's group
 * Problem defines (attention_problem.h): HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, IDX64.
 */

#include "attention_problem.h" /* HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, IDX64, idx_t */

/* ---- derived constants ----------------------------------------------------------------------- */
#define D       HEAD_DIM
#define RW      (RQ * RG)      /* rows per work-item: RG groups of RQ */
#define THREADS (BQ / RW)      /* work-items per work-group (local dimension 0) */
#define NR      (RQ / VW)      /* row vectors per work-item */
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

/* ---- one key tile ---------------------------------------------------------------------------- */

/* Folds the keys [j0, j0 + BKV) into the work-item's rows: scores, masked online softmax, O.
 * kbase: the key/value head's offset in K and V; kv_hi: the end of the keys this work-item takes
 * (seq_kv, the causal limit, or its split's end); lim[r]: row r's first invisible key; mlim: the
 * smallest of them. */
INLINE void attention_tile(float *RESTRICT ot, floatv *RESTRICT m, floatv *RESTRICT l,
                           const float *RESTRICT qt, float *RESTRICT st, const int *lim,
                           const int mlim, GLOBAL const float *RESTRICT K,
                           GLOBAL const float *RESTRICT V, const idx_t kbase, const idx_t kv_ss,
                           const int j0, const int kv_hi, LOCAL_PTR float *Ks,
                           LOCAL_PTR float *Vs, float *RESTRICT kp, float *RESTRICT vp,
                           const int tid)
{
#if LKV == 2
    /* ---- copy the K and V tiles into this work-item's private memory: contiguous rows ---- */
    /* (with bshd rows H * D apart, 4 KiB at H * D = 1024, a tile's rows fall into the same
     * few L1 sets and evict each other; a contiguous copy does not) */
    AT_UNROLL(1)
    for (int j = 0; j < BKV; ++j) {
        const idx_t off = kbase + (idx_t)MIN(j0 + j, kv_hi - 1) * kv_ss;
        AT_UNROLL(4)
        for (int c = 0; c < D; c += VW) {
            VSTORE(VW, VLOAD(VW, 0, K + off + c), 0, kp + j * D + c);
            VSTORE(VW, VLOAD(VW, 0, V + off + c), 0, vp + j * D + c);
        }
    }
#define KROW(j) (kp + (j) * D)
#define VROW(j) (vp + (j) * D)
#elif LKV
    /* ---- stage the K and V tiles (Ks[j][p], Vs[j][p]); keys past kv_hi are clamped ---- */
    BARRIER(); /* the previous tile's readers are done */
    AT_UNROLL(1)
    for (int u = tid; u < BKV * (D / VW); u += THREADS) { /* VW-wide, consecutive per item */
        const int j = u / (D / VW), c = u % (D / VW) * VW;
        const idx_t off = kbase + (idx_t)MIN(j0 + j, kv_hi - 1) * kv_ss + c;
        VSTORE(VW, VLOAD(VW, 0, K + off), 0, Ks + j * D + c);
        VSTORE(VW, VLOAD(VW, 0, V + off), 0, Vs + j * D + c);
    }
    BARRIER();
#define KROW(j) (Ks + (j) * D)
#define VROW(j) (Vs + (j) * D)
#else
    /* keys past kv_hi (only in a partial last tile) read the last one; they are masked */
#define KVJ(j)  ((EDGE_KV || CAUSAL || SPLIT > 1) ? MIN(j0 + (j), kv_hi - 1) : j0 + (j))
#define KROW(j) (K + kbase + (idx_t)KVJ(j) * kv_ss)
#define VROW(j) (V + kbase + (idx_t)KVJ(j) * kv_ss)
#endif

    /* ---- scores: st[j][:] = qt^T K_j, VB keys by NR row vectors in registers ---- */
    AT_UNROLL(1)
    for (int j = 0; j < BKV; j += VB) {
        floatv sa[NR][VB];
        AT_UNROLL(NR)
        for (int n = 0; n < NR; ++n) {
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b)
                sa[n][b] = VBCAST(VW, 0.0f);
        }
        AT_UNROLL(UNROLL)
        for (int p = 0; p < D; ++p) {
            floatv qv[NR];
            AT_UNROLL(NR)
            for (int n = 0; n < NR; ++n)
                qv[n] = VLOAD(VW, 0, qt + p * RQ + n * VW);
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b) {
                const floatv kb = VBCAST(VW, KROW(j + b)[p]);
                AT_UNROLL(NR)
                for (int n = 0; n < NR; ++n)
                    sa[n][b] = VFMA(qv[n], kb, sa[n][b]);
            }
        }
        AT_UNROLL(VB)
        for (int b = 0; b < VB; ++b) {
            AT_UNROLL(NR)
            for (int n = 0; n < NR; ++n)
                VSTORE(VW, sa[n][b], 0, st + (j + b) * RQ + n * VW);
        }
    }

    /* ---- mask the keys a row does not see (only in a tile crossing a limit) ---- */
    if (j0 + BKV > mlim) {
        for (int j = 0; j < BKV; ++j) {
            AT_UNROLL(RQ)
            for (int r = 0; r < RQ; ++r)
                if (j0 + j >= lim[r])
                    st[j * RQ + r] = NEG;
        }
    }

    /* ---- online softmax, NR row vectors at once ---- */
    floatv alpha[NR];
    AT_UNROLL(NR)
    for (int n = 0; n < NR; ++n) {
        floatv mx = m[n];
        for (int j = 0; j < BKV; ++j)
            mx = vmax(mx, VLOAD(VW, 0, st + j * RQ + n * VW));
        /* a row without a visible key so far keeps everything 0: subtract 0, not NEG */
        floatv ms;
        {
            float t[VW];
            VSTORE(VW, mx, 0, t);
            AT_UNROLL(VW)
            for (int e = 0; e < VW; ++e)
                t[e] = t[e] == NEG ? 0.0f : t[e];
            ms = VLOAD(VW, 0, t);
        }
        floatv sum = VBCAST(VW, 0.0f);
        for (int j = 0; j < BKV; ++j) {
            const floatv pv = vexp2(VLOAD(VW, 0, st + j * RQ + n * VW) - ms);
            VSTORE(VW, pv, 0, st + j * RQ + n * VW);
            sum = sum + pv;
        }
        alpha[n] = vexp2(m[n] - ms);
        l[n] = VFMA(l[n], alpha[n], sum);
        m[n] = mx;
    }

    /* ---- ot = ot * alpha + P V: KB keys per pass over the head dim (the pass's V rows stay
     * in L1), VB head-dim columns by NR row vectors in registers ---- */
    AT_UNROLL(1)
    for (int jb = 0; jb < BKV; jb += KB) {
        AT_UNROLL(1)
        for (int c = 0; c < D; c += VB) {
            floatv oa[NR][VB];
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b) {
                AT_UNROLL(NR)
                for (int n = 0; n < NR; ++n) {
                    oa[n][b] = VLOAD(VW, 0, ot + (c + b) * RQ + n * VW);
                    if (jb == 0)
                        oa[n][b] = oa[n][b] * alpha[n];
                }
            }
            AT_UNROLL(UNROLL)
            for (int j = jb; j < jb + KB; ++j) {
                floatv pv[NR];
                AT_UNROLL(NR)
                for (int n = 0; n < NR; ++n)
                    pv[n] = VLOAD(VW, 0, st + j * RQ + n * VW);
                AT_UNROLL(VB)
                for (int b = 0; b < VB; ++b) {
                    const floatv vb = VBCAST(VW, VROW(j)[c + b]);
                    AT_UNROLL(NR)
                    for (int n = 0; n < NR; ++n)
                        oa[n][b] = VFMA(pv[n], vb, oa[n][b]);
                }
            }
            AT_UNROLL(VB)
            for (int b = 0; b < VB; ++b) {
                AT_UNROLL(NR)
                for (int n = 0; n < NR; ++n)
                    VSTORE(VW, oa[n][b], 0, ot + (c + b) * RQ + n * VW);
            }
        }
    }
#undef KROW
#undef VROW
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
    const int row0 = GROUP_ID(0) * BQ + tid * RW; /* this work-item's first row */
    const int off = seq_kv - seq;                 /* causal diagonal offset */

    /* The work-item's rows: Q/O offsets, LSE index, first invisible key. Rows past nrows are
     * clamped onto the last one (reads stay in bounds; they are never written). */
    idx_t qoff[RW];
    int lsei[RW], lim[RW];
    int top = 0; /* the largest query index among the rows */
    AT_UNROLL(RW)
    for (int r = 0; r < RW; ++r) {
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
#if LKV == 1 && CAUSAL
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

    /* Q rows, transposed and scaled so the scores come out in log2 units; group g of the
     * work-item's rows keeps its qt and ot at g * D * RQ, element (c, r) at c * RQ + r */
#define TIDX(r, c) ((r) / RQ * (D * RQ) + (c) * RQ + (r) % RQ)
    const float qs = scale * LOG2E;
    float qt[D * RW], ot[D * RW], st[BKV * RQ];
    floatv m[RG * NR], l[RG * NR];
    AT_UNROLL(1) /* once per work-item: small code matters more (PoCL compiles at launch) */
    for (int r = 0; r < RW; ++r) {
        for (int c = 0; c < D; ++c) {
            qt[TIDX(r, c)] = Q[qoff[r] + c] * qs;
            ot[TIDX(r, c)] = 0.0f;
        }
    }
    AT_UNROLL(RG * NR)
    for (int n = 0; n < RG * NR; ++n) {
        m[n] = VBCAST(VW, NEG);
        l[n] = VBCAST(VW, 0.0f);
    }
    int mlim[RG]; /* per group: its smallest row limit, or kv_hi (a partial last tile) */
    AT_UNROLL(RG)
    for (int gr = 0; gr < RG; ++gr) {
        mlim[gr] = kv_hi;
        AT_UNROLL(RQ)
        for (int r = 0; r < RQ; ++r)
            mlim[gr] = MIN(mlim[gr], lim[gr * RQ + r]);
    }

#if LKV == 1
    LOCAL float Ks[BKV * D];
    LOCAL float Vs[BKV * D];
#else
    LOCAL_PTR float *Ks = 0;
    LOCAL_PTR float *Vs = 0;
#endif
#if LKV == 2
    float kp[BKV * D], vp[BKV * D];
#else
    float *kp = 0, *vp = 0;
#endif
    /* One call site (gemm.cl found PoCL miscompiling a second one of its tile function). */
    for (int j0 = kv_lo; j0 < kv_hi; j0 += BKV) {
        AT_UNROLL(1)
        for (int gr = 0; gr < RG; ++gr)
            attention_tile(ot + gr * D * RQ, m + gr * NR, l + gr * NR, qt + gr * D * RQ, st,
                           lim + gr * RQ, mlim[gr], K, V, kbase, (idx_t)kv_ss, j0, kv_hi, Ks, Vs,
                           kp, vp, tid);
    }

    /* m and l per row */
    float mr[RW], lr[RW];
    AT_UNROLL(RG * NR)
    for (int n = 0; n < RG * NR; ++n) {
        VSTORE(VW, m[n], 0, mr + n * VW);
        VSTORE(VW, l[n], 0, lr + n * VW);
    }

    const int nvalid = EDGE_Q ? MIN(RW, nrows - row0) : RW; /* rows this work-item writes */
#if SPLIT > 1
    if (nvalid > 0) {
        /* partial: O[RW][D], m[RW], l[RW] per (work-item, split); the counters after them all */
        const int unit = (GROUP_ID(1) * NUM_GROUPS(0) + GROUP_ID(0)) * THREADS + tid;
        const int units = NUM_GROUPS(1) * NUM_GROUPS(0) * THREADS;
        const idx_t psize = RW * (D + 2);
        GLOBAL float *part = workspace + (idx_t)unit * SPLIT * psize;
        GLOBAL int *counter = (GLOBAL int *)(workspace + (idx_t)units * SPLIT * psize) + unit;
        GLOBAL float *mine = part + GROUP_ID(2) * psize;
        for (int r = 0; r < nvalid; ++r) {
            for (int c = 0; c < D; ++c)
                mine[r * D + c] = ot[TIDX(r, c)];
            mine[RW * D + r] = mr[r];
            mine[RW * D + RW + r] = lr[r];
        }
        FENCE_GLOBAL();
        if (COUNT_IN(counter) == SPLIT - 1) { /* the last split to arrive combines */
            FENCE_GLOBAL();
            for (int r = 0; r < nvalid; ++r) {
                float w[SPLIT], mx = NEG, lt = 0.0f;
                for (int sp = 0; sp < SPLIT; ++sp) {
                    w[sp] = TAKE(part + sp * psize + RW * D + r);
                    mx = w[sp] > mx ? w[sp] : mx;
                }
                for (int sp = 0; sp < SPLIT; ++sp) {
                    w[sp] = at_exp2(w[sp] - mx); /* the split's weight */
                    lt += w[sp] * TAKE(part + sp * psize + RW * D + RW + r);
                }
                const float inv = 1.0f / lt;
                for (int c = 0; c < D; ++c) {
                    float o = 0.0f;
                    for (int sp = 0; sp < SPLIT; ++sp)
                        o += w[sp] * TAKE(part + sp * psize + r * D + c);
                    O[qoff[r] + c] = o * inv;
                }
                LSE[lsei[r]] = (mx + at_log2(lt)) * LN2;
            }
            COUNT_RESET(counter);
        }
    }
#else
    AT_UNROLL(1)
    for (int r = 0; r < RW; ++r) {
        if (r >= nvalid)
            break;
        const float inv = 1.0f / lr[r];
        for (int c = 0; c < D; ++c)
            O[qoff[r] + c] = ot[TIDX(r, c)] * inv;
        LSE[lsei[r]] = (mr[r] + at_log2(lr[r])) * LN2;
    }
#endif
}
