/* fold.c - see fold.h. */
#include "calib/fold.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "calib/names.h"
#include "formats/ggml_type.h"
#include "quant/qtype.h"

/* ---- groups ---- */

static const gguf_tensor_info *matrix(const gguf_file *f, const char *name, int64_t ne0, int64_t ne1) {
    const gguf_tensor_info *t = gguf_find_tensor(f, name);
    if (!t || t->ne[2] != 1 || t->ne[3] != 1 || (ne0 > 0 && t->ne[0] != ne0) || (ne1 > 0 && t->ne[1] != ne1))
        return NULL;
    return t;
}

/* Fills g with the consumers `parts` of layer il when all are present with
 * rows of the same length; the target's shape is checked by the caller. */
static bool consumers(const gguf_file *f, long il, const char *const *parts, int n, hfq_fold_group *g) {
    g->n_consumers = n;
    g->n_in = 0;
    for (int i = 0; i < n; i++) {
        const gguf_tensor_info *t;
        if (hfq_calib_layer_name(g->consumers[i], HFQ_FOLD_NAME, il, parts[i], "weight") ||
            !(t = matrix(f, g->consumers[i], g->n_in, 0)))
            return false;
        g->n_in = t->ne[0];
    }
    return true;
}

static bool norm_group(const gguf_file *f, long il, const char *norm, const char *const *parts, int n,
                       hfq_fold_group *g) {
    memset(g, 0, sizeof *g);
    g->kind = HFQ_FOLD_NORM;
    return consumers(f, il, parts, n, g) && !hfq_calib_layer_name(g->target, sizeof g->target, il, norm, "weight") &&
           matrix(f, g->target, g->n_in, 1) && gguf_find_tensor(f, g->target)->n_dims == 1 &&
           gguf_find_tensor(f, g->target)->type == GT_F32;
}

static bool rows_group(const gguf_file *f, long il, const char *producer, const char *consumer, hfq_fold_group *g) {
    memset(g, 0, sizeof *g);
    g->kind = HFQ_FOLD_ROWS;
    const char *parts[1] = {consumer};
    if (!consumers(f, il, parts, 1, g) || hfq_calib_layer_name(g->target, sizeof g->target, il, producer, "weight") ||
        !matrix(f, g->target, 0, g->n_in) ||
        hfq_calib_layer_name(g->target_bias, sizeof g->target_bias, il, producer, "bias"))
        return false;
    const gguf_tensor_info *b = gguf_find_tensor(f, g->target_bias);
    if (!b) g->target_bias[0] = '\0';
    return !b || (b->n_dims == 1 && b->ne[0] == g->n_in && b->type == GT_F32);
}

int hfq_fold_groups(const gguf_file *f, int64_t n_layer, int64_t n_head, int64_t n_head_kv, hfq_fold_group **out,
                    int64_t *n, hfq_error *err) {
    static const char *const qkv[] = {"attn_q", "attn_k", "attn_v"}, *const gate_up[] = {"ffn_gate", "ffn_up"};
    /* phi3's fused forms: one matrix reads the norm's output (attn_qkv; ffn_up
     * holding gate and up, only where no ffn_gate does) */
    static const char *const qkv_fused[] = {"attn_qkv"}, *const gate_up_fused[] = {"ffn_up"};
    *out = NULL;
    *n = 0;
    hfq_fold_group *g = calloc((size_t)(n_layer > 0 ? 4 * n_layer : 1), sizeof *g);
    if (!g) return hfq_fail(err, gguf_path(f), "out of memory");
    for (long il = 0; il < n_layer; il++) {
        if (rows_group(f, il, "ffn_up", "ffn_down", &g[*n])) ++*n;
        if (n_head == n_head_kv && rows_group(f, il, "attn_v", "attn_output", &g[*n])) ++*n;
        if (norm_group(f, il, "attn_norm", qkv, 3, &g[*n]) || norm_group(f, il, "attn_norm", qkv_fused, 1, &g[*n]))
            ++*n;
        char gate[HFQ_FOLD_NAME];
        const bool has_gate = !hfq_calib_layer_name(gate, sizeof gate, il, "ffn_gate", "weight") &&
                              gguf_find_tensor(f, gate);
        if (has_gate ? norm_group(f, il, "ffn_norm", gate_up, 2, &g[*n])
                     : norm_group(f, il, "ffn_norm", gate_up_fused, 1, &g[*n]))
            ++*n;
    }
    *out = g;
    return 0;
}

const hfq_calib_entry *hfq_fold_input_stats(const hfq_calib_stats *st, const hfq_fold_group *g, bool need_max,
                                            bool need_sample, const char *use, hfq_error *err) {
    const hfq_calib_entry *e = hfq_calib_stats_find(st, g->consumers[0]);
    const char *missing = !e ? "no statistics"
                          : e->n_in != g->n_in || e->n_mats != 1 ? "statistics of another shape"
                          : need_max && (!e->in_max || !e->in_sum_abs) ? "no max|x| and sum|x| statistics"
                          : need_sample && !e->sample ? "no activation sample"
                          : NULL;
    if (!missing) return e;
    hfq_fail(err, g->consumers[0], "%s needs its input's statistics, but there are %s%s", use, missing,
             e && !e->in_max ? " (files from llama-imatrix hold only sums of squares: calibrate with "
                               "--calibration-file)"
                             : "");
    return NULL;
}

