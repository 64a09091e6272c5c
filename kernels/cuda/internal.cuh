/* internal.cuh - between the CUDA backend's .cu files: the weight view the
 * kernels read and the launchers each file provides. Launchers queue work on
 * the legacy default stream and return at once; the backend checks
 * cudaGetLastError after each (backend.cu).
 *
 * Shapes: T = tokens of the batch, activation rows x[T][ne0], outputs
 * y[T][ne1] (row-major, as the graph keeps them). */
#ifndef HFQ_KERNELS_CUDA_INTERNAL_CUH
#define HFQ_KERNELS_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {   /* the C side of the library */
#include "formats/error.h"
#include "kernels/cuda/plan.h"
#include "kernels/model.h"
#include "kernels/ops.h"
}

/* A matrix as the kernels read it (device pointers). */
struct cuda_weight {
    const char *data;        /* ne1 rows, row_bytes apart, as stored */
    const float *scales;     /* I8: [1], [ne1] or [ne1][groups]; else NULL */
    int64_t ne0, ne1;
    size_t row_bytes;
    int64_t groups;          /* I8 scale groups per row (0: one scale for the tensor) */
    float tensor_scale;      /* non-I8: the product's factor, 1 when none */
    float input_scale;       /* I8: static activation scale; 0: per token */
    cuda_wplan plan;
};

/* Threads per block of the element-wise and row kernels. */
#define CUDA_THREADS 256
/* Rows per block of the matrix-vector kernels: one warp each. */
#define CUDA_MATVEC_WARPS 4

/* Blocks for n items, per_block each; capped, so kernels that take it loop
 * over their items grid-stride. */
