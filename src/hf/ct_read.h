/* ct_read.h - compressed-tensors checkpoints as hfconv inputs: config.json's
 * quantization_config (quant_method "compressed-tensors") and each quantized
 * weight's tensors, checked against the weight's shape and read exactly.
 *
 * The config: config_groups (each with targets, weights, input_activations,
 * format), the top-level format and ignore list; a module's scheme is the
 * group of its first matching target in compressed-tensors' order (exact
 * names, then "re:" regexes sorted by text, matched from the name's start
 * like Python's re.match, then the class names "Linear" / "Embedding"),
 * unless a target of `ignore` matches it. actorder "weight" changes nothing
 * stored; "group" reads M.weight_g_idx (I32/I64 [cols], each group exactly G
 * columns) and dequantizes. Refused, one line naming the key:
 * a quantization_status other than "compressed", a kv_cache_scheme other
 * than static FP8 per tensor (src/hf/ct_kv.h), output_activations, sparsity or transforms, an unknown format, weight
 * arguments no format below stores, activations other than none, static per
 * tensor or dynamic per token / per group (8-bit, symmetric), MXFP4's
 * dynamic per 32 with E8M0 scales on MXFP4 weights, or NVFP4's
 * per-16 local scales (activation quantization of dequantized weights is not
 * emulated by the runner: docs/hfconv.md). Model Optimizer configs fill the
 * same schemes (src/hf/modelopt_read.h).
 *
 * Formats (the tensors of module M; scales F32/F16/BF16 unless said):
 *   float-quantized, int-quantized, naive-quantized: M.weight (F8_E4M3, or
 *     I8 for 8-bit ints), M.weight_scale per tensor [1], per channel
 *     [rows, 1], per group [rows, cols / G] or per block
 *     [ceil(rows / br), ceil(cols / bc)], M.weight_zero_point (asymmetric,
 *     the scale's shape), M.input_scale [1] for static activations;
 *   pack-quantized: M.weight_packed (I32 [rows, ceil(cols * b / 32)], value
 *     i of a row at bit i * b of the row's words, as q + 2^(b-1)),
 *     M.weight_shape (I32/I64 [2] = rows, cols), M.weight_scale,
 *     M.weight_zero_point (asymmetric: group/channel packed the same way
 *     down the rows as I32, per tensor as I8);
 *   nvfp4-pack-quantized: M.weight_packed (U8 [rows, cols / 2], value 2i in
 *     the low nibble), M.weight_scale (F8_E4M3 [rows, cols / 16]),
 *     M.weight_global_scale (F32 [1]), M.input_global_scale (W4A4);
 *   mxfp4-pack-quantized: M.weight_packed as NVFP4, M.weight_scale (U8
 *     [rows, cols / 32], E8M0 exponents).
 * Values (hf_ct_weight_row) are compressed-tensors' decompression bit for bit
 * (compressors/, quantization/lifecycle/forward.py _dequantize): (q - z) * s
 * computed in the scale's dtype (each product rounded to it); NVFP4
 * fp4 * (s / global_scale) with the quotient in float32 (bfloat16 when the
 * global scale is) and the product rounded to bfloat16; MXFP4
 * fp4 * 2^(e - 127) in bfloat16. Shapes that disagree, missing tensors,
 * wrong dtypes, NaN / Inf / negative scales are refused naming the tensor.
 *
 * Kept formats (hf_ct_weight_keep), where a GGUF format of ours holds the
 * same numbers (docs/format-quant-ext.md): FP8 E4M3 per tensor / channel /
 * 128x128 block and
 * INT8 per tensor / channel / group, symmetric (I8 codes + F32 .scale);
 * NVFP4 with rows of whole 64-value blocks (ggml NVFP4 + .scale =
 * 1 / global_scale); MXFP4 with rows of whole 32-value blocks (ggml MXFP4).
 * Static activation scales become the GGUF's .input_scale (NVFP4: 1 /
 * input_global_scale).
 */
#ifndef HFQ_SRC_HF_CT_READ_H
#define HFQ_SRC_HF_CT_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/safetensors.h"

typedef struct hf_ct_config hf_ct_config;

/* x rounded to a value of dt (ST_F32, ST_F16 or ST_BF16), ties to even, as
 * torch rounds each step computed in that dtype. */
float hf_ct_round_to(st_dtype dt, float x);

/* config.json's quantization_config when it is compressed-tensors' (*out
 * NULL otherwise: no quantization_config, or another quant_method). */
