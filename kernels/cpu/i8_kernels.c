#include "kernels/cpu/i8_kernels.h"

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/tile_prefetch.h"
#include "quant/cpu_features.h"
#include "quant/fp8.h"
#include "quant/fp8_avx2.h"
#include "quant/int8.h"
#include "quant/lanes.h"

#include <string.h>

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
            else if (!a_scales) *o = hfq_dot_fp8_f32_groups(fp8_of(w->qext), wr, ws, g > 1 ? n / g : 0, (const float *)ac, n);
            else
                *o = hfq_dot_fp8_fp8_groups(fp8_of(w->qext), wr, ws, g > 1 ? n / g : 0, fp8_of(w->qext), ac,
                                            a_scales[c], n);
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

#define I8_AVX2 __attribute__((target("avx2,f16c,fma")))

/* hfq_fp8_to_f32 of the 8 codes at p (quant/fp8_avx2.h). */
I8_AVX2 static inline __m256 fp8x8(hfq_fp8_format f, const uint8_t *p) {
    return hfq_fp8x8_avx2(f, _mm_loadl_epi64((const __m128i *)p));
}

/* fp8x8 of 8 codes that are not NaN (nor, with finite, infinite:
 * fp8_irregular): fp8x8 without the NaN fix. Zeros and subnormals are
 * regular - quantized rows have many (Gemma 3 270M per channel: 6 % of
 * the codes, in 87 % of the 32-code steps). */
I8_AVX2 static inline __m256 fp8x8_regular(hfq_fp8_format f, const uint8_t *p) {
    const __m128i raw = _mm_loadl_epi64((const __m128i *)p);
    if (f == HFQ_FP8_E5M2) return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(raw), 8));
    const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(raw), 7), _mm_set1_epi16((short)0xBF80));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

/* The bytes of the 32 codes c that fp8x8_regular does not take (NaN; with
 * finite, E5M2's infinities too): 0xFF. */
I8_AVX2 static inline __m256i fp8_irregular(hfq_fp8_format f, __m256i c, bool finite) {
    const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi8(0x7F));
    if (f == HFQ_FP8_E5M2) return _mm256_cmpgt_epi8(mag, _mm256_set1_epi8(finite ? 0x7B : 0x7C));
    return _mm256_cmpeq_epi8(mag, _mm256_set1_epi8(0x7F));
}

/* 8 codes of encoding q as floats. */
I8_AVX2 static inline __m256 codes8(hfq_qext q, const uint8_t *p) {
    if (q == HFQ_QEXT_INT8) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    return fp8x8(fp8_of(q), p);
}

static inline float code1(hfq_qext q, uint8_t c) {
    return q == HFQ_QEXT_INT8 ? (float)(int8_t)c : hfq_fp8_to_f32(fp8_of(q), c);
}

/* acc[c][r] + the products of the 8 codes wr[r] + i with values i.. of
 * activation row a[c], any codes. */
I8_AVX2 static inline __attribute__((always_inline)) void step8(hfq_qext q, const uint8_t *const wr[NR],
                                                                const char *const a[], const int C, bool codes,
                                                                int64_t i, __m256 acc[][NR]) {
    __m256 wv[NR];
    for (int r = 0; r < NR; r++) wv[r] = codes8(q, wr[r] + i);
    for (int c = 0; c < C; c++) {
        const __m256 av = codes ? codes8(q, (const uint8_t *)a[c] + i) : _mm256_loadu_ps((const float *)a[c] + i);
        for (int r = 0; r < NR; r++) acc[c][r] = _mm256_add_ps(acc[c][r], _mm256_mul_ps(wv[r], av));
    }
}

/* step8 over the 32 values from i, for FP8 steps with irregular codes: out
 * of line (and rare), so that the regular loop keeps its sums in registers. */
I8_AVX2 static __attribute__((noinline)) void step32(hfq_qext q, const uint8_t *const wr[NR], const char *const a[],
                                                     int C, bool codes, int64_t i, __m256 acc[][NR]) {
    for (int k = 0; k < 4; k++) step8(q, wr, a, C, codes, i + k * HFQ_LANES, acc);
}

/* The rows' sums (row r in lane r) of the partial sums acc[r] (lane k:
 * partial sum k of row r over [start, i)) with the run's last values
 * [i, end), fewer than 8, added one lane each, combined in quant/lanes.h's
 * order: lane k + lane k + 4, then the four rows' side by side. */
I8_AVX2 static inline __attribute__((always_inline)) __m128 finish_sums(hfq_qext q, const uint8_t *const wr[NR],
                                                                        const char *a, bool codes, int64_t start,
                                                                        int64_t i, int64_t end, __m256 acc[NR]) {
    __m128 t[NR];
    for (int r = 0; r < NR; r++) {
        if (i < end) {
            float lane[HFQ_LANES];
            _mm256_storeu_ps(lane, acc[r]);
            for (int64_t j = i; j < end; j++)
                lane[(j - start) % HFQ_LANES] +=
                    code1(q, wr[r][j]) * (codes ? code1(q, ((const uint8_t *)a)[j]) : ((const float *)a)[j]);
            acc[r] = _mm256_loadu_ps(lane);
        }
        t[r] = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    }
    _MM_TRANSPOSE4_PS(t[0], t[1], t[2], t[3]);
    return _mm_add_ps(_mm_add_ps(t[0], t[2]), _mm_add_ps(t[1], t[3]));
}

/* part[c] = the sums (rows 0..3 in lanes 0..3) of the products of codes
 * wr[r][i] with value i of activation row a[c] (floats, or codes of
 * encoding q when codes) over the run [start, end), in quant/lanes.h's
 * order: lane k of acc[c][r] is partial sum k, and the four rows' partial
 * sums are combined side by side after a transposition. Each 8 weight
 * codes are decoded once for the C (a constant where this is inlined)
 * activation rows. FP8 takes 32 values a step: one test of the step's codes
 * (irregular ones are rare: none in most quantized rows) chooses
 * fp8x8_regular, and for FP8 x FP8 one fused multiply-add per product,
 * which gives the separate product and sum's bits as the product of two
 * finite FP8 values is exact in float (significands of at most 4 bits; E4M3's 2^-18 and
 * E5M2's 2^-32 at the least, far from float's limits); else step8. */
I8_AVX2 static inline __attribute__((always_inline)) void run_sums(hfq_qext q, const uint8_t *const wr[NR], size_t ws,
                                                                   const char *const a[], const int C, bool codes,
                                                                   int64_t start, int64_t end, __m128 part[]) {
    __m256 acc[CPU_TILE_COLS][NR];
    for (int c = 0; c < C; c++)
        for (int r = 0; r < NR; r++) acc[c][r] = _mm256_setzero_ps();
    int64_t i = start;
    for (; q != HFQ_QEXT_INT8 && i + 4 * HFQ_LANES <= end; i += 4 * HFQ_LANES) {
        prefetch_next_tile(wr[0], ws, i / (4 * HFQ_LANES), 4 * HFQ_LANES);
        const hfq_fp8_format f = fp8_of(q);
        __m256i odd = _mm256_setzero_si256();
        for (int r = 0; r < NR; r++)
            odd = _mm256_or_si256(odd, fp8_irregular(f, _mm256_loadu_si256((const __m256i *)(wr[r] + i)), codes));
        for (int c = 0; codes && c < C; c++)
            odd = _mm256_or_si256(odd, fp8_irregular(f, _mm256_loadu_si256((const __m256i *)(a[c] + i)), true));
        if (!_mm256_testz_si256(odd, odd)) {
            __m256 mem[CPU_TILE_COLS][NR];   /* acc's address never taken: it stays in registers */
            for (int c = 0; c < C; c++)
                for (int r = 0; r < NR; r++) mem[c][r] = acc[c][r];
            step32(q, wr, a, C, codes, i, mem);
            for (int c = 0; c < C; c++)
                for (int r = 0; r < NR; r++) acc[c][r] = mem[c][r];
            continue;
        }
        for (int64_t j = i; j < i + 4 * HFQ_LANES; j += HFQ_LANES) {
            __m256 av[CPU_TILE_COLS];
            for (int c = 0; c < C; c++)
                av[c] = codes ? fp8x8_regular(f, (const uint8_t *)a[c] + j) : _mm256_loadu_ps((const float *)a[c] + j);
            for (int r = 0; r < NR; r++) {
                const __m256 wv = fp8x8_regular(f, wr[r] + j);
                for (int c = 0; c < C; c++)
                    acc[c][r] = codes ? _mm256_fmadd_ps(wv, av[c], acc[c][r])
                                      : _mm256_add_ps(acc[c][r], _mm256_mul_ps(wv, av[c]));
            }
        }
    }
    for (; i + HFQ_LANES <= end; i += HFQ_LANES) step8(q, wr, a, C, codes, i, acc);
    for (int c = 0; c < C; c++) part[c] = finish_sums(q, wr, a[c], codes, start, i, end, acc[c]);
}

