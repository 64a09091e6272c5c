/* fp8_avx2.h - FP8 codes to floats, 8 lanes at a time (AVX2 + F16C): the
 * one vector decoder of hfq_fp8_to_f32, for quant/'s FP8 rounding and the
 * CPU kernels' FP8 products. x86-64 only; the CPU must have AVX2 and F16C
 * (quant/isa.h: hfq_isa_best() is HFQ_ISA_AVX2). */
#ifndef HFQ_QUANT_FP8_AVX2_H
#define HFQ_QUANT_FP8_AVX2_H

#if defined(__x86_64__)
#include <immintrin.h>

#include "quant/fp8.h"

/* hfq_fp8_to_f32 of the 8 codes in raw's low 8 bytes, through F16C: an FP8
 * code's bits placed in an fp16's - E5M2 is the top byte of one; E4M3's
 * exponent and mantissa go one bit lower (the code sign-extended, shifted,
 * and its sign copy at bit 14 cleared), the value then 2^8 too small:
 * times 256, exact - and NaN codes replaced by the fp16 quiet NaN of their
 * sign (the reference's float NaN). */
__attribute__((target("avx2,f16c"))) static inline __m256 hfq_fp8x8_avx2(hfq_fp8_format f, __m128i raw) {
    if (f == HFQ_FP8_E5M2) {
        const __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(raw), 8);
        const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7F00)), _mm_set1_epi16(0x7C00));
        /* 0x7D00..0x7F00 -> 0x7E00: clear bit 8, set bit 9 */
        const __m128i fix = _mm_and_si128(nan, _mm_set1_epi16(0x0200));
        return _mm256_cvtph_ps(_mm_or_si128(_mm_andnot_si128(_mm_and_si128(nan, _mm_set1_epi16(0x0100)), h), fix));
    }
    __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(raw), 7), _mm_set1_epi16((short)0xBF80));
    /* magnitude 0x7F (0x3F80 here) -> 0x7E00 */
    const __m128i nan = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7F80)), _mm_set1_epi16(0x3F80));
    h = _mm_xor_si128(h, _mm_and_si128(nan, _mm_set1_epi16(0x4180)));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

#endif
#endif
