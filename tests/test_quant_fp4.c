/* MXFP4 / NVFP4 on their own: codecs against the specs, hand-computed
 * blocks, error bounds, nearest-code optimality, the global scale, the
 * importance search and dot products against double precision. Bit-exact
 * agreement with ggml is test_quant_fp4_ggml.c. */
#include <float.h>
#include <stdint.h>

#include "quant/fp4.h"
#include "tests/check.h"
#include "tests/quant_rng.h"

/* OCP MX spec's E2M1 magnitudes: 0, 0.5, 1, 1.5, 2, 3, 4, 6. */
static const double E2M1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

static void test_codecs(void) {
    for (unsigned c = 0; c < 16; c++)
        CHECK_MSG(hfq_e2m1_doubled(c) == (c & 8 ? -2 : 2) * E2M1[c & 7], "code %u", c);
    CHECK(hfq_e8m0_half_to_f32(0) == ldexpf(1.0f, -128));
    CHECK(hfq_e8m0_half_to_f32(1) == ldexpf(1.0f, -127));
    for (int e = 2; e < 256; e++) CHECK_MSG(hfq_e8m0_half_to_f32((uint8_t)e) == ldexpf(1.0f, e - 128), "e=%d", e);
    /* UE4M3 = positive E4M3 (bias 7, subnormal m*2^-9), halved; 0x7F is 0 */
    for (unsigned c = 0; c < 0x7F; c++) {
        const unsigned ex = c >> 3, m = c & 7;
        const double v = ex ? ldexp(1 + m / 8.0, (int)ex - 7) : ldexp(m, -9);
        CHECK_MSG(hfq_ue4m3_half_to_f32((uint8_t)c) == (float)(v / 2), "ue4m3 0x%02x", c);
    }
    CHECK(hfq_ue4m3_half_to_f32(0x7F) == 0.0f);
    CHECK(hfq_ue4m3_half_to_f32(0xFF) == 240.0f); /* bit 7 ignored: 1.875 * 2^8 / 2 */
    CHECK(hfq_ue4m3_half_to_f32(0xB8) == 0.5f);

    /* ggml's UE4M3 rounding, hand-computed */
    CHECK(hfq_ue4m3_from_f32_ggml(1.0f) == 0x38);
    CHECK(hfq_ue4m3_from_f32_ggml(0.5f) == 0x30);
    CHECK(hfq_ue4m3_from_f32_ggml(1.0625f) == 0x39); /* mantissa tie rounds up */
    CHECK(hfq_ue4m3_from_f32_ggml(1.1875f) == 0x3A); /* tie 1.125|1.25 -> up */
    CHECK(hfq_ue4m3_from_f32_ggml(255.0f) == 0x7E);  /* rounds up into exponent 15 */
    CHECK(hfq_ue4m3_from_f32_ggml(240.0f) == 0x77);
    CHECK(hfq_ue4m3_from_f32_ggml(300.0f) == 0x7E);  /* ggml: all of [256, 448] -> 448 */
    CHECK(hfq_ue4m3_from_f32_ggml(1e30f) == 0x7E);
    CHECK(hfq_ue4m3_from_f32_ggml(0.0f) == 0 && hfq_ue4m3_from_f32_ggml(-1.0f) == 0);
    CHECK(hfq_ue4m3_from_f32_ggml(NAN) == 0);
    CHECK(hfq_ue4m3_from_f32_ggml(0.0078125f) == 0x04); /* 2^-7 = 4 * 2^-9 */
    CHECK(hfq_ue4m3_from_f32_ggml(0.0155f) == 0x07);    /* 7.94 -> 8, capped at 7 */
    CHECK(hfq_ue4m3_from_f32_ggml(0.0009f) == 0x00);    /* 0.46 * 2^-9 */

    /* E2M1 round to nearest even, doubled units */
    const float ties[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
    const uint8_t even[7] = {0, 2, 2, 4, 4, 6, 6};
    for (int i = 0; i < 7; i++) {
        CHECK_MSG(hfq_e2m1_rne_doubled(ties[i]) == even[i], "tie %g", (double)ties[i]);
        CHECK(hfq_e2m1_rne_doubled(-ties[i]) == (even[i] ? (8 | even[i]) : 0));
        CHECK(hfq_e2m1_rne_doubled(nextafterf(ties[i], 0)) == i);
        CHECK(hfq_e2m1_rne_doubled(nextafterf(ties[i], 100)) == i + 1);
    }
    CHECK(hfq_e2m1_rne_doubled(13.0f) == 7 && hfq_e2m1_rne_doubled(-1e30f) == 15);
    CHECK(hfq_e2m1_rne_doubled(NAN) == 0 && hfq_e2m1_rne_doubled(-0.1f) == 0);
    /* ggml's nearest: ties to the smaller magnitude */
    CHECK(hfq_fp4_nearest_ggml(1.5f, 1.0f) == 1 && hfq_fp4_nearest_ggml(-1.5f, 1.0f) == 9);
    CHECK(hfq_fp4_nearest_ggml(10.0f, 1.0f) == 6 && hfq_fp4_nearest_ggml(-0.5f, 1.0f) == 0);
    CHECK(hfq_fp4_nearest_ggml(100.0f, 1.0f) == 7);
}

static void test_known_blocks(void) {
    float x[64] = {0};
    /* MXFP4: amax 6 -> e = 2 - 2 + 127 = 127, d = 0.5 */
    x[0] = 1.0f;   /* 2 -> code 2 */
    x[1] = -0.5f;  /* -1 -> code 9 */
    x[2] = 3.0f;   /* 6 -> code 5 */
    x[3] = 6.0f;   /* 12 -> code 7 */
    x[4] = 0.25f;  /* 0.5: tie 0|1 -> 0 */
    x[16] = -6.0f; /* -12 -> code 15, high nibble of qs[0] */
    x[17] = 0.75f; /* 1.5: tie 1|2 -> 1 */
    hfq_block_mxfp4 m;
    CHECK(hfq_quantize_mxfp4(x, &m, 1, 32, NULL) == 17);
    const uint8_t mq[16] = {0xF2, 0x19, 0x05, 0x07};
    CHECK(m.e == 127 && memcmp(m.qs, mq, 16) == 0);

    /* NVFP4 reference: sub-block 0 amax 6 -> scale 1.0 (0x38), d = 0.5;
     * sub-block 1 amax 3 -> 0.5 (0x30), d = 0.25; sub-block 2 zeros;
     * sub-block 3 amax 1e-3 -> 1.7e-4 rounds to UE4M3 0: all codes 0 */
    float y[64] = {0};
    y[0] = 1.0f;
    y[1] = -0.5f;
    y[8] = 6.0f;     /* element 8 -> high nibble of qs[0] */
    y[9] = 0.25f;    /* tie -> 0 */
    y[16] = 3.0f;    /* 12 -> 7 */
    y[17] = 0.375f;  /* 1.5: tie -> 1 */
    y[24] = -0.125f; /* -0.5: tie -> +0 */
    y[48] = 1e-3f;
    y[63] = -1e-3f;
    hfq_block_nvfp4 n;
    CHECK(hfq_quantize_nvfp4(y, &n, 1, 64, NULL, 0.0f) == 36);
    const uint8_t nd[4] = {0x38, 0x30, 0x00, 0x00};
    const uint8_t nq[32] = {0x72, 0x09, [8] = 0x07, 0x01};
    CHECK(memcmp(n.d, nd, 4) == 0 && memcmp(n.qs, nq, 32) == 0);

    /* global scale 0.5: sub-block 0 scale (6/6)/0.5 = 2 (0x40), so doubled
     * units of 2 * 0.5 / 2 = 0.5, and ties go to the even code */
    y[9] = 0.75f;   /* 1.5: tie 1|2 -> 2 (even) */
    y[2] = 0.25f;   /* 0.5: tie 0|1 -> 0 */
    CHECK(hfq_quantize_nvfp4(y, &n, 1, 64, NULL, 0.5f) == 36);
    CHECK(n.d[0] == 0x40 && n.d[1] == 0x38);
    CHECK(n.qs[0] == (0x2 | (0x7 << 4)) && n.qs[1] == (0x9 | (0x2 << 4)) && n.qs[2] == 0);
    /* sub-block 1: scale (3/6)/0.5 = 1 (0x38), doubled units of 0.25:
     * 3 -> 12 (7), 0.375 -> 1.5: tie -> 2, -0.125 -> -0.5: tie -> +0 */
    CHECK(n.qs[8] == 0x07 && n.qs[9] == 0x02);
    /* sub-block 3: (1e-3/6)/0.5 = 3.3e-4 -> E4M3 subnormal round(0.17) = 0 */
    CHECK(n.d[3] == 0x00 && n.qs[24] == 0 && n.qs[31] == 0);
}

/* Rows of one distribution kind: gaussian, uniform, outliers, zeros in
 * places, tiny, huge, log-uniform magnitudes. */
static void fill_row(float *x, int n, int kind) {
    for (int i = 0; i < n; i++) {
        float v = rnd_gauss();
        switch (kind % 7) {
        case 1: v = rnd_uniform() * 2.0f - 1.0f; break;
        case 2: v *= (rnd_u32() % 40 == 0) ? 80.0f : 1.0f; break;
        case 3: v = (i / 16) % 3 == 0 ? 0.0f : v; break;
        case 4: v *= 1e-30f; break;
        case 5: v *= 1e30f; break;
        case 6: v = (rnd_u32() & 1 ? -1.0f : 1.0f) * ldexpf(1.0f + (float)(rnd_u32() % 1000) / 1000.0f, (int)(rnd_u32() % 60) - 30); break;
        default: break;
        }
        x[i] = v;
    }
}

/* Bound for one decoded value at grid unit u (the E2M1 step 1.0): half the
 * local spacing is at most max(|x|, u)/4; beyond 6u the value clips. */
static int within_bound(float x, double got, double u) {
    const double a = fabs((double)x);
    const double bound = a > 6 * u ? a - 6 * u : fmax(a, u) / 4;
    return fabs((double)x - got) <= bound * (1 + 1e-6) + 1e-45;
}

/* No code with this scale decodes closer to x than `got`. */
static int is_nearest(float x, double got, double d_half) {
    for (unsigned c = 0; c < 16; c++)
        if (fabs((double)hfq_e2m1_doubled(c) * d_half - x) < fabs(got - x) * (1 - 1e-9) - 1e-45) return 0;
    return 1;
}

enum { ROWS = 28, COLS = 256 };

static void test_mxfp4_rows(void) {
    static float x[ROWS * COLS], y[COLS];
    static hfq_block_mxfp4 q[ROWS * COLS / 32];
    for (int r = 0; r < ROWS; r++) fill_row(x + r * COLS, COLS, r);
    CHECK(hfq_quantize_mxfp4(x, q, ROWS, COLS, NULL) == sizeof q);
    int bad_bound = 0, bad_near = 0, bad_e = 0;
    for (int r = 0; r < ROWS; r++) {
        hfq_dequantize_row_mxfp4(q + r * COLS / 32, y, COLS);
        for (int b = 0; b < COLS / 32; b++) {
            const hfq_block_mxfp4 *blk = q + r * COLS / 32 + b;
            const float *xb = x + r * COLS + b * 32;
            double amax = 0;
            for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(xb[j]));
            /* e is the exponent of amax minus 2, so amax lies in [4u, 8u) */
            const double u = ldexp(1.0, blk->e - 127);
            if (amax > 0 && !(amax >= 4 * u && amax < 8 * u)) bad_e++;
            for (int j = 0; j < 32; j++) {
                bad_bound += !within_bound(xb[j], y[b * 32 + j], u);
                bad_near += !is_nearest(xb[j], y[b * 32 + j], u / 2);
            }
        }
    }
    CHECK_MSG(bad_bound == 0 && bad_near == 0 && bad_e == 0, "bound %d nearest %d exponent %d", bad_bound, bad_near, bad_e);
    CHECK(hfq_quantize_mxfp4(x, q, 1, 48, NULL) == 0);
    /* below 2^-125 ggml's formula is undefined: clamped to e = 0 */
    float tiny[32] = {ldexpf(1.0f, -130)};
    CHECK(hfq_quantize_mxfp4(tiny, q, 1, 32, NULL) == 17 && q[0].e == 0);
    tiny[0] = INFINITY;
    CHECK(hfq_quantize_mxfp4(tiny, q, 1, 32, NULL) == 17 && q[0].e == 254);
}

