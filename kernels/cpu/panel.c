#include "kernels/cpu/panel.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/panel_layout.h"
#include "kernels/cpu/tile_prefetch.h"
#include "kernels/cpu/quant_kernels.h"
#include "quant/block_math.h"
#include "quant/cpu_features.h"
#include "quant/blocks.h"
#include "quant/blocks_iq.h"
#include "quant/fp4.h"
#include "quant/iq1.h"
#include "quant/iq2.h"
#include "quant/iq3.h"
#include "quant/iq4.h"
#include "quant/tq.h"

/* How a block's integer sums become the reference's float, per token. */
typedef enum panel_epi {
    EPI_ISUM,      /* (dw * da) * (float)S, S = sum_s sc_s * sum_s(w a) (Q6_K, Q3_K, IQ2, IQ3, IQ1) */
    EPI_AFFINE_K,  /* da * (dw * (float)S - dmin * (float)M), M = sum_s m_s * sum_s(a) (Q4_K, Q5_K) */
    EPI_AFFINE_2,  /* (da * dw) * (float)S - (da * dmin) * (float)M (Q2_K) */
    EPI_SUBFLOAT,  /* per sub-block: ((dw * da) * fsc_s) * (float)sum_s(w a) (IQ4_XS) */
    EPI_BLOCK32,   /* per block of 32, Q8_0 activations: (dw * da) * (float)S (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4) */
    EPI_SUB16,     /* per sub-block of 16: acc + (da * ds) * (float)S_s in order (NVFP4; Q8_0 or NVFP4 activations) */
} panel_epi;

#define PANEL_SUBS_MAX 16

/* One weight row's block, decoded. */
typedef struct panel_meta {
    float d, dmin;
    int32_t sc[PANEL_SUBS_MAX];    /* integer sub-block scales */
    int32_t start[PANEL_SUBS_MAX]; /* -128 * the sub-block's code sum: its raw sum's start */
    int32_t m2[PANEL_SUBS_MAX / 2];/* affine: mins of sub-blocks 2t, 2t + 1 as 16-bit pair t */
    float fsc[PANEL_SUBS_MAX];     /* EPI_SUBFLOAT: the sub-block scales as floats */
} panel_meta;

/* One weight row's block of 32, decoded (EPI_BLOCK32). */
typedef struct panel_meta32 {
    float d;
    int32_t start;
} panel_meta32;

/* A sub-block's raw sum starts at start + PANEL_MAGIC_BITS, so its 32 bits
 * read as a float are PANEL_MAGIC + S exactly (|S| < 2^22: the float's unit
 * in the last place is 1 from 2^23 to 2^24). */
#define PANEL_MAGIC 12582912.0f /* 1.5 * 2^23 */
#define PANEL_MAGIC_BITS 0x4B400000

/* One weight row's block of 32 in two sub-blocks of 16, decoded (EPI_SUB16):
 * each sub-block's scale, the scale times PANEL_MAGIC, and its raw sum's
 * start with PANEL_MAGIC_BITS added. */
typedef struct panel_meta16 {
    float d[2], dm[2];
    int32_t start[2];
} panel_meta16;

/* Writes one block's 256 signed codes and its meta (all but `start`). */
typedef void (*panel_decode_fn)(const void *block, int8_t codes[HFQ_QK_K], panel_meta *m);
/* Writes one block's 32 signed codes; returns its scale (EPI_BLOCK32). */
typedef float (*panel_decode32_fn)(const void *block, int8_t codes[HFQ_QK]);
/* Writes one block's 64 signed codes and its four sub-block scales (EPI_SUB16). */
typedef void (*panel_decode64_fn)(const void *block, int8_t codes[2 * HFQ_QK], float d[4]);

struct cpu_panel_format {
    hfq_qtype type;
    int sub;              /* sub-block length: 16, 32 or 256 (one scale a block) */
    panel_epi epi;
    float block_mult;     /* IQ1: the codes are 8 level + shift, so (float)S * 0.125 is the reference's
                             (float)sumi + 0.125 (float)sumi_shift, exactly (both below 2^22) */
    float row_mult;       /* the reference's factor on the row's sum (IQ2: 0.125, IQ3_XXS: 0.25), else 1 */
    size_t block_bytes;
    panel_decode_fn decode;       /* blocks of 256 (Q8_K activations) */
    panel_decode32_fn decode32;   /* blocks of 32 (Q8_0 activations) */
    panel_decode64_fn decode64;   /* blocks of 64 in sub-blocks of 16 (Q8_0 activations) */
    int blk;                      /* elements per block: HFQ_QK_K or HFQ_QK */
    hfq_qtype act;                /* the activation format: Q8_K or Q8_0; W4A4: MXFP4 or NVFP4 */
    int64_t min_tokens[3];        /* per set (AVX2, AVX-VNNI, AVX512-VNNI): below this many tokens the tiles
                                     are as fast or faster */
    int code_bound;               /* the largest |code| a decoder writes (AVX2's 16-bit pair sums: panel_band.inc) */
};

#if defined(__x86_64__)
#include <immintrin.h>

/* The decoders and the panel driver: AVX2 and BMI2 (pdep), every set's. */
#define DECODE_TARGET __attribute__((target("avx2,bmi2")))

/* What the panels need beyond their set's (cpu_quant_isa_runs: AVX2 and
 * F16C at least): BMI2 for the decoders, FMA for NVFP4's fused step in
 * every set (panel_band.inc). */
#define PANEL_FEATURES (CPU_FEAT_BMI2 | CPU_FEAT_FMA)

/* ---- decoders: the levels of quant/'s reference dots, as signed bytes ---- */

