/* half.h - IEEE binary16 and bfloat16 <-> binary32 conversions.
 *
 * Rounding is to nearest, ties to even, as ggml's reference conversions
 * (ggml_compute_fp32_to_fp16, ggml_compute_fp32_to_bf16): NaN stays NaN,
 * overflow becomes infinity. */
#ifndef HFQ_QUANT_HALF_H
#define HFQ_QUANT_HALF_H

#include <stdint.h>
#include <string.h>

#include "quant/hd.h"

static inline HFQ_HD uint32_t hfq_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline HFQ_HD float hfq_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline HFQ_HD float hfq_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return hfq_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in binary32 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return hfq_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline HFQ_HD uint16_t hfq_f32_to_fp16(float f) {
    uint32_t x = hfq_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff)); /* NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {
        /* result is subnormal or zero: round ax / 2^-24 to an integer, ties to even */
        if (ax < 0x33000000u) return (uint16_t)sign; /* below half the smallest subnormal */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias the exponent and round the 13 dropped mantissa bits */
    uint32_t r = ax - 0x38000000u; /* exponent 127 -> 15 */
    r += 0x0fffu + ((r >> 13) & 1);
    return (uint16_t)(sign | (r >> 13));
}

static inline HFQ_HD float hfq_bf16_to_f32(uint16_t b) {
    return hfq_bits_f32((uint32_t)b << 16);
}

static inline HFQ_HD uint16_t hfq_f32_to_bf16(float f) {
    uint32_t u = hfq_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet NaN */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

#endif
