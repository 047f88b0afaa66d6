/* test_hip_mfma.c — host emulation of the MFMA GEMM template (templates/gemm/gemm_mfma.hip): its
 * own index functions (staging, operand fragments, accumulator layout, wave origins) drive an
 * emulated block, whose MFMA instructions follow an independent model of the hardware's operand
 * and result layouts (AMD CDNA ISA), and the result must equal a reference GEMM. Every
 * configuration of the space for gfx90a and gfx908 (both operand geometries; every 8th in the
 * default run, all with --all under ctest -L slow) runs on an awkward shape, the layouts taking
 * turns; the
 * default configurations also on a shape of several blocks and K steps, in every layout.
 * There is no AMD GPU here: this is the only check of the kernel's data movement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/ops/gemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the hardware model, from the ISA's description (not from the template) ---------------- */

#include "tests/unit/mfma_hw.h"

#define AT_MFMA_HOST
#define AT_HOST_PERM hw_perm
#include "templates/gemm/gemm_mfma.hip"

/* A small integer (the test's values, junk included) as a 16-bit pattern. */
static unsigned short bits16(float v) { return (unsigned short)(short)v; }

/* ---- the emulated kernel, through the template's index functions ----------------------------- */

/* A deliberate template bug for the test of the test: 1 reads B operands from the neighbouring
 * lane's column, 2 swaps pairs of accumulator rows, 3 stores the four k of the 16-byte path's
 * MN-contiguous units in reverse order. */
static int g_bug;

/* Operands as laid out in memory with leading dimensions lda, ldb (at least the tight ones:
 * ta ? m : k, tb ? k : n); ldc = n. Memory past each matrix's last element, and the gaps between
 * rows when ld is larger, hold JUNK, so a load that is used without being masked shows. */
#define JUNK 1000.0f
typedef struct prob {
    int m, n, k, ta, tb, lda, ldb;
    int misaligned; /* A's address is 2 bytes off 16: the kernel must take the 16-bit path */
    float *a, *b, *c;
    size_t alen, blen; /* elements allocated, junk included */
    int wide;          /* which path the emulated kernel took */
} prob;

static float a_at(const prob *p, int i, int q)
{
    return p->ta ? p->a[(size_t)q * p->lda + i] : p->a[(size_t)i * p->lda + q];
}
static float b_at(const prob *p, int q, int j)
{
    return p->tb ? p->b[(size_t)j * p->ldb + q] : p->b[(size_t)q * p->ldb + j];
}

/* One operand as the kernel stages it (at_tile in the template): rows r0.. of a tile of `rows`
 * rows by bk k from memory g (len elements) with leading dimension ld, R x K in bounds. */
typedef struct opnd {
    const float *g;
    size_t len;
    int ld, mnc, rows, r0, R, K;
} opnd;

static size_t off_of(const opnd *o, int r, int q)
{
    return o->mnc ? (size_t)q * o->ld + r : (size_t)r * o->ld + q;
}

/* Stages K tile k0 of o into s ([rows][ldk]) through the path the kernel took; hits counts the
 * writes per element. -1 with why when a load leaves memory. */