/* 8 byte magnitudes e (each 1..255 as the grids hold them, nonzero) negated
 * where bit j of signs is set: (e ^ m) + (m & 1) per byte, m 0xff there;
 * no byte carries into the next, as ~b <= 0xfe for b != 0. */
DECODE_TARGET static inline uint64_t signed8(uint64_t e, uint8_t signs) {
    const uint64_t ones = 0x0101010101010101ull, m = _pdep_u64(signs, ones) * 0xff;
    return (e ^ m) + (m & ones);
}

DECODE_TARGET static void decode_q6_k(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_q6_k *b = blk;
    hfq_levels_q6_k(b, codes);
    m->d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < 16; j++) m->sc[j] = b->scales[j];
}

/* hfq_levels_q3_k with loops that vectorize: element 32 s + l of each half's low bits, 4 less where bit s of hmask[l] is clear. */
DECODE_TARGET static void decode_q3_k(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_q3_k *b = blk;
    uint8_t low[HFQ_QK_K];
    hfq_levels_2bit(b->qs, low);
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++)
            codes[32 * s + l] = (int8_t)(low[32 * s + l] - (((b->hmask[l] >> s) & 1) ? 0 : 4));
    m->d = hfq_fp16_to_f32(b->d);
    for (int j = 0; j < 16; j++) m->sc[j] = hfq_q3_k_scale(j, b->scales);
}

/* Q4_K / Q5_K: unsigned levels 0..31, scales and mins of 6 bits. */
DECODE_TARGET static void k_affine_meta(const uint8_t scales[HFQ_K_SCALE_BYTES], uint16_t d, uint16_t dmin, panel_meta *m) {
    m->d = hfq_fp16_to_f32(d);
    m->dmin = hfq_fp16_to_f32(dmin);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) hfq_k_scale_min(j, scales, &sc[j], &mn[j]);
    for (int j = 0; j < 8; j++) m->sc[j] = sc[j];
    for (int t = 0; t < 4; t++) m->m2[t] = (int32_t)((uint32_t)mn[2 * t] | (uint32_t)mn[2 * t + 1] << 16);
}

DECODE_TARGET static void decode_q4_k(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_q4_k *b = blk;
    hfq_levels_q4_k(b, (uint8_t *)codes);   /* 0..15: the same as signed bytes */
    k_affine_meta(b->scales, b->d, b->dmin, m);
}

DECODE_TARGET static void decode_q5_k(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_q5_k *b = blk;
    hfq_levels_q5_k(b, (uint8_t *)codes);   /* 0..31 */
    k_affine_meta(b->scales, b->d, b->dmin, m);
}

DECODE_TARGET static void decode_q2_k(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_q2_k *b = blk;
    hfq_levels_2bit(b->qs, (uint8_t *)codes);   /* 0..3 */
    m->d = hfq_fp16_to_f32(b->d);
    m->dmin = hfq_fp16_to_f32(b->dmin);
    for (int j = 0; j < 16; j++) m->sc[j] = b->scales[j] & 0x0f;
    for (int t = 0; t < 8; t++)
        m->m2[t] = (int32_t)((uint32_t)(b->scales[2 * t] >> 4) | (uint32_t)(b->scales[2 * t + 1] >> 4) << 16);
}

/* IQ2: groups of 8 from the codebook with 8 sign bits, odd scales 2 s + 1 per 16. */
#define PANEL_DECODE_IQ2(name, block_t)                                                                      \
    DECODE_TARGET static void decode_##name(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {        \
        const block_t *b = blk;                                                                              \
        for (int g = 0; g < HFQ_QK_K / 8; g++) {                                                             \
            uint64_t e;                                                                                      \
            uint8_t s;                                                                                       \
            hfq_##name##_group(b, g, &e, &s);                                                                \
            const uint64_t v = signed8(e, s);                                                                \
            memcpy(codes + 8 * g, &v, 8);                                                                    \
        }                                                                                                    \
        m->d = hfq_fp16_to_f32(b->d);                                                                        \
        for (int h = 0; h < 16; h++) m->sc[h] = 2 * hfq_##name##_scale(b, h) + 1;                            \
    }
PANEL_DECODE_IQ2(iq2_xxs, hfq_block_iq2_xxs)
PANEL_DECODE_IQ2(iq2_xs, hfq_block_iq2_xs)
PANEL_DECODE_IQ2(iq2_s, hfq_block_iq2_s)

/* IQ3: two 4-byte grid entries and 8 sign bits per group of 8. */
DECODE_TARGET static inline void iq3_group(uint32_t g1, uint32_t g2, uint8_t signs, int8_t *codes) {
    const uint64_t v = signed8((uint64_t)g1 | (uint64_t)g2 << 32, signs);
    memcpy(codes, &v, 8);
}

DECODE_TARGET static void decode_iq3_xxs(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_iq3_xxs *b = blk;
    for (int j = 0; j < 8; j++) {   /* hfq_iq3_xxs_levels32's groups */
        const uint32_t aux = hfq_iq3_xxs_aux(b, j);
        const uint8_t *q3 = b->qs + 8 * j;
        for (int l = 0; l < 4; l++)
            iq3_group(hfq_iq3xxs_grid[q3[2 * l]], hfq_iq3xxs_grid[q3[2 * l + 1]], hfq_iq_signs7((aux >> 7 * l) & 127),
                      codes + 32 * j + 8 * l);
        m->sc[j] = (int32_t)(2 * (aux >> 28) + 1);
    }
    m->d = hfq_fp16_to_f32(b->d);
}

