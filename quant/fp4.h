/* fp4.h - 4-bit E2M1 floats in ggml's MXFP4 (type 39) and NVFP4 (type 40) blocks.
 *
 * E2M1 codes hold a sign in bit 3 and the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4,
 * 6. As in ggml, values are handled doubled - 0,1,2,3,4,6,8,12 - and block
 * scales halved to match.
 *
 * MXFP4: 32 elements in 17 bytes: `e`, an E8M0 exponent (scale 2^(e-127)),
 * then qs[16]; element j is the low nibble of qs[j], element j+16 the high
 * nibble. x = doubled(code) * 2^(e-127) / 2.
 *
 * NVFP4: 64 elements in 36 bytes: d[4], one UE4M3 scale per 16-element
 * sub-block (unsigned, 4 exponent bits biased by 7, 3 mantissa bits;
 * subnormals m*2^-9; 0x00 and 0x7F decode to 0), then qs[32]; in sub-block s,
 * qs[8s+j] holds element j (low nibble) and j+8 (high nibble).
 * x = doubled(code) * ue4m3(d[s]) / 2, times an optional per-tensor FP32
 * global scale g that llama.cpp keeps as the F32 tensor `<name>.scale` and
 * multiplies into the matmul result.
 *
 * Quantizers (see docs/quantize.md ("FP and INT8 formats")):
 * - Reference (importance NULL, no global scale): bit-identical to ggml's
 *   quantize_row_mxfp4_ref / quantize_row_nvfp4_ref, including their choices:
 *   MXFP4 e = floor(log2f(amax)) - 2 + 127; NVFP4 scale = ggml's UE4M3
 *   rounding of amax/6; each element takes the first code of 0..15 with the
 *   least |doubled*d - x|, so ties go to the smaller magnitude and zero is +0.
 * - Global scale g > 0 (NVIDIA's NVFP4, g = amax_tensor / (6*448)): the
 *   sub-block scale is E4M3 round-to-nearest-even of (amax/6)/g, saturating at
 *   448; elements are E2M1 round-to-nearest-even of x / (scale * g).
 * - importance (n_per_row weights shared by all rows): per block, tries a few
 *   scales around the reference and keeps the one with the least
 *   sum importance[j] * (x[j] - x^[j])^2, the reference on ties. MXFP4: e,
 *   then e-1 and e+1. NVFP4: the codes from 2 below the reference code (the
 *   sub-block maximum mapped to 6) to 2 above the code mapping it to 4
 *   ("Four Over Six"; amax/4, rounded as the path rounds amax/6), lowest
 *   first after the reference.
 *
 * Dot products against ggml's Q8_0 activations follow ggml-cpu's generic
 * ggml_vec_dot_{mxfp4,nvfp4}_q8_0 operation for operation, so results equal
 * ggml's generic CPU path bit for bit.
 */
#ifndef HFQ_QUANT_FP4_H
#define HFQ_QUANT_FP4_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/blocks.h"
#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/hd.h"

#define HFQ_QK_MXFP4 32
#define HFQ_QK_NVFP4 64
#define HFQ_QK_NVFP4_SUB 16
#define HFQ_NVFP4_GLOBAL_DIV (6.0f * 448.0f) /* global scale = amax / this */

typedef struct hfq_block_mxfp4 {
    uint8_t e;                      /* E8M0 exponent */
    uint8_t qs[HFQ_QK_MXFP4 / 2];   /* E2M1 codes, two per byte */
} hfq_block_mxfp4;

typedef struct hfq_block_nvfp4 {
    uint8_t d[HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB]; /* UE4M3 sub-block scales */
    uint8_t qs[HFQ_QK_NVFP4 / 2];               /* E2M1 codes, two per byte */
} hfq_block_nvfp4;

#ifdef __cplusplus
static_assert(sizeof(hfq_block_mxfp4) == 17, "mxfp4 block is 17 bytes");
static_assert(sizeof(hfq_block_nvfp4) == 36, "nvfp4 block is 36 bytes");
#else
_Static_assert(sizeof(hfq_block_mxfp4) == 17, "mxfp4 block is 17 bytes");
_Static_assert(sizeof(hfq_block_nvfp4) == 36, "nvfp4 block is 36 bytes");
#endif

