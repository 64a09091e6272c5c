#include "kernels/cpu/kv_rows.h"

#include <stdbool.h>
#include <string.h>

#include "quant/cpu_features.h"
#include "quant/fp8.h"
#include "quant/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KV_HAVE_F16C 1
#define F16C __attribute__((target("avx2,fma,f16c")))

/* The dots of n F16 key rows (stride bytes apart) with an F16 query, into
 * s: each row's float products summed in 8 float lanes (as ggml's F16 dot
 * sums in float; the table's portable dot sums in double), then the lanes
 * added pairwise. Four rows at once, each its own chain of multiply-adds in
 * index order: the bits of one row at a time, without waiting on each
 * chain's latency. */
F16C static inline __m256 f16x8(const uint16_t *x) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x)); }

F16C static float hsum8_tail(__m256 acc, const uint16_t *x, const uint16_t *y, int64_t i, int64_t n) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float sum = _mm_cvtss_f32(s);
    for (; i < n; i++) sum += hfq_fp16_to_f32(x[i]) * hfq_fp16_to_f32(y[i]);
    return sum;
}

#define ROWS_AT_ONCE 4

F16C static void dots_f16_f16c(const char *rows, size_t stride, const uint16_t *y, int64_t n, int64_t hd,
                               float *s) {
    const int64_t n8 = hd / 8 * 8;
    int64_t p = 0;
    for (; p + ROWS_AT_ONCE <= n; p += ROWS_AT_ONCE) {
        const uint16_t *x[ROWS_AT_ONCE];
        __m256 acc[ROWS_AT_ONCE];
        for (int r = 0; r < ROWS_AT_ONCE; r++) {
            x[r] = (const uint16_t *)(rows + (size_t)(p + r) * stride);
            acc[r] = _mm256_setzero_ps();
        }
        for (int64_t i = 0; i < n8; i += 8) {
            const __m256 q = f16x8(y + i);
            for (int r = 0; r < ROWS_AT_ONCE; r++) acc[r] = _mm256_fmadd_ps(f16x8(x[r] + i), q, acc[r]);
        }
        for (int r = 0; r < ROWS_AT_ONCE; r++) s[p + r] = hsum8_tail(acc[r], x[r], y, n8, hd);
    }
    for (; p < n; p++) {
        const uint16_t *x = (const uint16_t *)(rows + (size_t)p * stride);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < n8; i += 8) acc = _mm256_fmadd_ps(f16x8(x + i), f16x8(y + i), acc);
        s[p] = hsum8_tail(acc, x, y, n8, hd);
    }
}

/* out = sum over rows p in order of w[p] * (F16 value row p), from zeros:
 * 64 values at a time held in registers over all the rows (each value's
 * multiply-adds in the order of one row at a time). */
F16C static void mix_f16_f16c(const char *rows, size_t stride, const float *w, int64_t n, int64_t hd, float *out) {
    enum { G = 8 };   /* vectors of 8 values per pass */
    int64_t d = 0;
    for (; d + 8 * G <= hd; d += 8 * G) {
        __m256 acc[G];
        for (int j = 0; j < G; j++) acc[j] = _mm256_setzero_ps();
        for (int64_t p = 0; p < n; p++) {
            const uint16_t *x = (const uint16_t *)(rows + (size_t)p * stride) + d;
            const __m256 vw = _mm256_set1_ps(w[p]);
            for (int j = 0; j < G; j++) acc[j] = _mm256_fmadd_ps(vw, f16x8(x + 8 * j), acc[j]);
        }
        for (int j = 0; j < G; j++) _mm256_storeu_ps(out + d + 8 * j, acc[j]);
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t p = 0; p < n; p++)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(w[p]), f16x8((const uint16_t *)(rows + (size_t)p * stride) + d), acc);
        _mm256_storeu_ps(out + d, acc);
    }
    for (; d < hd; d++) {
        float acc = 0.0f;
        for (int64_t p = 0; p < n; p++) acc += w[p] * hfq_fp16_to_f32(((const uint16_t *)(rows + (size_t)p * stride))[d]);
        out[d] = acc;
    }
}

static int f16c(hfq_kv_type t) { return t == HFQ_KV_F16 && cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA | CPU_FEAT_F16C); }

/* mix_f16_f16c on 512-bit vectors: the same bits (each value's sum is its
 * own chain, whatever the width), half the conversions and multiply-adds.
 * (The key dots two rows a 512-bit vector were no faster: not kept.) */
#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512dq")))

/* Values d.. d + 16 G - 1 of the mix, G vectors of 16 held over all the rows. */
AVX512 static inline __attribute__((always_inline)) void mix_pass_avx512(const int G, const char *rows, size_t stride,
                                                                         const float *w, int64_t n, int64_t d, float *out) {
    __m512 acc[8];
    for (int j = 0; j < G; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < n; p++) {
        const uint16_t *x = (const uint16_t *)(rows + (size_t)p * stride) + d;
        const __m512 vw = _mm512_set1_ps(w[p]);
        for (int j = 0; j < G; j++)
            acc[j] = _mm512_fmadd_ps(vw, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + 16 * j))), acc[j]);
    }
    for (int j = 0; j < G; j++) _mm512_storeu_ps(out + d + 16 * j, acc[j]);
}

