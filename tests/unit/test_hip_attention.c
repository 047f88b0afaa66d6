/* test_hip_attention.c — host emulation of the MFMA attention template
 * (templates/attention/attention_mfma.hip): its own functions (split ranges, causal tile count,
 * mask, staging units, the PV key permutation, the online-softmax step, LSE, the split combine)
 * and the shared MFMA layouts (templates/common/hip_mfma.h) drive an emulated launch, block by
 * block and lane by lane, whose MFMA instructions follow an independent model of the hardware's
 * operand and result layouts (AMD CDNA ISA), with LDS poisoned by NaN wherever nothing is staged,
 * P rounded to the 16-bit type as the kernel does, and the split-KV workspace protocol (partials,
 * counter, the last block combines and clears). O and LSE must match a plain C reference (double,
 * two-pass softmax) within the 16-bit rounding of P, and the workspace must be all zero after.
 * There is no AMD GPU here: this is the only check of the kernel's data movement and softmax. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/op.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_MFMA_HOST
#include "templates/attention/attention_mfma.hip"

/* ---- the hardware model, from the ISA's description (not from the template) ---------------- */

#include "tests/unit/mfma_hw.h"

/* The kernel's 16-bit rounding of P (nearest even): bf16 by bits, f16 through _Float16. */
static float round16(float x, int bf16)
{
    if (!bf16) return (float)(_Float16)x;
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- the problem and its reference ----------------------------------------------------------- */
typedef struct prob {
    int batch, heads, kv_heads, seq, seq_kv, d, causal, bhsd, bf16;
    float scale;
    long q[3], kv[3]; /* element strides {batch, head, seq} */
    float *Q, *K, *V; /* values k/8 in [-1, 1): exact in f16 and bf16 */
} prob;

static void prob_init(prob *p)
{
    const int H = p->heads, G = p->kv_heads, S = p->seq, S2 = p->seq_kv, D = p->d;
    if (p->bhsd) {
        p->q[0] = (long)H * S * D, p->q[1] = (long)S * D, p->q[2] = D;
        p->kv[0] = (long)G * S2 * D, p->kv[1] = (long)S2 * D, p->kv[2] = D;
    } else {
        p->q[0] = (long)S * H * D, p->q[1] = D, p->q[2] = (long)H * D;
        p->kv[0] = (long)S2 * G * D, p->kv[1] = D, p->kv[2] = (long)G * D;
    }
    p->scale = 1.0f / sqrtf((float)D);
    size_t nq = (size_t)p->batch * H * S * D, nkv = (size_t)p->batch * G * S2 * D;
    p->Q = malloc(sizeof(float) * nq);
    p->K = malloc(sizeof(float) * nkv);
    p->V = malloc(sizeof(float) * nkv);
    uint32_t s = 777u + (uint32_t)(S * 31 + S2 * 7 + D);
    for (size_t x = 0; x < nq; x++)
        p->Q[x] = (float)((int)((s = s * 1664525u + 1013904223u) >> 28) - 8) / 8;
    for (size_t x = 0; x < nkv; x++)
        p->K[x] = (float)((int)((s = s * 1664525u + 1013904223u) >> 28) - 8) / 8;
    for (size_t x = 0; x < nkv; x++)
        p->V[x] = (float)((int)((s = s * 1664525u + 1013904223u) >> 28) - 8) / 8;
}

static void prob_free(prob *p)
{
    free(p->Q);
    free(p->K);
    free(p->V);
}

/* Reference row (b, h, i): o[D], bound[D] = sum_j p_j |v_j|, the LSE. */
static double ref_row(const prob *p, int b, int h, int i, double *o, double *bound)
{
    const int kvh = h / (p->heads / p->kv_heads);
    const float *q = p->Q + b * p->q[0] + h * p->q[1] + i * p->q[2];
    double mx = -INFINITY, sum = 0;
    double *s = malloc(sizeof(double) * p->seq_kv);
    for (int j = 0; j < p->seq_kv; j++) {
        s[j] = -INFINITY;
        if (p->causal && j > i + p->seq_kv - p->seq) continue;
        const float *k = p->K + b * p->kv[0] + kvh * p->kv[1] + j * p->kv[2];
        double d = 0;
        for (int x = 0; x < p->d; x++) d += (double)q[x] * k[x];
        s[j] = d * p->scale;
        if (s[j] > mx) mx = s[j];
    }
    for (int x = 0; x < p->d; x++) o[x] = bound[x] = 0;
    for (int j = 0; j < p->seq_kv; j++) {
        if (s[j] == -INFINITY) continue;
        const double e = exp(s[j] - mx);
        sum += e;
        const float *v = p->V + b * p->kv[0] + kvh * p->kv[1] + j * p->kv[2];
        for (int x = 0; x < p->d; x++) o[x] += e * v[x], bound[x] += e * fabs(v[x]);
    }
    for (int x = 0; x < p->d; x++) o[x] /= sum, bound[x] /= sum;
    free(s);
    return log(sum) + mx;
}

/* ---- the emulated launch, through the template's functions ---------------------------------- */

/* Deliberate template bugs for the test of the test: 1 reads the PV operand of V one key off,
 * 2 drops the online-softmax rescaling of O, 3 leaves the split partials in the workspace. */
static int g_bug;

typedef struct out {
    float *O, *LSE, *ws; /* O as laid out like Q; LSE (batch, heads, seq); the workspace */
    size_t ws_words;
} out;

/* One block (bh, qb, sp), as the kernel runs it. Returns 0, or -1 with why. */
static int run_block(const at_attn_cfg *c, const prob *p, out *o, int bh, int qb, int sp,
                     int qblocks, char *why, size_t whylen)
{
    const int M = c->mfma, kl = c->kl, D = c->d, waves = c->waves, wq = c->bq / waves;
    const int tq = wq / M, tk = c->bkv / M, td = D / M, ki = kl * (64 / M), nacc = M * M / 64;
    const int b = bh / p->heads, h = bh % p->heads, kvh = h / (p->heads / p->kv_heads);
    const int q0 = qb * c->bq, off = p->seq_kv - p->seq, nunits = c->bkv * D / 16;
    const int edge_kv = p->seq_kv % c->bkv != 0, edge_q = p->seq % c->bq != 0;
    const float c2 = p->scale * AT_LOG2E;
    if (D % M || D % ki || wq % M || c->bkv % M || c->bq % waves) {
        snprintf(why, whylen, "geometry the space should have refused");
        return -1;
    }
    int t0, t1;
    at_attn_split(c, at_attn_tiles(c, p->causal, q0, p->seq, p->seq_kv), sp, &t0, &t1);

    /* per wave, query tile and lane: Q fragments, O^T accumulators, m, l */
    const size_t nl = (size_t)waves * tq * 64;
    float *qf = calloc(nl * (D / ki) * 4, sizeof(float));
    float *oacc = calloc(nl * td * nacc, sizeof(float));
    float *m = malloc(sizeof(float) * nl), *l = calloc(nl, sizeof(float));
    float *sacc = malloc(sizeof(float) * tk * 64 * nacc),
          *pf = malloc(sizeof(float) * tk * 64 * nacc);
    float *ks = malloc(sizeof(float) * c->bkv * c->ldk), *vs = malloc(sizeof(float) * D * c->ldv);
    float fa[256], fb[256], mx[64];
    for (size_t x = 0; x < nl; x++) m[x] = AT_NEG_INF;
    const float *Qh = p->Q + b * p->q[0] + h * p->q[1];
    const float *Kh = p->K + b * p->kv[0] + kvh * p->kv[1],
                *Vh = p->V + b * p->kv[0] + kvh * p->kv[1];
#define LN(w, iq, lane) ((((size_t)(w)*tq + (iq)) * 64) + (lane))
    for (int w = 0; w < waves; w++)
        for (int iq = 0; iq < tq; iq++)
            for (int lane = 0; lane < 64; lane++) {
                const int qi = q0 + w * wq + iq * M + at_mfma_rc(M, lane);
                for (int ds = 0; ds < D / ki; ds++)
                    for (int t = 0; t < kl; t++)
                        qf[(LN(w, iq, lane) * (D / ki) + ds) * 4 + t] =
                            (!edge_q || qi < p->seq)
                                ? Qh[(long)qi * p->q[2] + ds * ki + at_mfma_k(M, kl, lane, t)]
                                : 0.0f;
            }

    for (int kt = t0; kt < t1; kt++) {
        const int kv0 = kt * c->bkv;
        /* staging: NaN wherever no unit lands */
        for (int x = 0; x < c->bkv * c->ldk; x++) ks[x] = NAN;
        for (int x = 0; x < D * c->ldv; x++) vs[x] = NAN;
        for (int u = 0; u < nunits; u++) {
            int key, dd;
            at_attn_unit(c, u, &key, &dd);
            for (int r = 0; r < 4; r++)
                for (int t = 0; t < 4; t++) {
                    const int j = kv0 + key + r;
                    const int in = !edge_kv || j < p->seq_kv;
                    ks[(key + r) * c->ldk + dd + t] = in ? Kh[(long)j * p->kv[2] + dd + t] : 0.0f;
                    vs[(dd + t) * c->ldv + key + r] = in ? Vh[(long)j * p->kv[2] + dd + t] : 0.0f;
                }
        }
        for (int w = 0; w < waves; w++) {
            const int wq0 = q0 + w * wq;
            if (!((!p->causal || kv0 <= wq0 + wq - 1 + off) && (!edge_q || wq0 < p->seq))) continue;
            const int edge = (edge_kv && kv0 + c->bkv > p->seq_kv) ||
                             (p->causal && kv0 + c->bkv - 1 > wq0 + off);
            for (int iq = 0; iq < tq; iq++) {
                /* S^T = K Q^T */
                memset(sacc, 0, sizeof(float) * tk * 64 * nacc);
                for (int ds = 0; ds < D / ki; ds++)
                    for (int jk = 0; jk < tk; jk++) {
                        for (int lane = 0; lane < 64; lane++)
                            for (int t = 0; t < kl; t++) {
                                fa[lane * 4 + t] = ks[(jk * M + at_mfma_rc(M, lane)) * c->ldk +
                                                      ds * ki + at_mfma_k(M, kl, lane, t)];
                                fb[lane * 4 + t] = qf[(LN(w, iq, lane) * (D / ki) + ds) * 4 + t];
                            }
                        hw_mfma(M, kl, fa, fb, sacc + jk * 64 * nacc);
                    }
                /* scale, mask, the row max over the lanes of a query (the shuffles) */
                for (int lane = 0; lane < 64; lane++) {
                    const int qi = wq0 + iq * M + at_mfma_acc_col(M, lane);
                    mx[lane] = AT_NEG_INF;
                    for (int jk = 0; jk < tk; jk++)
                        for (int r = 0; r < nacc; r++) {
                            float *s = &sacc[(jk * 64 + lane) * nacc + r];
                            *s *= c2;
                            const int kj = kv0 + jk * M + at_mfma_acc_row(M, lane, r);
                            if (edge &&
                                at_attn_masked(p->causal, edge_kv, qi, kj, p->seq, p->seq_kv))
                                *s = AT_NEG_INF;
                            mx[lane] = fmaxf(mx[lane], *s);
                        }
                }
                for (int lane = 0; lane < 64; lane++) {
                    float rowmax = AT_NEG_INF, ref, sum = 0;
                    for (int l2 = lane % M; l2 < 64; l2 += M) rowmax = fmaxf(rowmax, mx[l2]);
                    const size_t x = LN(w, iq, lane);
                    float alpha = at_softmax_step(&m[x], rowmax, &ref);
                    for (int jk = 0; jk < tk; jk++)
                        for (int r = 0; r < nacc; r++) {
                            const float e = exp2f(sacc[(jk * 64 + lane) * nacc + r] - ref);
                            sum += e;
                            pf[(jk * 64 + lane) * nacc + r] = round16(e, p->bf16);
                        }
                    l[x] = l[x] * alpha + sum;
                    if (g_bug == 2) alpha = 1;
                    for (int y = 0; y < td * nacc; y++) oacc[x * td * nacc + y] *= alpha;
                }
                /* O^T += V^T P^T, chunk by chunk through at_pv_key */
                for (int jk = 0; jk < tk; jk++)
                    for (int ch = 0; ch < nacc / 4; ch++)
                        for (int hh = 0; hh < 4 / kl; hh++)
                            for (int id = 0; id < td; id++) {
                                float acc[64 * 16];
                                for (int lane = 0; lane < 64; lane++) {
                                    const int key =
                                        jk * M + at_pv_key(c, lane, ch, hh, 0) + (g_bug == 1);
                                    for (int t = 0; t < kl; t++) {
                                        fa[lane * 4 + t] =
                                            vs[(id * M + at_mfma_rc(M, lane)) * c->ldv + key + t];
                                        fb[lane * 4 + t] =
                                            pf[(jk * 64 + lane) * nacc + ch * 4 + hh * kl + t];
                                    }
                                    for (int r = 0; r < nacc; r++)
                                        acc[lane * nacc + r] =
                                            oacc[(LN(w, iq, lane) * td + id) * nacc + r];
                                }
                                hw_mfma(M, kl, fa, fb, acc);
                                for (int lane = 0; lane < 64; lane++)
                                    for (int r = 0; r < nacc; r++)
                                        oacc[(LN(w, iq, lane) * td + id) * nacc + r] =
                                            acc[lane * nacc + r];
                            }
            }
        }
    }

    /* epilogue: the row sums over the lanes; O and LSE, or the partial */
    float *ltot = malloc(sizeof(float) * nl);
    for (int w = 0; w < waves; w++)
        for (int iq = 0; iq < tq; iq++)
            for (int lane = 0; lane < 64; lane++) {
                float s = 0;
                for (int l2 = lane % M; l2 < 64; l2 += M) s += l[LN(w, iq, l2)];
                ltot[LN(w, iq, lane)] = s;
            }
    const long groups = (long)p->batch * p->heads * qblocks, group = (long)bh * qblocks + qb;
    const long part = (long)c->bq * (D + 2);
    float *wg = o->ws + group * c->split * part, *wp = wg + sp * part;
    int *count = (int *)(o->ws + groups * c->split * part) + group;
    int rc = 0;
    for (int w = 0; w < waves; w++)
        for (int iq = 0; iq < tq; iq++)
            for (int lane = 0; lane < 64; lane++) {
                const size_t x = LN(w, iq, lane);
                const int row = w * wq + iq * M + at_mfma_acc_col(M, lane), qi = q0 + row;
                for (int id = 0; id < td; id++)
                    for (int r = 0; r < nacc; r++) {
                        const int dd = id * M + at_mfma_acc_row(M, lane, r);
                        const float v = oacc[(x * td + id) * nacc + r];
                        if (c->split > 1)
                            wp[row * D + dd] = v;
                        else if (!edge_q || qi < p->seq)
                            o->O[b * p->q[0] + h * p->q[1] + (long)qi * p->q[2] + dd] = v / ltot[x];
                    }
                if (lane < M) {
                    if (c->split > 1)
                        wp[c->bq * D + row] = m[x], wp[c->bq * D + c->bq + row] = ltot[x];
                    else if (!edge_q || qi < p->seq)
                        o->LSE[(long)bh * p->seq + qi] = at_attn_lse(m[x], ltot[x]);
                }
            }
#undef LN
    if (c->split > 1 && (*count)++ == c->split - 1) { /* the last block combines and clears */
        float ms[16], ls[16], wt[16];
        for (int row = 0; row < c->bq; row++) {
            for (int s = 0; s < c->split; s++) {
                float *pm = wg + s * part + c->bq * D + row, *pl = pm + c->bq;
                ms[s] = *pm, ls[s] = *pl;
                if (g_bug != 3) *pm = *pl = 0;
            }
            const float lse = at_attn_combine(c->split, ms, ls, wt);
            const int qi = q0 + row;
            if (!edge_q || qi < p->seq) o->LSE[(long)bh * p->seq + qi] = lse;
            for (int dd = 0; dd < D; dd++) {
                float v = 0;
                for (int s = 0; s < c->split; s++) {
                    v += wg[s * part + row * D + dd] * wt[s];
                    if (g_bug != 3) wg[s * part + row * D + dd] = 0;
                }
                if (!edge_q || qi < p->seq)
                    o->O[b * p->q[0] + h * p->q[1] + (long)qi * p->q[2] + dd] = v;
            }
        }
        *count = 0;
    }
    free(qf), free(oacc), free(m), free(l), free(ltot), free(sacc), free(pf), free(ks), free(vs);
    return rc;
}

/* Runs the whole launch (splits of a query block in a scrambled order, so the combining block
 * varies) and checks O, LSE and the workspace. Returns 0, or -1 with why. */
static int check(const at_attn_cfg *c, prob *p, char *why, size_t whylen)
{
    const int qblocks = (p->seq + c->bq - 1) / c->bq, bhn = p->batch * p->heads;
    const size_t nq = (size_t)bhn * p->seq * p->d;
    out o = {malloc(sizeof(float) * nq), malloc(sizeof(float) * bhn * p->seq), NULL, 0};
    for (size_t x = 0; x < nq; x++) o.O[x] = NAN;
    for (int x = 0; x < bhn * p->seq; x++) o.LSE[x] = NAN;
    if (c->split > 1) {
        o.ws_words = (size_t)bhn * qblocks * (c->split * (size_t)c->bq * (p->d + 2) + 1);
        o.ws = calloc(o.ws_words, sizeof(float));
    }
    int rc = 0;
    for (int bh = 0; bh < bhn && !rc; bh++)
        for (int qb = 0; qb < qblocks && !rc; qb++)
            for (int s = 0; s < c->split && !rc; s++)
                rc = run_block(c, p, &o, bh, qb, (s * 3 + qb + 1) % c->split, qblocks, why, whylen);
    const double tol = p->bf16 ? 1e-2 : 2e-3;
    double *ro = malloc(sizeof(double) * p->d), *rb = malloc(sizeof(double) * p->d);
    for (int b = 0; b < p->batch && !rc; b++)
        for (int h = 0; h < p->heads && !rc; h++)
            for (int i = 0; i < p->seq && !rc; i++) {
                const double lse = ref_row(p, b, h, i, ro, rb);
                const float got = o.LSE[((long)b * p->heads + h) * p->seq + i];
                if (!(fabs(got - lse) <= 1e-4 * (1 + fabs(lse)))) {
                    snprintf(why, whylen, "LSE(b %d, h %d, i %d) = %g, reference %g", b, h, i, got,
                             lse);
                    rc = -1;
                }
                for (int x = 0; x < p->d && !rc; x++) {
                    const float v = o.O[b * p->q[0] + h * p->q[1] + i * p->q[2] + x];
                    if (!(fabs(v - ro[x]) <= tol * rb[x] + 1e-6)) {
                        snprintf(why, whylen, "O(b %d, h %d, i %d, %d) = %g, reference %g", b, h, i,
                                 x, v, ro[x]);
                        rc = -1;
                    }
                }
            }
    for (size_t x = 0; x < o.ws_words && !rc; x++)
        if (o.ws[x] != 0) {
            snprintf(why, whylen, "workspace word %zu of %zu left %g", x, o.ws_words, o.ws[x]);
            rc = -1;
        }
    free(ro), free(rb), free(o.O), free(o.LSE), free(o.ws);
    return rc;
}

/* ---- configurations from the space ----------------------------------------------------------- */
static at_attn_cfg cfg_of(const at_space *sp, const int64_t *cfg, int d)
{
    const char *names[] = {"BQ", "BKV", "WAVES", "MFMA", "KL", "PAD", "SPLIT"};
    int64_t v[7];
    for (int i = 0; i < 7; i++) assert_int_equal(at_space_value(sp, cfg, names[i], &v[i]), AT_OK);
    return (at_attn_cfg){(int)v[0], (int)v[1], (int)v[2],         (int)v[3],
                         (int)v[4], d,         d + 4 * (int)v[5], (int)v[1] + 4 * (int)v[5],
                         (int)v[6]};
}

/* 1 (`test_hip_attention --all`, under ctest -L slow): every valid configuration per problem;
 * else every 16th and the defaults. */
static int g_all;

/* Every (sampled) configuration of the space for this problem on arch, then the defaults. */
static void run_space(const char *arch, prob *p)
{
    at_template *t = NULL;
    assert_int_equal(at_template_load("attention_mfma", "hip", &t), AT_OK);
    at_device_info info = {.max_work_group_size = 1024,
                           .local_mem_bytes = 65536,
                           .warp_size = 64,
                           .compute_units = 110};
    snprintf(info.arch, sizeof info.arch, "%s", arch);
    assert_int_equal(at_template_bind_device(t, &info), AT_OK);
    at_attention_problem ap = {.batch = p->batch,
                               .heads = p->heads,
                               .kv_heads = p->kv_heads,
                               .seq = p->seq,
                               .seq_kv = p->seq_kv,
                               .head_dim = p->d,
                               .causal = p->causal,
                               .dtype = p->bf16 ? AT_DTYPE_BF16 : AT_DTYPE_F16,
                               .layout = p->bhsd ? AT_ATTENTION_BHSD : AT_ATTENTION_BSHD};
    assert_int_equal(at_op_find("attention")->bind(&ap, t->space), AT_OK);
    int64_t *configs = NULL;
    size_t n = 0;
    assert_int_equal(at_space_enumerate(t->space, &configs, NULL, &n), AT_OK);
    assert_true(n > 0);
    char why[256], buf[256];
    prob_init(p);
    size_t step = g_all ? 1 : 16, runs = 0;
    for (size_t i = (size_t)p->seq % step; i < n; i += step, runs++) {
        const int64_t *cfg = configs + i * t->space->nparams;
        at_attn_cfg c = cfg_of(t->space, cfg, p->d);
        if (check(&c, p, why, sizeof why) != 0) {
            at_config_format(t->space, cfg, buf, sizeof buf);
            fail_msg("%s %s d%d %dx%d%s: %s: %s", arch, p->bf16 ? "bf16" : "f16", p->d, p->seq,
                     p->seq_kv, p->causal ? " causal" : "", buf, why);
        }
    }
    for (size_t d = 0; d < t->space->ndefaults; d++) {
        const int64_t *cfg = t->space->defaults + d * t->space->nparams;
        if (!at_space_valid(t->space, cfg, why, sizeof why)) continue;
        at_attn_cfg c = cfg_of(t->space, cfg, p->d);
        if (check(&c, p, why, sizeof why) != 0) fail_msg("%s default %zu: %s", arch, d, why);
        runs++;
    }
    assert_true(runs > 0);
    prob_free(p);
    free(configs);
    at_template_free(t);
}

/* Awkward shapes: seq 1 (decode, split-KV), 17 and a prime, causal with seq_kv > seq, GQA and
 * MQA, both layouts, both 16-bit types, the two operand geometries (gfx908's bf16: KL = 2), and
 * head dims 32, 64, 80, 96, 128, 256. */
static void test_decode_split(void **state)
{
    (void)state;
    prob p = {.batch = 1, .heads = 4, .kv_heads = 2, .seq = 1, .seq_kv = 1031, .d = 64};
    run_space("gfx90a", &p);
}
static void test_decode_split_causal_bf16_gfx908(void **state)
{
    (void)state;
    prob p = {.batch = 2,
              .heads = 2,
              .kv_heads = 1,
              .seq = 3,
              .seq_kv = 611,
              .d = 128,
              .causal = 1,
              .bf16 = 1,
              .bhsd = 1};
    run_space("gfx908", &p);
}
static void test_prefill_causal_gqa(void **state)
{
    (void)state;
    prob p = {.batch = 1, .heads = 4, .kv_heads = 1, .seq = 17, .seq_kv = 53, .d = 32, .causal = 1};
    run_space("gfx90a", &p);
}
static void test_prefill_prime_bf16(void **state)
{
    (void)state;
    prob p = {.batch = 2,
              .heads = 1,
              .kv_heads = 1,
              .seq = 131,
              .seq_kv = 131,
              .d = 80,
              .bf16 = 1,
              .bhsd = 1};
    run_space("gfx90a", &p);
}
static void test_prefill_causal_gfx908_bf16(void **state)
{
    (void)state;
    prob p = {.batch = 1,
              .heads = 2,
              .kv_heads = 2,
              .seq = 67,
              .seq_kv = 67,
              .d = 96,
              .causal = 1,
              .bf16 = 1};
    run_space("gfx908", &p);
}

static void test_prefill_d256_causal(void **state)
{
    (void)state;
    prob p = {
        .batch = 1, .heads = 2, .kv_heads = 1, .seq = 40, .seq_kv = 45, .d = 256, .causal = 1};
    run_space("gfx90a", &p);
}

/* The emulation must be able to fail: each deliberate bug is caught. */
static void test_emulation_catches_bugs(void **state)
{
    (void)state;
    at_attn_cfg c = {64, 32, 2, 32, 4, 64, 68, 36, 1};
    prob p = {
        .batch = 1, .heads = 2, .kv_heads = 1, .seq = 70, .seq_kv = 100, .d = 64, .causal = 1};
    char why[256];
    prob_init(&p);
    assert_int_equal(check(&c, &p, why, sizeof why), 0);
    for (g_bug = 1; g_bug <= 2; g_bug++) assert_int_not_equal(check(&c, &p, why, sizeof why), 0);
    c.split = 2;
    c.bq = 32, c.waves = 1;
    g_bug = 0;
    assert_int_equal(check(&c, &p, why, sizeof why), 0);
    g_bug = 3;
    assert_int_not_equal(check(&c, &p, why, sizeof why), 0);
    g_bug = 0;
    prob_free(&p);
}

int main(int argc, char **argv)
{
    g_all = argc > 1 && strcmp(argv[1], "--all") == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emulation_catches_bugs),
        cmocka_unit_test(test_decode_split),
        cmocka_unit_test(test_decode_split_causal_bf16_gfx908),
        cmocka_unit_test(test_prefill_causal_gqa),
        cmocka_unit_test(test_prefill_prime_bf16),
        cmocka_unit_test(test_prefill_causal_gfx908_bf16),
        cmocka_unit_test(test_prefill_d256_causal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
