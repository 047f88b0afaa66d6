/* emu_f16.h — the 16-bit element conversions of the host emulations of the CUDA templates
 * (mma_emu, wgmma_emu): dt 0 IEEE half (the compiler's _Float16), 1 bfloat16 (round to nearest
 * even, NaN kept quiet), as the device's cvt instructions do. */
#ifndef AT_EMU_F16_H
#define AT_EMU_F16_H

#include <cstring>

namespace at_emu
{

/* Every half's value, once: the conversion (libgcc's __extendhfsf2 where the CPU has no F16C)
 * was a fifth of the emulators' time, called per operand element. */
struct f16_table {
    float v[65536];
    f16_table()
    {
        for (unsigned u = 0; u < 65536; u++) {
            _Float16 h;
            const unsigned short s = (unsigned short)u;
            memcpy(&h, &s, 2);
            v[u] = (float)h;
        }
    }
};

inline float to_f32(unsigned short u, int dt)
{
    if (dt) {
        const unsigned b = (unsigned)u << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    static const f16_table table;
    return table.v[u];
}

inline unsigned short from_f32(float f, int dt)
{
    unsigned short u;
    if (dt) {
        unsigned b;
        memcpy(&b, &f, 4);
        if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
        b += 0x7fffu + ((b >> 16) & 1u);
        return (unsigned short)(b >> 16);
    }
    const _Float16 h = (_Float16)f;
    memcpy(&u, &h, 2);
    return u;
}

} // namespace at_emu

#endif
