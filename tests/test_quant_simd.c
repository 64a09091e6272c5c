/* The AVX2 kernels of the integer quantizers give exactly the bytes of the
 * scalar code (which tests/test_quant_ref.c compares with ggml): every
 * format, with and without importance, on rows of every distribution of
 * quant_rows.h, on rows whose 32-blocks each come from another distribution
 * (so the lanes of one vector take different branches: flat, all-zero,
 * tiny, huge groups side by side), and on lengths that leave legacy blocks
 * outside the groups of eight. And the F16C row decoder gives the floats of
 * hfq_fp16_to_f32 for all 65536 halves (NaN payloads included). The INT8
 * and FP8 row quantizers (AVX2 inside) give the codes of the scalar
 * hfq_int8_round / hfq_f32_to_fp8 on every tie and boundary of their grids,
 * random bit patterns (NaN, infinities, subnormals) and the tails past whole
 * vectors; NVFP4 blocks with a global scale (W4A4 activations) those of
 * hfq_quantize_block_nvfp4, E2M1 ties included; the activation quantizers
 * (Q8_K, Q8_0) those of their scalar blocks. Skips on CPUs without AVX2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quant/block_math.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/int8.h"
#include "quant/iq4.h"
#include "quant/isa.h"
#include "quant/plain.h"
#include "quant/q_k.h"
#include "quant/q_k_low.h"
#include "quant/q_legacy.h"
#include "quant_rows.h"

typedef size_t (*isa_quantizer)(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                const float *importance);

typedef struct simd_case {
    const char *name;
    isa_quantizer quantize;
    int block;            /* elements per block: 32 or 256 */
    size_t block_bytes;
} simd_case;

/* NVFP4 without a global scale (ggml's reference: the nearest codes of MXFP4's search). */
static size_t quantize_nvfp4_ggml_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                      const float *importance) {
    return hfq_quantize_nvfp4_isa(isa, src, dst, nrows, n_per_row, importance, 0.0f);
}

static const simd_case cases[] = {
    {"q8_0", hfq_quantize_q8_0_isa, 32, 34},  {"q4_0", hfq_quantize_q4_0_isa, 32, 18},
    {"q4_1", hfq_quantize_q4_1_isa, 32, 20},  {"q5_0", hfq_quantize_q5_0_isa, 32, 22},
    {"q5_1", hfq_quantize_q5_1_isa, 32, 24},  {"q2_K", hfq_quantize_q2_k_isa, 256, 84},
    {"q3_K", hfq_quantize_q3_k_isa, 256, 110}, {"q4_K", hfq_quantize_q4_k_isa, 256, 144},
    {"q5_K", hfq_quantize_q5_k_isa, 256, 176}, {"q6_K", hfq_quantize_q6_k_isa, 256, 210},
    {"iq4_nl", hfq_quantize_iq4_nl_isa, 32, 18}, {"iq4_xs", hfq_quantize_iq4_xs_isa, 256, 136},
    {"mxfp4", hfq_quantize_mxfp4_isa, 32, 17}, {"nvfp4", quantize_nvfp4_ggml_isa, 64, 36},
};

enum { NROWS = 24, MAX_N = 2304, KIND_MIXED = ROW_KIND_COUNT, KIND_COUNT = ROW_KIND_COUNT + 1 };

/* Each 32-block from a random distribution. */
static void fill_mixed(test_rng *rng, float *x, int64_t n) {
    for (int64_t b = 0; b < n; b += 32) fill_row(rng, (int)(rng_next(rng) % ROW_KIND_COUNT), x + b, 32);
}

/* Importance variants: random (with some zeros), all zero, extreme spread. */
static void fill_weights(test_rng *rng, int variant, float *w, int64_t n) {
    fill_importance(rng, w, n);
    for (int64_t i = 0; i < n; i++) {
        if (variant == 1) w[i] = 0.0f;
        if (variant == 2) w[i] = (float)pow(10.0, 60 * rng_uniform(rng) - 30);
    }
}

