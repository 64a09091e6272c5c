/* arch_phi3.c - llama.cpp's "phi3" (Phi-3, Phi-3.5, Phi-4): NeoX rope pairs
 * over rope.dimension_count values of a head, q/k/v in one matrix
 * (attn_qkv.weight, rows q then k then v; llama.cpp also takes them apart,
 * so attn_q/k/v are accepted instead), gate and up in ffn_up.weight (gate's
 * rows first, no ffn_gate), no biases, a sliding window on every layer when
 * the file gives one. Longrope's factor tensors and
 * attn_factor are model.c's and graph.c's, read for any family. */
#include "kernels/arch.h"

static const hfq_arch_tensor layer_tensors[] = {
    {"attn_qkv.weight", HFQ_NEED_OPTIONAL},
    {"attn_q.weight", HFQ_NEED_OPTIONAL},
    {"attn_k.weight", HFQ_NEED_OPTIONAL},
    {"attn_v.weight", HFQ_NEED_OPTIONAL},
    {"attn_q.bias", HFQ_NEED_REFUSED},
    {"attn_k.bias", HFQ_NEED_REFUSED},
    {"attn_v.bias", HFQ_NEED_REFUSED},
    {"ffn_gate.weight", HFQ_NEED_REFUSED},
};

const hfq_arch_desc hfq_arch_phi3 = {
    .name = "phi3",
    .rope_mode = HFQ_ROPE_NEOX,
    .layer_tensors = layer_tensors,
    .n_layer_tensors = sizeof layer_tensors / sizeof layer_tensors[0],
    .fused_gate_up = true,
    .swa = true,   /* attention.sliding_window on every layer (swa_pattern 0), with the global rope */
};
