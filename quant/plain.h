/* plain.h - the unquantized storage formats F32, F16 and BF16 behind the
 * same row interface as the quantized ones (quant/qtype.h), so callers need
 * no special case. Conversions round to nearest even (quant/half.h); each
 * format is its own activation format, as in ggml's CPU backend. */
#ifndef HFQ_QUANT_PLAIN_H
#define HFQ_QUANT_PLAIN_H

#include <stddef.h>
#include <stdint.h>

/* importance is ignored; returns the bytes written (0 for n_per_row <= 0 or
 * nrows < 0). */
size_t hfq_quantize_f32(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_f16(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);
size_t hfq_quantize_bf16(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance);

void hfq_quantize_row_f32(const float *x, void *y, int64_t n);
void hfq_quantize_row_f16(const float *x, void *y, int64_t n);
void hfq_quantize_row_bf16(const float *x, void *y, int64_t n);

void hfq_dequantize_f32(const void *src, float *dst, int64_t n);
void hfq_dequantize_f16(const void *src, float *dst, int64_t n);
void hfq_dequantize_bf16(const void *src, float *dst, int64_t n);

/* Dots of two rows of the same format, accumulated in double. */
float hfq_vec_dot_f32(const void *w, const void *a, int64_t n);
float hfq_vec_dot_f16(const void *w, const void *a, int64_t n);
float hfq_vec_dot_bf16(const void *w, const void *a, int64_t n);

#endif
