/* test_gptq_hessian.c - GPTQ's blocked double kernels (quant/dgemm.h) and
 * their uses, at sizes that are not multiples of any tile or chunk:
 *   - the Hessian (calib/hessian.h) is bit for bit the plain double sum of
 *     x_ti x_tj in token order (what the promise says), agrees with a long
 *     double X^T X to 1e-13 relative, and is the same for 1 and 2 threads and
 *     for the AVX2 and portable kernels, token batches not multiples of the
 *     chunk;
 *   - hfq_dgemm itself: SIMD and portable give the same bits, bands respected
 *     (elements outside neither read nor written);
 *   - U (quant/gptq.h): the same bits for 1 and 2 threads and both kernels,
 *     U^T U (H + damping) = I, strict lower triangle 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "calib/hessian.h"
#include "check.h"
#include "quant/dgemm.h"
#include "quant/gptq.h"
#include "quant_rng.h"

static int n_isa(void) { return hfq_dgemm_isa() == HFQ_ISA_AVX2 ? 2 : 1; }
static hfq_isa isa_at(int k) { return k ? HFQ_ISA_AVX2 : HFQ_ISA_SCALAR; }

static void hessian_case(int64_t n, int64_t t) {
    float *x = malloc((size_t)(t * n) * sizeof *x);
    for (int64_t i = 0; i < t * n; i++) x[i] = rnd_gauss() * (i % n == 3 ? 10.0f : 1.0f) + (i % n == 0 ? 2.0f : 0.0f);
    const int64_t cuts[] = {0, 37, 300, t}; /* batches of 37, 263 and the rest (t > 300; the chunk is 256) */
    hfq_hessian_input in = {.name = "w", .n = n};
    double *first = NULL;
    for (int k = 0; k < n_isa(); k++)
        for (int threads = 1; threads <= 2; threads++) {
            hfq_hessian_set s;
            CHECK(hfq_hessian_set_init(&s, &in, 1, threads, &(hfq_error){{0}}) == 0);
            for (int c = 0; c < 3; c++)
                hfq_hessian_add_isa(&s.e[0], x + cuts[c] * n, cuts[c + 1] - cuts[c], threads, isa_at(k));
            CHECK(s.e[0].n_tokens == t);
            if (!first) {
                first = malloc((size_t)(n * n) * sizeof *first);
                memcpy(first, s.e[0].h, (size_t)(n * n) * sizeof *first);
            } else
                CHECK_MSG(memcmp(first, s.e[0].h, (size_t)(n * n) * sizeof *first) == 0,
                          "n %lld: the Hessian with %s, %d threads differs", (long long)n, k ? "AVX2" : "portable",
                          threads);
            hfq_hessian_set_free(&s);
        }
    int64_t not_sum = 0, lower = 0;
    double maxrel = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            if (j < i) {
                lower += first[i * n + j] != 0.0;
                continue;
            }
            double plain = 0.0;
            long double ref = 0.0L, mag = 0.0L;
            for (int64_t k = 0; k < t; k++) {
                plain += (double)x[k * n + i] * (double)x[k * n + j];
                ref += (long double)x[k * n + i] * x[k * n + j];
                mag += fabsl((long double)x[k * n + i] * x[k * n + j]);
            }
            not_sum += memcmp(&plain, &first[i * n + j], sizeof plain) != 0;
            maxrel = fmax(maxrel, (double)(fabsl(first[i * n + j] - ref) / (mag > 0 ? mag : 1.0L)));
        }
    printf("Hessian n %lld, %lld tokens: %d kernels x 1, 2 threads identical; vs long double X^T X %.2g\n",
           (long long)n, (long long)t, n_isa(), maxrel);
    CHECK_MSG(not_sum == 0, "n %lld: %lld elements are not the plain double sum", (long long)n, (long long)not_sum);
    CHECK(lower == 0);
    CHECK_MSG(maxrel < 1e-13, "n %lld: %g", (long long)n, maxrel);
    free(first);
    free(x);
}

/* hfq_dgemm on a random band: both kernels the same bits, the plain chain
 * per element, outside the band untouched. */
