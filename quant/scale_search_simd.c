/* AVX2 kernels of the scale searches; see scale_search.h.
 *
 * The x8 searches put group g in lane g of every vector: value i of the
 * eight groups is one vector, so the scalar code's loop over values becomes
 * the same loop over vectors and every lane performs the scalar operations
 * in the scalar order (no reassociated sums, no FMA: the target is "avx2"
 * without "fma" and the build has -ffp-contract=off). Branches of the scalar
 * code become lane masks; a lane whose scalar code would have returned early
 * computes garbage that is replaced at the end. The intrinsics used round
 * exactly as their scalar counterparts: IEEE add, sub, mul, div; min/max
 * with the operand order of `x < min ? x : min`; ggml's nearest_int with
 * integer ops on the float bits. */
#include "quant/scale_search.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>

#include "quant/avx2_rows.h"

AVX2 static inline __m256i clamp_epi32(__m256i v, int lo, int hi) {
    return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi));
}

/* Value i of the eight groups of n (group g at p + n g) as one vector. */
AVX2 static inline __m256 gather_groups(const float *p, int n, int i) {
    const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(n));
    return _mm256_i32gather_ps(p + i, offsets, 4);
}

/* Levels (whole floats, one per lane) back to group order in L. */
AVX2 static inline void scatter_levels_u8(const __m256 *levels, int n, int bias, uint8_t *L) {
    for (int i = 0; i < n; ++i) {
        int32_t l[8];
        _mm256_storeu_si256((__m256i *)l, _mm256_cvttps_epi32(levels[i]));
        for (int g = 0; g < 8; ++g) L[n * g + i] = (uint8_t)(l[g] + bias);
    }
}

/* clamp(nearest_int_lanes(iscale * (x - min)), 0, nmax) as floats. */
AVX2 static inline __m256 affine_level(__m256 iscale, __m256 x, __m256 min, int nmax) {
    __m256i l = nearest_int_lanes(_mm256_mul_ps(iscale, _mm256_sub_ps(x, min)));
    return _mm256_cvtepi32_ps(clamp_epi32(l, 0, nmax));
}

/* err + w * (scale * l + min - x)^2, as affine_error's loop body. */
AVX2 static inline __m256 add_affine_error(__m256 err, __m256 w, __m256 x, __m256 l, __m256 scale, __m256 min) {
    __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, l), min), x);
    return _mm256_add_ps(err, _mm256_mul_ps(w, _mm256_mul_ps(diff, diff)));
}