static void check_nvfp4_rows(const float *x, int rows, float g, const char *what) {
    static float y[COLS];
    static hfq_block_nvfp4 q[ROWS * COLS / 64];
    CHECK(hfq_quantize_nvfp4(x, q, rows, COLS, NULL, g) == (size_t)rows * COLS / 64 * 36);
    int bad_bound = 0, bad_near = 0, top = 0, zero_scales = 0;
    for (int r = 0; r < rows; r++) {
        hfq_dequantize_row_nvfp4(q + r * COLS / 64, y, COLS);
        for (int sb = 0; sb < COLS / 16; sb++) {
            const uint8_t code = q[r * COLS / 64 + sb / 4].d[sb % 4];
            const double d_half = (double)hfq_ue4m3_half_to_f32(code) * (g > 0 ? g : 1.0);
            zero_scales += code == 0;
            for (int j = 0; j < 16; j++) {
                const float xv = x[r * COLS + sb * 16 + j];
                const double got = (double)y[sb * 16 + j] * (g > 0 ? g : 1.0);
                bad_near += !is_nearest(xv, got, d_half);
                if (code != 0) bad_bound += !within_bound(xv, got, 2 * d_half);
                top += code == 0x7E && fabsf(xv) > 0;
            }
        }
    }
    CHECK_MSG(bad_bound == 0 && bad_near == 0, "%s: bound %d nearest %d", what, bad_bound, bad_near);
    CHECK_MSG(zero_scales < rows * COLS / 16 / 4, "%s: %d zero scales", what, zero_scales);
    /* with a global scale the tensor's maximum uses the top scale */
    if (g > 0) CHECK(top > 0);
}

