/* arch.h - Hugging Face model families and how their checkpoints map to GGUF.
 *
 * A family is one const hf_arch in its own file (arch_llama.c, arch_qwen2.c,
 * arch_qwen3.c, arch_phi3.c, arch_gemma.c, arch_mixtral.c, arch_qwen3moe.c):
 * the `architectures[0]` names it accepts, its GGUF architecture string, the
 * tensor rows it has beyond the shared ones (embedding, norms, attention and
 * SwiGLU projections, as every supported family names them), whether q/k rows
 * are un-permuted from Hugging Face's rotate-half order (llama-style RoPE),
 * and a hook for the GGUF keys only it writes. arch.c holds the shared rows,
 * the table of families and the lookups; the converter (convert.c) reads
 * descriptors only, so it names no family. Names and keys are those of
 * llama.cpp's convert_hf_to_gguf.py (the family's model class there).
 *
 * Adding a family:
 *   1. src/hf/arch_<family>.c defines `const hf_arch hf_arch_<family>`: its
 *      names, gguf_arch, model_type and config_* (the export's config.json),
 *      layer_rows beyond the shared ones, flags, write_keys;
 *   2. its extern declaration below, and one row in arch.c's `families`;
 *   3. the file in src/meson.build;
 *   4. only for kinds of tensor no family had before: a role in hf_role (at
 *      its place in GGUF tensor order) and, for a new shape, an hf_dim (its
 *      value from config.json in convert.c's dim_size);
 *   5. the runner's side: kernels/arch.h.
 * A family needs nothing in quant/plan.c unless llama.cpp's llama-quant.cpp
 * tests its architecture string (plan.c's model_is_70b and the like): those
 * rules are keyed on tensor names.
 */
#ifndef HFQ_SRC_HF_ARCH_H
#define HFQ_SRC_HF_ARCH_H

#include <stdbool.h>
#include <stddef.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "src/hf/config.h"
#include "src/tokenizer/vocab.h"

/* What a tensor is; within a block, GGUF files list tensors in this order. */
typedef enum hf_role {
    ROLE_TOKEN_EMBD, ROLE_ATTN_NORM, ROLE_ATTN_QKV, ROLE_ATTN_Q, ROLE_ATTN_Q_BIAS, ROLE_ATTN_Q_NORM, ROLE_ATTN_K,
    ROLE_ATTN_K_BIAS, ROLE_ATTN_K_NORM, ROLE_ATTN_V, ROLE_ATTN_V_BIAS, ROLE_ATTN_OUT, ROLE_ATTN_POST_NORM,
    ROLE_FFN_NORM, ROLE_FFN_GATE, ROLE_FFN_UP, ROLE_FFN_DOWN, ROLE_FFN_POST_NORM,
    /* mixture of experts: the router, and each expert's SwiGLU projections
     * stacked into one 3-D tensor (experts.c) */
    ROLE_FFN_GATE_INP, ROLE_FFN_GATE_EXPS, ROLE_FFN_UP_EXPS, ROLE_FFN_DOWN_EXPS,
    ROLE_OUTPUT_NORM, ROLE_OUTPUT,
    ROLE_SKIP,                /* present in checkpoints, not needed (rotary inv_freq) */
    ROLE_COUNT
} hf_role;

/* A dimension of a tensor's shape, as config.json gives it. */
typedef enum hf_dim {
    HF_DIM_NONE,              /* no such axis (the columns of a 1-D tensor) */
    HF_DIM_VOCAB, HF_DIM_HIDDEN, HF_DIM_FF,
    HF_DIM_Q,                 /* n_heads * head_dim */
    HF_DIM_KV,                /* n_kv_heads * head_dim */
    HF_DIM_HEAD,              /* head_dim (per-head norms) */
    HF_DIM_QKV,               /* Q + 2 KV: fused q, k, v rows (Phi-3's qkv_proj) */
    HF_DIM_FF2,               /* 2 * intermediate_size: fused gate, up rows (gate_up_proj) */
    HF_DIM_EXPERTS,           /* the number of experts (the router's rows) */
    HF_DIM_FF_EXP,            /* one expert's feed-forward width */
} hf_dim;

