#include "kernels/cpu/vec_kernels.h"

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vexp.h"

/* ---- portable C ---- */

static float scores_c(const float *restrict q, const float *restrict kt, int64_t n_ctx, int64_t hd, int64_t n_keys,
                      float *restrict s) {
    for (int64_t p = 0; p < n_keys; p++) s[p] = 0.0f;
    for (int64_t d = 0; d < hd; d++)
        for (int64_t p = 0; p < n_keys; p++) s[p] += q[d] * kt[d * n_ctx + p];
    float max = s[0];
    for (int64_t p = 1; p < n_keys; p++) max = s[p] > max ? s[p] : max;
    return max;
}

static float softmax_c(float *s, int64_t n, float max, float scale) {
    const float max_scaled = max * scale;
    float sum = 0.0f;
    for (int64_t p = 0; p < n; p++) {
        s[p] = cpu_expf(s[p] * scale - max_scaled);
        sum += s[p];
    }
    return sum;
}

static void swiglu_c(float *restrict gate, const float *restrict up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + cpu_expf(-gate[i])) * up[i];
}

static int64_t dot_i8_c(const int8_t *a, const int8_t *b, int64_t n) {
    int64_t sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (int32_t)a[i] * b[i];
    return sum;
}

static void mix_c(const float *restrict s, const float *restrict v, int64_t v_stride, int64_t n_keys, int64_t hd,
                  float *restrict out) {
    for (int64_t d = 0; d < hd; d++) out[d] = 0.0f;
    for (int64_t p = 0; p < n_keys; p++)
        for (int64_t d = 0; d < hd; d++) out[d] += s[p] * v[p * v_stride + d];
}

/* ---- AVX2 + FMA ---- */
#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* Lanes [0, n) set (all for n >= 8). */
AVX2 static inline __m256i lanes(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* cpu_expf on 8 lanes: the same steps, fused where FMA allows. */
AVX2 static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* The largest of 8 lanes. */
AVX2 static inline float hmax(__m256 v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* Lanes past n add 0 to the sum. */
AVX2 static float softmax_avx2(float *restrict s, int64_t n, float max, float scale) {
    const __m256 vscale = _mm256_set1_ps(scale), max_scaled = _mm256_set1_ps(max * scale);
    __m256 sum = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 8 <= n; p += 8) {
        const __m256 e = exp8(_mm256_fmsub_ps(_mm256_loadu_ps(s + p), vscale, max_scaled));
        _mm256_storeu_ps(s + p, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (p < n) {
        const __m256i m = lanes(n - p);
        __m256 e = exp8(_mm256_fmsub_ps(_mm256_maskload_ps(s + p, m), vscale, max_scaled));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        _mm256_maskstore_ps(s + p, m, e);
        sum = _mm256_add_ps(sum, e);
    }
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

AVX2 static void swiglu_avx2(float *restrict gate, const float *restrict up, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        const __m256i m = lanes((int64_t)(n - i));
        const __m256 g = _mm256_maskload_ps(gate + i, m);
        const __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)));
        _mm256_maskstore_ps(gate + i, m, _mm256_mul_ps(_mm256_div_ps(g, d), _mm256_maskload_ps(up + i, m)));
    }
}

/* int8 products widened to 16 bits, pairs summed into 32-bit lanes; a lane
 * gains at most 2 * 2 * 128 * 128 = 65536 per step, so it is emptied into 64
 * bits every 2^14 steps. */
AVX2 static int64_t dot_i8_avx2(const int8_t *a, const int8_t *b, int64_t n) {
    int64_t total = 0, i = 0;
    while (i + 32 <= n) {
        const int64_t stop = n - i > ((int64_t)32 << 14) ? i + ((int64_t)32 << 14) : n;
        __m256i acc = _mm256_setzero_si256();
        for (; i + 32 <= stop; i += 32) {
            const __m256i va = _mm256_loadu_si256((const __m256i *)(a + i));
            const __m256i vb = _mm256_loadu_si256((const __m256i *)(b + i));
            const __m256i lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(va)),
                                                 _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vb)));
            const __m256i hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(va, 1)),
                                                 _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vb, 1)));
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(lo, hi));
        }
        int32_t lanes32[8];
        _mm256_storeu_si256((__m256i *)lanes32, acc);
        for (int k = 0; k < 8; k++) total += lanes32[k];
    }
    return total + dot_i8_c(a + i, b + i, n - i);
}

