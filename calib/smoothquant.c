/* smoothquant.c - see smoothquant.h. */
#include "calib/smoothquant.h"

#include <math.h>
#include <stdlib.h>

#define S_MIN 1e-5
#define S_MAX 1e5

/* max |w| of each column over the group's weights. */
static float *column_max(const gguf_file *f, const hfq_fold_group *g, const hfq_transforms *ts, hfq_error *err) {
    float *w_max = calloc((size_t)g->n_in, sizeof *w_max);
    if (!w_max) {
        hfq_fail(err, g->consumers[0], "out of memory");
        return NULL;
    }
    for (int c = 0; c < g->n_consumers; c++) {
        int64_t rows, cols;
        float *w = hfq_fold_read(f, g->consumers[c], ts, &rows, &cols, err);
        if (!w) {
            free(w_max);
            return NULL;
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < cols; j++) w_max[j] = fmaxf(w_max[j], fabsf(w[r * cols + j]));
        free(w);
    }
    return w_max;
}

static void smooth(const hfq_calib_entry *e, const float *w_max, double alpha, float *s) {
    for (int64_t j = 0; j < e->n_in; j++) {
        const double x = e->in_max[j], w = w_max[j];
        const double v = x > 0.0 && w > 0.0 ? pow(x, alpha) / pow(w, 1.0 - alpha) : 1.0;
        s[j] = (float)(v < S_MIN ? S_MIN : v > S_MAX ? S_MAX : v);
    }
}

int hfq_smoothquant_scales(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st,
                           const hfq_transforms *ts, double alpha, float *s, hfq_error *err) {
    const hfq_calib_entry *e = hfq_fold_input_stats(st, g, true, false, "--smoothquant", err);
    float *w_max = e ? column_max(f, g, ts, err) : NULL;
    if (!w_max) return -1;
    smooth(e, w_max, alpha, s);
    free(w_max);
    return 0;
}

typedef struct grid {
    const hfq_calib_entry *input;
    const float *w_max;
    int n;
} grid;

/* Candidate 0: no smoothing; k >= 1: alpha = (k - 1) / (n - 2). */
static void candidate(void *ctx, int k, float *s) {
    const grid *gr = ctx;
    if (k == 0) {
        for (int64_t j = 0; j < gr->input->n_in; j++) s[j] = 1.0f;
        return;
    }
    smooth(gr->input, gr->w_max, (double)(k - 1) / (gr->n - 2), s);
}

int hfq_smoothquant_search(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st,
                           const hfq_transforms *ts, int n_grid, const hfq_fold_eval_params *p, float *s,
                           double *alpha, hfq_fold_search_result *res, hfq_error *err) {
    hfq_fold_eval *ev = hfq_fold_eval_new(f, g, st, ts, p, "--smoothquant-alpha auto", err);
    float *w_max = ev ? column_max(f, g, ts, err) : NULL;
    int rc = -1;
    if (w_max) {
        grid gr = {hfq_fold_eval_input(ev), w_max, (n_grid > 1 ? n_grid : HFQ_SMOOTHQUANT_DEFAULT_GRID) + 1};
        rc = hfq_fold_search(ev, gr.n, candidate, &gr, s, res, err);
        *alpha = res->best == 0 ? -1.0 : (double)(res->best - 1) / (gr.n - 2);
    }
    free(w_max);
    hfq_fold_eval_free(ev);
    return rc;
}