static void test_nvfp4_rows(void) {
    static float x[ROWS * COLS];
    static hfq_block_nvfp4 q[COLS / 64];
    for (int r = 0; r < ROWS; r++) fill_row(x + r * COLS, COLS, r);
    check_nvfp4_rows(x, ROWS, 0.0f, "reference");
    /* NVIDIA's global scale over rows whose range E4M3 scales cover
     * (gaussian, uniform, outliers, zeros in places) */
    for (int r = 0; r < 8; r++) fill_row(x + r * COLS, COLS, r % 4);
    check_nvfp4_rows(x, 8, hfq_nvfp4_global_scale(x, 8 * COLS), "global scale");
    /* the global-scale path: scale codes are E4M3 RNE of (amax/6)/g */
    const float g = 0.01f;
    CHECK(hfq_quantize_nvfp4(x, q, 1, COLS, NULL, g) == COLS / 64 * 36);
    for (int b = 0; b < COLS / 64; b++)
        for (int s = 0; s < 4; s++) {
            float amax = 0;
            for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(x[b * 64 + s * 16 + j]));
            CHECK(q[b].d[s] == hfq_f32_to_fp8_e4m3(amax / 6.0f / g));
        }
    CHECK(hfq_quantize_nvfp4(x, q, 1, 96, NULL, 0.0f) == 0);
    CHECK(hfq_nvfp4_global_scale(x, 0) == 0.0f);
}

