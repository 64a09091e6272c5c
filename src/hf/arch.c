#include "src/hf/arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/json_file.h"

/* In the order of the error message that lists what is supported. */
static const hf_arch *const families[] = {&hf_arch_llama, &hf_arch_qwen2, &hf_arch_qwen3, &hf_arch_phi3,
                                           &hf_arch_gemma, &hf_arch_gemma2, &hf_arch_gemma3, &hf_arch_mixtral,
                                           &hf_arch_qwen3moe};

const char *hf_arch_supported(char *buf, size_t cap) {
    size_t used = 0;
    if (cap) buf[0] = '\0';
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        for (const char *const *n = families[i]->hf_names; *n && used < cap; n++) {
            snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", *n);
            used = strlen(buf);
        }
    return buf;
}

const hf_arch *hf_arch_find_gguf(const char *gguf_arch) {
    for (size_t i = 0; gguf_arch && i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i]->gguf_arch, gguf_arch) == 0) return families[i];
    return NULL;
}

/* The family accepting an architecture name, or NULL. */
static const hf_arch *family_named(const char *hf_name) {
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        for (const char *const *n = families[i]->hf_names; *n; n++)
            if (strcmp(*n, hf_name) == 0) return families[i];
    return NULL;
}

const hf_arch *hf_arch_find(const char *hf_name, const char *config_path, hfq_error *err) {
    const hf_arch *arch = family_named(hf_name);
    if (arch) return arch;
    char supported[512];
    hfq_fail(err, config_path, "architecture '%s' is not supported (supported: %s)", hf_name,
             hf_arch_supported(supported, sizeof supported));
    return NULL;
}

const char *hf_arch_config_defaults(const char *hf_name) {
    const hf_arch *arch = family_named(hf_name);
    return arch ? arch->config_defaults : NULL;
}

hfq_vocab_spm_rules hf_arch_vocab_rules(const char *dir) {
    char path[4096];
    hfq_error err;
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *root = hfq_json_load(path, &err);
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const hf_arch *arch = cJSON_IsString(a0) ? family_named(a0->valuestring) : NULL;
    cJSON_Delete(root);
    return arch ? arch->vocab_rules : HFQ_VOCAB_SPM_LLAMA;
}

const char *hf_arch_key(const hf_arch *arch, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", arch->gguf_arch, suffix);
    return buf;
}

/* The layer tensors every family has. */
static const hf_tensor_row shared_layer_rows[] = {
    {"input_layernorm.weight", "attn_norm.weight", ROLE_ATTN_NORM, HF_DIM_HIDDEN, HF_DIM_NONE},
    {"self_attn.q_proj.weight", "attn_q.weight", ROLE_ATTN_Q, HF_DIM_Q, HF_DIM_HIDDEN},
    {"self_attn.k_proj.weight", "attn_k.weight", ROLE_ATTN_K, HF_DIM_KV, HF_DIM_HIDDEN},
    {"self_attn.v_proj.weight", "attn_v.weight", ROLE_ATTN_V, HF_DIM_KV, HF_DIM_HIDDEN},
    {"self_attn.o_proj.weight", "attn_output.weight", ROLE_ATTN_OUT, HF_DIM_HIDDEN, HF_DIM_Q},
    {"post_attention_layernorm.weight", "ffn_norm.weight", ROLE_FFN_NORM, HF_DIM_HIDDEN, HF_DIM_NONE},
    {"mlp.gate_proj.weight", "ffn_gate.weight", ROLE_FFN_GATE, HF_DIM_FF, HF_DIM_HIDDEN},
    {"mlp.up_proj.weight", "ffn_up.weight", ROLE_FFN_UP, HF_DIM_FF, HF_DIM_HIDDEN},
    {"mlp.down_proj.weight", "ffn_down.weight", ROLE_FFN_DOWN, HF_DIM_HIDDEN, HF_DIM_FF},
    {"self_attn.rotary_emb.inv_freq", NULL, ROLE_SKIP, HF_DIM_NONE, HF_DIM_NONE},
};

#define N_SHARED (sizeof shared_layer_rows / sizeof shared_layer_rows[0])