/* ---- element and scale codecs ---- */

/* Doubled E2M1 value of a 4-bit code: 0,1,2,3,4,6,8,12, negated by bit 3. */
static inline HFQ_HD int hfq_e2m1_doubled(unsigned code) {
    const int mag = (int)(code & 7);
    const int v = mag < 2 ? mag : (2 + (mag & 1)) << ((mag >> 1) - 1);
    return (code & 8) ? -v : v;
}

/* E8M0 byte to 2^(e-127) / 2, as ggml_e8m0_to_fp32_half (e < 2: subnormals). */
static inline HFQ_HD float hfq_e8m0_half_to_f32(uint8_t e) {
    return hfq_bits_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* UE4M3 byte to value / 2, as ggml_ue4m3_to_fp32: 0x00 and 0x7F give 0,
 * bit 7 is ignored otherwise. */
static inline HFQ_HD float hfq_ue4m3_half_to_f32(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const uint32_t exp = (x >> 3) & 0xF, man = x & 7;
    if (exp == 0) return (float)man * (1.0f / 1024.0f); /* man * 2^-9 / 2 */
    return hfq_bits_f32(((exp + 119) << 23) | (man << 20)); /* (1+man/8) 2^(exp-7) / 2 */
}

/* ggml_fp32_to_ue4m3's rounding, kept bit for bit for the reference NVFP4
 * quantizer: <= 0 and NaN give 0; the mantissa rounds half up; below 2^-6
 * the code is (int)(x*512 + 0.5) capped at 7; anything from 256 up gives
 * 0x7E (448). */
static inline HFQ_HD uint8_t hfq_ue4m3_from_f32_ggml(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    const uint32_t bits = hfq_f32_bits(x);
    int exp = (int)((bits >> 23) & 0xFF) - 127 + 7;
    if (exp <= 0) {
        const int man = (int)(x * 512.0f + 0.5f);
        return (uint8_t)(man > 7 ? 7 : man);
    }
    if (exp >= 15) return 0x7E;
    int man = (int)((bits >> 20) & 7) + (int)((bits >> 19) & 1);
    if (man > 7) {
        man = 0;
        if (++exp >= 15) return 0x7E;
    }
    return (uint8_t)((exp << 3) | man);
}

/* ggml's best_index_mxfp4: the first code of 0..15 with the least
 * |doubled(code) * d - x| (ties to the smaller magnitude, zero as +0). */
static inline HFQ_HD uint8_t hfq_fp4_nearest_ggml(float x, float d) {
    uint8_t best = 0;
    float best_err = fabsf((float)hfq_e2m1_doubled(0) * d - x);
    for (unsigned i = 1; i < 16; i++) {
        const float err = fabsf((float)hfq_e2m1_doubled(i) * d - x);
        if (err < best_err) {
            best = (uint8_t)i;
            best_err = err;
        }
    }
    return best;
}

/* E2M1 code nearest to t given in doubled units, ties to the even code;
 * |t| > 12 saturates, NaN gives 0, results of magnitude 0 are +0. */
static inline HFQ_HD uint8_t hfq_e2m1_rne_doubled(float t) {
    const float a = fabsf(t);
    const unsigned mag = (unsigned)(a > 0.5f) + (a >= 1.5f) + (a > 2.5f) + (a >= 3.5f) +
                         (a > 5.0f) + (a >= 7.0f) + (a > 10.0f);
    return (uint8_t)(mag == 0 ? 0 : (mag | (t < 0.0f ? 8u : 0u)));
}

/* Code for x at (halved) scale d: ggml's nearest, or round-to-nearest-even
 * when rne (d = 0 gives 0). */
static inline HFQ_HD uint8_t hfq_fp4_encode(float x, float d, int rne) {
    if (!rne) return hfq_fp4_nearest_ggml(x, d);
    return d == 0.0f ? 0 : hfq_e2m1_rne_doubled(x / d);
}

/* ---- runs of n codes: first n/2 in low nibbles, last n/2 in high nibbles ---- */

static inline HFQ_HD void hfq_fp4_pack(const float *x, int n, float d, int rne, uint8_t *qs) {
    for (int j = 0; j < n / 2; j++)
        qs[j] = (uint8_t)(hfq_fp4_encode(x[j], d, rne) | (hfq_fp4_encode(x[j + n / 2], d, rne) << 4));
}

static inline HFQ_HD void hfq_fp4_unpack(const uint8_t *qs, int n, float d, float *y) {
    for (int j = 0; j < n / 2; j++) {
        y[j] = (float)hfq_e2m1_doubled(qs[j] & 0xF) * d;
        y[j + n / 2] = (float)hfq_e2m1_doubled(qs[j] >> 4) * d;
    }
}

/* sum of doubled(code) * y over a run of n codes and n int8 values. */
static inline HFQ_HD int hfq_fp4_dot_i8(const uint8_t *qs, int n, const int8_t *y) {
    int sum = 0;
    for (int j = 0; j < n / 2; j++)
        sum += y[j] * hfq_e2m1_doubled(qs[j] & 0xF) + y[j + n / 2] * hfq_e2m1_doubled(qs[j] >> 4);
    return sum;
}

/* sum of doubled(a) * doubled(b) over two runs packed alike in nbytes bytes. */
static inline HFQ_HD int hfq_fp4_dot_fp4(const uint8_t *qa, const uint8_t *qb, int nbytes) {
    int sum = 0;
    for (int j = 0; j < nbytes; j++)
        sum += hfq_e2m1_doubled(qa[j] & 0xF) * hfq_e2m1_doubled(qb[j] & 0xF) +
               hfq_e2m1_doubled(qa[j] >> 4) * hfq_e2m1_doubled(qb[j] >> 4);
    return sum;
}

/* ---- blocks ---- */

/* Effective (halved) scale of an NVFP4 sub-block: ue4m3 / 2, times g if g > 0. */
static inline HFQ_HD float hfq_nvfp4_sub_scale(uint8_t code, float g) {
    const float d = hfq_ue4m3_half_to_f32(code);
    return g > 0.0f ? d * g : d;
}

/* Sub-block scale code for amax: ggml's reference rounding without a global
 * scale, E4M3 round-to-nearest-even of (amax/6)/g with one. */
static inline HFQ_HD uint8_t hfq_nvfp4_scale_code(float amax, float g) {
    return g > 0.0f ? hfq_f32_to_fp8_e4m3(amax / 6.0f / g) : hfq_ue4m3_from_f32_ggml(amax / 6.0f);
}

/* One NVFP4 sub-block of 16 values with the given scale code. */
static inline HFQ_HD void hfq_nvfp4_pack_sub(const float *x, uint8_t code, float g, hfq_block_nvfp4 *y, int s) {
    y->d[s] = code;
    hfq_fp4_pack(x, HFQ_QK_NVFP4_SUB, hfq_nvfp4_sub_scale(code, g), g > 0.0f, y->qs + s * (HFQ_QK_NVFP4_SUB / 2));
}

static inline HFQ_HD float hfq_fp4_amax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]);
    return amax;
}

