/* F32, F16 and BF16 rows; see plain.h. */
#include "quant/plain.h"

#include <string.h>

#include "quant/half.h"
#include "quant/isa.h"

void hfq_quantize_row_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

void hfq_quantize_row_f16(const float *x, void *y, int64_t n) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (hfq_isa_best() == HFQ_ISA_AVX2) {
        hfq_quantize_row_f16_avx2(x, y, n); /* the same halves, F16C */
        return;
    }
#endif
    uint16_t *out = (uint16_t *)y;
    for (int64_t i = 0; i < n; i++) out[i] = hfq_f32_to_fp16(x[i]);
}

void hfq_quantize_row_bf16(const float *x, void *y, int64_t n) {
    uint16_t *out = (uint16_t *)y;
    for (int64_t i = 0; i < n; i++) out[i] = hfq_f32_to_bf16(x[i]);
}

/* Rows are contiguous and element-wise, so all rows convert as one. */
static size_t convert_rows(const float *src, void *dst, int64_t nrows, int64_t n_per_row, size_t elem_bytes,
                           void (*row)(const float *, void *, int64_t)) {
    if (nrows < 0 || n_per_row <= 0) return 0;
    row(src, dst, nrows * n_per_row);
    return (size_t)(nrows * n_per_row) * elem_bytes;
}

size_t hfq_quantize_f32(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {
    (void)importance;
    return convert_rows(src, dst, nrows, n_per_row, 4, hfq_quantize_row_f32);
}

size_t hfq_quantize_f16(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {
    (void)importance;
    return convert_rows(src, dst, nrows, n_per_row, 2, hfq_quantize_row_f16);
}

size_t hfq_quantize_bf16(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {
    (void)importance;
    return convert_rows(src, dst, nrows, n_per_row, 2, hfq_quantize_row_bf16);
}

void hfq_dequantize_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void hfq_dequantize_f16(const void *src, float *dst, int64_t n) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (hfq_isa_best() == HFQ_ISA_AVX2) {
        hfq_dequantize_f16_avx2(src, dst, n); /* the same floats, F16C */
        return;
    }
#endif
    const uint16_t *in = (const uint16_t *)src;
    for (int64_t i = 0; i < n; i++) dst[i] = hfq_fp16_to_f32(in[i]);
}

void hfq_dequantize_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *in = (const uint16_t *)src;
    for (int64_t i = 0; i < n; i++) dst[i] = hfq_bf16_to_f32(in[i]);
}

float hfq_vec_dot_f32(const void *w, const void *a, int64_t n) {
    const float *x = (const float *)w, *y = (const float *)a;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * y[i];
    return (float)sum;
}

float hfq_vec_dot_f16(const void *w, const void *a, int64_t n) {
    const uint16_t *x = (const uint16_t *)w, *y = (const uint16_t *)a;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)hfq_fp16_to_f32(x[i]) * hfq_fp16_to_f32(y[i]);
    return (float)sum;
}

float hfq_vec_dot_bf16(const void *w, const void *a, int64_t n) {
    const uint16_t *x = (const uint16_t *)w, *y = (const uint16_t *)a;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)hfq_bf16_to_f32(x[i]) * hfq_bf16_to_f32(y[i]);
    return (float)sum;
}
