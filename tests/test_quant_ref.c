/* Bit-for-bit agreement with llama.cpp's own quantizers, compiled from
 * .cache/llama.cpp into a test-only library (tests/ref/): for every integer
 * format, many random rows of varied distributions and lengths,
 *   - quantize without importance == ggml quantize_<type>(..., NULL)
 *     (which is quantize_row_<type>_ref),
 *   - quantize with a random importance == ggml quantize_<type>(..., imatrix)
 *     (Q8_0, which ggml quantizes without it: each block ggml's or better),
 *   - dequantize == ggml dequantize_row_<type> (float bits),
 *   - the Q8_K activation quantizer == quantize_row_q8_K_ref (Q8_0/Q8_1
 *     activations follow llama.cpp's x86 code instead: test_quant_act_x86),
 *   - vec_dot == ggml's generic vec_dot and a double-precision dot of the
 *     decoded rows, within float rounding; bit for bit with ggml's where our
 *     headers promise it (Q4_1, Q2_K, IQ4_NL, IQ4_XS, the grid i-quants),
 *   - the i-quants' codebooks (quant/iq_grids.h) == ggml-common.h's.
 * Rows of 32-element formats also come in lengths that are not multiples of
 * 256.
 * Skips when the llama.cpp sources were not there at configure time. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quant/block_math.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/iq3.h"
#include "quant/iq_grids.h"
#include "quant/qtype.h"
#include "quant_rows.h"

#ifndef HFQ_HAVE_GGML_REF
int main(void) {
    CHECK_SKIP("llama.cpp reference sources (.cache/llama.cpp) were absent at configure time; "
               "run scripts/fetch_reference.sh and reconfigure");
}
#else
#include "ref/ggml_ref.h"

typedef struct ref_case {
    hfq_qtype type;
    size_t (*quantize)(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *imatrix);
    void (*dequantize)(const void *x, float *y, int64_t k);
    ggml_ref_vec_dot vec_dot;
    void (*act_ref)(const float *x, void *y, int64_t k); /* NULL: not ggml's reference (see above) */
    bool dot_exact; /* vec_dot gives ggml's float bits */
    bool needs_importance; /* ggml asserts an imatrix: ours writes zeros and returns 0 without one */
} ref_case;

static const ref_case cases[] = {
    {HFQ_QT_Q8_0, quantize_q8_0, dequantize_row_q8_0, ggml_vec_dot_q8_0_q8_0, NULL, false, false},
    {HFQ_QT_Q4_0, quantize_q4_0, dequantize_row_q4_0, ggml_vec_dot_q4_0_q8_0, NULL, false, false},
    {HFQ_QT_Q4_1, quantize_q4_1, dequantize_row_q4_1, ggml_vec_dot_q4_1_q8_1, NULL, true, false},
    {HFQ_QT_Q5_0, quantize_q5_0, dequantize_row_q5_0, ggml_vec_dot_q5_0_q8_0, NULL, false, false},
    {HFQ_QT_Q5_1, quantize_q5_1, dequantize_row_q5_1, ggml_vec_dot_q5_1_q8_1, NULL, false, false},
    {HFQ_QT_Q2_K, quantize_q2_K, dequantize_row_q2_K, ggml_vec_dot_q2_K_q8_K, quantize_row_q8_K_ref, true, false},
    {HFQ_QT_Q3_K, quantize_q3_K, dequantize_row_q3_K, ggml_vec_dot_q3_K_q8_K, quantize_row_q8_K_ref, false, false},
    {HFQ_QT_Q4_K, quantize_q4_K, dequantize_row_q4_K, ggml_vec_dot_q4_K_q8_K, quantize_row_q8_K_ref, false, false},
    {HFQ_QT_Q5_K, quantize_q5_K, dequantize_row_q5_K, ggml_vec_dot_q5_K_q8_K, quantize_row_q8_K_ref, false, false},
    {HFQ_QT_Q6_K, quantize_q6_K, dequantize_row_q6_K, ggml_vec_dot_q6_K_q8_K, quantize_row_q8_K_ref, false, false},
    {HFQ_QT_IQ4_NL, quantize_iq4_nl, dequantize_row_iq4_nl, ggml_vec_dot_iq4_nl_q8_0, NULL, true, false},
    {HFQ_QT_IQ4_XS, quantize_iq4_xs, dequantize_row_iq4_xs, ggml_vec_dot_iq4_xs_q8_K, quantize_row_q8_K_ref, true, false},
    {HFQ_QT_IQ3_XXS, quantize_iq3_xxs, dequantize_row_iq3_xxs, ggml_vec_dot_iq3_xxs_q8_K, quantize_row_q8_K_ref,
     true, false},
    {HFQ_QT_IQ3_S, quantize_iq3_s, dequantize_row_iq3_s, ggml_vec_dot_iq3_s_q8_K, quantize_row_q8_K_ref, true, false},
    {HFQ_QT_IQ2_XXS, quantize_iq2_xxs, dequantize_row_iq2_xxs, ggml_vec_dot_iq2_xxs_q8_K, quantize_row_q8_K_ref, true,
     true},
    {HFQ_QT_IQ2_XS, quantize_iq2_xs, dequantize_row_iq2_xs, ggml_vec_dot_iq2_xs_q8_K, quantize_row_q8_K_ref, true,
     true},
    {HFQ_QT_IQ2_S, quantize_iq2_s, dequantize_row_iq2_s, ggml_vec_dot_iq2_s_q8_K, quantize_row_q8_K_ref, true, false},
    {HFQ_QT_IQ1_S, quantize_iq1_s, dequantize_row_iq1_s, ggml_vec_dot_iq1_s_q8_K, quantize_row_q8_K_ref, true, true},
    {HFQ_QT_IQ1_M, quantize_iq1_m, dequantize_row_iq1_m, ggml_vec_dot_iq1_m_q8_K, quantize_row_q8_K_ref, true, false},
    {HFQ_QT_TQ1_0, quantize_tq1_0, dequantize_row_tq1_0, ggml_vec_dot_tq1_0_q8_K, quantize_row_q8_K_ref, true, false},
    {HFQ_QT_TQ2_0, quantize_tq2_0, dequantize_row_tq2_0, ggml_vec_dot_tq2_0_q8_K, quantize_row_q8_K_ref, true, false},
    {HFQ_QT_Q1_0, quantize_q1_0, dequantize_row_q1_0, ggml_vec_dot_q1_0_q8_0, NULL, true, false},
    {HFQ_QT_Q2_0, quantize_q2_0, dequantize_row_q2_0, ggml_vec_dot_q2_0_q8_0, NULL, true, false},
};

