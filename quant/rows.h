/* rows.h - the thin loops that turn per-block functions into per-row ones.
 * Internal to quant/: the macros define the public row functions of
 * q_legacy.c, q_k.c, q_k_low.c and iq4.c from the block functions of
 * block_math.h and iq4.h, so each format states only what differs (its
 * block type and block function). */
#ifndef HFQ_QUANT_ROWS_H
#define HFQ_QUANT_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "quant/isa.h"

/* Quantizes one row of n elements (a multiple of the block size) with the
 * kernels of isa. */
typedef void (*hfq_row_quantizer)(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance);

/* Runs fn over nrows rows; returns the bytes written, 0 when n_per_row is not
 * a positive multiple of block_size or nrows is negative. */
static inline size_t hfq_quantize_rows(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                       const float *importance, int64_t block_size, size_t block_bytes,
                                       hfq_row_quantizer fn) {
    if (nrows < 0 || n_per_row <= 0 || n_per_row % block_size != 0) return 0;
    size_t row_bytes = (size_t)(n_per_row / block_size) * block_bytes;
    for (int64_t r = 0; r < nrows; r++)
        fn(isa, src + r * n_per_row, (char *)dst + (size_t)r * row_bytes, n_per_row, importance);
    return (size_t)nrows * row_bytes;
}

/* size_t fn(src, dst, nrows, n_per_row, importance) over a row quantizer,
 * with the CPU's best kernels, and fn_isa(isa, ...) with the given ones */
#define HFQ_DEFINE_QUANTIZE(fn, block_t, block_size, row_fn)                                                     \
    size_t fn##_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,                 \
                    const float *importance) {                                                                  \
        return hfq_quantize_rows(isa, src, dst, nrows, n_per_row, importance, block_size, sizeof(block_t),      \
                                 row_fn);                                                                       \
    }                                                                                                           \
    size_t fn(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {          \
        return fn##_isa(hfq_isa_best(), src, dst, nrows, n_per_row, importance);                                \
    }

/* size_t fn(src, dst, nrows, n_per_row, importance) over a scalar
 * per-block quantizer block_fn(x, importance of the block or NULL, block *) */
#define HFQ_DEFINE_QUANTIZE_BLOCKS(fn, block_t, block_size, block_fn)                                           \
    static void fn##_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {            \
        (void)isa;                                                                                              \
        block_t *b = (block_t *)y;                                                                              \
        for (int64_t i = 0; i < n / (block_size); i++)                                                          \
            block_fn(x + i * (block_size), importance ? importance + i * (block_size) : NULL, &b[i]);           \
    }                                                                                                           \
    size_t fn(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {          \
        return hfq_quantize_rows(HFQ_ISA_SCALAR, src, dst, nrows, n_per_row, importance, block_size,             \
                                 sizeof(block_t), fn##_row);                                                    \
    }

/* void fn(const void *src, float *dst, int64_t n) */
#define HFQ_DEFINE_DEQUANTIZE_ROW(fn, block_t, block_size, decode_block)        \
    void fn(const void *src, float *dst, int64_t n) {                           \
        const block_t *blocks = (const block_t *)src;                           \
        for (int64_t i = 0; i < n / (block_size); i++)                          \
            decode_block(&blocks[i], dst + i * (block_size));                   \
    }

/* float fn(const void *w, const void *a, int64_t n): block results summed in
 * float, in block order. */
#define HFQ_DEFINE_VEC_DOT(fn, wblock_t, ablock_t, block_size, dot_block)       \
    float fn(const void *w, const void *a, int64_t n) {                         \
        const wblock_t *wb = (const wblock_t *)w;                               \
        const ablock_t *ab = (const ablock_t *)a;                               \
        float sum = 0.0f;                                                       \
        for (int64_t i = 0; i < n / (block_size); i++)                          \
            sum += dot_block(&wb[i], &ab[i]);                                   \
        return sum;                                                             \
    }

/* void fn(const float *x, void *y, int64_t n): activation rows. */
#define HFQ_DEFINE_QUANTIZE_ACT_ROW(fn, block_t, block_size, quantize_block)    \
    void fn(const float *x, void *y, int64_t n) {                               \
        block_t *blocks = (block_t *)y;                                         \
        for (int64_t i = 0; i < n / (block_size); i++)                          \
            quantize_block(x + i * (block_size), &blocks[i]);                   \
    }

/* The same, through avx2_fn (its AVX2 twin, the same bytes; quant/isa.h)
 * where the CPU has AVX2. */
#ifdef HFQ_HAVE_AVX2_KERNELS
#define HFQ_ACT_ROW_PICK(avx2_fn, scalar_fn) (hfq_isa_best() == HFQ_ISA_AVX2 ? (avx2_fn) : (scalar_fn))
#else
#define HFQ_ACT_ROW_PICK(avx2_fn, scalar_fn) (scalar_fn)
#endif
#define HFQ_DEFINE_QUANTIZE_ACT_ROW_AVX2(fn, block_t, block_size, quantize_block, avx2_fn) \
    static HFQ_DEFINE_QUANTIZE_ACT_ROW(fn##_scalar, block_t, block_size, quantize_block)  \
    void fn(const float *x, void *y, int64_t n) { HFQ_ACT_ROW_PICK(avx2_fn, fn##_scalar)(x, y, n); }

#endif