AVX2 void hfq_search_affine_x8_avx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float scale_out[8],
                                    float neg_min_out[8], float rmin, float rdelta, int nstep) {
    __m256 xs[HFQ_AFFINE_MAX_N], ws[HFQ_AFFINE_MAX_N], aux_l[HFQ_AFFINE_MAX_N];
    xs[0] = gather_groups(x, n, 0);
    ws[0] = gather_groups(w, n, 0);
    for (int i = 1; i < n; ++i) {
        xs[i] = gather_groups(x, n, i);
        ws[i] = gather_groups(w, n, i);
    }
    const __m256 zero = _mm256_setzero_ps();
    __m256 min = xs[0], max = xs[0], sum_w = ws[0];
    __m256 sum_x = _mm256_mul_ps(sum_w, xs[0]);
    for (int i = 1; i < n; ++i) {
        min = _mm256_min_ps(xs[i], min); /* x < min ? x : min */
        max = _mm256_max_ps(xs[i], max); /* x > max ? x : max */
        sum_w = _mm256_add_ps(sum_w, ws[i]);
        sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(ws[i], xs[i]));
    }
    min = _mm256_andnot_ps(_mm256_cmp_ps(min, zero, _CMP_GT_OQ), min); /* if (min > 0) min = 0 */
    const __m256 start_min = min;
    const __m256 flat = _mm256_cmp_ps(max, min, _CMP_EQ_OQ); /* the scalar code returns early */

    __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)nmax), _mm256_sub_ps(max, min));
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);
    __m256 best_error = zero;
    for (int i = 0; i < n; ++i)
        best_error = add_affine_error(best_error, ws[i], xs[i], affine_level(iscale, xs[i], min, nmax), scale, min);
    /* the best levels are those of the rounding (iscale, min) of the best
     * candidate: kept as these two, the levels are rounded again at the end */
    __m256 best_iscale = iscale, best_round_min = min;
    for (int is = 0; is <= nstep; ++is) {
        iscale = _mm256_div_ps(_mm256_set1_ps(rmin + rdelta * is + nmax), _mm256_sub_ps(max, min));
        __m256 sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < n; ++i) {
            const __m256 l = affine_level(iscale, xs[i], min, nmax);
            aux_l[i] = l;
            const __m256 wl = _mm256_mul_ps(ws[i], l);
            sum_l = _mm256_add_ps(sum_l, wl);
            sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, l));
            sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, xs[i]));
        }
        const __m256 det = _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
        const __m256 fits = _mm256_cmp_ps(det, zero, _CMP_GT_OQ);
        if (!_mm256_movemask_ps(fits)) continue;
        __m256 this_scale = _mm256_div_ps(
            _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_xl), _mm256_mul_ps(sum_x, sum_l)), det);
        __m256 this_min = _mm256_div_ps(
            _mm256_sub_ps(_mm256_mul_ps(sum_l2, sum_x), _mm256_mul_ps(sum_l, sum_xl)), det);
        const __m256 positive = _mm256_cmp_ps(this_min, zero, _CMP_GT_OQ);
        this_min = _mm256_andnot_ps(positive, this_min);
        this_scale = _mm256_blendv_ps(this_scale, _mm256_div_ps(sum_xl, sum_l2), positive);
        __m256 err = zero;
        for (int i = 0; i < n; ++i) err = add_affine_error(err, ws[i], xs[i], aux_l[i], this_scale, this_min);
        const __m256 better = _mm256_and_ps(fits, _mm256_cmp_ps(err, best_error, _CMP_LT_OQ));
        if (!_mm256_movemask_ps(better)) continue;
        best_iscale = _mm256_blendv_ps(best_iscale, iscale, better);
        best_round_min = _mm256_blendv_ps(best_round_min, min, better);
        best_error = _mm256_blendv_ps(best_error, err, better);
        scale = _mm256_blendv_ps(scale, this_scale, better);
        min = _mm256_blendv_ps(min, this_min, better);
    }
    /* flat groups: levels 0, scale 0, the starting min */
    __m256 best_l[HFQ_AFFINE_MAX_N];
    for (int i = 0; i < n; ++i)
        best_l[i] = _mm256_andnot_ps(flat, affine_level(best_iscale, xs[i], best_round_min, nmax));
    min = _mm256_blendv_ps(min, start_min, flat);
    _mm256_storeu_ps(scale_out, _mm256_andnot_ps(flat, scale));
    _mm256_storeu_ps(neg_min_out, _mm256_xor_ps(min, _mm256_set1_ps(-0.0f)));
    scatter_levels_u8(best_l, n, 0, L);
}

/* Candidates of the symmetric search: the starting scale, then 18 around
 * it; padded with a copy of the first to whole blocks of CAND_BLOCK. */
#define SYM_CANDIDATES 19
#define CAND_BLOCK 4
#define SYM_PADDED 20

/* clamp(nearest_int_lanes(iscale * x), -nmax, nmax - 1) as floats. */
AVX2 static inline __m256 symmetric_level(__m256 iscale, __m256 x, int nmax) {
    return _mm256_cvtepi32_ps(clamp_epi32(nearest_int_lanes(_mm256_mul_ps(iscale, x)), -nmax, nmax - 1));
}

