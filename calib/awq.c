/* awq.c - see awq.h. */
#include "calib/awq.h"

#include <math.h>

#define S_FLOOR 1e-4f

typedef struct grid {
    const hfq_calib_entry *input;
    int n;
} grid;

/* Candidate k: ratio r = k / n of the mean |x| of each channel. */
static void candidate(void *ctx, int k, float *s) {
    const grid *gr = ctx;
    const hfq_calib_entry *e = gr->input;
    const double r = (double)k / gr->n;
    float lo = INFINITY, hi = 0.0f;
    for (int64_t j = 0; j < e->n_in; j++) {
        const float v = (float)pow((double)hfq_calib_mean_abs(e, 0, j), r);
        s[j] = v > S_FLOOR ? v : S_FLOOR;
        lo = fminf(lo, s[j]);
        hi = fmaxf(hi, s[j]);
    }
    const float norm = sqrtf(hi * lo);
    for (int64_t j = 0; j < e->n_in; j++) s[j] /= norm;
}

int hfq_awq_search(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st, const hfq_transforms *ts,
                   int n_grid, const hfq_fold_eval_params *p, float *s, hfq_awq_result *res, hfq_error *err) {
    hfq_fold_eval *ev = hfq_fold_eval_new(f, g, st, ts, p, "--awq", err);
    if (!ev) return -1;
    grid gr = {hfq_fold_eval_input(ev), n_grid > 0 ? n_grid : HFQ_AWQ_DEFAULT_GRID};
    int rc = hfq_fold_search(ev, gr.n, candidate, &gr, s, &res->search, err);
    res->ratio = (double)res->search.best / gr.n;
    hfq_fold_eval_free(ev);
    return rc;
}
