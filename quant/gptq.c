/* gptq.c - see quant/gptq.h. */
#include "quant/gptq.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "quant/dgemm.h"

/* Rows per OpenMP task, and the width of the column tiles of the lazy
 * update (a tile of U's batch rows and of the task's rows stays in cache). */
#define ROWS_PER_TASK 32
#define TILE 256

/* Columns of a panel of the blocked factorization and inverse, and rows
 * per task of their parallel loops (a multiple of quant/dgemm.c's 6-row
 * tiles); TRAIL: rows and columns of a task's tile of the trailing update. */
#define NB 64
#define ROW_BLOCK 48
#define TRAIL 96
/* Columns per sub-block of the triangular solves. */
#define SB 8
/* Doubles of the panel's transposed copy, by panels of HFQ_DGEMM_NR
 * columns (quant/dgemm.h's packed B); and the chain length per step of the
 * inverse's products (a step's A and B stay in cache). */
#define PT_DOUBLES(n) (((n) + HFQ_DGEMM_NR - 1) / HFQ_DGEMM_NR * HFQ_DGEMM_NR * NB)
#define K_STEP 256

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Reverses the n*n values: element (i, j) <-> (n-1-i, n-1-j), i.e. J A J
 * with J the reversal permutation. */
static void reverse(double *a, int64_t n) {
    for (int64_t i = 0, k = n * n - 1; i < k; i++, k--) {
        const double t = a[i];
        a[i] = a[k];
        a[k] = t;
    }
}

/* Columns [k0, k1) of rows [r0, r1) of the factor: L_ic = (A_ic - the
 * chain over the panel's m < c of L_im L_cm) / L_cc, the panel's columns in
 * order, by sub-blocks of SB (within one, a column at a time; the later
 * columns then get the sub-block's SB terms in one product); lt is L11
 * transposed (row c: L_c'c for the panel's c'). */
static void panel_rows(double *a, int64_t n, int64_t k0, int64_t k1, int64_t r0, int64_t r1, const double *lt,
                       hfq_isa isa) {
    for (int64_t s0 = k0; s0 < k1; s0 += SB) {
        const int64_t s1 = min64(s0 + SB, k1);
        for (int64_t c = s0; c < s1; c++) {
            const double d = a[c * n + c];
            for (int64_t i = r0; i < r1; i++) a[i * n + c] /= d;
            const hfq_dgemm g = {.m = r1 - r0, .n = s1 - c - 1, .k = 1, .a = a + r0 * n + c, .a_row = n,
                                 .b = lt + (c - k0) * NB + (c - k0) + 1, .c = a + r0 * n + c + 1, .ldc = n,
                                 HFQ_DGEMM_ALL, .neg = true};
            hfq_dgemm_run(&g, isa);
        }
        const hfq_dgemm g = {.m = r1 - r0, .n = k1 - s1, .k = s1 - s0, .a = a + r0 * n + s0, .a_row = n, .a_col = 1,
                             .b = lt + (s0 - k0) * NB + (s1 - k0), .ldb = NB, .c = a + r0 * n + s1, .ldc = n,
                             HFQ_DGEMM_ALL, .neg = true};
        hfq_dgemm_run(&g, isa);
    }
}

/* Lower Cholesky factor of the lower triangle of a (strict upper 0, kept),
 * in place, right-looking by panels of NB columns. Every element is
 * L_ic = (A_ic - sum_{m<c} L_im L_cm) / L_cc (sqrt on the diagonal) with the
 * sum one fma chain in m order, whatever NB, tiles and threads (quant/dgemm.h).
 * scratch: 2 PT_DOUBLES(n) + NB NB doubles. */
