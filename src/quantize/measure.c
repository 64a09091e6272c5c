/* measure.c - activation statistics and per-tensor error measurement; see
 * measure.h. (The measurement file is measure_file.c.) */
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

/* ---- activation statistics ---- */

typedef struct stat_entry {
    char *name;
    int64_t n_in, n_mat;
    double *sum2;           /* [n_mat][n_in] */
    double *count;          /* [n_mat] */
    double *moments;        /* [n_mat][n_in], filled by finish() */
} stat_entry;

struct hfq_act_stats {
    int64_t n, cap;
    stat_entry *e;
    int64_t last;           /* entry of the previous observer call: the next is usually the one after */
    int64_t n_vocab;
    double *token_count;    /* [n_vocab], NULL when not counted */
    int64_t n_tokens;
    const char *failed;     /* a problem met inside the observer, NULL while fine */
};

void hfq_act_stats_free(hfq_act_stats *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n; i++) {
        free(s->e[i].name);
        free(s->e[i].sum2);
        free(s->e[i].count);
        free(s->e[i].moments);
    }
    free(s->e);
    free(s->token_count);
    free(s);
}

static stat_entry *find_entry(hfq_act_stats *s, const char *name) {
    for (int64_t k = 0; k < s->n; k++) {
        int64_t i = (s->last + k) % s->n;
        if (strcmp(s->e[i].name, name) == 0) return &s->e[(s->last = i)];
    }
    return NULL;
}

static stat_entry *add_entry(hfq_act_stats *s, const char *name, int64_t n_in, int64_t n_mat) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        stat_entry *e = realloc(s->e, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        s->e = e;
        s->cap = cap;
    }
    stat_entry *e = &s->e[s->n];
    size_t len = strlen(name) + 1;
    *e = (stat_entry){malloc(len), n_in, n_mat, calloc((size_t)(n_in * n_mat), sizeof(double)),
                      calloc((size_t)n_mat, sizeof(double)), NULL};
    if (!e->name || !e->sum2 || !e->count) {
        free(e->name), free(e->sum2), free(e->count);
        return NULL;
    }
    memcpy(e->name, name, len);
    return &s->e[s->n++];
}

static void observe(void *user, const char *weight_name, const float *x, int64_t n_tokens, int64_t n_in) {
    hfq_act_stats *s = user;
    if (s->failed) return;
    stat_entry *e = find_entry(s, weight_name);
    if (!e && !(e = add_entry(s, weight_name, n_in, 1))) {
        s->failed = "out of memory";
        return;
    }
    if (e->n_in != n_in) {
        s->failed = "a weight's input width changed between calls";
        return;
    }
    /* in token order, so the sums do not depend on threads */
    for (int64_t t = 0; t < n_tokens; t++)
        for (int64_t j = 0; j < n_in; j++) e->sum2[j] += (double)x[t * n_in + j] * (double)x[t * n_in + j];
    e->count[0] += (double)n_tokens;
}

/* E[x^2] from the sums; entries that saw nothing keep NULL moments. */
static int finish(hfq_act_stats *s) {
    for (int64_t i = 0; i < s->n; i++) {
        stat_entry *e = &s->e[i];
        if (!(e->moments = malloc((size_t)(e->n_in * e->n_mat) * sizeof(double)))) return -1;
        for (int64_t m = 0; m < e->n_mat; m++)
            for (int64_t j = 0; j < e->n_in; j++)
                e->moments[m * e->n_in + j] = e->count[m] > 0 ? e->sum2[m * e->n_in + j] / e->count[m] : 0.0;
    }
    return 0;
}

int hfq_measure_chunks_side_by_side(const hfq_model *m, int n_threads, int64_t n_chunks) {
    int64_t n = hfq_model_is_tiny(m) ? n_threads : 1;
    if (n > n_chunks) n = n_chunks;
    return n < 1 ? 1 : (int)n;
}

/* Adds one chunk's sums (src) to dst and clears src; entries by name. */
static int merge_stats(hfq_act_stats *dst, hfq_act_stats *src) {
    for (int64_t i = 0; i < src->n; i++) {
        stat_entry *e = &src->e[i], *d = find_entry(dst, e->name);
        if (!d && !(d = add_entry(dst, e->name, e->n_in, e->n_mat))) return -1;
        if (d->n_in != e->n_in) return -1;
        for (int64_t j = 0; j < e->n_in; j++) d->sum2[j] += e->sum2[j], e->sum2[j] = 0.0;
        d->count[0] += e->count[0];
        e->count[0] = 0.0;
    }
    return 0;
}

