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

/* F16 key row . F16 query: float products summed in 8 float lanes, as
 * ggml's F16 dot sums in float (the table's portable dot sums in double). */
F16C static float dot_f16_f16c(const uint16_t *x, const uint16_t *y, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i))), acc);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float sum = _mm_cvtss_f32(s);
    for (; i < n; i++) sum += hfq_fp16_to_f32(x[i]) * hfq_fp16_to_f32(y[i]);
    return sum;
}

/* acc += w * (F16 value row), converted 8 at a time. */
F16C static void mad_f16_f16c(const uint16_t *x, float w, float *acc, int64_t n) {
    const __m256 vw = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
                                                  _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * hfq_fp16_to_f32(x[i]);
}

static int f16c(hfq_kv_type t) { return t == HFQ_KV_F16 && cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA | CPU_FEAT_F16C); }
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

float cpu_kv_row_dot(hfq_kv_type t, const void *row, const void *qc, int64_t hd) {
    hfq_fp8_format fmt;
#ifdef KV_HAVE_F16C
    if (f16c(t)) return dot_f16_f16c((const uint16_t *)row, (const uint16_t *)qc, hd);
#endif
    if (fp8_format(t, &fmt)) return hfq_dot_fp8_f32(fmt, (const char *)row + sizeof(float), fp8_scale(row), qc, hd);
    return hfq_qtype_get(hfq_kv_type_qtype(t))->vec_dot(row, qc, hd);
}

void cpu_kv_row_mad(hfq_kv_type t, const void *row, float w, float *acc, float *tmp, int64_t hd) {
    hfq_fp8_format fmt;
#ifdef KV_HAVE_F16C
    if (f16c(t)) {
        mad_f16_f16c((const uint16_t *)row, w, acc, hd);
        return;
    }
#endif
    if (fp8_format(t, &fmt))
        hfq_dequantize_row_fp8(fmt, (const char *)row + sizeof(float), tmp, hd, fp8_scale(row));
    else
        hfq_qtype_get(hfq_kv_type_qtype(t))->dequantize(row, tmp, hd);
    for (int64_t d = 0; d < hd; d++) acc[d] += w * tmp[d];
}
