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
            const float *ws = w->scale + (g ? (r0 + r) * g : 0);
            if (w->qext == HFQ_QEXT_INT8 && a_scales) *o = hfq_dot_int8_int8(wr, ws, g ? n / g : 0, ac, a_scales[c], n);
            else if (w->qext == HFQ_QEXT_INT8) *o = hfq_dot_int8_f32(wr, ws, g ? n / g : 0, (const float *)ac, n);
            else if (!a_scales) *o = hfq_dot_fp8_f32(fp8_of(w->qext), wr, w->scale[g ? r0 + r : 0], (const float *)ac, n);
            else
                *o = hfq_dot_fp8_fp8(fp8_of(w->qext), wr, w->scale[g ? r0 + r : 0], fp8_of(w->qext), ac, a_scales[c], n);
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

#define I8_AVX2 __attribute__((target("avx2,f16c")))

/* hfq_fp8_to_f32 of 8 codes, through F16C: an FP8 code's bits placed in an
 * fp16's (E5M2 is the top byte of one; E4M3's exponent and mantissa go
 * one bit lower, and the value comes out 2^8 too small: times 256, exact),
 * NaN codes replaced by the fp16 quiet NaN (the reference's float NaN). */
I8_AVX2 static inline __m256 fp8x8(hfq_fp8_format f, const uint8_t *p) {
    const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    const __m128i mag = _mm_and_si128(c, _mm_set1_epi16(0x7F)), sign = _mm_slli_epi16(_mm_srli_epi16(c, 7), 15);
    if (f == HFQ_FP8_E5M2) {
        const __m128i nan = _mm_cmpgt_epi16(mag, _mm_set1_epi16(0x7C));
        const __m128i h = _mm_blendv_epi8(_mm_slli_epi16(c, 8), _mm_or_si128(sign, _mm_set1_epi16(0x7E00)), nan);
        return _mm256_cvtph_ps(h);
    }
    const __m128i nan = _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7F));
    const __m128i h = _mm_blendv_epi8(_mm_or_si128(sign, _mm_slli_epi16(mag, 7)), _mm_or_si128(sign, _mm_set1_epi16(0x7E00)),
                                      nan);
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

/* 8 codes of encoding q as floats. */
I8_AVX2 static inline __m256 codes8(hfq_qext q, const uint8_t *p) {
    if (q == HFQ_QEXT_INT8) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    return fp8x8(fp8_of(q), p);
}

static inline float code1(hfq_qext q, uint8_t c) {
    return q == HFQ_QEXT_INT8 ? (float)(int8_t)c : hfq_fp8_to_f32(fp8_of(q), c);
}

/* part[c][r] = the sum of the products of codes wr[r][i] with value i of
 * activation row a[c] (floats, or codes of encoding q when codes) over the
 * run [start, end), in quant/lanes.h's order: lane k of acc[c][r] is partial
 * sum k. Each 8 weight codes are decoded once for the C (a constant where
 * this is inlined) activation rows. */
I8_AVX2 static inline __attribute__((always_inline)) void run_sums(hfq_qext q, const uint8_t *const wr[NR],
                                                                   const char *const a[], const int C, bool codes,
                                                                   int64_t start, int64_t end, float part[][NR]) {
    __m256 acc[CPU_TILE_COLS][NR];
    for (int c = 0; c < C; c++)
        for (int r = 0; r < NR; r++) acc[c][r] = _mm256_setzero_ps();
    int64_t i = start;
    for (; i + HFQ_LANES <= end; i += HFQ_LANES) {
        __m256 wv[NR];
        for (int r = 0; r < NR; r++) wv[r] = codes8(q, wr[r] + i);
        for (int c = 0; c < C; c++) {
            const __m256 av = codes ? codes8(q, (const uint8_t *)a[c] + i) : _mm256_loadu_ps((const float *)a[c] + i);
            for (int r = 0; r < NR; r++) acc[c][r] = _mm256_add_ps(acc[c][r], _mm256_mul_ps(wv[r], av));
        }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < NR; r++) {
            float lane[HFQ_LANES];
            _mm256_storeu_ps(lane, acc[c][r]);
            for (int64_t j = i; j < end; j++)
                lane[(j - start) % HFQ_LANES] +=
                    code1(q, wr[r][j]) * (codes ? code1(q, ((const uint8_t *)a[c])[j]) : ((const float *)a[c])[j]);
            part[c][r] = hfq_lanes_sum(lane);
        }
}

/* Products summed per 32-bit lane before they could overflow it: each
 * 32 values add at most 4 * 128 * 127 to a lane. */
#define INT_CHUNK 65536

/* isum[c][r] = the exact sum of wr[r][i] * a[c][i] (INT8 codes) over [start,
 * end): |w| times a with w's signs, pairs summed in 16 bits (no
 * saturation: activations are never -128), then in 32-bit lanes, chunks in
 * 64 bits. */
