/* i8.cu - INT8 and FP8 (E4M3, E5M2) weight codes with FP32 scales
 * (docs/format-quant-ext.md), W8A8 as the CPU computes them: activations
 * quantized per token (amax / largest code) or with the static input scale,
 * through quant/int8.h and quant/fp8.h's own codecs.
 *
 * INT8 products are exact integer sums per scale group, added in group
 * order as float(scale_g * isum_g), then times the activation scale: the
 * CPU's hfq_dot_int8_int8, bit for bit. FP8 sums decoded products in float
 * (lanes, then the warp), then times w_scale * a_scale. */
#include "kernels/cuda/internal.cuh"
#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/int8.h"

namespace {

__device__ __forceinline__ hfq_fp8_format fp8_of(cuda_wfmt f) {
    return f == CUDA_WF_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
}

__device__ __forceinline__ long long warp_sum_ll(long long v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* One block per token: the scale (per token: amax / largest code; or the
 * static one), then every code. */
__global__ void quantize_kernel(cuda_wfmt fmt, const float *x, int8_t *codes, float *scales, int64_t ne0,
                                float static_scale) {
    __shared__ float warp_max[CUDA_THREADS / 32];
    __shared__ float scale_sh;
    const int64_t t = blockIdx.x;
    const float *xt = x + t * ne0;
    if (static_scale > 0.0f) {
        if (threadIdx.x == 0) scale_sh = static_scale;
    } else {
        float amax = 0.0f;
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) amax = fmaxf(amax, fabsf(xt[i]));
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x / 32] = amax;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < (int)(blockDim.x / 32); w++) amax = fmaxf(amax, warp_max[w]);
            scale_sh = fmt == CUDA_WF_INT8 ? amax / (float)HFQ_INT8_QMAX : amax / hfq_fp8_max(fp8_of(fmt));
        }
    }
    __syncthreads();
    const float scale = scale_sh;
    if (threadIdx.x == 0) scales[t] = scale;
    for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
        int8_t c = 0;
        if (scale != 0.0f)
            c = fmt == CUDA_WF_INT8 ? hfq_int8_round(xt[i] / scale) : (int8_t)hfq_f32_to_fp8(fp8_of(fmt), xt[i] / scale);
        codes[t * ne0 + i] = c;
    }
}

/* sum of products of 16 int8 codes packed in two uint4s. */
__device__ __forceinline__ int dot16(uint4 a, uint4 b) {
    int s = __dp4a((int)a.x, (int)b.x, 0);
    s = __dp4a((int)a.y, (int)b.y, s);
    s = __dp4a((int)a.z, (int)b.z, s);
    return __dp4a((int)a.w, (int)b.w, s);
}

/* One warp per row; per scale group an exact integer dot (lanes, then the
 * warp in 64 bits), added in group order. vec: groups are multiples of 16
 * codes (16-byte reads). */
__global__ void matvec_int8_kernel(const int8_t *w, int64_t ne0, int64_t ne1, const float *w_scales, int64_t groups,
                                   const int8_t *codes, const float *a_scales, int n_tokens, bool vec,
                                   const float *bias, float *y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * CUDA_MATVEC_WARPS + threadIdx.x / 32;
    if (row >= ne1) return;
    const int64_t n_groups = groups ? groups : 1, g_len = ne0 / n_groups;
    const float *ws = w_scales + (groups ? row * groups : 0);
    const int8_t *wr = w + row * ne0;
#pragma unroll 1
    for (int t = 0; t < n_tokens; t++) {
        const int8_t *at = codes + t * ne0;
        float sum = 0.0f;
        for (int64_t k = 0; k < n_groups; k++) {
            const int8_t *wg = wr + k * g_len, *ag = at + k * g_len;
            long long part = 0;
            if (vec)
                for (int64_t c = lane; c < g_len / 16; c += 32)
                    part += dot16(((const uint4 *)wg)[c], ((const uint4 *)ag)[c]);
            else
                for (int64_t i = lane; i < g_len; i += 32) part += (int)wg[i] * (int)ag[i];
            sum += ws[k] * (float)warp_sum_ll(part);
        }
        float v = sum * a_scales[t];
        if (bias) v += bias[row];
        if (lane == 0) y[t * ne1 + row] = v;
    }
}

