/* machine.cpp — the emulated machine of emu.h: shared memory, cp.async and wgmma as the PTX ISA
 * describes them, warp shuffles, the element conversions; linked into each emulator test. */
#define AT_EMU_MACHINE_ONLY
#include "emu.h"

#include <cmath>
#include <cstdio>

/* ---- the emulated machine ------------------------------------------------------------------- */
namespace at_emu
{

bool copy_at_issue;
int errors;
thread_local int tid;
thread_local block *blk;
thread_local std::vector<std::vector<cp_op>> cp_groups;
thread_local std::vector<cp_op> cp_open;
thread_local std::vector<std::vector<mma_op>> mma_groups;
thread_local std::vector<mma_op> mma_open;
thread_local unsigned last_wait = ~0u;
thread_local std::vector<std::vector<store_op>> bulk_groups;
thread_local std::vector<store_op> bulk_open;
thread_local std::vector<unsigned> unfenced_words;
thread_local int cluster_epoch;
void violation(const char *what)
{
    if (errors++ >= 5) return;
    if (tid >= 0)
        fprintf(stderr, "emulator: thread %d: %s\n", tid, what);
    else
        fprintf(stderr, "emulator: %s\n", what);
}

/* ---- the threads of a launch (../emu_fibers.h) ---- */

namespace
{
/* What each CUDA thread has of its own: the thread_local variables above, swapped in and out
 * with the fiber that runs. */
struct thread_state {
    int tid = 0;
    block *blk = nullptr;
    std::vector<std::vector<cp_op>> cp_groups;
    std::vector<cp_op> cp_open;
    std::vector<std::vector<mma_op>> mma_groups;
    std::vector<mma_op> mma_open;
    unsigned last_wait = ~0u;
    std::vector<std::vector<store_op>> bulk_groups;
    std::vector<store_op> bulk_open;
    std::vector<unsigned> unfenced_words;
    int cluster_epoch = 0;
    void swap_with_current()
    {
        std::swap(tid, at_emu::tid);
        std::swap(blk, at_emu::blk);
        cp_groups.swap(at_emu::cp_groups);
        cp_open.swap(at_emu::cp_open);
        mma_groups.swap(at_emu::mma_groups);
        mma_open.swap(at_emu::mma_open);
        std::swap(last_wait, at_emu::last_wait);
        bulk_groups.swap(at_emu::bulk_groups);
        bulk_open.swap(at_emu::bulk_open);
        unfenced_words.swap(at_emu::unfenced_words);
        std::swap(cluster_epoch, at_emu::cluster_epoch);
    }
};
} // namespace

void run_threads(int n, const std::function<void(int)> &body)
{
    std::vector<thread_state> state((size_t)n);
    if (!run_fibers(n, body, copy_at_issue,
                    [&](int i, bool) { state[(size_t)i].swap_with_current(); })) {
        const int t = tid;
        tid = -1; /* no one thread's doing */
        violation("deadlock: every thread waits, at a barrier some never reach or on an "
                  "mbarrier phase nobody completes (a wrong parity, a missing arrival)");
        tid = t;
    }
}

static unsigned char *smem_in(block &b, unsigned addr, unsigned bytes)
{
    static unsigned char sink[16];
    if ((size_t)addr + bytes > b.smem.size()) {
        violation("shared-memory access out of bounds");
        return sink;
    }
    return b.smem.data() + addr;
}

unsigned char *smem_at(unsigned addr, unsigned bytes) { return smem_in(*blk, addr, bytes); }

void do_copy(const cp_op &c)
{
    unsigned char *d = smem_at(c.dst, 16);
    memset(d, 0, 16);
    memcpy(d, c.src, (size_t)c.bytes);
}

/* PTX ISA, matrix descriptor: bits 0-13 start address >> 4, 16-29 leading dimension byte
 * offset >> 4, 32-45 stride dimension byte offset >> 4, 49-51 base offset, 62-63 swizzle mode
 * (0 none, 1 128B, 2 64B, 3 32B). Element (mn, k) of the 8x8 core-matrix canonical layouts:
 *   K-major, swizzled with SW bytes: rows mn at SW-byte pitch within 8-row groups, groups at
 *     SBO; k in 16-byte chunks, contiguous;
 *   MN-major, swizzled: mn contiguous within SW bytes, SW-byte blocks of mn at LBO; k rows at
 *     SW-byte pitch within 8-row groups, groups at SBO.
 * The swizzle XORs address bits [4, 4+log2(SW/16)) with bits [7, ...) of the shared address. */
namespace
{
/* A descriptor decoded once, for the 16 k of an MMA's rows (the emulator's hot loop). */
struct smem_matrix {
    unsigned start, lbo, sbo, sw, w;
    int mn_major, dt;
    bool ok;
    smem_matrix(unsigned long long desc, int mn_major_, int dt_)
        : start((unsigned)(desc & 0x3fff) << 4), lbo((unsigned)((desc >> 16) & 0x3fff) << 4),
          sbo((unsigned)((desc >> 32) & 0x3fff) << 4), mn_major(mn_major_), dt(dt_)
    {
        const unsigned base = (unsigned)((desc >> 49) & 7), mode = (unsigned)(desc >> 62);
        ok = base == 0 && mode != 0; /* else reported at the first read */
        sw = mode == 1 ? 128 : mode == 2 ? 64 : 32;
        w = sw / 16;
    }
    unsigned addr(int mn, int k) const
    {
        unsigned a;
        if (!mn_major)
            a = start + (mn % 8) * sw + (mn / 8) * sbo + (k / 8) * 16 + (k % 8) * 2;
        else
            a = start + (mn % 8) * 2 + ((mn / 8) % w) * 16 + (mn / (8 * w)) * lbo + (k % 8) * sw +
                (k / 8) * sbo;
        return a ^ ((a >> 7) & (w - 1)) << 4;
    }
    bool usable() const
    {
        if (!ok) violation("descriptor: base offset or non-swizzled layout not modelled");
        return ok;
    }
    float element(int mn, int k) const
    {
        unsigned short u;
        memcpy(&u, smem_at(addr(mn, k), 2), 2);
        return to_f32(u, dt);
    }
    float at(int mn, int k) const { return usable() ? element(mn, k) : NAN; }
    /* elements (mn, 0..15); K-major rows are two 16-byte chunks, which the swizzle moves whole */
    void row(int mn, float out[16]) const
    {
        if (!usable()) {
            std::fill(out, out + 16, NAN);
        } else if (mn_major) {
            for (int k = 0; k < 16; k++) out[k] = element(mn, k);
        } else {
            for (int c = 0; c < 2; c++) {
                unsigned short u[8];
                memcpy(u, smem_at(addr(mn, 8 * c), 16), 16);
                for (int k = 0; k < 8; k++) out[8 * c + k] = to_f32(u[k], dt);
            }
        }
    }
};
} // namespace

float operand(unsigned long long desc, int mn, int k, int mn_major, int dt)
{
    return smem_matrix(desc, mn_major, dt).at(mn, k);
}

/* PTX ISA, wgmma .m64nNk16 D fragment: thread t of the warpgroup holds, in register r, row
 * 16*(t/32) + (t%32)/4 + 8*((r/2)%2), column 8*(r/4) + 2*(t%4) + r%2. A is 64 x 16 (M-major
 * when ta), B is 16 x N read as N x 16 (N-major when tb). D = A*B, + D when scale-d (acc_in).
 * A from registers (rs): element (row, k) is half v = k%2 + 2*((row%16)/8) + 4*(k/8) (register
 * v/2, the low half when v is even) of lane 4*(row%8) + (k%8)/2 of warp row/16: CUTLASS cute
 * GMMA::ALayout_64x16, thread (4,8,4):(128,1,16), value (2,2,2):(64,8,512) over a 64 x 16
 * column-major A. Every thread of the warpgroup publishes its register pointer, so the
 * operation is warpgroup-collective here as it is on the device (.sync.aligned). */
static unsigned desc_start(unsigned long long desc) { return (unsigned)(desc & 0x3fff) << 4; }

void mma_queue(mma_op m)
{
    m.pending = 1;
    if (!m.rs) blk->mma_reads.insert(desc_start(m.da));
    blk->mma_reads.insert(desc_start(m.db));
    mma_open.push_back(m);
}

void do_mma(const mma_op &m)
{
    if (m.pending) {
        if (!m.rs) blk->mma_reads.erase(blk->mma_reads.find(desc_start(m.da)));
        blk->mma_reads.erase(blk->mma_reads.find(desc_start(m.db)));
    }
    const int t = tid % 128;
    float a[64][16], b[256][16]; /* the operands, read once per instance of a row/column */
    bool have_a[64] = {}, have_b[256] = {};
    if (m.rs) {
        if (blk->wg_bar.empty()) {
            violation("register-A wgmma without the block's collectives");
            return;
        }
        at_emu::barrier &bar = *blk->wg_bar[tid / 128];
        blk->areg[tid] = m.a;
        bar.arrive_and_wait();
        const int base = tid - t;
        for (int row = 0; row < 64; row++) {
            for (int k = 0; k < 16; k++) {
                const int lane = 4 * (row % 8) + (k % 8) / 2;
                const int v = k % 2 + 2 * ((row % 16) / 8) + 4 * (k / 8);
                const unsigned reg = blk->areg[base + 32 * (row / 16) + lane][v / 2];
                a[row][k] = to_f32((unsigned short)(v % 2 ? reg >> 16 : reg & 0xffffu), m.dt);
            }
            have_a[row] = true;
        }
        bar.arrive_and_wait(); /* nobody changes its registers before all have read them */
    }
    const smem_matrix ma(m.da, m.ta, m.dt), mb(m.db, m.tb, m.dt);
    for (int r = 0; r < m.n / 2; r++) {
        const int row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((r / 2) % 2);
        const int col = 8 * (r / 4) + 2 * (t % 4) + r % 2;
        if (!have_a[row]) ma.row(row, a[row]);
        if (!have_b[col]) mb.row(col, b[col]);
        have_a[row] = have_b[col] = true;
        float s = 0.0f;
        for (int k = 0; k < 16; k++) s += a[row][k] * b[col][k];
        m.d[r] = m.acc_in ? m.d[r] + s : s;
    }
}

/* ---- mbarriers and TMA (PTX ISA "Parallel Synchronization and Communication Instructions:
 * mbarrier", "cp.async.bulk.tensor"; the tensor map fields of cuTensorMapEncodeTiled) ---- */

/* The phase completes when no arrival is pending and no transaction byte outstanding; the next
 * one starts expecting `count` arrivals. */
static void mbar_check(mbar &b)
{
    note_progress();
    if (b.pending == 0 && b.tx == 0) {
        b.phase++;
        b.pending = b.count;
    }
}

static mbar *mbar_find(unsigned bar, block &in = *blk)
{
    auto it = in.mbars.find(bar);
    if (it == in.mbars.end()) {
        violation("mbarrier used before mbarrier.init");
        return nullptr;
    }
    return &it->second;
}

void mbar_init(unsigned bar, unsigned count)
{
    if (bar & 7) violation("mbarrier: misaligned");
    smem_at(bar, 8); /* in bounds */
    blk->mbars[bar] = mbar{(int)count, (int)count, 0, 0, {}};
}

/* Whether one of this thread's MMAs not yet performed reads shared memory in [lo, hi). */
static bool mma_pending_in(unsigned lo, unsigned hi)
{
    const auto in = [&](unsigned long long d) {
        const unsigned a = desc_start(d);
        return a >= lo && a < hi;
    };
    for (const auto &grp : mma_groups)
        for (const mma_op &m : grp)
            if ((!m.rs && in(m.da)) || in(m.db)) return true;
    for (const mma_op &m : mma_open)
        if ((!m.rs && in(m.da)) || in(m.db)) return true;
    return false;
}

/* An arrival on barrier bar of CTA `in` (this one's, or a peer's through a shared::cluster
 * address). A release (no tx) checks that none of this thread's MMAs still reads what the
 * barrier guards: the bytes its CTA's producer refilled after waiting on it, at the same offsets
 * as this thread's own stage (the CTAs of a cluster lay out their rings alike). */
static void arrive_in(block &in, unsigned bar, unsigned tx_bytes)
{
    if (tx_bytes == 0) { /* a consumer's release: none of its MMAs may still read the stage */
        std::pair<unsigned, unsigned> r(0, 0);
        auto it = in.guards.find(bar);
        if (it != in.guards.end()) r = it->second;
        if (r.second > r.first && mma_pending_in(r.first, r.second))
            violation("mbarrier arrival releases a stage that issued MMAs may still read");
    }
    mbar *b = mbar_find(bar, in);
    if (!b) return;
    if (b->pending <= 0) violation("mbarrier: more arrivals than expected in a phase");
    b->tx += tx_bytes;
    b->pending--;
    mbar_check(*b);
}

void mbar_arrive(unsigned bar, unsigned tx_bytes) { arrive_in(*blk, bar, tx_bytes); }

/* ---- clusters (PTX ISA "Distributed shared memory", mapa, barrier.cluster, the .multicast
 * form of cp.async.bulk.tensor) ---- */

/* A shared::cluster address: CTA rank's window at (rank + 1) << 24; below that, the executing
 * CTA's own shared memory (a shared::cta address is a valid shared::cluster one). */
static const unsigned cluster_window = 1u << 24;

unsigned mapa(unsigned addr, unsigned rank)
{
    if (addr >= cluster_window || (int)rank >= blk->nctas) {
        violation("mapa: not a shared::cta address, or no such CTA in the cluster");
        return addr;
    }
    return ((rank + 1) << 24) | addr;
}

/* Notes a write or arrival by this thread into CTA `to`: an error unless a cluster barrier
 * that `to` waits on follows it (checked when `to`'s threads leave, cluster_exit). */
static void remote_access(block &to)
{
    if (&to == blk) return;
    to.remote_epoch = std::max(to.remote_epoch, cluster_epoch);
}

void mbar_arrive_cluster(unsigned bar)
{
    block *to = blk;
    if (bar >= cluster_window) {
        const unsigned r = (bar >> 24) - 1;
        if ((int)r >= blk->nctas) {
            violation("mbarrier arrive: shared::cluster address of no CTA of the cluster");
            return;
        }
        to = blk->cluster[r];
        bar &= cluster_window - 1;
    }
    remote_access(*to);
    arrive_in(*to, bar, 0);
}

void cluster_sync()
{
    if (!blk->cluster_bar) {
        violation("barrier.cluster outside a cluster launch");
        return;
    }
    blk->cluster_bar->arrive_and_wait();
    cluster_epoch++;
}

void cluster_exit() { blk->exit_epoch = cluster_epoch; }

/* Run by one thread of each CTA after all of the cluster's threads have left the kernel. */
void cluster_check(block &b)
{
    if (b.remote_epoch >= b.exit_epoch)
        violation("a peer CTA wrote or arrived into this CTA's shared memory after the CTA's "
                  "last cluster barrier (it may have exited: barrier.cluster before exit)");
}

/* The box copy itself: row r, element c of the box from tensor element (c0 + c, c1 + r), zero
 * outside the tensor, to dst + (r * box0 + c) * esize with the swizzle applied to the absolute
 * shared address (as wgmma reads it), then the bytes complete on the barrier. */
static void tma_perform(const tma_op &op)
{
    const tmap &m = op.map;
    block &to = *op.to;
    for (int r = 0; r < m.box1; r++)
        for (int c = 0; c < m.box0; c++) {
            const int x = op.c0 + c, y = op.c1 + r;
            unsigned addr = op.dst + (unsigned)((r * m.box0 + c) * m.esize);
            if (m.swizzle) addr ^= ((addr >> 7) & (unsigned)(m.swizzle / 16 - 1)) << 4;
            unsigned char *d = smem_in(to, addr, (unsigned)m.esize);
            if (x >= 0 && x < m.dim0 && y >= 0 && y < m.dim1)
                memcpy(d, (const unsigned char *)m.base + y * m.stride1 + (long long)x * m.esize,
                       (size_t)m.esize);
            else
                memset(d, 0, (size_t)m.esize);
        }
}

void tma_load(tma_op op, unsigned mask)
{
    const tmap &m = op.map;
    const unsigned bytes = (unsigned)(m.box0 * m.box1 * m.esize);
    if ((op.dst & 127) || (m.swizzle && (op.dst & 1023)))
        violation("cp.async.bulk.tensor: shared destination misaligned for the swizzle");
    if (m.swizzle && m.box0 * m.esize != m.swizzle)
        violation("cp.async.bulk.tensor: box rows must span the swizzle here");
    if (m.stride1 % 16 || ((uintptr_t)m.base & 15))
        violation("tensor map: base or row stride not 16-byte aligned");
    if (mask >> blk->nctas)
        violation("cp.async.bulk.tensor: multicast to a CTA not in the cluster");
    if (last_wait != ~0u) { /* the barrier the issuer waited on guards what it now refills */
        auto it = blk->guards.find(last_wait);
        const unsigned end = op.dst + bytes;
        if (it == blk->guards.end())
            blk->guards[last_wait] = {op.dst, end};
        else
            it->second = {std::min(it->second.first, op.dst), std::max(it->second.second, end)};
    }
    /* the same offsets in each destination CTA: this one, or those of the multicast mask */
    for (int r = 0; r < blk->nctas; r++) {
        if (mask ? !(mask >> r & 1) : r != blk->rank) continue;
        block &to = blk->cluster ? *blk->cluster[r] : *blk;
        op.to = &to;
        remote_access(to);
        if (copy_at_issue) {
            auto it = to.mma_reads.lower_bound(op.dst);
            if (it != to.mma_reads.end() && *it < op.dst + bytes)
                violation("TMA refills shared memory that issued MMAs may still read");
        }
        mbar *b = mbar_find(op.bar, to);
        if (!b) continue;
        if (copy_at_issue) {
            tma_perform(op);
            b->tx -= bytes;
            mbar_check(*b);
        } else {
            b->queued.push_back(op);
        }
    }
}

void mbar_wait(unsigned bar, unsigned parity)
{
    last_wait = bar;
    for (;;) {
        mbar *b = mbar_find(bar);
        if (!b) return;
        if ((unsigned)(b->phase & 1) != (parity & 1)) return; /* that phase completed */
        /* copies late: they land only now, when the phase cannot complete without them (a
         * phase that completed without counting a copy's bytes does not wait for it) */
        for (const tma_op &op : b->queued) {
            tma_perform(op);
            b->tx -= (long long)op.map.box0 * op.map.box1 * op.map.esize;
        }
        if (!b->queued.empty()) {
            b->queued.clear();
            mbar_check(*b);
        }
        if ((unsigned)(b->phase & 1) != (parity & 1)) return; /* that phase completed */
        yield(); /* a phase nobody completes is a deadlock: run_threads reports it */
    }
}

/* ---- TMA stores (PTX ISA "cp.async.bulk.tensor", "cp.async.bulk.wait_group", the proxy
 * fence of "Memory Consistency Model: proxies") ---- */

void st_shared(unsigned dst, const void *src, unsigned bytes)
{
    if (dst % bytes) violation("st.shared: misaligned");
    for (const auto &r : blk->store_reads)
        if (dst < r.second && dst + bytes > r.first) {
            violation("st.shared over the source of a TMA store that has not read it "
                      "(no cp.async.bulk.wait_group.read, or no barrier after it)");
            break;
        }
    memcpy(smem_at(dst, bytes), src, bytes);
    if (blk->unfenced.size() >= (size_t)dst + bytes) {
        for (unsigned b = 0; b < bytes; b++) blk->unfenced[dst + b] = 1;
        unfenced_words.push_back(dst);
    }
}

/* The writer's st.shared become visible to the async proxy (the TMA's reads); each thread
 * clears only its own marks. */
void fence_proxy_async()
{
    for (unsigned a : unfenced_words)
        if (blk->unfenced.size() >= (size_t)a + 4) memset(&blk->unfenced[a], 0, 4);
    unfenced_words.clear();
}

static unsigned store_bytes(const tmap &m) { return (unsigned)(m.box0 * m.box1 * m.esize); }

/* The store's read of its shared source: row r, element c of the box from
 * src + (r * box0 + c) * esize, swizzled as tma_perform writes a load. */
static void store_read(store_op &op)
{
    const tmap &m = op.map;
    op.data.resize(store_bytes(m));
    for (int r = 0; r < m.box1; r++)
        for (int c = 0; c < m.box0; c++) {
            const unsigned o = (unsigned)((r * m.box0 + c) * m.esize);
            unsigned addr = op.src + o;
            if (m.swizzle) addr ^= ((addr >> 7) & (unsigned)(m.swizzle / 16 - 1)) << 4;
            memcpy(&op.data[o], smem_at(addr, (unsigned)m.esize), (size_t)m.esize);
        }
    op.read = true;
    auto it = std::find(blk->store_reads.begin(), blk->store_reads.end(),
                        std::make_pair(op.src, op.src + store_bytes(m)));
    if (it != blk->store_reads.end()) blk->store_reads.erase(it);
}

/* ... and its global write: tensor element (c0 + c, c1 + r), only inside the tensor. */
static void store_write(const store_op &op)
{
    const tmap &m = op.map;
    for (int r = 0; r < m.box1; r++)
        for (int c = 0; c < m.box0; c++) {
            const int x = op.c0 + c, y = op.c1 + r;
            if (x < 0 || x >= m.dim0 || y < 0 || y >= m.dim1) continue;
            memcpy((unsigned char *)m.base + y * m.stride1 + (long long)x * m.esize,
                   &op.data[(size_t)(r * m.box0 + c) * m.esize], (size_t)m.esize);
        }
}

void tma_store(const store_op &op0)
{
    store_op op = op0;
    const tmap &m = op.map;
    const unsigned bytes = store_bytes(m);
    if ((op.src & 127) || (m.swizzle && (op.src & 1023)))
        violation("cp.async.bulk.tensor store: shared source misaligned for the swizzle");
    if (m.swizzle && m.box0 * m.esize != m.swizzle)
        violation("cp.async.bulk.tensor store: box rows must span the swizzle here");
    if (m.stride1 % 16 || ((uintptr_t)m.base & 15))
        violation("tensor map: base or row stride not 16-byte aligned");
    smem_at(op.src, bytes); /* in bounds */
    /* ordered after the writers' barrier: what they wrote must have been fenced by then */
    if (blk->unfenced.size() >= (size_t)op.src + bytes)
        for (unsigned b = 0; b < bytes; b++)
            if (blk->unfenced[op.src + b]) {
                violation("TMA store reads shared memory written without fence.proxy.async");
                break;
            }
    if (copy_at_issue) {
        store_read(op);
        store_write(op);
        op.data.clear();
    } else {
        blk->store_reads.push_back({op.src, op.src + bytes});
    }
    bulk_open.push_back(std::move(op));
}

void bulk_wait(int n, bool read_only)
{
    const size_t done = bulk_groups.size() > (size_t)n ? bulk_groups.size() - (size_t)n : 0;
    for (size_t g = 0; g < done; g++)
        for (store_op &op : bulk_groups[g]) {
            if (!op.read) store_read(op);
            if (!read_only && !op.data.empty()) store_write(op);
        }
    if (!read_only) bulk_groups.erase(bulk_groups.begin(), bulk_groups.begin() + (long)done);
}

/* bar.sync id, n: the barrier is made for n threads the first time it is met. */
void bar_sync(int id, int n)
{
    auto &slot = blk->named[id];
    if (!slot) slot = std::make_unique<barrier>(n);
    slot->arrive_and_wait();
}

/* shfl.sync.bfly: every lane of the warp calls it; lane l gets the value of lane l ^ mask. */
float shfl_xor(float v, int mask)
{
    if (blk->warp_bar.empty()) {
        violation("shuffle without the block's collectives");
        return NAN;
    }
    at_emu::barrier &bar = *blk->warp_bar[tid / 32];
    blk->xchg[tid] = v;
    bar.arrive_and_wait();
    const float r = blk->xchg[tid ^ (mask & 31)];
    bar.arrive_and_wait();
    return r;
}

void block::collectives(int threads)
{
    warp_bar.clear();
    wg_bar.clear();
    for (int w = 0; w < (threads + 31) / 32; w++)
        warp_bar.push_back(std::make_unique<at_emu::barrier>(std::min(32, threads - 32 * w)));
    for (int g = 0; g < (threads + 127) / 128; g++)
        wg_bar.push_back(std::make_unique<at_emu::barrier>(std::min(128, threads - 128 * g)));
    xchg.assign(threads, 0.0f);
    areg.assign(threads, nullptr);
}

} // namespace at_emu