static int cholesky_lower(double *a, int64_t n, int n_threads, hfq_isa isa, double *scratch) {
    enum { NR = HFQ_DGEMM_NR };
    double *pt = scratch, *ap = scratch + PT_DOUBLES(n), *lt = ap + PT_DOUBLES(n);
    for (int64_t k0 = 0; k0 < n; k0 += NB) {
        const int64_t k1 = min64(k0 + NB, n), w = k1 - k0;
        for (int64_t j = k0; j < k1; j++) { /* the diagonal block, column by column */
            const double v = a[j * n + j];
            if (!(v > 0.0) || !isfinite(v)) return -1;
            a[j * n + j] = sqrt(v);
            for (int64_t i = j + 1; i < k1; i++) a[i * n + j] /= a[j * n + j];
            for (int64_t i = j + 1; i < k1; i++)
                for (int64_t c = j + 1; c <= i; c++) a[i * n + c] = fma(-a[i * n + j], a[c * n + j], a[i * n + c]);
        }
        if (k1 == n) break;
        for (int64_t c = 0; c < w; c++)
            for (int64_t c2 = c + 1; c2 < w; c2++) lt[c * NB + c2] = a[(k0 + c2) * n + k0 + c];
        const int64_t m = n - k1, n_rb = (m + ROW_BLOCK - 1) / ROW_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads) if (m > 256)
        for (int64_t b = 0; b < n_rb; b++) {
            const int64_t r0 = k1 + b * ROW_BLOCK, r1 = min64(r0 + ROW_BLOCK, n);
            panel_rows(a, n, k0, k1, r0, r1, lt, isa);
            for (int64_t i = r0; i < r1; i++) /* the panel, copied by rows and transposed */
                for (int64_t c = 0; c < w; c++) {
                    ap[(i - k1) * NB + c] = a[i * n + k0 + c];
                    pt[(i - k1) / NR * (NB * NR) + c * NR + (i - k1) % NR] = a[i * n + k0 + c];
                }
        }
        /* the trailing lower triangle: A_ij -= sum over the panel of L_im L_jm */
        const int64_t nt = (m + TRAIL - 1) / TRAIL, n_tiles = nt * (nt + 1) / 2;
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads) if (m > 256)
        for (int64_t t = 0; t < n_tiles; t++) {
            int64_t bi = 0, rem = t; /* tile t: row block bi, column block bj <= bi */
            while (rem > bi) rem -= ++bi;
            const int64_t i0 = bi * TRAIL, j0 = rem * TRAIL;
            const hfq_dgemm g = {.m = min64(TRAIL, m - i0), .n = min64(TRAIL, m - j0), .k = w, .a = ap + i0 * NB,
                                 .a_row = NB, .a_col = 1, .b = pt + j0 / NR * (NB * NR), .ldb = NR,
                                 .b_panel = NB * NR,
                                 .c = a + (k1 + i0) * n + k1 + j0, .ldc = n, .lo = INT64_MIN / 2, .hi = i0 - j0,
                                 .neg = true};
            hfq_dgemm_run(&g, isa);
        }
    }
    return 0;
}

/* Rows [r0, r1) of block column [j0, j1) of X = L^-1 (rows after j1): Z =
 * X22 L21 (L21 from p, X22's strict upper 0: the chain runs to the block's
 * last row), then Y L11 = -Z solved for Y, columns from the last. */
