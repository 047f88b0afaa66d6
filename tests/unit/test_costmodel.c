/* test_costmodel.c — the analytic GEMM cost model (tuner/ops/gemm_cost.c) against what it and
 * docs/search.md claim: tile quantization (a block computes a whole BM x BN x K tile), waves of
 * blocks over the compute units with occupancy from threads (64 warps a unit) and local memory
 * (twice the per-group limit a unit), the arithmetic-intensity shortfall against the device's
 * balance (20 on GPUs, 8 on CPUs), per-thread work (16 to 128 outputs; more is a GPU's problem
 * only), lanes lost to partial warps and groups of fewer than two warps, narrow vectors; and the
 * prior over a space loaded from YAML. The model ranks: most checks compare two configs that
 * differ in one respect. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/ops/gemm_cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P_GPU 80 /* compute units of the test GPU */

/* A GPU: 80 units, warps of 32, 48 KiB of shared memory a block. */
static at_device_info gpu(void)
{
    at_device_info d;
    memset(&d, 0, sizeof d);
    d.compute_units = P_GPU;
    d.warp_size = 32;
    d.local_mem_bytes = 48 * 1024;
    return d;
}

/* A CPU of one core (so every block is a wave of its own and waves are out of the picture). */
static at_device_info cpu(void)
{
    at_device_info d;
    memset(&d, 0, sizeof d);
    d.compute_units = 1;
    d.warp_size = 1;
    d.local_mem_bytes = 32 * 1024;
    d.is_cpu = true;
    return d;
}

/* 128 x 128 x 16 tiles of f32, 256 threads (64 outputs each), float4, no local memory (so
 * occupancy is bounded by threads alone: 64 warps / 8 = 8 groups a unit). */
static at_gemm_cost_in base(int64_t m, int64_t n, int64_t k)
{
    return (at_gemm_cost_in){.m = m,
                             .n = n,
                             .k = k,
                             .bm = 128,
                             .bn = 128,
                             .bk = 16,
                             .threads = 256,
                             .local_bytes = 0,
                             .vw = 4,
                             .elem_bytes = 4};
}

static double cost(at_gemm_cost_in c, at_device_info d) { return at_gemm_cost(&c, &d); }

static void assert_same(double a, double b)
{
    if (!(fabs(a - b) <= 1e-9 * fabs(b))) fail_msg("%.17g != %.17g", a, b);
}

static void assert_more(double a, double b)
{
    if (!(a > b * (1 + 1e-9))) fail_msg("%.17g is not more than %.17g", a, b);
}

/* ---- tile quantization -------------------------------------------------------------------- */

static void test_tile_quantization(void **state)
{
    (void)state;
    at_device_info d = cpu();
    /* 32 x 32 and 128 x 128 tiles, 16 outputs a thread each, both at the CPU's balance. */
    at_gemm_cost_in small = base(1024, 1024, 1024), large = small;
    small.bm = small.bn = 32;
    small.threads = 64;
    large.threads = 1024;
    /* No edge: the same work. */
    assert_same(cost(large, d), cost(small, d));
    /* 1056 = 8 x 128 + 32: the large tile's last block uses a quarter of each edge, so it
     * computes 1152^2 where 1056^2 is asked; the small tile fits exactly (33 x 32). */
    small.m = small.n = large.m = large.n = 1056;
    assert_more(cost(large, d), cost(small, d));
    assert_same(cost(large, d) / cost(small, d), (1152.0 * 1152.0) / (1056.0 * 1056.0));
    /* K is padded to the K step too: 33 is 3 steps of 16, 2 steps of 32 (64). */
    at_gemm_cost_in k16 = small, k32 = small;
    k16.k = k32.k = 33;
    k32.bk = 32;
    assert_same(cost(k32, d) / cost(k16, d), 64.0 / 48.0);
    /* The penalty grows with what an edge wastes. */
    double prev = 0;
    for (int64_t m = 1024 + 127; m >= 1024 + 1; m -= 14) {
        at_gemm_cost_in c = large;
        c.m = m;
        double y = cost(c, d) / (double)m; /* per useful row */
        if (prev) assert_more(y, prev);
        prev = y;
    }
}