static void check_case(const simd_case *c, test_rng *rng) {
    static float src[NROWS * MAX_N], imp[MAX_N];
    static uint8_t scalar[NROWS * MAX_N * 2], simd[NROWS * MAX_N * 2];
    const int64_t k_lengths[] = {256, 768, 2304};
    const int64_t legacy_lengths[] = {32, 224, 288, 800, 2048}; /* 1, 7, 9, 25, 64 blocks */
    const int64_t nvfp4_lengths[] = {64, 320, 832, 2048};
    const int64_t *lengths = c->block == 256 ? k_lengths : c->block == 64 ? nvfp4_lengths : legacy_lengths;
    const int n_lengths = c->block == 256 ? 3 : c->block == 64 ? 4 : 5;
    int failures = 0;
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        for (int li = 0; li < n_lengths; li++) {
            const int64_t n = lengths[li];
            if (kind == KIND_MIXED) fill_mixed(rng, src, NROWS * n);
            else fill_row(rng, kind, src, NROWS * n);
            const size_t bytes = (size_t)(NROWS * n / c->block) * c->block_bytes;
            for (int weighted = 0; weighted < 4; weighted++) {
                if (weighted) fill_weights(rng, weighted - 1, imp, n);
                memset(scalar, 0xA5, bytes);
                memset(simd, 0x5A, bytes);
                size_t got_scalar = c->quantize(HFQ_ISA_SCALAR, src, scalar, NROWS, n, weighted ? imp : NULL);
                size_t got_simd = c->quantize(HFQ_ISA_AVX2, src, simd, NROWS, n, weighted ? imp : NULL);
                CHECK(got_scalar == bytes && got_simd == bytes);
                if (memcmp(scalar, simd, bytes) != 0) {
                    size_t at = 0;
                    while (scalar[at] == simd[at]) at++;
                    if (failures++ < 5)
                        fprintf(stderr, "%s %s n=%lld importance variant %d: AVX2 differs at byte %zu of %zu\n",
                                c->name, kind == KIND_MIXED ? "mixed" : row_kind_name(kind), (long long)n,
                                weighted, at, bytes);
                    check_failures++;
                }
            }
        }
    }
    printf("%s: %s\n", c->name, failures ? "AVX2 differs from scalar" : "AVX2 == scalar");
}

/* Every half, at offsets that put each in every lane and leave tails. */
static void check_f16_decode(void) {
    static uint16_t halves[65536 + 8];
    static float got[65536 + 8];
    for (uint32_t i = 0; i < 65536 + 8; i++) halves[i] = (uint16_t)(i * 40503u);
    int bad = 0;
    for (int offset = 0; offset < 8; offset++) {
        const int64_t n = 65536 - offset;
        hfq_dequantize_f16(halves + offset, got, n);
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = halves[offset + i];
            if (hfq_f32_bits(got[i]) != hfq_f32_bits(hfq_fp16_to_f32(h)) && bad++ < 5)
                fprintf(stderr, "f16 decode of 0x%04x: 0x%08x, want 0x%08x\n", h, hfq_f32_bits(got[i]),
                        hfq_f32_bits(hfq_fp16_to_f32(h)));
        }
    }
    CHECK_MSG(bad == 0, "%d halves decode differently with F16C", bad);
}

/* Floats to halves: every class of float (a sweep of bit patterns: zeros,
 * subnormals, each rounding tie, the overflow edge, infinities, NaNs with
 * any payload), in every lane and tail, against hfq_f32_to_fp16. */
static void check_f16_encode(void) {
    enum { N = 1 << 20 };
    static float x[N + 8];
    static uint16_t got[N + 8];
    for (uint32_t i = 0; i < N + 8; i++) {
        const uint32_t bits = i * 4099u + (i >> 7) * 2654435761u;   /* every exponent, low bits, ties */
        x[i] = hfq_bits_f32(i % 64 == 0 ? (i & 0x80000000u) | (0x477ff000u + (i >> 6) % 5 - 2) : bits);
    }
    int bad = 0;
    for (int offset = 0; offset < 8; offset++) {
        const int64_t n = N - offset;
        hfq_quantize_row_f16(x + offset, got, n);
        for (int64_t i = 0; i < n; i++) {
            const uint16_t want = hfq_f32_to_fp16(x[offset + i]);
            if (got[i] != want && bad++ < 5)
                fprintf(stderr, "f16 encode of 0x%08x: 0x%04x, want 0x%04x\n", hfq_f32_bits(x[offset + i]), got[i], want);
        }
    }
    CHECK_MSG(bad == 0, "%d floats encode differently with F16C", bad);
}

