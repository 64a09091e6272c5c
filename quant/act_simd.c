/* AVX2 twins of the activation row quantizers of quant/block_math.h
 * (hfq_quantize_block_q8_k, hfq_quantize_block_q8_0_act): the runner
 * quantizes every matmul's input rows with them, a scalar pass that was 7 %
 * of a Q4_K prompt. Each gives exactly the bytes of its scalar twin for any
 * input, NaN and infinities included (tests/test_quant_simd.c). */
#include "quant/isa.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>
#include <string.h>

#include "quant/avx2_rows.h"
#include "quant/block_math.h"
#include "quant/blocks.h"

/* hfq_signed_extreme over 256 values: the first of largest magnitude, with
 * its sign; NaN never wins there (fabsf(NaN) > amax is false), and here
 * max_ps(a, acc) keeps acc where a is NaN. */
AVX2 static float signed_extreme256(const float *x) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int k = 0; k < HFQ_QK_K / 8; k++) acc[k & 3] = _mm256_max_ps(abs_lanes(_mm256_loadu_ps(x + 8 * k)), acc[k & 3]);
    const float amax = max_lane(_mm256_max_ps(_mm256_max_ps(acc[0], acc[1]), _mm256_max_ps(acc[2], acc[3])));
    if (amax == 0.0f) return 0.0f;
    const __m256 target = _mm256_set1_ps(amax);
    for (int k = 0; k < HFQ_QK_K / 8; k++) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_lanes(_mm256_loadu_ps(x + 8 * k)), target, _CMP_EQ_OQ));
        if (hit) return x[8 * k + __builtin_ctz((unsigned)hit)];
    }
    return 0.0f; /* not reached: amax is one of the values */
}

/* The sums of each 16 of the 256 codes, in order. */
AVX2 static void q8_k_bsums(const int8_t qs[HFQ_QK_K], int16_t bsums[HFQ_QK_K / 16]) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i quads[8]; /* per 32 codes: eight sums of four, groups 2i (lanes 0-3) and 2i + 1 (4-7) */
    for (int i = 0; i < 8; i++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * i));
        quads[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
    }
    for (int h = 0; h < 2; h++) { /* groups 8h .. 8h + 7 */
        const __m256i *a = quads + 4 * h;
        /* lanes: g0 g2 g4 g6 | g1 g3 g5 g7 (of these eight groups) */
        const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
        const __m256i ordered = _mm256_permutevar8x32_epi32(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(ordered, ordered), 0x08);
        _mm_storeu_si128((__m128i *)(bsums + 8 * h), _mm256_castsi256_si128(packed));
    }
}

AVX2 void hfq_quantize_row_q8_k_avx2(const float *x, void *y, int64_t n) {
    hfq_block_q8_k *blocks = (hfq_block_q8_k *)y;
    for (int64_t b = 0; b < n / HFQ_QK_K; b++) {
        const float *xb = x + b * HFQ_QK_K;
        const float extreme = signed_extreme256(xb);
        if (extreme == 0.0f) {
            memset(&blocks[b], 0, sizeof blocks[b]);
            continue;
        }
        const float iscale = -127.f / extreme;
        const __m256 s = _mm256_set1_ps(iscale);
        for (int g = 0; g < HFQ_QK_K / 32; g++) {
            __m256i q[4];
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_min_epi32(nearest_int_lanes(_mm256_mul_ps(s, _mm256_loadu_ps(xb + 32 * g + 8 * k))),
                                        _mm256_set1_epi32(127));
            store_low_bytes32(q, blocks[b].qs + 32 * g);
        }
        q8_k_bsums(blocks[b].qs, blocks[b].bsums);
        blocks[b].d = 1 / iscale;
    }
}

AVX2 void hfq_quantize_row_q8_0_act_avx2(const float *x, void *y, int64_t n) {
    hfq_block_q8_0 *blocks = (hfq_block_q8_0 *)y;
    for (int64_t b = 0; b < n / HFQ_QK; b++) {
        const float *xb = x + b * HFQ_QK;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            amax = _mm256_max_ps(amax, abs_lanes(v[k]));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
        }
        /* hfq_abs_max lets a NaN stand until the next value replaces it:
         * which one wins depends on the order, so such blocks take it */
        if (_mm256_movemask_ps(nan)) {
            hfq_quantize_block_q8_0_act(xb, &blocks[b]);
            continue;
        }
        const float a = max_lane(amax);
        const float d = a / 127.f, id = a != 0.0f ? 127.f / a : 0.0f;
        blocks[b].d = hfq_f32_to_fp16(d);
        __m256i q[4];
        for (int k = 0; k < 4; k++) q[k] = nearest_int_lanes(_mm256_mul_ps(v[k], _mm256_set1_ps(id)));
        store_low_bytes32(q, blocks[b].qs);
    }
}
#endif
