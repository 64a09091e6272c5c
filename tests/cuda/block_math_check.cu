// Compile check: quant/block_math.h must build as CUDA device code, since the
// CUDA backend decodes and dots blocks with these very functions. Each one is
// called from a kernel so nvcc generates (and checks) device code for it.
#include "quant/block_math.h"

__global__ void block_math_check(const hfq_block_q8_0 *q8_0, const hfq_block_q8_1 *q8_1, const hfq_block_q4_0 *q4_0,
                                 const hfq_block_q5_0 *q5_0, const hfq_block_q5_1 *q5_1, const hfq_block_q4_k *q4_k,
                                 const hfq_block_q5_k *q5_k, const hfq_block_q6_k *q6_k, const hfq_block_q8_k *q8_k,
                                 const float *x, hfq_block_q8_0 *a8_0, hfq_block_q8_1 *a8_1, hfq_block_q8_k *a8_k,
                                 float *y, float *dots) {
    hfq_decode_q8_0(q8_0, y);
    hfq_decode_q8_1(q8_1, y);
    hfq_decode_q4_0(q4_0, y);
    hfq_decode_q5_0(q5_0, y);
    hfq_decode_q5_1(q5_1, y);
    hfq_decode_q4_k(q4_k, y);
    hfq_decode_q5_k(q5_k, y);
    hfq_decode_q6_k(q6_k, y);
    hfq_decode_q8_k(q8_k, y);
    dots[0] = hfq_dot_q8_0_q8_0(q8_0, a8_0);
    dots[1] = hfq_dot_q4_0_q8_0(q4_0, a8_0);
    dots[2] = hfq_dot_q5_0_q8_0(q5_0, a8_0);
    dots[3] = hfq_dot_q5_1_q8_1(q5_1, a8_1);
    dots[4] = hfq_dot_q4_k_q8_k(q4_k, a8_k);
    dots[5] = hfq_dot_q5_k_q8_k(q5_k, a8_k);
    dots[6] = hfq_dot_q6_k_q8_k(q6_k, a8_k);
    hfq_quantize_block_q8_0(x, a8_0);
    hfq_quantize_block_q8_0_act(x, a8_0);
    hfq_quantize_block_q8_1(x, a8_1);
    hfq_quantize_block_q8_k(x, a8_k);
}
