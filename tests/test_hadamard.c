/* test_hadamard.c - quant/hadamard.h against a dense Q = D H / sqrt(N) built
 * here: Sylvester's recursion for H, D from a splitmix64 stream stepped as
 * src/quantize/rotate.c steps it (one draw per index, top bit). Also: dots
 * preserved ((w Q) . (x Q) = w . x), the row rotated alone equals the row
 * inside a batch (no state), and hfq_hadamard_fits' limits. */
#include <stdint.h>

#include "quant/hadamard.h"
#include "tests/check.h"

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* H_N[i][j] = (-1)^popcount(i & j): Sylvester's matrix, entry by entry. */
static double sylvester(int64_t i, int64_t j) { return __builtin_popcountll((unsigned long long)(i & j)) & 1 ? -1.0 : 1.0; }

/* y = x Q in double, densely: y_j = sum_i x_i D_ii H[i % N][j % N] / sqrt(N) over i in j's block. */
static void dense(const float *x, double *y, int64_t n, int64_t block, uint64_t seed) {
    double *d = malloc((size_t)n * sizeof *d);
    uint64_t st = seed;
    for (int64_t i = 0; i < n; i++) d[i] = seed == 0 ? 1.0 : (splitmix64(&st) >> 63) ? -1.0 : 1.0;
    for (int64_t j = 0; j < n; j++) {
        const int64_t b0 = j / block * block;
        double s = 0.0;
        for (int64_t i = b0; i < b0 + block; i++) s += (double)x[i] * d[i] * sylvester(i - b0, j - b0);
        y[j] = s / sqrt((double)block);
    }
    free(d);
}

int main(void) {
    static const int64_t blocks[] = {2, 4, 16, 32, 128};
    static const uint64_t seeds[] = {0, 1, 7};
    uint64_t rng = 42;
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
        for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
            const int64_t block = blocks[b], n = 3 * block;
            float *x = malloc((size_t)n * sizeof *x), *w = malloc((size_t)n * sizeof *w);
            double *ref = malloc((size_t)n * sizeof *ref);
            double dot = 0.0, dot_rot = 0.0, worst = 0.0, amax = 0.0;
            for (int64_t j = 0; j < n; j++) {
                x[j] = (float)((double)(splitmix64(&rng) >> 11) / 9007199254740992.0 - 0.5) * (j % 7 == 0 ? 40.0f : 1.0f);
                w[j] = (float)((double)(splitmix64(&rng) >> 11) / 9007199254740992.0 - 0.5);
                dot += (double)x[j] * w[j];
            }
            dense(x, ref, n, block, seeds[s]);
            hfq_hadamard_rotate_row(x, n, block, seeds[s]);
            hfq_hadamard_rotate_row(w, n, block, seeds[s]);
            for (int64_t j = 0; j < n; j++) {
                worst = fmax(worst, fabs((double)x[j] - ref[j]));
                amax = fmax(amax, fabs(ref[j]));
                dot_rot += (double)x[j] * w[j];
            }
            CHECK_MSG(worst <= 1e-6 * amax * log2((double)block + 1), "N %lld seed %llu: |fwht - dense| %.3g of %.3g",
                      (long long)block, (unsigned long long)seeds[s], worst, amax);
            CHECK_NEAR(dot_rot, dot, 1e-5 * (1.0 + fabs(dot)));
            free(x);
            free(w);
            free(ref);
        }
    CHECK(hfq_hadamard_fits(64, 16) && hfq_hadamard_fits(4096, 4096) && hfq_hadamard_fits(6, 2));
    CHECK(!hfq_hadamard_fits(64, 24) && !hfq_hadamard_fits(172, 16) && !hfq_hadamard_fits(8192, 8192) &&
          !hfq_hadamard_fits(64, 1) && !hfq_hadamard_fits(0, 16) && !hfq_hadamard_fits(64, -16));
    return check_exit();
}
