/* cuda_warp.h — the warp and MUFU primitives of the CUDA tensor-core templates (gemm_mma,
 * attention_mma through cuda_mma.h; attention_wgmma): the butterfly shuffle, exp2 and log2, -inf,
 * and the packing of two f32 into one 16-bit pair register. Needs AT_MMA_TYPE (cuda_f16.h)
 * first. A host emulation defines AT_PTX_EMULATE and its own versions of these (an emulation of
 * a template that uses at_pack2 without defining it gets the template's own). */
#ifndef AT_CUDA_WARP_H
#define AT_CUDA_WARP_H

#ifndef AT_PTX_EMULATE
/* v of lane (this lane ^ mask), the whole warp taking part. */
INLINE float at_shfl_xor(const float v, const int mask)
{
    float r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\n"
                 : "=f"(r)
                 : "f"(v), "r"(mask));
    return r;
}

/* 2^x, one MUFU.EX2 (relative error ~2^-22; -inf gives +0, denormal results flush to 0). */
INLINE float at_exp2(const float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

/* log2(x), one MUFU.LG2. */
INLINE float at_log2(const float x)
{
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

INLINE float at_neg_inf() { return __int_as_float((int)0xff800000u); }

/* lo and hi rounded to the element type (nearest even), packed: lo in bits 0-15, hi in 16-31
 * (one cvt). */
INLINE unsigned at_pack2(const float lo, const float hi)
{
    unsigned r;
    asm("cvt.rn." AT_MMA_TYPE "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
#endif /* AT_PTX_EMULATE */

#endif