/* ---- waves and occupancy ------------------------------------------------------------------ */

/* The cost of `blocks` blocks of c's tile in one column of blocks. */
static double cost_blocks(at_gemm_cost_in c, at_device_info d, int64_t blocks)
{
    c.m = c.bm * blocks;
    c.n = c.bn;
    return cost(c, d);
}

/* The blocks one wave holds: the count after which one more block costs another wave. */
static int64_t wave_size(at_gemm_cost_in c, at_device_info d)
{
    for (int64_t b = 1; b <= 40 * P_GPU; b++)
        if (cost_blocks(c, d, b + 1) > cost_blocks(c, d, b) * 1.5) return b;
    return -1;
}

static void test_more_waves_cost_more(void **state)
{
    (void)state;
    at_device_info d = gpu();
    at_gemm_cost_in c = base(0, 0, 4096);
    const int64_t wave = 8 * P_GPU; /* 256 threads: 8 groups a unit */
    double one = cost_blocks(c, d, wave);
    /* One block more is a second wave; a partly idle wave costs a whole one. */
    assert_same(cost_blocks(c, d, wave + 1), 2 * one);
    assert_same(cost_blocks(c, d, 2 * wave), 2 * one);
    assert_same(cost_blocks(c, d, 2 * wave + 1), 3 * one);
    /* Never less for more blocks. */
    double prev = 0;
    for (int64_t b = 1; b <= 5 * wave; b += 7) {
        double y = cost_blocks(c, d, b);
        assert_true(y >= prev * (1 - 1e-12)); /* equal within a wave, but for rounding */
        prev = y;
    }
}

static void test_occupancy(void **state)
{
    (void)state;
    at_device_info d = gpu();
    at_gemm_cost_in c = base(0, 0, 4096);
    /* By threads: 64 warps a unit. */
    assert_int_equal(wave_size(c, d), 8 * P_GPU); /* 8 warps a group */
    c.threads = 512;
    assert_int_equal(wave_size(c, d), 4 * P_GPU);
    c.threads = 1024;
    assert_int_equal(wave_size(c, d), 2 * P_GPU);
    c.threads = 96; /* 3 warps: 21 groups */
    assert_int_equal(wave_size(c, d), 21 * P_GPU);
    c.threads = 64; /* 32 groups, the most a unit holds here */
    assert_int_equal(wave_size(c, d), 32 * P_GPU);
    c.threads = 32;
    assert_int_equal(wave_size(c, d), 32 * P_GPU);
    /* By local memory: a unit has twice the per-group limit. */
    c.threads = 256;
    c.local_bytes = 48 * 1024;
    assert_int_equal(wave_size(c, d), 2 * P_GPU);
    c.local_bytes = 48 * 1024 + 1;
    assert_int_equal(wave_size(c, d), 1 * P_GPU);
    c.local_bytes = 24 * 1024; /* 4 by memory, 8 by threads: the lesser */
    assert_int_equal(wave_size(c, d), 4 * P_GPU);
    /* A CPU core runs one group at a time. */
    at_device_info h = cpu();
    h.compute_units = 4;
    c.local_bytes = 0;
    c.bm = c.bn = 32;
    c.threads = 64;
    assert_same(cost_blocks(c, h, 5) / cost_blocks(c, h, 4), 2.0);
}

/* Configs that differ in their threads or tile are compared on a problem whose blocks fill every
 * wave whatever the occupancy (a multiple of 32 groups on every unit), so waves cancel out. */
static at_gemm_cost_in full_waves(int64_t bm, int64_t bn, int64_t threads)
{
    at_gemm_cost_in c = base(bm * 32 * P_GPU, bn, 4096);
    c.bm = bm;
    c.bn = bn;
    c.threads = threads;
    return c;
}

/* ---- arithmetic intensity ----------------------------------------------------------------- */

