/* int8.c - symmetric INT8 quantization, dequantization and dot products. */
#include "quant/int8.h"

#include "quant/isa.h"
#include "quant/lanes.h"

#define DOT_CHUNK 65536 /* products per int32 partial sum: 65536 * 16129 < 2^31 */
#define SEARCH_STEPS 10
#define SEARCH_STEP 0.015f

float hfq_int8_scale(const float *x, int64_t n) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (hfq_isa_best() == HFQ_ISA_AVX2) return hfq_amax_avx2(x, n) / (float)HFQ_INT8_QMAX;
#endif
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    return amax / (float)HFQ_INT8_QMAX;
}

static void quantize_group(const float *x, int8_t *q, int64_t n, float scale) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (scale != 0.0f && hfq_isa_best() == HFQ_ISA_AVX2) {
        hfq_quantize_int8_avx2(x, q, n, scale);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) q[i] = scale == 0.0f ? 0 : hfq_int8_round(x[i] / scale);
}

static double weighted_error(const float *x, const float *w, int64_t n, float scale) {
    double err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - (double)scale * hfq_int8_round(x[i] / scale);
        err += (double)w[i] * d * d;
    }
    return err;
}

/* The candidate scale with the least importance-weighted error. */
static float search_scale(const float *x, const float *w, int64_t n) {
    const float s0 = hfq_int8_scale(x, n);
    if (s0 == 0.0f) return 0.0f;
    float best = s0;
    double best_err = weighted_error(x, w, n, s0);
    for (int k = 1; k <= SEARCH_STEPS; k++) {
        const float s = s0 * (1.0f - SEARCH_STEP * (float)k);
        const double err = weighted_error(x, w, n, s);
        if (err < best_err) {
            best = s;
            best_err = err;
        }
    }
    return best;
}

size_t hfq_quantize_int8(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                         const float *importance, float *scales, int64_t group_size) {
    const int64_t g_len = group_size ? group_size : n_per_row;
    if (nrows < 0 || n_per_row <= 0 || g_len <= 0 || n_per_row % g_len) return 0;
    const int64_t groups = n_per_row / g_len;
    int8_t *q = (int8_t *)dst;
    for (int64_t r = 0; r < nrows; r++) {
        for (int64_t g = 0; g < groups; g++) {
            const int64_t off = r * n_per_row + g * g_len;
            const float s = importance ? search_scale(src + off, importance + g * g_len, g_len)
                                       : hfq_int8_scale(src + off, g_len);
            scales[r * groups + g] = s;
            quantize_group(src + off, q + off, g_len, s);
        }
    }
    return (size_t)(nrows * n_per_row);
}

size_t hfq_quantize_int8_static(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                float scale) {
    if (nrows < 0 || n_per_row <= 0) return 0;
    quantize_group(src, (int8_t *)dst, nrows * n_per_row, scale);
    return (size_t)(nrows * n_per_row);
}

float hfq_quantize_int8_ct(const float *x, int8_t *q, int64_t n) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float scale = amax / 127.5f;
    for (int64_t i = 0; i < n; i++) {
        const float v = scale == 0.0f ? 0.0f : rintf(x[i] / scale);
        /* NaN (a NaN in x, or Inf / Inf): 0, as hfq_int8_round */
        q[i] = (int8_t)(v != v ? 0.0f : v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v);
    }
    return scale;
}

void hfq_dequantize_row_int8(const void *src, float *dst, int64_t n, const float *scales,
                             int64_t group_size) {
    const int8_t *q = (const int8_t *)src;
    const int64_t g_len = group_size ? group_size : n;
    for (int64_t i = 0; i < n; i++) dst[i] = scales[i / g_len] * (float)q[i];
}

float hfq_dot_int8_f32(const void *w, const float *w_scales, int64_t group_size,
                       const float *x, int64_t n) {
    const int8_t *q = (const int8_t *)w;
    const int64_t g_len = group_size ? group_size : n;
    float sum = 0.0f;
    for (int64_t start = 0, g = 0; start < n; start += g_len, g++) {
        const int64_t end = start + g_len < n ? start + g_len : n;
        float part[HFQ_LANES] = {0};
        for (int64_t i = start; i < end; i++) part[(i - start) % HFQ_LANES] += (float)q[i] * x[i];
        sum += w_scales[g] * hfq_lanes_sum(part);
    }
    return sum;
}

float hfq_dot_int8_int8(const void *w, const float *w_scales, int64_t group_size,
                        const void *a, float a_scale, int64_t n) {
    const int8_t *qw = (const int8_t *)w, *qa = (const int8_t *)a;
    const int64_t g_len = group_size ? group_size : n;
    float sum = 0.0f;
    for (int64_t start = 0, g = 0; start < n; start += g_len, g++) {
        const int64_t end = start + g_len < n ? start + g_len : n;
        int64_t isum = 0;
        for (int64_t i = start; i < end; i += DOT_CHUNK) {
            const int64_t len = end - i < DOT_CHUNK ? end - i : DOT_CHUNK;
            isum += hfq_dot_i8(qw + i, qa + i, (int)len);
        }
        sum += w_scales[g] * (float)isum;
    }
    return sum * a_scale;
}
