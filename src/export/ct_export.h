/* ct_export.h - a quantized GGUF as a compressed-tensors checkpoint (the
 * Hugging Face model folder vLLM, SGLang and transformers load).
 *
 * The folder holds config.json (the family's config in transformers 5's
 * layout plus `quantization_config` in compressed-tensors' schema), the
 * weights in safetensors (model.safetensors, or shards with
 * model.safetensors.index.json past the shard size) and, when asked, the
 * tokenizer files of a source folder or rebuilt from the GGUF's
 * tokenizer.* keys (src/export/ct_tokenizer.h). Each weight keeps the codes and scales
 * of the GGUF exactly; only their layout changes (docs/export.md):
 *   FP8 E4M3 / INT8 (I8 codes, docs/format-quant-ext.md): `weight` (F8_E4M3 /
 *     I8), `weight_scale` (F32: [1] per tensor, [rows, 1] per channel,
 *     [rows, cols/G] per group, [ceil(rows/128), ceil(cols/128)] per FP8
 *     block: strategy "block", its activations dynamic per group of 128 as
 *     compressed-tensors' FP8_BLOCK preset; q/k only with head_dim dividing 128), `input_scale` (F32 [1]) when the GGUF has a
 *     static activation scale; formats float-quantized / int-quantized.
 *   NVFP4 (ggml type 40): `weight_packed` (U8 [rows, cols/2], element 2i in
 *     the low nibble), `weight_scale` (F8_E4M3 [rows, cols/16], the block
 *     scale bytes), `weight_global_scale` = 1 / g (compressed-tensors divides
 *     by its global scale where the GGUF multiplies); nvfp4-pack-quantized;
 *     with an activation scale s_a (W4A4) also `input_global_scale` = 1 / s_a,
 *     the activations' E4M3 scale per 16 values computed per token
 *     ("dynamic": "local"), as our runner's CPU_ACT_NVFP4 does.
 *   INT4 in groups (W4A16: the export quantizes float weights itself, as
 *     src/export/ct_int4.h says); pack-quantized.
 *   F32 / F16 / BF16: the same values, in the ignore list when a linear layer.
 * The activation side follows the GGUF: an input scale is static per tensor,
 * none is dynamic per token (FP8, INT8) or no activation quantization
 * (NVFP4A16). One config group per distinct scheme (mixed recipes get
 * several, each targeting its layers by name; a single group targets
 * "Linear"). q/k rows go back to Hugging Face's rotate-half order where the
 * family's converter un-permuted them (src/hf/arch.h permute_qk).
 *
 * A tensor no compressed-tensors format holds (K-quants and the other ggml
 * block formats, FP8 E5M2, a quantized embedding)
 * or that has no Hugging Face
 * name is refused with one line naming it, before anything is written; so is
 * what config.json cannot say. Llama 3's rope_freqs.weight becomes
 * rope_parameters (src/hf/rope_llama3.h), refused when no parameters
 * reproduce it.
 *
 * The folder is written as a temporary folder beside OUT_DIR
 * ("OUT_DIR.tmp.XXXXXX") renamed when complete; OUT_DIR must not exist or be
 * an empty folder. A process killed by a signal leaves the temporary folder
 * (the atomic-file registry covers files, not folders).
 */
#ifndef HFQ_SRC_EXPORT_CT_EXPORT_H
#define HFQ_SRC_EXPORT_CT_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/plan.h"

/* The compressed-tensors presets the quantize tool exports, by their names
 * in compressed_tensors.quantization.quant_scheme, and the quantize preset
 * that produces each. */
typedef enum hfq_ct_acts {
    HFQ_CT_ACTS_STATIC,      /* needs --act-scales (input scales; NVFP4: W4A4) */
    HFQ_CT_ACTS_NONE,        /* no input scales: dynamic (FP8, INT8) or 16-bit (NVFP4A16) */
    HFQ_CT_ACTS_EITHER,      /* static with input scales, else dynamic */
} hfq_ct_acts;

typedef struct hfq_ct_preset {
    const char *name;        /* "FP8", "FP8_DYNAMIC", "FP8_BLOCK", "W8A8", "NVFP4", "NVFP4A16", "W4A16", "W4A16_ASYM" */
    hfq_preset preset;
    hfq_ct_acts acts;
    int64_t int4_group;      /* > 0: the export quantizes the float linear weights to INT4 (ct_int4.h) */
    bool int4_asymmetric;
    bool fp8_block;          /* FP8 weights with 128x128 block scales (FP8_BLOCK) */
} hfq_ct_preset;

/* The preset of that name (case-insensitive; "INT8" is W8A8), or NULL. */
const hfq_ct_preset *hfq_ct_preset_find(const char *name);
/* Their names, ", "-separated, for messages. */
const char *hfq_ct_preset_names(void);

/* A folder being written: a temporary folder renamed to out_dir on commit. */
typedef struct hfq_ct_dir {
    char *out_dir;
    char *tmp_dir;
} hfq_ct_dir;

/* Refuses an out_dir that exists and is not an empty folder, or whose parent
 * is missing; creates the temporary folder. */
int hfq_ct_dir_begin(hfq_ct_dir *d, const char *out_dir, hfq_error *err);
/* The path of file `name` inside the temporary folder, in buf. */
const char *hfq_ct_dir_file(const hfq_ct_dir *d, const char *name, char *buf, size_t cap);
int hfq_ct_dir_commit(hfq_ct_dir *d, hfq_error *err);
/* Removes the temporary folder with the files in it (there are no folders). */
void hfq_ct_dir_abort(hfq_ct_dir *d);

typedef struct hfq_ct_opts {
    const char *tokenizer_from;   /* folder whose tokenizer files are copied; NULL: rebuilt (ct_tokenizer.h) */
    bool no_tokenizer;            /* without tokenizer_from: no tokenizer files */
    /* > 0: F32/F16/BF16 linear weights (lm_head excepted) become INT4 in
     * groups of this size (src/export/ct_int4.h), with zero points when
     * asymmetric; 0: they stay as they are */
    int64_t int4_group;
    bool int4_asymmetric;
    /* INT4: the importance row (n_per_row values, calibration's input mean
     * squares, valid until the next call) of the named GGUF weight, or NULL;
     * importance NULL: compressed-tensors' min-max (ct_int4.h) */
    const float *(*importance)(void *ctx, const char *name, int64_t n_per_row);
    void *importance_ctx;
    /* INT4 rounded by GPTQ (src/export/ct_int4_gptq.h): U (quant/gptq.h) of
     * the named GGUF weight's input ([n_per_row][n_per_row], valid until the
     * next call), or NULL: none (err untouched; rounded as above) or a
     * failure (err set). gptq NULL: no GPTQ */
    const double *(*gptq)(void *ctx, const char *name, int64_t n_per_row, hfq_error *err);
    void *gptq_ctx;
    int64_t gptq_batch;           /* lazy batch (quant/gptq.h); <= 0: the default */
    int n_threads;                /* GPTQ's threads; <= 0: OpenMP's default */
    uint64_t max_shard_bytes;     /* tensor bytes per safetensors file; 0: 4 GiB */
} hfq_ct_opts;

/* Writes the checkpoint of f into d's temporary folder. */
int hfq_ct_export(const gguf_file *f, const hfq_ct_dir *d, const hfq_ct_opts *opts, hfq_error *err);

#endif
