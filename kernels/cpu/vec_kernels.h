/* vec_kernels.h - the vector loops of attention and the MLP (cpu_ops.c), in
 * portable C, AVX2/FMA and (attention) AVX-512, the best chosen at run time.
 * Results depend only on the inputs, the lengths and the set, never on the
 * batch a token came in; sets sum in different orders (within rounding). */
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
    /* out[d] = sum_p s[p] V[p][d] for d < hd;  vt: V transposed, [hd][n_ctx] */
    void (*mix)(const float *s, const float *vt, int64_t n_ctx, int64_t n_keys, int64_t hd, float *out);
    /* gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i] */
    void (*swiglu)(float *gate, const float *up, size_t n);
    /* gate[i] = gelu_tanh(gate[i]) * up[i] (torch's gelu(approximate='tanh')) */
    void (*geglu)(float *gate, const float *up, size_t n);
} cpu_vec_kernels;

typedef enum cpu_vec_isa {
    CPU_VEC_PORTABLE,
    CPU_VEC_AVX2,     /* AVX2 + FMA */
    CPU_VEC_AVX512,   /* ... + AVX512F, -DQ and -VL for attention (16 lanes) */
} cpu_vec_isa;

/* The best SIMD kernels this CPU runs when simd is true, else portable C. */
cpu_vec_kernels cpu_vec_kernels_get(bool simd);

/* The kernels of set isa in *k; false when this CPU does not run it (tests). */
bool cpu_vec_kernels_isa(cpu_vec_isa isa, cpu_vec_kernels *k);

#endif
