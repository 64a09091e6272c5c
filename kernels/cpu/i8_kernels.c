#include "kernels/cpu/i8_kernels.h"

#include "kernels/cpu/matmul.h"
#include "quant/cpu_features.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/lanes.h"

#define NR CPU_TILE_ROWS

static hfq_fp8_format fp8_of(hfq_qext q) { return q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3; }

static const uint8_t *row_codes(const hfq_tensor *w, int64_t r) {
    return (const uint8_t *)w->data + (size_t)r * w->row_bytes;
}

static void i8_tile_ref(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as, const float *a_scales,
                        int nc, float *out, size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups;
    for (int c = 0; c < nc; c++) {
        const char *ac = (const char *)a + (size_t)c * as;
        for (int r = 0; r < nr; r++) {
            const uint8_t *wr = row_codes(w, r0 + r);
            float *o = &out[(size_t)c * os + (size_t)r];
            if (w->qext == HFQ_QEXT_INT8) *o = hfq_dot_int8_f32(wr, w->scale + (g ? (r0 + r) * g : 0), g ? n / g : 0,
                                                                (const float *)ac, n);
            else if (!a_scales) *o = hfq_dot_fp8_f32(fp8_of(w->qext), wr, w->scale[g ? r0 + r : 0], (const float *)ac, n);
            else
                *o = hfq_dot_fp8_fp8(fp8_of(w->qext), wr, w->scale[g ? r0 + r : 0], fp8_of(w->qext), ac, a_scales[c], n);
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

#define I8_AVX2 __attribute__((target("avx2")))

/* hfq_fp8_to_f32 of 8 codes: the code's exponent and mantissa bits placed
 * in a float's, times 2^(127 - bias) (exact, subnormals included), the
 * format's infinities and NaNs put back, then the sign. */
I8_AVX2 static inline __m256 fp8x8(hfq_fp8_format f, const uint8_t *p) {
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
    const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7F));
    const bool e4m3 = f == HFQ_FP8_E4M3;
    __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, e4m3 ? 20 : 21)),
                             _mm256_castsi256_ps(_mm256_set1_epi32((e4m3 ? 127 + 120 : 127 + 112) << 23)));
    if (e4m3) {
        const __m256i nan = _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F));
        v = _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_castsi256_ps(nan));
    } else {
        const __m256i special = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7B));
        const __m256i inf = _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7C));
        const __m256i bits = _mm256_blendv_epi8(_mm256_set1_epi32(0x7FC00000), _mm256_set1_epi32(0x7F800000), inf);
        v = _mm256_blendv_ps(v, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(special));
    }
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

/* 8 codes of encoding q as floats. */
I8_AVX2 static inline __m256 codes8(hfq_qext q, const uint8_t *p) {
    if (q == HFQ_QEXT_INT8) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    return fp8x8(fp8_of(q), p);
}

static inline float code1(hfq_qext q, uint8_t c) {
    return q == HFQ_QEXT_INT8 ? (float)(int8_t)c : hfq_fp8_to_f32(fp8_of(q), c);
}

/* part[r] = the sum of the products of codes wr[r][i] with activation i
 * (floats, or codes of encoding q when codes) over the run [start, end),
 * in quant/lanes.h's order: lane k of acc[r] is partial sum k. */
I8_AVX2 static inline void run_sums(hfq_qext q, const uint8_t *const wr[NR], const void *a, bool codes, int64_t start,
                                    int64_t end, float part[NR]) {
    __m256 acc[NR];
    for (int r = 0; r < NR; r++) acc[r] = _mm256_setzero_ps();
    int64_t i = start;
    for (; i + HFQ_LANES <= end; i += HFQ_LANES) {
        const __m256 av = codes ? codes8(q, (const uint8_t *)a + i) : _mm256_loadu_ps((const float *)a + i);
        for (int r = 0; r < NR; r++) acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(codes8(q, wr[r] + i), av));
    }
    for (int r = 0; r < NR; r++) {
        float lane[HFQ_LANES];
        _mm256_storeu_ps(lane, acc[r]);
        for (int64_t j = i; j < end; j++)
            lane[(j - start) % HFQ_LANES] +=
                code1(q, wr[r][j]) * (codes ? code1(q, ((const uint8_t *)a)[j]) : ((const float *)a)[j]);
        part[r] = hfq_lanes_sum(lane);
    }
}

/* Rows r >= nr read row 0 again; their results are not stored. */
I8_AVX2 static void i8_tile_avx2(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                                 const float *a_scales, int nc, float *out, size_t os) {
    const uint8_t *wr[NR];
    for (int r = 0; r < NR; r++) wr[r] = row_codes(w, r0 + (r < nr ? r : 0));
    const int64_t n = w->ne0, g = w->scale_groups;
    for (int c = 0; c < nc; c++) {
        const char *ac = (const char *)a + (size_t)c * as;
        float part[NR], sum[NR] = {0};
        if (w->qext == HFQ_QEXT_INT8) {
            /* hfq_dot_int8_f32: scale_g * part_g added group by group */
            const int64_t len = g ? n / g : n;
            for (int64_t k = 0; k * len < n; k++) {
                run_sums(w->qext, wr, ac, false, k * len, (k + 1) * len, part);
                for (int r = 0; r < nr; r++) sum[r] += w->scale[g ? (r0 + r) * g + k : 0] * part[r];
            }
        } else {
            run_sums(w->qext, wr, ac, a_scales != NULL, 0, n, part);
            for (int r = 0; r < nr; r++) {
                const float w_scale = w->scale[g ? r0 + r : 0];
                sum[r] = a_scales ? part[r] * (w_scale * a_scales[c]) : part[r] * w_scale;
            }
        }
        for (int r = 0; r < nr; r++) out[(size_t)c * os + (size_t)r] = sum[r];
    }
}

cpu_i8_tile_fn cpu_i8_tile(bool simd) { return simd && cpu_has(CPU_FEAT_AVX2) ? i8_tile_avx2 : i8_tile_ref; }
#else
cpu_i8_tile_fn cpu_i8_tile(bool simd) {
    (void)simd;
    return i8_tile_ref;
}
#endif