/* Products summed per 32-bit lane before they could overflow it: each
 * 32 values add at most 4 * 128 * 127 to a lane. */
#define INT_CHUNK 65536

/* acc + the products of the 32 codes w and a in 8 lanes, exact for any
 * codes (-128 included): widened to 16 bits, pairs summed in 32. */
I8_AVX2 static inline __m256i madd_wide(__m256i acc, __m256i w, __m256i a) {
    const __m256i lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(w)),
                                         _mm256_cvtepi8_epi16(_mm256_castsi256_si128(a)));
    const __m256i hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(w, 1)),
                                         _mm256_cvtepi8_epi16(_mm256_extracti128_si256(a, 1)));
    return _mm256_add_epi32(acc, _mm256_add_epi32(lo, hi));
}

/* The end of int_sums and int_sums512: each column's products from value
 * i to end (fewer than a step: scalar) added to its chunks' sums (rows[c]
 * the only chunk's, in 32 bits, when one_chunk; else isum[c], in 64), as
 * floats: (float) of the exact integer, however it was summed. Never
 * inlined into int_sums512: there GCC 12.2 at -O3 vectorizes the tail's
 * int8 x int8 products with vpdpbusd, which reads one operand as unsigned
 * (wrong sums for tails of 32 values and more; the same loop alone in an
 * avx512vnni function does it too). */
I8_AVX2 static __attribute__((noinline)) void int_sums_finish(const uint8_t *const wr[NR], const char *const a[], const int C,
                                           bool one_chunk, int64_t i, int64_t end, const __m128i rows[],
                                           int64_t (*isum)[NR], __m128 part[]) {
    for (int c = 0; c < C; c++) {
        int32_t tail[NR] = {0};   /* under a step's products each */
        for (int r = 0; r < NR; r++)
            for (int64_t j = i; j < end; j++) tail[r] += (int32_t)(int8_t)wr[r][j] * (int8_t)a[c][j];
        if (one_chunk) {
            part[c] = _mm_cvtepi32_ps(_mm_add_epi32(rows[c], _mm_loadu_si128((const __m128i *)tail)));
            continue;
        }
        for (int r = 0; r < NR; r++) isum[c][r] += tail[r];
        part[c] = _mm_setr_ps((float)isum[c][0], (float)isum[c][1], (float)isum[c][2], (float)isum[c][3]);
    }
}

/* part[c] = the exact sums (rows in lanes) of wr[r][i] * a[c][i] (INT8
 * codes) over [start, end), as floats: |w| times a with w's signs, pairs
 * summed in 16 bits (no saturation while activations are never -128), then
 * in 32-bit lanes; a run longer than a chunk adds its chunks in 64 bits, a
 * shorter one (a group) stays in 32 (below 2^30) and is converted as one
 * vector, the rounding of (float) of the same integer. any_codes:
 * activations may be -128 (compressed-tensors' rule, hfq.act_quant
 * int8_ct): widened products. */
I8_AVX2 static inline __attribute__((always_inline)) void int_sums(const uint8_t *const wr[NR], size_t ws,
                                                                   const char *const a[], const int C, bool any_codes,
                                                                   int64_t start, int64_t end, __m128 part[]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const bool one_chunk = end - start <= INT_CHUNK;
    int64_t isum[CPU_TILE_COLS][NR] = {{0}};
    __m128i rows[CPU_TILE_COLS];
    for (int c = 0; c < C; c++) rows[c] = _mm_setzero_si128();
    int64_t i = start;
    while (i + 32 <= end) {
        const int64_t stop = end - i > INT_CHUNK ? i + INT_CHUNK : end;
        __m256i acc[CPU_TILE_COLS][NR];
        for (int c = 0; c < C; c++)
            for (int r = 0; r < NR; r++) acc[c][r] = _mm256_setzero_si256();
        for (; i + 32 <= stop; i += 32) {
            prefetch_next_tile(wr[0], ws, i / 32, 32);
            __m256i wv[NR], wabs[NR];
            for (int r = 0; r < NR; r++) {
                wv[r] = _mm256_loadu_si256((const __m256i *)(wr[r] + i));
                wabs[r] = _mm256_abs_epi8(wv[r]);
            }
            for (int c = 0; c < C; c++) {
                const __m256i av = _mm256_loadu_si256((const __m256i *)(a[c] + i));
                for (int r = 0; r < NR; r++)
                    acc[c][r] = any_codes ? madd_wide(acc[c][r], wv[r], av)
                                          : _mm256_add_epi32(acc[c][r], _mm256_madd_epi16(_mm256_maddubs_epi16(
                                                                            wabs[r], _mm256_sign_epi8(av, wv[r])),
                                                                        ones));
            }
        }
        for (int c = 0; c < C; c++) {
            /* rows' lane sums side by side: exact, a chunk stays below 2^31 */
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[c][0], acc[c][1]),
                                                _mm256_hadd_epi32(acc[c][2], acc[c][3]));
            rows[c] = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            if (one_chunk) continue;
            int32_t lane[NR];
            _mm_storeu_si128((__m128i *)lane, rows[c]);
            for (int r = 0; r < NR; r++) isum[c][r] += lane[r];
        }
    }
    int_sums_finish(wr, a, C, one_chunk, i, end, rows, isum, part);
}

/* Row r's scale k (rows r >= nr: row 0's, as their codes). */
static inline float scale_of(const hfq_tensor *w, int64_t r0, int r, int nr, int64_t k) {
    const int64_t g = w->scale_groups;
    return w->scale[g ? (r0 + (r < nr ? r : 0)) * g + k : 0];
}

/* The four rows' scales k, row r in lane r. */
I8_AVX2 static inline __m128 scales4(const hfq_tensor *w, int64_t r0, int nr, int64_t k) {
    return _mm_setr_ps(scale_of(w, r0, 0, nr, k), scale_of(w, r0, 1, nr, k), scale_of(w, r0, 2, nr, k),
                       scale_of(w, r0, 3, nr, k));
}

/* The first nr rows of sums sum[c] (row r in lane r) to out[c * os + r]. */
I8_AVX2 static inline void store_cols(const __m128 *sum, int C, int nr, float *out, size_t os) {
    for (int c = 0; c < C; c++) {
        float lane[NR];
        _mm_storeu_ps(lane, sum[c]);
        for (int r = 0; r < nr; r++) out[(size_t)c * os + (size_t)r] = lane[r];
    }
}

/* The tile for C activation rows, rows in vector lanes; rows r >= nr read
 * row 0 again, their results not stored. q and codes are constants where
 * this is inlined: each encoding and activation kind gets its own loops. */
