/* test_attention_wgmma_emu.cpp — runs templates/attention/attention_wgmma.cu on the CPU through the
 * model of the PTX it uses (emu.h: wgmma with A from shared memory or registers, cp.async,
 * shuffles, the split-KV atomics) and compares O and LSE with a plain double-precision
 * reference: several configurations (one and two warpgroups, head dims 64 and 128, causal,
 * split-KV up to 16, with and without edges, f16 and bf16) on awkward shapes (seq 1, 17, primes,
 * causal with seq_kv > seq, grouped-query and multi-query heads, both layouts, padded strides
 * that force the unaligned staging path), in both emulation modes. Also checks that nothing
 * outside O's rows and LSE's entries is written and that a split-KV workspace is left zero.
 * What it checks is the kernel's own index math, fragment use and pipeline order against the
 * ISA's rules as modelled here; only a GPU run checks the model. The default run takes every
 * other (instance, problem) pair, so each problem still meets several configurations; --all
 * (ctest -L slow) takes them all. */
#define AT_EMU_MACHINE_ONLY
#include "emu.h"
#include "registry.h"

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <setjmp.h>

extern "C" {
#include <cmocka.h>
}

/* ---- registry ------------------------------------------------------------------------------- */
static std::vector<const at_emu_attn_kernel *> &kernels()
{
    static std::vector<const at_emu_attn_kernel *> k;
    return k;
}
bool at_emu_attn_register(const at_emu_attn_kernel *k)
{
    kernels().push_back(k);
    return true;
}

/* ---- problems and the reference ------------------------------------------------------------- */
static unsigned rng = 2468u;
static float rnd()
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

struct problem {
    int batch, heads, kv_heads, seq, seq_kv;
    int bhsd; /* layout: 0 (batch, seq, heads, d), 1 (batch, heads, seq, d) */
    int pad;  /* extra elements after each row of the sequence dimension (odd: unaligned) */
    float scale;
    int negative; /* Q >= 0, K <= 0: every score far below 0 (2^x underflows from a 0 base) */
};

/* Strides (elements) of a (batch, heads h, seq s, d) tensor in p's layout with its padding;
 * returns the element count it spans. */
static long strides(const problem &p, int h, int s, int d, long *sb, long *sh, long *ss)
{
    if (p.bhsd) {
        *ss = d + p.pad;
        *sh = (long)s * *ss;
        *sb = (long)h * *sh;
    } else {
        *sh = d;
        *ss = (long)h * d + p.pad;
        *sb = (long)s * *ss;
    }
    return (long)p.batch * *sb;
}

static const unsigned short SENTINEL = 0x7e01; /* a NaN in f16 and bf16 */

