/* dtype.c — element types: their names (the one table), sizes and conversions from and to
 * f32 (round to nearest even, as the GPUs' conversions do). */
#include "tuner/tuner.h"

#include <string.h>

const char *const at_dtype_table[] = {"f32", "f16", "bf16", NULL};

const char *at_dtype_name(at_dtype d) { return (unsigned)d < 3 ? at_dtype_table[d] : "?"; }

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even, as the GPUs' conversions do. */
static uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

static uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflows to infinity */
    if (mag < 0x38800000u) {                                   /* subnormal or zero in f16 */
        if (mag < 0x33000000u) return (uint16_t)sign;
        uint32_t m = (mag & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(mag >> 23); /* 14..24 */
        uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1);
        uint32_t h = m >> shift;
        if (rest > half || (rest == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((mag >> 13) - (112u << 10)); /* rebias exponent 127 -> 15 */
    uint32_t rest = mag & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) return (sign ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f; /* 2^-24 */
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

size_t at_dtype_size(at_dtype d) { return d == AT_DTYPE_F32 ? 4 : 2; }

void at_dtype_from_f32(at_dtype d, const float *src, void *dst, size_t n)
{
    uint16_t *h = dst;
    if (d == AT_DTYPE_F32)
        memcpy(dst, src, n * 4);
    else if (d == AT_DTYPE_F16)
        for (size_t i = 0; i < n; i++) h[i] = f32_to_f16(src[i]);
    else
        for (size_t i = 0; i < n; i++) h[i] = f32_to_bf16(src[i]);
}

void at_dtype_to_f32(at_dtype d, const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    if (d == AT_DTYPE_F32)
        memcpy(dst, src, n * 4);
    else if (d == AT_DTYPE_F16)
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(h[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(h[i]);
}

void at_dtype_fill_random(float *x, size_t n, uint64_t seed, at_dtype d)
{
    uint64_t s = seed ? seed : 1; /* xorshift64: any nonzero state */
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 4503599627370496.0 - 1.0);
    }
    /* Round through the element type in place, 4096 values at a time. */
    uint16_t h[4096];
    for (size_t i = 0; d != AT_DTYPE_F32 && i < n; i += 4096) {
        size_t c = n - i < 4096 ? n - i : 4096;
        at_dtype_from_f32(d, x + i, h, c);
        at_dtype_to_f32(d, h, x + i, c);
    }
}
