/* gptq_entry.h - internal to quant/ and its tests: each GPTQ codec
 * (quant/gptq_codec.h) with the layout of its codes, so that a codec's round
 * and a test's brute force over all codes place a code the same way.
 *
 * A code is what a format stores for one value: the level (Q8_0: its int8
 * byte, the K-quants: the unsigned level 0..2^bits - 1 before any bias, the
 * 4-bit formats: the nibble). set writes code c for position i of a stored
 * block, leaving the other positions; get reads it back.
 *
 * grid gives, for the header in state, the value code c of position i
 * stands for in round's arithmetic: round picks the code whose grid value
 * is nearest x. It is the decoded value where the quantizer's final pass
 * rounds against the stored scales (K-quants, FP4); the legacy formats and
 * IQ4 round under the unrounded scale (the weighted legacy searches under
 * their best candidate scale), so their grid is off the decoded one by the
 * scale's rounding.
 *
 * The header step of every codec writes the whole block its format's
 * quantizer writes (codes included); round then rewrites code i. Sub-blocks
 * whose stored scale is zero (every code decodes alike there) keep the
 * quantizer's codes, which is what keeps their bytes.
 */
#ifndef HFQ_QUANT_GPTQ_ENTRY_H
#define HFQ_QUANT_GPTQ_ENTRY_H

#include "quant/gptq_codec.h"

typedef struct hfq_gptq_entry {
    hfq_gptq_codec codec;
    unsigned n_codes;
    void (*set)(void *blk, int64_t i, unsigned code);
    unsigned (*get)(const void *blk, int64_t i);
    float (*grid)(const void *state, int64_t i, unsigned code);
} hfq_gptq_entry;

/* Defines entry hfq_gptq_<name> from name_set, name_get and the rest. */
#define HFQ_GPTQ_ENTRY(name, qt, block, block_t, state_t, header, round, n_codes, grid)                        \
    const hfq_gptq_entry hfq_gptq_##name = {{qt, block, sizeof(block_t), sizeof(state_t), header, round},    \
                                            n_codes, name##_set, name##_get, grid}

/* The entry of format t, or NULL (hfq_gptq_codec_get's formats). */
const hfq_gptq_entry *hfq_gptq_entry_get(hfq_qtype t);

/* The families' entries (quant/gptq_legacy.c, gptq_k.c, gptq_fp4.c). */
extern const hfq_gptq_entry hfq_gptq_q8_0, hfq_gptq_q4_0, hfq_gptq_q4_1, hfq_gptq_q5_0, hfq_gptq_q5_1,
    hfq_gptq_iq4_nl;
extern const hfq_gptq_entry hfq_gptq_q2_k, hfq_gptq_q3_k, hfq_gptq_q4_k, hfq_gptq_q5_k, hfq_gptq_q6_k,
    hfq_gptq_iq4_xs;
extern const hfq_gptq_entry hfq_gptq_mxfp4, hfq_gptq_nvfp4;

/* ---- bit placement shared by the layouts ---- */

/* Element j of a run of 2 half nibbles: the low nibble of qs[j] for j < half,
 * else the high nibble of qs[j - half]. */
static inline void hfq_gptq_nibble_set(uint8_t *qs, int64_t half, int64_t j, unsigned c) {
    if (j < half) qs[j] = (uint8_t)((qs[j] & 0xF0) | (c & 0x0F));
    else qs[j - half] = (uint8_t)((qs[j - half] & 0x0F) | (c & 0x0F) << 4);
}

static inline unsigned hfq_gptq_nibble_get(const uint8_t *qs, int64_t half, int64_t j) {
    return j < half ? qs[j] & 0x0Fu : (unsigned)qs[j - half] >> 4;
}

/* nbits bits at bit offset shift of one byte. */
static inline void hfq_gptq_bits_set(uint8_t *byte, int shift, int nbits, unsigned c) {
    const unsigned mask = ((1u << nbits) - 1) << shift;
    *byte = (uint8_t)((*byte & ~mask) | ((c << shift) & mask));
}

static inline unsigned hfq_gptq_bits_get(const uint8_t *byte, int shift, int nbits) {
    return ((unsigned)*byte >> shift) & ((1u << nbits) - 1);
}

#endif
