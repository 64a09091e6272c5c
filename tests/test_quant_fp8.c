/* FP8 E4M3FN / E5M2 codecs (exhaustive against a field-by-field reading of
 * the OCP spec and a brute-force nearest search) and FP8 tensor
 * quantization, dequantization and dot products. */
#include <float.h>
#include <stdint.h>

#include "quant/fp8.h"
#include "tests/check.h"
#include "tests/quant_rng.h"

static const hfq_fp8_format FORMATS[2] = {HFQ_FP8_E4M3, HFQ_FP8_E5M2};

/* The OCP spec's fields, read independently: value, or NaN/inf flags. */
static double spec_decode(hfq_fp8_format fmt, unsigned c, int *is_nan, int *is_inf) {
    const int ebits = fmt == HFQ_FP8_E4M3 ? 4 : 5, mbits = 7 - ebits, bias = fmt == HFQ_FP8_E4M3 ? 7 : 15;
    const unsigned e = (c >> mbits) & ((1u << ebits) - 1), m = c & ((1u << mbits) - 1);
    const double sign = (c & 0x80) ? -1.0 : 1.0;
    *is_nan = *is_inf = 0;
    if (fmt == HFQ_FP8_E4M3 && e == 15 && m == 7) *is_nan = 1;
    if (fmt == HFQ_FP8_E5M2 && e == 31) *(m ? is_nan : is_inf) = 1;
    if (*is_nan) return NAN;
    if (*is_inf) return sign * INFINITY;
    if (e == 0) return sign * ldexp((double)m, 1 - bias - mbits);
    return sign * ldexp(1.0 + (double)m / (1 << mbits), (int)e - bias);
}

static unsigned max_code(hfq_fp8_format fmt) { return fmt == HFQ_FP8_E4M3 ? 0x7E : 0x7B; }

/* Brute force: the finite code nearest to x, ties to the even code,
 * saturating at max, sign kept (zero results of negative x are -0). */
static uint8_t brute_encode(hfq_fp8_format fmt, float x) {
    int nan, inf;
    const double a = fabs((double)x);
    unsigned best = 0;
    double best_err = INFINITY;
    if (a >= hfq_fp8_max(fmt)) best = max_code(fmt), best_err = 0; /* saturation */
    for (unsigned c = 0; c <= max_code(fmt) && best_err > 0; c++) {
        const double err = fabs(spec_decode(fmt, c, &nan, &inf) - a);
        if (err < best_err || (err == best_err && !(c & 1))) {
            best = c;
            best_err = err;
        }
    }
    return (uint8_t)(best | (signbit(x) ? 0x80 : 0));
}

static void test_decode_all_codes(void) {
    for (int f = 0; f < 2; f++) {
        int nans = 0, infs = 0;
        for (unsigned c = 0; c < 256; c++) {
            int nan, inf;
            const double want = spec_decode(FORMATS[f], c, &nan, &inf);
            const float got = hfq_fp8_to_f32(FORMATS[f], (uint8_t)c);
            nans += nan;
            infs += inf;
            if (nan) {
                CHECK_MSG(isnan(got), "fmt %d code 0x%02x should be NaN", f, c);
            } else {
                CHECK_MSG((double)got == want && !signbit(got) == !signbit(want),
                          "fmt %d code 0x%02x: %.9g vs %.9g", f, c, (double)got, want);
            }
        }
        CHECK(nans == (FORMATS[f] == HFQ_FP8_E4M3 ? 2 : 6));
        CHECK(infs == (FORMATS[f] == HFQ_FP8_E4M3 ? 0 : 2));
    }
    /* known values from the spec's tables */
    CHECK(hfq_fp8_e4m3_to_f32(0x7E) == 448.0f);
    CHECK(hfq_fp8_e4m3_to_f32(0x01) == ldexpf(1.0f, -9));
    CHECK(hfq_fp8_e4m3_to_f32(0x08) == ldexpf(1.0f, -6));
    CHECK(hfq_fp8_e4m3_to_f32(0x38) == 1.0f);
    CHECK(hfq_fp8_e4m3_to_f32(0xFE) == -448.0f);
    CHECK(isnan(hfq_fp8_e4m3_to_f32(0x7F)) && isnan(hfq_fp8_e4m3_to_f32(0xFF)));
    CHECK(hfq_fp8_e5m2_to_f32(0x7B) == 57344.0f);
    CHECK(hfq_fp8_e5m2_to_f32(0x01) == ldexpf(1.0f, -16));
    CHECK(hfq_fp8_e5m2_to_f32(0x04) == ldexpf(1.0f, -14));
    CHECK(hfq_fp8_e5m2_to_f32(0x3C) == 1.0f);
    CHECK(hfq_fp8_e5m2_to_f32(0x7C) == INFINITY && hfq_fp8_e5m2_to_f32(0xFC) == -INFINITY);
    CHECK(hfq_fp8_e4m3_to_f32(0x80) == 0.0f && signbit(hfq_fp8_e4m3_to_f32(0x80)));
}

