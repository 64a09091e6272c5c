/* tq.h - ggml's ternary formats TQ1_0 (1.69 bits per weight) and TQ2_0
 * (2.06): x = d * t, t in {-1, 0, 1}, one fp16 scale (the block's absolute
 * maximum) per 256. Layouts in quant/blocks_iq.h.
 *
 * Quantizers are ggml's quantize_tq1_0 / quantize_tq2_0 (importance is
 * ignored there and here): t = round(x / amax), halves away from zero.
 * Rows of a positive multiple of 256; they return the bytes written (0 for
 * a bad n_per_row or nrows < 0). Input must be finite.
 *
 * Decoders give exactly ggml's dequantize_row_tq1_0 / _tq2_0 values and the
 * dot products with Q8_K activations equal ggml's generic
 * ggml_vec_dot_tq1_0_q8_K / _tq2_0_q8_K bit for bit. Per-block math is
 * HFQ_HD.
 */
#ifndef HFQ_QUANT_TQ_H
#define HFQ_QUANT_TQ_H

#include <stddef.h>
#include <stdint.h>

#include "quant/blocks_iq.h"
#include "quant/half.h"
#include "quant/hd.h"

/* Trit n (0 = most significant) of a TQ1_0 byte, as t - 1. */
static inline HFQ_HD int hfq_tq1_trit(uint8_t q, int n) {
    const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t shifted = (uint8_t)(q * pow3[n]);
    return (((uint16_t)shifted * 3) >> 8) - 1;
}

/* The 256 ternary values of a block, in element order. */
static inline HFQ_HD void hfq_tq1_0_levels(const hfq_block_tq1_0 *b, int v[HFQ_QK_K]) {
    for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 32; ++m) v[32 * n + m] = hfq_tq1_trit(b->qs[m], n);
    for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 16; ++m) v[160 + 16 * n + m] = hfq_tq1_trit(b->qs[32 + m], n);
    for (int n = 0; n < 4; ++n)
        for (int j = 0; j < 4; ++j) v[240 + 4 * n + j] = hfq_tq1_trit(b->qh[j], n);
}

static inline HFQ_HD void hfq_tq2_0_levels(const hfq_block_tq2_0 *b, int v[HFQ_QK_K]) {
    for (int j = 0; j < 2; ++j)
        for (int l = 0; l < 4; ++l)
            for (int m = 0; m < 32; ++m) v[128 * j + 32 * l + m] = ((b->qs[32 * j + m] >> 2 * l) & 3) - 1;
}

/* Decoder and super-block dot of TQ format `name`: x = t * d; the dot is
 * the integer sum of t a times (d_w d_a). */
#define HFQ_TQ_BLOCK_MATH(name, block_t)                                                            \
    static inline HFQ_HD void hfq_decode_##name(const block_t *b, float y[HFQ_QK_K]) {              \
        int v[HFQ_QK_K];                                                                            \
        hfq_##name##_levels(b, v);                                                                  \
        const float d = hfq_fp16_to_f32(b->d);                                                      \
        for (int i = 0; i < HFQ_QK_K; ++i) y[i] = (float)v[i] * d;                                  \
    }                                                                                               \
    static inline HFQ_HD float hfq_dot_##name##_q8_k(const block_t *w, const hfq_block_q8_k *a) {   \
        int v[HFQ_QK_K];                                                                            \
        hfq_##name##_levels(w, v);                                                                  \
        int32_t sum = 0;                                                                            \
        for (int i = 0; i < HFQ_QK_K; ++i) sum += v[i] * a->qs[i];                                  \
        return (float)sum * (hfq_fp16_to_f32(w->d) * a->d);                                         \
    }

HFQ_TQ_BLOCK_MATH(tq1_0, hfq_block_tq1_0)
HFQ_TQ_BLOCK_MATH(tq2_0, hfq_block_tq2_0)

size_t hfq_quantize_tq1_0(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_tq2_0(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

void hfq_dequantize_tq1_0(const void *src, float *dst, int64_t n);
void hfq_dequantize_tq2_0(const void *src, float *dst, int64_t n);

/* With Q8_K activations, n elements. */
float hfq_vec_dot_tq1_0(const void *w, const void *a, int64_t n);
float hfq_vec_dot_tq2_0(const void *w, const void *a, int64_t n);

#endif
