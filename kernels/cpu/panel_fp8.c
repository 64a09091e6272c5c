/* FP8 code products (panel.h) on AVX-512 with VBMI, every batch size: W8A8
 * (AVX512-BF16 too), weight-only and scaled float operands; and INT8 codes
 * with float activations (weight-only), decoded by the same table lookup,
 * and MXFP4 / NVFP4 blocks with float activations (weight-only), decoded
 * to floats by a 16-entry table times each block's scale.
 *
 * The reference, hfq_dot_fp8_fp8, adds term i to partial sum i % 8
 * (quant/lanes.h); in the BF16 pair form (cpu_i8_fp8_pairs) word k of the 16
 * values j.. holds value j + k in its high half and j + 8 + k in its low
 * half, and one vdpbf16ps adds to a float lane its high halves' product,
 * then its low halves' - partial sum k's next two steps, in the reference's
 * order and rounding (i8_kernels.c, bf16_pairs). Here each vector of 16
 * lanes carries two dots whole: lane 8 h + k is partial sum k of dot h, so
 * that the word operand is 8 words broadcast to both halves and no lane
 * needs another's sums until the end, where sums16 finishes 16 dots at once
 * as hfq_lanes_sum does.
 *
 * Few tokens (decoding): a vector's two dots are two weight rows with one
 * token, whose 8 words are broadcast; each 32 codes of a pair of rows
 * become their pair form in six instructions (decode2: one vpermb puts the
 * codes in pair order, two 128-entry vpermt2b tables give the BF16 bytes of
 * the 7-bit magnitudes, the sign is copied, two unpacks interleave), where
 * widening to floats cost a dozen for 16 codes. Many tokens (prompts): two
 * tokens with one weight row, whose 8 words are broadcast; a thread decodes
 * a panel of rows once per product, the tokens are laid out two by two,
 * each row's broadcast meets PAIRS pairs, BAND rows at a time, and sums16's
 * lanes (row, token) become each token's rows with one permute. The float
 * operands (weight-only, scaled) go the same ways, 8 values a step; where
 * the reference restarts its partial sums per scale group (weight-only in
 * groups), a band finishes each group's steps before the next (band_groups).
 * Where vdpbf16ps issues at under half the rate of vfmadd231ps (Intel's
 * Sapphire Rapids), W8A8 batches take the float way instead - weights
 * decoded to floats, the activations' pairs widened, one fused multiply-add
 * a product - for the same results (panel.h, cpu_panel_fp8_matmul_by). */
#include "kernels/cpu/panel.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats/ggml_type.h"
#include "kernels/cpu/tile_prefetch.h"
#include "quant/cpu_features.h"
#include "quant/fp4.h"
#include "quant/lanes.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define FP8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi")))
#define ROW_PAIRS 4       /* decoding: weight rows a step, in pairs: 8 */
#define STEP_TOKENS 2     /* decoding: tokens a step (each more re-decodes less, holds 4 more sums) */
#define PAIRS 3           /* prompts: token pairs a group, 6 tokens */
#define BAND 8            /* prompts: weight rows a call keeps sums for, 8 x 3 vectors */
#define PANEL_ROWS 32     /* four bands, sixteen decoded pairs */

/* The BF16 bits of FP8 magnitude m (0..127), hfq_fp8_to_f32's float's top
 * half (its low half is zero): zero, subnormals (f times the smallest),
 * normals (the exponent rebased), E4M3's NaN at 0x7F, E5M2's infinity at
 * 0x7C and NaNs above, each the reference's quiet NaN
 * (test_fp8_w8a8_products: products over all 256 codes of both formats,
 * bit for bit). */
#define SUB_LEAD(f, top) ((f) >= (top) ? 2 : (f) >= (top) / 2 ? 1 : 0)
#define E4M3_BF16(m)                                                                                              \
    ((m) == 0 ? 0 : (m) == 0x7F ? 0x7FC0                                                                          \
     : (m) < 8 ? ((118 + SUB_LEAD(m, 4)) << 7) | ((((m) << (3 - SUB_LEAD(m, 4))) & 7) << 4)                       \
               : ((((m) >> 3) + 120) << 7) | (((m) & 7) << 4))
#define E5M2_BF16(m)                                                                                              \
    ((m) == 0 ? 0 : (m) == 0x7C ? 0x7F80 : (m) > 0x7C ? 0x7FC0                                                     \
     : (m) < 4 ? ((111 + SUB_LEAD(m, 4)) << 7) | ((((m) << (2 - SUB_LEAD(m, 4))) & 3) << 5)                       \
               : ((((m) >> 2) + 112) << 7) | (((m) & 3) << 5))
#define R4(F, b) F(b), F(b + 1), F(b + 2), F(b + 3)
#define R16(F, b) R4(F, b), R4(F, b + 4), R4(F, b + 8), R4(F, b + 12)
#define R128(F) R16(F, 0), R16(F, 16), R16(F, 32), R16(F, 48), R16(F, 64), R16(F, 80), R16(F, 96), R16(F, 112)
static const uint16_t e4m3_bf16[128] = {R128(E4M3_BF16)};
static const uint16_t e5m2_bf16[128] = {R128(E5M2_BF16)};

/* The weights' codes: FP8 bytes, INT8 bytes (weight-only, FLOAT), or
 * MXFP4 / NVFP4 blocks (weight-only, FLOAT: decoded straight to floats,
 * fp4_floats, not to the pair form). */
typedef enum code_kind { CODES_FP8, CODES_INT8, CODES_MXFP4, CODES_NVFP4 } code_kind;

/* decode2's tables (the low and high bytes of a format's 128 BF16s, 64 a
 * register) and its byte order; INT8 codes: the table of magnitudes
 * 0..127, indexed by |code|, -128 apart; FP4: the 16 codes' floats
 * (quant/fp4.h's doubled E2M1, to be times the half scales). */
typedef struct fp8_decoder {
    __m512i lo[2], hi[2], order;
    __m512 fp4;
    float scale_of[256];   /* FP4: each scale byte's half scale (E8M0 or UE4M3) */
    code_kind kind;
} fp8_decoder;