DECODE_TARGET static void decode_iq3_s(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_iq3_s *b = blk;
    for (int j = 0; j < 8; j++) {   /* hfq_iq3_s_levels32's groups */
        const uint8_t *qs = b->qs + 8 * j, *signs = b->signs + 4 * j;
        const int qh = b->qh[j];
        for (int l = 0; l < 4; l++)
            iq3_group(hfq_iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)],
                      hfq_iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)], signs[l], codes + 32 * j + 8 * l);
        m->sc[j] = 2 * ((b->scales[j / 2] >> 4 * (j % 2)) & 0xf) + 1;
    }
    m->d = hfq_fp16_to_f32(b->d);
}

/* IQ1: codes 8 level + shift (|code| <= 9), the scale ls of each group of 8
 * constant over the format's sub-block (32 for IQ1_S, 16 for IQ1_M). */
#define PANEL_DECODE_IQ1(name, block_t, sub)                                                                 \
    DECODE_TARGET static void decode_##name(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {        \
        const block_t *b = blk;                                                                              \
        for (int g = 0; g < HFQ_QK_K / 8; g++) {                                                             \
            uint64_t e;                                                                                      \
            int shift, ls;                                                                                   \
            hfq_##name##_group(b, g, &e, &shift, &ls);                                                       \
            const __m128i v = _mm_cvtsi64_si128((long long)e), v2 = _mm_add_epi8(v, v), v4 = _mm_add_epi8(v2, v2); \
            _mm_storel_epi64((__m128i *)(codes + 8 * g),                                                     \
                             _mm_add_epi8(_mm_add_epi8(v4, v4), _mm_set1_epi8((char)shift)));                \
            m->sc[8 * g / (sub)] = ls;                                                                       \
        }                                                                                                    \
        m->d = hfq_##name##_d(b);                                                                            \
    }
PANEL_DECODE_IQ1(iq1_s, hfq_block_iq1_s, 32)
PANEL_DECODE_IQ1(iq1_m, hfq_block_iq1_m, 16)

/* The decoders store each 32 codes at once: the start sums read them back
 * as 32 bytes, which two 16-byte stores would not forward (memcpy for AVX2
 * is two: Q8_0 at 256 tokens 265 -> 215 GMAC/s). */
DECODE_TARGET static float decode_q8_0(const void *blk, int8_t codes[HFQ_QK]) {
    const hfq_block_q8_0 *b = blk;
    _mm256_storeu_si256((__m256i *)codes, _mm256_loadu_si256((const __m256i *)b->qs));
    return hfq_fp16_to_f32(b->d);
}

/* 32 codes from 16 bytes of nibbles (element j low nibble of qs[j], j + 16
 * the high one), each mapped through the 16 signed bytes lut (pshufb). */
DECODE_TARGET static inline __m256i nibbles32(const uint8_t qs[HFQ_QK / 2], __m128i lut) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs), low4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(v, 4), low4)),
                            _mm_shuffle_epi8(lut, _mm_and_si128(v, low4)));
}

DECODE_TARGET static inline void nibbles_lut(const uint8_t qs[HFQ_QK / 2], __m128i lut, int8_t codes[HFQ_QK]) {
    _mm256_storeu_si256((__m256i *)codes, nibbles32(qs, lut));
}

/* The table of hfq_levels_q4_0 (code - 8). */
DECODE_TARGET static float decode_q4_0(const void *blk, int8_t codes[HFQ_QK]) {
    const hfq_block_q4_0 *b = blk;
    nibbles_lut(b->qs, _mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7), codes);
    return hfq_fp16_to_f32(b->d);
}

/* hfq_levels_q5_0: nibble | bit j of qh as bit 4, minus 16. */
DECODE_TARGET static float decode_q5_0(const void *blk, int8_t codes[HFQ_QK]) {
    const hfq_block_q5_0 *b = blk;
    const __m256i low = nibbles32(b->qs, _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    /* element j's byte j / 8 of qh, its bit j % 8 */
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)hfq_load_le32(b->qh)),
                                              _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                                 0x0303030303030303ll));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(0x10));
    _mm256_storeu_si256((__m256i *)codes, _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(16)));
    return hfq_fp16_to_f32(b->d);
}

DECODE_TARGET static float decode_iq4_nl(const void *blk, int8_t codes[HFQ_QK]) {
    const hfq_block_iq4_nl *b = blk;
    static const int8_t levels[16] = HFQ_IQ4NL_LEVELS;
    nibbles_lut(b->qs, _mm_loadu_si128((const __m128i *)levels), codes);
    return hfq_fp16_to_f32(b->d);
}

/* IQ4_XS: each 32's nibbles as IQ4_NL's (hfq_iq4_levels32), its 6-bit scale - 32 as a float. */
DECODE_TARGET static void decode_iq4_xs(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_iq4_xs *b = blk;
    static const int8_t levels[16] = HFQ_IQ4NL_LEVELS;
    const __m128i lut = _mm_loadu_si128((const __m128i *)levels);
    for (int j = 0; j < 8; j++) {
        nibbles_lut(b->qs + 16 * j, lut, codes + 32 * j);
        m->fsc[j] = (float)(hfq_iq4_xs_scale(b, j) - 32);
    }
    m->d = hfq_fp16_to_f32(b->d);
}

/* TQ1_0 / TQ2_0: the trits t - 1 (hfq_tq*_levels) under one scale: one sub-block of 256
 * with scale 1, so EPI_ISUM's (dw * da) * S is the reference's (float)sum * (dw * da). */
DECODE_TARGET static void tq_meta(uint16_t d, panel_meta *m) {
    m->d = hfq_fp16_to_f32(d);
    m->sc[0] = 1;
}

