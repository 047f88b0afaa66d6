/* cuda_mma.h — warp-level tensor-core primitives of the CUDA templates (sm_80 and later):
 * ldmatrix and mma.sync m16n8k16 on 16-bit operands (DT picks f16 or bf16) with f32
 * accumulators; with them the warp primitives of cuda_warp.h (shuffle, exp2, packing).
 * Needs at_saddr (cuda_async.h) and AT_MMA_TYPE (cuda_f16.h) first.
 *
 * Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane l, g = l / 4,
 * t = l % 4; a 32-bit register holds two elements, the lower column (or k) in the low half:
 *   A (16 x 16, row)  reg 0: (g, 2t..2t+1)  1: (g+8, 2t..)  2: (g, 2t+8..)  3: (g+8, 2t+8..)
 *   B (16 x 8, col)   reg 0: (k 2t..2t+1, n g)  1: (k 2t+8.., n g)
 *   C (16 x 8, f32)   0, 1: (g, 2t), (g, 2t+1)  2, 3: (g+8, 2t), (g+8, 2t+1)
 * so the C fragments of two adjacent n8 tiles, packed pairwise, are an A fragment (16 x 16):
 * attention_mma.cu feeds the probabilities P to the next mma straight from the registers.
 *
 * A host emulation defines AT_PTX_EMULATE and its own versions of all of these before including
 * a template (tests/unit/mma_emu/emu.h). */
#ifndef AT_CUDA_MMA_H
#define AT_CUDA_MMA_H

#include "cuda_warp.h"

#ifndef AT_PTX_EMULATE
/* ldmatrix.x4: lane l supplies the address of row (l & 7) of matrix l >> 3; register q receives
 * matrix q, lane l holding row l/4, columns 2*(l%4) and +1 (with .trans: of the transpose). */
INLINE void at_ldsm_x4(unsigned *r, const at_saddr addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
INLINE void at_ldsm_x4_trans(unsigned *r, const at_saddr addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/* d += A(16x16, row) * B(16x8, col), f32 accumulators. */
INLINE void at_mma(float *d, const unsigned *a, const unsigned *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." AT_MMA_TYPE "." AT_MMA_TYPE ".f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#endif /* AT_PTX_EMULATE */

#endif