FP8_TARGET static fp8_decoder decoder_of(const hfq_tensor *w) {
    const hfq_qext q = w->qext;
    uint16_t int8_bf16[128];   /* the BF16 bits of 0..127: exact (8 significant bits at most) */
    for (int m = 0; m < 128; m++) {
        const float f = (float)m;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        int8_bf16[m] = (uint16_t)(bits >> 16);
    }
    const uint16_t *bf16 = q == HFQ_QEXT_INT8 ? int8_bf16 : q == HFQ_QEXT_FP8_E5M2 ? e5m2_bf16 : e4m3_bf16;
    fp8_decoder d = {.kind = q == HFQ_QEXT_INT8 ? CODES_INT8 : q ? CODES_FP8 : w->type == GT_NVFP4 ? CODES_NVFP4 : CODES_MXFP4};
    if (d.kind == CODES_MXFP4 || d.kind == CODES_NVFP4) {   /* built per product: FP8 and INT8 skip them */
        float fp4[16];
        for (unsigned c = 0; c < 16; c++) fp4[c] = (float)hfq_e2m1_doubled(c);
        d.fp4 = _mm512_loadu_ps(fp4);
        for (int b = 0; b < 256; b++)
            d.scale_of[b] = d.kind == CODES_NVFP4 ? hfq_ue4m3_half_to_f32((uint8_t)b) : hfq_e8m0_half_to_f32((uint8_t)b);
    }
    for (int h = 0; h < 2; h++) {
        const __m512i a = _mm512_loadu_si512(bf16 + 64 * h), b = _mm512_loadu_si512(bf16 + 64 * h + 32);
        d.lo[h] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(a)), _mm512_cvtepi16_epi8(b), 1);
        d.hi[h] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srli_epi16(a, 8))),
                                     _mm512_cvtepi16_epi8(_mm512_srli_epi16(b, 8)), 1);
    }
    /* decode2's input: row 0's 32 codes, then row 1's. unpacklo_epi8 makes
     * 128-bit lane L's 8 words of its bytes 0..7, unpackhi of 8..15: lane L
     * (row L / 2, words 4 (L % 2)..) takes from the first 16 codes into the
     * low bytes, the second 16 into the high, word-halves e in pair order:
     * element q = 8 (L % 2) + e of the pair form is value 8 + q / 2 when q
     * is even (a word's low half), q / 2 when odd */
    uint8_t order[64];
    for (int lane = 0; lane < 4; lane++)
        for (int e = 0; e < 8; e++) {
            const int q = 8 * (lane % 2) + e, v = (q % 2 ? q / 2 : 8 + q / 2) + 32 * (lane / 2);
            order[16 * lane + e] = (uint8_t)v;
            order[16 * lane + 8 + e] = (uint8_t)(v + 16);
        }
    d.order = _mm512_loadu_si512(order);
    return d;
}

/* FP4 values of two rows from their 16 code bytes each, row 0's in the
 * low 8 lanes (bytes x0, x0 + 1 ..., x0 the chosen 8-byte half's): the low
 * nibbles' values times sc, *first, the high nibbles', *second. */
FP8_TARGET static inline __attribute__((always_inline)) void fp4_values(const fp8_decoder *d, __m128i bytes, __m512 sc,
                                                                        __m512 *low, __m512 *high) {
    const __m512i c = _mm512_cvtepu8_epi32(bytes);   /* vpermps reads each index's low 4 bits */
    *low = _mm512_mul_ps(_mm512_permutexvar_ps(c, d->fp4), sc);
    *high = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(c, 4), d->fp4), sc);
}

/* Two rows' scales, row 0's in the low 8 lanes. */
FP8_TARGET static inline __m512 two_scales(float s0, float s1) {
    return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
}

/* Values i.. i + 31 of FP4 rows r0 and r1 as floats, row 0's in the low
 * 8 lanes: f[0] values i + k, f[1] i + 8 + k, f[2] i + 16 + k, f[3]
 * i + 24 + k (k < 8) - each code's float times its block's half scale, as
 * quant/fp4.h decodes. An MXFP4 block's byte j holds values j (low nibble)
 * and j + 16; half an NVFP4 block is two sub-blocks of 16, byte j of
 * each values j and j + 8. */
FP8_TARGET static inline __attribute__((always_inline)) void fp4_floats(const fp8_decoder *d, const uint8_t *r0,
                                                                        const uint8_t *r1, int64_t i, __m512 f[4]) {
    if (d->kind == CODES_MXFP4) {
        const hfq_block_mxfp4 *b0 = (const hfq_block_mxfp4 *)r0 + i / HFQ_QK_MXFP4, *b1 = (const hfq_block_mxfp4 *)r1 + i / HFQ_QK_MXFP4;
        const __m512 sc = two_scales(d->scale_of[b0->e], d->scale_of[b1->e]);
        const __m128i q0 = _mm_loadu_si128((const __m128i *)b0->qs), q1 = _mm_loadu_si128((const __m128i *)b1->qs);
        fp4_values(d, _mm_unpacklo_epi64(q0, q1), sc, &f[0], &f[2]);
        fp4_values(d, _mm_unpackhi_epi64(q0, q1), sc, &f[1], &f[3]);
        return;
    }
    const hfq_block_nvfp4 *b0 = (const hfq_block_nvfp4 *)r0 + i / HFQ_QK_NVFP4, *b1 = (const hfq_block_nvfp4 *)r1 + i / HFQ_QK_NVFP4;
    const int s = (int)(i % HFQ_QK_NVFP4) / HFQ_QK_NVFP4_SUB;   /* sub-blocks s, s + 1 */
    const __m128i q0 = _mm_loadu_si128((const __m128i *)(b0->qs + s * HFQ_QK_NVFP4_SUB / 2));
    const __m128i q1 = _mm_loadu_si128((const __m128i *)(b1->qs + s * HFQ_QK_NVFP4_SUB / 2));
    fp4_values(d, _mm_unpacklo_epi64(q0, q1), two_scales(d->scale_of[b0->d[s]], d->scale_of[b1->d[s]]), &f[0], &f[1]);
    fp4_values(d, _mm_unpackhi_epi64(q0, q1), two_scales(d->scale_of[b0->d[s + 1]], d->scale_of[b1->d[s + 1]]), &f[2],
               &f[3]);
}

/* Values i.. i + 31 of rows r0 and r1 (or 16: the second vector then
 * garbage) in the pair form: *first the 16 values' words of r0 (low half)
 * and r1 (high), *second the next 16's. */
