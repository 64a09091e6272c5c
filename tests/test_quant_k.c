/* Q4_K, Q5_K, Q6_K, Q8_K: decoding hand-packed blocks (the layouts as ggml
 * defines them), a hand-computed Q8_K encoding, the per-element error bound
 * that requantizing against the stored scales guarantees, overall accuracy
 * on gaussian rows, and the effect of importance weights. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "quant/block_math.h"
#include "quant/q_k.h"
#include "quant_rows.h"

/* Sub-block scales and mins used by the hand-packed blocks, and their
 * packing worked out by hand: bytes 0-3 hold sc0-3 plus the top two bits of
 * sc4-7, bytes 4-7 m0-3 plus the top bits of m4-7, bytes 8-11 the low
 * nibbles of sc4-7 (low) and m4-7 (high). */
static const uint8_t SC[8] = {1, 2, 3, 4, 5, 33, 63, 7};
static const uint8_t MN[8] = {0, 1, 2, 3, 4, 5, 40, 63};
static const uint8_t PACKED[12] = {0x01, 0x82, 0xc3, 0x04, 0x00, 0x01, 0x82, 0xc3, 0x45, 0x51, 0x8f, 0xf7};

static void test_k_scales(void) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        hfq_k_scale_min(j, PACKED, &sc, &m);
        CHECK_MSG(sc == SC[j] && m == MN[j], "sub-block %d: %d/%d", j, sc, m);
    }
}

/* Q4_K with d = 1, dmin = 0.5: element e of sub-block j = e / 32 decodes to
 * sc_j * q - 0.5 * m_j; q is the low nibble of qs[32 p + l] for e = 64 p + l
 * and the high nibble for e = 64 p + 32 + l. */
static void test_q4_k_layout(void) {
    hfq_block_q4_k b;
    b.d = 0x3c00;
    b.dmin = 0x3800;
    memcpy(b.scales, PACKED, 12);
    for (int i = 0; i < 128; i++) b.qs[i] = (uint8_t)((i & 15) | (15 - (i & 15)) << 4);
    float y[256];
    hfq_dequantize_q4_k(&b, y, 256);
    for (int e = 0; e < 256; e++) {
        int p = e / 64, l = e % 32, high = (e % 64) >= 32;
        int q = high ? 15 - (l & 15) : (l & 15);
        (void)p;
        float want = (float)(SC[e / 32] * q) - 0.5f * MN[e / 32];
        CHECK_MSG(y[e] == want, "q4_K element %d: %g vs %g", e, y[e], want);
    }
}

/* Q5_K: as Q4_K, plus bit 4 of sub-block j's element l in bit j of qh[l]. */
static void test_q5_k_layout(void) {
    hfq_block_q5_k b;
    b.d = 0x3c00;
    b.dmin = 0x3800;
    memcpy(b.scales, PACKED, 12);
    uint8_t q[256];
    for (int e = 0; e < 256; e++) q[e] = (uint8_t)((e * 7 + e / 32) % 32);
    memset(b.qh, 0, 32);
    for (int e = 0; e < 256; e++) {
        int j = e / 32, l = e % 32, p = e / 64;
        if (q[e] & 16) b.qh[l] |= (uint8_t)(1 << j);
        if (j % 2 == 0) b.qs[32 * p + l] = q[e] & 15;
        else b.qs[32 * p + l] |= (uint8_t)((q[e] & 15) << 4);
    }
    float y[256];
    hfq_dequantize_q5_k(&b, y, 256);
    for (int e = 0; e < 256; e++) {
        float want = (float)(SC[e / 32] * q[e]) - 0.5f * MN[e / 32];
        CHECK_MSG(y[e] == want, "q5_K element %d: %g vs %g", e, y[e], want);
    }
}

/* Q6_K with d = 0.25 and scales[s] = s - 8: element e = 128 h + 32 k + l has
 * its low nibble in ql[64 h + l] (k = 0, 2: low/high nibble) or
 * ql[64 h + 32 + l] (k = 1, 3), its top two bits at bit 2k of qh[32 h + l];
 * it decodes to 0.25 * scales[e / 16] * (q - 32). */
static void test_q6_k_layout(void) {
    hfq_block_q6_k b;
    memset(&b, 0, sizeof b);
    b.d = 0x3400;
    for (int s = 0; s < 16; s++) b.scales[s] = (int8_t)(s - 8);
    uint8_t q[256];
    for (int e = 0; e < 256; e++) q[e] = (uint8_t)((e * 13 + 5) % 64);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        uint8_t *ql = &b.ql[64 * h + (k % 2) * 32 + l];
        *ql |= (uint8_t)((q[e] & 15) << (k >= 2 ? 4 : 0));
        b.qh[32 * h + l] |= (uint8_t)((q[e] >> 4) << (2 * k));
    }
    float y[256];
    hfq_dequantize_q6_k(&b, y, 256);
    for (int e = 0; e < 256; e++) {
        float want = 0.25f * (float)((e / 16 - 8) * (q[e] - 32));
        CHECK_MSG(y[e] == want, "q6_K element %d: %g vs %g", e, y[e], want);
    }
}

