/* arch_qwen2.c - llama.cpp's "qwen2": NeoX rope pairs, q/k/v biases required. */
#include "kernels/arch.h"

static const hfq_arch_tensor layer_tensors[] = {
    {"attn_q.bias", HFQ_NEED_REQUIRED},
    {"attn_k.bias", HFQ_NEED_REQUIRED},
    {"attn_v.bias", HFQ_NEED_REQUIRED},
};

const hfq_arch_desc hfq_arch_qwen2 = {
    .name = "qwen2",
    .rope_mode = HFQ_ROPE_NEOX,
    .layer_tensors = layer_tensors,
    .n_layer_tensors = sizeof layer_tensors / sizeof layer_tensors[0],
};