FP8_TARGET static inline __attribute__((always_inline)) void decode2(const fp8_decoder *d, const uint8_t *r0,
                                                                     const uint8_t *r1, int64_t i, bool half,
                                                                     __m512i *first, __m512i *second) {
    const uint8_t *p0 = r0 + i, *p1 = r1 + i;
    const __m256i c0 = half ? _mm256_maskz_loadu_epi8(0xFFFF, p0) : _mm256_loadu_si256((const __m256i *)p0);
    const __m256i c1 = half ? _mm256_maskz_loadu_epi8(0xFFFF, p1) : _mm256_loadu_si256((const __m256i *)p1);
    const __m512i codes = _mm512_permutexvar_epi8(d->order, _mm512_inserti64x4(_mm512_castsi256_si512(c0), c1, 1));
    /* FP8: sign and 7-bit magnitude; INT8: |code| (-128's 0x80 reads as index 0, set after) */
    const __m512i index = d->kind == CODES_INT8 ? _mm512_abs_epi8(codes) : codes;
    const __m512i lo = _mm512_permutex2var_epi8(d->lo[0], index, d->lo[1]);
    /* vpermt2b reads index bits 0..6: the sign bit is copied in after */
    __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(d->hi[0], index, d->hi[1]), codes,
                                           _mm512_set1_epi8((char)0x80), 0xF8);   /* a | (b & c) */
    if (d->kind == CODES_INT8)   /* -128: BF16 0xC300 (its low byte 0, index 0's) */
        hi = _mm512_mask_mov_epi8(hi, _mm512_cmpeq_epi8_mask(index, _mm512_set1_epi8((char)0x80)), _mm512_set1_epi8((char)0xC3));
    *first = _mm512_unpacklo_epi8(lo, hi);
    *second = _mm512_unpackhi_epi8(lo, hi);
}

/* The dots of x[p] (p < 8; dot h of x[p] in lanes 8 h..8 h + 7, partial
 * sums in order) finished as hfq_lanes_sum does, ((s0 + s4) + (s2 + s6)) +
 * ((s1 + s5) + (s3 + s7)): dot h of x[p] in lane 2 p + h. */
FP8_TARGET static inline __m512 sums16(const __m512 x[8]) {
    /* t_k = s_k + s_k+4 (4 per dot, 4 dots a vector), u_0 = t_0 + t_2 and
     * u_1 = t_1 + t_3 (2 per dot, 8 a vector), then u_0 + u_1 */
    const __m512i lo4 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i lo2 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i two = _mm512_set1_epi32(2), four = _mm512_set1_epi32(4), one = _mm512_set1_epi32(1);
    __m512 t[4], u[2];
    for (int p = 0; p < 4; p++)
        t[p] = _mm512_add_ps(_mm512_permutex2var_ps(x[2 * p], lo4, x[2 * p + 1]),
                             _mm512_permutex2var_ps(x[2 * p], _mm512_add_epi32(lo4, four), x[2 * p + 1]));
    for (int p = 0; p < 2; p++)
        u[p] = _mm512_add_ps(_mm512_permutex2var_ps(t[2 * p], lo2, t[2 * p + 1]),
                             _mm512_permutex2var_ps(t[2 * p], _mm512_add_epi32(lo2, two), t[2 * p + 1]));
    return _mm512_add_ps(_mm512_permutex2var_ps(u[0], even, u[1]),
                         _mm512_permutex2var_ps(u[0], _mm512_add_epi32(even, one), u[1]));
}

/* The kernels below take the operands m (cpu_fp8_operands, panel.h) as a
 * constant wherever inlined: W8A8's BF16 pairs meet in vdpbf16ps, 16 values
 * a 32-byte step, the scales last; the float activations of SCALED (each
 * weight's float times its scale first, fused into its partial sum) and
 * FLOAT (product, then sum: hfq_dot_fp8_f32's steps, the scale last) take 8
 * values a 32-byte step. */

/* The scale of weight row r's values from i (scale groups of len); FP4's
 * are in their blocks (NVFP4's tensor scale is cpu_matmul's, after). */
static inline float scale_at(const hfq_tensor *w, int64_t r, int64_t i, int64_t len) {
    return !w->qext ? 1.0f : w->scale_groups ? w->scale[r * w->scale_groups + i / len] : w->scale[0];
}

/* Values per 32-byte step of a row in the panel and in the activations. */
static inline int64_t step_values(cpu_fp8_operands m) { return m == CPU_FP8_W8A8 ? 16 : 8; }

/* The 16 values' floats of a pair-form vector v (rows 0 and 1 in its
 * halves), SCALED times their rows' scales sc: *first values j + k,
 * *second j + 8 + k, lane 8 h + k. */
FP8_TARGET static inline __attribute__((always_inline)) void pair_floats(const cpu_fp8_operands m, __m512i v, __m512 sc,
                                                                         __m512 *first, __m512 *second) {
    *first = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
    *second = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    if (m == CPU_FP8_SCALED) *first = _mm512_mul_ps(*first, sc), *second = _mm512_mul_ps(*second, sc);
}

/* FLOAT's floats of values i.. i + 31 of rows r0 and r1 (or 16), row 0's
 * in the low 8 lanes: f[2 h] values i + 16 h + k, f[2 h + 1] i + 16 h + 8
 * + k - pair_floats' halves of decode2's vectors, or FP4's floats. */
FP8_TARGET static inline __attribute__((always_inline)) void float_values(const fp8_decoder *d, const uint8_t *r0,
                                                                          const uint8_t *r1, int64_t i, bool half,
                                                                          __m512 f[4]) {
    if (d->kind == CODES_MXFP4 || d->kind == CODES_NVFP4) {
        fp4_floats(d, r0, r1, i, f);
        return;
    }
    __m512i v[2];
    decode2(d, r0, r1, i, half, &v[0], &v[1]);
    for (int h = 0; h < 2; h++) pair_floats(CPU_FP8_FLOAT, v[h], _mm512_setzero_ps(), &f[2 * h], &f[2 * h + 1]);
}

/* acc + w * a: fused (SCALED: the float tiles'), or the product rounded
 * first (FLOAT: hfq_dot_fp8_f32's). */
FP8_TARGET static inline __attribute__((always_inline)) __m512 float_step(const cpu_fp8_operands m, __m512 acc, __m512 w,
                                                                          __m512 a) {
    return m == CPU_FP8_SCALED ? _mm512_fmadd_ps(w, a, acc) : _mm512_add_ps(acc, _mm512_mul_ps(w, a));
}

