/* gptq_k.c - GPTQ codecs (quant/gptq_codec.h) of the 256-element
 * super-block formats: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS.
 *
 * The header is the format's quantizer on the super-block (its sub-block
 * scale searches, with importance its weighted ones, and the quantized
 * scales); state keeps each sub-block's decoded scale (and min) as the
 * quantizer's final pass computes them, and round is that pass for one
 * value: nearest_int((x + dmin * m) / (d * sc)) clamped, i.e. the nearest
 * level of the stored grid. A sub-block whose stored scale is zero keeps
 * the quantizer's levels (all decode to the same value). IQ4_XS rounds to
 * the nearest of its 16 levels under 1 / (d * scale) with the unrounded d,
 * as its quantizer. */
#include <stdbool.h>

#include "quant/block_math.h"
#include "quant/gptq_entry.h"
#include "quant/iq4.h"
#include "quant/scale_search.h"

#define MAX_SUBS 16

/* ---- layouts ---- */

/* Q2_K and the low two bits of Q3_K: element 128 h + 32 s + l in bits 2 s
 * of qs[32 h + l]. */
static int64_t two_bit_at(int64_t i, int *shift) {
    *shift = (int)(2 * ((i % 128) / 32));
    return 32 * (i / 128) + i % 32;
}

static void q2_k_set(void *blk, int64_t i, unsigned c) {
    int shift;
    const int64_t at = two_bit_at(i, &shift);
    hfq_gptq_bits_set(&((hfq_block_q2_k *)blk)->qs[at], shift, 2, c);
}
static unsigned q2_k_get(const void *blk, int64_t i) {
    int shift;
    const int64_t at = two_bit_at(i, &shift);
    return hfq_gptq_bits_get(&((const hfq_block_q2_k *)blk)->qs[at], shift, 2);
}

/* Q3_K: level 0..7, its bit 2 in bit i / 32 of hmask[i % 32]. */
static void q3_k_set(void *blk, int64_t i, unsigned c) {
    hfq_block_q3_k *b = (hfq_block_q3_k *)blk;
    int shift;
    const int64_t at = two_bit_at(i, &shift);
    hfq_gptq_bits_set(&b->qs[at], shift, 2, c & 3);
    hfq_gptq_bits_set(&b->hmask[i % 32], (int)(i / 32), 1, c >> 2);
}
static unsigned q3_k_get(const void *blk, int64_t i) {
    const hfq_block_q3_k *b = (const hfq_block_q3_k *)blk;
    int shift;
    const int64_t at = two_bit_at(i, &shift);
    return hfq_gptq_bits_get(&b->qs[at], shift, 2) |
           hfq_gptq_bits_get(&b->hmask[i % 32], (int)(i / 32), 1) << 2;
}

/* Q4_K/Q5_K: 32 bytes per pair of sub-blocks, low nibbles the first. */
static void q4_k_set(void *blk, int64_t i, unsigned c) {
    hfq_gptq_nibble_set(((hfq_block_q4_k *)blk)->qs + 32 * (i / 64), 32, i % 64, c);
}
static unsigned q4_k_get(const void *blk, int64_t i) {
    return hfq_gptq_nibble_get(((const hfq_block_q4_k *)blk)->qs + 32 * (i / 64), 32, i % 64);
}

/* Q5_K: bit 4 of sub-block j's element l in bit j of qh[l]. */
static void q5_k_set(void *blk, int64_t i, unsigned c) {
    hfq_block_q5_k *b = (hfq_block_q5_k *)blk;
    hfq_gptq_nibble_set(b->qs + 32 * (i / 64), 32, i % 64, c);
    hfq_gptq_bits_set(&b->qh[i % 32], (int)(i / 32), 1, c >> 4);
}
static unsigned q5_k_get(const void *blk, int64_t i) {
    const hfq_block_q5_k *b = (const hfq_block_q5_k *)blk;
    return hfq_gptq_nibble_get(b->qs + 32 * (i / 64), 32, i % 64) |
           hfq_gptq_bits_get(&b->qh[i % 32], (int)(i / 32), 1) << 4;
}

/* Q6_K: in each 128-element half, quarter q's element l has its low nibble
 * in ql[l + 32 (q & 1)] (high nibble for q >= 2) and its top two bits in
 * bits 2 q of qh[l]. */
static int64_t q6_k_low_at(int64_t i, int *shift) {
    const int64_t r = i % 128, q = r / 32;
    *shift = (int)(4 * (q >> 1));
    return 64 * (i / 128) + r % 32 + 32 * (q & 1);
}

