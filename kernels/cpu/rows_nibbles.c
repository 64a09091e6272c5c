/* Weights of 32-value blocks of 4-bit codes with one scale (MXFP4, Q4_0,
 * IQ4_NL; Q5_0 with its fifth bits) times one Q8_0 activation row
 * (decoding; panel.h): the bits of their reference dots, 16 weight rows at
 * a time on AVX512-VNNI (8 on the 256-bit sets, below).
 *
 * The references step block by block, acc + (dw * da) * (float)sum (in
 * whichever order each writes the scales' product: it commutes exactly),
 * each sum an exact integer. The tiles (quant_tiles*.inc) take 4 rows and
 * sum each row's products across a vector, then step 4 lanes; here each
 * block's integer sums of 16 rows end in the 16 lanes of one vector, so
 * one float step serves 16 rows. A row's codes become unsigned bytes, the
 * level plus the format's offset, by one shuffle, 4 rows a vector (one per
 * 128-bit lane, the low nibbles' 16 values, then the high ones'), and meet
 * the activation's 16-byte halves broadcast in vpdpbusd: sum (level +
 * offset) a, less offset times the block's sum of a (once per block for
 * all rows). Four such vectors (16 rows, 4 lanes each) fold into one by 6
 * permutes and 3 adds; the rows' scales (E8M0 bytes, fp16) are read one
 * by one. The same on 256-bit vectors, 8 rows a step, for AVX-VNNI and
 * AVX2 (rows_nibbles256.inc). A format is a row of the table below. */
#include "kernels/cpu/panel.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/cpu/tile_prefetch.h"
#include "quant/cpu_features.h"
#include "quant/fp4.h"
#include "quant/half.h"
#include "quant/iq4.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define ROWS_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))
#define ROWS 16   /* weight rows a step on 512-bit vectors, one per lane of the float steps */

static int level_mxfp4(int code) { return hfq_e2m1_doubled((unsigned)code); }
static int level_q4_0(int code) { return code - 8; }
static int level_iq4_nl(int code) { return hfq_iq4nl_value(code); }
static int level_q5_0(int code) { return code - 16; }

/* A block of 32 values: its bytes, its 16 code bytes' offset (byte j's low
 * nibble value j, high nibble j + 16), each nibble's level in the integer
 * dot, where a format has them the offset of 32 fifth bits (bit j of value
 * j adds 16 to its level: Q5_0), and its scale at offset 0: an E8M0 byte
 * (halved, quant/fp4.h) or an fp16. */
typedef struct nibble_format {
    uint32_t type;
    size_t block_bytes, qs_at, qh_at;   /* qh_at 0: no fifth bits */
    int (*level)(int code);
    bool e8m0;
} nibble_format;

static const nibble_format formats[] = {
    {GT_MXFP4, sizeof(hfq_block_mxfp4), 1, 0, level_mxfp4, true},
    {GT_Q4_0, sizeof(hfq_block_q4_0), 2, 0, level_q4_0, false},
    {GT_IQ4_NL, sizeof(hfq_block_iq4_nl), 2, 0, level_iq4_nl, false},
    {GT_Q5_0, sizeof(hfq_block_q5_0), 6, 2, level_q5_0, false},
};

static const nibble_format *format_of(uint32_t type) {
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
        if (formats[f].type == type) return &formats[f];
    return NULL;
}

/* A format's levels as unsigned bytes (level + offset, offset the negated
 * lowest level: MXFP4 12, Q4_0 8, IQ4_NL 127, Q5_0 16, so every byte is
 * 0..255) and the largest (a fifth bit's 16 included). */
typedef struct nibble_codes {
    uint8_t code[16];
    int offset, top;
} nibble_codes;

static nibble_codes codes_of(const nibble_format *f) {
    nibble_codes c = {.offset = 0, .top = 0};
    for (int k = 0; k < 16; k++)
        if (-f->level(k) > c.offset) c.offset = -f->level(k);
    for (int k = 0; k < 16; k++) {
        c.code[k] = (uint8_t)(f->level(k) + c.offset);
        if (c.code[k] + (f->qh_at ? 16 : 0) > c.top) c.top = c.code[k] + (f->qh_at ? 16 : 0);
    }
    return c;
}

