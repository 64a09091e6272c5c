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

/* H = R R^T with R upper (the Cholesky factorization of H with rows and
 * columns reversed), in place: R_jj = sqrt(H_jj - sum_{k>j} R_jk^2),
 * R_ij = (H_ij - sum_{k>j} R_ik R_jk) / R_jj for i < j, columns from the
 * last. Then H^-1 = R^-T R^-1, so U = R^-1 is the upper Cholesky factor of
 * H^-1 without forming the inverse. */
static int upper_factor(double *h, int64_t n, int n_threads) {
    for (int64_t j = n - 1; j >= 0; j--) {
        double *rj = h + j * n;
        const double d = rj[j] - dot(rj + j + 1, rj + j + 1, n - j - 1);
        if (!(d > 0.0) || !isfinite(d)) return -1;
        rj[j] = sqrt(d);
        const double inv = 1.0 / rj[j];
#pragma omp parallel for schedule(static) num_threads(n_threads) if (j > 256)
        for (int64_t i = 0; i < j; i++) {
            double *ri = h + i * n;
            ri[j] = (ri[j] - dot(ri + j + 1, rj + j + 1, n - j - 1)) * inv;
        }
    }
    return 0;
}

/* R (upper) -> R^-1 in place, column by column from the first:
 * U_jj = 1 / R_jj, U_ij = -(sum_{k=i}^{j-1} U_ik R_kj) / R_jj for i < j
 * (U R = I), reading the columns of U already made and R's column j. */
static int upper_inverse(double *h, int64_t n, int n_threads) {
    double *col = malloc((size_t)(n > 0 ? n : 1) * sizeof *col);
    if (!col) return -1;
    for (int64_t j = 0; j < n; j++) {
        for (int64_t k = 0; k < j; k++) col[k] = h[k * n + j];
        const double inv = 1.0 / h[j * n + j];
#pragma omp parallel for schedule(static) num_threads(n_threads) if (j > 256)
        for (int64_t i = 0; i < j; i++) h[i * n + j] = -dot(h + i * n + i, col + i, j - i) * inv;
        h[j * n + j] = inv;
    }
    free(col);
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
    if (upper_factor(h, n, n_threads) || upper_inverse(h, n, n_threads)) return -1;
    for (int64_t i = 1; i < n; i++) memset(h + i * n, 0, (size_t)i * sizeof *h);
    return 0;
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

int hfq_gptq_encode(const hfq_gptq_codec *c, const double *u, const float *w, int64_t nrows, int64_t n,
                    const float *importance, float global_scale, int64_t batch, void *out, int n_threads) {
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
        failed = !wd || !e || !xf;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < n_tasks; t++) {
            if (failed) continue;
            const int64_t r0 = t * ROWS_PER_TASK, nr = nrows - r0 < ROWS_PER_TASK ? nrows - r0 : ROWS_PER_TASK;
            for (int64_t r = 0; r < nr; r++)
                for (int64_t k = 0; k < n; k++) wd[r * n + k] = w[(r0 + r) * n + k];
            for (int64_t i1 = 0; i1 < n; i1 += batch) {
                const int64_t i2 = i1 + batch < n ? i1 + batch : n;
                for (int64_t r = 0; r < nr; r++)
                    round_batch(c, u, n, wd + r * n, w + (r0 + r) * n, importance, global_scale, i1, i2,
                                (uint8_t *)out + (size_t)(r0 + r) * row_bytes, e + r * batch, xf, state);
                /* the later columns get the batch's errors, j ascending for every element */
                for (int64_t k0 = i2; k0 < n; k0 += TILE) {
                    const int64_t k1 = k0 + TILE < n ? k0 + TILE : n;
                    for (int64_t j = i1; j < i2; j++) {
                        const double *uj = u + j * n;
                        for (int64_t r = 0; r < nr; r++) {
                            const double err = e[r * batch + j - i1];
                            double *wr = wd + r * n;
                            for (int64_t k = k0; k < k1; k++) wr[k] -= err * uj[k];
                        }
                    }
                }
            }
        }
        free(wd);
        free(e);
        free(xf);
    }
    return failed ? -1 : 0;
}
