/* arch_qwen3.c - Qwen3ForCausalLM as llama.cpp's "qwen3" (convert_hf_to_gguf.py's
 * Qwen3Model, a Qwen2Model): the shared tensors plus an RMSNorm over each head
 * of q and of k (q_norm, k_norm: one weight of head_dim values shared by the
 * heads) before rope; no q/k/v biases, NeoX rope (q/k rows keep Hugging Face's
 * order), head_dim explicit in its configs (key_length written from it), and
 * no keys of its own. */
#include "src/hf/arch.h"

static const char *const names[] = {"Qwen3ForCausalLM", NULL};

static const hf_tensor_row layer_rows[] = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight", ROLE_ATTN_Q_NORM, HF_DIM_HEAD, HF_DIM_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", ROLE_ATTN_K_NORM, HF_DIM_HEAD, HF_DIM_NONE},
};

const hf_arch hf_arch_qwen3 = {
    .hf_names = names,
    .gguf_arch = "qwen3",
    .model_type = "qwen3",
    .config_attention_bias = true,
    .layer_rows = layer_rows,
    .n_layer_rows = sizeof layer_rows / sizeof layer_rows[0],
};
