/* fold_eval.c - see fold_eval.h. */
#include "calib/fold_eval.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Multiply-adds below which a product stays on one thread (waking threads
 * costs more than it saves on the small matrices). */
#define PARALLEL_WORK ((int64_t)1 << 22)

typedef struct weight {
    const char *name;
    float *w;            /* [rows][cols], the transforms so far applied */
    int64_t rows;
    float *importance;   /* [cols] or NULL */
    double *y_ref;       /* [n_sample][rows]: W x for the sample */
} weight;

struct hfq_fold_eval {
    const hfq_calib_entry *input;
    hfq_fold_eval_params p;
    weight ws[HFQ_FOLD_MAX_CONSUMERS];
    int n;
    int64_t cols, max_rows;
    float *scaled, *back, *imp;   /* one weight at a time */
    float *xs;                    /* [n_sample][cols]: the sample divided by s, then rounded */
    double *row_err;
    int n_threads;
};

void hfq_fold_eval_free(hfq_fold_eval *ev) {
    if (!ev) return;
    for (int c = 0; c < ev->n; c++) {
        free(ev->ws[c].w);
        free(ev->ws[c].importance);
        free(ev->ws[c].y_ref);
    }
    free(ev->scaled);
    free(ev->back);
    free(ev->imp);
    free(ev->xs);
    free(ev->row_err);
    free(ev);
}

const hfq_calib_entry *hfq_fold_eval_input(const hfq_fold_eval *ev) { return ev->input; }

/* y[t][i] = W_i . x_t in double, for every sample row t. */
static void reference(const weight *w, const float *x, int64_t n_x, int64_t cols, int n_threads) {
#pragma omp parallel for schedule(static) num_threads(n_threads) if (w->rows * cols * n_x >= PARALLEL_WORK)
    for (int64_t i = 0; i < w->rows; i++)
        for (int64_t t = 0; t < n_x; t++) {
            double y = 0.0;
            for (int64_t j = 0; j < cols; j++) y += (double)w->w[i * cols + j] * (double)x[t * cols + j];
            w->y_ref[t * w->rows + i] = y;
        }
}

static int read_weight(hfq_fold_eval *ev, const gguf_file *f, const hfq_calib_stats *st, const hfq_transforms *ts,
                       const char *name, hfq_error *err) {
    weight *w = &ev->ws[ev->n++];
    int64_t cols;
    w->name = name;
    if (!(w->w = hfq_fold_read(f, name, ts, &w->rows, &cols, err))) return -1;
    if (w->rows > ev->max_rows) ev->max_rows = w->rows;
    const hfq_calib_entry *e = hfq_calib_stats_find(st, name);
    if (ev->p.importance && e && e->n_in == ev->cols && e->n_mats == 1) {
        if (!(w->importance = malloc((size_t)ev->cols * sizeof(float)))) return hfq_fail(err, name, "out of memory");
        hfq_calib_importance(e, 0, w->importance);
    }
    if (!(w->y_ref = malloc((size_t)(ev->input->n_sample * w->rows) * sizeof(double))))
        return hfq_fail(err, name, "out of memory");
    reference(w, ev->input->sample, ev->input->n_sample, ev->cols, ev->n_threads);
    return 0;
}

hfq_fold_eval *hfq_fold_eval_new(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st,
                                 const hfq_transforms *ts, const hfq_fold_eval_params *p, const char *use,
                                 hfq_error *err) {
    const hfq_calib_entry *input = hfq_fold_input_stats(st, g, true, true, use, err);
    if (!input) return NULL;
    hfq_fold_eval *ev = calloc(1, sizeof *ev);
    if (!ev) {
        hfq_fail(err, g->consumers[0], "out of memory");
        return NULL;
    }
    ev->input = input;
    ev->p = *p;
    ev->cols = g->n_in;
    ev->n_threads = p->n_threads > 0 ? p->n_threads : omp_get_max_threads();
    int rc = 0;
    for (int c = 0; rc == 0 && c < g->n_consumers; c++) rc = read_weight(ev, f, st, ts, g->consumers[c], err);
    const size_t wn = (size_t)(ev->max_rows * ev->cols), xn = (size_t)(input->n_sample * ev->cols);
    if (rc == 0 && (!(ev->scaled = malloc(wn * sizeof(float))) || !(ev->back = malloc(wn * sizeof(float))) ||
                    !(ev->imp = malloc((size_t)ev->cols * sizeof(float))) || !(ev->xs = malloc(xn * sizeof(float))) ||
                    !(ev->row_err = malloc((size_t)ev->max_rows * sizeof(double)))))
        rc = hfq_fail(err, g->consumers[0], "out of memory for the scale search");
    if (rc) {
        hfq_fold_eval_free(ev);
        return NULL;
    }
    return ev;
}

