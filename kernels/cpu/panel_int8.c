/* INT8 W8A8 batches (panel.h) on AVX512-VNNI: the bits of hfq_dot_int8_int8.
 *
 * Its sum per scale group is an exact integer, so any order gives it: the
 * activation rows are laid out 16 tokens side by side (4 codes of each
 * token per 32-bit lane, as unsigned a + 128), and each 4-code group of a
 * weight row, broadcast straight from the matrix (the codes are the
 * reference's bytes: no decode), meets 16 tokens in one vpdpbusd. A lane
 * starts at -128 times the group's weight code sum, which takes the + 128
 * back; 32-bit lanes wrap, but the final sum is exact while |sum| < 2^31,
 * which groups of at most 2^16 values keep (|a w| <= 2^14). Then the
 * reference's float steps per token: sum += w_scale[g] * (float)isum over
 * the groups in order, times a_scale. BAND weight rows by TOKEN_VECS
 * vectors of 16 tokens in registers; a thread takes a panel of rows at a
 * time past every token group, so the panel stays in its cache. */
#include "kernels/cpu/panel.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/panel_layout.h"
#include "quant/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define INT8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define COLS PANEL_COLS  /* tokens a vector (panel_layout.h) */
#define TOKEN_VECS 2     /* token vectors a band keeps sums for */
#define BAND 8           /* weight rows a band */
#define PANEL_ROWS 32    /* four bands */
#define GROUP_MAX 65536  /* values a scale group may have (the lanes' sums exact) */

/* The values of each of w's scale groups (the row where it has one scale). */
static int64_t group_len(const hfq_tensor *w) { return w->scale_groups > 1 ? w->ne0 / w->scale_groups : w->ne0; }

bool cpu_panel_int8_fits(const hfq_tensor *w, int64_t n_tokens) {
    return n_tokens >= CPU_PANEL_INT8_MIN_TOKENS && w->qext == HFQ_QEXT_INT8 && w->ne0 % 4 == 0 && w->ne1 >= BAND &&
           group_len(w) % 4 == 0 && group_len(w) <= GROUP_MAX &&
           cpu_has(CPU_FEAT_AVX512F | CPU_FEAT_AVX512BW | CPU_FEAT_AVX512DQ | CPU_FEAT_AVX512VL | CPU_FEAT_AVX512VNNI);
}

/* Rows w0, w0 + ws, .. (BAND of them), values [i0, i1) of a group, times
 * TOKEN_VECS token vectors from step i0 / 4 of act (vector v's steps
 * vstride bytes after vector 0's): raw[r][v] from start[r]. */
INT8_TARGET static inline __attribute__((always_inline)) void group_sums(const int8_t *w0, size_t ws, int64_t i0,
                                                                         int64_t i1, const uint8_t *act,
                                                                         size_t vstride, const int32_t start[BAND],
                                                                         __m512i raw[BAND][TOKEN_VECS]) {
    for (int r = 0; r < BAND; r++)
        for (int v = 0; v < TOKEN_VECS; v++) raw[r][v] = _mm512_set1_epi32(start[r]);
    for (int64_t i = i0; i < i1; i += 4) {
        __m512i a[TOKEN_VECS];
        for (int v = 0; v < TOKEN_VECS; v++) a[v] = _mm512_load_si512(act + (size_t)v * vstride + (size_t)i * COLS);
#pragma GCC unroll 8
        for (int r = 0; r < BAND; r++) {
            int32_t w4;
            memcpy(&w4, w0 + (size_t)r * ws + (size_t)i, 4);
            const __m512i wv = _mm512_set1_epi32(w4);
            for (int v = 0; v < TOKEN_VECS; v++) raw[r][v] = _mm512_dpbusd_epi32(raw[r][v], a[v], wv);
        }
    }
}

/* Rows r0.. r0 + BAND - 1 (a last band short of BAND rows takes the rows
 * before it along, storing only its own) times token groups g0.. (TOKEN_VECS
 * of them; those past the last read g0 again, their results dropped), into y. */
