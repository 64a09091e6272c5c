/* Q4_K, Q5_K, Q6_K and Q8_K; see q_k.h.
 *
 * Every K-quant super-block is quantized in two stages: first each
 * sub-block gets its own float scale (and min) from a scale search, then
 * those are themselves quantized (6 bits for Q4_K/Q5_K, 8 bits for Q6_K)
 * against one fp16 super-block scale, and the values are requantized with
 * the scales as stored, so the levels fit what a decoder will see. */
#include "quant/q_k.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "quant/block_math.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

#define SUB_AFFINE 32 /* Q4_K/Q5_K sub-block */
#define N_AFFINE (HFQ_QK_K / SUB_AFFINE)
#define SUB_Q6 16
#define N_Q6 (HFQ_QK_K / SUB_Q6)

/* ---- Q4_K / Q5_K ---- */

/* What differs between Q4_K and Q5_K. */
typedef struct k_affine_format {
    int nmax;                   /* 15 or 31 */
    float ref_rmin, ref_rdelta; /* reference search ladder */
    int ref_nstep;
    bool clamp_weighted;        /* ggml caps weighted 6-bit scales at 63 for Q5_K only */
    size_t block_bytes;
    void (*store)(const uint8_t L[HFQ_QK_K], const uint8_t scales[HFQ_K_SCALE_BYTES], uint16_t d, uint16_t dmin,
                  void *block);
} k_affine_format;

/* Eight 6-bit scales and mins into 12 bytes (hfq_k_scale_min reads them):
 * sub-blocks 0-3 whole in bytes 0-7; 4-7 split into nibbles of bytes 8-11
 * and the top two bits of bytes 0-7. Values above 63 leak into neighbours
 * exactly as in ggml, which only happens for Q4_K's unclamped weighted path
 * on negative scales. */
