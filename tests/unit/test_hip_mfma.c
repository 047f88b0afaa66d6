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

#define AT_MFMA_HOST
#include "templates/gemm/gemm_mfma.hip"

/* ---- the hardware model, from the ISA's description (not from the template) ---------------- */

#include "tests/unit/mfma_hw.h"

/* ---- the emulated kernel, through the template's index functions ----------------------------- */

/* A deliberate template bug for the test of the test: 1 reads B operands from the neighbouring
 * lane's column, 2 swaps pairs of accumulator rows. */
static int g_bug;

typedef struct prob {
    int m, n, k, ta, tb;
    float *a, *b, *c; /* as laid out in memory; lda = ta ? m : k, ldb = tb ? k : n, ldc = n */
} prob;

static float a_at(const prob *p, int i, int q)
{
    return p->ta ? p->a[q * p->m + i] : p->a[i * p->k + q];
}
static float b_at(const prob *p, int q, int j)
{
    return p->tb ? p->b[j * p->k + q] : p->b[q * p->n + j];
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
    int rc = 0;
    for (int bi = 0; bi * c->bm < p->m && !rc; bi++)
        for (int bj = 0; bj * c->bn < p->n && !rc; bj++) {
            memset(acc, 0, sizeof(float) * waves * tm * tn * 64 * nacc);
            for (int kt = 0; kt < kt_n; kt++) {
                /* NaN wherever nobody stages: a read of it poisons the result */
                for (int x = 0; x < c->bm * c->ldk; x++) sa[x] = NAN;
                for (int x = 0; x < c->bn * c->ldk; x++) sb[x] = NAN;
                for (int e = 0; e < c->bm * c->bk; e++) {
                    int r, kk;
                    at_stage_a(c, e, &r, &kk);
                    int gi = bi * c->bm + r, gq = kt * c->bk + kk;
                    sa[r * c->ldk + kk] = gi < p->m && gq < p->k ? a_at(p, gi, gq) : 0.0f;
                }
                for (int e = 0; e < c->bn * c->bk; e++) {
                    int col, kk;
                    at_stage_b(c, e, &col, &kk);
                    int gj = bj * c->bn + col, gq = kt * c->bk + kk;
                    sb[col * c->ldk + kk] = gj < p->n && gq < p->k ? b_at(p, gq, gj) : 0.0f;
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
    return rc;
}

/* Small integers: every sum is exact in f32, so the comparison is exact too. */
static int check_config(const at_mfma_cfg *c, int m, int n, int k, int ta, int tb, char *why,
                        size_t whylen)
{
    prob p = {m,
              n,
              k,
              ta,
              tb,
              malloc(sizeof(float) * m * k),
              malloc(sizeof(float) * k * n),
              malloc(sizeof(float) * m * n)};
    float *ref = malloc(sizeof(float) * m * n);
    uint32_t s = 12345u + (uint32_t)(m * 7 + n * 3 + k);
    for (int x = 0; x < m * k; x++)
        p.a[x] = (float)((int)((s = s * 1664525u + 1013904223u) >> 29) - 4);
    for (int x = 0; x < k * n; x++)
        p.b[x] = (float)((int)((s = s * 1664525u + 1013904223u) >> 29) - 4);
    for (int x = 0; x < m * n; x++)
        p.c[x] = (float)((int)((s = s * 1664525u + 1013904223u) >> 29) - 4);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double d = 0;
            for (int q = 0; q < k; q++) d += (double)a_at(&p, i, q) * b_at(&p, q, j);
            ref[i * n + j] = (float)(2.0 * d + 0.5 * p.c[i * n + j]);
        }
    int rc = emulate(c, &p, why, whylen);
    for (int x = 0; x < m * n && rc == 0; x++)
        if (!(p.c[x] == ref[x])) {
            snprintf(why, whylen, "C(%d, %d) = %g, reference %g (%s%s)", x / n, x % n, p.c[x],
                     ref[x], ta ? "t" : "n", tb ? "t" : "n");
            rc = -1;
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
        if (check_config(&c, 37, 45, 20, ta, tb, why, sizeof why) != 0) {
            at_config_format(t->space, cfg, buf, sizeof buf);
            fail_msg("%s %s %s: %s", arch, at_dtype_name(dt), buf, why);
        }
    }
    /* The defaults on several blocks and K steps, every layout. */
    for (size_t d = 0; d < t->space->ndefaults; d++)
        for (int l = 0; l < 4; l++) {
            at_mfma_cfg c =
                cfg_of(t->space, t->space->defaults + d * t->space->nparams, l & 1, l >> 1);
            if (check_config(&c, 300, 190, 100, l & 1, l >> 1, why, sizeof why) != 0)
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

/* The emulation must be able to fail: a wrong accumulator layout is caught. */
static void test_emulation_catches_a_wrong_layout(void **state)
{
    (void)state;
    at_mfma_cfg c = {64, 64, 32, 32, 32, 32, 4, 36, 256, 0, 0};
    char why[256];
    assert_int_equal(check_config(&c, 40, 50, 30, 0, 0, why, sizeof why), 0);
    for (g_bug = 1; g_bug <= 2; g_bug++)
        assert_int_not_equal(check_config(&c, 40, 50, 30, 0, 0, why, sizeof why), 0);
    g_bug = 0;
    c.mfma = 16; /* the 16x16 layouts, on the same geometry */
    assert_int_equal(check_config(&c, 40, 50, 30, 1, 1, why, sizeof why), 0);
    c.wm = 64; /* waves that do not match THREADS */
    assert_int_not_equal(check_config(&c, 40, 50, 30, 0, 0, why, sizeof why), 0);
}

int main(int argc, char **argv)
{
    g_all = argc > 1 && strcmp(argv[1], "--all") == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_space_gfx90a),
        cmocka_unit_test(test_space_gfx908),
        cmocka_unit_test(test_emulation_catches_a_wrong_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