static int stage(const at_mfma_cfg *c, const opnd *o, int k0, int wide, float *s, int *hits,
                 char *why, size_t whylen)
{
    if (!wide) {
        for (int e = 0; e < o->rows * c->bk; e++) {
            int r, kk;
            at_stage(o->rows, c->bk, o->mnc, e, &r, &kk);
            int gr = o->r0 + r, gq = k0 + kk;
            s[r * c->ldk + kk] = gr < o->R && gq < o->K ? o->g[off_of(o, gr, gq)] : 0.0f;
            hits[r * c->ldk + kk]++;
        }
        return 0;
    }
    for (int u = 0; u < at_wide_units(o->rows, c->bk, o->mnc); u++) {
        int r, kk;
        at_wide_unit(o->rows, c->bk, o->mnc, u, &r, &kk);
        const int gr = o->r0 + r, gk = k0 + kk, nr = at_wide_valid(gr, o->R);
        float v[4][8]; /* the unit's loads */
        const int nq = o->mnc ? 4 : 1;
        for (int q = 0; q < nq; q++) {
            const int in = nr > 0 && gk + q < o->K;
            const size_t at = in ? off_of(o, gr, gk + q) : 0;
            if (in && (at % 8 != 0 || at + 8 > o->len)) {
                snprintf(why, whylen, "a 16-byte load at element %zu of %zu", at, o->len);
                return -1;
            }
            const int n = o->mnc ? nr : at_wide_valid(gk, o->K);
            for (int e = 0; e < 8; e++) v[q][e] = in && e < n ? o->g[at + e] : 0.0f;
        }
        for (int e = 0; e < 8; e++) {
            float w[4]; /* what the unit writes at element e: k + q (MN-contiguous) or k + e */
            if (o->mnc) {
                /* the template's transposition, on the 16-bit patterns of the values */
                unsigned x[4];
                for (int q = 0; q < 4; q++)
                    x[q] = bits16(v[q][e & ~1]) | (unsigned)bits16(v[q][e | 1]) << 16;
                const unsigned d0 = at_wide_pair(x[0], x[1], e), d1 = at_wide_pair(x[2], x[3], e);
                w[0] = (float)(short)(d0 & 0xffffu);
                w[1] = (float)(short)(d0 >> 16);
                w[2] = (float)(short)(d1 & 0xffffu);
                w[3] = (float)(short)(d1 >> 16);
            } else
                w[0] = v[0][e];
            for (int q = 0; q < nq; q++) {
                int row = r + (o->mnc ? e : 0), k = kk + (o->mnc ? q : e);
                if (g_bug == 3 && o->mnc) k = kk + 3 - q;
                if (row >= o->rows || k >= c->bk) {
                    snprintf(why, whylen, "a 16-byte unit outside the tile");
                    return -1;
                }
                s[row * c->ldk + k] = w[q];
                hits[row * c->ldk + k]++;
            }
        }
    }
    return 0;
}

/* Every element of a staged tile written once, the padding never. */
static int staged_once(const at_mfma_cfg *c, int rows, const int *hits, char *why, size_t whylen)
{
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < c->ldk; k++)
            if (hits[r * c->ldk + k] != (k < c->bk)) {
                snprintf(why, whylen, "LDS element (%d, %d) staged %d times", r, k,
                         hits[r * c->ldk + k]);
                return -1;
            }
    return 0;
}

