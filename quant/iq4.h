/* iq4.h - ggml's 4-bit non-linear formats IQ4_NL (32-element blocks, one
 * fp16 scale) and IQ4_XS (256-element super-blocks of eight 32-element
 * sub-blocks with 6-bit scales); layouts in quant/blocks.h. Each 4-bit code
 * indexes the same 16 signed levels (ggml's kvalues_iq4nl), denser near
 * zero, so a scale times a level approximates a bell-shaped weight better
 * than evenly spaced levels do.
 *
 * Quantizers have ggml's quantize_iq4_nl / quantize_iq4_xs contract and
 * output: rows of n_per_row elements (a positive multiple of 32, resp.
 * 256); importance NULL weighs errors by x^2, importance (n_per_row
 * per-column weights shared by all rows) as ggml's importance-weighted
 * quantizers do. Both are what llama-quantize writes: for IQ4_NL that is
 * quantize_iq4_nl, whose search differs from quantize_row_iq4_nl_ref (ggml
 * uses the latter only to quantize activations, which we never do). They
 * return the bytes written (0 for a bad n_per_row or nrows < 0). Input must
 * be finite (see q_legacy.h).
 *
 * Decoders give exactly ggml's dequantize_row_iq4_nl / _xs values; the dot
 * products (IQ4_NL with Q8_0, IQ4_XS with Q8_K activations, as ggml's CPU
 * backend pairs them) equal ggml's generic ggml_vec_dot_iq4_nl_q8_0 /
 * ggml_vec_dot_iq4_xs_q8_K bit for bit. Per-block math is HFQ_HD, for the
 * CPU and CUDA alike.
 */
#ifndef HFQ_QUANT_IQ4_H
#define HFQ_QUANT_IQ4_H

#include <stddef.h>
#include <stdint.h>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/hd.h"
#include "quant/isa.h"

/* ggml's kvalues_iq4nl, in code order. */
#define HFQ_IQ4NL_LEVELS {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

static inline HFQ_HD int hfq_iq4nl_value(int code) {
    const int8_t levels[16] = HFQ_IQ4NL_LEVELS;
    return levels[code & 15];
}

/* The code of the level nearest to x (ggml's best_index_int8: bisection,
 * ties to the lower level). CPU only. */
static inline uint8_t hfq_iq4_nearest_level(float x) {
    static const int8_t levels[16] = HFQ_IQ4NL_LEVELS;
    if (x <= levels[0]) return 0;
    if (x >= levels[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < levels[mid]) hi = mid;
        else lo = mid;
    }
    return (uint8_t)(x - levels[hi - 1] < levels[hi] - x ? hi - 1 : hi);
}

/* The value code c stands for when codes are hfq_iq4_nearest_level(idl * x)
 * (0 where idl = 0: every value then gets the same code). */
static inline float hfq_iq4_grid(float idl, int c) {
    return idl ? (float)hfq_iq4nl_value(c) / idl : 0.0f;
}

/* Levels of 32 elements from 16 bytes: element j the low nibble of qs[j],
 * j + 16 the high one. */
static inline HFQ_HD void hfq_iq4_levels32(const uint8_t qs[HFQ_QK / 2], int8_t v[HFQ_QK]) {
    for (int j = 0; j < HFQ_QK / 2; j++) {
        v[j] = (int8_t)hfq_iq4nl_value(qs[j] & 0x0f);
        v[j + HFQ_QK / 2] = (int8_t)hfq_iq4nl_value(qs[j] >> 4);
    }
}

/* The 6-bit scale (0..63, biased by 32) of IQ4_XS sub-block j (0..7). */
static inline HFQ_HD int hfq_iq4_xs_scale(const hfq_block_iq4_xs *b, int j) {
    return ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | ((b->scales_h >> (2 * j)) & 3) << 4;
}

static inline HFQ_HD void hfq_decode_iq4_nl(const hfq_block_iq4_nl *b, float y[HFQ_QK]) {
    int8_t v[HFQ_QK];
    hfq_iq4_levels32(b->qs, v);
    const float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < HFQ_QK; j++) y[j] = d * (float)v[j];
}

static inline HFQ_HD void hfq_decode_iq4_xs(const hfq_block_iq4_xs *b, float y[HFQ_QK_K]) {
    const float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < HFQ_QK_K / 32; j++) {
        int8_t v[HFQ_QK];
        hfq_iq4_levels32(b->qs + 16 * j, v);
        const float dl = d * (float)(hfq_iq4_xs_scale(b, j) - 32);
        for (int l = 0; l < HFQ_QK; l++) y[32 * j + l] = dl * (float)v[l];
    }
}

static inline HFQ_HD int32_t hfq_iq4_dot32(const uint8_t qs[HFQ_QK / 2], const int8_t a[HFQ_QK]) {
    int8_t v[HFQ_QK];
    hfq_iq4_levels32(qs, v);
    int32_t sum = 0;
    for (int j = 0; j < HFQ_QK; j++) sum += (int32_t)v[j] * a[j];
    return sum;
}

static inline HFQ_HD float hfq_dot_iq4_nl_q8_0(const hfq_block_iq4_nl *w, const hfq_block_q8_0 *a) {
    return hfq_fp16_to_f32(a->d) * hfq_fp16_to_f32(w->d) * (float)hfq_iq4_dot32(w->qs, a->qs);
}

/* Sub-block j of an IQ4_XS block against its Q8_K activations; ggml adds
 * these eight products to its running sum one by one. */
static inline HFQ_HD float hfq_dot_iq4_xs_sub_q8_k(const hfq_block_iq4_xs *w, const hfq_block_q8_k *a, int j) {
    const float d = hfq_fp16_to_f32(w->d) * a->d * (float)(hfq_iq4_xs_scale(w, j) - 32);
    return d * (float)hfq_iq4_dot32(w->qs + 16 * j, a->qs + 32 * j);
}

/* Internal to quant/ (the GPTQ codecs): one IQ4_NL block (n = 32) or
 * IQ4_XS super-block (n = 256) as the quantizers write it, and the inverse
 * scale each 32-block's codes were rounded with (n / 32 of them: codes are
 * hfq_iq4_nearest_level of
 * idl[b] * x). */
void hfq_iq4_block(int n, const float *x, const float *importance, void *block, float *idl);

size_t hfq_quantize_iq4_nl(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_iq4_xs(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
/* The same in instruction set isa (the same bytes in every set). */
size_t hfq_quantize_iq4_nl_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                               const float *importance);
size_t hfq_quantize_iq4_xs_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                               const float *importance);

void hfq_dequantize_iq4_nl(const void *src, float *dst, int64_t n);
void hfq_dequantize_iq4_xs(const void *src, float *dst, int64_t n);

/* IQ4_NL with Q8_0, IQ4_XS with Q8_K activations, n elements. */
float hfq_vec_dot_iq4_nl(const void *w, const void *a, int64_t n);
float hfq_vec_dot_iq4_xs(const void *w, const void *a, int64_t n);

#endif
