/* float_kernels.h - tile kernels for F32, F16 and BF16 rows (matmul.h).
 * Versions: portable C, AVX2/FMA/F16C, and AVX-512 (two 8-lane sums per
 * 16-lane vector, so its results equal AVX2's bit for bit); the best the
 * CPU runs is chosen at run time. Weights and activations share one format
 * per kernel. */
#ifndef HFQ_KERNELS_CPU_FLOAT_KERNELS_H
#define HFQ_KERNELS_CPU_FLOAT_KERNELS_H

#include <stdbool.h>

#include "kernels/cpu/matmul.h"

typedef enum cpu_float_isa {
    CPU_FLOAT_PORTABLE,  /* plain C: every machine */
    CPU_FLOAT_AVX2,      /* AVX2 + FMA + F16C */
    CPU_FLOAT_AVX512,    /* ... + AVX512F, -DQ, -BW and -VL */
    CPU_FLOAT_BEST,      /* the widest of those this CPU runs */
} cpu_float_isa;

/* Whether this CPU runs set isa (CPU_FLOAT_BEST: always); the I8 kernels
 * (i8_kernels.h) come in the same sets. */
bool cpu_float_isa_runs(cpu_float_isa isa);

/* The kernel for GT_F32, GT_F16 or GT_BF16 in set isa, or NULL (another
 * type, or a set this CPU does not run); *cols: the activation rows it
 * takes per call; *act_f32: whether it takes its activation rows as F32
 * values already rounded to the weight's format (the AVX-512 F16/BF16
 * tiles: widened once per batch, not once per weight tile) rather than in
 * the weight's format. Either way the products are the same. */
cpu_tile_fn cpu_float_tile(uint32_t type, cpu_float_isa isa, int *cols, bool *act_f32);

/* The best SIMD kernel for weights of GT_F32, GT_F16 or GT_BF16 times F32
 * activation rows (any float values: weights marked act_fp8_group), the
 * SIMD tiles' order (8 lanes of fused multiply-adds, float_kernels.c); NULL
 * where only the portable tile runs, or another type. */
cpu_tile_fn cpu_float_tile_f32_rows(uint32_t type, int *cols);

#endif
