/* quantize_codec.c - see quantize_codec.h. */
#include "src/quantize_codec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/int8.h"
#include "quant/plan.h"

static bool is_plain(uint32_t type) { return type == GT_F32 || type == GT_F16 || type == GT_BF16; }

bool hfq_codec_can_decode(uint32_t type) { return is_plain(type) || type == GT_MXFP4; }

bool hfq_codec_can_encode(uint32_t fmt) {
    switch (fmt) {
    case GT_F32: case GT_F16: case GT_BF16: case GT_MXFP4: case GT_NVFP4:
    case HFQ_FMT_INT8: case HFQ_FMT_FP8_E4M3: case HFQ_FMT_FP8_E5M2:
        return true;
    default:
        return false;
    }
}

const char *hfq_codec_qext_encoding(uint32_t fmt) {
    switch (fmt) {
    case HFQ_FMT_INT8: case HFQ_FMT_FP8_E4M3: case HFQ_FMT_FP8_E5M2: return hfq_fmt_name(fmt);
    default: return NULL;
    }
}

uint32_t hfq_codec_storage_type(uint32_t fmt) { return hfq_codec_qext_encoding(fmt) ? GT_I8 : fmt; }

hfq_companion hfq_codec_companion(uint32_t fmt) {
    if (fmt == GT_NVFP4) return HFQ_COMPANION_TENSOR_SCALE;
    return hfq_codec_qext_encoding(fmt) ? HFQ_COMPANION_ROW_SCALES : HFQ_COMPANION_NONE;
}

int hfq_codec_scale_name(const char *weight_name, char *out, size_t n) {
    size_t len = strlen(weight_name);
    if (len >= 7 && strcmp(weight_name + len - 7, ".weight") == 0) len -= 7;
    int w = snprintf(out, n, "%.*s.scale", (int)len, weight_name);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

bool hfq_codec_needs_amax(uint32_t fmt) { return fmt == GT_NVFP4; }

float hfq_codec_global_scale(uint32_t fmt, float amax) {
    /* NVIDIA's NVFP4 global scale, as hfq_nvfp4_global_scale computes it */
    return fmt == GT_NVFP4 ? amax / HFQ_NVFP4_GLOBAL_DIV : 0.0f;
}

int hfq_codec_begin(hfq_codec_job *job, const gguf_tensor_info *t, uint32_t fmt, hfq_error *err) {
    memset(job, 0, sizeof *job);
    if (!hfq_codec_can_decode(t->type))
        return hfq_fail(err, t->name, "cannot decode type %s", hfq_fmt_name(t->type));
    if (!hfq_codec_can_encode(fmt)) return hfq_fail(err, t->name, "cannot encode %s", hfq_fmt_name(fmt));
    int64_t in_row = ggml_row_size(t->type, t->ne[0]);
    int64_t out_row = hfq_codec_qext_encoding(fmt) ? t->ne[0] : ggml_row_size(fmt, t->ne[0]);
    if (in_row < 0 || out_row < 0)
        return hfq_fail(err, t->name, "row of %" PRId64 " does not fit %s", t->ne[0], hfq_fmt_name(fmt));
    *job = (hfq_codec_job){t->type, fmt, t->ne[0], (size_t)in_row, (size_t)out_row, 0.0f};
    return 0;
}

static void decode_halves(const uint8_t *s, float *dst, int64_t n, bool bf16) {
    for (int64_t j = 0; j < n; j++) {
        uint16_t h;
        memcpy(&h, s + 2 * j, 2);
        dst[j] = bf16 ? hfq_bf16_to_f32(h) : hfq_fp16_to_f32(h);
    }
}

void hfq_codec_decode_row(const hfq_codec_job *job, const void *src, float *dst) {
    int64_t n = job->n_per_row;
    switch (job->in_type) {
    case GT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case GT_F16: decode_halves(src, dst, n, false); break;
    case GT_BF16: decode_halves(src, dst, n, true); break;
    case GT_MXFP4: hfq_dequantize_row_mxfp4(src, dst, n); break;
    }
}

static void encode_halves(const float *src, uint8_t *d, int64_t n, bool bf16) {
    for (int64_t j = 0; j < n; j++) {
        uint16_t h = bf16 ? hfq_f32_to_bf16(src[j]) : hfq_f32_to_fp16(src[j]);
        memcpy(d + 2 * j, &h, 2);
    }
}

void hfq_codec_encode_row(const hfq_codec_job *job, const float *src, void *dst, const float *importance,
                          float *row_scale) {
    int64_t n = job->n_per_row;
    switch (job->fmt) {
    case GT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case GT_F16: encode_halves(src, dst, n, false); break;
    case GT_BF16: encode_halves(src, dst, n, true); break;
    /* ggml's quantize_mxfp4 ignores the importance; so do we, to stay identical */
    case GT_MXFP4: hfq_quantize_mxfp4(src, dst, 1, n, NULL); break;
    case GT_NVFP4: hfq_quantize_nvfp4(src, dst, 1, n, importance, job->global_scale); break;
    case HFQ_FMT_INT8: hfq_quantize_int8(src, dst, 1, n, importance, row_scale, 0); break;
    case HFQ_FMT_FP8_E4M3: hfq_quantize_fp8(HFQ_FP8_E4M3, src, dst, 1, n, NULL, row_scale); break;
    case HFQ_FMT_FP8_E5M2: hfq_quantize_fp8(HFQ_FP8_E5M2, src, dst, 1, n, NULL, row_scale); break;
    }
}