/* Both rows' scales at value i, rows 0 and 1 in the halves. */
FP8_TARGET static inline __m512 pair_scales(const hfq_tensor *w, int64_t r0, int64_t r1, int64_t i, int64_t len) {
    return _mm512_insertf32x8(_mm512_set1_ps(scale_at(w, r0, i, len)), _mm256_set1_ps(scale_at(w, r1, i, len)), 1);
}

/* Scale groups FLOAT and W8A8 finish one at a time
 * (hfq_dot_int8_f32, hfq_dot_fp8_f32_groups and hfq_dot_fp8_fp8_groups
 * restart their partial sums in each); 1 else (SCALED scales each value). */
static inline int64_t finished_groups(const hfq_tensor *w, cpu_fp8_operands m) {
    return m != CPU_FP8_SCALED && w->scale_groups > 1 ? w->scale_groups : 1;
}

/* The dots v of scale group g of sg (finished as hfq_lanes_sum does) into
 * the results out: W8A8 with one scale times (w_scale * a_scale), as
 * hfq_dot_fp8_fp8; in groups each group's times its w_scale wsv added to a
 * sum from 0, then W8A8's times a_scale as, as hfq_dot_int8_f32 and
 * hfq_dot_fp8_*_groups do (INT8 codes: from 0 with one scale too,
 * from_zero; FP8 FLOAT with one: times w_scale alone, hfq_dot_fp8_f32);
 * SCALED's are the dots. */
FP8_TARGET static inline __m512 finish_group(const cpu_fp8_operands m, int64_t sg, int64_t g, bool from_zero, __m512 v,
                                             __m512 wsv, __m512 as, __m512 out) {
    if (m == CPU_FP8_SCALED) return v;
    if (m == CPU_FP8_W8A8 && sg == 1) return _mm512_mul_ps(v, _mm512_mul_ps(wsv, as));
    const __m512 scaled = _mm512_mul_ps(v, wsv);
    out = g ? _mm512_add_ps(out, scaled) : from_zero ? _mm512_add_ps(_mm512_setzero_ps(), scaled) : scaled;
    return m == CPU_FP8_W8A8 && g == sg - 1 ? _mm512_mul_ps(out, as) : out;
}

/* Whether FLOAT and W8A8 results start from a sum of 0 (above). */
static inline bool sums_from_zero(const hfq_tensor *w, cpu_fp8_operands m) {
    return w->qext == HFQ_QEXT_INT8 || finished_groups(w, m) > 1;
}

/* ---- decoding: weights decoded as they stream, rows in pairs ---- */

/* acc[rp][c] + the products of 16 values j.. of the row pairs (lo: j + k,
 * hi: j + 8 + k) with C tokens' float activation rows a[c]. */
FP8_TARGET static inline __attribute__((always_inline)) void float_steps(const cpu_fp8_operands m, const void *const a[],
                                                                         const int C, int64_t j, const __m512 lo[ROW_PAIRS],
                                                                         const __m512 hi[ROW_PAIRS],
                                                                         __m512 acc[ROW_PAIRS][STEP_TOKENS]) {
    for (int c = 0; c < C; c++) {
        const float *ac = (const float *)a[c] + j;
        const __m512 a0 = _mm512_broadcast_f32x8(_mm256_loadu_ps(ac)), a1 = _mm512_broadcast_f32x8(_mm256_loadu_ps(ac + 8));
        for (int rp = 0; rp < ROW_PAIRS; rp++) acc[rp][c] = float_step(m, acc[rp][c], lo[rp], a0);
        for (int rp = 0; rp < ROW_PAIRS; rp++) acc[rp][c] = float_step(m, acc[rp][c], hi[rp], a1);
    }
}

/* acc[rp][c] + the products of rows wr (2 ROW_PAIRS of them: rows ri[..]
 * of w, their values i0.. i1 - 1, the next rows read ahead) with C tokens'
 * activation rows a[c] (pair-form words, or floats). */
FP8_TARGET static inline __attribute__((always_inline)) void
row_sums(const fp8_decoder *d, const cpu_fp8_operands m, const hfq_tensor *w, const int64_t ri[2 * ROW_PAIRS],
         const uint8_t *const wr[2 * ROW_PAIRS], const void *const a[], const int C, int64_t i0, int64_t i1,
         __m512 acc[ROW_PAIRS][STEP_TOKENS]) {
    const int64_t n = w->ne0, len = w->scale_groups ? n / w->scale_groups : n;
    __m512 sc[ROW_PAIRS];   /* SCALED: the scales of the group in progress */
    for (int rp = 0; rp < ROW_PAIRS; rp++) sc[rp] = _mm512_setzero_ps();
    for (int64_t i = i0; i < i1; i += 32) {
        const bool half = i1 - i < 32;
        prefetch_next_rows(wr[0], w->row_bytes, 2 * ROW_PAIRS, i / 32, 32);
        __m512i first[ROW_PAIRS], second[ROW_PAIRS];
        for (int rp = 0; rp < ROW_PAIRS; rp++) decode2(d, wr[2 * rp], wr[2 * rp + 1], i, half, &first[rp], &second[rp]);
        if (m == CPU_FP8_W8A8) {
            for (int c = 0; c < C; c++) {
                const uint32_t *ac = (const uint32_t *)a[c] + i / 2;
                const __m512bh a0 = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)ac));
                for (int rp = 0; rp < ROW_PAIRS; rp++) acc[rp][c] = _mm512_dpbf16_ps(acc[rp][c], (__m512bh)first[rp], a0);
                if (half) continue;
                const __m512bh a1 = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(ac + 8)));
                for (int rp = 0; rp < ROW_PAIRS; rp++) acc[rp][c] = _mm512_dpbf16_ps(acc[rp][c], (__m512bh)second[rp], a1);
            }
            continue;
        }
        for (int h = 0; h < (half ? 1 : 2); h++) {   /* values i + 16 h.. (scale groups are whole 16s) */
            if (m == CPU_FP8_SCALED && (i + 16 * h) % len == 0)
                for (int rp = 0; rp < ROW_PAIRS; rp++) sc[rp] = pair_scales(w, ri[2 * rp], ri[2 * rp + 1], i + 16 * h, len);
            __m512 lo[ROW_PAIRS], hi[ROW_PAIRS];
            for (int rp = 0; rp < ROW_PAIRS; rp++) pair_floats(m, h ? second[rp] : first[rp], sc[rp], &lo[rp], &hi[rp]);
            float_steps(m, a, C, i + 16 * h, lo, hi, acc);
        }
    }
}

