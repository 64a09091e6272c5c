/* AVX2 row kernels of the 32-element formats; see quant/isa.h. Each gives
 * exactly the bytes of its scalar twin (tests/test_quant_simd.c). */
#include "quant/isa.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>

#include "quant/blocks.h"
#include "quant/half.h"

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

/* hfq_quantize_block_q8_0 on each block: d = amax / 127 (the maximum is
 * exact in any order), q = (int8_t)roundf(x * id). */
AVX2 void hfq_quantize_row_q8_0_avx2(const float *x, void *y, int64_t n) {
    hfq_block_q8_0 *blocks = (hfq_block_q8_0 *)y;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / HFQ_QK; b++) {
        const float *xb = x + b * HFQ_QK;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_and_ps(v[k], abs_mask));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float d = _mm_cvtss_f32(m4) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = hfq_f32_to_fp16(d);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id))));
        store_low_bytes32(q, blocks[b].qs);
    }
}
#endif