/* IQ4's AVX2 nearest-level search against the scalar one at the levels,
 * halfway between neighbours, one float step either side of both, beyond
 * the ends, and on NaN. */
static void check_iq4_nearest(void) {
    static const int8_t lv[16] = HFQ_IQ4NL_LEVELS;
    float v[16 * 8 + 8];
    int n = 0;
    for (int k = 0; k < 16; k++) {
        const float mid = k < 15 ? (lv[k] + lv[k + 1]) / 2.0f : 200.0f;
        const float pts[] = {lv[k], nextafterf(lv[k], -1e9f), nextafterf(lv[k], 1e9f), mid,
                             nextafterf(mid, -1e9f), nextafterf(mid, 1e9f), lv[k] + 0.25f, -lv[k]};
        for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) v[n++] = pts[i];
    }
    const float extra[8] = {-1e30f, 1e30f, -128.0f, 114.0f, 0.0f, -0.0f, NAN, 7.5f};
    for (int i = 0; i < 8; i++) v[n++] = extra[i];
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        const float id = s == 0 ? 1.0f : s == 1 ? 0.999999f : 1.0000001f;
        uint8_t got[16 * 8 + 8];
        hfq_iq4_nearest_levels_avx2(id, v, got, n);
        for (int i = 0; i < n; i++)
            if (got[i] != hfq_iq4_nearest_level(id * v[i]) && bad++ < 5)
                fprintf(stderr, "iq4 nearest level of %a * %a: %d, scalar %d\n", id, v[i], got[i],
                        hfq_iq4_nearest_level(id * v[i]));
    }
    CHECK_MSG(bad == 0, "%d IQ4 nearest levels differ from the scalar search", bad);
}

/* ggml's nearest E2M1 codes (MXFP4, NVFP4 without a global scale) by the
 * AVX2 packer: every code's value, the midpoints to its neighbours and
 * their neighbouring floats, both signs, +-0, NaN, infinities, at scales
 * from subnormal (E8M0 0 and 1) to 2^126 (where 8 d and 12 d overflow),
 * an UE4M3 scale, 0 and a scale off any power of two; then random bit patterns. */
static void check_fp4_nearest(test_rng *rng) {
    enum { N = 256 };
    float v[N];
    int n = 0;
    for (unsigned c = 0; c < 8; c++) {
        const float a = (float)hfq_e2m1_doubled(c), b = c < 7 ? (float)hfq_e2m1_doubled(c + 1) : 16.0f;
        const float mid = (a + b) / 2;
        const float pts[] = {a, mid, nextafterf(mid, 0.0f), nextafterf(mid, 1e9f), nextafterf(a, 1e9f)};
        for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) v[n++] = pts[i], v[n++] = -pts[i];
    }
    const float extra[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1e30f, -1e-30f, 3.0e38f, -3.4e38f};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) v[n++] = extra[i];
    const int exact = n;
    while (n < N) {
        uint32_t bits = (uint32_t)rng_next(rng);
        memcpy(&v[n++], &bits, sizeof bits);
    }
    const float scales[] = {hfq_e8m0_half_to_f32(0), hfq_e8m0_half_to_f32(1), hfq_e8m0_half_to_f32(127),
                            hfq_e8m0_half_to_f32(254), hfq_ue4m3_half_to_f32(0x35), 0.0f, 0.37f};
    int bad = 0;
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
        const float d = scales[s];
        float x[N];   /* the grid points at this scale first (exact products where representable) */
        for (int i = 0; i < N; i++) x[i] = i < exact && d > 0.0f && isfinite(v[i]) ? v[i] * d : v[i];
        uint8_t got[N / 2];
        for (int len = 16; len <= 32; len += 16)
            for (int at = 0; at + len <= N; at += len) {
                uint8_t want[16];
                hfq_fp4_pack(x + at, len, d, 0, want);
                hfq_fp4_pack_ggml_avx2(d, x + at, len, got);
                for (int j = 0; j < len / 2; j++)
                    if (got[j] != want[j] && bad++ < 5)
                        fprintf(stderr, "fp4 nearest codes at scale %a of %a, %a: %#x, scalar %#x\n", d,
                                x[at + j], x[at + j + len / 2], got[j], want[j]);
            }
    }
    CHECK_MSG(bad == 0, "%d E2M1 nearest code pairs differ from the scalar search", bad);
}

