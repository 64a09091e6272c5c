/* measure.c - per-tensor error measurement; see measure.h. (The
 * measurement file is measure_file.c, the KL probes kl_probe.c.) */
#include "src/quantize/measure.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "src/quantize/codec.h"

/* Floats decoded at a time while measuring. */
#define SLAB_FLOATS ((int64_t)1 << 22)

/* ---- measuring ---- */

/* The tensors the plan may quantize: the plan calls this for exactly those. */
typedef struct quantizable {
    bool *flag;
} quantizable;

static int mark_quantizable(void *ctx, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_fmt_spec *spec,
                            char *note, size_t note_size, hfq_error *err) {
    (void)t, (void)is_output, (void)note, (void)note_size, (void)err;
    ((quantizable *)ctx)->flag[index] = true;
    *spec = (hfq_fmt_spec){GT_F16, HFQ_SCALE_PER_ROW};
    return 0;
}

/* What one tensor's measurement needs. */
typedef struct tensor_work {
    const gguf_tensor_info *t;
    int n_specs;
    hfq_codec_job *jobs;      /* [n_specs]; n_per_row 0: the spec does not fit */
    double *col_w;            /* [n_col_mat][ne0] E[x_j^2], or NULL */
    int64_t n_col_mat;
    const double *token_count;/* embedding rows: counts, NULL: uniform */
    double row_uniform;       /* > 0: embedding rows weighted (1/ne1 when no counts) */
    double n_tokens;
    const float *importance;  /* [n_mats][ne0] or NULL */
    size_t max_out_row;
    float *amax;              /* [n_mats] each matrix's, then the tensor's (measure_tensor) */
    const char *arch;         /* the model's general.architecture */
} tensor_work;

/* Error of each spec on one row (decoded input x), into e[n_specs]. */
static void row_errors(const tensor_work *w, int64_t row, const float *x, uint8_t *enc, float *scales, float *back,
                       double *e) {
    const int64_t ne0 = w->t->ne[0], mat = row / w->t->ne[1];
    const double *cw = w->col_w ? w->col_w + (w->n_col_mat > 1 ? mat : 0) * ne0 : NULL;
    const float *imp = w->importance ? w->importance + mat * ne0 : NULL;
    double rw = 0.0;
    if (w->row_uniform > 0) rw = w->token_count && w->n_tokens > 0 ? w->token_count[row] / w->n_tokens : w->row_uniform;
    for (int k = 0; k < w->n_specs; k++) {
        const hfq_codec_job *job = &w->jobs[k];
        if (job->n_per_row == 0) {
            e[k] = NAN;
            continue;
        }
        hfq_codec_encode_row(job, x, enc, imp, scales);
        hfq_codec_decode_encoded_row(job, enc, scales, back);
        double weighted = 0.0, plain = 0.0;
        for (int64_t j = 0; j < ne0; j++) {
            double d = (double)x[j] - (double)back[j];
            if (cw) weighted += d * d * cw[j];
            plain += d * d;
        }
        e[k] = weighted + rw * plain;
    }
}

/* The global scales of the specs of w for matrix m (NVFP4 as the driver
 * writes it: one per expert of a stacked tensor, hfq_plan_nvfp4_scales; none
 * where llama.cpp loads none, token_embd: ggml's reference blocks alone). */
static void set_global_scales(tensor_work *w, int64_t m) {
    const float *amax = w->amax;
    const int64_t n_mats = w->t->ne[2] * w->t->ne[3],
                  nvfp4_scales = hfq_plan_nvfp4_scales(w->arch, w->t->name, w->t->ne);
    for (int k = 0; k < w->n_specs; k++) {
        const hfq_fmt_spec sp = {w->jobs[k].fmt, w->jobs[k].scale_group};
        const bool nvfp4 = sp.fmt == GT_NVFP4;
        w->jobs[k].global_scale = nvfp4 && nvfp4_scales == 0
                                      ? 0.0f
                                      : hfq_codec_global_scale(&sp, amax[nvfp4 && nvfp4_scales > 1 ? m : n_mats]);
    }
}

/* Measures one tensor in slabs of rows that never cross a matrix (expert):
 * a pass for the absolute maxima (per matrix) when a spec needs them, then
 * the errors, summed in row order. */