/* One chunk: its own context's forward pass, observed into acc. */
typedef struct chunk_worker {
    hfq_context *ctx;
    hfq_act_stats acc;
    float *logits;          /* every position's, so that the output layer's input is observed too */
    int rc;
    hfq_error err;
} chunk_worker;

hfq_act_stats *hfq_act_stats_collect(const hfq_model *m, const int32_t *tokens, int64_t n_tokens,
                                     const hfq_calib_params *p, hfq_error *err) {
    const hfq_hparams *hp = hfq_model_hparams(m);
    const char *path = hfq_model_path(m);
    int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 512 ? hp->n_ctx_train : 512);
    if (n_ctx < 2 || n_tokens < n_ctx) {
        hfq_fail(err, path, "calibration needs at least one chunk of %" PRId64 " tokens, the text has %" PRId64,
                 n_ctx, n_tokens);
        return NULL;
    }
    int64_t n_chunks = n_tokens / n_ctx;
    if (p->n_chunks > 0 && p->n_chunks < n_chunks) n_chunks = p->n_chunks;
    const int n_threads = p->n_threads > 0 ? p->n_threads : omp_get_max_threads();
    const int n_par = hfq_measure_chunks_side_by_side(m, n_threads, n_chunks);
    hfq_act_stats *s = calloc(1, sizeof *s);
    chunk_worker *wk = calloc((size_t)n_par, sizeof *wk);
    int32_t *chunks = malloc((size_t)(n_ctx * n_chunks) * sizeof *chunks);
    int rc = s && wk && chunks && (s->token_count = calloc((size_t)hp->n_vocab, sizeof(double))) ? 0 : -1;
    for (int w = 0; rc == 0 && w < n_par; w++) {
        hfq_context_params cp = {.n_ctx = n_ctx, .n_batch = n_ctx, .n_threads = n_threads / n_par};
        if (!(wk[w].logits = malloc((size_t)(n_ctx * hp->n_vocab) * sizeof(float)))) rc = -1;
        else if (!(wk[w].ctx = hfq_context_new(m, &cp, err))) rc = -2;
        else hfq_context_set_observer(wk[w].ctx, observe, &wk[w].acc);
    }
    if (rc == -1) hfq_fail(err, path, "out of memory for calibration");
    if (rc == 0) {
        s->n_vocab = hp->n_vocab;
        memcpy(chunks, tokens, (size_t)(n_ctx * n_chunks) * sizeof *chunks);
        for (int64_t k = 0; p->add_bos && k < n_chunks; k++) chunks[k * n_ctx] = p->bos_id;
    }
    /* n_par chunks side by side, each summed on its own, then added to the
     * totals in chunk order: the same sums whatever the threads */
    for (int64_t k0 = 0; rc == 0 && k0 < n_chunks; k0 += n_par) {
        const int n_now = (int)(n_chunks - k0 < n_par ? n_chunks - k0 : n_par);
#pragma omp parallel for num_threads(n_now) schedule(static, 1)
        for (int w = 0; w < n_now; w++) {
            hfq_context_reset(wk[w].ctx);
            wk[w].rc = hfq_forward(wk[w].ctx, chunks + (k0 + w) * n_ctx, n_ctx, n_ctx, wk[w].logits, &wk[w].err);
        }
        for (int w = 0; w < n_now && rc == 0; w++) {
            const int32_t *c = chunks + (k0 + w) * n_ctx;
            if (wk[w].rc < 0) rc = -1, *err = wk[w].err;
            else if (wk[w].acc.failed || merge_stats(s, &wk[w].acc) < 0)
                rc = hfq_fail(err, path, "calibration: %s", wk[w].acc.failed ? wk[w].acc.failed : "out of memory");
            for (int64_t t = 0; rc == 0 && t < n_ctx; t++) s->token_count[c[t]] += 1.0;
            s->n_tokens += n_ctx;
        }
    }
    if (rc == 0 && finish(s) < 0) rc = hfq_fail(err, path, "out of memory for calibration");
    for (int w = 0; wk && w < n_par; w++) {
        hfq_context_free(wk[w].ctx);
        free(wk[w].logits);
        for (int64_t i = 0; i < wk[w].acc.n; i++)
            free(wk[w].acc.e[i].name), free(wk[w].acc.e[i].sum2), free(wk[w].acc.e[i].count);
        free(wk[w].acc.e);
    }
    free(wk);
    free(chunks);
    if (rc < 0) {
        hfq_act_stats_free(s);
        return NULL;
    }
    return s;
}

