/* quant_rows.h - deterministic random rows for the quantizer tests: a small
 * PRNG and a set of value distributions chosen to reach the corners of the
 * scale searches (zeros, constants, ties, outliers, tiny and huge values). */
#ifndef HFQ_TESTS_QUANT_ROWS_H
#define HFQ_TESTS_QUANT_ROWS_H

#include <math.h>
#include <stdint.h>

typedef struct test_rng {
    uint64_t s;
} test_rng;

static inline uint64_t rng_next(test_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static inline double rng_uniform(test_rng *r) {
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static inline double rng_gauss(test_rng *r) {
    double u = rng_uniform(r), v = rng_uniform(r);
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

enum row_kind {
    ROW_GAUSS,       /* N(0, 1) */
    ROW_UNIFORM,     /* U(-1, 1) */
    ROW_HEAVY,       /* Student-t-like tails plus rare 100x outliers */
    ROW_ZERO,        /* all zeros */
    ROW_CONSTANT,    /* one random value repeated */
    ROW_TINY,        /* ~1e-30 .. 1e-42: float subnormals, fp16 scale underflow */
    ROW_LARGE,       /* ~1e3 .. 1e8: fp16 scale overflow for the large end */
    ROW_BLOCK_SCALED,/* each 32 values scaled by 10^U(-3, 3) */
    ROW_OFFSET,      /* all positive, far from zero: exercises mins */
    ROW_INTEGERS,    /* small integers: many exact ties in the searches */
    ROW_SPARSE,      /* mostly zero, some gaussians */
    ROW_SIGNED_ZERO, /* +0.0 and -0.0 only */
    ROW_SPIKE,       /* one gaussian per 256, zeros elsewhere */
    ROW_KIND_COUNT
};

static inline const char *row_kind_name(int k) {
    static const char *names[ROW_KIND_COUNT] = {"gauss", "uniform", "heavy", "zero", "constant", "tiny",
                                                "large", "block_scaled", "offset", "integers", "sparse",
                                                "signed_zero", "spike"};
    return names[k];
}

static inline void fill_row(test_rng *r, int kind, float *x, int64_t n) {
    double c = rng_gauss(r) * 3;
    double tiny_scale = pow(10.0, -30 - 12 * rng_uniform(r));
    double large_scale = pow(10.0, 3 + 5 * rng_uniform(r));
    double block_scale = 1;
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        if (i % 32 == 0) block_scale = pow(10.0, 6 * rng_uniform(r) - 3);
        switch (kind) {
        case ROW_GAUSS: v = rng_gauss(r); break;
        case ROW_UNIFORM: v = 2 * rng_uniform(r) - 1; break;
        case ROW_HEAVY:
            v = rng_gauss(r) / sqrt(rng_uniform(r) + 0.01);
            if (rng_uniform(r) < 0.002) v *= 100;
            break;
        case ROW_ZERO: v = 0; break;
        case ROW_CONSTANT: v = c; break;
        case ROW_TINY: v = rng_gauss(r) * tiny_scale; break;
        case ROW_LARGE: v = rng_gauss(r) * large_scale; break;
        case ROW_BLOCK_SCALED: v = rng_gauss(r) * block_scale; break;
        case ROW_OFFSET: v = 5 + rng_uniform(r); break;
        case ROW_INTEGERS: v = (double)((int)(rng_uniform(r) * 9) - 4); break;
        case ROW_SPARSE: v = rng_uniform(r) < 0.1 ? rng_gauss(r) : 0; break;
        case ROW_SIGNED_ZERO: v = rng_uniform(r) < 0.5 ? -0.0 : 0.0; break;
        case ROW_SPIKE: v = i % 256 == 97 ? rng_gauss(r) : 0; break;
        }
        x[i] = (float)v;
    }
}

/* Importance weights as calibration produces them (mean x^2 per column):
 * positive, spread over orders of magnitude, a few exact zeros. */
static inline void fill_importance(test_rng *r, float *w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double v = exp(2 * rng_gauss(r));
        if (rng_uniform(r) < 0.02) v = 0;
        w[i] = (float)v;
    }
}

#endif