/* Runs every block of the grid; C = 2 * op(A) op(B) + 0.5 * C. Returns 0, or -1 with why. */
static int emulate(const at_mfma_cfg *c, prob *p, char *why, size_t whylen)
{
    const int waves = (c->bm / c->wm) * (c->bn / c->wn), threads = 64 * waves;
    const int tm = c->wm / c->mfma, tn = c->wn / c->mfma, nacc = c->mfma * c->mfma / 64;
    const int ki = at_kinstr(c), kt_n = (p->k + c->bk - 1) / c->bk;
    if (threads != c->threads) {
        snprintf(why, whylen, "threads %d != %d", threads, c->threads);
        return -1;
    }
    float *sa = malloc(sizeof(float) * c->bm * c->ldk),
          *sb = malloc(sizeof(float) * c->bn * c->ldk);
    float *acc = calloc((size_t)waves * tm * tn * 64 * nacc, sizeof(float));
    float fa[64 * 4], fb[64 * 4];
    int *hits = calloc((size_t)c->bm * c->bn, sizeof(int));
    int *ha = malloc(sizeof(int) * c->bm * c->ldk), *hb = malloc(sizeof(int) * c->bn * c->ldk);
    int rc = 0;
    /* the kernel's uniform test; A's address is 0 or 2 (mod 16), B's 0 */
    p->wide = at_wide_ok(p->lda | p->ldb, p->misaligned ? 2u : 0u);
    for (int bi = 0; bi * c->bm < p->m && !rc; bi++)
        for (int bj = 0; bj * c->bn < p->n && !rc; bj++) {
            memset(acc, 0, sizeof(float) * waves * tm * tn * 64 * nacc);
            for (int kt = 0; kt < kt_n && !rc; kt++) {
                /* NaN wherever nobody stages: a read of it poisons the result */
                for (int x = 0; x < c->bm * c->ldk; x++) sa[x] = NAN;
                for (int x = 0; x < c->bn * c->ldk; x++) sb[x] = NAN;
                memset(ha, 0, sizeof(int) * c->bm * c->ldk);
                memset(hb, 0, sizeof(int) * c->bn * c->ldk);
                opnd oa = {p->a, p->alen, p->lda, c->ta, c->bm, bi * c->bm, p->m, p->k};
                opnd ob = {p->b, p->blen, p->ldb, !c->tb, c->bn, bj * c->bn, p->n, p->k};
                if (stage(c, &oa, kt * c->bk, p->wide, sa, ha, why, whylen) ||
                    stage(c, &ob, kt * c->bk, p->wide, sb, hb, why, whylen) ||
                    staged_once(c, c->bm, ha, why, whylen) ||
                    staged_once(c, c->bn, hb, why, whylen)) {
                    rc = -1;
                    break;
                }
                for (int w = 0; w < waves; w++) {
                    int wm0 = at_wave_m0(c, w), wn0 = at_wave_n0(c, w);
                    for (int ks = 0; ks < c->bk / ki; ks++)
                        for (int i = 0; i < tm; i++)
                            for (int j = 0; j < tn; j++) {
                                for (int l = 0; l < 64; l++)
                                    for (int t = 0; t < c->kl; t++) {
                                        int kq = ks * ki + at_frag_k(c, l, t);
                                        fa[l * 4 + t] =
                                            sa[(wm0 + i * c->mfma + at_frag_rc(c, l)) * c->ldk +
                                               kq];
                                        int lb = g_bug == 1 ? l ^ 1 : l;
                                        fb[l * 4 + t] =
                                            sb[(wn0 + j * c->mfma + at_frag_rc(c, lb)) * c->ldk +
                                               kq];
                                    }
                                hw_mfma(c->mfma, c->kl, fa, fb,
                                        acc + (((size_t)w * tm + i) * tn + j) * 64 * nacc);
                            }
                }
            }
            memset(hits, 0, sizeof(int) * c->bm * c->bn);
            for (int w = 0; w < waves; w++)
                for (int i = 0; i < tm; i++)
                    for (int j = 0; j < tn; j++)
                        for (int l = 0; l < 64; l++)
                            for (int r = 0; r < nacc; r++) {
                                int rr = g_bug == 2 ? r ^ 1 : r;
                                int ti = at_wave_m0(c, w) + i * c->mfma + at_acc_row(c, l, rr);
                                int tj = at_wave_n0(c, w) + j * c->mfma + at_acc_col(c, l);
                                if (ti < 0 || ti >= c->bm || tj < 0 || tj >= c->bn) {
                                    snprintf(why, whylen, "accumulator outside the block tile");
                                    rc = -1;
                                    continue;
                                }
                                hits[ti * c->bn + tj]++;
                                int gi = bi * c->bm + ti, gj = bj * c->bn + tj;
                                if (gi >= p->m || gj >= p->n) continue;
                                float v =
                                    acc[((((size_t)w * tm + i) * tn + j) * 64 + l) * nacc + r];
                                p->c[gi * p->n + gj] = 2.0f * v + 0.5f * p->c[gi * p->n + gj];
                            }
            for (int x = 0; x < c->bm * c->bn && !rc; x++)
                if (hits[x] != 1) {
                    snprintf(why, whylen, "block element (%d, %d) written %d times", x / c->bn,
                             x % c->bn, hits[x]);
                    rc = -1;
                }
        }
    free(sa);
    free(sb);
    free(acc);
    free(hits);
    free(ha);
    free(hb);
    return rc;
}

/* How a problem's operands are laid out: TIGHT leading dimensions (lda = ta ? m : k, ...; the
 * 16-bit path unless both happen to be multiples of 8), PADDED to the next multiple of 8 plus 8
 * (the 16-byte path), or padded with A's address MISALIGNED (the 16-bit path again). */
enum { TIGHT, PADDED, MISALIGNED };

static uint32_t g_seed;
static float small_int(void)
{
    return (float)((int)((g_seed = g_seed * 1664525u + 1013904223u) >> 29) - 4);
}

/* rows x cols in memory with leading dimension ld (>= cols), junk around: ld - cols elements after
 * each row and 8 more plus a rounding to 8 at the end (the 16-byte chunk of the last element). */
static float *matrix(int rows, int cols, int ld, size_t *len)
{
    *len = ((size_t)(rows - 1) * ld + cols + 7) / 8 * 8 + 8;
    float *x = malloc(sizeof(float) * *len);
    for (size_t i = 0; i < *len; i++) x[i] = JUNK;
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < cols; q++) x[(size_t)r * ld + q] = small_int();
    return x;
}

/* Small integers: every sum is exact in f32, so the comparison is exact too. Returns 0, or -1
 * with why (which names the path the kernel took). */