static void q6_k_set(void *blk, int64_t i, unsigned c) {
    hfq_block_q6_k *b = (hfq_block_q6_k *)blk;
    int shift;
    const int64_t at = q6_k_low_at(i, &shift);
    hfq_gptq_bits_set(&b->ql[at], shift, 4, c & 15);
    hfq_gptq_bits_set(&b->qh[32 * (i / 128) + i % 32], (int)(2 * ((i % 128) / 32)), 2, c >> 4);
}
static unsigned q6_k_get(const void *blk, int64_t i) {
    const hfq_block_q6_k *b = (const hfq_block_q6_k *)blk;
    int shift;
    const int64_t at = q6_k_low_at(i, &shift);
    return hfq_gptq_bits_get(&b->ql[at], shift, 4) |
           hfq_gptq_bits_get(&b->qh[32 * (i / 128) + i % 32], (int)(2 * ((i % 128) / 32)), 2) << 4;
}

static void iq4_xs_set(void *blk, int64_t i, unsigned c) {
    hfq_gptq_nibble_set(((hfq_block_iq4_xs *)blk)->qs + 16 * (i / 32), 16, i % 32, c);
}
static unsigned iq4_xs_get(const void *blk, int64_t i) {
    return hfq_gptq_nibble_get(((const hfq_block_iq4_xs *)blk)->qs + 16 * (i / 32), 16, i % 32);
}

/* ---- K-quants ---- */

typedef struct k_state {
    float d[MAX_SUBS], m[MAX_SUBS]; /* each sub-block's d * sc and dmin * m, as the final pass */
    int sub, nmax;                  /* sub-block length; levels 0..nmax (affine) or 0..2 nmax - 1 */
    bool affine;
    void (*set)(void *blk, int64_t i, unsigned c);
    unsigned (*get)(const void *blk, int64_t i);
} k_state;

static void k_init(k_state *st, const hfq_gptq_block_in *in, void *blk, hfq_qtype t, int sub, int nmax, bool affine,
                   void (*set)(void *, int64_t, unsigned), unsigned (*get)(const void *, int64_t)) {
    hfq_qtype_get(t)->quantize(in->x, blk, 1, HFQ_QK_K, in->importance);
    st->sub = sub;
    st->nmax = nmax;
    st->affine = affine;
    st->set = set;
    st->get = get;
}

static float k_round(const void *state, void *blk, int64_t i, float x) {
    const k_state *st = (const k_state *)state;
    const float d = st->d[i / st->sub], m = st->m[i / st->sub];
    int L;
    if (!d) {
        L = (int)st->get(blk, i);
    } else {
        L = st->affine ? hfq_relevel_affine(x, d, m, st->nmax) : hfq_relevel_symmetric(x, d, st->nmax);
        st->set(blk, i, (unsigned)L);
    }
    if (st->affine) return HFQ_FMUL(d, (float)L) - m;
    return (float)(L - st->nmax) * d;
}

/* The decoded value of level c (round's grid is the stored one). */
static float k_grid(const void *state, int64_t i, unsigned c) {
    const k_state *st = (const k_state *)state;
    const float d = st->d[i / st->sub], m = st->m[i / st->sub];
    if (st->affine) return HFQ_FMUL(d, (float)c) - m;
    return (float)((int)c - st->nmax) * d;
}

/* Each sub-block's scale d * sc[j] and offset dmin * m[j], as the final
 * pass computes them (integer factors, so the products are the same). */
static void k_scales(k_state *st, int n, float d, const int *sc, float dmin, const int *m) {
    for (int j = 0; j < n; j++) {
        st->d[j] = d * sc[j];
        st->m[j] = dmin * m[j];
    }
}

/* Q4_K and Q5_K share the header's layout (d, dmin, scales). */
static void k_affine_scales(k_state *st, const hfq_block_q4_k *b) {
    int sc[HFQ_QK_K / 32], m[HFQ_QK_K / 32];
    for (int j = 0; j < HFQ_QK_K / 32; j++) {
        uint8_t s, mn;
        hfq_k_scale_min(j, b->scales, &s, &mn);
        sc[j] = s;
        m[j] = mn;
    }
    k_scales(st, HFQ_QK_K / 32, hfq_fp16_to_f32(b->d), sc, hfq_fp16_to_f32(b->dmin), m);
}

static void q4_k_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    k_init((k_state *)state, in, blk, HFQ_QT_Q4_K, 32, 15, true, q4_k_set, q4_k_get);
    k_affine_scales((k_state *)state, (const hfq_block_q4_k *)blk);
}