/* One kind of tensor. Layer rows name what follows "model.layers.N." and
 * "blk.N."; the others name whole tensors. A family's layer row with the
 * role of a shared one replaces it; with hf_name NULL it removes it (Phi-3's
 * fused projections have no separate q/k/v or gate). A '*' in hf_name
 * stands for an expert's index ("block_sparse_moe.experts.*.w1.weight"):
 * each expert is one [rows, cols] tensor, and GGUF has them stacked as one
 * 3-D tensor (ne = {cols, rows, experts}). */
typedef struct hf_tensor_row {
    const char *hf_name;
    const char *gguf_name;    /* NULL for ROLE_SKIP */
    hf_role role;
    hf_dim rows, cols;        /* Hugging Face [rows, cols]; cols HF_DIM_NONE: 1-D */
} hf_tensor_row;

typedef struct hf_arch hf_arch;
struct hf_arch {
    const char *const *hf_names;      /* accepted architectures[0], NULL-terminated */
    const char *gguf_arch;            /* general.architecture */
    bool permute_qk;                  /* HF rotate-half -> GGUF interleaved q/k rows */
    /* Whether the family's runner computes longrope scaling (Phi-3's
     * per-frequency factors): a config asking for it is refused otherwise. */
    bool longrope;
    /* The config.json transformers writes for the family (src/export writes
     * it back): model_type, and which of the keys attention_bias, mlp_bias
     * and use_sliding_window its config class has. */
    const char *model_type;
    bool config_attention_bias, config_mlp_bias, config_sliding_window;
    const hf_tensor_row *layer_rows;  /* beyond the shared ones (a row with a shared row's Hugging Face
                                       * name or role replaces it); every row but ROLE_SKIP required */
    size_t n_layer_rows;
    /* Gemma: norm weights are stored as 1 + w (the checkpoint's RMSNorm
     * multiplies by 1 + w; llama.cpp's converter adds the one), lm_head is
     * dropped (the output is token_embd), GeGLU with tanh GELU, sliding
     * windows on the layers of llama.cpp's pattern (layer i slides when
     * i % swa_pattern < swa_pattern - 1; 0: none, unless sliding_window below
     * puts one on every layer), and which
     * soft-capping keys the family computes. */
    bool norm_plus_one, drop_lm_head, gelu_tanh;
    /* hidden_act "gelu" means the tanh GELU (GemmaConfig's legacy value);
     * elsewhere it is the exact GELU, refused. */
    bool gelu_legacy;
    int64_t swa_pattern;
    bool attn_softcap, final_softcap;
    /* A multimodal checkpoint whose text model is converted alone: tensor
     * names lose "language_model." (as the converter's filter), and those of
     * the vision tower and projector are skipped. */
    bool text_model_only;
    /* llama.cpp's attention scale 1/sqrt(key_length), or 1/sqrt(n_embd /
     * n_head) with this many layers ("27B"); 0: the family has no
     * query_pre_attn_scalar (refused). A config whose scalar gives another
     * scale is refused. */
    int64_t attn_scale_embd_layers;
    bool query_pre_attn_scalar;
    /* The transformers config class's defaults (JSON text) for the keys that
     * change the math, for configs that leave them out (Gemma 3's multimodal
     * checkpoints give a few text_config keys only); NULL: none. */
    const char *config_defaults;
    /* The keys only this family writes, after general.file_type (where
     * convert_hf_to_gguf.py's model classes add theirs); NULL: none.
     * Returns non-zero when a key cannot be set. */
    int (*write_keys)(gguf_writer *w, const hf_config *c, const hf_arch *arch);
    /* Refusals of config values only this family's math rules out (rope
     * variants, factor lists of the wrong length); NULL: none. `path` names
     * config.json in the one-line error. */
    int (*check_config)(const hf_config *c, const char *path, hfq_error *err);
    /* The family's own tensors outside the blocks, after the others
     * (Phi-3's longrope factors): how many for this config, and each one's
     * name, length (1-D F32) and values. NULL: none. */
    int64_t (*n_extra_tensors)(const hf_config *c);
    void (*extra_tensor)(const hf_config *c, int64_t i, const char **name, int64_t *n, const float **values);
    /* Whether the family's runner takes partial rotary embeddings
     * (partial_rotary_factor < 1), and a narrow sliding window on every layer
     * (sliding_window, with swa_pattern 0: Phi-3 writes attention.sliding_window
     * and its runner masks every layer by it). */
    bool partial_rotary, sliding_window;
    hfq_vocab_spm_rules vocab_rules;  /* how a SentencePiece vocabulary reads (added tokens, space prefix) */
    /* transformers 5's fused experts (save_original_format=False): the layer
     * prefix of "<prefix>gate_up_proj" ([experts, 2 ff, hidden], each
     * expert's gate rows then its up rows) and "<prefix>down_proj"
     * ([experts, hidden, ff]); NULL: the family has none. */
    const char *fused_experts;
    /* config.json's mlp_only_layers and decoder_sparse_step make layers
     * dense (Qwen3-MoE); elsewhere a dense layer they would ask for is
     * refused (transformers' other classes ignore the keys). */
    bool dense_layers;
};