static void test_roundtrip_all_codes(void) {
    for (int f = 0; f < 2; f++) {
        for (unsigned c = 0; c < 256; c++) {
            const uint8_t back = hfq_f32_to_fp8(FORMATS[f], hfq_fp8_to_f32(FORMATS[f], (uint8_t)c));
            unsigned want = c;
            /* documented exceptions, E5M2 only: NaNs encode as 0x7F|sign, infinities saturate */
            if (FORMATS[f] == HFQ_FP8_E5M2 && (c & 0x7F) >= 0x7D) want = (c & 0x80) | 0x7F;
            if (FORMATS[f] == HFQ_FP8_E5M2 && (c & 0x7F) == 0x7C) want = (c & 0x80) | 0x7B;
            CHECK_MSG(back == want, "fmt %d code 0x%02x -> 0x%02x, want 0x%02x", f, c, back, want);
        }
    }
}

/* Every rounding boundary: midpoints tie to even, one ulp either side goes
 * to the nearer code; both signs. */
static void test_midpoints(void) {
    for (int f = 0; f < 2; f++) {
        const hfq_fp8_format fmt = FORMATS[f];
        for (unsigned c = 0; c < max_code(fmt); c++) {
            const double lo = hfq_fp8_to_f32(fmt, (uint8_t)c), hi = hfq_fp8_to_f32(fmt, (uint8_t)(c + 1));
            const float mid = (float)((lo + hi) / 2);
            CHECK_MSG((double)mid == (lo + hi) / 2, "midpoint of 0x%02x not exact", c);
            const unsigned even = (c & 1) ? c + 1 : c;
            CHECK_MSG(hfq_f32_to_fp8(fmt, mid) == even, "fmt %d mid 0x%02x/0x%02x", f, c, c + 1);
            CHECK(hfq_f32_to_fp8(fmt, -mid) == (0x80 | even));
            CHECK(hfq_f32_to_fp8(fmt, nextafterf(mid, INFINITY)) == c + 1);
            CHECK(hfq_f32_to_fp8(fmt, nextafterf(mid, 0.0f)) == c);
            CHECK(hfq_f32_to_fp8(fmt, -nextafterf(mid, INFINITY)) == (0x80 | (c + 1)));
        }
    }
}

