/* The format traits table: storage facts agree with ggml's type table, names
 * and ids look up both ways, row sizes and argument checks, and for every
 * format with functions, quantize -> dequantize and the vec_dot with its
 * companion activation format agree with a double-precision reference. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "formats/ggml_type.h"
#include "quant/qtype.h"
#include "quant_rows.h"

static void test_table(void) {
    for (int i = 0; i < HFQ_QT_COUNT; i++) {
        const hfq_qtype_traits *t = hfq_qtype_get((hfq_qtype)i);
        CHECK(t && t->type == (hfq_qtype)i && t->name && t->block_size > 0 && t->type_size > 0);
        CHECK(hfq_qtype_from_name(t->name) == i);
        if (t->ggml_type == HFQ_NO_GGML_TYPE) {
            CHECK(!t->is_ggml_native);
            continue;
        }
        /* geometry and name are ggml's */
        const ggml_type_info *g = ggml_type_get((uint32_t)t->ggml_type);
        CHECK_MSG(g && g->block_size == t->block_size && g->type_size == t->type_size && strcmp(g->name, t->name) == 0,
                  "%s vs ggml type %d", t->name, t->ggml_type);
        CHECK(t->is_ggml_native);
        CHECK(hfq_qtype_from_ggml((uint32_t)t->ggml_type) == i);
        /* the companion activation format can quantize activations */
        if (t->vec_dot) {
            const hfq_qtype_traits *a = hfq_qtype_get(t->vec_dot_type);
            CHECK(a && a->quantize_row && a->dequantize && t->block_size % a->block_size == 0);
        }
    }
    CHECK(hfq_qtype_get(HFQ_QT_COUNT) == NULL);
    CHECK(hfq_qtype_get((hfq_qtype)-1) == NULL);
    CHECK(hfq_qtype_from_name("Q4_K") == HFQ_QT_Q4_K);
    CHECK(hfq_qtype_from_name("FP8_E4M3") == HFQ_QT_FP8_E4M3);
    CHECK(hfq_qtype_from_name("iq4_xs") == HFQ_QT_IQ4_XS);
    CHECK(hfq_qtype_from_name("iq2_xxs") == HFQ_QT_IQ2_XXS);
    CHECK(hfq_qtype_from_name("q2_kk") == -1);
    CHECK(hfq_qtype_from_name("") == -1);
    CHECK(hfq_qtype_from_name(NULL) == -1);
    CHECK(hfq_qtype_from_ggml(GT_Q4_1) == HFQ_QT_Q4_1);
    CHECK(hfq_qtype_from_ggml(GT_IQ2_XXS) == HFQ_QT_IQ2_XXS);
    CHECK(hfq_qtype_from_ggml(GT_Q1_0) == HFQ_QT_Q1_0);
    CHECK(hfq_qtype_from_ggml(GT_Q2_0) == HFQ_QT_Q2_0);
    CHECK(hfq_qtype_from_ggml(43) == -1);
    CHECK(hfq_qtype_from_ggml(12345) == -1);
    /* ggml's CPU pairings (ggml-cpu.c type_traits vec_dot_type) */
    CHECK(hfq_qtype_get(HFQ_QT_Q4_0)->vec_dot_type == HFQ_QT_Q8_0);
    CHECK(hfq_qtype_get(HFQ_QT_Q5_0)->vec_dot_type == HFQ_QT_Q8_0);
    CHECK(hfq_qtype_get(HFQ_QT_Q1_0)->vec_dot_type == HFQ_QT_Q8_0);
    CHECK(hfq_qtype_get(HFQ_QT_Q2_0)->vec_dot_type == HFQ_QT_Q8_0);
    CHECK(hfq_qtype_get(HFQ_QT_Q4_1)->vec_dot_type == HFQ_QT_Q8_1);
    CHECK(hfq_qtype_get(HFQ_QT_Q5_1)->vec_dot_type == HFQ_QT_Q8_1);
    CHECK(hfq_qtype_get(HFQ_QT_Q2_K)->vec_dot_type == HFQ_QT_Q8_K);
    CHECK(hfq_qtype_get(HFQ_QT_Q3_K)->vec_dot_type == HFQ_QT_Q8_K);
    CHECK(hfq_qtype_get(HFQ_QT_Q6_K)->vec_dot_type == HFQ_QT_Q8_K);
    CHECK(hfq_qtype_get(HFQ_QT_IQ4_NL)->vec_dot_type == HFQ_QT_Q8_0);
    CHECK(hfq_qtype_get(HFQ_QT_IQ4_XS)->vec_dot_type == HFQ_QT_Q8_K);
    CHECK(hfq_qtype_get(HFQ_QT_Q8_K)->is_activation_only && !hfq_qtype_get(HFQ_QT_Q4_K)->is_activation_only);
}

