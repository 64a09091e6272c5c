/* tile_prefetch.h - reading the next weight tile ahead, for the CPU tiles
 * (quant_kernels.c, float_kernels.c, i8_kernels.c) and FP8 decoding (panel_fp8.c).
 *
 * A tile's CPU_TILE_ROWS weight rows lie one after another in memory, and it
 * reads them side by side, a block of each row in turn, which the hardware
 * prefetchers follow poorly; decoding (one activation row) waits on the
 * weights' memory more than on the math. So while a tile reads its block
 * i, the rows PREFETCH_TILES_AHEAD tiles on are read ahead in order, as many
 * bytes as the tile reads: when a tile starts, its rows are (mostly) in
 * cache. One tile ahead was too close: a tile of rows of 1024 is a few KB,
 * the next tile's requests went out while this tile's were still arriving
 * (one thread, 1024-wide Q6_K decode 159-165 -> 222-226 tokens/s with two). */
#ifndef HFQ_KERNELS_CPU_TILE_PREFETCH_H
#define HFQ_KERNELS_CPU_TILE_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/matmul.h"

#define PREFETCH_TILES_AHEAD 2

/* Block i (block_bytes in each row) of the rows rows at w, ws bytes apart:
 * read ahead rows * block_bytes bytes from i * rows * block_bytes of the
 * rows PREFETCH_TILES_AHEAD * rows on. Always inlined: GCC judges a
 * prefetch-only function free of side effects and drops calls to it that it
 * has not inlined early (the tiles of every format but Q8_0, Q4_0, Q4_K,
 * Q6_K and the FP4s once lost their prefetches that way: Q5_0 decode 5 -> 16
 * GB/s). */
static inline __attribute__((always_inline)) void prefetch_next_rows(const void *w, size_t ws, int rows, int64_t i,
                                                                     size_t block_bytes) {
    const char *next = (const char *)w + (size_t)PREFETCH_TILES_AHEAD * (size_t)rows * ws +
                       (size_t)i * (size_t)rows * block_bytes;
    for (size_t l = 0; l < (size_t)rows * block_bytes; l += 64) __builtin_prefetch(next + l, 0, 3);
}

/* prefetch_next_rows for a tile of CPU_TILE_ROWS rows. */
static inline __attribute__((always_inline)) void prefetch_next_tile(const void *w, size_t ws, int64_t i,
                                                                     size_t block_bytes) {
    prefetch_next_rows(w, ws, CPU_TILE_ROWS, i, block_bytes);
}

#endif