I8_AVX2 static inline __attribute__((always_inline)) void i8_cols(const hfq_qext q, const bool codes,
                                                                  const hfq_tensor *w, const uint8_t *const wr[NR],
                                                                  int64_t r0, int nr, const char *const a[],
                                                                  const int C, const float *a_scales, float *out,
                                                                  size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups;
    __m128 part[CPU_TILE_COLS], sum[CPU_TILE_COLS];
    for (int c = 0; c < C; c++) sum[c] = _mm_setzero_ps();
    if (q == HFQ_QEXT_INT8 || g > 1) {
        /* hfq_dot_int8_f32 / _int8 / hfq_dot_fp8_*_groups: scale_g * part_g added group by group */
        const int64_t len = g ? n / g : n;
        for (int64_t k = 0; k * len < n; k++) {
            if (codes && q == HFQ_QEXT_INT8)
                int_sums(wr, w->row_bytes, a, C, w->act_int8_ct, k * len, (k + 1) * len, part);
            else run_sums(q, wr, w->row_bytes, a, C, codes, k * len, (k + 1) * len, part);
            const __m128 ws = scales4(w, r0, nr, k);
            for (int c = 0; c < C; c++) sum[c] = _mm_add_ps(sum[c], _mm_mul_ps(ws, part[c]));
        }
        for (int c = 0; codes && c < C; c++) sum[c] = _mm_mul_ps(sum[c], _mm_set1_ps(a_scales[c]));
    } else {
        run_sums(q, wr, w->row_bytes, a, C, codes, 0, n, part);
        const __m128 ws = scales4(w, r0, nr, 0);
        for (int c = 0; c < C; c++) sum[c] = _mm_mul_ps(part[c], codes ? _mm_mul_ps(ws, _mm_set1_ps(a_scales[c])) : ws);
    }
    store_cols(sum, C, nr, out, os);
}

/* i8_cols over the activation rows, CPU_TILE_COLS at a time. */
I8_AVX2 static inline __attribute__((always_inline)) void i8_tile_of(const hfq_qext q, const bool codes,
                                                                     const hfq_tensor *w, int64_t r0, int nr,
                                                                     const void *a, size_t as, const float *a_scales,
                                                                     int nc, float *out, size_t os) {
    const uint8_t *wr[NR];
    for (int r = 0; r < NR; r++) wr[r] = row_codes(w, r0 + (r < nr ? r : 0));
    for (int c0 = 0; c0 < nc; c0 += CPU_TILE_COLS) {
        const char *ac[CPU_TILE_COLS];
        const int m = nc - c0 < CPU_TILE_COLS ? nc - c0 : CPU_TILE_COLS;
        for (int c = 0; c < m; c++) ac[c] = (const char *)a + (size_t)(c0 + c) * as;
        const float *asc = codes ? a_scales + c0 : NULL;
        float *o = out + (size_t)c0 * os;
        _Static_assert(CPU_TILE_COLS == 3, "one call of i8_cols per column count");
        if (m == 3) i8_cols(q, codes, w, wr, r0, nr, ac, 3, asc, o, os);
        else if (m == 2) i8_cols(q, codes, w, wr, r0, nr, ac, 2, asc, o, os);
        else i8_cols(q, codes, w, wr, r0, nr, ac, 1, asc, o, os);
    }
}

/* One function per encoding and activation kind (cpu_i8_tile_fn). */
#define I8_TILE(name, q, codes)                                                                                    \
    I8_AVX2 static void name(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,                   \
                             const float *a_scales, int nc, float *out, size_t os) {                               \
        i8_tile_of(q, codes, w, r0, nr, a, as, a_scales, nc, out, os);                                             \
    }
I8_TILE(int8_f32_tile, HFQ_QEXT_INT8, false)
I8_TILE(int8_int8_tile, HFQ_QEXT_INT8, true)
I8_TILE(e4m3_f32_tile, HFQ_QEXT_FP8_E4M3, false)
I8_TILE(e4m3_e4m3_tile, HFQ_QEXT_FP8_E4M3, true)
I8_TILE(e5m2_f32_tile, HFQ_QEXT_FP8_E5M2, false)
I8_TILE(e5m2_e5m2_tile, HFQ_QEXT_FP8_E5M2, true)

I8_AVX2 static void i8_tile_avx2(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                                 const float *a_scales, int nc, float *out, size_t os) {
    cpu_i8_tile_fn f = w->qext == HFQ_QEXT_INT8       ? (a_scales ? int8_int8_tile : int8_f32_tile)
                       : w->qext == HFQ_QEXT_FP8_E5M2 ? (a_scales ? e5m2_e5m2_tile : e5m2_f32_tile)
                                                      : (a_scales ? e4m3_e4m3_tile : e4m3_f32_tile);
    f(w, r0, nr, a, as, a_scales, nc, out, os);
}

/* ---- AVX2: FP8 codes times float rows, each weight scaled first ---- */

/* The products of weights marked act_fp8_group (panel.h's SCALED operands,
 * matmul.c's dot_fp8_codes_f32): code * scale of its group, rounded, fused
 * into partial sum i % 8 - one 8-lane vector per (row, token), so its lanes
 * are the partial sums in order - then hfq_lanes_sum. Two tokens at a time
 * beside the four rows' weights (13 of the 16 registers). */
I8_AVX2 static inline __attribute__((always_inline)) void scaled_cols(const hfq_tensor *w, int64_t r0, int nr,
                                                                      const char *a, size_t as, const int C,
                                                                      float *out, size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups, len = g ? n / g : n;
    const uint8_t *wr[NR];
    for (int r = 0; r < NR; r++) wr[r] = row_codes(w, r0 + (r < nr ? r : 0));
    __m256 acc[2][NR], sc[NR];   /* sc: the rows' scales of the group in progress */
    for (int r = 0; r < NR; r++) sc[r] = _mm256_setzero_ps();
    for (int c = 0; c < C; c++)
        for (int r = 0; r < NR; r++) acc[c][r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += HFQ_LANES) {
        if (i % len == 0)
            for (int r = 0; r < NR; r++) sc[r] = _mm256_set1_ps(w->scale[g ? (r0 + (r < nr ? r : 0)) * g + i / len : 0]);
        __m256 wv[NR];
        for (int r = 0; r < NR; r++) wv[r] = _mm256_mul_ps(fp8x8(fp8_of(w->qext), wr[r] + i), sc[r]);
        for (int c = 0; c < C; c++) {
            const __m256 av = _mm256_loadu_ps((const float *)(a + (size_t)c * as) + i);
            for (int r = 0; r < NR; r++) acc[c][r] = _mm256_fmadd_ps(wv[r], av, acc[c][r]);
        }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < nr; r++) {
            float lane[HFQ_LANES];
            _mm256_storeu_ps(lane, acc[c][r]);
            out[(size_t)c * os + (size_t)r] = hfq_lanes_sum(lane);
        }
}

I8_AVX2 static void i8_scaled_tile_avx2(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                                        const float *a_scales, int nc, float *out, size_t os) {
    (void)a_scales;
    int c = 0;
    for (; c + 2 <= nc; c += 2) scaled_cols(w, r0, nr, (const char *)a + (size_t)c * as, as, 2, out + (size_t)c * os, os);
    if (c < nc) scaled_cols(w, r0, nr, (const char *)a + (size_t)c * as, as, 1, out + (size_t)c * os, os);
}

/* ---- AVX-512, float activations: two weight rows per vector ---- */

#define I8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c,fma")))
#define COLS512 CPU_TILE_COLS_F512
#define I8_WIDE_COLS 64 /* columns a call (matmul.c's token block): each run's weights decoded once for them */

/* The 8 codes from p0 (lanes 0..7) and p1 (lanes 8..15) as floats: INT8,
 * or FP8 codes that are not NaN (fp8x8_regular's steps, 16 at a time). */
I8_AVX512 static inline __m512 codes16_regular(hfq_qext q, const uint8_t *p0, const uint8_t *p1) {
    const __m128i raw = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p0), _mm_loadl_epi64((const __m128i *)p1));
    if (q == HFQ_QEXT_INT8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(raw));
    if (q == HFQ_QEXT_FP8_E5M2) return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(raw), 8));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7), _mm256_set1_epi16((short)0xBF80));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
}

