/* float.cu - F32, F16 and BF16 weights: matrix-vector products with the
 * activations rounded to the weight's type as the CPU rounds them
 * (quant/half.h), rows read 16 bytes at a time when they allow it, and the
 * rounding and row decoding the other paths need. */
#include "kernels/cuda/internal.cuh"
#include "quant/half.h"

namespace {

/* Element types: the stored value as a float, and an activation rounded to
 * the type and back (the CPU's F16/BF16 activation rows). */
struct t_f32 {
    typedef float S;
    static __device__ float load(S v) { return v; }
    static __device__ float round(float x) { return x; }
};
struct t_f16 {
    typedef uint16_t S;
    static __device__ float load(S v) { return hfq_fp16_to_f32(v); }
    static __device__ float round(float x) { return hfq_fp16_to_f32(hfq_f32_to_fp16(x)); }
};
struct t_bf16 {
    typedef uint16_t S;
    static __device__ float load(S v) { return hfq_bf16_to_f32(v); }
    static __device__ float round(float x) { return hfq_bf16_to_f32(hfq_f32_to_bf16(x)); }
};

/* One warp per weight row. With vec, lanes read 16-byte chunks (rows are
 * multiples of 16 bytes and the arena aligns them), else single values. */
template <class E>
__global__ void matvec_kernel(const char *w, size_t row_bytes, int64_t ne0, int64_t ne1, const float *x,
                              int n_tokens, bool vec, float scale, const float *bias, float *y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * CUDA_MATVEC_WARPS + threadIdx.x / 32;
    if (row >= ne1) return;
    const typename E::S *wr = (const typename E::S *)(w + row * row_bytes);
    const int per_chunk = 16 / (int)sizeof(typename E::S);
    float acc[CUDA_MATVEC_MAX_TOKENS] = {0};
    if (vec) {
        for (int64_t c = lane; c < ne0 / per_chunk; c += 32) {
            const uint4 chunk = ((const uint4 *)wr)[c];
            const typename E::S *v = (const typename E::S *)&chunk;
#pragma unroll 1
            for (int t = 0; t < n_tokens; t++) {
                const float *xt = x + t * ne0 + c * per_chunk;
                for (int j = 0; j < per_chunk; j++) acc[t] += E::load(v[j]) * E::round(xt[j]);
            }
        }
    } else {
        for (int64_t i = lane; i < ne0; i += 32) {
            const float wv = E::load(wr[i]);
#pragma unroll 1
            for (int t = 0; t < n_tokens; t++) acc[t] += wv * E::round(x[t * ne0 + i]);
        }
    }
    cuda_matvec_store(acc, n_tokens, scale, NULL, bias, row, ne1, y);
}

template <class E>
void matvec_launch(const cuda_weight *w, const float *x, const float *bias, float *y, int64_t n_tokens) {
    const bool vec = w->row_bytes % 16 == 0;
    const unsigned blocks = (unsigned)((w->ne1 + CUDA_MATVEC_WARPS - 1) / CUDA_MATVEC_WARPS);
    matvec_kernel<E><<<blocks, 32 * CUDA_MATVEC_WARPS>>>(w->data, w->row_bytes, w->ne0, w->ne1, x, (int)n_tokens,
                                                         vec, w->tensor_scale, bias, y);
}

__global__ void round_kernel(bool f16, const float *x, uint16_t *out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = f16 ? hfq_f32_to_fp16(x[i]) : hfq_f32_to_bf16(x[i]);
}

template <class E>
__global__ void decode_rows_kernel(const char *w, size_t row_bytes, int64_t ne0, const int32_t *rows,
                                   int64_t n_rows, float scale, float *out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_rows * ne0;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / ne0, j = i % ne0;
        const typename E::S *src = (const typename E::S *)(w + (rows ? rows[r] : r) * row_bytes);
        out[i] = E::load(src[j]) * scale;
    }
}

template <class E>
void decode_rows_launch(const cuda_weight *w, const int32_t *rows, int64_t n_rows, float scale, float *out) {
    decode_rows_kernel<E><<<cuda_blocks(n_rows * w->ne0, CUDA_THREADS), CUDA_THREADS>>>(w->data, w->row_bytes, w->ne0,
                                                                                      rows, n_rows, scale, out);
}

}  // namespace

void cuda_float_matvec(const cuda_weight *w, const float *x, const float *bias, float *y, int64_t n_tokens) {
    switch (w->plan.fmt) {
    case CUDA_WF_F32: matvec_launch<t_f32>(w, x, bias, y, n_tokens); break;
    case CUDA_WF_F16: matvec_launch<t_f16>(w, x, bias, y, n_tokens); break;
    default: matvec_launch<t_bf16>(w, x, bias, y, n_tokens); break;
    }
}

void cuda_float_round(cuda_act act, const float *x, uint16_t *out, int64_t n) {
    round_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(act == CUDA_ACT_F16, x, out, n);
}

void cuda_float_decode_rows(const cuda_weight *w, const int32_t *rows, int64_t n_rows, float scale, float *out) {
    switch (w->plan.fmt) {
    case CUDA_WF_F32: decode_rows_launch<t_f32>(w, rows, n_rows, scale, out); break;
    case CUDA_WF_F16: decode_rows_launch<t_f16>(w, rows, n_rows, scale, out); break;
    default: decode_rows_launch<t_bf16>(w, rows, n_rows, scale, out); break;
    }
}
