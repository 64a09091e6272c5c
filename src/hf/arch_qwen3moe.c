/* arch_qwen3moe.c - Qwen3MoeForCausalLM as llama.cpp's "qwen3moe"
 * (convert_hf_to_gguf.py's Qwen3MoeModel, a Qwen2MoeModel): Qwen3's
 * attention (per-head q/k norms, NeoX rope) and in each layer a router
 * (mlp.gate, kept F32) over num_experts SwiGLU experts of
 * moe_intermediate_size (mlp.experts.N.{gate,up,down}_proj), stacked into
 * ffn_{gate,up,down}_exps; expert_feed_forward_length written from
 * moe_intermediate_size. The router renormalises the top-k weights only
 * when norm_topk_prob is true (transformers' default: false). llama.cpp's
 * qwen3moe always renormalises and its converter writes no key for it, so
 * a model without renormalisation gets qwen3moe.expert_weights_norm = false
 * (docs/hfconv.md). */
#include "src/hf/arch.h"

static const char *const names[] = {"Qwen3MoeForCausalLM", NULL};

static const hf_tensor_row layer_rows[] = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight", ROLE_ATTN_Q_NORM, HF_DIM_HEAD, HF_DIM_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", ROLE_ATTN_K_NORM, HF_DIM_HEAD, HF_DIM_NONE},
    {"mlp.gate.weight", "ffn_gate_inp.weight", ROLE_FFN_GATE_INP, HF_DIM_EXPERTS, HF_DIM_HIDDEN},
    {"mlp.experts.*.gate_proj.weight", "ffn_gate_exps.weight", ROLE_FFN_GATE_EXPS, HF_DIM_FF_EXP, HF_DIM_HIDDEN},
    {"mlp.experts.*.up_proj.weight", "ffn_up_exps.weight", ROLE_FFN_UP_EXPS, HF_DIM_FF_EXP, HF_DIM_HIDDEN},
    {"mlp.experts.*.down_proj.weight", "ffn_down_exps.weight", ROLE_FFN_DOWN_EXPS, HF_DIM_HIDDEN, HF_DIM_FF_EXP},
};

static int write_keys(gguf_writer *w, const hf_config *c, const hf_arch *arch) {
    char key[160];
    int rc = gguf_set_u32(w, hf_arch_key(arch, "expert_feed_forward_length", key, sizeof key), (uint32_t)c->expert_ff);
    if (!c->norm_topk_prob) rc |= gguf_set_bool(w, hf_arch_key(arch, "expert_weights_norm", key, sizeof key), false);
    return rc;
}

const hf_arch hf_arch_qwen3moe = {
    .hf_names = names,
    .gguf_arch = "qwen3moe",
    .model_type = "qwen3_moe",
    .config_attention_bias = true,
    .layer_rows = layer_rows,
    .n_layer_rows = sizeof layer_rows / sizeof layer_rows[0],
    .write_keys = write_keys,
    .fused_experts = "mlp.experts.",
    .dense_layers = true,
};