DECODE_TARGET static void decode_tq2_0(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_tq2_0 *b = blk;
    for (int j = 0; j < 2; j++)
        for (int l = 0; l < 4; l++)
            for (int i = 0; i < 32; i++) codes[128 * j + 32 * l + i] = (int8_t)(((b->qs[32 * j + i] >> 2 * l) & 3) - 1);
    tq_meta(b->d, m);
}

/* n bytes q of TQ1_0 trits: trit t of q[i] (hfq_tq1_trit) to codes[t * n + i], t < n_trits (loops that vectorize). */
static inline __attribute__((always_inline)) void tq1_trits(const uint8_t *q, const int n, const int n_trits,
                                                            int8_t *codes) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (int t = 0; t < n_trits; t++)
        for (int i = 0; i < n; i++) {
            const uint8_t shifted = (uint8_t)(q[i] * pow3[t]);
            codes[t * n + i] = (int8_t)((((uint16_t)shifted * 3) >> 8) - 1);
        }
}

DECODE_TARGET static void decode_tq1_0(const void *blk, int8_t codes[HFQ_QK_K], panel_meta *m) {
    const hfq_block_tq1_0 *b = blk;   /* hfq_tq1_0_levels' order */
    tq1_trits(b->qs, 32, 5, codes);
    tq1_trits(b->qs + 32, 16, 5, codes + 160);
    tq1_trits(b->qh, 4, 4, codes + 240);
    tq_meta(b->d, m);
}

/* MXFP4: the doubled E2M1 values hfq_fp4_dot_i8 sums (hfq_e2m1_doubled: |v| <= 12), the halved E8M0 scale. */
DECODE_TARGET static float decode_mxfp4(const void *blk, int8_t codes[HFQ_QK]) {
    const hfq_block_mxfp4 *b = blk;
    nibbles_lut(b->qs, _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12), codes);
    return hfq_e8m0_half_to_f32(b->e);
}

/* NVFP4: each 16's 8 bytes hold values j (low nibble) and j + 8 (high), as
 * hfq_fp4_dot_i8 reads them; the doubled E2M1 values, the halved UE4M3
 * scales (hfq_acc_block_nvfp4_q8_0). */
DECODE_TARGET static void decode_nvfp4(const void *blk, int8_t codes[2 * HFQ_QK], float d[4]) {
    const hfq_block_nvfp4 *b = blk;
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12), low4 = _mm_set1_epi8(0x0f);
    for (int h = 0; h < 2; h++) {   /* sub-blocks 2 h, 2 h + 1 */
        const __m128i v = _mm_loadu_si128((const __m128i *)(b->qs + 16 * h));
        const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(v, low4));
        const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(v, 4), low4));
        /* one 32-byte store: sub_starts reads the 32 codes back in one load */
        _mm256_storeu_si256((__m256i *)(codes + 32 * h), _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi)));
    }
    /* one 16-byte store: the caller reads the scales two at a time, and
     * 8-byte loads of two 4-byte stores wait for them (no forwarding) */
    _mm_storeu_ps(d, _mm_setr_ps(hfq_ue4m3_half_to_f32(b->d[0]), hfq_ue4m3_half_to_f32(b->d[1]),
                                 hfq_ue4m3_half_to_f32(b->d[2]), hfq_ue4m3_half_to_f32(b->d[3])));
}

/* Adding a format: its decoder above and a row here (its reference dot's
 * float steps one of panel_epi's). The token thresholds per set are
 * measured (bench_kernels 1024 1024 3 TOKENS: one thread, tiles / panels
 * GMAC/s, 2026-12-05; batches of whole 16s run best, 24 tokens worse than
 * 16). AVX512-VNNI: Q4_0 at 16 tokens 105 / 113, at 32 126 / 172 (Q5_0,
 * IQ4_NL, MXFP4, Q8_0 alike); IQ4_XS at 16 105 / 144; Q4_K at 24 150 /
 * 142, at 48 the panels ahead (Q3_K, IQ2_XXS later: 121 / 118 at 48);
 * NVFP4 at 32 130 / 106, at 48 128 / 133. AVX-VNNI: Q4_0 at 32 105 / 110,
 * Q8_0 114 / 115 and at 48 110 / 127; IQ4_XS at 32 70 / 100; NVFP4 at 32
 * 72 / 76; Q4_K at 32 88 / 100, Q3_K at 64 96 / 92 and at 128 93 / 110.
 * AVX2: Q4_0 at 32 67 / 78 (Q5_0, MXFP4 alike, IQ4_NL 63 / 64), Q8_0's
 * sign-adjusted sums barely ahead even at 128 (70 / 73); IQ4_XS at 48 62
 * / 66; NVFP4 at 48 62 / 69; Q4_K at 32 66 / 86 (Q2_K, Q5_K, Q6_K,
 * IQ3_S, IQ1_S ahead from 32 too), Q3_K at 48 68 / 70, IQ2_XXS 60 / 64, the
 * grid i-quants behind at 32 (IQ2_XXS 62 / 53). TQ2_0 at 32: AVX512-VNNI 142 / 188, AVX2 72 /
 * 77, at 48 71 / 83, AVX-VNNI 104 / 116; TQ1_0 (its trits cost more to
 * decode) at 64: 129 / 156, AVX2 71 / 72, at 128 71 / 86, AVX-VNNI 98 /
 * 120. W4A4 (bench_matmul): MXFP4 at 32 46 / 51 on
 * AVX512-VNNI, 43 / 37 on AVX2, at 48 42 / 44; NVFP4 at 48 50 / 58 on
 * AVX2. */
