/* instance.cpp — one configuration of templates/gemm/gemm_wgmma.cu (tuning parameters and TA/TB
 * given as -D by tests/CMakeLists.txt) compiled for the host emulator, registered with the
 * test under a name made of its parameters. Blocks run one after another, each with all its
 * threads (the CTAs of a cluster, CLUSTER > 1, at once); a persistent kernel's (PERSIST) grid is
 * min(tiles, a.sms) blocks, CLUSTER * min(units, a.sms / CLUSTER) with clusters. */
#include "emu.h"
#include "registry.h"

#include "templates/gemm/gemm_wgmma.cu"

namespace
{

void run(const at_emu_args &a)
{
    const int km = SWAP ? a.n : a.m, kn = SWAP ? a.m : a.n; /* the kernel's view (SWAP) */
    const int gx = (kn + BN - 1) / BN, gy = (km + BM - 1) / BM;
    const int gu = (gy + CLUSTER - 1) / CLUSTER; /* units of CLUSTER tile rows */
    /* PERSIST: one dimension of min(tiles, SMs) blocks, as the space's launch says; with
     * clusters, CLUSTER blocks per unit, CLUSTER * min(units, SMs / CLUSTER) persistent ones */
    const int clusters = std::min(gx * gu, std::max(a.sms / CLUSTER, 1));
    const int groups[3] = {PERSIST ? CLUSTER * clusters : CLUSTER * gx, PERSIST ? 1 : gu, SPLITK};
    /* the CTAs of a cluster run at once, each with its threads and shared memory */
    at_emu::barrier all(CLUSTER * THREADS), cluster_bar(CLUSTER * THREADS);
    std::vector<std::unique_ptr<at_emu::barrier>> bars;
    at_emu::block b[CLUSTER];
    at_emu::block *cluster[CLUSTER];
    for (int r = 0; r < CLUSTER; r++) {
        bars.push_back(std::make_unique<at_emu::barrier>(THREADS));
        /* the launch's bytes (the ring, its alignment, LOAD's barriers; STORE: their kilobyte
         * and the C buffer), + 16 static */
        b[r].smem.resize(STAGES * (BM + BN) * BK * 2 + 1024 +
                         (STORE       ? 1024 + BM * BN * 2
                          : LOAD >= 1 ? 16 * STAGES
                                      : 0) +
                         16);
        if (STORE) b[r].unfenced.assign(b[r].smem.size(), 0); /* st.shared not yet fenced */
        b[r].bar = bars[r].get();
        b[r].cluster = cluster;
        b[r].nctas = CLUSTER;
        b[r].rank = r;
        b[r].cluster_bar = &cluster_bar;
        cluster[r] = &b[r];
    }
#if LOAD >= 1
    /* the tensor maps the host would build, in the kernel's view (docs/cuda.md); with clusters
     * B's box is 1/CLUSTER of its outer extent (each CTA loads its part for both) */
    const unsigned short *ka = SWAP ? a.B : a.A, *kb = SWAP ? a.A : a.B;
    const int klda = SWAP ? a.ldb : a.lda, kldb = SWAP ? a.lda : a.ldb;
    const at_tmap tma_a = KTA ? at_tmap{ka, km, a.k, klda * 2LL, 64, BK, 2, 128}
                              : at_tmap{ka, a.k, km, klda * 2LL, KSW, BM, 2, KSW * 2};
    const at_tmap tma_b = KTB ? at_tmap{kb, a.k, kn, kldb * 2LL, KSW, BN / CLUSTER, 2, KSW * 2}
                              : at_tmap{kb, kn, a.k, kldb * 2LL, 64, BK / CLUSTER, 2, 128};
#endif
#if STORE
    /* C: {N, M} in boxes of {64, BM}, 128B swizzle (not with SWAP) */
    const at_tmap tma_c = {a.C, a.n, a.m, a.ldc * 2LL, 64, BM, 2, 128};
#endif
    at_emu::run_threads(CLUSTER * THREADS, [&](int ct) {
        const int t = ct % THREADS;
        at_emu::block &bk = b[ct / THREADS];
        at_emu::tid = t;
        at_emu::blk = &bk;
        for (int z = 0; z < groups[2]; z++)
            for (int y = 0; y < groups[1]; y++)
                for (int x = bk.rank; x < groups[0]; x += CLUSTER) {
                    if (t == 0) {
                        /* 0xffff is NaN in f16 and bf16: unwritten shared memory shows */
                        std::fill(bk.smem.begin(), bk.smem.end(), (unsigned char)0xff);
                        std::fill(bk.unfenced.begin(), bk.unfenced.end(), (unsigned char)0);
                        bk.store_reads.clear();
                        bk.group[0] = x, bk.group[1] = y, bk.group[2] = z;
                        for (int d = 0; d < 3; d++) bk.groups[d] = groups[d];
                        bk.remote_epoch = -1;
                    }
                    at_emu::cluster_epoch = 0;
                    all.arrive_and_wait();
                    gemm_wgmma(a.m, a.n, a.k, a.alpha, a.beta, a.A, a.lda, a.B, a.ldb, a.C, a.ldc
#if SPLITK > 1
                               ,
                               a.ws
#endif
#if LOAD >= 1
                               ,
                               tma_a, tma_b
#endif
#if STORE
                               ,
                               tma_c
#endif
                    );
                    if (!at_emu::cp_groups.empty() || !at_emu::cp_open.empty() ||
                        !at_emu::mma_groups.empty() || !at_emu::mma_open.empty() ||
                        !at_emu::bulk_groups.empty() || !at_emu::bulk_open.empty())
                        at_emu::violation("a thread left with copies, MMAs or TMA stores in "
                                          "flight");
                    at_emu::bulk_groups.clear();
                    at_emu::bulk_open.clear();
                    at_emu::unfenced_words.clear();
                    at_emu::cp_groups.clear();
                    at_emu::mma_groups.clear();
                    at_emu::mma_open.clear();
                    at_emu::cluster_exit();
                    all.arrive_and_wait();
                    if (CLUSTER > 1 && t == 0) at_emu::cluster_check(bk);
                }
    });
}

constexpr int exact = !(EDGE_M || EDGE_N || EDGE_K); /* whole tiles only */
const at_emu_kernel self = {BM, BN,      BK,   WN,   WGS,     STAGES, SPLITK,  TA,    TB,
                            DT, GROUP_M, SWAP, LOAD, PERSIST, STORE,  CLUSTER, exact, run};
const bool registered = at_emu_register(&self);

} // namespace
