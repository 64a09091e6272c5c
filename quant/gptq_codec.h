/* gptq_codec.h - a format's blocks as error-feedback rounding (GPTQ) needs
 * them: a block's header (scales, mins) chosen first, then each value
 * rounded alone under that header, in column order.
 *
 * GPTQ walks a weight row column by column, rounding each value and pushing
 * its rounding error onto the columns not yet rounded; the values of a block
 * therefore change after the block's header is fixed. A codec splits the
 * format's quantizer at that seam:
 *
 *     hfq_gptq_block_in in = {.x = cur, .importance = imp, .row = orig, ...};
 *     codec->header(&in, blk, state);          // scales into blk (and state)
 *     for (i = 0; i < codec->block; i++)
 *         q[i] = codec->round(state, blk, i, cur[i]);   // code i into blk
 *
 * after which blk holds the block's bytes exactly as the format stores them.
 * The promise every codec keeps, and its tests check byte for byte: when the
 * values do not change between header and rounding (cur is the block's input
 * throughout), the bytes equal the format's own quantizer's (qtype.h's
 * quantize, with and without importance) - so GPTQ without feedback is
 * llama.cpp's quantization, and every difference is the feedback's. round
 * returns exactly the value a reader of the file decodes for the code it
 * chose (the dequantizer's arithmetic), so the fed-back error is the true one.
 *
 * Formats keep their own choice of header from ggml (importance-weighted
 * scale searches included); round takes the code nearest x under the header,
 * with the arithmetic the format's quantizer uses for its final codes.
 */
#ifndef HFQ_QUANT_GPTQ_CODEC_H
#define HFQ_QUANT_GPTQ_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "quant/qtype.h"

typedef struct hfq_gptq_block_in {
    const float *x;          /* the block's values now: block floats */
    const float *importance; /* the block's importance (block floats), or NULL: none */
    /* the whole row before any rounding (ggml's legacy formats weight their
     * importance by the row's mean square) and its length; the block starts
     * at row[offset] */
    const float *row;
    int64_t n_per_row;
    int64_t offset;
    float global_scale;      /* NVFP4's per-tensor scale (codec.h); 0: none */
} hfq_gptq_block_in;

typedef struct hfq_gptq_codec {
    hfq_qtype type;
    int64_t block;           /* values one header covers (the block or super-block) */
    size_t block_bytes;      /* bytes of one stored block */
    size_t state_bytes;      /* scratch round reads (decoded scales), at most HFQ_GPTQ_STATE_MAX,
                              * aligned as malloc's (codecs keep floats and pointers there) */
    /* Chooses the block's header from in, writes its header fields into blk
     * (block_bytes; the codes are left for round) and what round needs into
     * state (state_bytes). */
    void (*header)(const hfq_gptq_block_in *in, void *blk, void *state);
    /* Stores into blk the code of position i (0 <= i < block) nearest x
     * under the header, and returns the value that code decodes to. */
    float (*round)(const void *state, void *blk, int64_t i, float x);
} hfq_gptq_codec;

#define HFQ_GPTQ_STATE_MAX 1024

/* The codec of format t, or NULL when t has none (floats, activation
 * formats, and formats listed as not yet in docs/calibration.md). */
const hfq_gptq_codec *hfq_gptq_codec_get(hfq_qtype t);

#endif
