/* F16C row decoder and encoder; see quant/isa.h. vcvtph2ps converts every
 * fp16 value exactly, as hfq_fp16_to_f32, except that it quiets signalling
 * NaNs; those lanes are rebuilt from the bits as hfq_fp16_to_f32 does, so
 * the floats are the same bit for bit. vcvtps2ph rounding to nearest even
 * is hfq_f32_to_fp16 for every float: subnormal halves, overflow to
 * infinity from 65520, and NaNs quieted with their top payload bits, as
 * hfq_f32_to_fp16 writes them (sign | 0x7e00 | payload >> 13). */
#include "quant/isa.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>

#include "quant/half.h"

__attribute__((target("avx2,f16c"))) void hfq_dequantize_f16_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *in = (const uint16_t *)src;
    const __m256i exp_mask = _mm256_set1_epi32(0x7c00), man_mask = _mm256_set1_epi32(0x03ff);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(in + i));
        __m256 f = _mm256_cvtph_ps(h);
        const __m256i h32 = _mm256_cvtepu16_epi32(h);
        const __m256i man = _mm256_and_si256(h32, man_mask);
        const __m256i nan = _mm256_andnot_si256(_mm256_cmpeq_epi32(man, _mm256_setzero_si256()),
                                                _mm256_cmpeq_epi32(_mm256_and_si256(h32, exp_mask), exp_mask));
        if (!_mm256_testz_si256(nan, nan)) {
            /* sign << 16 | all-ones exponent | mantissa << 13 */
            const __m256i bits = _mm256_or_si256(
                _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x8000)), 16),
                                _mm256_set1_epi32(0x7f800000)),
                _mm256_slli_epi32(man, 13));
            f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
        }
        _mm256_storeu_ps(dst + i, f);
    }
    for (; i < n; i++) dst[i] = hfq_fp16_to_f32(in[i]);
}

__attribute__((target("avx2,f16c"))) void hfq_quantize_row_f16_avx2(const float *x, void *y, int64_t n) {
    uint16_t *out = (uint16_t *)y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) out[i] = hfq_f32_to_fp16(x[i]);
}
#endif