INT8_TARGET static void band(const hfq_tensor *w, int64_t r0, const int32_t *starts, const uint8_t *groups,
                             int64_t g0, int64_t n_groups, const float *as_pad, int64_t n_tokens, float *y) {
    const int64_t n = w->ne0, n_out = w->ne1, len = group_len(w), n_g = n / len;
    const size_t vstride = (size_t)n * COLS;
    const int64_t rb = r0 + BAND <= n_out ? r0 : n_out - BAND;   /* n_out >= BAND: cpu_panel_int8_fits */
    const int8_t *w0 = (const int8_t *)w->data + (size_t)rb * w->row_bytes;
    __m512 sum[BAND][TOKEN_VECS];
    for (int r = 0; r < BAND; r++)
        for (int v = 0; v < TOKEN_VECS; v++) sum[r][v] = _mm512_setzero_ps();
    const uint8_t *act = groups + (size_t)g0 * vstride;
    const size_t vs = g0 + TOKEN_VECS <= n_groups ? vstride : 0;   /* TOKEN_VECS 2: a lone last group */
    for (int64_t k = 0; k < n_g; k++) {
        int32_t start[BAND];
        for (int r = 0; r < BAND; r++) start[r] = starts[(rb + r) * n_g + k];
        __m512i raw[BAND][TOKEN_VECS];
        group_sums(w0, w->row_bytes, k * len, (k + 1) * len, act, vs, start, raw);
        for (int r = 0; r < BAND; r++) {
            const float ws = w->scale[w->scale_groups ? (rb + r) * w->scale_groups + k : 0];
            for (int v = 0; v < TOKEN_VECS; v++)
                sum[r][v] = _mm512_add_ps(sum[r][v], _mm512_mul_ps(_mm512_set1_ps(ws), _mm512_cvtepi32_ps(raw[r][v])));
        }
    }
    for (int v = 0; v < TOKEN_VECS && g0 + v < n_groups; v++) {
        float out[BAND][COLS];
        const __m512 as = _mm512_loadu_ps(as_pad + (g0 + v) * COLS);
        for (int r = 0; r < BAND; r++) _mm512_storeu_ps(out[r], _mm512_mul_ps(sum[r][v], as));
        for (int c = 0; c < COLS && (g0 + v) * COLS + c < n_tokens; c++)
            for (int64_t r = r0 - rb; r < BAND; r++) y[((g0 + v) * COLS + c) * n_out + rb + r] = out[r][c];
    }
}

bool cpu_panel_int8_matmul(int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                           const float *a_scales, int64_t n_tokens, float *y) {
    const int64_t n = w->ne0, n_out = w->ne1, len = group_len(w), n_g = n / len;
    const int64_t n_groups = (n_tokens + COLS - 1) / COLS;
    if (n_threads < 1) n_threads = 1;
    /* one allocation: the token groups (n / 4 steps of 64 bytes each), the
     * padded activation scales, the rows' group starts */
    const size_t group_bytes = (size_t)n * COLS, scales_bytes = ((size_t)n_groups * COLS * 4 + 63) / 64 * 64;
    char *scratch = aligned_alloc(64, group_bytes * (size_t)n_groups + scales_bytes +
                                          ((size_t)(n_out * n_g) * 4 + 63) / 64 * 64);
    if (!scratch) return false;
    uint8_t *groups = (uint8_t *)scratch;
    float *as_pad = (float *)(scratch + group_bytes * (size_t)n_groups);
    int32_t *starts = (int32_t *)((char *)as_pad + scales_bytes);
    memset(as_pad, 0, scales_bytes);
    memcpy(as_pad, a_scales, (size_t)n_tokens * sizeof(float));
    #pragma omp parallel num_threads(n_threads)
    {
        /* the tokens in panel_layout.h's layout; past the last: zero activations */
        #pragma omp for schedule(static)
        for (int64_t g = 0; g < n_groups; g++) {
            uint32_t *dst = (uint32_t *)(groups + (size_t)g * group_bytes);
            for (int c = 0; c < COLS; c++) {
                const int64_t t = g * COLS + c;
                if (t < n_tokens) panel_pack_codes(dst, (const int8_t *)act + (size_t)t * a_stride, n, c);
                else panel_pad_codes(dst, n, c);
            }
        }
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < n_out; r++) {
            const int8_t *wr = (const int8_t *)w->data + (size_t)r * w->row_bytes;
            for (int64_t k = 0; k < n_g; k++) {
                int32_t s = 0;
                for (int64_t i = k * len; i < (k + 1) * len; i++) s += wr[i];
                starts[r * n_g + k] = -128 * s;
            }
        }
        /* panels of rows, each past every pair of token groups */
        const int64_t n_panels = (n_out + PANEL_ROWS - 1) / PANEL_ROWS;
        #pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < n_panels; p++)
            for (int64_t g0 = 0; g0 < n_groups; g0 += TOKEN_VECS)
                for (int64_t r0 = p * PANEL_ROWS; r0 < (p + 1) * PANEL_ROWS && r0 < n_out; r0 += BAND)
                    band(w, r0, starts, groups, g0, n_groups, as_pad, n_tokens, y);
    }
    free(scratch);
    return true;
}

#else

bool cpu_panel_int8_fits(const hfq_tensor *w, int64_t n_tokens) {
    (void)w, (void)n_tokens;
    return false;
}

bool cpu_panel_int8_matmul(int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                           const float *a_scales, int64_t n_tokens, float *y) {
    (void)n_threads, (void)w, (void)act, (void)a_stride, (void)a_scales, (void)n_tokens, (void)y;
    return false;
}

#endif
