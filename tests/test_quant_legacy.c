/* Q8_0, Q4_0, Q5_0, Q5_1, Q8_1: hand-computed encodings of chosen blocks,
 * byte layout, and round-trip error bounds that follow from each format's
 * definition (not from our code). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "quant/block_math.h"
#include "quant/q_legacy.h"
#include "quant_rows.h"

/* Q8_0 with amax 127: d = 1 (fp16 0x3c00), q = round half away from zero. */
static void test_q8_0_hand(void) {
    float x[32] = {0};
    x[0] = 127;
    x[1] = -127;
    x[2] = 2.5f;   /* -> 3 */
    x[3] = -2.5f;  /* -> -3 */
    x[4] = 0.49f;  /* -> 0 */
    x[5] = 99.51f; /* -> 100 */
    uint8_t out[34];
    CHECK(hfq_quantize_q8_0(x, out, 1, 32, NULL) == 34);
    const uint8_t want_head[8] = {0x00, 0x3c, 127, (uint8_t)-127, 3, (uint8_t)-3, 0, 100};
    CHECK(memcmp(out, want_head, 8) == 0);
    for (int j = 6; j < 32; j++) CHECK(out[2 + j] == 0);
    float y[32];
    hfq_dequantize_q8_0(out, y, 32);
    CHECK(y[0] == 127 && y[1] == -127 && y[2] == 3 && y[3] == -3 && y[5] == 100);
}

/* Q4_0: the signed extreme -8 gives d = 1; q = min(15, trunc(x + 8.5)).
 * Element j is the low nibble of byte j, element j + 16 the high nibble. */
static void test_q4_0_hand(void) {
    float x[32] = {0};
    x[0] = -8;     /* 0 */
    x[1] = 7;      /* 15 */
    x[2] = 7.4f;   /* 15 */
    x[3] = 0.5f;   /* 9: ties go up */
    x[4] = -0.5f;  /* 8 */
    x[16] = 3.2f;  /* 11, high nibble of byte 0 */
    x[17] = -7.6f; /* 0 (trunc(0.9)) */
    uint8_t out[18];
    CHECK(hfq_quantize_q4_0(x, out, 1, 32, NULL) == 18);
    CHECK(out[0] == 0x00 && out[1] == 0x3c);
    CHECK(out[2] == (0 | 11 << 4));
    CHECK(out[3] == (15 | 0 << 4));
    CHECK(out[4] == (15 | 8 << 4));
    CHECK(out[5] == (9 | 8 << 4));
    CHECK(out[6] == (8 | 8 << 4));
    /* a positive extreme gives a negative d: 8 -> level 0 -> (0 - 8) * -1 */
    float p[32] = {0};
    p[0] = 8;
    CHECK(hfq_quantize_q4_0(p, out, 1, 32, NULL) == 18);
    CHECK(out[0] == 0x00 && out[1] == 0xbc);
    float y[32];
    hfq_dequantize_q4_0(out, y, 32);
    CHECK(y[0] == 8 && y[1] == 0);
}

/* Q5_0: extreme -16 gives d = 1; level 5 bits, bit 4 of element j in bit j
 * of the little-endian qh. */
static void test_q5_0_hand(void) {
    float x[32] = {0};
    x[0] = -16;  /* 0 */
    x[1] = 15;   /* 31 */
    x[17] = 1;   /* 17: low nibble 1 in the high half of byte 1, bit 17 of qh */
    uint8_t out[22];
    CHECK(hfq_quantize_q5_0(x, out, 1, 32, NULL) == 22);
    CHECK(out[0] == 0x00 && out[1] == 0x3c);
    /* zeros are level 16: bit 4 set everywhere except element 0 */
    uint32_t qh = (uint32_t)out[2] | (uint32_t)out[3] << 8 | (uint32_t)out[4] << 16 | (uint32_t)out[5] << 24;
    CHECK(qh == 0xfffffffeu);
    CHECK(out[6] == (0 | 0 << 4));   /* elements 0 (0) and 16 (16 -> low nibble 0) */
    CHECK(out[7] == (15 | 1 << 4));  /* elements 1 (31) and 17 (17) */
    float y[32];
    hfq_dequantize_q5_0(out, y, 32);
    CHECK(y[0] == -16 && y[1] == 15 && y[17] == 1 && y[2] == 0);
}

/* Q5_1: min -1 and max 30 give d = 1, m = -1; q = trunc(x - m + 0.5). */
static void test_q5_1_hand(void) {
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)j - 1; /* levels 0..31 */
    x[5] = 3.5f;                                      /* 4.5 -> 5 (ties up) */
    uint8_t out[24];
    CHECK(hfq_quantize_q5_1(x, out, 1, 32, NULL) == 24);
    CHECK(out[0] == 0x00 && out[1] == 0x3c); /* d = 1 */
    CHECK(out[2] == 0x00 && out[3] == 0xbc); /* m = -1 */
    uint32_t qh = (uint32_t)out[4] | (uint32_t)out[5] << 8 | (uint32_t)out[6] << 16 | (uint32_t)out[7] << 24;
    CHECK(qh == 0xffff0000u);                  /* levels 16..31 are elements 16..31 */
    CHECK(out[8 + 0] == (0 | 0 << 4));         /* levels 0 and 16 */
    CHECK(out[8 + 5] == (5 | 5 << 4));         /* 3.5 -> 5 and level 21 */
    CHECK(out[8 + 15] == (15 | 15 << 4));
    float y[32];
    hfq_dequantize_q5_1(out, y, 32);
    CHECK(y[0] == -1 && y[31] == 30 && y[5] == 4);
}