static int check_config(const at_mfma_cfg *c, int m, int n, int k, int ta, int tb, int mode,
                        char *why, size_t whylen)
{
    const int la = ta ? m : k, lb = tb ? k : n;
    prob p = {.m = m, .n = n, .k = k, .ta = ta, .tb = tb, .misaligned = mode == MISALIGNED};
    p.lda = mode == TIGHT ? la : (la + 7) / 8 * 8 + 8;
    p.ldb = mode == TIGHT ? lb : (lb + 7) / 8 * 8 + 8;
    g_seed = 12345u + (uint32_t)(m * 7 + n * 3 + k);
    p.a = matrix(ta ? k : m, la, p.lda, &p.alen);
    p.b = matrix(tb ? n : k, lb, p.ldb, &p.blen);
    p.c = malloc(sizeof(float) * m * n);
    for (int x = 0; x < m * n; x++) p.c[x] = small_int();
    float *ref = malloc(sizeof(float) * m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double d = 0;
            for (int q = 0; q < k; q++) d += (double)a_at(&p, i, q) * b_at(&p, q, j);
            ref[i * n + j] = (float)(2.0 * d + 0.5 * p.c[i * n + j]);
        }
    int rc = emulate(c, &p, why, whylen);
    for (int x = 0; x < m * n && rc == 0; x++)
        if (!(p.c[x] == ref[x])) {
            snprintf(why, whylen, "C(%d, %d) = %g, reference %g", x / n, x % n, p.c[x], ref[x]);
            rc = -1;
        }
    if (rc) {
        char path[64];
        snprintf(path, sizeof path, " (%s%s, lda %d, ldb %d, %s path)", ta ? "t" : "n",
                 tb ? "t" : "n", p.lda, p.ldb, p.wide ? "16-byte" : "16-bit");
        size_t used = strlen(why);
        snprintf(why + used, whylen - used, "%s", path);
    }
    free(p.a);
    free(p.b);
    free(p.c);
    free(ref);
    return rc;
}

/* The configuration's geometry, as the space computes it. */
static at_mfma_cfg cfg_of(const at_space *sp, const int64_t *cfg, int ta, int tb)
{
    const char *names[] = {"BM", "BN", "BK", "WM", "WN", "MFMA", "KL", "PAD", "THREADS"};
    int64_t v[9];
    for (int i = 0; i < 9; i++) assert_int_equal(at_space_value(sp, cfg, names[i], &v[i]), AT_OK);
    return (at_mfma_cfg){(int)v[0], (int)v[1], (int)v[2], (int)v[3],
                         (int)v[4], (int)v[5], (int)v[6], (int)(v[2] + 4 * v[7]),
                         (int)v[8], ta,        tb};
}

/* 1 (`test_hip_mfma --all`, under ctest -L slow): every configuration; else every 8th, so the
 * default run (and its sanitizer build) stays short. */
static int g_all;

static void run_space(const char *arch, at_dtype dt)
{
    at_template *t = NULL;
    assert_int_equal(at_template_load("gemm_mfma", "hip", &t), AT_OK);
    at_device_info info = {.max_work_group_size = 1024, .local_mem_bytes = 65536, .warp_size = 64};
    snprintf(info.arch, sizeof info.arch, "%s", arch);
    assert_int_equal(at_template_bind_device(t, &info), AT_OK);
    at_gemm_problem g = {.m = 37, .n = 45, .k = 20, .dtype = dt, .alpha = 2, .beta = 0.5f};
    assert_int_equal(at_gemm_bind(&g, t->space), AT_OK);
    int64_t *configs = NULL;
    size_t n = 0;
    assert_int_equal(at_space_enumerate(t->space, &configs, NULL, &n), AT_OK);
    assert_true(n >= 200 && n <= 1000); /* a few hundred, so the whole-space compile is feasible */
    char why[256], buf[256];
    for (size_t i = 0; i < n; i += g_all ? 1 : 8) {
        const int64_t *cfg = configs + i * t->space->nparams;
        size_t turn = g_all ? i : i / 8;
        int ta = (int)(turn & 1), tb = (int)((turn >> 1) & 1); /* the layouts take turns */
        at_mfma_cfg c = cfg_of(t->space, cfg, ta, tb);
        assert_int_equal(c.kl, dt == AT_DTYPE_BF16 && strcmp(arch, "gfx908") == 0 ? 2 : 4);
        for (int mode = TIGHT; mode <= PADDED; mode++) /* the 16-bit and 16-byte paths */
            if (check_config(&c, 37, 45, 20, ta, tb, mode, why, sizeof why) != 0) {
                at_config_format(t->space, cfg, buf, sizeof buf);
                fail_msg("%s %s %s: %s", arch, at_dtype_name(dt), buf, why);
            }
    }
    /* The defaults on several blocks and K steps, every layout and path. */
    for (size_t d = 0; d < t->space->ndefaults; d++)
        for (int l = 0; l < 4; l++)
            for (int mode = TIGHT; mode <= MISALIGNED; mode++) {
                at_mfma_cfg c =
                    cfg_of(t->space, t->space->defaults + d * t->space->nparams, l & 1, l >> 1);
                if (check_config(&c, 300, 190, 100, l & 1, l >> 1, mode, why, sizeof why) != 0)
                    fail_msg("%s %s default %zu: %s", arch, at_dtype_name(dt), d, why);
            }
    free(configs);
    at_template_free(t);
}

