#include "src/hf/arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hf_arch arch_table[] = {
    {"LlamaForCausalLM", "llama", true, false},
    {"MistralForCausalLM", "llama", true, false},
    {"Qwen2ForCausalLM", "qwen2", false, true},
};

const hf_arch *hf_arch_find(const char *hf_name, const char *config_path, hfq_error *err) {
    for (size_t i = 0; i < sizeof arch_table / sizeof arch_table[0]; i++)
        if (strcmp(arch_table[i].hf_name, hf_name) == 0) return &arch_table[i];
    hfq_fail(err, config_path,
             "architecture '%s' is not supported (supported: LlamaForCausalLM, "
             "MistralForCausalLM, Qwen2ForCausalLM)", hf_name);
    return NULL;
}

/* Per-layer tensors: Hugging Face suffix after "model.layers.N." and GGUF
 * suffix after "blk.N.". */
static const struct {
    const char *hf_suffix;
    const char *gguf_suffix;
    hf_role role;
    bool bias;               /* only in families with q/k/v biases */
} layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight", ROLE_ATTN_NORM, false},
    {"self_attn.q_proj.weight", "attn_q.weight", ROLE_ATTN_Q, false},
    {"self_attn.q_proj.bias", "attn_q.bias", ROLE_ATTN_Q_BIAS, true},
    {"self_attn.k_proj.weight", "attn_k.weight", ROLE_ATTN_K, false},
    {"self_attn.k_proj.bias", "attn_k.bias", ROLE_ATTN_K_BIAS, true},
    {"self_attn.v_proj.weight", "attn_v.weight", ROLE_ATTN_V, false},
    {"self_attn.v_proj.bias", "attn_v.bias", ROLE_ATTN_V_BIAS, true},
    {"self_attn.o_proj.weight", "attn_output.weight", ROLE_ATTN_OUT, false},
    {"post_attention_layernorm.weight", "ffn_norm.weight", ROLE_FFN_NORM, false},
    {"mlp.gate_proj.weight", "ffn_gate.weight", ROLE_FFN_GATE, false},
    {"mlp.up_proj.weight", "ffn_up.weight", ROLE_FFN_UP, false},
    {"mlp.down_proj.weight", "ffn_down.weight", ROLE_FFN_DOWN, false},
    {"self_attn.rotary_emb.inv_freq", NULL, ROLE_SKIP, false},
};

static const struct {
    const char *hf_name;
    const char *gguf_name;
    hf_role role;
} global_names[] = {
    {"model.embed_tokens.weight", "token_embd.weight", ROLE_TOKEN_EMBD},
    {"model.norm.weight", "output_norm.weight", ROLE_OUTPUT_NORM},
    {"lm_head.weight", "output.weight", ROLE_OUTPUT},
};

int hf_map_tensor(const hf_arch *arch, const char *hf_name, int n_layers, hf_tensor_map *out) {
    for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++) {
        if (strcmp(hf_name, global_names[i].hf_name) == 0) {
            out->role = global_names[i].role;
            out->layer = -1;
            return 0;
        }
    }
    static const char prefix[] = "model.layers.";
    if (strncmp(hf_name, prefix, sizeof prefix - 1) != 0) return -1;
    const char *p = hf_name + sizeof prefix - 1;
    if (*p < '0' || *p > '9') return -1;
    char *end;
    long layer = strtol(p, &end, 10);
    if (*end != '.' || layer < 0 || layer >= n_layers || (p[0] == '0' && end - p > 1)) return -1;
    const char *suffix = end + 1;
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
        if (strcmp(suffix, layer_names[i].hf_suffix) != 0) continue;
        if (layer_names[i].bias && !arch->qkv_bias) return -1;
        out->role = layer_names[i].role;
        out->layer = (int)layer;
        return 0;
    }
    return -1;
}

void hf_gguf_name(const hf_tensor_map *m, char *buf, size_t cap) {
    for (size_t i = 0; i < sizeof global_names / sizeof global_names[0]; i++) {
        if (global_names[i].role == m->role) {
            snprintf(buf, cap, "%s", global_names[i].gguf_name);
            return;
        }
    }
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
        if (layer_names[i].role == m->role && layer_names[i].gguf_suffix) {
            snprintf(buf, cap, "blk.%d.%s", m->layer, layer_names[i].gguf_suffix);
            return;
        }
    }
    snprintf(buf, cap, "?");
}
