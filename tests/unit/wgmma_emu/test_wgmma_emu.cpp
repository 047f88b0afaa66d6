/* test_wgmma_emu.cpp — runs templates/gemm/gemm_wgmma.cu on the CPU through a model of the PTX it
 * uses (emu.h) and compares with a double-precision reference: several configurations, all
 * four layouts, sizes with and without edges, misaligned operands, beta = 0 with a NaN-filled
 * C, split-K with its workspace left zero, the grouped block order (GROUP_M) on grids of
 * many tile rows, the swapped operands (SWAP) with small tiles on small m, the TMA ring
 * (LOAD = 1, 2) with the tensor maps the host would build, and persistent grids (PERSIST) of
 * 1 to 5 blocks taking several tiles each, the last wave partial. What it checks is
 * the kernel's own index math (staging, swizzle, descriptors, fragment layout, pipeline order,
 * epilogue) against the ISA's rules as modelled here; it cannot check the model itself, which only
 * a GPU run does. */
#define AT_EMU_MACHINE_ONLY
#include "emu.h"
#include "registry.h"

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <setjmp.h>

extern "C" {
#include <cmocka.h>
}

/* ---- registry ------------------------------------------------------------------------------- */
static std::vector<const at_emu_kernel *> &kernels()
{
    static std::vector<const at_emu_kernel *> k;
    return k;
}
bool at_emu_register(const at_emu_kernel *k)
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

/* C rows after the problem's, NaN or random, that no kernel may write (a tile past M) */
static const int guard_rows = 256;

struct problem {
    int m, n, k;
    int pad_a, pad_b, pad_c; /* extra leading-dimension elements (misalignment when odd) */
    float alpha, beta;
    int sms = 3; /* a persistent kernel's grid: at most this many blocks */
};