enum { MAX_N = 4096, NROWS = 6 };

static int64_t first_diff(const void *a, const void *b, size_t n) {
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return (int64_t)i;
    return -1;
}

/* Counts a byte mismatch and reports the first few. */
static int mismatches;
static void expect_same(const char *what, const hfq_qtype_traits *t, int kind, int64_t n, const void *ours,
                        const void *theirs, size_t bytes) {
    int64_t at = first_diff(ours, theirs, bytes);
    if (at < 0) return;
    if (mismatches++ < 10)
        fprintf(stderr, "%s %s: %s rows of %lld differ from ggml at byte %lld of %zu\n", t->name, what,
                row_kind_name(kind), (long long)n, (long long)at, bytes);
    check_failures++;
}

static int all_finite(const float *x, int64_t n) {
    return hfq_first_nonfinite(x, n) < 0;
}

/* The block of a row of format t holding element i. */
static const uint8_t *block_of(const hfq_qtype_traits *t, const void *row, int64_t i) {
    return (const uint8_t *)row + (i / t->block_size) * t->type_size;
}

static float fp16_at(const uint8_t *p) { return hfq_fp16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Q8_1 stores s = d * sum(q) rounded to fp16 (and from the unrounded d), and
 * the Q4_1/Q5_1 dot uses it for the m * sum(a) term: a designed
 * approximation, so the exact value to compare with includes
 * m * (s - d16 * sum(q)) (m follows d at the head of both weight blocks). */
static double q8_1_offset_error(const hfq_qtype_traits *t, const void *wrow, const void *arow, int64_t n) {
    const hfq_block_q8_1 *a = arow;
    double err = 0;
    for (int64_t b = 0; b < n / HFQ_QK; b++) {
        int sum = 0;
        for (int j = 0; j < HFQ_QK; j++) sum += a[b].qs[j];
        double stored = hfq_fp16_to_f32(a[b].s), decoded = (double)hfq_fp16_to_f32(a[b].d) * sum;
        err += (double)fp16_at(block_of(t, wrow, b * HFQ_QK) + 2) * (stored - decoded);
    }
    return err;
}

/* The offset term of each decoded value (the m of Q4_1/Q5_1, dmin * m_j of
 * Q2_K/Q4_K/Q5_K; 0 for symmetric formats): a dot product of an affine
 * format subtracts two sums, so its float rounding scales with both, not
 * with the difference. */
static void offsets(const hfq_qtype_traits *t, const void *row, int64_t n, float *off) {
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *blk = block_of(t, row, i);
        off[i] = 0;
        if (t->type == HFQ_QT_Q4_1 || t->type == HFQ_QT_Q5_1) {
            off[i] = fp16_at(blk + 2);
        } else if (t->type == HFQ_QT_Q2_K) {
            const hfq_block_q2_k *b = (const hfq_block_q2_k *)blk;
            off[i] = hfq_fp16_to_f32(b->dmin) * (b->scales[(i % HFQ_QK_K) / 16] >> 4);
        } else if (t->type == HFQ_QT_Q4_K || t->type == HFQ_QT_Q5_K) {
            /* d, dmin and scales lead both block types */
            uint8_t sc, m;
            hfq_k_scale_min((int)(i % HFQ_QK_K) / 32, blk + 4, &sc, &m);
            off[i] = fp16_at(blk + 2) * m;
        }
    }
}

