/* iq2.h - ggml's 2-bit grid formats IQ2_XXS (2.06 bits per weight),
 * IQ2_XS (2.31) and IQ2_S (2.56): each group of 8 weights is one entry of
 * a codebook of 8 magnitudes (quant/iq_grids.h) plus signs, under 4-bit
 * scales and an fp16 scale per 256. Layouts in quant/blocks_iq.h.
 *
 * Quantizers have ggml's quantize_iq2_xxs / _xs / _s contract and output.
 * IQ2_XXS and IQ2_XS need importance (ggml asserts it; llama-quantize
 * refuses to run without an imatrix): given NULL they write zero blocks and
 * return 0. IQ2_S takes NULL too (its weights are then sigma2 / 4 + x^2).
 * No initialisation, thread-safe (quant/iq_lattice.h). Rows of a positive
 * multiple of 256; they return the bytes written (0 for a bad n_per_row or
 * nrows < 0). Input must be finite.
 *
 * Decoders give exactly ggml's dequantize_row_iq2_* values and the dot
 * products with Q8_K activations equal ggml's generic
 * ggml_vec_dot_iq2_*_q8_K bit for bit (integer sums per super-block, then
 * ggml's float steps). Per-block math is HFQ_HD, for the CPU and CUDA.
 */
#ifndef HFQ_QUANT_IQ2_H
#define HFQ_QUANT_IQ2_H

#include <stddef.h>
#include <stdint.h>

#include "quant/blocks_iq.h"
#include "quant/half.h"
#include "quant/hd.h"
#include "quant/iq3.h"
#include "quant/iq_grids.h"

/* The 8 signed levels of a codebook entry under 8 sign bits. */
static inline HFQ_HD void hfq_iq_signed8(uint64_t entry, uint8_t signs, int v[8]) {
    for (int j = 0; j < 8; ++j) v[j] = (int)((entry >> 8 * j) & 255) * (signs >> j & 1 ? -1 : 1);
}

/* Group g (0..31) of a super-block: its codebook entry and sign bits; and
 * the 4-bit scale of 16-weight half h (0..15). */
static inline HFQ_HD void hfq_iq2_xxs_group(const hfq_block_iq2_xxs *b, int g, uint64_t *entry, uint8_t *signs) {
    const uint16_t *q = b->qs + 4 * (g / 4);
    const uint32_t index = (g % 4 < 2 ? q[0] : q[1]) >> 8 * (g % 2) & 255, aux = q[2] | (uint32_t)q[3] << 16;
    *entry = hfq_iq2xxs_grid[index];
    *signs = hfq_iq_signs7(aux >> 7 * (g % 4) & 127);
}
static inline HFQ_HD int hfq_iq2_xxs_scale(const hfq_block_iq2_xxs *b, int h) { return b->qs[4 * (h / 2) + 3] >> 12; }

static inline HFQ_HD void hfq_iq2_xs_group(const hfq_block_iq2_xs *b, int g, uint64_t *entry, uint8_t *signs) {
    *entry = hfq_iq2xs_grid[b->qs[g] & 511];
    *signs = hfq_iq_signs7(b->qs[g] >> 9);
}
static inline HFQ_HD int hfq_iq2_xs_scale(const hfq_block_iq2_xs *b, int h) { return b->scales[h / 2] >> 4 * (h % 2) & 15; }

static inline HFQ_HD void hfq_iq2_s_group(const hfq_block_iq2_s *b, int g, uint64_t *entry, uint8_t *signs) {
    *entry = hfq_iq2s_grid[b->qs[g] | (b->qh[g / 4] << (8 - 2 * (g % 4)) & 0x300)];
    *signs = b->qs[HFQ_QK_K / 8 + g];
}
static inline HFQ_HD int hfq_iq2_s_scale(const hfq_block_iq2_s *b, int h) { return b->scales[h / 2] >> 4 * (h % 2) & 15; }

/* Decoder and super-block dot of format `name` from its group and scale
 * accessors: x = d * (0.5 + s) * 0.25 * level; the dot is d_w * d_a times
 * the integer sum of (2 s + 1) * level * a (ggml scales the row by 0.125). */
#define HFQ_IQ2_BLOCK_MATH(name, block_t)                                                                    \
    static inline HFQ_HD void hfq_decode_##name(const block_t *b, float y[HFQ_QK_K]) {                       \
        const float d = hfq_fp16_to_f32(b->d);                                                               \
        for (int g = 0; g < HFQ_QK_K / 8; ++g) {                                                             \
            uint64_t e;                                                                                      \
            uint8_t s;                                                                                       \
            int v[8];                                                                                        \
            hfq_##name##_group(b, g, &e, &s);                                                                \
            hfq_iq_signed8(e, s, v);                                                                         \
            const float db = d * (0.5f + (float)hfq_##name##_scale(b, g / 2)) * 0.25f;                       \
            for (int j = 0; j < 8; ++j) y[8 * g + j] = db * (float)v[j];                                     \
        }                                                                                                    \
    }                                                                                                        \
    static inline HFQ_HD float hfq_dot_##name##_q8_k(const block_t *w, const hfq_block_q8_k *a) {            \
        int32_t bsum = 0;                                                                                    \
        for (int g = 0; g < HFQ_QK_K / 8; ++g) {                                                             \
            uint64_t e;                                                                                      \
            uint8_t s;                                                                                       \
            int v[8];                                                                                        \
            hfq_##name##_group(w, g, &e, &s);                                                                \
            hfq_iq_signed8(e, s, v);                                                                         \
            int32_t sumi = 0;                                                                                \
            for (int j = 0; j < 8; ++j) sumi += v[j] * a->qs[8 * g + j];                                     \
            bsum += sumi * (2 * hfq_##name##_scale(w, g / 2) + 1);                                           \
        }                                                                                                    \
        return hfq_fp16_to_f32(w->d) * a->d * (float)bsum;                                                   \
    }

HFQ_IQ2_BLOCK_MATH(iq2_xxs, hfq_block_iq2_xxs)
HFQ_IQ2_BLOCK_MATH(iq2_xs, hfq_block_iq2_xs)
HFQ_IQ2_BLOCK_MATH(iq2_s, hfq_block_iq2_s)

size_t hfq_quantize_iq2_xxs(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_iq2_xs(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_iq2_s(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

void hfq_dequantize_iq2_xxs(const void *src, float *dst, int64_t n);
void hfq_dequantize_iq2_xs(const void *src, float *dst, int64_t n);
void hfq_dequantize_iq2_s(const void *src, float *dst, int64_t n);

/* With Q8_K activations, n elements. */
float hfq_vec_dot_iq2_xxs(const void *w, const void *a, int64_t n);
float hfq_vec_dot_iq2_xs(const void *w, const void *a, int64_t n);
float hfq_vec_dot_iq2_s(const void *w, const void *a, int64_t n);

#endif
