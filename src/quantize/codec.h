/* codec.h - rows in and out of the formats, for src/quantize/driver.c.
 *
 * Decodes a stored row (F32, F16, BF16, or a quantized ggml type when
 * requantizing) to float and encodes float rows to a target format of
 * quant/plan.h. One job describes one tensor; the row functions are safe to
 * call from several threads at once.
 *
 * Some formats write a scale tensor beside the weight (docs/format-quant-ext.md):
 * NVFP4 its per-tensor global scale (F32, ne [1]); INT8 and FP8 one scale per
 * row (F32, ne [1, ne1, ne2, ne3]), per group of G values of a row (INT8,
 * ne [ne0/G, ne1, ne2, ne3]), per tensor (ne [1]) or (FP8) per 128x128 block
 * (ne [ceil(ne0/128), ceil(ne1/128), ne2, ne3]), plus the key
 * hfq.qext.<name> naming the encoding of the I8 codes.
 */
#ifndef HFQ_SRC_QUANTIZE_CODEC_H
#define HFQ_SRC_QUANTIZE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/plan.h"

typedef enum hfq_companion {
    HFQ_COMPANION_NONE,
    HFQ_COMPANION_TENSOR_SCALE,   /* one F32: NVFP4's global scale, INT8/FP8 per tensor */
    HFQ_COMPANION_ROW_SCALES,     /* F32 per row or per group of a row: INT8, FP8 */
    HFQ_COMPANION_BLOCK_SCALES,   /* F32 per 128x128 block: FP8 (rows carry their blocks' scales) */
} hfq_companion;

typedef struct hfq_codec_job {
    uint32_t in_type;        /* stored ggml type of the input */
    uint32_t fmt;            /* target format */
    int64_t scale_group;     /* INT8/FP8 granularity (quant/plan.h) */
    int64_t n_per_row;
    int64_t n_row_scales;    /* scales each row writes (ROW_SCALES) or reads (BLOCK_SCALES), else 0 */
    size_t in_row_bytes;
    size_t out_row_bytes;    /* of the weight tensor (companion excluded) */
    float global_scale;      /* TENSOR_SCALE: hfq_codec_global_scale of the whole tensor */
    bool q8_0_search;        /* Q8_0: encode with importance (ours, quant/q_legacy.h), which
                              * hfq_codec_importance_unused otherwise refuses */
} hfq_codec_job;

bool hfq_codec_can_decode(uint32_t type);
bool hfq_codec_can_encode(uint32_t fmt);
/* The ggml type a format is stored as in the file (GT_I8 for INT8/FP8). */
uint32_t hfq_codec_storage_type(uint32_t fmt);
hfq_companion hfq_codec_companion(const hfq_fmt_spec *spec);
/* "int8", "fp8_e4m3", "fp8_e5m2" for the formats stored as I8, else NULL. */
const char *hfq_codec_qext_encoding(uint32_t fmt);
/* The companion's name: the weight's final ".weight" replaced by ".scale"
 * (".scale" appended otherwise); -1 when it does not fit in n bytes. */
int hfq_codec_scale_name(const char *weight_name, char *out, size_t n);
/* Whether the format needs hfq_codec_global_scale over all rows first (the
 * TENSOR_SCALE companions), and that scale from the tensor's absolute
 * maximum (NVFP4: amax / (6*448); INT8 amax/127, FP8 amax/448 or /57344). */
bool hfq_codec_needs_amax(const hfq_fmt_spec *spec);
float hfq_codec_global_scale(const hfq_fmt_spec *spec, float amax);

/* Prepares the conversion of tensor t to spec; fails (naming the tensor)
 * when either side is unsupported or the row length does not fit the blocks
 * or the scale groups. */
int hfq_codec_begin(hfq_codec_job *job, const gguf_tensor_info *t, const hfq_fmt_spec *spec, hfq_error *err);
void hfq_codec_decode_row(const hfq_codec_job *job, const void *src, float *dst);
/* NULL when encoding to spec uses importance rows (importance-weighted
 * rounding or scale searches; MXFP4 has ours, unlike ggml's; INT8 per
 * tensor its tensor scale, src/quantize/tensor_scale.h), else why it
 * cannot: the plain float formats, formats whose quantizer has none, FP8 per
 * block and FP8 per tensor (a searched scale measured no gain), and Q8_0,
 * whose search (ours) a job takes only with q8_0_search set (the quantize
 * tool: in the Q8_0 preset), so that other presets' Q8_0 tensors and the
 * round trips measured for them keep llama.cpp's bytes. */
const char *hfq_codec_importance_unused(const hfq_fmt_spec *spec);

/* Block scales (HFQ_COMPANION_BLOCK_SCALES) in two steps: the absolute
 * maximum of each group of HFQ_SCALE_BLOCK values of a row into
 * amax[n_row_scales]; then, over all rows [n_mats][ne1][n_row_scales] of such
 * maxima, each block's scale = its maximum / the format's largest value
 * (compressed-tensors' symmetric block strategy; 0 for an all-zero block) into
 * blocks [n_mats][ceil(ne1/128)][n_row_scales], and every row's maxima
 * replaced by its blocks' scales, the row_scales encode_row reads. */
void hfq_codec_row_group_amax(const hfq_codec_job *job, const float *row, float *amax);
void hfq_codec_block_scales(const hfq_codec_job *job, int64_t ne1, int64_t n_mats, float *rows, float *blocks);

/* Encodes one row; row_scales receives the row's n_row_scales scales for
 * HFQ_COMPANION_ROW_SCALES formats, holds its blocks' scales for
 * BLOCK_SCALES ones (hfq_codec_block_scales), may be NULL otherwise. importance:
 * n_per_row weights or NULL; formats hfq_codec_importance_unused names
 * ignore it (as llama.cpp's quantizers do, so their bytes stay identical to
 * ggml's). */
void hfq_codec_encode_row(const hfq_codec_job *job, const float *src, void *dst, const float *importance,
                          float *row_scales);
/* The values an encoded row stands for (what a reader of the file gets):
 * enc as encode_row wrote it, row_scales its scales (ROW_SCALES companions;
 * NULL otherwise). */
void hfq_codec_decode_encoded_row(const hfq_codec_job *job, const void *enc, const float *row_scales, float *dst);

/* Encodes nrows rows of n floats to spec as a tensor of that shape would be
 * (global scales over all of them) and decodes them back into dst, for
 * searches that need the rounding error. Fails for formats this build cannot
 * encode, a row length the blocks do not divide, or out of memory. */
int hfq_codec_roundtrip(const hfq_fmt_spec *spec, const float *src, float *dst, int64_t nrows, int64_t n,
                        const float *importance, hfq_error *err);

/* Quantizes and decodes in place nrows activation rows of n floats as the
 * runner does for weights of format fmt (--act-quant auto): INT8/FP8 per
 * token, or with one static scale when static_scale > 0; NVFP4 with a static
 * scale into NVFP4 blocks with that global scale (W4A4; their scale codes
 * searched as hfq.act_quant "nvfp4_search" says when nvfp4_search); the ggml
 * formats and NVFP4 without one through their vec_dot_type (Q8_0, Q8_1,
 * Q8_K, F16, BF16; F32 stays). Fails for formats this build cannot encode
 * and out of memory. */
int hfq_codec_act_roundtrip(uint32_t fmt, float *x, int64_t nrows, int64_t n, float static_scale, bool nvfp4_search,
                            hfq_error *err);

#endif
