#include "kernels/cpu/quant_kernels.h"

#include <stdbool.h>
#include <string.h>

#include "quant/block_math.h"
#include "quant/blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))

/* The horizontal sums of four vectors, in one vector: [sum v0, sum v1, sum v2, sum v3]. */
AVX2 static inline __m128i hsum4_i32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

AVX2 static inline __m128i hsum4_i32x4(__m128i v0, __m128i v1, __m128i v2, __m128i v3) {
    return _mm_hadd_epi32(_mm_hadd_epi32(v0, v1), _mm_hadd_epi32(v2, v3));
}

/* Sums of products of 32 signed bytes w and a, in 8 lanes, given w_abs =
 * |w|; exact while no a is -128 (activation quantizers give -127..127). */
AVX2 static inline __m256i mul_sum_i8(__m256i w, __m256i w_abs, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* fp16 values as floats (F16C: exact, as hfq_fp16_to_f32 for all but NaN payloads). */
AVX2 static inline __m128 fp16x4(const uint16_t h[4]) {
    return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)h));
}

AVX2 static inline __m128 fp16_bcast(uint16_t h) { return _mm_cvtph_ps(_mm_set1_epi16((short)h)); }

/* Sums of products of unsigned bytes u (< 128) and signed bytes a, each
 * 16-bit pair sum times its lane's factor in f, in 8 lanes; exact. */
AVX2 static inline __m256i mul_sum_u8_scaled(__m256i u, __m256i a, __m256i f) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), f);
}

#define NR CPU_TILE_ROWS
#define NC CPU_TILE_COLS

/* The tiles (matmul.h's cpu_tile_fn) compute, for each weight row and
 * activation row, what the reference vec_dot does: exact integer dots per
 * block, then the same float steps in the same order, one (row, column) pair
 * per vector lane. Weight rows r >= nr are lanes of zeros. Compiled without
 * FMA so that no multiply and add are fused into one rounding. */

static inline const void *row_at(const void *base, size_t stride, int r) { return (const char *)base + r * stride; }

static inline void store_rows(__m128 v, int nr, float *out) {
    float lane[4];
    _mm_storeu_ps(lane, v);
    for (int r = 0; r < nr; r++) out[r] = lane[r];
}

/* Q8_0 (q4 false) or Q4_0 (q4 true) weights times Q8_0 activations. */
AVX2 static inline void tile_q8_0_like(bool q4, int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as,
                                       int nc, float *out, size_t os) {
    __m128 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    const __m128i low4 = _mm_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / HFQ_QK; i++) {
        __m256i wq[NR], wabs[NR];
        uint16_t wd[NR] = {0};
        for (int r = 0; r < NR; r++) {
            wq[r] = _mm256_setzero_si256();
            if (r >= nr) continue;
            if (q4) {
                /* element j: low nibble of byte j; element j + 16: its high nibble; minus 8 */
                const hfq_block_q4_0 *b = (const hfq_block_q4_0 *)row_at(w, ws, r) + i;
                const __m128i qs = _mm_loadu_si128((const __m128i *)b->qs);
                wq[r] = _mm256_sub_epi8(_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), low4),
                                                         _mm_and_si128(qs, low4)), _mm256_set1_epi8(8));
                wd[r] = b->d;
            } else {
                const hfq_block_q8_0 *b = (const hfq_block_q8_0 *)row_at(w, ws, r) + i;
                wq[r] = _mm256_loadu_si256((const __m256i *)b->qs);
                wd[r] = b->d;
            }
        }
        for (int r = 0; r < NR; r++) wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
        const __m128 wd4 = fp16x4(wd);
        for (int c = 0; c < nc; c++) {
            const hfq_block_q8_0 *ab = (const hfq_block_q8_0 *)row_at(a, as, c) + i;
            const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
            const __m128 isum = _mm_cvtepi32_ps(hsum4_i32(mul_sum_i8(wq[0], wabs[0], av), mul_sum_i8(wq[1], wabs[1], av),
                                                          mul_sum_i8(wq[2], wabs[2], av), mul_sum_i8(wq[3], wabs[3], av)));
            /* (float)isum * (dw * da) */
            acc[c] = _mm_add_ps(acc[c], _mm_mul_ps(isum, _mm_mul_ps(wd4, fp16_bcast(ab->d))));
        }
    }
    for (int c = 0; c < nc; c++) store_rows(acc[c], nr, out + c * os);
}

