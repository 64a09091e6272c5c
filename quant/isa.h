/* isa.h - which instruction set the integer quantizers' kernels use.
 *
 * The scale searches have a plain C version (the reference, and the
 * fallback) and an AVX2 version chosen at run time. The AVX2 kernels run
 * several groups of values side by side, one group per vector lane, each
 * lane doing exactly the scalar sequence of float operations, so both give
 * the same bytes; tests/test_quant_simd.c checks it. Internal to quant/ and
 * its tests.
 */
#ifndef HFQ_QUANT_ISA_H
#define HFQ_QUANT_ISA_H

typedef enum hfq_isa {
    HFQ_ISA_SCALAR, /* plain C: every machine */
    HFQ_ISA_AVX2,   /* x86-64 with AVX2 and F16C (every AVX2 CPU has both) */
} hfq_isa;

#if defined(__x86_64__) && defined(__GNUC__)
#define HFQ_HAVE_AVX2_KERNELS 1
#endif

#include <stdint.h>

#include "quant/cpu_features.h"

/* The fastest instruction set this CPU runs (quant/cpu_features.h: found
 * once, and capped by HFQ_CPU_ISA). */
static inline hfq_isa hfq_isa_best(void) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    return cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_F16C) ? HFQ_ISA_AVX2 : HFQ_ISA_SCALAR;
#else
    return HFQ_ISA_SCALAR;
#endif
}

#ifdef HFQ_HAVE_AVX2_KERNELS
/* The AVX2 kernels; call them only when hfq_isa_best() is HFQ_ISA_AVX2.
 * quant/scale_search_simd.c: behind the x8 searches and requantizers of
 * quant/scale_search.h (n a multiple of 8 for the requantizers). */
void hfq_search_affine_x8_avx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float scale[8],
                               float neg_min[8], float rmin, float rdelta, int nstep);
void hfq_search_symmetric_x8_avx2(int n, int nmax, const float *x, const float *w, int8_t *L, float scale[8]);
void hfq_requantize_affine_avx2(int n, int nmax, const float *x, float d, float m, uint8_t *L);
void hfq_requantize_symmetric_avx2(int n, int nmax, const float *x, float d, int8_t *L);
/* quant/q_legacy_simd.c: hfq_quantize_row_q8_0 (n a multiple of 32). */
void hfq_quantize_row_q8_0_avx2(const float *x, void *y, int64_t n);
/* quant/act_simd.c: hfq_quantize_row_q8_k and hfq_quantize_row_q8_0_act
 * (n a multiple of their blocks), the same bytes. */
void hfq_quantize_row_q8_k_avx2(const float *x, void *y, int64_t n);
void hfq_quantize_row_q8_0_act_avx2(const float *x, void *y, int64_t n);
/* quant/iq4_simd.c: L[j] = hfq_iq4_nearest_level(id * x[j]), n a multiple of 8. */
void hfq_iq4_nearest_levels_avx2(float id, const float *x, uint8_t *L, int n);
/* quant/plain_simd.c: hfq_dequantize_f16 with F16C, NaN payloads kept;
 * hfq_quantize_row_f16 with F16C, the same halves. */
void hfq_dequantize_f16_avx2(const void *src, float *dst, int64_t n);
void hfq_quantize_row_f16_avx2(const float *x, void *y, int64_t n);
/* quant/qext_simd.c: the INT8 / FP8 quantizers' steps (any n): amax |x| as
 * fmaxf finds it; q[i] = hfq_int8_round(x[i] / scale), and
 * hfq_f32_to_fp8(fmt (an hfq_fp8_format), x[i] / scale); and
 * hfq_quantize_block_nvfp4(x + 64 b, (hfq_block_nvfp4 *)y + b, g) for
 * b < nb, g > 0. (Plain types: fp8.c and fp4.c include this header, so it
 * includes neither module's header.) */
float hfq_amax_avx2(const float *x, int64_t n);
void hfq_quantize_int8_avx2(const float *x, int8_t *q, int64_t n, float scale);
void hfq_quantize_fp8_avx2(int fmt, const float *x, uint8_t *q, int64_t n, float scale);
/* ... y[i] = hfq_fp8_to_f32(fmt, hfq_f32_to_fp8(fmt, x[i] / scale)) * scale (scale != 0). */
void hfq_fp8_fake_quant_avx2(int fmt, const float *x, float *y, int64_t n, float scale);
void hfq_quantize_nvfp4_avx2(const float *x, void *y, int64_t nb, float g);
/* ... and with hfq_nvfp4_act_search_code's scale codes (hfq_quantize_nvfp4_act_search). */
void hfq_quantize_nvfp4_search_avx2(const float *x, void *y, int64_t nb, float g);
/* ... and hfq_fp4_pack(x, n, d, 0, qs): ggml's nearest E2M1 codes at
 * (halved) scale d, n a multiple of 16. */
void hfq_fp4_pack_ggml_avx2(float d, const float *x, int n, uint8_t *qs);
#endif

#endif
