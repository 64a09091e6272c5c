/* fp4.c - MXFP4 and NVFP4 row quantizers (reference, global-scale and
 * importance-weighted), dequantizers and dot products; the per-block
 * arithmetic is the inline code in fp4.h. */
#include "quant/fp4.h"

#include "quant/isa.h"
#include "quant/lanes.h"

#define NVFP4_SUBS (HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB)
#define NVFP4_SEARCH_RADIUS 2 /* scale codes tried on each side of the reference */

/* ggml's `floorf(log2f(amax)) - 2 + 127`, clamped to [0, 254] where ggml's
 * conversion to uint8_t would be undefined. */
static uint8_t mxfp4_exponent(float amax) {
    if (!(amax > 0.0f)) return 0;
    const float e = floorf(log2f(amax)) - 2 + 127;
    return e < 0.0f ? 0 : e > 254.0f ? 254 : (uint8_t)e;
}

/* hfq_fp4_pack(x, n, d, rne, qs) (n a multiple of 16), ggml's nearest
 * codes by isa's kernel. */
static void pack_run(hfq_isa isa, const float *x, int n, float d, int rne, uint8_t *qs) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (!rne && isa == HFQ_ISA_AVX2) {
        hfq_fp4_pack_ggml_avx2(d, x, n, qs);
        return;
    }
#endif
    hfq_fp4_pack(x, n, d, rne, qs);
}

/* sum w[j] * (x[j] - decoded x[j])^2 for n values coded at scale d. */
static double weighted_error(hfq_isa isa, const float *x, const float *w, int n, float d, int rne) {
    uint8_t qs[HFQ_QK_MXFP4 / 2];
    pack_run(isa, x, n, d, rne, qs);
    double err = 0.0;
    for (int j = 0; j < n; j++) {
        const unsigned code = j < n / 2 ? qs[j] & 0xF : qs[j - n / 2] >> 4;
        const double diff = (double)x[j] - (double)hfq_e2m1_doubled(code) * d;
        err += (double)w[j] * diff * diff;
    }
    return err;
}

/* Of the reference exponent e0 and its neighbours (e0 + 1 stops clipping the
 * values in [6, 8) * 2^(e0-127), like NVFP4's max -> 4; e0 - 1 clips more but
 * refines the rest), the one with the least weighted error, e0 on ties. */
static uint8_t mxfp4_search_exponent(hfq_isa isa, const float *x, const float *w, uint8_t e0) {
    uint8_t best = e0;
    double best_err = weighted_error(isa, x, w, HFQ_QK_MXFP4, hfq_e8m0_half_to_f32(e0), 0);
    const int tries[2] = {e0 - 1, e0 + 1};
    for (int k = 0; k < 2; k++) {
        if (tries[k] < 0 || tries[k] > 254) continue;
        const double err = weighted_error(isa, x, w, HFQ_QK_MXFP4, hfq_e8m0_half_to_f32((uint8_t)tries[k]), 0);
        if (err < best_err) {
            best = (uint8_t)tries[k];
            best_err = err;
        }
    }
    return best;
}

size_t hfq_quantize_mxfp4_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                              const float *importance) {
    if (nrows < 0 || n_per_row <= 0 || n_per_row % HFQ_QK_MXFP4) return 0;
    const int64_t nb = n_per_row / HFQ_QK_MXFP4;
    hfq_block_mxfp4 *y = (hfq_block_mxfp4 *)dst;
    for (int64_t r = 0; r < nrows; r++) {
        for (int64_t b = 0; b < nb; b++, y++) {
            const float *x = src + r * n_per_row + b * HFQ_QK_MXFP4;
            uint8_t e = mxfp4_exponent(hfq_fp4_amax(x, HFQ_QK_MXFP4));
            if (importance) e = mxfp4_search_exponent(isa, x, importance + b * HFQ_QK_MXFP4, e);
            y->e = e;
            pack_run(isa, x, HFQ_QK_MXFP4, hfq_e8m0_half_to_f32(e), 0, y->qs);
        }
    }
    return (size_t)(nrows * nb) * sizeof(hfq_block_mxfp4);
}

size_t hfq_quantize_mxfp4(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *importance) {
    return hfq_quantize_mxfp4_isa(hfq_isa_best(), src, dst, nrows, n_per_row, importance);
}

