#include "kernels/cpu/vec_kernels.h"

#include "quant/cpu_features.h"
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

/* gate = gelu_tanh(gate) * up, as torch's gelu(approximate='tanh'), in the
 * form every set computes (geglu_avx2): x / (1 + e^(-2u)), u = sqrt(2/pi)
 * (x + 0.044715 x^3), 0.5 (1 + tanh u) being 1 / (1 + e^(-2u)). */
static void geglu_c(float *restrict gate, const float *restrict up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = gate[i];
        const float z = -1.5957691216057308f * (x + 0.044715f * (x * x * x));   /* -2 sqrt(2/pi) */
        gate[i] = x / (1.0f + cpu_expf(z)) * up[i];
    }
}

static void mix_c(const float *restrict s, const float *restrict vt, int64_t n_ctx, int64_t n_keys, int64_t hd,
                  float *restrict out) {
    for (int64_t d = 0; d < hd; d++) {
        float acc = 0.0f;
        for (int64_t p = 0; p < n_keys; p++) acc += s[p] * vt[d * n_ctx + p];
        out[d] = acc;
    }
}

/* ---- AVX2 + FMA ---- */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/avx512_sums.h"

#define AVX2 __attribute__((target("avx2,fma")))

/* Lanes [0, n) set (all for n >= 8). */
AVX2 static inline __m256i lanes(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The sum of 8 lanes: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)). */
AVX2 static inline float hsum8(__m256 v) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

/* cpu_expf's steps on a vector of type V (intrinsics prefix P), fused
 * where FMA allows; FLOOR rounds down, POW2(y, n) is y * 2^n. */
#define DEFINE_EXP(name, attr, V, P, FLOOR, POW2)                                                   \
    attr static inline V name(V x) {                                                                \
        x = P##_min_ps(P##_max_ps(x, P##_set1_ps(-87.3f)), P##_set1_ps(88.3f));                      \
        const V n = FLOOR(P##_fmadd_ps(x, P##_set1_ps(1.44269504088896341f), P##_set1_ps(0.5f)));    \
        V r = P##_fnmadd_ps(n, P##_set1_ps(0.693359375f), x);                                         \
        r = P##_fnmadd_ps(n, P##_set1_ps(-2.12194440e-4f), r);                                        \
        V p = P##_set1_ps(1.9875691500e-4f);                                                          \
        p = P##_fmadd_ps(p, r, P##_set1_ps(1.3981999507e-3f));                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(8.3334519073e-3f));                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(4.1665795894e-2f));                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(1.6666665459e-1f));                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(5.0000001201e-1f));                                        \
        return POW2(P##_add_ps(P##_fmadd_ps(P##_mul_ps(p, r), r, r), P##_set1_ps(1.0f)), n);          \
    }

/* y * 2^n: the float 2^n built from its exponent bits. */
AVX2 static inline __m256 pow2_mul8(__m256 y, __m256 n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

DEFINE_EXP(exp8, AVX2, __m256, _mm256, _mm256_floor_ps, pow2_mul8)

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
    return hsum8(sum);
}

AVX2 static void swiglu_avx2(float *restrict gate, const float *restrict up, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        const __m256i m = lanes((int64_t)(n - i));
        const __m256 g = _mm256_maskload_ps(gate + i, m);
        const __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)));
        _mm256_maskstore_ps(gate + i, m, _mm256_mul_ps(_mm256_div_ps(g, d), _mm256_maskload_ps(up + i, m)));
    }
}

/* geglu_c's form with exp8: one exp per 8 values instead of a scalar tanhf,
 * and no cancellation of 1 + tanh u for negative x. */
AVX2 static void geglu_avx2(float *restrict gate, const float *restrict up, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        const __m256i m = lanes((int64_t)(n - i));
        const __m256 x = _mm256_maskload_ps(gate + i, m);
        const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        const __m256 z = _mm256_mul_ps(_mm256_set1_ps(-1.5957691216057308f),   /* -2 sqrt(2/pi) */
                                       _mm256_add_ps(x, _mm256_mul_ps(_mm256_set1_ps(0.044715f), x3)));
        const __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(z));
        _mm256_maskstore_ps(gate + i, m, _mm256_mul_ps(_mm256_div_ps(x, d), _mm256_maskload_ps(up + i, m)));
    }
}

/* s[p] = q . K[p], one chain of fused multiply-adds over d per score
 * whichever block it falls in, W lanes a vector: 64 positions at a time
 * (64 / W chains hide the FMA latency), then W at a time under a mask of
 * type M; the largest score is kept on the way. V, P: vector type and
 * intrinsics prefix; MASK(n): lanes [0, n); LOAD_M(m, p), STORE_M(p, m, v),
 * MAX_M(mx, m, v): masked load, store and max; HMAX: the largest lane. */