static const hf_tensor_row global_rows[] = {
    {"model.embed_tokens.weight", "token_embd.weight", ROLE_TOKEN_EMBD, HF_DIM_VOCAB, HF_DIM_HIDDEN},
    {"model.norm.weight", "output_norm.weight", ROLE_OUTPUT_NORM, HF_DIM_HIDDEN, HF_DIM_NONE},
    {"lm_head.weight", "output.weight", ROLE_OUTPUT, HF_DIM_VOCAB, HF_DIM_HIDDEN},
};

/* Whether the family has its own row (or, hf_name NULL, none) for a shared
 * row: one of the same role, or of the same Hugging Face name (Gemma's
 * post_attention_layernorm is not the FFN norm). */
static bool replaced(const hf_arch *arch, const hf_tensor_row *shared) {
    for (size_t i = 0; i < arch->n_layer_rows; i++) {
        const hf_tensor_row *own = &arch->layer_rows[i];
        if (own->role == shared->role || (own->hf_name && strcmp(own->hf_name, shared->hf_name) == 0)) return true;
    }
    return false;
}

const hf_tensor_row *hf_arch_layer_row(const hf_arch *arch, size_t i) {
    for (size_t k = 0; k < N_SHARED; k++)
        if (!replaced(arch, &shared_layer_rows[k]) && i-- == 0) return &shared_layer_rows[k];
    for (size_t j = 0; j < arch->n_layer_rows; j++)
        if (arch->layer_rows[j].hf_name && i-- == 0) return &arch->layer_rows[j];
    return NULL;
}

const hf_tensor_row *hf_arch_global_row(hf_role role) {
    for (size_t i = 0; i < sizeof global_rows / sizeof global_rows[0]; i++)
        if (global_rows[i].role == role) return &global_rows[i];
    return NULL;
}

bool hf_arch_has_experts(const hf_arch *arch) {
    for (size_t i = 0; i < arch->n_layer_rows; i++)
        if (arch->layer_rows[i].hf_name && strchr(arch->layer_rows[i].hf_name, '*')) return true;
    return false;
}

/* A decimal index below `bound` at *p, without leading zeros; its end in *end. */
static long parse_index(const char *p, long bound, const char **end) {
    if (*p < '0' || *p > '9') return -1;
    char *e;
    long v = strtol(p, &e, 10);
    *end = e;
    return v < 0 || v >= bound || (p[0] == '0' && e - p > 1) ? -1 : v;
}

/* Whether name matches pattern, a '*' in it an expert index below n_experts (in *expert). */
static bool match_row(const char *pattern, const char *name, int n_experts, int *expert) {
    const char *star = strchr(pattern, '*');
    *expert = -1;
    if (!star) return strcmp(pattern, name) == 0;
    size_t head = (size_t)(star - pattern);
    if (strncmp(pattern, name, head) != 0) return false;
    const char *end;
    long e = parse_index(name + head, n_experts, &end);
    if (e < 0 || strcmp(end, star + 1) != 0) return false;
    *expert = (int)e;
    return true;
}

int hf_map_tensor(const hf_arch *arch, const char *hf_name, int n_layers, int n_experts, hf_tensor_map *out) {
    for (size_t i = 0; i < sizeof global_rows / sizeof global_rows[0]; i++) {
        if (strcmp(hf_name, global_rows[i].hf_name) == 0) {
            out->row = &global_rows[i];
            out->layer = -1;
            out->expert = -1;
            return 0;
        }
    }
    static const char prefix[] = "model.layers.";
    if (strncmp(hf_name, prefix, sizeof prefix - 1) != 0) return -1;
    const char *end;
    long layer = parse_index(hf_name + sizeof prefix - 1, n_layers, &end);
    if (layer < 0 || *end != '.') return -1;
    const char *suffix = end + 1;
    const hf_tensor_row *row;
    for (size_t i = 0; (row = hf_arch_layer_row(arch, i)); i++) {
        if (!match_row(row->hf_name, suffix, n_experts, &out->expert)) continue;
        out->row = row;
        out->layer = (int)layer;
        return 0;
    }
    return -1;
}

void hf_gguf_name(const hf_tensor_map *m, char *buf, size_t cap) {
    if (m->layer < 0) snprintf(buf, cap, "%s", m->row->gguf_name);
    else snprintf(buf, cap, "blk.%d.%s", m->layer, m->row->gguf_name);
}