/* ---- transforms ---- */

void hfq_transforms_free(hfq_transforms *ts) {
    for (int64_t i = 0; i < ts->n; i++) {
        free(ts->t[i].name);
        free(ts->t[i].col);
        free(ts->t[i].row);
    }
    free(ts->t);
    memset(ts, 0, sizeof *ts);
}

const hfq_transform *hfq_transforms_find(const hfq_transforms *ts, const char *name) {
    for (int64_t i = 0; ts && i < ts->n; i++)
        if (strcmp(ts->t[i].name, name) == 0) return &ts->t[i];
    return NULL;
}

static hfq_transform *get(hfq_transforms *ts, const char *name, hfq_error *err) {
    hfq_transform *t = (hfq_transform *)hfq_transforms_find(ts, name);
    if (t) return t;
    if (ts->n == ts->cap) {
        int64_t cap = ts->cap ? 2 * ts->cap : 32;
        hfq_transform *p = realloc(ts->t, (size_t)cap * sizeof *p);
        if (!p) goto oom;
        ts->t = p;
        ts->cap = cap;
    }
    t = &ts->t[ts->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) goto oom;
    ts->n++;
    return t;
oom:
    hfq_fail(err, name, "out of memory");
    return NULL;
}

/* (*v)[i] *= s[i] (or /= when divide), creating *v as ones first. */
static int multiply(float **v, int64_t *n_v, int64_t n, const float *s, bool divide, const char *name,
                    hfq_error *err) {
    if (!*v) {
        if (!(*v = malloc((size_t)n * sizeof **v))) return hfq_fail(err, name, "out of memory");
        for (int64_t i = 0; i < n; i++) (*v)[i] = 1.0f;
        *n_v = n;
    }
    if (*n_v != n) return hfq_fail(err, name, "rescaled along %lld and %lld channels", (long long)*n_v, (long long)n);
    for (int64_t i = 0; i < n; i++) (*v)[i] = divide ? (*v)[i] / s[i] : (*v)[i] * s[i];
    return 0;
}

int hfq_transforms_fold(hfq_transforms *ts, const hfq_fold_group *g, const float *s, hfq_error *err) {
    for (int64_t j = 0; j < g->n_in; j++)
        if (!(s[j] > 0.0f) || !isfinite(s[j]))
            return hfq_fail(err, g->consumers[0], "channel %lld: scale %g is not positive and finite", (long long)j, s[j]);
    for (int i = 0; i < g->n_consumers; i++) {
        hfq_transform *t = get(ts, g->consumers[i], err);
        if (!t || multiply(&t->col, &t->n_col, g->n_in, s, false, t->name, err)) return -1;
    }
    hfq_transform *t = get(ts, g->target, err);
    if (!t) return -1;
    if (g->kind == HFQ_FOLD_NORM) return multiply(&t->col, &t->n_col, g->n_in, s, true, t->name, err);
    if (multiply(&t->row, &t->n_row, g->n_in, s, true, t->name, err)) return -1;
    if (!g->target_bias[0]) return 0;
    hfq_transform *b = get(ts, g->target_bias, err);
    return b ? multiply(&b->col, &b->n_col, g->n_in, s, true, b->name, err) : -1;
}

void hfq_transform_apply(const hfq_transform *t, float *rows, int64_t row0, int64_t nrows, int64_t n) {
    if (!t) return;
    for (int64_t r = 0; r < nrows; r++) {
        float *x = rows + r * n;
        const float rs = t->row ? t->row[row0 + r] : 1.0f;
        for (int64_t j = 0; j < n; j++) x[j] = x[j] * (t->col ? t->col[j] : 1.0f) * rs;
    }
}

float *hfq_fold_read(const gguf_file *f, const char *name, const hfq_transforms *ts, int64_t *rows, int64_t *cols,
                     hfq_error *err) {
    const gguf_tensor_info *t = gguf_find_tensor(f, name);
    if (!t) {
        hfq_fail(err, gguf_path(f), "no tensor %s", name);
        return NULL;
    }
    int q = hfq_qtype_from_ggml(t->type);
    const hfq_qtype_traits *tr = q < 0 ? NULL : hfq_qtype_get((hfq_qtype)q);
    const int64_t row_bytes = tr ? hfq_qtype_row_size((hfq_qtype)q, t->ne[0]) : -1;
    if (!tr || !tr->dequantize || t->type == GT_NVFP4 || row_bytes < 0) {
        hfq_fail(err, gguf_path(f), "tensor %s: cannot rescale a tensor stored as %s", name,
                 ggml_type_get(t->type) ? ggml_type_get(t->type)->name : "?");
        return NULL;
    }
    *cols = t->ne[0];
    *rows = t->ne[1] * t->ne[2] * t->ne[3];
    float *w = malloc((size_t)(*rows * *cols) * sizeof *w);
    if (!w) {
        hfq_fail(err, gguf_path(f), "tensor %s: out of memory", name);
        return NULL;
    }
    for (int64_t r = 0; r < *rows; r++)
        tr->dequantize((const uint8_t *)t->data + r * row_bytes, w + r * *cols, *cols);
    hfq_transform_apply(hfq_transforms_find(ts, name), w, 0, *rows, *cols);
    return w;
}
