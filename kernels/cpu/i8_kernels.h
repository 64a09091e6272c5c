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

/* The I8 tiles (cpu_i8_tile_fn, matmul.h): out[c * os + r] = the dot of
 * weight row r0 + r of w (I8 codes, its scales) with activation row c (at
 * a + c * as bytes): floats when a_scales is NULL, else codes of w's
 * encoding with scale a_scales[c] (INT8 ones never -128, as the quantizers
 * make them; FP8 ones widened to the floats they stand for where the set
 * says fp8_codes_f32); r < nr <= CPU_TILE_ROWS, c < nc.
 *
 * The kernel of set isa (the float tiles' sets: portable, the reference
 * dots one pair at a time; AVX2; AVX-512, float activations two rows per
 * vector, INT8 W8A8 AVX2's), or NULL where this CPU does not run it; *cols: the
 * activation rows it takes best per call (any count works); *fp8_codes_f32:
 * whether it takes FP8 activation codes as floats (widened once per token
 * instead of once per weight tile; the same products). */
cpu_i8_tile_fn cpu_i8_tile(cpu_float_isa isa, int *cols, bool *fp8_codes_f32);

#endif