I8_AVX2 static inline __attribute__((always_inline)) void int_sums(const uint8_t *const wr[NR], const char *const a[],
                                                                   const int C, int64_t start, int64_t end,
                                                                   int64_t isum[][NR]) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int c = 0; c < C; c++)
        for (int r = 0; r < NR; r++) isum[c][r] = 0;
    int64_t i = start;
    while (i + 32 <= end) {
        const int64_t stop = end - i > INT_CHUNK ? i + INT_CHUNK : end;
        __m256i acc[CPU_TILE_COLS][NR];
        for (int c = 0; c < C; c++)
            for (int r = 0; r < NR; r++) acc[c][r] = _mm256_setzero_si256();
        for (; i + 32 <= stop; i += 32) {
            __m256i wv[NR], wabs[NR];
            for (int r = 0; r < NR; r++) {
                wv[r] = _mm256_loadu_si256((const __m256i *)(wr[r] + i));
                wabs[r] = _mm256_abs_epi8(wv[r]);
            }
            for (int c = 0; c < C; c++) {
                const __m256i av = _mm256_loadu_si256((const __m256i *)(a[c] + i));
                for (int r = 0; r < NR; r++)
                    acc[c][r] = _mm256_add_epi32(
                        acc[c][r], _mm256_madd_epi16(_mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(av, wv[r])), ones));
            }
        }
        for (int c = 0; c < C; c++)
            for (int r = 0; r < NR; r++) {
                int32_t lane[8];
                _mm256_storeu_si256((__m256i *)lane, acc[c][r]);
                for (int k = 0; k < 8; k++) isum[c][r] += lane[k];
            }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < NR; r++)
            for (int64_t j = i; j < end; j++) isum[c][r] += (int32_t)(int8_t)wr[r][j] * (int8_t)a[c][j];
}

/* The tile for C activation rows; rows r >= nr read row 0 again, their
 * results not stored. */
I8_AVX2 static inline __attribute__((always_inline)) void i8_cols(const hfq_tensor *w, const uint8_t *const wr[NR],
                                                                  int64_t r0, int nr, const char *const a[],
                                                                  const int C, const float *a_scales, float *out,
                                                                  size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups;
    float part[CPU_TILE_COLS][NR], sum[CPU_TILE_COLS][NR] = {{0}};
    if (w->qext == HFQ_QEXT_INT8) {
        /* hfq_dot_int8_f32 / _int8: scale_g * part_g added group by group */
        const int64_t len = g ? n / g : n;
        for (int64_t k = 0; k * len < n; k++) {
            if (a_scales) {
                int64_t isum[CPU_TILE_COLS][NR];
                int_sums(wr, a, C, k * len, (k + 1) * len, isum);
                for (int c = 0; c < C; c++)
                    for (int r = 0; r < nr; r++) part[c][r] = (float)isum[c][r];
            } else {
                run_sums(w->qext, wr, a, C, false, k * len, (k + 1) * len, part);
            }
            for (int c = 0; c < C; c++)
                for (int r = 0; r < nr; r++) sum[c][r] += w->scale[g ? (r0 + r) * g + k : 0] * part[c][r];
        }
        for (int c = 0; a_scales && c < C; c++)
            for (int r = 0; r < nr; r++) sum[c][r] *= a_scales[c];
    } else {
        run_sums(w->qext, wr, a, C, a_scales != NULL, 0, n, part);
        for (int c = 0; c < C; c++)
            for (int r = 0; r < nr; r++) {
                const float w_scale = w->scale[g ? r0 + r : 0];
                sum[c][r] = a_scales ? part[c][r] * (w_scale * a_scales[c]) : part[c][r] * w_scale;
            }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < nr; r++) out[(size_t)c * os + (size_t)r] = sum[c][r];
}

I8_AVX2 static void i8_tile_avx2(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                                 const float *a_scales, int nc, float *out, size_t os) {
    const uint8_t *wr[NR];
    for (int r = 0; r < NR; r++) wr[r] = row_codes(w, r0 + (r < nr ? r : 0));
    for (int c0 = 0; c0 < nc; c0 += CPU_TILE_COLS) {
        const char *ac[CPU_TILE_COLS];
        const int m = nc - c0 < CPU_TILE_COLS ? nc - c0 : CPU_TILE_COLS;
        for (int c = 0; c < m; c++) ac[c] = (const char *)a + (size_t)(c0 + c) * as;
        const float *asc = a_scales ? a_scales + c0 : NULL;
        float *o = out + (size_t)c0 * os;
        if (m == 3) i8_cols(w, wr, r0, nr, ac, 3, asc, o, os);
        else if (m == 2) i8_cols(w, wr, r0, nr, ac, 2, asc, o, os);
        else i8_cols(w, wr, r0, nr, ac, 1, asc, o, os);
    }
}

cpu_i8_tile_fn cpu_i8_tile(bool simd) { return simd && cpu_has(CPU_FEAT_AVX2) ? i8_tile_avx2 : i8_tile_ref; }
#else
cpu_i8_tile_fn cpu_i8_tile(bool simd) {
    (void)simd;
    return i8_tile_ref;
}
#endif
