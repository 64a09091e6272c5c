/* q_k_low.h - ggml's low-bit K-quants Q2_K and Q3_K (256-element
 * super-blocks of sixteen 16-element sub-blocks; layouts in quant/blocks.h,
 * per-block decode and dot products in quant/block_math.h). Their dot
 * products take Q8_K activations (quant/q_k.h).
 *
 * Quantizers have ggml's quantize_q2_K / quantize_q3_K contract and output:
 * rows of n_per_row elements (a positive multiple of 256); importance NULL
 * gives exactly quantize_row_<type>_ref, importance (n_per_row per-column
 * weights shared by all rows) exactly ggml's importance-weighted quantizer.
 * They return the bytes written (0 for a bad n_per_row or nrows < 0). Input
 * must be finite (see q_legacy.h).
 *
 * Row functions take n elements (a multiple of 256) and do not check it.
 */
#ifndef HFQ_QUANT_Q_K_LOW_H
#define HFQ_QUANT_Q_K_LOW_H

#include <stddef.h>
#include <stdint.h>

#include "quant/isa.h"

size_t hfq_quantize_q2_k(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q3_k(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

/* The same with the kernels of a chosen instruction set (quant/isa.h): the
 * bytes do not depend on it (tests/test_quant_simd.c compares them). */
size_t hfq_quantize_q2_k_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);
size_t hfq_quantize_q3_k_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);

/* Exactly ggml's dequantize_row_<type> values. */
void hfq_dequantize_q2_k(const void *src, float *dst, int64_t n);
void hfq_dequantize_q3_k(const void *src, float *dst, int64_t n);

/* Dot of a weight row with a Q8_K activation row of n elements. Q2_K's
 * equals ggml's generic ggml_vec_dot_q2_K_q8_K bit for bit; Q3_K's sums
 * the same integers but rounds once per super-block where ggml rounds in
 * eight lanes, so they agree to float rounding. */
float hfq_vec_dot_q2_k(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q3_k(const void *w, const void *a, int64_t n);

#endif
