/* vec.cu - RMSNorm, RoPE, attention over the KV cache, SwiGLU and add, with
 * the CPU backend's formulas (kernels/cpu/cpu_ops.c) and order of rounding
 * where it is cheap to keep (the build turns FMA contraction off).
 *
 * KV cache layout: K and V as rows, [n_ctx][n_head_kv * head_dim]. */
#include <math.h>

#include "kernels/cuda/internal.cuh"

namespace {

/* Warps of an attention block: each takes every ATT_WARPS-th cached position. */
#define ATT_WARPS 8
#define ATT_PER_LANE (CUDA_MAX_HEAD_DIM / 32)

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* One block per token: the mean square summed in double (as ggml), then
 * x * scale * w in float. y may be x: each thread rewrites what it read. */
__global__ void rmsnorm_kernel(float *y, const float *x, const float *w, int64_t n, float eps) {
    __shared__ double part[CUDA_THREADS / 32];
    __shared__ float scale_sh;
    const float *xr = x + blockIdx.x * n;
    float *yr = y + blockIdx.x * n;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += (double)(xr[i] * xr[i]);
    sum = warp_sum_d(sum);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int i = 0; i < (int)(blockDim.x / 32); i++) total += part[i];
        scale_sh = 1.0f / sqrtf((float)(total / (double)n) + eps);
    }
    __syncthreads();
    const float scale = scale_sh;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

/* One thread per rotated pair: pairs (2i, 2i+1), or NeoX's (i, i + n_rot/2). */
__global__ void rope_kernel(float *x, int64_t n_tokens, int64_t n_heads, int64_t pos0, int n_rot, int64_t head_dim,
                            bool neox, const float *cos_sin) {
    const int64_t n_pairs = n_rot / 2, step = neox ? 1 : 2, gap = neox ? n_pairs : 1;
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < n_tokens * n_heads * n_pairs;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = idx % n_pairs, th = idx / n_pairs, t = th / n_heads;
        float *v = x + th * head_dim;
        const float *cs = cos_sin + ((pos0 + t) * n_pairs + i) * 2;
        const float c = cs[0], s = cs[1];
        const float x0 = v[i * step], x1 = v[i * step + gap];
        v[i * step] = x0 * c - x1 * s;
        v[i * step + gap] = x0 * s + x1 * c;
    }
}

__global__ void kv_store_kernel(float *k_cache, float *v_cache, const float *k, const float *v, int64_t pos0,
                                int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        k_cache[pos0 + i] = k[i];
        v_cache[pos0 + i] = v[i];
    }
}

/* One block per (query token, head). Each warp keeps a running softmax over
 * its positions (max, sum of e^(s - max), the e-weighted sum of V rows);
 * the warps' states are merged at the end. */
__global__ void attention_kernel(float *out, const float *q, const float *k_cache, const float *v_cache, int64_t pos0,
                                 int64_t n_tokens, int64_t n_head, int64_t group, int64_t head_dim, int64_t kv_dim,
                                 float scale, int64_t n_swa, float softcap) {
    __shared__ float qs[CUDA_MAX_HEAD_DIM];
    __shared__ float m_sh[ATT_WARPS], l_sh[ATT_WARPS];
    __shared__ float acc_sh[ATT_WARPS][CUDA_MAX_HEAD_DIM];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int64_t q_dim = n_head * head_dim;
    for (int64_t bi = blockIdx.x; bi < n_tokens * n_head; bi += gridDim.x) {
        const int64_t t = bi / n_head, h = bi % n_head, hk = h / group;
        const int64_t n_keys = pos0 + t + 1;
        const int64_t p0 = n_swa > 0 && n_keys > n_swa ? n_keys - n_swa : 0;   /* the window's first */
        __syncthreads();   /* the previous item's readers of the shared arrays are done */
        for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = q[t * q_dim + h * head_dim + d];
        __syncthreads();
        float m = -INFINITY, l = 0.0f, acc[ATT_PER_LANE] = {0};
        for (int64_t p = p0 + warp; p < n_keys; p += ATT_WARPS) {
            const float *kp = k_cache + p * kv_dim + hk * head_dim, *vp = v_cache + p * kv_dim + hk * head_dim;
            float s = 0.0f;
            for (int64_t d = lane; d < head_dim; d += 32) s += qs[d] * kp[d];
            s = cuda_warp_sum(s) * scale;
            if (softcap > 0.0f) s = tanhf(s / softcap) * softcap;
            const float m_new = fmaxf(m, s), corr = expf(m - m_new), e = expf(s - m_new);
            l = l * corr + e;
            for (int j = 0; j < ATT_PER_LANE; j++) {
                const int64_t d = lane + 32 * j;
                if (d < head_dim) acc[j] = acc[j] * corr + e * vp[d];
            }
            m = m_new;
        }
        if (lane == 0) {
            m_sh[warp] = m;
            l_sh[warp] = l;
        }
        for (int j = 0; j < ATT_PER_LANE; j++)
            if (lane + 32 * j < head_dim) acc_sh[warp][lane + 32 * j] = acc[j];
        __syncthreads();
        float m_all = -INFINITY, l_all = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++) m_all = fmaxf(m_all, m_sh[w]);
        for (int w = 0; w < ATT_WARPS; w++)
            if (m_sh[w] > -INFINITY) l_all += l_sh[w] * expf(m_sh[w] - m_all);
        for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
            float o = 0.0f;
            for (int w = 0; w < ATT_WARPS; w++)
                if (m_sh[w] > -INFINITY) o += acc_sh[w][d] * expf(m_sh[w] - m_all);
            out[t * q_dim + h * head_dim + d] = o / l_all;
        }
    }
}

__global__ void swiglu_kernel(float *gate, const float *up, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

__global__ void geglu_kernel(float *gate, const float *up, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float x = gate[i];
        gate[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))) * up[i];
    }
}

__global__ void scale_kernel(float *x, float s, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

__global__ void add_kernel(float *x, const float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

}  // namespace

void cuda_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t n_tokens, float eps) {
    rmsnorm_kernel<<<(unsigned)n_tokens, CUDA_THREADS>>>(y, x, w, n, eps);
}

void cuda_rope(float *x, int64_t n_tokens, int64_t n_heads, int64_t pos0, int n_rot, int64_t head_dim, bool neox,
               const float *cos_sin) {
    rope_kernel<<<cuda_blocks(n_tokens * n_heads * (n_rot / 2), CUDA_THREADS), CUDA_THREADS>>>(
        x, n_tokens, n_heads, pos0, n_rot, head_dim, neox, cos_sin);
}

void cuda_attention(float *out, const float *q, const float *k, const float *v, float *k_cache, float *v_cache,
                    int64_t pos0, int64_t n_tokens, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                    int64_t n_swa, float softcap) {
    const int64_t kv_dim = n_head_kv * head_dim, n = n_tokens * kv_dim;
    kv_store_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(k_cache, v_cache, k, v, pos0 * kv_dim, n);
    attention_kernel<<<cuda_blocks(n_tokens * n_head, 1), 32 * ATT_WARPS>>>(
        out, q, k_cache, v_cache, pos0, n_tokens, n_head, n_head / n_head_kv, head_dim, kv_dim, scale, n_swa, softcap);
}

void cuda_swiglu(float *gate, const float *up, int64_t n) {
    swiglu_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(gate, up, n);
}

void cuda_geglu(float *gate, const float *up, int64_t n) {
    geglu_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(gate, up, n);
}

void cuda_scale(float *x, float s, int64_t n) {
    scale_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(x, s, n);
}

void cuda_add(float *x, const float *y, int64_t n) {
    add_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(x, y, n);
}