/* Values x / scale meets at the grids' edges: INT8's halves and +-127,
 * each FP8 code's value, the midpoints to the next code and their
 * neighbouring floats, the saturation points; then random bit patterns. */
static int64_t qext_values(float *v, int64_t cap, test_rng *rng) {
    int64_t n = 0;
    for (int k = -130; k <= 130 && n + 4 <= cap; k++) {
        const float h = (float)k + 0.5f;
        v[n++] = h, v[n++] = nextafterf(h, 0.0f), v[n++] = nextafterf(h, 1e9f), v[n++] = (float)k;
    }
    for (int f = 0; f < 2; f++)
        for (int c = 0; c < 0x7F && n + 8 <= cap; c++) {
            const float a = hfq_fp8_to_f32((hfq_fp8_format)f, (uint8_t)c);
            const float b = hfq_fp8_to_f32((hfq_fp8_format)f, (uint8_t)(c + 1));
            const float mid = isfinite(b) ? a + (b - a) / 2 : 2 * a;
            v[n++] = a, v[n++] = -mid, v[n++] = mid, v[n++] = nextafterf(mid, 0.0f), v[n++] = nextafterf(mid, 1e30f);
            v[n++] = -nextafterf(mid, 0.0f), v[n++] = a / 3, v[n++] = -a;
        }
    while (n < cap) {
        uint32_t bits = (uint32_t)rng_next(rng);
        float f;
        memcpy(&f, &bits, sizeof f);
        v[n++] = f;
    }
    return n;
}