/* The integer sums of block i of 16 weight rows (row r at rows + r *
 * row_bytes) with the activation block's values lo (0..15) and hi
 * (16..31), each broadcast to the 4 128-bit lanes: lane r row r's sum of
 * (level + offset) a. */
ROWS_TARGET static inline __m512i block_sums(const nibble_format *f, __m512i lut, const char *rows, size_t row_bytes,
                                             int64_t i, __m512i lo, __m512i hi) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i part[4];   /* rows 4 q.. 4 q + 3: lanes 4 r' .. 4 r' + 3 row 4 q + r' */
    for (int q = 0; q < 4; q++) {
        const char *b = rows + (size_t)(4 * q) * row_bytes + (size_t)i * f->block_bytes + f->qs_at;
        __m512i qs = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b));
        qs = _mm512_inserti32x4(qs, _mm_loadu_si128((const __m128i *)(b + row_bytes)), 1);
        qs = _mm512_inserti32x4(qs, _mm_loadu_si128((const __m128i *)(b + 2 * row_bytes)), 2);
        qs = _mm512_inserti32x4(qs, _mm_loadu_si128((const __m128i *)(b + 3 * row_bytes)), 3);
        __m512i wlo = _mm512_shuffle_epi8(lut, _mm512_and_si512(qs, low4));
        __m512i whi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(qs, 4), low4));
        if (f->qh_at) {   /* byte j of a lane tests bit j of its row's fifth bits (values 16.. in bytes 2, 3) */
            const char *h = b - f->qs_at + f->qh_at;
            __m512i qh = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)h));
            qh = _mm512_inserti32x4(qh, _mm_loadu_si128((const __m128i *)(h + row_bytes)), 1);
            qh = _mm512_inserti32x4(qh, _mm_loadu_si128((const __m128i *)(h + 2 * row_bytes)), 2);
            qh = _mm512_inserti32x4(qh, _mm_loadu_si128((const __m128i *)(h + 3 * row_bytes)), 3);
            const __m512i bit = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128));
            const __m512i sel_lo = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
            const __m512i sel_hi = _mm512_broadcast_i32x4(_mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
            const __m512i sixteen = _mm512_set1_epi8(16);
            wlo = _mm512_mask_add_epi8(wlo, _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, sel_lo), bit), wlo, sixteen);
            whi = _mm512_mask_add_epi8(whi, _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, sel_hi), bit), whi, sixteen);
        }
        part[q] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wlo, lo), whi, hi);
    }
    /* lanes (2 k, 2 k + 1) of a pair of vectors, added: 4 lanes a row -> 2 -> 1 */
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512i t[2];
    for (int h = 0; h < 2; h++)
        t[h] = _mm512_add_epi32(_mm512_permutex2var_epi32(part[2 * h], even, part[2 * h + 1]),
                                _mm512_permutex2var_epi32(part[2 * h], odd, part[2 * h + 1]));
    return _mm512_add_epi32(_mm512_permutex2var_epi32(t[0], even, t[1]), _mm512_permutex2var_epi32(t[0], odd, t[1]));
}

/* The scales of 16 blocks from the words at their starts: E8M0 bytes
 * halved (hfq_e8m0_half_to_f32), or fp16s (exact through F16C). */
ROWS_TARGET static inline __m512 block_scales(bool e8m0, __m512i words) {
    if (!e8m0) return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(words, _mm512_set1_epi32(0xFFFF))));
    const __m512i e = _mm512_and_si512(words, _mm512_set1_epi32(0xFF));
    const __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __m512i big = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2)), big, small));
}

/* The 16 bits at the start of lane r's block (its scale): loaded one by
 * one, a gather was slower (one thread, one token: 53 against 55 GMAC/s;
 * 8 lanes on AVX2 36 against 39). */
