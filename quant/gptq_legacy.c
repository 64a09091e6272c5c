/* gptq_legacy.c - GPTQ codecs (quant/gptq_codec.h) of the 32-element
 * formats: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL.
 *
 * Headers are the quantizers' own (q_legacy.c, iq4.c): without importance
 * the reference scale (and min) from the block's extremes; with importance
 * the weighted search, its error weights importance * sqrt(sigma2 + x^2)
 * with sigma2 the mean square of the whole row (in->row), as ggml. round
 * applies the quantizer's level arithmetic to the one value: the
 * reference's truncation of x / d + 0.5 with the unrounded d, the searches'
 * nearest_int under the inverse scale they kept, IQ4_NL's nearest level
 * under 1 / d. Those grids are the stored ones up to the fp16 rounding of d
 * and m, except the weighted searches', which round with their best
 * candidate scale and store the least-squares scale of those levels. */
#include <string.h>

#include "quant/block_math.h"
#include "quant/gptq_entry.h"
#include "quant/iq4.h"
#include "quant/q_legacy.h"
#include "quant/scale_search.h"

/* ---- layouts ---- */

static void q8_0_set(void *blk, int64_t i, unsigned c) {
    ((hfq_block_q8_0 *)blk)->qs[i] = (int8_t)(uint8_t)c;
}
static unsigned q8_0_get(const void *blk, int64_t i) {
    return (uint8_t)((const hfq_block_q8_0 *)blk)->qs[i];
}

/* 32 nibbles in field qs of block_t, element j low for j < 16 */
#define NIBBLE_CODES(name, block_t)                                                          \
    static void name##_set(void *blk, int64_t i, unsigned c) {                               \
        hfq_gptq_nibble_set(((block_t *)blk)->qs, HFQ_QK / 2, i, c);                        \
    }                                                                                        \
    static unsigned name##_get(const void *blk, int64_t i) {                                 \
        return hfq_gptq_nibble_get(((const block_t *)blk)->qs, HFQ_QK / 2, i);              \
    }

/* Q5: the low four bits as Q4, bit 4 of element i in bit i of qh. */
#define Q5_CODES(name, block_t)                                                              \
    static void name##_set(void *blk, int64_t i, unsigned c) {                               \
        block_t *b = (block_t *)blk;                                                         \
        hfq_gptq_nibble_set(b->qs, HFQ_QK / 2, i, c);                                        \
        hfq_gptq_bits_set(&b->qh[i / 8], (int)(i % 8), 1, c >> 4);                           \
    }                                                                                        \
    static unsigned name##_get(const void *blk, int64_t i) {                                 \
        const block_t *b = (const block_t *)blk;                                             \
        return hfq_gptq_nibble_get(b->qs, HFQ_QK / 2, i) |                                   \
               hfq_gptq_bits_get(&b->qh[i / 8], (int)(i % 8), 1) << 4;                       \
    }

NIBBLE_CODES(q4_0, hfq_block_q4_0)
NIBBLE_CODES(q4_1, hfq_block_q4_1)
NIBBLE_CODES(iq4_nl, hfq_block_iq4_nl)
Q5_CODES(q5_0, hfq_block_q5_0)
Q5_CODES(q5_1, hfq_block_q5_1)

/* ---- Q4_0, Q4_1, Q5_0, Q5_1 ---- */

typedef struct legacy_state {
    hfq_legacy_map map;
    float d, m; /* as stored */
    void (*set)(void *blk, int64_t i, unsigned c);
} legacy_state;

static void legacy_header(hfq_legacy_kind k, void (*set)(void *, int64_t, unsigned), const hfq_gptq_block_in *in,
                          void *blk, void *state) {
    legacy_state *st = (legacy_state *)state;
    float w[HFQ_QK];
    if (in->importance) {
        const float sigma2 = hfq_sum_squares(in->n_per_row, in->row) / in->n_per_row;
        hfq_importance_weights(HFQ_QK, in->x, in->importance, sigma2, w);
    }
    hfq_legacy_block_map(k, in->x, in->importance ? w : NULL, &st->map);
    uint8_t L[HFQ_QK];
    for (int j = 0; j < HFQ_QK; j++) L[j] = (uint8_t)hfq_legacy_level(&st->map, in->x[j]);
    hfq_legacy_store(k, L, st->map.d, st->map.m, blk);
    st->d = hfq_fp16_to_f32(hfq_f32_to_fp16(st->map.d));
    st->m = hfq_fp16_to_f32(hfq_f32_to_fp16(st->map.m));
    st->set = set;
}

