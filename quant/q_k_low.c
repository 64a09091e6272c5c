/* Q2_K and Q3_K; see q_k_low.h.
 *
 * As the other K-quants (q_k.c), a super-block is quantized in two stages:
 * each 16-element sub-block gets a float scale (and Q2_K a min) from a
 * scale search, those are quantized against one fp16 super-block scale
 * (4-bit scales and mins for Q2_K, 6-bit signed scales for Q3_K), and the
 * values are requantized with the scales as stored. */
#include "quant/q_k_low.h"

#include <math.h>
#include <string.h>

#include "quant/block_math.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

#define SUB 16
#define N_SUB (HFQ_QK_K / SUB)

/* Levels 0..3 into qs, in the order hfq_levels_2bit reads them. */
static void pack_2bit(const uint8_t L[HFQ_QK_K], uint8_t qs[HFQ_QK_K / 4]) {
    for (int h = 0; h < 2; ++h) {
        const uint8_t *Lh = L + 128 * h;
        for (int l = 0; l < 32; ++l)
            qs[32 * h + l] = (uint8_t)(Lh[l] | Lh[l + 32] << 2 | Lh[l + 64] << 4 | Lh[l + 96] << 6);
    }
}

/* ---- Q2_K ---- */

/* Requantizes against the stored scales and packs; a zero scale keeps the
 * levels of the search (they decode to -dmin * m either way). */
static void q2_k_finish(hfq_isa isa, const float *x, hfq_block_q2_k *b, uint8_t L[HFQ_QK_K]) {
    const float d = hfq_fp16_to_f32(b->d), dmin = hfq_fp16_to_f32(b->dmin);
    for (int j = 0; j < N_SUB; ++j) {
        const float dj = d * (b->scales[j] & 0xF);
        if (!dj) continue;
        const float mj = dmin * (b->scales[j] >> 4);
        hfq_requantize_affine(isa, SUB, 3, x + SUB * j, dj, mj, L + SUB * j);
    }
    pack_2bit(L, b->qs);
}

/* Reference: each sub-block's fit weighs |x| and minimises the absolute
 * error; scales and mins then go to 4 bits relative to the largest of each
 * (ggml does not clamp them: the largest rounds to 15 exactly). */