static void dgemm_case(int64_t m, int64_t n, int64_t k, int64_t lo, int64_t hi, bool neg) {
    const int64_t a_row = k + 3, ldb = n + 5, ldc = n + 2;
    double *a = malloc((size_t)(m * a_row) * sizeof *a), *b = malloc((size_t)(k * ldb) * sizeof *b);
    double *c0 = malloc((size_t)(m * ldc) * sizeof *c0), *c[2];
    for (int64_t i = 0; i < m * a_row; i++) a[i] = rnd_gauss();
    for (int64_t i = 0; i < k * ldb; i++) b[i] = rnd_gauss();
    for (int64_t i = 0; i < m * ldc; i++) c0[i] = rnd_gauss();
    for (int q = 0; q < n_isa(); q++) {
        c[q] = malloc((size_t)(m * ldc) * sizeof *c[q]);
        memcpy(c[q], c0, (size_t)(m * ldc) * sizeof *c0);
        const hfq_dgemm g = {.m = m, .n = n, .k = k, .a = a, .a_row = a_row, .a_col = 1, .b = b, .ldb = ldb,
                             .c = c[q], .ldc = ldc, .lo = lo, .hi = hi, .neg = neg};
        hfq_dgemm_run(&g, isa_at(q));
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) {
            double want = c0[i * ldc + j];
            if (j < n && j - i >= lo && j - i <= hi)
                for (int64_t kk = 0; kk < k; kk++) want = fma(neg ? -a[i * a_row + kk] : a[i * a_row + kk], b[kk * ldb + j], want);
            for (int q = 0; q < n_isa(); q++) bad += memcmp(&want, &c[q][i * ldc + j], sizeof want) != 0;
        }
    CHECK_MSG(bad == 0, "dgemm %lld x %lld x %lld band [%lld, %lld]: %lld elements differ", (long long)m,
              (long long)n, (long long)k, (long long)lo, (long long)hi, (long long)bad);
    for (int q = 0; q < n_isa(); q++) free(c[q]);
    free(a);
    free(b);
    free(c0);
}

/* A random SPD Hessian (X^T X of correlated rows, upper triangle). */
static double *spd(int64_t n) {
    const int64_t t = 2 * n + 3;
    float *x = malloc((size_t)(t * n) * sizeof *x);
    for (int64_t k = 0; k < t; k++) {
        float prev = 0.0f;
        for (int64_t i = 0; i < n; i++) x[k * n + i] = prev = 0.6f * prev + rnd_gauss() * (i % 9 == 2 ? 5.0f : 1.0f);
    }
    hfq_hessian_input in = {.name = "w", .n = n};
    hfq_hessian_set s;
    CHECK(hfq_hessian_set_init(&s, &in, 1, 1, &(hfq_error){{0}}) == 0);
    hfq_hessian_add(&s.e[0], x, t, 1);
    double *h = s.e[0].h;
    s.e[0].h = NULL;
    hfq_hessian_set_free(&s);
    free(x);
    return h;
}

static void prepare_case(int64_t n) {
    double *h = spd(n), *first = NULL, *u = malloc((size_t)(n * n) * sizeof *u);
    for (int q = 0; q < n_isa(); q++)
        for (int threads = 1; threads <= 2; threads++) {
            memcpy(u, h, (size_t)(n * n) * sizeof *u);
            for (int64_t i = 1; i < n; i++) u[i * n] = 1e300; /* the strict lower triangle is not read */
            CHECK(hfq_gptq_prepare_isa(u, n, 0.01, threads, isa_at(q)) == 0);
            if (!first) {
                first = malloc((size_t)(n * n) * sizeof *first);
                memcpy(first, u, (size_t)(n * n) * sizeof *u);
            } else
                CHECK_MSG(memcmp(first, u, (size_t)(n * n) * sizeof *u) == 0, "n %lld: U with %s, %d threads differs",
                          (long long)n, q ? "AVX2" : "portable", threads);
        }
    double mean = 0.0, maxerr = 0.0, *utu = calloc((size_t)(n * n), sizeof *utu);
    for (int64_t i = 0; i < n; i++) mean += h[i * n + i] / (double)n;
    int64_t lower = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < n; k++) {
            if (k < i) lower += first[i * n + k] != 0.0;
            for (int64_t m = 0; m <= (i < k ? i : k); m++) utu[i * n + k] += first[m * n + i] * first[m * n + k];
        }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double v = 0.0; /* (U^T U hd)_ij with hd = H + damping, symmetric */
            for (int64_t k = 0; k < n; k++)
                v += utu[i * n + k] * ((k <= j ? h[k * n + j] : h[j * n + k]) + (k == j ? 0.01 * mean : 0.0));
            maxerr = fmax(maxerr, fabs(v - (i == j)));
        }
    free(utu);
    printf("U n %lld: %d kernels x 1, 2 threads identical; |U^T U H - I| %.2g\n", (long long)n, n_isa(), maxerr);
    CHECK(lower == 0);
    CHECK_MSG(maxerr < 1e-9, "n %lld: U^T U H - I: %g", (long long)n, maxerr);
    free(first);
    free(u);
    free(h);
}

int main(void) {
    rnd_seed(11);
    if (n_isa() == 1) printf("no AVX2 FMA here: the portable kernels only\n");
    dgemm_case(13, 21, 9, INT64_MIN / 2, INT64_MAX / 2, false);
    dgemm_case(29, 35, 17, -3, INT64_MAX / 2, true);
    dgemm_case(50, 41, 1, INT64_MIN / 2, 5, true);
    dgemm_case(40, 40, 64, -8, 8, false);
    const int64_t hn[] = {1, 7, 203, 301, 517};
    for (size_t i = 0; i < sizeof hn / sizeof *hn; i++) hessian_case(hn[i], 601);
    const int64_t pn[] = {1, 5, 67, 130, 301};
    for (size_t i = 0; i < sizeof pn / sizeof *pn; i++) prepare_case(pn[i]);
    return check_exit();
}
