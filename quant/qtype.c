/* The format traits table; see qtype.h. */
#include "quant/qtype.h"

#include <math.h>
#include <strings.h>

#include "formats/ggml_type.h"
#include "quant/blocks.h"
#include "quant/fp4.h"
#include "quant/iq1.h"
#include "quant/iq2.h"
#include "quant/iq3.h"
#include "quant/iq4.h"
#include "quant/plain.h"
#include "quant/q_k.h"
#include "quant/q_k_low.h"
#include "quant/q_legacy.h"
#include "quant/q_lowbit.h"
#include "quant/tq.h"

#define ROW(t, nm, gt, native, act_only, imp, bs, ts, q, qr, dq, dot, dot_t)                                   \
    [t] = {.type = t, .name = nm, .ggml_type = gt, .is_ggml_native = native, .is_activation_only = act_only, \
           .uses_importance = imp, .block_size = bs, .type_size = ts, .quantize = q, .quantize_row = qr,     \
           .dequantize = dq, .vec_dot = dot, .vec_dot_type = dot_t}

static size_t quantize_nvfp4_unscaled(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                      const float *importance) {
    return hfq_quantize_nvfp4(src, dst, nrows, n_per_row, importance, 0.0f);
}

static const hfq_qtype_traits traits[HFQ_QT_COUNT] = {
    ROW(HFQ_QT_F32, "f32", GT_F32, true, false, false, 1, 4, hfq_quantize_f32, hfq_quantize_row_f32,
        hfq_dequantize_f32, hfq_vec_dot_f32, HFQ_QT_F32),
    ROW(HFQ_QT_F16, "f16", GT_F16, true, false, false, 1, 2, hfq_quantize_f16, hfq_quantize_row_f16,
        hfq_dequantize_f16, hfq_vec_dot_f16, HFQ_QT_F16),
    ROW(HFQ_QT_BF16, "bf16", GT_BF16, true, false, false, 1, 2, hfq_quantize_bf16, hfq_quantize_row_bf16,
        hfq_dequantize_bf16, hfq_vec_dot_bf16, HFQ_QT_BF16),
    ROW(HFQ_QT_Q8_0, "q8_0", GT_Q8_0, true, false, true, HFQ_QK, sizeof(hfq_block_q8_0), hfq_quantize_q8_0,
        hfq_quantize_row_q8_0_act, hfq_dequantize_q8_0, hfq_vec_dot_q8_0, HFQ_QT_Q8_0),
    ROW(HFQ_QT_Q4_0, "q4_0", GT_Q4_0, true, false, true, HFQ_QK, sizeof(hfq_block_q4_0), hfq_quantize_q4_0, NULL,
        hfq_dequantize_q4_0, hfq_vec_dot_q4_0, HFQ_QT_Q8_0),
    ROW(HFQ_QT_Q4_1, "q4_1", GT_Q4_1, true, false, true, HFQ_QK, sizeof(hfq_block_q4_1), hfq_quantize_q4_1, NULL,
        hfq_dequantize_q4_1, hfq_vec_dot_q4_1, HFQ_QT_Q8_1),
    ROW(HFQ_QT_Q5_0, "q5_0", GT_Q5_0, true, false, true, HFQ_QK, sizeof(hfq_block_q5_0), hfq_quantize_q5_0, NULL,
        hfq_dequantize_q5_0, hfq_vec_dot_q5_0, HFQ_QT_Q8_0),
    ROW(HFQ_QT_Q5_1, "q5_1", GT_Q5_1, true, false, true, HFQ_QK, sizeof(hfq_block_q5_1), hfq_quantize_q5_1, NULL,
        hfq_dequantize_q5_1, hfq_vec_dot_q5_1, HFQ_QT_Q8_1),
    ROW(HFQ_QT_Q2_K, "q2_K", GT_Q2_K, true, false, true, HFQ_QK_K, sizeof(hfq_block_q2_k), hfq_quantize_q2_k, NULL,
        hfq_dequantize_q2_k, hfq_vec_dot_q2_k, HFQ_QT_Q8_K),
    ROW(HFQ_QT_Q3_K, "q3_K", GT_Q3_K, true, false, true, HFQ_QK_K, sizeof(hfq_block_q3_k), hfq_quantize_q3_k, NULL,
        hfq_dequantize_q3_k, hfq_vec_dot_q3_k, HFQ_QT_Q8_K),
    ROW(HFQ_QT_Q4_K, "q4_K", GT_Q4_K, true, false, true, HFQ_QK_K, sizeof(hfq_block_q4_k), hfq_quantize_q4_k, NULL,
        hfq_dequantize_q4_k, hfq_vec_dot_q4_k, HFQ_QT_Q8_K),
    ROW(HFQ_QT_Q5_K, "q5_K", GT_Q5_K, true, false, true, HFQ_QK_K, sizeof(hfq_block_q5_k), hfq_quantize_q5_k, NULL,
        hfq_dequantize_q5_k, hfq_vec_dot_q5_k, HFQ_QT_Q8_K),
    ROW(HFQ_QT_Q6_K, "q6_K", GT_Q6_K, true, false, true, HFQ_QK_K, sizeof(hfq_block_q6_k), hfq_quantize_q6_k, NULL,
        hfq_dequantize_q6_k, hfq_vec_dot_q6_k, HFQ_QT_Q8_K),
    ROW(HFQ_QT_IQ4_NL, "iq4_nl", GT_IQ4_NL, true, false, true, HFQ_QK, sizeof(hfq_block_iq4_nl),
        hfq_quantize_iq4_nl, NULL, hfq_dequantize_iq4_nl, hfq_vec_dot_iq4_nl, HFQ_QT_Q8_0),
    ROW(HFQ_QT_IQ4_XS, "iq4_xs", GT_IQ4_XS, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq4_xs),
        hfq_quantize_iq4_xs, NULL, hfq_dequantize_iq4_xs, hfq_vec_dot_iq4_xs, HFQ_QT_Q8_K),
    ROW(HFQ_QT_Q8_1, "q8_1", GT_Q8_1, true, true, false, HFQ_QK, sizeof(hfq_block_q8_1), NULL, hfq_quantize_row_q8_1,
        hfq_dequantize_q8_1, NULL, HFQ_QT_Q8_1),
    ROW(HFQ_QT_Q8_K, "q8_K", GT_Q8_K, true, true, false, HFQ_QK_K, sizeof(hfq_block_q8_k), NULL,
        hfq_quantize_row_q8_k, hfq_dequantize_q8_k, NULL, HFQ_QT_Q8_K),
    /* MXFP4 and NVFP4 are ggml's (activations Q8_0, as ggml's CPU backend);
     * NVFP4's per-tensor global scale lives beside it (quant/fp4.h), so the
     * table's entry is ggml's reference quantizer without one. INT8 and FP8
     * have no ggml type: one byte per element, with scale tensors defined by
     * quant/int8.h and quant/fp8.h (docs/format-quant-ext.md). */
    ROW(HFQ_QT_MXFP4, "mxfp4", GT_MXFP4, true, false, true, HFQ_QK_MXFP4, sizeof(hfq_block_mxfp4),
        hfq_quantize_mxfp4, NULL, hfq_dequantize_row_mxfp4, hfq_dot_mxfp4_q8_0, HFQ_QT_Q8_0),
    ROW(HFQ_QT_NVFP4, "nvfp4", GT_NVFP4, true, false, true, HFQ_QK_NVFP4, sizeof(hfq_block_nvfp4),
        quantize_nvfp4_unscaled, NULL, hfq_dequantize_row_nvfp4, hfq_dot_nvfp4_q8_0, HFQ_QT_Q8_0),
    ROW(HFQ_QT_INT8, "int8", HFQ_NO_GGML_TYPE, false, false, false, 1, 1, NULL, NULL, NULL, NULL, HFQ_QT_INT8),
    ROW(HFQ_QT_FP8_E4M3, "fp8_e4m3", HFQ_NO_GGML_TYPE, false, false, false, 1, 1, NULL, NULL, NULL, NULL,
        HFQ_QT_FP8_E4M3),
    ROW(HFQ_QT_FP8_E5M2, "fp8_e5m2", HFQ_NO_GGML_TYPE, false, false, false, 1, 1, NULL, NULL, NULL, NULL,
        HFQ_QT_FP8_E5M2),
    ROW(HFQ_QT_IQ3_XXS, "iq3_xxs", GT_IQ3_XXS, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq3_xxs),
        hfq_quantize_iq3_xxs, NULL, hfq_dequantize_iq3_xxs, hfq_vec_dot_iq3_xxs, HFQ_QT_Q8_K),
    ROW(HFQ_QT_IQ3_S, "iq3_s", GT_IQ3_S, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq3_s), hfq_quantize_iq3_s,
        NULL, hfq_dequantize_iq3_s, hfq_vec_dot_iq3_s, HFQ_QT_Q8_K),
    ROW(HFQ_QT_IQ2_XXS, "iq2_xxs", GT_IQ2_XXS, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq2_xxs),
        hfq_quantize_iq2_xxs, NULL, hfq_dequantize_iq2_xxs, hfq_vec_dot_iq2_xxs, HFQ_QT_Q8_K),
    ROW(HFQ_QT_IQ2_XS, "iq2_xs", GT_IQ2_XS, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq2_xs),
        hfq_quantize_iq2_xs, NULL, hfq_dequantize_iq2_xs, hfq_vec_dot_iq2_xs, HFQ_QT_Q8_K),
    ROW(HFQ_QT_IQ2_S, "iq2_s", GT_IQ2_S, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq2_s), hfq_quantize_iq2_s,
        NULL, hfq_dequantize_iq2_s, hfq_vec_dot_iq2_s, HFQ_QT_Q8_K),
    ROW(HFQ_QT_IQ1_S, "iq1_s", GT_IQ1_S, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq1_s), hfq_quantize_iq1_s,
        NULL, hfq_dequantize_iq1_s, hfq_vec_dot_iq1_s, HFQ_QT_Q8_K),
    ROW(HFQ_QT_IQ1_M, "iq1_m", GT_IQ1_M, true, false, true, HFQ_QK_K, sizeof(hfq_block_iq1_m), hfq_quantize_iq1_m,
        NULL, hfq_dequantize_iq1_m, hfq_vec_dot_iq1_m, HFQ_QT_Q8_K),
    ROW(HFQ_QT_TQ1_0, "tq1_0", GT_TQ1_0, true, false, false, HFQ_QK_K, sizeof(hfq_block_tq1_0), hfq_quantize_tq1_0,
        NULL, hfq_dequantize_tq1_0, hfq_vec_dot_tq1_0, HFQ_QT_Q8_K),
    ROW(HFQ_QT_TQ2_0, "tq2_0", GT_TQ2_0, true, false, false, HFQ_QK_K, sizeof(hfq_block_tq2_0), hfq_quantize_tq2_0,
        NULL, hfq_dequantize_tq2_0, hfq_vec_dot_tq2_0, HFQ_QT_Q8_K),
    ROW(HFQ_QT_Q1_0, "q1_0", GT_Q1_0, true, false, false, HFQ_QK1_0, sizeof(hfq_block_q1_0), hfq_quantize_q1_0,
        NULL, hfq_dequantize_q1_0, hfq_vec_dot_q1_0, HFQ_QT_Q8_0),
    ROW(HFQ_QT_Q2_0, "q2_0", GT_Q2_0, true, false, false, HFQ_QK2_0, sizeof(hfq_block_q2_0), hfq_quantize_q2_0,
        NULL, hfq_dequantize_q2_0, hfq_vec_dot_q2_0, HFQ_QT_Q8_0),
};

const hfq_qtype_traits *hfq_qtype_get(hfq_qtype t) {
    if ((int)t < 0 || t >= HFQ_QT_COUNT) return NULL;
    return &traits[t];
}

int hfq_qtype_from_name(const char *name) {
    if (!name) return -1;
    for (int t = 0; t < HFQ_QT_COUNT; t++)
        if (strcasecmp(traits[t].name, name) == 0) return t;
    return -1;
}

int hfq_qtype_from_ggml(uint32_t ggml_type) {
    for (int t = 0; t < HFQ_QT_COUNT; t++)
        if (traits[t].ggml_type >= 0 && (uint32_t)traits[t].ggml_type == ggml_type) return t;
    return -1;
}

int64_t hfq_qtype_row_size(hfq_qtype t, int64_t n) {
    const hfq_qtype_traits *tr = hfq_qtype_get(t);
    if (!tr || n < 0 || n % tr->block_size != 0) return -1;
    int64_t blocks = n / tr->block_size;
    if (blocks > INT64_MAX / tr->type_size) return -1;
    return blocks * tr->type_size;
}

int64_t hfq_first_nonfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}
