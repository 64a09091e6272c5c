#include "kernels/cpu/quant_kernels.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "quant/cpu_features.h"
#include "quant/block_math.h"
#include "quant/blocks.h"
#include "quant/iq4.h"
#include "quant/fp4.h"
#include "kernels/cpu/tile_prefetch.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* The helpers every instruction set's tiles share (AVX2 and F16C; they
 * inline into the functions of wider targets). */
#define AVX2 __attribute__((target("avx2,f16c")))

/* The horizontal sums of four vectors, in one vector: [sum v0, sum v1, sum v2, sum v3]. */
AVX2 static inline __m128i hsum4_i32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

AVX2 static inline __m128i hsum4_i32x4(__m128i v0, __m128i v1, __m128i v2, __m128i v3) {
    return _mm_hadd_epi32(_mm_hadd_epi32(v0, v1), _mm_hadd_epi32(v2, v3));
}

/* fp16 values as floats (F16C: exact, as hfq_fp16_to_f32 for all but NaN payloads). */
AVX2 static inline __m128 fp16x4(const uint16_t h[4]) {
    return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)h));
}

AVX2 static inline __m128 fp16_bcast(uint16_t h) { return _mm_cvtph_ps(_mm_set1_epi16((short)h)); }

/* fp16x4 of values just computed or loaded one at a time: set from
 * registers, where fp16x4's 8-byte load would wait on four 2-byte stores. */
AVX2 static inline __m128 fp16_regs4(const uint16_t h[4]) {
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

/* hfq_k_scale_min of the eight sub-blocks of two Q4_K blocks, as 8 x int16
 * each: from the 32-bit words w0, w1, w2 of the packed scales (one block
 * per 128-bit lane), scales (w0 & 0x3f.., (w2 & 0x0f..) | (w0 >> 6 & 3..) << 4)
 * and mins (w1 & 0x3f.., (w2 >> 4 & 0x0f..) | (w1 >> 6 & 3..) << 4). */
AVX2 static inline void k_scales_mins_pair(const hfq_block_q4_k *b0, const hfq_block_q4_k *b1, __m128i sc[2],
                                           __m128i m[2]) {
    /* 16 bytes from the scales on: the last 4 are levels, unused */
    const __m256i w = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)b1->scales),
                                       _mm_loadu_si128((const __m128i *)b0->scales));
    const __m256i w2_shifted = _mm256_srlv_epi32(_mm256_shuffle_epi32(w, 0xaa), _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0));
    const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi32(0x3f3f3f3f));
    const __m256i hi = _mm256_or_si256(
        _mm256_and_si256(w2_shifted, _mm256_set1_epi32(0x0f0f0f0f)),
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 6), _mm256_set1_epi32(0x03030303)), 4));
    /* per lane: scales low, scales high, mins low, mins high */
    const __m256i both = _mm256_unpacklo_epi32(lo, hi);
    const __m128i both0 = _mm256_castsi256_si128(both), both1 = _mm256_extracti128_si256(both, 1);
    sc[0] = _mm_cvtepu8_epi16(both0);
    m[0] = _mm_cvtepu8_epi16(_mm_srli_si128(both0, 8));
    sc[1] = _mm_cvtepu8_epi16(both1);
    m[1] = _mm_cvtepu8_epi16(_mm_srli_si128(both1, 8));
}

#define NR CPU_TILE_ROWS
#define NC CPU_TILE_COLS
#define NCK CPU_TILE_COLS_K
/* Tiles whose weight blocks cost several columns' dots to unpack or
 * rearrange take twice as many: the grid i-quants and ternary formats
 * (quant_tiles_iq.inc), and with VNNI the wide tiles (wide_block) and the
 * AVX-512 column pairs of IQ4_XS and NVFP4 (measured, bench_kernels
 * AVX512-VNNI prompt, 16 -> 32 columns: Q8_0 113 -> 123 GMAC/s, Q5_0 97 -> 115,
 * MXFP4 112 -> 126, IQ4_XS 97 -> 106, NVFP4 115 -> 126; the K-quants,
 * which unpack per K_GROUP, within noise). */
#define NCK_WIDE (2 * CPU_TILE_COLS_K)

/* The tiles (matmul.h's cpu_tile_fn) compute, for each weight row and
 * activation row, what the reference vec_dot does: exact integer dots per
 * block, then the same float steps in the same order, one (row, column) pair
 * per vector lane. Weight rows r >= nr are lanes of zeros. No multiply and
 * add are fused into one rounding (the build has -ffp-contract=off, and no
 * FMA intrinsic is used). */

static inline const void *row_at(const void *base, size_t stride, int r) { return (const char *)base + r * stride; }