#define WORD(r) word_at(blocks + offsets[r])

static inline uint16_t word_at(const char *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);   /* blocks of 17 bytes: unaligned */
    return v;
}

/* A block's integer dot with the activation block, by the format's levels
 * (the rows of a last step of fewer than a vector's). */
static int32_t block_dot(const nibble_format *f, const uint8_t *block, const int8_t *a) {
    const uint8_t *qs = block + f->qs_at;
    uint32_t qh = 0;
    if (f->qh_at) memcpy(&qh, block + f->qh_at, sizeof qh);
    int32_t s = 0;
    for (int j = 0; j < HFQ_QK / 2; j++) {
        const int lo = f->level(qs[j] & 15) + (int)(qh >> j & 1) * 16, hi = f->level(qs[j] >> 4) + (int)(qh >> (j + 16) & 1) * 16;
        s += lo * a[j] + hi * a[j + HFQ_QK / 2];
    }
    return s;
}

#define ROWS256_TARGET __attribute__((target("avx2,fma,f16c,bmi2")))
#define ROWS256_NAME(x) x##_avx2
#define ROWS256_VNNI 0
#include "kernels/cpu/rows_nibbles256.inc"
#undef ROWS256_TARGET
#undef ROWS256_NAME
#undef ROWS256_VNNI
#define ROWS256_TARGET __attribute__((target("avx2,fma,f16c,bmi2,avxvnni")))
#define ROWS256_NAME(x) x##_avxvnni
#define ROWS256_VNNI 1
#include "kernels/cpu/rows_nibbles256.inc"
#undef ROWS256_TARGET
#undef ROWS256_NAME
#undef ROWS256_VNNI

/* y[r0 + r] for rows r < nr (<= ROWS; the rest read row r0 again): the
 * reference's float steps block by block, lane r row r. */
ROWS_TARGET static void rows_step(const nibble_format *f, const nibble_codes *c, const hfq_tensor *w, int64_t r0, int nr,
                                  const hfq_block_q8_0 *a, const int32_t *a_sums, float *y) {
    const int64_t nb = w->ne0 / HFQ_QK;
    const size_t row_bytes = w->row_bytes;
    const char *rows = (const char *)w->data + (size_t)r0 * row_bytes;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)c->code));
    /* each lane's row offset: rows past nr read row 0 of the step */
    size_t offsets[ROWS];
    for (int r = 0; r < ROWS; r++) offsets[r] = (size_t)(r < nr ? r : 0) * row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const char *blocks = rows + (size_t)i * f->block_bytes;
        __m512i sums;
        if (nr == ROWS) {
            prefetch_next_rows(rows, row_bytes, ROWS, i, f->block_bytes);
            const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)a[i].qs));
            const __m512i hi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(a[i].qs + 16)));
            sums = block_sums(f, lut, rows, row_bytes, i, lo, hi);
        } else {
            int32_t s[ROWS] = {0};   /* lanes past nr are not stored */
            for (int r = 0; r < nr; r++)
                s[r] = c->offset * a_sums[i] + block_dot(f, (const uint8_t *)blocks + offsets[r], a[i].qs);
            sums = _mm512_loadu_si512(s);
        }
        const __m512i isum = _mm512_sub_epi32(sums, _mm512_set1_epi32(c->offset * a_sums[i]));
        const __m512i words = _mm512_setr_epi32(WORD(0), WORD(1), WORD(2), WORD(3), WORD(4), WORD(5), WORD(6), WORD(7),
                                                WORD(8), WORD(9), WORD(10), WORD(11), WORD(12), WORD(13), WORD(14), WORD(15));
        const __m512 dw = block_scales(f->e8m0, words);
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(hfq_fp16_to_f32(a[i].d)), dw);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
    }
    _mm512_mask_storeu_ps(y + r0, (__mmask16)((1u << nr) - 1), acc);
}

