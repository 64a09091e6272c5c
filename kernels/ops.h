/* ops.h - the backend ops table the forward pass (graph.c) is written over.
 *
 * A backend owns its memory: the graph asks it for float buffers (alloc) and
 * only ever hands those buffers back to its ops, so a device backend can keep
 * them in device memory. Weights are hfq_tensor descriptors of the model
 * (host memory: the file mapping); a device backend uploads them in create.
 * Token ids and parameter structs are host memory.
 *
 * Every op sees rows of n_tokens tokens (n_tokens <= the backend's
 * max_tokens); a row of width n is n contiguous floats. In-place use is
 * allowed only where an op says so.
 */
#ifndef HFQ_KERNELS_OPS_H
#define HFQ_KERNELS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "kernels/kv_type.h"
#include "kernels/model.h"

typedef struct hfq_backend hfq_backend;  /* a backend's state, opaque to the graph */

/* How the weights that quantize their activations at run time do it: I8
 * codes (INT8/FP8, W8A8) and NVFP4 (W4A4). Other formats are not affected
 * (ggml's companion activation formats, quant/qtype.h vec_dot_type). */
typedef enum hfq_act_quant {
    /* what the file says: a weight with "<base>.input_scale" static, other
     * I8 weights dynamic unless hfq.act_quant.<name> = "none", other NVFP4
     * weights none; NVFP4 / MXFP4 weights marked "none": float activations;
     * MXFP4 weights marked "mxfp4": dynamic MXFP4 blocks (W4A4, as DYNAMIC);
     * float weights marked "fp8_e4m3_g<G>": FP8-rounded groups; INT8 marked
     * "int8_ct": compressed-tensors' amax / 127.5 (both as DYNAMIC); NVFP4
     * marked "nvfp4_search": whenever its activations are NVFP4 blocks, their
     * scale codes searched (quant/fp4.h hfq_nvfp4_act_search_code) */
    HFQ_ACT_QUANT_AUTO = 0,
    HFQ_ACT_QUANT_NONE,     /* I8 and FP4 marked "none": float activations; other NVFP4: Q8_0 as ggml */
    HFQ_ACT_QUANT_DYNAMIC,  /* per token: INT8 amax/127, FP8 amax/448 (E5M2 /57344), NVFP4 global amax/(6*448);
                             * MXFP4 marked "mxfp4": per 32, quant/fp4.h hfq_quantize_block_mxfp4_act */
    HFQ_ACT_QUANT_STATIC,   /* the weight's input_scale; a weight without one is refused */
} hfq_act_quant;

typedef struct hfq_backend_params {
    int n_threads;          /* CPU threads; <= 0: all available */
    hfq_act_quant act_quant;
    int64_t max_tokens;     /* most rows any op is given (the batch size) */
    int64_t n_ctx;          /* KV cache positions */
} hfq_backend_params;

/* Rotary embedding of positions pos0.. of one batch. */
typedef struct hfq_rope {
    hfq_rope_mode mode;
    int64_t n_rot;          /* rotated values of each head (even, <= head_dim) */
    int64_t head_dim;
    /* Backend buffer [n_ctx][n_rot/2][2]: cos, sin of angle(pos, pair i) =
     * pos * freq_scale * base^(-2i/n_rot) / factor_i, made once per context. */
    const float *cos_sin;
} hfq_rope;

typedef struct hfq_attn {
    int64_t n_head, n_head_kv, head_dim;
    float scale;            /* on q.k, 1/sqrt(head_dim) */
    /* The token at position i sees positions j with i - j < n_swa (a sliding
     * window); 0: all of 0..i. */
    int64_t n_swa;
    /* Scores soft-capped before the softmax: softcap * tanh(scale * q.k /
     * softcap); 0: none (scale * q.k). */
    float softcap;
    hfq_kv_type k_type, v_type;  /* the caches' formats (one the backend's kv_types has) */
    /* FP8 caches: this layer's static scale of K, V codes (encode(x / scale),
     * quant/kv_scales.h, already for the cache's format); 0: a dynamic scale
     * per token and head */
    float k_scale, v_scale;
} hfq_attn;

