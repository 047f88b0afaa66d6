/* machine.cpp — the emulated machine of emu.h: shared memory, cp.async and wgmma as the PTX ISA
 * describes them, warp shuffles, the element conversions; linked into each emulator test. */
#define AT_EMU_MACHINE_ONLY
#include "emu.h"

#include <cmath>
#include <cstdio>
#include <mutex>

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
static std::mutex fail_mu;

void violation(const char *what)
{
    std::lock_guard<std::mutex> g(fail_mu);
    if (errors++ < 5) fprintf(stderr, "emulator: thread %d: %s\n", tid, what);
}

unsigned char *smem_at(unsigned addr, unsigned bytes)
{
    static unsigned char sink[16];
    if ((size_t)addr + bytes > blk->smem.size()) {
        violation("shared-memory access out of bounds");
        return sink;
    }
    return blk->smem.data() + addr;
}

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
float operand(unsigned long long desc, int mn, int k, int mn_major, int dt)
{
    const unsigned start = (unsigned)(desc & 0x3fff) << 4;
    const unsigned lbo = (unsigned)((desc >> 16) & 0x3fff) << 4;
    const unsigned sbo = (unsigned)((desc >> 32) & 0x3fff) << 4;
    const unsigned base = (unsigned)((desc >> 49) & 7), mode = (unsigned)(desc >> 62);
    if (base != 0 || mode == 0) {
        violation("descriptor: base offset or non-swizzled layout not modelled");
        return NAN;
    }
    const unsigned sw = mode == 1 ? 128 : mode == 2 ? 64 : 32, w = sw / 16;
    unsigned addr;
    if (!mn_major)
        addr = start + (mn % 8) * sw + (mn / 8) * sbo + (k / 8) * 16 + (k % 8) * 2;
    else
        addr = start + (mn % 8) * 2 + ((mn / 8) % w) * 16 + (mn / (8 * w)) * lbo + (k % 8) * sw +
               (k / 8) * sbo;
    addr ^= ((addr >> 7) & (w - 1)) << 4;
    unsigned short u;
    memcpy(&u, smem_at(addr, 2), 2);
    return to_f32(u, dt);
}

/* PTX ISA, wgmma .m64nNk16 D fragment: thread t of the warpgroup holds, in register r, row
 * 16*(t/32) + (t%32)/4 + 8*((r/2)%2), column 8*(r/4) + 2*(t%4) + r%2. A is 64 x 16 (M-major
 * when ta), B is 16 x N read as N x 16 (N-major when tb). D = A*B, + D when scale-d (acc_in).
 * A from registers (rs): element (row, k) is half v = k%2 + 2*((row%16)/8) + 4*(k/8) (register
 * v/2, the low half when v is even) of lane 4*(row%8) + (k%8)/2 of warp row/16: CUTLASS cute
 * GMMA::ALayout_64x16, thread (4,8,4):(128,1,16), value (2,2,2):(64,8,512) over a 64 x 16
 * column-major A. Every thread of the warpgroup publishes its register pointer, so the
 * operation is warpgroup-collective here as it is on the device (.sync.aligned). */
void do_mma(const mma_op &m)
{
    const int t = tid % 128;
    float a[64][16], b[256][16]; /* the operands, read once per instance of a row/column */
    bool have_a[64] = {}, have_b[256] = {};
    if (m.rs) {
        if (blk->wg_bar.empty()) {
            violation("register-A wgmma without the block's collectives");
            return;
        }
        std::barrier<> &bar = *blk->wg_bar[tid / 128];
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
    for (int r = 0; r < m.n / 2; r++) {
        const int row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((r / 2) % 2);
        const int col = 8 * (r / 4) + 2 * (t % 4) + r % 2;
        for (int k = 0; k < 16 && !have_a[row]; k++) a[row][k] = operand(m.da, row, k, m.ta, m.dt);
        for (int k = 0; k < 16 && !have_b[col]; k++) b[col][k] = operand(m.db, col, k, m.tb, m.dt);
        have_a[row] = have_b[col] = true;
        float s = 0.0f;
        for (int k = 0; k < 16; k++) s += a[row][k] * b[col][k];
        m.d[r] = m.acc_in ? m.d[r] + s : s;
    }
}

/* shfl.sync.bfly: every lane of the warp calls it; lane l gets the value of lane l ^ mask. */
float shfl_xor(float v, int mask)
{
    if (blk->warp_bar.empty()) {
        violation("shuffle without the block's collectives");
        return NAN;
    }
    std::barrier<> &bar = *blk->warp_bar[tid / 32];
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
        warp_bar.push_back(std::make_unique<std::barrier<>>(std::min(32, threads - 32 * w)));
    for (int g = 0; g < (threads + 127) / 128; g++)
        wg_bar.push_back(std::make_unique<std::barrier<>>(std::min(128, threads - 128 * g)));
    xchg.assign(threads, 0.0f);
    areg.assign(threads, nullptr);
}

} // namespace at_emu
