// Compile check: the i-quant and ternary block math (quant/iq3.h, iq2.h,
// iq1.h, tq.h, with their codebooks as device tables) builds as CUDA device
// code; each decoder and dot is called from a kernel so nvcc generates it.
#include "quant/iq1.h"
#include "quant/iq2.h"
#include "quant/iq3.h"
#include "quant/tq.h"

__global__ void iq_block_math_check(const hfq_block_iq3_xxs *iq3_xxs, const hfq_block_iq3_s *iq3_s,
                                    const hfq_block_iq2_xxs *iq2_xxs, const hfq_block_iq2_xs *iq2_xs,
                                    const hfq_block_iq2_s *iq2_s, const hfq_block_iq1_s *iq1_s,
                                    const hfq_block_iq1_m *iq1_m, const hfq_block_tq1_0 *tq1_0,
                                    const hfq_block_tq2_0 *tq2_0, const hfq_block_q8_k *a, float *y, float *dots) {
    hfq_decode_iq3_xxs(iq3_xxs, y);
    hfq_decode_iq3_s(iq3_s, y);
    hfq_decode_iq2_xxs(iq2_xxs, y);
    hfq_decode_iq2_xs(iq2_xs, y);
    hfq_decode_iq2_s(iq2_s, y);
    hfq_decode_iq1_s(iq1_s, y);
    hfq_decode_iq1_m(iq1_m, y);
    hfq_decode_tq1_0(tq1_0, y);
    hfq_decode_tq2_0(tq2_0, y);
    dots[0] = hfq_dot_iq3_xxs_q8_k(iq3_xxs, a);
    dots[1] = hfq_dot_iq3_s_q8_k(iq3_s, a);
    dots[2] = hfq_dot_iq2_xxs_q8_k(iq2_xxs, a);
    dots[3] = hfq_dot_iq2_xs_q8_k(iq2_xs, a);
    dots[4] = hfq_dot_iq2_s_q8_k(iq2_s, a);
    dots[5] = hfq_dot_iq1_s_q8_k(iq1_s, a);
    dots[6] = hfq_dot_iq1_m_q8_k(iq1_m, a);
    dots[7] = hfq_dot_tq1_0_q8_k(tq1_0, a);
    dots[8] = hfq_dot_tq2_0_q8_k(tq2_0, a);
}
