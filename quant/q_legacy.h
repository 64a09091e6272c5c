/* q_legacy.h - ggml's 32-element integer formats: Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, and Q8_1 (activations for Q4_1 and Q5_1). Block layouts in quant/blocks.h.
 *
 * Quantizers (weights) have ggml's quantize_<type> contract and output:
 * rows of n_per_row elements (a positive multiple of 32); importance NULL
 * gives exactly quantize_row_<type>_ref, importance (n_per_row per-column
 * weights, shared by all rows, e.g. an imatrix's mean x^2) gives exactly
 * ggml's importance-weighted quantizer. ggml's Q8_0 has no such quantizer:
 * ours with importance searches each block's scale (q_legacy.c,
 * q8_0_weighted_row), never worse than the reference on the weighted error.
 * They return the bytes written (0 for a bad n_per_row or nrows < 0).
 *
 * Input must be finite: NaN/Inf make scales NaN/Inf and the bytes are
 * unspecified (ggml's are too); the quantize tool rejects such tensors first.
 *
 * Row functions take n elements (a multiple of 32) and do not check it:
 * callers size rows with hfq_qtype_row_size (quant/qtype.h).
 */
#ifndef HFQ_QUANT_Q_LEGACY_H
#define HFQ_QUANT_Q_LEGACY_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/isa.h"
#include "quant/scale_search.h"

size_t hfq_quantize_q8_0(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q4_0(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q4_1(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q5_0(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q5_1(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

/* The same with the kernels of a chosen instruction set (quant/isa.h): the
 * bytes do not depend on it (tests/test_quant_simd.c compares them). */
size_t hfq_quantize_q8_0_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);
size_t hfq_quantize_q4_0_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);
size_t hfq_quantize_q4_1_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);
size_t hfq_quantize_q5_0_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);
size_t hfq_quantize_q5_1_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);

/* One Q8_0 block with importance w (ours: ggml's Q8_0 has none): the
 * reference or the least-squares scale of hfq_search_symmetric over levels
 * -128..127 (19 scales mapping the signed extreme near -128), whichever
 * decodes with the lesser importance-weighted error, the reference on ties:
 * never worse than the reference on that error. Returns true when the
 * searched scale won, its codes hfq_level_symmetric(*iscale, x, 128). */
bool hfq_q8_0_weighted_block(const float *x, const float *w, hfq_block_q8_0 *y, float *iscale);

/* Q8_0 rows as ggml's quantize_row_q8_0_ref (the weights' quantizer). */
void hfq_quantize_row_q8_0(const float *x, void *y, int64_t n);
/* Activation rows as llama.cpp's CPU backend makes them on x86
 * (quantize_row_q8_0 / q8_1 of ggml-cpu/arch/x86/quants.c: round-half-even of
 * x * 127 / amax; see hfq_quantize_q8_32_act), on every CPU (AVX2 where it
 * has it, quant/act_simd.c: the same bytes). */
void hfq_quantize_row_q8_0_act(const float *x, void *y, int64_t n);
void hfq_quantize_row_q8_1(const float *x, void *y, int64_t n);

/* Exactly ggml's dequantize_row_<type> values. */
void hfq_dequantize_q8_0(const void *src, float *dst, int64_t n);
void hfq_dequantize_q8_1(const void *src, float *dst, int64_t n);
void hfq_dequantize_q4_0(const void *src, float *dst, int64_t n);
void hfq_dequantize_q4_1(const void *src, float *dst, int64_t n);
void hfq_dequantize_q5_0(const void *src, float *dst, int64_t n);
void hfq_dequantize_q5_1(const void *src, float *dst, int64_t n);

/* Dot of a weight row with an activation row of n elements: Q8_0, Q4_0 and
 * Q5_0 pair with Q8_0 activations, Q4_1 and Q5_1 with Q8_1. */
float hfq_vec_dot_q8_0(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q4_0(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q4_1(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q5_0(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q5_1(const void *w, const void *a, int64_t n);

/* ---- internal to quant/: one block's header and level map as the
 * quantizers above choose them, shared with the GPTQ codecs
 * (quant/gptq_legacy.c), which round one value at a time ---- */

typedef enum hfq_legacy_kind { HFQ_LEGACY_Q4_0, HFQ_LEGACY_Q4_1, HFQ_LEGACY_Q5_0, HFQ_LEGACY_Q5_1 } hfq_legacy_kind;

typedef struct hfq_legacy_map {
    float d, m;        /* the block's scale and min, before fp16 */
    float iscale, min; /* what levels are rounded with (reference: 1 / d and the block min) */
    int nmax, top;     /* levels 0..top; symmetric formats centre them on nmax */
    bool affine, weighted, zero; /* zero: an all-zero weighted symmetric block, all levels 0 */
} hfq_legacy_map;

/* The header of one 32-block of kind k: the reference quantizer's for w
 * NULL, else the importance-weighted one's with error weights w
 * (hfq_importance_weights with the row's mean square). */
void hfq_legacy_block_map(hfq_legacy_kind k, const float *x, const float *w, hfq_legacy_map *map);

/* The level the quantizer gives x under map (the reference's truncating
 * conversions, the searches' nearest_int), clamped to the format's levels
 * (only values GPTQ has moved off the block reach the clamps). */
static inline int hfq_legacy_level(const hfq_legacy_map *map, float x) {
    if (map->weighted) {
        if (map->affine) return hfq_level_affine(map->iscale, x, map->min, map->nmax);
        return map->zero ? 0 : hfq_level_symmetric(map->iscale, x, map->nmax) + map->nmax;
    }
    const float t = map->affine ? (x - map->min) * map->iscale + 0.5f : x * map->iscale + (map->nmax + 0.5f);
    /* an underflowed scale makes t infinite or NaN (iscale = inf), which
     * ggml's conversion turns into level 0 on x86 */
    if (!isfinite(t) || !(t > 0.0f)) return 0;
    return t >= (float)map->top ? map->top : (int)t;
}

/* The value level L stands for in hfq_legacy_level's arithmetic (it picks
 * the level of the nearest): (L - nmax) / iscale, or min + L / iscale; 0
 * (affine: min) where every value gets the same level. */
static inline float hfq_legacy_grid(const hfq_legacy_map *map, int L) {
    if (!map->iscale || map->zero) return map->affine ? map->min : 0.0f;
    return map->affine ? map->min + (float)L / map->iscale : (float)(L - map->nmax) / map->iscale;
}

/* Stores levels L (0..top) with d and m (converted to fp16) as a block of kind k. */
void hfq_legacy_store(hfq_legacy_kind k, const uint8_t *L, float d, float m, void *block);

#endif
