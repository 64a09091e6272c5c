/* block_math.h - per-block decode, dot products and activation quantizers of
 * the integer formats, written once for the CPU and CUDA (HFQ_HD).
 *
 * Decoders produce exactly ggml's dequantize_row_* values: the float
 * operations and their order are ggml's (d * q, or (d * sc) * q - dmin * m),
 * so the same bits come out on the CPU (built without FMA contraction) and
 * on CUDA devices (products feeding a sum go through HFQ_FMUL, which nvcc
 * cannot fuse).
 *
 * Dot products pair a weight block with its activation block (Q8_0 for
 * Q8_0/Q4_0/Q5_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants, as ggml's CPU
 * backend does) and sum integer products exactly before scaling once per
 * block; they agree with a double-precision dot of the decoded values up to
 * float rounding of the block results.
 *
 * Activation quantizers are what llama.cpp's CPU backend runs on x86:
 * quantize_row_q8_0/q8_1 of ggml-cpu/arch/x86/quants.c (round-half-even of
 * x * 127 / amax) and quantize_row_q8_K_ref (x86 has no other); the Q8_0
 * weight quantizer is ggml's quantize_row_q8_0_ref.
 */
#ifndef HFQ_QUANT_BLOCK_MATH_H
#define HFQ_QUANT_BLOCK_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/hd.h"
#include "quant/int8.h" /* hfq_dot_i8 */

/* A product that is rounded before it is added to anything: nvcc contracts
 * a * b + c into one FMA by default, which rounds once instead of twice. */
#ifdef __CUDA_ARCH__
#define HFQ_FMUL(a, b) __fmul_rn((a), (b))
#else
#define HFQ_FMUL(a, b) ((a) * (b))
#endif

/* Round to nearest, ties to even, as ggml's nearest_int: adding 1.5 * 2^23
 * leaves the rounded integer in the low mantissa bits. Exact for
 * |x| <= 2^22; beyond that it returns what ggml returns (garbage bits that
 * callers clamp), which is what keeps pathological blocks bit-identical. */
static inline HFQ_HD int hfq_nearest_int(float x) {
    float biased = x + 12582912.f;
    int32_t bits;
    memcpy(&bits, &biased, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

/* ---- 32-element formats ---- */

/* The first element of largest magnitude, with its sign (0 for n = 0 or an
 * all-zero group): the symmetric formats map it to their most negative
 * level, which has one more step than the positive side. */
static inline HFQ_HD float hfq_signed_extreme(const float *x, int n) {
    float amax = 0.0f, extreme = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            extreme = x[j];
        }
    }
    return extreme;
}

static inline HFQ_HD uint32_t hfq_load_le32(const uint8_t b[4]) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Unpacks 32 nibbles (element j low, j + 16 high) and subtracts bias. */
static inline HFQ_HD void hfq_unpack_nibbles(const uint8_t qs[HFQ_QK / 2], int bias, int8_t q[HFQ_QK]) {
    for (int j = 0; j < HFQ_QK / 2; j++) {
        q[j] = (int8_t)((qs[j] & 0x0f) - bias);
        q[j + HFQ_QK / 2] = (int8_t)((qs[j] >> 4) - bias);
    }
}

/* Unpacks 32 five-bit values (nibbles plus bit j of qh) and subtracts bias. */
static inline HFQ_HD void hfq_unpack_5bit(const uint8_t qs[HFQ_QK / 2], const uint8_t qh_bytes[4], int bias,
                                          int8_t q[HFQ_QK]) {
    uint32_t qh = hfq_load_le32(qh_bytes);
    for (int j = 0; j < HFQ_QK / 2; j++) {
        int lo = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + HFQ_QK / 2)) & 1) << 4;
        q[j] = (int8_t)(lo - bias);
        q[j + HFQ_QK / 2] = (int8_t)(hi - bias);
    }
}

static inline HFQ_HD void hfq_levels_q4_0(const hfq_block_q4_0 *b, int8_t q[HFQ_QK]) {
    hfq_unpack_nibbles(b->qs, 8, q);
}
static inline HFQ_HD void hfq_levels_q4_1(const hfq_block_q4_1 *b, int8_t q[HFQ_QK]) {
    hfq_unpack_nibbles(b->qs, 0, q);
}
static inline HFQ_HD void hfq_levels_q5_0(const hfq_block_q5_0 *b, int8_t q[HFQ_QK]) {
    hfq_unpack_5bit(b->qs, b->qh, 16, q);
}
static inline HFQ_HD void hfq_levels_q5_1(const hfq_block_q5_1 *b, int8_t q[HFQ_QK]) {
    hfq_unpack_5bit(b->qs, b->qh, 0, q);
}

