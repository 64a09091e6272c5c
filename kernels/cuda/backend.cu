/* backend.cu - the CUDA backend's ops table (cuda.h): device memory, the
 * weight upload and the dispatch of every operation to its kernels.
 *
 * Everything runs on the legacy default stream, in order; cudaMemcpy calls
 * (uploads, downloads) wait for the work before them. The first failure is
 * kept (a one-line message naming the model's file) and every later
 * operation is skipped until sync reports it. With HFQ_CUDA_SYNC set in the
 * environment every operation waits for its kernels, so a failure names the
 * operation that caused it (for debugging; slow). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/internal.cuh"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/module.h"

struct hfq_backend {
    const char *path;
    cuda_layout layout;
    char *arena;             /* every weight, as the layout places them */
    void *act;               /* quantized activation rows */
    float *act_scales;       /* I8 activations: [max_tokens] */
    uint16_t *half;          /* F16/BF16 activation rows of a GEMM */
    uint16_t *wscratch;      /* BF16 weights of a GEMM */
    int32_t *tokens;         /* [max_tokens] ids for embed */
    int32_t *moe_rows;       /* mixtures of experts: [max_tokens] rows of gather_rows / add_rows_scaled */
    float *moe_weights;      /* [max_tokens] weights of add_rows_scaled */
    struct cuda_blas *blas;  /* batches above CUDA_MATVEC_MAX_TOKENS only */
    int64_t max_tokens;
    bool sync_each;          /* HFQ_CUDA_SYNC: wait after every operation */
    bool failed;
    hfq_error err;
};

static void record(hfq_backend *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record(hfq_backend *b, const char *fmt, ...) {
    if (b->failed) return;
    b->failed = true;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hfq_fail(&b->err, b->path, "cuda: %s", msg);
}

/* False (and the failure recorded) when a call or launch went wrong. */
static bool ok(hfq_backend *b, cudaError_t e, const char *what) {
    if (e == cudaSuccess && b->sync_each) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e == cudaSuccess) return true;
    record(b, "%s: %s", what, cudaGetErrorString(e));
    return false;
}

void hfq_cuda_module_probe(hfq_cuda_probe *p) {
    memset(p, 0, sizeof *p);
    p->built = true;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(p->reason, sizeof p->reason, "%s", cudaGetErrorString(e));
        cudaGetLastError();   /* not sticky: leave no error behind */
        return;
    }
    if (n == 0) {
        snprintf(p->reason, sizeof p->reason, "no device is visible");
        return;
    }
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        snprintf(p->reason, sizeof p->reason, "device 0 does not answer");
        cudaGetLastError();
        return;
    }
    p->n_devices = n;
    snprintf(p->name, sizeof p->name, "%s", prop.name);
    p->cc_major = prop.major;
    p->cc_minor = prop.minor;
    p->total_bytes = prop.totalGlobalMem;
}

static void cuda_destroy(hfq_backend *b) {
    if (!b) return;
    void *bufs[] = {b->arena, b->act, b->act_scales, b->half, b->wscratch, b->tokens, b->moe_rows, b->moe_weights};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    cuda_blas_free(b->blas);
    cuda_layout_free(&b->layout);
    free(b);
}

/* cudaMalloc of n bytes (none when n is 0). */
static bool device_alloc(hfq_backend *b, void **p, size_t n, const char *what) {
    if (!n) return true;
    const cudaError_t e = cudaMalloc(p, n);
    if (e == cudaSuccess) return true;
    *p = NULL;
    cudaGetLastError();
    record(b, "out of device memory for %s (%zu bytes)", what, n);
    return false;
}

static bool upload_weights(hfq_backend *b) {
    if (!device_alloc(b, (void **)&b->arena, b->layout.arena_bytes, "the weights")) return false;
    for (size_t i = 0; i < b->layout.n_slots; i++) {
        const cuda_slot *s = &b->layout.slots[i];
        if (!ok(b, cudaMemcpy(b->arena + s->offset, s->t.data, s->bytes, cudaMemcpyHostToDevice), s->t.name) ||
            (s->scales_bytes && !ok(b, cudaMemcpy(b->arena + s->scales_offset, s->t.scale, s->scales_bytes,
                                                  cudaMemcpyHostToDevice), s->t.name)))
            return false;
    }
    return true;
}