/* Runs kn on p in both emulation modes; returns the failures. */
static int check(const at_emu_attn_kernel *kn, const problem &p)
{
    const int dt = kn->dt, D = kn->d, H = p.heads, G = p.kv_heads, S = p.seq, S2 = p.seq_kv;
    long q_sb, q_sh, q_ss, kv_sb, kv_sh, kv_ss;
    const long nq = strides(p, H, S, D, &q_sb, &q_sh, &q_ss);
    const long nkv = strides(p, G, S2, D, &kv_sb, &kv_sh, &kv_ss);
    const long guard = 64;
    std::vector<unsigned short> Q(nq + guard), K(nkv + guard), V(nkv + guard), O0(nq + guard);
    for (auto &x : Q) x = at_emu::from_f32(p.negative ? std::fabs(rnd()) : rnd(), dt);
    for (auto &x : K) x = at_emu::from_f32(p.negative ? -std::fabs(rnd()) : rnd(), dt);
    for (auto &x : V) x = at_emu::from_f32(rnd(), dt);
    for (auto &x : O0) x = SENTINEL;
    const long nl = (long)p.batch * H * S;
    const double eps = dt ? 0x1p-8 : 0x1p-11;

    /* the reference: O, LSE and the scale of O's terms, sum_j p_j |v_j| / sum_j p_j */
    std::vector<double> ref((size_t)nq, 0.0), bound((size_t)nq, 0.0), lse((size_t)nl);
    std::vector<char> valid((size_t)nq, 0);
    std::vector<double> s((size_t)S2);
    for (int b = 0; b < p.batch; b++)
        for (int h = 0; h < H; h++) {
            const int hk = h / (H / G);
            for (int i = 0; i < S; i++) {
                const int last = kn->causal ? i + (S2 - S) : S2 - 1; /* keys 0 .. last */
                const unsigned short *q = &Q[b * q_sb + h * q_sh + i * q_ss];
                double m = -INFINITY;
                for (int j = 0; j <= last; j++) {
                    const unsigned short *k = &K[b * kv_sb + hk * kv_sh + j * kv_ss];
                    double dot = 0.0;
                    for (int d = 0; d < D; d++)
                        dot += (double)at_emu::to_f32(q[d], dt) * at_emu::to_f32(k[d], dt);
                    s[j] = dot * p.scale;
                    m = std::max(m, s[j]);
                }
                double l = 0.0;
                for (int j = 0; j <= last; j++) l += (s[j] = std::exp(s[j] - m));
                const long o = b * q_sb + h * q_sh + i * q_ss;
                for (int d = 0; d < D; d++) {
                    double acc = 0.0, mag = 0.0;
                    for (int j = 0; j <= last; j++) {
                        const double v =
                            at_emu::to_f32(V[b * kv_sb + hk * kv_sh + j * kv_ss + d], dt);
                        acc += s[j] * v;
                        mag += s[j] * std::fabs(v);
                    }
                    ref[o + d] = acc / l;
                    bound[o + d] = mag / l + 1e-6;
                    valid[o + d] = 1;
                }
                lse[((size_t)b * H + h) * S + i] = m + std::log(l);
            }
        }

    const long tiles = (long)p.batch * H * ((S + kn->bq - 1) / kn->bq);
    int bad = 0;
    for (int mode = 0; mode < 2; mode++) {
        at_emu::copy_at_issue = mode == 1;
        at_emu::errors = 0;
        std::vector<unsigned short> O = O0;
        std::vector<float> L(nl + guard, NAN);
        std::vector<float> ws(kn->split > 1 ? tiles * ((long)kn->split * kn->bq * (D + 2) + 1) : 0,
                              0.0f);
        const at_emu_attn_args a = {
            Q.data(), K.data(), V.data(), O.data(), L.data(), p.batch,
            H,        G,        S,        S2,       p.scale,  q_sb,
            q_sh,     q_ss,     kv_sb,    kv_sh,    kv_ss,    ws.empty() ? nullptr : ws.data()};
        kn->run(a);
        double worst = 0.0, worst_lse = 0.0;
        int stray = 0, dirty = 0;
        for (long e = 0; e < nq + guard; e++) {
            if (e < nq && valid[e]) {
                const double err = std::fabs(at_emu::to_f32(O[e], dt) - ref[e]) / bound[e];
                if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
            } else if (O[e] != SENTINEL) {
                stray++;
            }
        }
        for (long e = 0; e < nl + guard; e++) {
            if (e < nl) {
                const double err = std::fabs(L[e] - lse[e]);
                if (!(err <= worst_lse)) worst_lse = std::isnan(err) ? INFINITY : err;
            } else if (!std::isnan(L[e])) {
                stray++;
            }
        }
        for (float w : ws) dirty += w != 0.0f;
        const double tol = 4.0 * eps, tol_lse = 1e-4;
        if (!(worst <= tol) || !(worst_lse <= tol_lse) || stray || dirty || at_emu::errors) {
            fprintf(stderr,
                    "FAIL BQ%d BKV%d ST%d SPLIT%d OVERLAP%d D%d%s%s %s: b%d h%d/%d s%d/%d %s pad "
                    "%d, %s: "
                    "O error %g (tol %g), LSE error %g (tol %g), %d stray writes, %d nonzero "
                    "workspace words, %d emulator errors\n",
                    kn->bq, kn->bkv, kn->stages, kn->split, kn->overlap, D,
                    kn->causal ? " causal" : "", kn->edge ? "" : " no-edge", dt ? "bf16" : "f16",
                    p.batch, H, G, S, S2, p.bhsd ? "bhsd" : "bshd", p.pad,
                    mode ? "copies at issue, MMAs at wait" : "copies at wait, MMAs at issue", worst,
                    tol, worst_lse, tol_lse, stray, dirty, at_emu::errors);
            bad++;
        }
    }
    return bad;
}

static bool g_all; /* --all: every problem on every instance; else every other, rotating */