/* y = q * d (no "+ 0": that would turn ggml's -0.0 results into +0.0). */
static inline HFQ_HD void hfq_scale_levels(const int8_t *q, int n, float d, float *y) {
    for (int j = 0; j < n; j++) y[j] = (float)q[j] * d;
}

static inline HFQ_HD void hfq_decode_q8_0(const hfq_block_q8_0 *b, float y[HFQ_QK]) {
    hfq_scale_levels(b->qs, HFQ_QK, hfq_fp16_to_f32(b->d), y);
}

static inline HFQ_HD void hfq_decode_q8_1(const hfq_block_q8_1 *b, float y[HFQ_QK]) {
    hfq_scale_levels(b->qs, HFQ_QK, hfq_fp16_to_f32(b->d), y);
}

static inline HFQ_HD void hfq_decode_q4_0(const hfq_block_q4_0 *b, float y[HFQ_QK]) {
    int8_t q[HFQ_QK];
    hfq_levels_q4_0(b, q);
    hfq_scale_levels(q, HFQ_QK, hfq_fp16_to_f32(b->d), y);
}

static inline HFQ_HD void hfq_decode_q5_0(const hfq_block_q5_0 *b, float y[HFQ_QK]) {
    int8_t q[HFQ_QK];
    hfq_levels_q5_0(b, q);
    hfq_scale_levels(q, HFQ_QK, hfq_fp16_to_f32(b->d), y);
}

/* Q4_1/Q5_1: y = q * d + m. */
static inline HFQ_HD void hfq_decode_affine32(const int8_t q[HFQ_QK], uint16_t d16, uint16_t m16, float y[HFQ_QK]) {
    float d = hfq_fp16_to_f32(d16), m = hfq_fp16_to_f32(m16);
    for (int j = 0; j < HFQ_QK; j++) y[j] = HFQ_FMUL((float)q[j], d) + m;
}

static inline HFQ_HD void hfq_decode_q4_1(const hfq_block_q4_1 *b, float y[HFQ_QK]) {
    int8_t q[HFQ_QK];
    hfq_levels_q4_1(b, q);
    hfq_decode_affine32(q, b->d, b->m, y);
}

static inline HFQ_HD void hfq_decode_q5_1(const hfq_block_q5_1 *b, float y[HFQ_QK]) {
    int8_t q[HFQ_QK];
    hfq_levels_q5_1(b, q);
    hfq_decode_affine32(q, b->d, b->m, y);
}

static inline HFQ_HD float hfq_dot_q8_0_q8_0(const hfq_block_q8_0 *w, const hfq_block_q8_0 *a) {
    return (float)hfq_dot_i8(w->qs, a->qs, HFQ_QK) * (hfq_fp16_to_f32(w->d) * hfq_fp16_to_f32(a->d));
}

static inline HFQ_HD float hfq_dot_q4_0_q8_0(const hfq_block_q4_0 *w, const hfq_block_q8_0 *a) {
    int8_t q[HFQ_QK];
    hfq_levels_q4_0(w, q);
    return (float)hfq_dot_i8(q, a->qs, HFQ_QK) * (hfq_fp16_to_f32(w->d) * hfq_fp16_to_f32(a->d));
}

static inline HFQ_HD float hfq_dot_q5_0_q8_0(const hfq_block_q5_0 *w, const hfq_block_q8_0 *a) {
    int8_t q[HFQ_QK];
    hfq_levels_q5_0(w, q);
    return (float)hfq_dot_i8(q, a->qs, HFQ_QK) * (hfq_fp16_to_f32(w->d) * hfq_fp16_to_f32(a->d));
}

/* Q4_1/Q5_1: sum (d q + m) * a = d * da * sum(q qa) + m * (da * sum(qa));
 * the last factor is the activation block's stored s. */
