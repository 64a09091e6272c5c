/* dgemm.h - C += A B or C -= A B in double for GPTQ's Hessians and its
 * factorization of them (calib/hessian.c, quant/gptq.c), where every
 * element of C is one chain of fused multiply-adds over k in order:
 *
 *     c_ij = fma(+-a_ik, b_kj, c_ij)   for k = 0 .. K-1.
 *
 * The chain is the result whatever the tiling, the instruction set (AVX2
 * FMA: 6 x 8 register tiles, 4 lanes of double; portable: C's fma(), which
 * rounds the same) and the thread: a caller that gives each element of C
 * to one thread gets the same bits for any thread count and on every
 * machine. With float inputs (exact double products) the chain is the plain
 * double sum c + a b in k order, bit for bit.
 *
 * A element (i, k) at a[i * a_row + k * a_col] (broadcast: any strides),
 * B element (k, j) at b[k * ldb + j] (rows of B contiguous) or, packed by
 * panels of HFQ_DGEMM_NR columns (b_panel > 0), at
 * b[(j / NR) * b_panel + k * ldb + j % NR] (one panel's rows in a few pages
 * where B's own rows are far apart), C element (i, j) at c[i * ldc + j]. Only the elements with lo <= j - i <= hi are
 * computed (a triangle's tiles: HFQ_DGEMM_ALL for a whole rectangle); the
 * others are neither read nor written. Internal to quant/, calib/ and their
 * tests. */
#ifndef HFQ_QUANT_DGEMM_H
#define HFQ_QUANT_DGEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/isa.h"

typedef struct hfq_dgemm {
    int64_t m, n, k;          /* C is m x n, the chains k long */
    const double *a;
    int64_t a_row, a_col;
    const double *b;
    int64_t ldb, b_panel;
    double *c;
    int64_t ldc;
    int64_t lo, hi;           /* the band of j - i computed */
    bool neg;                 /* C -= A B */
} hfq_dgemm;

#define HFQ_DGEMM_ALL .lo = INT64_MIN / 2, .hi = INT64_MAX / 2
/* Columns of a tile, and of a panel of a packed B. */
#define HFQ_DGEMM_NR 8

/* The instruction set hfq_dgemm runs with on this CPU: AVX2 needs FMA. */
hfq_isa hfq_dgemm_isa(void);

/* Runs g with isa (HFQ_ISA_AVX2 only where hfq_dgemm_isa() is it). */
void hfq_dgemm_run(const hfq_dgemm *g, hfq_isa isa);

#ifdef HFQ_HAVE_AVX2_KERNELS
/* quant/dgemm_simd.c: hfq_dgemm_run's AVX2 tiles: rows [i0, i1) of the
 * HFQ_DGEMM_NR columns from j0 (fewer at C's end), the elements in g's
 * band; B's column j0 + j at b[k * g->ldb + j]. */
void hfq_dgemm_cols_avx2(const hfq_dgemm *g, const double *b, int64_t i0, int64_t i1, int64_t j0);
#endif

#endif