static void test_row_size(void) {
    CHECK(hfq_qtype_row_size(HFQ_QT_Q4_K, 512) == 288);
    CHECK(hfq_qtype_row_size(HFQ_QT_Q8_0, 64) == 68);
    CHECK(hfq_qtype_row_size(HFQ_QT_BF16, 3) == 6);
    CHECK(hfq_qtype_row_size(HFQ_QT_Q4_K, 96) == -1);
    CHECK(hfq_qtype_row_size(HFQ_QT_Q8_0, -32) == -1);
    CHECK(hfq_qtype_row_size(HFQ_QT_COUNT, 32) == -1);
    CHECK(hfq_qtype_row_size(HFQ_QT_F32, INT64_MAX / 2) == -1); /* bytes overflow */
    /* quantize refuses rows that are not whole blocks */
    float x[256] = {0};
    uint8_t out[512];
    CHECK(hfq_qtype_get(HFQ_QT_Q4_K)->quantize(x, out, 1, 128, NULL) == 0);
    CHECK(hfq_qtype_get(HFQ_QT_Q8_0)->quantize(x, out, 1, 0, NULL) == 0);
    CHECK(hfq_qtype_get(HFQ_QT_Q8_0)->quantize(x, out, -1, 32, NULL) == 0);
    CHECK(hfq_qtype_get(HFQ_QT_Q8_0)->quantize(x, out, 0, 32, NULL) == 0);
    CHECK(hfq_qtype_get(HFQ_QT_Q6_K)->quantize(x, out, 1, 256, NULL) == 210);
}

static void test_nonfinite(void) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(hfq_first_nonfinite(x, 8) == -1);
    x[5] = INFINITY;
    CHECK(hfq_first_nonfinite(x, 8) == 5);
    x[2] = NAN;
    CHECK(hfq_first_nonfinite(x, 8) == 2);
    CHECK(hfq_first_nonfinite(x, 2) == -1);
}

/* Through the table only, as the runner will use it: decode error against
 * the original is small relative to the row, and vec_dot matches the double
 * dot of the decoded weight and activation rows. Rows are spread over several
 * magnitudes so scales differ between blocks. */
static void test_roundtrip_and_dot(void) {
    enum { N = 1024, ROWS = 4 };
    static float x[ROWS * N], y[ROWS * N], act[N], adeq[N], imp[N];
    static uint8_t w[ROWS * N * 4], a[N * 4];
    /* rms error relative to the rms value that each format's bits allow */
    const struct { hfq_qtype t; double max_rel; } formats[] = {
        {HFQ_QT_F32, 0},      {HFQ_QT_F16, 1e-3},   {HFQ_QT_BF16, 4e-3},   {HFQ_QT_Q8_0, 0.01},
        {HFQ_QT_Q4_0, 0.15},  {HFQ_QT_Q4_1, 0.12},  {HFQ_QT_Q5_0, 0.07},   {HFQ_QT_Q5_1, 0.07},
        {HFQ_QT_Q2_K, 0.4},  {HFQ_QT_Q3_K, 0.22},  {HFQ_QT_Q4_K, 0.1},    {HFQ_QT_Q5_K, 0.05},
        {HFQ_QT_Q6_K, 0.025}, {HFQ_QT_IQ4_NL, 0.11}, {HFQ_QT_IQ4_XS, 0.11},
    };
    test_rng rng = {42};
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        const hfq_qtype_traits *t = hfq_qtype_get(formats[f].t);
        const hfq_qtype_traits *at = hfq_qtype_get(t->vec_dot_type);
        fill_row(&rng, ROW_GAUSS, x, ROWS * N);
        fill_importance(&rng, imp, N);
        const int64_t row_bytes = hfq_qtype_row_size(t->type, N);
        for (int weighted = 0; weighted < 2; weighted++) {
            CHECK(t->quantize(x, w, ROWS, N, weighted ? imp : NULL) == (size_t)(ROWS * row_bytes));
            t->dequantize(w, y, ROWS * N);
            double se = 0, ss = 0;
            for (int i = 0; i < ROWS * N; i++) {
                se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
                ss += (double)x[i] * x[i];
            }
            CHECK_MSG(sqrt(se / ss) <= formats[f].max_rel, "%s: relative rms error %.4g", t->name, sqrt(se / ss));
        }
        fill_row(&rng, ROW_HEAVY, act, N);
        at->quantize_row(act, a, N);
        at->dequantize(a, adeq, N);
        for (int r = 0; r < ROWS; r++) {
            double exact = 0, magnitude = 0;
            for (int i = 0; i < N; i++) {
                exact += (double)y[r * N + i] * adeq[i];
                magnitude += fabs((double)y[r * N + i] * adeq[i]);
            }
            float got = t->vec_dot(w + r * row_bytes, a, N);
            /* Q4_1/Q5_1's activation sum term is stored in fp16 (see q_legacy.h) */
            double rel = t->vec_dot_type == HFQ_QT_Q8_1 ? 1e-3 : 1e-5;
            CHECK_MSG(fabs(got - exact) <= rel * magnitude, "%s row %d: %.9g vs %.9g", t->name, r, got, exact);
        }
    }
}

int main(void) {
    test_table();
    test_row_size();
    test_nonfinite();
    test_roundtrip_and_dot();
    return check_exit();
}