/* The families, one file each. */
extern const hf_arch hf_arch_llama;   /* arch_llama.c */
extern const hf_arch hf_arch_qwen2;   /* arch_qwen2.c */
extern const hf_arch hf_arch_qwen3;   /* arch_qwen3.c */
extern const hf_arch hf_arch_gemma;   /* arch_gemma.c */
extern const hf_arch hf_arch_gemma2;  /* arch_gemma.c */
extern const hf_arch hf_arch_gemma3;  /* arch_gemma.c */
extern const hf_arch hf_arch_phi3;    /* arch_phi3.c */
extern const hf_arch hf_arch_mixtral; /* arch_mixtral.c */
extern const hf_arch hf_arch_qwen3moe;/* arch_qwen3moe.c */

/* The architecture names of every family, ", "-separated, in buf (for
 * --help and errors); returns buf. */
const char *hf_arch_supported(char *buf, size_t cap);

/* The family accepting an architecture name, or NULL (err lists the supported ones). */
const hf_arch *hf_arch_find(const char *hf_name, const char *config_path, hfq_error *err);

/* The config_defaults of the family accepting an architecture name, or NULL
 * (hf_config_load_defaults' callback). */
const char *hf_arch_config_defaults(const char *hf_name);

/* The family writing general.architecture `gguf_arch`, or NULL. */
const hf_arch *hf_arch_find_gguf(const char *gguf_arch);

/* The vocabulary rules (vocab.h) of the family DIR/config.json's
 * architectures[0] names: Llama's when there is no config.json or it names
 * no family here (a tokenizer folder). */
hfq_vocab_spm_rules hf_arch_vocab_rules(const char *dir);

/* "<gguf_arch>.<suffix>" in buf; returns buf. */
const char *hf_arch_key(const hf_arch *arch, const char *suffix, char *buf, size_t cap);

/* The i-th layer row of a family (the shared ones, then its own), or NULL
 * past the last. */
const hf_tensor_row *hf_arch_layer_row(const hf_arch *arch, size_t i);

/* The row of a tensor outside the blocks (ROLE_TOKEN_EMBD, ROLE_OUTPUT_NORM,
 * ROLE_OUTPUT), or NULL for other roles. */
const hf_tensor_row *hf_arch_global_row(hf_role role);

typedef struct hf_tensor_map {
    const hf_tensor_row *row;
    int layer;                /* -1 for tensors outside the blocks */
    int expert;               /* the '*' of a per-expert row; -1 otherwise */
} hf_tensor_map;

/* Whether a family has experts (rows with '*' in their names). */
bool hf_arch_has_experts(const hf_arch *arch);

/* Maps a Hugging Face tensor name. Returns 0 and fills out, or -1 when the
 * name is not one this family has. n_layers bounds the layer index,
 * n_experts the expert index. */
int hf_map_tensor(const hf_arch *arch, const char *hf_name, int n_layers, int n_experts, hf_tensor_map *out);

/* The GGUF name ("blk.3.attn_q.weight") for a mapped tensor (not ROLE_SKIP). */
void hf_gguf_name(const hf_tensor_map *m, char *buf, size_t cap);

#endif