static void test_every_instance(void **state)
{
    (void)state;
    assert_true(kernels().size() >= 6);
    int bad = 0, runs = 0, n = 0;
    for (const at_emu_attn_kernel *kn : kernels()) {
        const int bq = kn->bq, bkv = kn->bkv, sp = kn->split;
        std::vector<problem> ps;
        if (kn->edge) {
            ps.push_back({1, 1, 1, 1, 1, 0, 0, 0.125f, 0});               /* one query, one key */
            ps.push_back({1, 4, 1, 1, 2 * sp * bkv + 37, 0, 0, 0.1f, 0}); /* decode, multi-query */
            ps.push_back({2, 2, 2, 17, 17, 1, 0, 0.2f, 0});               /* seq 17 */
            ps.push_back({1, 4, 2, 131, 2 * bkv + 61, 0, 0, 0.09f, 0});   /* primes, GQA */
            ps.push_back({1, 2, 1, bq + 3, 3 * bkv + 5, 1, 3, 0.3f, 0});  /* unaligned rows */
            ps.push_back({1, 3, 3, 2, 4 * bkv + 1, 1, 0, 1.5f, 0});       /* peaked softmax */
            ps.push_back({1, 2, 1, 1, 2 * sp * bkv + 37, 0, 0, 8.0f, 1}); /* scores << 0 */
        } else {
            ps.push_back({2, 2, 1, bq, 2 * sp * bkv, 0, 0, 0.125f, 0});
            ps.push_back({1, 4, 2, 2 * bq, 2 * sp * bkv + 2 * bkv, 1, 8, 0.1f, 0});
        }
        for (const problem &p : ps) {
            if (kn->causal && p.seq_kv < p.seq) continue; /* refused by the operation */
            if (!g_all && n++ % 2) continue;
            bad += check(kn, p);
            runs++;
        }
    }
    fprintf(stderr, "%d instances, %d problems x 2 emulation modes, %d failed\n",
            (int)kernels().size(), runs, bad);
    assert_int_equal(bad, 0);
}

/* The register-A model must follow the ISA's fragment, else the test above could not tell a
 * wrong P layout: thread t's half v is A(row, k) = row * 16 + k here, read back through an MMA
 * with B = the identity (16 x 8 in an MN-major 128B-swizzled tile). */
static void test_register_a_fragment(void **state)
{
    (void)state;
    at_emu::barrier bar(128);
    at_emu::block b;
    b.smem.assign(8192, 0);
    b.bar = &bar;
    b.collectives(128);
    /* B (16 x 64), N-major: element (k, n) at k*128 + n*2, swizzled; B = [I_16 | 0] */
    for (int k = 0; k < 16; k++) {
        const unsigned addr = k * 128 + k * 2;
        const unsigned phys = addr ^ (((addr >> 7) & 7) << 4);
        const unsigned short one = 0x3c00; /* f16 1.0 */
        memcpy(&b.smem[phys], &one, 2);
    }
    const unsigned long long db = (16ull * 128 >> 4) << 16 | (1024ull >> 4) << 32 | 1ull << 62;
    std::vector<float> out(128 * 32);
    at_emu::run_threads(128, [&](int t) {
        at_emu::tid = t;
        at_emu::blk = &b;
        const int lane = t % 32, w = t / 32;
        unsigned a[4];
        for (int r = 0; r < 4; r++) {
            unsigned h[2];
            for (int half = 0; half < 2; half++) {
                const int v = 2 * r + half;
                const int row = 16 * w + lane / 4 + 8 * ((v / 2) % 2);
                const int k = 8 * (v / 4) + 2 * (lane % 4) + v % 2;
                h[half] = at_emu::from_f32((float)(row * 16 + k), 0);
            }
            a[r] = h[0] | h[1] << 16;
        }
        at_emu::mma_op m = {&out[t * 32], 0, db, 64, 0, 1, 0, 0, a, {}, 1, 0};
        at_emu::do_mma(m);
    });
    int wrong = 0;
    for (int t = 0; t < 128; t++)
        for (int r = 0; r < 32; r++) {
            const int row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((r / 2) % 2);
            const int col = 8 * (r / 4) + 2 * (t % 4) + r % 2;
            const float want = col < 16 ? (float)(row * 16 + col) : 0.0f;
            wrong += out[t * 32 + r] != want;
        }
    assert_int_equal(wrong, 0);
    assert_int_equal(at_emu::errors, 0);
}

int main(int argc, char **argv)
{
    g_all = argc > 1 && strcmp(argv[1], "--all") == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_a_fragment),
        cmocka_unit_test(test_every_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
