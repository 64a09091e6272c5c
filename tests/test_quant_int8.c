/* Symmetric INT8: rounding, per-channel and per-group scales, the
 * importance-weighted scale search, static scales, dot products. */
#include <float.h>
#include <stdint.h>

#include "quant/int8.h"
#include "tests/check.h"
#include "tests/quant_rng.h"

static void test_round(void) {
    CHECK(hfq_int8_round(0.5f) == 1);
    CHECK(hfq_int8_round(-0.5f) == -1);
    CHECK(hfq_int8_round(1.5f) == 2);
    CHECK(hfq_int8_round(2.5f) == 3);
    CHECK(hfq_int8_round(-2.5f) == -3);
    CHECK(hfq_int8_round(0.49999997f) == 0);
    CHECK(hfq_int8_round(126.5f) == 127);
    CHECK(hfq_int8_round(-126.5f) == -127);
    CHECK(hfq_int8_round(1000.0f) == 127);
    CHECK(hfq_int8_round(-1000.0f) == -127);
    CHECK(hfq_int8_round(INFINITY) == 127);
    CHECK(hfq_int8_round(-INFINITY) == -127);
    CHECK(hfq_int8_round(NAN) == 0);
}

static void test_known_rows(void) {
    /* amax 127 -> scale 1: codes are the values rounded half away from zero */
    const float x[8] = {127.0f, 2.5f, -2.5f, 3.5f, -0.5f, 0.49f, 126.5f, -127.0f};
    const int8_t want[8] = {127, 3, -3, 4, -1, 0, 127, -127};
    int8_t q[8];
    float s[2];
    CHECK(hfq_quantize_int8(x, q, 1, 8, NULL, s, 0) == 8);
    CHECK(s[0] == 1.0f);
    for (int i = 0; i < 8; i++) CHECK_MSG(q[i] == want[i], "i=%d: %d vs %d", i, q[i], want[i]);
    /* groups of 4: amax 31.75 (scale 0.25, ties at 2.5, 1.5, -0.5), then all zeros */
    const float y[8] = {-31.75f, 0.625f, 0.375f, -0.125f, 0.0f, 0.0f, -0.0f, 0.0f};
    CHECK(hfq_quantize_int8(y, q, 1, 8, NULL, s, 4) == 8);
    CHECK(s[0] == 0.25f && s[1] == 0.0f);
    CHECK(q[0] == -127 && q[1] == 3 && q[2] == 2 && q[3] == -1);
    for (int i = 4; i < 8; i++) CHECK(q[i] == 0);
}

/* |x - s q| <= s/2, codes in range, amax -> +-127, for several group sizes. */
static void test_random_groups(void) {
    enum { R = 4, N = 256 };
    static float x[R * N], y[N], scales[R * N];
    static int8_t q[R * N];
    const int64_t sizes[4] = {0, 32, 128, 256};
    for (int i = 0; i < R * N; i++) {
        const float v = rnd_gauss();
        x[i] = i / N == 1 ? v * ((rnd_u32() % 40 == 0) ? 50.0f : 1.0f) : i / N == 2 ? v * 1e-20f : v;
    }
    for (int k = 0; k < 4; k++) {
        const int64_t g_len = sizes[k] ? sizes[k] : N, groups = N / g_len;
        CHECK(hfq_quantize_int8(x, q, R, N, NULL, scales, sizes[k]) == R * N);
        int bad = 0;
        for (int r = 0; r < R; r++) {
            hfq_dequantize_row_int8(q + r * N, y, N, scales + r * groups, sizes[k]);
            for (int g = 0; g < groups; g++) {
                const float *xg = x + r * N + g * g_len;
                float amax = 0;
                for (int i = 0; i < g_len; i++) amax = fmaxf(amax, fabsf(xg[i]));
                const float s = scales[r * groups + g];
                CHECK(s == amax / 127.0f);
                for (int i = 0; i < g_len; i++) {
                    const int64_t at = r * N + g * g_len + i;
                    if (q[at] == -128) bad++;
                    if (fabs((double)x[at] - y[g * g_len + i]) > s * 0.5 * (1 + 1e-5)) bad++;
                    if (y[g * g_len + i] != s * q[at]) bad++;
                    if (fabsf(xg[i]) == amax && amax > 0 && abs(q[at]) != 127) bad++;
                }
            }
        }
        CHECK_MSG(bad == 0, "group size %lld: %d bad elements", (long long)sizes[k], bad);
    }
    /* per channel is the same as one group of the whole row */
    static int8_t q2[R * N];
    static float s2[R];
    hfq_quantize_int8(x, q, R, N, NULL, scales, 0);
    hfq_quantize_int8(x, q2, R, N, NULL, s2, N);
    CHECK(memcmp(q, q2, sizeof q) == 0 && memcmp(scales, s2, sizeof s2) == 0);
    /* invalid geometry */
    CHECK(hfq_quantize_int8(x, q, 1, N, NULL, scales, 3) == 0);
    CHECK(hfq_quantize_int8(x, q, 1, 0, NULL, scales, 0) == 0);
    CHECK(hfq_quantize_int8(x, q, -1, N, NULL, scales, 0) == 0);
}

static double weighted_error(const float *x, const int8_t *q, float s, const float *w, int n) {
    double err = 0;
    for (int i = 0; i < n; i++) err += w[i] * pow((double)x[i] - (double)s * q[i], 2);
    return err;
}

