/* test_attention_cost.c — the analytic attention cost model (tuner/ops/attention_cost.c)
 * against what it claims: query-block quantization (every block computes BQ padded rows), the
 * blocks' spread over the compute units and the occupancy that hides latency, the causal mask
 * (about half the tiles), the K/V bytes each query block re-reads against the device balance,
 * the per-tile overhead of small BKV, split-KV (wins on decode, loses on prefill), vector width;
 * and the prior over a space loaded from YAML. Most checks compare two configs that differ in
 * one respect. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tuner/ops/attention_cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P_GPU 132 /* compute units of the test GPU (an H100 / H200) */

/* A GPU: 132 units, warps of 32, 48 KiB of static shared memory a block, 227 KiB opt-in. */
static at_device_info gpu(void)
{
    at_device_info d;
    memset(&d, 0, sizeof d);
    d.compute_units = P_GPU;
    d.warp_size = 32;
    d.local_mem_bytes = 48 * 1024;
    d.max_shared_optin = 227 * 1024;
    return d;
}

/* A CPU of one core (every block in turn: the spread over units is out of the picture). */
static at_device_info cpu(void)
{
    at_device_info d;
    memset(&d, 0, sizeof d);
    d.compute_units = 1;
    d.warp_size = 1;
    d.local_mem_bytes = 32 * 1024;
    d.max_shared_optin = 32 * 1024;
    d.is_cpu = true;
    return d;
}

/* Prefill of seq x seq, d 128, f32; 64 x 64 tiles, 256 threads (32 accumulators each, 8 warps:
 * the latency hidden by one group), float4, no split, no local memory. */
static at_attention_cost_in base(int64_t bh, int64_t seq)
{
    return (at_attention_cost_in){.sq = seq,
                                  .skv = seq,
                                  .d = 128,
                                  .causal = 0,
                                  .bh = bh,
                                  .bq = 64,
                                  .bkv = 64,
                                  .split = 1,
                                  .threads = 256,
                                  .local_bytes = 0,
                                  .vw = 4,
                                  .elem_bytes = 4};
}

/* The decode shape of the benchmarks: one query row, 8192 keys, 32 heads (batch 1), d 128,
 * f16; 16-row blocks of 128 threads. */
static at_attention_cost_in decode(int64_t split)
{
    at_attention_cost_in c = base(32, 1);
    c.skv = 8192;
    c.bq = 16;
    c.threads = 128;
    c.elem_bytes = 2;
    c.split = split;
    return c;
}

static double cost(at_attention_cost_in c, at_device_info d) { return at_attention_cost(&c, &d); }

static void assert_same(double a, double b)
{
    if (!(fabs(a - b) <= 1e-9 * fabs(b))) fail_msg("%.17g != %.17g", a, b);
}

static void assert_more(double a, double b)
{
    if (!(a > b * (1 + 1e-9))) fail_msg("%.17g is not more than %.17g", a, b);
}

/* ---- query-block quantization ------------------------------------------------------------- */

static void test_query_block_quantization(void **state)
{
    (void)state;
    at_device_info d = cpu();
    /* 128 rows a block (512 threads: the same 32 accumulators a thread) against 32 (128). */
    at_attention_cost_in large = base(1, 1024), small = large;
    large.bq = 128;
    large.threads = 512;
    small.bq = 32;
    small.threads = 128;
    /* No edge: the same work (both compute-bound at the CPU's balance). */
    assert_same(cost(large, d), cost(small, d));
    /* 1056 = 8 x 128 + 32 query rows: the large block computes 1152 where 1056 are asked. */
    large.sq = small.sq = 1056;
    assert_more(cost(large, d), cost(small, d));
    assert_same(cost(large, d) / cost(small, d), 1152.0 / 1056.0);
}

/* ---- units and occupancy ------------------------------------------------------------------ */

static void test_blocks_over_units(void **state)
{
    (void)state;
    at_device_info d = gpu();
    /* One query block a head: bh blocks. 8 warps a group hide the latency alone. */
    at_attention_cost_in c = base(P_GPU, 64);
    double one = cost(c, d);
    c.bh = P_GPU + 1; /* one unit runs two */
    assert_same(cost(c, d), 2 * one);
    c.bh = 2 * P_GPU;
    assert_same(cost(c, d), 2 * one);
    c.bh = P_GPU / 2; /* half the units idle: no faster than a full grid */
    assert_same(cost(c, d), one);
}