static void test_intensity_shortfall(void **state)
{
    (void)state;
    /* GPU balance 20 FLOP/byte. A 64 x 64 f32 tile: 2*64*64 / (128*4) = 16, short; in f16, 32. */
    at_device_info d = gpu();
    at_gemm_cost_in f32 = base(4096, 4096, 4096), f16 = f32;
    f32.bm = f32.bn = f16.bm = f16.bn = 64;
    f32.threads = f16.threads = 128; /* 32 outputs */
    f16.elem_bytes = 2;
    assert_more(cost(f32, d), cost(f16, d));
    assert_same(cost(f32, d) / cost(f16, d), 20.0 / 16.0);
    /* 128 x 128 f32 is 32, above the balance: nothing to gain from f16. */
    at_gemm_cost_in big32 = base(4096, 4096, 4096), big16 = big32;
    big16.elem_bytes = 2;
    assert_same(cost(big32, d), cost(big16, d));
    /* A narrow tile falls short: 128 x 32 is 2*128*32 / (160*4) = 12.8 (64 outputs a thread
     * each; the cost of an output compared). */
    at_gemm_cost_in wide = full_waves(128, 128, 256), narrow = full_waves(128, 32, 64);
    assert_same((cost(narrow, d) / (double)(narrow.m * narrow.n)) /
                    (cost(wide, d) / (double)(wide.m * wide.n)),
                20.0 / 12.8);

    /* CPU balance 8: a 32 x 32 f32 tile (8) is at it, a 16 x 16 one (4) is short. */
    at_device_info h = cpu();
    at_gemm_cost_in t32 = base(1024, 1024, 1024), t32h = t32;
    t32.bm = t32.bn = t32h.bm = t32h.bn = 32;
    t32.threads = t32h.threads = 64;
    t32h.elem_bytes = 2;
    assert_same(cost(t32, h), cost(t32h, h));
    at_gemm_cost_in t16 = t32, t16h = t32h;
    t16.bm = t16.bn = t16h.bm = t16h.bn = 16;
    t16.threads = t16h.threads = 16;
    assert_more(cost(t16, h), cost(t16h, h));
    assert_same(cost(t16, h) / cost(t16h, h), 8.0 / 4.0);
}

/* ---- threads, work per thread, vectors ---------------------------------------------------- */

static void test_too_few_threads_per_group(void **state)
{
    (void)state;
    at_device_info d = gpu();
    /* One warp a group (32 outputs each) against two (16 each): nothing to switch between. */
    assert_more(cost(full_waves(32, 32, 32), d), cost(full_waves(32, 32, 64), d));
    /* Partial warps: 80 threads fill 96 lanes (64 x 64 tile: 51 and 43 outputs). */
    assert_more(cost(full_waves(64, 64, 80), d), cost(full_waves(64, 64, 96), d));
    /* Whole warps, two or more: no loss. */
    assert_same(cost(full_waves(64, 64, 128), d), cost(full_waves(64, 64, 256), d));
    /* A CPU has no warps: no lanes to lose. */
    at_device_info h = cpu();
    assert_same(cost(full_waves(32, 32, 32), h), cost(full_waves(32, 32, 64), h));
}

static void test_work_per_thread(void **state)
{
    (void)state;
    at_device_info d = gpu();
    /* 128 x 128 tiles: 16, 64 and 128 outputs a thread are within the band, the same cost. */
    double c128 = cost(full_waves(128, 128, 128), d);
    assert_same(cost(full_waves(128, 128, 256), d), c128);
    assert_same(cost(full_waves(128, 128, 1024), d), c128);
    /* More than 128 outputs spill on a GPU; fewer than 16 cannot hide latency. */
    assert_more(cost(full_waves(128, 128, 64), d), c128); /* 256 outputs */
    double c64 = cost(full_waves(64, 64, 256), d);        /* 16 outputs */
    assert_more(cost(full_waves(64, 64, 512), d), c64);   /* 8 */
    assert_more(cost(full_waves(64, 64, 1024), d), cost(full_waves(64, 64, 512), d)); /* 4 */
    /* On a CPU many outputs a thread are fine, few are not. */
    at_device_info h = cpu();
    at_gemm_cost_in many = base(1024, 1024, 1024), some = many, few = many;
    many.threads = 64; /* 256 outputs */
    some.threads = 256;
    few.threads = 4096; /* 4 */
    assert_same(cost(many, h), cost(some, h));
    assert_more(cost(few, h), cost(some, h));
}

