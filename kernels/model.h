/* model.h - a model of one of the runner's families (kernels/arch.h: llama,
 * qwen2, qwen3, qwen3moe, phi3, gemma, gemma2, gemma3; llama with experts for
 * Mixtral) bound to its weights.
 *
 * The weights are never copied: every hfq_tensor points into the GGUF file's
 * read-only mapping (or, for tests, into memory the caller owns). Binding
 * checks everything the forward pass relies on: hyper-parameters in range,
 * every tensor present with the exact shape, matrices of a known ggml type,
 * norms, biases and rope factors in F32. Failures are one line naming the
 * file and the tensor or key.
 *
 * Whether a backend can compute with a given weight type is checked when a
 * context is created (graph.h), not here.
 */
#ifndef HFQ_KERNELS_MODEL_H
#define HFQ_KERNELS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "kernels/arch.h"

/* Encodings of I8 weight codes (hfq.qext.<name> keys, docs/format-quant-ext.md). */
typedef enum hfq_qext {
    HFQ_QEXT_NONE = 0,      /* a ggml type */
    HFQ_QEXT_INT8,
    HFQ_QEXT_FP8_E4M3,
    HFQ_QEXT_FP8_E5M2,
} hfq_qext;

/* One weight as stored: a matrix of ne1 rows of ne0 elements (vectors have
 * ne1 = 1), rows row_bytes apart, in ggml type `type`. */
typedef struct hfq_tensor {
    const char *name;
    uint32_t type;          /* enum ggml_type_id */
    int64_t ne0, ne1;
    size_t row_bytes;
    const void *data;       /* host memory: the file mapping */
    /* Matrices only. "<base>.scale" (F32): NULL when absent; scale_groups 0:
     * one value for the whole tensor (the product's factor, e.g. NVFP4's
     * global scale, as llama.cpp applies it); otherwise [ne1][scale_groups],
     * each row's scales for scale_groups equal groups of values (I8 codes). */
    const float *scale;
    int64_t scale_groups;
    /* > 0: a stacked expert tensor's scale holds one value per expert
     * ([n_expert], NVFP4's per-expert global scales as llama.cpp loads them),
     * each expert's product factor (hfq_expert_slice picks it); 0: not so. */
    int64_t scale_experts;
    hfq_qext qext;          /* I8 tensors: how the codes encode values */
    /* "<base>.input_scale" (F32 [1], > 0), read for I8 and NVFP4 weights: the
     * static scale of their activation quantization (I8: the activation
     * codes' scale; NVFP4: the activation blocks' global scale); NULL: absent. */
    const float *input_scale;
    /* hfq.act_quant.<name> = "none" (I8, NVFP4, MXFP4): the checkpoint computes
     * this weight with float activations (weight-only W8A16, NVFP4A16,
     * MXFP4A16), which act_quant AUTO keeps. */
    bool act_none;
    /* hfq.act_quant.<name> = "mxfp4" (MXFP4 weights): the checkpoint quantizes
     * the activations per 32 to MXFP4 dynamically (compressed-tensors' MXFP4,
     * W4A4), which act_quant AUTO and DYNAMIC emulate. */
    bool act_mxfp4;
    /* hfq.act_quant.<name> = "fp8_e4m3_g<G>" (F32 / F16 / BF16 weights): the
     * checkpoint quantizes the activations dynamically to FP8 E4M3 per run of
     * G values of each token (compressed-tensors' FP8_BLOCK), which act_quant
     * AUTO and DYNAMIC emulate; 0: not so. */
    int64_t act_fp8_group;
    /* hfq.act_quant.<name> = "int8_ct" (INT8 I8 weights): dynamic per-token
     * INT8 activations by compressed-tensors' rule (hfq_quantize_int8_ct)
     * in place of amax / 127, under act_quant AUTO and DYNAMIC. */
    bool act_int8_ct;
    /* hfq.act_quant.<name> = "nvfp4_search" (NVFP4 weights): when its
     * activations are quantized to NVFP4 (W4A4), each 16 values' scale code
     * is hfq_nvfp4_act_search_code's (quant/fp4.h) instead of max -> 6. */
    bool act_nvfp4_search;
    /* A range of rows of a fused matrix (phi3's attn_qkv, ffn_up) other than
     * its first: `name` is the fused matrix's, whose input the observer
     * already saw with the first range. */
    bool view_tail;
    /* hfq.block_rotate.<name> = "hadamard:<N>:<seed>" (2-D weights): the rows
     * are stored times Q (quant/hadamard.h), so the graph multiplies the input
     * rows by Q first; 0: not rotated. */
    int64_t rot_block;
    uint64_t rot_seed;
} hfq_tensor;