static void inverse_rows(double *a, int64_t n, int64_t j0, int64_t j1, int64_t r0, int64_t r1, const double *p,
                         hfq_isa isa) {
    const int64_t w = j1 - j0;
    for (int64_t i = r0; i < r1; i++) memset(a + i * n + j0, 0, (size_t)w * sizeof *a);
    for (int64_t k0 = 0; k0 < r1 - j1; k0 += K_STEP) { /* the chains continue step after step */
        const hfq_dgemm z = {.m = r1 - r0, .n = w, .k = min64(K_STEP, r1 - j1 - k0), .a = a + r0 * n + j1 + k0,
                             .a_row = n, .a_col = 1, .b = p + k0 * NB, .ldb = NB, .c = a + r0 * n + j0, .ldc = n,
                             HFQ_DGEMM_ALL};
        hfq_dgemm_run(&z, isa);
    }
    for (int64_t i = r0; i < r1; i++)
        for (int64_t c = j0; c < j1; c++) a[i * n + c] = -a[i * n + c];
    for (int64_t s1 = j1; s1 > j0; s1 -= SB) { /* sub-blocks from the last; chains over m descending */
        const int64_t s0 = s1 - SB > j0 ? s1 - SB : j0;
        for (int64_t c = s1 - 1; c >= s0; c--) {
            const double d = a[c * n + c];
            for (int64_t i = r0; i < r1; i++) a[i * n + c] /= d;
            const hfq_dgemm g = {.m = r1 - r0, .n = c - s0, .k = 1, .a = a + r0 * n + c, .a_row = n,
                                 .b = a + c * n + s0, .c = a + r0 * n + s0, .ldc = n, HFQ_DGEMM_ALL, .neg = true};
            hfq_dgemm_run(&g, isa);
        }
        const hfq_dgemm g = {.m = r1 - r0, .n = s0 - j0, .k = s1 - s0, .a = a + r0 * n + s1 - 1, .a_row = n,
                             .a_col = -1, .b = a + (s1 - 1) * n + j0, .ldb = -n, .c = a + r0 * n + j0, .ldc = n,
                             HFQ_DGEMM_ALL, .neg = true};
        hfq_dgemm_run(&g, isa);
    }
}

/* X = L^-1 in place (lower; strict upper 0, kept), by block columns from
 * the last (LAPACK's dtrtri): X21 = -X22 L21 L11^-1, then X11 = L11^-1.
 * Each element's arithmetic is fixed (fma chains in a fixed order), rows
 * split between threads. scratch: NB n doubles. */
static void inverse_lower(double *a, int64_t n, int n_threads, hfq_isa isa, double *p) {
    for (int64_t j0 = (n - 1) / NB * NB; j0 >= 0; j0 -= NB) {
        const int64_t j1 = min64(j0 + NB, n), w = j1 - j0, m = n - j1, n_rb = (m + ROW_BLOCK - 1) / ROW_BLOCK;
        for (int64_t k = 0; k < m; k++) memcpy(p + k * NB, a + (j1 + k) * n + j0, (size_t)w * sizeof *a);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads) if (m > 256)
        for (int64_t b = n_rb - 1; b >= 0; b--) /* the longest chains first */
            inverse_rows(a, n, j0, j1, j1 + b * ROW_BLOCK, min64(j1 + (b + 1) * ROW_BLOCK, n), p, isa);
        for (int64_t j = j1 - 1; j >= j0; j--) { /* X11, column by column from the last */
            a[j * n + j] = 1.0 / a[j * n + j];
            const double s = -a[j * n + j];
            for (int64_t i = j1 - 1; i > j; i--) { /* X_ij = -X_jj sum_{j<k<=i} X_ik L_kj, rows from the last */
                double v = 0.0;
                for (int64_t k = j + 1; k <= i; k++) v = fma(a[i * n + k], a[k * n + j], v);
                a[i * n + j] = v * s;
            }
        }
    }
}

/* U, the upper Cholesky factor of H^-1, without forming the inverse: with
 * J H J = L L^T, H = R R^T for the upper R = J L J, so H^-1 = U^T U with
 * U = R^-1 = J L^-1 J. On entry the upper triangle of h is H's; on return
 * h's upper triangle is U, its strict lower triangle 0. */
static int upper_inverse_factor(double *h, int64_t n, int n_threads, hfq_isa isa) {
    reverse(h, n); /* H's upper triangle is now J H J's lower one */
    for (int64_t i = 0; i < n; i++) memset(h + i * n + i + 1, 0, (size_t)(n - i - 1) * sizeof *h);
    double *scratch = malloc((size_t)(2 * PT_DOUBLES(n) + NB * NB) * sizeof *scratch);
    if (!scratch || cholesky_lower(h, n, n_threads, isa, scratch)) {
        free(scratch);
        return -1;
    }
    inverse_lower(h, n, n_threads, isa, scratch);
    free(scratch);
    reverse(h, n); /* X's lower triangle becomes J X J's upper one: U; the zeros its strict lower */
    return 0;
}