static void test_vector_width(void **state)
{
    (void)state;
    at_device_info d = gpu(), h = cpu();
    at_gemm_cost_in c = base(4096, 4096, 4096);
    double w[5];
    for (int i = 0; i < 5; i++) {
        c.vw = (int64_t)1 << i; /* 1, 2, 4, 8, 16 */
        w[i] = cost(c, d);
    }
    assert_more(w[0], w[1]);
    assert_more(w[1], w[2]);
    assert_same(w[2], w[3]); /* float4 is a GPU's widest load */
    for (int i = 0; i < 5; i++) {
        c.vw = (int64_t)1 << i;
        w[i] = cost(c, h);
    }
    assert_more(w[2], w[3]);
    assert_same(w[3], w[4]); /* 8 floats: an AVX register */
    c.vw = 0;                /* none given: as 1 */
    assert_same(cost(c, h), w[0]);
}

/* ---- the prior over a space --------------------------------------------------------------- */

static const char *const TINY_GEMM =
    "name: tiny_gemm\n"
    "kernel: tiny\n"
    "source: tiny.cl\n"
    "problem: [m, n, k]\n"
    "device: [local_mem_bytes]\n"
    "parameters:\n"
    "  BM: [16, 32, 64, 128]\n"
    "  BN: [16, 32, 64, 128]\n"
    "  BK: [8, 16]\n"
    "  TM: [1, 4, 8]\n"
    "  TN: [1, 4, 8]\n"
    "  VW: [1, 4]\n"
    "derived:\n"
    "  THREADS: (BM / TM) * (BN / TN)\n"
    "  LOCAL_BYTES: 4 * BK * (BM + BN)\n"
    "constraints:\n"
    "  - BM % TM == 0\n"
    "  - BN % TN == 0\n"
    "  - TN % VW == 0\n"
    "  - THREADS <= 1024\n"
    "  - LOCAL_BYTES <= device.local_mem_bytes\n"
    "launch:\n"
    "  global: [ceil_div(n, BN) * (BN / TN), ceil_div(m, BM) * (BM / TM)]\n"
    "  local: [BN / TN, BM / TM]\n";

/* A space loaded from yaml and bound to m, n, k on a 48 KiB device, its valid configs, and a
 * prior array of one value a config, each `fill`. */
typedef struct loaded {
    at_space *s;
    int64_t *cfgs;
    size_t n;
    double *prior;
} loaded;

static loaded load(const char *yaml, int64_t m, int64_t n, int64_t k, double fill)
{
    loaded l = {0};
    at_status st = at_space_load(yaml, strlen(yaml), &l.s);
    if (st != AT_OK) fail_msg("load: %s", at_errmsg());
    assert_int_equal(at_space_set(l.s, "m", m), AT_OK);
    assert_int_equal(at_space_set(l.s, "n", n), AT_OK);
    assert_int_equal(at_space_set(l.s, "k", k), AT_OK);
    assert_int_equal(at_space_set(l.s, "local_mem_bytes", 48 * 1024), AT_OK);
    assert_int_equal(at_space_enumerate(l.s, &l.cfgs, NULL, &l.n), AT_OK);
    assert_true(l.n > 0);
    l.prior = malloc(l.n * sizeof *l.prior);
    assert_non_null(l.prior);
    for (size_t i = 0; i < l.n; i++) l.prior[i] = fill;
    return l;
}

static void unload(loaded *l)
{
    free(l->prior);
    free(l->cfgs);
    at_space_free(l->s);
}