#define MINS(avx2, avxvnni, avx512vnni) {avx2, avxvnni, avx512vnni}
#define K_MINS MINS(48, 64, 48)
#define K_MINS_HEAVY MINS(64, 64, 48)   /* decoders or sub-blocks that cost more on AVX2 */
#define Q8_0_MINS MINS(32, 48, 32)
#define K_ROW(type, sub, epi, block_mult, row_mult, block_t, decode, bound, mins) \
    {type, sub, epi, block_mult, row_mult, sizeof(block_t), decode, NULL, NULL, HFQ_QK_K, HFQ_QT_Q8_K, mins, bound}
#define Q8_0_ROW(type, block_t, decode, mins, bound) \
    {type, HFQ_QK, EPI_BLOCK32, 1.0f, 1.0f, sizeof(block_t), NULL, decode, NULL, HFQ_QK, HFQ_QT_Q8_0, mins, bound}
static const struct cpu_panel_format formats[] = {
    K_ROW(HFQ_QT_Q2_K, 16, EPI_AFFINE_2, 1.0f, 1.0f, hfq_block_q2_k, decode_q2_k, 3, K_MINS),
    K_ROW(HFQ_QT_Q3_K, 16, EPI_ISUM, 1.0f, 1.0f, hfq_block_q3_k, decode_q3_k, 4, K_MINS_HEAVY),
    K_ROW(HFQ_QT_Q4_K, 32, EPI_AFFINE_K, 1.0f, 1.0f, hfq_block_q4_k, decode_q4_k, 15, K_MINS),
    K_ROW(HFQ_QT_Q5_K, 32, EPI_AFFINE_K, 1.0f, 1.0f, hfq_block_q5_k, decode_q5_k, 31, K_MINS),
    K_ROW(HFQ_QT_Q6_K, 16, EPI_ISUM, 1.0f, 1.0f, hfq_block_q6_k, decode_q6_k, 32, K_MINS),
    K_ROW(HFQ_QT_IQ2_XXS, 16, EPI_ISUM, 1.0f, 0.125f, hfq_block_iq2_xxs, decode_iq2_xxs, 43, K_MINS_HEAVY),
    K_ROW(HFQ_QT_IQ2_XS, 16, EPI_ISUM, 1.0f, 0.125f, hfq_block_iq2_xs, decode_iq2_xs, 43, K_MINS_HEAVY),
    K_ROW(HFQ_QT_IQ2_S, 16, EPI_ISUM, 1.0f, 0.125f, hfq_block_iq2_s, decode_iq2_s, 43, K_MINS_HEAVY),
    K_ROW(HFQ_QT_IQ3_XXS, 32, EPI_ISUM, 1.0f, 0.25f, hfq_block_iq3_xxs, decode_iq3_xxs, 62, K_MINS_HEAVY),
    K_ROW(HFQ_QT_IQ3_S, 32, EPI_ISUM, 1.0f, 1.0f, hfq_block_iq3_s, decode_iq3_s, 15, K_MINS),
    K_ROW(HFQ_QT_IQ1_S, 32, EPI_ISUM, 0.125f, 1.0f, hfq_block_iq1_s, decode_iq1_s, 9, K_MINS),
    K_ROW(HFQ_QT_IQ1_M, 16, EPI_ISUM, 0.125f, 1.0f, hfq_block_iq1_m, decode_iq1_m, 9, K_MINS_HEAVY),
    K_ROW(HFQ_QT_TQ2_0, HFQ_QK_K, EPI_ISUM, 1.0f, 1.0f, hfq_block_tq2_0, decode_tq2_0, 1, MINS(48, 48, 32)),
    K_ROW(HFQ_QT_TQ1_0, HFQ_QK_K, EPI_ISUM, 1.0f, 1.0f, hfq_block_tq1_0, decode_tq1_0, 1, MINS(96, 96, 64)),
    K_ROW(HFQ_QT_IQ4_XS, 32, EPI_SUBFLOAT, 1.0f, 1.0f, hfq_block_iq4_xs, decode_iq4_xs, 127, MINS(48, 32, 16)),
    Q8_0_ROW(HFQ_QT_Q8_0, hfq_block_q8_0, decode_q8_0, MINS(96, 48, 32), 128),
    Q8_0_ROW(HFQ_QT_Q4_0, hfq_block_q4_0, decode_q4_0, Q8_0_MINS, 8),
    Q8_0_ROW(HFQ_QT_Q5_0, hfq_block_q5_0, decode_q5_0, Q8_0_MINS, 16),
    Q8_0_ROW(HFQ_QT_IQ4_NL, hfq_block_iq4_nl, decode_iq4_nl, Q8_0_MINS, 127),
    Q8_0_ROW(HFQ_QT_MXFP4, hfq_block_mxfp4, decode_mxfp4, Q8_0_MINS, 12),
    {HFQ_QT_NVFP4, 16, EPI_SUB16, 1.0f, 1.0f, sizeof(hfq_block_nvfp4), NULL, NULL, decode_nvfp4, HFQ_QK, HFQ_QT_Q8_0, MINS(48, 32, 48), 12},
    /* W4A4 (hfq_dot_mxfp4_mxfp4, hfq_dot_nvfp4_nvfp4): the activations' doubled E2M1 values as codes */
    {HFQ_QT_MXFP4, HFQ_QK, EPI_BLOCK32, 1.0f, 1.0f, sizeof(hfq_block_mxfp4), NULL, decode_mxfp4, NULL, HFQ_QK,
     HFQ_QT_MXFP4, MINS(48, 48, 32), 12},
    {HFQ_QT_NVFP4, 16, EPI_SUB16, 1.0f, 1.0f, sizeof(hfq_block_nvfp4), NULL, NULL, decode_nvfp4, HFQ_QK, HFQ_QT_NVFP4,
     MINS(48, 48, 48), 12},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

size_t cpu_panel_formats(hfq_qtype *types, hfq_qtype *acts, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < N_FORMATS && n < max; i++, n++) types[n] = formats[i].type, acts[n] = formats[i].act;
    return n;
}

