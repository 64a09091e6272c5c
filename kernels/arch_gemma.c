/* arch_gemma.c - llama.cpp's "gemma", "gemma2" and "gemma3".
 *
 * Gemma (1): Llama's block with NeoX rope, the embeddings scaled by
 * sqrt(n_embd), GeGLU with tanh GELU, norms stored as 1 + w.
 * Gemma 2 and 3: NeoX rope, the embeddings scaled by sqrt(n_embd), an RMSNorm of each
 * block's output before its residual add (post_attention_norm,
 * post_ffw_norm), GeGLU with tanh GELU, soft-capped logits, and a sliding
 * window on the layers of llama.cpp's pattern. The norm weights are stored
 * as 1 + w (the converter adds the one), so the norms are plain RMSNorm here.
 * Gemma 2: soft-capped attention scores, every other layer sliding (layers 0,
 * 2, 4, ...) with the global rope, a window of 4096 when the file gives none.
 * Gemma 3: an RMSNorm over each head of q and of k before rope (attn_q_norm,
 * attn_k_norm), no attention soft-capping (llama.cpp's gemma3 reads no such
 * key: a file with one is refused), five layers of six sliding, their rope
 * its own base (rope.freq_base_swa, else 10000) unscaled. */
#include "kernels/arch.h"

/* Gemma 3's needs; Gemma 2's are those after the first two. */
static const hfq_arch_tensor layer_tensors[] = {
    {"attn_q_norm.weight", HFQ_NEED_REQUIRED},
    {"attn_k_norm.weight", HFQ_NEED_REQUIRED},
    {"post_attention_norm.weight", HFQ_NEED_REQUIRED},
    {"post_ffw_norm.weight", HFQ_NEED_REQUIRED},
    {"attn_q.bias", HFQ_NEED_REFUSED},
    {"attn_k.bias", HFQ_NEED_REFUSED},
    {"attn_v.bias", HFQ_NEED_REFUSED},
};
#define N_TENSORS (sizeof layer_tensors / sizeof layer_tensors[0])

const hfq_arch_desc hfq_arch_gemma = {
    .name = "gemma",
    .rope_mode = HFQ_ROPE_NEOX,
    .layer_tensors = layer_tensors + 4,   /* no q/k/v biases */
    .n_layer_tensors = N_TENSORS - 4,
    .ffn_act = HFQ_FFN_GELU_TANH,
    .embd_scale = true,
};

const hfq_arch_desc hfq_arch_gemma2 = {
    .name = "gemma2",
    .rope_mode = HFQ_ROPE_NEOX,
    .layer_tensors = layer_tensors + 2,
    .n_layer_tensors = N_TENSORS - 2,
    .ffn_act = HFQ_FFN_GELU_TANH,
    .embd_scale = true,
    .swa = true,
    .n_swa_default = 4096,          /* llama.cpp's, Gemma 2's window */
    .swa_pattern = 2,
    .attn_softcap = true,
    .attn_scale_embd_layers = 46,   /* Gemma 2 27B */
};

const hfq_arch_desc hfq_arch_gemma3 = {
    .name = "gemma3",
    .rope_mode = HFQ_ROPE_NEOX,
    .layer_tensors = layer_tensors,
    .n_layer_tensors = N_TENSORS,
    .ffn_act = HFQ_FFN_GELU_TANH,
    .embd_scale = true,
    .swa = true,
    .swa_pattern = 6,
    .rope_freq_base_swa = 10000.0f,
    .attn_scale_embd_layers = 62,   /* Gemma 3 27B */
};
