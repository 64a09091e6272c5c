#include "kernels/cpu/kv_rows.h"

#include <stdbool.h>
#include <string.h>

#include "quant/fp8.h"

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

void cpu_kv_row_store(hfq_kv_type t, const float *x, void *row, int64_t hd) {
    hfq_fp8_format fmt;
    if (fp8_format(t, &fmt)) {
        const float scale = hfq_fp8_scale(fmt, x, hd);
        memcpy(row, &scale, sizeof scale);
        hfq_quantize_fp8_static(fmt, x, (char *)row + sizeof scale, 1, hd, scale);
        return;
    }
    hfq_qtype_get(hfq_kv_type_qtype(t))->quantize(x, row, 1, hd, NULL);
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
    if (fp8_format(t, &fmt)) return hfq_dot_fp8_f32(fmt, (const char *)row + sizeof(float), fp8_scale(row), qc, hd);
    return hfq_qtype_get(hfq_kv_type_qtype(t))->vec_dot(row, qc, hd);
}

void cpu_kv_row_mad(hfq_kv_type t, const void *row, float w, float *acc, float *tmp, int64_t hd) {
    hfq_fp8_format fmt;
    if (fp8_format(t, &fmt))
        hfq_dequantize_row_fp8(fmt, (const char *)row + sizeof(float), tmp, hd, fp8_scale(row));
    else
        hfq_qtype_get(hfq_kv_type_qtype(t))->dequantize(row, tmp, hd);
    for (int64_t d = 0; d < hd; d++) acc[d] += w * tmp[d];
}
