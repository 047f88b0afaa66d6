/* gemm_cost.c — the analytic GEMM cost model (see gemm_cost.h): a roofline over tile
 * quantization, waves of blocks and occupancy, used to order the first candidates of the
 * model-based search (not as a feature of its surrogate: docs/search.md). It ranks; it does not
 * predict microseconds, and the measurements override it as they arrive. */
#include "tuner/ops/gemm_cost.h"

#include "tuner/ops/cost.h"

#include <math.h>

static double ceil_div(double a, double b) { return ceil(a / b); }

double at_gemm_cost(const at_gemm_cost_in *c, const at_device_info *d)
{
    const double P = d->compute_units > 0 ? (double)d->compute_units : 1;
    const double warp = d->warp_size > 1 ? (double)d->warp_size : 1;
    const int cpu = d->is_cpu || warp == 1;
    double bm = (double)c->bm, bn = (double)c->bn,
           threads = c->threads > 0 ? (double)c->threads : 1;
    double mb = ceil_div((double)c->m, bm), nb = ceil_div((double)c->n, bn), blocks = mb * nb;
    double bk = c->bk > 0 ? (double)c->bk : 1, kpad = ceil_div((double)c->k, bk) * bk;

    /* Tile quantization: every block computes a full bm x bn x kpad tile. */
    double padded = 2.0 * blocks * bm * bn * kpad;

    /* Occupancy: work-groups resident per compute unit, limited by threads (a GPU holds about
     * 64 warps per unit; a CPU core runs one work-group at a time) and local memory (assume
     * a unit has twice the per-group limit, as most GPUs do). */
    double per_cu = 1;
    if (!cpu) {
        double by_threads = floor(64 * warp / (ceil_div(threads, warp) * warp));
        double by_local = c->local_bytes > 0 && d->local_mem_bytes > 0
                              ? floor(2.0 * (double)d->local_mem_bytes / (double)c->local_bytes)
                              : 32;
        per_cu = fmax(1, fmin(fmin(by_threads, by_local), 32));
    }
    /* Waves of blocks over the units: the last wave may leave units idle. */
    double slots = P * per_cu, waves = ceil_div(blocks, slots);
    double wave_eff = blocks / (waves * slots);

    /* Arithmetic intensity of a block against global memory, against the device's balance
     * (FLOPs per byte where compute and bandwidth are even: ~20 on GPUs, ~8 on CPUs). */
    double esize = c->elem_bytes > 0 ? (double)c->elem_bytes : 4;
    double intensity = 2.0 * bm * bn / ((bm + bn) * esize);
    double balance = cpu ? 8 : 20;
    double mem = fmax(1, balance / intensity);

    /* Work per thread: few outputs cannot hide latency, many spill registers (GPU). */
    double outputs = bm * bn / threads;
    double per_thread = outputs < 16 ? sqrt(16 / outputs) : 1;
    if (!cpu && outputs > 128) per_thread *= outputs / 128;
    /* Threads that do not fill whole warps, or too few warps to switch between (GPU). */
    double lanes = 1;
    if (!cpu) {
        lanes = ceil_div(threads, warp) * warp / threads;
        if (threads < 2 * warp) lanes *= 2 * warp / threads;
    }
    /* Narrow accesses cost more instructions per byte. */
    double vw = c->vw > 0 ? (double)c->vw : 1;
    double vec = 1 + 0.15 * (log2(cpu ? 8 : 4) - fmin(log2(vw), log2(cpu ? 8 : 4)));

    return padded / wave_eff * mem * per_thread * lanes * vec;
}

at_status at_gemm_cost_prior(const at_space *s, const at_device_info *d, const int64_t *configs,
                             size_t n, double *out)
{
    if (n == 0) return AT_OK;
    int64_t v;
    if (at_space_value(s, configs, "BM", &v) != AT_OK ||
        at_space_value(s, configs, "BN", &v) != AT_OK)
        return at_fail(AT_ERR_UNSUPPORTED, "the %s space has no BM and BN: no cost model", s->name);
    for (size_t i = 0; i < n; i++) {
        const int64_t *cfg = configs + i * s->nparams;
        at_gemm_cost_in c = {0};
        at_space_value(s, cfg, "m", &c.m);
        at_space_value(s, cfg, "n", &c.n);
        at_space_value(s, cfg, "k", &c.k);
        at_space_value(s, cfg, "BM", &c.bm);
        at_space_value(s, cfg, "BN", &c.bn);
        int64_t swap = 0; /* gemm_wgmma's SWAP: BM covers n and BN covers m */
        if (at_space_value(s, cfg, "SWAP", &swap) == AT_OK && swap) {
            const int64_t t = c.bm;
            c.bm = c.bn;
            c.bn = t;
        }
        if (at_space_value(s, cfg, "BK", &c.bk) != AT_OK) c.bk = 1;
        if (at_space_value(s, cfg, "VW", &c.vw) != AT_OK) c.vw = 1;
        const at_cost_block b = at_cost_block_of(s, cfg);
        c.local_bytes = b.local_bytes;
        c.elem_bytes = b.elem_bytes;
        c.threads = b.threads;
        out[i] = at_gemm_cost(&c, d);
    }
    at_errclear();
    return AT_OK;
}
