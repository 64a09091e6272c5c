/* arch_qwen2.c - Qwen2ForCausalLM as llama.cpp's "qwen2" (convert_hf_to_gguf.py's
 * Qwen2Model): the shared tensors plus q/k/v biases; NeoX rope, so q/k rows
 * keep Hugging Face's order, and no keys of its own. */
#include "src/hf/arch.h"

static const char *const names[] = {"Qwen2ForCausalLM", NULL};

static const hf_tensor_row layer_rows[] = {
    {"self_attn.q_proj.bias", "attn_q.bias", ROLE_ATTN_Q_BIAS, HF_DIM_Q, HF_DIM_NONE},
    {"self_attn.k_proj.bias", "attn_k.bias", ROLE_ATTN_K_BIAS, HF_DIM_KV, HF_DIM_NONE},
    {"self_attn.v_proj.bias", "attn_v.bias", ROLE_ATTN_V_BIAS, HF_DIM_KV, HF_DIM_NONE},
};

const hf_arch hf_arch_qwen2 = {
    .hf_names = names,
    .gguf_arch = "qwen2",
    .model_type = "qwen2",
    .config_sliding_window = true,   /* attention_bias: none, its biases are fixed */
    .layer_rows = layer_rows,
    .n_layer_rows = sizeof layer_rows / sizeof layer_rows[0],
};
