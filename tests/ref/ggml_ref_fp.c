/* ggml_ref_fp.c - typed wrappers around llama.cpp's reference MXFP4/NVFP4
 * code (see ggml_ref_fp.h); the ggml symbols it needs are in ggml_stubs.c. */
#define GGML_COMMON_DECL_C
#include "ggml-common.h"

#include "ggml-impl.h"
#include "ggml-quants.h"
#include "ggml-cpu/quants.h"

#include "ggml_ref_fp.h"

void ggml_ref_quantize_mxfp4(const float *x, void *y, int64_t k) { quantize_row_mxfp4_ref(x, (block_mxfp4 *)y, k); }
void ggml_ref_quantize_nvfp4(const float *x, void *y, int64_t k) { quantize_row_nvfp4_ref(x, (block_nvfp4 *)y, k); }
void ggml_ref_quantize_q8_0(const float *x, void *y, int64_t k) { quantize_row_q8_0_ref(x, (block_q8_0 *)y, k); }
void ggml_ref_dequantize_mxfp4(const void *x, float *y, int64_t k) { dequantize_row_mxfp4((const block_mxfp4 *)x, y, k); }
void ggml_ref_dequantize_nvfp4(const void *x, float *y, int64_t k) { dequantize_row_nvfp4((const block_nvfp4 *)x, y, k); }

float ggml_ref_dot_mxfp4_q8_0(int n, const void *x, const void *y) {
    float s;
    ggml_vec_dot_mxfp4_q8_0(n, &s, 0, x, 0, y, 0, 1);
    return s;
}

float ggml_ref_dot_nvfp4_q8_0(int n, const void *x, const void *y) {
    float s;
    ggml_vec_dot_nvfp4_q8_0(n, &s, 0, x, 0, y, 0, 1);
    return s;
}

uint8_t ggml_ref_fp32_to_ue4m3(float x) { return ggml_fp32_to_ue4m3(x); }
float ggml_ref_ue4m3_to_fp32(uint8_t x) { return ggml_ue4m3_to_fp32(x); }
float ggml_ref_e8m0_to_fp32_half(uint8_t x) { return ggml_e8m0_to_fp32_half(x); }