static void test_occupancy_hides_latency(void **state)
{
    (void)state;
    at_device_info d = gpu();
    /* 4 warps a group, a grid of many blocks a unit: two resident groups (local memory for
     * two) hide the latency, one does not. */
    at_attention_cost_in two = base(32, 4096), one = two;
    two.threads = one.threads = 128; /* 64 accumulators a thread */
    two.local_bytes = 100 * 1024;    /* 227 KiB a unit: two */
    one.local_bytes = 120 * 1024;    /* one */
    assert_same(cost(one, d) / cost(two, d), 2.0);
    /* 8 warps a group: one is enough. */
    two.threads = one.threads = 256;
    assert_same(cost(one, d), cost(two, d));
    /* Without the opt-in limit a unit has twice the static limit (96 KiB): one group of 60. */
    at_device_info old = d;
    old.max_shared_optin = old.local_mem_bytes;
    two.threads = 128;
    two.local_bytes = 48 * 1024;
    at_attention_cost_in big = two;
    big.local_bytes = 60 * 1024;
    assert_same(cost(big, old) / cost(two, old), 2.0);
    /* A grid of fewer blocks than units cannot fill a unit with groups, whatever the limits. */
    at_attention_cost_in few = base(P_GPU, 64);
    few.threads = 128;
    at_attention_cost_in fewer = few;
    fewer.local_bytes = 200 * 1024;
    assert_same(cost(few, d), cost(fewer, d));
}

/* ---- causal ------------------------------------------------------------------------------- */

static void test_causal_about_half(void **state)
{
    (void)state;
    at_device_info d = cpu();
    at_attention_cost_in full = base(1, 4096), causal = full;
    causal.causal = 1;
    double r = cost(causal, d) / cost(full, d);
    /* 64 query blocks see 1, 2, ..., 64 of the 64 tiles: 2080 / 4096, plus the fixed Q and O
     * bytes every block has either way. */
    assert_true(r > 0.5 && r < 0.52);
    /* Keys longer than queries (bottom-right): every row sees the extra keys, more than half. */
    at_attention_cost_in longer = causal;
    longer.skv = 8192;
    at_attention_cost_in longer_full = longer;
    longer_full.causal = 0;
    r = cost(longer, d) / cost(longer_full, d);
    assert_true(r > 0.74 && r < 0.76); /* (4096 + 2048) / 8192 */
}

/* ---- bytes against the balance, per-tile overhead ----------------------------------------- */

static void test_kv_rereads(void **state)
{
    (void)state;
    at_device_info d = gpu();
    /* A query block re-reads all of K and V: 16 rows a block read them 4 times as often as 64,
     * and at 16 rows f32 the block is memory-bound (4 * 16 FLOPs per 8 bytes of a key's
     * element, against 20 a byte), at 64 it is not. 128 threads at 16 rows (8 warps at two
     * groups a unit), 256 at 64: 16 and 32 accumulators. */
    at_attention_cost_in narrow = base(32, 4096), wide = narrow;
    narrow.bq = 16;
    narrow.threads = 128;
    assert_more(cost(narrow, d), cost(wide, d));
    /* f16 halves a memory-bound block's time, not a compute-bound one's. */
    at_attention_cost_in narrow16 = narrow, wide16 = wide;
    narrow16.elem_bytes = wide16.elem_bytes = 2;
    assert_more(cost(narrow, d), 1.9 * cost(narrow16, d));
    assert_true(cost(wide16, d) > 0.9 * cost(wide, d));
}

static void test_small_bkv_rescales_more(void **state)
{
    (void)state;
    at_device_info d = cpu();
    double prev = 0;
    for (int64_t bkv = 128; bkv >= 8; bkv /= 2) {
        at_attention_cost_in c = base(1, 1024);
        c.bkv = bkv;
        double y = cost(c, d);
        if (prev) assert_more(y, prev);
        prev = y;
    }
    /* The overhead is a share of the tile: 16 keys pay (16 + 4) / 16 against (64 + 4) / 64 for
     * the tile work, which is most of the block's. */
    at_attention_cost_in k16 = base(1, 1024), k64 = k16;
    k16.bkv = 16;
    double r = cost(k16, d) / cost(k64, d);
    assert_true(r > 1.1 && r < (20.0 / 16) / (68.0 / 64) + 1e-9);
}

