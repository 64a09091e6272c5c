/* AVX2 row quantizers of INT8 and FP8 (quant/int8.h, quant/fp8.h) and of
 * NVFP4 activations with a global scale (quant/fp4.h); see quant/isa.h. Each lane does the scalar code's float operations (x / scale
 * is one IEEE division either way), so the codes are the same bytes
 * (tests/test_quant_simd.c). */
#include "quant/isa.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include "quant/avx2_rows.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/fp8_avx2.h"
#include "quant/int8.h"

AVX2 float hfq_amax_avx2(const float *x, int64_t n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    int64_t i = 0;
    /* max_ps returns its second operand when one is NaN: the running maximum, as fmaxf keeps it */
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), m);
    float lane[8], amax = 0.0f;
    _mm256_storeu_ps(lane, m);
    for (int k = 0; k < 8; k++) amax = fmaxf(amax, lane[k]);
    for (; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    return amax;
}

/* hfq_int8_round of 8 lanes, as int32: roundf where |v| < 127, else +-127
 * with v's sign, 0 for NaN. */
AVX2 static inline __m256i int8_round8(__m256 v) {
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 in = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), _mm256_set1_ps(127.0f), _CMP_LT_OQ);
    const __m256 edge = _mm256_and_ps(_mm256_or_ps(_mm256_set1_ps(127.0f), sign), _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    return _mm256_cvttps_epi32(_mm256_blendv_ps(edge, round_half_away(v), in));
}

AVX2 void hfq_quantize_int8_avx2(const float *x, int8_t *q, int64_t n, float scale) {
    const __m256 s = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i c[4];
        for (int k = 0; k < 4; k++) c[k] = int8_round8(_mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), s));
        store_low_bytes32(c, q + i);
    }
    for (; i < n; i++) q[i] = hfq_int8_round(x[i] / scale);
}

/* hfq_f32_to_fp8 of 8 lanes, as int32 codes: NaN to 0x7F; below the
 * smallest normal, |f| * 2^(bias + mbits - 1) rounded to the nearest
 * integer, ties to even (the scalar shift-and-round: the power of two is
 * exact, and cvtps rounds so in the default rounding mode); normal, the
 * rebiased bits rounded to even at the dropped mantissa bits, saturated;
 * then the sign. */
AVX2 static inline __m256i fp8_encode8(hfq_fp8_format fmt, __m256 f) {
    const int mbits = HFQ_FP8_MBITS(fmt), bias = HFQ_FP8_BIAS(fmt), drop = 23 - mbits;
    const __m256i x = _mm256_castps_si256(f);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80));
    const __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7F800000));
    const __m256i sub = _mm256_cmpgt_epi32(_mm256_set1_epi32((127 + 1 - bias) << 23), ax);
    const __m256i qsub = _mm256_cvtps_epi32(
        _mm256_mul_ps(_mm256_castsi256_ps(ax), _mm256_set1_ps((float)(1 << (bias + mbits - 1)))));
    __m256i r = _mm256_sub_epi32(ax, _mm256_set1_epi32((127 - bias) << 23));
    r = _mm256_add_epi32(r, _mm256_add_epi32(_mm256_set1_epi32((1 << (drop - 1)) - 1),
                                             _mm256_and_si256(_mm256_srli_epi32(r, drop), _mm256_set1_epi32(1))));
    const __m256i qn = _mm256_min_epi32(_mm256_srli_epi32(r, drop), _mm256_set1_epi32(HFQ_FP8_MAX_CODE(fmt)));
    __m256i q = _mm256_blendv_epi8(qn, qsub, sub);
    q = _mm256_blendv_epi8(q, _mm256_set1_epi32(0x7F), nan);
    return _mm256_or_si256(q, sign);
}

AVX2 void hfq_quantize_fp8_avx2(int format, const float *x, uint8_t *q, int64_t n, float scale) {
    const hfq_fp8_format fmt = (hfq_fp8_format)format;
    const __m256 s = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i c[4];
        for (int k = 0; k < 4; k++) c[k] = fp8_encode8(fmt, _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), s));
        store_low_bytes32(c, (int8_t *)(q + i));
    }
    for (; i < n; i++) q[i] = hfq_f32_to_fp8(fmt, x[i] / scale);
}
/* The codes back to floats by the one vector decoder (fp8_avx2.h), their
 * 8 int32 lanes packed to bytes first. */
__attribute__((target("avx2,f16c"))) void hfq_fp8_fake_quant_avx2(int format, const float *x, float *y, int64_t n,
                                                                 float scale) {
    const hfq_fp8_format fmt = (hfq_fp8_format)format;
    const __m256 s = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i c = fp8_encode8(fmt, _mm256_div_ps(_mm256_loadu_ps(x + i), s));   /* 0..255 */
        const __m128i c16 = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(hfq_fp8x8_avx2(fmt, _mm_packus_epi16(c16, c16)), s));
    }
    for (; i < n; i++) y[i] = hfq_fp8_to_f32(fmt, hfq_f32_to_fp8(fmt, x[i] / scale)) * scale;
}

