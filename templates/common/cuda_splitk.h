/* cuda_splitk.h — device-scope atomics of the split-K reduction the CUDA templates share: each
 * block adds its f32 partial tile into a zeroed workspace, counts itself in on the tile's
 * counter, and the block that arrives last takes the sums (leaving zeros) and resets the counter,
 * so the workspace is zero again for the next launch. The protocol is in the templates
 * (gemm_mma.cu, gemm_wgmma.cu); these are its memory operations, all through L2.
 *
 * A host emulation defines AT_PTX_EMULATE and its own versions before including a template
 * (tests/unit/wgmma_emu/emu.h). */
#ifndef AT_CUDA_SPLITK_H
#define AT_CUDA_SPLITK_H

#ifndef AT_PTX_EMULATE
INLINE void at_red_add(float *p, const float v) { atomicAdd(p, v); } /* *p += v */
INLINE float at_take(float *p) { return atomicExch(p, 0.0f); }       /* *p, leaving 0 */
INLINE int at_count_in(int *p) { return atomicAdd(p, 1); } /* the arrivals before this one */
INLINE void at_count_reset(int *p) { atomicExch(p, 0); }
/* This thread's writes are seen device-wide before its later ones (an arrival after its adds). */
INLINE void at_fence_device() { __threadfence(); }
#endif /* AT_PTX_EMULATE */

#endif