/* ---- split-KV ----------------------------------------------------------------------------- */

static void test_split_wins_on_decode(void **state)
{
    (void)state;
    at_device_info d = gpu();
    /* 32 blocks on 132 units, each reading all 8192 keys: splitting the keys spreads the reads
     * over more units. */
    double one = cost(decode(1), d);
    assert_more(one, cost(decode(2), d));
    assert_more(cost(decode(2), d), cost(decode(4), d));
    assert_more(cost(decode(4), d), cost(decode(8), d));
    assert_more(one, 4 * cost(decode(8), d));
    /* Past the units the splits only add combining: 32 x 64 blocks are 16 a unit. */
    assert_more(cost(decode(64), d), cost(decode(16), d));
}

static void test_split_loses_on_prefill(void **state)
{
    (void)state;
    at_device_info d = gpu();
    /* Batch 4 x 32 heads at 4096: 8192 query blocks already fill the units many times over;
     * splitting only adds partials, fences and the combine. */
    at_attention_cost_in c = base(128, 4096);
    double one = cost(c, d);
    for (int64_t split = 2; split <= 16; split *= 2) {
        c.split = split;
        assert_more(cost(c, d), one);
    }
    c.causal = 1;
    c.split = 1;
    one = cost(c, d);
    c.split = 4;
    assert_more(cost(c, d), one);
}

static void test_split_partials_and_combine(void **state)
{
    (void)state;
    /* One CPU core: splitting spreads nothing, so what a split costs shows alone. Each split's
     * f32 partial (BQ x (d + 2)) is written, read by the combine and cleared: at least three
     * passes over its bytes at the balance (8 FLOP/byte), a split more. */
    at_device_info d = cpu();
    at_attention_cost_in c = decode(1);
    c.bh = 1;
    c.skv = 4096;
    c.elem_bytes = 4;
    c.vw = 8;
    c.split = 4;
    double four = cost(c, d);
    c.split = 8;
    double eight = cost(c, d);
    double partial = 16.0 * (128 + 2) * 4;
    assert_true((eight - four) / 4 >= 3 * partial * 8);
}

/* ---- vector width ------------------------------------------------------------------------- */

