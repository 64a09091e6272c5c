/* IQ2_XXS, IQ2_XS and IQ2_S; see iq2.h. The quantizers are ggml's
 * quantize_row_iq2_xxs_impl / _xs_impl / _s_impl: the grid search of
 * quant/iq_search.h per 32 (IQ2_XXS) or 16 weights in groups of 8, then the
 * sub-block scales quantized against the super-block's fp16 scale. */
#include "quant/iq2.h"

#include <string.h>

#include "quant/iq_search.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

static const hfq_iq_search xxs = {&hfq_iq_lattice_iq2xxs, 3, 6, 0.1f, HFQ_GROUP_MAX_EPS, true, true,
                                  HFQ_IQ_REFINE_ALL};
static const hfq_iq_search xs = {&hfq_iq_lattice_iq2xs, 3, 9, 0.1f, HFQ_GROUP_MAX_EPS, true, false,
                                 HFQ_IQ_REFINE_OFF_GRID};
static const hfq_iq_search s2 = {&hfq_iq_lattice_iq2s, 3, 9, 0.1f, 1e-8f, false, false, HFQ_IQ_REFINE_OFF_GRID};

/* Runs the search over the sub-blocks of n weights of one super-block
 * (scales 0 and quantized false for those that count as zero) and returns
 * the largest scale. IQ2_S
 * weighs sigma2 / 4 + x^2 without importance; the others need it. */
typedef struct superblock {
    float scales[16];   /* per sub-block */
    bool quantized[16];
    uint8_t signs[32];  /* per group of 8 */
    uint16_t index[32];
} superblock;

static float search_superblock(const hfq_iq_search *v, int n, float sigma2, const float *x, const float *qw,
                               superblock *r) {
    float weight[HFQ_IQ_MAX_SUB], max_scale = 0, *scales = r->scales;
    for (int ib = 0; ib < HFQ_QK_K / n; ++ib) {
        const float *xb = x + n * ib;
        if (qw) hfq_importance_weights(n, xb, qw + n * ib, sigma2, weight);
        else
            for (int i = 0; i < n; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
        r->quantized[ib] = hfq_iq_search_block(v, n, xb, weight, &scales[ib], r->signs + n / 8 * ib,
                                               r->index + n / 8 * ib);
        if (r->quantized[ib]) max_scale = scales[ib] > max_scale ? scales[ib] : max_scale;
    }
    return max_scale;
}

static void iq2_xxs_superblock(const float *x, const float *qw, hfq_block_iq2_xxs *y) {
    superblock r;
    uint32_t q2[16] = {0};
    memset(y, 0, sizeof *y);
    if (!qw) return;
    const float max_scale =
        search_superblock(&xxs, 32, hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K, x, qw, &r);
    if (!max_scale) return;
    const float d = max_scale / 31, id = 1 / d;
    y->d = hfq_f32_to_fp16(d);
    for (int ib = 0; ib < 8; ++ib) {
        if (r.quantized[ib])
            for (int k = 0; k < 4; ++k) {
                q2[2 * ib] |= (uint32_t)r.index[4 * ib + k] << 8 * k;
                q2[2 * ib + 1] |= (uint32_t)r.signs[4 * ib + k] << 7 * k;
            }
        q2[2 * ib + 1] |= (uint32_t)hfq_iq_scale4(id, r.scales[ib]) << 28;
    }
    for (int i = 0; i < 16; ++i) {
        y->qs[2 * i] = (uint16_t)q2[i];
        y->qs[2 * i + 1] = (uint16_t)(q2[i] >> 16);
    }
}

/* The 4-bit scales of the 16 sub-blocks of 16 (IQ2_XS, IQ2_S). */
static void pack_scales16(float max_scale, const float *scales, uint16_t *d16, uint8_t out[8], float fudge) {
    const float d = max_scale / 31, id = 1 / d;
    *d16 = hfq_f32_to_fp16(d * fudge);
    for (int ib = 0; ib < 16; ib += 2)
        out[ib / 2] = (uint8_t)(hfq_iq_scale4(id, scales[ib]) | hfq_iq_scale4(id, scales[ib + 1]) << 4);
}

static void iq2_xs_superblock(const float *x, const float *qw, hfq_block_iq2_xs *y) {
    superblock r;
    memset(y, 0, sizeof *y);
    if (!qw) return;
    const float max_scale =
        search_superblock(&xs, 16, hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K, x, qw, &r);
    if (!max_scale) return;
    for (int g = 0; g < 32; ++g) y->qs[g] = r.quantized[g / 2] ? (uint16_t)(r.index[g] | r.signs[g] << 9) : 0;
    pack_scales16(max_scale, r.scales, &y->d, y->scales, 1.0f);
}

static void iq2_s_superblock(const float *x, const float *qw, hfq_block_iq2_s *y) {
    superblock r;
    memset(y, 0, sizeof *y);
    const float max_scale = search_superblock(&s2, 16, 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K, x, qw, &r);
    for (int g = 0; g < 32; ++g) {
        if (!r.quantized[g / 2]) continue;
        y->qs[g] = (uint8_t)(r.index[g] & 255);
        y->qh[g / 4] |= (uint8_t)((r.index[g] >> 8) << 2 * (g % 4));
        y->qs[HFQ_QK_K / 8 + g] = r.signs[g];
    }
    if (max_scale) pack_scales16(max_scale, r.scales, &y->d, y->scales, 0.9875f); /* ggml's fudge */
}

HFQ_DEFINE_QUANTIZE_BLOCKS(quantize_iq2_xxs_rows, hfq_block_iq2_xxs, HFQ_QK_K, iq2_xxs_superblock)
HFQ_DEFINE_QUANTIZE_BLOCKS(quantize_iq2_xs_rows, hfq_block_iq2_xs, HFQ_QK_K, iq2_xs_superblock)
HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_iq2_s, hfq_block_iq2_s, HFQ_QK_K, iq2_s_superblock)

