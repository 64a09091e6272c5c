/* moe.cu - the row moves of a mixture-of-experts block (ops.h's gather_rows
 * and add_rows_scaled) with the CPU's arithmetic (kernels/moe_rows.h): one
 * thread per value, grid-stride. The row indices and weights are device
 * copies the backend uploads (backend.cu). */
#include "kernels/cuda/internal.cuh"

extern "C" {
#include "kernels/moe_rows.h"
}

namespace {

__global__ void gather_rows_kernel(float *y, const float *x, const int32_t *rows, int64_t n_rows, int64_t width) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_rows * width;
         i += (int64_t)gridDim.x * blockDim.x)
        hfq_gather_value(y, x, rows, width, i);
}

__global__ void add_rows_scaled_kernel(float *x, const float *y, const int32_t *rows, const float *w, int64_t n_rows,
                                       int64_t width) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_rows * width;
         i += (int64_t)gridDim.x * blockDim.x)
        hfq_add_scaled_value(x, y, rows, w, width, i);
}

}  // namespace

void cuda_gather_rows(float *y, const float *x, const int32_t *rows, int64_t n_rows, int64_t width) {
    gather_rows_kernel<<<cuda_blocks(n_rows * width, CUDA_THREADS), CUDA_THREADS>>>(y, x, rows, n_rows, width);
}

void cuda_add_rows_scaled(float *x, const float *y, const int32_t *rows, const float *w, int64_t n_rows,
                          int64_t width) {
    add_rows_scaled_kernel<<<cuda_blocks(n_rows * width, CUDA_THREADS), CUDA_THREADS>>>(x, y, rows, w, n_rows, width);
}