static void test_vector_width(void **state)
{
    (void)state;
    at_device_info d = gpu(), h = cpu();
    at_attention_cost_in c = base(32, 1024);
    double w[5];
    for (int i = 0; i < 5; i++) {
        c.vw = (int64_t)1 << i;
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
    assert_same(w[3], w[4]);
    c.vw = 0; /* none given: as 1 */
    assert_same(cost(c, h), w[0]);
}

/* ---- the prior over a space --------------------------------------------------------------- */

static const char *const TINY_ATTENTION = "name: tiny_attention\n"
                                          "kernel: tiny\n"
                                          "source: tiny.cl\n"
                                          "problem: [sq, skv, d, causal, bh, group, big]\n"
                                          "device: [local_mem_bytes]\n"
                                          "parameters:\n"
                                          "  BQ: [16, 32, 64, 128]\n"
                                          "  BKV: [16, 32, 64, 128]\n"
                                          "  SPLIT: [1, 2, 4, 8, 16]\n"
                                          "  WARPS: [2, 4, 8]\n"
                                          "  VW: [1, 4]\n"
                                          "derived:\n"
                                          "  THREADS: 32 * WARPS\n"
                                          "  SMEM_BYTES: 4 * d * (BQ + 2 * BKV)\n"
                                          "constraints:\n"
                                          "  - SMEM_BYTES <= device.local_mem_bytes\n"
                                          "  - BQ * d / THREADS <= 256\n"
                                          "launch:\n"
                                          "  global: [ceil_div(sq, BQ) * THREADS, bh, SPLIT]\n"
                                          "  local: [THREADS, 1, 1]\n";

typedef struct loaded {
    at_space *s;
    int64_t *cfgs;
    size_t n;
    double *prior;
} loaded;

/* yaml bound to an attention problem (f16 where it declares dt) on a 227 KiB device, its valid
 * configs, and a prior array of one value a config, each `fill`. */
static loaded load(const char *yaml, int64_t sq, int64_t skv, int64_t hd, int64_t causal,
                   int64_t bh, int64_t group, double fill)
{
    loaded l = {0};
    at_status st = at_space_load(yaml, strlen(yaml), &l.s);
    if (st != AT_OK) fail_msg("load: %s", at_errmsg());
    /* dt (f16) and the device's local memory only where the yaml declares them. */
    const char *names[] = {"sq",    "skv", "d",  "causal",         "bh",
                           "group", "big", "dt", "local_mem_bytes"};
    int64_t values[] = {sq, skv, hd, causal, bh, group, 0, 0, 227 * 1024};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        at_status st = at_space_set(l.s, names[i], values[i]);
        if (i < 7) assert_int_equal(st, AT_OK);
    }
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

/* The model's input for config c of TINY_ATTENTION (parameters BQ BKV SPLIT WARPS VW). */
static at_attention_cost_in tiny_in(const int64_t *c, int64_t sq, int64_t skv, int64_t hd,
                                    int64_t causal, int64_t bh, int64_t elem_bytes)
{
    return (at_attention_cost_in){.sq = sq,
                                  .skv = skv,
                                  .d = hd,
                                  .causal = causal,
                                  .bh = bh,
                                  .bq = c[0],
                                  .bkv = c[1],
                                  .split = c[2],
                                  .threads = 32 * c[3],
                                  .local_bytes = 4 * hd * (c[0] + 2 * c[1]),
                                  .vw = c[4],
                                  .elem_bytes = elem_bytes};
}

/* The config of l with the lowest prior. */
static const int64_t *best(const loaded *l)
{
    size_t lo = 0;
    for (size_t i = 1; i < l->n; i++)
        if (l->prior[i] < l->prior[lo]) lo = i;
    return l->cfgs + lo * l->s->nparams;
}

static void test_prior_fills_every_config(void **state)
{
    (void)state;
    at_device_info d = gpu();
    loaded l = load(TINY_ATTENTION, 1000, 1333, 64, 1, 24, 3, NAN);
    assert_true(l.n > 100);
    assert_int_equal(at_attention_cost_prior(l.s, &d, l.cfgs, l.n, l.prior), AT_OK);
    size_t lo = 0, hi = 0;
    for (size_t i = 0; i < l.n; i++) {
        assert_true(isfinite(l.prior[i]) && l.prior[i] > 0);
        if (l.prior[i] < l.prior[lo]) lo = i;
        if (l.prior[i] > l.prior[hi]) hi = i;
        at_attention_cost_in in = tiny_in(l.cfgs + i * l.s->nparams, 1000, 1333, 64, 1, 24, 4);
        assert_same(l.prior[i], at_attention_cost(&in, &d));
    }
    assert_more(l.prior[hi], l.prior[lo]); /* it ranks */
    unload(&l);
}

/* The best-ranked config of a whole space: full occupancy and SPLIT > 1 on decode, SPLIT 1 on
 * prefill. */
static void test_prior_picks_split_for_decode(void **state)
{
    (void)state;
    at_device_info d = gpu();
    loaded dec = load(TINY_ATTENTION, 1, 8192, 128, 0, 32, 4, NAN);
    assert_int_equal(at_attention_cost_prior(dec.s, &d, dec.cfgs, dec.n, dec.prior), AT_OK);
    const int64_t *b = best(&dec);
    assert_true(b[2] > 1);
    assert_int_equal(b[0], 16); /* the fewest padded rows */
    unload(&dec);

    loaded pre = load(TINY_ATTENTION, 4096, 4096, 128, 0, 128, 1, NAN);
    assert_int_equal(at_attention_cost_prior(pre.s, &d, pre.cfgs, pre.n, pre.prior), AT_OK);
    b = best(&pre);
    assert_int_equal(b[2], 1);
    assert_int_equal(b[4], 4); /* float4 */
    /* Full occupancy: the best config keeps at least 8 warps resident a unit. */
    at_attention_cost_in in = tiny_in(b, 4096, 4096, 128, 0, 128, 4);
    int64_t warps = in.threads / 32, by_smem = (227 * 1024) / in.local_bytes;
    assert_true(warps * (by_smem < 64 / warps ? by_smem : 64 / warps) >= 8);
    unload(&pre);
}

/* With the 16-bit problem variable dt, 2 bytes an element; without SPLIT and VW, 1 each;
 * LOCAL_BYTES read like SMEM_BYTES. */
static void test_prior_reads_what_the_space_has(void **state)
{
    (void)state;
    const char *yaml = "name: tiny_attention16\n"
                       "kernel: tiny\n"
                       "source: tiny.cl\n"
                       "problem: [sq, skv, d, causal, bh, group, big, dt]\n"
                       "parameters:\n"
                       "  BQ: [16, 64]\n"
                       "  BKV: [32, 64]\n"
                       "derived:\n"
                       "  LOCAL_BYTES: 2 * d * (BQ + 2 * BKV)\n"
                       "launch:\n"
                       "  global: [ceil_div(sq, BQ) * 128, bh]\n"
                       "  local: [128, 1]\n";
    at_device_info d = gpu();
    loaded l = load(yaml, 300, 300, 64, 0, 8, 1, NAN);
    assert_int_equal(l.n, 4);
    assert_int_equal(at_attention_cost_prior(l.s, &d, l.cfgs, l.n, l.prior), AT_OK);
    for (size_t i = 0; i < l.n; i++) {
        const int64_t *c = l.cfgs + i * l.s->nparams;
        at_attention_cost_in in = {.sq = 300,
                                   .skv = 300,
                                   .d = 64,
                                   .bh = 8,
                                   .bq = c[0],
                                   .bkv = c[1],
                                   .split = 1,
                                   .threads = 128,
                                   .local_bytes = 2 * 64 * (c[0] + 2 * c[1]),
                                   .vw = 1,
                                   .elem_bytes = 2};
        assert_same(l.prior[i], at_attention_cost(&in, &d));
    }
    unload(&l);
}

static void test_prior_needs_bq_and_bkv(void **state)
{
    (void)state;
    const char *yaml = "name: no_bq\n"
                       "kernel: tiny\n"
                       "source: tiny.cl\n"
                       "problem: [sq, skv, d, causal, bh, group, big]\n"
                       "parameters:\n"
                       "  ROWS: [16, 64]\n"
                       "  BKV: [32, 64]\n"
                       "  SPLIT: [1, 2]\n"
                       "launch:\n"
                       "  global: [ceil_div(sq, ROWS) * 64, bh, SPLIT]\n"
                       "  local: [64, 1, 1]\n";
    at_device_info d = gpu();
    loaded l = load(yaml, 256, 256, 64, 0, 4, 1, -1);
    assert_int_equal(at_attention_cost_prior(l.s, &d, l.cfgs, l.n, l.prior), AT_ERR_UNSUPPORTED);
    assert_non_null(strstr(at_errmsg(), "no BQ and BKV"));
    for (size_t i = 0; i < l.n; i++) assert_true(l.prior[i] == -1); /* untouched */
    assert_int_equal(at_attention_cost_prior(l.s, &d, l.cfgs, 0, l.prior), AT_OK);
    unload(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_block_quantization),
        cmocka_unit_test(test_blocks_over_units),
        cmocka_unit_test(test_occupancy_hides_latency),
        cmocka_unit_test(test_causal_about_half),
        cmocka_unit_test(test_kv_rereads),
        cmocka_unit_test(test_small_bkv_rescales_more),
        cmocka_unit_test(test_split_wins_on_decode),
        cmocka_unit_test(test_split_loses_on_prefill),
        cmocka_unit_test(test_split_partials_and_combine),
        cmocka_unit_test(test_vector_width),
        cmocka_unit_test(test_prior_fills_every_config),
        cmocka_unit_test(test_prior_picks_split_for_decode),
        cmocka_unit_test(test_prior_reads_what_the_space_has),
        cmocka_unit_test(test_prior_needs_bq_and_bkv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
