/* tile_prefetch.h - reading the next weight tile ahead, for the CPU tiles
 * (quant_kernels.c, float_kernels.c, i8_kernels.c) and FP8 decoding (panel_fp8.c).
 *
 * A tile's CPU_TILE_ROWS weight rows lie one after another in memory, and it
 * reads them side by side, a block of each row in turn, which the hardware
 * prefetchers follow poorly; decoding (one activation row) waits on the
 * weights' memory more than on the math. So while a tile reads its block
 * i, the next tile's rows are read ahead in order, as many bytes as the
 * tile reads: when this tile ends, the next one's are (mostly) in cache. */
#ifndef HFQ_KERNELS_CPU_TILE_PREFETCH_H
#define HFQ_KERNELS_CPU_TILE_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/matmul.h"

/* Block i (block_bytes in each row) of the rows rows at w, ws bytes apart:
 * read ahead the next rows' bytes rows * block_bytes from i * rows *
 * block_bytes. Always inlined: GCC judges a prefetch-only function free of
 * side effects and drops calls to it that it has not inlined early (the
 * tiles of every format but Q8_0, Q4_0, Q4_K, Q6_K and the FP4s once lost
 * their prefetches that way: Q5_0 decode 5 -> 16 GB/s). */
static inline __attribute__((always_inline)) void prefetch_next_rows(const void *w, size_t ws, int rows, int64_t i,
                                                                     size_t block_bytes) {
    const char *next = (const char *)w + (size_t)rows * ws + (size_t)i * (size_t)rows * block_bytes;
    for (size_t l = 0; l < (size_t)rows * block_bytes; l += 64) __builtin_prefetch(next + l, 0, 3);
}

/* prefetch_next_rows for a tile of CPU_TILE_ROWS rows. */
static inline __attribute__((always_inline)) void prefetch_next_tile(const void *w, size_t ws, int64_t i,
                                                                     size_t block_bytes) {
    prefetch_next_rows(w, ws, CPU_TILE_ROWS, i, block_bytes);
}

#endif
