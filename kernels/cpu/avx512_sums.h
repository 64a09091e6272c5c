/* avx512_sums.h - the step of the CPU kernels' horizontal sums on 512-bit
 * vectors: two shuffles of the same pair of vectors, added, so that each
 * lane of the result holds the sum of two lanes picked from a and b.
 * SEL_F32X4 picks 128-bit quarters (_mm512_shuffle_f32x4), SEL_PS lanes
 * within each quarter (_mm512_shuffle_ps); the selectors are immediates. */
#ifndef HFQ_KERNELS_CPU_AVX512_SUMS_H
#define HFQ_KERNELS_CPU_AVX512_SUMS_H

#include <immintrin.h>

/* sels: one of the pairs below, two arguments of ADD_SEL once expanded */
#define ADD_SEL_F32X4(a, b, sels) ADD_SEL(_mm512_shuffle_f32x4, a, b, sels)
#define ADD_SEL_PS(a, b, sels) ADD_SEL(_mm512_shuffle_ps, a, b, sels)
#define ADD_SEL(shuffle, a, b, sel0, sel1) _mm512_add_ps(shuffle(a, b, sel0), shuffle(a, b, sel1))

/* Selector pairs: even and odd quarters or lanes (E_O), low and high pairs (LO_HI). */
#define SEL_E_O _MM_SHUFFLE(2, 0, 2, 0), _MM_SHUFFLE(3, 1, 3, 1)
#define SEL_LO_HI _MM_SHUFFLE(1, 0, 1, 0), _MM_SHUFFLE(3, 2, 3, 2)

#endif
