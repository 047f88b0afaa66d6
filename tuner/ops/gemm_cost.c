/* gemm_cost.c — the analytic GEMM cost model (see gemm_cost.h): a roofline over tile
 * quantization, waves of blocks and occupancy, used to order the first candidates of the
 * model-based search (not as a feature of its surrogate: docs/search.md). It ranks; it does not
 * predict microseconds, and the measurements override it as they arrive. */
#include "tuner/ops/gemm_cost.h"

#include "tuner/ops/cost.h"

#include <math.h>

static double ceil_div(double a, double b) { return ceil(a / b); }

/* An operand larger than the L2, read from farther out by a pack: FAR cycles a cache line (~32
 * bytes a cycle from L3 with the template's software prefetch; 8 cycles overrated the cost
 * against the measurements) for its `elems` floats, and a new page for each of its `rows`
 * stored rows when they are 4 KiB or more apart (leading dimension ld floats). */
#define FAR 2.0
static double far_read(double elems, double rows, double ld)
{
    return elems / 16 * FAR + rows * (ld * 4 >= 4096 ? 2 : 0);
}

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

double at_gemm_cpu_cost(const at_gemm_cpu_cost_in *c, const at_device_info *d)
{
    const double P = d->compute_units > 0 ? (double)d->compute_units : 1;
    const double native = d->vector_width > 0 ? (double)d->vector_width : 8;
    const double l1 = d->l1_bytes > 0 ? (double)d->l1_bytes : 32768;
    const double l2 = d->core_l2_bytes > 0 ? (double)d->core_l2_bytes : 1048576;
    const double vw = (double)c->vw, rs = (double)c->rs, nv = (double)c->nv;
    const double kc = (double)c->kc, mt = (double)c->mt, k = (double)c->k;
    const double nt = c->nt > 1 ? (double)c->nt : 1;
    const double mb = rs * mt, nb = c->dot ? nv : nv * vw;
    const double split = fmax(1, vw / native); /* a vector wider than the hardware's */
    const double regs = native >= 16 ? 32 : 16;
    /* Work: strips past M are skipped, columns are padded to the work-item's block; work-items
     * are scheduled dynamically over the cores, the last round partly idle. */
    const double rows_all = ceil_div((double)c->m, rs) * rs;
    const double items_all = ceil_div((double)c->m, mb) * ceil_div((double)c->n, nb * nt);
    const double rounds_all = ceil_div(items_all, P);

    if (c->dot) {
        /* Dot products along K: per VW k-values RS + NV vector loads (contiguous runs of A's
         * rows and B's rows), RS * NV FMAs, no packing; the lanes are summed once per output. */
        const double vsteps = rows_all / rs * (ceil_div((double)c->n, nv)) * ceil_div(k, vw);
        const double live = (rs * nv + rs + nv) * split;
        double loads = (rs + nv) * split / 2 + (live > regs ? live - regs : 0);
        if (rs + nv > 16) loads += (rs + nv - 16) / 2; /* more streams than prefetchers track */
        double step = fmax(fmax(rs * nv * split / 2, loads), 4.0) + 1.0 / (double)c->uk;
        step += rs * nv * vw / 2 / ceil_div(k, vw); /* the lane sums */
        /* K runs of RS + NV rows past L1 are re-read from L2 (a line per vector load) */
        if ((rs + nv) * k * 4 > l1) step += (rs + nv) * split * 0.25;
        return vsteps * step / (items_all / rounds_all);
    }

    const double steps = rows_all / rs * ceil_div((double)c->n, nb) * k; /* over all of C */

    /* One k-step of the micro-kernel, in cycles: RS * NV FMAs (each VW / native hardware
     * vectors wide, 2 FMA ports), RS broadcasts + NV vector loads (2 load ports), and the FMA
     * latency (4 cycles) that RS * NV independent accumulators must cover on 2 ports. */
    const double live = rs * nv * split + nv * split + 1;
    double fma = rs * nv * split / 2;
    double loads = (rs + nv * split) / 2;
    if (live > regs) loads += (live - regs); /* accumulators spilled: a load and store each */
    if (!c->pa && !c->ta && rs > 10) loads += (rs - 10) / 2; /* row pointers past the GPRs */
    double step = fmax(fmax(fma, loads), 4.0); /* each accumulator: one FMA per step */
    step += 0.25 / (double)c->uk;              /* loop overhead (mostly on other ports) */

    /* In-place (unpacked) operands: a strided walk costs a cache line, and from 4 KiB strides a
     * page, per k-step; power-of-two row strides put the RS rows of A in one L1 set. */
    const double lda = c->ta ? (double)c->m : k, ldb = c->tb ? k : (double)c->n;
    if (!c->pb) step += (ldb * 4 >= 4096 ? 3 : 1) * nv * split * 0.5;
    if (!c->pa && c->ta) step += lda * 4 >= 4096 ? 3 : 1;
    if (!c->pa && !c->ta && fmod(lda * 4, 4096) == 0 && rs > 8) step += rs - 8;

    /* Packing, per K block of a work-item: the A panel (KC x MB copies) once, and for each of
     * its NT column strips the B panel (KC x NB; when tb a transpose of VW x VW blocks in
     * registers: log2(VW) shuffles per vector), over the k-steps of its MT x NT strips inside M
     * and N. An operand larger than the L2 is read from farther out (far_read). That traffic
     * is what MB (B panels packed M / MB times) and NC = NB * NT (A panels N / NC times)
     * divide. */
    const double kb = fmin(kc, k);
    const int a_far = (double)c->m * k * 4 > l2, b_far = k * (double)c->n * 4 > l2;
    double pack_a = 0, pack_b = 0;
    if (c->pb) {
        pack_b = kb * nb * (2.0 + (c->tb ? log2(vw) : 0)) / vw;
        if (b_far) /* rows of the stored B: KC of NB floats, or NB of KC */
            pack_b += far_read(kb * nb, c->tb ? nb : kb, ldb);
    }
    if (c->pa) {
        pack_a = kb * mb * 2.0 / vw;
        if (a_far) /* rows of the stored A: MB of KC floats, or KC of MB */
            pack_a += far_read(kb * mb, c->ta ? kb : mb, lda);
    }
    /* Shared packs (SP): a panel is packed once for all the work-items that read it (those
     * across N for an A panel, across M for a B panel), each of which then reads it from the
     * cache of the core that packed it: half a far read on average over two cores. */
    if (c->sp) {
        const double users_a = ceil_div((double)c->n, nb * nt),
                     users_b = ceil_div((double)c->m, mb);
        if (c->pa) pack_a = pack_a / users_a + kb * mb / 16 * FAR * 0.5;
        if (c->pb) pack_b = pack_b / users_b + kb * nb / 16 * FAR * 0.5;
    }
    /* micro-kernel k-steps that share one packing: the strips of a work-item inside M and N */
    const double mt_in = fmin(mt, ceil_div((double)c->m, rs));
    const double nt_in = fmin(nt, ceil_div((double)c->n, nb));
    step += (pack_a + nt_in * pack_b) / (mt_in * nt_in * kb);
    /* A read in place from beyond the L2: the same lines as its pack, each strip's RS rows once
     * per K block, but as broadcasts on the micro-kernel's path that wait on them (rated at 3x;
     * at 1024^3 nn the model's former first pick, A in place, ran at 250-257 GFLOP/s by CPU
     * time against 276-296 for the packed default) */
    if (!c->pa && a_far) step += rs * (kb / 16 * FAR * 3 + 2) / kb;

    /* The panels in cache: the B panel and a strip of A are read every k-step of a strip (L1),
     * the whole A panel once per strip (L2). */
    const double hot = 4 * kc * ((c->pb ? nb : 0) + (c->pa ? rs : 0));
    if (hot > l1) step *= 1 + 0.5 * (hot / l1 - 1);
    const double panels = 4 * kc * ((c->pa ? mb : 0) + (c->pb ? nb : 0));
    if (panels > l2) step *= 1 + (panels / l2 - 1);
    /* The K block's C tile is read and written once per K block: a short KC pays it often;
     * from farther out when the work-item's MB x NC block of C and the panels pass the L2. */
    step += rs * nv * 2 / fmin(kc, k);
    if (panels + 4 * mb * nb * nt > l2) step += rs * nv * split * FAR / fmin(kc, k);

    return steps * step / (items_all / rounds_all);
}