#define DEFINE_SCORES(name, attr, V, P, W, M, MASK, LOAD_M, STORE_M, MAX_M, HMAX)                         \
    attr static float name(const float *restrict q, const float *restrict kt, int64_t n_ctx, int64_t hd,  \
                           int64_t n_keys, float *restrict s) {                                            \
        V mx = P##_set1_ps(-INFINITY);                                                                      \
        int64_t p = 0;                                                                                      \
        for (; p + 64 <= n_keys; p += 64) {                                                                 \
            V a[64 / W];                                                                                    \
            for (int j = 0; j < 64 / W; j++) a[j] = P##_setzero_ps();                                       \
            for (int64_t d = 0; d < hd; d++) {                                                              \
                const V qd = P##_set1_ps(q[d]);                                                             \
                const float *k = kt + d * n_ctx + p;                                                        \
                for (int j = 0; j < 64 / W; j++) a[j] = P##_fmadd_ps(qd, P##_loadu_ps(k + W * j), a[j]);    \
            }                                                                                               \
            for (int j = 0; j < 64 / W; j++) {                                                              \
                P##_storeu_ps(s + p + W * j, a[j]);                                                         \
                mx = P##_max_ps(mx, a[j]);                                                                  \
            }                                                                                               \
        }                                                                                                   \
        for (; p < n_keys; p += W) {                                                                        \
            const M m = MASK(n_keys - p);                                                                   \
            V a = P##_setzero_ps();                                                                         \
            for (int64_t d = 0; d < hd; d++)                                                                \
                a = P##_fmadd_ps(P##_set1_ps(q[d]), LOAD_M(m, kt + d * n_ctx + p), a);                     \
            STORE_M(s + p, m, a);                                                                           \
            mx = MAX_M(mx, m, a);                                                                           \
        }                                                                                                   \
        return HMAX(mx);                                                                                    \
    }

AVX2 static inline __m256 load_m8(__m256i m, const float *p) { return _mm256_maskload_ps(p, m); }

/* The lanes of v that m selects, -inf elsewhere, into mx. */
AVX2 static inline __m256 max_m8(__m256 mx, __m256i m, __m256 v) {
    return _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(m)));
}

DEFINE_SCORES(scores_avx2, AVX2, __m256, _mm256, 8, __m256i, lanes, load_m8, _mm256_maskstore_ps, max_m8, hmax)

/* Per value d, 8 lanes of multiply-adds over the positions (masked past
 * n_keys), then their sum. */
AVX2 static void mix_avx2(const float *restrict s, const float *restrict vt, int64_t n_ctx, int64_t n_keys,
                          int64_t hd, float *restrict out) {
    for (int64_t d = 0; d < hd; d++) {
        const float *v = vt + d * n_ctx;
        __m256 acc = _mm256_setzero_ps();
        int64_t p = 0;
        for (; p + 8 <= n_keys; p += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(s + p), _mm256_loadu_ps(v + p), acc);
        if (p < n_keys) {
            const __m256i m = lanes(n_keys - p);
            acc = _mm256_fmadd_ps(_mm256_maskload_ps(s + p, m), _mm256_maskload_ps(v + p, m), acc);
        }
        out[d] = hsum8(acc);
    }
}

/* ---- AVX-512 ---- */

#define AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

/* exp8's steps on 16 lanes; 2^n applied by scalef (exact, as exp8's multiply
 * by the float 2^n: the same value). */
#define FLOOR16(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
DEFINE_EXP(exp16, AVX512, __m512, _mm512, FLOOR16, _mm512_scalef_ps)

/* Lanes [0, n) of 16 (all for n >= 16). */
AVX512 static inline __mmask16 mask16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

/* Sums in 16 lanes (masked lanes past n add nothing), then halved down to one. */
AVX512 static float softmax_avx512(float *restrict s, int64_t n, float max, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale), max_scaled = _mm512_set1_ps(max * scale);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t p = 0; p < n; p += 16) {
        const __mmask16 m = mask16(n - p);
        const __m512 e = exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, s + p), vscale, max_scaled));
        _mm512_mask_storeu_ps(s + p, m, e);
        sum = _mm512_mask_add_ps(sum, m, sum, e);
    }
    return hsum8(_mm256_add_ps(_mm512_castps512_ps256(sum), _mm512_extractf32x8_ps(sum, 1)));
}