static double block_error(const float *x, const float *y, const float *w, int n, float scale) {
    double e = 0;
    for (int j = 0; j < n; j++) e += (double)w[j] * pow((double)x[j] - (double)y[j] * scale, 2);
    return e;
}

static void test_importance(void) {
    /* MXFP4: values at 7.5 clip to 6 at e, round to 8 at e + 1 */
    float x[64], w[64], y[64];
    for (int j = 0; j < 32; j++) {
        x[j] = j % 2 ? 7.5f : -7.5f;
        w[j] = 1.0f;
    }
    hfq_block_mxfp4 m;
    hfq_quantize_mxfp4(x, &m, 1, 32, NULL);
    CHECK(m.e == 127);
    hfq_quantize_mxfp4(x, &m, 1, 32, w);
    CHECK(m.e == 128);
    hfq_decode_block_mxfp4(&m, y);
    CHECK(y[0] == -8.0f && y[1] == 8.0f);

    /* random rows with outliers: never worse than the reference under the
     * same weights, strictly better somewhere */
    enum { N = 1024 };
    static float xr[N], wr[N], yr[N], yi[N];
    static hfq_block_mxfp4 qm[N / 32], qmi[N / 32];
    static hfq_block_nvfp4 qn[N / 64], qni[N / 64];
    int improved_m = 0, improved_n = 0;
    for (int t = 0; t < 8; t++) {
        fill_row(xr, N, t % 3);
        for (int i = 0; i < N; i++) wr[i] = (float)(rnd_u32() % 1000) / 100.0f;
        hfq_quantize_mxfp4(xr, qm, 1, N, NULL);
        hfq_quantize_mxfp4(xr, qmi, 1, N, wr);
        hfq_dequantize_row_mxfp4(qm, yr, N);
        hfq_dequantize_row_mxfp4(qmi, yi, N);
        for (int b = 0; b < N / 32; b++) {
            const double er = block_error(xr + 32 * b, yr + 32 * b, wr + 32 * b, 32, 1.0f);
            const double ei = block_error(xr + 32 * b, yi + 32 * b, wr + 32 * b, 32, 1.0f);
            CHECK(ei <= er);
            improved_m += ei < er;
        }
        const float g = t % 2 ? hfq_nvfp4_global_scale(xr, N) : 0.0f;
        const float sc = g > 0 ? g : 1.0f;
        hfq_quantize_nvfp4(xr, qn, 1, N, NULL, g);
        hfq_quantize_nvfp4(xr, qni, 1, N, wr, g);
        hfq_dequantize_row_nvfp4(qn, yr, N);
        hfq_dequantize_row_nvfp4(qni, yi, N);
        for (int b = 0; b < N / 16; b++) {
            const double er = block_error(xr + 16 * b, yr + 16 * b, wr + 16 * b, 16, sc);
            const double ei = block_error(xr + 16 * b, yi + 16 * b, wr + 16 * b, 16, sc);
            CHECK_MSG(ei <= er * (1 + 1e-6), "t=%d sub %d: %.9g > %.9g", t, b, ei, er);
            improved_n += ei < er * (1 - 1e-9);
        }
    }
    CHECK(improved_m > 0 && improved_n > 0);
}