static void q2_k_superblock_ref(hfq_isa isa, const float *x, hfq_block_q2_k *b) {
    uint8_t L[HFQ_QK_K];
    float scales[N_SUB], mins[N_SUB], w[SUB];
    float max_scale = 0, max_min = 0; /* scales are >= 0 once the min is taken out */
    for (int j = 0; j < N_SUB; ++j) {
        for (int l = 0; l < SUB; ++l) w[l] = fabsf(x[SUB * j + l]);
        scales[j] = hfq_search_affine(SUB, 3, x + SUB * j, w, L + SUB * j, &mins[j], -0.5f, 0.1f, 15, true);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    memset(b->scales, 0, sizeof b->scales);
    b->d = hfq_f32_to_fp16(0.f);
    b->dmin = hfq_f32_to_fp16(0.f);
    if (max_scale > 0) {
        const float iscale = 15.f / max_scale;
        for (int j = 0; j < N_SUB; ++j) b->scales[j] = (uint8_t)hfq_nearest_int(iscale * scales[j]);
        b->d = hfq_f32_to_fp16(max_scale / 15.f);
    }
    if (max_min > 0) {
        const float iscale = 15.f / max_min;
        for (int j = 0; j < N_SUB; ++j) b->scales[j] |= (uint8_t)((unsigned)hfq_nearest_int(iscale * mins[j]) << 4);
        b->dmin = hfq_f32_to_fp16(max_min / 15.f);
    }
    q2_k_finish(isa, x, b, L);
}

/* Importance-weighted: squared error under importance weights, and stage
 * 2 a weighted search of its own, each sub-block weighing as much as its
 * summed error weights. */
static void q2_k_superblock_weighted(hfq_isa isa, const float *x, const float *importance, hfq_block_q2_k *b) {
    uint8_t L[HFQ_QK_K], ls[N_SUB], lm[N_SUB];
    float w[HFQ_QK_K], scales[N_SUB], mins[N_SUB], sum_w[N_SUB];
    hfq_importance_weights(HFQ_QK_K, x, importance, hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K, w);
    for (int j = 0; j < N_SUB; ++j) {
        float sw = 0;
        for (int l = 0; l < SUB; ++l) sw += w[SUB * j + l];
        sum_w[j] = sw;
    }
    for (int h = 0; h < N_SUB; h += 8)
        hfq_search_affine_x8(isa, SUB, 3, x + SUB * h, w + SUB * h, L + SUB * h, scales + h, mins + h, -0.9f, 0.05f,
                             36);
    b->d = hfq_f32_to_fp16(hfq_search_positive(N_SUB, 15, scales, sum_w, ls));
    b->dmin = hfq_f32_to_fp16(hfq_search_positive(N_SUB, 15, mins, sum_w, lm));
    for (int j = 0; j < N_SUB; ++j) b->scales[j] = (uint8_t)(ls[j] | lm[j] << 4);
    q2_k_finish(isa, x, b, L);
}

static void q2_k_superblock(hfq_isa isa, const float *x, const float *importance, void *block) {
    if (importance) q2_k_superblock_weighted(isa, x, importance, (hfq_block_q2_k *)block);
    else q2_k_superblock_ref(isa, x, (hfq_block_q2_k *)block);
}

/* ---- Q3_K ---- */

/* Sixteen 6-bit scales (0..63, biased by 32) into 12 bytes, where
 * hfq_q3_k_scale reads them. */
static void pack_q3_k_scales(const int ls[N_SUB], uint8_t out[HFQ_K_SCALE_BYTES]) {
    memset(out, 0, HFQ_K_SCALE_BYTES);
    for (int j = 0; j < N_SUB; ++j) {
        const int l = ls[j];
        if (j < 8) out[j] = (uint8_t)(l & 0xF);
        else out[j - 8] |= (uint8_t)((l & 0xF) << 4);
        out[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

/* Requantizes against the stored scales (a zero scale keeps the levels of
 * the search), splits off the high bits into hmask and packs. */
static void q3_k_finish(hfq_isa isa, const float *x, hfq_block_q3_k *b, int8_t L[HFQ_QK_K]) {
    const float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < N_SUB; ++j) {
        const float dj = d * hfq_q3_k_scale(j, b->scales);
        if (!dj) continue;
        hfq_requantize_symmetric(isa, SUB, 4, x + SUB * j, dj, L + SUB * j);
    }
    uint8_t low[HFQ_QK_K];
    memset(b->hmask, 0, sizeof b->hmask);
    for (int e = 0; e < HFQ_QK_K; ++e) {
        int l = L[e];
        if (l > 3) {
            b->hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            l -= 4;
        }
        low[e] = (uint8_t)l;
    }
    pack_2bit(low, b->qs);
}

/* Reference: refined symmetric fits of each sub-block; the scales go to 6
 * bits with the signed extreme on -32. */
static void q3_k_superblock_ref(hfq_isa isa, const float *x, hfq_block_q3_k *b) {
    int8_t L[HFQ_QK_K];
    float scales[N_SUB];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < N_SUB; ++j) {
        scales[j] = hfq_search_symmetric_refined(SUB, 4, x + SUB * j, L + SUB * j);
        if (fabsf(scales[j]) > amax) {
            amax = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    int ls[N_SUB] = {0};
    b->d = hfq_f32_to_fp16(0.f);
    if (max_scale) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < N_SUB; ++j) {
            int8_t l = (int8_t)hfq_nearest_int(iscale * scales[j]); /* ggml converts to int8_t first */
            ls[j] = (l < -32 ? -32 : l > 31 ? 31 : l) + 32;
        }
        b->d = hfq_f32_to_fp16(1 / iscale);
    }
    pack_q3_k_scales(ls, b->scales);
    q3_k_finish(isa, x, b, L);
}

/* Importance-weighted: sub-block fits under importance weights, the scales
 * a weighted symmetric fit of their own (weights: each sub-block's summed
 * error weights). */
static void q3_k_superblock_weighted(hfq_isa isa, const float *x, const float *importance, hfq_block_q3_k *b) {
    int8_t L[HFQ_QK_K], levels[N_SUB];
    float w[HFQ_QK_K], scales[N_SUB], sum_w[N_SUB];
    hfq_importance_weights(HFQ_QK_K, x, importance, 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K, w);
    for (int j = 0; j < N_SUB; ++j) {
        float sw = 0;
        for (int l = 0; l < SUB; ++l) sw += w[SUB * j + l];
        sum_w[j] = sw;
    }
    for (int h = 0; h < N_SUB; h += 8)
        hfq_search_symmetric_x8(isa, SUB, 4, x + SUB * h, w + SUB * h, L + SUB * h, scales + h);
    const float d = hfq_search_symmetric(N_SUB, 32, scales, sum_w, levels);
    int ls[N_SUB];
    for (int j = 0; j < N_SUB; ++j) ls[j] = levels[j];
    pack_q3_k_scales(ls, b->scales);
    b->d = hfq_f32_to_fp16(d);
    q3_k_finish(isa, x, b, L);
}

static void q3_k_superblock(hfq_isa isa, const float *x, const float *importance, void *block) {
    if (importance) q3_k_superblock_weighted(isa, x, importance, (hfq_block_q3_k *)block);
    else q3_k_superblock_ref(isa, x, (hfq_block_q3_k *)block);
}

/* ---- rows ---- */

/* One row of super-blocks of block_bytes each, through fn. */
static void k_low_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance, size_t block_bytes,
                      void (*fn)(hfq_isa isa, const float *x, const float *importance, void *block)) {
    for (int64_t i = 0; i < n / HFQ_QK_K; i++)
        fn(isa, x + i * HFQ_QK_K, importance ? importance + i * HFQ_QK_K : NULL, (char *)y + (size_t)i * block_bytes);
}

static void q2_k_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    k_low_row(isa, x, y, n, importance, sizeof(hfq_block_q2_k), q2_k_superblock);
}

static void q3_k_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    k_low_row(isa, x, y, n, importance, sizeof(hfq_block_q3_k), q3_k_superblock);
}

HFQ_DEFINE_QUANTIZE(hfq_quantize_q2_k, hfq_block_q2_k, HFQ_QK_K, q2_k_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_q3_k, hfq_block_q3_k, HFQ_QK_K, q3_k_row)

HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q2_k, hfq_block_q2_k, HFQ_QK_K, hfq_decode_q2_k)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q3_k, hfq_block_q3_k, HFQ_QK_K, hfq_decode_q3_k)

HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q2_k, hfq_block_q2_k, hfq_block_q8_k, HFQ_QK_K, hfq_dot_q2_k_q8_k)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q3_k, hfq_block_q3_k, hfq_block_q8_k, HFQ_QK_K, hfq_dot_q3_k_q8_k)
