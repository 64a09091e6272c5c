/* gemm.cu - batched products through cuBLAS (F32, F16, BF16) and cuBLASLt
 * (FP8 E4M3), F32 results, and the epilogue that applies the scales the
 * CPU applies after its dots.
 *
 * Row-major y[T][m] = x[T][k] . W[m][k]^T is, in cuBLAS's column-major
 * terms, Y (m x T, ld m) = W^T (W stored k x m, ld k, transposed) times
 * X (k x T, ld k): the "TN" layout cuBLASLt's FP8 kernels require. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <limits.h>
#include <stdlib.h>

#include "kernels/cuda/internal.cuh"

/* cuBLASLt's workspace: what its FP8 kernels ask for on Hopper and later. */
#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

struct cuda_blas {
    cublasHandle_t h;
    cublasLtHandle_t lt;     /* NULL without FP8 */
    void *lt_workspace;
};

struct cuda_blas *cuda_blas_new(bool fp8, const char **why) {
    cuda_blas *b = (cuda_blas *)calloc(1, sizeof *b);
    if (!b) {
        *why = "out of memory";
        return NULL;
    }
    if (cublasCreate(&b->h) != CUBLAS_STATUS_SUCCESS) {
        *why = "cublasCreate failed";
        free(b);
        return NULL;
    }
    /* the default math mode keeps SGEMM in full FP32 (TF32 only on request),
     * as the CPU computes F32 weights; F16/BF16 use tensor cores either way */
    cublasSetMathMode(b->h, CUBLAS_DEFAULT_MATH);
    if (fp8) {
        if (cublasLtCreate(&b->lt) != CUBLAS_STATUS_SUCCESS) {
            *why = "cublasLtCreate failed";
            cuda_blas_free(b);
            return NULL;
        }
        if (cudaMalloc(&b->lt_workspace, LT_WORKSPACE_BYTES) != cudaSuccess) {
            *why = "out of device memory for the cuBLASLt workspace";
            cuda_blas_free(b);
            return NULL;
        }
    }
    return b;
}

void cuda_blas_free(struct cuda_blas *b) {
    if (!b) return;
    if (b->lt_workspace) cudaFree(b->lt_workspace);
    if (b->lt) cublasLtDestroy(b->lt);
    if (b->h) cublasDestroy(b->h);
    free(b);
}

/* E4M3 x E4M3 -> F32 with cuBLASLt; false when it has no algorithm. */
static bool gemm_fp8(cuda_blas *b, const void *w, const void *x, float *y, int m, int n, int k, const char **why) {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const size_t ws = LT_WORKSPACE_BYTES;
    const float alpha = 1.0f, beta = 0.0f;
    cublasLtMatmulHeuristicResult_t res;
    int n_res = 0;
    bool ok = false;
    *why = "cuBLASLt FP8 setup failed";
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) !=
            CUBLAS_STATUS_SUCCESS)
        goto done;
    if (cublasLtMatmulAlgoGetHeuristic(b->lt, op, la, lb, lc, lc, pref, 1, &res, &n_res) != CUBLAS_STATUS_SUCCESS ||
        n_res == 0) {
        *why = "cuBLASLt has no FP8 algorithm for this shape";
        goto done;
    }
    if (cublasLtMatmul(b->lt, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc, &res.algo, b->lt_workspace, ws, 0) !=
        CUBLAS_STATUS_SUCCESS) {
        *why = "cublasLtMatmul (FP8) failed";
        goto done;
    }
    ok = true;
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return ok;
}

bool cuda_blas_gemm(struct cuda_blas *b, cuda_gemm_type type, const void *w, const void *x, float *y, int64_t m,
                    int64_t n_tokens, int64_t k, const char **why) {
    if (m > INT_MAX || n_tokens > INT_MAX || k > INT_MAX) {
        *why = "matrix too large for cuBLAS";
        return false;
    }
    const int mi = (int)m, ni = (int)n_tokens, ki = (int)k;
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st;
    switch (type) {
    case CUDA_GT_FP8_E4M3:
        if (!b->lt) {
            *why = "no cuBLASLt handle";
            return false;
        }
        return gemm_fp8(b, w, x, y, mi, ni, ki, why);
    case CUDA_GT_F32:
        st = cublasSgemm(b->h, CUBLAS_OP_T, CUBLAS_OP_N, mi, ni, ki, &alpha, (const float *)w, ki, (const float *)x,
                         ki, &beta, y, mi);
        break;
    default: {
        const cudaDataType_t t = type == CUDA_GT_F16 ? CUDA_R_16F : CUDA_R_16BF;
        st = cublasGemmEx(b->h, CUBLAS_OP_T, CUBLAS_OP_N, mi, ni, ki, &alpha, w, t, ki, x, t, ki, &beta, y, CUDA_R_32F,
                          mi, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        break;
    }
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        *why = cublasGetStatusString(st);
        return false;
    }
    return true;
}

static __global__ void epilogue_kernel(cuda_epilogue e, int64_t ne1, float tensor_scale, const float *w_scales,
                                       int64_t groups, const float *a_scales, const float *bias, float *y,
                                       int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / ne1, o = i % ne1;
        float v = y[i];
        switch (e) {
        case CUDA_EPI_SCALE: v = v * tensor_scale; break;
        case CUDA_EPI_INT8_ROW: v = (w_scales[groups ? o : 0] * v) * a_scales[t]; break;
        case CUDA_EPI_FP8_ROW: v = v * (w_scales[groups ? o : 0] * a_scales[t]); break;
        case CUDA_EPI_ACT: v = v * a_scales[t]; break;
        }
        if (bias) v += bias[o];
        y[i] = v;
    }
}

void cuda_epilogue_run(cuda_epilogue e, const cuda_weight *w, const float *a_scales, const float *bias, float *y,
                       int64_t n_tokens) {
    const int64_t n = n_tokens * w->ne1;
    epilogue_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS>>>(e, w->ne1, w->tensor_scale, w->scales, w->groups,
                                                                    a_scales, bias, y, n);
}