/* A full tile's rows in one store: the loop below becomes a call to memcpy. */
static inline void store_rows(__m128 v, int nr, float *out) {
    if (nr == 4) {
        _mm_storeu_ps(out, v);
        return;
    }
    float lane[4];
    _mm_storeu_ps(lane, v);
    for (int r = 0; r < nr; r++) out[r] = lane[r];
}

/* What rows past a tile's last weight row read. */
static const hfq_block_q4_k zero_q4_k;
static const hfq_block_q6_k zero_q6_k;

/* Activation rows a weight block's unpacked levels are shared by at once. */
#define K_GROUP 4

/* A tile's body (always_inline, its last parameters nc, out, os) for nc
 * activation rows, called with the constant 1 when nc is 1 (decoding): that
 * instance keeps its per-column sums in registers, where the general one
 * indexes arrays of them on the stack (Q4_K decode on AVX512-VNNI, one
 * thread: 49-50 -> 73-74 GMAC/s). */
#define TILE_BODY(body, ...) ((nc) == 1 ? body(__VA_ARGS__, 1, out, os) : body(__VA_ARGS__, nc, out, os))

/* One weight row times one activation row: the 1 x 1 tile. */
#define DEFINE_VEC_DOT(name, tile_fn)                                        \
    TILE_TARGET static float name(const void *w, const void *a, int64_t n) { \
        float out;                                                          \
        tile_fn(n, w, 0, 1, a, 0, 1, &out, 1);                              \
        return out;                                                         \
    }

/* Each instruction set's functions: kernels/cpu/quant_tiles_set.inc
 * includes every format family's tiles once per set. */
#define TILE_TARGET AVX2
#define TILE_NAME(x) x##_avx2
#define TILE_VNNI 0
#include "kernels/cpu/quant_tiles_set.inc"
#undef TILE_TARGET
#undef TILE_NAME
#undef TILE_VNNI

#define TILE_TARGET __attribute__((target("avx2,f16c,avxvnni")))
#define TILE_NAME(x) x##_avxvnni
#define TILE_VNNI 1
#include "kernels/cpu/quant_tiles_set.inc"
#undef TILE_TARGET
#undef TILE_NAME
#undef TILE_VNNI

#define TILE_TARGET __attribute__((target("avx2,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define TILE_NAME(x) x##_avx512vnni
#define TILE_VNNI 2
#include "kernels/cpu/quant_tiles_set.inc"
#undef TILE_TARGET
#undef TILE_NAME
#undef TILE_VNNI

/* The sets this CPU runs, as bits 1 << cpu_quant_isa. */
static unsigned isa_bits(void) {
    unsigned bits = 1u << CPU_QUANT_ISA_NONE;
    if (!cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_F16C)) return bits;
    bits |= 1u << CPU_QUANT_ISA_AVX2;
    if (cpu_has(CPU_FEAT_AVXVNNI)) bits |= 1u << CPU_QUANT_ISA_AVXVNNI;
    if (cpu_has(CPU_FEAT_AVX512F | CPU_FEAT_AVX512BW | CPU_FEAT_AVX512VL | CPU_FEAT_AVX512VNNI))
        bits |= 1u << CPU_QUANT_ISA_AVX512VNNI;
    return bits;
}

cpu_quant_isa cpu_quant_isa_best(void) {
    const unsigned bits = isa_bits();
    if (bits >> CPU_QUANT_ISA_AVX512VNNI & 1) return CPU_QUANT_ISA_AVX512VNNI;
    if (bits >> CPU_QUANT_ISA_AVXVNNI & 1) return CPU_QUANT_ISA_AVXVNNI;
    return bits >> CPU_QUANT_ISA_AVX2 & 1 ? CPU_QUANT_ISA_AVX2 : CPU_QUANT_ISA_NONE;
}

bool cpu_quant_isa_runs(cpu_quant_isa isa) { return isa_bits() >> isa & 1; }

/* A format's tile and vec_dot in every set, and the activation rows its
 * tile takes per call in AVX2 and in the VNNI sets. Adding a format's
 * kernels: its tiles in a file of kernels/cpu (included by
 * quant_tiles_set.inc) and a row here. */
typedef struct tile_row {
    hfq_qtype type;
    int cols_avx2, cols_vnni;
    cpu_tile_fn tile[CPU_QUANT_ISA_AVX512VNNI + 1];
    hfq_vec_dot_fn dot[CPU_QUANT_ISA_AVX512VNNI + 1];
} tile_row;