static int measure_tensor(tensor_work *w, double *total, int n_threads, hfq_error *err) {
    const gguf_tensor_info *t = w->t;
    const int64_t ne0 = t->ne[0], per_mat = t->ne[1], n_mats = t->ne[2] * t->ne[3], n_rows = per_mat * n_mats;
    int64_t slab = SLAB_FLOATS / ne0 < 1 ? 1 : SLAB_FLOATS / ne0;
    if (slab > per_mat) slab = per_mat;
    const hfq_codec_job *dec = NULL;
    bool need_amax = false;
    for (int k = 0; k < w->n_specs; k++) {
        if (w->jobs[k].n_per_row == 0) continue;
        dec = dec ? dec : &w->jobs[k];
        const hfq_fmt_spec sp = {w->jobs[k].fmt, w->jobs[k].scale_group};
        need_amax |= hfq_codec_needs_amax(&sp);
    }
    for (int k = 0; k < w->n_specs; k++) total[k] = w->jobs[k].n_per_row ? 0.0 : NAN;
    if (!dec) return 0;
    float *x = malloc((size_t)(slab * ne0) * sizeof *x);
    double *e = malloc((size_t)(slab * w->n_specs) * sizeof *e);
    float *amax = w->amax = calloc((size_t)n_mats + 1, sizeof *amax);
    int rc = 0;
    if (!x || !e || !amax) {
        rc = hfq_fail(err, t->name, "out of memory");
        goto done;
    }
    for (int pass = need_amax ? 0 : 1; pass < 2 && rc == 0; pass++) {
        for (int64_t r0 = 0, nr; r0 < n_rows && rc == 0; r0 += nr) {
            const int64_t left = per_mat - r0 % per_mat;
            nr = left < slab ? left : slab;
            if (pass == 1) set_global_scales(w, r0 / per_mat);
            int64_t bad = INT64_MAX;
            bool oom = false;
            float max = 0.0f;
#pragma omp parallel num_threads(n_threads) reduction(min : bad) reduction(max : max) reduction(|| : oom)
            {
                uint8_t *enc = malloc(w->max_out_row);
                float *scales = malloc((size_t)ne0 * sizeof *scales), *back = malloc((size_t)ne0 * sizeof *back);
                oom = !enc || !scales || !back;
#pragma omp for schedule(static)
                for (int64_t r = 0; r < nr; r++) {
                    float *row = x + r * ne0;
                    hfq_codec_decode_row(dec, (const uint8_t *)t->data + (r0 + r) * dec->in_row_bytes, row);
                    bool finite = true;
                    for (int64_t j = 0; j < ne0; j++) {
                        finite &= isfinite(row[j]) != 0;
                        max = fabsf(row[j]) > max ? fabsf(row[j]) : max;
                    }
                    if (!finite) bad = r < bad ? r : bad;
                    else if (pass == 1 && !oom) row_errors(w, r0 + r, row, enc, scales, back, e + r * w->n_specs);
                }
                free(enc), free(scales), free(back);
            }
            if (oom) rc = hfq_fail(err, t->name, "out of memory");
            else if (bad != INT64_MAX) rc = hfq_fail(err, t->name, "row %" PRId64 " holds NaN or Inf", r0 + bad);
            float *mat = &amax[r0 / per_mat];
            *mat = max > *mat ? max : *mat;
            amax[n_mats] = max > amax[n_mats] ? max : amax[n_mats];
            if (pass == 1)
                for (int64_t r = 0; r < nr; r++)
                    for (int k = 0; k < w->n_specs; k++) total[k] += e[r * w->n_specs + k];
        }
    }
done:
    free(x);
    free(e);
    return rc;
}

