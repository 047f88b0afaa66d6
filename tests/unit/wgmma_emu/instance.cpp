/* instance.cpp — one configuration of templates/gemm/gemm_wgmma.cu (tuning parameters and TA/TB
 * given as -D by tests/CMakeLists.txt) compiled for the host emulator, registered with the
 * test under a name made of its parameters. Blocks run one after another, each with all its
 * threads; a persistent kernel's (PERSIST) grid is min(tiles, a.sms) blocks. */
#include "emu.h"
#include "registry.h"

#include "templates/gemm/gemm_wgmma.cu"

#include <thread>

namespace
{

void run(const at_emu_args &a)
{
    const int km = SWAP ? a.n : a.m, kn = SWAP ? a.m : a.n; /* the kernel's view (SWAP) */
    const int gx = (kn + BN - 1) / BN, gy = (km + BM - 1) / BM;
    /* PERSIST: one dimension of min(tiles, SMs) blocks, as the space's launch says */
    const int groups[3] = {PERSIST ? std::min(gx * gy, a.sms) : gx, PERSIST ? 1 : gy, SPLITK};
    std::barrier<> bar(THREADS);
    at_emu::block b;
    /* the launch's bytes (the ring, its alignment, LOAD's barriers; STORE: their kilobyte and
     * the C buffer), + 16 static */
    b.smem.resize(STAGES * (BM + BN) * BK * 2 + 1024 +
                  (STORE       ? 1024 + BM * BN * 2
                   : LOAD >= 1 ? 16 * STAGES
                               : 0) +
                  16);
    if (STORE) b.unfenced.assign(b.smem.size(), 0); /* st.shared not yet fenced: none */
#if LOAD >= 1
    /* the tensor maps the host would build, in the kernel's view (docs/cuda.md) */
    const unsigned short *ka = SWAP ? a.B : a.A, *kb = SWAP ? a.A : a.B;
    const int klda = SWAP ? a.ldb : a.lda, kldb = SWAP ? a.lda : a.ldb;
    const at_tmap tma_a = KTA ? at_tmap{ka, km, a.k, klda * 2LL, 64, BK, 2, 128}
                              : at_tmap{ka, a.k, km, klda * 2LL, KSW, BM, 2, KSW * 2};
    const at_tmap tma_b = KTB ? at_tmap{kb, a.k, kn, kldb * 2LL, KSW, BN, 2, KSW * 2}
                              : at_tmap{kb, kn, a.k, kldb * 2LL, 64, BK, 2, 128};
#endif
#if STORE
    /* C: {N, M} in boxes of {64, BM}, 128B swizzle (not with SWAP) */
    const at_tmap tma_c = {a.C, a.n, a.m, a.ldc * 2LL, 64, BM, 2, 128};
#endif
    b.bar = &bar;
    std::vector<std::thread> threads;
    for (int t = 0; t < THREADS; t++)
        threads.emplace_back([&, t] {
            at_emu::tid = t;
            at_emu::blk = &b;
            for (int z = 0; z < groups[2]; z++)
                for (int y = 0; y < groups[1]; y++)
                    for (int x = 0; x < groups[0]; x++) {
                        if (t == 0) {
                            /* 0xffff is NaN in f16 and bf16: unwritten shared memory shows */
                            std::fill(b.smem.begin(), b.smem.end(), (unsigned char)0xff);
                            std::fill(b.unfenced.begin(), b.unfenced.end(), (unsigned char)0);
                            b.store_reads.clear();
                            b.group[0] = x, b.group[1] = y, b.group[2] = z;
                            for (int d = 0; d < 3; d++) b.groups[d] = groups[d];
                        }
                        bar.arrive_and_wait();
                        gemm_wgmma(a.m, a.n, a.k, a.alpha, a.beta, a.A, a.lda, a.B, a.ldb, a.C,
                                   a.ldc
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
                        bar.arrive_and_wait();
                    }
        });
    for (std::thread &t : threads) t.join();
}

const at_emu_kernel self = {BM, BN, BK,      WN,   WGS,  STAGES,  SPLITK, TA,
                            TB, DT, GROUP_M, SWAP, LOAD, PERSIST, STORE,  run};
const bool registered = at_emu_register(&self);

} // namespace