static void check_qext_quantizers(test_rng *rng) {
    enum { N = 4099 };   /* not a multiple of 32: a scalar tail */
    static float x[N];
    static uint8_t got[N];
    const int64_t n = qext_values(x, N, rng);
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        const float scale = s == 0 ? 1.0f : s == 1 ? 0.37f : 3e-3f;
        hfq_quantize_int8_static(x, got, 1, n, scale);
        for (int64_t i = 0; i < n; i++)
            if ((int8_t)got[i] != hfq_int8_round(x[i] / scale) && bad++ < 5)
                fprintf(stderr, "int8 code of %a / %a: %d, scalar %d\n", x[i], scale, (int8_t)got[i],
                        hfq_int8_round(x[i] / scale));
        for (int f = 0; f < 2; f++) {
            hfq_quantize_fp8_static((hfq_fp8_format)f, x, got, 1, n, scale);
            for (int64_t i = 0; i < n; i++)
                if (got[i] != hfq_f32_to_fp8((hfq_fp8_format)f, x[i] / scale) && bad++ < 5)
                    fprintf(stderr, "fp8 format %d code of %a / %a: %#x, scalar %#x\n", f, x[i], scale, got[i],
                            hfq_f32_to_fp8((hfq_fp8_format)f, x[i] / scale));
        }
    }
    /* FP8 rounding in place (FP8_BLOCK's activations): each value's decoded code times the scale, bit for bit */
    static float fake[N];
    for (int s = 0; s < 3; s++) {
        const float scale = s == 0 ? 1.0f : s == 1 ? 0.37f : 3e-3f;
        for (int f = 0; f < 2; f++) {
            hfq_fp8_fake_quant_avx2(f, x, fake, n, scale);
            for (int64_t i = 0; i < n; i++) {
                const float want = hfq_fp8_to_f32((hfq_fp8_format)f, hfq_f32_to_fp8((hfq_fp8_format)f, x[i] / scale)) * scale;
                if (memcmp(&fake[i], &want, sizeof want) != 0 && bad++ < 5)
                    fprintf(stderr, "fp8 format %d rounding of %a / %a: %a, scalar %a\n", f, x[i], scale, fake[i], want);
            }
        }
    }
    /* ... and by groups with their own amax scales (a group of zeros: zeros) */
    for (int64_t g = 1; g <= 128; g = g * 2 + 1) {
        float row[3 * 129], want[3 * 129];
        const int64_t len = 3 * g;
        for (int64_t i = 0; i < len; i++) row[i] = i < g ? 0.0f : (float)(rng_next(rng) % 20001) / 1000.0f - 10.0f;
        hfq_fp8_fake_quant_groups(HFQ_FP8_E4M3, row, fake, len, g);
        for (int64_t k = 0; k < len; k += g) {
            float amax = 0.0f;
            for (int64_t i = k; i < k + g; i++) amax = fmaxf(amax, fabsf(row[i]));
            const float sc = amax / 448.0f;
            for (int64_t i = k; i < k + g; i++)
                want[i] = sc == 0.0f ? 0.0f : hfq_fp8_to_f32(HFQ_FP8_E4M3, hfq_f32_to_fp8(HFQ_FP8_E4M3, row[i] / sc)) * sc;
        }
        if (memcmp(fake, want, (size_t)len * sizeof *want) != 0 && bad++ < 5)
            fprintf(stderr, "fp8 rounding in groups of %lld differs from the scalar steps\n", (long long)g);
    }
    /* dynamic scales: amax as fmaxf finds it (NaN skipped), on finite rows of every length to 70 */
    for (int64_t len = 1; len <= 70; len++) {
        float row[70], want = 0.0f, sc;
        for (int64_t i = 0; i < len; i++) row[i] = (float)(rng_next(rng) % 20001) / 1000.0f - 10.0f;
        for (int64_t i = 0; i < len; i++) want = fmaxf(want, fabsf(row[i]));
        hfq_quantize_int8(row, got, 1, len, NULL, &sc, 0);
        bad += sc != want / 127.0f;
        hfq_quantize_fp8(HFQ_FP8_E4M3, row, got, 1, len, NULL, &sc);
        bad += sc != want / 448.0f;
    }
    /* NVFP4 with global scales: sub-blocks of amax 6 (scale code of 1 / g, halved scale 1/2 at g = 1)
     * whose values sit on E2M1's ties and next to them, then the values above */
    static float blocks[N / 64 * 64];
    static const float ties[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
    for (int64_t i = 0; i < 64 * 16; i++) {
        const float t = ties[i % 8], sign = (i / 8) % 2 ? -1.0f : 1.0f;
        blocks[i] = i % 16 == 15 ? 6.0f : sign * ((i / 16) % 3 == 0 ? t : nextafterf(t, (i / 16) % 3 == 1 ? 0.0f : 9.0f));
    }
    memcpy(blocks + 64 * 16, x, sizeof blocks - 64 * 16 * sizeof *blocks);
    const int64_t nb = N / 64;
    static hfq_block_nvfp4 q4[N / 64], want4;
    for (int s = 0; s < 3; s++) {
        const float g = s == 0 ? 1.0f : s == 1 ? 0.013f : 3.7f;
        hfq_quantize_nvfp4(blocks, q4, 1, nb * 64, NULL, g);
        for (int64_t b = 0; b < nb; b++) {
            hfq_quantize_block_nvfp4(blocks + 64 * b, &want4, g);
            if (memcmp(&want4, &q4[b], sizeof want4) && bad++ < 5) fprintf(stderr, "nvfp4 block %lld at g %a differs\n", (long long)b, g);
        }
        /* the W4A4 scale search: each sub-block's code and bytes as the scalar search gives them */
        hfq_quantize_nvfp4_act_search(blocks, q4, nb * 64, g);
        for (int64_t b = 0; b < nb; b++) {
            for (int sb = 0; sb < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; sb++) {
                const float *xs = blocks + 64 * b + HFQ_QK_NVFP4_SUB * sb;
                hfq_nvfp4_pack_sub(xs, hfq_nvfp4_act_search_code(xs, g), g, &want4, sb);
            }
            if (memcmp(&want4, &q4[b], sizeof want4) && bad++ < 5)
                fprintf(stderr, "nvfp4 searched block %lld at g %a differs\n", (long long)b, g);
        }
    }
    CHECK_MSG(bad == 0, "%d INT8 / FP8 / NVFP4 codes or scales differ from the scalar quantizers", bad);
}

