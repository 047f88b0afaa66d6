/* mfma_hw.h — the MFMA instruction as the CDNA ISA describes it (not as the templates use it),
 * the hardware model the host emulations of the HIP templates (test_hip_mfma, test_hip_attention)
 * run their fragments through. */
#ifndef AT_MFMA_HW_H
#define AT_MFMA_HW_H

/* One MFMA x MFMA x (kl * 64/MFMA) instruction: fa[lane*4 + t], fb[lane*4 + t] are the lanes'
 * operand registers, acc[lane*nacc + reg] the accumulators (nacc = MFMA*MFMA/64 per lane). The
 * ISA: A(i, k) is in lane i + MFMA * (k / kl), element k % kl; B(k, j) in lane
 * j + MFMA * (k / kl); D(i, j) in lane j + MFMA * ((i / 4) % G), register (i / (4G)) * 4 + i % 4,
 * with G = 64 / MFMA. */
static void hw_mfma(int mfma, int kl, const float *fa, const float *fb, float *acc)
{
    const int g = 64 / mfma, ki = kl * g, nacc = mfma * mfma / 64;
    for (int i = 0; i < mfma; i++)
        for (int j = 0; j < mfma; j++) {
            double d = 0;
            for (int k = 0; k < ki; k++)
                d += (double)fa[(i + mfma * (k / kl)) * 4 + k % kl] *
                     fb[(j + mfma * (k / kl)) * 4 + k % kl];
            acc[(j + mfma * ((i / 4) % g)) * nacc + (i / (4 * g)) * 4 + i % 4] += (float)d;
        }
}

/* v_perm_b32 D, S0, S1, sel (CDNA ISA): byte i of D is byte sel.byte[i] of the 8 bytes
 * {S0: bytes 7..4, S1: bytes 3..0}, for selector bytes 0..7 (the only ones the templates use). */
static inline unsigned hw_perm(unsigned s0, unsigned s1, unsigned sel)
{
    const unsigned long long x = (unsigned long long)s0 << 32 | s1;
    unsigned d = 0;
    for (int i = 0; i < 4; i++) d |= (unsigned)(x >> 8 * ((sel >> 8 * i) & 7) & 0xffu) << 8 * i;
    return d;
}

#endif