/* Without importance: zero blocks and 0, see iq2.h. */
size_t hfq_quantize_iq2_xxs(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {
    size_t bytes = quantize_iq2_xxs_rows(src, dst, nrows, n_per_row, importance);
    return importance ? bytes : 0;
}

size_t hfq_quantize_iq2_xs(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {
    size_t bytes = quantize_iq2_xs_rows(src, dst, nrows, n_per_row, importance);
    return importance ? bytes : 0;
}

HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq2_xxs, hfq_block_iq2_xxs, HFQ_QK_K, hfq_decode_iq2_xxs)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq2_xs, hfq_block_iq2_xs, HFQ_QK_K, hfq_decode_iq2_xs)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq2_s, hfq_block_iq2_s, HFQ_QK_K, hfq_decode_iq2_s)

static HFQ_DEFINE_VEC_DOT(iq2_xxs_sum, hfq_block_iq2_xxs, hfq_block_q8_k, HFQ_QK_K, hfq_dot_iq2_xxs_q8_k)
static HFQ_DEFINE_VEC_DOT(iq2_xs_sum, hfq_block_iq2_xs, hfq_block_q8_k, HFQ_QK_K, hfq_dot_iq2_xs_q8_k)
static HFQ_DEFINE_VEC_DOT(iq2_s_sum, hfq_block_iq2_s, hfq_block_q8_k, HFQ_QK_K, hfq_dot_iq2_s_q8_k)

/* ggml scales the sum of the blocks' d * bsum by 0.125 at the end. */
float hfq_vec_dot_iq2_xxs(const void *w, const void *a, int64_t n) { return 0.125f * iq2_xxs_sum(w, a, n); }
float hfq_vec_dot_iq2_xs(const void *w, const void *a, int64_t n) { return 0.125f * iq2_xs_sum(w, a, n); }
float hfq_vec_dot_iq2_s(const void *w, const void *a, int64_t n) { return 0.125f * iq2_s_sum(w, a, n); }