/* The scale code with the least weighted error among those from
 * NVFP4_SEARCH_RADIUS below the reference code (max -> 6) to
 * NVFP4_SEARCH_RADIUS above the code mapping the maximum to 4 ("Four Over
 * Six": the largest values then round on the finer part of the E2M1 grid),
 * the reference on ties, then the lowest code. */
static uint8_t nvfp4_search_code(hfq_isa isa, const float *x, const float *w, float g) {
    const float amax = hfq_fp4_amax(x, HFQ_QK_NVFP4_SUB);
    const int c0 = hfq_nvfp4_scale_code(amax, g);
    const int c4 = hfq_nvfp4_c4_code(amax, g);
    int best = c0;
    double best_err = weighted_error(isa, x, w, HFQ_QK_NVFP4_SUB, hfq_nvfp4_sub_scale((uint8_t)c0, g), g > 0.0f);
    for (int c = c0 - NVFP4_SEARCH_RADIUS; c <= c4 + NVFP4_SEARCH_RADIUS; c++) {
        if (c == c0 || c < 0 || c > 0x7E) continue;
        const double err = weighted_error(isa, x, w, HFQ_QK_NVFP4_SUB, hfq_nvfp4_sub_scale((uint8_t)c, g), g > 0.0f);
        if (err < best_err) {
            best = c;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

/* hfq_nvfp4_pack_sub by isa's kernel. */
static void pack_sub(hfq_isa isa, const float *x, uint8_t code, float g, hfq_block_nvfp4 *y, int s) {
    y->d[s] = code;
    pack_run(isa, x, HFQ_QK_NVFP4_SUB, hfq_nvfp4_sub_scale(code, g), g > 0.0f,
             y->qs + s * (HFQ_QK_NVFP4_SUB / 2));
}

size_t hfq_quantize_nvfp4_isa(hfq_isa isa, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                              const float *importance, float global_scale) {
    if (nrows < 0 || n_per_row <= 0 || n_per_row % HFQ_QK_NVFP4) return 0;
    const float g = global_scale > 0.0f ? global_scale : 0.0f;
    const int64_t nb = n_per_row / HFQ_QK_NVFP4;
    hfq_block_nvfp4 *y = (hfq_block_nvfp4 *)dst;
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (!importance && g > 0.0f && isa == HFQ_ISA_AVX2) {   /* activations (W4A4) */
        hfq_quantize_nvfp4_avx2(src, y, nrows * nb, g);
        return (size_t)(nrows * nb) * sizeof(hfq_block_nvfp4);
    }
#endif
    for (int64_t r = 0; r < nrows; r++) {
        for (int64_t b = 0; b < nb; b++, y++) {
            for (int s = 0; s < NVFP4_SUBS; s++) {
                const int64_t off = b * HFQ_QK_NVFP4 + s * HFQ_QK_NVFP4_SUB;
                const float *xs = src + r * n_per_row + off;
                const uint8_t code = importance ? nvfp4_search_code(isa, xs, importance + off, g)
                                                : hfq_nvfp4_scale_code(hfq_fp4_amax(xs, HFQ_QK_NVFP4_SUB), g);
                pack_sub(isa, xs, code, g, y, s);
            }
        }
    }
    return (size_t)(nrows * nb) * sizeof(hfq_block_nvfp4);
}

size_t hfq_quantize_nvfp4(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                          const float *importance, float global_scale) {
    return hfq_quantize_nvfp4_isa(hfq_isa_best(), src, dst, nrows, n_per_row, importance, global_scale);
}

void hfq_quantize_nvfp4_act_search(const float *x, void *dst, int64_t n, float g) {
    hfq_block_nvfp4 *y = (hfq_block_nvfp4 *)dst;
    const int64_t nb = n / HFQ_QK_NVFP4;
    if (!(g > 0.0f)) {
        hfq_quantize_nvfp4(x, dst, 1, n, NULL, 0.0f);
        return;
    }
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (hfq_isa_best() == HFQ_ISA_AVX2) {
        hfq_quantize_nvfp4_search_avx2(x, y, nb, g);
        return;
    }
#endif
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < NVFP4_SUBS; s++) {
            const float *xs = x + b * HFQ_QK_NVFP4 + s * HFQ_QK_NVFP4_SUB;
            hfq_nvfp4_pack_sub(xs, hfq_nvfp4_act_search_code(xs, g), g, y + b, s);
        }
}

float hfq_nvfp4_global_scale(const float *x, int64_t n) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (hfq_isa_best() == HFQ_ISA_AVX2) return hfq_amax_avx2(x, n) / HFQ_NVFP4_GLOBAL_DIV;
#endif
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    return amax / HFQ_NVFP4_GLOBAL_DIV;
}

void hfq_dequantize_row_mxfp4(const void *src, float *dst, int64_t n) {
    const hfq_block_mxfp4 *x = (const hfq_block_mxfp4 *)src;
    for (int64_t b = 0; b < n / HFQ_QK_MXFP4; b++) hfq_decode_block_mxfp4(x + b, dst + b * HFQ_QK_MXFP4);
}

void hfq_dequantize_row_nvfp4(const void *src, float *dst, int64_t n) {
    const hfq_block_nvfp4 *x = (const hfq_block_nvfp4 *)src;
    for (int64_t b = 0; b < n / HFQ_QK_NVFP4; b++) hfq_decode_block_nvfp4(x + b, dst + b * HFQ_QK_NVFP4);
}

/* Row w of blocks (qk values, block_bytes each, decoded by dequantize)
 * dotted with x in quant/lanes.h's order. */
static float dot_decoded_f32(void (*dequantize)(const void *, float *, int64_t), const char *w, size_t block_bytes,
                             int64_t qk, const float *x, int64_t n) {
    float sum[HFQ_LANES] = {0}, v[HFQ_QK_NVFP4];
    for (int64_t b = 0; b < n / qk; b++) {
        dequantize(w + (size_t)b * block_bytes, v, qk);
        for (int64_t j = 0; j < qk; j++) sum[j % HFQ_LANES] += v[j] * x[b * qk + j];
    }
    return hfq_lanes_sum(sum);
}

float hfq_dot_mxfp4_f32(const void *w, const void *x, int64_t n) {
    return dot_decoded_f32(hfq_dequantize_row_mxfp4, w, sizeof(hfq_block_mxfp4), HFQ_QK_MXFP4, x, n);
}

float hfq_dot_nvfp4_f32(const void *w, const void *x, int64_t n) {
    return dot_decoded_f32(hfq_dequantize_row_nvfp4, w, sizeof(hfq_block_nvfp4), HFQ_QK_NVFP4, x, n);
}

float hfq_dot_mxfp4_q8_0(const void *w, const void *a, int64_t n) {
    const hfq_block_mxfp4 *q = (const hfq_block_mxfp4 *)w;
    const hfq_block_q8_0 *y = (const hfq_block_q8_0 *)a;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / HFQ_QK_MXFP4; b++) acc = hfq_acc_block_mxfp4_q8_0(acc, q + b, y + b);
    return acc;
}

