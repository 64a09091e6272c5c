/* AVX2 FMA tiles of quant/dgemm.h: MR rows x 8 columns of C in 2 MR
 * vector accumulators, one broadcast of a_ik per row and two loads of B's
 * row k per step; vfmadd / vfnmadd round as fma(+-a, b, c) does, so every
 * element is the chain quant/dgemm.c's portable loop computes. */
#include "quant/dgemm.h"

#ifdef HFQ_HAVE_AVX2_KERNELS
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define MR 6

/* Rows i0 .. i0 + M - 1, columns j0 .. j0 + 7. M and neg are constants
 * after inlining: the accumulators stay in registers. */
AVX2 static inline __attribute__((always_inline)) void tile(const hfq_dgemm *g, int64_t i0, int64_t j0, int M,
                                                            bool neg) {
    __m256d c0[MR], c1[MR];
    const double *a[MR];
    double *c = g->c + i0 * g->ldc + j0;
#pragma GCC unroll 6
    for (int r = 0; r < M; r++) {
        c0[r] = _mm256_loadu_pd(c + r * g->ldc);
        c1[r] = _mm256_loadu_pd(c + r * g->ldc + 4);
        a[r] = g->a + (i0 + r) * g->a_row;
    }
    const double *b = g->b + j0;
    const int64_t a_col = g->a_col, ldb = g->ldb;
    for (int64_t k = 0; k < g->k; k++, b += ldb) {
        const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
#pragma GCC unroll 6
        for (int r = 0; r < M; r++) {
            const __m256d av = _mm256_broadcast_sd(a[r] + k * a_col);
            c0[r] = neg ? _mm256_fnmadd_pd(av, b0, c0[r]) : _mm256_fmadd_pd(av, b0, c0[r]);
            c1[r] = neg ? _mm256_fnmadd_pd(av, b1, c1[r]) : _mm256_fmadd_pd(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < M; r++) {
        _mm256_storeu_pd(c + r * g->ldc, c0[r]);
        _mm256_storeu_pd(c + r * g->ldc + 4, c1[r]);
    }
}

AVX2 static void tile_n(const hfq_dgemm *g, int64_t i0, int64_t j0, int m) {
#define CASE(M)                                                                                                       \
    case M:                                                                                                           \
        if (g->neg)                                                                                                   \
            tile(g, i0, j0, M, true);                                                                                 \
        else                                                                                                          \
            tile(g, i0, j0, M, false);                                                                                \
        break;
    switch (m) {
        CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6)
    }
#undef CASE
}

AVX2 void hfq_dgemm_cols_avx2(const hfq_dgemm *g, int64_t i0, int64_t i1, int64_t j0) {
    for (int64_t i = i0; i < i1; i += MR) tile_n(g, i, j0, (int)(i1 - i < MR ? i1 - i : MR));
}
#endif