AVX2 void hfq_search_symmetric_x8_avx2(int n, int nmax, const float *x, const float *w, int8_t *L,
                                       float scale_out[8]) {
    __m256 xs[HFQ_SYMMETRIC_X8_MAX_N], ws[HFQ_SYMMETRIC_X8_MAX_N], wxs[HFQ_SYMMETRIC_X8_MAX_N];
    const __m256 zero = _mm256_setzero_ps();
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 amax = zero, extreme = zero;
    for (int i = 0; i < n; ++i) {
        xs[i] = gather_groups(x, n, i);
        ws[i] = w ? gather_groups(w, n, i) : _mm256_mul_ps(xs[i], xs[i]);
        wxs[i] = _mm256_mul_ps(ws[i], xs[i]); /* w * x * l is (w * x) * l */
        /* the first value of largest magnitude, as hfq_signed_extreme */
        const __m256 ax = _mm256_and_ps(xs[i], abs_mask);
        const __m256 larger = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);
        amax = _mm256_blendv_ps(amax, ax, larger);
        extreme = _mm256_blendv_ps(extreme, xs[i], larger);
    }
    const __m256 all_zero = _mm256_cmp_ps(amax, _mm256_set1_ps(HFQ_GROUP_MAX_EPS), _CMP_LT_OQ);

    __m256 iscale[SYM_PADDED], sumlx[SYM_PADDED], suml2[SYM_PADDED];
    iscale[0] = _mm256_div_ps(_mm256_set1_ps((float)-nmax), extreme);
    for (int is = -9, c = 1; is <= 9; ++is)
        if (is != 0) iscale[c++] = _mm256_div_ps(_mm256_set1_ps(-(nmax + 0.1f * is)), extreme);
    iscale[SYM_CANDIDATES] = iscale[0];
    /* a block of candidates at a time keeps several sums in flight, each
     * still adding its terms in value order */
    for (int c0 = 0; c0 < SYM_PADDED; c0 += CAND_BLOCK) {
        __m256 lx[CAND_BLOCK], l2[CAND_BLOCK];
        for (int k = 0; k < CAND_BLOCK; ++k) lx[k] = l2[k] = zero;
        for (int i = 0; i < n; ++i) {
            for (int k = 0; k < CAND_BLOCK; ++k) {
                const __m256 l = symmetric_level(iscale[c0 + k], xs[i], nmax);
                lx[k] = _mm256_add_ps(lx[k], _mm256_mul_ps(wxs[i], l));
                l2[k] = _mm256_add_ps(l2[k], _mm256_mul_ps(_mm256_mul_ps(ws[i], l), l));
            }
        }
        for (int k = 0; k < CAND_BLOCK; ++k) {
            sumlx[c0 + k] = lx[k];
            suml2[c0 + k] = l2[k];
        }
    }
    __m256 chosen = iscale[0];
    __m256 scale = _mm256_and_ps(_mm256_div_ps(sumlx[0], suml2[0]), _mm256_cmp_ps(suml2[0], zero, _CMP_NEQ_UQ));
    __m256 best = _mm256_mul_ps(scale, sumlx[0]);
    for (int c = 1; c < SYM_CANDIDATES; ++c) {
        const __m256 better = _mm256_and_ps(
            _mm256_cmp_ps(suml2[c], zero, _CMP_GT_OQ),
            _mm256_cmp_ps(_mm256_mul_ps(sumlx[c], sumlx[c]), _mm256_mul_ps(best, suml2[c]), _CMP_GT_OQ));
        const __m256 this_scale = _mm256_div_ps(sumlx[c], suml2[c]);
        chosen = _mm256_blendv_ps(chosen, iscale[c], better);
        scale = _mm256_blendv_ps(scale, this_scale, better);
        best = _mm256_blendv_ps(best, _mm256_mul_ps(this_scale, sumlx[c]), better);
    }
    __m256 levels[HFQ_SYMMETRIC_X8_MAX_N];
    for (int i = 0; i < n; ++i) {
        /* all-zero groups: level nmax, so that the stored level (+ bias) is 0 */
        const __m256 l = symmetric_level(chosen, xs[i], nmax);
        levels[i] = _mm256_blendv_ps(l, _mm256_set1_ps((float)-nmax), all_zero);
    }
    _mm256_storeu_ps(scale_out, _mm256_andnot_ps(all_zero, scale));
    scatter_levels_u8(levels, n, nmax, (uint8_t *)L);
}

/* Eight levels (int32, already in 0..255) to eight bytes. */
AVX2 static inline void store_levels8(__m256i q, uint8_t *out) {
    __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64((__m128i *)out, _mm_packus_epi16(q16, q16));
}

AVX2 void hfq_requantize_affine_avx2(int n, int nmax, const float *x, float d, float m, uint8_t *L) {
    const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
    for (int i = 0; i < n; i += 8) {
        __m256 v = _mm256_div_ps(_mm256_add_ps(_mm256_loadu_ps(x + i), vm), vd);
        store_levels8(clamp_epi32(nearest_int_lanes(v), 0, nmax), L + i);
    }
}

AVX2 void hfq_requantize_symmetric_avx2(int n, int nmax, const float *x, float d, int8_t *L) {
    const __m256 vd = _mm256_set1_ps(d);
    for (int i = 0; i < n; i += 8) {
        __m256i q = clamp_epi32(nearest_int_lanes(_mm256_div_ps(_mm256_loadu_ps(x + i), vd)), -nmax, nmax - 1);
        store_levels8(_mm256_add_epi32(q, _mm256_set1_epi32(nmax)), (uint8_t *)L + i);
    }
}
#endif
