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
 *     U^T U (H + damping) = I, strict lower triangle 0;
 *   - GPTQ against quantized inputs: the cross term D = sum (x - xq) x^T
 *     agrees with long double, the same bits for threads and kernels, and
 *     leaves H the float inputs' bit for bit; the target shift M satisfies
 *     M (H + damping) = D, the same in act-order (P H P^T's U and perm) and
 *     for 1 and 2 threads; hfq_gptq_shift_row is w + w M; on a layer whose
 *     inputs are quantized with a systematic error, the shifted weights'
 *     output error on the quantized inputs is far below the unshifted ones'
 *     (and the opposite shift's is above).
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

/* The cross term of GPTQ against quantized inputs (xq: x rounded to
 * quarters, as an activation format would). */
static void cross_case(int64_t n, int64_t t) {
    float *x = malloc((size_t)(t * n) * sizeof *x), *xq = malloc((size_t)(t * n) * sizeof *xq);
    for (int64_t i = 0; i < t * n; i++) {
        x[i] = rnd_gauss() * (i % n == 3 ? 10.0f : 1.0f) + (i % n == 0 ? 2.0f : 0.0f);
        xq[i] = nearbyintf(x[i] * 4.0f) / 4.0f;
    }
    const int64_t cuts[] = {0, 37, 300, t};
    hfq_hessian_input in = {.name = "w", .n = n};
    double *d0 = NULL;
    hfq_hessian_set plain;
    CHECK(hfq_hessian_set_init(&plain, &in, 1, 1, &(hfq_error){{0}}) == 0);
    hfq_hessian_add(&plain.e[0], x, t, 1);
    for (int k = 0; k < n_isa(); k++)
        for (int threads = 1; threads <= 2; threads++) {
            hfq_hessian_set s;
            CHECK(hfq_hessian_set_init(&s, &in, 1, threads, &(hfq_error){{0}}) == 0);
            CHECK(hfq_hessian_set_cross(&s, &(hfq_error){{0}}) == 0);
            for (int c = 0; c < 3; c++)
                hfq_hessian_add_quantized_isa(&s.e[0], x + cuts[c] * n, xq + cuts[c] * n, cuts[c + 1] - cuts[c],
                                              threads, isa_at(k));
            CHECK_MSG(memcmp(plain.e[0].h, s.e[0].h, (size_t)(n * n) * sizeof(double)) == 0,
                      "n %lld: H with the cross term is not the float inputs' H", (long long)n);
            if (!d0) {
                d0 = malloc((size_t)(n * n) * sizeof *d0);
                memcpy(d0, s.e[0].cross, (size_t)(n * n) * sizeof *d0);
            } else
                CHECK_MSG(memcmp(d0, s.e[0].cross, (size_t)(n * n) * sizeof *d0) == 0,
                          "n %lld: D with %s, %d threads differs", (long long)n, k ? "AVX2" : "portable", threads);
            hfq_hessian_set_free(&s);
        }
    double maxrel = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            long double ref = 0.0L, mag = 0.0L;
            for (int64_t k = 0; k < t; k++) {
                const long double di = (long double)x[k * n + i] - xq[k * n + i];
                ref += di * x[k * n + j];
                mag += fabsl(di * x[k * n + j]);
            }
            maxrel = fmax(maxrel, (double)(fabsl(d0[i * n + j] - ref) / (mag > 0 ? mag : 1.0L)));
        }
    printf("cross term n %lld: %d kernels x 1, 2 threads identical, H unchanged; vs long double %.2g\n",
           (long long)n, n_isa(), maxrel);
    CHECK_MSG(maxrel < 1e-13, "n %lld: D vs long double %g", (long long)n, maxrel);
    hfq_hessian_set_free(&plain);
    free(d0);
    free(x);
    free(xq);
}

/* max |M (H + damping) - D| / max |D| for M from D. */
static double shift_residual(const double *m, const double *h, const double *d, int64_t n, double damp) {
    double mean = 0.0, err = 0.0, dmax = 0.0;
    for (int64_t i = 0; i < n; i++) mean += h[i * n + i] / (double)n;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double v = 0.0;
            for (int64_t k = 0; k < n; k++)
                v += m[i * n + k] * ((k <= j ? h[k * n + j] : h[j * n + k]) + (k == j ? damp * mean : 0.0));
            err = fmax(err, fabs(v - d[i * n + j]));
            dmax = fmax(dmax, fabs(d[i * n + j]));
        }
    return err / dmax;
}

