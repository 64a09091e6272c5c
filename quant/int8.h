/* int8.h - symmetric INT8 quantization with FP32 scales.
 *
 * x ~= scale * q with q in [-127, 127] (-128 is never produced). A scale
 * covers one group of G consecutive elements of a row; G = the row length
 * (group_size 0) is per output channel for weights and per token for
 * activations. The reference scale is amax / 127 of the group (0 for an
 * all-zero group, whose codes are 0). q = round(x / scale), rounding half
 * away from zero (as C's roundf and ggml's Q8_0), then clamped to +-127.
 *
 * Dot products multiply int8 codes with int32 accumulation over chunks of at
 * most 65536 products (|q*q| <= 16129, so a chunk cannot overflow), chunks
 * summed exactly in 64 bits per group, then scale in float.
 */
#ifndef HFQ_QUANT_INT8_H
#define HFQ_QUANT_INT8_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/hd.h"

#define HFQ_INT8_QMAX 127

/* round(v) half away from zero, clamped to [-127, 127]; NaN gives 0. */
static inline HFQ_HD int8_t hfq_int8_round(float v) {
    if (!(fabsf(v) < (float)HFQ_INT8_QMAX)) return v > 0 ? HFQ_INT8_QMAX : (v < 0 ? -HFQ_INT8_QMAX : 0);
    return (int8_t)roundf(v);
}

/* Sum of a[i] * b[i]; exact for n <= 2^17. */
static inline HFQ_HD int32_t hfq_dot_i8(const int8_t *a, const int8_t *b, int n) {
    int32_t sum = 0;
    for (int i = 0; i < n; i++) sum += (int32_t)a[i] * b[i];
    return sum;
}

/* amax(|x|) / 127 over n values; 0 when all are zero. */
float hfq_int8_scale(const float *x, int64_t n);

/* Quantizes nrows rows of n_per_row values into nrows * n_per_row int8
 * codes and nrows * (n_per_row / G) scales (row-major: scales[r * groups + g]),
 * G = group_size, or n_per_row when group_size is 0. importance (n_per_row
 * weights shared by all rows, or NULL) makes each group's scale the one of
 * amax/127 * (1 - 0.015 k), k = 0..10, that minimises
 * sum importance[j] * (x[j] - scale * q[j])^2 (the earliest on ties); NULL is
 * the reference amax/127. Returns bytes written, 0 when the geometry is
 * invalid (nrows < 0, n_per_row <= 0, G not dividing n_per_row). */
size_t hfq_quantize_int8(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                         const float *importance, float *scales, int64_t group_size);

/* Static quantization with one given scale for every element (static
 * activation scales). Returns bytes written, 0 on invalid geometry. */
size_t hfq_quantize_int8_static(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                float scale);

/* compressed-tensors' dynamic per-token INT8 (its W8A8 forward): scale =
 * amax / 127.5 (bit_range / 2 of [-128, 127]), q = x / scale rounded half to
 * even and clamped to [-128, 127]; returns the scale (0 and zero codes for
 * an all-zero row). vLLM and hfq_quantize_int8 take amax / 127 and +-127. */
float hfq_quantize_int8_ct(const float *x, int8_t *q, int64_t n);

/* dst[i] = scales[i / G] * q[i] for one row of n codes (G as above, 0 = n). */
void hfq_dequantize_row_int8(const void *src, float *dst, int64_t n, const float *scales,
                             int64_t group_size);

/* One weight row (scales per group of G, 0 = n) times float activations:
 * sum over groups, in order from 0, of scale_g * (sum q * x accumulated in
 * float in quant/lanes.h's order, each group a run). */
float hfq_dot_int8_f32(const void *w, const float *w_scales, int64_t group_size,
                       const float *x, int64_t n);

/* W8A8: weight row times an int8 activation row quantized with one scale
 * (per token or static): sum over groups of w_scale_g * int32 dot, times
 * a_scale. */
float hfq_dot_int8_int8(const void *w, const float *w_scales, int64_t group_size,
                        const void *a, float a_scale, int64_t n);

#endif
