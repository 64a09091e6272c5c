/* float_kernels.c - dot-product tiles over F32, F16 and BF16 rows.
 *
 * Every result is one accumulation order, whatever the tile: 8 lanes of fused
 * multiply-adds over the row (the last n % 8 values zero-padded), then the
 * lanes summed in a fixed order. That is why batched and single-token products
 * agree bit for bit.
 */
#include "kernels/cpu/float_kernels.h"

#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/cpu/tile_prefetch.h"
#include "quant/cpu_features.h"
#include "quant/half.h"

typedef enum fmt { FMT_F32, FMT_F16, FMT_BF16 } fmt;

static inline size_t fmt_size(fmt f) { return f == FMT_F32 ? 4 : 2; }

/* ---- portable C ---- */

static inline float load1(fmt f, const char *p, int64_t i) {
    uint16_t h;
    switch (f) {
    case FMT_F32: {
        float v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    case FMT_F16: memcpy(&h, p + i * 2, 2); return hfq_fp16_to_f32(h);
    default: memcpy(&h, p + i * 2, 2); return hfq_bf16_to_f32(h);
    }
}

static inline void tile_c(fmt fw, fmt fa, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as,
                          int nc, float *out, size_t os) {
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < n; i++) acc += load1(fw, w + r * ws, i) * load1(fa, a + c * as, i);
            out[c * os + r] = acc;
        }
}

/* A tile of weights in format fw times activations in format fa. */
#define DEFINE_TILE(name, body_fn, fw, fa, attr)                                                         \
    attr static void name(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc,  \
                          float *out, size_t os) {                                                       \
        body_fn(fw, fa, n, w, ws, nr, a, as, nc, out, os);                                               \
    }

DEFINE_TILE(tile_f32_c, tile_c, FMT_F32, FMT_F32, )
DEFINE_TILE(tile_f16_c, tile_c, FMT_F16, FMT_F16, )
DEFINE_TILE(tile_bf16_c, tile_c, FMT_BF16, FMT_BF16, )

/* ---- AVX2 + FMA + F16C ---- */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/avx512_sums.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

AVX2_INLINE __m256 load8(fmt f, const char *p) {
    switch (f) {
    case FMT_F32: return _mm256_loadu_ps((const float *)p);
    case FMT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    default: {   /* bf16: the upper half of a float */
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
    }
}

/* The last n_left (< 8) values of a row, zero-padded. */
AVX2_INLINE __m256 load_tail(fmt f, const char *p, int64_t n_left) {
    char buf[32] = {0};
    memcpy(buf, p, (size_t)n_left * fmt_size(f));
    return load8(f, buf);
}

AVX2_INLINE float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* NR x NC dot products; NR and NC are constants once inlined, so the
 * accumulators live in registers. */
AVX2_INLINE void tile_fixed(fmt fw, fmt fa, const int NR, const int NC, int64_t n, const char *w, size_t ws,
                            const char *a, size_t as, float *out, size_t os) {
    __m256 acc[CPU_TILE_ROWS][CPU_TILE_COLS];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) acc[r][c] = _mm256_setzero_ps();
    const size_t ews = fmt_size(fw), eas = fmt_size(fa);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if (NR == CPU_TILE_ROWS) prefetch_next_tile(w, ws, i / 8, 8 * ews);
        __m256 av[CPU_TILE_COLS];
        for (int c = 0; c < NC; c++) av[c] = load8(fa, a + c * as + (size_t)i * eas);
        for (int r = 0; r < NR; r++) {
            __m256 wv = load8(fw, w + r * ws + (size_t)i * ews);
            for (int c = 0; c < NC; c++) acc[r][c] = _mm256_fmadd_ps(wv, av[c], acc[r][c]);
        }
    }
    if (i < n) {
        __m256 av[CPU_TILE_COLS];
        for (int c = 0; c < NC; c++) av[c] = load_tail(fa, a + c * as + (size_t)i * eas, n - i);
        for (int r = 0; r < NR; r++) {
            __m256 wv = load_tail(fw, w + r * ws + (size_t)i * ews, n - i);
            for (int c = 0; c < NC; c++) acc[r][c] = _mm256_fmadd_ps(wv, av[c], acc[r][c]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) out[c * os + r] = hsum(acc[r][c]);
}

AVX2_INLINE void tile_avx2(fmt fw, fmt fa, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as,
                           int nc, float *out, size_t os) {
    if (nr == CPU_TILE_ROWS && nc == CPU_TILE_COLS) {
        tile_fixed(fw, fa, CPU_TILE_ROWS, CPU_TILE_COLS, n, w, ws, a, as, out, os);
    } else if (nr == CPU_TILE_ROWS) {
        for (int c = 0; c < nc; c++) tile_fixed(fw, fa, CPU_TILE_ROWS, 1, n, w, ws, a + c * as, as, out + c * os, os);
    } else {
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++)
                tile_fixed(fw, fa, 1, 1, n, w + r * ws, ws, a + c * as, as, out + c * os + r, os);
    }
}

