/* TQ1_0 and TQ2_0; see tq.h. */
#include "quant/tq.h"

#include <math.h>

#include "quant/rows.h"

/* t + 1 in 0..2 for x at inverse scale id (ggml's lroundf: halves away
 * from zero). */
static int trit_of(float x, float id) { return (int)lroundf(x * id) + 1; }

/* 1 / amax of a block (0 for an all-zero one), amax stored as d. */
static float block_scale(const float *x, uint16_t *d16) {
    float amax = 0.0f;
    for (int j = 0; j < HFQ_QK_K; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    *d16 = hfq_f32_to_fp16(amax);
    return amax ? 1.0f / amax : 0.0f;
}

/* n trits (most significant first) as ceil(value * 256 / 243). */
static uint8_t pack5(const float *x, int stride, int n, float id) {
    uint8_t q = 0;
    for (int k = 0; k < n; ++k) q = (uint8_t)(q * 3 + trit_of(x[k * stride], id));
    for (int k = n; k < 5; ++k) q = (uint8_t)(q * 3); /* qh's four trits sit in the top positions */
    return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}

static void tq1_0_block(const float *x, const float *qw, hfq_block_tq1_0 *y) {
    (void)qw;
    const float id = block_scale(x, &y->d);
    for (int m = 0; m < 32; ++m) y->qs[m] = pack5(x + m, 32, 5, id);
    for (int m = 0; m < 16; ++m) y->qs[32 + m] = pack5(x + 160 + m, 16, 5, id);
    for (int j = 0; j < 4; ++j) y->qh[j] = pack5(x + 240 + j, 4, 4, id);
}

static void tq2_0_block(const float *x, const float *qw, hfq_block_tq2_0 *y) {
    (void)qw;
    const float id = block_scale(x, &y->d);
    for (int j = 0; j < 2; ++j)
        for (int m = 0; m < 32; ++m) {
            uint8_t q = 0;
            for (int l = 0; l < 4; ++l) q = (uint8_t)(q + ((trit_of(x[128 * j + 32 * l + m], id) & 3) << 2 * l));
            y->qs[32 * j + m] = q;
        }
}

HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_tq1_0, hfq_block_tq1_0, HFQ_QK_K, tq1_0_block)
HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_tq2_0, hfq_block_tq2_0, HFQ_QK_K, tq2_0_block)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_tq1_0, hfq_block_tq1_0, HFQ_QK_K, hfq_decode_tq1_0)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_tq2_0, hfq_block_tq2_0, HFQ_QK_K, hfq_decode_tq2_0)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_tq1_0, hfq_block_tq1_0, hfq_block_q8_k, HFQ_QK_K, hfq_dot_tq1_0_q8_k)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_tq2_0, hfq_block_tq2_0, hfq_block_q8_k, HFQ_QK_K, hfq_dot_tq2_0_q8_k)
