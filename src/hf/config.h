/* config.h - the hyperparameters of a Hugging Face checkpoint (config.json).
 *
 * Reads the fields the supported decoder-only families use, with the same
 * fallbacks llama.cpp's converter applies (num_key_value_heads defaults to
 * num_attention_heads; head_dim to hidden_size / num_attention_heads). Values
 * are range-checked: a hostile config cannot make later size arithmetic
 * overflow.
 *
 * Both layouts transformers writes are read:
 *   transformers 4: top-level `rope_theta`, `rope_scaling` {type|rope_type, ...};
 *   transformers 5: `rope_parameters` {rope_type, rope_theta, ...}, or one such
 *     object per layer type ({"full_attention": {...}, "sliding_attention": {...}}).
 * A multimodal wrapper's `text_config` is read as the text model's fields
 * (they win over top-level ones, as llama.cpp's converter merges them).
 *
 * A key that changes the model's math and that no supported family computes
 * is refused with a one-line error naming it and its value, never ignored
 * (multipliers, activations other than SiLU and tanh GELU, MLP biases,
 * bidirectional attention, unknown rope types and rope keys, ...). What
 * depends on the family (attention biases, longrope, partial rotary, an
 * active sliding window, soft-capping, GELU, query_pre_attn_scalar) is left to the
 * converter, which asks the family's descriptor (arch.h). */
#ifndef HFQ_SRC_HF_CONFIG_H
#define HFQ_SRC_HF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"

typedef enum hf_rope_scaling {
    HF_ROPE_NONE, HF_ROPE_LINEAR, HF_ROPE_LLAMA3, HF_ROPE_YARN, HF_ROPE_LONGROPE
} hf_rope_scaling;

/* Where config.json gave a value: absent, or its key ("rope_theta",
 * "rope_parameters.rope_theta", "text_config.rope_scaling.factor", ...),
 * for messages that name the key. */
#define HF_KEY_MAX 128
/* Most layer_types entries read (far above real models). */
#define HF_MAX_LAYER_TYPES 1024