static hfq_backend *cuda_create(const hfq_model *m, const hfq_backend_params *p, hfq_error *err) {
    const char *path = hfq_model_path(m);
    const hfq_hparams *hp = hfq_model_hparams(m);
    if (hp->head_dim > CUDA_MAX_HEAD_DIM) {
        hfq_fail(err, path, "heads of %lld values are beyond the cuda backend's %d", (long long)hp->head_dim,
                 CUDA_MAX_HEAD_DIM);
        return NULL;
    }
    if (cuda_act_quant_check(m, p->act_quant, err)) return NULL;
    hfq_cuda_probe probe;
    hfq_cuda_module_probe(&probe);
    if (probe.n_devices == 0) {
        hfq_fail(err, path, "no CUDA device (%s)", probe.reason);
        return NULL;
    }
    hfq_backend *b = (hfq_backend *)calloc(1, sizeof *b);
    if (!b) {
        hfq_fail(err, path, "out of memory");
        return NULL;
    }
    b->path = path;
    b->sync_each = getenv("HFQ_CUDA_SYNC") != NULL;
    b->max_tokens = p->max_tokens > 0 ? p->max_tokens : 1;
    cuda_caps caps;
    caps.fp8_gemm = probe.cc_major * 10 + probe.cc_minor >= 89;
    if (cuda_layout_build(m, &caps, b->max_tokens, &b->layout, err)) {
        cuda_destroy(b);
        return NULL;
    }
    const cuda_layout *l = &b->layout;
    const size_t n_tok = (size_t)b->max_tokens;
    if (ok(b, cudaSetDevice(0), "cudaSetDevice") && upload_weights(b) &&
        device_alloc(b, &b->act, l->act_bytes, "activations") &&
        device_alloc(b, (void **)&b->act_scales, n_tok * sizeof(float), "activation scales") &&
        device_alloc(b, (void **)&b->half, l->half_bytes, "16-bit activations") &&
        device_alloc(b, (void **)&b->wscratch, l->wscratch_bytes, "decoded weights") &&
        device_alloc(b, (void **)&b->tokens, n_tok * sizeof(int32_t), "token ids") &&
        device_alloc(b, (void **)&b->moe_rows, hp->n_expert ? n_tok * sizeof(int32_t) : 0, "expert rows") &&
        device_alloc(b, (void **)&b->moe_weights, hp->n_expert ? n_tok * sizeof(float) : 0, "expert weights") &&
        ok(b, cudaDeviceSynchronize(), "upload")) {
        const char *why = NULL;
        if (b->max_tokens <= CUDA_MATVEC_MAX_TOKENS || (b->blas = cuda_blas_new(l->any_fp8_gemm, &why))) return b;
        record(b, "%s", why);
    }
    *err = b->err;
    cuda_destroy(b);
    return NULL;
}

static float *cuda_alloc(hfq_backend *b, size_t n) {
    (void)b;
    void *p = NULL;
    const size_t bytes = (n ? n : 1) * sizeof(float);
    if (cudaMalloc(&p, bytes) != cudaSuccess || cudaMemset(p, 0, bytes) != cudaSuccess) {
        cudaGetLastError();   /* the graph reports out of memory */
        if (p) cudaFree(p);
        return NULL;
    }
    return (float *)p;
}

static void cuda_release(hfq_backend *b, float *buf) {
    (void)b;
    cudaFree(buf);
}

static void cuda_upload(hfq_backend *b, float *buf, const float *host, size_t n) {
    if (!b->failed) ok(b, cudaMemcpy(buf, host, n * sizeof *buf, cudaMemcpyHostToDevice), "upload");
}

static void cuda_download(hfq_backend *b, float *host, const float *buf, size_t n) {
    if (!b->failed) ok(b, cudaMemcpy(host, buf, n * sizeof *buf, cudaMemcpyDeviceToHost), "download");
}

/* The device copy of tensor t, or NULL (failure recorded). */
static const cuda_slot *slot_of(hfq_backend *b, const hfq_tensor *t) {
    const cuda_slot *s = cuda_layout_find(&b->layout, t);
    if (!s) record(b, "tensor '%s' is not on the device", t->name);
    return s;
}

