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

#include <stddef.h>
#include <stdint.h>

#include "quant/isa.h"

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

/* Q8_0 rows as ggml's quantize_row_q8_0_ref (the weights' quantizer). */
void hfq_quantize_row_q8_0(const float *x, void *y, int64_t n);
/* Activation rows as llama.cpp's CPU backend makes them on x86
 * (quantize_row_q8_0 / q8_1 of ggml-cpu/arch/x86/quants.c: round-half-even of
 * x * 127 / amax; see hfq_quantize_q8_32_act), on every CPU. */
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

#endif