static inline unsigned cuda_blocks(int64_t n, int64_t per_block) {
    int64_t b = (n + per_block - 1) / per_block;
    return (unsigned)(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

__device__ __forceinline__ float cuda_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The end of a matrix-vector kernel (one warp per row): each token's lane
 * sums added across the warp, times scale (and token_scales[t] when given:
 * sum * (scale * token_scale), the CPU's order), plus bias; lane 0 writes. */
__device__ __forceinline__ void cuda_matvec_store(const float *acc, int n_tokens, float scale,
                                                  const float *token_scales, const float *bias, int64_t row,
                                                  int64_t ne1, float *y) {
#pragma unroll 1
    for (int t = 0; t < n_tokens; t++) {
        float v = cuda_warp_sum(acc[t]) * (token_scales ? scale * token_scales[t] : scale);
        if (bias) v += bias[row];
        if ((threadIdx.x & 31) == 0) y[t * ne1 + row] = v;
    }
}

/* ---- ggml block formats (ggml.cu): Q8_0 Q4_0 Q5_0 Q5_1 Q4_K Q5_K Q6_K MXFP4 NVFP4 ---- */

/* x rows -> the plan's Q8_0/Q8_1/Q8_K rows (plan.act_row_bytes each), as the CPU quantizes them. */
void cuda_ggml_quantize_act(const cuda_wplan *p, const float *x, void *q, int64_t ne0, int64_t n_tokens);
/* Quantized activation rows -> BF16 rows of their decoded values. */
void cuda_ggml_decode_act(const cuda_wplan *p, const void *q, uint16_t *out, int64_t ne0, int64_t n_tokens);
/* y[t][o] = dot(row o, activation row t) * tensor_scale (+ bias[o]), T <= CUDA_MATVEC_MAX_TOKENS. */
void cuda_ggml_matvec(const cuda_weight *w, const void *q, const float *bias, float *y, int64_t n_tokens);
/* Rows rows[r] (rows NULL: row r) for r < n_rows, decoded and times scale,
 * to out[r][ne0]: floats when bf16 is false, else BF16. */
void cuda_ggml_decode_rows(const cuda_weight *w, const int32_t *rows, int64_t n_rows, float scale, void *out,
                           bool bf16);

/* ---- F32 / F16 / BF16 (float.cu) ---- */

/* y = W x_rounded * tensor_scale (+ bias), x rounded to the weight's type as the CPU does. */
void cuda_float_matvec(const cuda_weight *w, const float *x, const float *bias, float *y, int64_t n_tokens);
/* n floats rounded to F16 (act CUDA_ACT_F16) or BF16 (anything else). */
void cuda_float_round(cuda_act act, const float *x, uint16_t *out, int64_t n);
void cuda_float_decode_rows(const cuda_weight *w, const int32_t *rows, int64_t n_rows, float scale, float *out);

/* ---- INT8 / FP8 codes (i8.cu) ---- */

/* x rows -> codes [T][ne0] and per-token scales[T] (or the static input scale). */
void cuda_i8_quantize_act(const cuda_weight *w, const float *x, int8_t *codes, float *scales, int64_t n_tokens);
/* Codes -> BF16 of the code values (exact; no scale). */
void cuda_i8_decode_act(const cuda_wplan *p, const int8_t *codes, uint16_t *out, int64_t n);
/* W8A8 product as the CPU computes it (+ bias), T <= CUDA_MATVEC_MAX_TOKENS. */
void cuda_i8_matvec(const cuda_weight *w, const int8_t *codes, const float *scales, const float *bias, float *y,
                    int64_t n_tokens);
/* Rows decoded with their scales (or, raw, the code values) to floats or BF16. */
void cuda_i8_decode_rows(const cuda_weight *w, const int32_t *rows, int64_t n_rows, bool raw, void *out, bool bf16);

/* ---- after a GEMM (gemm.cu) ---- */

typedef enum cuda_epilogue {
    CUDA_EPI_SCALE,      /* y = y * tensor_scale + bias */
    CUDA_EPI_INT8_ROW,   /* y = (w_scale[o] * y) * a_scale[t] + bias */
    CUDA_EPI_FP8_ROW,    /* y = y * (w_scale[o] * a_scale[t]) + bias */
    CUDA_EPI_ACT,        /* y = y * a_scale[t] + bias (weights decoded with their scales) */
} cuda_epilogue;

void cuda_epilogue_run(cuda_epilogue e, const cuda_weight *w, const float *a_scales, const float *bias, float *y,
                       int64_t n_tokens);

/* cuBLAS state of one backend. */
struct cuda_blas;
typedef enum cuda_gemm_type { CUDA_GT_F32, CUDA_GT_F16, CUDA_GT_BF16, CUDA_GT_FP8_E4M3 } cuda_gemm_type;
/* Creates handles (and with fp8 a cuBLASLt workspace); NULL with *why on failure. */
struct cuda_blas *cuda_blas_new(bool fp8, const char **why);
void cuda_blas_free(struct cuda_blas *b);
/* y[T][m] = x[T][k] . W[m][k]^T in F32; returns false when cuBLAS refused
 * (FP8: no algorithm for these shapes), with *why set. */
bool cuda_blas_gemm(struct cuda_blas *b, cuda_gemm_type type, const void *w, const void *x, float *y, int64_t m,
                    int64_t n_tokens, int64_t k, const char **why);

/* ---- the rest of the forward pass (vec.cu) ---- */

void cuda_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t n_tokens, float eps);
void cuda_rope(float *x, int64_t n_tokens, int64_t n_heads, int64_t pos0, int n_rot, int64_t head_dim, bool neox,
               const float *cos_sin);
/* Largest head size the attention kernel takes. */
#define CUDA_MAX_HEAD_DIM 256
void cuda_attention(float *out, const float *q, const float *k, const float *v, float *k_cache, float *v_cache,
                    int64_t pos0, int64_t n_tokens, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                    int64_t n_swa, float softcap);
void cuda_swiglu(float *gate, const float *up, int64_t n);
void cuda_geglu(float *gate, const float *up, int64_t n);
void cuda_scale(float *x, float s, int64_t n);
void cuda_add(float *x, const float *y, int64_t n);

/* ---- mixtures of experts (moe.cu): ops.h's gather_rows, add_rows_scaled; rows, w device copies ---- */

void cuda_gather_rows(float *y, const float *x, const int32_t *rows, int64_t n_rows, int64_t width);
void cuda_add_rows_scaled(float *x, const float *y, const int32_t *rows, const float *w, int64_t n_rows,
                          int64_t width);

#endif
