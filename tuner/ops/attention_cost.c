/* attention_cost.c — the analytic attention cost model (see attention_cost.h): a per-unit
 * roofline over query-block quantization, the causal mask, split-KV and the blocks' spread over
 * the compute units, used like the GEMM model to order the first candidates of the model-based
 * search (docs/search.md). It ranks; it does not predict microseconds. */
#include "tuner/ops/attention_cost.h"

#include "tuner/ops/cost.h"

#include <math.h>

/* The online softmax's work per K/V tile besides the tile's own FLOPs (rescaling the BQ x d
 * accumulator, the row max and sum, the barrier), in keys' worth: a tile of BKV keys costs as
 * much as BKV + KV_OVERHEAD keys, so BKV = 16 pays 25 % and BKV = 64 about 6 %. */
#define KV_OVERHEAD 4.0
/* A split block's fence and counter increment, in tiles' overhead (beside its partial's bytes). */
#define SPLIT_SYNC 2.0
/* Warps a GPU unit needs resident to hide the latency of its loads (two per scheduler). */
#define WARPS_TO_HIDE 8.0

static double ceil_div(double a, double b) { return ceil(a / b); }

double at_attention_cost(const at_attention_cost_in *c, const at_device_info *d)
{
    const double P = d->compute_units > 0 ? (double)d->compute_units : 1;
    const double warp = d->warp_size > 1 ? (double)d->warp_size : 1;
    const int cpu = d->is_cpu || warp == 1;
    const double sq = c->sq > 0 ? (double)c->sq : 1, skv = c->skv > 0 ? (double)c->skv : 1;
    const double hd = c->d > 0 ? (double)c->d : 1, bh = c->bh > 0 ? (double)c->bh : 1;
    const double bq = c->bq > 0 ? (double)c->bq : 1, bkv = c->bkv > 0 ? (double)c->bkv : 1;
    const double split = c->split > 0 ? (double)c->split : 1;
    const double threads = c->threads > 0 ? (double)c->threads : 1;
    const double esize = c->elem_bytes > 0 ? (double)c->elem_bytes : 4;
    /* FLOPs per byte where a unit's compute and its share of the bandwidth are even (as in the
     * GEMM model: ~20 on GPUs, ~8 on CPUs). */
    const double balance = cpu ? 8 : 20;

    const double qb = ceil_div(sq, bq), tiles = ceil_div(skv, bkv);
    const double per_split = ceil_div(tiles, split); /* tiles in each split's share */
    const double off = skv - sq;                     /* causal: bottom-right alignment */
    const double tile_flops = 4.0 * bq * hd * (bkv + KV_OVERHEAD); /* QK^T and PV, padded */
    /* What every block reads and writes besides K and V: its Q tile, then O (no split) or
     * its f32 partial (O unnormalised, row max, row sum) and its fence and counter. */
    const double q_bytes = bq * hd * esize, o_bytes = bq * hd * esize;
    const double part_bytes = bq * (hd + 2) * 4;
    const double fixed =
        split > 1 ? (q_bytes + part_bytes) * balance + SPLIT_SYNC * 4.0 * bq * hd * KV_OVERHEAD
                  : (q_bytes + o_bytes) * balance;
    /* The block of a query block that arrives last also combines the splits: reads every
     * partial, writes O and clears the partials (f32 writes), and sums split rows of d. */
    const double combine =
        split > 1 ? (2 * split * part_bytes + o_bytes) * balance + 2.0 * split * bq * hd : 0;

    /* The blocks of one (batch, head); every head has the same. A block's time is the larger
     * of its FLOPs and its bytes at the unit's share of the bandwidth. */
    double sum = 0, maxw = 0;
    for (double i = 0; i < qb; i++) {
        /* Keys the block's last row sees: all of them, or up to the causal diagonal. */
        double last = fmin((i + 1) * bq, sq);
        double kend = c->causal ? fmin(skv, fmax(0, last + off)) : skv;
        double vis_tiles = ceil_div(kend, bkv), longest = 0;
        for (double s = 0; s < split; s++) {
            double t0 = s * per_split, t1 = fmin(t0 + per_split, vis_tiles);
            double nt = fmax(0, t1 - t0);
            double keys = fmax(0, fmin(t1 * bkv, kend) - t0 * bkv); /* read, not padded */
            double w = fmax(nt * tile_flops, keys * hd * esize * 2 * balance) + fixed;
            sum += w;
            longest = fmax(longest, w);
        }
        sum += combine;
        maxw = fmax(maxw, longest + combine);
    }
    sum *= bh;
    const double blocks = bh * qb * split;

    /* The busiest unit: the blocks spread evenly (a unit takes ceil(blocks / P) of the mean
     * block), but no unit finishes before the longest block (causal and split make them
     * uneven). */
    double T = fmax(ceil_div(blocks, P) * (sum / blocks), maxw);

    /* Occupancy (GPU): groups resident a unit, by threads (64 warps a unit, at most 32 groups)
     * and by local memory (the unit's opt-in limit, or twice the per-group static limit), and
     * of those only as many as the grid gives each unit; fewer than WARPS_TO_HIDE resident
     * warps leave the unit waiting on memory. A CPU core runs one group at a time. */
    double hide = 1;
    if (!cpu) {
        double warps = ceil_div(threads, warp);
        double unit_local = fmax(2.0 * (double)d->local_mem_bytes, (double)d->max_shared_optin);
        double by_threads = floor(64 / warps);
        double by_local =
            c->local_bytes > 0 && unit_local > 0 ? floor(unit_local / (double)c->local_bytes) : 32;
        double per_cu = fmax(1, fmin(fmin(by_threads, by_local), 32));
        double resident = fmin(per_cu, ceil_div(blocks, P));
        hide = fmin(1, resident * warps / WARPS_TO_HIDE);
    }

    /* Accumulators a thread (BQ x d of O over the threads): few cannot hide latency, many
     * spill registers (GPU). */
    double acc = bq * hd / threads;
    double per_thread = acc < 8 ? sqrt(8 / acc) : 1;
    if (!cpu && acc > 128) per_thread *= acc / 128;
    /* Threads that do not fill whole warps, or too few warps to switch between (GPU). */
    double lanes = 1;
    if (!cpu) {
        lanes = ceil_div(threads, warp) * warp / threads;
        if (threads < 2 * warp) lanes *= 2 * warp / threads;
    }
    /* Narrow accesses cost more instructions per byte. */
    double vw = c->vw > 0 ? (double)c->vw : 1;
    double vec = 1 + 0.15 * (log2(cpu ? 8 : 4) - fmin(log2(vw), log2(cpu ? 8 : 4)));

    return T / hide * per_thread * lanes * vec;
}