/* row_sums of FP4 rows (FLOAT): their blocks' floats, 32 values a step. */
FP8_TARGET static inline __attribute__((always_inline)) void
fp4_row_sums(const fp8_decoder *d, const hfq_tensor *w, const uint8_t *const wr[2 * ROW_PAIRS], const void *const a[],
             const int C, __m512 acc[ROW_PAIRS][STEP_TOKENS]) {
    const int64_t n = w->ne0;
    const size_t step_bytes = w->row_bytes / (size_t)(n / 32);   /* 32 values' bytes */
    for (int64_t i = 0; i < n; i += 32) {
        prefetch_next_rows(wr[0], w->row_bytes, 2 * ROW_PAIRS, i / 32, step_bytes);
        __m512 f[ROW_PAIRS][4];
        for (int rp = 0; rp < ROW_PAIRS; rp++) fp4_floats(d, wr[2 * rp], wr[2 * rp + 1], i, f[rp]);
        for (int h = 0; h < 2; h++) {
            __m512 lo[ROW_PAIRS], hi[ROW_PAIRS];
            for (int rp = 0; rp < ROW_PAIRS; rp++) lo[rp] = f[rp][2 * h], hi[rp] = f[rp][2 * h + 1];
            float_steps(CPU_FP8_FLOAT, a, C, i + 16 * h, lo, hi, acc);
        }
    }
}

/* y[t * n_out + r0 + r] for rows r < nr (<= 2 ROW_PAIRS) and C tokens t0.. */
FP8_TARGET static inline __attribute__((always_inline)) void
rows_tokens(const fp8_decoder *d, const cpu_fp8_operands m, const bool fp4, const hfq_tensor *w, int64_t r0, int nr, const void *act,
            size_t a_stride, const float *a_scales, int64_t t0, const int C, float *y) {
    int64_t ri[2 * ROW_PAIRS];
    const uint8_t *wr[2 * ROW_PAIRS];
    const void *a[STEP_TOKENS];
    for (int r = 0; r < 2 * ROW_PAIRS; r++) {
        ri[r] = r0 + (r < nr ? r : 0);
        wr[r] = (const uint8_t *)w->data + (size_t)ri[r] * w->row_bytes;
    }
    for (int c = 0; c < C; c++) a[c] = (const char *)act + (size_t)(t0 + c) * a_stride;
    const int64_t sg = finished_groups(w, m), len = w->ne0 / sg;
    const bool from_zero = sums_from_zero(w, m);
    __m512 out[STEP_TOKENS] = {_mm512_setzero_ps()};
    for (int64_t g = 0; g < sg; g++) {
        __m512 acc[ROW_PAIRS][STEP_TOKENS];
        for (int rp = 0; rp < ROW_PAIRS; rp++)
            for (int c = 0; c < C; c++) acc[rp][c] = _mm512_setzero_ps();
        if (fp4) fp4_row_sums(d, w, wr, a, C, acc);
        else row_sums(d, m, w, ri, wr, a, C, g * len, (g + 1) * len, acc);
        float ws[16] = {0};
        for (int r = 0; r < nr && m != CPU_FP8_SCALED; r++) ws[r] = scale_at(w, ri[r], g * len, len);
        const __m512 wsv = _mm512_loadu_ps(ws);
        for (int c = 0; c < C; c++) {
            __m512 x[8];
            for (int rp = 0; rp < 8; rp++) x[rp] = rp < ROW_PAIRS ? acc[rp][c] : _mm512_setzero_ps();
            const __m512 as = _mm512_set1_ps(m == CPU_FP8_W8A8 ? a_scales[t0 + c] : 0.0f);
            out[c] = finish_group(m, sg, g, from_zero, sums16(x), wsv, as, out[c]);
        }
    }
    for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(y + (t0 + c) * w->ne1 + r0, (__mmask16)((1u << nr) - 1), out[c]);
}

FP8_TARGET static inline __attribute__((always_inline)) void rows_matmul(const cpu_fp8_operands m, const bool fp4, int n_threads,
                                                                         const hfq_tensor *w, const void *act,
                                                                         size_t a_stride, const float *a_scales,
                                                                         int64_t n_tokens, float *y) {
    const fp8_decoder d = decoder_of(w);
    const int64_t n_out = w->ne1, n_blocks = (n_out + 2 * ROW_PAIRS - 1) / (2 * ROW_PAIRS);
    /* guided: each thread streams its own stretch of rows first (matmul.c's products) */
    #pragma omp parallel for num_threads(n_threads) schedule(guided, 4) \
        if (w->ne0 * n_out * n_tokens >= CPU_PARALLEL_MIN_MACS)
    for (int64_t b = 0; b < n_blocks; b++) {
        const int64_t r0 = b * 2 * ROW_PAIRS;
        const int nr = (int)(n_out - r0 < 2 * ROW_PAIRS ? n_out - r0 : 2 * ROW_PAIRS);
        int64_t t = 0;
        for (; t + STEP_TOKENS <= n_tokens; t += STEP_TOKENS)
            rows_tokens(&d, m, fp4, w, r0, nr, act, a_stride, a_scales, t, STEP_TOKENS, y);
        for (; t < n_tokens; t++) rows_tokens(&d, m, fp4, w, r0, nr, act, a_stride, a_scales, t, 1, y);
    }
}

/* ---- prompts: panels of decoded rows, tokens in pairs ---- */

/* Rows rb.. rb + BAND - 1 of the panel (row_bytes each: 32-byte steps of
 * pair-form words or floats) times one group of 2 PAIRS tokens (grouped as
 * panel_matmul lays them out), steps 32-byte steps from wp and act: out[p]
 * lane 2 r + h, row r's dot with token 2 p + h. */
FP8_TARGET static inline __attribute__((always_inline)) void band(const cpu_fp8_operands m, const bool fma,
                                                                  const char *wp, size_t row_bytes, const char *act,
                                                                  size_t steps, __m512 out[PAIRS]) {
    __m512 acc[BAND][PAIRS];
    for (int r = 0; r < BAND; r++)
        for (int p = 0; p < PAIRS; p++) acc[r][p] = _mm512_setzero_ps();
    for (size_t s = 0; s < steps; s++) {
        __m512i a[PAIRS];
        for (int p = 0; p < PAIRS; p++) a[p] = _mm512_load_si512(act + (s * PAIRS + (size_t)p) * 64);
#pragma GCC unroll 8
        for (int r = 0; r < BAND; r++) {
            const __m512i wv = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)(wp + r * row_bytes + 32 * s)));