/* Scale code mapping amax to 4 instead of 6 ("Four Over Six"): the
 * largest values then round on the finer part of the E2M1 grid. */
static inline HFQ_HD int hfq_nvfp4_c4_code(float amax, float g) {
    return g > 0.0f ? hfq_f32_to_fp8_e4m3(amax / 4.0f / g) : hfq_ue4m3_from_f32_ggml(amax / 4.0f);
}

/* W4A4 activations' scale search (hfq.act_quant "nvfp4_search",
 * docs/format-quant-ext.md): codes from HFQ_NVFP4_ACT_SEARCH_RADIUS below
 * the max -> 6 code to as far above the max -> 4 code are tried. */
#define HFQ_NVFP4_ACT_SEARCH_RADIUS 1

/* The search's error of 16 values coded round-to-nearest-even at (halved)
 * scale d: the squared error over amax^2, computed scale-free so that no
 * activation magnitude overflows it: r_j = x_j / d - doubled value of x_j's
 * code (the division the code is rounded from); s_j = r_j^2 + r_(j+8)^2,
 * u_j = s_j + s_(j+4), e = (u_0 + u_1) + (u_2 + u_3) (the order in which
 * the AVX2 search reduces eight candidates at once), times (d / amax)^2 as
 * (e * s) * s; +inf for d = 0 (all values coded 0). */
