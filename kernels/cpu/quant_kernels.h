/* quant_kernels.h - SIMD versions of some quant/qtype.h vec_dots (and of
 * some dots of a format with other activations: W4A4, FP4 x floats), equal
 * to them bit for bit: the integer dot products are exact whatever their order
 * and whatever instructions compute them, and the float steps around them
 * are the reference's, in its order (fp16 scales are widened with F16C: the
 * same value, NaN payloads aside). Each is built for AVX2 and for the two
 * VNNI extensions (one instruction for a multiply-add the others take two
 * or three for); the best one this CPU runs is chosen at run time. */
#ifndef HFQ_KERNELS_CPU_QUANT_KERNELS_H
#define HFQ_KERNELS_CPU_QUANT_KERNELS_H

#include <stdbool.h>

#include "kernels/cpu/matmul.h"
#include "quant/qtype.h"

typedef enum cpu_quant_isa {
    CPU_QUANT_ISA_NONE,        /* no SIMD kernels: the traits' vec_dot */
    CPU_QUANT_ISA_AVX2,        /* AVX2 + F16C */
    CPU_QUANT_ISA_AVXVNNI,     /* ... + AVX-VNNI (VEX encoded) */
    CPU_QUANT_ISA_AVX512VNNI,  /* ... + AVX512-VNNI, -BW and -VL: K-quant tiles on 512-bit vectors (two
                                  weight rows in each), Q8_0/Q4_0 tiles on 256-bit ones */
} cpu_quant_isa;

/* The set the kernels below use on this CPU: the last of the list above
 * that it runs. */
cpu_quant_isa cpu_quant_isa_best(void);

/* Whether this CPU runs the kernels of set isa. */
bool cpu_quant_isa_runs(cpu_quant_isa isa);

/* The SIMD vec_dot for weights of format t in set cpu_quant_isa_best(), or
 * NULL (use the traits' own). */
hfq_vec_dot_fn cpu_quant_vec_dot(hfq_qtype t);

/* The tile (matmul.h) for weights of format t times their vec_dot_type
 * activations in set cpu_quant_isa_best(), or NULL;
 * *cols: the activation rows it takes per call. Each of its results equals
 * the vec_dot's, bit for bit. */
cpu_tile_fn cpu_quant_tile(hfq_qtype t, int *cols);

/* The same in a given set (for tests): NULL when this CPU does not run it. */
hfq_vec_dot_fn cpu_quant_vec_dot_isa(hfq_qtype t, cpu_quant_isa isa);
cpu_tile_fn cpu_quant_tile_isa(hfq_qtype t, cpu_quant_isa isa, int *cols);

/* The formats that have SIMD kernels (on x86-64 builds), at most max of
 * them into types; returns how many (for tests and benchmarks). */
size_t cpu_quant_tile_formats(hfq_qtype *types, size_t max);

/* Weights of format t times activations of format act (t's vec_dot_type,
 * or a pair of cpu_quant_tile_pairs): the tile in set cpu_quant_isa_best()
 * (NULL: none), and the same in a given set and its 1 x 1 vec_dot (tests). */
cpu_tile_fn cpu_quant_tile_act(hfq_qtype t, hfq_qtype act, int *cols);
cpu_tile_fn cpu_quant_tile_act_isa(hfq_qtype t, hfq_qtype act, cpu_quant_isa isa, int *cols);
hfq_vec_dot_fn cpu_quant_vec_dot_act_isa(hfq_qtype t, hfq_qtype act, cpu_quant_isa isa);

/* A weight format, an activation format other than its vec_dot_type, and
 * the reference dot that their kernels equal bit for bit. */
typedef struct cpu_quant_pair {
    hfq_qtype w, act;
    hfq_vec_dot_fn ref;
} cpu_quant_pair;

/* The pairs that have SIMD kernels, at most max of them; returns how many. */
size_t cpu_quant_tile_pairs(cpu_quant_pair *pairs, size_t max);

#endif
