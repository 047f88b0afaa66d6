/* emu.h — a host emulation of the PTX primitives gemm_wgmma.cu and attention_wgmma.cu use
 * (cp.async, wgmma with shared-memory matrix descriptors or with A from registers, warp
 * shuffles, ex2/lg2, the split-K atomics) and of the kernel dialect, so the templates' own index
 * math runs on the CPU, one fiber per CUDA thread (../emu_fibers.h).
 *
 * The models follow the PTX ISA (sections "Matrix Descriptor Format", "Shared Memory Matrix
 * Layout" with its swizzling modes, "Register Fragments: wgmma .m64nNk16 D"), written
 * independently of the template: a descriptor is decoded field by field, the element address
 * comes from the canonical K-major / MN-major layout of the swizzle mode, and the swizzle is
 * applied to that absolute shared address. Asynchrony is modelled at the extremes: a run either
 * performs cp.async copies when their group is waited for and wgmma reads at issue (a missing
 * wait shows as stale data), or copies at issue and wgmma reads when its group is waited for
 * (a stage refilled too early shows as wrong data). A register-A wgmma reads its A registers at
 * the same moment: at issue, or through pointers at the wait (registers changed before the wait
 * show as wrong data). Warpgroup-collective operations (register-A wgmma, whose A rows are
 * spread over the warpgroup's threads) and warp shuffles meet at per-warpgroup and per-warp
 * barriers. mbarriers (phases, pending arrivals, transaction bytes) and TMA box copies (swizzle,
 * zero fill) complete at issue or only when a thread waits on their barrier, by the same mode.
 * TMA stores (cp.async.bulk.tensor, shared to global) read shared memory and write global
 * memory at issue, or only at the bulk wait_group.read and wait_group that the issuing thread
 * runs (the source read at .read, the global write at the full wait), by the same mode; their
 * box is clipped at the tensor's bounds. Shared memory written with st.shared and not yet
 * published by the writer's fence.proxy.async is an error for a store that reads it, and so is
 * a shared write over the source of a store that has not read it yet.
 * The CTAs of a thread-block cluster run at once, each with its own shared memory: a
 * shared::cluster address is ((rank + 1) << 24) + the offset in CTA rank's window (mapa), a
 * plain shared address the executing CTA's own; multicast box copies land in every CTA of
 * their mask and complete on each one's barrier at the same offset; barrier.cluster is a
 * barrier of all the cluster's threads. A write or arrival into a peer CTA made after that
 * CTA's last cluster barrier (so possibly after it exited) is an error.
 * Included once per kernel instance, before the template, with the tuning parameters
 * defined. */
#ifndef AT_WGMMA_EMU_H
#define AT_WGMMA_EMU_H

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "../emu_f16.h"    /* to_f32, from_f32 */
#include "../emu_fibers.h" /* run_fibers, barrier, yield */