static inline HFQ_HD float hfq_nvfp4_sub_error_scaled(float e, float d, float amax) {
    const float s = d / amax;
    return d == 0.0f ? INFINITY : e * s * s;
}

static inline HFQ_HD float hfq_nvfp4_sub_sq_error(const float *x, float d, float amax) {
    float s[8];
    for (int j = 0; j < 8; j++) {
        const float ta = x[j] / d, tb = x[j + 8] / d;
        const float a = ta - (float)hfq_e2m1_doubled(hfq_e2m1_rne_doubled(ta));
        const float b = tb - (float)hfq_e2m1_doubled(hfq_e2m1_rne_doubled(tb));
        s[j] = a * a + b * b;
    }
    for (int j = 0; j < 4; j++) s[j] += s[j + 4];
    return hfq_nvfp4_sub_error_scaled((s[0] + s[1]) + (s[2] + s[3]), d, amax);
}

/* The codes the activation scale search tries for a sub-block with
 * largest magnitude amax, global scale g > 0: *lo..*hi (*c6, the max -> 6
 * code, among them), those of a nonzero, finite E4M3 value and *c6, at most
 * HFQ_NVFP4_ACT_SEARCH_MAX from the lowest (one vector of candidates). */
#define HFQ_NVFP4_ACT_SEARCH_MAX 8
static inline HFQ_HD void hfq_nvfp4_act_search_span(float amax, float g, int *c6, int *lo, int *hi) {
    *c6 = hfq_nvfp4_scale_code(amax, g);
    const int c4 = hfq_nvfp4_c4_code(amax, g);
    *lo = *c6 - HFQ_NVFP4_ACT_SEARCH_RADIUS;
    *hi = c4 + HFQ_NVFP4_ACT_SEARCH_RADIUS;
    if (*lo < 1) *lo = *c6 < 1 ? *c6 : 1;
    if (*hi > 0x7E) *hi = 0x7E;
    if (*hi < *c6) *hi = *c6;
    if (*hi > *lo + HFQ_NVFP4_ACT_SEARCH_MAX - 1) *hi = *lo + HFQ_NVFP4_ACT_SEARCH_MAX - 1;
}

/* Of codes lo..hi with squared errors err[c - lo], the least error's, c6 on
 * ties (and when the errors are NaN), then the lowest code. */
static inline HFQ_HD uint8_t hfq_nvfp4_act_search_pick(int c6, int lo, int hi, const float *err) {
    int best = c6;
    for (int c = lo; c <= hi; c++)
        if (err[c - lo] < err[best - lo]) best = c;
    return (uint8_t)best;
}

/* The activation scale code of 16 values (global scale g > 0): of
 * hfq_nvfp4_act_search_span's codes, hfq_nvfp4_act_search_pick's by
 * hfq_nvfp4_sub_sq_error. */
static inline HFQ_HD uint8_t hfq_nvfp4_act_search_code(const float *x, float g) {
    int c6, lo, hi;
    float err[HFQ_NVFP4_ACT_SEARCH_MAX];
    const float amax = hfq_fp4_amax(x, HFQ_QK_NVFP4_SUB);
    hfq_nvfp4_act_search_span(amax, g, &c6, &lo, &hi);
    for (int c = lo; c <= hi; c++) err[c - lo] = hfq_nvfp4_sub_sq_error(x, hfq_nvfp4_sub_scale((uint8_t)c, g), amax);
    return hfq_nvfp4_act_search_pick(c6, lo, hi, err);
}

/* Quantizes 64 values (NVFP4 activations on either device): g = 0 is ggml's
 * reference, g > 0 the global-scale rounding described above. */
static inline HFQ_HD void hfq_quantize_block_nvfp4(const float *x, hfq_block_nvfp4 *y, float g) {
    for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++) {
        const float *xs = x + s * HFQ_QK_NVFP4_SUB;
        hfq_nvfp4_pack_sub(xs, hfq_nvfp4_scale_code(hfq_fp4_amax(xs, HFQ_QK_NVFP4_SUB), g), g, y, s);
    }
}

