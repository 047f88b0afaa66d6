/* hip_mfma.h — the AMD matrix-core (MFMA) pieces the HIP templates share (gemm_mfma.hip,
 * attention_mfma.hip): the operand and accumulator layouts of one instruction, the instruction
 * itself, and the 16-bit conversions.
 *
 * Layouts (AMD CDNA ISA, "matrix fused multiply add"; the same in AMD's matrix instruction
 * calculator): for an MFMA x MFMA x KI instruction with G = 64 / MFMA lane groups and
 * KL = KI / G elements per lane, lane l holds A(l % MFMA, (l / MFMA) * KL + t) and
 * B((l / MFMA) * KL + t, l % MFMA) for t < KL, and accumulator r of lane l is
 * D((r / 4) * 4G + (l / MFMA) * 4 + r % 4, l % MFMA). The index functions are plain C as well,
 * so the host emulations (tests/unit/test_hip_mfma.c, test_hip_attention.c) run them against an
 * independent model of the instruction.
 *
 * Instructions: f16 on every CDNA part: v_mfma_f32_32x32x8f16 / 16x16x16f16 (KL = 4). bf16 on
 * gfx90a and later: the _1k forms 32x32x8bf16_1k / 16x16x16bf16_1k (KL = 4); on gfx908 only the
 * older 32x32x4bf16 / 16x16x8bf16 (KL = 2).
 *
 * The including template defines MFMA (16 or 32), DT (0 f16, 1 bf16) and BF16_1K before this
 * file; AT_MFMA_HOST (host emulation) leaves only the index functions. */
#ifndef AT_HIP_MFMA_H
#define AT_HIP_MFMA_H

#ifdef AT_MFMA_HOST
#define AT_HD static inline
#else
#define AT_HD INLINE
#endif

/* ---- layouts of one instruction (device and host) -------------------------------------------- */
/* Operand element t of lane l: its row of A (column of B) within the instruction tile... */
AT_HD int at_mfma_rc(const int mfma, const int lane) { return lane % mfma; }
/* ... and its k within the instruction's K. */
AT_HD int at_mfma_k(const int mfma, const int kl, const int lane, const int t)
{
    return (lane / mfma) * kl + t;
}
/* Accumulator r of lane l: its row and column within the instruction's MFMA x MFMA tile. */
AT_HD int at_mfma_acc_row(const int mfma, const int lane, const int r)
{
    return (r / 4) * 4 * (64 / mfma) + (lane / mfma) * 4 + r % 4;
}
AT_HD int at_mfma_acc_col(const int mfma, const int lane) { return lane % mfma; }

#ifndef AT_MFMA_HOST
/* ---- the instruction ------------------------------------------------------------------------- */
#define AT_MFMA_KL  (DT == 1 && !BF16_1K ? 2 : 4) /* 16-bit elements per lane and instruction */
#define AT_MFMA_ACC (MFMA * MFMA / 64)            /* accumulators per lane */

typedef float at_accv __attribute__((ext_vector_type(AT_MFMA_ACC)));
typedef short at_short4 __attribute__((ext_vector_type(4)));
typedef short at_short2 __attribute__((ext_vector_type(2)));
typedef _Float16 at_half4 __attribute__((ext_vector_type(4)));
#if AT_MFMA_KL == 4
typedef at_short4 at_frag;
#else
typedef at_short2 at_frag;
#endif

/* acc += A-fragment x B-fragment, one MFMA x MFMA x KI instruction (cbsz, abid, blgp = 0). */
INLINE at_accv at_mfma(const at_frag a, const at_frag b, const at_accv acc)
{
#if DT == 0
#if MFMA == 32
    return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(at_half4, a),
                                                __builtin_bit_cast(at_half4, b), acc, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(at_half4, a),
                                                 __builtin_bit_cast(at_half4, b), acc, 0, 0, 0);
#endif
#elif BF16_1K
#if MFMA == 32
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, acc, 0, 0, 0);
#endif
#else
#if MFMA == 32
    return __builtin_amdgcn_mfma_f32_32x32x4bf16(a, b, acc, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_16x16x8bf16(a, b, acc, 0, 0, 0);
#endif
#endif
}

/* ---- 16-bit conversions ---------------------------------------------------------------------- */
INLINE float at_to_f32(const unsigned short h)
{
#if DT == 0
    return (float)__builtin_bit_cast(_Float16, h);
#else
    return __builtin_bit_cast(float, (unsigned)h << 16);
#endif
}

/* Round to nearest even; NaN stays NaN. */
INLINE unsigned short at_from_f32(const float f)
{
#if DT == 0
    return __builtin_bit_cast(unsigned short, (_Float16)f);
#else
    const unsigned u = __builtin_bit_cast(unsigned, f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
#endif /* AT_MFMA_HOST */

#endif