/* Sets up w for tensor t: a codec job per spec that fits, the weights. */
static int prepare_tensor(tensor_work *w, const gguf_tensor_info *t, const hfq_calib_stats *st,
                          const hfq_fmt_spec *specs, int n_specs, const hfq_measure_opts *o, hfq_error *err) {
    const int64_t n_mats = t->ne[2] * t->ne[3];
    w->t = t;
    w->n_specs = n_specs;
    w->max_out_row = 1;
    for (int k = 0; k < n_specs; k++) {
        hfq_error ignored;
        int64_t block = hfq_fmt_block_size(specs[k].fmt);
        /* a block scale spans 128 rows, which this row-by-row measure cannot see: not measured */
        if (block < 1 || t->ne[0] % block != 0 || hfq_fmt_spec_problem(&specs[k], t->ne[0]) ||
            specs[k].scale_group == HFQ_SCALE_PER_BLOCK ||
            hfq_codec_begin(&w->jobs[k], t, &specs[k], &ignored) < 0) {
            memset(&w->jobs[k], 0, sizeof w->jobs[k]);
            continue;
        }
        if (w->jobs[k].out_row_bytes > w->max_out_row) w->max_out_row = w->jobs[k].out_row_bytes;
    }
    if (!hfq_codec_can_decode(t->type))
        return hfq_fail(err, t->name, "cannot decode type %s to measure it", hfq_fmt_name(t->type));
    const hfq_calib_entry *e = hfq_calib_stats_find(st, t->name);
    if (e && e->n_in == t->ne[0] && e->in_sum2) {
        if (e->n_mats != 1 && e->n_mats != n_mats)
            return hfq_fail(err, t->name, "statistics for %" PRId64 " matrices, the tensor has %" PRId64, e->n_mats,
                            n_mats);
        if (!(w->col_w = malloc((size_t)(e->n_in * e->n_mats) * sizeof *w->col_w)))
            return hfq_fail(err, t->name, "out of memory");
        w->n_col_mat = e->n_mats;
        for (int64_t m = 0; m < e->n_mats; m++)
            for (int64_t j = 0; j < e->n_in; j++)
                w->col_w[m * e->n_in + j] = e->counts[m] > 0 ? (double)e->in_sum2[m * e->n_in + j] / (double)e->counts[m]
                                                             : 0.0;
    }
    if (strcmp(t->name, "token_embd.weight") == 0) {
        w->row_uniform = 1.0 / (double)t->ne[1];
        if (o->token_count && o->n_vocab == t->ne[1]) w->token_count = o->token_count, w->n_tokens = (double)o->n_tokens;
    } else if (!w->col_w) {
        return hfq_fail(err, t->name, "no activation statistics of width %" PRId64
                        " (does the calibration reach this layer?)", t->ne[0]);
    }
    w->importance = o->importance.get ? o->importance.get(o->importance.ctx, t->name, t->ne[0], n_mats) : NULL;
    return 0;
}

/* Q(W) in full for spec k (global scales from measure_tensor's maxima). */
static int quantized_values(tensor_work *w, int k, float *out, int n_threads, hfq_error *err) {
    const gguf_tensor_info *t = w->t;
    const hfq_codec_job *job = &w->jobs[k];
    const int64_t ne0 = t->ne[0], per_mat = t->ne[1], n_mats = t->ne[2] * t->ne[3];
    bool oom = false;
    for (int64_t m = 0; m < n_mats && !oom; m++) {
        set_global_scales(w, m);
#pragma omp parallel num_threads(n_threads) reduction(|| : oom)
        {
            uint8_t *enc = malloc(w->max_out_row);
            float *scales = malloc((size_t)ne0 * sizeof *scales), *x = malloc((size_t)ne0 * sizeof *x);
            oom = !enc || !scales || !x;
#pragma omp for schedule(static)
            for (int64_t r = m * per_mat; r < (m + 1) * per_mat; r++) {
                if (oom) continue;
                const float *imp = w->importance ? w->importance + m * ne0 : NULL;
                hfq_codec_decode_row(job, (const uint8_t *)t->data + r * job->in_row_bytes, x);
                hfq_codec_encode_row(job, x, enc, imp, scales);
                hfq_codec_decode_encoded_row(job, enc, scales, out + r * ne0);
            }
            free(enc), free(scales), free(x);
        }
    }
    return oom ? hfq_fail(err, t->name, "out of memory") : 0;
}

/* The KL divergence of the tensor's worst spec (largest error) alone. */
static int probe_tensor(tensor_work *w, hfq_measured_tensor *mt, hfq_kl_probe *probe, int n_threads,
                        hfq_error *err) {
    int ref = -1, n_valid = 0;
    for (int k = 0; k < w->n_specs; k++) {
        if (isnan(mt->err[k])) continue;
        n_valid++;
        if (ref < 0 || mt->err[k] > mt->err[ref]) ref = k;
    }
    mt->kl_ref = -1;
    mt->kl = 0.0;
    if (n_valid < 2 || !(mt->err[ref] > 0)) return 0; /* nothing to choose, or nothing to calibrate */
    const gguf_tensor_info *t = w->t;
    float *values = malloc((size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]) * sizeof *values);
    if (!values) return hfq_fail(err, t->name, "out of memory for the KL probe");
    int rc = quantized_values(w, ref, values, n_threads, err);
    if (rc == 0) rc = hfq_kl_probe_run(probe, t->name, values, &mt->kl, err);
    if (rc == 0) mt->kl_ref = ref;
    free(values);
    return rc;
}