/* Runs kn on p (in its element type) in both emulation modes; returns the failures. */
static int check(const at_emu_kernel *kn, const problem &p)
{
    const int dt = kn->dt;
    const int ta = kn->ta, tb = kn->tb;
    /* TMA needs 16-byte rows: a misaligned operand (an odd pad) gets a cp.async config from the
     * host, and is skipped below; the other problems' rows are padded to 8 elements, so the TMA
     * instances see every edge too */
    const int tma_pad = kn->load && p.pad_a % 2 == 0 && p.pad_b % 2 == 0;
    const int lda0 = (ta ? p.m : p.k) + p.pad_a, ldb0 = (tb ? p.k : p.n) + p.pad_b;
    /* a TMA store (STORE) needs C's rows 16-byte multiples too: the host keeps STORE 0
     * otherwise, so its instances get C's rows padded (their beta != 0 problems, with an odd
     * ldc elsewhere, run the register epilogue anyway) */
    const int lda = tma_pad ? (lda0 + 7) / 8 * 8 : lda0, ldb = tma_pad ? (ldb0 + 7) / 8 * 8 : ldb0,
              ldc = kn->store ? (p.n + p.pad_c + 7) / 8 * 8 : p.n + p.pad_c;
    std::vector<unsigned short> A((size_t)(ta ? p.k : p.m) * lda + 8),
        B((size_t)(tb ? p.n : p.k) * ldb + 8), C0((size_t)(p.m + guard_rows) * ldc + 8);
    for (auto &x : A) x = at_emu::from_f32(rnd(), dt);
    for (auto &x : B) x = at_emu::from_f32(rnd(), dt);
    for (auto &x : C0) x = p.beta != 0.0f ? at_emu::from_f32(rnd(), dt) : 0x7e00; /* NaN */
    const double eps = dt ? 0x1p-8 : 0x1p-11;
    const double tol = 32.0 * 1.1920929e-7 * std::sqrt((double)p.k) + 1e-6 + eps;
    const int km = kn->swap ? p.n : p.m, kmn = kn->swap ? p.m : p.n; /* the kernel's M, N */
    const size_t tiles = (size_t)((km + kn->bm - 1) / kn->bm) * ((kmn + kn->bn - 1) / kn->bn);
    std::vector<double> ref((size_t)p.m * p.n), bound((size_t)p.m * p.n);
    for (int i = 0; i < p.m; i++)
        for (int j = 0; j < p.n; j++) {
            double sum = 0.0, sa = 0.0;
            for (int q = 0; q < p.k; q++) {
                const double x =
                    at_emu::to_f32(ta ? A[(size_t)q * lda + i] : A[(size_t)i * lda + q], dt);
                const double y =
                    at_emu::to_f32(tb ? B[(size_t)j * ldb + q] : B[(size_t)q * ldb + j], dt);
                sum += x * y;
                sa += std::fabs(x * y);
            }
            const double c0 = p.beta != 0.0f ? at_emu::to_f32(C0[(size_t)i * ldc + j], dt) : 0.0;
            ref[(size_t)i * p.n + j] = p.alpha * sum + p.beta * c0;
            bound[(size_t)i * p.n + j] = std::fabs(p.alpha) * sa + std::fabs(p.beta * c0) + 1e-30;
        }
    int bad = 0;
    if (kn->load && (lda % 8 || ldb % 8)) return 0;
    /* an instance compiled without edge checks (EDGE_M/N/K = 0, as the space compiles whole
     * tiles) runs only problems of whole tiles: with clusters, one of an odd number of tile
     * rows, whose last unit's second tile must store nothing, unmasked */
    if (kn->exact && (km % kn->bm || kmn % kn->bn || p.k % kn->bk)) return 0;
    for (int mode = 0; mode < 2; mode++) {
        at_emu::copy_at_issue = mode == 1;
        at_emu::errors = 0;
        std::vector<unsigned short> C = C0;
        std::vector<float> ws(kn->splitk > 1 ? tiles * (kn->bm * kn->bn + 1) : 0, 0.0f);
        at_emu_args a = {p.m,  p.n,      p.k, p.alpha,  p.beta, A.data(),
                         lda,  B.data(), ldb, C.data(), ldc,    ws.empty() ? nullptr : ws.data(),
                         p.sms};
        kn->run(a);
        double worst = 0.0;
        for (int i = 0; i < p.m; i++)
            for (int j = 0; j < p.n; j++) {
                const size_t o = (size_t)i * p.n + j;
                const double e =
                    std::fabs(at_emu::to_f32(C[(size_t)i * ldc + j], dt) - ref[o]) / bound[o];
                if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
            }
        /* nothing written past each row's n columns, nor past the last row (guard rows) */
        for (int i = 0; i < p.m; i++)
            for (int j = p.n; j < ldc; j++)
                if (C[(size_t)i * ldc + j] != C0[(size_t)i * ldc + j]) worst = INFINITY;
        for (size_t o = (size_t)p.m * ldc; o < C.size(); o++)
            if (C[o] != C0[o]) worst = INFINITY;
        for (float w : ws)
            if (w != 0.0f) worst = INFINITY;
        if (!(worst <= tol) || at_emu::errors) {
            fprintf(stderr,
                    "FAIL BM%d BN%d BK%d WN%d WGS%d ST%d SPLITK%d GROUP_M%d SWAP%d LOAD%d "
                    "PERSIST%d STORE%d CLUSTER%d%s %s%s "
                    "%s m%d n%d k%d pads %d/%d/%d beta %g, SMs %d, %s: max rel error %g (tol %g), "
                    "%d emulator errors\n",
                    kn->bm, kn->bn, kn->bk, kn->wn, kn->wgs, kn->stages, kn->splitk, kn->group_m,
                    kn->swap, kn->load, kn->persist, kn->store, kn->cluster,
                    kn->exact ? " exact" : "", ta ? "t" : "n", tb ? "t" : "n", dt ? "bf16" : "f16",
                    p.m, p.n, p.k, p.pad_a, p.pad_b, p.pad_c, (double)p.beta,
                    kn->persist ? p.sms : 0,
                    mode ? "copies at issue, MMAs at wait" : "copies at wait, MMAs at issue", worst,
                    tol, at_emu::errors);
            bad++;
        }
    }
    return bad;
}

/* Every g_stride-th (instance, problem) pair is run (1: all; `--stride N`). The sanitizer build
 * takes a share: the emulator there is several times slower, and what it looks for (memory
 * and undefined-behaviour errors of the host code) does not need every pair. With a stride
 * coprime to the 11 problems each problem still meets instances of every kind. */
static int g_stride = 1;