typedef void (*step_fn)(const nibble_format *f, const nibble_codes *c, const hfq_tensor *w, int64_t r0, int nr,
                        const hfq_block_q8_0 *a, const int32_t *a_sums, float *y);

/* The step of instruction set isa for format f (its codes c) and its rows
 * a step; NULL where that set has none (or this CPU does not run it). AVX2
 * adds pairs of products in 16 bits: codes within 63 only. Fifth bits
 * (Q5_0) on 512-bit vectors only: on 256 they cost more than the tiles
 * save (one thread, one token: AVX2 15-22 against 24 GMAC/s, AVX-VNNI 24
 * against 30; AVX512-VNNI 36 against 32). */
static step_fn step_for(const nibble_format *f, const nibble_codes *c, cpu_quant_isa isa, int *rows) {
    if (!cpu_quant_isa_runs(isa) || !cpu_has(CPU_FEAT_F16C)) return NULL;
    switch (isa) {
    case CPU_QUANT_ISA_AVX512VNNI: *rows = ROWS; return rows_step;
    case CPU_QUANT_ISA_AVXVNNI: *rows = 8; return f->qh_at ? NULL : rows_step_avxvnni;
    case CPU_QUANT_ISA_AVX2: *rows = 8; return f->qh_at || c->top > 63 ? NULL : rows_step_avx2;
    default: return NULL;
    }
}

bool cpu_rows_nibbles_fits(const hfq_tensor *w, int64_t n_tokens) {
    const nibble_format *f = format_of(w->type);
    if (n_tokens != 1 || w->qext || !f || w->ne0 % HFQ_QK) return false;
    const nibble_codes c = codes_of(f);
    int rows;
    return step_for(f, &c, cpu_quant_isa_best(), &rows) != NULL;
}

bool cpu_rows_nibbles_matmul_isa(cpu_quant_isa isa, int n_threads, const hfq_tensor *w, const void *act, float *y) {
    const nibble_format *f = format_of(w->type);
    if (!f || w->ne0 % HFQ_QK) return false;
    const nibble_codes c = codes_of(f);
    int rows;
    const step_fn step = step_for(f, &c, isa, &rows);
    if (!step) return false;
    const int64_t nb = w->ne0 / HFQ_QK, n_out = w->ne1, steps = (n_out + rows - 1) / rows;
    const hfq_block_q8_0 *a = act;
    int32_t *a_sums = malloc((size_t)nb * sizeof *a_sums);   /* each activation block's sum of codes */
    if (!a_sums) return false;
    for (int64_t i = 0; i < nb; i++) {
        int32_t s = 0;
        for (int j = 0; j < HFQ_QK; j++) s += a[i].qs[j];
        a_sums[i] = s;
    }
    /* guided: each thread streams its own stretch of rows first (matmul.c's products) */
    #pragma omp parallel for num_threads(n_threads) schedule(guided, 4) if (w->ne0 * n_out >= CPU_PARALLEL_MIN_MACS)
    for (int64_t s = 0; s < steps; s++) {
        const int64_t r0 = s * rows;
        step(f, &c, w, r0, (int)(n_out - r0 < rows ? n_out - r0 : rows), a, a_sums, y);
    }
    free(a_sums);
    return true;
}

bool cpu_rows_nibbles_matmul(int n_threads, const hfq_tensor *w, const void *act, float *y) {
    return cpu_rows_nibbles_matmul_isa(cpu_quant_isa_best(), n_threads, w, act, y);
}

#else

bool cpu_rows_nibbles_fits(const hfq_tensor *w, int64_t n_tokens) {
    (void)w, (void)n_tokens;
    return false;
}

bool cpu_rows_nibbles_matmul_isa(cpu_quant_isa isa, int n_threads, const hfq_tensor *w, const void *act, float *y) {
    (void)isa, (void)n_threads, (void)w, (void)act, (void)y;
    return false;
}

bool cpu_rows_nibbles_matmul(int n_threads, const hfq_tensor *w, const void *act, float *y) {
    (void)n_threads, (void)w, (void)act, (void)y;
    return false;
}

#endif