static void pack_k_scales(const uint8_t ls[N_AFFINE], const uint8_t lm[N_AFFINE], uint8_t out[HFQ_K_SCALE_BYTES]) {
    for (int j = 0; j < N_AFFINE; ++j) {
        if (j < 4) {
            out[j] = ls[j];
            out[j + 4] = lm[j];
        } else {
            out[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            out[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            out[j - 0] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Reference stage 2: 6-bit scales and mins relative to the largest of each. */
static void quantize_sub_scales_ref(const float scales[N_AFFINE], const float mins[N_AFFINE], uint8_t ls[N_AFFINE],
                                    uint8_t lm[N_AFFINE], float *d, float *dmin) {
    float max_scale = 0, max_min = 0; /* scales are >= 0 once the min is taken out */
    for (int j = 0; j < N_AFFINE; ++j) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < N_AFFINE; ++j) {
        uint8_t s = (uint8_t)hfq_nearest_int(inv_scale * scales[j]);
        uint8_t m = (uint8_t)hfq_nearest_int(inv_min * mins[j]);
        ls[j] = s < 63 ? s : 63;
        lm[j] = m < 63 ? m : 63;
    }
    *d = max_scale / 63.f;
    *dmin = max_min / 63.f;
}

/* Stage 1 and 2 of one Q4_K/Q5_K super-block: the packed scales, d, dmin and
 * levels L (0..nmax) against the scales as stored. */
static void k_affine_superblock(const k_affine_format *f, hfq_isa isa, const float *x, const float *importance,
                                uint8_t scales_out[HFQ_K_SCALE_BYTES], uint16_t *d_out, uint16_t *dmin_out,
                                uint8_t L[HFQ_QK_K]) {
    float scales[N_AFFINE], mins[N_AFFINE], w[HFQ_QK_K];
    uint8_t ls[N_AFFINE], lm[N_AFFINE];
    float d, dmin;
    if (!importance) {
        /* weights favour large values relative to the sub-block's rms */
        for (int j = 0; j < N_AFFINE; ++j) {
            const float *xs = x + SUB_AFFINE * j;
            float av_x = sqrtf(hfq_sum_squares(SUB_AFFINE, xs) / SUB_AFFINE);
            for (int l = 0; l < SUB_AFFINE; ++l) w[SUB_AFFINE * j + l] = av_x + fabsf(xs[l]);
        }
        hfq_search_affine_x8(isa, SUB_AFFINE, f->nmax, x, w, L, scales, mins, f->ref_rmin, f->ref_rdelta,
                             f->ref_nstep);
        quantize_sub_scales_ref(scales, mins, ls, lm, &d, &dmin);
    } else {
        /* stage 2 is itself a weighted search, each sub-block weighing as
         * much as its summed error weights */
        float sigma2 = 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K;
        float sum_w[N_AFFINE];
        hfq_importance_weights(HFQ_QK_K, x, importance, sigma2, w);
        for (int j = 0; j < N_AFFINE; ++j) {
            float sw = 0;
            for (int l = 0; l < SUB_AFFINE; ++l) sw += w[SUB_AFFINE * j + l];
            sum_w[j] = sw;
        }
        hfq_search_affine_x8(isa, SUB_AFFINE, f->nmax, x, w, L, scales, mins, -0.9f, 0.05f, 36);
        d = hfq_search_positive(N_AFFINE, 63, scales, sum_w, ls);
        dmin = hfq_search_positive(N_AFFINE, 63, mins, sum_w, lm);
        if (f->clamp_weighted) {
            for (int j = 0; j < N_AFFINE; ++j) {
                if (ls[j] > 63) ls[j] = 63;
                if (lm[j] > 63) lm[j] = 63;
            }
        }
    }
    pack_k_scales(ls, lm, scales_out);
    *d_out = hfq_f32_to_fp16(d);
    *dmin_out = hfq_f32_to_fp16(dmin);

    /* requantize against the stored scales; a zero scale keeps the levels
     * of stage 1 (they decode to -dmin * m either way) */
    const float d_stored = hfq_fp16_to_f32(*d_out), dmin_stored = hfq_fp16_to_f32(*dmin_out);
    for (int j = 0; j < N_AFFINE; ++j) {
        uint8_t sc, m;
        hfq_k_scale_min(j, scales_out, &sc, &m);
        const float dj = d_stored * sc;
        if (!dj) continue;
        const float mj = dmin_stored * m;
        hfq_requantize_affine(isa, SUB_AFFINE, f->nmax, x + SUB_AFFINE * j, dj, mj, L + SUB_AFFINE * j);
    }
}

/* One row of Q4_K or Q5_K super-blocks. */
static void k_affine_row(const k_affine_format *f, hfq_isa isa, const float *x, void *y, int64_t n,
                         const float *importance) {
    for (int64_t i = 0; i < n / HFQ_QK_K; i++) {
        uint8_t L[HFQ_QK_K], scales[HFQ_K_SCALE_BYTES];
        uint16_t d, dmin;
        k_affine_superblock(f, isa, x + i * HFQ_QK_K, importance ? importance + i * HFQ_QK_K : NULL, scales, &d,
                            &dmin, L);
        f->store(L, scales, d, dmin, (char *)y + (size_t)i * f->block_bytes);
    }
}

/* 32 bytes per pair of sub-blocks: low nibbles the first, high the second. */
static void store_q4_k(const uint8_t L[HFQ_QK_K], const uint8_t scales[HFQ_K_SCALE_BYTES], uint16_t d,
                       uint16_t dmin, void *block) {
    hfq_block_q4_k *b = (hfq_block_q4_k *)block;
    b->d = d;
    b->dmin = dmin;
    memcpy(b->scales, scales, HFQ_K_SCALE_BYTES);
    for (int pair = 0; pair < HFQ_QK_K / 64; ++pair)
        for (int l = 0; l < 32; ++l) b->qs[32 * pair + l] = (uint8_t)(L[64 * pair + l] | L[64 * pair + 32 + l] << 4);
}

/* As Q4_K, with bit 4 of sub-block j's element l in bit j of qh[l]. */
static void store_q5_k(const uint8_t L[HFQ_QK_K], const uint8_t scales[HFQ_K_SCALE_BYTES], uint16_t d,
                       uint16_t dmin, void *block) {
    hfq_block_q5_k *b = (hfq_block_q5_k *)block;
    b->d = d;
    b->dmin = dmin;
    memcpy(b->scales, scales, HFQ_K_SCALE_BYTES);
    memset(b->qh, 0, sizeof b->qh);
    for (int pair = 0; pair < HFQ_QK_K / 64; ++pair) {
        for (int l = 0; l < 32; ++l) {
            uint8_t lo = L[64 * pair + l], hi = L[64 * pair + 32 + l];
            b->qh[l] |= (uint8_t)((lo >> 4) << (2 * pair) | (hi >> 4) << (2 * pair + 1));
            b->qs[32 * pair + l] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
        }
    }
}

static const k_affine_format Q4_K_FORMAT = {15, -1.f, 0.1f, 20, false, sizeof(hfq_block_q4_k), store_q4_k};
static const k_affine_format Q5_K_FORMAT = {31, -0.5f, 0.1f, 15, true, sizeof(hfq_block_q5_k), store_q5_k};

static void q4_k_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    k_affine_row(&Q4_K_FORMAT, isa, x, y, n, importance);
}

static void q5_k_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    k_affine_row(&Q5_K_FORMAT, isa, x, y, n, importance);
}

/* ---- Q6_K ---- */

/* Six-bit levels L (0..63) into ql (low nibbles) and qh (top two bits), in
 * the order hfq_levels_q6_k reads them. */
static void pack_q6_k(const int8_t L[HFQ_QK_K], hfq_block_q6_k *b) {
    for (int half = 0; half < 2; ++half) {
        const int8_t *Lh = L + 128 * half;
        uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
        for (int l = 0; l < 32; ++l) {
            ql[l] = (uint8_t)((Lh[l] & 0xF) | (Lh[l + 64] & 0xF) << 4);
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | (Lh[l + 96] & 0xF) << 4);
            qh[l] = (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
        }
    }
}

static void q6_k_superblock(hfq_isa isa, const float *x, const float *importance, hfq_block_q6_k *b) {
    int8_t L[HFQ_QK_K];
    float scales[N_Q6];
    /* eight sub-blocks at a time; with importance, its values are the error
     * weights directly */
    for (int h = 0; h < N_Q6; h += 8)
        hfq_search_symmetric_x8(isa, SUB_Q6, 32, x + SUB_Q6 * h, importance ? importance + SUB_Q6 * h : NULL,
                                L + SUB_Q6 * h, scales + h);
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < N_Q6; ++j) {
        if (fabsf(scales[j]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    if (max_abs_scale < HFQ_GROUP_MAX_EPS) {
        memset(b, 0, sizeof *b);
        return;
    }
    /* the signed extreme scale lands on -128 and is capped at 127 */
    const float iscale = -128.f / max_scale;
    b->d = hfq_f32_to_fp16(1 / iscale);
    for (int j = 0; j < N_Q6; ++j) {
        int s = hfq_nearest_int(iscale * scales[j]);
        b->scales[j] = (int8_t)(s < 127 ? s : 127);
    }
    const float d_stored = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < N_Q6; ++j) {
        const float dj = d_stored * b->scales[j];
        if (!dj) continue;
        hfq_requantize_symmetric(isa, SUB_Q6, 32, x + SUB_Q6 * j, dj, L + SUB_Q6 * j);
    }
    pack_q6_k(L, b);
}

static void q6_k_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    hfq_block_q6_k *blocks = (hfq_block_q6_k *)y;
    for (int64_t i = 0; i < n / HFQ_QK_K; i++)
        q6_k_superblock(isa, x + i * HFQ_QK_K, importance ? importance + i * HFQ_QK_K : NULL, &blocks[i]);
}

HFQ_DEFINE_QUANTIZE(hfq_quantize_q4_k, hfq_block_q4_k, HFQ_QK_K, q4_k_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_q5_k, hfq_block_q5_k, HFQ_QK_K, q5_k_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_q6_k, hfq_block_q6_k, HFQ_QK_K, q6_k_row)

HFQ_DEFINE_QUANTIZE_ACT_ROW_AVX2(hfq_quantize_row_q8_k, hfq_block_q8_k, HFQ_QK_K, hfq_quantize_block_q8_k,
                                 hfq_quantize_row_q8_k_avx2)

HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q4_k, hfq_block_q4_k, HFQ_QK_K, hfq_decode_q4_k)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q5_k, hfq_block_q5_k, HFQ_QK_K, hfq_decode_q5_k)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q6_k, hfq_block_q6_k, HFQ_QK_K, hfq_decode_q6_k)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q8_k, hfq_block_q8_k, HFQ_QK_K, hfq_decode_q8_k)

HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q4_k, hfq_block_q4_k, hfq_block_q8_k, HFQ_QK_K, hfq_dot_q4_k_q8_k)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q5_k, hfq_block_q5_k, hfq_block_q8_k, HFQ_QK_K, hfq_dot_q5_k_q8_k)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q6_k, hfq_block_q6_k, hfq_block_q8_k, HFQ_QK_K, hfq_dot_q6_k_q8_k)
