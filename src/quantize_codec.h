/* quantize_codec.h - rows in and out of the formats, for quantize_run.c.
 *
 * Decodes a stored row (F32, F16, BF16, or a quantized type when
 * requantizing) to float and encodes float rows to a target format of
 * quant/plan.h. One job describes one tensor; the row functions are safe to
 * call from several threads at once.
 */
#ifndef HFQ_SRC_QUANTIZE_CODEC_H
#define HFQ_SRC_QUANTIZE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"

typedef struct hfq_codec_job {
    uint32_t in_type;        /* stored ggml type of the input */
    uint32_t fmt;            /* target format */
    int64_t n_per_row;
    size_t in_row_bytes;
    size_t out_row_bytes;
} hfq_codec_job;

bool hfq_codec_can_decode(uint32_t type);
bool hfq_codec_can_encode(uint32_t fmt);
/* The ggml type a format is stored as in the file. */
uint32_t hfq_codec_storage_type(uint32_t fmt);

/* Prepares the conversion of tensor t to fmt; fails (naming the tensor) when
 * either side is unsupported or the row length does not fit the blocks. */
int hfq_codec_begin(hfq_codec_job *job, const gguf_tensor_info *t, uint32_t fmt, hfq_error *err);
void hfq_codec_decode_row(const hfq_codec_job *job, const void *src, float *dst);
void hfq_codec_encode_row(const hfq_codec_job *job, const float *src, void *dst, const float *importance);

#endif