/* Any 8 codes from p0 and from p1 as floats, NaNs the reference's. */
I8_AVX512 static inline __m512 codes16(hfq_qext q, const uint8_t *p0, const uint8_t *p1) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(codes8(q, p0)), codes8(q, p1), 1);
}

/* run_sums for float activations (codes false) on 512-bit vectors: weight
 * rows 0 and 1 in the halves of acc[c][0], rows 2 and 3 of acc[c][1], each
 * half run_sums' 8 partial sums of its row, so the same bits; FP8 steps of
 * 32 with a NaN code go through step32 with the halves taken apart. exact:
 * the activations are FP8 values (W8A8, widened), whose products with the
 * regular codes are exact in float, so one fused multiply-add gives the
 * separate product and sum's bits. */
I8_AVX512 static inline __attribute__((always_inline)) __m512 mul_add512(bool exact, __m512 acc, __m512 w, __m512 a) {
    return exact ? _mm512_fmadd_ps(w, a, acc) : _mm512_add_ps(acc, _mm512_mul_ps(w, a));
}

I8_AVX512 static inline __attribute__((always_inline)) void run_sums512(hfq_qext q, const uint8_t *const wr[NR],
                                                                        size_t ws, const char *const a[], const int C,
                                                                        const bool exact, int64_t start, int64_t end,
                                                                        __m128 part[]) {
    __m512 acc[COLS512][2];
    for (int c = 0; c < C; c++) acc[c][0] = acc[c][1] = _mm512_setzero_ps();
    int64_t i = start;
    for (; i + 4 * HFQ_LANES <= end; i += 4 * HFQ_LANES) {
        prefetch_next_tile(wr[0], ws, i / (4 * HFQ_LANES), 4 * HFQ_LANES);
        if (q != HFQ_QEXT_INT8) {
            __m256i odd = _mm256_setzero_si256();
            for (int r = 0; r < NR; r++)
                odd = _mm256_or_si256(odd, fp8_irregular(fp8_of(q), _mm256_loadu_si256((const __m256i *)(wr[r] + i)), false));
            if (!_mm256_testz_si256(odd, odd)) {
                for (int c = 0; c < C; c++) {
                    __m256 mem[1][NR] = {{_mm512_castps512_ps256(acc[c][0]), _mm512_extractf32x8_ps(acc[c][0], 1),
                                          _mm512_castps512_ps256(acc[c][1]), _mm512_extractf32x8_ps(acc[c][1], 1)}};
                    step32(q, wr, a + c, 1, false, i, mem);
                    acc[c][0] = _mm512_insertf32x8(_mm512_castps256_ps512(mem[0][0]), mem[0][1], 1);
                    acc[c][1] = _mm512_insertf32x8(_mm512_castps256_ps512(mem[0][2]), mem[0][3], 1);
                }
                continue;
            }
        }
        for (int64_t j = i; j < i + 4 * HFQ_LANES; j += HFQ_LANES) {
            const __m512 w01 = codes16_regular(q, wr[0] + j, wr[1] + j), w23 = codes16_regular(q, wr[2] + j, wr[3] + j);
            for (int c = 0; c < C; c++) {
                const __m512 av = _mm512_broadcast_f32x8(_mm256_loadu_ps((const float *)a[c] + j));
                acc[c][0] = mul_add512(exact, acc[c][0], w01, av);
                acc[c][1] = mul_add512(exact, acc[c][1], w23, av);
            }
        }
    }
    for (; i + HFQ_LANES <= end; i += HFQ_LANES) {
        const __m512 w01 = codes16(q, wr[0] + i, wr[1] + i), w23 = codes16(q, wr[2] + i, wr[3] + i);
        for (int c = 0; c < C; c++) {
            const __m512 av = _mm512_broadcast_f32x8(_mm256_loadu_ps((const float *)a[c] + i));
            acc[c][0] = _mm512_add_ps(acc[c][0], _mm512_mul_ps(w01, av));
            acc[c][1] = _mm512_add_ps(acc[c][1], _mm512_mul_ps(w23, av));
        }
    }
    for (int c = 0; c < C; c++) {
        __m256 rows[NR] = {_mm512_castps512_ps256(acc[c][0]), _mm512_extractf32x8_ps(acc[c][0], 1),
                           _mm512_castps512_ps256(acc[c][1]), _mm512_extractf32x8_ps(acc[c][1], 1)};
        part[c] = finish_sums(q, wr, a[c], false, start, i, end, rows);
    }
}

/* i8_cols for float activations on run_sums512, C (a constant where
 * inlined) up to COLS512 columns; with a_scales, FP8 activation codes
 * widened to floats (exact), whose products with FP8 weights are exact in
 * float: the separate product and sum of hfq_dot_fp8_fp8 are one fused
 * multiply-add (run_sums512's exact), so the same float steps give the same
 * bits. */
I8_AVX512 static inline __attribute__((always_inline)) void f32_cols512(const hfq_qext q, const bool exact,
                                                                        const hfq_tensor *w,
                                                                        const uint8_t *const wr[NR], int64_t r0,
                                                                        int nr, const char *const a[], const int C,
                                                                        const float *a_scales, float *out, size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups;
    __m128 part[COLS512], sum[COLS512];
    if (q == HFQ_QEXT_INT8 || g > 1) {
        const int64_t len = g ? n / g : n;
        for (int c = 0; c < C; c++) sum[c] = _mm_setzero_ps();
        for (int64_t k = 0; k * len < n; k++) {
            run_sums512(q, wr, w->row_bytes, a, C, exact, k * len, (k + 1) * len, part);
            const __m128 ws = scales4(w, r0, nr, k);
            for (int c = 0; c < C; c++) sum[c] = _mm_add_ps(sum[c], _mm_mul_ps(ws, part[c]));
        }
        for (int c = 0; a_scales && c < C; c++) sum[c] = _mm_mul_ps(sum[c], _mm_set1_ps(a_scales[c]));
    } else {
        run_sums512(q, wr, w->row_bytes, a, C, exact, 0, n, part);
        const __m128 ws = scales4(w, r0, nr, 0);
        for (int c = 0; c < C; c++) sum[c] = _mm_mul_ps(part[c], a_scales ? _mm_mul_ps(ws, _mm_set1_ps(a_scales[c])) : ws);
    }
    store_cols(sum, C, nr, out, os);
}

/* The weight vectors run_sums512 takes for rows wr over the run [start,
 * end), each 8-value step's two (rows 0-1, rows 2-3) into dec: its 32-value
 * steps decoded as regular codes unless one is irregular, the rest by the
 * full decoder - the values run_sums512 multiplies there. */
I8_AVX512 static inline __attribute__((always_inline)) void decode_run512(hfq_qext q, const uint8_t *const wr[NR],
                                                                          int64_t start, int64_t end, __m512 *dec) {
    int64_t i = start;
    for (; i + 4 * HFQ_LANES <= end; i += 4 * HFQ_LANES) {
        bool regular = true;
        if (q != HFQ_QEXT_INT8) {
            __m256i odd = _mm256_setzero_si256();
            for (int r = 0; r < NR; r++)
                odd = _mm256_or_si256(odd, fp8_irregular(fp8_of(q), _mm256_loadu_si256((const __m256i *)(wr[r] + i)), false));
            regular = _mm256_testz_si256(odd, odd);
        }
        for (int64_t j = i; j < i + 4 * HFQ_LANES; j += HFQ_LANES, dec += 2) {
            dec[0] = regular ? codes16_regular(q, wr[0] + j, wr[1] + j) : codes16(q, wr[0] + j, wr[1] + j);
            dec[1] = regular ? codes16_regular(q, wr[2] + j, wr[3] + j) : codes16(q, wr[2] + j, wr[3] + j);
        }
    }
    for (; i + HFQ_LANES <= end; i += HFQ_LANES, dec += 2) {
        dec[0] = codes16(q, wr[0] + i, wr[1] + i);
        dec[1] = codes16(q, wr[2] + i, wr[3] + i);
    }
}