/* Each score is one chain of fused multiply-adds over d, whichever block it
 * falls in; four blocks at a time hide the FMA latency. The largest score
 * is kept on the way (lanes past n_keys: -inf). */
AVX2 static float scores_avx2(const float *restrict q, const float *restrict kt, int64_t n_ctx, int64_t hd,
                              int64_t n_keys, float *restrict s) {
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t p = 0;
    for (; p + 32 <= n_keys; p += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t d = 0; d < hd; d++) {
            const __m256 qd = _mm256_broadcast_ss(q + d);
            const float *k = kt + d * n_ctx + p;
            a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k), a0);
            a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + 8), a1);
            a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + 16), a2);
            a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + 24), a3);
        }
        _mm256_storeu_ps(s + p, a0);
        _mm256_storeu_ps(s + p + 8, a1);
        _mm256_storeu_ps(s + p + 16, a2);
        _mm256_storeu_ps(s + p + 24, a3);
        mx = _mm256_max_ps(_mm256_max_ps(mx, a0), _mm256_max_ps(a1, _mm256_max_ps(a2, a3)));
    }
    for (; p < n_keys; p += 8) {
        const __m256i m = lanes(n_keys - p);
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < hd; d++)
            a = _mm256_fmadd_ps(_mm256_broadcast_ss(q + d), _mm256_maskload_ps(kt + d * n_ctx + p, m), a);
        _mm256_maskstore_ps(s + p, m, a);
        mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), a, _mm256_castsi256_ps(m)));
    }
    return hmax(mx);
}

/* 8 values at p, or the first n_left when fewer (the rest 0). */
AVX2 static inline __attribute__((always_inline)) __m256 load_part(const float *p, bool full, __m256i m) {
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

/* Values d0.. of out (all 8 when full, else those m selects): four partial
 * sums over positions p % 4, added pairwise at the end. */
AVX2 static inline __attribute__((always_inline)) void mix_block(const float *restrict s, const float *restrict vd,
                                                                 int64_t v_stride, int64_t n_keys, bool full,
                                                                 __m256i m, float *restrict out) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t p = 0;
    for (; p + 4 <= n_keys; p += 4) {
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + p), load_part(vd + p * v_stride, full, m), a0);
        a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + p + 1), load_part(vd + (p + 1) * v_stride, full, m), a1);
        a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + p + 2), load_part(vd + (p + 2) * v_stride, full, m), a2);
        a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + p + 3), load_part(vd + (p + 3) * v_stride, full, m), a3);
    }
    for (; p < n_keys; p++) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(s + p), load_part(vd + p * v_stride, full, m), a0);
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    if (full)
        _mm256_storeu_ps(out, sum);
    else
        _mm256_maskstore_ps(out, m, sum);
}

AVX2 static void mix_avx2(const float *restrict s, const float *restrict v, int64_t v_stride, int64_t n_keys,
                          int64_t hd, float *restrict out) {
    for (int64_t d0 = 0; d0 < hd; d0 += 8) {
        if (hd - d0 >= 8)
            mix_block(s, v + d0, v_stride, n_keys, true, _mm256_setzero_si256(), out + d0);
        else
            mix_block(s, v + d0, v_stride, n_keys, false, lanes(hd - d0), out + d0);
    }
}

static bool have_avx2(void) { return cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA); }
#else
static bool have_avx2(void) { return false; }
#define scores_avx2 scores_c
#define mix_avx2 mix_c
#define softmax_avx2 softmax_c
#define swiglu_avx2 swiglu_c
#define dot_i8_avx2 dot_i8_c
#endif

cpu_vec_kernels cpu_vec_kernels_get(bool simd) {
    if (simd && have_avx2()) return (cpu_vec_kernels){scores_avx2, softmax_avx2, mix_avx2, swiglu_avx2, dot_i8_avx2};
    return (cpu_vec_kernels){scores_c, softmax_c, mix_c, swiglu_c, dot_i8_c};
}
