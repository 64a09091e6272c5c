/* ggml.cu - the ggml block formats on the GPU: activation quantizers,
 * matrix-vector products and block decoders, thin kernels around
 * quant/block_math.h and quant/fp4.h (the CPU's very functions).
 *
 * A format is a traits struct: its weight block W, activation block A (NA of
 * them cover one weight block), QK values per weight block, the per-block
 * dot step the CPU's vec_dot takes (acc) and the decoder. Each kernel is
 * instantiated once per format. */
#include "kernels/cuda/internal.cuh"
#include "quant/block_math.h"
#include "quant/fp4.h"

namespace {

template <class WB, class AB, int QK_, int NA_>
struct fmt {
    typedef WB W;
    typedef AB A;
    static const int QK = QK_, NA = NA_;
};

#define HFQ_FMT(NAME, WB, AB, QK, NA, ACC, DECODE)                                                  \
    struct NAME : fmt<WB, AB, QK, NA> {                                                            \
        static __device__ float acc(float s, const W *w, const A *a) { return ACC; }              \
        static __device__ void decode(const W *w, float *y) { DECODE(w, y); }                      \
    };
HFQ_FMT(f_q8_0, hfq_block_q8_0, hfq_block_q8_0, HFQ_QK, 1, s + hfq_dot_q8_0_q8_0(w, a), hfq_decode_q8_0)
HFQ_FMT(f_q4_0, hfq_block_q4_0, hfq_block_q8_0, HFQ_QK, 1, s + hfq_dot_q4_0_q8_0(w, a), hfq_decode_q4_0)
HFQ_FMT(f_q5_0, hfq_block_q5_0, hfq_block_q8_0, HFQ_QK, 1, s + hfq_dot_q5_0_q8_0(w, a), hfq_decode_q5_0)
HFQ_FMT(f_q5_1, hfq_block_q5_1, hfq_block_q8_1, HFQ_QK, 1, s + hfq_dot_q5_1_q8_1(w, a), hfq_decode_q5_1)
HFQ_FMT(f_q4_k, hfq_block_q4_k, hfq_block_q8_k, HFQ_QK_K, 1, s + hfq_dot_q4_k_q8_k(w, a), hfq_decode_q4_k)
HFQ_FMT(f_q5_k, hfq_block_q5_k, hfq_block_q8_k, HFQ_QK_K, 1, s + hfq_dot_q5_k_q8_k(w, a), hfq_decode_q5_k)
HFQ_FMT(f_q6_k, hfq_block_q6_k, hfq_block_q8_k, HFQ_QK_K, 1, s + hfq_dot_q6_k_q8_k(w, a), hfq_decode_q6_k)
HFQ_FMT(f_mxfp4, hfq_block_mxfp4, hfq_block_q8_0, HFQ_QK_MXFP4, 1, hfq_acc_block_mxfp4_q8_0(s, w, a),
        hfq_decode_block_mxfp4)
HFQ_FMT(f_nvfp4, hfq_block_nvfp4, hfq_block_q8_0, HFQ_QK_NVFP4, 2, hfq_acc_block_nvfp4_q8_0(s, w, a),
        hfq_decode_block_nvfp4)
#undef HFQ_FMT

/* Runs Op<format>::run(args...) for the weight's format. */
template <template <class> class Op, class... Args>
void dispatch(cuda_wfmt f, Args... args) {
    switch (f) {
    case CUDA_WF_Q8_0: Op<f_q8_0>::run(args...); break;
    case CUDA_WF_Q4_0: Op<f_q4_0>::run(args...); break;
    case CUDA_WF_Q5_0: Op<f_q5_0>::run(args...); break;
    case CUDA_WF_Q5_1: Op<f_q5_1>::run(args...); break;
    case CUDA_WF_Q4_K: Op<f_q4_k>::run(args...); break;
    case CUDA_WF_Q5_K: Op<f_q5_k>::run(args...); break;
    case CUDA_WF_Q6_K: Op<f_q6_k>::run(args...); break;
    case CUDA_WF_MXFP4: Op<f_mxfp4>::run(args...); break;
    case CUDA_WF_NVFP4: Op<f_nvfp4>::run(args...); break;
    default: break;   /* not a ggml block format: the backend never sends one */
    }
}

/* One warp per weight row; lanes take its blocks in turn, each summing the
 * CPU's per-block dot steps, then the warp adds the lanes' sums. */
template <class F>
__global__ void matvec_kernel(const char *w, size_t row_bytes, int64_t ne1, int64_t n_blocks, const char *act,
                              size_t act_row_bytes, int n_tokens, float scale, const float *bias, float *y) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * CUDA_MATVEC_WARPS + threadIdx.x / 32;
    if (row >= ne1) return;   /* the whole warp */
    const typename F::W *wr = (const typename F::W *)(w + row * row_bytes);
    float acc[CUDA_MATVEC_MAX_TOKENS] = {0};
    for (int64_t b = lane; b < n_blocks; b += 32) {
#pragma unroll 1
        for (int t = 0; t < n_tokens; t++)
            acc[t] = F::acc(acc[t], wr + b, (const typename F::A *)(act + t * act_row_bytes) + b * F::NA);
    }
    cuda_matvec_store(acc, n_tokens, scale, NULL, bias, row, ne1, y);
}