/* Q8_1 stores s = d * sum(q) with the unrounded d. */
static void test_q8_1_sum(void) {
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j % 5) - 1.5f;
    hfq_block_q8_1 b;
    hfq_quantize_row_q8_1(x, &b, 32);
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += b.qs[j];
    float d = 2.5f / 127;
    CHECK(b.s == hfq_f32_to_fp16((float)sum * d));
    CHECK(b.d == hfq_f32_to_fp16(d));
    CHECK(b.qs[0] == -76); /* -1.5 * 127 / 2.5 = -76.2 */
}

typedef void (*dequant_fn)(const void *, float *, int64_t);
typedef size_t (*quant_fn)(const float *, void *, int64_t, int64_t, const float *);

/* |x - decoded| bounds per block, from the definitions:
 * symmetric (nmax 8 or 16): d = extreme / -nmax, levels -nmax..nmax-1, so
 * x / d in [-nmax, nmax]; rounding costs d / 2 except above nmax - 0.5,
 * where clamping costs up to d; storing d as fp16 adds nmax * |d - d16|.
 * Q8_0: d = amax / 127, error d / 2 + 127 |d - d16|. Q5_1: d = range / 31,
 * error d / 2 + 31 |d - d16| + |min - m16|. Plus float slack. */
static void check_bounds(const char *name, quant_fn quantize, dequant_fn dequantize, int kind, size_t block_bytes) {
    enum { N = 1024 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    test_rng rng = {(uint64_t)kind * 7919 + block_bytes};
    int bad = 0;
    for (int rep = 0; rep < 8; rep++) {
        fill_row(&rng, kind, x, N);
        CHECK(quantize(x, q, 1, N, NULL) == N / 32 * block_bytes);
        dequantize(q, y, N);
        for (int b = 0; b < N / 32; b++) {
            const float *xb = x + 32 * b;
            float lo = xb[0], hi = xb[0], amax = 0;
            for (int j = 0; j < 32; j++) {
                lo = fminf(lo, xb[j]);
                hi = fmaxf(hi, xb[j]);
                amax = fmaxf(amax, fabsf(xb[j]));
            }
            float d16 = hfq_fp16_to_f32((uint16_t)(q[b * block_bytes] | q[b * block_bytes + 1] << 8));
            for (int j = 0; j < 32; j++) {
                double err = fabs((double)xb[j] - y[32 * b + j]), bound;
                if (block_bytes == 34) {
                    double d = amax / 127.0;
                    bound = d / 2 + 127 * fabs(d - d16);
                } else if (block_bytes == 24) {
                    double d = (hi - lo) / 31.0;
                    float m16 = hfq_fp16_to_f32((uint16_t)(q[b * block_bytes + 2] | q[b * block_bytes + 3] << 8));
                    bound = d / 2 + 31 * fabs(d - d16) + fabs(lo - m16);
                } else {
                    int nmax = block_bytes == 18 ? 8 : 16;
                    double d = hfq_signed_extreme(xb, 32) / (double)-nmax;
                    double r = d ? xb[j] / d : 0;
                    bound = (r > nmax - 0.5 ? fabs(d) : fabs(d) / 2) + nmax * fabs(d - d16);
                }
                bound += 1e-6 * amax + 1e-30;
                if (err > bound && bad++ < 5)
                    fprintf(stderr, "%s %s: block %d elem %d: x=%.9g y=%.9g err %.3g > %.3g\n", name,
                            row_kind_name(kind), b, j, xb[j], y[32 * b + j], err, bound);
            }
        }
    }
    CHECK_MSG(bad == 0, "%s %s: %d values outside the bound", name, row_kind_name(kind), bad);
}

int main(void) {
    test_q8_0_hand();
    test_q4_0_hand();
    test_q5_0_hand();
    test_q5_1_hand();
    test_q8_1_sum();
    /* rows whose fp16 scale stays finite and normal */
    const int kinds[] = {ROW_GAUSS, ROW_UNIFORM, ROW_HEAVY, ROW_ZERO, ROW_CONSTANT, ROW_BLOCK_SCALED, ROW_OFFSET,
                         ROW_INTEGERS, ROW_SPARSE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        check_bounds("q8_0", hfq_quantize_q8_0, hfq_dequantize_q8_0, kinds[k], 34);
        check_bounds("q4_0", hfq_quantize_q4_0, hfq_dequantize_q4_0, kinds[k], 18);
        check_bounds("q5_0", hfq_quantize_q5_0, hfq_dequantize_q5_0, kinds[k], 22);
        check_bounds("q5_1", hfq_quantize_q5_1, hfq_dequantize_q5_1, kinds[k], 24);
    }
    return check_exit();
}
