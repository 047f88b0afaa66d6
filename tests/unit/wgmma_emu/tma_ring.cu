/* tma_ring.cu — a TMA-fed ring of shared-memory stages (templates/common/cuda_tma.h): thread 0
 * streams the T boxes {KSW, 64} of a 2-D tensor (box t at column t*KSW) through STAGES stages
 * guarded by full/empty mbarriers, the block's 128 threads read each stage through the wgmma
 * K-major layout (at_off_k, the swizzle the box was written with) and sum the boxes. The
 * producer / consumer protocol of docs/cuda.md's TMA design, small enough to check alone: it
 * runs on the host emulator (test_tma_emu.cpp) and compiles for sm_90a (the kernel at the end,
 * through tma_ring_device.cu; no device needed). Include after the dialect and these headers:
 * cuda_async.h, cuda_f16.h, cuda_wgmma.h, cuda_tma.h. */
#define AT_RING_THREADS 128
#define AT_RING_ROWS    64

/* Shared memory it needs: the stages (1024-aligned) and 2 * STAGES barriers. */
#define AT_RING_SMEM(KSW, STAGES) (1024 + (STAGES) * AT_RING_ROWS * (KSW) * 2 + 16 * (STAGES))

/* out[r * KSW + c] = sum over t < T of tensor(row r, column t*KSW + c), zero outside it. */
template <int KSW, int STAGES>
INLINE void at_tma_ring(unsigned char *smem, const at_tmap *map, float *out, const int T)
{
    constexpr int BOX = AT_RING_ROWS * KSW * 2; /* bytes of one box, one stage */
    const int tid = LOCAL_ID(0);
    const at_saddr base = (at_smem_addr(smem) + 1023u) & ~1023u;
    const at_saddr full = base + STAGES * BOX, empty = full + 8 * STAGES;
    const unsigned char *ring = smem + (base - at_smem_addr(smem));
    if (tid == 0) {
        AT_UNROLL(STAGES)
        for (int s = 0; s < STAGES; ++s) {
            at_mbar_init(full + 8 * s, 1);
            at_mbar_init(empty + 8 * s, AT_RING_THREADS);
        }
        at_fence_mbar_init();
    }
    BARRIER();

    /* the producer: box t into stage t % STAGES once the stage's previous lap is consumed */
    const auto issue = [&](const int t) {
        const int s = t % STAGES;
        at_mbar_wait(empty + 8 * s, ((t / STAGES) & 1) ^ 1);
        at_mbar_arrive_expect_tx(full + 8 * s, BOX);
        at_tma_load_2d(base + s * BOX, map, t * KSW, 0, full + 8 * s);
    };
    if (tid == 0)
        for (int t = 0; t < MIN(STAGES, T); ++t) issue(t);

    const int r = tid / 2, c0 = (tid % 2) * (KSW / 2);
    float acc[KSW / 2];
    AT_UNROLL(KSW / 2)
    for (int j = 0; j < KSW / 2; ++j) acc[j] = 0.0f;
    for (int t = 0; t < T; ++t) {
        const int s = t % STAGES;
        at_mbar_wait(full + 8 * s, (t / STAGES) & 1);
        AT_UNROLL(KSW / 2)
        for (int j = 0; j < KSW / 2; ++j) {
            const int c = c0 + j;
            const int off = at_off_k<AT_RING_ROWS, KSW>(r, c & ~7) + (c % 8) * 2;
            acc[j] += at_to_f32(*(const unsigned short *)(ring + s * BOX + off));
        }
        at_mbar_arrive(empty + 8 * s);
        if (tid == 0 && t + STAGES < T) issue(t + STAGES);
    }
    AT_UNROLL(KSW / 2)
    for (int j = 0; j < KSW / 2; ++j) out[r * KSW + c0 + j] = acc[j];
}

#ifndef AT_PTX_EMULATE
/* For the sm_90a compile check: the map by value as a __grid_constant__ parameter. */
KERNEL void at_tma_ring_128b(const AT_GRID_CONSTANT at_tmap map, float *out, const int T)
{
    AT_DYN_SMEM(smem);
    at_tma_ring<64, 3>(smem, &map, out, T);
}
#endif