/* ---- a scalar reimplementation of the importance searches ---- */

/* Halved UE4M3 scale times g (g = 0: none), from the spec's formula. */
static float sc_scale(int code, float g) {
    const int ex = code >> 3, m = code & 7;
    const float d = (float)((ex ? ldexp(1 + m / 8.0, ex - 7) : ldexp(m, -9)) / 2);
    return g > 0 ? d * g : d;
}

/* Doubled E2M1 value of code c from the table. */
static float sc_value(int c) { return (float)((c & 8 ? -2 : 2) * E2M1[c & 7]); }

/* Code of x at halved scale d: the first least |v*d - x| (ggml), or the
 * nearest to x/d with ties to the even code and saturation (rne). */
static int sc_encode(float x, float d, int rne) {
    if (!rne) {
        int best = 0;
        for (int c = 1; c < 16; c++)
            if (fabsf(sc_value(c) * d - x) < fabsf(sc_value(best) * d - x)) best = c;
        return best;
    }
    if (d == 0.0f) return 0;
    const float t = fabsf(x / d);
    int best = 0;
    for (int m = 1; m < 8; m++) {
        const float dm = fabsf(t - sc_value(m)), db = fabsf(t - sc_value(best));
        if (dm < db || (dm == db && m % 2 == 0)) best = m;
    }
    return best == 0 ? 0 : best | (x < 0 ? 8 : 0);
}

/* sum of w * r^2 over the residuals r of the n values decoded at scale d
 * (in double: the decoded values are exact there) */
static double sc_error(const float *x, const float *w, int n, float d, int rne) {
    double r[32], e = 0;
    for (int j = 0; j < n; j++) r[j] = x[j] - (double)d * sc_value(sc_encode(x[j], d, rne));
    for (int j = 0; j < n; j++) e += w[j] * r[j] * r[j];
    return e;
}

/* NVFP4 sub-block: codes from 2 below the max -> 6 code to 2 above the
 * max -> 4 code, least error, the max -> 6 code on ties, then the lowest. */