/* TINY_GEMM with each {from, to} in edits applied in turn to the first occurrence of from;
 * malloc'd. */
static char *tiny_gemm_with(const char *const (*edits)[2], size_t nedits)
{
    char *text = strdup(TINY_GEMM);
    for (size_t e = 0; e < nedits; e++) {
        const char *at = strstr(text, edits[e][0]);
        if (!at) fail_msg("no '%s' to replace", edits[e][0]);
        size_t a = (size_t)(at - text), nf = strlen(edits[e][0]), nt = strlen(edits[e][1]);
        char *out = malloc(strlen(text) - nf + nt + 1);
        assert_non_null(out);
        memcpy(out, text, a);
        memcpy(out + a, edits[e][1], nt);
        strcpy(out + a + nt, at + nf);
        free(text);
        text = out;
    }
    return text;
}

static void test_prior_fills_every_config(void **state)
{
    (void)state;
    at_device_info d = gpu();
    loaded l = load(TINY_GEMM, 1000, 777, 300, NAN);
    assert_true(l.n > 50);
    assert_int_equal(at_gemm_cost_prior(l.s, &d, l.cfgs, l.n, l.prior), AT_OK);
    size_t lo = 0, hi = 0;
    for (size_t i = 0; i < l.n; i++) {
        assert_true(isfinite(l.prior[i]) && l.prior[i] > 0);
        if (l.prior[i] < l.prior[lo]) lo = i;
        if (l.prior[i] > l.prior[hi]) hi = i;
    }
    assert_more(l.prior[hi], l.prior[lo]); /* it ranks */
    /* Each value is the model on what the config says: tile, K step, vector width, threads
     * from the launch geometry, LOCAL_BYTES, f32. */
    for (size_t i = 0; i < l.n; i += 7) {
        const int64_t *c = l.cfgs + i * l.s->nparams;
        int64_t bm = c[0], bn = c[1], bk = c[2], tm = c[3], tn = c[4], vw = c[5];
        at_gemm_cost_in in = {1000, 777, 300, bm, bn, bk, (bm / tm) * (bn / tn), 4 * bk * (bm + bn),
                              vw,   4};
        assert_same(l.prior[i], at_gemm_cost(&in, &d));
    }
    unload(&l);
}

/* Without BK and VW (1 each), with SMEM_BYTES for the local memory, with a dtype (2 bytes). */
static void test_prior_reads_what_the_space_has(void **state)
{
    (void)state;
    static const char *const edits[][2] = {
        {"  BK: [8, 16]\n", ""},
        {"  VW: [1, 4]\n", ""},
        {"  - TN % VW == 0\n", ""},
        {"LOCAL_BYTES: 4 * BK * (BM + BN)", "SMEM_BYTES: 2 * 8 * (BM + BN)"},
        {"  - LOCAL_BYTES <= device.local_mem_bytes\n", ""},
        {"problem: [m, n, k]", "problem: [m, n, k, dt]"},
    };
    char *yaml = tiny_gemm_with(edits, sizeof edits / sizeof edits[0]);
    at_device_info d = gpu();
    loaded l = load(yaml, 512, 512, 512, NAN);
    assert_int_equal(at_gemm_cost_prior(l.s, &d, l.cfgs, l.n, l.prior), AT_OK);
    for (size_t i = 0; i < l.n; i++) {
        const int64_t *c = l.cfgs + i * l.s->nparams;
        int64_t bm = c[0], bn = c[1], tm = c[2], tn = c[3];
        at_gemm_cost_in in = {512, 512, 512, bm, bn, 1, (bm / tm) * (bn / tn), 2 * 8 * (bm + bn),
                              1,   2};
        assert_same(l.prior[i], at_gemm_cost(&in, &d));
    }
    unload(&l);
    free(yaml);
}