DEFINE_TILE(tile_f32_avx2, tile_avx2, FMT_F32, FMT_F32, AVX2)
DEFINE_TILE(tile_f16_avx2, tile_avx2, FMT_F16, FMT_F16, AVX2)
DEFINE_TILE(tile_bf16_avx2, tile_avx2, FMT_BF16, FMT_BF16, AVX2)
/* F32 activation rows whatever the weights (cpu_float_tile_f32_rows) */
DEFINE_TILE(tile_f16_f32_avx2, tile_avx2, FMT_F16, FMT_F32, AVX2)
DEFINE_TILE(tile_bf16_f32_avx2, tile_avx2, FMT_BF16, FMT_F32, AVX2)

/* ---- AVX-512: two AVX2 accumulators per vector ---- */

#define AVX512_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c"
#define AVX512_INLINE static inline __attribute__((always_inline, target(AVX512_TARGET)))
#define AVX512 __attribute__((target(AVX512_TARGET)))

/* The values of p selected by mask k (8 bits), the others 0, as floats. */
AVX512_INLINE __m256 load8_masked(fmt f, const char *p, __mmask8 k) {
    switch (f) {
    case FMT_F32: return _mm256_maskz_loadu_ps(k, p);
    case FMT_F16: return _mm256_cvtph_ps(_mm_maskz_loadu_epi16(k, p));
    default: return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(k, p)), 16));
    }
}

/* Values of p0 in the low half, of p1 in the high half (mask k in each). */
AVX512_INLINE __m512 load8x2(fmt f, const char *p0, const char *p1, __mmask8 k) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(load8_masked(f, p0, k)), load8_masked(f, p1, k), 1);
}

/* Those values in both halves; all 8 (k = 0xff, a constant once inlined)
 * are broadcast by the load itself. */
AVX512_INLINE __m512 bcast8_masked(fmt f, const char *p, __mmask8 k) {
    if (k == 0xff && f == FMT_F32) return _mm512_broadcast_f32x8(_mm256_loadu_ps((const float *)p));
    const __m256 v = load8_masked(f, p, k);
    return _mm512_insertf32x8(_mm512_castps256_ps512(v), v, 1);
}

/* One step of 8 values (those mask k selects; the others count as 0) of
 * tile4_fixed512's multiply-adds. */
AVX512_INLINE void tile4_step(fmt fw, fmt fa, const int NC, const char *w, size_t ws, const char *a, size_t as,
                              __mmask8 k, __m512 *acc01, __m512 *acc23) {
    const __m512 w01 = load8x2(fw, w, w + ws, k), w23 = load8x2(fw, w + 2 * ws, w + 3 * ws, k);
    for (int c = 0; c < NC; c++) {
        const __m512 av = bcast8_masked(fa, a + c * as, k);
        acc01[c] = _mm512_fmadd_ps(w01, av, acc01[c]);
        acc23[c] = _mm512_fmadd_ps(w23, av, acc23[c]);
    }
}

