/* emu_f16.h — the 16-bit element conversions of the host emulations of the CUDA templates
 * (mma_emu, wgmma_emu): dt 0 IEEE half (the compiler's _Float16), 1 bfloat16 (round to nearest
 * even, NaN kept quiet), as the device's cvt instructions do. */
#ifndef AT_EMU_F16_H
#define AT_EMU_F16_H

#include <cstring>

namespace at_emu
{

inline float to_f32(unsigned short u, int dt)
{
    if (dt) {
        const unsigned b = (unsigned)u << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
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