/* sum over rows i and sample rows t of (y_ref[t][i] - What_i . xs_t)^2. */
static double output_error(const hfq_fold_eval *ev, const weight *w) {
    const int64_t cols = ev->cols, n_x = ev->input->n_sample;
#pragma omp parallel for schedule(static) num_threads(ev->n_threads) if (w->rows * cols * n_x >= PARALLEL_WORK)
    for (int64_t i = 0; i < w->rows; i++) {
        const float *a = ev->back + i * cols;
        double e = 0.0;
        for (int64_t t = 0; t < n_x; t++) {
            const float *x = ev->xs + t * cols;
            double y = 0.0;
            for (int64_t j = 0; j < cols; j++) y += (double)a[j] * (double)x[j];
            const double d = w->y_ref[t * w->rows + i] - y;
            e += d * d;
        }
        ev->row_err[i] = e;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < w->rows; i++) sum += ev->row_err[i];
    return sum;
}

int hfq_fold_eval_error(hfq_fold_eval *ev, const float *s, double *out, bool *quantized, hfq_error *err) {
    const hfq_calib_entry *in = ev->input;
    const int64_t cols = ev->cols;
    float static_amax = 0.0f;
    for (int64_t j = 0; j < cols; j++) static_amax = fmaxf(static_amax, in->in_max[j] / s[j]);
    *out = 0.0;
    *quantized = false;
    for (int c = 0; c < ev->n; c++) {
        const weight *w = &ev->ws[c];
        for (int64_t r = 0; r < w->rows; r++)
            for (int64_t j = 0; j < cols; j++) ev->scaled[r * cols + j] = w->w[r * cols + j] * s[j];
        if (w->importance)
            for (int64_t j = 0; j < cols; j++) ev->imp[j] = w->importance[j] / (s[j] * s[j]);
        int rc = ev->p.weight_rt(ev->p.ctx, w->name, ev->scaled, ev->back, w->rows, cols,
                                 w->importance ? ev->imp : NULL, err);
        if (rc < 0) return -1;
        if (rc == 1) continue;
        *quantized = true;
        for (int64_t t = 0; t < in->n_sample; t++)
            for (int64_t j = 0; j < cols; j++) ev->xs[t * cols + j] = in->sample[t * cols + j] / s[j];
        if (ev->p.act_rt && ev->p.act_rt(ev->p.ctx, w->name, ev->xs, in->n_sample, cols, static_amax, err) < 0)
            return -1;
        *out += output_error(ev, w);
    }
    return 0;
}

int hfq_fold_search(hfq_fold_eval *ev, int n, hfq_fold_candidate_fn candidate, void *ctx, float *s,
                    hfq_fold_search_result *res, hfq_error *err) {
    const int64_t cols = ev->cols;
    memset(res, 0, sizeof *res);
    float *best = malloc((size_t)cols * sizeof *best);
    if (!best) return hfq_fail(err, ev->ws[0].name, "out of memory");
    int rc = 0;
    for (int k = 0; k < n; k++) {
        double e;
        bool quantized;
        candidate(ctx, k, s);
        if ((rc = hfq_fold_eval_error(ev, s, &e, &quantized, err)) || !quantized) break;
        res->searched = true;
        if (k == 0) res->err_unscaled = e;
        if (k == 0 || e < res->err) {
            res->err = e;
            res->best = k;
            memcpy(best, s, (size_t)cols * sizeof *s);
        }
    }
    for (int64_t j = 0; rc == 0 && j < cols; j++) s[j] = res->searched ? best[j] : 1.0f;
    free(best);
    return rc;
}