float hfq_dot_nvfp4_q8_0(const void *w, const void *a, int64_t n) {
    const hfq_block_nvfp4 *q = (const hfq_block_nvfp4 *)w;
    const hfq_block_q8_0 *y = (const hfq_block_q8_0 *)a;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / HFQ_QK_NVFP4; b++) acc = hfq_acc_block_nvfp4_q8_0(acc, q + b, y + 2 * b);
    return acc;
}

void hfq_quantize_row_mxfp4_act(const float *x, void *dst, int64_t n) {
    hfq_block_mxfp4 *y = (hfq_block_mxfp4 *)dst;
    for (int64_t b = 0; b < n / HFQ_QK_MXFP4; b++) hfq_quantize_block_mxfp4_act(x + b * HFQ_QK_MXFP4, y + b);
}

float hfq_dot_mxfp4_mxfp4(const void *w, const void *a, int64_t n) {
    const hfq_block_mxfp4 *qw = (const hfq_block_mxfp4 *)w;
    const hfq_block_mxfp4 *qa = (const hfq_block_mxfp4 *)a;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / HFQ_QK_MXFP4; b++) acc = hfq_acc_block_mxfp4_mxfp4(acc, qw + b, qa + b);
    return acc;
}

float hfq_dot_nvfp4_nvfp4(const void *w, const void *a, int64_t n) {
    const hfq_block_nvfp4 *qw = (const hfq_block_nvfp4 *)w;
    const hfq_block_nvfp4 *qa = (const hfq_block_nvfp4 *)a;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / HFQ_QK_NVFP4; b++) acc = hfq_acc_block_nvfp4_nvfp4(acc, qw + b, qa + b);
    return acc;
}