static int sc_nvfp4_code(const float *x, const float *w, float g) {
    float amax = 0;
    for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(x[j]));
    const int c6 = g > 0 ? hfq_f32_to_fp8_e4m3(amax / 6 / g) : hfq_ue4m3_from_f32_ggml(amax / 6);
    const int c4 = g > 0 ? hfq_f32_to_fp8_e4m3(amax / 4 / g) : hfq_ue4m3_from_f32_ggml(amax / 4);
    int best = c6;
    double best_e = sc_error(x, w, 16, sc_scale(c6, g), g > 0);
    for (int c = c6 - 2; c <= c4 + 2; c++) {
        if (c < 0 || c > 0x7E || c == c6) continue;
        const double e = sc_error(x, w, 16, sc_scale(c, g), g > 0);
        if (e < best_e) {
            best = c;
            best_e = e;
        }
    }
    return best;
}

/* MXFP4 block: exponents e0, e0 - 1, e0 + 1 in that order, least error. */
static int sc_mxfp4_exponent(const float *x, const float *w) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const int e0 = amax > 0 ? (int)fminf(fmaxf(floorf(log2f(amax)) - 2 + 127, 0), 254) : 0; /* ggml's */
    int best = e0;
    double best_e = sc_error(x, w, 32, (float)ldexp(1.0, e0 - 128), 0);
    for (int e = e0 - 1; e <= e0 + 1; e += 2) {
        if (e < 0 || e > 254) continue;
        const double err = sc_error(x, w, 32, (float)ldexp(1.0, e - 128), 0);
        if (err < best_e) {
            best = e;
            best_e = err;
        }
    }
    return best;
}

static void test_search_reimplemented(void) {
    /* by hand: 6 and fifteen 5s. max -> 6 (scale 1, 0x38) rounds the 5s to
     * 4 (error 15), max -> 4 (1.5, 0x3C) to 4.5 (3.75); 1.625 (0x3D) puts
     * 4.875 and 6.5 on the grid: error 0.25 + 15 / 64, the least of
     * 0x36..0x3E */
    float x[16], w[16];
    for (int j = 0; j < 16; j++) {
        x[j] = j ? 5.0f : 6.0f;
        w[j] = 1.0f;
    }
    float xb[64] = {0}, wb[64];
    memcpy(xb, x, sizeof x);
    for (int j = 0; j < 64; j++) wb[j] = 1.0f;
    hfq_block_nvfp4 n;
    hfq_quantize_nvfp4(xb, &n, 1, 64, wb, 0.0f);
    CHECK_MSG(n.d[0] == 0x3D, "four over six: code 0x%02x", n.d[0]);
    CHECK(sc_nvfp4_code(x, w, 0.0f) == 0x3D);

    /* random rows, with and without a global scale, against the scalar
     * search: the same codes and bytes */
    enum { N = 1024 };
    static float xr[N], wr[N];
    static hfq_block_nvfp4 qn[N / 64];
    static hfq_block_mxfp4 qm[N / 32];
    int bad_n = 0, bad_m = 0, above_ref = 0, e_below = 0, e_above = 0;
    for (int t = 0; t < 21; t++) {
        fill_row(xr, N, t % 7);
        for (int i = 0; i < N; i++) wr[i] = t % 3 == 0 ? 1.0f : (float)(rnd_u32() % 1000) / 100.0f;
        const float g = t % 2 && t % 7 < 4 ? hfq_nvfp4_global_scale(xr, N) : 0.0f;
        hfq_quantize_nvfp4(xr, qn, 1, N, wr, g);
        for (int sb = 0; sb < N / 16; sb++) {
            const int want = sc_nvfp4_code(xr + 16 * sb, wr + 16 * sb, g);
            const float d = sc_scale(want, g);
            uint8_t qs[8];
            for (int j = 0; j < 8; j++)
                qs[j] = (uint8_t)(sc_encode(xr[16 * sb + j], d, g > 0) | sc_encode(xr[16 * sb + j + 8], d, g > 0) << 4);
            bad_n += qn[sb / 4].d[sb % 4] != want || memcmp(qn[sb / 4].qs + 8 * (sb % 4), qs, 8) != 0;
            float amax = 0;
            for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(xr[16 * sb + j]));
            above_ref += want > (g > 0 ? hfq_f32_to_fp8_e4m3(amax / 6 / g) : hfq_ue4m3_from_f32_ggml(amax / 6)) + 2;
        }
        hfq_quantize_mxfp4(xr, qm, 1, N, wr);
        for (int b = 0; b < N / 32; b++) {
            const int e = sc_mxfp4_exponent(xr + 32 * b, wr + 32 * b);
            uint8_t qs[16];
            for (int j = 0; j < 16; j++)
                qs[j] = (uint8_t)(sc_encode(xr[32 * b + j], (float)ldexp(1.0, e - 128), 0) |
                                  sc_encode(xr[32 * b + j + 16], (float)ldexp(1.0, e - 128), 0) << 4);
            bad_m += qm[b].e != e || memcmp(qm[b].qs, qs, 16) != 0;
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xr[32 * b + j]));
            const int e0 = amax > 0 ? (int)(floorf(log2f(amax)) - 2 + 127) : 0;
            e_below += amax > 0 && e == e0 - 1;
            e_above += amax > 0 && e == e0 + 1;
        }
    }
    CHECK_MSG(bad_n == 0 && bad_m == 0, "differ from the scalar search: nvfp4 %d, mxfp4 %d", bad_n, bad_m);
    /* the max -> 4 side of the range and both exponent neighbours are taken */
    CHECK_MSG(above_ref > 0 && e_below > 0 && e_above > 0, "max -> 4 side %d, e - 1 %d, e + 1 %d", above_ref,
              e_below, e_above);
}

