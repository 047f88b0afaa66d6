/* emu.h — a host emulation of the PTX that the mma.sync templates use (cp.async, ldmatrix,
 * mma.sync m16n8k16, shfl.sync.bfly, the split-K/split-KV atomics) and of the kernel dialect, so a
 * template's own code runs on the CPU (attention_mma.cu; see test_attention_mma_emu.cpp). Each CUDA
 * thread of a block is a fiber (../emu_fibers.h), switched at barriers and warp collectives: the
 * result does not depend on how loaded the machine is, and a deadlock (a barrier some threads
 * never reach) is reported, not waited for.
 *
 * Warp-wide instructions are collectives: every lane of the warp deposits its operands (an
 * ldmatrix row address, mma fragments, a shuffled value) in the warp's exchange slots, waits at
 * the warp's barrier, and computes its own result from all 32 deposits by the rules of the PTX
 * ISA ("Warp-level matrix load instruction: ldmatrix", "Matrix Fragments for mma.m16n8k16 with
 * floating point type", shfl.sync), written here independently of the templates. Two slot sets
 * alternate, so one barrier per instruction suffices. A lane that skips a collective, or calls a
 * different one, is a violation (diverged warp).
 *
 * cp.async is modelled at its extremes, as in tests/unit/wgmma_emu: a run performs the copies
 * either at issue or only when their group is waited for (a missing wait or barrier shows as
 * stale data: shared memory starts every block as NaN). Included once per kernel instance,
 * before the template, with the tuning parameters defined. */
#ifndef AT_MMA_EMU_H
#define AT_MMA_EMU_H

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "../emu_f16.h"    /* to_f32, from_f32 */
#include "../emu_fibers.h" /* run_fibers, barrier */

namespace at_emu
{

enum { OP_LDSM = 1, OP_LDSM_T, OP_MMA, OP_SHFL };

/* one warp's exchange: two alternating slot sets of 32 lanes x 8 words */
struct warp {
    barrier bar{32};
    unsigned slot[2][32][8];
    int op[2][32];
};

struct block {
    std::vector<unsigned char> smem; /* the block's shared memory; address = offset */
    barrier bar;
    std::vector<warp> warps;
    int group[3], groups[3];
};

struct cp_op {
    unsigned dst;
    const void *src;
    int bytes;
};

/* the state of one CUDA thread */
struct lane {
    int tid;
    int phase; /* the slot set of this lane's next collective */
    std::vector<std::vector<cp_op>> cp_groups;
    std::vector<cp_op> cp_open;
};

/* Runs body once per thread 0..threads-1 of block b, as fibers (from the last thread when
 * copies are at issue); returns false on a deadlock (reported as a violation). */
bool run_block(block &b, int threads, void (*body)(void *), void *arg);

extern bool copy_at_issue; /* true: cp.async copies at issue; false: when waited for */
extern int bug;            /* a deliberate model error, for the test of the test (0: none) */
extern int errors;         /* contract violations seen (misaligned cp.async, diverged warp...) */
extern lane *cur;          /* the running thread */
extern block *blk;         /* the running block */

void violation(const char *what);
unsigned char *smem_at(unsigned addr, unsigned bytes); /* bounds-checked */
void do_copy(const cp_op &c);
/* the warp collectives: lane's result from the deposits of all 32 lanes */
void ldsm_x4(unsigned *r, unsigned addr, bool trans);
void mma_16816(float *d, const unsigned *a, const unsigned *b, int dt);
float shfl_xor(float v, int mask);

/* commit_group: the open copies become the newest group */
inline void commit()
{
    cur->cp_groups.push_back(cur->cp_open);
    cur->cp_open.clear();
}
/* wait_group n: performs the oldest groups until at most n are pending */
inline void drain(int n)
{
    while (cur->cp_groups.size() > (size_t)n) {
        for (const cp_op &o : cur->cp_groups.front()) do_copy(o);
        cur->cp_groups.erase(cur->cp_groups.begin());
    }
}

} // namespace at_emu

#ifndef AT_EMU_MACHINE_ONLY /* the test's own file wants the machine, not a kernel's macros */
/* ---- the kernel dialect --------------------------------------------------------------------- */
#define KERNEL        static
#define LOCAL         static /* blocks run one after another: one copy serves them all */
#define RESTRICT      __restrict__
#define INLINE        static inline
#define BARRIER()     at_emu::blk->bar.arrive_and_wait()
#define LOCAL_ID(d)   ((d) == 0 ? at_emu::cur->tid : 0)
#define GROUP_ID(d)   (at_emu::blk->group[d])
#define NUM_GROUPS(d) (at_emu::blk->groups[d])
#define MIN(a, b)     std::min((a), (b))
#define MAX(a, b)     std::max((a), (b))
#define AT_UNROLL(n)

/* ---- the primitives ------------------------------------------------------------------------- */
/* the templates' PTX wrappers (templates/common/cuda_*.h) give way to these */
#define AT_PTX_EMULATE 1
typedef unsigned at_saddr;
/* dynamic shared memory starts 16 bytes into the window, as after a small static variable */
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
        at_emu::cur->cp_open.push_back(c);
}
INLINE void at_cp_commit() { at_emu::commit(); }
template <int N> INLINE void at_cp_wait() { at_emu::drain(N); }
INLINE void at_st_shared16(at_saddr dst, unsigned w0, unsigned w1, unsigned w2, unsigned w3)
{
    if (dst & 15) at_emu::violation("st.shared.v4: misaligned");
    const unsigned w[4] = {w0, w1, w2, w3};
    memcpy(at_emu::smem_at(dst, 16), w, 16);
}
INLINE void at_ldsm_x4(unsigned *r, at_saddr addr) { at_emu::ldsm_x4(r, addr, false); }
INLINE void at_ldsm_x4_trans(unsigned *r, at_saddr addr) { at_emu::ldsm_x4(r, addr, true); }
INLINE void at_mma(float *d, const unsigned *a, const unsigned *b)
{
    at_emu::mma_16816(d, a, b, DT);
}
INLINE float at_shfl_xor(float v, int mask) { return at_emu::shfl_xor(v, mask); }
INLINE float at_exp2(float x) { return std::exp2(x); }
INLINE float at_neg_inf() { return -INFINITY; }
INLINE float at_to_f32(unsigned short u) { return at_emu::to_f32(u, DT); }
INLINE unsigned short at_from_f32(float f) { return at_emu::from_f32(f, DT); }
INLINE unsigned at_pack2(float lo, float hi)
{
    return (unsigned)at_emu::from_f32(lo, DT) | (unsigned)at_emu::from_f32(hi, DT) << 16;
}
INLINE void at_red_add(float *p, float v) { std::atomic_ref<float>(*p).fetch_add(v); }
INLINE float at_take(float *p) { return std::atomic_ref<float>(*p).exchange(0.0f); }
INLINE int at_count_in(int *p) { return std::atomic_ref<int>(*p).fetch_add(1); }
INLINE void at_count_reset(int *p) { std::atomic_ref<int>(*p).store(0); }
INLINE void at_fence_device() { std::atomic_thread_fence(std::memory_order_seq_cst); }
using std::fmaxf;
using std::log2f;
#endif /* AT_EMU_MACHINE_ONLY */

#endif