static void test_special_inputs(void) {
    for (int f = 0; f < 2; f++) {
        const hfq_fp8_format fmt = FORMATS[f];
        const unsigned mx = max_code(fmt);
        const float vmax = hfq_fp8_max(fmt);
        CHECK(hfq_f32_to_fp8(fmt, 0.0f) == 0x00);
        CHECK(hfq_f32_to_fp8(fmt, -0.0f) == 0x80);
        CHECK(hfq_f32_to_fp8(fmt, vmax) == mx);
        CHECK(hfq_f32_to_fp8(fmt, -vmax) == (0x80 | mx));
        CHECK(hfq_f32_to_fp8(fmt, nextafterf(vmax, INFINITY)) == mx);
        CHECK(hfq_f32_to_fp8(fmt, vmax * 1.0625f) == mx); /* the IEEE midpoint to the next binade step */
        CHECK(hfq_f32_to_fp8(fmt, vmax * 1.5f) == mx);
        CHECK(hfq_f32_to_fp8(fmt, FLT_MAX) == mx);
        CHECK(hfq_f32_to_fp8(fmt, INFINITY) == mx);
        CHECK(hfq_f32_to_fp8(fmt, -INFINITY) == (0x80 | mx));
        CHECK(hfq_f32_to_fp8(fmt, NAN) == 0x7F);
        CHECK(hfq_f32_to_fp8(fmt, -NAN) == 0xFF);
        /* subnormal edge: half the smallest subnormal ties to 0, above it rounds up */
        const float tiny = hfq_fp8_to_f32(fmt, 0x01);
        CHECK(hfq_f32_to_fp8(fmt, tiny / 2) == 0x00);
        CHECK(hfq_f32_to_fp8(fmt, nextafterf(tiny / 2, 1.0f)) == 0x01);
        CHECK(hfq_f32_to_fp8(fmt, -tiny / 4) == 0x80);
        CHECK(hfq_f32_to_fp8(fmt, tiny * 1.5f) == 0x02); /* tie between 1 and 2 -> even */
        CHECK(hfq_f32_to_fp8(fmt, FLT_MIN) == 0x00);
        CHECK(hfq_f32_to_fp8(fmt, ldexpf(1.0f, -149)) == 0x00); /* binary32 subnormal */
        CHECK(hfq_f32_to_fp8(fmt, -ldexpf(1.0f, -149)) == 0x80);
    }
    /* hand-computed: 0.1 = 1.6 * 2^-4 */
    CHECK(hfq_f32_to_fp8_e4m3(1.0f) == 0x38);
    CHECK(hfq_f32_to_fp8_e4m3(-2.0f) == 0xC0);
    CHECK(hfq_f32_to_fp8_e4m3(0.1f) == 0x1D);  /* m = 0.6*8 = 4.8 -> 5 */
    CHECK(hfq_f32_to_fp8_e5m2(0.1f) == 0x2E);  /* m = 0.6*4 = 2.4 -> 2 */
    CHECK(hfq_f32_to_fp8_e4m3(300.0f) == 0x79); /* between 288 (0x79) and 320 (0x7A): nearer 288 */
    CHECK(hfq_f32_to_fp8_e4m3(0x1.1p-7f) == 0x04); /* subnormal 4*2^-9 + small -> 4 */
}

static void test_random_vs_brute_force(void) {
    for (int f = 0; f < 2; f++) {
        const hfq_fp8_format fmt = FORMATS[f];
        int bad = 0;
        for (int i = 0; i < 300000; i++) {
            uint32_t bits = rnd_u32();
            if (i % 2 == 0) {
                /* exponent within the format's range plus a margin on both sides */
                const int lo = fmt == HFQ_FP8_E4M3 ? 127 - 14 : 127 - 22;
                const int span = fmt == HFQ_FP8_E4M3 ? 26 : 42;
                bits = (bits & 0x807FFFFFu) | ((uint32_t)(lo + (int)(rnd_u32() % (unsigned)span)) << 23);
            }
            if ((bits & 0x7F800000u) == 0x7F800000u) continue;
            const float x = hfq_bits_f32(bits);
            const uint8_t got = hfq_f32_to_fp8(fmt, x), want = brute_encode(fmt, x);
            if (got != want && bad++ < 5)
                fprintf(stderr, "fmt %d x=%a: 0x%02x vs brute 0x%02x\n", f, (double)x, got, want);
        }
        CHECK_MSG(bad == 0, "%d mismatches", bad);
    }
}

/* Rows of a distribution: gaussian, with outliers, tiny, huge, zero. */
static void fill_row(float *x, int n, int kind) {
    for (int i = 0; i < n; i++) {
        float v = rnd_gauss();
        switch (kind) {
        case 1: v *= (rnd_u32() % 50 == 0) ? 100.0f : 1.0f; break;
        case 2: v *= 1e-12f; break;
        case 3: v *= 1e12f; break;
        case 4: v = 0.0f; break;
        default: break;
        }
        x[i] = v;
    }
}

#define NROW 5
#define NCOL 256

