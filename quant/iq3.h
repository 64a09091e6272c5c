/* iq3.h - ggml's 3-bit grid formats IQ3_XXS (3.06 bits per weight) and
 * IQ3_S (3.44): each group of 4 weights is one entry of a codebook of 4
 * magnitudes (quant/iq_grids.h) plus signs, under a 4-bit scale per 32
 * weights and an fp16 scale per 256. Layouts in quant/blocks_iq.h.
 *
 * Quantizers have ggml's quantize_iq3_xxs / quantize_iq3_s contract and
 * output, with and without importance (NULL weighs errors by x^2; else
 * n_per_row per-column weights shared by all rows, combined with
 * sqrt(sigma2 + x^2) as in ggml). They need no initialisation (ggml's
 * ggml_quantize_init): the codebook searches use the constant tables of
 * quant/iq_lattice.h, so they are safe to call from any thread. Rows of a
 * positive multiple of 256; they return the bytes written (0 for a bad
 * n_per_row or nrows < 0). Input must be finite.
 *
 * Decoders give exactly ggml's dequantize_row_iq3_xxs / _s values and the
 * dot products with Q8_K activations equal ggml's generic
 * ggml_vec_dot_iq3_xxs_q8_K / ggml_vec_dot_iq3_s_q8_K bit for bit. Per-block
 * math is HFQ_HD, for the CPU and CUDA alike.
 */
#ifndef HFQ_QUANT_IQ3_H
#define HFQ_QUANT_IQ3_H

#include <stddef.h>
#include <stdint.h>

#include "quant/blocks_iq.h"
#include "quant/half.h"
#include "quant/hd.h"
#include "quant/iq_grids.h"

/* ggml's ksigns_iq2xs: 7 stored sign bits, the eighth their parity. */
static inline HFQ_HD uint8_t hfq_iq_signs7(uint32_t s7) {
    uint32_t p = s7 ^ (s7 >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return (uint8_t)(s7 | (p & 1) << 7);
}

/* The 32-bit scale-and-signs word of IQ3_XXS sub-block j. */
static inline HFQ_HD uint32_t hfq_iq3_xxs_aux(const hfq_block_iq3_xxs *b, int j) {
    const uint8_t *p = b->qs + HFQ_QK_K / 4 + 4 * j;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Signed levels (codebook magnitude times sign) of IQ3_XXS sub-block j. */
static inline HFQ_HD void hfq_iq3_xxs_levels32(const hfq_block_iq3_xxs *b, int j, int v[32]) {
    const uint32_t aux = hfq_iq3_xxs_aux(b, j);
    const uint8_t *q3 = b->qs + 8 * j;
    for (int l = 0; l < 4; ++l) {
        const uint8_t signs = hfq_iq_signs7((aux >> 7 * l) & 127);
        const uint32_t g1 = hfq_iq3xxs_grid[q3[2 * l]], g2 = hfq_iq3xxs_grid[q3[2 * l + 1]];
        for (int k = 0; k < 4; ++k) {
            v[8 * l + k] = (int)((g1 >> 8 * k) & 255) * (signs >> k & 1 ? -1 : 1);
            v[8 * l + 4 + k] = (int)((g2 >> 8 * k) & 255) * (signs >> (k + 4) & 1 ? -1 : 1);
        }
    }
}

/* Signed levels of IQ3_S sub-block j. */
static inline HFQ_HD void hfq_iq3_s_levels32(const hfq_block_iq3_s *b, int j, int v[32]) {
    const uint8_t *qs = b->qs + 8 * j, *signs = b->signs + 4 * j;
    const int qh = b->qh[j];
    for (int l = 0; l < 4; ++l) {
        const uint32_t g1 = hfq_iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
        const uint32_t g2 = hfq_iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
        for (int k = 0; k < 4; ++k) {
            v[8 * l + k] = (int)((g1 >> 8 * k) & 255) * (signs[l] >> k & 1 ? -1 : 1);
            v[8 * l + 4 + k] = (int)((g2 >> 8 * k) & 255) * (signs[l] >> (k + 4) & 1 ? -1 : 1);
        }
    }
}

static inline HFQ_HD void hfq_decode_iq3_xxs(const hfq_block_iq3_xxs *b, float y[HFQ_QK_K]) {
    const float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < HFQ_QK_K / 32; ++j) {
        int v[32];
        hfq_iq3_xxs_levels32(b, j, v);
        const float db = d * (0.5f + (float)(hfq_iq3_xxs_aux(b, j) >> 28)) * 0.5f;
        /* ggml's db * magnitude * (+-1): negating is exact, so db * level */
        for (int i = 0; i < 32; ++i) y[32 * j + i] = db * (float)v[i];
    }
}

static inline HFQ_HD void hfq_decode_iq3_s(const hfq_block_iq3_s *b, float y[HFQ_QK_K]) {
    const float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < HFQ_QK_K / 32; ++j) {
        int v[32];
        hfq_iq3_s_levels32(b, j, v);
        const float db = d * (float)(1 + 2 * ((b->scales[j / 2] >> 4 * (j % 2)) & 0xf));
        for (int i = 0; i < 32; ++i) y[32 * j + i] = db * (float)v[i];
    }
}

static inline HFQ_HD int32_t hfq_iq_dot32(const int v[32], const int8_t a[32]) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += v[i] * a[i];
    return s;
}

/* One super-block against its Q8_K activations: ggml's d * bsum (the IQ3_XXS
 * row sum is then scaled by 0.25). */
static inline HFQ_HD float hfq_dot_iq3_xxs_q8_k(const hfq_block_iq3_xxs *w, const hfq_block_q8_k *a) {
    int32_t bsum = 0;
    for (int j = 0; j < HFQ_QK_K / 32; ++j) {
        int v[32];
        hfq_iq3_xxs_levels32(w, j, v);
        bsum += hfq_iq_dot32(v, a->qs + 32 * j) * (int32_t)(2 * (hfq_iq3_xxs_aux(w, j) >> 28) + 1);
    }
    return hfq_fp16_to_f32(w->d) * a->d * (float)bsum;
}

static inline HFQ_HD float hfq_dot_iq3_s_q8_k(const hfq_block_iq3_s *w, const hfq_block_q8_k *a) {
    int32_t bsum = 0;
    for (int j = 0; j < HFQ_QK_K / 32; ++j) {
        int v[32];
        hfq_iq3_s_levels32(w, j, v);
        bsum += hfq_iq_dot32(v, a->qs + 32 * j) * (2 * ((w->scales[j / 2] >> 4 * (j % 2)) & 0xf) + 1);
    }
    return hfq_fp16_to_f32(w->d) * a->d * (float)bsum;
}

size_t hfq_quantize_iq3_xxs(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_iq3_s(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

void hfq_dequantize_iq3_xxs(const void *src, float *dst, int64_t n);
void hfq_dequantize_iq3_s(const void *src, float *dst, int64_t n);

/* With Q8_K activations, n elements. */
float hfq_vec_dot_iq3_xxs(const void *w, const void *a, int64_t n);
float hfq_vec_dot_iq3_s(const void *w, const void *a, int64_t n);

#endif