/* acc[c] (rows 0-1, rows 2-3: run_sums512's partial sums) + the products of
 * the decoded weights dec (n_steps steps of 8 values from value i) with
 * activation rows a[c], C (a constant where inlined) columns in registers. */
I8_AVX512 static inline __attribute__((always_inline)) void dec_steps512(const bool exact, const __m512 *dec,
                                                                         int64_t n_steps, const char *const a[],
                                                                         const int C, int64_t i, __m512 (*acc)[2]) {
    __m512 r[COLS512][2];
    for (int c = 0; c < C; c++) r[c][0] = acc[c][0], r[c][1] = acc[c][1];
    for (int64_t s = 0; s < n_steps; s++, i += HFQ_LANES)
        for (int c = 0; c < C; c++) {
            const __m512 av = _mm512_broadcast_f32x8(_mm256_loadu_ps((const float *)a[c] + i));
            r[c][0] = mul_add512(exact, r[c][0], dec[2 * s], av);
            r[c][1] = mul_add512(exact, r[c][1], dec[2 * s + 1], av);
        }
    for (int c = 0; c < C; c++) acc[c][0] = r[c][0], acc[c][1] = r[c][1];
}

/* Values of a run decoded at a time by f32_wide512 (8 KB of vectors on the
 * stack, a multiple of the 32-value steps' grid): with 2048 or 8192 two
 * threads ran erratic and slow here (Gemma 3 270M FP8 weight-only 254-438
 * tokens/s against 515-540; one thread was not slower). */
#define I8_DEC_CHUNK 512

/* A 512-bit tile's weight rows (rows past nr read row r0 again) and its nc
 * activation rows. */
I8_AVX512 static inline void tile_rows512(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as, int nc,
                                          const uint8_t *wr[NR], const char *ac[]) {
    for (int r = 0; r < NR; r++) wr[r] = row_codes(w, r0 + (r < nr ? r : 0));
    for (int c = 0; c < nc; c++) ac[c] = (const char *)a + (size_t)c * as;
}

/* The end of run k of the wide tiles (f32_wide512, fp8_pairs_*512) for
 * nc columns: the partial sums acc[c] (rows 0-1, rows 2-3) and the run's
 * last values [steps_end, end) combined by finish_sums, scaled by the
 * rows' scales k into sum[c] (added when the row has runs, else set with
 * the activation's scale as f32_cols512 does). */
I8_AVX512 static inline __attribute__((always_inline)) void
wide_run_end512(hfq_qext q, const hfq_tensor *w, const uint8_t *const wr[NR], int64_t r0, int nr,
                const char *const ac[], int nc, bool runs, int64_t k, int64_t start, int64_t steps_end, int64_t end,
                const float *a_scales, __m512 (*acc)[2], __m128 sum[]) {
    const __m128 ws = scales4(w, r0, nr, k);
    for (int c = 0; c < nc; c++) {
        __m256 rows[NR] = {_mm512_castps512_ps256(acc[c][0]), _mm512_extractf32x8_ps(acc[c][0], 1),
                           _mm512_castps512_ps256(acc[c][1]), _mm512_extractf32x8_ps(acc[c][1], 1)};
        const __m128 part = finish_sums(q, wr, ac[c], false, start, steps_end, end, rows);
        sum[c] = !runs ? _mm_mul_ps(part, a_scales ? _mm_mul_ps(ws, _mm_set1_ps(a_scales[c])) : ws)
                       : _mm_add_ps(sum[c], _mm_mul_ps(ws, part));
    }
}

/* The wide tiles' results: with runs, the activation's scale last. */
I8_AVX512 static inline void wide_store512(bool runs, const float *a_scales, int nc, int nr, __m128 sum[], float *out,
                                           size_t os) {
    for (int c = 0; runs && a_scales && c < nc; c++) sum[c] = _mm_mul_ps(sum[c], _mm_set1_ps(a_scales[c]));
    store_cols(sum, nc, nr, out, os);
}

/* The nc columns in groups of 8, 4, 2, 1 (COLS512 at most): CALL(m) for
 * each group, c0 its first column, m a constant in each call, so that every
 * group size has its own compiled loops. */
#define COLUMN_GROUPS512(nc, CALL)                                                  \
    for (int c0 = 0, m; c0 < (nc); c0 += m) {                                       \
        m = (nc) - c0 >= 8 ? 8 : (nc) - c0 >= 4 ? 4 : (nc) - c0 >= 2 ? 2 : 1;        \
        if (m == 8) CALL(8);                                                        \
        else if (m == 4) CALL(4);                                                   \
        else if (m == 2) CALL(2);                                                   \
        else CALL(1);                                                               \
    }

/* f32_cols512 for nc columns (more than COLS512): each chunk of a run's
 * weights decoded once (decode_run512) for all of them, the columns'
 * partial sums kept in memory between chunks and taken COLS512 at a time:
 * per column the same float steps in the same order, then finish_sums and
 * f32_cols512's scaling. */
I8_AVX512 static inline __attribute__((always_inline)) void f32_wide512(const hfq_qext q, const bool exact,
                                                                        const hfq_tensor *w, int64_t r0, int nr,
                                                                        const void *a, size_t as,
                                                                        const float *a_scales, int nc, float *out,
                                                                        size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups;
    const bool runs = q == HFQ_QEXT_INT8 || g > 1;
    const int64_t len = runs && g ? n / g : n;
    __m512 dec[I8_DEC_CHUNK / HFQ_LANES * 2], acc[I8_WIDE_COLS][2];
    const uint8_t *wr[NR];
    const char *ac[I8_WIDE_COLS];
    __m128 sum[I8_WIDE_COLS] = {0};
    tile_rows512(w, r0, nr, a, as, nc, wr, ac);
    for (int64_t k = 0; k * len < n; k++) {
        const int64_t start = k * len, end = start + len, steps_end = start + (end - start) / HFQ_LANES * HFQ_LANES;
        for (int c = 0; c < nc; c++) acc[c][0] = acc[c][1] = _mm512_setzero_ps();
        for (int64_t i = start; i < steps_end; i += I8_DEC_CHUNK) {
            const int64_t chunk_end = i + I8_DEC_CHUNK < end ? i + I8_DEC_CHUNK : end;
            decode_run512(q, wr, i, chunk_end, dec);
            const int64_t n_steps = ((chunk_end < steps_end ? chunk_end : steps_end) - i) / HFQ_LANES;
#define DEC_STEPS(m) dec_steps512(exact, dec, n_steps, ac + c0, m, i, acc + c0)
            COLUMN_GROUPS512(nc, DEC_STEPS);
#undef DEC_STEPS
        }
        wide_run_end512(q, w, wr, r0, nr, ac, nc, runs, k, start, steps_end, end, a_scales, acc, sum);
    }
    wide_store512(runs, a_scales, nc, nr, sum, out, os);
}

/* The float-activation tile of one encoding: the columns as 8, 4, 2, 1;
 * exact (W8A8's FP8 codes, a constant where inlined) the fused products. */
