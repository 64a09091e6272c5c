/* graph.h - the forward pass of a Llama-family model over a backend (ops.h).
 *
 * A context holds everything one sequence needs: the KV cache for n_ctx
 * positions, the activation buffers for n_batch tokens and the rope table,
 * all allocated once in hfq_context_new. hfq_forward appends tokens to the
 * sequence (positions n_past, n_past+1, ...), splitting them into batches of
 * at most n_batch, and returns logits as F32.
 */
#ifndef HFQ_KERNELS_GRAPH_H
#define HFQ_KERNELS_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "kernels/model.h"
#include "kernels/ops.h"

typedef struct hfq_context hfq_context;

/* Called at the input of every linear layer, before it is multiplied:
 * weight_name is the GGUF name of the weight ("blk.3.attn_q.weight",
 * "output.weight", or "token_embd.weight" when the output is tied), x the
 * activation rows [n_tokens][n_in] (host memory, valid during the call only).
 * q, k and v share one input and are reported once each. The output layer
 * sees only the rows whose logits are computed. */
typedef void (*hfq_observer_fn)(void *user, const char *weight_name, const float *x, int64_t n_tokens,
                                int64_t n_in);

/* Called at the input of each expert's projections of a mixture of experts
 * (which the plain observer does not see): weight_name the stacked tensor
 * ("blk.3.ffn_up_exps.weight"), x the n_tokens rows routed to expert
 * `expert` of n_expert in this batch (never 0 rows), [n_tokens][n_in]; gate
 * and up share their input and are reported once each. With all_tokens
 * (hfq_context_set_expert_observer), every expert computes and reports every
 * token of the batch, while the output still adds the routed ones only, with
 * their router weights: the logits are those of the ordinary forward pass. */
typedef void (*hfq_expert_observer_fn)(void *user, const char *weight_name, int64_t expert, int64_t n_expert,
                                       const float *x, int64_t n_tokens, int64_t n_in);

/* Called in every layer with its k (after rope: as the cache stores it) and
 * v, before they are stored: [n_tokens][n_head_kv * head_dim] each, host
 * memory valid during the call (calibration's KV-cache maxima). */
typedef void (*hfq_kv_observer_fn)(void *user, int64_t layer, const float *k, const float *v, int64_t n_tokens,
                                   int64_t n_head_kv, int64_t head_dim);

typedef struct hfq_context_params {
    int64_t n_ctx;          /* positions; <= 0: the model's context_length */
    int64_t n_batch;        /* tokens per batch; <= 0: min(n_ctx, 512) */
    /* most logits rows one batch gives (of hfq_forward's n_logits), the rows
     * the context keeps for them; <= 0: n_batch */
    int64_t n_outputs;
    int n_threads;          /* <= 0: all available */
    hfq_act_quant act_quant;/* W8A8/W4A4 activations (ops.h); 0: what the file says */
    /* KV cache formats (kv_type.h), K and V independently; HFQ_KV_DEFAULT:
     * the backend's default (the CPU's F16, llama.cpp's default) */
    hfq_kv_type kv_k, kv_v;
    /* FP8 caches: static per-layer scales (quant/kv_scales.h, the stored
     * E4M3 meaning, [n_layer] each), or NULL: the model file's
     * hfq.kv_cache.k_scale / v_scale when it has them; kv_dynamic: a
     * dynamic scale per token and head even so */
    const float *k_scales, *v_scales;
    bool kv_dynamic;
    const hfq_ops *ops;     /* NULL: the CPU backend */
} hfq_context_params;

hfq_context *hfq_context_new(const hfq_model *m, const hfq_context_params *p, hfq_error *err);
void hfq_context_free(hfq_context *c);

/* What hfq_context_new would allocate for the same parameters, in bytes,
 * allocating nothing (the weights are the model's, not the context's). */
typedef struct hfq_context_memory {
    hfq_kv_type kv_k, kv_v;  /* the KV formats, defaults resolved */
    int64_t n_ctx;           /* positions, default resolved */
    int64_t kv_cache;        /* K and V of every layer for n_ctx positions */
    int64_t buffers;         /* activations of n_batch tokens, the rope table, the backend's scratch */
} hfq_context_memory;

/* Fails as hfq_context_new would on the parameters, or when the backend
 * gives no figures (ops.h scratch_bytes). */
int hfq_context_plan(const hfq_model *m, const hfq_context_params *p, hfq_context_memory *out, hfq_error *err);

int64_t hfq_context_n_ctx(const hfq_context *c);
int64_t hfq_context_n_batch(const hfq_context *c);
int64_t hfq_context_n_past(const hfq_context *c);   /* tokens in the KV cache */
/* The KV cache formats in use (HFQ_KV_DEFAULT resolved). */
hfq_kv_type hfq_context_kv_k(const hfq_context *c);
hfq_kv_type hfq_context_kv_v(const hfq_context *c);
/* Whether the context's FP8 cache(s) use static scales (hfq_context_params). */
bool hfq_context_kv_static(const hfq_context *c);
/* Forgets the sequence: the next token goes to position 0. */
void hfq_context_reset(hfq_context *c);
/* fn NULL: no observer. */
void hfq_context_set_observer(hfq_context *c, hfq_observer_fn fn, void *user);
void hfq_context_set_expert_observer(hfq_context *c, hfq_expert_observer_fn fn, void *user, bool all_tokens);
void hfq_context_set_kv_observer(hfq_context *c, hfq_kv_observer_fn fn, void *user);

/* Runs tokens[0..n_tokens) at positions n_past.., then n_past += n_tokens,
 * and writes the logits of the last n_logits tokens (0..n_tokens: 0 only
 * fills the KV cache, 1 the next-token logits, n_tokens all) to logits,
 * [n_logits][n_vocab]. Fails, changing nothing, when a token id is out of
 * range, the tokens do not fit in the context or n_logits is out of range
 * (more than n_tokens, or more in one batch than the context's n_outputs). */
int hfq_forward(hfq_context *c, const int32_t *tokens, int64_t n_tokens, int64_t n_logits, float *logits,
                hfq_error *err);

#endif
