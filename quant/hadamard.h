/* hadamard.h - the block Hadamard rotation of rows along the input dimension
 * (`quantize --block-rotate`, MR-GPTQ's block rotations; docs/calibration.md).
 *
 * Q = D blockdiag(H_N, ..., H_N) / sqrt(N): H_N the Walsh-Hadamard matrix of
 * N (a power of two dividing the row length n), D a diagonal of signs, D_jj
 * the top bit of the j-th output of splitmix64 started at `seed` (the stream
 * quantize --rotate draws its signs from: src/quantize/rotate.h); seed 0: no
 * signs (D = 1). Q is orthogonal, so a weight row w and an input row x give
 * (w Q) . (x Q) = w . x: quantize stores the rows w Q, the runner rotates
 * its input rows x the same way before the product. The same function
 * rotates both (a row vector times Q), in float, by the fast Walsh-Hadamard
 * transform, O(n log N) a row; each row alone, so the result does not depend
 * on threads or batching.
 */
#ifndef HFQ_QUANT_HADAMARD_H
#define HFQ_QUANT_HADAMARD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "quant/hd.h"

/* The largest block the runner and quantize accept (a cap on file-supplied sizes). */
#define HFQ_HADAMARD_MAX_BLOCK 4096

/* Whether n rows can be rotated in blocks of `block`: a power of two >= 2,
 * at most HFQ_HADAMARD_MAX_BLOCK, dividing n. */
static inline HFQ_HD bool hfq_hadamard_fits(int64_t n, int64_t block) {
    return block >= 2 && block <= HFQ_HADAMARD_MAX_BLOCK && (block & (block - 1)) == 0 && n > 0 && n % block == 0;
}

/* D_jj for the seed: +1 or -1 (seed 0: +1). */
static inline HFQ_HD float hfq_hadamard_sign(uint64_t seed, int64_t j) {
    if (seed == 0) return 1.0f;
    uint64_t z = seed + (uint64_t)(j + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 63) ? -1.0f : 1.0f;
}

/* x[0..n) <- x Q in place (hfq_hadamard_fits(n, block) holds). */
static inline HFQ_HD void hfq_hadamard_rotate_row(float *x, int64_t n, int64_t block, uint64_t seed) {
    const float scale = 1.0f / sqrtf((float)block);
    for (int64_t j = 0; j < n; j++) x[j] *= hfq_hadamard_sign(seed, j);
    for (int64_t b0 = 0; b0 < n; b0 += block)
        for (int64_t h = 1; h < block; h *= 2)
            for (int64_t i = b0; i < b0 + block; i += 2 * h)
                for (int64_t j = i; j < i + h; j++) {
                    const float a = x[j], b = x[j + h];
                    x[j] = a + b, x[j + h] = a - b;
                }
    for (int64_t j = 0; j < n; j++) x[j] *= scale;
}

#endif
