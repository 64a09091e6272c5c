/* quantize_codec.c - see quantize_codec.h. */
#include "src/quantize_codec.h"

#include <inttypes.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/half.h"
#include "quant/plan.h"

static bool is_plain(uint32_t type) { return type == GT_F32 || type == GT_F16 || type == GT_BF16; }

bool hfq_codec_can_decode(uint32_t type) { return is_plain(type); }

bool hfq_codec_can_encode(uint32_t fmt) { return is_plain(fmt); }

uint32_t hfq_codec_storage_type(uint32_t fmt) { return fmt; }

int hfq_codec_begin(hfq_codec_job *job, const gguf_tensor_info *t, uint32_t fmt, hfq_error *err) {
    memset(job, 0, sizeof *job);
    if (!hfq_codec_can_decode(t->type))
        return hfq_fail(err, t->name, "cannot decode type %s", hfq_fmt_name(t->type));
    if (!hfq_codec_can_encode(fmt)) return hfq_fail(err, t->name, "cannot encode %s", hfq_fmt_name(fmt));
    int64_t in_row = ggml_row_size(t->type, t->ne[0]);
    int64_t out_row = ggml_row_size(hfq_codec_storage_type(fmt), t->ne[0]);
    if (in_row < 0 || out_row < 0)
        return hfq_fail(err, t->name, "row of %" PRId64 " does not fit %s", t->ne[0], hfq_fmt_name(fmt));
    *job = (hfq_codec_job){t->type, fmt, t->ne[0], (size_t)in_row, (size_t)out_row};
    return 0;
}

void hfq_codec_decode_row(const hfq_codec_job *job, const void *src, float *dst) {
    const uint8_t *s = src;
    int64_t n = job->n_per_row;
    switch (job->in_type) {
    case GT_F32:
        memcpy(dst, s, (size_t)n * 4);
        break;
    case GT_F16:
        for (int64_t j = 0; j < n; j++) {
            uint16_t h;
            memcpy(&h, s + 2 * j, 2);
            dst[j] = hfq_fp16_to_f32(h);
        }
        break;
    case GT_BF16:
        for (int64_t j = 0; j < n; j++) {
            uint16_t h;
            memcpy(&h, s + 2 * j, 2);
            dst[j] = hfq_bf16_to_f32(h);
        }
        break;
    }
}

void hfq_codec_encode_row(const hfq_codec_job *job, const float *src, void *dst, const float *importance) {
    (void)importance;
    uint8_t *d = dst;
    int64_t n = job->n_per_row;
    switch (job->fmt) {
    case GT_F32:
        memcpy(d, src, (size_t)n * 4);
        break;
    case GT_F16:
        for (int64_t j = 0; j < n; j++) {
            uint16_t h = hfq_f32_to_fp16(src[j]);
            memcpy(d + 2 * j, &h, 2);
        }
        break;
    case GT_BF16:
        for (int64_t j = 0; j < n; j++) {
            uint16_t h = hfq_f32_to_bf16(src[j]);
            memcpy(d + 2 * j, &h, 2);
        }
        break;
    }
}
