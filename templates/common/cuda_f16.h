/* cuda_f16.h — the 16-bit float element of the CUDA tensor-core templates: raw 16-bit patterns
 * (unsigned short), IEEE half when DT = 0 and bfloat16 when DT = 1 (DT is a problem define,
 * gemm/gemm_problem.h). Inline PTX `cvt`, so no CUDA header is needed.
 *
 * A host emulation defines AT_PTX_EMULATE and its own at_to_f32 / at_from_f32 before including
 * a template (tests/unit/wgmma_emu/emu.h). */
#ifndef AT_CUDA_F16_H
#define AT_CUDA_F16_H

/* The element's PTX type, for mma / wgmma instruction names. */
#if DT
#define AT_MMA_TYPE "bf16"
#else
#define AT_MMA_TYPE "f16"
#endif

#ifndef AT_PTX_EMULATE
/* Exact. */
INLINE float at_to_f32(const unsigned short u)
{
#if DT
    return __uint_as_float((unsigned)u << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(u));
    return f;
#endif
}
/* Rounded to nearest even. */
INLINE unsigned short at_from_f32(const float f)
{
    unsigned short u;
#if DT
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(u) : "f"(f));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(u) : "f"(f));
#endif
    return u;
}
#endif /* AT_PTX_EMULATE */

#endif
