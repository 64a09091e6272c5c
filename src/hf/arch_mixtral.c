/* arch_mixtral.c - MixtralForCausalLM as llama.cpp's "llama" with experts
 * (convert_hf_to_gguf.py converts it with LlamaModel): Llama's attention
 * and keys, and in each layer a router (block_sparse_moe.gate, kept F32 as every router)
 * over num_local_experts SwiGLU experts (w1 gate, w3 up, w2 down), stacked
 * into ffn_{gate,up,down}_exps. Its router always renormalises the top-k
 * weights. */
#include "src/hf/arch.h"

static const char *const names[] = {"MixtralForCausalLM", NULL};

static const hf_tensor_row layer_rows[] = {
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", ROLE_FFN_GATE_INP, HF_DIM_EXPERTS, HF_DIM_HIDDEN},
    {"block_sparse_moe.experts.*.w1.weight", "ffn_gate_exps.weight", ROLE_FFN_GATE_EXPS, HF_DIM_FF_EXP, HF_DIM_HIDDEN},
    {"block_sparse_moe.experts.*.w3.weight", "ffn_up_exps.weight", ROLE_FFN_UP_EXPS, HF_DIM_FF_EXP, HF_DIM_HIDDEN},
    {"block_sparse_moe.experts.*.w2.weight", "ffn_down_exps.weight", ROLE_FFN_DOWN_EXPS, HF_DIM_HIDDEN, HF_DIM_FF_EXP},
    /* transformers 5's own names (save_original_format=False): the router
     * under mlp., the experts fused (arch.h's fused_experts) */
    {"mlp.gate.weight", "ffn_gate_inp.weight", ROLE_FFN_GATE_INP, HF_DIM_EXPERTS, HF_DIM_HIDDEN},
};

/* LlamaModel's keys: Mixtral is converted by the same class. */
static int write_keys(gguf_writer *w, const hf_config *c, const hf_arch *arch) {
    return hf_arch_llama.write_keys(w, c, arch);
}

const hf_arch hf_arch_mixtral = {
    .hf_names = names,
    .gguf_arch = "llama",
    .model_type = "mixtral",
    .permute_qk = true,
    .layer_rows = layer_rows,
    .n_layer_rows = sizeof layer_rows / sizeof layer_rows[0],
    .write_keys = write_keys,
    .fused_experts = "mlp.experts.",
};