#define TILE_ROW(T, name, cols_avx2, cols_vnni)                                                                    \
    {HFQ_QT_##T,                                                                                                   \
     cols_avx2,                                                                                                    \
     cols_vnni,                                                                                                    \
     {[CPU_QUANT_ISA_AVX2] = tile_##name##_avx2, [CPU_QUANT_ISA_AVXVNNI] = tile_##name##_avxvnni,                  \
      [CPU_QUANT_ISA_AVX512VNNI] = tile_##name##_avx512vnni},                                                      \
     {[CPU_QUANT_ISA_AVX2] = vec_dot_##name##_avx2, [CPU_QUANT_ISA_AVXVNNI] = vec_dot_##name##_avxvnni,            \
      [CPU_QUANT_ISA_AVX512VNNI] = vec_dot_##name##_avx512vnni}}

static const tile_row tile_rows[] = {
    TILE_ROW(Q8_0, q8_0, NCK, NCK_WIDE),
    TILE_ROW(Q4_0, q4_0, NCK, NCK_WIDE),
    TILE_ROW(Q4_K, q4_k, NCK, NCK),
    TILE_ROW(Q6_K, q6_k, NCK, NCK),
    /* kernels/cpu/quant_tiles_k_low.inc */
    TILE_ROW(Q5_K, q5_k, NCK, NCK),
    TILE_ROW(Q3_K, q3_k, NCK, NCK),
    TILE_ROW(Q2_K, q2_k, NCK, NCK),
    TILE_ROW(IQ4_XS, iq4_xs, NCK, NCK_WIDE),
    /* the 32-element formats of quant_tiles_legacy.inc */
    TILE_ROW(Q5_0, q5_0, NCK, NCK_WIDE),
    TILE_ROW(Q4_1, q4_1, NCK, NCK_WIDE),
    TILE_ROW(Q5_1, q5_1, NCK, NCK_WIDE),
    TILE_ROW(IQ4_NL, iq4_nl, NCK, NCK_WIDE),
    /* Q1_0 and Q2_0 (quant_tiles_lowbit.inc) */
    TILE_ROW(Q1_0, q1_0, NCK, NCK),
    TILE_ROW(Q2_0, q2_0, NCK, NCK),
    /* FP4 (quant_tiles_fp4.inc) */
    TILE_ROW(MXFP4, mxfp4, NCK, NCK_WIDE),
    TILE_ROW(NVFP4, nvfp4, NCK, NCK_WIDE),
    /* the grid i-quants and ternary formats of quant_tiles_iq.inc */
    TILE_ROW(TQ2_0, tq2_0, NCK_WIDE, NCK_WIDE),
    TILE_ROW(TQ1_0, tq1_0, NCK_WIDE, NCK_WIDE),
    TILE_ROW(IQ2_XXS, iq2_xxs, NCK_WIDE, NCK_WIDE),
    TILE_ROW(IQ3_XXS, iq3_xxs, NCK_WIDE, NCK_WIDE),
    TILE_ROW(IQ2_XS, iq2_xs, NCK_WIDE, NCK_WIDE),
    TILE_ROW(IQ3_S, iq3_s, NCK_WIDE, NCK_WIDE),
    TILE_ROW(IQ2_S, iq2_s, NCK_WIDE, NCK_WIDE),
    TILE_ROW(IQ1_S, iq1_s, NCK_WIDE, NCK_WIDE),
    TILE_ROW(IQ1_M, iq1_m, NCK_WIDE, NCK_WIDE),
};

enum { N_TILE_ROWS = sizeof tile_rows / sizeof tile_rows[0] };

/* Kernels of a weight format times activations other than its
 * vec_dot_type (the W4A4 and weight-only paths of matmul.h), and the
 * reference dot each equals. */
typedef struct pair_row {
    hfq_qtype act;
    hfq_vec_dot_fn ref;
    tile_row k;
} pair_row;

static const pair_row pair_rows[] = {
    {HFQ_QT_NVFP4, hfq_dot_nvfp4_nvfp4, TILE_ROW(NVFP4, nvfp4_nvfp4, NCK, NCK_WIDE)},
    {HFQ_QT_MXFP4, hfq_dot_mxfp4_mxfp4, TILE_ROW(MXFP4, mxfp4_mxfp4, NCK, NCK_WIDE)},
    {HFQ_QT_F32, hfq_dot_mxfp4_f32, TILE_ROW(MXFP4, mxfp4_f32, NC, NC)},
    {HFQ_QT_F32, hfq_dot_nvfp4_f32, TILE_ROW(NVFP4, nvfp4_f32, NC, NC)},
};

enum { N_PAIR_ROWS = sizeof pair_rows / sizeof pair_rows[0] };

/* Format t's row in a set this CPU runs, or NULL. */
static const tile_row *tile_row_of(hfq_qtype t, cpu_quant_isa isa) {
    if (isa == CPU_QUANT_ISA_NONE || !cpu_quant_isa_runs(isa)) return NULL;
    for (size_t i = 0; i < N_TILE_ROWS; i++)
        if (tile_rows[i].type == t) return &tile_rows[i];
    return NULL;
}

/* The row of weights t times activations act in set isa, or NULL. */
static const tile_row *act_row_of(hfq_qtype t, hfq_qtype act, cpu_quant_isa isa) {
    if (act == hfq_qtype_get(t)->vec_dot_type) return tile_row_of(t, isa);
    if (isa == CPU_QUANT_ISA_NONE || !cpu_quant_isa_runs(isa)) return NULL;
    for (size_t i = 0; i < N_PAIR_ROWS; i++)
        if (pair_rows[i].k.type == t && pair_rows[i].act == act) return &pair_rows[i].k;
    return NULL;
}

cpu_tile_fn cpu_quant_tile_act_isa(hfq_qtype t, hfq_qtype act, cpu_quant_isa isa, int *cols) {
    const tile_row *row = act_row_of(t, act, isa);
    if (!row) return NULL;
    *cols = isa == CPU_QUANT_ISA_AVX2 ? row->cols_avx2 : row->cols_vnni;
    return row->tile[isa];
}

hfq_vec_dot_fn cpu_quant_vec_dot_act_isa(hfq_qtype t, hfq_qtype act, cpu_quant_isa isa) {
    const tile_row *row = act_row_of(t, act, isa);
    return row ? row->dot[isa] : NULL;
}

size_t cpu_quant_tile_pairs(cpu_quant_pair *pairs, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < N_PAIR_ROWS && n < max; i++)
        pairs[n++] = (cpu_quant_pair){pair_rows[i].k.type, pair_rows[i].act, pair_rows[i].ref};
    return n;
}

cpu_tile_fn cpu_quant_tile_isa(hfq_qtype t, cpu_quant_isa isa, int *cols) {
    const tile_row *row = tile_row_of(t, isa);
    if (!row) return NULL;
    *cols = isa == CPU_QUANT_ISA_AVX2 ? row->cols_avx2 : row->cols_vnni;
    return row->tile[isa];
}

hfq_vec_dot_fn cpu_quant_vec_dot_isa(hfq_qtype t, cpu_quant_isa isa) {
    const tile_row *row = tile_row_of(t, isa);
    return row ? row->dot[isa] : NULL;
}

size_t cpu_quant_tile_formats(hfq_qtype *types, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < N_TILE_ROWS && n < max; i++) types[n++] = tile_rows[i].type;
    return n;
}
#else
cpu_quant_isa cpu_quant_isa_best(void) { return CPU_QUANT_ISA_NONE; }

bool cpu_quant_isa_runs(cpu_quant_isa isa) { return isa == CPU_QUANT_ISA_NONE; }

cpu_tile_fn cpu_quant_tile_isa(hfq_qtype t, cpu_quant_isa isa, int *cols) {
    (void)t;
    (void)isa;
    (void)cols;
    return NULL;
}

hfq_vec_dot_fn cpu_quant_vec_dot_isa(hfq_qtype t, cpu_quant_isa isa) {
    (void)t;
    (void)isa;
    return NULL;
}

size_t cpu_quant_tile_formats(hfq_qtype *types, size_t max) {
    (void)types;
    (void)max;
    return 0;
}

cpu_tile_fn cpu_quant_tile_act_isa(hfq_qtype t, hfq_qtype act, cpu_quant_isa isa, int *cols) {
    (void)t, (void)act, (void)isa, (void)cols;
    return NULL;
}

hfq_vec_dot_fn cpu_quant_vec_dot_act_isa(hfq_qtype t, hfq_qtype act, cpu_quant_isa isa) {
    (void)t, (void)act, (void)isa;
    return NULL;
}

size_t cpu_quant_tile_pairs(cpu_quant_pair *pairs, size_t max) {
    (void)pairs, (void)max;
    return 0;
}
#endif

cpu_tile_fn cpu_quant_tile(hfq_qtype t, int *cols) { return cpu_quant_tile_isa(t, cpu_quant_isa_best(), cols); }

hfq_vec_dot_fn cpu_quant_vec_dot(hfq_qtype t) { return cpu_quant_vec_dot_isa(t, cpu_quant_isa_best()); }

cpu_tile_fn cpu_quant_tile_act(hfq_qtype t, hfq_qtype act, int *cols) {
    return cpu_quant_tile_act_isa(t, act, cpu_quant_isa_best(), cols);
}