typedef struct hfq_hparams {
    hfq_arch arch;          /* the family (kernels/arch.h): which tensors binding requires */
    int64_t n_vocab;        /* rows of token_embd.weight */
    int64_t n_embd;
    int64_t n_ff;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;      /* divides n_head (GQA) */
    int64_t head_dim;       /* attention.key_length, default n_embd / n_head */
    int64_t n_rot;          /* rope.dimension_count, even, <= head_dim */
    int64_t n_ctx_train;    /* context_length */
    float rms_eps;
    float rope_freq_base;
    float rope_freq_scale; /* 1 / linear scaling factor; 1 when unscaled */
    /* YaRN (rope.scaling.type "yarn"), as transformers computes it: pair i's
     * frequency blends the interpolated (freq_scale) and the original one
     * by a ramp between the pairs that turn beta_fast and beta_slow times in
     * yarn_orig_ctx positions; cos and sin are multiplied by yarn_mscale.
     * yarn_orig_ctx 0: no YaRN. */
    int64_t yarn_orig_ctx;
    float yarn_beta_fast, yarn_beta_slow, yarn_mscale;
    /* rope.scaling.attn_factor: cos and sin are multiplied by it (longrope's
     * magnitude; 0 is read as 1, for models bound from memory) */
    float rope_attn_factor;
    /* rope.scaling.original_context_length (0: context_length): a context
     * longer than this takes longrope's long factors, else its short ones */
    int64_t rope_orig_ctx;
    hfq_rope_mode rope_mode;  /* loading takes the family's */
    /* Sliding-window attention (llama.cpp's LLAMA_SWA_TYPE_STANDARD): on a
     * sliding layer the token at position i sees positions j with
     * i - j < n_swa; 0: no window. Which layers slide: swa_pattern as
     * llama.cpp's set_swa_pattern (hfq_layer_slides). Any family may set it. */
    int64_t n_swa;
    int64_t swa_pattern;
    /* The rope of the sliding layers: base and 1 / linear factor (Gemma 3's
     * local base, unscaled); used only when n_swa > 0. */
    float rope_freq_base_swa, rope_freq_scale_swa;
    /* tanh soft-capping, cap * tanh(x / cap), of the attention scores (after
     * the scale) and of the logits; 0: none. */
    float attn_softcap, final_softcap;
    float attn_scale;         /* on q.k; 0: 1/sqrt(head_dim) */
    /* Mixture of experts (expert_count > 0): each layer's feed-forward is
     * n_expert_used of n_expert SwiGLU experts of width n_ff_exp, chosen per
     * token by the router (kernels/moe_route.h); expert_weights_norm: the
     * chosen weights are renormalised to sum to 1. n_expert 0: dense. */
    int64_t n_expert, n_expert_used, n_ff_exp;
    bool expert_weights_norm;
} hfq_hparams;

/* Whether layer il attends through the sliding window. */
bool hfq_layer_slides(const hfq_hparams *hp, int64_t il);

typedef struct hfq_layer {
    hfq_tensor attn_norm;                   /* [n_embd] F32 */
    hfq_tensor wq, wk, wv;                  /* [n_embd] -> [n_head*hd], [n_head_kv*hd] x2
                                               (phi3: row ranges of attn_qkv) */
    hfq_tensor bq, bk, bv;                  /* biases; data NULL when absent */
    /* RMSNorm weights over each head of q and of k, before rope (qwen3);
     * data NULL when absent */
    hfq_tensor q_norm, k_norm;              /* [head_dim] F32 */
    hfq_tensor wo;                          /* [n_head*hd] -> [n_embd] */
    /* RMSNorm of the attention output before the residual add (Gemma 2/3);
     * data NULL when absent */
    hfq_tensor attn_post_norm;              /* [n_embd] F32 */
    hfq_tensor ffn_norm;                    /* [n_embd] F32 */
    hfq_tensor w_gate, w_up;                /* [n_embd] -> [n_ff] (phi3: halves of ffn_up) */
    hfq_tensor w_down;                      /* [n_ff] -> [n_embd] */
    hfq_tensor ffn_post_norm;               /* as attn_post_norm, of the feed-forward output */
    /* Mixture of experts (data NULL in a dense layer, and in every layer of
     * a dense model): the router, and the
     * experts' projections, each 3-D tensor of the file seen as one matrix
     * of n_expert stacked experts (expert e: rows e*n .. (e+1)*n - 1, see
     * hfq_expert_slice). */
    hfq_tensor ffn_gate_inp;                /* [n_embd] -> [n_expert] */
    hfq_tensor gate_exps, up_exps;          /* [n_embd] -> [n_expert * n_ff_exp] */
    hfq_tensor down_exps;                   /* [n_ff_exp] -> [n_expert * n_embd] */
} hfq_layer;

