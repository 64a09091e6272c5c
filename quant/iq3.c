/* IQ3_XXS and IQ3_S; see iq3.h. Both quantizers are ggml's
 * quantize_row_iq3_xxs_impl / quantize_row_iq3_s_impl: the grid search of
 * quant/iq_search.h per 32 weights (groups of 4), then the sub-block scales
 * quantized against the super-block's fp16 scale. */
#include "quant/iq3.h"

#include <string.h>

#include "quant/iq_search.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

static const hfq_iq_search xxs = {&hfq_iq_lattice_iq3xxs, 8, 15, 0.2f, 1e-8f, true, false, HFQ_IQ_REFINE_OFF_GRID};
static const hfq_iq_search s3 = {&hfq_iq_lattice_iq3s, 8, 9, 0.2f, 0, false, false, HFQ_IQ_REFINE_ALL_IF_OFF};

static void iq3_xxs_superblock(const float *x, const float *qw, hfq_block_iq3_xxs *y) {
    memset(y, 0, sizeof *y);
    const float sigma2 = 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K;
    float scales[8], max_scale = 0, weight[32];
    uint32_t aux[8] = {0};
    for (int ib = 0; ib < 8; ++ib) {
        uint8_t signs[4];
        uint16_t index[8];
        hfq_iq_weights(32, x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, weight);
        if (!hfq_iq_search_block(&xxs, 32, x + 32 * ib, weight, &scales[ib], signs, index)) continue;
        for (int k = 0; k < 8; ++k) y->qs[8 * ib + k] = (uint8_t)index[k];
        aux[ib] = signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 | (uint32_t)signs[3] << 21;
        max_scale = scales[ib] > max_scale ? scales[ib] : max_scale;
    }
    if (!max_scale) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float d = max_scale / 31;
    y->d = hfq_f32_to_fp16(d * 1.0125f); /* ggml's fudge factor */
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ++ib) {
        aux[ib] |= (uint32_t)hfq_iq_scale4(id, scales[ib]) << 28;
        for (int b = 0; b < 4; ++b) y->qs[HFQ_QK_K / 4 + 4 * ib + b] = (uint8_t)(aux[ib] >> 8 * b);
    }
}

static void iq3_s_superblock(const float *x, const float *qw, hfq_block_iq3_s *y) {
    memset(y, 0, sizeof *y);
    const float sigma2 = 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K;
    float scales[8], max_scale = 0, weight[32];
    /* ggml advances its qs / signs cursors only past quantized sub-blocks,
     * so an all-zero sub-block shifts the later ones' bytes down (qh is
     * indexed by position): kept, as it is what llama.cpp writes */
    int at = 0;
    for (int ib = 0; ib < 8; ++ib) {
        uint8_t signs[4];
        uint16_t index[8];
        hfq_iq_weights(32, x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, weight);
        if (!hfq_iq_search_block(&s3, 32, x + 32 * ib, weight, &scales[ib], signs, index)) continue;
        memcpy(y->signs + 4 * at, signs, sizeof signs);
        for (int k = 0; k < 8; ++k) {
            y->qs[8 * at + k] = (uint8_t)(index[k] & 255);
            y->qh[ib] |= (uint8_t)((index[k] >> 8) << k);
        }
        at++;
        max_scale = scales[ib] > max_scale ? scales[ib] : max_scale;
    }
    if (!max_scale) return;
    const float d = max_scale / 31;
    y->d = hfq_f32_to_fp16(d * 1.033f); /* ggml's fudge factor */
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib += 2) {
        y->scales[ib / 2] = (uint8_t)(hfq_iq_scale4(id, scales[ib]) | hfq_iq_scale4(id, scales[ib + 1]) << 4);
    }
}

HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_iq3_xxs, hfq_block_iq3_xxs, HFQ_QK_K, iq3_xxs_superblock)
HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_iq3_s, hfq_block_iq3_s, HFQ_QK_K, iq3_s_superblock)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq3_xxs, hfq_block_iq3_xxs, HFQ_QK_K, hfq_decode_iq3_xxs)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq3_s, hfq_block_iq3_s, HFQ_QK_K, hfq_decode_iq3_s)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_iq3_s, hfq_block_iq3_s, hfq_block_q8_k, HFQ_QK_K, hfq_dot_iq3_s_q8_k)

static HFQ_DEFINE_VEC_DOT(iq3_xxs_block_sum, hfq_block_iq3_xxs, hfq_block_q8_k, HFQ_QK_K, hfq_dot_iq3_xxs_q8_k)

/* ggml scales the sum of the blocks' d * bsum by 0.25 at the end. */
float hfq_vec_dot_iq3_xxs(const void *w, const void *a, int64_t n) { return 0.25f * iq3_xxs_block_sum(w, a, n); }
