// quant_fp_hd_check.cu - compile-only check (built when meson finds nvcc) that
// the static inline HFQ_HD codecs and block kernels of fp8.h, fp4.h and int8.h
// are valid device code.
#include "quant/fp8.h"
#include "quant/fp4.h"
#include "quant/int8.h"
__global__ void k(const hfq_block_nvfp4 *w, const hfq_block_nvfp4 *a, const hfq_block_mxfp4 *m,
                  const hfq_block_q8_0 *q, const uint8_t *f8, const int8_t *i8, float *out, float *tmp) {
    float acc = 0.0f;
    acc = hfq_acc_block_nvfp4_nvfp4(acc, w, a);
    acc = hfq_acc_block_nvfp4_q8_0(acc, w, q);
    acc = hfq_acc_block_mxfp4_q8_0(acc, m, q);
    hfq_decode_block_nvfp4(w, tmp);
    hfq_decode_block_mxfp4(m, tmp + 64);
    hfq_block_nvfp4 y;
    hfq_quantize_block_nvfp4(tmp, &y, 0.5f);
    acc += hfq_fp8_e4m3_to_f32(f8[0]) + hfq_fp8_e5m2_to_f32(f8[1]) + hfq_f32_to_fp8_e4m3(acc) + hfq_f32_to_fp8_e5m2(acc);
    acc += hfq_dot_i8(i8, i8 + 32, 32) + hfq_int8_round(acc) + y.d[0];
    out[threadIdx.x] = acc;
}
