/* quant_kernels.h - AVX2 versions of some quant/qtype.h vec_dots, equal to
 * them bit for bit: the integer dot products are exact whatever their order,
 * and the float steps around them are the reference's, in its order (fp16
 * scales are widened with F16C: the same value, NaN payloads aside). */
#ifndef HFQ_KERNELS_CPU_QUANT_KERNELS_H
#define HFQ_KERNELS_CPU_QUANT_KERNELS_H

#include "kernels/cpu/matmul.h"
#include "quant/qtype.h"

/* The SIMD vec_dot for weights of format t (Q8_0, Q4_0, Q4_K, Q6_K) when the
 * CPU has AVX2 and F16C, else NULL (use the traits' own). */
hfq_vec_dot_fn cpu_quant_vec_dot(hfq_qtype t);

/* The tile (matmul.h) for weights of format t (Q8_0, Q4_0, Q4_K, Q6_K) times
 * their vec_dot_type activations when the CPU has AVX2 and F16C, else NULL. Each of
 * its results equals the vec_dot's, bit for bit. */
cpu_tile_fn cpu_quant_tile(hfq_qtype t);

#endif
