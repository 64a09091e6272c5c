/* arch.h - the model families the runner computes, by general.architecture.
 *
 * A family is one const hfq_arch_desc in its own file (arch_llama.c,
 * arch_qwen2.c, arch_qwen3.c, arch_phi3.c, arch_gemma.c): its
 * general.architecture string, its rope mode, and the
 * layer tensors whose need differs from the runner's defaults (model.c's
 * layer table: the Llama weights required, q/k/v biases optional, tensors
 * the forward pass does not compute refused). arch.c holds the table and
 * the lookups; model_gguf.c and model.c read descriptors (graph.c the
 * hyper-parameters and tensors they fill) and compare no family ids. The id
 * (hfq_arch) is what hfq_hparams.arch holds, so models bound from memory
 * (tests) name their family the same way.
 *
 * Adding a family:
 *   1. kernels/arch_<family>.c defines `const hfq_arch_desc hfq_arch_<family>`;
 *   2. an id before HFQ_ARCH_COUNT and the extern declaration below, and one
 *      row in arch.c's `families`;
 *   3. the file in kernels/meson.build;
 *   4. only for what no family had before: a new tensor is a field of
 *      hfq_layer plus a row in model.c's layer table whose default need is
 *      "refused", so families without it stay as they are, and its family
 *      lists it as required; a new graph difference (norm weight offset,
 *      activation, embedding scale, soft-capping, sliding window, ...) is a
 *      field of hfq_arch_desc whose zero value is Llama's behaviour, read by
 *      graph.c through hfq_arch_get(hp->arch);
 *   5. the converter's side: src/hf/arch.h.
 */
#ifndef HFQ_KERNELS_ARCH_H
#define HFQ_KERNELS_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"

typedef enum hfq_arch {
    HFQ_ARCH_LLAMA,
    HFQ_ARCH_QWEN2,
    HFQ_ARCH_QWEN3,
    HFQ_ARCH_GEMMA,
    HFQ_ARCH_GEMMA2,
    HFQ_ARCH_GEMMA3,
    HFQ_ARCH_PHI3,
    HFQ_ARCH_QWEN3MOE,
    HFQ_ARCH_COUNT
} hfq_arch;

typedef enum hfq_rope_mode {
    HFQ_ROPE_NORMAL,  /* pairs (2i, 2i+1): GGUF q/k rows are un-permuted */
    HFQ_ROPE_NEOX,    /* pairs (i, i + n_rot/2) */
} hfq_rope_mode;

/* The feed-forward block's gated activation: act(gate) * up. */
typedef enum hfq_ffn_act {
    HFQ_FFN_SILU,         /* SwiGLU */
    HFQ_FFN_GELU_TANH,    /* GeGLU with tanh-approximated GELU (Gemma) */
} hfq_ffn_act;

/* Whether a layer tensor must, may or must not be in the file. */
typedef enum hfq_need {
    HFQ_NEED_REQUIRED,
    HFQ_NEED_OPTIONAL,
    HFQ_NEED_REFUSED,     /* not computed: refusing it beats ignoring part of the model */
} hfq_need;

/* "blk.N.<suffix>" has this need in a family; the suffix is one of model.c's
 * layer table (any other has no effect). */
typedef struct hfq_arch_tensor {
    const char *suffix;
    hfq_need need;
} hfq_arch_tensor;

typedef struct hfq_arch_desc {
    const char *name;                    /* general.architecture */
    hfq_rope_mode rope_mode;
    const hfq_arch_tensor *layer_tensors;  /* needs other than the defaults */
    size_t n_layer_tensors;
    hfq_ffn_act ffn_act;
    bool embd_scale;                     /* the embeddings times sqrt(n_embd) (Gemma) */
    /* Reads attention.sliding_window (absent: n_swa_default),
     * final_logit_softcapping, rope.freq_base_swa and
     * attention.sliding_window_pattern (absent: swa_pattern). The sliding
     * layers' rope: base rope_freq_base_swa unscaled when the file gives
     * none, or with rope_freq_base_swa 0 the global base and scale (as
     * llama.cpp's gemma3 and gemma2 take them). */
    bool swa;
    int64_t n_swa_default, swa_pattern;
    float rope_freq_base_swa;
    bool attn_softcap;                   /* reads attn_logit_softcapping (else a file with it is refused) */
    /* llama.cpp's "27B" rule: with this many layers the attention scale is
     * 1/sqrt(n_embd / n_head), not 1/sqrt(key_length); 0: never. */
    int64_t attn_scale_embd_layers;
    /* ffn_up.weight holds 2 n_ff rows, the gate's then the up's (phi3's
     * gate_up_proj), and there is no ffn_gate.weight */
    bool fused_gate_up;
    /* Mixtures of experts (moe_block: SwiGLU experts, no post-FFN norm):
     * experts, the family may have them when expert_count says so (llama.cpp's
     * llama for Mixtral); moe_only, every layer's feed-forward is one
     * (expert_count must be positive). Elsewhere expert_count > 0 is refused.
     * dense_layers: a layer without the router ffn_gate_inp is a dense
     * SwiGLU (transformers' Qwen3-MoE mlp_only_layers / decoder_sparse_step);
     * otherwise every layer of a file with experts has them. */
    bool experts, moe_only, dense_layers;
} hfq_arch_desc;

/* The families, one file each. */
extern const hfq_arch_desc hfq_arch_llama;  /* arch_llama.c */
extern const hfq_arch_desc hfq_arch_qwen2;  /* arch_qwen2.c */
extern const hfq_arch_desc hfq_arch_qwen3;  /* arch_qwen3.c */
extern const hfq_arch_desc hfq_arch_gemma;  /* arch_gemma.c */
extern const hfq_arch_desc hfq_arch_gemma2; /* arch_gemma.c */
extern const hfq_arch_desc hfq_arch_gemma3; /* arch_gemma.c */
extern const hfq_arch_desc hfq_arch_phi3;   /* arch_phi3.c */
extern const hfq_arch_desc hfq_arch_qwen3moe;  /* arch_qwen3.c too: qwen3 with experts */

/* The descriptor of a family, or NULL for an id outside the table. */
const hfq_arch_desc *hfq_arch_get(hfq_arch id);

/* The id of the family named `name`; fails naming `where` and listing the
 * supported names. */
int hfq_arch_find(const char *name, hfq_arch *id, const char *where, hfq_error *err);

/* The need of layer tensor `suffix` in a family: its own, else dflt. */
hfq_need hfq_arch_need(const hfq_arch_desc *arch, const char *suffix, hfq_need dflt);

#endif