/* The activation quantizers (Q8_K, and Q8_0 as llama.cpp's x86 backend
 * makes it) against their scalar blocks, on blocks of every row kind and of
 * mixed kinds; blocks whose extreme is +-127 (so the codes are x itself),
 * filled with the halves of qext_values (ties of the rounding) and
 * their neighbours; blocks where +m comes before -m and the reverse (the
 * first extreme sets the sign); all-zero, -0, NaN-only blocks; and random
 * bit patterns (NaN, infinities, subnormals). */
static void check_act_quantizers(test_rng *rng) {
    enum { NB = 96, N = NB * 256 };
    static float x[N];
    static hfq_block_q8_k got_k[NB], want_k;
    static hfq_block_q8_0 got_0[N / 32], want_0;
    int bad = 0;
    for (int round = 0; round < KIND_COUNT + 1; round++) {
        if (round < ROW_KIND_COUNT) fill_row(rng, round, x, N);
        else if (round == KIND_MIXED) fill_mixed(rng, x, N);
        else {
            qext_values(x, N, rng);
            for (int b = 0; b < 24; b++) {   /* halves k + 0.5 of -127 .. 126 and their neighbours */
                for (int i = 0; i < 256; i++) {
                    const float h = (float)((i + 7 * b) % 254 - 127) + 0.5f;
                    x[256 * b + i] = i % 3 == 0 ? h : nextafterf(h, i % 3 == 1 ? 0.0f : 1e9f);
                }
                x[256 * b + 17 * (b % 8)] = b % 2 ? 127.0f : -127.0f;
            }
            for (int b = 24; b < 32; b++) { /* +m and -m, in either order */
                x[256 * b + 3 + b] = b % 2 ? 1e3f : -1e3f;
                x[256 * b + 200 - b] = b % 2 ? -1e3f : 1e3f;
            }
            for (int i = 0; i < 256; i++) x[256 * 32 + i] = 0.0f, x[256 * 33 + i] = -0.0f, x[256 * 34 + i] = NAN;
            x[256 * 35 + 9] = INFINITY, x[256 * 36 + 200] = -INFINITY, x[256 * 37 + 31] = NAN;
            /* one NaN pattern: the product of two NaNs keeps the payload of
             * the operand the compiler put first (x86), so two compilations
             * of the same scalar block differ where a Q8_0 block ends in a
             * NaN (its scale is then NaN) and holds another */
            for (int i = 0; i < N; i++)
                if (isnan(x[i])) x[i] = NAN;
        }
        memset(got_k, 0xA5, sizeof got_k);
        memset(got_0, 0xA5, sizeof got_0);
        hfq_quantize_row_q8_k_avx2(x, got_k, N);
        hfq_quantize_row_q8_0_act_avx2(x, got_0, N);
        for (int b = 0; b < NB; b++) {
            hfq_quantize_block_q8_k(x + 256 * b, &want_k);
            if (memcmp(&want_k, &got_k[b], sizeof want_k) && bad++ < 5)
                fprintf(stderr, "q8_K round %d block %d differs\n", round, b);
        }
        for (int b = 0; b < N / 32; b++) {
            hfq_quantize_block_q8_0_act(x + 32 * b, &want_0);
            if (memcmp(&want_0, &got_0[b], sizeof want_0) && bad++ < 5)
                fprintf(stderr, "q8_0 activation round %d block %d differs\n", round, b);
        }
    }
    CHECK_MSG(bad == 0, "%d Q8_K / Q8_0 activation blocks differ from the scalar quantizers", bad);
    printf("q8_K, q8_0 activations: %s\n", bad ? "AVX2 differs from scalar" : "AVX2 == scalar");
}

int main(void) {
    if (hfq_isa_best() != HFQ_ISA_AVX2) CHECK_SKIP("this CPU has no AVX2: only the scalar kernels run");
    check_f16_decode();
    check_f16_encode();
    check_iq4_nearest();
    test_rng rng = {7};
    check_qext_quantizers(&rng);
    check_fp4_nearest(&rng);
    check_act_quantizers(&rng);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], &rng);
    return check_exit();
}