#pragma GCC unroll 3
            for (int p = 0; p < PAIRS; p++)
                acc[r][p] = m == CPU_FP8_W8A8 && !fma ? _mm512_dpbf16_ps(acc[r][p], (__m512bh)a[p], (__m512bh)wv)
                                                      /* fma: fused, as SCALED's steps */
                                                      : float_step(fma ? CPU_FP8_SCALED : m, acc[r][p], _mm512_castsi512_ps(wv),
                                                                   _mm512_castsi512_ps(a[p]));
        }
    }
    for (int p = 0; p < PAIRS; p++) {
        __m512 x[BAND];
        for (int r = 0; r < BAND; r++) x[r] = acc[r][p];
        out[p] = sums16(x);
    }
}

/* band over every scale group g < sg of g_steps steps (one group: the
 * whole row), each group's sums finished in turn as finish_group does, in
 * sums16's lane order (lane 2 r + h: row r, token h of the pair): out[p].
 * ws: the groups' scales of these BAND rows, PANEL_ROWS apart; as[p]: the
 * pair's activation scales in that lane order. The groups are finished
 * here, not by the caller a call per group: with groups of 128 values a
 * band runs 8 steps, and a call, its sums' spills and the caller's
 * scalar steps per group were half its time. */
FP8_TARGET static inline __attribute__((always_inline)) void
band_groups(const cpu_fp8_operands m, const bool fma, const char *wp, size_t row_bytes, const char *act, size_t g_steps,
            int64_t sg, const float *ws, bool from_zero, const __m512 as[PAIRS], __m512 out[PAIRS]) {
    /* lane 2 r + h: row r's scale */
    const __m512i row_of_lane = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    for (int p = 0; p < PAIRS; p++) out[p] = _mm512_setzero_ps();
    for (int64_t g = 0; g < sg; g++) {
        __m512 sums[PAIRS];
        band(m, fma, wp + (size_t)g * g_steps * 32, row_bytes, act + (size_t)g * g_steps * PAIRS * 64, g_steps, sums);
        /* SCALED's scales are in its decoded values (ws is not filled) */
        const __m512 wsv = m == CPU_FP8_SCALED ? _mm512_setzero_ps()
                                               : _mm512_permutexvar_ps(row_of_lane, _mm512_castps256_ps512(_mm256_loadu_ps(ws + g * PANEL_ROWS)));
        for (int p = 0; p < PAIRS; p++) out[p] = finish_group(m, sg, g, from_zero, sums[p], wsv, as[p], out[p]);
    }
}

/* band_groups' instances, out of line: band inlined into the panel's
 * loops shared the registers of its 24 sums with them (W8A8 at 256 tokens
 * 220 -> 176 GMAC/s, one thread). */
#define BAND_GROUPS(name, mode, fma)                                                                               \
    FP8_TARGET static __attribute__((noinline)) void name(const char *wp, size_t row_bytes, const char *act,       \
                                                          size_t g_steps, int64_t sg, const float *ws, bool from_zero, \
                                                          const __m512 as[PAIRS], __m512 out[PAIRS]) {             \
        band_groups(mode, fma, wp, row_bytes, act, g_steps, sg, ws, from_zero, as, out);                           \
    }
BAND_GROUPS(band_w8a8, CPU_FP8_W8A8, false)
BAND_GROUPS(band_w8a8_fma, CPU_FP8_W8A8, true)
BAND_GROUPS(band_scaled, CPU_FP8_SCALED, false)
BAND_GROUPS(band_float, CPU_FP8_FLOAT, false)
#undef BAND_GROUPS

/* Rows r0 and r1 of w decoded into the panel rows p0 and p1 (row_bytes
 * each): pair-form words (W8A8), or each value's float (SCALED: times its
 * scale). */
FP8_TARGET static inline __attribute__((always_inline)) void decode_rows(const fp8_decoder *d, const cpu_fp8_operands m,
                                                                         const hfq_tensor *w, int64_t r0, int64_t r1,
                                                                         char *p0, char *p1) {
    const int64_t n = w->ne0, len = w->scale_groups ? n / w->scale_groups : n;
    const uint8_t *c0 = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    const uint8_t *c1 = (const uint8_t *)w->data + (size_t)r1 * w->row_bytes;
    for (int64_t i = 0; i < n; i += 32) {
        /* the pair two pairs on (the rows follow one another): panels are
         * decoded in bursts between their products, and without it the
         * codes' loads waited on memory */
        prefetch_next_rows(c0, w->row_bytes, 2, i / 32, 32);
        __m512i v[2];
        __m512 f[4];   /* FLOAT */
        if (m == CPU_FP8_FLOAT) float_values(d, c0, c1, i, n - i < 32, f);
        else decode2(d, c0, c1, i, n - i < 32, &v[0], &v[1]);
        for (int h = 0; h < (n - i < 32 ? 1 : 2); h++) {   /* values i + 16 h.. */
            __m512i lo = v[h], hi = v[h];
            if (m == CPU_FP8_FLOAT) {
                lo = _mm512_castps_si512(f[2 * h]), hi = _mm512_castps_si512(f[2 * h + 1]);
            } else if (m == CPU_FP8_SCALED) {
                __m512 flo, fhi;
                pair_floats(m, v[h], pair_scales(w, r0, r1, i + 16 * h, len), &flo, &fhi);
                lo = _mm512_castps_si512(flo), hi = _mm512_castps_si512(fhi);
            }
            /* W8A8: 32 bytes a row (16 values' words); floats: 64 (values j.. then j + 8..) */
            const size_t at = m == CPU_FP8_W8A8 ? (size_t)(i + 16 * h) * 2 : (size_t)(i + 16 * h) * 4;
            _mm256_store_si256((__m256i *)(p0 + at), _mm512_castsi512_si256(lo));
            _mm256_store_si256((__m256i *)(p1 + at), _mm512_extracti64x4_epi64(lo, 1));
            if (m == CPU_FP8_W8A8) continue;
            _mm256_store_si256((__m256i *)(p0 + at + 32), _mm512_castsi512_si256(hi));
            _mm256_store_si256((__m256i *)(p1 + at + 32), _mm512_extracti64x4_epi64(hi, 1));
        }
    }
}