I8_AVX512 static inline __attribute__((always_inline)) void f32_tile512(const hfq_qext q, const bool exact,
                                                                        const hfq_tensor *w, int64_t r0, int nr,
                                                                        const void *a, size_t as, const float *a_scales,
                                                                        int nc, float *out, size_t os) {
    if (nc > COLS512) {   /* I8_WIDE_COLS at a time (cpu_i8_tile's count; a caller may pass more) */
        for (int c0 = 0; c0 < nc; c0 += I8_WIDE_COLS)
            f32_wide512(q, exact, w, r0, nr, (const char *)a + (size_t)c0 * as, as, a_scales ? a_scales + c0 : NULL,
                        nc - c0 < I8_WIDE_COLS ? nc - c0 : I8_WIDE_COLS, out + (size_t)c0 * os, os);
        return;
    }
    const uint8_t *wr[NR];
    const char *ac[COLS512];
    tile_rows512(w, r0, nr, a, as, nc, wr, ac);
#define F32_COLS(m) \
    f32_cols512(q, exact, w, wr, r0, nr, ac + c0, m, a_scales ? a_scales + c0 : NULL, out + (size_t)c0 * os, os)
    COLUMN_GROUPS512(nc, F32_COLS);
#undef F32_COLS
}

#define I8_F32_TILE512(name, q)                                                                                     \
    I8_AVX512 static void name(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,                  \
                               const float *a_scales, int nc, float *out, size_t os) {                              \
        if (a_scales && q != HFQ_QEXT_INT8) f32_tile512(q, true, w, r0, nr, a, as, a_scales, nc, out, os);           \
        else f32_tile512(q, false, w, r0, nr, a, as, a_scales, nc, out, os);                                       \
    }
I8_F32_TILE512(int8_f32_tile512, HFQ_QEXT_INT8)
I8_F32_TILE512(e4m3_f32_tile512, HFQ_QEXT_FP8_E4M3)
I8_F32_TILE512(e5m2_f32_tile512, HFQ_QEXT_FP8_E5M2)

/* Float activations and FP8 W8A8 (activation codes widened) here; INT8
 * W8A8 as the AVX2 tile. */
I8_AVX512 static void i8_tile_avx512(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                                     const float *a_scales, int nc, float *out, size_t os) {
    if (w->qext == HFQ_QEXT_INT8 && a_scales) i8_tile_avx2(w, r0, nr, a, as, a_scales, nc, out, os);
    else if (w->qext == HFQ_QEXT_INT8) int8_f32_tile512(w, r0, nr, a, as, NULL, nc, out, os);
    else if (w->qext == HFQ_QEXT_FP8_E5M2) e5m2_f32_tile512(w, r0, nr, a, as, a_scales, nc, out, os);
    else e4m3_f32_tile512(w, r0, nr, a, as, a_scales, nc, out, os);
}

/* ---- AVX512-BF16: FP8 W8A8, two products a lane and instruction ---- */

#define I8_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,f16c,fma")))

/* FP8 W8A8's values as BF16 pairs: per 16 values j.., 32-bit lane k
 * (k < 8) holds value j + k in its high half and j + 8 + k in its low
 * half. vdpbf16ps adds to a float lane its high halves' product, rounded,
 * then its low halves' (the same "+=" of the reference's partial sum k,
 * in the reference's order: value j + k before j + 8 + k); an FP8 value
 * is a BF16 exactly (its float's low 16 bits are zero; the NaN the
 * reference makes keeps its quiet bit), the product of two is exact in
 * float, and no partial sum can be a float subnormal (a nonzero one is a
 * multiple of 2^-32), which vdpbf16ps would flush: so each step rounds as
 * the reference's product then sum. Runs must be whole groups of 16. */
I8_BF16 static inline __m512i bf16_pairs(__m512i first, __m512i second) {
    const __m512i high = _mm512_set1_epi32((int)0xFFFF0000u);
    return _mm512_or_si512(_mm512_and_si512(first, high), _mm512_srli_epi32(second, 16));
}

/* acc[c] + the products of the pair-decoded weights dec (n_groups groups
 * of 16 values from value i, two vectors each: rows 0-1, rows 2-3) with
 * activation rows a[c] in BF16 pairs, C columns in registers. */
I8_BF16 static inline __attribute__((always_inline)) void pair_steps512(const __m512i *dec, int64_t n_groups,
                                                                        const char *const a[], const int C, int64_t i,
                                                                        __m512 (*acc)[2]) {
    __m512 r[COLS512][2];
    for (int c = 0; c < C; c++) r[c][0] = acc[c][0], r[c][1] = acc[c][1];
    for (int64_t s = 0; s < n_groups; s++, i += 2 * HFQ_LANES)
        for (int c = 0; c < C; c++) {
            const __m256i *pairs = (const __m256i *)((const uint16_t *)a[c] + i);
            const __m512bh av = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256(pairs));
            r[c][0] = _mm512_dpbf16_ps(r[c][0], (__m512bh)dec[2 * s], av);
            r[c][1] = _mm512_dpbf16_ps(r[c][1], (__m512bh)dec[2 * s + 1], av);
        }
    for (int c = 0; c < C; c++) acc[c][0] = r[c][0], acc[c][1] = r[c][1];
}

/* f32_wide512 for FP8 W8A8 with activations in BF16 pairs
 * (cpu_i8_fp8_pairs): each chunk of a run decoded once (decode_run512, the
 * same values) and paired, then every column's steps, COLS512 at a time;
 * the same partial sums, so the same finish. */
I8_BF16 static inline __attribute__((always_inline)) void fp8_pairs_wide512(const hfq_qext q, const hfq_tensor *w,
                                                                            int64_t r0, int nr, const void *a,
                                                                            size_t as, const float *a_scales, int nc,
                                                                            float *out, size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups;
    const bool runs = g > 1;
    const int64_t len = runs ? n / g : n;
    __m512 acc[I8_WIDE_COLS][2];
    __m512i pairs[I8_DEC_CHUNK / HFQ_LANES];
    const uint8_t *wr[NR];
    const char *ac[I8_WIDE_COLS];
    __m128 sum[I8_WIDE_COLS] = {0};
    tile_rows512(w, r0, nr, a, as, nc, wr, ac);
    for (int64_t k = 0; k * len < n; k++) {
        const int64_t start = k * len, end = start + len;
        for (int c = 0; c < nc; c++) acc[c][0] = acc[c][1] = _mm512_setzero_ps();
        for (int64_t i = start; i < end; i += I8_DEC_CHUNK) {
            const int64_t chunk_end = i + I8_DEC_CHUNK < end ? i + I8_DEC_CHUNK : end;
            const int64_t n_groups = (chunk_end - i) / (2 * HFQ_LANES);
            for (int64_t j = i; j < chunk_end; j += 4 * HFQ_LANES) {
                __m512 dec[8];
                const int64_t stop = j + 4 * HFQ_LANES <= chunk_end ? j + 4 * HFQ_LANES : chunk_end;
                decode_run512(q, wr, j, stop, dec);
                for (int64_t s = 0; s < (stop - j) / (2 * HFQ_LANES); s++)
                    for (int h = 0; h < 2; h++)
                        pairs[(j - i) / HFQ_LANES + 2 * s + h] =
                            bf16_pairs(_mm512_castps_si512(dec[4 * s + h]), _mm512_castps_si512(dec[4 * s + 2 + h]));
            }
#define PAIR_STEPS(m) pair_steps512(pairs, n_groups, ac + c0, m, i, acc + c0)
            COLUMN_GROUPS512(nc, PAIR_STEPS);
#undef PAIR_STEPS
        }
        wide_run_end512(q, w, wr, r0, nr, ac, nc, runs, k, start, end, end, a_scales, acc, sum);
    }
    wide_store512(runs, a_scales, nc, nr, sum, out, os);
}

/* fp8_pairs_wide512 for C columns (a constant where inlined; decoding's
 * one or two tokens), faster as f32_cols512 does it: each 32 values'
 * weights decoded in registers, no chunk stored, and the activation pairs
 * taken apart into the floats they hold (a word's high half with the low
 * one cleared is value j + k's float; shifted up 16, j + 8 + k's) for one
 * fused multiply-add a product, in the same order. */
