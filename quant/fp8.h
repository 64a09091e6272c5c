/* fp8.h - OCP 8-bit floating point (E4M3FN, E5M2) and FP8 tensor quantization.
 *
 * Codecs follow the OCP 8-bit Floating Point Specification (OFP8):
 *   E4M3FN  bias 7, max 448, no infinities, NaN only 0x7F and 0xFF.
 *   E5M2    bias 15, max 57344, IEEE-like: 0x7C/0xFC are +-inf, 0x7D-0x7F and
 *           0xFD-0xFF are NaN.
 * Encoding rounds to nearest, ties to even, and saturates: every non-NaN input,
 * infinities included, gives a finite code (|x| >= max -> +-max). NaN gives
 * 0x7F | sign in both formats. Signs are kept: -0.0 and negative values that
 * round to zero give 0x80 (-0). Subnormals are exact: E4M3 m*2^-9, E5M2 m*2^-16.
 *
 * Tensor quantization stores one FP8 code per element and FP32 scales:
 * x ~= scale * decode(code). Dynamic scales are amax / max (E4M3: 448,
 * E5M2: 57344) per row - a weight's output channel or an activation's token;
 * a per-tensor scale is hfq_fp8_scale() over the whole tensor, then the
 * static quantizer. Codes are encode(x / scale); an all-zero row has scale 0
 * and all codes 0. Inputs are expected finite.
 */
#ifndef HFQ_QUANT_FP8_H
#define HFQ_QUANT_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "quant/half.h"
#include "quant/hd.h"

typedef enum hfq_fp8_format {
    HFQ_FP8_E4M3 = 0, /* OCP E4M3FN */
    HFQ_FP8_E5M2 = 1,
} hfq_fp8_format;

#define HFQ_FP8_E4M3_MAX 448.0f
#define HFQ_FP8_E5M2_MAX 57344.0f

/* Shape of one format: mantissa bits, exponent bias, largest finite code. */
#define HFQ_FP8_MBITS(fmt) ((fmt) == HFQ_FP8_E4M3 ? 3 : 2)
#define HFQ_FP8_BIAS(fmt) ((fmt) == HFQ_FP8_E4M3 ? 7 : 15)
#define HFQ_FP8_MAX_CODE(fmt) ((fmt) == HFQ_FP8_E4M3 ? 0x7E : 0x7B)

static inline HFQ_HD float hfq_fp8_max(hfq_fp8_format fmt) {
    return fmt == HFQ_FP8_E4M3 ? HFQ_FP8_E4M3_MAX : HFQ_FP8_E5M2_MAX;
}

static inline HFQ_HD float hfq_fp8_to_f32(hfq_fp8_format fmt, uint8_t c) {
    const int mbits = HFQ_FP8_MBITS(fmt), bias = HFQ_FP8_BIAS(fmt);
    const uint32_t sign = (uint32_t)(c & 0x80) << 24;
    const uint32_t mag = c & 0x7F;
    const uint32_t exp = mag >> mbits;
    const uint32_t man = mag & ((1u << mbits) - 1);
    if (fmt == HFQ_FP8_E4M3 && mag == 0x7F) return hfq_bits_f32(sign | 0x7FC00000u);
    if (fmt == HFQ_FP8_E5M2 && exp == 0x1F)
        return hfq_bits_f32(sign | (man ? 0x7FC00000u : 0x7F800000u));
    if (exp == 0) {
        /* subnormal: man * 2^(1 - bias - mbits), exact in binary32 */
        float v = (float)man * hfq_bits_f32((uint32_t)(127 + 1 - bias - mbits) << 23);
        return sign ? -v : v;
    }
    return hfq_bits_f32(sign | ((exp + 127 - bias) << 23) | (man << (23 - mbits)));
}

static inline HFQ_HD uint8_t hfq_f32_to_fp8(hfq_fp8_format fmt, float f) {
    const int mbits = HFQ_FP8_MBITS(fmt), bias = HFQ_FP8_BIAS(fmt);
    const uint32_t max_code = HFQ_FP8_MAX_CODE(fmt);
    const uint32_t x = hfq_f32_bits(f);
    const uint8_t sign = (uint8_t)((x >> 24) & 0x80);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint8_t)(sign | 0x7F);
    if (ax < (uint32_t)(127 + 1 - bias) << 23) {
        /* below the smallest normal: round |f| / 2^(1-bias-mbits) to an integer,
         * ties to even (a result of 2^mbits is the smallest normal code) */
        const uint32_t e = ax >> 23;
        const uint32_t shift = (uint32_t)(150 + 1 - bias - mbits) - e;
        if (e == 0 || shift > 24) return sign; /* under half the smallest subnormal */
        const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint8_t)(sign | q);
    }
    /* normal: rebias the exponent, round the dropped mantissa bits to even
     * (a carry moves into the exponent), then saturate */
    const uint32_t drop = 23 - (uint32_t)mbits;
    uint32_t r = ax - ((uint32_t)(127 - bias) << 23);
    r += (1u << (drop - 1)) - 1 + ((r >> drop) & 1);
    const uint32_t code = r >> drop;
    return (uint8_t)(sign | (code > max_code ? max_code : code));
}