/* Two geometries cover the four spaces: f16 anywhere and bf16 from gfx90a on use 4 elements
 * per lane (the same index functions, the same configurations); bf16 on gfx908 uses 2. */
static void test_space_gfx90a(void **state)
{
    (void)state;
    run_space("gfx90a", AT_DTYPE_BF16);
}

static void test_space_gfx908(void **state)
{
    (void)state;
    run_space("gfx908", AT_DTYPE_BF16); /* the older bf16 instructions: 2 elements per lane */
}

/* Tiny, prime and edge-crossing shapes on the large tiles (256x256 of 4 and 8 waves, 256x128)
 * and the first default, every layout, both paths (a misaligned A: the defaults in run_space). */
static void test_awkward_shapes(void **state)
{
    (void)state;
    const at_mfma_cfg cs[] = {
        /* bm, bn, bk, wm, wn, mfma, kl, ldk, threads */
        {256, 256, 32, 128, 128, 32, 4, 32, 256, 0, 0},
        {256, 256, 64, 128, 64, 16, 4, 64, 512, 0, 0},
        {256, 128, 32, 128, 64, 32, 4, 36, 256, 0, 0},
        {128, 128, 32, 64, 64, 32, 4, 36, 256, 0, 0},
        {32, 256, 16, 32, 32, 16, 2, 20, 512, 0, 0}, /* fewer 16-byte units of A than threads */
    };
    const int shapes[][3] = {{1, 1, 1}, {1, 9, 3}, {31, 47, 23}, {67, 129, 9}, {257, 263, 41}};
    char why[512];
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
            for (int l = 0; l < 4; l++)
                for (int mode = TIGHT; mode <= PADDED; mode++) {
                    at_mfma_cfg c = cs[i];
                    c.ta = l & 1;
                    c.tb = l >> 1;
                    if (check_config(&c, shapes[j][0], shapes[j][1], shapes[j][2], c.ta, c.tb, mode,
                                     why, sizeof why) != 0)
                        fail_msg("%dx%dx%d on %dx%dx%d: %s", c.bm, c.bn, c.bk, shapes[j][0],
                                 shapes[j][1], shapes[j][2], why);
                }
}

/* The emulation must be able to fail: a wrong accumulator layout or 16-byte unit is caught. */
static void test_emulation_catches_a_wrong_layout(void **state)
{
    (void)state;
    at_mfma_cfg c = {64, 64, 32, 32, 32, 32, 4, 36, 256, 0, 0};
    char why[256];
    assert_int_equal(check_config(&c, 40, 50, 30, 0, 0, TIGHT, why, sizeof why), 0);
    for (g_bug = 1; g_bug <= 2; g_bug++)
        assert_int_not_equal(check_config(&c, 40, 50, 30, 0, 0, TIGHT, why, sizeof why), 0);
    /* A M-contiguous and B K-contiguous (tt) on the 16-byte path: caught; the 16-bit path:
     * unaffected. (In tn both operands would be reversed alike and the sums would not change.) */
    g_bug = 3;
    c.ta = c.tb = 1;
    assert_int_not_equal(check_config(&c, 40, 50, 30, 1, 1, PADDED, why, sizeof why), 0);
    assert_int_equal(check_config(&c, 40, 50, 30, 1, 1, MISALIGNED, why, sizeof why), 0);
    g_bug = 0;
    assert_int_equal(check_config(&c, 40, 50, 30, 1, 1, PADDED, why, sizeof why), 0);
    c.mfma = 16; /* the 16x16 layouts, on the same geometry */
    assert_int_equal(check_config(&c, 40, 50, 30, 1, 1, PADDED, why, sizeof why), 0);
    c.ta = c.tb = 0;
    c.wm = 64; /* waves that do not match THREADS */
    assert_int_not_equal(check_config(&c, 40, 50, 30, 0, 0, TIGHT, why, sizeof why), 0);
}

int main(int argc, char **argv)
{
    g_all = argc > 1 && strcmp(argv[1], "--all") == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_space_gfx90a),
        cmocka_unit_test(test_space_gfx908),
        cmocka_unit_test(test_awkward_shapes),
        cmocka_unit_test(test_emulation_catches_a_wrong_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