static void test_prior_needs_a_tiled_gemm(void **state)
{
    (void)state;
    static const char *const edits[][2] = {
        {"  BN: [16, 32, 64, 128]\n", ""},
        {"  - BN % TN == 0\n", ""},
        {"(BM / TM) * (BN / TN)", "(BM / TM) * (64 / TN)"},
        {"4 * BK * (BM + BN)", "4 * BK * BM"},
        {"ceil_div(n, BN) * (BN / TN)", "n / TN"},
        {"BN / TN", "64 / TN"},
    };
    char *yaml = tiny_gemm_with(edits, sizeof edits / sizeof edits[0]);
    at_device_info d = gpu();
    loaded l = load(yaml, 256, 256, 256, -1);
    assert_int_equal(at_gemm_cost_prior(l.s, &d, l.cfgs, l.n, l.prior), AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "no BM and BN"));
    for (size_t i = 0; i < l.n; i++) assert_true(l.prior[i] == -1);           /* untouched */
    assert_int_equal(at_gemm_cost_prior(l.s, &d, l.cfgs, 0, l.prior), AT_OK); /* nothing to do */
    unload(&l);
    free(yaml);
}

/* ---- the CPU micro-kernel model (gemm_cpu.yaml) ------------------------------------------- */

/* The 2-core AVX-512 machine of docs/gemm-cpu.md: 16-float vectors, 48 KiB L1, 2 MiB L2. */
static at_device_info cpu_avx512(void)
{
    at_device_info d;
    memset(&d, 0, sizeof d);
    d.compute_units = 2;
    d.is_cpu = true;
    d.warp_size = 1;
    d.vector_width = 16;
    d.l1_bytes = 48 * 1024;
    d.core_l2_bytes = 2048 * 1024;
    return d;
}

/* m, n, k, ta, tb, then VW RS NV MT KC PA PB (UK 1, NT 1). */
static double cpu_cost(int64_t s, int64_t ta, int64_t tb, int64_t vw, int64_t rs, int64_t nv,
                       int64_t mt, int64_t kc, int64_t pa, int64_t pb, const at_device_info *d)
{
    at_gemm_cpu_cost_in c = {s, s, s, ta, tb, vw, rs, nv, mt, kc, pa, pb, 1, 0, 1, 0};
    return at_gemm_cpu_cost(&c, d);
}