I8_BF16 static inline __attribute__((always_inline)) void fp8_pairs_cols512(const hfq_qext q, const hfq_tensor *w,
                                                                            int64_t r0, int nr, const void *a,
                                                                            size_t as, const float *a_scales,
                                                                            const int C, float *out, size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups;
    const bool runs = g > 1;
    const int64_t len = runs ? n / g : n;
    const uint8_t *wr[NR];
    const char *ac[COLS512];
    __m128 sum[COLS512] = {0};
    __m512 acc[COLS512][2];
    tile_rows512(w, r0, nr, a, as, C, wr, ac);
    for (int64_t k = 0; k * len < n; k++) {
        const int64_t start = k * len, end = start + len;
        for (int c = 0; c < C; c++) acc[c][0] = acc[c][1] = _mm512_setzero_ps();
        for (int64_t i = start; i < end; i += 4 * HFQ_LANES) {
            prefetch_next_tile(wr[0], w->row_bytes, i / (4 * HFQ_LANES), 4 * HFQ_LANES);
            const int64_t stop = i + 4 * HFQ_LANES <= end ? i + 4 * HFQ_LANES : end;
            __m512 dec[8];
            decode_run512(q, wr, i, stop, dec);
            for (int64_t s = 0; s < (stop - i) / (2 * HFQ_LANES); s++)
                for (int c = 0; c < C; c++) {
                    const __m512i av = _mm512_broadcast_i64x4(
                        _mm256_loadu_si256((const __m256i *)((const uint16_t *)ac[c] + i + 2 * HFQ_LANES * s)));
                    const __m512 first = _mm512_castsi512_ps(_mm512_and_si512(av, _mm512_set1_epi32((int)0xFFFF0000u)));
                    const __m512 second = _mm512_castsi512_ps(_mm512_slli_epi32(av, 16));
                    for (int h = 0; h < 2; h++) {
                        acc[c][h] = _mm512_fmadd_ps(dec[4 * s + h], first, acc[c][h]);
                        acc[c][h] = _mm512_fmadd_ps(dec[4 * s + 2 + h], second, acc[c][h]);
                    }
                }
        }
        wide_run_end512(q, w, wr, r0, nr, ac, C, runs, k, start, end, end, a_scales, acc, sum);
    }
    wide_store512(runs, a_scales, C, nr, sum, out, os);
}

#define I8_PAIRS_TILE(name, q)                                                                                    \
    I8_BF16 static void name(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,                   \
                             const float *a_scales, int nc, float *out, size_t os) {                               \
        if (nc == 1) fp8_pairs_cols512(q, w, r0, nr, a, as, a_scales, 1, out, os);                                 \
        else if (nc == 2) fp8_pairs_cols512(q, w, r0, nr, a, as, a_scales, 2, out, os);                           \
        else                                                                                                      \
            for (int c0 = 0; c0 < nc; c0 += I8_WIDE_COLS)                                                         \
                fp8_pairs_wide512(q, w, r0, nr, (const char *)a + (size_t)c0 * as, as, a_scales + c0,              \
                                  nc - c0 < I8_WIDE_COLS ? nc - c0 : I8_WIDE_COLS, out + (size_t)c0 * os, os);    \
    }
I8_PAIRS_TILE(e4m3_pairs_tile512, HFQ_QEXT_FP8_E4M3)
I8_PAIRS_TILE(e5m2_pairs_tile512, HFQ_QEXT_FP8_E5M2)

/* FP8 W8A8 with activations in BF16 pairs; float activations (a_scales
 * NULL, which take no pairs) as i8_tile_avx512. */
I8_BF16 static void i8_tile_bf16_pairs(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                                       const float *a_scales, int nc, float *out, size_t os) {
    if (!a_scales) i8_tile_avx512(w, r0, nr, a, as, a_scales, nc, out, os);
    else if (w->qext == HFQ_QEXT_FP8_E5M2) e5m2_pairs_tile512(w, r0, nr, a, as, a_scales, nc, out, os);
    else e4m3_pairs_tile512(w, r0, nr, a, as, a_scales, nc, out, os);
}

/* Whether w's runs (the row, or each scale group) are whole groups of 16 values. */
static bool runs_of_16(const hfq_tensor *w) {
    const int64_t len = w->scale_groups > 1 ? w->ne0 / w->scale_groups : w->ne0;
    return len > 0 && len % (2 * HFQ_LANES) == 0;
}

/* On AVX-512 (the pair tiles' CPUs), 16 codes a step: codes16's floats
 * (the reference's values, NaNs included), then each word's halves as
 * bf16_pairs makes the weights'. The function carries the target itself:
 * as a static helper of this target called from a plain function, GCC 12
 * (-O1 and up) compiled the caller to a bare ret (a 15-line file with a
 * store through _mm256_storeu_si256 does it too). */
I8_BF16 void cpu_i8_fp8_pairs(hfq_fp8_format f, void *row, int64_t n) {
    const hfq_qext q = f == HFQ_FP8_E5M2 ? HFQ_QEXT_FP8_E5M2 : HFQ_QEXT_FP8_E4M3;
    /* from the last group: group j's 32 output bytes cover the codes of
     * groups 2j and 2j + 1, all read by then but j's own, decoded first */
    for (int64_t j = n / 16 - 1; j >= 0; j--) {
        const uint8_t *codes = (const uint8_t *)row + 16 * j;
        const __m512i v = _mm512_castps_si512(codes16(q, codes, codes + 8));
        const __m256i first = _mm512_castsi512_si256(v), second = _mm512_extracti64x4_epi64(v, 1);
        const __m256i pairs = _mm256_or_si256(_mm256_and_si256(first, _mm256_set1_epi32((int)0xFFFF0000u)),
                                              _mm256_srli_epi32(second, 16));
        _mm256_storeu_si256((__m256i *)((uint16_t *)row + 16 * j), pairs);
    }
}

/* ---- AVX512-VNNI: INT8 W8A8 ---- */

#define I8_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,f16c,fma")))
/* Values a 32-bit lane of int_sums512 sums before it could overflow: each
 * 64-value step adds 16 products of (w + 128) and a, at most 16 * 255 * 128,
 * to a lane, and a row's four lanes together stay below 2^31. */
#define INT_CHUNK512 16384

/* int_sums on 512-bit vectors with VNNI: each 64-value step's weights
 * transposed by 16-byte quarters (vector k, quarter r: row r's values
 * 16k..16k+15) and taken as unsigned w + 128, so that dpbusd multiplies
 * them by each column's 16 activation bytes broadcast, signed as they are
 * (-128 included); a column's sum then loses 128 times its activations'
 * sum (one more dpbusd a step). Exact integers, so the same floats. */
