/* config.h - the hyperparameters of a Hugging Face checkpoint (config.json).
 *
 * Reads the fields the supported decoder-only families use, with the same
 * fallbacks llama.cpp's converter applies (num_key_value_heads defaults to
 * num_attention_heads; head_dim to hidden_size / num_attention_heads). Values
 * are range-checked: a hostile config cannot make later size arithmetic
 * overflow. */
#ifndef HFQ_SRC_HF_CONFIG_H
#define HFQ_SRC_HF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"

typedef enum hf_rope_scaling {
    HF_ROPE_NONE, HF_ROPE_LINEAR, HF_ROPE_LLAMA3, HF_ROPE_YARN
} hf_rope_scaling;

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
    double rope_theta;           /* 0 if absent */
    bool has_rope_theta;
    bool tie_word_embeddings;
    bool has_head_dim;           /* head_dim given explicitly */
    hf_rope_scaling rope_scaling;
    double rope_factor;
    double rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_context;
    int64_t bos_token_id, eos_token_id;   /* -1 if absent */
    /* FP8 checkpoints: quantization_config.weight_block_size, or 0 */
    int64_t fp8_block_rows, fp8_block_cols;
} hf_config;

/* Parses DIR/config.json. Errors name the file and the field. */
int hf_config_load(hf_config *cfg, const char *dir, hfq_error *err);

#endif