static const float *vector_of(hfq_backend *b, const hfq_tensor *t) {
    const cuda_slot *s = slot_of(b, t);
    return s ? (const float *)(b->arena + s->offset) : NULL;
}

/* The device view of matrix t: a slot's, or rows of one (an expert of a
 * stacked tensor, with its rows' scales). */
static bool weight_of(hfq_backend *b, const hfq_tensor *t, cuda_weight *w) {
    int64_t row0;
    const cuda_slot *s = cuda_layout_find_rows(&b->layout, t, &row0);
    if (!s) {
        record(b, "tensor '%s' is not on the device", t->name);
        return false;
    }
    if (!s->matrix) {
        record(b, "tensor '%s' is not a matrix", t->name);
        return false;
    }
    const int64_t scale_row0 = s->t.scale_groups ? row0 * s->t.scale_groups : 0;
    *w = cuda_weight{b->arena + s->offset + (size_t)row0 * s->t.row_bytes,
                     s->scales_bytes ? (const float *)(b->arena + s->scales_offset) + scale_row0 : NULL,
                     t->ne0,
                     t->ne1,
                     t->row_bytes,
                     t->qext ? t->scale_groups : 0,
                     !t->qext && t->scale ? t->scale[0] : 1.0f,
                     t->qext && t->input_scale ? t->input_scale[0] : 0.0f,
                     s->plan};
    return true;
}

static bool is_float(cuda_wfmt f) { return f == CUDA_WF_F32 || f == CUDA_WF_F16 || f == CUDA_WF_BF16; }
static bool is_i8(cuda_wfmt f) { return f == CUDA_WF_INT8 || f == CUDA_WF_FP8_E4M3 || f == CUDA_WF_FP8_E5M2; }

static void cuda_embed(hfq_backend *b, float *x, const hfq_tensor *tok_embd, const int32_t *tokens,
                       int64_t n_tokens) {
    cuda_weight w;
    if (b->failed || !weight_of(b, tok_embd, &w) ||
        !ok(b, cudaMemcpy(b->tokens, tokens, (size_t)n_tokens * sizeof *tokens, cudaMemcpyHostToDevice), "token ids"))
        return;
    if (is_float(w.plan.fmt)) cuda_float_decode_rows(&w, b->tokens, n_tokens, w.tensor_scale, x);
    else if (is_i8(w.plan.fmt)) cuda_i8_decode_rows(&w, b->tokens, n_tokens, false, x, false);
    else cuda_ggml_decode_rows(&w, b->tokens, n_tokens, w.tensor_scale, x, false);
    ok(b, cudaSuccess, "embed");
}

static void cuda_rmsnorm_op(hfq_backend *b, float *y, const float *x, const hfq_tensor *w, int64_t n_tokens,
                            float eps) {
    const float *wd;
    if (b->failed || !(wd = vector_of(b, w))) return;
    cuda_rmsnorm(y, x, wd, w->ne0, n_tokens, eps);
    ok(b, cudaSuccess, "rmsnorm");
}

/* Quantizes the activations for w into b->act (and b->act_scales). */
static void quantize_act(hfq_backend *b, const cuda_weight *w, const float *x, int64_t n_tokens) {
    if (is_i8(w->plan.fmt)) cuda_i8_quantize_act(w, x, (int8_t *)b->act, b->act_scales, n_tokens);
    else cuda_ggml_quantize_act(&w->plan, x, b->act, w->ne0, n_tokens);
}

static void gemm(hfq_backend *b, cuda_gemm_type type, const cuda_weight *w, const void *x, float *y,
                 int64_t n_tokens) {
    const char *why = NULL;
    if (!cuda_blas_gemm(b->blas, type, w->data, x, y, w->ne1, n_tokens, w->ne0, &why)) record(b, "cuBLAS: %s", why);
}

/* Weights decoded to BF16, activations already quantized in b->act decoded
 * to BF16, one BF16 GEMM, then the scales. */