static inline HFQ_HD void hfq_decode_block_mxfp4(const hfq_block_mxfp4 *b, float *y) {
    hfq_fp4_unpack(b->qs, HFQ_QK_MXFP4, hfq_e8m0_half_to_f32(b->e), y);
}

/* E8M0 exponent of a dynamic MXFP4 activation block with largest magnitude
 * amax, as compressed-tensors 0.20 computes it (generate_mx_scales): amax
 * rounded to a power of two 2^k, up where its mantissa is >= 1.75 (so that
 * the block maximum stays within E2M1's 6), then k + 127 - 2 clamped to
 * 0..254 (an all-zero block: 0). */
static inline HFQ_HD uint8_t hfq_mxfp4_act_exponent(float amax) {
    const uint32_t e = ((hfq_f32_bits(amax) & 0x7FFFFFFFu) + (1u << 21)) >> 23;
    return (uint8_t)(e < 3 ? 0 : e - 2 > 254 ? 254 : e - 2);
}

/* 32 activation values as one MXFP4 block, compressed-tensors' dynamic MX
 * quantization: the exponent above, codes x / 2^(e-127) to E2M1 ties to even
 * (its cast_to_fp4 thresholds), saturated at 6. */
static inline HFQ_HD void hfq_quantize_block_mxfp4_act(const float *x, hfq_block_mxfp4 *y) {
    y->e = hfq_mxfp4_act_exponent(hfq_fp4_amax(x, HFQ_QK_MXFP4));
    hfq_fp4_pack(x, HFQ_QK_MXFP4, hfq_e8m0_half_to_f32(y->e), 1, y->qs);
}

/* acc + an MXFP4 weight block times an MXFP4 activation block: the exact
 * integer sum of doubled codes times both halved scales (products of powers
 * of two: exact). */
static inline HFQ_HD float hfq_acc_block_mxfp4_mxfp4(float acc, const hfq_block_mxfp4 *w, const hfq_block_mxfp4 *a) {
    const float d = hfq_e8m0_half_to_f32(w->e) * hfq_e8m0_half_to_f32(a->e);
    return acc + d * (float)hfq_fp4_dot_fp4(w->qs, a->qs, HFQ_QK_MXFP4 / 2);
}

/* 64 values without the global scale (as ggml's dequantize_row_nvfp4). */
static inline HFQ_HD void hfq_decode_block_nvfp4(const hfq_block_nvfp4 *b, float *y) {
    for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++)
        hfq_fp4_unpack(b->qs + s * (HFQ_QK_NVFP4_SUB / 2), HFQ_QK_NVFP4_SUB,
                       hfq_ue4m3_half_to_f32(b->d[s]), y + s * HFQ_QK_NVFP4_SUB);
}

/* acc + this block's term of ggml_vec_dot_mxfp4_q8_0 (one Q8_0 block). */
static inline HFQ_HD float hfq_acc_block_mxfp4_q8_0(float acc, const hfq_block_mxfp4 *x, const hfq_block_q8_0 *y) {
    const float d = hfq_fp16_to_f32(y->d) * hfq_e8m0_half_to_f32(x->e);
    return acc + d * (float)hfq_fp4_dot_i8(x->qs, HFQ_QK_MXFP4, y->qs);
}

/* acc + this block's four sub-block terms of ggml_vec_dot_nvfp4_q8_0, added
 * in order (y: the two Q8_0 blocks covering the same 64 values). */
static inline HFQ_HD float hfq_acc_block_nvfp4_q8_0(float acc, const hfq_block_nvfp4 *x, const hfq_block_q8_0 *y) {
    for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++) {
        const hfq_block_q8_0 *yb = y + s / 2;
        const int sumi = hfq_fp4_dot_i8(x->qs + s * (HFQ_QK_NVFP4_SUB / 2), HFQ_QK_NVFP4_SUB,
                                        yb->qs + (s % 2) * HFQ_QK_NVFP4_SUB);
        acc += hfq_fp16_to_f32(yb->d) * hfq_ue4m3_half_to_f32(x->d[s]) * (float)sumi;
    }
    return acc;
}