/* CPU_TILE_ROWS (4) weight rows x NC activation rows: rows 0 and 1 share one
 * vector of accumulators, rows 2 and 3 another, each half doing exactly the
 * AVX2 tile's 8-lane multiply-adds (the last n % 8 values zero-padded, here
 * by masked loads) and its final sum. */
AVX512_INLINE void tile4_fixed512(fmt fw, fmt fa, const int NC, int64_t n, const char *w, size_t ws, const char *a,
                                  size_t as, float *out, size_t os) {
    __m512 acc01[CPU_TILE_COLS_F512], acc23[CPU_TILE_COLS_F512];
    for (int c = 0; c < NC; c++) acc01[c] = acc23[c] = _mm512_setzero_ps();
    const size_t ews = fmt_size(fw), eas = fmt_size(fa);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch_next_tile(w, ws, i / 8, 8 * ews);
        tile4_step(fw, fa, NC, w + (size_t)i * ews, ws, a + (size_t)i * eas, as, 0xff, acc01, acc23);
    }
    if (i < n)
        tile4_step(fw, fa, NC, w + (size_t)i * ews, ws, a + (size_t)i * eas, as, (__mmask8)((1u << (n - i)) - 1), acc01,
                   acc23);
    /* hsum's pairings, ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)),
     * for 4 rows x 4 tokens at once: a row of 64 values takes as many
     * instructions to sum as to multiply, one pair at a time */
    int c = 0;
    for (; c + 4 <= NC; c += 4) {
        __m512 x[4];   /* token c + j, 128-bit quarter r: lo + hi of row r */
        for (int j = 0; j < 4; j++) x[j] = ADD_SEL_F32X4(acc01[c + j], acc23[c + j], SEL_E_O);
        /* the quarters transposed: xr[r], quarter j: lo + hi of row r, token c + j */
        const __m512 t01 = _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 t23 = _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 u01 = _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512 u23 = _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512 xr[4] = {_mm512_shuffle_f32x4(t01, t23, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(t01, t23, _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(3, 1, 3, 1))};
        /* [s0 + s2, s1 + s3] of two rows per quarter */
        const __m512 y01 = ADD_SEL_PS(xr[0], xr[1], SEL_LO_HI), y23 = ADD_SEL_PS(xr[2], xr[3], SEL_LO_HI);
        /* quarter j, lane r: row r's sum for token c + j, the tile's output order */
        const __m512 sums = ADD_SEL_PS(y01, y23, SEL_E_O);
        _mm_storeu_ps(out + (c + 0) * os, _mm512_castps512_ps128(sums));
        _mm_storeu_ps(out + (c + 1) * os, _mm512_extractf32x4_ps(sums, 1));
        _mm_storeu_ps(out + (c + 2) * os, _mm512_extractf32x4_ps(sums, 2));
        _mm_storeu_ps(out + (c + 3) * os, _mm512_extractf32x4_ps(sums, 3));
    }
    for (; c < NC; c++) {
        out[c * os + 0] = hsum(_mm512_castps512_ps256(acc01[c]));
        out[c * os + 1] = hsum(_mm512_extractf32x8_ps(acc01[c], 1));
        out[c * os + 2] = hsum(_mm512_castps512_ps256(acc23[c]));
        out[c * os + 3] = hsum(_mm512_extractf32x8_ps(acc23[c], 1));
    }
}

AVX512_INLINE void tile_avx512(fmt fw, fmt fa, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as,
                               int nc, float *out, size_t os) {
    if (nr < CPU_TILE_ROWS) {   /* the AVX2 tile's 1 x 1 products: the same bits */
        tile_avx2(fw, fa, n, w, ws, nr, a, as, nc, out, os);
        return;
    }
    /* nc as a sum of the fixed widths 8, 4, 2, 1 */
    int c = 0;
    for (; c + 8 <= nc; c += 8) tile4_fixed512(fw, fa, 8, n, w, ws, a + c * as, as, out + c * os, os);
    if (c + 4 <= nc) tile4_fixed512(fw, fa, 4, n, w, ws, a + c * as, as, out + c * os, os), c += 4;
    if (c + 2 <= nc) tile4_fixed512(fw, fa, 2, n, w, ws, a + c * as, as, out + c * os, os), c += 2;
    if (c < nc) tile4_fixed512(fw, fa, 1, n, w, ws, a + c * as, as, out + c * os, os);
}

