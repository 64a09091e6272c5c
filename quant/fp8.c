/* fp8.c - FP8 tensor quantization, dequantization and dot products; the
 * codecs themselves are the inline functions in fp8.h. */
#include "quant/fp8.h"

#include <math.h>

#include "quant/isa.h"
#include "quant/lanes.h"

float hfq_fp8_scale(hfq_fp8_format fmt, const float *x, int64_t n) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (hfq_isa_best() == HFQ_ISA_AVX2) return hfq_amax_avx2(x, n) / hfq_fp8_max(fmt);
#endif
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    return amax / hfq_fp8_max(fmt);
}

static void quantize_row(hfq_fp8_format fmt, const float *x, uint8_t *q, int64_t n, float scale) {
    if (scale == 0.0f) {
        for (int64_t i = 0; i < n; i++) q[i] = 0;
        return;
    }
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (hfq_isa_best() == HFQ_ISA_AVX2) {
        hfq_quantize_fp8_avx2(fmt, x, q, n, scale);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) q[i] = hfq_f32_to_fp8(fmt, x[i] / scale);
}

#define SEARCH_STEPS 16 /* scales amax/max * 2^(k/16): one octave of grid alignments */

static double weighted_error(hfq_fp8_format fmt, const float *x, const float *w, int64_t n, float scale) {
    double err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - (double)scale * hfq_fp8_to_f32(fmt, hfq_f32_to_fp8(fmt, x[i] / scale));
        err += (double)w[i] * d * d;
    }
    return err;
}

/* The candidate scale with the least importance-weighted error. */
static float search_scale(hfq_fp8_format fmt, const float *x, const float *w, int64_t n) {
    const float s0 = hfq_fp8_scale(fmt, x, n);
    if (s0 == 0.0f) return 0.0f;
    float best = s0;
    double best_err = weighted_error(fmt, x, w, n, s0);
    for (int k = 1; k < SEARCH_STEPS; k++) {
        const float s = s0 * (float)pow(2.0, (double)k / SEARCH_STEPS);
        const double err = weighted_error(fmt, x, w, n, s);
        if (err < best_err) {
            best = s;
            best_err = err;
        }
    }
    return best;
}

size_t hfq_quantize_fp8(hfq_fp8_format fmt, const float *src, void *dst, int64_t nrows,
                        int64_t n_per_row, const float *importance, float *scales) {
    if (nrows < 0 || n_per_row <= 0) return 0;
    uint8_t *q = (uint8_t *)dst;
    for (int64_t r = 0; r < nrows; r++) {
        const float *x = src + r * n_per_row;
        scales[r] = importance ? search_scale(fmt, x, importance, n_per_row) : hfq_fp8_scale(fmt, x, n_per_row);
        quantize_row(fmt, x, q + r * n_per_row, n_per_row, scales[r]);
    }
    return (size_t)(nrows * n_per_row);
}

size_t hfq_quantize_fp8_static(hfq_fp8_format fmt, const float *src, void *dst, int64_t nrows,
                               int64_t n_per_row, float scale) {
    if (nrows < 0 || n_per_row <= 0) return 0;
    quantize_row(fmt, src, (uint8_t *)dst, nrows * n_per_row, scale);
    return (size_t)(nrows * n_per_row);
}

void hfq_dequantize_row_fp8(hfq_fp8_format fmt, const void *src, float *dst, int64_t n, float scale) {
    const uint8_t *q = (const uint8_t *)src;
    for (int64_t i = 0; i < n; i++) dst[i] = scale * hfq_fp8_to_f32(fmt, q[i]);
}

void hfq_fp8_fake_quant_groups(hfq_fp8_format fmt, const float *x, float *y, int64_t n, int64_t g) {
    for (int64_t k = 0; k < n; k += g) {
        const float s = hfq_fp8_scale(fmt, x + k, g);
        if (s == 0.0f) {
            for (int64_t i = k; i < k + g; i++) y[i] = 0.0f;
            continue;
        }
#ifdef HFQ_HAVE_AVX2_KERNELS
        if (hfq_isa_best() == HFQ_ISA_AVX2) {
            hfq_fp8_fake_quant_avx2(fmt, x + k, y + k, g, s);
            continue;
        }
#endif
        for (int64_t i = k; i < k + g; i++) y[i] = hfq_fp8_to_f32(fmt, hfq_f32_to_fp8(fmt, x[i] / s)) * s;
    }
}

float hfq_dot_fp8_f32(hfq_fp8_format wfmt, const void *w, float w_scale, const float *x, int64_t n) {
    const uint8_t *q = (const uint8_t *)w;
    float sum[HFQ_LANES] = {0};
    for (int64_t i = 0; i < n; i++) sum[i % HFQ_LANES] += hfq_fp8_to_f32(wfmt, q[i]) * x[i];
    return hfq_lanes_sum(sum) * w_scale;
}

float hfq_dot_fp8_fp8(hfq_fp8_format wfmt, const void *w, float w_scale,
                      hfq_fp8_format afmt, const void *a, float a_scale, int64_t n) {
    const uint8_t *qw = (const uint8_t *)w, *qa = (const uint8_t *)a;
    float sum[HFQ_LANES] = {0};
    for (int64_t i = 0; i < n; i++) sum[i % HFQ_LANES] += hfq_fp8_to_f32(wfmt, qw[i]) * hfq_fp8_to_f32(afmt, qa[i]);
    return hfq_lanes_sum(sum) * (w_scale * a_scale);
}

float hfq_dot_fp8_f32_groups(hfq_fp8_format wfmt, const void *w, const float *w_scales, int64_t group_size,
                             const float *x, int64_t n) {
    if (group_size <= 0 || group_size >= n) return hfq_dot_fp8_f32(wfmt, w, w_scales[0], x, n);
    float sum = 0.0f;
    for (int64_t start = 0, g = 0; start < n; start += group_size, g++)
        sum += hfq_dot_fp8_f32(wfmt, (const uint8_t *)w + start, w_scales[g], x + start,
                               n - start < group_size ? n - start : group_size);
    return sum;
}

float hfq_dot_fp8_fp8_groups(hfq_fp8_format wfmt, const void *w, const float *w_scales, int64_t group_size,
                             hfq_fp8_format afmt, const void *a, float a_scale, int64_t n) {
    if (group_size <= 0 || group_size >= n) return hfq_dot_fp8_fp8(wfmt, w, w_scales[0], afmt, a, a_scale, n);
    float sum = 0.0f;
    for (int64_t start = 0, g = 0; start < n; start += group_size, g++)
        sum += hfq_dot_fp8_fp8(wfmt, (const uint8_t *)w + start, w_scales[g], afmt, (const uint8_t *)a + start, 1.0f,
                               n - start < group_size ? n - start : group_size);
    return sum * a_scale;
}