/* W4A4 activations' scale search (hfq_quantize_nvfp4_act_search): the
 * worked example above at g = 1 (span 0x37..0x3D: max -> 6 is 0x38, max -> 4
 * 0x3C); an all-zero block and one holding NaN keep max -> 6; on random rows
 * (global scale from the row, as the runner's dynamic mode) the chosen code
 * lies in the span, its error (in double) is within float rounding of the
 * least over the span, its bytes are its codes, and codes on both sides of
 * max -> 6 are chosen. */
static void test_act_search(void) {
    float x[64] = {6.0f};
    for (int j = 1; j < 16; j++) x[j] = 5.0f;
    hfq_block_nvfp4 b;
    hfq_quantize_nvfp4_act_search(x, &b, 64, 1.0f);
    CHECK_MSG(b.d[0] == 0x3D && b.d[1] == 0, "worked example 0x%02x, zero block 0x%02x", b.d[0], b.d[1]);
    x[20] = NAN;
    x[21] = 5.0f;
    hfq_quantize_nvfp4_act_search(x, &b, 64, 1.0f);
    CHECK_MSG(b.d[1] == hfq_f32_to_fp8_e4m3(5.0f / 6.0f), "a NaN block: 0x%02x", b.d[1]);

    enum { N = 2048 };
    static float xr[N];
    static hfq_block_nvfp4 q[N / 64];
    static const float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    int bad_span = 0, bad_err = 0, bad_bytes = 0, below = 0, above = 0;
    for (int t = 0; t < 14; t++) {
        fill_row(xr, N, t % 7);
        const float g = hfq_nvfp4_global_scale(xr, N) * (t < 7 ? 1.0f : 0.01f);
        hfq_quantize_nvfp4_act_search(xr, q, N, g);
        for (int sb = 0; sb < N / 16; sb++) {
            const float *xs = xr + 16 * sb;
            float amax = 0;
            for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(xs[j]));
            const int c6 = hfq_f32_to_fp8_e4m3(amax / 6 / g), c4 = hfq_f32_to_fp8_e4m3(amax / 4 / g);
            const int got = q[sb / 4].d[sb % 4];
            double least = sc_error(xs, ones, 16, sc_scale(c6, g), 1);
            for (int c = c6 - 1 > 1 ? c6 - 1 : 1; c <= c4 + 1 && c <= 0x7E; c++)
                least = fmin(least, sc_error(xs, ones, 16, sc_scale(c, g), 1));
            bad_span += got != c6 && (got < c6 - 1 || got > c4 + 1 || got < 1);
            if (sc_error(xs, ones, 16, sc_scale(got, g), 1) > least * (1 + 1e-5) + 1e-30 && bad_err++ < 4)
                fprintf(stderr, "t %d c6 %x c4 %x got %x err %g least %g amax %g g %g\n", t, c6, c4, got, sc_error(xs, ones, 16, sc_scale(got, g), 1), least, amax, g);
            uint8_t qs[8];
            const float d = sc_scale(got, g);
            for (int j = 0; j < 8; j++) qs[j] = (uint8_t)(sc_encode(xs[j], d, 1) | sc_encode(xs[j + 8], d, 1) << 4);
            bad_bytes += memcmp(q[sb / 4].qs + 8 * (sb % 4), qs, 8) != 0;
            below += got < c6;
            above += got > c6;
        }
    }
    CHECK_MSG(bad_span == 0 && bad_err == 0 && bad_bytes == 0, "act search: %d outside the span, %d not least, %d bytes",
              bad_span, bad_err, bad_bytes);
    CHECK_MSG(below > 0 && above > 0, "act search took codes below max -> 6 %d times, above %d", below, above);
}

