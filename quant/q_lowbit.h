/* q_lowbit.h - ggml's Q1_0 (1.125 bits per weight: a sign per element and
 * one fp16 scale, the block's mean |x|, per 128) and Q2_0 (2.25: codes
 * {-1, 0, 1, 2} times one fp16 scale, the block's max |x|, per 64). Layouts
 * in quant/blocks.h.
 *
 * Quantizers are ggml's quantize_q1_0 / quantize_q2_0 (importance is
 * ignored there and here): Q1_0's bit is x >= 0; Q2_0's code is round(x /
 * amax) + 1 (halves away from zero) clamped to [0, 3]. Rows of a positive
 * multiple of the block; they return the bytes written (0 for a bad
 * n_per_row or nrows < 0). Input must be finite.
 *
 * Decoders give exactly ggml's dequantize_row_q1_0 / _q2_0, and the dots
 * with Q8_0 activations (a weight block spans 4 / 2 activation blocks)
 * equal ggml's generic ggml_vec_dot_q1_0_q8_0 / _q2_0_q8_0 bit for bit:
 * per activation block an integer sum times its scale, added in float,
 * then times the weight scale. Per-block math is HFQ_HD.
 */
#ifndef HFQ_QUANT_Q_LOWBIT_H
#define HFQ_QUANT_Q_LOWBIT_H

#include <stddef.h>
#include <stdint.h>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/hd.h"

/* The signed levels of a block: +-1 (Q1_0), -1..2 (Q2_0), in element order. */
static inline HFQ_HD void hfq_q1_0_levels(const hfq_block_q1_0 *b, int8_t v[HFQ_QK1_0]) {
    for (int j = 0; j < HFQ_QK1_0; ++j) v[j] = (b->qs[j / 8] >> (j % 8)) & 1 ? 1 : -1;
}

static inline HFQ_HD void hfq_q2_0_levels(const hfq_block_q2_0 *b, int8_t v[HFQ_QK2_0]) {
    for (int j = 0; j < HFQ_QK2_0; ++j) v[j] = (int8_t)(((b->qs[j / 4] >> 2 * (j % 4)) & 3) - 1);
}

/* Decoder and block dot of format `name` (block of n, n / 32 activation
 * blocks): x = v * d. */
#define HFQ_LOWBIT_BLOCK_MATH(name, block_t, n)                                                        \
    static inline HFQ_HD void hfq_decode_##name(const block_t *b, float y[n]) {                         \
        int8_t v[n];                                                                                    \
        hfq_##name##_levels(b, v);                                                                      \
        const float d = hfq_fp16_to_f32(b->d);                                                          \
        for (int j = 0; j < (n); ++j) y[j] = (float)v[j] * d;                                           \
    }                                                                                                   \
    static inline HFQ_HD float hfq_dot_##name##_q8_0(const block_t *w, const hfq_block_q8_0 *a) {       \
        int8_t v[n];                                                                                    \
        hfq_##name##_levels(w, v);                                                                      \
        float sum = 0.0f;                                                                               \
        for (int k = 0; k < (n) / HFQ_QK; ++k) {                                                        \
            int32_t s = 0;                                                                              \
            for (int j = 0; j < HFQ_QK; ++j) s += v[HFQ_QK * k + j] * a[k].qs[j];                       \
            sum += hfq_fp16_to_f32(a[k].d) * (float)s;                                                  \
        }                                                                                               \
        return hfq_fp16_to_f32(w->d) * sum;                                                             \
    }

HFQ_LOWBIT_BLOCK_MATH(q1_0, hfq_block_q1_0, HFQ_QK1_0)
HFQ_LOWBIT_BLOCK_MATH(q2_0, hfq_block_q2_0, HFQ_QK2_0)

size_t hfq_quantize_q1_0(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q2_0(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

void hfq_dequantize_q1_0(const void *src, float *dst, int64_t n);
void hfq_dequantize_q2_0(const void *src, float *dst, int64_t n);

/* With Q8_0 activations, n elements. */
float hfq_vec_dot_q1_0(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q2_0(const void *w, const void *a, int64_t n);

#endif