static void test_every_instance(void **state)
{
    (void)state;
    assert_true(kernels().size() >= 8);
    int bad = 0, runs = 0, pair = 0;
    for (const at_emu_kernel *kn : kernels()) {
        const int bm = kn->bm, bn = kn->bn, bk = kn->bk;
        const problem ps[] = {
            {bm, bn, 2 * kn->splitk * bk, 0, 0, 0, 1.0f, 0.0f},       /* whole tiles */
            {bm + 17, bn / 2 + 5, 3 * bk + 7, 0, 0, 0, 0.5f, -1.25f}, /* every edge */
            {1, 1, 1, 0, 0, 0, 1.0f, 1.0f},                           /* tiny */
            {bm / 2 + 3, bn + 9, bk / 2 + 1, 1, 3, 1, 1.0f, 0.5f},    /* misaligned */
            {97, 89, 83, 0, 0, 0, 1.0f, 0.0f, 2},                     /* primes */
            {9 * bm + 5, bn + 7, bk + 3, 0, 0, 0, 1.0f, 0.0f},   /* tall: 10 x 2 tiles, bands */
            {5, 3 * bn + 1, 3 * bk + 1, 0, 0, 0, 1.0f, 0.0f, 1}, /* short and wide; 1 block */
            /* 3 x 4 tiles of one K tile each: the ring runs several tiles ahead (persistent
             * grid of 5: waves of 5, 5 and 2 tiles); rows 16-byte multiples for TMA */
            {2 * bm + 8, 3 * bn + 8, bk - 8, 0, 0, 0, 1.0f, 0.5f, 5},
            {16, 2 * bn, 4 * bk, 0, 0, 0, 1.0f, 0.0f},        /* decode-like: small m */
            {7, 3 * bm + 5, 2 * bk + 9, 0, 0, 0, 1.0f, 0.0f}, /* small m, long n (SWAP) */
            {33, 2 * bm, 3 * bk, 2, 0, 1, 2.0f, 0.75f},       /* ... with beta, ldc odd */
        };
        for (const problem &p : ps) {
            if (pair++ % g_stride) continue;
            bad += check(kn, p);
            runs++;
        }
    }
    fprintf(stderr, "%d instances, %d problems x 2 emulation modes, %d failed\n",
            (int)kernels().size(), runs, bad);
    assert_int_equal(bad, 0);
}

/* The emulator itself must catch a wrong layout, else the test above could not fail: a
 * descriptor read with the wrong major-ness or swizzle returns different elements. */
static void test_model_distinguishes_layouts(void **state)
{
    (void)state;
    at_emu::block b;
    b.smem.resize(4096);
    for (size_t i = 0; i < b.smem.size(); i += 2) {
        const unsigned short v = (unsigned short)(i / 2);
        memcpy(&b.smem[i], &v, 2);
    }
    at_emu::blk = &b;
    /* f16 bit patterns 0..2047 are distinct finite values */
    const unsigned long long k128 = (1024ull >> 4) << 32 | 1ull << 16 | 1ull << 62;
    const unsigned long long k64 = (512ull >> 4) << 32 | 1ull << 16 | 2ull << 62;
    int differ_major = 0, differ_swz = 0;
    for (int mn = 0; mn < 8; mn++)
        for (int k = 0; k < 16; k++) {
            differ_major +=
                at_emu::operand(k128, mn, k, 0, 0) != at_emu::operand(k128, mn, k, 1, 0);
            differ_swz += at_emu::operand(k128, mn, k, 0, 0) != at_emu::operand(k64, mn, k, 0, 0);
        }
    assert_true(differ_major > 0);
    assert_true(differ_swz > 0);
    /* the 128B swizzle moves chunk c of row r to c ^ (r % 8): row 3, k 0 is at chunk 3 */
    unsigned short want;
    memcpy(&want, &b.smem[3 * 128 + 3 * 16], 2);
    assert_true(at_emu::operand(k128, 3, 0, 0, 0) == at_emu::to_f32(want, 0));
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--stride") == 0) g_stride = atoi(argv[2]);
    if (g_stride < 1 || (argc != 1 && argc != 3)) {
        fprintf(stderr, "usage: %s [--stride N]   (N >= 1: every Nth instance and problem)\n",
                argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_distinguishes_layouts),
        cmocka_unit_test(test_every_instance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
