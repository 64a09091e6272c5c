/* avx2_rows.h - the lane steps the AVX2 row quantizers of quant/ share
 * (q_legacy_simd.c, qext_simd.c): rounding as roundf, and the low bytes of
 * 32 int32 stored in order. Internal to quant/; include only where
 * HFQ_HAVE_AVX2_KERNELS (quant/isa.h) is defined. */
#ifndef HFQ_QUANT_AVX2_ROWS_H
#define HFQ_QUANT_AVX2_ROWS_H

#include <immintrin.h>
#include <stdint.h>

#define AVX2 __attribute__((target("avx2")))

/* roundf in every lane (half away from zero): trunc(v) and v - trunc(v) are
 * exact, and where the fraction is nonzero |v| < 2^23, so trunc(v) +- 1 is
 * exact too. Infinities and NaN pass through (as roundf). The sign of a zero
 * result may differ from roundf's; callers only convert to integers. */
AVX2 static inline __m256 round_half_away(__m256 v) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(v, t));
    const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign_bit));
    return _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step));
}

/* The low byte of each of 32 int32 (as the scalar (int8_t) conversion of
 * cvttss2si's result keeps), in order. */
AVX2 static inline void store_low_bytes32(const __m256i q[4], int8_t out[32]) {
    const __m256i low = _mm256_set1_epi32(0xff);
    __m256i ab = _mm256_packus_epi32(_mm256_and_si256(q[0], low), _mm256_and_si256(q[1], low));
    __m256i cd = _mm256_packus_epi32(_mm256_and_si256(q[2], low), _mm256_and_si256(q[3], low));
    __m256i bytes = _mm256_packus_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)out, bytes);
}

#endif