namespace at_emu
{

/* Runs body(0) .. body(n - 1) as the threads of a launch (../emu_fibers.h), each with its own
 * state below; a deadlock is a violation. Copies at issue run them from the last thread. */
void run_threads(int n, const std::function<void(int)> &body);

/* A 2-D tensor map as cuTensorMapEncodeTiled describes one: dimension 0 innermost. */
struct tmap {
    const void *base;
    int dim0, dim1;     /* elements */
    long long stride1;  /* bytes between rows (dimension 1) */
    int box0, box1;     /* the box, elements */
    int esize, swizzle; /* element bytes; swizzle span in bytes (0: none, 32, 64, 128) */
};
struct block;
struct tma_op {
    unsigned dst, bar;
    tmap map;
    int c0, c1;
    block *to; /* the CTA whose shared memory and barrier it completes on */
};
/* An mbarrier: arrivals expected per phase, still pending, transaction bytes outstanding, the
 * phase number; copies that complete on it, not yet performed (copies late). */
struct mbar {
    int count, pending, phase;
    long long tx;
    std::vector<tma_op> queued;
};

/* A TMA store: the box at (c0, c1) of the map from shared memory at src; its bytes once read
 * (copies at wait: at the issuer's wait_group.read), written to global memory at wait_group. */
struct store_op {
    tmap map;
    int c0, c1;
    unsigned src;
    std::vector<unsigned char> data;
    bool read;
};

struct block {
    std::vector<unsigned char> smem; /* the block's shared memory; address = offset */
    /* per byte of smem: written by st.shared and not yet fenced (fence.proxy.async) by its
     * writer; sized like smem by the instance that uses TMA stores */
    std::vector<unsigned char> unfenced;
    /* the shared ranges [first, second) of TMA stores issued and not yet read */
    std::vector<std::pair<unsigned, unsigned>> store_reads;
    std::map<unsigned, mbar> mbars; /* by shared address */
    /* start addresses of the operands of MMAs issued and not yet performed (MMAs at wait):
     * a TMA write over one of them is a stage refilled while its MMAs may still read it */
    std::multiset<unsigned> mma_reads;
    /* the shared bytes [first, second) TMA refilled after a wait on a barrier: what an
     * arrival on that barrier releases (an arrival with MMAs on them pending is early) */
    std::map<unsigned, std::pair<unsigned, unsigned>> guards;
    std::map<int, std::unique_ptr<barrier>> named; /* bar.sync ID, N (ID > 0) */
    barrier *bar;
    int group[3], groups[3];
    /* the thread-block cluster: its CTAs by rank, this one's rank, a barrier of all their
     * threads (barrier.cluster); the last cluster barrier (counted from 1 per run) after which
     * a peer wrote or arrived here, and the count this CTA's threads had passed at exit */
    block **cluster = nullptr;
    int nctas = 1, rank = 0;
    barrier *cluster_bar = nullptr;
    int remote_epoch = -1;
    int exit_epoch = 0;
    /* warp-collective operations, set up by collectives(): one barrier per warp and per
     * warpgroup, a shuffle slot and a published A-register pointer per thread */
    std::vector<std::unique_ptr<barrier>> warp_bar, wg_bar;
    std::vector<float> xchg;
    std::vector<const unsigned *> areg;
    void collectives(int threads);
};

struct cp_op {
    unsigned dst;
    const void *src;
    int bytes;
};
struct mma_op {
    float *d;
    unsigned long long da, db;
    int n, ta, tb, dt, acc_in;
    const unsigned *a;  /* register A (rs): the thread's 4 registers, read when performed */
    unsigned a_copy[4]; /* ... as they were at issue */
    int rs;
    int pending; /* queued: its operands are in the block's mma_reads until performed */
};

extern bool copy_at_issue; /* true: cp.async at issue, wgmma at wait; false: the reverse */
extern int errors;         /* contract violations seen (bad descriptor, misaligned cp.async...) */
/* the running CUDA thread's own state (run_threads swaps it with each fiber it runs) */
extern thread_local int tid;
extern thread_local block *blk;
extern thread_local std::vector<std::vector<cp_op>> cp_groups;
extern thread_local std::vector<cp_op> cp_open;
extern thread_local std::vector<std::vector<mma_op>> mma_groups;
extern thread_local std::vector<mma_op> mma_open;
extern thread_local unsigned last_wait; /* the barrier this thread waited on last */
extern thread_local std::vector<std::vector<store_op>> bulk_groups; /* TMA stores, committed */
extern thread_local std::vector<store_op> bulk_open;
extern thread_local std::vector<unsigned> unfenced_words; /* st.shared since the last fence */
extern thread_local int cluster_epoch; /* cluster barriers this thread has passed */

void violation(const char *what);
unsigned char *smem_at(unsigned addr, unsigned bytes); /* bounds-checked */
void do_copy(const cp_op &c);
void do_mma(const mma_op &m);
float operand(unsigned long long desc, int mn, int k, int mn_major, int dt);
void mbar_init(unsigned bar, unsigned count);
void mbar_arrive(unsigned bar, unsigned tx_bytes); /* one arrival, expecting tx_bytes more */
void mbar_wait(unsigned bar, unsigned parity);
void tma_load(tma_op op, unsigned mask); /* mask: multicast to these ranks; 0: this CTA */
unsigned mapa(unsigned addr, unsigned rank);
void mbar_arrive_cluster(unsigned bar); /* an arrival on a shared::cluster address */
void cluster_sync();
void cluster_exit();          /* a thread leaves the kernel */
void cluster_check(block &b); /* after the cluster's threads left: late writes into b */
void mma_queue(mma_op m);     /* an MMA performed at its wait */
void st_shared(unsigned dst, const void *src, unsigned bytes); /* generic-proxy shared store */
void fence_proxy_async();                                      /* fence.proxy.async.shared::cta */
void tma_store(const store_op &op);
void bulk_wait(int n, bool read_only); /* cp.async.bulk.wait_group[.read] n */
void bar_sync(int id, int n);
float shfl_xor(float v, int mask);

/* commit_group: the open operations become the newest group */
template <typename Op> void commit(std::vector<std::vector<Op>> &groups, std::vector<Op> &open)
{
    groups.push_back(open);
    open.clear();
}
/* wait_group n: performs the oldest groups until at most n are pending */
template <typename Op>
void drain(std::vector<std::vector<Op>> &groups, int n, void (*perform)(const Op &))
{
    while (groups.size() > (size_t)n) {
        for (const Op &o : groups.front()) perform(o);
        groups.erase(groups.begin());
    }
}

} // namespace at_emu