static inline HFQ_HD float hfq_dot_affine32_q8_1(const int8_t q[HFQ_QK], uint16_t d16, uint16_t m16,
                                                 const hfq_block_q8_1 *a) {
    return HFQ_FMUL((float)hfq_dot_i8(q, a->qs, HFQ_QK), hfq_fp16_to_f32(d16) * hfq_fp16_to_f32(a->d)) +
           HFQ_FMUL(hfq_fp16_to_f32(m16), hfq_fp16_to_f32(a->s));
}

static inline HFQ_HD float hfq_dot_q4_1_q8_1(const hfq_block_q4_1 *w, const hfq_block_q8_1 *a) {
    int8_t q[HFQ_QK];
    hfq_levels_q4_1(w, q);
    return hfq_dot_affine32_q8_1(q, w->d, w->m, a);
}

static inline HFQ_HD float hfq_dot_q5_1_q8_1(const hfq_block_q5_1 *w, const hfq_block_q8_1 *a) {
    int8_t q[HFQ_QK];
    hfq_levels_q5_1(w, q);
    return hfq_dot_affine32_q8_1(q, w->d, w->m, a);
}

/* ---- K-quants ---- */

/* Q2_K levels 0..3 and Q3_K's low two bits, in element order: element
 * 128 h + 32 s + l is bits 2 s of qs[32 h + l]. */
static inline HFQ_HD void hfq_levels_2bit(const uint8_t qs[HFQ_QK_K / 4], uint8_t q[HFQ_QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * s + l] = (uint8_t)((qs[32 * h + l] >> (2 * s)) & 3);
}

/* Q3_K levels q - 4 in [-4, 3]: the low two bits as Q2_K, 4 more where
 * element e's bit (bit e / 32 of hmask[e % 32]) is set. */
static inline HFQ_HD void hfq_levels_q3_k(const hfq_block_q3_k *b, int8_t q[HFQ_QK_K]) {
    uint8_t low[HFQ_QK_K];
    hfq_levels_2bit(b->qs, low);
    for (int e = 0; e < HFQ_QK_K; e++) q[e] = (int8_t)(low[e] - (((b->hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4));
}

/* Signed scale (-32..31) of Q3_K sub-block j (0..15): the low four bits
 * are the low (j < 8) or high (j >= 8) nibble of byte j % 8, the high two
 * are bits 2 (j / 4) of byte 8 + j % 4; stored with a bias of 32. */
static inline HFQ_HD int hfq_q3_k_scale(int j, const uint8_t scales[HFQ_K_SCALE_BYTES]) {
    int lo = j < 8 ? scales[j] & 0x0f : scales[j - 8] >> 4;
    int hi = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* The 6-bit scale and min of Q4_K/Q5_K sub-block j (0..7): sub-blocks 0-3
 * keep theirs in the low 6 bits of bytes j and j + 4; sub-blocks 4-7 keep
 * the low 4 bits in the nibbles of byte j + 4 and the high 2 bits in the top
 * bits of bytes j - 4 (scale) and j (min). */
static inline HFQ_HD void hfq_k_scale_min(int j, const uint8_t scales[HFQ_K_SCALE_BYTES], uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0x0f) | (scales[j - 4] >> 6) << 4);
        *m = (uint8_t)((scales[j + 4] >> 4) | (scales[j] >> 6) << 4);
    }
}

/* Levels 0..15 (Q4_K) or 0..31 (Q5_K) in element order. */
static inline HFQ_HD void hfq_levels_q4_k(const hfq_block_q4_k *b, uint8_t q[HFQ_QK_K]) {
    for (int pair = 0; pair < HFQ_QK_K / 64; pair++) {
        const uint8_t *qs = b->qs + 32 * pair;
        for (int l = 0; l < 32; l++) {
            q[64 * pair + l] = qs[l] & 0x0f;
            q[64 * pair + 32 + l] = qs[l] >> 4;
        }
    }
}

static inline HFQ_HD void hfq_levels_q5_k(const hfq_block_q5_k *b, uint8_t q[HFQ_QK_K]) {
    for (int pair = 0; pair < HFQ_QK_K / 64; pair++) {
        const uint8_t *qs = b->qs + 32 * pair;
        for (int l = 0; l < 32; l++) {
            q[64 * pair + l] = (uint8_t)((qs[l] & 0x0f) | ((b->qh[l] >> (2 * pair)) & 1) << 4);
            q[64 * pair + 32 + l] = (uint8_t)((qs[l] >> 4) | ((b->qh[l] >> (2 * pair + 1)) & 1) << 4);
        }
    }
}

