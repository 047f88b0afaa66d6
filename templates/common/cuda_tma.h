/* cuda_tma.h — Hopper (sm_90) bulk tensor copies (TMA) and the shared-memory mbarriers they
 * complete on, for the CUDA templates: the pieces of a TMA-fed ring (docs/cuda.md, "What remains
 * of part 2") and of the TMA-store epilogue (its bulk groups). Needs at_saddr (cuda_async.h)
 * included first.
 *
 * Protocol of a ring of STAGES stages with barriers full[s] (1 arrival: the producer's
 * arrive.expect_tx, then the copies' bytes) and empty[s] (one arrival per consumer): K tile t
 * uses stage s = t % STAGES in lap (t / STAGES), whose parity is p = (t / STAGES) & 1. The
 * producer waits empty[s] with parity p ^ 1 (on the first lap that phase counts as completed,
 * so it passes at once), arms full[s] with the tile's bytes and issues the copies; consumers
 * wait full[s] with parity p, read the stage, and arrive on empty[s].
 *
 * A host emulation defines AT_PTX_EMULATE and its own at_tmap and functions before including a
 * template (tests/unit/wgmma_emu/emu.h), modelling the barrier's phases, pending arrivals and
 * transaction count, and the box copy with its swizzle and zero fill. */
#ifndef AT_CUDA_TMA_H
#define AT_CUDA_TMA_H

#ifndef AT_PTX_EMULATE
/* A CUtensorMap: 128 opaque bytes, 64-byte aligned, built on the host (cuTensorMapEncodeTiled)
 * and passed by value as a `const __grid_constant__` kernel parameter, whose address the copy
 * engine reads. NVRTC has no cuda.h, hence our own type. */
struct __align__(64) at_tmap { unsigned long long v[16]; };
#define AT_GRID_CONSTANT __grid_constant__

/* The barrier at bar (8 bytes of shared memory, 8-byte aligned) expects `count` arrivals per
 * phase; its first phase (parity 0) starts. */
INLINE void at_mbar_init(const at_saddr bar, const unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* Initialised barriers become visible to the copy engine (async proxy); a block barrier after
 * it makes them visible to the other threads. */
INLINE void at_fence_mbar_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
INLINE void at_mbar_arrive(const at_saddr bar)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
                 : "memory");
}
/* One arrival, and `bytes` more of transactions (copies) the current phase waits for. */
INLINE void at_mbar_arrive_expect_tx(const at_saddr bar, const unsigned bytes)
{
    asm volatile(
        "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar),
        "r"(bytes)
        : "memory");
}
/* Returns once the barrier's phase of parity `parity` has completed. */
INLINE void at_mbar_wait(const at_saddr bar, const unsigned parity)
{
    asm volatile("{\n.reg .pred p;\nAT_MBAR_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra AT_MBAR_WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* The box of the 2-D tensor map at coordinates (c0 innermost, c1), in elements, into shared
 * memory at dst (the box's rows one after another, swizzled as the map says; dst aligned to
 * 1024 bytes for a swizzled map), elements outside the tensor zero; completes the box's bytes
 * of transactions on bar. Issued by one thread. */
INLINE void at_tma_load_2d(const at_saddr dst, const at_tmap *map, const int c0, const int c1,
                           const at_saddr bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* The TMA store (the reverse copy): the box of the 2-D tensor map at coordinates (c0
 * innermost, c1) from shared memory at src (laid out and swizzled as at_tma_load_2d lands it;
 * src aligned to 1024 bytes for a swizzled map), elements outside the tensor not written. The
 * shared memory must have been written through the generic proxy before a
 * fence.proxy.async.shared::cta of each writer and a barrier. Issued by one thread; the copy
 * joins this thread's open bulk group (at_bulk_commit). */
INLINE void at_tma_store_2d(const at_tmap *map, const int c0, const int c1, const at_saddr src)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
            (unsigned long long)map),
        "r"(c0), "r"(c1), "r"(src)
        : "memory");
}
/* Closes this thread's group of bulk copies (stores); at_bulk_wait_read<N> waits until at most
 * N of its groups still read their shared source (the buffer may then be written again),
 * at_bulk_wait<N> until at most N are still in flight at all (their global writes done: before
 * the block exits, as its shared memory goes away). */
INLINE void at_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> INLINE void at_bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N> INLINE void at_bulk_wait()
{
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- clusters (2x1 with multicast: gemm_wgmma's CLUSTER) ---- */
/* This CTA's rank in its cluster (0 .. cluster size - 1; x fastest). Not volatile: the same
 * value wherever it is read, so the compiler may keep one copy. */
INLINE unsigned at_cluster_rank()
{
    unsigned r;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* The shared::cluster address of the variable at `addr` (this CTA's shared memory) in the
 * shared memory of the cluster's CTA `rank`. */
INLINE unsigned at_mapa(const at_saddr addr, const unsigned rank)
{
    unsigned r;
    asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
/* One arrival on the barrier at shared::cluster address `bar` (another CTA's, from at_mapa).
 * The default semantics (release at CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id):
 * what a consumer's release orders are its wgmma reads of the stage, complete at
 * wgmma.wait_group, not generic writes the peer must see. `.release.cluster` made ptxas put
 * MEMBAR.ALL.GPU (and ERRBAR, CGAERRBAR) before every arrival, in the K loop. */
INLINE void at_mbar_arrive_cluster(const unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* Every thread of every CTA of the cluster: a block barrier across the cluster (after the
 * barriers' init, so a peer's multicast or arrival finds them initialised; before exit, so no
 * CTA leaves while a peer may still write into its shared memory). */
INLINE void at_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
}
/* at_tma_load_2d into the shared memory of every CTA whose bit is set in `mask` (by rank), at
 * the same offset dst, each completing the box's bytes on its own barrier at offset bar. */
INLINE void at_tma_load_2d_mc(const at_saddr dst, const at_tmap *map, const int c0, const int c1,
                              const at_saddr bar, const unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
}

/* Warp specialization: the executing warpgroup's per-thread register budget rises (inc) or
 * falls (dec) to N (a multiple of 8, 24..256); effective only with a register cap at entry
 * (__launch_bounds__(threads, 1)) and each role in one branch of an if/else. */
template <int N> INLINE void at_setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> INLINE void at_setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
/* Named barrier ID (1..15; 0 is BARRIER()'s) among the first N threads of the block that reach
 * it (N a multiple of 32): a barrier of the consumer warpgroups without the producer. */
template <int ID, int N> INLINE void at_bar_sync()
{
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
}
#endif /* AT_PTX_EMULATE */

#endif
