/* lora.h - PEFT LoRA adapters (adapter_config.json + adapter_model.safetensors)
 * read against their base checkpoint, and what they change in each base tensor.
 *
 * Opening checks every adapter whole, reading only headers: its config keys
 * (those that change the math and are not implemented are refused, one line
 * naming the key), and every tensor: it must target a tensor of the base (the
 * same name, the family maps it), with shapes that fit the base's, its rank
 * the one adapter_config.json gives (r, or rank_pattern). Then the converter
 * asks, one base tensor at a time, for that tensor's edit: only its own
 * factors are loaded, so memory stays bounded by one tensor.
 *
 * The math is peft's (tuners/lora, merge_and_unload), adapter after adapter:
 *   W += scale * s * B A,  s = alpha / r, or alpha / sqrt(r) with use_rslora;
 * alpha and r per module from alpha_pattern / rank_pattern (the first key
 * K, in file order, for which the module's name matches ^(.*\.)?(K)$, as POSIX
 * extended regular expressions); scale is the command line's (default 1).
 * Embeddings (lora_embedding_A [r, vocab], lora_embedding_B [hidden, r]):
 * W += scale * s * (B A)^T. fan_in_fan_out is reset for these Linear and
 * Embedding layers, as peft does (a warning). DoRA (use_dora): the row-wise
 * W' = m / ||W + s B A|| * (W + s B A) of a Linear layer, exact, when it is
 * the only adapter touching that tensor (refused otherwise; a magnitude without
 * the module's factors too). A tensor stored whole in the adapter
 * (modules_to_save) replaces the base's before later adapters apply (with
 * factors of the same adapter: refused). A "base_layer.weight" that differs
 * from the base's (peft saves it next to an embedding's factors) replaces it
 * too, and the same adapter's factors apply on top, as peft loads and merges
 * it; one for a tensor an earlier adapter changed is refused (ambiguous).
 * use_rslora, use_dora and fan_in_fan_out: true, false or null only.
 * A LoRA on lm_head of a base that ties it to the embedding is refused. */
#ifndef HFQ_SRC_HF_LORA_H
#define HFQ_SRC_HF_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/safetensors.h"
#include "src/hf/arch.h"
#include "src/hf/config.h"

/* A message that does not stop the run (one line, no prefix). */
typedef void (*hf_warn_fn)(void *ctx, const char *msg);

/* One --lora ADAPTER_DIR[:SCALE]. */
typedef struct hf_lora_spec {
    const char *dir;
    double scale;
} hf_lora_spec;

typedef struct hf_lora_set hf_lora_set;

/* Opens and checks the adapters against the base (its config, family and
 * opened checkpoint, which must outlive the set). warn may be NULL. */
hf_lora_set *hf_lora_open(const hf_lora_spec *specs, int n_specs, const hf_config *cfg, const hf_arch *arch,
                          const st_model *base, hf_warn_fn warn, void *warn_ctx, hfq_error *err);
void hf_lora_close(hf_lora_set *set);

/* The config's lora_alpha of adapter i (adapter.lora.alpha of llama.cpp's
 * adapter GGUF) and its folder. */
double hf_lora_alpha(const hf_lora_set *set, int i);
const char *hf_lora_dir(const hf_lora_set *set, int i);

/* One low-rank change, oriented like the base tensor [rows, cols]:
 * delta = scale * b (rows x rank, row-major) @ a (rank x cols, row-major);
 * scale holds the command line's scale and alpha / r (or / sqrt(r)). For an
 * embedding, b is lora_embedding_A transposed and a lora_embedding_B
 * transposed. */
typedef struct hf_lora_factor {
    float *a, *b;
    int64_t rank;
    double scale;
    double rel_scale;     /* scale / (lora_alpha / rank): 1 for a plain LoRA at scale 1 */
    float *magnitude;     /* DoRA: one per row; NULL for plain LoRA */
    int adapter;          /* index of its adapter */
} hf_lora_factor;

/* What the adapters do to one base tensor. */
typedef struct hf_lora_edit {
    const char *base_name;
    int64_t rows, cols;
    /* a whole replacement (from adapter `replaced_by`), or NULL */
    const st_model *replace_st;
    const st_tensor *replace;
    int replaced_by;
    hf_lora_factor *factors;  /* in adapter order, after the replacement */
    int n_factors;
    double *scratch;          /* cols sums for hf_lora_edit_row */
} hf_lora_edit;

/* The edit of base tensor `base` (its Hugging Face name and shape: rows x cols,
 * 1-D tensors 1 x n): 0 with *out NULL when no adapter touches it, 0 with
 * *out set (free with hf_lora_edit_free), or -1 with err set. */
int hf_lora_edit_for(const hf_lora_set *set, const st_tensor *base, int64_t rows, int64_t cols,
                     hf_lora_edit **out, hfq_error *err);
void hf_lora_edit_free(hf_lora_edit *e);

/* Applies the factors to row `row` (Hugging Face row order) of the tensor,
 * w holding it (from the base or the replacement) as floats; returns -1 when
 * the result is not finite (or a DoRA row norm is 0). */
int hf_lora_edit_row(const hf_lora_edit *e, int64_t row, float *w);

#endif