static void gemm_dequant(hfq_backend *b, const cuda_weight *w, const float *bias, float *y, int64_t n_tokens) {
    const bool i8 = is_i8(w->plan.fmt);
    if (i8) {
        cuda_i8_decode_act(&w->plan, (const int8_t *)b->act, b->half, n_tokens * w->ne0);
        cuda_i8_decode_rows(w, NULL, w->ne1, w->plan.raw_codes, b->wscratch, true);
    } else {
        cuda_ggml_decode_act(&w->plan, b->act, b->half, w->ne0, n_tokens);
        cuda_ggml_decode_rows(w, NULL, w->ne1, 1.0f, b->wscratch, true);
    }
    cuda_weight scratch = *w;
    scratch.data = (const char *)b->wscratch;
    gemm(b, CUDA_GT_BF16, &scratch, b->half, y, n_tokens);
    cuda_epilogue e = CUDA_EPI_SCALE;
    if (i8) e = !w->plan.raw_codes ? CUDA_EPI_ACT : w->plan.fmt == CUDA_WF_INT8 ? CUDA_EPI_INT8_ROW : CUDA_EPI_FP8_ROW;
    cuda_epilogue_run(e, w, b->act_scales, bias, y, n_tokens);
}

static void gemm_batch(hfq_backend *b, const cuda_weight *w, const float *bias, const float *x, float *y,
                       int64_t n_tokens) {
    switch (w->plan.gemm) {
    case CUDA_GEMM_F32:
        gemm(b, CUDA_GT_F32, w, x, y, n_tokens);
        break;
    case CUDA_GEMM_F16:
    case CUDA_GEMM_BF16:
        cuda_float_round(w->plan.act, x, b->half, n_tokens * w->ne0);
        gemm(b, w->plan.gemm == CUDA_GEMM_F16 ? CUDA_GT_F16 : CUDA_GT_BF16, w, b->half, y, n_tokens);
        break;
    case CUDA_GEMM_FP8: {
        quantize_act(b, w, x, n_tokens);
        const char *why = NULL;
        if (cuda_blas_gemm(b->blas, CUDA_GT_FP8_E4M3, w->data, b->act, y, w->ne1, n_tokens, w->ne0, &why)) {
            cuda_epilogue_run(CUDA_EPI_FP8_ROW, w, b->act_scales, bias, y, n_tokens);
            return;
        }
        gemm_dequant(b, w, bias, y, n_tokens);   /* no FP8 algorithm for this shape */
        return;
    }
    case CUDA_GEMM_DEQUANT:
        quantize_act(b, w, x, n_tokens);
        gemm_dequant(b, w, bias, y, n_tokens);
        return;
    }
    if (bias || w->tensor_scale != 1.0f) cuda_epilogue_run(CUDA_EPI_SCALE, w, NULL, bias, y, n_tokens);
}

static void cuda_matmul_op(hfq_backend *b, float *y, const hfq_tensor *t, const hfq_tensor *bias_t, const float *x,
                           int64_t n_tokens) {
    cuda_weight w;
    const float *bias = NULL;
    if (b->failed || !weight_of(b, t, &w) || (bias_t && !(bias = vector_of(b, bias_t)))) return;
    if (n_tokens > CUDA_MATVEC_MAX_TOKENS) gemm_batch(b, &w, bias, x, y, n_tokens);
    else if (is_float(w.plan.fmt)) cuda_float_matvec(&w, x, bias, y, n_tokens);
    else if (is_i8(w.plan.fmt)) {
        quantize_act(b, &w, x, n_tokens);
        cuda_i8_matvec(&w, (const int8_t *)b->act, b->act_scales, bias, y, n_tokens);
    } else {
        quantize_act(b, &w, x, n_tokens);
        cuda_ggml_matvec(&w, b->act, bias, y, n_tokens);
    }
    ok(b, cudaSuccess, t->name);
}

static void cuda_rope_op(hfq_backend *b, float *x, int64_t n_tokens, int64_t n_heads, int64_t pos0,
                         const hfq_rope *r) {
    if (b->failed) return;
    cuda_rope(x, n_tokens, n_heads, pos0, (int)r->n_rot, r->head_dim, r->mode == HFQ_ROPE_NEOX, r->cos_sin);
    ok(b, cudaSuccess, "rope");
}