double hfq_measured_cost(const hfq_measured_tensor *t, int k) {
    if (isnan(t->err[k])) return NAN;
    if (t->kl_ref >= 0 && t->err[t->kl_ref] > 0) return t->kl / t->err[t->kl_ref] * t->err[k];
    return t->err[k];
}

void hfq_measurements_free(hfq_measurements *m) {
    for (int64_t i = 0; m->tensors && i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        free(m->tensors[i].err);
    }
    free(m->tensors);
    free(m->specs);
    memset(m, 0, sizeof *m);
}

const hfq_measured_tensor *hfq_measurements_find(const hfq_measurements *m, const char *name) {
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

int hfq_measure(const gguf_file *f, const hfq_calib_stats *st, const hfq_fmt_spec *specs, int n_specs,
                const hfq_measure_opts *o, hfq_measurements *out, hfq_error *err) {
    memset(out, 0, sizeof *out);
    const int64_t n = gguf_n_tensors(f);
    const int n_threads = o->n_threads > 0 ? o->n_threads : omp_get_max_threads();
    quantizable q = {calloc((size_t)(n > 0 ? n : 1), sizeof(bool))};
    hfq_codec_job *jobs = calloc((size_t)(n_specs > 0 ? n_specs : 1), sizeof *jobs);
    out->specs = malloc((size_t)(n_specs > 0 ? n_specs : 1) * sizeof *out->specs);
    out->tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *out->tensors);
    int rc = 0;
    if (!q.flag || !jobs || !out->specs || !out->tensors) {
        rc = hfq_fail(err, gguf_path(f), "out of memory");
        goto done;
    }
    memcpy(out->specs, specs, (size_t)n_specs * sizeof *specs);
    out->n_specs = n_specs;
    hfq_plan_opts po = hfq_plan_opts_default(HFQ_PRESET_F16);
    po.choose = mark_quantizable;
    po.choose_ctx = &q;
    hfq_plan plan;
    if ((rc = hfq_quantize_plan(f, &po, &plan, err)) < 0) goto done;
    char arch[sizeof plan.arch];
    memcpy(arch, plan.arch, sizeof arch);
    hfq_plan_free(&plan);
    int64_t n_measure = 0;
    for (int64_t i = 0; i < n; i++) n_measure += q.flag[i];
    for (int64_t i = 0; i < n && rc == 0; i++) {
        if (!q.flag[i]) continue;
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        hfq_measured_tensor *mt = &out->tensors[out->n_tensors];
        if (o->progress) o->progress(o->progress_ctx, out->n_tensors, n_measure, t->name);
        size_t len = strlen(t->name) + 1;
        mt->name = malloc(len);
        mt->err = malloc((size_t)(n_specs > 0 ? n_specs : 1) * sizeof *mt->err);
        out->n_tensors++;
        if (!mt->name || !mt->err) {
            rc = hfq_fail(err, gguf_path(f), "out of memory");
            break;
        }
        memcpy(mt->name, t->name, len);
        memcpy(mt->ne, t->ne, sizeof mt->ne);
        memset(jobs, 0, (size_t)n_specs * sizeof *jobs);
        tensor_work wk = {.jobs = jobs, .arch = arch};
        rc = prepare_tensor(&wk, t, st, specs, n_specs, o, err);
        mt->kl_ref = -1;
        if (rc == 0) rc = measure_tensor(&wk, mt->err, n_threads, err);
        if (rc == 0 && o->probe) rc = probe_tensor(&wk, mt, o->probe, n_threads, err);
        free(wk.col_w);
        free(wk.amax);
        if (rc < 0) hfq_error_prefix(err, gguf_path(f));
    }
done:
    free(q.flag);
    free(jobs);
    if (rc < 0) hfq_measurements_free(out);
    return rc;
}