static void test_cpu_model(void **state)
{
    (void)state;
    at_device_info d = cpu_avx512();
    const double best = cpu_cost(1024, 0, 0, 16, 14, 2, 8, 128, 1, 1, &d);
    /* Few accumulators leave the FMA pipes waiting on latency, or the loads dominate. */
    assert_more(cpu_cost(1024, 0, 0, 16, 2, 2, 8, 128, 1, 1, &d), best);
    assert_more(cpu_cost(1024, 0, 0, 16, 4, 1, 8, 128, 1, 1, &d), best);
    /* Half-width vectors on AVX-512 do half the work per FMA. */
    assert_more(cpu_cost(1024, 0, 0, 8, 14, 2, 8, 128, 1, 1, &d), best);
    /* Past 32 registers the accumulators spill. */
    assert_more(cpu_cost(1024, 0, 0, 16, 14, 4, 4, 128, 1, 1, &d), best);
    /* At n = 1024 unpacked B walks a page per k-step; unpacked A rows share an L1 set. */
    assert_more(cpu_cost(1024, 0, 0, 16, 14, 2, 8, 128, 1, 0, &d), best);
    assert_more(cpu_cost(1024, 0, 0, 16, 14, 2, 8, 128, 0, 1, &d), best);
    /* Packing once per strip instead of once per 8 strips costs more. */
    assert_more(cpu_cost(1024, 0, 0, 16, 14, 2, 1, 128, 1, 1, &d), best);
    /* Panels past L1 / L2 cost more. */
    assert_more(cpu_cost(1024, 0, 0, 16, 14, 2, 8, 512, 1, 1, &d), best);
    /* B stored N x K is transposed while packed: dearer than a copy. */
    assert_more(cpu_cost(1024, 0, 1, 16, 14, 2, 8, 128, 1, 1, &d), best);
    /* On a 16-row problem, 8 strips of 14 rows are mostly idle: one work-item per 14 x 32
     * block is ranked above them (parallelism over 2 cores). */
    at_gemm_cpu_cost_in skinny = {16, 4096, 4096, 0, 1, 16, 14, 2, 8, 128, 1, 1, 1, 0, 1, 0};
    at_gemm_cpu_cost_in fit = skinny;
    fit.rs = 8, fit.mt = 2;
    assert_more(at_gemm_cpu_cost(&skinny, &d), at_gemm_cpu_cost(&fit, &d));
    /* There, dot products along K (no transposing pack of B) beat the packed micro-kernel. */
    at_gemm_cpu_cost_in dot = {16, 4096, 4096, 0, 1, 16, 4, 4, 4, 64, 0, 0, 1, 1, 1, 0};
    assert_more(at_gemm_cpu_cost(&fit, &d), at_gemm_cpu_cost(&dot, &d));
    /* At 4096^3 the operands are far past the L2: NT column strips sharing one packed A panel
     * divide its traffic (docs/gemm-cpu.md: 164 -> 237 GFLOP/s at 4096 tn), and A read in place
     * pays that traffic on the micro-kernel's path. */
    at_gemm_cpu_cost_in big = {4096, 4096, 4096, 1, 0, 16, 6, 4, 16, 128, 1, 1, 1, 0, 16, 0};
    at_gemm_cpu_cost_in one = big;
    one.nt = 1;
    assert_more(at_gemm_cpu_cost(&one, &d), at_gemm_cpu_cost(&big, &d));
    at_gemm_cpu_cost_in in_place = one, packed = one;
    in_place.ta = packed.ta = 0;
    in_place.pa = 0;
    assert_more(at_gemm_cpu_cost(&in_place, &d), at_gemm_cpu_cost(&packed, &d));
    /* Shared packs: at 4096^3 each panel packed once instead of by every work-item that reads
     * it (RS=6,NV=4,MT=32,NT=8,KC=256: 298 -> 358 GFLOP/s by CPU time at 4096 nn); at 512^3,
     * with one or two users a panel, reading it from the other core's cache is no gain. */
    at_gemm_cpu_cost_in priv = {4096, 4096, 4096, 0, 0, 16, 6, 4, 32, 256, 1, 1, 4, 0, 8, 0};
    at_gemm_cpu_cost_in shared = priv;
    shared.sp = 1;
    assert_more(at_gemm_cpu_cost(&priv, &d), at_gemm_cpu_cost(&shared, &d));
    priv.m = priv.n = priv.k = shared.m = shared.n = shared.k = 512;
    assert_more(at_gemm_cpu_cost(&shared, &d), at_gemm_cpu_cost(&priv, &d));
    /* NT = 0 (a caller that does not set it) is NT = 1. */
    one.nt = 0;
    assert_true(at_gemm_cpu_cost(&one, &d) == cpu_cost(4096, 1, 0, 16, 6, 4, 16, 128, 1, 1, &d));
    /* An AVX2 device (8 floats): 16-wide vectors are split in two. */
    d.vector_width = 8;
    assert_more(cpu_cost(1024, 0, 0, 16, 6, 2, 8, 128, 1, 1, &d),
                cpu_cost(1024, 0, 0, 8, 6, 2, 8, 128, 1, 1, &d) * 0.99);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_model),
        cmocka_unit_test(test_tile_quantization),
        cmocka_unit_test(test_more_waves_cost_more),
        cmocka_unit_test(test_occupancy),
        cmocka_unit_test(test_intensity_shortfall),
        cmocka_unit_test(test_too_few_threads_per_group),
        cmocka_unit_test(test_work_per_thread),
        cmocka_unit_test(test_vector_width),
        cmocka_unit_test(test_prior_fills_every_config),
        cmocka_unit_test(test_prior_reads_what_the_space_has),
        cmocka_unit_test(test_prior_needs_a_tiled_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