/* Q8_K: extreme -127/64 gives iscale 64 exactly, d = 1/64; quants round to
 * nearest even; bsums are sums of 16. */
static void test_q8_k_hand(void) {
    float x[256] = {0};
    x[0] = -127.f / 64;
    x[1] = 1.0f;        /* 64 */
    x[2] = 0.5f / 64;   /* 0.5 -> 0 */
    x[3] = 1.5f / 64;   /* 2 */
    x[4] = 2.5f / 64;   /* 2 */
    x[5] = -1.5f / 64;  /* -2 */
    x[16] = 127.f / 64; /* 127 */
    x[255] = -3.f / 64; /* -3 */
    hfq_block_q8_k b;
    hfq_quantize_row_q8_k(x, &b, 256);
    CHECK(b.d == 1.0f / 64);
    const int8_t want[6] = {-127, 64, 0, 2, 2, -2};
    CHECK(memcmp(b.qs, want, 6) == 0);
    CHECK(b.qs[16] == 127 && b.qs[255] == -3);
    CHECK(b.bsums[0] == -127 + 64 + 2 + 2 - 2);
    CHECK(b.bsums[1] == 127 && b.bsums[15] == -3 && b.bsums[7] == 0);
    float zero[256] = {0};
    hfq_quantize_row_q8_k(zero, &b, 256);
    CHECK(b.d == 0 && b.qs[0] == 0 && b.bsums[3] == 0);
}

/* Levels and per-sub-block step/offset of a super-block, for the bound. */
typedef struct superblock_view {
    int level[256]; /* as stored */
    int lo, hi;     /* the level range */
    float step[256], offset[256]; /* y = step * level - offset */
} superblock_view;

static void view_superblock(int fmt, const uint8_t *blk, superblock_view *v) {
    if (fmt == 6) {
        const hfq_block_q6_k *b = (const hfq_block_q6_k *)blk;
        int8_t q[256];
        hfq_levels_q6_k(b, q);
        for (int e = 0; e < 256; e++) {
            v->level[e] = q[e];
            v->step[e] = hfq_fp16_to_f32(b->d) * b->scales[e / 16];
            v->offset[e] = 0;
        }
        v->lo = -32;
        v->hi = 31;
        return;
    }
    uint8_t q[256];
    const uint8_t *scales;
    float d, dmin;
    if (fmt == 4) {
        const hfq_block_q4_k *b = (const hfq_block_q4_k *)blk;
        hfq_levels_q4_k(b, q);
        scales = b->scales, d = hfq_fp16_to_f32(b->d), dmin = hfq_fp16_to_f32(b->dmin);
        v->hi = 15;
    } else {
        const hfq_block_q5_k *b = (const hfq_block_q5_k *)blk;
        hfq_levels_q5_k(b, q);
        scales = b->scales, d = hfq_fp16_to_f32(b->d), dmin = hfq_fp16_to_f32(b->dmin);
        v->hi = 31;
    }
    v->lo = 0;
    for (int e = 0; e < 256; e++) {
        uint8_t sc, m;
        hfq_k_scale_min(e / 32, scales, &sc, &m);
        v->level[e] = q[e];
        v->step[e] = d * sc;
        v->offset[e] = dmin * m;
    }
}

typedef struct k_format {
    int id; /* 4, 5, 6 */
    size_t (*quantize)(const float *, void *, int64_t, int64_t, const float *);
    void (*dequantize)(const void *, float *, int64_t);
    size_t block_bytes;
} k_format;

static const k_format FORMATS[] = {
    {4, hfq_quantize_q4_k, hfq_dequantize_q4_k, sizeof(hfq_block_q4_k)},
    {5, hfq_quantize_q5_k, hfq_dequantize_q5_k, sizeof(hfq_block_q5_k)},
    {6, hfq_quantize_q6_k, hfq_dequantize_q6_k, sizeof(hfq_block_q6_k)},
};

/* Values are requantized against the stored scales, so every value whose
 * level is not at either end of the range (no clamping) lies within half a
 * step of its decoded value, whatever the scale searches chose. */
