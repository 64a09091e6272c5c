/* Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_1; see q_legacy.h. The reference paths
 * reproduce ggml's quantize_row_*_ref, including its float-to-small-int
 * conversions (truncating casts after adding 0.5, unmasked Q4_0 packing), so
 * the bytes agree even for blocks whose scale underflows. */
#include "quant/q_legacy.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>

#include "quant/block_math.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

/* ---- packing ---- */

/* Q4_0 nibbles. Not masked, as ggml: levels are 0..15 for finite input. */
static void pack_q4(const uint8_t L[HFQ_QK], uint8_t qs[HFQ_QK / 2]) {
    for (int j = 0; j < HFQ_QK / 2; j++) qs[j] = (uint8_t)(L[j] | L[j + HFQ_QK / 2] << 4);
}

/* Q5 nibbles plus bit 4 of element j in bit j of qh. */
static void pack_q5(const uint8_t L[HFQ_QK], uint8_t qs[HFQ_QK / 2], uint8_t qh_bytes[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < HFQ_QK / 2; j++) {
        uint8_t lo = L[j], hi = L[j + HFQ_QK / 2];
        qs[j] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
        qh |= ((lo & 0x10u) >> 4) << j;
        qh |= ((hi & 0x10u) >> 4) << (j + HFQ_QK / 2);
    }
    for (int k = 0; k < 4; k++) qh_bytes[k] = (uint8_t)(qh >> (8 * k));
}

/* ---- levels of one block ---- */

/* What differs between Q4_0, Q4_1, Q5_0 and Q5_1 when quantizing. */
typedef struct legacy_format {
    int nmax;           /* symmetric: levels 0..2 nmax - 1 around nmax; affine: 0..nmax */
    bool affine;        /* x = d * L + m (Q4_1, Q5_1) rather than d * (L - nmax) */
    size_t block_bytes;
    void (*store)(const uint8_t L[HFQ_QK], float d, float m, void *block);
} legacy_format;

static const legacy_format *legacy_format_of(hfq_legacy_kind k);

/* Reference, symmetric: d maps the signed extreme to level 0 (value
 * -nmax * d); levels are truncate(x / d + nmax + 0.5), capped at 2 nmax - 1.
 * Reference, affine: min and d = range / nmax from the block's extremes;
 * levels truncate((x - min) / d + 0.5), capped at nmax (ggml's Q5_1 does not
 * cap, but its levels never exceed 31). The weighted searches keep the scale
 * (and min) of their best fit and the levels they rounded it with. */
void hfq_legacy_block_map(hfq_legacy_kind k, const float *x, const float *w, hfq_legacy_map *map) {
    const legacy_format *f = legacy_format_of(k);
    *map = (hfq_legacy_map){.nmax = f->nmax, .top = f->affine ? f->nmax : 2 * f->nmax - 1, .affine = f->affine,
                            .weighted = w != NULL};
    uint8_t L[HFQ_QK];
    if (w && f->affine) {
        float neg_min;
        map->d = hfq_search_affine_map(HFQ_QK, f->nmax, x, w, L, &neg_min, -0.9f, 0.05f, 36, false, &map->iscale,
                                       &map->min);
        map->m = -neg_min;
    } else if (w) {
        map->d = hfq_search_symmetric_iscale(HFQ_QK, f->nmax, x, w, (int8_t *)L, &map->iscale);
        map->zero = map->iscale == 0.0f;
    } else if (f->affine) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < HFQ_QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        map->d = (max - min) / f->nmax;
        map->iscale = map->d ? 1.0f / map->d : 0.0f;
        map->m = map->min = min;
    } else {
        map->d = hfq_signed_extreme(x, HFQ_QK) / -f->nmax;
        map->iscale = map->d ? 1.0f / map->d : 0.0f;
    }
}

void hfq_legacy_store(hfq_legacy_kind k, const uint8_t *L, float d, float m, void *block) {
    legacy_format_of(k)->store(L, d, m, block);
}

/* Weighted levels, d and m of nblk <= 8 consecutive blocks with error
 * weights w: eight at once when there are eight. */