/* One warp per row: decoded products summed in float per lane, then the warp. */
__global__ void matvec_fp8_kernel(cuda_wfmt fmt, const uint8_t *w, int64_t ne0, int64_t ne1, const float *w_scales,
                                  int64_t groups, const uint8_t *codes, const float *a_scales, int n_tokens,
                                  bool vec, const float *bias, float *y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * CUDA_MATVEC_WARPS + threadIdx.x / 32;
    if (row >= ne1) return;
    const hfq_fp8_format f = fp8_of(fmt);
    const uint8_t *wr = w + row * ne0;
    float acc[CUDA_MATVEC_MAX_TOKENS] = {0};
    const int64_t step = vec ? 16 : 1;
    for (int64_t c = lane; c < ne0 / step; c += 32) {
        union {
            uint4 v;
            uint8_t b[16];
        } wv;
        if (vec) wv.v = ((const uint4 *)wr)[c];
        else wv.b[0] = wr[c];
#pragma unroll 1
        for (int t = 0; t < n_tokens; t++) {
            const uint8_t *a = codes + t * ne0 + c * step;
            for (int j = 0; j < step; j++) acc[t] += hfq_fp8_to_f32(f, wv.b[j]) * hfq_fp8_to_f32(f, a[j]);
        }
    }
    cuda_matvec_store(acc, n_tokens, w_scales[groups ? row : 0], a_scales, bias, row, ne1, y);
}

/* Rows as the CPU decodes them (scale * value), or raw code values. */
__global__ void decode_rows_kernel(cuda_wfmt fmt, const int8_t *w, int64_t ne0, const float *scales, int64_t groups,
                                   const int32_t *rows, int64_t n_rows, bool raw, void *out, bool bf16) {
    const int64_t n_groups = groups ? groups : 1, g_len = ne0 / n_groups;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_rows * ne0;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / ne0, j = i % ne0, src = rows ? rows[r] : r;
        const int8_t c = w[src * ne0 + j];
        float v;
        if (fmt == CUDA_WF_INT8) v = raw ? (float)c : scales[groups ? src * groups + j / g_len : 0] * (float)c;
        else {
            v = hfq_fp8_to_f32(fp8_of(fmt), (uint8_t)c);
            if (!raw) v = scales[groups ? src : 0] * v;
        }
        if (bf16) ((uint16_t *)out)[i] = hfq_f32_to_bf16(v);
        else ((float *)out)[i] = v;
    }
}

__global__ void decode_act_kernel(cuda_wfmt fmt, const int8_t *codes, uint16_t *out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = hfq_f32_to_bf16(fmt == CUDA_WF_INT8 ? (float)codes[i] : hfq_fp8_to_f32(fp8_of(fmt), (uint8_t)codes[i]));
}

}  // namespace

void cuda_i8_quantize_act(const cuda_weight *w, const float *x, int8_t *codes, float *scales, int64_t n_tokens) {
    quantize_kernel<<<(unsigned)n_tokens, CUDA_THREADS>>>(w->plan.fmt, x, codes, scales, w->ne0, w->input_scale);
}

void cuda_i8_decode_act(const cuda_wplan *p, const int8_t *codes, uint16_t *out, int64_t n) {
    decode_act_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(p->fmt, codes, out, n);
}

void cuda_i8_matvec(const cuda_weight *w, const int8_t *codes, const float *scales, const float *bias, float *y,
                    int64_t n_tokens) {
    const unsigned blocks = (unsigned)((w->ne1 + CUDA_MATVEC_WARPS - 1) / CUDA_MATVEC_WARPS);
    const int64_t g_len = w->ne0 / (w->groups ? w->groups : 1);
    if (w->plan.fmt == CUDA_WF_INT8)
        matvec_int8_kernel<<<blocks, 32 * CUDA_MATVEC_WARPS>>>((const int8_t *)w->data, w->ne0, w->ne1, w->scales,
                                                               w->groups, codes, scales, (int)n_tokens,
                                                               g_len % 16 == 0, bias, y);
    else
        matvec_fp8_kernel<<<blocks, 32 * CUDA_MATVEC_WARPS>>>(w->plan.fmt, (const uint8_t *)w->data, w->ne0, w->ne1,
                                                              w->scales, w->groups, (const uint8_t *)codes, scales,
                                                              (int)n_tokens, w->ne0 % 16 == 0, bias, y);
}

void cuda_i8_decode_rows(const cuda_weight *w, const int32_t *rows, int64_t n_rows, bool raw, void *out, bool bf16) {
    decode_rows_kernel<<<cuda_blocks(n_rows * w->ne0, CUDA_THREADS), CUDA_THREADS>>>(
        w->plan.fmt, (const int8_t *)w->data, w->ne0, w->scales, w->groups, rows, n_rows, raw, out, bf16);
}
