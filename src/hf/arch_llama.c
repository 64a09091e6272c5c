/* arch_llama.c - LlamaForCausalLM and MistralForCausalLM as llama.cpp's
 * "llama" (convert_hf_to_gguf.py's LlamaModel; Mistral's checkpoints differ
 * only in config.json). The shared tensor rows are all it has. */
#include "src/hf/arch.h"

static const char *const names[] = {"LlamaForCausalLM", "MistralForCausalLM", NULL};

/* LlamaModel.set_gguf_parameters adds these to the shared keys. */
static int write_keys(gguf_writer *w, const hf_config *c, const hf_arch *arch) {
    char key[160];
    int rc = gguf_set_u32(w, hf_arch_key(arch, "vocab_size", key, sizeof key), (uint32_t)c->vocab_size);
    rc |= gguf_set_u32(w, hf_arch_key(arch, "rope.dimension_count", key, sizeof key), (uint32_t)c->head_dim);
    return rc;
}

const hf_arch hf_arch_llama = {
    .hf_names = names,
    .gguf_arch = "llama",
    .model_type = "llama",
    .config_attention_bias = true,
    .config_mlp_bias = true,
    .permute_qk = true,   /* llama.cpp's llama rope rotates interleaved pairs */
    .write_keys = write_keys,
};
