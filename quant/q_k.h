/* q_k.h - ggml's K-quants Q4_K, Q5_K, Q6_K (256-element super-blocks) and
 * Q8_K, the activation format their dot products use. Layouts in
 * quant/blocks.h.
 *
 * Quantizers have ggml's quantize_<type> contract and output: rows of
 * n_per_row elements (a positive multiple of 256); importance NULL gives
 * exactly quantize_row_<type>_ref, importance (n_per_row per-column weights
 * shared by all rows) exactly ggml's importance-weighted quantizer. They
 * return the bytes written (0 for a bad n_per_row or nrows < 0). Input must
 * be finite (see q_legacy.h).
 *
 * Row functions take n elements (a multiple of 256) and do not check it.
 */
#ifndef HFQ_QUANT_Q_K_H
#define HFQ_QUANT_Q_K_H

#include <stddef.h>
#include <stdint.h>

#include "quant/isa.h"

size_t hfq_quantize_q4_k(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q5_k(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_q6_k(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

/* The same with the kernels of a chosen instruction set (quant/isa.h): the
 * bytes do not depend on it (tests/test_quant_simd.c compares them). */
size_t hfq_quantize_q4_k_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);
size_t hfq_quantize_q5_k_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);
size_t hfq_quantize_q6_k_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                             const float *importance);

/* Activation rows: ggml's quantize_row_q8_K_ref (an all-zero block gets
 * zero bsums too, where ggml leaves them unwritten). AVX2 where the CPU has
 * it (quant/act_simd.c), the same bytes. */
void hfq_quantize_row_q8_k(const float *x, void *y, int64_t n);

/* Exactly ggml's dequantize_row_<type> values. */
void hfq_dequantize_q4_k(const void *src, float *dst, int64_t n);
void hfq_dequantize_q5_k(const void *src, float *dst, int64_t n);
void hfq_dequantize_q6_k(const void *src, float *dst, int64_t n);
void hfq_dequantize_q8_k(const void *src, float *dst, int64_t n);

/* Dot of a weight row with a Q8_K activation row of n elements. */
float hfq_vec_dot_q4_k(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q5_k(const void *w, const void *a, int64_t n);
float hfq_vec_dot_q6_k(const void *w, const void *a, int64_t n);

#endif