int hfq_gptq_prepare(double *h, int64_t n, double damp, int n_threads) {
    return hfq_gptq_prepare_isa(h, n, damp, n_threads, hfq_dgemm_isa());
}

int hfq_gptq_prepare_isa(double *h, int64_t n, double damp, int n_threads, hfq_isa isa) {
    if (n_threads <= 0) n_threads = omp_get_max_threads();
    double mean = 0.0;
    for (int64_t j = 0; j < n; j++) {
        double *d = h + j * n + j;
        if (*d == 0.0) *d = 1.0; /* never active: no feedback through it */
        mean += *d;
    }
    mean /= (double)n;
    if (!isfinite(mean)) return -1;
    for (int64_t j = 0; j < n; j++) h[j * n + j] += damp * mean;
    return upper_inverse_factor(h, n, n_threads, isa);
}

int hfq_gptq_target_shift(double *d, const double *u, int64_t n, const int64_t *perm, int n_threads) {
    if (n_threads <= 0) n_threads = omp_get_max_threads();
    /* per thread: t, and the row in perm's order */
    double *tmp = malloc((size_t)n_threads * (size_t)n * 2 * sizeof *tmp);
    if (!tmp) return -1;
#pragma omp parallel for schedule(dynamic, 8) num_threads(n_threads) if (n > 256)
    for (int64_t i = 0; i < n; i++) {
        double *t = tmp + (size_t)omp_get_thread_num() * (size_t)n * 2, *p = t + n, *row = d + i * n;
        /* act-order's U is of P H P^T: (H + lambda I)^-1 = P^T U^T U P, so
         * the row's columns go into perm's order and back */
        const double *r = row;
        if (perm) {
            for (int64_t k = 0; k < n; k++) p[k] = row[perm[k]];
            r = p;
        }
        /* t = r U^T: t_k = sum over j >= k of r_j U_kj */
        for (int64_t k = 0; k < n; k++) {
            double acc = 0.0;
            for (int64_t j = k; j < n; j++) acc += r[j] * u[k * n + j];
            t[k] = acc;
        }
        /* m = t U: m_l = sum over k <= l of t_k U_kl, k in order */
        double *m = perm ? p : row;
        memset(m, 0, (size_t)n * sizeof *m);
        for (int64_t k = 0; k < n; k++)
            for (int64_t l = k; l < n; l++) m[l] += t[k] * u[k * n + l];
        for (int64_t k = 0; perm && k < n; k++) row[perm[k]] = p[k];
    }
    free(tmp);
    return 0;
}

void hfq_gptq_shift_row(const double *m, int64_t n, float *w, double *tmp) {
    for (int64_t l = 0; l < n; l++) tmp[l] = w[l];
    for (int64_t i = 0; i < n; i++) {
        const double wi = w[i];
        if (wi == 0.0) continue;
        for (int64_t l = 0; l < n; l++) tmp[l] += wi * m[i * n + l];
    }
    for (int64_t l = 0; l < n; l++) w[l] = (float)tmp[l];
}

int64_t hfq_gptq_batch(const hfq_gptq_codec *c, int64_t batch) {
    if (batch <= 0) batch = HFQ_GPTQ_DEFAULT_BATCH;
    return (batch + c->block - 1) / c->block * c->block;
}

/* Columns [i1, i2) of one row w (double, updated), rounding each block under
 * its header and feeding each error to the batch's later columns; the
 * errors / U_jj into e[0 .. i2 - i1). */
