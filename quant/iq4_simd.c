/* AVX2 kernel of IQ4_NL / IQ4_XS's scale search (quant/iq4.c); see
 * quant/isa.h. It gives exactly hfq_iq4_nearest_level's codes
 * (tests/test_quant_simd.c). */
#include "quant/isa.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>

#include "quant/iq4.h"

#define AVX2 __attribute__((target("avx2")))

/* The value of level c (0..15) in every lane: the 16 levels in two 8-lane tables. */
AVX2 static inline __m256 level_of(__m256i c, __m256 lo8, __m256 hi8) {
    const __m256 a = _mm256_permutevar8x32_ps(lo8, c), b = _mm256_permutevar8x32_ps(hi8, c);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_cmpgt_epi32(c, _mm256_set1_epi32(7))));
}

/* L[j] = hfq_iq4_nearest_level(id * x[j]) for n (a multiple of 8) values:
 * the scalar binary search ends on lo = the last level <= v (v strictly
 * inside the grid), counted here by comparisons with levels 1..14, then
 * the same choice between lo and lo + 1 (v - level[lo] < level[lo + 1] - v);
 * v at or beyond an end level takes that end's code, NaN 15 (where the
 * scalar search, every comparison false, ends). */
AVX2 void hfq_iq4_nearest_levels_avx2(float id, const float *x, uint8_t *L, int n) {
    static const int8_t levels[16] = HFQ_IQ4NL_LEVELS;
    float lv[16];
    for (int k = 0; k < 16; k++) lv[k] = levels[k];
    const __m256 lo8 = _mm256_loadu_ps(lv), hi8 = _mm256_loadu_ps(lv + 8), vid = _mm256_set1_ps(id);
    const __m256 first = _mm256_set1_ps(lv[0]), last = _mm256_set1_ps(lv[15]);
    for (int j = 0; j < n; j += 8) {
        const __m256 v = _mm256_mul_ps(vid, _mm256_loadu_ps(x + j));
        __m256i lo = _mm256_setzero_si256();
        for (int k = 1; k < 15; k++)  /* a true compare is -1 */
            lo = _mm256_sub_epi32(lo, _mm256_castps_si256(_mm256_cmp_ps(_mm256_set1_ps(lv[k]), v, _CMP_LE_OQ)));
        const __m256i hi = _mm256_add_epi32(lo, _mm256_set1_epi32(1));
        const __m256 below = _mm256_sub_ps(v, level_of(lo, lo8, hi8));
        const __m256 above = _mm256_sub_ps(level_of(hi, lo8, hi8), v);
        __m256i c = _mm256_blendv_epi8(hi, lo, _mm256_castps_si256(_mm256_cmp_ps(below, above, _CMP_LT_OQ)));
        c = _mm256_blendv_epi8(c, _mm256_setzero_si256(), _mm256_castps_si256(_mm256_cmp_ps(v, first, _CMP_LE_OQ)));
        const __m256 top = _mm256_or_ps(_mm256_cmp_ps(v, last, _CMP_GE_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        c = _mm256_blendv_epi8(c, _mm256_set1_epi32(15), _mm256_castps_si256(top));
        int32_t out[8];
        _mm256_storeu_si256((__m256i *)out, c);
        for (int i = 0; i < 8; i++) L[j + i] = (uint8_t)out[i];
    }
}
#endif
