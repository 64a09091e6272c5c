/* float_kernels.h - tile kernels for F32, F16 and BF16 rows (matmul.h).
 * An AVX2/FMA/F16C version is chosen at run time when the CPU has it, else
 * portable C. Weights and activations share one format per kernel. */
#ifndef HFQ_KERNELS_CPU_FLOAT_KERNELS_H
#define HFQ_KERNELS_CPU_FLOAT_KERNELS_H

#include <stdbool.h>

#include "kernels/cpu/matmul.h"

/* The kernel for GT_F32, GT_F16 or GT_BF16 (NULL for other types): the SIMD
 * one when simd is true and the CPU has it, else the portable one. */
cpu_tile_fn cpu_float_tile(uint32_t type, bool simd);

#endif
