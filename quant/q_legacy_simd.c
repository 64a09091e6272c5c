/* AVX2 row kernels of the 32-element formats; see quant/isa.h. Each gives
 * exactly the bytes of its scalar twin (tests/test_quant_simd.c). */
#include "quant/isa.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>

#include "quant/avx2_rows.h"
#include "quant/blocks.h"
#include "quant/half.h"

/* hfq_quantize_block_q8_0 on each block: d = amax / 127 (the maximum is
 * exact in any order), q = (int8_t)roundf(x * id). */
AVX2 void hfq_quantize_row_q8_0_avx2(const float *x, void *y, int64_t n) {
    hfq_block_q8_0 *blocks = (hfq_block_q8_0 *)y;
    for (int64_t b = 0; b < n / HFQ_QK; b++) {
        const float *xb = x + b * HFQ_QK;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            amax = _mm256_max_ps(amax, abs_lanes(v[k]));
        }
        const float d = max_lane(amax) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = hfq_f32_to_fp16(d);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id))));
        store_low_bytes32(q, blocks[b].qs);
    }
}
#endif