/* Dot products of one weight row against one activation row. */
static void check_dots(const ref_case *c, const hfq_qtype_traits *t, int kind, int64_t n, const uint8_t *wrow,
                       test_rng *rng) {
    const hfq_qtype_traits *at = hfq_qtype_get(t->vec_dot_type);
    static float act[MAX_N], wdeq[MAX_N], adeq[MAX_N];
    static uint8_t ours[MAX_N * 2], theirs[MAX_N * 2];
    fill_row(rng, ROW_GAUSS, act, n);
    size_t abytes = (size_t)hfq_qtype_row_size(at->type, n);
    memset(theirs, 0, abytes); /* ggml leaves an all-zero Q8_K block's bsums unwritten */
    at->quantize_row(act, ours, n);
    if (c->act_ref) {
        c->act_ref(act, theirs, n);
        expect_same("activations", at, ROW_GAUSS, n, ours, theirs, abytes);
    }

    t->dequantize(wrow, wdeq, n);
    at->dequantize(ours, adeq, n);
    if (!all_finite(wdeq, n)) return; /* the fp16 scale overflowed: no meaningful dot */
    static float off[MAX_N];
    offsets(t, wrow, n, off);
    double exact = 0, magnitude = 0;
    for (int64_t i = 0; i < n; i++) {
        exact += (double)wdeq[i] * adeq[i];
        magnitude += (fabs((double)wdeq[i]) + fabs((double)off[i])) * fabs((double)adeq[i]);
    }
    if (at->type == HFQ_QT_Q8_1) exact += q8_1_offset_error(t, wrow, ours, n);
    float got = t->vec_dot(wrow, ours, n), want = 0;
    c->vec_dot((int)n, &want, 0, wrow, 0, ours, 0, 1);
    /* float rounding: a few ulps per block result, one per block summed */
    double tol = 1.2e-7 * (double)(n / t->block_size + 8) * magnitude + 1e-35;
    CHECK_MSG(fabs(got - exact) <= tol, "%s %s n=%lld: vec_dot %.9g vs exact %.9g", t->name, row_kind_name(kind),
              (long long)n, got, exact);
    CHECK_MSG(fabs(got - want) <= tol, "%s %s n=%lld: vec_dot %.9g vs ggml %.9g", t->name, row_kind_name(kind),
              (long long)n, got, want);
    if (c->dot_exact)
        CHECK_MSG(memcmp(&got, &want, sizeof got) == 0, "%s %s n=%lld: vec_dot %a is not ggml's %a", t->name,
                  row_kind_name(kind), (long long)n, got, want);
}

/* Our codebooks (quant/iq_grids.h) and sign table are ggml-common.h's. */
static void check_table(const char *name, const void *ours, size_t n, size_t elem_size) {
    size_t their_n = 0, their_size = 0;
    const void *theirs = ggml_ref_table(name, &their_n, &their_size);
    CHECK_MSG(theirs && their_n == n && their_size == elem_size, "table %s: %zu x %zu bytes in ggml", name,
              their_n, their_size);
    if (!theirs || their_n != n || their_size != elem_size) return;
    int64_t at = first_diff(ours, theirs, n * elem_size);
    CHECK_MSG(at < 0, "table %s differs from ggml's at element %lld", name, (long long)(at / (int64_t)elem_size));
}

static void check_tables(void) {
#define OUR_TABLE(t) check_table(#t, hfq_##t, sizeof hfq_##t / sizeof hfq_##t[0], sizeof hfq_##t[0])
    OUR_TABLE(iq2xxs_grid);
    OUR_TABLE(iq2xs_grid);
    OUR_TABLE(iq2s_grid);
    OUR_TABLE(iq3xxs_grid);
    OUR_TABLE(iq3s_grid);
    OUR_TABLE(iq1s_grid);
#undef OUR_TABLE
    uint8_t signs[128];
    for (uint32_t i = 0; i < 128; i++) signs[i] = hfq_iq_signs7(i);
    check_table("ksigns_iq2xs", signs, 128, 1);
}