static inline HFQ_HD float hfq_fp8_e4m3_to_f32(uint8_t c) { return hfq_fp8_to_f32(HFQ_FP8_E4M3, c); }
static inline HFQ_HD float hfq_fp8_e5m2_to_f32(uint8_t c) { return hfq_fp8_to_f32(HFQ_FP8_E5M2, c); }
static inline HFQ_HD uint8_t hfq_f32_to_fp8_e4m3(float f) { return hfq_f32_to_fp8(HFQ_FP8_E4M3, f); }
static inline HFQ_HD uint8_t hfq_f32_to_fp8_e5m2(float f) { return hfq_f32_to_fp8(HFQ_FP8_E5M2, f); }

/* amax(|x|) / max of the format over n values; 0 when all are zero. */
float hfq_fp8_scale(hfq_fp8_format fmt, const float *x, int64_t n);

/* Dynamic per-row quantization (weights: per output channel; activations:
 * per token): scales[r] = hfq_fp8_scale(row r), dst row r = codes of
 * src row r / scales[r]. dst holds nrows * n_per_row bytes. importance
 * (n_per_row weights shared by all rows, or NULL) makes each row's scale the
 * one of hfq_fp8_scale * 2^(k/16), k = 0..15 (every alignment of the
 * values to the FP8 grid, none clipping) that minimises
 * sum importance[j] * (x[j] - scale * decode(code[j]))^2, the earliest on
 * ties; NULL is the amax scale, as FP8 checkpoints take. Returns the bytes
 * written, 0 when nrows < 0 or n_per_row <= 0. */
size_t hfq_quantize_fp8(hfq_fp8_format fmt, const float *src, void *dst, int64_t nrows,
                        int64_t n_per_row, const float *importance, float *scales);

/* Static quantization with one given scale (per-tensor weights, static
 * activation scales); scale 0 gives all-zero codes. Returns bytes written. */
size_t hfq_quantize_fp8_static(hfq_fp8_format fmt, const float *src, void *dst, int64_t nrows,
                               int64_t n_per_row, float scale);

/* dst[i] = scale * decode(src[i]) for n codes. */
void hfq_dequantize_row_fp8(hfq_fp8_format fmt, const void *src, float *dst, int64_t n, float scale);

/* Dynamic per-group FP8 activations as compressed-tensors' forward computes
 * them (FP8_BLOCK's per-token groups): each run of g values of x (n a
 * multiple of g) with scale s = hfq_fp8_scale(run) becomes
 * decode(encode(x / s)) * s in y (an all-zero run stays zeros). */
void hfq_fp8_fake_quant_groups(hfq_fp8_format fmt, const float *x, float *y, int64_t n, int64_t g);

/* (sum_i decode(w[i]) * x[i]) * w_scale, the sum in float in quant/lanes.h's order. */
float hfq_dot_fp8_f32(hfq_fp8_format wfmt, const void *w, float w_scale, const float *x, int64_t n);

/* FP8 weights times FP8 activations (W8A8): products of decoded codes are
 * summed in float in quant/lanes.h's order, then times (w_scale * a_scale). */
float hfq_dot_fp8_fp8(hfq_fp8_format wfmt, const void *w, float w_scale,
                      hfq_fp8_format afmt, const void *a, float a_scale, int64_t n);

/* The two dots above with one weight scale per group of group_size values
 * (FP8 block weights, their scales expanded per row): the sum over groups g
 * of hfq_dot_fp8_f32(group g, w_scales[g]), in group order (the FP8 x FP8
 * dot: of hfq_dot_fp8_fp8(group g, w_scales[g], a_scale 1), times a_scale);
 * group_size 0 or >= n is the dot above with w_scales[0] itself. */
float hfq_dot_fp8_f32_groups(hfq_fp8_format wfmt, const void *w, const float *w_scales, int64_t group_size,
                             const float *x, int64_t n);
float hfq_dot_fp8_fp8_groups(hfq_fp8_format wfmt, const void *w, const float *w_scales, int64_t group_size,
                             hfq_fp8_format afmt, const void *a, float a_scale, int64_t n);

#endif
