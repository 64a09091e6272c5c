/* arch_qwen3.c - llama.cpp's "qwen3": NeoX rope pairs, an RMSNorm over each
 * head of q and of k before rope (attn_q_norm, attn_k_norm required), no q/k/v
 * biases (llama.cpp's qwen3 has none: a file with them is refused rather than
 * computed differently from llama.cpp). */
#include "kernels/arch.h"

static const hfq_arch_tensor layer_tensors[] = {
    {"attn_q_norm.weight", HFQ_NEED_REQUIRED},
    {"attn_k_norm.weight", HFQ_NEED_REQUIRED},
    {"attn_q.bias", HFQ_NEED_REFUSED},
    {"attn_k.bias", HFQ_NEED_REFUSED},
    {"attn_v.bias", HFQ_NEED_REFUSED},
};

const hfq_arch_desc hfq_arch_qwen3 = {
    .name = "qwen3",
    .rope_mode = HFQ_ROPE_NEOX,
    .layer_tensors = layer_tensors,
    .n_layer_tensors = sizeof layer_tensors / sizeof layer_tensors[0],
};

/* llama.cpp's "qwen3moe": qwen3's attention, the same tensor needs, and in
 * each layer a mixture of experts (expert_count required), or a dense SwiGLU
 * where transformers' config makes the layer dense (ours only: llama.cpp's
 * qwen3moe wants experts in every layer). */
const hfq_arch_desc hfq_arch_qwen3moe = {
    .name = "qwen3moe",
    .rope_mode = HFQ_ROPE_NEOX,
    .layer_tensors = layer_tensors,
    .n_layer_tensors = sizeof layer_tensors / sizeof layer_tensors[0],
    .moe_only = true,
    .dense_layers = true,
};
