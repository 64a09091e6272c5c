/* moe_rows.h - the row moves of a mixture-of-experts block (kernels/ops.h's
 * gather_rows and add_rows_scaled), one value at a time, written once for
 * the CPU backend and the CUDA kernels (HFQ_HD) so both compute the same:
 * value i of n_rows * width is row i / width, column i % width. The
 * product w * y is rounded before the add on both (the CPU build and nvcc's
 * -fmad=false contract nothing). */
#ifndef HFQ_KERNELS_MOE_ROWS_H
#define HFQ_KERNELS_MOE_ROWS_H

#include <stdint.h>

#include "quant/hd.h"

/* y[i] = x[rows[i]] for value i:  x: [*][width], y: [n_rows][width]. */
static inline HFQ_HD void hfq_gather_value(float *y, const float *x, const int32_t *rows, int64_t width, int64_t i) {
    y[i] = x[(int64_t)rows[i / width] * width + i % width];
}

/* x[rows[r]] += w[r] * y[r] for value i:  rows distinct, so no two values
 * write the same place. */
static inline HFQ_HD void hfq_add_scaled_value(float *x, const float *y, const int32_t *rows, const float *w,
                                               int64_t width, int64_t i) {
    const int64_t r = i / width;
    const float p = w[r] * y[i];
    x[(int64_t)rows[r] * width + i % width] += p;
}

#endif
