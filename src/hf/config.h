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
 * (soft-capping, multipliers, partial rotary, non-SiLU activations, MLP
 * biases, an active sliding window, unknown rope types and rope keys, ...).
 * What depends on the family (attention biases, longrope) is left to the
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

    /* Layers of another type than full attention: their count (layer_types,
     * or use_sliding_window / max_window_layers as transformers derives them)
     * and their own rope base (rope_parameters.sliding_attention.rope_theta,
     * llama.cpp's rope.freq_base_swa). No family computes them yet. */
    int64_t n_sliding_layers;
    int64_t sliding_window;      /* 0 if absent */
    double rope_theta_swa;
    bool has_rope_theta_swa;

    /* Mixtures of experts: num_local_experts (or num_experts), 0 if absent;
     * num_experts_per_tok; one expert's width (moe_intermediate_size, else
     * intermediate_size); norm_topk_prob when given. Layers made dense
     * (mlp_only_layers, decoder_sparse_step) and shared experts are refused. */
    int64_t n_experts, n_experts_used, expert_ff;
    bool norm_topk_prob, has_norm_topk_prob;

    int64_t bos_token_id, eos_token_id;   /* -1 if absent */
    /* FP8 checkpoints: quantization_config.weight_block_size, or 0 */
    int64_t fp8_block_rows, fp8_block_cols;
} hf_config;

/* Parses DIR/config.json. Errors name the file and the field. */
int hf_config_load(hf_config *cfg, const char *dir, hfq_error *err);

/* The name of a rope scaling type as config.json spells it ("llama3"). */
const char *hf_rope_scaling_name(hf_rope_scaling s);

#endif
