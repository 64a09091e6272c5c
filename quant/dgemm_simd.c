/* AVX2 FMA tiles of quant/dgemm.h: MR rows x 8 columns of C in 2 MR
 * vector accumulators, one broadcast of a_ik per row and two loads of B's
 * row k per step; vfmadd / vfnmadd round as fma(+-a, b, c) does, so every
 * element is the chain quant/dgemm.c's portable loop computes. A tile that
 * crosses the band's edge, or C's last column, loads and stores its
 * elements by lane masks: the others are neither read nor written. */
#include "quant/dgemm.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define MR 6

enum { FULL, BAND, TAIL }; /* every element; band masks on C; C's last columns, masks on B too */

/* Lanes of columns j .. j + 3 of row i that are in C and (i >= 0) in the band. */
AVX2 static inline __m256i lanes(const hfq_dgemm *g, int64_t i, int64_t j) {
    int64_t m[4];
    for (int l = 0; l < 4; l++) m[l] = j + l < g->n && (i < 0 || (j + l - i >= g->lo && j + l - i <= g->hi)) ? -1 : 0;
    return _mm256_loadu_si256((const __m256i *)m);
}

/* Rows i0 .. i0 + M - 1, columns j0 .. j0 + 7. M, neg and mode are
 * constants after inlining: the accumulators stay in registers. */
AVX2 static inline __attribute__((always_inline)) void tile(const hfq_dgemm *g, const double *b, int64_t i0,
                                                            int64_t j0, int M, bool neg, int mode) {
    __m256d c0[MR], c1[MR];
    __m256i m0[MR], m1[MR];
    const double *a[MR];
    double *c = g->c + i0 * g->ldc + j0;
#pragma GCC unroll 6
    for (int r = 0; r < M; r++) {
        if (mode == FULL) {
            c0[r] = _mm256_loadu_pd(c + r * g->ldc);
            c1[r] = _mm256_loadu_pd(c + r * g->ldc + 4);
        } else {
            m0[r] = lanes(g, i0 + r, j0);
            m1[r] = lanes(g, i0 + r, j0 + 4);
            c0[r] = _mm256_maskload_pd(c + r * g->ldc, m0[r]);
            c1[r] = _mm256_maskload_pd(c + r * g->ldc + 4, m1[r]);
        }
        a[r] = g->a + (i0 + r) * g->a_row;
    }
    const __m256i bm0 = lanes(g, -1, j0), bm1 = lanes(g, -1, j0 + 4);
    const int64_t a_col = g->a_col, ldb = g->ldb, K = g->k;
    for (int64_t k = 0; k < K; k++, b += ldb) {
        const __m256d b0 = mode == TAIL ? _mm256_maskload_pd(b, bm0) : _mm256_loadu_pd(b);
        const __m256d b1 = mode == TAIL ? _mm256_maskload_pd(b + 4, bm1) : _mm256_loadu_pd(b + 4);
#pragma GCC unroll 6
        for (int r = 0; r < M; r++) {
            const __m256d av = _mm256_broadcast_sd(a[r] + k * a_col);
            c0[r] = neg ? _mm256_fnmadd_pd(av, b0, c0[r]) : _mm256_fmadd_pd(av, b0, c0[r]);
            c1[r] = neg ? _mm256_fnmadd_pd(av, b1, c1[r]) : _mm256_fmadd_pd(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < M; r++) {
        if (mode == FULL) {
            _mm256_storeu_pd(c + r * g->ldc, c0[r]);
            _mm256_storeu_pd(c + r * g->ldc + 4, c1[r]);
        } else {
            _mm256_maskstore_pd(c + r * g->ldc, m0[r], c0[r]);
            _mm256_maskstore_pd(c + r * g->ldc + 4, m1[r], c1[r]);
        }
    }
}

#define NEG_CASES(M, mode)                                                                                            \
    if (g->neg)                                                                                                       \
        tile(g, b, i0, j0, M, true, mode);                                                                            \
    else                                                                                                              \
        tile(g, b, i0, j0, M, false, mode);

#define MODE_CASES(M)                                                                                                 \
    case M:                                                                                                           \
        if (mode == FULL) {                                                                                           \
            NEG_CASES(M, FULL)                                                                                        \
        } else if (mode == BAND) {                                                                                    \
            NEG_CASES(M, BAND)                                                                                        \
        } else {                                                                                                      \
            NEG_CASES(M, TAIL)                                                                                        \
        }                                                                                                             \
        break;

AVX2 static void tile_n(const hfq_dgemm *g, const double *b, int64_t i0, int64_t j0, int m, int mode) {
    switch (m) {
        MODE_CASES(1) MODE_CASES(2) MODE_CASES(3) MODE_CASES(4) MODE_CASES(5) MODE_CASES(6)
    }
}

AVX2 void hfq_dgemm_cols_avx2(const hfq_dgemm *g, const double *b, int64_t i0, int64_t i1, int64_t j0) {
    const bool tail = j0 + HFQ_DGEMM_NR > g->n;
    for (int64_t i = i0; i < i1; i += MR) {
        const int m = (int)(i1 - i < MR ? i1 - i : MR);
        const bool inside = j0 - (i + m - 1) >= g->lo && j0 + HFQ_DGEMM_NR - 1 - i <= g->hi;
        tile_n(g, b, i, j0, m, tail ? TAIL : inside ? FULL : BAND);
    }
}
#endif
