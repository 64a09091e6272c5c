/* codec.c - see src/quantize/codec.h. */
#include "src/quantize/codec.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/plan.h"
#include "quant/qtype.h"

/* The quant/qtype.h row of a plan format, or NULL when this build has none. */
static const hfq_qtype_traits *traits_of(uint32_t fmt) {
    int t = fmt >= GT_COUNT ? hfq_qtype_from_name(hfq_fmt_name(fmt)) : hfq_qtype_from_ggml(fmt);
    const hfq_qtype_traits *tr = t < 0 ? NULL : hfq_qtype_get((hfq_qtype)t);
    return tr && !tr->is_activation_only ? tr : NULL;
}

/* NVFP4 input would need its global scale tensor too: not decoded. */
bool hfq_codec_can_decode(uint32_t type) {
    const hfq_qtype_traits *tr = traits_of(type);
    return tr && tr->dequantize && type != GT_NVFP4;
}

/* NVFP4, INT8 and FP8 are encoded here (scales beside the codes), the rest
 * by the table's quantizer. */
bool hfq_codec_can_encode(uint32_t fmt) {
    const hfq_qtype_traits *tr = traits_of(fmt);
    return tr && (tr->quantize || fmt == GT_NVFP4 || hfq_codec_qext_encoding(fmt));
}

const char *hfq_codec_qext_encoding(uint32_t fmt) {
    switch (fmt) {
    case HFQ_FMT_INT8: case HFQ_FMT_FP8_E4M3: case HFQ_FMT_FP8_E5M2: return hfq_fmt_name(fmt);
    default: return NULL;
    }
}

uint32_t hfq_codec_storage_type(uint32_t fmt) { return hfq_codec_qext_encoding(fmt) ? GT_I8 : fmt; }

hfq_companion hfq_codec_companion(const hfq_fmt_spec *spec) {
    if (spec->fmt == GT_NVFP4) return HFQ_COMPANION_TENSOR_SCALE;
    if (!hfq_codec_qext_encoding(spec->fmt)) return HFQ_COMPANION_NONE;
    if (spec->scale_group == HFQ_SCALE_PER_BLOCK) return HFQ_COMPANION_BLOCK_SCALES;
    return spec->scale_group == HFQ_SCALE_PER_TENSOR ? HFQ_COMPANION_TENSOR_SCALE : HFQ_COMPANION_ROW_SCALES;
}