/* Panel rows r0.. (nr of them) decoded, times every token group, finished
 * group by group in the bands (ws: finished_groups x PANEL_ROWS scales). */
FP8_TARGET static inline __attribute__((always_inline)) void
panel_products(const fp8_decoder *d, const cpu_fp8_operands m, const bool fma, const hfq_tensor *w, int64_t r0, int nr,
               char *wp, float *ws, const char *groups, const float *a_scales, int64_t n_tokens, float *y) {
    const cpu_fp8_operands decoded = fma ? CPU_FP8_FLOAT : m;   /* the panel's values: panel_matmul's fma */
    const int64_t n = w->ne0, n_out = w->ne1, sg = finished_groups(w, m), len = n / sg;
    const size_t row_bytes = (size_t)(n / step_values(decoded)) * 32, group_bytes = row_bytes * 2 * PAIRS;
    const size_t g_steps = row_bytes / 32 / (size_t)sg;
    const bool from_zero = sums_from_zero(w, m);
    for (int r = 0; r < PANEL_ROWS; r += 2) {
        const int64_t ra = r0 + (r < nr ? r : 0), rb = r0 + (r + 1 < nr ? r + 1 : 0);
        decode_rows(d, decoded, w, ra, rb, wp + (size_t)r * row_bytes, wp + (size_t)(r + 1) * row_bytes);
    }
    if (m != CPU_FP8_SCALED)
        for (int64_t g = 0; g < sg; g++)
            for (int r = 0; r < PANEL_ROWS; r++) ws[g * PANEL_ROWS + r] = r < nr ? scale_at(w, r0 + r, g * len, len) : 0.0f;
    /* sums16's lanes 2 r + h to token h's rows in order */
    const __m512i by_token = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += 2 * PAIRS) {
        const char *act = groups + (size_t)(t0 / (2 * PAIRS)) * group_bytes;
        __m512 as[PAIRS];   /* sums16's lane order: even lanes token 2 p, odd 2 p + 1 */
        for (int p = 0; p < PAIRS; p++) {
            const int64_t t = t0 + 2 * p;
            const float a0 = m == CPU_FP8_W8A8 && t < n_tokens ? a_scales[t] : 0.0f;
            const float a1 = m == CPU_FP8_W8A8 && t + 1 < n_tokens ? a_scales[t + 1] : 0.0f;
            as[p] = _mm512_mask_blend_ps((__mmask16)0xAAAA, _mm512_set1_ps(a0), _mm512_set1_ps(a1));
        }
        for (int rb = 0; rb < nr; rb += BAND) {
            __m512 out[PAIRS];
            (fma ? band_w8a8_fma : m == CPU_FP8_W8A8 ? band_w8a8 : m == CPU_FP8_SCALED ? band_scaled : band_float)(
                wp + (size_t)rb * row_bytes, row_bytes, act, g_steps, sg, ws + rb, from_zero, as, out);
            for (int p = 0; p < PAIRS; p++) out[p] = _mm512_permutexvar_ps(by_token, out[p]);
            const __mmask8 rows = (__mmask8)((1u << (nr - rb < BAND ? nr - rb : BAND)) - 1);
            for (int p = 0; p < PAIRS && t0 + 2 * p < n_tokens; p++) {
                const int64_t t = t0 + 2 * p;
                _mm256_mask_storeu_ps(y + t * n_out + r0 + rb, rows, _mm512_castps512_ps256(out[p]));
                if (t + 1 < n_tokens) _mm256_mask_storeu_ps(y + (t + 1) * n_out + r0 + rb, rows, _mm512_extractf32x8_ps(out[p], 1));
            }
        }
    }
}

FP8_TARGET static inline __attribute__((always_inline)) bool panel_matmul(const cpu_fp8_operands m, const bool fma,
                                                                          int n_threads, const hfq_tensor *w,
                                                                          const void *act, size_t a_stride,
                                                                          const float *a_scales, int64_t n_tokens,
                                                                          float *y) {
    const int64_t n_out = w->ne1, steps = w->ne0 / step_values(fma ? CPU_FP8_FLOAT : m);
    const int64_t n_groups = (n_tokens + 2 * PAIRS - 1) / (2 * PAIRS);
    const size_t row_bytes = (size_t)steps * 32, group_bytes = row_bytes * 2 * PAIRS;
    /* a panel, then its rows' scales (finished_groups of PANEL_ROWS): a multiple of 64 */
    const size_t panel_bytes = PANEL_ROWS * row_bytes + (size_t)finished_groups(w, m) * PANEL_ROWS * sizeof(float);
    if (n_threads < 1) n_threads = 1;
    /* one allocation: the token groups, then a panel per thread */
    char *scratch = aligned_alloc(64, group_bytes * (size_t)n_groups + panel_bytes * (size_t)n_threads);
    if (!scratch) return false;
    char *groups = scratch, *panels = scratch + group_bytes * (size_t)n_groups;
    /* group g, step s, token pair p: 64 bytes, token 2 p's step s, then
     * token 2 p + 1's; tokens past the last: zeros */
    #pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t g = 0; g < n_groups; g++) {
        char *dst = groups + (size_t)g * group_bytes;
        for (int c = 0; c < 2 * PAIRS; c++) {
            const int64_t t = g * 2 * PAIRS + c;
            const char *src = (const char *)act + (size_t)t * a_stride;
#define STEP_AT(s) (dst + (size_t)((s) * PAIRS + c / 2) * 64 + (size_t)(c % 2) * 32)
            for (int64_t s = 0; s < steps; s++) {
                char *to = STEP_AT(s);
                if (t >= n_tokens) memset(to, 0, 32);
                else if (!fma) memcpy(to, src + s * 32, 32);
                else if (s % 2 == 0) {   /* fma: steps s, s + 1 are the pair words of values 8 s.. widened as the weights are */
                    __m512 first, second;
                    pair_floats(CPU_FP8_FLOAT, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(src + s / 2 * 32))),
                                _mm512_setzero_ps(), &first, &second);
                    _mm256_store_ps((float *)to, _mm512_castps512_ps256(first));
                    _mm256_store_ps((float *)STEP_AT(s + 1), _mm512_castps512_ps256(second));
                }
            }