const cpu_panel_format *cpu_panel_format_get(hfq_qtype t, hfq_qtype act, int64_t n_tokens) {
    const cpu_quant_isa isa = cpu_quant_isa_best();
    if (isa == CPU_QUANT_ISA_NONE || !cpu_has(PANEL_FEATURES)) return NULL;
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].type == t && formats[i].act == act &&
            n_tokens >= formats[i].min_tokens[isa - CPU_QUANT_ISA_AVX2])
            return &formats[i];
    return NULL;
}
#define COLS PANEL_COLS   /* tokens side by side: one per 32-bit lane (panel_layout.h) */
#define BAND 8    /* weight rows a band computes (panel_band.inc) */
#define PANEL_ROWS 32

/* The activations of one group of 16 tokens: per block, codes[g][c][k] =
 * qs[4 g + k] + 128 of token c; its scales d per token (one a block, NVFP4
 * activations one per 16); and (blocks of 256, for the affine formats) the
 * code sums of sub-blocks 2t, 2t + 1 as 16-bit pair t per token. */
typedef struct act_group {
    uint8_t *codes;   /* [nb][blk * COLS] */
    float *d;         /* [nb][act_scales][COLS] */
    int32_t *sums2;   /* [nb][PANEL_SUBS_MAX / 2][COLS] */
} act_group;

/* Activation scales per block of f: NVFP4 activations have one per 16 values. */
static int act_scales(const cpu_panel_format *f) { return f->act == HFQ_QT_NVFP4 ? 2 : 1; }

static size_t act_group_bytes(const cpu_panel_format *f, int64_t nb) {
    const size_t sums2 = f->blk == HFQ_QK_K ? PANEL_SUBS_MAX / 2 * COLS * sizeof(int32_t) : 0;
    return (size_t)nb * ((size_t)f->blk * COLS + (size_t)act_scales(f) * COLS * sizeof(float) + sums2);
}

static act_group act_group_at(const cpu_panel_format *f, char *base, int64_t nb, int64_t g) {
    char *p = base + (size_t)g * act_group_bytes(f, nb);
    const size_t codes = (size_t)nb * (size_t)f->blk * COLS;
    return (act_group){.codes = (uint8_t *)p,
                       .d = (float *)(p + codes),
                       .sums2 = (int32_t *)(p + codes + (size_t)nb * (size_t)act_scales(f) * COLS * sizeof(float))};
}

/* The doubled E2M1 values of 16 codes packed in 8 bytes as hfq_fp4_dot_i8
 * reads them (value j low nibble of byte j, j + 8 high; MXFP4's 32 in 16
 * bytes alike), in value order. */
static void fp4_doubled(const uint8_t *qs, int n, int8_t *v) {
    for (int j = 0; j < n / 2; j++) v[j] = (int8_t)hfq_e2m1_doubled(qs[j] & 0xF), v[j + n / 2] = (int8_t)hfq_e2m1_doubled(qs[j] >> 4);
}

/* Tokens t0..t0 + nc - 1 (Q8_K, Q8_0, MXFP4 or NVFP4 rows) into group layout; lanes past nc: zero activations. */
static void pack_group(const cpu_panel_format *f, const char *act, size_t a_stride, int64_t nb, int64_t t0, int nc,
                       act_group g) {
    const int n_d = act_scales(f);
    for (int64_t b = 0; b < nb; b++) {
        uint32_t *codes = (uint32_t *)(g.codes + (size_t)b * (size_t)f->blk * COLS);
        for (int c = 0; c < COLS; c++) {
            if (c >= nc) {
                panel_pad_codes(codes, f->blk, c);
                for (int s = 0; s < n_d; s++) g.d[(b * n_d + s) * COLS + c] = 0.0f;
                if (f->blk == HFQ_QK_K)
                    for (int t = 0; t < PANEL_SUBS_MAX / 2; t++) g.sums2[(b * PANEL_SUBS_MAX / 2 + t) * COLS + c] = 0;
                continue;
            }
            const char *row = act + (size_t)(t0 + c) * a_stride;
            if (f->act == HFQ_QT_MXFP4) {
                const hfq_block_mxfp4 *a = (const hfq_block_mxfp4 *)row + b;
                int8_t v[HFQ_QK];
                fp4_doubled(a->qs, HFQ_QK, v);
                panel_pack_codes(codes, v, HFQ_QK, c);
                g.d[b * COLS + c] = hfq_e8m0_half_to_f32(a->e);
                continue;
            }
            if (f->act == HFQ_QT_NVFP4) {   /* block b: half b % 2 of NVFP4 block b / 2 */
                const hfq_block_nvfp4 *a = (const hfq_block_nvfp4 *)row + b / 2;
                int8_t v[HFQ_QK];
                for (int s = 0; s < 2; s++) {
                    const int sub = 2 * (int)(b % 2) + s;
                    fp4_doubled(a->qs + sub * (HFQ_QK_NVFP4_SUB / 2), HFQ_QK_NVFP4_SUB, v + 16 * s);
                    g.d[(b * 2 + s) * COLS + c] = hfq_ue4m3_half_to_f32(a->d[sub]);
                }
                panel_pack_codes(codes, v, HFQ_QK, c);
                continue;
            }
            if (f->blk == HFQ_QK) {
                const hfq_block_q8_0 *a = (const hfq_block_q8_0 *)row + b;
                panel_pack_codes(codes, a->qs, HFQ_QK, c);
                g.d[b * COLS + c] = hfq_fp16_to_f32(a->d);
                continue;
            }
            const hfq_block_q8_k *a = (const hfq_block_q8_k *)row + b;
            panel_pack_codes(codes, a->qs, HFQ_QK_K, c);
            g.d[b * COLS + c] = a->d;
            for (int t = 0; t < PANEL_SUBS_MAX / 2; t++) {
                int32_t lo, hi;
                if (f->sub == 16) {
                    lo = a->bsums[2 * t];
                    hi = a->bsums[2 * t + 1];
                } else if (t < 4) {
                    lo = a->bsums[4 * t] + a->bsums[4 * t + 1];
                    hi = a->bsums[4 * t + 2] + a->bsums[4 * t + 3];
                } else {
                    lo = hi = 0;
                }
                g.sums2[(b * PANEL_SUBS_MAX / 2 + t) * COLS + c] = (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)hi << 16);
            }
        }
    }
}