/* Levels q - 32 in [-32, 31]: each 128-element half uses 64 ql bytes (low
 * nibbles for elements 0-63, high nibbles for 64-127) and 32 qh bytes (two
 * bits for each of the four 32-element quarters). */
static inline HFQ_HD void hfq_levels_q6_k(const hfq_block_q6_k *b, int8_t q[HFQ_QK_K]) {
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b->ql + 64 * half;
        const uint8_t *qh = b->qh + 32 * half;
        int8_t *out = q + 128 * half;
        for (int l = 0; l < 32; l++) {
            out[l] = (int8_t)(((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32);
            out[l + 32] = (int8_t)(((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32);
            out[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
            out[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
        }
    }
}

/* Q4_K/Q5_K: y = (d * sc) * q - dmin * m per 32-element sub-block. */
static inline HFQ_HD void hfq_decode_k_affine(const uint8_t q[HFQ_QK_K], const uint8_t scales[HFQ_K_SCALE_BYTES],
                                              uint16_t d16, uint16_t dmin16, float y[HFQ_QK_K]) {
    float d = hfq_fp16_to_f32(d16), dmin = hfq_fp16_to_f32(dmin16);
    for (int j = 0; j < HFQ_QK_K / 32; j++) {
        uint8_t sc, m;
        hfq_k_scale_min(j, scales, &sc, &m);
        float dj = d * sc, mj = dmin * m;
        for (int l = 0; l < 32; l++) y[32 * j + l] = HFQ_FMUL(dj, (float)q[32 * j + l]) - mj;
    }
}

static inline HFQ_HD void hfq_decode_q4_k(const hfq_block_q4_k *b, float y[HFQ_QK_K]) {
    uint8_t q[HFQ_QK_K];
    hfq_levels_q4_k(b, q);
    hfq_decode_k_affine(q, b->scales, b->d, b->dmin, y);
}

static inline HFQ_HD void hfq_decode_q5_k(const hfq_block_q5_k *b, float y[HFQ_QK_K]) {
    uint8_t q[HFQ_QK_K];
    hfq_levels_q5_k(b, q);
    hfq_decode_k_affine(q, b->scales, b->d, b->dmin, y);
}

static inline HFQ_HD void hfq_decode_q6_k(const hfq_block_q6_k *b, float y[HFQ_QK_K]) {
    int8_t q[HFQ_QK_K];
    hfq_levels_q6_k(b, q);
    float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < HFQ_QK_K / 16; j++) hfq_scale_levels(q + 16 * j, 16, d * b->scales[j], y + 16 * j);
}

/* Q2_K: y = (d * sc) * q - dmin * m per 16-element sub-block. */
static inline HFQ_HD void hfq_decode_q2_k(const hfq_block_q2_k *b, float y[HFQ_QK_K]) {
    uint8_t q[HFQ_QK_K];
    hfq_levels_2bit(b->qs, q);
    float d = hfq_fp16_to_f32(b->d), dmin = hfq_fp16_to_f32(b->dmin);
    for (int j = 0; j < HFQ_QK_K / 16; j++) {
        float dj = d * (float)(b->scales[j] & 0x0f), mj = dmin * (float)(b->scales[j] >> 4);
        for (int l = 0; l < 16; l++) y[16 * j + l] = HFQ_FMUL(dj, (float)q[16 * j + l]) - mj;
    }
}

static inline HFQ_HD void hfq_decode_q3_k(const hfq_block_q3_k *b, float y[HFQ_QK_K]) {
    int8_t q[HFQ_QK_K];
    hfq_levels_q3_k(b, q);
    float d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < HFQ_QK_K / 16; j++)
        hfq_scale_levels(q + 16 * j, 16, d * (float)hfq_q3_k_scale(j, b->scales), y + 16 * j);
}

static inline HFQ_HD void hfq_decode_q8_k(const hfq_block_q8_k *b, float y[HFQ_QK_K]) {
    hfq_scale_levels(b->qs, HFQ_QK_K, b->d, y);
}

/* Q4_K/Q5_K against Q8_K: sum_j (d sc_j sum(q qa) - dmin m_j sum(qa)) * da,
 * with sum(qa) over a sub-block taken from the two bsums covering it. */
static inline HFQ_HD float hfq_dot_k_affine_q8_k(const uint8_t q[HFQ_QK_K], const uint8_t scales[HFQ_K_SCALE_BYTES],
                                                 uint16_t d16, uint16_t dmin16, const hfq_block_q8_k *a) {
    int32_t sum_scaled = 0, sum_mins = 0;
    for (int j = 0; j < HFQ_QK_K / 32; j++) {
        uint8_t sc, m;
        hfq_k_scale_min(j, scales, &sc, &m);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) dot += (int32_t)q[32 * j + l] * a->qs[32 * j + l];
        sum_scaled += sc * dot;
        sum_mins += m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    float scaled = HFQ_FMUL(hfq_fp16_to_f32(d16), (float)sum_scaled);
    return a->d * (scaled - HFQ_FMUL(hfq_fp16_to_f32(dmin16), (float)sum_mins));
}

static inline HFQ_HD float hfq_dot_q4_k_q8_k(const hfq_block_q4_k *w, const hfq_block_q8_k *a) {
    uint8_t q[HFQ_QK_K];
    hfq_levels_q4_k(w, q);
    return hfq_dot_k_affine_q8_k(q, w->scales, w->d, w->dmin, a);
}

static inline HFQ_HD float hfq_dot_q5_k_q8_k(const hfq_block_q5_k *w, const hfq_block_q8_k *a) {
    uint8_t q[HFQ_QK_K];
    hfq_levels_q5_k(w, q);
    return hfq_dot_k_affine_q8_k(q, w->scales, w->d, w->dmin, a);
}

/* Q2_K against Q8_K: da * (d sum_j sc_j sum(q qa) - dmin sum_j m_j sum(qa)),
 * sum(qa) of a sub-block being its bsum (the same 16 elements). */
static inline HFQ_HD float hfq_dot_q2_k_q8_k(const hfq_block_q2_k *w, const hfq_block_q8_k *a) {
    uint8_t q[HFQ_QK_K];
    hfq_levels_2bit(w->qs, q);
    int32_t sum_scaled = 0, sum_mins = 0;
    for (int j = 0; j < HFQ_QK_K / 16; j++) {
        int32_t dot = 0;
        for (int l = 0; l < 16; l++) dot += (int32_t)q[16 * j + l] * a->qs[16 * j + l];
        sum_scaled += (w->scales[j] & 0x0f) * dot;
        sum_mins += (w->scales[j] >> 4) * a->bsums[j];
    }
    float dall = a->d * hfq_fp16_to_f32(w->d), dmin = a->d * hfq_fp16_to_f32(w->dmin);
    return HFQ_FMUL(dall, (float)sum_scaled) - HFQ_FMUL(dmin, (float)sum_mins);
}

static inline HFQ_HD float hfq_dot_q3_k_q8_k(const hfq_block_q3_k *w, const hfq_block_q8_k *a) {
    int8_t q[HFQ_QK_K];
    hfq_levels_q3_k(w, q);
    int32_t sum = 0;
    for (int j = 0; j < HFQ_QK_K / 16; j++)
        sum += hfq_q3_k_scale(j, w->scales) * hfq_dot_i8(q + 16 * j, a->qs + 16 * j, 16);
    return hfq_fp16_to_f32(w->d) * a->d * (float)sum;
}

static inline HFQ_HD float hfq_dot_q6_k_q8_k(const hfq_block_q6_k *w, const hfq_block_q8_k *a) {
    int8_t q[HFQ_QK_K];
    hfq_levels_q6_k(w, q);
    int32_t sum = 0;
    for (int j = 0; j < HFQ_QK_K / 16; j++) sum += w->scales[j] * hfq_dot_i8(q + 16 * j, a->qs + 16 * j, 16);
    return a->d * hfq_fp16_to_f32(w->d) * (float)sum;
}

/* ---- activation quantizers (ggml's *_ref, one block) ---- */

static inline HFQ_HD float hfq_abs_max(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    return amax;
}

/* d = amax / 127 stored as fp16; q = round(x / d) (half away from zero, as
 * roundf). Returns the unrounded d; *sum gets the sum of the quants. */
static inline HFQ_HD float hfq_q8_32_scale(const float x[HFQ_QK], float *id) {
    float d = hfq_abs_max(x, HFQ_QK) / 127;
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    return d;
}

/* The level of x under inverse scale id; values beyond the block's range
 * (only ever rounded by GPTQ, quant/gptq_codec.h) take the end levels. An
 * underflowed scale (id = inf) gives infinities and NaNs, which ggml's
 * conversion turns into 0 on x86. */
static inline HFQ_HD int8_t hfq_q8_level(float x, float id) {
    float r = roundf(x * id);
    if (!isfinite(r)) return 0;
    return (int8_t)(r < -128.0f ? -128.0f : r > 127.0f ? 127.0f : r);
}

static inline HFQ_HD float hfq_quantize_q8_32(const float x[HFQ_QK], uint16_t *d16, int8_t qs[HFQ_QK], int *sum) {
    float id;
    float d = hfq_q8_32_scale(x, &id);
    *d16 = hfq_f32_to_fp16(d);
    *sum = 0;
    for (int j = 0; j < HFQ_QK; j++) {
        qs[j] = hfq_q8_level(x[j], id);
        *sum += qs[j];
    }
    return d;
}

static inline HFQ_HD void hfq_quantize_block_q8_0(const float x[HFQ_QK], hfq_block_q8_0 *b) {
    int sum;
    hfq_quantize_q8_32(x, &b->d, b->qs, &sum);
}

/* What llama.cpp's CPU backend runs on x86 (AVX/AVX2/AVX512 builds:
 * ggml-cpu/arch/x86/quants.c quantize_row_q8_0/q8_1) for activation rows,
 * which is not the reference above: the same d = amax / 127, but
 * q = round-half-even(x * (127 / amax)) (_mm256_round_ps), so ties and some
 * last-ulp products land on other codes. Its F16C fp16 conversion rounds as
 * hfq_f32_to_fp16. The weights' quantizer keeps the reference (llama-quantize
 * uses quantize_row_q8_0_ref). */
static inline HFQ_HD float hfq_quantize_q8_32_act(const float x[HFQ_QK], uint16_t *d16, int8_t qs[HFQ_QK], int *sum) {
    float amax = hfq_abs_max(x, HFQ_QK);
    float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    *d16 = hfq_f32_to_fp16(d);
    *sum = 0;
    for (int j = 0; j < HFQ_QK; j++) {
        qs[j] = (int8_t)hfq_nearest_int(HFQ_FMUL(x[j], id));
        *sum += qs[j];
    }
    return d;
}

/* Activation rows of the Q8_0-paired formats (see hfq_quantize_q8_32_act). */
static inline HFQ_HD void hfq_quantize_block_q8_0_act(const float x[HFQ_QK], hfq_block_q8_0 *b) {
    int sum;
    hfq_quantize_q8_32_act(x, &b->d, b->qs, &sum);
}

/* Q8_1 only ever holds activations: llama.cpp's x86 quantize_row_q8_1, whose
 * s = d * sum(q) uses the unrounded d. */
static inline HFQ_HD void hfq_quantize_block_q8_1(const float x[HFQ_QK], hfq_block_q8_1 *b) {
    int sum;
    float d = hfq_quantize_q8_32_act(x, &b->d, b->qs, &sum);
    b->s = hfq_f32_to_fp16(d * (float)sum);
}

/* Q8_K keeps d in float and scales by the signed extreme so that it lands on
 * -127 exactly; bsums are the sums of each 16 quants. */
static inline HFQ_HD void hfq_quantize_block_q8_k(const float x[HFQ_QK_K], hfq_block_q8_k *b) {
    float extreme = hfq_signed_extreme(x, HFQ_QK_K);
    if (extreme == 0.0f) {
        memset(b, 0, sizeof *b);
        return;
    }
    float iscale = -127.f / extreme;
    for (int j = 0; j < HFQ_QK_K; j++) {
        int v = hfq_nearest_int(HFQ_FMUL(iscale, x[j]));
        b->qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int g = 0; g < HFQ_QK_K / 16; g++) {
        int sum = 0;
        for (int l = 0; l < 16; l++) sum += b->qs[16 * g + l];
        b->bsums[g] = (int16_t)sum;
    }
    b->d = 1 / iscale;
}

#endif