AVX2 static void tile_q8_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc, float *out,
                           size_t os) {
    tile_q8_0_like(false, n, w, ws, nr, a, as, nc, out, os);
}

AVX2 static void tile_q4_0(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc, float *out,
                           size_t os) {
    tile_q8_0_like(true, n, w, ws, nr, a, as, nc, out, os);
}

/* Weight row levels as 8 vectors of 32 bytes (256 elements, element order)
 * and, per vector, the madd factors of its 16-bit pair sums. */
typedef struct unpacked_row {
    __m256i q[8];
    __m256i f[8];
} unpacked_row;

/* sum over vectors k of madd(maddubs(q_k, a_k), f_k): exact. */
AVX2 static inline __m256i dot_unpacked(const unpacked_row *u, const int8_t *a) {
    __m256i sum = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++)
        sum = _mm256_add_epi32(sum, mul_sum_u8_scaled(u->q[k], _mm256_loadu_si256((const __m256i *)(a + 32 * k)), u->f[k]));
    return sum;
}

/* hfq_k_scale_min of the eight sub-blocks, four at a time in 32-bit words
 * (bytes 0-3, 4-7, 8-11 of the packed scales), as 8 x int16 each. */
AVX2 static inline void k_scales_mins(const uint8_t packed[HFQ_K_SCALE_BYTES], __m128i *sc, __m128i *m) {
    uint32_t w[3];
    memcpy(w, packed, sizeof w);
    const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
    const uint32_t sc_lo = w[0] & low6, sc_hi = (w[2] & low4) | ((w[0] >> 6) & low2) << 4;
    const uint32_t m_lo = w[1] & low6, m_hi = ((w[2] >> 4) & low4) | ((w[1] >> 6) & low2) << 4;
    *sc = _mm_cvtepu8_epi16(_mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0));
    *m = _mm_cvtepu8_epi16(_mm_setr_epi32((int)m_lo, (int)m_hi, 0, 0));
}

/* Q4_K weights times Q8_K activations: per block (d sum_j sc_j q.a_j) and
 * (dmin sum_j m_j bsum_j), hfq_dot_k_affine_q8_k's steps. */
AVX2 static void tile_q4_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc, float *out,
                           size_t os) {
    __m128 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / HFQ_QK_K; i++) {
        __m256i dots[NC][NR];
        __m128i mins[NR];
        uint16_t d[NR] = {0}, dmin[NR] = {0};
        for (int r = 0; r < NR; r++) {
            mins[r] = _mm_setzero_si128();
            for (int c = 0; c < NC; c++) dots[c][r] = _mm256_setzero_si256();
            if (r >= nr) continue;
            const hfq_block_q4_k *wb = (const hfq_block_q4_k *)row_at(w, ws, r) + i;
            unpacked_row u;
            __m128i sc;
            k_scales_mins(wb->scales, &sc, &mins[r]);
            const __m256i sc2 = _mm256_broadcastsi128_si256(sc);
            for (int j = 0; j < 8; j++) u.f[j] = _mm256_shuffle_epi8(sc2, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
            /* 32-byte run p: sub-block 2p in the low nibbles, 2p + 1 in the high */
            for (int p = 0; p < HFQ_QK_K / 64; p++) {
                const __m256i qs = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * p));
                u.q[2 * p] = _mm256_and_si256(qs, low4);
                u.q[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
            }
            for (int c = 0; c < nc; c++) dots[c][r] = dot_unpacked(&u, ((const hfq_block_q8_k *)row_at(a, as, c) + i)->qs);
            d[r] = wb->d;
            dmin[r] = wb->dmin;
        }
        const __m128 d4 = fp16x4(d), dmin4 = fp16x4(dmin);
        for (int c = 0; c < nc; c++) {
            const hfq_block_q8_k *ab = (const hfq_block_q8_k *)row_at(a, as, c) + i;
            /* sub-block j's activation sum: bsums 2j and 2j + 1 */
            const __m128i bsum = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)ab->bsums),
                                                _mm_loadu_si128((const __m128i *)(ab->bsums + 8)));
            const __m128 sum_scaled = _mm_cvtepi32_ps(hsum4_i32(dots[c][0], dots[c][1], dots[c][2], dots[c][3]));
            const __m128 sum_mins = _mm_cvtepi32_ps(hsum4_i32x4(_mm_madd_epi16(mins[0], bsum), _mm_madd_epi16(mins[1], bsum),
                                                                _mm_madd_epi16(mins[2], bsum), _mm_madd_epi16(mins[3], bsum)));
            /* da * (d * sum_scaled - dmin * sum_mins) */
            const __m128 t = _mm_sub_ps(_mm_mul_ps(d4, sum_scaled), _mm_mul_ps(dmin4, sum_mins));
            acc[c] = _mm_add_ps(acc[c], _mm_mul_ps(_mm_set1_ps(ab->d), t));
        }
    }
    for (int c = 0; c < nc; c++) store_rows(acc[c], nr, out + c * os);
}