typedef struct hfq_ops {
    const char *name;
    bool host_visible;      /* buffers are plain host memory (no download needed to read them) */

    /* Prepares the backend for this model; fails (naming the file and tensor)
     * when a weight type is not supported. */
    hfq_backend *(*create)(const hfq_model *m, const hfq_backend_params *p, hfq_error *err);
    void (*destroy)(hfq_backend *b);

    /* n floats, zeroed; NULL when out of memory. */
    float *(*alloc)(hfq_backend *b, size_t n);
    void (*release)(hfq_backend *b, float *buf);
    void (*upload)(hfq_backend *b, float *buf, const float *host, size_t n);
    void (*download)(hfq_backend *b, float *host, const float *buf, size_t n);

    /* x[t] = row tokens[t] of tok_embd as floats.   x: [n_tokens][n_embd] */
    void (*embed)(hfq_backend *b, float *x, const hfq_tensor *tok_embd, const int32_t *tokens,
                  int64_t n_tokens);

    /* y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w.   x, y: [n_tokens][w->ne0]; y may be x.
     * n_tokens counts rows: the per-head norms pass n_tokens * n_heads rows of
     * head_dim, which may exceed max_tokens. */
    void (*rmsnorm)(hfq_backend *b, float *y, const float *x, const hfq_tensor *w, int64_t n_tokens,
                    float eps);

    /* y[t] = W x[t] * scale (+ bias), scale = *w->scale when set.
     * W: w->ne1 rows of w->ne0;  x: [n_tokens][w->ne0];
     * y: [n_tokens][w->ne1]; bias NULL or [w->ne1] F32. y must not overlap x. */
    void (*matmul)(hfq_backend *b, float *y, const hfq_tensor *w, const hfq_tensor *bias, const float *x,
                   int64_t n_tokens);

    /* Rotates, in place, each of n_heads heads of x[t] for position pos0 + t.
     * x: [n_tokens][n_heads * head_dim] */
    void (*rope)(hfq_backend *b, float *x, int64_t n_tokens, int64_t n_heads, int64_t pos0,
                 const hfq_rope *r);

    /* Stores k, v of positions pos0.. into the cache (layout up to the
     * backend; each cache a buffer of hfq_kv_cache_floats (kv_type.h) floats
     * holding n_ctx * n_head_kv rows of head_dim values in a->k_type or
     * a->v_type, read there directly, never dequantized whole), then for
     * each token t and head h: out = softmax(scale * q.K^T over cache
     * positions 0..pos0+t, or the last n_swa of them) V (softcap: the
     * scores capped first), with K, V of kv head h / (n_head / n_head_kv).
     * q, out: [n_tokens][n_head * head_dim];  k, v: [n_tokens][n_head_kv * head_dim] */
    void (*attention)(hfq_backend *b, float *out, const float *q, const float *k, const float *v,
                      float *k_cache, float *v_cache, int64_t pos0, int64_t n_tokens, const hfq_attn *a);

    /* gate = silu(gate) * up, elementwise over n values. */
    void (*swiglu)(hfq_backend *b, float *gate, const float *up, size_t n);

    /* x += y, elementwise over n values; y must not overlap x. */
    void (*add)(hfq_backend *b, float *x, const float *y, size_t n);

    /* Optional (NULL: operations cannot fail). Waits for the work queued so
     * far; -1 with err (one line) when any operation since the backend was
     * created failed (a device backend's operations run asynchronously). */
    int (*sync)(hfq_backend *b, hfq_error *err);

    uint32_t kv_types;      /* the KV cache formats attention takes: bit 1u << hfq_kv_type */
    hfq_kv_type kv_default; /* the one HFQ_KV_DEFAULT means */

    /* Optional (NULL: no memory plan). Bytes create would allocate for its
     * own scratch (beyond the buffers the graph asks for) with these
     * parameters; -1 with err when create would fail. */
    int64_t (*scratch_bytes)(const hfq_model *m, const hfq_backend_params *p, hfq_error *err);

    /* Optional (NULL: the backend lacks it; a model that needs it is refused
     * when a context is created). gate = gelu_tanh(gate) * up over n values,
     * gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
    void (*geglu)(hfq_backend *b, float *gate, const float *up, size_t n);
    /* Optional, as geglu. x *= s over n values. */
    void (*scale)(hfq_backend *b, float *x, float s, size_t n);
    /* Optional, as geglu: mixtures of experts. rows: host memory, n_rows
     * distinct row indices.
     * gather_rows: y[i] = x[rows[i]];  x: [*][width], y: [n_rows][width].
     * add_rows_scaled: x[rows[i]] += w[i] * y[i] (the product rounded to
     * float first);  w: host [n_rows]. */
    void (*gather_rows)(hfq_backend *b, float *y, const float *x, const int32_t *rows, int64_t n_rows,
                        int64_t width);
    void (*add_rows_scaled)(hfq_backend *b, float *x, const float *y, const int32_t *rows, const float *w,
                            int64_t n_rows, int64_t width);
} hfq_ops;

#endif
