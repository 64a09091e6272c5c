/* vec_kernels.h - the vector loops of attention and the MLP (cpu_ops.c),
 * with an AVX2/FMA version chosen at run time and a portable one. Results
 * depend only on the inputs and lengths, never on the batch a token came in. */
#ifndef HFQ_KERNELS_CPU_VEC_KERNELS_H
#define HFQ_KERNELS_CPU_VEC_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cpu_vec_kernels {
    /* s[p] = q . K[p] for p < n_keys (n_keys >= 1); returns the largest;
     * q: [hd];  kt: K transposed, [hd][n_ctx] */
    float (*scores)(const float *q, const float *kt, int64_t n_ctx, int64_t hd, int64_t n_keys, float *s);
    /* s[p] = e^(scale * s[p] - scale * max) for p < n, max the largest s[p]
     * (as scores returns it); returns their sum */
    float (*softmax)(float *s, int64_t n, float max, float scale);
    /* out[d] = sum_p s[p] v[p][d] for d < hd;  v: n_keys rows v_stride apart */
    void (*mix)(const float *s, const float *v, int64_t v_stride, int64_t n_keys, int64_t hd, float *out);
    /* gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i] */
    void (*swiglu)(float *gate, const float *up, size_t n);
    /* sum of a[i] * b[i], exact */
    int64_t (*dot_i8)(const int8_t *a, const int8_t *b, int64_t n);
} cpu_vec_kernels;

/* The SIMD kernels when simd is true and the CPU has them, else portable C. */
cpu_vec_kernels cpu_vec_kernels_get(bool simd);

#endif