/* -128 times the code sum of each sub-block of sub (16, 32 or 256) of the n
 * codes (a multiple of 32), by psadbw on the codes + 128 as unsigned bytes:
 * four sums of 8 a 32-byte load (the load the decoder's 32-byte store
 * forwards to; a byte loop stayed scalar for sub-blocks of 16, 16-byte
 * loads of the store's upper half waited for it). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
sub_starts(const int n, const int sub, const int8_t *q, int32_t start[PANEL_SUBS_MAX]) {
    int32_t acc = 0;
    for (int i = 0; i < n; i += 32) {
        const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + i)), _mm256_set1_epi8((char)0x80));
        const __m256i sad = _mm256_sad_epu8(u, _mm256_setzero_si256());   /* bytes 8 j..8 j + 7 + 1024 in lane j */
        const int32_t s0 = _mm256_extract_epi32(sad, 0) + _mm256_extract_epi32(sad, 2) - 16 * 128;
        const int32_t s1 = _mm256_extract_epi32(sad, 4) + _mm256_extract_epi32(sad, 6) - 16 * 128;
        if (sub == 16) {
            start[i / 16] = -128 * s0;
            start[i / 16 + 1] = -128 * s1;
        } else {
            acc += s0 + s1;
            if ((i + 32) % sub == 0) {
                start[i / sub] = -128 * acc;
                acc = 0;
            }
        }
    }
}

/* Bytes of one block's meta. */
static size_t meta_bytes(const cpu_panel_format *f) {
    return f->blk == HFQ_QK_K ? sizeof(panel_meta) : f->epi == EPI_SUB16 ? sizeof(panel_meta16) : sizeof(panel_meta32);
}

/* One band (panel_band.inc): out[r][c], row r's reference dot with token c of group g. */
typedef void (*band_fn)(const cpu_panel_format *f, const int8_t *codes, int64_t k, const void *meta, int64_t nb,
                        const act_group *g, float out[BAND][COLS]);

/* BAND_ISA's values (numbers: panel_band.inc tests them in #if) */
#define BAND_SET_AVX2 1
#define BAND_SET_AVXVNNI 2
#define BAND_SET_AVX512VNNI 3

#define BAND_TARGET __attribute__((target("avx2,fma,f16c")))
#define BAND_NAME(x) x##_avx2
#define BAND_ISA BAND_SET_AVX2
#include "kernels/cpu/panel_band.inc"
#undef BAND_TARGET
#undef BAND_NAME
#undef BAND_ISA

#define BAND_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define BAND_NAME(x) x##_avxvnni
#define BAND_ISA BAND_SET_AVXVNNI
#include "kernels/cpu/panel_band.inc"
#undef BAND_TARGET
#undef BAND_NAME
#undef BAND_ISA

#define BAND_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define BAND_NAME(x) x##_avx512vnni
#define BAND_ISA BAND_SET_AVX512VNNI
#include "kernels/cpu/panel_band.inc"
#undef BAND_TARGET
#undef BAND_NAME
#undef BAND_ISA

/* The panel of rows r0.. (nr of them, the rest zero) times every token group, by bands of run. */
typedef void (*products_fn)(const cpu_panel_format *f, band_fn run, const hfq_tensor *w, int64_t r0, int nr,
                            int8_t *codes, char *meta, char *groups, int64_t n_tokens, float *y);

/* Set isa's kernels for format f; false for none. */
static bool kernels_for(const cpu_panel_format *f, cpu_quant_isa isa, band_fn *run, products_fn *products) {
    switch (isa) {
    case CPU_QUANT_ISA_AVX2: *run = band_for_avx2(f), *products = panel_products_avx2; return true;
    case CPU_QUANT_ISA_AVXVNNI: *run = band_for_avxvnni(f), *products = panel_products_avxvnni; return true;
    case CPU_QUANT_ISA_AVX512VNNI: *run = band_for_avx512vnni(f), *products = panel_products_avx512vnni; return true;
    case CPU_QUANT_ISA_NONE: break;
    }
    return false;
}