I8_VNNI static inline __attribute__((always_inline)) void int_sums512(const uint8_t *const wr[NR], size_t ws,
                                                                      const char *const a[], const int C,
                                                                      int64_t start, int64_t end, __m128 part[]) {
    const __m512i bias = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    const __m512i quarter_lane0 = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const bool one_chunk = end - start <= INT_CHUNK512;
    int64_t isum[COLS512][NR] = {{0}};
    __m128i rows[COLS512];
    for (int c = 0; c < C; c++) rows[c] = _mm_setzero_si128();
    int64_t i = start;
    while (i + 64 <= end) {
        const int64_t stop = end - i > INT_CHUNK512 ? i + INT_CHUNK512 : end;
        __m512i acc[COLS512], asum[COLS512];
        for (int c = 0; c < C; c++) acc[c] = asum[c] = _mm512_setzero_si512();
        for (; i + 64 <= stop; i += 64) {
            prefetch_next_tile(wr[0], ws, i / 64, 64);
            __m512i x[NR], u[4];
            for (int r = 0; r < NR; r++) x[r] = _mm512_loadu_si512(wr[r] + i);
            const __m512i t0 = _mm512_shuffle_i64x2(x[0], x[1], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i t1 = _mm512_shuffle_i64x2(x[0], x[1], _MM_SHUFFLE(3, 2, 3, 2));
            const __m512i t2 = _mm512_shuffle_i64x2(x[2], x[3], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512i t3 = _mm512_shuffle_i64x2(x[2], x[3], _MM_SHUFFLE(3, 2, 3, 2));
            u[0] = _mm512_xor_si512(_mm512_shuffle_i64x2(t0, t2, _MM_SHUFFLE(2, 0, 2, 0)), bias);
            u[1] = _mm512_xor_si512(_mm512_shuffle_i64x2(t0, t2, _MM_SHUFFLE(3, 1, 3, 1)), bias);
            u[2] = _mm512_xor_si512(_mm512_shuffle_i64x2(t1, t3, _MM_SHUFFLE(2, 0, 2, 0)), bias);
            u[3] = _mm512_xor_si512(_mm512_shuffle_i64x2(t1, t3, _MM_SHUFFLE(3, 1, 3, 1)), bias);
            for (int c = 0; c < C; c++) {
                const char *ac = a[c] + i;
                asum[c] = _mm512_dpbusd_epi32(asum[c], ones, _mm512_loadu_si512(ac));
                for (int k = 0; k < 4; k++)
                    acc[c] = _mm512_dpbusd_epi32(acc[c], u[k],
                                                 _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(ac + 16 * k))));
            }
        }
        for (int c = 0; c < C; c++) {
            /* every lane of quarter r: row r's sum; exact, below 2^31 */
            __m512i s = _mm512_add_epi32(acc[c], _mm512_shuffle_epi32(acc[c], _MM_PERM_BADC));
            s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
            const __m128i row_sums = _mm512_castsi512_si128(_mm512_permutexvar_epi32(quarter_lane0, s));
            const int32_t act_sum = _mm512_reduce_add_epi32(asum[c]);
            rows[c] = _mm_sub_epi32(row_sums, _mm_set1_epi32(act_sum * 128));
            if (one_chunk) continue;
            int32_t lane[NR];
            _mm_storeu_si128((__m128i *)lane, rows[c]);
            for (int r = 0; r < NR; r++) isum[c][r] += lane[r];
        }
    }
    int_sums_finish(wr, a, C, one_chunk, i, end, rows, isum, part);
}

/* i8_cols for INT8 W8A8 on int_sums512, C (a constant where inlined) up to
 * COLS512 columns: hfq_dot_int8_int8's scale_g * part_g group by group,
 * then the activation's scale. */
I8_VNNI static inline __attribute__((always_inline)) void int8_cols512(const hfq_tensor *w,
                                                                       const uint8_t *const wr[NR], int64_t r0,
                                                                       int nr, const char *const a[], const int C,
                                                                       const float *a_scales, float *out, size_t os) {
    const int64_t n = w->ne0, g = w->scale_groups, len = g ? n / g : n;
    __m128 part[COLS512], sum[COLS512];
    for (int c = 0; c < C; c++) sum[c] = _mm_setzero_ps();
    for (int64_t k = 0; k * len < n; k++) {
        int_sums512(wr, w->row_bytes, a, C, k * len, (k + 1) * len, part);
        const __m128 ws = scales4(w, r0, nr, k);
        for (int c = 0; c < C; c++) sum[c] = _mm_add_ps(sum[c], _mm_mul_ps(ws, part[c]));
    }
    for (int c = 0; c < C; c++) sum[c] = _mm_mul_ps(sum[c], _mm_set1_ps(a_scales[c]));
    store_cols(sum, C, nr, out, os);
}

/* INT8 weights: W8A8 on int8_cols512, the columns as 8, 4, 2, 1; float
 * activations as i8_tile_avx512. */
I8_VNNI static void i8_tile_avx512vnni(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                                       const float *a_scales, int nc, float *out, size_t os) {
    if (!a_scales) {
        i8_tile_avx512(w, r0, nr, a, as, a_scales, nc, out, os);
        return;
    }
    for (int c1 = 0; c1 < nc; c1 += I8_WIDE_COLS) {   /* cpu_i8_tile's count a call; a caller may pass more */
        const int n1 = nc - c1 < I8_WIDE_COLS ? nc - c1 : I8_WIDE_COLS;
        const uint8_t *wr[NR];
        const char *ac[I8_WIDE_COLS];
        tile_rows512(w, r0, nr, (const char *)a + (size_t)c1 * as, as, n1, wr, ac);
#define INT8_COLS(m) int8_cols512(w, wr, r0, nr, ac + c0, m, a_scales + c1 + c0, out + (size_t)(c1 + c0) * os, os)
        COLUMN_GROUPS512(n1, INT8_COLS);
#undef INT8_COLS
    }
}

cpu_i8_tile_fn cpu_i8_scaled_tile(const hfq_tensor *w, int *cols) {
    const int64_t len = w->scale_groups > 1 ? w->ne0 / w->scale_groups : w->ne0;
    if (!(w->qext == HFQ_QEXT_FP8_E4M3 || w->qext == HFQ_QEXT_FP8_E5M2) || w->ne0 % HFQ_LANES || len % HFQ_LANES ||
        !cpu_float_isa_runs(CPU_FLOAT_AVX2))
        return NULL;
    *cols = I8_WIDE_COLS;
    return i8_scaled_tile_avx2;
}

cpu_i8_tile_fn cpu_i8_tile(cpu_float_isa isa, const hfq_tensor *w, int *cols, cpu_i8_act *codes_as) {
    if (isa == CPU_FLOAT_BEST)
        isa = cpu_float_isa_runs(CPU_FLOAT_AVX512) ? CPU_FLOAT_AVX512
              : cpu_float_isa_runs(CPU_FLOAT_AVX2) ? CPU_FLOAT_AVX2
                                                   : CPU_FLOAT_PORTABLE;
    if (!cpu_float_isa_runs(isa)) return NULL;
    *cols = isa == CPU_FLOAT_AVX512 ? I8_WIDE_COLS : CPU_TILE_COLS;
    *codes_as = CPU_I8_ACT_CODES;
    if (isa != CPU_FLOAT_AVX512) return isa == CPU_FLOAT_AVX2 ? i8_tile_avx2 : i8_tile_ref;
    if (w->qext == HFQ_QEXT_INT8) return cpu_has(CPU_FEAT_AVX512VNNI) ? i8_tile_avx512vnni : i8_tile_avx512;
    if (runs_of_16(w) && cpu_has(CPU_FEAT_AVX512BF16)) {
        *codes_as = CPU_I8_ACT_BF16_PAIRS;
        return i8_tile_bf16_pairs;
    }
    *codes_as = CPU_I8_ACT_F32;
    return i8_tile_avx512;
}
#else

void cpu_i8_fp8_pairs(hfq_fp8_format f, void *row, int64_t n) {
    uint16_t *pairs = row;
    /* from the last group: group j's 32 output bytes cover the codes of
     * groups 2j and 2j + 1, all read by then but j's own, copied first */
    for (int64_t j = n / 16 - 1; j >= 0; j--) {
        uint8_t codes[16];
        memcpy(codes, (const uint8_t *)row + 16 * j, sizeof codes);
        for (int k = 0; k < 8; k++) {
            pairs[16 * j + 2 * k + 1] = (uint16_t)(hfq_f32_bits(hfq_fp8_to_f32(f, codes[k])) >> 16);
            pairs[16 * j + 2 * k] = (uint16_t)(hfq_f32_bits(hfq_fp8_to_f32(f, codes[8 + k])) >> 16);
        }
    }
}

cpu_i8_tile_fn cpu_i8_scaled_tile(const hfq_tensor *w, int *cols) {
    (void)w, (void)cols;
    return NULL;
}

cpu_i8_tile_fn cpu_i8_tile(cpu_float_isa isa, const hfq_tensor *w, int *cols, cpu_i8_act *codes_as) {
    (void)w;
    if (isa != CPU_FLOAT_PORTABLE && isa != CPU_FLOAT_BEST) return NULL;
    *cols = CPU_TILE_COLS;
    *codes_as = CPU_I8_ACT_CODES;
    return i8_tile_ref;
}
#endif
