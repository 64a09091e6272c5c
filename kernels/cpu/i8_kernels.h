/* i8_kernels.h - products of I8 weight codes (INT8 and FP8 E4M3 / E5M2
 * with FP32 scales, docs/format-quant-ext.md) with float activation rows
 * (hfq_dot_int8_f32, hfq_dot_fp8_f32) and with activation codes of the same
 * encoding (W8A8: hfq_dot_int8_int8, hfq_dot_fp8_fp8), equal to those
 * reference dots bit for bit: float sums are the same products in the same
 * partial sums (quant/lanes.h), one vector lane each, combined in the same
 * order; INT8 x INT8 sums are exact integers; then the same float steps. */
#ifndef HFQ_KERNELS_CPU_I8_KERNELS_H
#define HFQ_KERNELS_CPU_I8_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/float_kernels.h"
#include "kernels/model.h"
#include "quant/fp8.h"

/* The I8 tiles (cpu_i8_tile_fn, matmul.h): out[c * os + r] = the dot of
 * weight row r0 + r of w (I8 codes, its scales) with activation row c (at
 * a + c * as bytes): floats when a_scales is NULL, else codes of w's
 * encoding with scale a_scales[c] (INT8 ones never -128, as the quantizers
 * make them), in the form *codes_as says; r < nr <= CPU_TILE_ROWS, c < nc.
 *
 * The kernel of set isa for weight w (the float tiles' sets: portable, the
 * reference dots one pair at a time; AVX2; AVX-512, float activations two
 * rows per vector, INT8 W8A8 on AVX512-VNNI where the CPU has it, else
 * AVX2's, FP8 W8A8 on AVX512-BF16 where the CPU has it and w's runs - its
 * rows, or each scale group - are whole groups of 16 values), or NULL where
 * this CPU does not run it; *cols: the activation rows it takes best per
 * call (any count works); *codes_as: the form of W8A8 activation rows it
 * takes (CPU_I8_ACT_CODES as stored; _F32 FP8 codes widened to the floats
 * they stand for, once per token instead of once per weight tile;
 * _BF16_PAIRS as cpu_i8_fp8_pairs makes them): the same products. */
cpu_i8_tile_fn cpu_i8_tile(cpu_float_isa isa, const hfq_tensor *w, int *cols, cpu_i8_act *codes_as);

/* A tile (cpu_i8_tile_fn, a_scales NULL) for FP8 codes w times float rows
 * with each weight multiplied by its group's scale first, fused into partial
 * sum i % 8 (weights marked act_fp8_group: matmul.c's dot_fp8_codes_f32,
 * bit for bit), on AVX2; NULL where this CPU lacks it or w's rows or groups
 * are not whole 8s. *cols: the activation rows it takes best per call. */
cpu_i8_tile_fn cpu_i8_scaled_tile(const hfq_tensor *w, int *cols);

/* n FP8 codes of format f at the start of row (n a multiple of 16), in
 * place, as CPU_I8_ACT_BF16_PAIRS: 2 n bytes, per 16 values j.. eight
 * 32-bit words, word k holding value j + k's BF16 in its high half and
 * j + 8 + k's in its low half. Only where cpu_i8_tile asked for that form
 * (it takes AVX-512 there). */
void cpu_i8_fp8_pairs(hfq_fp8_format f, void *row, int64_t n);

#endif