#ifndef AT_EMU_MACHINE_ONLY /* the test's own file wants the machine, not a kernel's macros */
/* ---- the kernel dialect --------------------------------------------------------------------- */
#define KERNEL static
#define LOCAL                                                                                      \
    static /* blocks run one after another: one copy serves them all (not                          \
            * with clusters, whose CTAs run at once: gemm_wgmma's split-K                          \
            * epilogue uses it, and excludes CLUSTER) */
#define RESTRICT      __restrict__
#define INLINE        static inline
#define BARRIER()     at_emu::blk->bar->arrive_and_wait()
#define LOCAL_ID(d)   ((d) == 0 ? at_emu::tid : 0)
#define GROUP_ID(d)   (at_emu::blk->group[d])
#define NUM_GROUPS(d) (at_emu::blk->groups[d])
#define MIN(a, b)     std::min((a), (b))
#define MAX(a, b)     std::max((a), (b))
#define AT_UNROLL(n)

/* ---- the primitives ------------------------------------------------------------------------- */
/* the template's own PTX wrappers and those of templates/common/cuda_*.h give way to these */
#define AT_PTX_EMULATE 1
typedef unsigned at_saddr;
/* dynamic shared memory starts 16 bytes into the window, as after a small static variable:
 * the kernel must align its ring itself */
#define AT_DYN_SMEM(name) unsigned char *name = at_emu::blk->smem.data() + 16

