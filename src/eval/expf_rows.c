#include "src/eval/expf_rows.h"

#include <math.h>
#include <string.h>

#include "quant/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_EXPF_AVX2 1
#include <immintrin.h>

#define AVX2_FMA __attribute__((target("avx2,fma")))

/* glibc's __exp2f_data (sysdeps/ieee754/flt-32/e_exp2f_data.c), as its
 * expf uses it: 2^(i/32) with i << 47 taken off the bits, so that adding
 * k << 47 gives 2^(k/32); N / ln 2 and the shift for N = 32; the
 * polynomial's coefficients scaled to r in units of 1/32. */
static const uint64_t exp2f_table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
#define INV_LN2_N 0x1.71547652b82fep+5
#define SHIFT 0x1.8p+52
#define C0 0x1.c6af84b912394p-20
#define C1 0x1.ebfce50fac4f3p-13
#define C2 0x1.62e42ff0c52d6p-6

/* Four lanes of __expf_fma's main path (|x| < 88), its operations in its
 * order: kd = fma(N/ln2, x, shift), ki its bits; r = fma(N/ln2, x, -(kd -
 * shift)); s = 2^(k/32) from the table and ki << 47; y = fma(fma(r, C0,
 * C1), r r, fma(r, C2, 1)) s, rounded to float. */
AVX2_FMA static inline __m128 expf4(__m128 x) {
    const __m256d xd = _mm256_cvtps_pd(x), inv = _mm256_set1_pd(INV_LN2_N), shift = _mm256_set1_pd(SHIFT);
    const __m256d kd_shifted = _mm256_fmadd_pd(inv, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd_shifted);
    const __m256d r = _mm256_fmsub_pd(inv, xd, _mm256_sub_pd(kd_shifted, shift));
    __m256i t = _mm256_i64gather_epi64((const long long *)exp2f_table, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(C0), _mm256_set1_pd(C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    const __m256d y = _mm256_fmadd_pd(z, r2, _mm256_fmadd_pd(r, _mm256_set1_pd(C2), _mm256_set1_pd(1.0)));
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}

/* hfq_expf_rows's whole groups of 8 (returns how many values it did):
 * lanes whose top 12 bits of |x| reach 88's (and NaN, infinities) take
 * expf, as glibc's special cases. */
AVX2_FMA static int64_t expf_rows_avx2(const float *x, float shift, int64_t n, float *y) {
    const __m256 s = _mm256_set1_ps(shift);
    const __m256i top_mask = _mm256_set1_epi32(0x7ff), top_88 = _mm256_set1_epi32(0x42a - 1);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), s);
        const __m256 e = _mm256_set_m128(expf4(_mm256_extractf128_ps(v, 1)), expf4(_mm256_castps256_ps128(v)));
        _mm256_storeu_ps(y + i, e);
        const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 20), top_mask);
        const int special = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(top, top_88)));
        if (special) {
            float lane[8];
            _mm256_storeu_ps(lane, v);
            for (int l = 0; l < 8; l++)
                if (special >> l & 1) y[i + l] = expf(lane[l]);
        }
    }
    return i;
}

/* Whether expf_rows_avx2 gives this library's expf on probes: for every
 * table entry, points k / 32 ln 2 of k over the range and their
 * neighbouring floats; an even spread over [-104, 89]; the edges of the
 * special cases; pseudo-random floats of every size. */
static bool probes_agree(void) {
    enum { N = 8192 };
    static const float edges[] = {88.0f, -88.0f, 88.72f, -103.0f, -103.3f, -103.9f, -104.0f, 0.0f, -0.0f,
                                  1e-30f, -1e-30f, INFINITY, -INFINITY, NAN};
    float x[N], got[N];
    int n = 0;
    for (int k = -150 * 32; k <= 128 * 32; k += 7) {   /* 1269 points, every table entry */
        const float p = (float)k * 0.0216608493924982909f;   /* ln 2 / 32 */
        x[n++] = p, x[n++] = nextafterf(p, -INFINITY), x[n++] = nextafterf(p, INFINITY);
    }
    for (int i = 0; i < 2048; i++) x[n++] = -104.0f + (float)i * (193.0f / 2048);
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) x[n++] = edges[i];
    uint32_t state = 12345;
    while (n < N) {
        state = state * 1664525u + 1013904223u;
        uint32_t bits = state;
        memcpy(&x[n++], &bits, sizeof bits);
    }
    expf_rows_avx2(x, 0.0f, N, got);
    for (int i = 0; i < N; i++) {
        const float want = expf(x[i]);
        if (memcmp(&want, &got[i], sizeof want) != 0 && !(isnan(want) && isnan(got[i]))) return false;
    }
    return true;
}
#endif

bool hfq_expf_rows_vector(void) {
#ifdef HAVE_EXPF_AVX2
    static _Atomic int state;   /* 0 not yet known, 1 the vector code, 2 expf */
    int s = state;
    if (s == 0) {
        s = cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA) && probes_agree() ? 1 : 2;
        state = s;
    }
    return s == 1;
#else
    return false;
#endif
}

void hfq_expf_rows(const float *x, float shift, int64_t n, float *y) {
    int64_t i = 0;
#ifdef HAVE_EXPF_AVX2
    if (hfq_expf_rows_vector()) i = expf_rows_avx2(x, shift, n, y);
#endif
    for (; i < n; i++) y[i] = expf(x[i] - shift);
}
