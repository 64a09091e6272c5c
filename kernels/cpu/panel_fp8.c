/* FP8 W8A8 panels (panel.h): the BF16 pair form of i8_kernels.h
 * (cpu_i8_fp8_pairs: per 16 values j.., word k holds values j + k and
 * j + 8 + k) for weights and activations alike; word k of 16 tokens side by
 * side in one vector, word k of a weight row broadcast, one vdpbf16ps: lane t
 * adds token t's products of values j + k and j + 8 + k to its partial sum
 * k, in that order, as the pair tile's lanes do - so each token's eight
 * partial sums are quant/lanes.h's, and so is their finish. */
#include "kernels/cpu/panel.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/i8_kernels.h"
#include "quant/lanes.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define FP8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define COLS 16           /* tokens side by side */
#define BAND 3            /* weight rows a call keeps partial sums for: 3 x 8 vectors */
#define PANEL_ROWS 30     /* ten bands */

bool cpu_panel_fp8_fits(const hfq_tensor *w, int64_t n_tokens) {
    return n_tokens >= CPU_PANEL_FP8_MIN_TOKENS && (w->qext == HFQ_QEXT_FP8_E4M3 || w->qext == HFQ_QEXT_FP8_E5M2) &&
           w->scale_groups <= 1 && w->ne0 % 16 == 0;
}

/* Rows rb..rb + BAND - 1 of the panel (n / 2 words each) times one group
 * of 16 tokens' words: each row's 8 partial sums per token, finished. */
FP8_TARGET static void band(const uint32_t *wp, int64_t n, const uint32_t *act, __m512 out[BAND]) {
    __m512 acc[BAND][HFQ_LANES];
    for (int r = 0; r < BAND; r++)
        for (int k = 0; k < HFQ_LANES; k++) acc[r][k] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / 16; b++) {
#pragma GCC unroll 8
        for (int k = 0; k < HFQ_LANES; k++) {
            const __m512bh a = (__m512bh)_mm512_loadu_si512(act + (size_t)(b * HFQ_LANES + k) * COLS);
#pragma GCC unroll 3
            for (int r = 0; r < BAND; r++)
                acc[r][k] = _mm512_dpbf16_ps(acc[r][k], a,
                                             (__m512bh)_mm512_set1_epi32((int)wp[(size_t)r * (n / 2) + b * HFQ_LANES + k]));
        }
    }
    /* hfq_lanes_sum: ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) */
    for (int r = 0; r < BAND; r++)
        out[r] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][4]), _mm512_add_ps(acc[r][2], acc[r][6])),
                               _mm512_add_ps(_mm512_add_ps(acc[r][1], acc[r][5]), _mm512_add_ps(acc[r][3], acc[r][7])));
}

/* Panel rows r0.. (nr of them) decoded to pairs, times every token group:
 * y = lanes * (w_scale * a_scale), as hfq_dot_fp8_fp8. */
FP8_TARGET static void panel_products(const hfq_tensor *w, int64_t r0, int nr, uint32_t *wp, const uint32_t *groups,
                                      const float *a_scales, int64_t n_tokens, float *y) {
    const int64_t n = w->ne0, n_out = w->ne1;
    const hfq_fp8_format fmt = w->qext == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
    float ws[PANEL_ROWS];
    for (int r = 0; r < PANEL_ROWS; r++) {
        uint32_t *row = wp + (size_t)r * (size_t)(n / 2);
        if (r < nr) {
            memcpy(row, (const char *)w->data + (size_t)(r0 + r) * w->row_bytes, (size_t)n);
            cpu_i8_fp8_pairs(fmt, row, n);
            ws[r] = w->scale[w->scale_groups ? r0 + r : 0];
        } else {
            memset(row, 0, (size_t)n * 2);
            ws[r] = 0.0f;
        }
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += COLS) {
        const int nc = (int)(n_tokens - t0 < COLS ? n_tokens - t0 : COLS);
        float as_pad[COLS] = {0};
        memcpy(as_pad, a_scales + t0, (size_t)nc * sizeof(float));
        const __m512 as = _mm512_loadu_ps(as_pad);
        const uint32_t *act = groups + (size_t)(t0 / COLS) * (size_t)(n / 2) * COLS;
        float by_token[COLS][PANEL_ROWS];
        for (int rb = 0; rb < nr; rb += BAND) {
            __m512 sums[BAND];
            float by_row[BAND][COLS];
            band(wp + (size_t)rb * (size_t)(n / 2), n, act, sums);
            for (int r = 0; r < BAND; r++)
                _mm512_storeu_ps(by_row[r], _mm512_mul_ps(sums[r], _mm512_mul_ps(_mm512_set1_ps(ws[rb + r]), as)));
            for (int c = 0; c < COLS; c++)
                for (int r = 0; r < BAND; r++) by_token[c][rb + r] = by_row[r][c];
        }
        for (int c = 0; c < nc; c++) memcpy(y + (t0 + c) * n_out + r0, by_token[c], (size_t)nr * sizeof(float));
    }
}

bool cpu_panel_fp8_matmul(int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                          const float *a_scales, int64_t n_tokens, float *y) {
    const int64_t n = w->ne0, n_out = w->ne1, words = n / 2;
    const int64_t n_groups = (n_tokens + COLS - 1) / COLS;
    const size_t panel_bytes = ((size_t)PANEL_ROWS * (size_t)n * 2 + 63) / 64 * 64;
    if (n_threads < 1) n_threads = 1;
    /* one allocation: the token groups' words, then a panel per thread */
    const size_t group_bytes = ((size_t)n_groups * (size_t)words * COLS * 4 + 63) / 64 * 64;
    char *scratch = aligned_alloc(64, group_bytes + panel_bytes * (size_t)n_threads);
    if (!scratch) return false;
    uint32_t *groups = (uint32_t *)scratch;
    char *panels = scratch + group_bytes;
    /* word k of token c at groups[((g * words) + k) * COLS + c]; tokens past the last: zeros */
    #pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t g = 0; g < n_groups; g++) {
        uint32_t *dst = groups + (size_t)g * (size_t)words * COLS;
        for (int c = 0; c < COLS; c++) {
            const int64_t t = g * COLS + c;
            const uint32_t *src = t < n_tokens ? (const uint32_t *)((const char *)act + (size_t)t * a_stride) : NULL;
            for (int64_t k = 0; k < words; k++) {
                uint32_t v = 0;
                if (src) memcpy(&v, src + k, 4);
                dst[k * COLS + c] = v;
            }
        }
    }
    const int64_t n_panels = (n_out + PANEL_ROWS - 1) / PANEL_ROWS;
    #pragma omp parallel num_threads(n_threads)
    {
        uint32_t *wp = (uint32_t *)(panels + panel_bytes * (size_t)omp_get_thread_num());
        #pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < n_panels; p++) {
            const int64_t r0 = p * PANEL_ROWS;
            const int nr = (int)(n_out - r0 < PANEL_ROWS ? n_out - r0 : PANEL_ROWS);
            panel_products(w, r0, nr, wp, groups, a_scales, n_tokens, y);
        }
    }
    free(scratch);
    return true;
}

#else

bool cpu_panel_fp8_fits(const hfq_tensor *w, int64_t n_tokens) {
    (void)w, (void)n_tokens;
    return false;
}

bool cpu_panel_fp8_matmul(int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                          const float *a_scales, int64_t n_tokens, float *y) {
    (void)n_threads, (void)w, (void)act, (void)a_stride, (void)a_scales, (void)n_tokens, (void)y;
    return false;
}

#endif