template <class F>
struct matvec_op {
    static void run(const cuda_weight *w, const void *q, const float *bias, float *y, int64_t n_tokens) {
        const unsigned blocks = (unsigned)((w->ne1 + CUDA_MATVEC_WARPS - 1) / CUDA_MATVEC_WARPS);
        matvec_kernel<F><<<blocks, 32 * CUDA_MATVEC_WARPS>>>(w->data, w->row_bytes, w->ne1, w->ne0 / F::QK,
                                                             (const char *)q, w->plan.act_row_bytes, (int)n_tokens,
                                                             w->tensor_scale, bias, y);
    }
};

/* One thread per block of a row: decoded, times scale, to floats or BF16. */
template <class F>
__global__ void decode_rows_kernel(const char *w, size_t row_bytes, int64_t ne0, const int32_t *rows,
                                   int64_t n_rows, float scale, void *out, bool bf16) {
    const int64_t n_blocks = ne0 / F::QK;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_rows * n_blocks;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / n_blocks, b = i % n_blocks;
        const int64_t src = rows ? rows[r] : r;
        float v[F::QK];
        F::decode((const typename F::W *)(w + src * row_bytes) + b, v);
        const int64_t at = r * ne0 + b * F::QK;
        for (int j = 0; j < F::QK; j++) {
            if (bf16) ((uint16_t *)out)[at + j] = hfq_f32_to_bf16(v[j] * scale);
            else ((float *)out)[at + j] = v[j] * scale;
        }
    }
}

template <class F>
struct decode_rows_op {
    static void run(const cuda_weight *w, const int32_t *rows, int64_t n_rows, float scale, void *out, bool bf16) {
        decode_rows_kernel<F><<<cuda_blocks(n_rows * (w->ne0 / F::QK), 64), 64>>>(w->data, w->row_bytes, w->ne0,
                                                                                 rows, n_rows, scale, out, bf16);
    }
};

/* One thread per activation block: quantized as the CPU does (quantize), or
 * the quantized block decoded to BF16 (!quantize). */
__global__ void act_kernel(cuda_act act, bool quantize, const float *x, char *q, uint16_t *out, int64_t ne0,
                           size_t row_bytes, int64_t n_tokens) {
    const int qk = act == CUDA_ACT_Q8_K ? HFQ_QK_K : HFQ_QK;
    const int64_t per_row = ne0 / qk;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_tokens * per_row;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / per_row, b = i % per_row;
        char *row = q + t * row_bytes;
        const float *src = quantize ? x + t * ne0 + b * qk : NULL;
        float v[HFQ_QK_K];
        switch (act) {
        case CUDA_ACT_Q8_0:
            if (quantize) hfq_quantize_block_q8_0_act(src, (hfq_block_q8_0 *)row + b);
            else hfq_decode_q8_0((const hfq_block_q8_0 *)row + b, v);
            break;
        case CUDA_ACT_Q8_1:
            if (quantize) hfq_quantize_block_q8_1(src, (hfq_block_q8_1 *)row + b);
            else hfq_decode_q8_1((const hfq_block_q8_1 *)row + b, v);
            break;
        default:
            if (quantize) hfq_quantize_block_q8_k(src, (hfq_block_q8_k *)row + b);
            else hfq_decode_q8_k((const hfq_block_q8_k *)row + b, v);
            break;
        }
        if (!quantize)
            for (int j = 0; j < qk; j++) out[t * ne0 + b * qk + j] = hfq_f32_to_bf16(v[j]);
    }
}

void act_launch(const cuda_wplan *p, bool quantize, const float *x, const void *q, uint16_t *out, int64_t ne0,
                int64_t n_tokens) {
    const int qk = p->act == CUDA_ACT_Q8_K ? HFQ_QK_K : HFQ_QK;
    act_kernel<<<cuda_blocks(n_tokens * (ne0 / qk), 64), 64>>>(p->act, quantize, x, (char *)q, out, ne0,
                                                               p->act_row_bytes, n_tokens);
}

}  // namespace

void cuda_ggml_quantize_act(const cuda_wplan *p, const float *x, void *q, int64_t ne0, int64_t n_tokens) {
    act_launch(p, true, x, q, NULL, ne0, n_tokens);
}

void cuda_ggml_decode_act(const cuda_wplan *p, const void *q, uint16_t *out, int64_t ne0, int64_t n_tokens) {
    act_launch(p, false, NULL, q, out, ne0, n_tokens);
}

void cuda_ggml_matvec(const cuda_weight *w, const void *q, const float *bias, float *y, int64_t n_tokens) {
    dispatch<matvec_op>(w->plan.fmt, w, q, bias, y, n_tokens);
}

void cuda_ggml_decode_rows(const cuda_weight *w, const int32_t *rows, int64_t n_rows, float scale, void *out,
                           bool bf16) {
    dispatch<decode_rows_op>(w->plan.fmt, w, rows, n_rows, scale, out, bf16);
}