/* Checks one F32 tensor of an imatrix file: shape [ne0, ne1], finite, >= 0. */
static int check_f32(const gguf_file *f, const gguf_tensor_info *t, int64_t ne0, hfq_error *err) {
    if (t->type != GT_F32 || t->n_dims > 2 || (ne0 > 0 && t->ne[0] != ne0))
        return hfq_fail(err, gguf_path(f), "tensor %s: expected F32 [%" PRId64 ", n_mat]", t->name, ne0 > 0 ? ne0 : 1);
    const float *v = t->data;
    for (int64_t i = 0; i < t->ne[0] * t->ne[1]; i++)
        if (!isfinite(v[i]) || v[i] < 0) return hfq_fail(err, gguf_path(f), "tensor %s: value %g at %" PRId64, t->name, v[i], i);
    return 0;
}

hfq_act_stats *hfq_act_stats_from_imatrix(const gguf_file *f, hfq_error *err) {
    hfq_act_stats *s = calloc(1, sizeof *s);
    if (!s) {
        hfq_fail(err, gguf_path(f), "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        size_t len = strlen(t->name);
        if (len <= 8 || strcmp(t->name + len - 8, ".in_sum2") != 0) continue;
        char name[GGUF_MAX_NAME + 16];
        snprintf(name, sizeof name, "%.*s.counts", (int)(len - 8), t->name);
        const gguf_tensor_info *ct = gguf_find_tensor(f, name);
        if (!ct) {
            hfq_fail(err, gguf_path(f), "tensor %s has no partner %s", t->name, name);
            goto fail;
        }
        if (check_f32(f, t, 0, err) < 0 || check_f32(f, ct, 1, err) < 0) goto fail;
        if (ct->ne[1] != t->ne[1]) {
            hfq_fail(err, gguf_path(f), "tensor %s: %" PRId64 " matrices, %s has %" PRId64, t->name, t->ne[1], name, ct->ne[1]);
            goto fail;
        }
        name[len - 8] = '\0';
        stat_entry *e = find_entry(s, name) ? NULL : add_entry(s, name, t->ne[0], t->ne[1]);
        if (!e) {
            hfq_fail(err, gguf_path(f), "tensor %s: duplicate or out of memory", t->name);
            goto fail;
        }
        const float *sum2 = t->data, *count = ct->data;
        for (int64_t k = 0; k < t->ne[0] * t->ne[1]; k++) e->sum2[k] = sum2[k];
        for (int64_t m = 0; m < t->ne[1]; m++) e->count[m] = count[m];
    }
    if (finish(s) < 0) {
        hfq_fail(err, gguf_path(f), "out of memory");
        goto fail;
    }
    return s;
fail:
    hfq_act_stats_free(s);
    return NULL;
}

int64_t hfq_act_stats_n_entries(const hfq_act_stats *s) { return s->n; }
int64_t hfq_act_stats_n_tokens(const hfq_act_stats *s) { return s->n_tokens; }

const double *hfq_act_stats_moments(const hfq_act_stats *s, const char *name, int64_t n_in, int64_t *n_mat_out) {
    for (int64_t i = 0; i < s->n; i++) {
        const stat_entry *e = &s->e[i];
        if (strcmp(e->name, name) != 0) continue;
        if (e->n_in != n_in || !e->moments) return NULL;
        *n_mat_out = e->n_mat;
        return e->moments;
    }
    return NULL;
}

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
    const double *col_w;      /* [n_col_mat][ne0] E[x_j^2], or NULL */
    int64_t n_col_mat;
    const double *token_count;/* embedding rows: counts, NULL: uniform */
    double row_uniform;       /* > 0: embedding rows weighted (1/ne1 when no counts) */
    double n_tokens;
    const float *importance;  /* [n_mats][ne0] or NULL */
    size_t max_out_row;
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

/* Measures one tensor in slabs of rows: a pass for the absolute maximum when
 * a spec needs it, then the errors, summed in row order. */
static int measure_tensor(tensor_work *w, double *total, int n_threads, hfq_error *err) {
    const gguf_tensor_info *t = w->t;
    const int64_t ne0 = t->ne[0], n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    int64_t slab = SLAB_FLOATS / ne0 < 1 ? 1 : SLAB_FLOATS / ne0;
    if (slab > n_rows) slab = n_rows;
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
    int rc = 0;
    if (!x || !e) {
        rc = hfq_fail(err, t->name, "out of memory");
        goto done;
    }
    float amax = 0.0f;
    for (int pass = need_amax ? 0 : 1; pass < 2 && rc == 0; pass++) {
        for (int64_t r0 = 0; r0 < n_rows && rc == 0; r0 += slab) {
            const int64_t nr = n_rows - r0 < slab ? n_rows - r0 : slab;
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
            amax = max > amax ? max : amax;
            if (pass == 1)
                for (int64_t r = 0; r < nr; r++)
                    for (int k = 0; k < w->n_specs; k++) total[k] += e[r * w->n_specs + k];
        }
        for (int k = 0; k < w->n_specs; k++) {
            const hfq_fmt_spec sp = {w->jobs[k].fmt, w->jobs[k].scale_group};
            w->jobs[k].global_scale = hfq_codec_global_scale(&sp, amax);
        }
    }
done:
    free(x);
    free(e);
    return rc;
}

/* Sets up w for tensor t: a codec job per spec that fits, the weights. */
static int prepare_tensor(tensor_work *w, const gguf_tensor_info *t, const hfq_act_stats *st,
                          const hfq_fmt_spec *specs, int n_specs, const hfq_measure_opts *o, hfq_error *err) {
    const int64_t n_mats = t->ne[2] * t->ne[3];
    w->t = t;
    w->n_specs = n_specs;
    w->max_out_row = 1;
    for (int k = 0; k < n_specs; k++) {
        hfq_error ignored;
        int64_t block = hfq_fmt_block_size(specs[k].fmt);
        if (block < 1 || t->ne[0] % block != 0 || hfq_fmt_spec_problem(&specs[k], t->ne[0]) ||
            hfq_codec_begin(&w->jobs[k], t, &specs[k], &ignored) < 0) {
            memset(&w->jobs[k], 0, sizeof w->jobs[k]);
            continue;
        }
        if (w->jobs[k].out_row_bytes > w->max_out_row) w->max_out_row = w->jobs[k].out_row_bytes;
    }
    if (!hfq_codec_can_decode(t->type))
        return hfq_fail(err, t->name, "cannot decode type %s to measure it", hfq_fmt_name(t->type));
    w->col_w = hfq_act_stats_moments(st, t->name, t->ne[0], &w->n_col_mat);
    if (w->col_w && w->n_col_mat != 1 && w->n_col_mat != n_mats)
        return hfq_fail(err, t->name, "statistics for %" PRId64 " matrices, the tensor has %" PRId64, w->n_col_mat,
                        n_mats);
    if (strcmp(t->name, "token_embd.weight") == 0) {
        w->row_uniform = 1.0 / (double)t->ne[1];
        if (st->token_count && st->n_vocab == t->ne[1]) w->token_count = st->token_count, w->n_tokens = (double)st->n_tokens;
    } else if (!w->col_w) {
        return hfq_fail(err, t->name, "no activation statistics of width %" PRId64
                        " (does the calibration reach this layer?)", t->ne[0]);
    }
    w->importance = o->importance.get ? o->importance.get(o->importance.ctx, t->name, t->ne[0], n_mats) : NULL;
    return 0;
}

/* Q(W) in full for spec k (the jobs' global scales set by measure_tensor). */
static int quantized_values(const tensor_work *w, int k, float *out, int n_threads, hfq_error *err) {
    const gguf_tensor_info *t = w->t;
    const hfq_codec_job *job = &w->jobs[k];
    const int64_t ne0 = t->ne[0], n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    bool oom = false;
#pragma omp parallel num_threads(n_threads) reduction(|| : oom)
    {
        uint8_t *enc = malloc(w->max_out_row);
        float *scales = malloc((size_t)ne0 * sizeof *scales), *x = malloc((size_t)ne0 * sizeof *x);
        oom = !enc || !scales || !x;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n_rows; r++) {
            if (oom) continue;
            const float *imp = w->importance ? w->importance + r / t->ne[1] * ne0 : NULL;
            hfq_codec_decode_row(job, (const uint8_t *)t->data + r * job->in_row_bytes, x);
            hfq_codec_encode_row(job, x, enc, imp, scales);
            hfq_codec_decode_encoded_row(job, enc, scales, out + r * ne0);
        }
        free(enc), free(scales), free(x);
    }
    return oom ? hfq_fail(err, t->name, "out of memory") : 0;
}

/* The KL divergence of the tensor's worst spec (largest error) alone. */
static int probe_tensor(const tensor_work *w, hfq_measured_tensor *mt, hfq_kl_probe *probe, int n_threads,
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

int hfq_measure(const gguf_file *f, const hfq_act_stats *st, const hfq_fmt_spec *specs, int n_specs,
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
        tensor_work wk = {.jobs = jobs};
        rc = prepare_tensor(&wk, t, st, specs, n_specs, o, err);
        mt->kl_ref = -1;
        if (rc == 0) rc = measure_tensor(&wk, mt->err, n_threads, err);
        if (rc == 0 && o->probe) rc = probe_tensor(&wk, mt, o->probe, n_threads, err);
        if (rc < 0) hfq_error_prefix(err, gguf_path(f));
    }
done:
    free(q.flag);
    free(jobs);
    if (rc < 0) hfq_measurements_free(out);
    return rc;
}