static void test_importance(void) {
    /* an outlier nobody weighs and values on a 0.97 grid: the search clips */
    const float x[4] = {127.0f, 0.97f * 5, 0.97f * 10, 0.97f * -20};
    const float w[4] = {0.0f, 1.0f, 1.0f, 1.0f};
    int8_t qr[4], qi[4];
    float sr, si;
    hfq_quantize_int8(x, qr, 1, 4, NULL, &sr, 0);
    hfq_quantize_int8(x, qi, 1, 4, w, &si, 0);
    CHECK(sr == 1.0f);
    CHECK_NEAR(si, 0.97, 1e-6);
    CHECK(qi[0] == 127 && qi[1] == 5 && qi[2] == 10 && qi[3] == -20);
    CHECK(weighted_error(x, qi, si, w, 4) < 1e-9 && weighted_error(x, qr, sr, w, 4) > 0.1);

    /* random rows: never worse than the reference under the same weights */
    enum { N = 512, G = 64 };
    static float xr[N], wr[N], sref[N / G], simp[N / G];
    static int8_t qref[N], qimp[N];
    for (int t = 0; t < 20; t++) {
        for (int i = 0; i < N; i++) {
            xr[i] = rnd_gauss() * ((rnd_u32() % 30 == 0) ? 20.0f : 1.0f);
            wr[i] = (float)(rnd_u32() % 1000) / 100.0f;
        }
        hfq_quantize_int8(xr, qref, 1, N, NULL, sref, G);
        hfq_quantize_int8(xr, qimp, 1, N, wr, simp, G);
        for (int g = 0; g < N / G; g++) {
            const double er = weighted_error(xr + g * G, qref + g * G, sref[g], wr + g * G, G);
            const double ei = weighted_error(xr + g * G, qimp + g * G, simp[g], wr + g * G, G);
            CHECK_MSG(ei <= er, "trial %d group %d: %.9g > %.9g", t, g, ei, er);
            CHECK(simp[g] <= sref[g] && simp[g] >= sref[g] * 0.849f);
        }
    }
}

static void test_static(void) {
    const float x[6] = {0.1f, -0.2f, 5.0f, -5.0f, 0.05f, 0.0f};
    int8_t q[6];
    CHECK(hfq_quantize_int8_static(x, q, 2, 3, 0.01f) == 6);
    CHECK(q[0] == 10 && q[1] == -20 && q[2] == 127 && q[3] == -127 && q[4] == 5 && q[5] == 0);
    CHECK(hfq_quantize_int8_static(x, q, 1, 6, 0.0f) == 6);
    for (int i = 0; i < 6; i++) CHECK(q[i] == 0);
}

static void test_dots(void) {
    enum { N = 1024 };
    static float w[N], x[N], ws[N], xs_f[N];
    static int8_t qw[N], qx[N];
    const int64_t sizes[3] = {0, 32, 256};
    for (int t = 0; t < 12; t++) {
        const int64_t gs = sizes[t % 3], g_len = gs ? gs : N;
        for (int i = 0; i < N; i++) {
            w[i] = rnd_gauss();
            x[i] = rnd_gauss() * 3.0f;
        }
        float as;
        hfq_quantize_int8(w, qw, 1, N, NULL, ws, gs);
        hfq_quantize_int8(x, qx, 1, N, NULL, &as, 0);
        hfq_dequantize_row_int8(qx, xs_f, N, &as, 0);
        double ref_q = 0, ref_f = 0, mag_f = 0, exact = 0, mag = 0;
        for (int g = 0; g < N / g_len; g++) {
            long long isum = 0;
            for (int i = g * g_len; i < (g + 1) * g_len; i++) {
                isum += (long long)qw[i] * qx[i];
                ref_f += (double)ws[g] * qw[i] * x[i];
                mag_f += fabs((double)ws[g] * qw[i] * x[i]);
            }
            ref_q += (double)ws[g] * (double)isum;
        }
        ref_q *= as;
        for (int i = 0; i < N; i++) {
            exact += (double)w[i] * x[i];
            mag += fabs((double)w[i] * x[i]);
        }
        const float dq = hfq_dot_int8_int8(qw, ws, gs, qx, as, N);
        /* exact integer sums: only the float scaling rounds */
        CHECK_NEAR(dq, ref_q, fabs(ref_q) * 1e-5 + mag * 1e-6);
        CHECK_NEAR(hfq_dot_int8_f32(qw, ws, gs, x, N), ref_f, mag_f * 32 * FLT_EPSILON);
        /* 8-bit quantization keeps the dot within a percent of the magnitude */
        CHECK_NEAR(dq, exact, mag * 0.01);
    }
    /* long rows: 200000 * 127 * 127 overflows int32, the chunked sum does not */
    enum { L = 200000 };
    static int8_t a[L], b[L];
    for (int i = 0; i < L; i++) a[i] = b[i] = (i % 2) ? 127 : -127;
    const float one = 1.0f;
    CHECK(hfq_dot_int8_int8(a, &one, 0, b, 1.0f, L) == (float)(200000.0 * 16129.0));
}

int main(void) {
    rnd_seed(0x2545F4914F6CDD1Dull);
    test_round();
    test_known_rows();
    test_random_groups();
    test_importance();
    test_static();
    test_dots();
    return check_exit();
}