AVX512 static void mix_f16_avx512(const char *rows, size_t stride, const float *w, int64_t n, int64_t hd, float *out) {
    int64_t d = 0;
    for (; d + 128 <= hd; d += 128) mix_pass_avx512(8, rows, stride, w, n, d, out);
    if (d + 64 <= hd) mix_pass_avx512(4, rows, stride, w, n, d, out), d += 64;
    for (; d + 16 <= hd; d += 16) mix_pass_avx512(1, rows, stride, w, n, d, out);
    if (d < hd) mix_f16_f16c(rows + (size_t)d * sizeof(uint16_t), stride, w, n, hd - d, out + d);
}

static int avx512(void) {
    return cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA | CPU_FEAT_F16C | CPU_FEAT_AVX512F | CPU_FEAT_AVX512VL | CPU_FEAT_AVX512DQ);
}
#endif

static bool fp8_format(hfq_kv_type t, hfq_fp8_format *fmt) {
    if (t != HFQ_KV_FP8_E4M3 && t != HFQ_KV_FP8_E5M2) return false;
    *fmt = t == HFQ_KV_FP8_E4M3 ? HFQ_FP8_E4M3 : HFQ_FP8_E5M2;
    return true;
}

/* An FP8 row: the F32 scale (unaligned: memcpy), then hd codes. */
static float fp8_scale(const void *row) {
    float s;
    memcpy(&s, row, sizeof s);
    return s;
}

void cpu_kv_row_store(hfq_kv_type t, const float *x, void *row, int64_t hd, float fp8_scale) {
    hfq_fp8_format fmt;
    if (fp8_format(t, &fmt)) {
        const float scale = fp8_scale > 0.0f ? fp8_scale : hfq_fp8_scale(fmt, x, hd);
        memcpy(row, &scale, sizeof scale);
        hfq_quantize_fp8_static(fmt, x, (char *)row + sizeof scale, 1, hd, scale);
        return;
    }
    /* llama.cpp writes its cache with the CPU from_float: for Q8_0 the x86
     * activation quantizer (quantize_row), for the others the reference */
    const hfq_qtype_traits *q = hfq_qtype_get(hfq_kv_type_qtype(t));
    if (q->quantize_row) q->quantize_row(x, row, hd);
    else q->quantize(x, row, 1, hd, NULL);
}

int64_t cpu_kv_query_bytes(hfq_kv_type t, int64_t hd) {
    hfq_fp8_format fmt;
    if (fp8_format(t, &fmt)) return hd * (int64_t)sizeof(float);
    return hfq_qtype_row_size(hfq_qtype_get(hfq_kv_type_qtype(t))->vec_dot_type, hd);
}

void cpu_kv_query(hfq_kv_type t, const float *q, void *qc, int64_t hd) {
    hfq_fp8_format fmt;
    if (fp8_format(t, &fmt)) {
        memcpy(qc, q, (size_t)hd * sizeof *q);
        return;
    }
    hfq_qtype_get(hfq_qtype_get(hfq_kv_type_qtype(t))->vec_dot_type)->quantize_row(q, qc, hd);
}

/* The dot of one key row with a converted query. */
static float row_dot(hfq_kv_type t, const void *row, const void *qc, int64_t hd) {
    hfq_fp8_format fmt;
    if (fp8_format(t, &fmt)) return hfq_dot_fp8_f32(fmt, (const char *)row + sizeof(float), fp8_scale(row), qc, hd);
    return hfq_qtype_get(hfq_kv_type_qtype(t))->vec_dot(row, qc, hd);
}

void cpu_kv_rows_dot(hfq_kv_type t, const void *rows, size_t stride, const void *qc, int64_t hd, int64_t n,
                     float *s) {
#ifdef KV_HAVE_F16C
    if (f16c(t)) {
        dots_f16_f16c(rows, stride, qc, n, hd, s);
        return;
    }
#endif
    for (int64_t p = 0; p < n; p++) s[p] = row_dot(t, (const char *)rows + (size_t)p * stride, qc, hd);
}

void cpu_kv_rows_mix(hfq_kv_type t, const void *rows, size_t stride, const float *w, int64_t n, float *out,
                     float *tmp, int64_t hd) {
#ifdef KV_HAVE_F16C
    if (f16c(t)) {
        (avx512() ? mix_f16_avx512 : mix_f16_f16c)(rows, stride, w, n, hd, out);
        return;
    }
#endif
    hfq_fp8_format fmt;
    for (int64_t d = 0; d < hd; d++) out[d] = 0.0f;
    for (int64_t p = 0; p < n; p++) {
        const char *row = (const char *)rows + (size_t)p * stride;
        if (fp8_format(t, &fmt)) hfq_dequantize_row_fp8(fmt, row + sizeof(float), tmp, hd, fp8_scale(row));
        else hfq_qtype_get(hfq_kv_type_qtype(t))->dequantize(row, tmp, hd);
        for (int64_t d = 0; d < hd; d++) out[d] += w[p] * tmp[d];
    }
}
