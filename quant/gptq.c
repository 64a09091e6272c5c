/* gptq.c - see quant/gptq.h. */
#include "quant/gptq.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Rows per OpenMP task, and the width of the column tiles of the lazy
 * update (a tile of U's batch rows and of the task's rows stays in cache). */
#define ROWS_PER_TASK 32
#define TILE 256

/* sum a[i] b[i], four partial sums in a fixed order (vectorizable, and the
 * same result on any thread). */
static double dot(const double *a, const double *b, int64_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* Column blocks of the factorization and of the inverse: a block's rows
 * (factorization) or its columns' values (inverse) stay in cache while the
 * matrix streams past once per block. */
#define FACTOR_BLOCK 64
#define INVERSE_BLOCK 32

/* Reverses the n*n values: element (i, j) <-> (n-1-i, n-1-j), i.e. J A J
 * with J the reversal permutation. */
static void reverse(double *a, int64_t n) {
    for (int64_t i = 0, k = n * n - 1; i < k; i++, k--) {
        const double t = a[i];
        a[i] = a[k];
        a[k] = t;
    }
}

/* Lower Cholesky factor of the lower triangle of a, in place, left-looking
 * by blocks of columns: L_ij = (A_ij - sum_{k<j} L_ik L_jk) / L_jj, each
 * element one dot of a fixed order (the same for any thread count). */
static int cholesky_lower(double *a, int64_t n, int n_threads) {
    for (int64_t k0 = 0; k0 < n; k0 += FACTOR_BLOCK) {
        const int64_t k1 = k0 + FACTOR_BLOCK < n ? k0 + FACTOR_BLOCK : n;
        for (int64_t i = k0; i < k1; i++) /* the diagonal block */
            for (int64_t j = k0; j <= i; j++) {
                const double v = a[i * n + j] - dot(a + i * n, a + j * n, j);
                if (i == j && (!(v > 0.0) || !isfinite(v))) return -1;
                a[i * n + j] = i == j ? sqrt(v) : v / a[j * n + j];
            }
#pragma omp parallel for schedule(static) num_threads(n_threads) if (n - k1 > 256)
        for (int64_t i = k1; i < n; i++)
            for (int64_t j = k0; j < k1; j++) a[i * n + j] = (a[i * n + j] - dot(a + i * n, a + j * n, j)) / a[j * n + j];
    }
    return 0;
}

/* X = L^-1 (lower) by forward substitution, column j of X in row j's upper
 * part (X_kj at (j, k), k >= j), which L does not use; columns in blocks,
 * in parallel (each column's arithmetic fixed). L's diagonal is read from
 * d, as the inverse's overwrites it. */
static int inverse_lower(double *a, const double *d, int64_t n, int n_threads) {
    const int64_t n_blocks = (n + INVERSE_BLOCK - 1) / INVERSE_BLOCK;
    int failed = 0;
#pragma omp parallel num_threads(n_threads) reduction(| : failed)
    {
        double *x = malloc((size_t)INVERSE_BLOCK * (size_t)n * sizeof *x);
        failed = !x;
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < n_blocks; b++) {
            if (failed) continue;
            const int64_t j0 = b * INVERSE_BLOCK, j1 = j0 + INVERSE_BLOCK < n ? j0 + INVERSE_BLOCK : n;
            for (int64_t k = j0; k < n; k++)
                for (int64_t j = j0; j < j1 && j <= k; j++) {
                    double *xj = x + (j - j0) * n;
                    xj[k] = k == j ? 1.0 / d[k] : -dot(a + k * n + j, xj + j, k - j) / d[k];
                }
            for (int64_t j = j0; j < j1; j++) memcpy(a + j * n + j, x + (j - j0) * n + j, (size_t)(n - j) * sizeof *a);
        }
        free(x);
    }
    return failed ? -1 : 0;
}

/* U, the upper Cholesky factor of H^-1, without forming the inverse: with
 * J H J = L L^T, H = R R^T for the upper R = J L J, so H^-1 = U^T U with
 * U = R^-1 = J L^-1 J. On entry the upper triangle of h is H's; on return
 * h's upper triangle is U, its strict lower triangle 0. */
static int upper_inverse_factor(double *h, int64_t n, int n_threads) {
    reverse(h, n); /* H's upper triangle is now J H J's lower one */
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d || cholesky_lower(h, n, n_threads)) {
        free(d);
        return -1;
    }
    for (int64_t k = 0; k < n; k++) d[k] = h[k * n + k];
    const int rc = inverse_lower(h, d, n, n_threads);
    free(d);
    if (rc) return -1;
    reverse(h, n); /* X^T's upper triangle becomes (J X J)^T's lower one: U transposed */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) {
            h[i * n + j] = h[j * n + i];
            h[j * n + i] = 0.0;
        }
    return 0;
}

int hfq_gptq_prepare(double *h, int64_t n, double damp, int n_threads) {
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
    return upper_inverse_factor(h, n, n_threads);
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
