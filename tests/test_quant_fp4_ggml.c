/* MXFP4 / NVFP4 bit for bit against llama.cpp's reference code (compiled
 * from .cache/llama.cpp by tests/meson.build; skipped when it is absent):
 * quantizers on many rows of varied distributions, decoders on arbitrary
 * bytes, the scale codecs, and ggml-cpu's generic Q8_0 dot products. */
#include "tests/check.h"

#ifndef HFQ_HAVE_GGML_REF
int main(void) { CHECK_SKIP(".cache/llama.cpp/ggml/src/ggml-quants.c not found (run scripts/fetch_reference.sh)"); }
#else

#include <float.h>
#include <stdint.h>

#include "quant/fp4.h"
#include "tests/quant_rng.h"
#include "tests/ref/ggml_ref_fp.h"

#define NKINDS 12

/* One row of a distribution kind. The reference's MXFP4 exponent is
 * undefined behaviour for block maxima below 2^-125, so magnitudes stay above
 * 2^-120 in blocks (denormals appear only beside larger values). */
static void fill_row(float *x, int n, int kind) {
    const float unit = ldexpf(1.0f, (int)(rnd_u32() % 40) - 20); /* grid unit for exact-value rows */
    for (int i = 0; i < n; i++) {
        float v = rnd_gauss();
        switch (kind) {
        case 1: v = rnd_uniform() * 2 - 1; break;
        case 2: v *= (rnd_u32() % 50 == 0) ? 300.0f : 1.0f; break;           /* outliers */
        case 3: v = ((i / 16) % 3 == 0 || rnd_u32() % 4 == 0) ? 0.0f : v; break; /* zeros, zero blocks */
        case 4: v *= 1e-30f; break;                                         /* tiny */
        case 5: v *= 1e30f; break;                                          /* huge */
        case 6: v = (rnd_u32() & 1 ? -1.0f : 1.0f) * ldexpf(1.0f + rnd_uniform(), (int)(rnd_u32() % 80) - 40); break;
        case 7: v = (float)((int)(rnd_u32() % 25) - 12) * unit * 0.5f; break;  /* on the grid and its midpoints */
        case 8: v = (float)((int)(rnd_u32() % 49) - 24) * unit * 0.25f; break; /* finer: many ties */
        case 9: v = i % 7 == 0 ? ldexpf(1.0f, -140) * (float)(rnd_u32() % 100) : v; break; /* denormals beside normals */
        case 10: v = (i % 2 ? -0.0f : 0.0f) + (i % 32 == 5 ? 1.0f : 0.0f); break; /* signed zeros, one value */
        case 11: v *= 100.0f + 1e4f * (float)(i % 64 == 0); break;
        default: break;
        }
        x[i] = v;
    }
}

enum { ROWS = 96, COLS = 512 };

static void test_quantizers(void) {
    static float x[ROWS * COLS];
    static hfq_block_mxfp4 ours_m[ROWS * COLS / 32], ref_m[ROWS * COLS / 32];
    static hfq_block_nvfp4 ours_n[ROWS * COLS / 64], ref_n[ROWS * COLS / 64];
    for (int r = 0; r < ROWS; r++) fill_row(x + r * COLS, COLS, r % NKINDS);
    hfq_quantize_mxfp4(x, ours_m, ROWS, COLS, NULL);
    hfq_quantize_nvfp4(x, ours_n, ROWS, COLS, NULL, 0.0f);
    ggml_ref_quantize_mxfp4(x, ref_m, (int64_t)ROWS * COLS);
    ggml_ref_quantize_nvfp4(x, ref_n, (int64_t)ROWS * COLS);
    int diff_m = 0, diff_n = 0;
    for (int b = 0; b < ROWS * COLS / 32; b++) {
        if (memcmp(&ours_m[b], &ref_m[b], sizeof ref_m[b]) != 0 && diff_m++ < 3)
            fprintf(stderr, "mxfp4 block %d (kind %d) differs: e %u vs %u\n", b, (b / (COLS / 32)) % NKINDS, ours_m[b].e, ref_m[b].e);
    }
    for (int b = 0; b < ROWS * COLS / 64; b++) {
        if (memcmp(&ours_n[b], &ref_n[b], sizeof ref_n[b]) != 0 && diff_n++ < 3)
            fprintf(stderr, "nvfp4 block %d (kind %d) differs\n", b, (b / (COLS / 64)) % NKINDS);
    }
    CHECK_MSG(diff_m == 0, "%d of %d MXFP4 blocks differ", diff_m, ROWS * COLS / 32);
    CHECK_MSG(diff_n == 0, "%d of %d NVFP4 blocks differ", diff_n, ROWS * COLS / 64);
}