/* The decoders' arithmetic: d * (L - nmax), or L * d + m. */
static float legacy_round(const void *state, void *blk, int64_t i, float x) {
    const legacy_state *st = (const legacy_state *)state;
    const int L = hfq_legacy_level(&st->map, x);
    st->set(blk, i, (unsigned)L);
    if (st->map.affine) return HFQ_FMUL((float)L, st->d) + st->m;
    return (float)(L - st->map.nmax) * st->d;
}

static float legacy_grid(const void *state, int64_t i, unsigned c) {
    (void)i;
    return hfq_legacy_grid(&((const legacy_state *)state)->map, (int)c);
}

static void q4_0_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    legacy_header(HFQ_LEGACY_Q4_0, q4_0_set, in, blk, state);
}
static void q4_1_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    legacy_header(HFQ_LEGACY_Q4_1, q4_1_set, in, blk, state);
}
static void q5_0_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    legacy_header(HFQ_LEGACY_Q5_0, q5_0_set, in, blk, state);
}
static void q5_1_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    legacy_header(HFQ_LEGACY_Q5_1, q5_1_set, in, blk, state);
}

/* ---- Q8_0: ggml's rounding, or with importance our block-scale search
 * (quant/q_legacy.h), as the quantizer chooses ---- */

typedef struct q8_0_state {
    float id, d;
    bool searched; /* id is the search's code scale: hfq_level_symmetric's rounding */
} q8_0_state;

static void q8_0_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    q8_0_state *st = (q8_0_state *)state;
    hfq_block_q8_0 *b = (hfq_block_q8_0 *)blk;
    st->searched = in->importance && hfq_q8_0_weighted_block(in->x, in->importance, b, &st->id);
    if (!in->importance) hfq_quantize_block_q8_0(in->x, b);
    if (!st->searched) hfq_q8_32_scale(in->x, &st->id);
    st->d = hfq_fp16_to_f32(b->d);
}

static float q8_0_round(const void *state, void *blk, int64_t i, float x) {
    const q8_0_state *st = (const q8_0_state *)state;
    const int8_t q = st->searched ? (int8_t)hfq_level_symmetric(st->id, x, 128) : hfq_q8_level(x, st->id);
    ((hfq_block_q8_0 *)blk)->qs[i] = q;
    return (float)q * st->d;
}

static float q8_0_grid(const void *state, int64_t i, unsigned c) {
    const float id = ((const q8_0_state *)state)->id;
    (void)i;
    return id ? (float)(int8_t)(uint8_t)c / id : 0.0f;
}

/* ---- IQ4_NL ---- */

typedef struct iq4_nl_state {
    float idl, d;
} iq4_nl_state;

static void iq4_nl_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    iq4_nl_state *st = (iq4_nl_state *)state;
    float idl[HFQ_QK_K / HFQ_QK];
    hfq_iq4_block(HFQ_QK, in->x, in->importance, blk, idl);
    st->idl = idl[0];
    st->d = hfq_fp16_to_f32(((const hfq_block_iq4_nl *)blk)->d);
}

static float iq4_nl_round(const void *state, void *blk, int64_t i, float x) {
    const iq4_nl_state *st = (const iq4_nl_state *)state;
    const uint8_t c = hfq_iq4_nearest_level(st->idl * x);
    iq4_nl_set(blk, i, c);
    return st->d * (float)hfq_iq4nl_value(c);
}

static float iq4_nl_grid(const void *state, int64_t i, unsigned c) {
    (void)i;
    return hfq_iq4_grid(((const iq4_nl_state *)state)->idl, (int)c);
}

HFQ_GPTQ_ENTRY(q8_0, HFQ_QT_Q8_0, HFQ_QK, hfq_block_q8_0, q8_0_state, q8_0_header, q8_0_round, 256, q8_0_grid);
HFQ_GPTQ_ENTRY(q4_0, HFQ_QT_Q4_0, HFQ_QK, hfq_block_q4_0, legacy_state, q4_0_header, legacy_round, 16, legacy_grid);
HFQ_GPTQ_ENTRY(q4_1, HFQ_QT_Q4_1, HFQ_QK, hfq_block_q4_1, legacy_state, q4_1_header, legacy_round, 16, legacy_grid);
HFQ_GPTQ_ENTRY(q5_0, HFQ_QT_Q5_0, HFQ_QK, hfq_block_q5_0, legacy_state, q5_0_header, legacy_round, 32, legacy_grid);
HFQ_GPTQ_ENTRY(q5_1, HFQ_QT_Q5_1, HFQ_QK, hfq_block_q5_1, legacy_state, q5_1_header, legacy_round, 32, legacy_grid);
HFQ_GPTQ_ENTRY(iq4_nl, HFQ_QT_IQ4_NL, HFQ_QK, hfq_block_iq4_nl, iq4_nl_state, iq4_nl_header, iq4_nl_round, 16,
               iq4_nl_grid);