static void round_batch(const hfq_gptq_codec *c, const double *u, int64_t n, double *w, const float *orig,
                        const float *importance, float global_scale, int64_t i1, int64_t i2, uint8_t *row_out,
                        double *e, float *xf, void *state) {
    const int64_t b = c->block;
    for (int64_t j0 = i1; j0 < i2; j0 += b) {
        for (int64_t i = 0; i < b; i++) xf[i] = (float)w[j0 + i];
        void *blk = row_out + (size_t)(j0 / b) * c->block_bytes;
        hfq_gptq_block_in in = {.x = xf, .importance = importance ? importance + j0 : NULL, .row = orig,
                                .n_per_row = n, .offset = j0, .global_scale = global_scale};
        c->header(&in, blk, state);
        for (int64_t j = j0; j < j0 + b; j++) {
            const double q = c->round(state, blk, j - j0, (float)w[j]);
            const double *uj = u + j * n;
            const double err = (w[j] - q) / uj[j];
            for (int64_t k = j + 1; k < i2; k++) w[k] -= err * uj[k];
            e[j - i1] = err;
        }
    }
}

/* Act-order: every block's header from the original row (static groups),
 * into the row's blocks and states[block * stride]. */
static void static_headers(const hfq_gptq_codec *c, int64_t n, const float *orig, const float *importance,
                           float global_scale, uint8_t *row_out, unsigned char *states, size_t stride) {
    const int64_t b = c->block;
    for (int64_t j0 = 0; j0 < n; j0 += b) {
        hfq_gptq_block_in in = {.x = orig + j0, .importance = importance ? importance + j0 : NULL, .row = orig,
                                .n_per_row = n, .offset = j0, .global_scale = global_scale};
        c->header(&in, row_out + (size_t)(j0 / b) * c->block_bytes, states + (size_t)(j0 / b) * stride);
    }
}

/* round_batch in act-order: w and U are permuted (position p is column
 * perm[p]); each column rounds under its block's static header. */
static void round_batch_perm(const hfq_gptq_codec *c, const double *u, int64_t n, double *w, const int64_t *perm,
                             int64_t i1, int64_t i2, uint8_t *row_out, double *e, const unsigned char *states,
                             size_t stride) {
    const int64_t b = c->block;
    for (int64_t p = i1; p < i2; p++) {
        const int64_t j = perm[p];
        const double q = c->round(states + (size_t)(j / b) * stride, row_out + (size_t)(j / b) * c->block_bytes,
                                  j % b, (float)w[p]);
        const double *up = u + p * n;
        const double err = (w[p] - q) / up[p];
        for (int64_t k = p + 1; k < i2; k++) w[k] -= err * up[k];
        e[p - i1] = err;
    }
}

static int by_diag(const void *a, const void *b) {
    const double *x = a, *y = b; /* {diagonal, column} pairs */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

int hfq_gptq_act_order(double *h, int64_t n, int64_t *perm) {
    double *pairs = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *pairs);
    double *t = malloc((size_t)(n > 0 ? n * n : 1) * sizeof *t);
    if (!pairs || !t) {
        free(pairs);
        free(t);
        return -1;
    }
    for (int64_t j = 0; j < n; j++) pairs[2 * j] = h[j * n + j], pairs[2 * j + 1] = (double)j;
    qsort(pairs, (size_t)n, 2 * sizeof *pairs, by_diag);
    for (int64_t p = 0; p < n; p++) perm[p] = (int64_t)pairs[2 * p + 1];
    memcpy(t, h, (size_t)(n * n) * sizeof *t);
    for (int64_t p = 0; p < n; p++)
        for (int64_t q = p; q < n; q++) {
            const int64_t a = perm[p] < perm[q] ? perm[p] : perm[q], b = perm[p] < perm[q] ? perm[q] : perm[p];
            h[p * n + q] = t[a * n + b];
        }
    free(pairs);
    free(t);
    return 0;
}

int hfq_gptq_encode(const hfq_gptq_codec *c, const double *u, const float *w, int64_t nrows, int64_t n,
                    const float *importance, float global_scale, int64_t batch, void *out, int n_threads) {
    return hfq_gptq_encode_perm(c, u, w, nrows, n, importance, global_scale, batch, NULL, out, n_threads);
}