static void test_step_bound(const k_format *f, int kind, int weighted) {
    enum { N = 1024 };
    static float x[N], y[N], imp[N];
    static uint8_t q[N * 2];
    test_rng rng = {(uint64_t)(kind * 31 + f->id * 7 + weighted)};
    int bad = 0, inside = 0;
    for (int rep = 0; rep < 4; rep++) {
        fill_row(&rng, kind, x, N);
        fill_importance(&rng, imp, N);
        CHECK(f->quantize(x, q, 1, N, weighted ? imp : NULL) == N / 256 * f->block_bytes);
        f->dequantize(q, y, N);
        for (int sb = 0; sb < N / 256; sb++) {
            superblock_view v;
            view_superblock(f->id, q + sb * f->block_bytes, &v);
            for (int e = 0; e < 256; e++) {
                int i = 256 * sb + e;
                CHECK(y[i] == v.step[e] * v.level[e] - v.offset[e]);
                if (v.step[e] == 0 || v.level[e] == v.lo || v.level[e] == v.hi) continue;
                inside++;
                double err = fabs((double)x[i] - y[i]);
                double bound = fabs(v.step[e]) * 0.5 * (1 + 1e-5) + 1e-6 * fabs(x[i]) + 1e-30;
                if (err > bound && bad++ < 5)
                    fprintf(stderr, "q%d_K %s: x=%.9g y=%.9g err %.3g > %.3g\n", f->id, row_kind_name(kind), x[i],
                            y[i], err, bound);
            }
        }
    }
    CHECK_MSG(bad == 0, "q%d_K %s weighted=%d: %d of %d values beyond half a step", f->id, row_kind_name(kind),
              weighted, bad, inside);
}

/* Relative rms error on gaussian rows: roughly halving per extra bit, and
 * inside bounds well above what ggml's K-quants achieve (~0.07 / 0.035 /
 * 0.018 for Q4_K / Q5_K / Q6_K). */
static double rel_rms_error(const k_format *f, const float *importance, double *weighted_err) {
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    test_rng rng = {99};
    double se = 0, ss = 0, we = 0;
    for (int rep = 0; rep < 8; rep++) {
        fill_row(&rng, ROW_GAUSS, x, N);
        f->quantize(x, q, 1, N, importance);
        f->dequantize(q, y, N);
        for (int i = 0; i < N; i++) {
            double e2 = ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            se += e2;
            ss += (double)x[i] * x[i];
            if (importance) we += importance[i] * e2;
        }
    }
    if (weighted_err) *weighted_err = we;
    return sqrt(se / ss);
}

static void test_accuracy(void) {
    const double limit[3] = {0.09, 0.045, 0.025};
    double prev = 1;
    for (int f = 0; f < 3; f++) {
        double e = rel_rms_error(&FORMATS[f], NULL, NULL);
        CHECK_MSG(e < limit[f] && e < prev * 0.65, "q%d_K: relative rms error %.4f", FORMATS[f].id, e);
        prev = e;
    }
}

/* With importance, the importance-weighted error must drop: that is what
 * calibration pays for. Measured on the same rows with and without. */
static void test_importance_helps(void) {
    enum { N = 4096 };
    static float imp[N];
    test_rng rng = {5};
    fill_importance(&rng, imp, N);
    for (int f = 0; f < 3; f++) {
        double with_imp, without_imp;
        rel_rms_error(&FORMATS[f], imp, &with_imp);
        /* the reference path, scored with the same weights */
        enum { M = 4096 };
        static float x[M], y[M];
        static uint8_t q[M * 2];
        test_rng rows = {99};
        without_imp = 0;
        for (int rep = 0; rep < 8; rep++) {
            fill_row(&rows, ROW_GAUSS, x, M);
            FORMATS[f].quantize(x, q, 1, M, NULL);
            FORMATS[f].dequantize(q, y, M);
            for (int i = 0; i < M; i++) without_imp += imp[i] * ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        }
        CHECK_MSG(with_imp < 0.9 * without_imp, "q%d_K: weighted error %.4g with importance vs %.4g without",
                  FORMATS[f].id, with_imp, without_imp);
    }
}

int main(void) {
    test_k_scales();
    test_q4_k_layout();
    test_q5_k_layout();
    test_q6_k_layout();
    test_q8_k_hand();
    const int kinds[] = {ROW_GAUSS, ROW_UNIFORM, ROW_HEAVY, ROW_ZERO, ROW_CONSTANT, ROW_BLOCK_SCALED, ROW_OFFSET,
                         ROW_INTEGERS, ROW_SPARSE};
    for (int f = 0; f < 3; f++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (int weighted = 0; weighted < 2; weighted++) test_step_bound(&FORMATS[f], kinds[k], weighted);
    test_accuracy();
    test_importance_helps();
    return check_exit();
}