static void test_quantize_rows(void) {
    float x[NROW * NCOL], y[NCOL], scales[NROW];
    uint8_t q[NROW * NCOL];
    for (int f = 0; f < 2; f++) {
        const hfq_fp8_format fmt = FORMATS[f];
        /* half an ulp relative; absolute floor: half the smallest subnormal */
        const double rel = fmt == HFQ_FP8_E4M3 ? 1.0 / 16 : 1.0 / 8;
        const double sub = hfq_fp8_to_f32(fmt, 0x01) / 2;
        for (int r = 0; r < NROW; r++) fill_row(x + r * NCOL, NCOL, r);
        CHECK(hfq_quantize_fp8(fmt, x, q, NROW, NCOL, NULL, scales) == NROW * NCOL);
        for (int r = 0; r < NROW; r++) {
            const float *xr = x + r * NCOL;
            CHECK(scales[r] == hfq_fp8_scale(fmt, xr, NCOL));
            hfq_dequantize_row_fp8(fmt, q + r * NCOL, y, NCOL, scales[r]);
            double amax = 0;
            for (int i = 0; i < NCOL; i++) amax = fmax(amax, fabs(xr[i]));
            CHECK(scales[r] == (float)(amax / hfq_fp8_max(fmt)) || amax == 0);
            int worst = 0;
            for (int i = 0; i < NCOL; i++) {
                const double err = fabs((double)xr[i] - y[i]);
                const double bound = fmax(rel * fabs(xr[i]), sub * scales[r]) * (1 + 1e-6);
                CHECK(y[i] == scales[r] * hfq_fp8_to_f32(fmt, q[r * NCOL + i]));
                if (err > bound) worst++;
                if (fabs(xr[i]) == amax && amax > 0) CHECK_NEAR(fabs(y[i]), amax, amax * 1e-6);
            }
            CHECK_MSG(worst == 0, "fmt %d row %d: %d elements beyond the bound", f, r, worst);
        }
        /* all-zero row: scale 0, codes 0 */
        CHECK(scales[4] == 0.0f);
        for (int i = 0; i < NCOL; i++) CHECK(q[4 * NCOL + i] == 0);
        /* static per-tensor: same as encoding x / scale */
        const float ts = hfq_fp8_scale(fmt, x, NROW * NCOL);
        CHECK(hfq_quantize_fp8_static(fmt, x, q, NROW, NCOL, ts) == NROW * NCOL);
        int diff = 0;
        for (int i = 0; i < NROW * NCOL; i++) diff += q[i] != hfq_f32_to_fp8(fmt, x[i] / ts);
        CHECK(diff == 0);
        CHECK(hfq_quantize_fp8(fmt, x, q, 1, 0, NULL, scales) == 0);
    }
}

static void test_dots(void) {
    enum { N = 1024 };
    static float w[N], x[N], wd[N], xd[N];
    static uint8_t qw[N], qx[N];
    for (int f = 0; f < 2; f++) {
        for (int trial = 0; trial < 20; trial++) {
            const hfq_fp8_format wf = FORMATS[f], af = FORMATS[(f + trial) % 2];
            fill_row(w, N, trial % 2);
            fill_row(x, N, 0);
            float ws, as;
            hfq_quantize_fp8(wf, w, qw, 1, N, NULL, &ws);
            hfq_quantize_fp8(af, x, qx, 1, N, NULL, &as);
            hfq_dequantize_row_fp8(wf, qw, wd, N, 1.0f);
            hfq_dequantize_row_fp8(af, qx, xd, N, 1.0f);
            double ref_f = 0, ref_q = 0, mag_f = 0, mag_q = 0;
            for (int i = 0; i < N; i++) {
                ref_f += (double)wd[i] * x[i];
                mag_f += fabs((double)wd[i] * x[i]);
                ref_q += (double)wd[i] * xd[i];
                mag_q += fabs((double)wd[i] * xd[i]);
            }
            ref_f *= ws;
            ref_q *= (double)ws * as;
            /* float accumulation: error within 32 eps of the magnitude sum */
            CHECK_NEAR(hfq_dot_fp8_f32(wf, qw, ws, x, N), ref_f, mag_f * ws * 32 * FLT_EPSILON);
            CHECK_NEAR(hfq_dot_fp8_fp8(wf, qw, ws, af, qx, as, N), ref_q, mag_q * ws * as * 32 * FLT_EPSILON);
            /* and the quantized dot approximates the exact float one */
            double exact = 0, mag = 0;
            for (int i = 0; i < N; i++) {
                exact += (double)w[i] * x[i];
                mag += fabs((double)w[i] * x[i]);
            }
            CHECK_NEAR(hfq_dot_fp8_fp8(wf, qw, ws, af, qx, as, N), exact, mag * 0.25);
        }
    }
}

int main(void) {
    rnd_seed(0x9E3779B97F4A7C15ull);
    test_decode_all_codes();
    test_roundtrip_all_codes();
    test_midpoints();
    test_special_inputs();
    test_random_vs_brute_force();
    test_quantize_rows();
    test_dots();
    return check_exit();
}