int hfq_codec_scale_name(const char *weight_name, char *out, size_t n) {
    size_t len = strlen(weight_name);
    if (len >= 7 && strcmp(weight_name + len - 7, ".weight") == 0) len -= 7;
    int w = snprintf(out, n, "%.*s.scale", (int)len, weight_name);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

bool hfq_codec_needs_amax(const hfq_fmt_spec *spec) {
    return hfq_codec_companion(spec) == HFQ_COMPANION_TENSOR_SCALE;
}

static hfq_fp8_format fp8_of(uint32_t fmt) { return fmt == HFQ_FMT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3; }

float hfq_codec_global_scale(const hfq_fmt_spec *spec, float amax) {
    if (!hfq_codec_needs_amax(spec)) return 0.0f;
    /* NVIDIA's NVFP4 global scale, as hfq_nvfp4_global_scale computes it;
     * the I8 formats' per-tensor scale is their per-row reference scale taken
     * over the whole tensor */
    if (spec->fmt == GT_NVFP4) return amax / HFQ_NVFP4_GLOBAL_DIV;
    if (spec->fmt == HFQ_FMT_INT8) return amax / (float)HFQ_INT8_QMAX;
    return amax / hfq_fp8_max(fp8_of(spec->fmt));
}

int hfq_codec_begin(hfq_codec_job *job, const gguf_tensor_info *t, const hfq_fmt_spec *spec, hfq_error *err) {
    memset(job, 0, sizeof *job);
    const uint32_t fmt = spec->fmt;
    if (!hfq_codec_can_decode(t->type))
        return hfq_fail(err, t->name, "cannot decode type %s", hfq_fmt_name(t->type));
    if (!hfq_codec_can_encode(fmt)) return hfq_fail(err, t->name, "cannot encode %s", hfq_fmt_name(fmt));
    const char *why = hfq_fmt_spec_problem(spec, t->ne[0]);
    if (why) return hfq_fail(err, t->name, "%s", why);
    int64_t in_row = ggml_row_size(t->type, t->ne[0]);
    int64_t out_row = hfq_codec_qext_encoding(fmt) ? t->ne[0] : ggml_row_size(fmt, t->ne[0]);
    if (in_row < 0 || out_row < 0)
        return hfq_fail(err, t->name, "row of %" PRId64 " does not fit %s", t->ne[0], hfq_fmt_name(fmt));
    int64_t n_row_scales = 0;
    if (hfq_codec_companion(spec) == HFQ_COMPANION_ROW_SCALES)
        n_row_scales = spec->scale_group > 0 ? t->ne[0] / spec->scale_group : 1;
    if (hfq_codec_companion(spec) == HFQ_COMPANION_BLOCK_SCALES)
        n_row_scales = (t->ne[0] + HFQ_SCALE_BLOCK - 1) / HFQ_SCALE_BLOCK;
    *job = (hfq_codec_job){t->type, fmt, spec->scale_group, t->ne[0], n_row_scales, (size_t)in_row,
                           (size_t)out_row, 0.0f, false};
    return 0;
}

void hfq_codec_decode_row(const hfq_codec_job *job, const void *src, float *dst) {
    traits_of(job->in_type)->dequantize(src, dst, job->n_per_row);
}

const char *hfq_codec_importance_unused(const hfq_fmt_spec *spec) {
    const hfq_qtype_traits *tr = traits_of(spec->fmt);
    if (spec->fmt == GT_NVFP4) return NULL;
    if (hfq_codec_qext_encoding(spec->fmt)) {
        if (spec->scale_group == HFQ_SCALE_PER_BLOCK) return "block scales are their blocks' amax, as checkpoints take";
        /* INT8 per tensor: the scale is searched (tensor_scale.h); for FP8 the
         * same search measured no gain (docs/calibration.md) */
        if (spec->scale_group == HFQ_SCALE_PER_TENSOR && spec->fmt != HFQ_FMT_INT8)
            return "its one scale per tensor stays amax/max (a searched scale measured no gain)";
        return NULL;
    }
    if (!hfq_fmt_is_quantized(spec->fmt)) return "a plain float format has no rounding to weight";
    if (!tr) return "this build cannot encode it";
    if (spec->fmt == GT_Q8_0)
        return "llama.cpp's Q8_0 has no importance-weighted rounding (ours serves the Q8_0 preset only)";
    return tr->uses_importance ? NULL : "its quantizer has no importance-weighted rounding";
}

/* Group k of a block-scaled row: [k * 128, min((k + 1) * 128, n)). */
static int64_t group_len(const hfq_codec_job *job, int64_t k) {
    const int64_t left = job->n_per_row - k * HFQ_SCALE_BLOCK;
    return left < HFQ_SCALE_BLOCK ? left : HFQ_SCALE_BLOCK;
}

void hfq_codec_row_group_amax(const hfq_codec_job *job, const float *row, float *amax) {
    for (int64_t k = 0; k < job->n_row_scales; k++) {
        float m = 0.0f;
        for (int64_t j = 0; j < group_len(job, k); j++) m = fmaxf(m, fabsf(row[k * HFQ_SCALE_BLOCK + j]));
        amax[k] = m;
    }
}

void hfq_codec_block_scales(const hfq_codec_job *job, int64_t ne1, int64_t n_mats, float *rows, float *blocks) {
    const int64_t nb0 = job->n_row_scales, nb1 = (ne1 + HFQ_SCALE_BLOCK - 1) / HFQ_SCALE_BLOCK;
    const float max = hfq_fp8_max(fp8_of(job->fmt));
    for (int64_t i = 0; i < n_mats * nb1 * nb0; i++) blocks[i] = 0.0f;
    for (int64_t r = 0; r < n_mats * ne1; r++) {
        float *b = blocks + (r / ne1 * nb1 + r % ne1 / HFQ_SCALE_BLOCK) * nb0;
        for (int64_t k = 0; k < nb0; k++) b[k] = fmaxf(b[k], rows[r * nb0 + k]);
    }
    for (int64_t i = 0; i < n_mats * nb1 * nb0; i++) blocks[i] /= max;
    for (int64_t r = 0; r < n_mats * ne1; r++)
        memcpy(rows + r * nb0, blocks + (r / ne1 * nb1 + r % ne1 / HFQ_SCALE_BLOCK) * nb0, (size_t)nb0 * sizeof *rows);
}

void hfq_codec_encode_row(const hfq_codec_job *job, const float *src, void *dst, const float *importance,
                          float *row_scales) {
    const int64_t n = job->n_per_row;
    const bool per_tensor = job->scale_group == HFQ_SCALE_PER_TENSOR;
    if (importance && !(job->q8_0_search && job->fmt == GT_Q8_0) &&
        hfq_codec_importance_unused(&(hfq_fmt_spec){job->fmt, job->scale_group}))
        importance = NULL;
    switch (job->fmt) {
    case GT_NVFP4: hfq_quantize_nvfp4(src, dst, 1, n, importance, job->global_scale); break;
    case HFQ_FMT_INT8:
        if (per_tensor) hfq_quantize_int8_static(src, dst, 1, n, job->global_scale);
        else hfq_quantize_int8(src, dst, 1, n, importance, row_scales, job->scale_group);
        break;
    case HFQ_FMT_FP8_E4M3: case HFQ_FMT_FP8_E5M2:
        if (job->scale_group == HFQ_SCALE_PER_BLOCK)
            for (int64_t k = 0; k < job->n_row_scales; k++)
                hfq_quantize_fp8_static(fp8_of(job->fmt), src + k * HFQ_SCALE_BLOCK,
                                        (uint8_t *)dst + k * HFQ_SCALE_BLOCK, 1, group_len(job, k), row_scales[k]);
        else if (per_tensor) hfq_quantize_fp8_static(fp8_of(job->fmt), src, dst, 1, n, job->global_scale);
        else hfq_quantize_fp8(fp8_of(job->fmt), src, dst, 1, n, importance, row_scales);
        break;
    default: traits_of(job->fmt)->quantize(src, dst, 1, n, importance);
    }
}

void hfq_codec_decode_encoded_row(const hfq_codec_job *job, const void *enc, const float *row_scales, float *dst) {
    const int64_t n = job->n_per_row;
    const float *scales = job->n_row_scales > 0 ? row_scales : &job->global_scale;
    switch (job->fmt) {
    case HFQ_FMT_INT8: hfq_dequantize_row_int8(enc, dst, n, scales, job->scale_group > 0 ? job->scale_group : 0); break;
    case HFQ_FMT_FP8_E4M3: case HFQ_FMT_FP8_E5M2:
        if (job->scale_group != HFQ_SCALE_PER_BLOCK) hfq_dequantize_row_fp8(fp8_of(job->fmt), enc, dst, n, scales[0]);
        for (int64_t k = 0; job->scale_group == HFQ_SCALE_PER_BLOCK && k < job->n_row_scales; k++)
            hfq_dequantize_row_fp8(fp8_of(job->fmt), (const uint8_t *)enc + k * HFQ_SCALE_BLOCK,
                                   dst + k * HFQ_SCALE_BLOCK, group_len(job, k), scales[k]);
        break;
    default:
        traits_of(job->fmt)->dequantize(enc, dst, n);
        /* NVFP4 with its global scale: W = g * ggml-decode(block) */
        if (job->fmt == GT_NVFP4 && job->global_scale > 0.0f)
            for (int64_t j = 0; j < n; j++) dst[j] *= job->global_scale;
    }
}

int hfq_codec_roundtrip(const hfq_fmt_spec *spec, const float *src, float *dst, int64_t nrows, int64_t n,
                        const float *importance, hfq_error *err) {
    const gguf_tensor_info t = {.name = "round trip", .type = GT_F32, .n_dims = 2, .ne = {n, nrows, 1, 1}};
    hfq_codec_job job;
    if (hfq_codec_begin(&job, &t, spec, err) < 0) return -1;
    if (hfq_codec_needs_amax(spec)) {
        float amax = 0.0f;
        for (int64_t i = 0; i < nrows * n; i++) amax = fmaxf(amax, fabsf(src[i]));
        job.global_scale = hfq_codec_global_scale(spec, amax);
    }
    const int64_t n_scales = job.n_row_scales > 0 ? job.n_row_scales : 1;
    const bool block = hfq_codec_companion(spec) == HFQ_COMPANION_BLOCK_SCALES;
    uint8_t *buf = malloc((size_t)nrows * job.out_row_bytes + 1);
    float *scales = malloc((size_t)(nrows * n_scales) * sizeof *scales);
    float *blocks = block ? malloc((size_t)(hfq_scale_count(HFQ_SCALE_PER_BLOCK, n, nrows)) * sizeof *blocks) : NULL;
    if (!buf || !scales || (block && !blocks)) {
        free(buf);
        free(scales);
        free(blocks);
        return hfq_fail(err, "round trip", "out of memory");
    }
    if (block) { /* a block's scale spans 128 rows: all maxima first */
        for (int64_t r = 0; r < nrows; r++) hfq_codec_row_group_amax(&job, src + r * n, scales + r * n_scales);
        hfq_codec_block_scales(&job, nrows, 1, scales, blocks);
        free(blocks);
    }
    /* rows are independent: threads only for enough work to pay for them */
#pragma omp parallel for schedule(static) if (nrows * n >= ((int64_t)1 << 16))
    for (int64_t r = 0; r < nrows; r++) {
        uint8_t *enc = buf + (size_t)r * job.out_row_bytes;
        hfq_codec_encode_row(&job, src + r * n, enc, importance, scales + r * n_scales);
        hfq_codec_decode_encoded_row(&job, enc, scales + r * n_scales, dst + r * n);
    }
    free(buf);
    free(scales);
    return 0;
}

int hfq_codec_act_roundtrip(uint32_t fmt, float *x, int64_t nrows, int64_t n, float static_scale, bool nvfp4_search,
                            hfq_error *err) {
    const hfq_qtype_traits *w = traits_of(fmt);
    if (!w) return hfq_fail(err, hfq_fmt_name(fmt), "not available in this build");
    const hfq_qtype_traits *a = hfq_qtype_get(w->vec_dot_type);
    const bool qext = hfq_codec_qext_encoding(fmt) != NULL, w4a4 = fmt == GT_NVFP4 && static_scale > 0.0f;
    if (!qext && !w4a4 && (w->vec_dot_type == HFQ_QT_F32 || !a || !a->quantize_row || !a->dequantize)) return 0;
    const int64_t row_bytes = qext ? n : w4a4 ? ggml_row_size(GT_NVFP4, n) : hfq_qtype_row_size(a->type, n);
    if (row_bytes < 0) return hfq_fail(err, hfq_fmt_name(fmt), "activation rows of %" PRId64 " do not fit", n);
    uint8_t *buf = malloc((size_t)(row_bytes > 0 ? row_bytes : 1));
    if (!buf) return hfq_fail(err, hfq_fmt_name(fmt), "out of memory");
    for (int64_t r = 0; r < nrows; r++) {
        float *row = x + r * n, scale = static_scale;
        if (fmt == HFQ_FMT_INT8) {
            if (static_scale > 0.0f) hfq_quantize_int8_static(row, buf, 1, n, static_scale);
            else hfq_quantize_int8(row, buf, 1, n, NULL, &scale, 0);
            hfq_dequantize_row_int8(buf, row, n, &scale, 0);
        } else if (qext) {
            if (static_scale > 0.0f) hfq_quantize_fp8_static(fp8_of(fmt), row, buf, 1, n, static_scale);
            else hfq_quantize_fp8(fp8_of(fmt), row, buf, 1, n, NULL, &scale);
            hfq_dequantize_row_fp8(fp8_of(fmt), buf, row, n, scale);
        } else if (w4a4) {
            if (nvfp4_search) hfq_quantize_nvfp4_act_search(row, buf, n, static_scale);
            else hfq_quantize_nvfp4(row, buf, 1, n, NULL, static_scale);
            hfq_dequantize_row_nvfp4(buf, row, n);
            for (int64_t j = 0; j < n; j++) row[j] *= static_scale;
        } else {
            a->quantize_row(row, buf, n);
            a->dequantize(buf, row, n);
        }
    }
    free(buf);
    return 0;
}