static void test_decoders(void) {
    enum { NB = 4096 };
    static uint8_t bytes[NB * 36];
    static float ours[NB * 64], ref[NB * 64];
    for (int i = 0; i < NB * 36; i++) bytes[i] = (uint8_t)rnd_u32();
    for (int i = 0; i < 256; i++) bytes[i * 17] = (uint8_t)i; /* every E8M0 byte */
    hfq_dequantize_row_mxfp4(bytes, ours, (int64_t)NB * 32);
    ggml_ref_dequantize_mxfp4(bytes, ref, (int64_t)NB * 32);
    CHECK(memcmp(ours, ref, sizeof(float) * NB * 32) == 0);
    for (int i = 0; i < 256; i++) bytes[(i / 4) * 36 + i % 4] = (uint8_t)i; /* every UE4M3 byte */
    hfq_dequantize_row_nvfp4(bytes, ours, (int64_t)NB * 64);
    ggml_ref_dequantize_nvfp4(bytes, ref, (int64_t)NB * 64);
    CHECK(memcmp(ours, ref, sizeof(float) * NB * 64) == 0);
    for (int c = 0; c < 256; c++) {
        const float a = hfq_ue4m3_half_to_f32((uint8_t)c), b = ggml_ref_ue4m3_to_fp32((uint8_t)c);
        const float e = hfq_e8m0_half_to_f32((uint8_t)c), f = ggml_ref_e8m0_to_fp32_half((uint8_t)c);
        CHECK_MSG(memcmp(&a, &b, 4) == 0 && memcmp(&e, &f, 4) == 0, "byte 0x%02x", c);
    }
}

/* ggml's UE4M3 rounding over float bit patterns: every pattern where the
 * result is decided (2^-12 .. 2^10), a stride elsewhere, negatives, NaN. */
static void test_ue4m3_encoder(void) {
    int diff = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += (u >= 0x39800000u && u < 0x44800000u) ? 3 : 4099) {
        const float x = hfq_bits_f32((uint32_t)u);
        const uint8_t a = hfq_ue4m3_from_f32_ggml(x), b = ggml_ref_fp32_to_ue4m3(x);
        if (a != b && diff++ < 3) fprintf(stderr, "ue4m3(%a): 0x%02x vs 0x%02x\n", (double)x, a, b);
    }
    CHECK_MSG(diff == 0, "%d ue4m3 encodings differ", diff);
}

static void test_dots(void) {
    enum { N = 4096, TRIALS = 40 };
    static float w[N], a[N];
    static hfq_block_mxfp4 qm[N / 32];
    static hfq_block_nvfp4 qn[N / 64];
    static hfq_block_q8_0 q8[N / 32];
    int diff = 0;
    for (int t = 0; t < TRIALS; t++) {
        fill_row(w, N, t % NKINDS);
        fill_row(a, N, (t * 5) % 3);
        ggml_ref_quantize_q8_0(a, q8, N);
        hfq_quantize_mxfp4(w, qm, 1, N, NULL);
        hfq_quantize_nvfp4(w, qn, 1, N, NULL, 0.0f);
        const float om = hfq_dot_mxfp4_q8_0(qm, q8, N), rm = ggml_ref_dot_mxfp4_q8_0(N, qm, q8);
        const float on = hfq_dot_nvfp4_q8_0(qn, q8, N), rn = ggml_ref_dot_nvfp4_q8_0(N, qn, q8);
        if (memcmp(&om, &rm, 4) != 0 || memcmp(&on, &rn, 4) != 0) {
            diff++;
            fprintf(stderr, "trial %d: mxfp4 %a vs %a, nvfp4 %a vs %a\n", t, (double)om, (double)rm, (double)on, (double)rn);
        }
    }
    CHECK_MSG(diff == 0, "%d of %d dot trials differ", diff, TRIALS);
}

int main(void) {
    rnd_seed(0x853C49E6748FEA9Bull);
    test_quantizers();
    test_decoders();
    test_ue4m3_encoder();
    test_dots();
    return check_exit();
}

#endif