static void q5_k_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    k_init((k_state *)state, in, blk, HFQ_QT_Q5_K, 32, 31, true, q5_k_set, q5_k_get);
    k_affine_scales((k_state *)state, (const hfq_block_q4_k *)blk);
}

static const int NO_MINS[MAX_SUBS] = {0};

static void q2_k_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    k_init((k_state *)state, in, blk, HFQ_QT_Q2_K, 16, 3, true, q2_k_set, q2_k_get);
    const hfq_block_q2_k *b = (const hfq_block_q2_k *)blk;
    int sc[MAX_SUBS], m[MAX_SUBS];
    for (int j = 0; j < MAX_SUBS; j++) {
        sc[j] = b->scales[j] & 0xF;
        m[j] = b->scales[j] >> 4;
    }
    k_scales((k_state *)state, MAX_SUBS, hfq_fp16_to_f32(b->d), sc, hfq_fp16_to_f32(b->dmin), m);
}

static void q3_k_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    k_init((k_state *)state, in, blk, HFQ_QT_Q3_K, 16, 4, false, q3_k_set, q3_k_get);
    const hfq_block_q3_k *b = (const hfq_block_q3_k *)blk;
    int sc[MAX_SUBS];
    for (int j = 0; j < MAX_SUBS; j++) sc[j] = hfq_q3_k_scale(j, b->scales);
    k_scales((k_state *)state, MAX_SUBS, hfq_fp16_to_f32(b->d), sc, 0.0f, NO_MINS);
}

static void q6_k_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    k_init((k_state *)state, in, blk, HFQ_QT_Q6_K, 16, 32, false, q6_k_set, q6_k_get);
    const hfq_block_q6_k *b = (const hfq_block_q6_k *)blk;
    int sc[MAX_SUBS];
    for (int j = 0; j < MAX_SUBS; j++) sc[j] = b->scales[j];
    k_scales((k_state *)state, MAX_SUBS, hfq_fp16_to_f32(b->d), sc, 0.0f, NO_MINS);
}

/* ---- IQ4_XS ---- */

typedef struct iq4_xs_state {
    float idl[HFQ_QK_K / HFQ_QK], dl[HFQ_QK_K / HFQ_QK]; /* rounding and decoded scale of each 32-block */
} iq4_xs_state;

static void iq4_xs_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    iq4_xs_state *st = (iq4_xs_state *)state;
    const hfq_block_iq4_xs *b = (const hfq_block_iq4_xs *)blk;
    hfq_iq4_block(HFQ_QK_K, in->x, in->importance, blk, st->idl);
    const float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < HFQ_QK_K / HFQ_QK; j++) st->dl[j] = d * (float)(hfq_iq4_xs_scale(b, j) - 32);
}

static float iq4_xs_round(const void *state, void *blk, int64_t i, float x) {
    const iq4_xs_state *st = (const iq4_xs_state *)state;
    const uint8_t c = hfq_iq4_nearest_level(st->idl[i / HFQ_QK] * x);
    iq4_xs_set(blk, i, c);
    return st->dl[i / HFQ_QK] * (float)hfq_iq4nl_value(c);
}

static float iq4_xs_grid(const void *state, int64_t i, unsigned c) {
    return hfq_iq4_grid(((const iq4_xs_state *)state)->idl[i / HFQ_QK], (int)c);
}

HFQ_GPTQ_ENTRY(q2_k, HFQ_QT_Q2_K, HFQ_QK_K, hfq_block_q2_k, k_state, q2_k_header, k_round, 4, k_grid);
HFQ_GPTQ_ENTRY(q3_k, HFQ_QT_Q3_K, HFQ_QK_K, hfq_block_q3_k, k_state, q3_k_header, k_round, 8, k_grid);
HFQ_GPTQ_ENTRY(q4_k, HFQ_QT_Q4_K, HFQ_QK_K, hfq_block_q4_k, k_state, q4_k_header, k_round, 16, k_grid);
HFQ_GPTQ_ENTRY(q5_k, HFQ_QT_Q5_K, HFQ_QK_K, hfq_block_q5_k, k_state, q5_k_header, k_round, 32, k_grid);
HFQ_GPTQ_ENTRY(q6_k, HFQ_QT_Q6_K, HFQ_QK_K, hfq_block_q6_k, k_state, q6_k_header, k_round, 64, k_grid);
HFQ_GPTQ_ENTRY(iq4_xs, HFQ_QT_IQ4_XS, HFQ_QK_K, hfq_block_iq4_xs, iq4_xs_state, iq4_xs_header, iq4_xs_round, 16,
               iq4_xs_grid);
