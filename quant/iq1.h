/* iq1.h - ggml's 1-bit grid formats IQ1_S (1.56 bits per weight) and
 * IQ1_M (1.75): each group of 8 weights is one entry of a codebook of
 * ternary values (quant/iq_grids.h) shifted by +-0.125, under 3-bit scales
 * (per 32 weights for IQ1_S, per 16 for IQ1_M) and an fp16 scale per 256.
 * Layouts in quant/blocks_iq.h.
 *
 * Quantizers have ggml's quantize_iq1_s / quantize_iq1_m contract and
 * output. IQ1_S needs importance (ggml asserts it; llama-quantize refuses
 * without an imatrix): given NULL it writes zero blocks and returns 0. IQ1_M
 * takes NULL (errors then weighed by x^2). ggml sorts each sub-block's
 * values with the C library's qsort, which ties leave in input order here
 * (glibc's merge sort): ours is that stable order. No initialisation,
 * thread-safe (quant/iq_lattice.h). Rows of a positive multiple of 256;
 * they return the bytes written (0 for a bad n_per_row or nrows < 0). Input
 * must be finite.
 *
 * Decoders give exactly ggml's dequantize_row_iq1_s / _m values and the dot
 * products with Q8_K activations equal ggml's generic
 * ggml_vec_dot_iq1_s_q8_K / _m_q8_K bit for bit. Per-block math is HFQ_HD.
 */
#ifndef HFQ_QUANT_IQ1_H
#define HFQ_QUANT_IQ1_H

#include <stddef.h>
#include <stdint.h>

#include "quant/blocks_iq.h"
#include "quant/half.h"
#include "quant/hd.h"
#include "quant/iq_grids.h"

#define HFQ_IQ1_DELTA 0.125f /* ggml's IQ1S_DELTA = IQ1M_DELTA */

/* Group g (0..31) of a super-block: codebook entry, shift sign (+1: +delta)
 * and odd scale 2 s + 1. */
static inline HFQ_HD void hfq_iq1_s_group(const hfq_block_iq1_s *b, int g, uint64_t *entry, int *shift, int *ls) {
    const int qh = b->qh[g / 4];
    *entry = hfq_iq1s_grid[b->qs[g] | ((qh >> 3 * (g % 4)) & 7) << 8];
    *shift = qh & 0x8000 ? -1 : 1;
    *ls = 2 * ((qh >> 12) & 7) + 1;
}

static inline HFQ_HD uint16_t hfq_iq1_m_word(const hfq_block_iq1_m *b, int k) {
    return (uint16_t)(b->scales[2 * k] | b->scales[2 * k + 1] << 8);
}

static inline HFQ_HD void hfq_iq1_m_group(const hfq_block_iq1_m *b, int g, uint64_t *entry, int *shift, int *ls) {
    const int qh = b->qh[g / 2], odd = g % 2;
    *entry = hfq_iq1s_grid[b->qs[g] | ((qh << (8 - 4 * odd)) & 0x700)];
    *shift = qh & (odd ? 0x80 : 0x08) ? -1 : 1;
    *ls = 2 * ((hfq_iq1_m_word(b, g / 8) >> 3 * (g / 2 % 4)) & 7) + 1; /* sub-block of 16: g / 2 */
}

/* The fp16 bits of IQ1_M's super-block scale, from the words' top nibbles. */
static inline HFQ_HD uint16_t hfq_iq1_m_d16(const hfq_block_iq1_m *b) {
    return (uint16_t)(hfq_iq1_m_word(b, 0) >> 12 | (hfq_iq1_m_word(b, 1) >> 8 & 0x00f0) |
                      (hfq_iq1_m_word(b, 2) >> 4 & 0x0f00) | (hfq_iq1_m_word(b, 3) & 0xf000));
}

/* The fp16 super-block scale of IQ1_M. */
static inline HFQ_HD float hfq_iq1_m_d(const hfq_block_iq1_m *b) { return hfq_fp16_to_f32(hfq_iq1_m_d16(b)); }

static inline HFQ_HD float hfq_iq1_s_d(const hfq_block_iq1_s *b) { return hfq_fp16_to_f32(b->d); }

/* Decoder and super-block dot of IQ1 format `name` from its accessors:
 * x = d * ls * (v + shift * delta); the dot is d_w * d_a * (sum ls v a +
 * delta * sum ls shift a), both sums integers. */
#define HFQ_IQ1_BLOCK_MATH(name, block_t)                                                                    \
    static inline HFQ_HD void hfq_decode_##name(const block_t *b, float y[HFQ_QK_K]) {                       \
        const float d = hfq_##name##_d(b);                                                                   \
        for (int g = 0; g < HFQ_QK_K / 8; ++g) {                                                             \
            uint64_t e;                                                                                      \
            int shift, ls;                                                                                   \
            hfq_##name##_group(b, g, &e, &shift, &ls);                                                       \
            const float dl = d * (float)ls, delta = shift < 0 ? -HFQ_IQ1_DELTA : HFQ_IQ1_DELTA;              \
            for (int j = 0; j < 8; ++j) y[8 * g + j] = dl * ((float)(int8_t)(e >> 8 * j) + delta);           \
        }                                                                                                    \
    }                                                                                                        \
    static inline HFQ_HD float hfq_dot_##name##_q8_k(const block_t *w, const hfq_block_q8_k *a) {            \
        int32_t sumi = 0, sumi_shift = 0;                                                                    \
        for (int g = 0; g < HFQ_QK_K / 8; ++g) {                                                             \
            uint64_t e;                                                                                      \
            int shift, ls;                                                                                   \
            hfq_##name##_group(w, g, &e, &shift, &ls);                                                       \
            int32_t lsum = 0, asum = 0;                                                                      \
            for (int j = 0; j < 8; ++j) {                                                                    \
                lsum += (int8_t)(e >> 8 * j) * a->qs[8 * g + j];                                             \
                asum += a->qs[8 * g + j];                                                                    \
            }                                                                                                \
            sumi += ls * lsum;                                                                               \
            sumi_shift += ls * shift * asum;                                                                 \
        }                                                                                                    \
        return hfq_##name##_d(w) * a->d * ((float)sumi + HFQ_IQ1_DELTA * (float)sumi_shift);                 \
    }

HFQ_IQ1_BLOCK_MATH(iq1_s, hfq_block_iq1_s)
HFQ_IQ1_BLOCK_MATH(iq1_m, hfq_block_iq1_m)

size_t hfq_quantize_iq1_s(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_iq1_m(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

void hfq_dequantize_iq1_s(const void *src, float *dst, int64_t n);
void hfq_dequantize_iq1_m(const void *src, float *dst, int64_t n);

/* With Q8_K activations, n elements. */
float hfq_vec_dot_iq1_s(const void *w, const void *a, int64_t n);
float hfq_vec_dot_iq1_m(const void *w, const void *a, int64_t n);

#endif