AVX512 static inline __m512 max_m16(__m512 mx, __mmask16 m, __m512 v) { return _mm512_mask_max_ps(mx, m, mx, v); }

/* scores_avx2's chains, 16 lanes at a time (the same scores). */
DEFINE_SCORES(scores_avx512, AVX512, __m512, _mm512, 16, __mmask16, mask16, _mm512_maskz_loadu_ps, _mm512_mask_storeu_ps,
              max_m16, _mm512_reduce_max_ps)

/* Per value d, 16 lanes of multiply-adds over the positions (masked past
 * n_keys), eight values at a time; the 8 x 16 lanes are then summed in one
 * tree: halves, quarters, pairs, neighbours. */
AVX512 static void mix_avx512(const float *restrict s, const float *restrict vt, int64_t n_ctx, int64_t n_keys,
                              int64_t hd, float *restrict out) {
    for (int64_t d0 = 0; d0 < hd; d0 += 8) {
        const int64_t nd = hd - d0 < 8 ? hd - d0 : 8;
        const float *v[8];   /* rows past hd repeat the last one; their sums are dropped */
        for (int j = 0; j < 8; j++) v[j] = vt + (d0 + (j < nd ? j : nd - 1)) * n_ctx;
        __m512 acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
        for (int64_t p = 0; p < n_keys; p += 16) {
            const __mmask16 m = mask16(n_keys - p);
            const __m512 sv = _mm512_maskz_loadu_ps(m, s + p);
            for (int j = 0; j < 8; j++) acc[j] = _mm512_fmadd_ps(sv, _mm512_maskz_loadu_ps(m, v[j] + p), acc[j]);
        }
        __m512 half[4];   /* [d 2i: low + high 256 bits | d 2i + 1: the same] */
        for (int i = 0; i < 4; i++) half[i] = ADD_SEL_F32X4(acc[2 * i], acc[2 * i + 1], SEL_LO_HI);
        /* quarters: d 0..3 (q03), d 4..7 (q47), 4 lanes each */
        const __m512 q03 = ADD_SEL_F32X4(half[0], half[1], SEL_E_O), q47 = ADD_SEL_F32X4(half[2], half[3], SEL_E_O);
        /* quarter k: [d k: 2 lanes, d k + 4: 2 lanes] */
        const __m512 pairs = ADD_SEL_PS(q03, q47, SEL_LO_HI);
        /* quarter k, lane 0: d k; lane 2: d k + 4 */
        const __m512 sums = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(2, 3, 0, 1)));
        const __m256 out8 = _mm512_castps512_ps256(
            _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0), sums));
        _mm256_mask_storeu_ps(out + d0, (__mmask8)((1u << nd) - 1), out8);
    }
}

static bool runs(cpu_vec_isa isa) {
    const bool avx2 = cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA);
    switch (isa) {
    case CPU_VEC_PORTABLE: return true;
    case CPU_VEC_AVX2: return avx2;
    case CPU_VEC_AVX512: return avx2 && cpu_has(CPU_FEAT_AVX512F | CPU_FEAT_AVX512DQ | CPU_FEAT_AVX512VL);
    default: return false;
    }
}
#else
static bool runs(cpu_vec_isa isa) { return isa == CPU_VEC_PORTABLE; }
#define scores_avx2 scores_c
#define mix_avx2 mix_c
#define softmax_avx2 softmax_c
#define swiglu_avx2 swiglu_c
#define geglu_avx2 geglu_c
#define scores_avx512 scores_c
#define mix_avx512 mix_c
#define softmax_avx512 softmax_c
#endif

bool cpu_vec_kernels_isa(cpu_vec_isa isa, cpu_vec_kernels *k) {
    if (!runs(isa)) return false;
    switch (isa) {
    case CPU_VEC_AVX512:
        *k = (cpu_vec_kernels){scores_avx512, softmax_avx512, mix_avx512, swiglu_avx2, geglu_avx2};
        break;
    case CPU_VEC_AVX2: *k = (cpu_vec_kernels){scores_avx2, softmax_avx2, mix_avx2, swiglu_avx2, geglu_avx2}; break;
    default: *k = (cpu_vec_kernels){scores_c, softmax_c, mix_c, swiglu_c, geglu_c}; break;
    }
    return true;
}

cpu_vec_kernels cpu_vec_kernels_get(bool simd) {
    cpu_vec_kernels k;
    if (!(simd && (cpu_vec_kernels_isa(CPU_VEC_AVX512, &k) || cpu_vec_kernels_isa(CPU_VEC_AVX2, &k))))
        cpu_vec_kernels_isa(CPU_VEC_PORTABLE, &k);
    return k;
}