static void weighted_levels(const legacy_format *f, hfq_isa isa, int nblk, const float *x, const float *w,
                            uint8_t *L, float d[8], float m[8]) {
    if (nblk < 8) isa = HFQ_ISA_SCALAR; /* the x8 kernels need eight groups; lanes match scalar code anyway */
    if (f->affine) {
        float neg_min[8];
        if (nblk == 8) {
            hfq_search_affine_x8(isa, HFQ_QK, f->nmax, x, w, L, d, neg_min, -0.9f, 0.05f, 36);
        } else {
            for (int b = 0; b < nblk; b++)
                d[b] = hfq_search_affine(HFQ_QK, f->nmax, x + HFQ_QK * b, w + HFQ_QK * b, L + HFQ_QK * b,
                                         &neg_min[b], -0.9f, 0.05f, 36, false);
        }
        for (int b = 0; b < nblk; b++) m[b] = -neg_min[b];
        return;
    }
    int8_t *levels = (int8_t *)L; /* 0 .. 2 nmax - 1: the same bytes either way */
    if (nblk == 8) {
        hfq_search_symmetric_x8(isa, HFQ_QK, f->nmax, x, w, levels, d);
    } else {
        for (int b = 0; b < nblk; b++)
            d[b] = hfq_search_symmetric(HFQ_QK, f->nmax, x + HFQ_QK * b, w + HFQ_QK * b, levels + HFQ_QK * b);
    }
    for (int b = 0; b < nblk; b++) m[b] = 0.0f;
}

/* One row; the weighted paths weight errors relative to the row's mean square. */
static void legacy_row(hfq_legacy_kind k, hfq_isa isa, const float *x, void *y, int64_t n,
                       const float *importance) {
    const legacy_format *f = legacy_format_of(k);
    const int64_t nb = n / HFQ_QK;
    if (!importance) {
        for (int64_t i = 0; i < nb; i++) {
            uint8_t L[HFQ_QK];
            const float *xb = x + i * HFQ_QK;
            hfq_legacy_map map;
            hfq_legacy_block_map(k, xb, NULL, &map);
            for (int j = 0; j < HFQ_QK; j++) L[j] = (uint8_t)hfq_legacy_level(&map, xb[j]);
            f->store(L, map.d, map.m, (char *)y + (size_t)i * f->block_bytes);
        }
        return;
    }
    const float sigma2 = hfq_sum_squares(n, x) / n;
    for (int64_t i = 0; i < nb; i += 8) {
        const int nblk = nb - i < 8 ? (int)(nb - i) : 8;
        uint8_t L[8 * HFQ_QK];
        float w[8 * HFQ_QK], d[8], m[8];
        hfq_importance_weights(nblk * HFQ_QK, x + i * HFQ_QK, importance + i * HFQ_QK, sigma2, w);
        weighted_levels(f, isa, nblk, x + i * HFQ_QK, w, L, d, m);
        for (int b = 0; b < nblk; b++)
            f->store(L + HFQ_QK * b, d[b], m[b], (char *)y + (size_t)(i + b) * f->block_bytes);
    }
}

static void store_q4_0(const uint8_t L[HFQ_QK], float d, float m, void *block) {
    hfq_block_q4_0 *b = (hfq_block_q4_0 *)block;
    (void)m;
    b->d = hfq_f32_to_fp16(d);
    pack_q4(L, b->qs);
}

static void store_q4_1(const uint8_t L[HFQ_QK], float d, float m, void *block) {
    hfq_block_q4_1 *b = (hfq_block_q4_1 *)block;
    b->d = hfq_f32_to_fp16(d);
    b->m = hfq_f32_to_fp16(m);
    pack_q4(L, b->qs);
}

static void store_q5_0(const uint8_t L[HFQ_QK], float d, float m, void *block) {
    hfq_block_q5_0 *b = (hfq_block_q5_0 *)block;
    (void)m;
    b->d = hfq_f32_to_fp16(d);
    pack_q5(L, b->qs, b->qh);
}

static void store_q5_1(const uint8_t L[HFQ_QK], float d, float m, void *block) {
    hfq_block_q5_1 *b = (hfq_block_q5_1 *)block;
    b->d = hfq_f32_to_fp16(d);
    b->m = hfq_f32_to_fp16(m);
    pack_q5(L, b->qs, b->qh);
}

static const legacy_format FORMATS[] = {
    [HFQ_LEGACY_Q4_0] = {8, false, sizeof(hfq_block_q4_0), store_q4_0},
    [HFQ_LEGACY_Q4_1] = {15, true, sizeof(hfq_block_q4_1), store_q4_1},
    [HFQ_LEGACY_Q5_0] = {16, false, sizeof(hfq_block_q5_0), store_q5_0},
    [HFQ_LEGACY_Q5_1] = {31, true, sizeof(hfq_block_q5_1), store_q5_1},
};

static const legacy_format *legacy_format_of(hfq_legacy_kind k) {
    return &FORMATS[k];
}

/* ---- rows ---- */

