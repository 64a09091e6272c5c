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

static inline void tile_c(fmt f, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as, int nc,
                          float *out, size_t os) {
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < n; i++) acc += load1(f, w + r * ws, i) * load1(f, a + c * as, i);
            out[c * os + r] = acc;
        }
}

#define DEFINE_TILE(name, body_fn, f, attr)                                                              \
    attr static void name(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, int nc,  \
                          float *out, size_t os) {                                                       \
        body_fn(f, n, w, ws, nr, a, as, nc, out, os);                                                    \
    }

DEFINE_TILE(tile_f32_c, tile_c, FMT_F32, )
DEFINE_TILE(tile_f16_c, tile_c, FMT_F16, )
DEFINE_TILE(tile_bf16_c, tile_c, FMT_BF16, )

/* ---- AVX2 + FMA + F16C ---- */
#if defined(__x86_64__)
#include <immintrin.h>

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
AVX2_INLINE void tile_fixed(fmt f, const int NR, const int NC, int64_t n, const char *w, size_t ws, const char *a,
                            size_t as, float *out, size_t os) {
    __m256 acc[CPU_TILE_ROWS][CPU_TILE_COLS];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) acc[r][c] = _mm256_setzero_ps();
    const size_t es = fmt_size(f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 av[CPU_TILE_COLS];
        for (int c = 0; c < NC; c++) av[c] = load8(f, a + c * as + (size_t)i * es);
        for (int r = 0; r < NR; r++) {
            __m256 wv = load8(f, w + r * ws + (size_t)i * es);
            for (int c = 0; c < NC; c++) acc[r][c] = _mm256_fmadd_ps(wv, av[c], acc[r][c]);
        }
    }
    if (i < n) {
        __m256 av[CPU_TILE_COLS];
        for (int c = 0; c < NC; c++) av[c] = load_tail(f, a + c * as + (size_t)i * es, n - i);
        for (int r = 0; r < NR; r++) {
            __m256 wv = load_tail(f, w + r * ws + (size_t)i * es, n - i);
            for (int c = 0; c < NC; c++) acc[r][c] = _mm256_fmadd_ps(wv, av[c], acc[r][c]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) out[c * os + r] = hsum(acc[r][c]);
}

AVX2_INLINE void tile_avx2(fmt f, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as, int nc,
                           float *out, size_t os) {
    if (nr == CPU_TILE_ROWS && nc == CPU_TILE_COLS) {
        tile_fixed(f, CPU_TILE_ROWS, CPU_TILE_COLS, n, w, ws, a, as, out, os);
    } else if (nr == CPU_TILE_ROWS) {
        for (int c = 0; c < nc; c++) tile_fixed(f, CPU_TILE_ROWS, 1, n, w, ws, a + c * as, as, out + c * os, os);
    } else {
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++) tile_fixed(f, 1, 1, n, w + r * ws, ws, a + c * as, as, out + c * os + r, os);
    }
}

DEFINE_TILE(tile_f32_avx2, tile_avx2, FMT_F32, AVX2)
DEFINE_TILE(tile_f16_avx2, tile_avx2, FMT_F16, AVX2)
DEFINE_TILE(tile_bf16_avx2, tile_avx2, FMT_BF16, AVX2)

static int have_avx2(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
#else
static int have_avx2(void) { return 0; }
#define tile_f32_avx2 tile_f32_c
#define tile_f16_avx2 tile_f16_c
#define tile_bf16_avx2 tile_bf16_c
#endif

cpu_tile_fn cpu_float_tile(uint32_t type, bool simd) {
    simd = simd && have_avx2();
    switch (type) {
    case GT_F32: return simd ? tile_f32_avx2 : tile_f32_c;
    case GT_F16: return simd ? tile_f16_avx2 : tile_f16_c;
    case GT_BF16: return simd ? tile_bf16_avx2 : tile_bf16_c;
    default: return NULL;
    }
}