bool cpu_panel_matmul_isa(const cpu_panel_format *f, cpu_quant_isa isa, int n_threads, const hfq_tensor *w,
                          const void *act, size_t a_stride, int64_t n_tokens, float *y) {
    band_fn run;
    products_fn products;
    if (!cpu_has(PANEL_FEATURES) || !cpu_quant_isa_runs(isa) || !kernels_for(f, isa, &run, &products) || !run) return false;
    const int64_t k = w->ne0, nb = k / f->blk, n_out = w->ne1;
    const int64_t n_groups = (n_tokens + COLS - 1) / COLS;
    const size_t panel_bytes = ((size_t)PANEL_ROWS * ((size_t)k + (size_t)nb * meta_bytes(f)) + 63) / 64 * 64;
    const size_t group_bytes = (size_t)n_groups * act_group_bytes(f, nb);
    if (n_threads < 1) n_threads = 1;
    char *groups = aligned_alloc(64, (group_bytes + 63) / 64 * 64);
    char *panels = aligned_alloc(64, (panel_bytes * (size_t)n_threads + 63) / 64 * 64);
    if (!groups || !panels) {
        free(groups);
        free(panels);
        return false;
    }
    #pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t g = 0; g < n_groups; g++) {
        const int nc = (int)(n_tokens - g * COLS < COLS ? n_tokens - g * COLS : COLS);
        pack_group(f, act, a_stride, nb, g * COLS, nc, act_group_at(f, groups, nb, g));
    }
    const int64_t n_panels = (n_out + PANEL_ROWS - 1) / PANEL_ROWS;
    #pragma omp parallel num_threads(n_threads)
    {
        char *mine = panels + panel_bytes * (size_t)omp_get_thread_num();
        int8_t *codes = (int8_t *)mine;
        char *meta = mine + (size_t)PANEL_ROWS * (size_t)k;
        #pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < n_panels; p++) {
            const int64_t r0 = p * PANEL_ROWS;
            const int nr = (int)(n_out - r0 < PANEL_ROWS ? n_out - r0 : PANEL_ROWS);
            products(f, run, w, r0, nr, codes, meta, groups, n_tokens, y);
        }
    }
    free(groups);
    free(panels);
    return true;
}

bool cpu_panel_matmul(const cpu_panel_format *f, int n_threads, const hfq_tensor *w, const void *act,
                      size_t a_stride, int64_t n_tokens, float *y) {
    return cpu_panel_matmul_isa(f, cpu_quant_isa_best(), n_threads, w, act, a_stride, n_tokens, y);
}

#else

size_t cpu_panel_formats(hfq_qtype *types, hfq_qtype *acts, size_t max) {
    (void)types, (void)acts, (void)max;
    return 0;
}

const cpu_panel_format *cpu_panel_format_get(hfq_qtype t, hfq_qtype act, int64_t n_tokens) {
    (void)t, (void)act, (void)n_tokens;
    return NULL;
}

bool cpu_panel_matmul_isa(const cpu_panel_format *f, cpu_quant_isa isa, int n_threads, const hfq_tensor *w,
                          const void *act, size_t a_stride, int64_t n_tokens, float *y) {
    (void)f, (void)isa, (void)n_threads, (void)w, (void)act, (void)a_stride, (void)n_tokens, (void)y;
    return false;
}

bool cpu_panel_matmul(const cpu_panel_format *f, int n_threads, const hfq_tensor *w, const void *act,
                      size_t a_stride, int64_t n_tokens, float *y) {
    return cpu_panel_matmul_isa(f, cpu_quant_isa_best(), n_threads, w, act, a_stride, n_tokens, y);
}

#endif

bool cpu_panel_products(const cpu_wkernel *k, int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                        const float *a_scales, int64_t n_tokens, float *y) {
    if (w->qext == HFQ_QEXT_INT8 && k->act_kind == CPU_ACT_CODES)
        return cpu_panel_int8_fits(w, n_tokens) && cpu_panel_int8_matmul(n_threads, w, act, a_stride, a_scales, n_tokens, y);
    if (w->qext) {   /* FP8 codes, INT8 codes with float activations (FLOAT) */
        cpu_fp8_operands o;
        if (k->act_kind == CPU_ACT_CODES && k->i8_act == CPU_I8_ACT_BF16_PAIRS) o = CPU_FP8_W8A8;
        else if (k->act_kind == CPU_ACT_FP8_GROUP) o = CPU_FP8_SCALED;
        else if (k->act_kind == CPU_ACT_F32_CODES) o = CPU_FP8_FLOAT;
        else return false;
        /* INT8 codes with float activations: the panels from CPU_PANEL_FP8_MIN_TOKENS (one
         * token streams faster through the tile: 34 GB/s against the rows' 29; in groups of
         * 128 both 25-26) */
        if (w->qext == HFQ_QEXT_INT8 && n_tokens < CPU_PANEL_FP8_MIN_TOKENS) return false;
        return cpu_panel_fp8_fits(w, o) && cpu_panel_fp8_matmul(o, n_threads, w, act, a_stride, a_scales, n_tokens, y);
    }
    /* weight-only MXFP4 / NVFP4 (float activations): their blocks decoded into FLOAT's products */
    if (k->act_kind == CPU_ACT_FORMAT && k->act && k->act->type == HFQ_QT_F32 && cpu_panel_fp8_fits(w, CPU_FP8_FLOAT))
        return cpu_panel_fp8_matmul(CPU_FP8_FLOAT, n_threads, w, act, a_stride, NULL, n_tokens, y);
    /* one token of the 32-value nibble formats with Q8_0 activations: decoding rows */
    if (k->act_kind == CPU_ACT_FORMAT && k->act && k->act->type == HFQ_QT_Q8_0 && cpu_rows_nibbles_fits(w, n_tokens))
        return cpu_rows_nibbles_matmul(n_threads, w, act, y);
    /* ggml formats with their vec_dot_type's rows, or W4A4's MXFP4 / NVFP4 blocks */
    hfq_qtype a;
    if (k->act_kind == CPU_ACT_FORMAT && !k->act_f32 && k->act) a = k->act->type;
    else if (k->act_kind == CPU_ACT_MXFP4) a = HFQ_QT_MXFP4;
    else if (k->act_kind == CPU_ACT_NVFP4) a = HFQ_QT_NVFP4;
    else return false;
    const cpu_panel_format *f = k->w ? cpu_panel_format_get(k->w->type, a, n_tokens) : NULL;
    return f && cpu_panel_matmul(f, n_threads, w, act, a_stride, n_tokens, y);
}