/* hfq_e2m1_rne_doubled(t) of 8 lanes as int32: the magnitude counts the
 * thresholds |t| passes (none for NaN), then the sign's bit 3 unless 0. */
AVX2 static inline __m256i e2m1_rne8(__m256 t) {
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), t);
    static const float gt[4] = {0.5f, 2.5f, 5.0f, 10.0f}, ge[3] = {1.5f, 3.5f, 7.0f};
    __m256i mag = _mm256_setzero_si256();   /* minus the count: each mask is -1 */
    for (int k = 0; k < 4; k++)
        mag = _mm256_add_epi32(mag, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(gt[k]), _CMP_GT_OQ)));
    for (int k = 0; k < 3; k++)
        mag = _mm256_add_epi32(mag, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(ge[k]), _CMP_GE_OQ)));
    mag = _mm256_sub_epi32(_mm256_setzero_si256(), mag);
    const __m256i neg = _mm256_castps_si256(_mm256_cmp_ps(t, _mm256_setzero_ps(), _CMP_LT_OQ));
    const __m256i nonzero = _mm256_cmpgt_epi32(mag, _mm256_setzero_si256());
    return _mm256_or_si256(mag, _mm256_and_si256(_mm256_and_si256(neg, nonzero), _mm256_set1_epi32(8)));
}

/* hfq_fp4_amax of the 16 values v0, v1: the larger of two, NaN skipped
 * (max_ps keeps its second operand). */
AVX2 static inline float amax16(__m256 v0, __m256 v1) {
    return max_lane(_mm256_max_ps(abs_lanes(v0), _mm256_max_ps(abs_lanes(v1), _mm256_setzero_ps())));
}

/* hfq_nvfp4_pack_sub of v0, v1 with scale code `code`. */
AVX2 static inline void pack_sub16(__m256 v0, __m256 v1, uint8_t code, float g, hfq_block_nvfp4 *y, int s) {
    const float d = hfq_nvfp4_sub_scale(code, g);
    y->d[s] = code;
    __m128i bytes = _mm_setzero_si128();
    if (d != 0.0f) {
        const __m256 dv = _mm256_set1_ps(d);
        const __m256i q = _mm256_or_si256(e2m1_rne8(_mm256_div_ps(v0, dv)),
                                          _mm256_slli_epi32(e2m1_rne8(_mm256_div_ps(v1, dv)), 4));
        const __m128i p16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        bytes = _mm_packus_epi16(p16, p16);
    }
    _mm_storel_epi64((__m128i *)(y->qs + s * (HFQ_QK_NVFP4_SUB / 2)), bytes);
}

AVX2 void hfq_quantize_nvfp4_avx2(const float *x, void *blocks, int64_t nb, float g) {
    hfq_block_nvfp4 *y = blocks;
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++) {
            const float *xs = x + b * HFQ_QK_NVFP4 + s * HFQ_QK_NVFP4_SUB;
            const __m256 v0 = _mm256_loadu_ps(xs), v1 = _mm256_loadu_ps(xs + 8);
            pack_sub16(v0, v1, hfq_nvfp4_scale_code(amax16(v0, v1), g), g, y + b, s);
        }
}

/* hfq_fp4_nearest_ggml(x, d) of 8 lanes as int32. The scalar search takes
 * the first code of 0..15 with the least |doubled(code) * d - x|; the codes
 * of x's opposite sign are never strictly nearer than code 0 (their error
 * rounds kd + |x| >= |x|), nor is -0 (the same error as 0, later), so it is
 * the first magnitude 0..7 with the least |kd - |x|| (the same floats: a
 * negation is exact), then x's sign unless the magnitude is 0. NaN: every
 * comparison false, code 0. */
AVX2 static inline __m256i fp4_nearest_ggml8(const __m256 kd[8], __m256 x) {
    const __m256 a = abs_lanes(x);
    __m256 best_err = abs_lanes(_mm256_sub_ps(kd[0], a));
    __m256i best = _mm256_setzero_si256();
    for (int m = 1; m < 8; m++) {
        const __m256 err = abs_lanes(_mm256_sub_ps(kd[m], a));
        const __m256 nearer = _mm256_cmp_ps(err, best_err, _CMP_LT_OQ);
        best_err = _mm256_min_ps(err, best_err);   /* err where nearer */
        best = _mm256_blendv_epi8(best, _mm256_set1_epi32(m), _mm256_castps_si256(nearer));
    }
    const __m256i neg = _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    const __m256i nonzero = _mm256_cmpgt_epi32(best, _mm256_setzero_si256());
    return _mm256_or_si256(best, _mm256_and_si256(_mm256_and_si256(neg, nonzero), _mm256_set1_epi32(8)));
}

