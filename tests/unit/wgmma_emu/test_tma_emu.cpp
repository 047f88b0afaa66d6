/* test_tma_emu.cpp — the TMA-fed ring of tma_ring.cu on the host emulator (emu.h): mbarrier
 * phases and parities, transaction bytes, box copies with their swizzle (128B and 64B) and zero
 * fill, for 2 and 3 stages and several tile counts, with copies landing at issue and only when
 * waited for. A wrong parity, a missing expect_tx or a stage refilled before it is consumed
 * gives wrong sums or an emulator error; the model of cuda_tma.h is checked by a GPU run only. */
#include <cstdio>

#define DT 0 /* f16 */
#include "emu.h"

#include "templates/common/cuda_async.h"
#include "templates/common/cuda_f16.h"
#include "templates/common/cuda_tma.h"
#include "templates/common/cuda_wgmma.h"
#include "tests/unit/wgmma_emu/tma_ring.cu"

#include <setjmp.h> /* cmocka last: its fail() macro clashes with the C++ library */
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}

/* Runs the ring over a rows x cols f16 tensor (row pitch rounded to 16 bytes) of small
 * integers; returns the mismatches against the sums computed here. */
template <int KSW, int STAGES> static int run(int rows, int cols, int T)
{
    const int pitch = (cols + 7) / 8 * 8;
    std::vector<unsigned short> a((size_t)rows * pitch);
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < pitch; x++)
            a[(size_t)y * pitch + x] = at_emu::from_f32((float)((x * 7 + y * 3) % 9 - 4), 0);
    const at_tmap map = {a.data(), cols, rows, (long long)pitch * 2, KSW, AT_RING_ROWS, 2, KSW * 2};
    std::vector<float> out(AT_RING_ROWS * KSW, NAN);
    int bad = 0;
    for (int mode = 0; mode < 2; mode++) {
        at_emu::copy_at_issue = mode == 1;
        at_emu::errors = 0;
        at_emu::block b;
        b.smem.assign(AT_RING_SMEM(KSW, STAGES) + 16, 0xff); /* f16 NaN where nothing landed */
        at_emu::barrier bar(AT_RING_THREADS);
        b.bar = &bar;
        at_emu::run_threads(AT_RING_THREADS, [&](int t) {
            at_emu::tid = t;
            at_emu::blk = &b;
            AT_DYN_SMEM(smem);
            at_tma_ring<KSW, STAGES>(smem, &map, out.data(), T);
        });
        for (const auto &m : b.mbars)
            if (!m.second.queued.empty() || m.second.tx != 0) {
                fprintf(stderr, "a barrier left with copies or transaction bytes pending\n");
                bad++;
            }
        for (int r = 0; r < AT_RING_ROWS; r++)
            for (int c = 0; c < KSW; c++) {
                float want = 0.0f;
                for (int t = 0; t < T; t++) {
                    const int x = t * KSW + c;
                    if (r < rows && x < cols) want += at_emu::to_f32(a[(size_t)r * pitch + x], 0);
                }
                if (!(out[r * KSW + c] == want)) {
                    if (bad < 3)
                        fprintf(stderr, "KSW %d STAGES %d %dx%d T %d %s: (%d, %d) = %g, want %g\n",
                                KSW, STAGES, rows, cols, T,
                                mode ? "copies at issue" : "copies late", r, c,
                                (double)out[r * KSW + c], (double)want);
                    bad++;
                }
            }
        bad += at_emu::errors;
    }
    return bad;
}

static void test_ring(void **state)
{
    (void)state;
    int bad = 0;
    bad += run<64, 3>(64, 5 * 64, 5);      /* whole boxes, more tiles than stages */
    bad += run<64, 3>(50, 4 * 64 - 20, 4); /* rows and columns past the tensor: zero */
    bad += run<64, 2>(64, 64, 1);          /* one tile */
    bad += run<32, 2>(64, 7 * 32, 7);      /* 64B swizzle, two stages, many laps */
    bad += run<32, 3>(33, 3 * 32 - 5, 3);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ring)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
