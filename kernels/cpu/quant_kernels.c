#include "kernels/cpu/quant_kernels.h"

#include "quant/block_math.h"
#include "quant/blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* sum of a[i] * b[i] over 32 int8 pairs given as vectors, exact. */
AVX2 static inline __m256i madd32(__m256i a, __m256i b) {
    const __m256i lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(a)),
                                         _mm256_cvtepi8_epi16(_mm256_castsi256_si128(b)));
    const __m256i hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(a, 1)),
                                         _mm256_cvtepi8_epi16(_mm256_extracti128_si256(b, 1)));
    return _mm256_add_epi32(lo, hi);
}

AVX2 static inline int32_t dot32(const void *a, const void *b) {
    return hsum_i32(madd32(_mm256_loadu_si256((const __m256i *)a), _mm256_loadu_si256((const __m256i *)b)));
}

AVX2 static inline int32_t dot16(const int8_t *a, const int8_t *b) {
    const __m256i p = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a)),
                                        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b)));
    return hsum_i32(p);
}

AVX2 static float vec_dot_q8_0(const void *w, const void *a, int64_t n) {
    const hfq_block_q8_0 *wb = w, *ab = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / HFQ_QK; i++)
        sum += (float)dot32(wb[i].qs, ab[i].qs) * (hfq_fp16_to_f32(wb[i].d) * hfq_fp16_to_f32(ab[i].d));
    return sum;
}

AVX2 static float vec_dot_q4_0(const void *w, const void *a, int64_t n) {
    const hfq_block_q4_0 *wb = w;
    const hfq_block_q8_0 *ab = a;
    const __m128i low4 = _mm_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / HFQ_QK; i++) {
        /* element j: low nibble of byte j; element j + 16: its high nibble; minus 8 */
        const __m128i qs = _mm_loadu_si128((const __m128i *)wb[i].qs);
        const __m256i q = _mm256_sub_epi8(
            _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), low4), _mm_and_si128(qs, low4)), _mm256_set1_epi8(8));
        const int32_t isum = hsum_i32(madd32(q, _mm256_loadu_si256((const __m256i *)ab[i].qs)));
        sum += (float)isum * (hfq_fp16_to_f32(wb[i].d) * hfq_fp16_to_f32(ab[i].d));
    }
    return sum;
}

/* hfq_dot_k_affine_q8_k with the sub-block dots in SIMD (levels <= 15 fit int8). */
AVX2 static float vec_dot_q4_k(const void *w, const void *a, int64_t n) {
    const hfq_block_q4_k *wb = w;
    const hfq_block_q8_k *ab = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / HFQ_QK_K; i++) {
        uint8_t q[HFQ_QK_K];
        hfq_levels_q4_k(&wb[i], q);
        int32_t sum_scaled = 0, sum_mins = 0;
        for (int j = 0; j < HFQ_QK_K / 32; j++) {
            uint8_t sc, m;
            hfq_k_scale_min(j, wb[i].scales, &sc, &m);
            sum_scaled += sc * dot32(q + 32 * j, ab[i].qs + 32 * j);
            sum_mins += m * (ab[i].bsums[2 * j] + ab[i].bsums[2 * j + 1]);
        }
        const float scaled = hfq_fp16_to_f32(wb[i].d) * (float)sum_scaled;
        sum += ab[i].d * (scaled - hfq_fp16_to_f32(wb[i].dmin) * (float)sum_mins);
    }
    return sum;
}

AVX2 static float vec_dot_q6_k(const void *w, const void *a, int64_t n) {
    const hfq_block_q6_k *wb = w;
    const hfq_block_q8_k *ab = a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / HFQ_QK_K; i++) {
        int8_t q[HFQ_QK_K];
        hfq_levels_q6_k(&wb[i], q);
        int32_t isum = 0;
        for (int j = 0; j < HFQ_QK_K / 16; j++) isum += wb[i].scales[j] * dot16(q + 16 * j, ab[i].qs + 16 * j);
        sum += ab[i].d * hfq_fp16_to_f32(wb[i].d) * (float)isum;
    }
    return sum;
}

hfq_vec_dot_fn cpu_quant_vec_dot(hfq_qtype t) {
    if (!__builtin_cpu_supports("avx2")) return NULL;
    switch (t) {
    case HFQ_QT_Q8_0: return vec_dot_q8_0;
    case HFQ_QT_Q4_0: return vec_dot_q4_0;
    case HFQ_QT_Q4_K: return vec_dot_q4_k;
    case HFQ_QT_Q6_K: return vec_dot_q6_k;
    default: return NULL;
    }
}
#else
hfq_vec_dot_fn cpu_quant_vec_dot(hfq_qtype t) {
    (void)t;
    return NULL;
}
#endif
