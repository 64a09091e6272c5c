/* arch_gemma.c - GemmaForCausalLM as llama.cpp's "gemma", Gemma2ForCausalLM
 * as "gemma2" and Gemma3ForCausalLM (and the text model of
 * Gemma3ForConditionalGeneration) as "gemma3" (convert_hf_to_gguf.py's
 * GemmaModel, Gemma2Model, Gemma3Model).
 *
 * Gemma (1): the shared tensors and names, every "*norm.weight" stored as
 * 1 + w, lm_head dropped, NeoX rope, GeGLU (hidden_act "gelu" meaning the
 * tanh one, as GemmaConfig reads it), no keys of its own (no rope keys
 * either, as GemmaModel; its CodeGemma special-token keys are not written).
 *
 * Gemma 2 and 3: the shared tensors but for the norms around the blocks
 * (post_attention_layernorm is the attention output's norm,
 * pre_feedforward_layernorm the FFN's input norm, post_feedforward_layernorm
 * its output's), every "*norm.weight" stored as 1 + w, NeoX rope (no q/k
 * permutation), GeGLU, the window of llama.cpp's pattern. Gemma 2: lm_head
 * dropped (the output is token_embd), both soft-capping keys, every other
 * layer sliding; it writes no rope keys of its own (the shared rope.freq_base
 * stays, docs/hfconv.md). Gemma 3: an RMSNorm over each head of q and of k
 * (q_norm, k_norm, also 1 + w), no attention soft-capping, five layers of six
 * sliding with their own rope base (rope.freq_base_swa), the global layers'
 * rope scaled (linear); a multimodal checkpoint's vision tower and projector
 * are left out, as for llama.cpp's text GGUF. */
#include "src/hf/arch.h"

#include <string.h>

static const char *const gemma_names[] = {"GemmaForCausalLM", NULL};
static const char *const gemma2_names[] = {"Gemma2ForCausalLM", NULL};
static const char *const gemma3_names[] = {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", NULL};

/* Gemma 3's rows; Gemma 2's are the last three. */
static const hf_tensor_row layer_rows[] = {
    {"self_attn.q_norm.weight", "attn_q_norm.weight", ROLE_ATTN_Q_NORM, HF_DIM_HEAD, HF_DIM_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", ROLE_ATTN_K_NORM, HF_DIM_HEAD, HF_DIM_NONE},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", ROLE_ATTN_POST_NORM, HF_DIM_HIDDEN,
     HF_DIM_NONE},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", ROLE_FFN_NORM, HF_DIM_HIDDEN, HF_DIM_NONE},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", ROLE_FFN_POST_NORM, HF_DIM_HIDDEN, HF_DIM_NONE},
};
#define N_ROWS (sizeof layer_rows / sizeof layer_rows[0])

/* The caps the family computes when given, and the window unless Gemma 3's
 * sliding_window_pattern is 1 (no sliding layer). */
static int write_keys(gguf_writer *w, const hf_config *c, const hf_arch *arch) {
    char key[160];
    int rc = 0;
    if (c->attn_softcap > 0 && arch->attn_softcap)
        rc |= gguf_set_f32(w, hf_arch_key(arch, "attn_logit_softcapping", key, sizeof key), (float)c->attn_softcap);
    if (c->final_softcap > 0)
        rc |= gguf_set_f32(w, hf_arch_key(arch, "final_logit_softcapping", key, sizeof key), (float)c->final_softcap);
    if (c->sliding_window > 0 && c->sliding_window_pattern != 1)
        rc |= gguf_set_u32(w, hf_arch_key(arch, "attention.sliding_window", key, sizeof key),
                           (uint32_t)c->sliding_window);
    return rc;
}

/* transformers 5.24's Gemma3TextConfig defaults (the rope: 1e6 for the
 * global layers; the sliding ones' 10000 is the runner's default too). */
static const char gemma3_defaults[] =
    "{\"vocab_size\": 262208, \"hidden_size\": 2304, \"intermediate_size\": 9216, \"num_hidden_layers\": 26,"
    " \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 256,"
    " \"hidden_activation\": \"gelu_pytorch_tanh\", \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-6,"
    " \"query_pre_attn_scalar\": 256, \"sliding_window\": 4096, \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0,"
    " \"tie_word_embeddings\": true, \"bos_token_id\": 2, \"eos_token_id\": 1}";

/* transformers' Gemma3ForConditionalGeneration never applies the final cap
 * its text_config may give (Gemma3ForCausalLM does, and so would llama.cpp
 * from the key): refused rather than computed otherwise. */
static int check_gemma3(const hf_config *c, const char *path, hfq_error *err) {
    if (strcmp(c->architecture, "Gemma3ForConditionalGeneration") == 0 && c->final_softcap > 0)
        return hfq_fail(err, path, "field 'final_logit_softcapping' = %g: Gemma3ForConditionalGeneration "
                        "does not apply it (llama.cpp would)", c->final_softcap);
    return 0;
}

const hf_arch hf_arch_gemma = {
    .hf_names = gemma_names,
    .gguf_arch = "gemma",
    .model_type = "gemma",
    .config_attention_bias = true,
    .norm_plus_one = true,
    .drop_lm_head = true,
    .gelu_tanh = true,
    .gelu_legacy = true,
    .vocab_rules = HFQ_VOCAB_SPM_GEMMA,
};

const hf_arch hf_arch_gemma2 = {
    .hf_names = gemma2_names,
    .gguf_arch = "gemma2",
    .model_type = "gemma2",
    .config_attention_bias = true,
    .layer_rows = layer_rows + 2,
    .n_layer_rows = N_ROWS - 2,
    .norm_plus_one = true,
    .drop_lm_head = true,
    .gelu_tanh = true,
    .swa_pattern = 2,
    .attn_softcap = true,
    .final_softcap = true,
    .attn_scale_embd_layers = 46,
    .query_pre_attn_scalar = true,
    .vocab_rules = HFQ_VOCAB_SPM_GEMMA,
    .write_keys = write_keys,
};

const hf_arch hf_arch_gemma3 = {
    .hf_names = gemma3_names,
    .gguf_arch = "gemma3",
    .model_type = "gemma3_text",
    .config_attention_bias = true,
    .layer_rows = layer_rows,
    .n_layer_rows = N_ROWS,
    .norm_plus_one = true,
    .gelu_tanh = true,
    .swa_pattern = 6,
    .final_softcap = true,
    .text_model_only = true,
    .attn_scale_embd_layers = 62,
    .query_pre_attn_scalar = true,
    .vocab_rules = HFQ_VOCAB_SPM_GEMMA,
    .write_keys = write_keys,
    .check_config = check_gemma3,
    .config_defaults = gemma3_defaults,
};
