/* dgemm.c - see quant/dgemm.h. */
#include "quant/dgemm.h"

#include <math.h>

#define NR HFQ_DGEMM_NR

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

hfq_isa hfq_dgemm_isa(void) {
    return hfq_isa_best() == HFQ_ISA_AVX2 && cpu_has(CPU_FEAT_FMA) ? HFQ_ISA_AVX2 : HFQ_ISA_SCALAR;
}

/* The in-band elements of rows [i0, i1) x columns [j0, j1) (at most NR
 * columns, B's column j0 + j at b[k * ldb + j]), each its chain by C's fma(). */
static void block_fma(const hfq_dgemm *g, const double *b0, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    for (int64_t i = i0; i < i1; i++) {
        const int64_t ja = max64(j0, i + g->lo), jb = min64(j1, i + g->hi + 1);
        if (ja >= jb) continue;
        double acc[NR], *c = g->c + i * g->ldc;
        const double *a = g->a + i * g->a_row;
        for (int64_t j = ja; j < jb; j++) acc[j - ja] = c[j];
        for (int64_t k = 0; k < g->k; k++) {
            const double av = g->neg ? -a[k * g->a_col] : a[k * g->a_col], *b = b0 + k * g->ldb - j0;
            for (int64_t j = ja; j < jb; j++) acc[j - ja] = fma(av, b[j], acc[j - ja]);
        }
        for (int64_t j = ja; j < jb; j++) c[j] = acc[j - ja];
    }
}

void hfq_dgemm_run(const hfq_dgemm *g, hfq_isa isa) {
    for (int64_t j0 = 0; j0 < g->n; j0 += NR) {
        const int64_t j1 = min64(j0 + NR, g->n);
        const double *b = g->b + (g->b_panel > 0 ? j0 / NR * g->b_panel : j0);
#ifdef HFQ_HAVE_AVX2_KERNELS
        if (isa == HFQ_ISA_AVX2) { /* the rows with an element in the band */
            const int64_t ra = min64(g->m, max64(0, j0 - g->hi)), rb = max64(ra, min64(g->m, j1 - g->lo));
            hfq_dgemm_cols_avx2(g, b, ra, rb, j0);
            continue;
        }
#endif
        (void)isa;
        block_fma(g, b, 0, g->m, j0, j1);
    }
}