static void shift_case(int64_t n) {
    const size_t bytes = (size_t)(n * n) * sizeof(double);
    double *h = spd(n), *u = malloc(bytes), *hp = malloc(bytes), *d = malloc(bytes), *m1 = malloc(bytes),
           *m2 = malloc(bytes), *mp = malloc(bytes);
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    for (int64_t i = 0; i < n * n; i++) d[i] = rnd_gauss() * (i % 7 == 1 ? 30.0 : 1.0);
    memcpy(u, h, bytes);
    CHECK(hfq_gptq_prepare(u, n, 0.01, 1) == 0);
    memcpy(m1, d, bytes);
    memcpy(m2, d, bytes);
    CHECK(hfq_gptq_target_shift(m1, u, n, NULL, 1) == 0);
    CHECK(hfq_gptq_target_shift(m2, u, n, NULL, 2) == 0);
    CHECK_MSG(memcmp(m1, m2, bytes) == 0, "n %lld: the shift differs between 1 and 2 threads", (long long)n);
    const double r = shift_residual(m1, h, d, n, 0.01);
    /* act-order: the same M from the permuted Hessian's U */
    memcpy(hp, h, bytes);
    CHECK(hfq_gptq_act_order(hp, n, perm) == 0);
    CHECK(hfq_gptq_prepare(hp, n, 0.01, 2) == 0);
    memcpy(mp, d, bytes);
    CHECK(hfq_gptq_target_shift(mp, hp, n, perm, 2) == 0);
    const double rp = shift_residual(mp, h, d, n, 0.01);
    /* w + w M, against long double */
    float *w = malloc((size_t)n * sizeof *w), *ws = malloc((size_t)n * sizeof *ws);
    double *tmp = malloc((size_t)n * sizeof *tmp), row_err = 0.0;
    for (int64_t i = 0; i < n; i++) w[i] = ws[i] = rnd_gauss();
    hfq_gptq_shift_row(m1, n, ws, tmp);
    for (int64_t l = 0; l < n; l++) {
        long double v = w[l], mag = fabsf(w[l]);
        for (int64_t i = 0; i < n; i++) {
            v += (long double)w[i] * m1[i * n + l];
            mag += fabsl((long double)w[i] * m1[i * n + l]);
        }
        row_err = fmax(row_err, (double)(fabsl(ws[l] - v) / mag));
    }
    printf("target shift n %lld: |M (H + damping) - D| %.2g (act-order %.2g), 1 = 2 threads; w + w M %.2g\n",
           (long long)n, r, rp, row_err);
    CHECK_MSG(r < 1e-9 && rp < 1e-9, "n %lld: M (H + damping) - D: %g / %g", (long long)n, r, rp);
    CHECK_MSG(row_err < 1e-6, "n %lld: shifted row %g", (long long)n, row_err); /* float output */
    free(w);
    free(ws);
    free(tmp);
    free(perm);
    free(h);
    free(u);
    free(hp);
    free(d);
    free(m1);
    free(m2);
    free(mp);
}

/* sum over tokens and rows of |W x - W' xq|^2 */
static double layer_error(const float *w, const float *ws, const float *x, const float *xq, int64_t rows, int64_t n,
                          int64_t t) {
    double e = 0.0;
    for (int64_t k = 0; k < t; k++)
        for (int64_t r = 0; r < rows; r++) {
            double y = 0.0, yq = 0.0;
            for (int64_t i = 0; i < n; i++) {
                y += (double)w[r * n + i] * x[k * n + i];
                yq += (double)ws[r * n + i] * xq[k * n + i];
            }
            e += (y - yq) * (y - yq);
        }
    return e;
}

/* The shift's sign and orientation end to end: inputs rounded to quarters
 * and shrunk by 10 % (a linear error the float input predicts). */
static void shift_layer_case(int64_t n, int64_t rows, int64_t t) {
    float *x = malloc((size_t)(t * n) * sizeof *x), *xq = malloc((size_t)(t * n) * sizeof *xq);
    float *w = malloc((size_t)(rows * n) * sizeof *w), *wp = malloc((size_t)(rows * n) * sizeof *wp),
          *wm = malloc((size_t)(rows * n) * sizeof *wm);
    for (int64_t k = 0; k < t; k++) {
        float prev = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            x[k * n + i] = prev = 0.5f * prev + rnd_gauss();
            xq[k * n + i] = 0.9f * nearbyintf(x[k * n + i] * 4.0f) / 4.0f;
        }
    }
    for (int64_t i = 0; i < rows * n; i++) w[i] = rnd_gauss();
    hfq_hessian_input in = {.name = "w", .n = n};
    hfq_hessian_set s;
    CHECK(hfq_hessian_set_init(&s, &in, 1, 1, &(hfq_error){{0}}) == 0);
    CHECK(hfq_hessian_set_cross(&s, &(hfq_error){{0}}) == 0);
    hfq_hessian_add_quantized(&s.e[0], x, xq, t, 1);
    CHECK(hfq_gptq_prepare(s.e[0].h, n, 0.01, 1) == 0);
    CHECK(hfq_gptq_target_shift(s.e[0].cross, s.e[0].h, n, NULL, 1) == 0);
    double *tmp = malloc((size_t)n * sizeof *tmp);
    memcpy(wp, w, (size_t)(rows * n) * sizeof *w);
    for (int64_t r = 0; r < rows; r++) hfq_gptq_shift_row(s.e[0].cross, n, wp + r * n, tmp);
    for (int64_t i = 0; i < rows * n; i++) wm[i] = 2.0f * w[i] - wp[i]; /* w - w M */
    const double e0 = layer_error(w, w, x, xq, rows, n, t), ep = layer_error(w, wp, x, xq, rows, n, t),
                 em = layer_error(w, wm, x, xq, rows, n, t);
    printf("target shift on a layer (n %lld): output error on quantized inputs %.3g of the unshifted weights' "
           "(the opposite shift %.3g)\n", (long long)n, ep / e0, em / e0);
    CHECK_MSG(ep < 0.5 * e0 && em > e0, "n %lld: shifted %g, opposite %g, unshifted %g", (long long)n, ep, em, e0);
    hfq_hessian_set_free(&s);
    free(tmp);
    free(x);
    free(xq);
    free(w);
    free(wp);
    free(wm);
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
    const int64_t cn[] = {1, 9, 203, 301};
    for (size_t i = 0; i < sizeof cn / sizeof *cn; i++) cross_case(cn[i], 601);
    const int64_t sn[] = {1, 6, 67, 301};
    for (size_t i = 0; i < sizeof sn / sizeof *sn; i++) shift_case(sn[i]);
    shift_layer_case(48, 16, 700);
    return check_exit();
}
