#include "kernels/cpu/quant_kernels.h"

#include <stdbool.h>

#include "quant/block_math.h"
#include "quant/blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* The horizontal sums of four vectors, in one vector: [sum v0, sum v1, sum v2, sum v3]. */
AVX2 static inline __m128i hsum4_i32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

AVX2 static inline __m128i hsum4_i32x4(__m128i v0, __m128i v1, __m128i v2, __m128i v3) {
    return _mm_hadd_epi32(_mm_hadd_epi32(v0, v1), _mm_hadd_epi32(v2, v3));
}

/* Sums of products of 32 signed bytes w and a, in 8 lanes; exact while no a
 * is -128 (activation quantizers give -127..127). */
AVX2 static inline __m256i mul_sum_i8(__m256i w, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

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
        __m256i wq[NR];
        float wd[NR] = {0};
        for (int r = 0; r < NR; r++) {
            wq[r] = _mm256_setzero_si256();
            if (r >= nr) continue;
            if (q4) {
                /* element j: low nibble of byte j; element j + 16: its high nibble; minus 8 */
                const hfq_block_q4_0 *b = (const hfq_block_q4_0 *)row_at(w, ws, r) + i;
                const __m128i qs = _mm_loadu_si128((const __m128i *)b->qs);
                wq[r] = _mm256_sub_epi8(_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), low4),
                                                         _mm_and_si128(qs, low4)), _mm256_set1_epi8(8));
                wd[r] = hfq_fp16_to_f32(b->d);
            } else {
                const hfq_block_q8_0 *b = (const hfq_block_q8_0 *)row_at(w, ws, r) + i;
                wq[r] = _mm256_loadu_si256((const __m256i *)b->qs);
                wd[r] = hfq_fp16_to_f32(b->d);
            }
        }
        const __m128 wd4 = _mm_loadu_ps(wd);
        for (int c = 0; c < nc; c++) {
            const hfq_block_q8_0 *ab = (const hfq_block_q8_0 *)row_at(a, as, c) + i;
            const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
            const __m128 isum = _mm_cvtepi32_ps(hsum4_i32(mul_sum_i8(wq[0], av), mul_sum_i8(wq[1], av),
                                                          mul_sum_i8(wq[2], av), mul_sum_i8(wq[3], av)));
            /* (float)isum * (dw * da) */
            acc[c] = _mm_add_ps(acc[c], _mm_mul_ps(isum, _mm_mul_ps(wd4, _mm_set1_ps(hfq_fp16_to_f32(ab->d)))));
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

/* Q4_K weights times Q8_K activations: per block (d sum_j sc_j q.a_j) and
 * (dmin sum_j m_j bsum_j), hfq_dot_k_affine_q8_k's steps. */
AVX2 static void tile_q4_k(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc, float *out,
                           size_t os) {
    __m128 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / HFQ_QK_K; i++) {
        const hfq_block_q4_k *wb[NR];
        int16_t sc[NR][8];
        __m128i mins[NR];
        float d[NR] = {0}, dmin[NR] = {0};
        for (int r = 0; r < NR; r++) {
            mins[r] = _mm_setzero_si128();
            if (r >= nr) continue;
            wb[r] = (const hfq_block_q4_k *)row_at(w, ws, r) + i;
            int16_t m[8];
            for (int j = 0; j < 8; j++) {
                uint8_t s8, m8;
                hfq_k_scale_min(j, wb[r]->scales, &s8, &m8);
                sc[r][j] = s8;
                m[j] = m8;
            }
            mins[r] = _mm_loadu_si128((const __m128i *)m);
            d[r] = hfq_fp16_to_f32(wb[r]->d);
            dmin[r] = hfq_fp16_to_f32(wb[r]->dmin);
        }
        const __m128 d4 = _mm_loadu_ps(d), dmin4 = _mm_loadu_ps(dmin);
        for (int c = 0; c < nc; c++) {
            const hfq_block_q8_k *ab = (const hfq_block_q8_k *)row_at(a, as, c) + i;
            /* sub-block j's activation sum: bsums 2j and 2j + 1 */
            const __m128i bsum = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)ab->bsums),
                                                _mm_loadu_si128((const __m128i *)(ab->bsums + 8)));
            __m256i dots[NR];
            __m128i msum[NR];
            for (int r = 0; r < NR; r++) {
                dots[r] = _mm256_setzero_si256();
                msum[r] = _mm_madd_epi16(mins[r], bsum);
                if (r >= nr) continue;
                for (int p = 0; p < HFQ_QK_K / 64; p++) {
                    const __m256i qs = _mm256_loadu_si256((const __m256i *)(wb[r]->qs + 32 * p));
                    const __m256i lo = _mm256_and_si256(qs, low4), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
                    const __m256i alo = _mm256_loadu_si256((const __m256i *)(ab->qs + 64 * p));
                    const __m256i ahi = _mm256_loadu_si256((const __m256i *)(ab->qs + 64 * p + 32));
                    dots[r] = _mm256_add_epi32(dots[r], mul_sum_u8_scaled(lo, alo, _mm256_set1_epi16(sc[r][2 * p])));
                    dots[r] = _mm256_add_epi32(dots[r], mul_sum_u8_scaled(hi, ahi, _mm256_set1_epi16(sc[r][2 * p + 1])));
                }
            }
            const __m128 sum_scaled = _mm_cvtepi32_ps(hsum4_i32(dots[0], dots[1], dots[2], dots[3]));
            const __m128 sum_mins = _mm_cvtepi32_ps(hsum4_i32x4(msum[0], msum[1], msum[2], msum[3]));
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
        const hfq_block_q6_k *wb[NR];
        __m256i scales[NR];   /* 16 x int16 */
        float d[NR] = {0};
        for (int r = 0; r < NR; r++) {
            scales[r] = _mm256_setzero_si256();
            if (r >= nr) continue;
            wb[r] = (const hfq_block_q6_k *)row_at(w, ws, r) + i;
            scales[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb[r]->scales));
            d[r] = hfq_fp16_to_f32(wb[r]->d);
        }
        const __m128 d4 = _mm_loadu_ps(d);
        for (int c = 0; c < nc; c++) {
            const hfq_block_q8_k *ab = (const hfq_block_q8_k *)row_at(a, as, c) + i;
            const __m256i bsums = _mm256_loadu_si256((const __m256i *)ab->bsums);
            __m256i dots[NR];
            for (int r = 0; r < NR; r++) {
                /* minus 32 * sum_j scale_j bsum_j */
                dots[r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                           _mm256_slli_epi32(_mm256_madd_epi16(scales[r], bsums), 5));
                if (r >= nr) continue;
                for (int h = 0; h < 2; h++) {
                    /* hfq_levels_q6_k's layout: four 32-element quarters from 64 ql and 32 qh bytes */
                    const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb[r]->ql + 64 * h));
                    const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb[r]->ql + 64 * h + 32));
                    const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb[r]->qh + 32 * h));
                    const __m256i u[4] = {
                        _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
                        _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                        _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
                    };
                    for (int k = 0; k < 4; k++) {
                        /* 16-element sub-blocks 8h + 2k (low lane) and 8h + 2k + 1 (high lane) */
                        const int j = 8 * h + 2 * k;
                        const __m256i f = _mm256_set_m128i(_mm_set1_epi16(wb[r]->scales[j + 1]),
                                                           _mm_set1_epi16(wb[r]->scales[j]));
                        const __m256i av = _mm256_loadu_si256((const __m256i *)(ab->qs + 128 * h + 32 * k));
                        dots[r] = _mm256_add_epi32(dots[r], mul_sum_u8_scaled(u[k], av, f));
                    }
                }
            }
            const __m128 isum = _mm_cvtepi32_ps(hsum4_i32(dots[0], dots[1], dots[2], dots[3]));
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
    if (!__builtin_cpu_supports("avx2")) return NULL;
    switch (t) {
    case HFQ_QT_Q8_0: return tile_q8_0;
    case HFQ_QT_Q4_0: return tile_q4_0;
    case HFQ_QT_Q4_K: return tile_q4_k;
    case HFQ_QT_Q6_K: return tile_q6_k;
    default: return NULL;
    }
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

cpu_tile_fn cpu_quant_tile(hfq_qtype t) {
    (void)t;
    return NULL;
}
#endif