static void cuda_attention_op(hfq_backend *b, float *out, const float *q, const float *k, const float *v,
                              float *k_cache, float *v_cache, int64_t pos0, int64_t n_tokens, const hfq_attn *a) {
    if (b->failed) return;
    cuda_attention(out, q, k, v, k_cache, v_cache, pos0, n_tokens, a->n_head, a->n_head_kv, a->head_dim, a->scale,
                   a->n_swa, a->softcap);
    ok(b, cudaSuccess, "attention");
}

static void cuda_swiglu_op(hfq_backend *b, float *gate, const float *up, size_t n) {
    if (b->failed) return;
    cuda_swiglu(gate, up, (int64_t)n);
    ok(b, cudaSuccess, "swiglu");
}

static void cuda_geglu_op(hfq_backend *b, float *gate, const float *up, size_t n) {
    if (b->failed) return;
    cuda_geglu(gate, up, (int64_t)n);
    ok(b, cudaSuccess, "geglu");
}

static void cuda_scale_op(hfq_backend *b, float *x, float s, size_t n) {
    if (b->failed) return;
    cuda_scale(x, s, (int64_t)n);
    ok(b, cudaSuccess, "scale");
}

static void cuda_add_op(hfq_backend *b, float *x, const float *y, size_t n) {
    if (b->failed) return;
    cuda_add(x, y, (int64_t)n);
    ok(b, cudaSuccess, "add");
}

/* Uploads n_rows row indices (and weights) for the next row move. */
static bool upload_rows(hfq_backend *b, const int32_t *rows, const float *w, int64_t n_rows) {
    if (n_rows > b->max_tokens) {
        record(b, "%lld expert rows exceed the batch of %lld", (long long)n_rows, (long long)b->max_tokens);
        return false;
    }
    return ok(b, cudaMemcpy(b->moe_rows, rows, (size_t)n_rows * sizeof *rows, cudaMemcpyHostToDevice), "expert rows") &&
           (!w || ok(b, cudaMemcpy(b->moe_weights, w, (size_t)n_rows * sizeof *w, cudaMemcpyHostToDevice),
                     "expert weights"));
}

static void cuda_gather_rows_op(hfq_backend *b, float *y, const float *x, const int32_t *rows, int64_t n_rows,
                                int64_t width) {
    if (b->failed || !upload_rows(b, rows, NULL, n_rows)) return;
    cuda_gather_rows(y, x, b->moe_rows, n_rows, width);
    ok(b, cudaSuccess, "gather_rows");
}

static void cuda_add_rows_scaled_op(hfq_backend *b, float *x, const float *y, const int32_t *rows, const float *w,
                                    int64_t n_rows, int64_t width) {
    if (b->failed || !upload_rows(b, rows, w, n_rows)) return;
    cuda_add_rows_scaled(x, y, b->moe_rows, b->moe_weights, n_rows, width);
    ok(b, cudaSuccess, "add_rows_scaled");
}

static int cuda_sync(hfq_backend *b, hfq_error *err) {
    if (!b->failed) ok(b, cudaDeviceSynchronize(), "device");
    if (!b->failed) return 0;
    *err = b->err;
    return -1;
}

/* In ops.h's field order. */
static const hfq_ops cuda_ops = {
    "cuda", false, cuda_create, cuda_destroy, cuda_alloc, cuda_release, cuda_upload, cuda_download, cuda_embed,
    cuda_rmsnorm_op, cuda_matmul_op, cuda_rope_op, cuda_attention_op, cuda_swiglu_op, cuda_add_op, cuda_sync,
    1u << HFQ_KV_F32, HFQ_KV_F32,   /* an F32 cache only: the graph refuses the other KV types */
    NULL,                           /* no memory plan: device memory is cudaMalloc's */
    cuda_geglu_op, cuda_scale_op,
    cuda_gather_rows_op, cuda_add_rows_scaled_op,
};

const hfq_ops *hfq_cuda_module_ops(void) { return &cuda_ops; }

int hfq_cuda_module_abi(size_t *ops_size, size_t *probe_size) {
    *ops_size = sizeof(hfq_ops);
    *probe_size = sizeof(hfq_cuda_probe);
    return HFQ_CUDA_MODULE_ABI;
}