/* Q8_0 blocks of x (importance imp, repeated every row of n / NROWS) as ours
 * wrote them against ggml's: equal, or of strictly lesser weighted error;
 * some changed on rows of random values (gauss, uniform, heavy). */
static void check_q8_0_search(int kind, const float *x, const float *imp, int64_t count, const uint8_t *ours,
                              const uint8_t *theirs) {
    const hfq_block_q8_0 *a = (const hfq_block_q8_0 *)ours, *b = (const hfq_block_q8_0 *)theirs;
    const int64_t n = count / NROWS;
    int changed = 0;
    for (int64_t i = 0; i < count / 32; i++) {
        double ea = 0.0, eb = 0.0;
        for (int j = 0; j < 32; j++) {
            const double w = imp[(i * 32 + j) % n], v = x[i * 32 + j];
            const double da = v - (double)(a[i].qs[j] * hfq_fp16_to_f32(a[i].d));
            const double db = v - (double)(b[i].qs[j] * hfq_fp16_to_f32(b[i].d));
            ea += w * da * da;
            eb += w * db * db;
        }
        const bool same = memcmp(a + i, b + i, sizeof *a) == 0;
        changed += !same;
        CHECK_MSG(same || ea < eb, "q8_0 block %lld: searched error %.9g, ggml's %.9g", (long long)i, ea, eb);
    }
    CHECK(changed > 0 || kind > ROW_HEAVY);
}

static void check_case(const ref_case *c, test_rng *rng) {
    const hfq_qtype_traits *t = hfq_qtype_get(c->type);
    static float src[NROWS * MAX_N], imp[MAX_N], deq_ours[NROWS * MAX_N], deq_theirs[NROWS * MAX_N];
    static uint8_t ours[NROWS * MAX_N * 2], theirs[NROWS * MAX_N * 2];
    const int64_t lengths[] = {96, 256, 768, 2048, 4096}; /* 96: 32-element formats only */
    for (int kind = 0; kind < ROW_KIND_COUNT; kind++) {
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            const int64_t n = lengths[li];
            if (n % t->block_size != 0) continue;
            fill_row(rng, kind, src, NROWS * n);
            const size_t bytes = (size_t)(NROWS * hfq_qtype_row_size(c->type, n));
            for (int weighted = 0; weighted < 2; weighted++) {
                const float *importance = NULL;
                if (weighted) {
                    fill_importance(rng, imp, n);
                    importance = imp;
                }
                memset(ours, 0xA5, bytes);
                memset(theirs, 0x5A, bytes);
                if (c->needs_importance && !weighted) {
                    CHECK(t->quantize(src, ours, NROWS, n, NULL) == 0);
                    memset(theirs, 0, bytes);
                    expect_same("quantize(no importance: zeros)", t, kind, n, ours, theirs, bytes);
                    continue;
                }
                size_t got = t->quantize(src, ours, NROWS, n, importance);
                size_t want = c->quantize(src, theirs, NROWS, n, importance);
                CHECK(got == bytes && want == bytes);
                /* ggml's Q8_0 ignores importance; ours searches (q_legacy.h): each
                 * block ggml's or better on the weighted error */
                if (weighted && c->type == HFQ_QT_Q8_0) check_q8_0_search(kind, src, imp, NROWS * n, ours, theirs);
                else expect_same(weighted ? "quantize(importance)" : "quantize", t, kind, n, ours, theirs, bytes);

                t->dequantize(ours, deq_ours, NROWS * n);
                c->dequantize(ours, deq_theirs, NROWS * n);
                expect_same("dequantize", t, kind, n, deq_ours, deq_theirs, sizeof(float) * (size_t)(NROWS * n));
                check_dots(c, t, kind, n, ours, rng);
            }
        }
    }
}

int main(void) {
    test_rng rng = {20240611};
    iq3xs_init_impl(256); /* ggml's quantizers need their searches built first */
    iq3xs_init_impl(512);
    iq2xs_init_impl(GGML_REF_TYPE_IQ2_XXS);
    iq2xs_init_impl(GGML_REF_TYPE_IQ2_XS);
    iq2xs_init_impl(GGML_REF_TYPE_IQ2_S);
    iq2xs_init_impl(GGML_REF_TYPE_IQ1_S); /* IQ1_M shares it */
    check_tables();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], &rng);
    return check_exit();
}
#endif