int hf_ct_config_load(const char *config_path, hf_ct_config **out, hfq_error *err);
void hf_ct_config_free(hf_ct_config *c);

/* Whether the config has a static FP8 kv_cache_scheme (src/hf/ct_kv.h). */
bool hf_ct_config_kv_scheme(const hf_ct_config *c);

/* A tensor a quantized weight carries beside its codes (read with it), or a
 * KV-cache scale (src/hf/ct_kv.h). */
bool hf_ct_side_tensor(const char *name);
/* "M.weight_packed" (the codes of the packed formats): "M.weight" in buf. */
bool hf_ct_packed_weight_name(const char *name, char *buf, size_t cap);

typedef enum hf_ct_keep {
    HF_CT_DEQUANT,       /* no GGUF format of ours holds it: written as floats */
    HF_CT_KEEP_INT8,     /* I8 codes, hfq.qext int8, F32 .scale */
    HF_CT_KEEP_FP8,      /* I8 codes, hfq.qext fp8_e4m3, F32 .scale */
    HF_CT_KEEP_NVFP4,    /* ggml NVFP4 blocks, .scale = 1 / global scale */
    HF_CT_KEEP_MXFP4,    /* ggml MXFP4 blocks */
} hf_ct_keep;

typedef struct hf_ct_weight hf_ct_weight;

/* The weight of module (e.g. "model.layers.0.mlp.up_proj", an Embedding when
 * embedding) as rows x cols; *out NULL when the config leaves it as floats. */
int hf_ct_weight_open(const hf_ct_config *c, const st_model *st, const char *module, bool embedding, int64_t rows,
                      int64_t cols, hf_ct_weight **out, hfq_error *err);
void hf_ct_weight_close(hf_ct_weight *w);

/* The tensor holding the codes (M.weight or M.weight_packed). */
const st_tensor *hf_ct_weight_codes(const hf_ct_weight *w);
/* The dtype compressed-tensors decompresses to (F32, F16 or BF16). */
st_dtype hf_ct_weight_dtype(const hf_ct_weight *w);
/* "FP8 E4M3 per block 128x128", for messages. */
const char *hf_ct_weight_what(const hf_ct_weight *w);
/* Row r decompressed (cols floats); -1 when a value is not finite. */
int hf_ct_weight_row(const hf_ct_weight *w, int64_t r, float *dst);

hf_ct_keep hf_ct_weight_keep(const hf_ct_weight *w);
/* Kept: row r in the GGUF layout (cols I8 codes, or the ggml blocks). */
void hf_ct_weight_raw_row(const hf_ct_weight *w, int64_t r, void *dst);
/* Kept I8: the F32 .scale, ne0 values per row (0: one for the tensor). */
const float *hf_ct_weight_scales(const hf_ct_weight *w, int64_t *ne0);
/* Kept FP8 per 128x128 block: true with the block counts (nb0 = ceil(cols /
 * 128), nb1 = ceil(rows / 128)), the .scale's ne; hf_ct_weight_scales then
 * holds nb1 rows of nb0 (ne0 = nb0). */
bool hf_ct_weight_block(const hf_ct_weight *w, int64_t *nb0, int64_t *nb1);
/* Kept NVFP4: the global scale g of W = g * block value. */
float hf_ct_weight_global(const hf_ct_weight *w);
/* The GGUF's hfq.act_quant for this weight when kept: "none" where the
 * checkpoint quantizes no activations (weight-only), "mxfp4" for MXFP4
 * weights with dynamic MXFP4 activations (W4A4), "int8_ct" for INT8 weights
 * with dynamic per-token INT8 ones (W8A8: compressed-tensors' amax / 127.5);
 * NULL otherwise. */
const char *hf_ct_weight_act_quant(const hf_ct_weight *w);
/* The hfq.act_quant of this weight written as floats: "fp8_e4m3_g<G>" for
 * dynamic FP8 activations per G values of each token (FP8_BLOCK), which the
 * runner emulates on float weights (such weights are dequantized to F32,
 * code * scale unrounded); NULL otherwise (INT8 groups: not emulated, float
 * activations). */
const char *hf_ct_weight_float_act_quant(const hf_ct_weight *w);
/* A static activation scale (GGUF .input_scale): true and *s when there is one. */
bool hf_ct_weight_input_scale(const hf_ct_weight *w, float *s);

#endif