int hfq_gptq_encode_perm(const hfq_gptq_codec *c, const double *u, const float *w, int64_t nrows, int64_t n,
                         const float *importance, float global_scale, int64_t batch, const int64_t *perm, void *out,
                         int n_threads) {
    if (n_threads <= 0) n_threads = omp_get_max_threads();
    batch = hfq_gptq_batch(c, batch);
    const size_t row_bytes = (size_t)(n / c->block) * c->block_bytes;
    const int64_t n_tasks = (nrows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    int failed = 0;
#pragma omp parallel num_threads(n_threads) reduction(| : failed)
    {
        double *wd = malloc((size_t)ROWS_PER_TASK * (size_t)n * sizeof *wd);
        double *e = malloc((size_t)ROWS_PER_TASK * (size_t)batch * sizeof *e);
        float *xf = malloc((size_t)c->block * sizeof *xf);
        _Alignas(16) unsigned char state[HFQ_GPTQ_STATE_MAX];
        /* act-order: every block's state of the task's rows (16-byte strides keep malloc's alignment) */
        const size_t stride = (c->state_bytes + 15) / 16 * 16, row_states = (size_t)(n / c->block) * stride;
        unsigned char *states = perm ? malloc((size_t)ROWS_PER_TASK * row_states + 1) : NULL;
        failed = !wd || !e || !xf || (perm && !states);
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < n_tasks; t++) {
            if (failed) continue;
            const int64_t r0 = t * ROWS_PER_TASK, nr = nrows - r0 < ROWS_PER_TASK ? nrows - r0 : ROWS_PER_TASK;
            for (int64_t r = 0; r < nr; r++) {
                const float *orig = w + (r0 + r) * n;
                for (int64_t k = 0; k < n; k++) wd[r * n + k] = orig[perm ? perm[k] : k];
                if (perm)
                    static_headers(c, n, orig, importance, global_scale, (uint8_t *)out + (size_t)(r0 + r) * row_bytes,
                                   states + (size_t)r * row_states, stride);
            }
            for (int64_t i1 = 0; i1 < n; i1 += batch) {
                const int64_t i2 = i1 + batch < n ? i1 + batch : n;
                for (int64_t r = 0; r < nr; r++) {
                    uint8_t *row_out = (uint8_t *)out + (size_t)(r0 + r) * row_bytes;
                    if (perm)
                        round_batch_perm(c, u, n, wd + r * n, perm, i1, i2, row_out, e + r * batch,
                                         states + (size_t)r * row_states, stride);
                    else
                        round_batch(c, u, n, wd + r * n, w + (r0 + r) * n, importance, global_scale, i1, i2, row_out,
                                    e + r * batch, xf, state);
                }
                /* the later columns get the batch's errors, four of its
                 * columns at a time (then the rest one by one), in a fixed
                 * order for every element */
                const int64_t i4 = i1 + (i2 - i1) / 4 * 4;
                for (int64_t k0 = i2; k0 < n; k0 += TILE) {
                    const int64_t k1 = k0 + TILE < n ? k0 + TILE : n;
                    for (int64_t j = i4; j < i2; j++)
                        for (int64_t r = 0; r < nr; r++)
                            for (int64_t k = k0; k < k1; k++) wd[r * n + k] -= e[r * batch + j - i1] * u[j * n + k];
                    for (int64_t j = i1; j < i4; j += 4) {
                        const double *u0 = u + j * n, *u1 = u0 + n, *u2 = u1 + n, *u3 = u2 + n;
                        for (int64_t r = 0; r < nr; r++) {
                            const double *er = e + r * batch + j - i1;
                            const double e0 = er[0], e1 = er[1], e2 = er[2], e3 = er[3];
                            double *wr = wd + r * n;
                            for (int64_t k = k0; k < k1; k++)
                                wr[k] -= (e0 * u0[k] + e1 * u1[k]) + (e2 * u2[k] + e3 * u3[k]);
                        }
                    }
                }
            }
        }
        free(wd);
        free(e);
        free(xf);
        free(states);
    }
    return failed ? -1 : 0;
}
