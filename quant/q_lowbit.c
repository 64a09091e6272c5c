/* Q1_0 and Q2_0; see q_lowbit.h. */
#include "quant/q_lowbit.h"

#include <math.h>
#include <string.h>

#include "quant/rows.h"

static void q1_0_block(const float *x, const float *qw, hfq_block_q1_0 *y) {
    (void)qw;
    float sum_abs = 0.0f;
    for (int j = 0; j < HFQ_QK1_0; ++j) sum_abs += fabsf(x[j]);
    y->d = hfq_f32_to_fp16(sum_abs / HFQ_QK1_0);
    memset(y->qs, 0, sizeof y->qs);
    for (int j = 0; j < HFQ_QK1_0; ++j)
        if (x[j] >= 0.0f) y->qs[j / 8] |= (uint8_t)(1u << (j % 8));
}

static void q2_0_block(const float *x, const float *qw, hfq_block_q2_0 *y) {
    (void)qw;
    float amax = 0.0f;
    for (int j = 0; j < HFQ_QK2_0; ++j) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    y->d = hfq_f32_to_fp16(amax);
    memset(y->qs, 0, sizeof y->qs);
    for (int j = 0; j < HFQ_QK2_0; ++j) {
        int q = (int)roundf(x[j] * id) + 1;
        q = q < 0 ? 0 : q > 3 ? 3 : q;
        y->qs[j / 4] |= (uint8_t)(q << 2 * (j % 4));
    }
}

HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_q1_0, hfq_block_q1_0, HFQ_QK1_0, q1_0_block)
HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_q2_0, hfq_block_q2_0, HFQ_QK2_0, q2_0_block)

HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q1_0, hfq_block_q1_0, HFQ_QK1_0, hfq_decode_q1_0)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_q2_0, hfq_block_q2_0, HFQ_QK2_0, hfq_decode_q2_0)

/* A weight block spans block_size / 32 Q8_0 activation blocks. */
#define LOWBIT_VEC_DOT(fn, block_t, block_size, dot_block)                    \
    float fn(const void *w, const void *a, int64_t n) {                        \
        const block_t *wb = (const block_t *)w;                                \
        const hfq_block_q8_0 *ab = (const hfq_block_q8_0 *)a;                  \
        float sum = 0.0f;                                                      \
        for (int64_t i = 0; i < n / (block_size); i++)                         \
            sum += dot_block(&wb[i], ab + i * ((block_size) / HFQ_QK));        \
        return sum;                                                            \
    }

LOWBIT_VEC_DOT(hfq_vec_dot_q1_0, hfq_block_q1_0, HFQ_QK1_0, hfq_dot_q1_0_q8_0)
LOWBIT_VEC_DOT(hfq_vec_dot_q2_0, hfq_block_q2_0, HFQ_QK2_0, hfq_dot_q2_0_q8_0)