/* sum w * (x - decoded)^2 over a Q8_0 block, as a reader decodes it. */
static double q8_0_block_error(const float x[HFQ_QK], const float w[HFQ_QK], const hfq_block_q8_0 *b) {
    const float d = hfq_fp16_to_f32(b->d);
    double err = 0.0;
    for (int j = 0; j < HFQ_QK; j++) {
        const double diff = (double)x[j] - (double)(b->qs[j] * d);
        err += (double)w[j] * diff * diff;
    }
    return err;
}

bool hfq_q8_0_weighted_block(const float *x, const float *w, hfq_block_q8_0 *y, float *iscale) {
    hfq_quantize_block_q8_0(x, y);
    int8_t L[HFQ_QK];
    hfq_block_q8_0 t = {.d = hfq_f32_to_fp16(hfq_search_symmetric_iscale(HFQ_QK, 128, x, w, L, iscale))};
    /* L holds level + 128 in a byte: flipping bit 7 gives the level */
    for (int j = 0; j < HFQ_QK; j++) t.qs[j] = (int8_t)((uint8_t)L[j] ^ 0x80u);
    if (!(q8_0_block_error(x, w, &t) < q8_0_block_error(x, w, y))) return false;
    *y = t;
    return true;
}

static void q8_0_weighted_row(const float *x, hfq_block_q8_0 *y, int64_t n, const float *importance) {
    float iscale;
    for (int64_t i = 0; i < n / HFQ_QK; i++) hfq_q8_0_weighted_block(x + i * HFQ_QK, importance + i * HFQ_QK, y + i, &iscale);
}

static void q8_0_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    if (importance) {
        q8_0_weighted_row(x, y, n, importance);
        return;
    }
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (isa == HFQ_ISA_AVX2) {
        hfq_quantize_row_q8_0_avx2(x, y, n);
        return;
    }
#endif
    (void)isa;
    hfq_quantize_row_q8_0(x, y, n);
}

static void q4_0_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    legacy_row(HFQ_LEGACY_Q4_0, isa, x, y, n, importance);
}

static void q4_1_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    legacy_row(HFQ_LEGACY_Q4_1, isa, x, y, n, importance);
}

static void q5_0_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    legacy_row(HFQ_LEGACY_Q5_0, isa, x, y, n, importance);
}

static void q5_1_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    legacy_row(HFQ_LEGACY_Q5_1, isa, x, y, n, importance);
}

HFQ_DEFINE_QUANTIZE(hfq_quantize_q8_0, hfq_block_q8_0, HFQ_QK, q8_0_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_q4_0, hfq_block_q4_0, HFQ_QK, q4_0_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_q4_1, hfq_block_q4_1, HFQ_QK, q4_1_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_q5_0, hfq_block_q5_0, HFQ_QK, q5_0_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_q5_1, hfq_block_q5_1, HFQ_QK, q5_1_row)

HFQ_DEFINE_QUANTIZE_ACT_ROW(hfq_quantize_row_q8_0, hfq_block_q8_0, HFQ_QK, hfq_quantize_block_q8_0)
HFQ_DEFINE_QUANTIZE_ACT_ROW_AVX2(hfq_quantize_row_q8_0_act, hfq_block_q8_0, HFQ_QK, hfq_quantize_block_q8_0_act,
                                 hfq_quantize_row_q8_0_act_avx2)
HFQ_DEFINE_QUANTIZE_ACT_ROW(hfq_quantize_row_q8_1, hfq_block_q8_1, HFQ_QK, hfq_quantize_block_q8_1)

HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q8_0, hfq_block_q8_0, HFQ_QK, hfq_decode_q8_0)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q8_1, hfq_block_q8_1, HFQ_QK, hfq_decode_q8_1)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q4_0, hfq_block_q4_0, HFQ_QK, hfq_decode_q4_0)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q4_1, hfq_block_q4_1, HFQ_QK, hfq_decode_q4_1)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q5_0, hfq_block_q5_0, HFQ_QK, hfq_decode_q5_0)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q5_1, hfq_block_q5_1, HFQ_QK, hfq_decode_q5_1)

HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q8_0, hfq_block_q8_0, hfq_block_q8_0, HFQ_QK, hfq_dot_q8_0_q8_0)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q4_0, hfq_block_q4_0, hfq_block_q8_0, HFQ_QK, hfq_dot_q4_0_q8_0)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q4_1, hfq_block_q4_1, hfq_block_q8_1, HFQ_QK, hfq_dot_q4_1_q8_1)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q5_0, hfq_block_q5_0, hfq_block_q8_0, HFQ_QK, hfq_dot_q5_0_q8_0)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_q5_1, hfq_block_q5_1, hfq_block_q8_1, HFQ_QK, hfq_dot_q5_1_q8_1)