/* Q6_K weights times Q8_K activations: levels u = q + 32 in 0..63 as bytes,
 * sum_j scale_j (u.a_j - 32 bsum_j) exact, then (da * d) * sum. */
AVX2 static void tile_q6_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc, float *out,
                           size_t os) {
    __m128 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
    for (int64_t i = 0; i < n / HFQ_QK_K; i++) {
        __m256i dots[NC][NR];
        uint16_t d[NR] = {0};
        for (int r = 0; r < NR; r++) {
            for (int c = 0; c < NC; c++) dots[c][r] = _mm256_setzero_si256();
            if (r >= nr) continue;
            const hfq_block_q6_k *wb = (const hfq_block_q6_k *)row_at(w, ws, r) + i;
            unpacked_row u;
            for (int h = 0; h < 2; h++) {
                /* hfq_levels_q6_k's layout: four 32-element quarters from 64 ql and 32 qh bytes */
                const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
                u.q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
                u.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
                u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45));
                u.q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                                 _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
            }
            /* vector k: 16-element sub-blocks 2k (low lane) and 2k + 1 (high lane),
             * picked from the even scales (low lane) and the odd ones (high lane) */
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)wb->scales);
            const __m256i even_odd = _mm256_cvtepi8_epi16(
                _mm_shuffle_epi8(sc8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
            for (int k = 0; k < 8; k++) u.f[k] = _mm256_shuffle_epi8(even_odd, _mm256_set1_epi16((short)(0x0100 + 0x0202 * k)));
            const __m256i scales = _mm256_cvtepi8_epi16(sc8);
            for (int c = 0; c < nc; c++) {
                const hfq_block_q8_k *ab = (const hfq_block_q8_k *)row_at(a, as, c) + i;
                /* minus 32 * sum_j scale_j bsum_j */
                const __m256i shift = _mm256_slli_epi32(
                    _mm256_madd_epi16(scales, _mm256_loadu_si256((const __m256i *)ab->bsums)), 5);
                dots[c][r] = _mm256_sub_epi32(dot_unpacked(&u, ab->qs), shift);
            }
            d[r] = wb->d;
        }
        const __m128 d4 = fp16x4(d);
        for (int c = 0; c < nc; c++) {
            const hfq_block_q8_k *ab = (const hfq_block_q8_k *)row_at(a, as, c) + i;
            const __m128 isum = _mm_cvtepi32_ps(hsum4_i32(dots[c][0], dots[c][1], dots[c][2], dots[c][3]));
            acc[c] = _mm_add_ps(acc[c], _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(ab->d), d4), isum));
        }
    }
    for (int c = 0; c < nc; c++) store_rows(acc[c], nr, out + c * os);
}

/* One weight row times one activation row: the 1 x 1 tile. */
#define DEFINE_VEC_DOT(name, tile_fn)                                        \
    AVX2 static float name(const void *w, const void *a, int64_t n) {       \
        float out;                                                          \
        tile_fn(n, w, 0, 1, a, 0, 1, &out, 1);                              \
        return out;                                                         \
    }
DEFINE_VEC_DOT(vec_dot_q8_0, tile_q8_0)
DEFINE_VEC_DOT(vec_dot_q4_0, tile_q4_0)
DEFINE_VEC_DOT(vec_dot_q4_k, tile_q4_k)
DEFINE_VEC_DOT(vec_dot_q6_k, tile_q6_k)

cpu_tile_fn cpu_quant_tile(hfq_qtype t) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) return NULL;
    switch (t) {
    case HFQ_QT_Q8_0: return tile_q8_0;
    case HFQ_QT_Q4_0: return tile_q4_0;
    case HFQ_QT_Q4_K: return tile_q4_k;
    case HFQ_QT_Q6_K: return tile_q6_k;
    default: return NULL;
    }
}

hfq_vec_dot_fn cpu_quant_vec_dot(hfq_qtype t) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) return NULL;
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

cpu_tile_fn cpu_quant_tile(hfq_qtype t) {
    (void)t;
    return NULL;
}
#endif
