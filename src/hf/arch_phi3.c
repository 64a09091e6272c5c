/* arch_phi3.c - Phi3ForCausalLM (Phi-3, Phi-3.5, Phi-4) as llama.cpp's "phi3"
 * (convert_hf_to_gguf.py's Phi3MiniModel, conversion/phi.py): q, k and v in
 * one matrix (qkv_proj -> attn_qkv, rows q then k then v), gate and up in
 * one (gate_up_proj -> ffn_up, 2 * intermediate_size rows, gate first), NeoX
 * rope over the first rope.dimension_count values of a head
 * (partial_rotary_factor), and longrope's per-pair factors as the tensors
 * rope_factors_long / rope_factors_short with the cos/sin magnitude in
 * rope.scaling.attn_factor. The converter writes its own keys only (no
 * TextModel ones): those below plus the shared dimensions. */
#include "src/hf/arch.h"

#include <math.h>

static const char *const names[] = {"Phi3ForCausalLM", NULL};

static const hf_tensor_row layer_rows[] = {
    {"self_attn.qkv_proj.weight", "attn_qkv.weight", ROLE_ATTN_QKV, HF_DIM_QKV, HF_DIM_HIDDEN},
    {NULL, NULL, ROLE_ATTN_Q, HF_DIM_NONE, HF_DIM_NONE},
    {NULL, NULL, ROLE_ATTN_K, HF_DIM_NONE, HF_DIM_NONE},
    {NULL, NULL, ROLE_ATTN_V, HF_DIM_NONE, HF_DIM_NONE},
    {NULL, NULL, ROLE_FFN_GATE, HF_DIM_NONE, HF_DIM_NONE},
    {"mlp.gate_up_proj.weight", "ffn_up.weight", ROLE_FFN_UP, HF_DIM_FF2, HF_DIM_HIDDEN},
};

/* Transformers' Phi3Config default when config.json has none (llama.cpp's
 * converter needs it given). */
#define PHI3_ORIGINAL_CONTEXT 4096

static int64_t original_context(const hf_config *c) {
    return c->rope_original_context ? c->rope_original_context : PHI3_ORIGINAL_CONTEXT;
}

/* Phi3MiniModel: int(partial_rotary_factor * hidden_size) // num_attention_heads. */
static int64_t rope_dims(const hf_config *c) {
    return (int64_t)(c->partial_rotary_factor * (double)c->hidden_size) / c->n_heads;
}

/* The cos/sin magnitude as transformers' _compute_longrope_parameters has
 * it: attention_factor, else from factor (absent: max_position_embeddings /
 * original context, what llama.cpp's converter always takes). */
static double longrope_attn_factor(const hf_config *c) {
    if (c->has_longrope_attn_factor) return c->rope_longrope_attn_factor;
    double factor = c->has_rope_factor ? c->rope_factor : (double)c->context_length / (double)original_context(c);
    return factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log((double)original_context(c)));
}

static int write_keys(gguf_writer *w, const hf_config *c, const hf_arch *arch) {
    char key[160];
    int rc = gguf_set_u32(w, hf_arch_key(arch, "rope.scaling.original_context_length", key, sizeof key),
                          (uint32_t)original_context(c));
    rc |= gguf_set_u32(w, hf_arch_key(arch, "rope.dimension_count", key, sizeof key), (uint32_t)rope_dims(c));
    /* 0: no window (Phi-4), as the converter writes a null one */
    rc |= gguf_set_u32(w, hf_arch_key(arch, "attention.sliding_window", key, sizeof key), (uint32_t)c->sliding_window);
    if (c->rope_scaling == HF_ROPE_LONGROPE)
        rc |= gguf_set_f32(w, hf_arch_key(arch, "rope.scaling.attn_factor", key, sizeof key),
                           (float)longrope_attn_factor(c));
    return rc;
}

static int check_config(const hf_config *c, const char *path, hfq_error *err) {
    if (c->rope_scaling != HF_ROPE_NONE && c->rope_scaling != HF_ROPE_LONGROPE)
        return hfq_fail(err, path, "field '%s' asks for rope type '%s': phi3 computes only default and longrope rope",
                        c->rope_key, hf_rope_scaling_name(c->rope_scaling));
    if (c->context_length <= 0) return hfq_fail(err, path, "missing required field 'max_position_embeddings'");
    /* transformers rotates int(head_dim * factor) values of a head; llama.cpp
     * rope.dimension_count of them: the two must agree */
    const int64_t n_rot = rope_dims(c);
    if (n_rot != (int64_t)((double)c->head_dim * c->partial_rotary_factor) || n_rot % 2 != 0 || n_rot <= 0)
        return hfq_fail(err, path, "field '%s' = %g: %lld rotated values of a head of %lld are not computed",
                        c->partial_rotary_key[0] ? c->partial_rotary_key : "partial_rotary_factor",
                        c->partial_rotary_factor, (long long)n_rot, (long long)c->head_dim);
    if (c->rope_scaling != HF_ROPE_LONGROPE) return 0;
    const struct { const char *key; int64_t n; } lists[] = {
        {"short_factor", c->rope_n_short_factors}, {"long_factor", c->rope_n_long_factors}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        if (lists[i].n != n_rot / 2)
            return hfq_fail(err, path, "field '%s.%s' has %lld factors, expected %lld (half the rotated values)",
                            c->rope_key, lists[i].key, (long long)lists[i].n, (long long)(n_rot / 2));
    return 0;
}

static int64_t n_extra_tensors(const hf_config *c) { return c->rope_scaling == HF_ROPE_LONGROPE ? 2 : 0; }

static void extra_tensor(const hf_config *c, int64_t i, const char **name, int64_t *n, const float **values) {
    *name = i == 0 ? "rope_factors_long.weight" : "rope_factors_short.weight";
    *n = i == 0 ? c->rope_n_long_factors : c->rope_n_short_factors;
    *values = i == 0 ? c->rope_long_factors : c->rope_short_factors;
}

const hf_arch hf_arch_phi3 = {
    .hf_names = names,
    .gguf_arch = "phi3",
    .model_type = "phi3",
    .longrope = true,
    .partial_rotary = true,
    .sliding_window = true,
    .layer_rows = layer_rows,
    .n_layer_rows = sizeof layer_rows / sizeof layer_rows[0],
    .write_keys = write_keys,
    .check_config = check_config,
    .n_extra_tensors = n_extra_tensors,
    .extra_tensor = extra_tensor,
    .vocab_rules = HFQ_VOCAB_SPM_PHI3,
};