/* Q8_0 activations with random fp16 scales and values. */
static void random_q8_0(hfq_block_q8_0 *a, float *af, int nblocks) {
    for (int b = 0; b < nblocks; b++) {
        a[b].d = hfq_f32_to_fp16(ldexpf(1.0f + (float)(rnd_u32() % 1000) / 1000.0f, (int)(rnd_u32() % 12) - 10));
        for (int j = 0; j < 32; j++) {
            a[b].qs[j] = (int8_t)((int)(rnd_u32() % 255) - 127);
            af[b * 32 + j] = hfq_fp16_to_f32(a[b].d) * a[b].qs[j];
        }
    }
}

static void test_dots(void) {
    enum { N = 2048 };
    static float w[N], x[N], wm[N], wn[N], an[N], xq[N];
    static hfq_block_mxfp4 qm[N / 32];
    static hfq_block_nvfp4 qn[N / 64], qa[N / 64];
    static hfq_block_q8_0 q8[N / 32];
    for (int t = 0; t < 10; t++) {
        fill_row(w, N, t % 3);
        fill_row(x, N, 0);
        const float gw = t % 2 ? hfq_nvfp4_global_scale(w, N) : 0.0f;
        const float ga = hfq_nvfp4_global_scale(x, N);
        hfq_quantize_mxfp4(w, qm, 1, N, NULL);
        hfq_quantize_nvfp4(w, qn, 1, N, NULL, gw);
        hfq_quantize_nvfp4(x, qa, 1, N, NULL, ga);
        hfq_dequantize_row_mxfp4(qm, wm, N);
        hfq_dequantize_row_nvfp4(qn, wn, N);
        hfq_dequantize_row_nvfp4(qa, an, N);
        random_q8_0(q8, xq, N / 32);
        double r[5] = {0}, mag[5] = {0};
        for (int i = 0; i < N; i++) {
            const double terms[5] = {(double)wm[i] * x[i], (double)wn[i] * x[i], (double)wm[i] * xq[i],
                                     (double)wn[i] * xq[i], (double)wn[i] * an[i]};
            for (int k = 0; k < 5; k++) {
                r[k] += terms[k];
                mag[k] += fabs(terms[k]);
            }
        }
        const float got[5] = {hfq_dot_mxfp4_f32(qm, x, N), hfq_dot_nvfp4_f32(qn, x, N),
                              hfq_dot_mxfp4_q8_0(qm, q8, N), hfq_dot_nvfp4_q8_0(qn, q8, N),
                              hfq_dot_nvfp4_nvfp4(qn, qa, N)};
        for (int k = 0; k < 5; k++)
            CHECK_MSG(fabs(got[k] - r[k]) <= mag[k] * 32 * FLT_EPSILON, "trial %d dot %d: %.9g vs %.9g", t, k, (double)got[k], r[k]);
        /* W4A4 with both global scales approximates the float dot */
        double exact = 0, emag = 0;
        for (int i = 0; i < N; i++) {
            exact += (double)w[i] * x[i];
            emag += fabs((double)w[i] * x[i]);
        }
        const double w4a4 = hfq_dot_nvfp4_nvfp4(qn, qa, N) * (gw > 0 ? gw : 1.0f) * ga;
        CHECK_NEAR(w4a4, exact, emag * 0.1);
    }
}

int main(void) {
    rnd_seed(0xD1B54A32D192ED03ull);
    test_codecs();
    test_known_blocks();
    test_mxfp4_rows();
    test_nvfp4_rows();
    test_importance();
    test_search_reimplemented();
    test_act_search();
    test_dots();
    return check_exit();
}