typedef struct hf_config {
    char architecture[128];      /* architectures[0], e.g. "LlamaForCausalLM" */
    char name[256];              /* _name_or_path or the folder's name */
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t head_dim;
    int64_t vocab_size;
    int64_t context_length;      /* max_position_embeddings; 0 if absent */
    double rms_norm_eps;
    bool tie_word_embeddings;
    bool has_head_dim;           /* head_dim given explicitly */
    bool attention_bias;         /* attention_bias: true (the family decides what it means) */

    /* The rope of the full-attention layers (every layer of the families
     * supported): base, scaling type and its parameters. */
    double rope_theta;           /* 0 if absent */
    bool has_rope_theta;
    hf_rope_scaling rope_scaling;
    double rope_factor;
    double rope_low_freq_factor, rope_high_freq_factor;   /* llama3 */
    int64_t rope_original_context;                        /* llama3, yarn, longrope; 0 if absent */
    /* yarn: beta_fast / beta_slow (ramp bounds) and attention_factor (the
     * cos/sin magnitude) when config.json gives them; absent: transformers'
     * defaults (32, 1, 0.1 ln(factor) + 1). */
    double rope_yarn_beta_fast, rope_yarn_beta_slow, rope_yarn_attn_factor;
    bool has_yarn_beta_fast, has_yarn_beta_slow, has_yarn_attn_factor;
    char rope_key[HF_KEY_MAX];   /* the rope object's key ("rope_parameters", ...) or "" */
    /* longrope: the per-pair frequency divisors for contexts within the
     * original one (short) and beyond it (long), and `factor` /
     * `attention_factor` when config.json gives them (absent: transformers
     * derives them from max_position_embeddings / original context). */
#define HF_MAX_ROPE_FACTORS 1024
    int64_t rope_n_short_factors, rope_n_long_factors;
    float rope_short_factors[HF_MAX_ROPE_FACTORS], rope_long_factors[HF_MAX_ROPE_FACTORS];
    bool has_rope_factor, has_longrope_attn_factor;
    double rope_longrope_attn_factor;
    /* partial_rotary_factor (the share of each head rope rotates; 1 when
     * absent) and the key that gave it, or "": config.c leaves it to the
     * family (arch.h) whether that is computed. */
    double partial_rotary_factor;
    char partial_rotary_key[HF_KEY_MAX];

    /* Layers of another type than full attention: their count (layer_types,
     * or use_sliding_window / max_window_layers as transformers derives them)
     * and their own rope base (rope_parameters.sliding_attention.rope_theta,
     * llama.cpp's rope.freq_base_swa). The families with windows (Phi-3, the
     * Gemmas) compute them; the converter refuses them elsewhere. */
    int64_t n_sliding_layers;
    int64_t sliding_window;      /* 0 if absent */
    double rope_theta_swa;
    bool has_rope_theta_swa;
    /* Whether sliding_window is narrower than the context, and the key
     * that gave it, for the converter's refusal where the family computes
     * no window (convert.c). */
    bool narrow_window;
    char window_key[HF_KEY_MAX];
    /* layer_types as given (has_layer_types): layer_sliding[i] is layer i's
     * being "sliding_attention"; transformers 4's Gemma 3 key
     * sliding_window_pattern (0 if absent). */
    bool has_layer_types;
    unsigned char layer_sliding[HF_MAX_LAYER_TYPES];
    int64_t sliding_window_pattern;

    /* The feed-forward activation: hidden_act / hidden_activation
     * "gelu_pytorch_tanh" (GeGLU, Gemma), else SiLU. */
    bool gelu_tanh;
    bool gelu_legacy;            /* the value was "gelu", which GemmaConfig reads as gelu_pytorch_tanh */
    char act_key[HF_KEY_MAX];    /* the key that gave it, or "" */
    /* Gemma's keys: attn_logit_softcapping / final_logit_softcapping (0
     * when absent or null) and query_pre_attn_scalar; the converter refuses
     * them where the family does not compute them. */
    double attn_softcap, final_softcap;
    double query_pre_attn_scalar;
    bool has_query_pre_attn_scalar;

    /* Mixtures of experts: num_local_experts (or num_experts), 0 if absent;
     * num_experts_per_tok; one expert's width (moe_intermediate_size, else
     * intermediate_size); norm_topk_prob when given. Shared experts are
     * refused. Layers without experts (Qwen3-MoE's mlp_only_layers and
     * decoder_sparse_step): layer_dense[i] is 1 for each, n_dense_layers
     * their count (0: every layer has experts). */
    int64_t n_experts, n_experts_used, expert_ff;
    bool norm_topk_prob, has_norm_topk_prob;
    int64_t n_dense_layers;
    unsigned char layer_dense[HF_MAX_LAYER_TYPES];

    int64_t bos_token_id, eos_token_id;   /* -1 if absent */
    /* FP8 checkpoints: quantization_config.weight_block_size, or 0 */
    int64_t fp8_block_rows, fp8_block_cols;
} hf_config;

/* Whether layer `layer` (< n_layers) of a model with experts is dense. */
static inline bool hf_config_layer_dense(const hf_config *c, int64_t layer) {
    return c->n_dense_layers > 0 && c->layer_dense[layer];   /* then n_layers <= HF_MAX_LAYER_TYPES */
}

/* Parses DIR/config.json. Errors name the file and the field. */
int hf_config_load(hf_config *cfg, const char *dir, hfq_error *err);

/* The same, with the keys config.json leaves out taken from defaults_for
 * (NULL, or returning NULL: none): given architectures[0], the JSON text of
 * its transformers config class's defaults, which transformers (and
 * llama.cpp's converter, through AutoConfig) fill in. A rope object's base
 * wins over a default rope_theta. */
int hf_config_load_defaults(hf_config *cfg, const char *dir, const char *(*defaults_for)(const char *architecture),
                            hfq_error *err);

/* The name of a rope scaling type as config.json spells it ("llama3"). */
const char *hf_rope_scaling_name(hf_rope_scaling s);

#endif
