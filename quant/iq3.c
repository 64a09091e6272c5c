/* IQ3_XXS and IQ3_S; see iq3.h. Both quantizers are ggml's
 * quantize_row_iq3_xxs_impl / quantize_row_iq3_s_impl: per 32 weights, fold
 * the signs out, try a ladder of scales, round each group of 4 magnitudes
 * to the lattice and, off the codebook, to its best listed neighbour; keep
 * the best weighted least-squares fit, then quantize the sub-block scales
 * against the super-block's fp16 scale. */
#include "quant/iq3.h"

#include <math.h>
#include <string.h>

#include "quant/block_math.h"
#include "quant/iq_lattice.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

#define KMAXQ 8 /* levels 0..7, lattice coordinate 2 l + 1 */

/* What differs between the two formats' sub-block searches. */
typedef struct iq3_variant {
    const hfq_iq_lattice *lat;
    int n_steps;           /* scales (2 KMAXQ - 1 + 0.2 is) / max, is = -n_steps..n_steps */
    bool even_signs;       /* IQ3_XXS stores 7 signs of 8: flip the cheapest to make them even */
    bool refine_all;       /* the final rounding redoes every group (IQ3_S), not only off-codebook ones */
} iq3_variant;

/* The lattice index of 4 levels. */
static uint16_t point_of(const int8_t *L) {
    uint16_t u = 0;
    for (int i = 0; i < 4; ++i) u |= (uint16_t)(L[i] << 3 * i);
    return u;
}

/* Rounds the 4 magnitudes xv at inverse scale id to levels L, then onto the
 * codebook (neighbours tried at scale); returns whether the rounding was
 * already on it. */
static bool round_group(const hfq_iq_lattice *lat, const float *xv, const float *wv, float id, float scale,
                        int8_t *L) {
    for (int i = 0; i < 4; ++i) {
        int l = hfq_nearest_int(0.5f * (id * xv[i] - 1));
        L[i] = (int8_t)(l < 0 ? 0 : l > KMAXQ - 1 ? KMAXQ - 1 : l);
    }
    int32_t m = lat->map[point_of(L)];
    if (m >= 0) return true;
    hfq_iq_best_neighbour(lat, hfq_iq_neighbours(lat, m), xv, wv, scale, L);
    return false;
}

/* sum w x q and sum w q^2 over the 32 weights at levels L (q = 2 L + 1). */
static float fit(const float *xval, const float *weight, const int8_t *L, float *sumq2_out) {
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < 32; ++i) {
        float w = weight[i], q = 2 * L[i] + 1;
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    *sumq2_out = sumq2;
    return sumqx;
}

/* One sub-block of 32: its scale (>= 0), the sign bits (8 per 8 weights)
 * and the codebook indices of its 8 groups. Returns false, with *scale 0
 * and nothing else written, when it is all (near) zero: ggml then skips it
 * (see the callers). */
static bool iq3_subblock(const iq3_variant *v, const float *xb, const float *weight, float *scale_out,
                         uint8_t signs[4], uint16_t index[8]) {
    float xval[32], waux[32];
    int8_t L[32], Laux[32];
    bool on_grid[8], on_grid_aux[8];
    for (int i = 0; i < 32; ++i) waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 4; ++k) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            if (xb[8 * k + i] >= 0) xval[8 * k + i] = xb[8 * k + i];
            else {
                xval[8 * k + i] = -xb[8 * k + i];
                ++nflip;
                s |= (uint8_t)(1 << i);
            }
        }
        if (v->even_signs && nflip % 2) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; ++i) {
                float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= (uint8_t)(1 << imin);
        }
        signs[k] = v->even_signs ? s & 127 : s;
    }
    float max = xval[0];
    for (int i = 1; i < 32; ++i) max = xval[i] > max ? xval[i] : max;
    *scale_out = 0;
    if (v->even_signs ? max < 1e-8f : !max) return false; /* ggml's GROUP_MAX_EPS_IQ3_XXS; IQ3_S: exact zero */
    memset(L, 0, sizeof L);
    float best = 0, scale = max / (2 * KMAXQ - 1);
    for (int k = 0; k < 8; ++k) on_grid[k] = v->even_signs;
    for (int is = -v->n_steps; is <= v->n_steps; ++is) {
        float id = (2 * KMAXQ - 1 + is * 0.2f) / max, this_scale = 1 / id;
        for (int k = 0; k < 8; ++k)
            on_grid_aux[k] = round_group(v->lat, xval + 4 * k, waux + 4 * k, id, this_scale, Laux + 4 * k);
        float sumq2, sumqx = fit(xval, weight, Laux, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, sizeof L);
            memcpy(on_grid, on_grid_aux, sizeof on_grid);
        }
    }
    int n_off = 0;
    for (int k = 0; k < 8; ++k) n_off += !on_grid[k];
    if (n_off > 0 && scale > 0) {
        float id = 1 / scale;
        for (int k = 0; k < 8; ++k)
            if (v->refine_all || !on_grid[k]) round_group(v->lat, xval + 4 * k, waux + 4 * k, id, scale, L + 4 * k);
        float sumq2, sumqx = fit(xval, weight, L, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        /* ggml: cannot happen, but the stored scale is unsigned */
        scale = -scale;
        for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)(~signs[k] & (v->even_signs ? 127 : 255));
    }
    for (int k = 0; k < 8; ++k) index[k] = (uint16_t)v->lat->map[point_of(L + 4 * k)];
    *scale_out = scale;
    return true;
}

/* Error weights of sub-block ib of a super-block: importance times
 * sqrt(sigma2 + x^2), or x^2. */
static void subblock_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    if (qw) hfq_importance_weights(32, xb, qw, sigma2, weight);
    else
        for (int i = 0; i < 32; ++i) weight[i] = xb[i] * xb[i];
}

static const iq3_variant xxs = {&hfq_iq_lattice_iq3xxs, 15, true, false};
static const iq3_variant s3 = {&hfq_iq_lattice_iq3s, 9, false, true};

static void iq3_xxs_superblock(const float *x, const float *qw, hfq_block_iq3_xxs *y) {
    memset(y, 0, sizeof *y);
    const float sigma2 = 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K;
    float scales[8], max_scale = 0, weight[32];
    uint32_t aux[8] = {0};
    for (int ib = 0; ib < 8; ++ib) {
        uint8_t signs[4];
        uint16_t index[8];
        subblock_weights(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, weight);
        if (!iq3_subblock(&xxs, x + 32 * ib, weight, &scales[ib], signs, index)) continue;
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
        int l = hfq_nearest_int(0.5f * (id * scales[ib] - 1));
        l = l < 0 ? 0 : l > 15 ? 15 : l;
        aux[ib] |= (uint32_t)l << 28;
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
        subblock_weights(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, weight);
        if (!iq3_subblock(&s3, x + 32 * ib, weight, &scales[ib], signs, index)) continue;
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
        int l1 = hfq_nearest_int(0.5f * (id * scales[ib] - 1));
        int l2 = hfq_nearest_int(0.5f * (id * scales[ib + 1] - 1));
        l1 = l1 < 0 ? 0 : l1 > 15 ? 15 : l1;
        l2 = l2 < 0 ? 0 : l2 > 15 ? 15 : l2;
        y->scales[ib / 2] = (uint8_t)(l1 | l2 << 4);
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
