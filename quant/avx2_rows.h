/* avx2_rows.h - the lane steps the AVX2 kernels of quant/ share
 * (q_legacy_simd.c, qext_simd.c, act_simd.c, scale_search_simd.c):
 * rounding as roundf and as hfq_nearest_int, magnitudes and their largest
 * lane, and the low bytes of 32 int32 stored in order. Internal to quant/;
 * include only where HFQ_HAVE_AVX2_KERNELS (quant/isa.h) is defined. */
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

/* hfq_nearest_int in every lane: the same float addition, the same bits. */
AVX2 static inline __m256i nearest_int_lanes(__m256 v) {
    const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

/* |v| in every lane (the sign bit cleared). */
AVX2 static inline __m256 abs_lanes(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

/* The largest lane of v by a fixed tree of max_ps (which keeps its second
 * operand where one is NaN); where no lane is NaN, the maximum, which is the
 * same in any order. */
AVX2 static inline float max_lane(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
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
