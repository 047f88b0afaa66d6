/* test_attention_mma_emu.cpp — runs templates/attention/attention_mma.cu on the CPU through a model
 * of the PTX it uses (emu.h) and compares O and LSE with a double-precision two-pass reference:
 * several configurations (head dims 32 to 256, one or two row tiles per warp, Q in registers or
 * not, 2 and 3 stages, swizzled or plain tiles, f16 and bf16, causal or not, with and without
 * edges, split-KV), on awkward shapes (seq 1, 17, primes, causal with seq_kv > seq, grouped- and
 * multi-query heads, both layouts, misaligned strides), both cp.async models; nothing may be
 * written outside O's rows and LSE, and a split-KV workspace must be left zero. What it checks is
 * the kernel's own code (staging, swizzle, fragment layouts, P kept in registers, the online
 * softmax and its rescaling, masks, the pipeline's waits and barriers, the split combination)
 * against the ISA's rules as modelled here; it cannot check the model itself, which only a GPU
 * run does. A deliberately wrong model (test_model_errors_are_caught) must make it fail. */
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

/* ---- the emulated machine ------------------------------------------------------------------- */
namespace at_emu
{

bool copy_at_issue;
int bug;
int errors;
lane *cur;
block *blk;

void violation(const char *what)
{
    if (errors++ < 5) fprintf(stderr, "emulator: thread %d: %s\n", cur ? cur->tid : -1, what);
}

/* ---- the threads of a block (../emu_fibers.h) ---- */
bool run_block(block &b, int threads, void (*body)(void *), void *arg)
{
    std::vector<lane> lanes((size_t)threads);
    for (int t = 0; t < threads; t++) lanes[(size_t)t].tid = t;
    blk = &b;
    const bool ok = run_fibers(
        threads, [&](int) { body(arg); }, copy_at_issue,
        [&](int t, bool in) { cur = in ? &lanes[(size_t)t] : nullptr; });
    if (!ok) {
        violation("deadlock: threads wait at barriers the others never reach");
        return false;
    }
    for (const lane &l : lanes)
        if (!l.cp_groups.empty() || !l.cp_open.empty()) {
            violation("a thread left with copies in flight");
            break;
        }
    return true;
}

unsigned char *smem_at(unsigned addr, unsigned bytes)
{
    static unsigned char sink[16];
    if ((size_t)addr + bytes > blk->smem.size()) {
        violation("shared-memory access out of bounds");
        return sink;
    }
    return blk->smem.data() + addr;
}

void do_copy(const cp_op &c)
{
    unsigned char *d = smem_at(c.dst, 16);
    memset(d, 0, 16);
    memcpy(d, c.src, (size_t)c.bytes);
}

/* Deposits n words of this lane for collective op, waits for the warp, and returns the slot set
 * holding all 32 lanes' deposits (valid until this lane's next-but-one collective). */
static unsigned (*exchange(int op, const unsigned *w, int n))[8]
{
    warp &wp = blk->warps[cur->tid / 32];
    const int lane = cur->tid % 32, ph = cur->phase;
    cur->phase ^= 1;
    memcpy(wp.slot[ph][lane], w, sizeof(unsigned) * n);
    wp.op[ph][lane] = op;
    wp.bar.arrive_and_wait();
    for (int l = 0; l < 32; l++)
        if (wp.op[ph][l] != op) {
            violation("diverged warp: lanes in different collectives");
            break;
        }
    return wp.slot[ph];
}

static unsigned short u16_at(unsigned addr)
{
    unsigned short u;
    memcpy(&u, smem_at(addr, 2), 2);
    return u;
}

/* PTX ISA, ldmatrix .m8n8.x4 .b16: lanes 8q..8q+7 give the row addresses (16 bytes each, 16-byte
 * aligned) of matrix q; lane l receives in register q row l/4, elements 2(l%4) and 2(l%4)+1 of
 * matrix q, or with .trans of its transpose, i.e. element l/4 of rows 2(l%4) and 2(l%4)+1. */
void ldsm_x4(unsigned *r, unsigned addr, bool trans)
{
    if (addr & 15) violation("ldmatrix: row address not 16-byte aligned");
    unsigned(*s)[8] = exchange(trans ? OP_LDSM_T : OP_LDSM, &addr, 1);
    const int lane = cur->tid % 32;
    if (bug == 1) trans = !trans;
    for (int q = 0; q < 4; q++) {
        unsigned short e[2];
        for (int k = 0; k < 2; k++) {
            const int i = lane / 4, j = 2 * (lane % 4) + k; /* (row, column) of the fragment */
            e[k] = trans ? u16_at(s[8 * q + j][0] + 2 * i) : u16_at(s[8 * q + i][0] + 2 * j);
        }
        r[q] = (unsigned)e[0] | (unsigned)e[1] << 16;
    }
}

/* PTX ISA, mma.m16n8k16 .f32.f16/.bf16: with g = lane/4, t = lane%4, A (16x16) element (i, k) is
 * in lane (i%8)*4 + (k%8)/2, register (i/8) + 2*(k/8), half k%2; B (16x8) element (k, n) in lane
 * n*4 + (k%8)/2, register k/8, half k%2; D element (i, n) in lane (i%8)*4 + n/2, register
 * 2*(i/8) + n%2. Products are exact in f32; the sum is formed in double and rounded once. */
void mma_16816(float *d, const unsigned *a, const unsigned *b, int dt)
{
    const unsigned w[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    unsigned(*s)[8] = exchange(OP_MMA, w, 6);
    const int lane = cur->tid % 32;
    auto half = [&](unsigned word, int k) {
        return to_f32((unsigned short)(k % 2 ? word >> 16 : word & 0xffff), dt);
    };
    for (int e = 0; e < 4; e++) {
        int i = lane / 4 + 8 * (e / 2);
        const int n = 2 * (lane % 4) + e % 2;
        if (bug == 2) i ^= 8; /* rows g and g+8 swapped */
        double sum = 0.0;
        for (int k = 0; k < 16; k++) {
            const float x = half(s[(i % 8) * 4 + (k % 8) / 2][(i / 8) + 2 * (k / 8)], k);
            const float y = half(s[n * 4 + (k % 8) / 2][4 + k / 8], k);
            sum += (double)x * y;
        }
        d[e] = (float)(d[e] + sum);
    }
}

/* PTX ISA, shfl.sync.bfly: lane l reads the value of lane l ^ mask. */
float shfl_xor(float v, int mask)
{
    unsigned u;
    memcpy(&u, &v, 4);
    unsigned(*s)[8] = exchange(OP_SHFL, &u, 1);
    const int src = bug == 3 ? cur->tid % 32 : (cur->tid % 32) ^ mask;
    float r;
    memcpy(&r, &s[src][0], 4);
    return r;
}

} // namespace at_emu

/* ---- registry ------------------------------------------------------------------------------- */
static std::vector<const at_attn_kernel *> &kernels()
{
    static std::vector<const at_attn_kernel *> k;
    return k;
}
bool at_attn_register(const at_attn_kernel *k)
{
    kernels().push_back(k);
    return true;
}

/* ---- problems and the reference ------------------------------------------------------------- */
static unsigned rng = 12345u;
static float rnd()
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

struct problem {
    int batch, heads, kv_heads, seq, seq_kv;
    int bhsd; /* layout: 0 (batch, seq, head, d), 1 (batch, head, seq, d) */
    int pad;  /* extra elements per row stride (odd: the misaligned paths) */
};

static const unsigned short SENTINEL = 0xffff; /* NaN in f16 and bf16 */

/* Runs kn on p in both cp.async models; returns the failures (0 or more). */
static int check(const at_attn_kernel *kn, const problem &p, bool quiet = false)
{
    const int dt = kn->dt, d = kn->d;
    const float scale = 0.5f; /* sharper than 1/sqrt(d): layout errors move O more */
    /* strides (elements) */
    long q_ss, q_sh, q_sb, kv_ss, kv_sh, kv_sb;
    if (p.bhsd) {
        q_ss = d + p.pad, q_sh = p.seq * q_ss, q_sb = p.heads * q_sh;
        kv_ss = d + p.pad, kv_sh = p.seq_kv * kv_ss, kv_sb = p.kv_heads * kv_sh;
    } else {
        q_ss = (long)p.heads * d + p.pad, q_sh = d, q_sb = p.seq * q_ss;
        kv_ss = (long)p.kv_heads * d + p.pad, kv_sh = d, kv_sb = p.seq_kv * kv_ss;
    }
    const size_t GUARD = 64;
    const size_t nq = (size_t)p.batch * q_sb + GUARD, nkv = (size_t)p.batch * kv_sb + GUARD;
    const size_t nlse = (size_t)p.batch * p.heads * p.seq;
    std::vector<unsigned short> Q(nq), K(nkv), V(nkv), O0(nq, SENTINEL);
    for (auto &x : Q) x = at_emu::from_f32(rnd(), dt);
    for (auto &x : K) x = at_emu::from_f32(rnd(), dt);
    for (auto &x : V) x = at_emu::from_f32(rnd(), dt);
    auto at = [&](const std::vector<unsigned short> &buf, long sb, long sh, long ss, int b, int h,
                  int i, int c) { return at_emu::to_f32(buf[b * sb + h * sh + i * ss + c], dt); };

    /* the reference: two passes, double */
    const int off = p.seq_kv - p.seq, group = p.heads / p.kv_heads;
    std::vector<double> ref_o(nlse * d), bound(nlse * d), ref_lse(nlse);
    std::vector<double> s(p.seq_kv);
    for (int b = 0; b < p.batch; b++)
        for (int h = 0; h < p.heads; h++)
            for (int i = 0; i < p.seq; i++) {
                const int hk = h / group,
                          n = kn->causal ? std::min(p.seq_kv, i + off + 1) : p.seq_kv;
                double mx = -INFINITY;
                for (int j = 0; j < n; j++) {
                    double dot = 0.0;
                    for (int c = 0; c < d; c++)
                        dot += (double)at(Q, q_sb, q_sh, q_ss, b, h, i, c) *
                               at(K, kv_sb, kv_sh, kv_ss, b, hk, j, c);
                    s[j] = dot * scale;
                    mx = std::max(mx, s[j]);
                }
                double l = 0.0;
                for (int j = 0; j < n; j++) l += std::exp(s[j] - mx);
                const size_t r = ((size_t)b * p.heads + h) * p.seq + i;
                ref_lse[r] = std::log(l) + mx;
                for (int c = 0; c < d; c++) {
                    double o = 0.0, ab = 0.0;
                    for (int j = 0; j < n; j++) {
                        const double pj = std::exp(s[j] - mx) / l,
                                     v = at(V, kv_sb, kv_sh, kv_ss, b, hk, j, c);
                        o += pj * v;
                        ab += pj * std::fabs(v);
                    }
                    ref_o[r * d + c] = o;
                    bound[r * d + c] = ab + 1e-30;
                }
            }

    /* P and O are rounded to the 16-bit type once each (half an ulp: 2^-11 f16, 2^-8 bf16) */
    const double tol = 3.0 * (dt ? 0x1p-8 : 0x1p-11), lse_tol = 1e-4;
    int bad = 0;
    for (int mode = 0; mode < 2; mode++) {
        at_emu::copy_at_issue = mode == 1;
        at_emu::errors = 0;
        std::vector<unsigned short> O = O0;
        std::vector<float> LSE(nlse + GUARD, NAN);
        const long wsb = kn->ws_bytes(p.batch, p.heads, p.seq);
        /* the workspace, then a NaN guard: a write past its end shows even when zeroed */
        std::vector<float> ws((size_t)wsb / 4 + GUARD, 0.0f);
        std::fill(ws.begin() + wsb / 4, ws.end(), NAN);
        at_attn_args a = {
            Q.data(), K.data(),   V.data(), O.data(), LSE.data(), p.batch,
            p.heads,  p.kv_heads, p.seq,    p.seq_kv, scale,      q_sb,
            q_sh,     q_ss,       kv_sb,    kv_sh,    kv_ss,      wsb ? ws.data() : nullptr};
        kn->run(a);
        double worst = 0.0, worst_lse = 0.0;
        const char *what = "";
        for (int b = 0; b < p.batch; b++)
            for (int h = 0; h < p.heads; h++)
                for (int i = 0; i < p.seq; i++) {
                    const size_t r = ((size_t)b * p.heads + h) * p.seq + i;
                    for (int c = 0; c < d; c++) {
                        const double e =
                            std::fabs(at(O, q_sb, q_sh, q_ss, b, h, i, c) - ref_o[r * d + c]) /
                            bound[r * d + c];
                        if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
                    }
                    const double e = std::fabs(LSE[r] - ref_lse[r]);
                    if (!(e <= worst_lse)) worst_lse = std::isnan(e) ? INFINITY : e;
                }
        /* nothing written outside O's rows (pads, guard) and LSE */
        std::vector<char> is_o(nq, 0);
        for (int b = 0; b < p.batch; b++)
            for (int h = 0; h < p.heads; h++)
                for (int i = 0; i < p.seq; i++)
                    for (int c = 0; c < d; c++) is_o[b * q_sb + h * q_sh + i * q_ss + c] = 1;
        for (size_t x = 0; x < nq; x++)
            if (!is_o[x] && O[x] != SENTINEL) worst = INFINITY, what = " (O written outside)";
        for (size_t x = nlse; x < LSE.size(); x++)
            if (!std::isnan(LSE[x])) worst = INFINITY, what = " (LSE written past the end)";
        for (size_t x = 0; x < ws.size(); x++)
            if (x < (size_t)wsb / 4 ? ws[x] != 0.0f : !std::isnan(ws[x]))
                worst = INFINITY, what = " (workspace left nonzero or written past its end)";
        if (!(worst <= tol) || !(worst_lse <= lse_tol) || at_emu::errors) {
            if (!quiet)
                fprintf(stderr,
                        "FAIL BQ%d BKV%d WARPS%d STAGES%d SWIZZLE%d QREG%d SPLIT%d d%d causal%d "
                        "edge%d%d %s: batch %d heads %d/%d seq %d/%d %s pad %d, %s: O error %g "
                        "(tol %g)%s, LSE error %g, %d emulator errors\n",
                        kn->bq, kn->bkv, kn->warps, kn->stages, kn->swizzle, kn->qreg, kn->split, d,
                        kn->causal, kn->edge_q, kn->edge_kv, dt ? "bf16" : "f16", p.batch, p.heads,
                        p.kv_heads, p.seq, p.seq_kv, p.bhsd ? "bhsd" : "bshd", p.pad,
                        mode ? "copies at issue" : "copies at wait", worst, tol, what, worst_lse,
                        at_emu::errors);
            bad++;
        }
    }
    return bad;
}

/* The shapes an instance can take: its edge defines fix whether seq / seq_kv are multiples of
 * BQ / BKV. */
static std::vector<problem> problems_for(const at_attn_kernel *kn)
{
    std::vector<problem> ps;
    const int bq = kn->bq, bkv = kn->bkv;
    auto add = [&](problem p) {
        if ((p.seq % bq != 0) != (kn->edge_q != 0)) return;
        if ((p.seq_kv % bkv != 0) != (kn->edge_kv != 0)) return;
        if (kn->causal && p.seq_kv < p.seq) return;
        ps.push_back(p);
    };
    if (kn->split > 1) { /* decode: few rows, keys for several tiles per split */
        add({2, 2, 1, 1, 7 * bkv + 13, 0, 0});            /* one row, multi-query */
        add({1, 4, 2, 5, 2 * kn->split * bkv + 1, 1, 0}); /* GQA, every split two tiles */
        add({1, 1, 1, 3, kn->split * bkv / 2 + 3, 0, 1}); /* empty splits, misaligned */
        add({1, 2, 2, bq, 5 * bkv, 0, 0});                /* no edges */
    }
    add({1, 1, 1, 1, 1, 0, 0});                     /* tiny */
    add({2, 4, 2, 17, 17, 0, 0});                   /* GQA */
    add({1, 3, 1, 37, 101, 1, 0});                  /* primes, multi-query, seq_kv > seq */
    add({1, 2, 2, 45, 70, 0, 1});                   /* misaligned strides: the slow paths */
    add({1, 2, 1, 2 * bq, 3 * bkv, 1, 0});          /* whole tiles */
    add({2, 2, 2, bq, bq + 2 * bkv, 0, 0});         /* whole tiles, causal offset */
    add({1, 2, 2, 3 * bq, 3 * bq, 0, 8});           /* whole tiles, square, padded strides */
    add({1, 2, 1, bq + 5, 2 * bkv + 2 * bq, 1, 0}); /* query edge only */
    add({1, 2, 2, 2 * bq, 2 * bq + 7, 0, 0});       /* key edge only */
    add({2, 4, 1, 1, 4 * bkv, 0, 0});               /* one row, whole key tiles */
    return ps;
}

static void test_every_instance(void **state)
{
    (void)state;
    assert_true(kernels().size() >= 8);
    int bad = 0, runs = 0;
    for (const at_attn_kernel *kn : kernels()) {
        const std::vector<problem> ps = problems_for(kn);
        if (ps.size() < 2)
            fail_msg("BQ%d BKV%d d%d edges %d%d: %zu problems", kn->bq, kn->bkv, kn->d, kn->edge_q,
                     kn->edge_kv, ps.size());
        for (const problem &p : ps) {
            bad += check(kn, p);
            runs++;
        }
    }
    fprintf(stderr, "%d instances, %d problems x 2 emulation modes, %d failed\n",
            (int)kernels().size(), runs, bad);
    assert_int_equal(bad, 0);
}

/* The test must be able to fail: a model with ldmatrix's .trans ignored, the mma's row halves
 * swapped, or the shuffle returning the lane's own value, gives wrong results. */
static void test_model_errors_are_caught(void **state)
{
    (void)state;
    const at_attn_kernel *kn = kernels().front();
    const problem p = problems_for(kn).front();
    assert_int_equal(check(kn, p), 0);
    for (at_emu::bug = 1; at_emu::bug <= 3; at_emu::bug++)
        assert_int_not_equal(check(kn, p, true), 0);
    at_emu::bug = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_errors_are_caught),
        cmocka_unit_test(test_every_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