INLINE at_saddr at_smem_addr(const void *p)
{
    return (at_saddr)((const unsigned char *)p - at_emu::blk->smem.data());
}
INLINE void at_cp_async16(at_saddr dst, const void *src, int bytes)
{
    if (((uintptr_t)src & 15) || (dst & 15) || bytes < 0 || bytes > 16)
        at_emu::violation("cp.async: misaligned address or bad size");
    at_emu::cp_op c = {dst, src, bytes};
    if (at_emu::copy_at_issue)
        at_emu::do_copy(c);
    else
        at_emu::cp_open.push_back(c);
}
INLINE void at_cp_commit() { at_emu::commit(at_emu::cp_groups, at_emu::cp_open); }
template <int N> INLINE void at_cp_wait() { at_emu::drain(at_emu::cp_groups, N, at_emu::do_copy); }
INLINE void at_st_shared16(at_saddr dst, unsigned w0, unsigned w1, unsigned w2, unsigned w3)
{
    if (dst & 15) at_emu::violation("st.shared.v4: misaligned");
    const unsigned w[4] = {w0, w1, w2, w3};
    memcpy(at_emu::smem_at(dst, 16), w, 16);
}
INLINE void at_st_shared32(at_saddr dst, unsigned w) { at_emu::st_shared(dst, &w, 4); }
INLINE void at_fence_proxy_async() { at_emu::fence_proxy_async(); }
INLINE void at_fence_reg(float &) {}
INLINE void at_fence_reg(unsigned &) {}
INLINE void at_wgmma_fence() {}
INLINE void at_wgmma_commit() { at_emu::commit(at_emu::mma_groups, at_emu::mma_open); }
template <int N> INLINE void at_wgmma_wait()
{
    at_emu::drain(at_emu::mma_groups, N, at_emu::do_mma);
}
template <int N, int TRA, int TRB>
INLINE void at_wgmma(float *d, unsigned long long da, unsigned long long db, int acc_in)
{
    at_emu::mma_op m = {d, da, db, N, TRA, TRB, DT, acc_in, nullptr, {}, 0, 0};
    if (!at_emu::copy_at_issue)
        at_emu::do_mma(m);
    else
        at_emu::mma_queue(m);
}
template <int N, int TRB>
INLINE void at_wgmma_rs(float *d, const unsigned *a, unsigned long long db, int acc_in)
{
    at_emu::mma_op m = {d, 0, db, N, 0, TRB, DT, acc_in, a, {a[0], a[1], a[2], a[3]}, 1, 0};
    if (!at_emu::copy_at_issue) {
        m.a = m.a_copy;
        at_emu::do_mma(m);
    } else {
        at_emu::mma_open.push_back(m);
    }
}
typedef at_emu::tmap at_tmap;
#define AT_GRID_CONSTANT
INLINE void at_mbar_init(at_saddr bar, unsigned count) { at_emu::mbar_init(bar, count); }
INLINE void at_fence_mbar_init() {}
template <int N> INLINE void at_setmaxnreg_inc() {}
template <int N> INLINE void at_setmaxnreg_dec() {}
template <int ID, int N> INLINE void at_bar_sync() { at_emu::bar_sync(ID, N); }
INLINE void at_mbar_arrive(at_saddr bar) { at_emu::mbar_arrive(bar, 0); }
INLINE void at_mbar_arrive_expect_tx(at_saddr bar, unsigned bytes)
{
    at_emu::mbar_arrive(bar, bytes);
}
INLINE void at_mbar_wait(at_saddr bar, unsigned parity) { at_emu::mbar_wait(bar, parity); }
INLINE void at_tma_load_2d(at_saddr dst, const at_tmap *map, int c0, int c1, at_saddr bar)
{
    at_emu::tma_load({dst, bar, *map, c0, c1, nullptr}, 0);
}
INLINE void at_tma_store_2d(const at_tmap *map, int c0, int c1, at_saddr src)
{
    at_emu::tma_store({*map, c0, c1, src, {}, false});
}
INLINE void at_bulk_commit() { at_emu::commit(at_emu::bulk_groups, at_emu::bulk_open); }
template <int N> INLINE void at_bulk_wait_read() { at_emu::bulk_wait(N, true); }
template <int N> INLINE void at_bulk_wait() { at_emu::bulk_wait(N, false); }
INLINE void at_tma_load_2d_mc(at_saddr dst, const at_tmap *map, int c0, int c1, at_saddr bar,
                              unsigned short mask)
{
    at_emu::tma_load({dst, bar, *map, c0, c1, nullptr}, mask);
}
INLINE unsigned at_cluster_rank() { return (unsigned)at_emu::blk->rank; }
INLINE unsigned at_mapa(at_saddr addr, unsigned rank) { return at_emu::mapa(addr, rank); }
INLINE void at_mbar_arrive_cluster(unsigned bar) { at_emu::mbar_arrive_cluster(bar); }
INLINE void at_cluster_sync() { at_emu::cluster_sync(); }
INLINE float at_shfl_xor(float v, int mask) { return at_emu::shfl_xor(v, mask); }
INLINE float at_exp2(float x) { return std::exp2(x); }
INLINE float at_log2(float x) { return std::log2(x); }
INLINE float at_neg_inf() { return -INFINITY; }
INLINE float at_to_f32(unsigned short u) { return at_emu::to_f32(u, DT); }
INLINE unsigned short at_from_f32(float f) { return at_emu::from_f32(f, DT); }
INLINE void at_red_add(float *p, float v) { std::atomic_ref<float>(*p).fetch_add(v); }
INLINE float at_take(float *p) { return std::atomic_ref<float>(*p).exchange(0.0f); }
INLINE int at_count_in(int *p) { return std::atomic_ref<int>(*p).fetch_add(1); }
INLINE void at_count_reset(int *p) { std::atomic_ref<int>(*p).store(0); }
INLINE void at_fence_device() { std::atomic_thread_fence(std::memory_order_seq_cst); }
#endif /* AT_EMU_MACHINE_ONLY */

#endif