#undef STEP_AT
        }
    }
    const fp8_decoder d = decoder_of(w);
    const int64_t n_panels = (n_out + PANEL_ROWS - 1) / PANEL_ROWS;
    #pragma omp parallel num_threads(n_threads)
    {
        char *wp = panels + panel_bytes * (size_t)omp_get_thread_num();
        float *ws = (float *)(wp + PANEL_ROWS * row_bytes);
        #pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < n_panels; p++) {
            const int64_t r0 = p * PANEL_ROWS;
            const int nr = (int)(n_out - r0 < PANEL_ROWS ? n_out - r0 : PANEL_ROWS);
            panel_products(&d, m, fma, w, r0, nr, wp, ws, groups, a_scales, n_tokens, y);
        }
    }
    free(scratch);
    return true;
}

bool cpu_panel_fp8_fits(const hfq_tensor *w, cpu_fp8_operands o) {
    const int64_t len = w->scale_groups > 1 ? w->ne0 / w->scale_groups : w->ne0;
    const unsigned avx512 = CPU_FEAT_AVX512F | CPU_FEAT_AVX512BW | CPU_FEAT_AVX512DQ | CPU_FEAT_AVX512VL;
    const bool int8 = w->qext == HFQ_QEXT_INT8 && o == CPU_FP8_FLOAT;
    const bool fp4 = !w->qext && (w->type == GT_MXFP4 || w->type == GT_NVFP4) && o == CPU_FP8_FLOAT;
    return (w->qext == HFQ_QEXT_FP8_E4M3 || w->qext == HFQ_QEXT_FP8_E5M2 || int8 || fp4) && w->ne0 % 16 == 0 &&
           (w->scale_groups <= 1 || len % (o == CPU_FP8_SCALED ? 32 : 16) == 0) &&
           cpu_has(avx512 | CPU_FEAT_AVX512VBMI | (o == CPU_FP8_W8A8 ? CPU_FEAT_AVX512BF16 : 0));
}

/* Seconds for 16 chains of 512 vdpbf16ps (dp) or vfmadd231ps (operands
 * of 1: no overflow, no subnormals), the best of five. */
FP8_TARGET static double chains_seconds(bool dp) {
    double best = 1e9;
    for (int run = 0; run < 5; run++) {
        __m512 acc[16];
        for (int c = 0; c < 16; c++) acc[c] = _mm512_set1_ps((float)c);
        __m512 one = _mm512_set1_ps(1.0f);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < 512; i++) {
            __asm__("" : "+v"(one));   /* not hoisted: each step issued */
#pragma GCC unroll 16
            for (int c = 0; c < 16; c++)
                acc[c] = dp ? _mm512_dpbf16_ps(acc[c], (__m512bh)_mm512_set1_epi32(0x3F803F80), (__m512bh)_mm512_castps_si512(one))
                            : _mm512_fmadd_ps(one, one, acc[c]);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        float sink = 0.0f;
        for (int c = 0; c < 16; c++) sink += _mm512_reduce_add_ps(acc[c]);
        __asm__ volatile("" : : "x"(sink));
        const double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (sec < best) best = sec;
    }
    return best;
}

/* cpu_fp8_w8a8_by's measurement: whether this CPU runs vfmadd231ps at more
 * than twice the rate of vdpbf16ps (32 products against 16), once per
 * process; two threads measuring at once both store a valid answer, so no
 * lock. */
static bool w8a8_by_fma(void) {
    static _Atomic int found;   /* 0: not yet, 1: BF16 pairs, 2: fma */
    int f = found;
    if (!f) {
        f = chains_seconds(true) > 2.0 * chains_seconds(false) ? 2 : 1;
        found = f;
    }
    return f == 2;
}

FP8_TARGET bool cpu_panel_fp8_matmul_by(cpu_fp8_w8a8_by by, cpu_fp8_operands o, int n_threads, const hfq_tensor *w,
                                        const void *act, size_t a_stride, const float *a_scales, int64_t n_tokens,
                                        float *y) {
    /* a constant mode into each instance */
    if (n_tokens < CPU_PANEL_FP8_MIN_TOKENS) {
        if (o == CPU_FP8_W8A8) rows_matmul(CPU_FP8_W8A8, false, n_threads, w, act, a_stride, a_scales, n_tokens, y);
        else if (o == CPU_FP8_SCALED) rows_matmul(CPU_FP8_SCALED, false, n_threads, w, act, a_stride, NULL, n_tokens, y);
        else if (w->qext) rows_matmul(CPU_FP8_FLOAT, false, n_threads, w, act, a_stride, NULL, n_tokens, y);
        else rows_matmul(CPU_FP8_FLOAT, true, n_threads, w, act, a_stride, NULL, n_tokens, y);
        return true;
    }
    if (o == CPU_FP8_W8A8) {
        const bool fma = by == CPU_FP8_BY_FMA || (by == CPU_FP8_BY_MEASURED && w8a8_by_fma());
        return fma ? panel_matmul(CPU_FP8_W8A8, true, n_threads, w, act, a_stride, a_scales, n_tokens, y)
                   : panel_matmul(CPU_FP8_W8A8, false, n_threads, w, act, a_stride, a_scales, n_tokens, y);
    }
    if (o == CPU_FP8_SCALED) return panel_matmul(CPU_FP8_SCALED, false, n_threads, w, act, a_stride, NULL, n_tokens, y);
    return panel_matmul(CPU_FP8_FLOAT, false, n_threads, w, act, a_stride, NULL, n_tokens, y);
}

#else

bool cpu_panel_fp8_fits(const hfq_tensor *w, cpu_fp8_operands o) {
    (void)w, (void)o;
    return false;
}

bool cpu_panel_fp8_matmul_by(cpu_fp8_w8a8_by by, cpu_fp8_operands o, int n_threads, const hfq_tensor *w, const void *act,
                             size_t a_stride, const float *a_scales, int64_t n_tokens, float *y) {
    (void)by, (void)o, (void)n_threads, (void)w, (void)act, (void)a_stride, (void)a_scales, (void)n_tokens, (void)y;
    return false;
}

#endif

bool cpu_panel_fp8_matmul(cpu_fp8_operands o, int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                          const float *a_scales, int64_t n_tokens, float *y) {
    return cpu_panel_fp8_matmul_by(CPU_FP8_BY_MEASURED, o, n_threads, w, act, a_stride, a_scales, n_tokens, y);
}