DEFINE_TILE(tile_f32_avx512, tile_avx512, FMT_F32, FMT_F32, AVX512)
/* F16/BF16 weights times activations already widened to F32 (their values
 * rounded to the weight's format): the conversion is done once per batch,
 * not once per weight tile; the products are the same. */
DEFINE_TILE(tile_f16_avx512, tile_avx512, FMT_F16, FMT_F32, AVX512)
DEFINE_TILE(tile_bf16_avx512, tile_avx512, FMT_BF16, FMT_F32, AVX512)

bool cpu_float_isa_runs(cpu_float_isa isa) {
    const bool avx2 = cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA | CPU_FEAT_F16C);
    switch (isa) {
    case CPU_FLOAT_PORTABLE: return true;
    case CPU_FLOAT_AVX2: return avx2;
    case CPU_FLOAT_AVX512:
        return avx2 && cpu_has(CPU_FEAT_AVX512F | CPU_FEAT_AVX512DQ | CPU_FEAT_AVX512BW | CPU_FEAT_AVX512VL);
    case CPU_FLOAT_BEST: return true;
    default: return false;
    }
}
#else
bool cpu_float_isa_runs(cpu_float_isa isa) { return isa == CPU_FLOAT_PORTABLE || isa == CPU_FLOAT_BEST; }
#define tile_f32_avx2 tile_f32_c
#define tile_f16_avx2 tile_f16_c
#define tile_bf16_avx2 tile_bf16_c
#define tile_f32_avx512 tile_f32_c
#define tile_f16_avx512 tile_f16_c
#define tile_bf16_avx512 tile_bf16_c
#define tile_f16_f32_avx2 NULL
#define tile_bf16_f32_avx2 NULL
#endif

cpu_tile_fn cpu_float_tile(uint32_t type, cpu_float_isa isa, int *cols, bool *act_f32) {
    if (isa == CPU_FLOAT_BEST)
        isa = cpu_float_isa_runs(CPU_FLOAT_AVX512) ? CPU_FLOAT_AVX512
              : cpu_float_isa_runs(CPU_FLOAT_AVX2) ? CPU_FLOAT_AVX2
                                                   : CPU_FLOAT_PORTABLE;
    if (!cpu_float_isa_runs(isa)) return NULL;
    static const cpu_tile_fn tiles[3][3] = {{tile_f32_c, tile_f16_c, tile_bf16_c},
                                            {tile_f32_avx2, tile_f16_avx2, tile_bf16_avx2},
                                            {tile_f32_avx512, tile_f16_avx512, tile_bf16_avx512}};
    const int t = type == GT_F32 ? 0 : type == GT_F16 ? 1 : type == GT_BF16 ? 2 : -1;
    if (t < 0) return NULL;
    *cols = isa == CPU_FLOAT_AVX512 ? CPU_TILE_COLS_F512 : CPU_TILE_COLS;
    *act_f32 = isa == CPU_FLOAT_AVX512 && type != GT_F32;
    return tiles[isa][t];
}

cpu_tile_fn cpu_float_tile_f32_rows(uint32_t type, int *cols) {
    bool act_f32 = false;
    const cpu_tile_fn t = cpu_float_tile(type, CPU_FLOAT_BEST, cols, &act_f32);
    if (!cpu_float_isa_runs(CPU_FLOAT_AVX2) || !t) return NULL;   /* the portable tile sums in another order */
    if (type == GT_F32 || act_f32) return t;
    *cols = CPU_TILE_COLS;
    return type == GT_F16 ? tile_f16_f32_avx2 : tile_bf16_f32_avx2;
}