at_status at_attention_cost_prior(const at_space *s, const at_device_info *d,
                                  const int64_t *configs, size_t n, double *out)
{
    if (n == 0) return AT_OK;
    int64_t v;
    if (at_space_value(s, configs, "BQ", &v) != AT_OK ||
        at_space_value(s, configs, "BKV", &v) != AT_OK)
        return at_fail(AT_ERR_UNSUPPORTED, "the %s space has no BQ and BKV: no cost model",
                       s->name);
    for (size_t i = 0; i < n; i++) {
        const int64_t *cfg = configs + i * s->nparams;
        at_attention_cost_in c = {0};
        at_space_value(s, cfg, "sq", &c.sq);
        at_space_value(s, cfg, "skv", &c.skv);
        at_space_value(s, cfg, "d", &c.d);
        at_space_value(s, cfg, "causal", &c.causal);
        at_space_value(s, cfg, "bh", &c.bh);
        at_space_value(s, cfg, "BQ", &c.bq);
        at_space_value(s, cfg, "BKV", &c.bkv);
        if (at_space_value(s, cfg, "SPLIT", &c.split) != AT_OK) c.split = 1;
        if (at_space_value(s, cfg, "VW", &c.vw) != AT_OK) c.vw = 1;
        const at_cost_block b = at_cost_block_of(s, cfg);
        c.local_bytes = b.local_bytes;
        c.elem_bytes = b.elem_bytes;
        c.threads = b.threads;
        out[i] = at_attention_cost(&c, d);
    }
    at_errclear();
    return AT_OK;
}