AVX2 void hfq_fp4_pack_ggml_avx2(float d, const float *x, int n, uint8_t *qs) {
    __m256 kd[8];
    for (int m = 0; m < 8; m++) kd[m] = _mm256_set1_ps((float)hfq_e2m1_doubled((unsigned)m) * d);
    for (int j = 0; j < n / 2; j += 8) {
        const __m256i q = _mm256_or_si256(fp4_nearest_ggml8(kd, _mm256_loadu_ps(x + j)),
                                          _mm256_slli_epi32(fp4_nearest_ggml8(kd, _mm256_loadu_ps(x + j + n / 2)), 4));
        const __m128i p16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(qs + j), _mm_packus_epi16(p16, p16));
    }
}

/* r^2 of 8 lanes at scale d, r = x / d - the doubled value of its RNE code,
 * as hfq_nvfp4_sub_sq_error computes each: on a = |x / d| (r^2 is even in
 * it), the E2M1 grid in doubled units is the integers to 4, the even ones
 * to 8, then 12: k * round-half-even(a / k) with k = 1, 2, 4 (the thresholds
 * of hfq_e2m1_rne_doubled, ties included), at most 12. NaN stays NaN and
 * infinity saturates to 12, as the code does. */
AVX2 static inline __m256 sq_residual8(__m256 v, __m256 dv) {
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_div_ps(v, dv));
    const __m256 above4 = _mm256_cmp_ps(a, _mm256_set1_ps(4.0f), _CMP_GT_OQ);
    const __m256 above8 = _mm256_cmp_ps(a, _mm256_set1_ps(8.0f), _CMP_GT_OQ);
    const __m256 k = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(2.0f), above4),
                                      _mm256_set1_ps(4.0f), above8);
    const __m256 inv_k = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(0.5f), above4),
                                          _mm256_set1_ps(0.25f), above8);
    const __m256 q = _mm256_round_ps(_mm256_mul_ps(a, inv_k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_sub_ps(a, _mm256_min_ps(_mm256_mul_ps(q, k), _mm256_set1_ps(12.0f)));
    return _mm256_mul_ps(r, r);
}

/* u_j + u_(j+4) of candidates a (low half) and b (high half): hfq_nvfp4_sub_sq_error's second step. */
AVX2 static inline __m256 fold_halves(__m256 a, __m256 b) {
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/* hfq_nvfp4_sub_sq_error of v0, v1 for the codes lo..hi (at most 8): each
 * candidate's lane sums s_j, then the eight reduced together - halves
 * folded two candidates a vector, two horizontal adds of adjacent pairs,
 * lanes back in candidate order - and scaled by (d / amax)^2. */
AVX2 static void search_errors(__m256 v0, __m256 v1, float amax, float g, int lo, int hi, float *err) {
    __m256 e[HFQ_NVFP4_ACT_SEARCH_MAX];
    float d[HFQ_NVFP4_ACT_SEARCH_MAX];
    for (int k = 0; k < HFQ_NVFP4_ACT_SEARCH_MAX; k++) {
        d[k] = lo + k <= hi ? hfq_nvfp4_sub_scale((uint8_t)(lo + k), g) : 1.0f;
        const __m256 dv = _mm256_set1_ps(d[k]);
        e[k] = lo + k <= hi ? _mm256_add_ps(sq_residual8(v0, dv), sq_residual8(v1, dv)) : _mm256_setzero_ps();
    }
    const __m256 h0 = _mm256_hadd_ps(fold_halves(e[0], e[1]), fold_halves(e[2], e[3]));
    const __m256 h1 = _mm256_hadd_ps(fold_halves(e[4], e[5]), fold_halves(e[6], e[7]));
    /* lanes hold candidates 0 2 4 6 1 3 5 7 */
    const __m256 sums = _mm256_permutevar8x32_ps(_mm256_hadd_ps(h0, h1), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    const __m256 dv = _mm256_loadu_ps(d), s = _mm256_div_ps(dv, _mm256_set1_ps(amax));
    const __m256 zero_d = _mm256_cmp_ps(dv, _mm256_setzero_ps(), _CMP_EQ_OQ);
    _mm256_storeu_ps(err, _mm256_blendv_ps(_mm256_mul_ps(_mm256_mul_ps(sums, s), s), _mm256_set1_ps(INFINITY), zero_d));
}

AVX2 void hfq_quantize_nvfp4_search_avx2(const float *x, void *blocks, int64_t nb, float g) {
    hfq_block_nvfp4 *y = blocks;
    float err[HFQ_NVFP4_ACT_SEARCH_MAX];
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++) {
            const float *xs = x + b * HFQ_QK_NVFP4 + s * HFQ_QK_NVFP4_SUB;
            const __m256 v0 = _mm256_loadu_ps(xs), v1 = _mm256_loadu_ps(xs + 8);
            int c6, lo, hi;
            const float amax = amax16(v0, v1);
            hfq_nvfp4_act_search_span(amax, g, &c6, &lo, &hi);
            search_errors(v0, v1, amax, g, lo, hi, err);
            pack_sub16(v0, v1, hfq_nvfp4_act_search_pick(c6, lo, hi, err), g, y + b, s);
        }
}
#endif