/* Expert e of a stacked expert tensor as a matrix of its own (n_expert of
 * them): the same rows, no copy. */
hfq_tensor hfq_expert_slice(const hfq_tensor *stacked, int64_t n_expert, int64_t e);

typedef struct hfq_model hfq_model;

/* Where binding finds tensors. */
typedef struct hfq_tensor_source {
    const void *source;
    const char *where;      /* names the source in error messages (the file path) */
    /* The tensor named `name`, or NULL when the source has none. */
    const gguf_tensor_info *(*find)(const void *source, const char *name);
    /* The hfq.qext encoding of tensor `name` ("int8", "fp8_e4m3", "fp8_e5m2"),
     * or NULL when it has none; the callback may be NULL (no encodings). */
    const char *(*qext)(const void *source, const char *name);
    /* The hfq.act_quant value of tensor `name` ("none", "mxfp4"), or NULL; may be NULL. */
    const char *(*act)(const void *source, const char *name);
    /* The hfq.block_rotate value of tensor `name`, or NULL; may be NULL. */
    const char *(*rot)(const void *source, const char *name);
} hfq_tensor_source;

/* Binds a model to the tensors of a source for the given hyper-parameters
 * (n_vocab is taken from token_embd.weight). Tensors the model does not use
 * are ignored. Returns NULL with err filled on any problem. */
hfq_model *hfq_model_bind(const hfq_hparams *hp, const hfq_tensor_source *src, hfq_error *err);

/* Loads a model from a GGUF file (general.architecture one of kernels/arch.h's
 * families, llama.cpp's keys and tensor names). The file stays mapped until
 * hfq_model_free. */
hfq_model *hfq_model_load(const char *path, hfq_error *err);

void hfq_model_free(hfq_model *m);

const hfq_hparams *hfq_model_hparams(const hfq_model *m);
/* The hyper-parameters a GGUF file's keys give (what hfq_model_load binds),
 * read without binding tensors; one-line errors naming the file and key. */
int hfq_hparams_from_gguf(const gguf_file *f, hfq_hparams *hp, hfq_error *err);
const char *hfq_model_path(const hfq_model *m);
/* The GGUF file the model was loaded from (its tokenizer and metadata);
 * NULL for a bound model. */
const gguf_file *hfq_model_gguf(const hfq_model *m);

const hfq_tensor *hfq_model_tok_embd(const hfq_model *m);   /* [n_embd] x n_vocab */
const hfq_tensor *hfq_model_output(const hfq_model *m);     /* token_embd when tied */
const hfq_tensor *hfq_model_output_norm(const hfq_model *m);
const hfq_layer *hfq_model_layer(const hfq_model *m, int64_t il);
/* Per-pair rope frequency divisors ([n_rot/2] F32) for a context of n_ctx
 * positions: rope_freqs (llama3 scaling), else longrope's
 * rope_factors_long beyond the original context and rope_factors_short
 * within it, as llama.cpp picks them; NULL when the model has none. */
const float *hfq_model_rope_factors(const hfq_model *m, int64_t n_ctx);

/* Every matrix the forward pass multiplies by, for backends that check or
 * prepare weight types: calls fn once per distinct tensor; stops at and
 * returns the first non-zero value fn returns. */
int hfq_model_each_matrix(const hfq_model *m, int (*fn)(void *user, const hfq_tensor *t),
                          void *user);

/* Whether the model is tiny (at most 2^24 matrix elements): its operations
 * are too small to share among threads without the synchronization costing
 * more than it saves, so callers evaluate several sequences side by side,
 * one thread each (ppl-eval, mixed-precision measurement). */
bool hfq_model_is_tiny(const hfq_model *m);

#endif