/* acc + sub-block terms of an NVFP4 weight block times an NVFP4 activation
 * block, both without their global scales. */
static inline HFQ_HD float hfq_acc_block_nvfp4_nvfp4(float acc, const hfq_block_nvfp4 *w, const hfq_block_nvfp4 *a) {
    for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++) {
        const int off = s * (HFQ_QK_NVFP4_SUB / 2);
        const int sumi = hfq_fp4_dot_fp4(w->qs + off, a->qs + off, HFQ_QK_NVFP4_SUB / 2);
        acc += hfq_ue4m3_half_to_f32(w->d[s]) * hfq_ue4m3_half_to_f32(a->d[s]) * (float)sumi;
    }
    return acc;
}

/* ---- rows (fp4.c) ---- */

/* nrows rows of n_per_row values (a multiple of 32) into MXFP4 blocks.
 * Returns bytes written, 0 for an invalid geometry. importance: see above.
 * A block whose amax is below 2^-125 (where ggml's formula has undefined
 * behaviour) or infinite gets e clamped to [0, 254]. */
size_t hfq_quantize_mxfp4(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *importance);

/* nrows rows of n_per_row values (a multiple of 64) into NVFP4 blocks, with
 * global scale g (0: none, the ggml reference) - also the W4A4 activation
 * quantizer with g = the input scale. Returns bytes written, 0 for an
 * invalid geometry. */
size_t hfq_quantize_nvfp4(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *importance, float global_scale);

#ifndef __CUDACC__
#include "quant/isa.h"
/* The same with ggml's nearest codes (hfq_fp4_nearest_ggml: MXFP4, and
 * NVFP4 without a global scale) found by the given instruction set's
 * kernel: the same bytes on each (tests/test_quant_simd.c). */
size_t hfq_quantize_mxfp4_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                              const float *importance);
size_t hfq_quantize_nvfp4_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                              const float *importance, float global_scale);
#endif

/* W4A4 activations under hfq.act_quant "nvfp4_search": n values (a
 * multiple of 64) into NVFP4 blocks with global scale g > 0, each 16
 * values' scale code hfq_nvfp4_act_search_code's (else as
 * hfq_quantize_nvfp4 without importance). */
void hfq_quantize_nvfp4_act_search(const float *x, void *dst, int64_t n, float g);

/* NVIDIA's per-tensor global scale: amax(|x|) / (6 * 448); 0 for all zeros. */
float hfq_nvfp4_global_scale(const float *x, int64_t n);

void hfq_dequantize_row_mxfp4(const void *src, float *dst, int64_t n);
/* Without the global scale: multiply by it for the tensor's values. */
void hfq_dequantize_row_nvfp4(const void *src, float *dst, int64_t n);

/* Weight row times float activations (NVFP4: without the global scale): the
 * decoded values (as the dequantizers give them, exact) times x, summed in
 * float in quant/lanes.h's order over the whole row. */
float hfq_dot_mxfp4_f32(const void *w, const void *x, int64_t n);   /* x: float[n] (hfq_vec_dot_fn's type) */
float hfq_dot_nvfp4_f32(const void *w, const void *x, int64_t n);

/* Weight row times Q8_0 activations (hfq_block_q8_0[n/32]), as ggml-cpu. */
float hfq_dot_mxfp4_q8_0(const void *w, const void *a, int64_t n);
float hfq_dot_nvfp4_q8_0(const void *w, const void *a, int64_t n);

/* W4A4: NVFP4 weight row times NVFP4 activation row, without either global
 * scale (multiply the result by g_w * g_a). */
float hfq_dot_nvfp4_nvfp4(const void *w, const void *a, int64_t n);

/* MXFP4 W4A4 (compressed-tensors' MXFP4 scheme): activation row x of n values
 * (a multiple of 32) into blocks of hfq_quantize_block_mxfp4_act, and an
 * MXFP4 weight row times such a row. */
void hfq_quantize_row_mxfp4_act(const float *x, void *dst, int64_t n);
float hfq_dot_mxfp4_mxfp4(const void *w, const void *a, int64_t n);

#endif
