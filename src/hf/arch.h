/* arch.h - Hugging Face model families and their GGUF names.
 *
 * One row per supported `architectures[0]`: the GGUF architecture string,
 * whether q/k rows must be un-permuted from Hugging Face's rotate-half order
 * (llama-style RoPE), and whether q/k/v carry biases. Tensor names map to the
 * names llama.cpp's convert_hf_to_gguf.py writes. */
#ifndef HFQ_SRC_HF_ARCH_H
#define HFQ_SRC_HF_ARCH_H

#include <stdbool.h>
#include <stddef.h>

#include "formats/error.h"

typedef struct hf_arch {
    const char *hf_name;      /* "LlamaForCausalLM" */
    const char *gguf_arch;    /* "llama" */
    bool permute_qk;          /* HF rotate-half -> GGUF interleaved rows */
    bool qkv_bias;            /* q/k/v projections have biases */
} hf_arch;

/* The row for an architecture name, or NULL (err lists the supported ones). */
const hf_arch *hf_arch_find(const char *hf_name, const char *config_path, hfq_error *err);

/* What a tensor is, for ordering and type rules. */
typedef enum hf_role {
    ROLE_TOKEN_EMBD, ROLE_ATTN_NORM, ROLE_ATTN_Q, ROLE_ATTN_Q_BIAS, ROLE_ATTN_K,
    ROLE_ATTN_K_BIAS, ROLE_ATTN_V, ROLE_ATTN_V_BIAS, ROLE_ATTN_OUT, ROLE_FFN_NORM,
    ROLE_FFN_GATE, ROLE_FFN_UP, ROLE_FFN_DOWN, ROLE_OUTPUT_NORM, ROLE_OUTPUT,
    ROLE_SKIP,                /* present in checkpoints, not needed (rotary inv_freq) */
} hf_role;

typedef struct hf_tensor_map {
    hf_role role;
    int layer;                /* -1 for tensors outside the blocks */
} hf_tensor_map;

/* Maps a Hugging Face tensor name. Returns 0 and fills out, or -1 when the
 * name is not one this family has. n_layers bounds the layer index. */
int hf_map_tensor(const hf_arch *arch, const char *hf_name, int n_layers, hf_tensor_map *out);

/* The GGUF name ("blk.3.attn_q.weight") for a mapped tensor. */
void hf_gguf_name(const hf_tensor_map *m, char *buf, size_t cap);

#endif