at_status at_gemm_cost_prior(const at_space *s, const at_device_info *d, const int64_t *configs,
                             size_t n, double *out)
{
    if (n == 0) return AT_OK;
    int64_t v;
    if (at_space_value(s, configs, "RS", &v) == AT_OK &&
        at_space_value(s, configs, "NV", &v) == AT_OK &&
        at_space_value(s, configs, "MT", &v) == AT_OK &&
        at_space_value(s, configs, "KC", &v) == AT_OK) {
        for (size_t i = 0; i < n; i++) {
            const int64_t *cfg = configs + i * s->nparams;
            at_gemm_cpu_cost_in c = {.uk = 1};
            const struct {
                const char *name;
                int64_t *out;
            } f[] = {{"m", &c.m},   {"n", &c.n},     {"k", &c.k},   {"ta", &c.ta},
                     {"tb", &c.tb}, {"VW", &c.vw},   {"RS", &c.rs}, {"NV", &c.nv},
                     {"MT", &c.mt}, {"KC", &c.kc},   {"PA", &c.pa}, {"PB", &c.pb},
                     {"UK", &c.uk}, {"DOT", &c.dot}, {"NT", &c.nt}, {"SP", &c.sp}};
            for (size_t j = 0; j < sizeof f / sizeof f[0]; j++)
                at_space_value(s, cfg, f[j].name, f[j].out);
            out[i] = at_gemm_cpu_cost(&c, d);
        }
        at_errclear();
        return AT_OK;
    }
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
