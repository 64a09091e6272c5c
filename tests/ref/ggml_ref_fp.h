/* ggml_ref.h - test-only access to llama.cpp's reference MXFP4/NVFP4 code.
 *
 * ggml_ref_fp.c is compiled together with .cache/llama.cpp's ggml-quants.c and
 * ggml-cpu/quants.c (only when that tree exists) so tests can compare our
 * quantizers, decoders and dot products with ggml's bit for bit. Blocks are
 * passed as bytes in ggml's layout. */
#ifndef HFQ_TESTS_GGML_REF_FP_H
#define HFQ_TESTS_GGML_REF_FP_H

#include <stdint.h>

void ggml_ref_quantize_mxfp4(const float *x, void *y, int64_t k);
void ggml_ref_quantize_nvfp4(const float *x, void *y, int64_t k);
void ggml_ref_quantize_q8_0(const float *x, void *y, int64_t k);
void ggml_ref_dequantize_mxfp4(const void *x, float *y, int64_t k);
void ggml_ref_dequantize_nvfp4(const void *x, float *y, int64_t k);
float ggml_ref_dot_mxfp4_q8_0(int n, const void *x, const void *y);
float ggml_ref_dot_nvfp4_q8_0(int n, const void *x, const void *y);

/* ggml-impl.h's scale codecs. */
uint8_t ggml_ref_fp32_to_ue4m3(float x);
float ggml_ref_ue4m3_to_fp32(uint8_t x);
float ggml_ref_e8m0_to_fp32_half(uint8_t x);

#endif
