/* calib_gptq.c - see src/quantize/calib_gptq.h. */
#include "src/quantize/calib_gptq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/hessian.h"
#include "calib/names.h"
#include "quant/gptq.h"
#include "src/quantize/gptq_seq.h"

struct hfq_calib_gptq {
    char *model_path;
    hfq_calib_gptq_opts o;
    hfq_hessian_input *in;     /* every input, in layer order */
    int64_t n_in;
    int64_t w0, w1;            /* the current window: in[w0 .. w1) */
    hfq_hessian_set win;
    bool *ready;               /* win.e[i].h holds U */
    int64_t **perm;            /* act-order: win.e[i]'s column order (with U) */
    int64_t n_passes;
    hfq_gptq_seq *seq;         /* sequential: the layers quantized so far */
    int64_t n_replaced;        /* sequential: tensors replaced in the last pass */
    bool *shifted;             /* act_quant: win.e[i].cross holds M */
    /* for the later windows' passes */
    const hfq_calib_seqs *seqs;
    const hfq_calib_run_params *rp;
    const hfq_transforms *ts;
};

static void close_window(hfq_calib_gptq *g) {
    for (int64_t i = 0; g->perm && i < g->w1 - g->w0; i++) free(g->perm[i]);
    free(g->perm);
    g->perm = NULL;
    hfq_hessian_set_free(&g->win);
    free(g->ready);
    g->ready = NULL;
    free(g->shifted);
    g->shifted = NULL;
}

static int open_window(hfq_calib_gptq *g, int64_t first, hfq_error *err) {
    close_window(g);
    g->w0 = first;
    /* sequential: one layer a pass, each on the layers quantized before it */
    /* with the cross terms an input takes twice its Hessian's bytes */
    const int64_t budget = g->o.sequential ? 0 : g->o.act_quant ? g->o.memory / 2 : g->o.memory;
    g->w1 = hfq_hessian_window(g->in, g->n_in, first, budget);
    if (hfq_hessian_set_init(&g->win, g->in + first, g->w1 - first, g->o.n_threads, err) ||
        (g->o.act_quant && hfq_hessian_set_cross(&g->win, err))) {
        hfq_hessian_set_free(&g->win);
        g->w1 = g->w0;
        return -1;
    }
    const size_t n = (size_t)(g->w1 - first > 0 ? g->w1 - first : 1);
    g->ready = calloc(n, sizeof *g->ready);
    g->perm = calloc(n, sizeof *g->perm);
    g->shifted = calloc(n, sizeof *g->shifted);
    return g->ready && g->perm && g->shifted ? 0 : hfq_fail(err, g->model_path, "out of memory");
}

hfq_calib_gptq *hfq_calib_gptq_new(const char *model_path, const gguf_file *f, const hfq_calib_gptq_opts *o,
                                   hfq_error *err) {
    hfq_calib_gptq *g = calloc(1, sizeof *g);
    if (!g || !(g->model_path = strdup(model_path))) {
        free(g);
        hfq_fail(err, model_path, "out of memory");
        return NULL;
    }
    g->o = *o;
    if (g->o.damp < 0.0) g->o.damp = HFQ_GPTQ_DEFAULT_DAMP;
    if (g->o.memory <= 0) g->o.memory = HFQ_GPTQ_DEFAULT_MEMORY;
    if (g->o.sequential && !(g->seq = hfq_gptq_seq_new())) {
        hfq_calib_gptq_free(g);
        hfq_fail(err, model_path, "out of memory");
        return NULL;
    }
    /* with act_quant no window is collected in the statistics' pass */
    if (hfq_hessian_plan(f, &g->in, &g->n_in, err) || (!g->o.act_quant && open_window(g, 0, err))) {
        hfq_calib_gptq_free(g);
        return NULL;
    }
    return g;
}

void hfq_calib_gptq_free(hfq_calib_gptq *g) {
    if (!g) return;
    close_window(g);
    hfq_gptq_seq_free(g->seq);
    free(g->in);
    free(g->model_path);
    free(g);
}

/* act_quant's observer: x folded by its column multipliers, then quantized. */
static void observe_quantized(hfq_calib_gptq *g, const char *weight_name, const float *x, int64_t n_tokens,
                              int64_t n_in) {
    hfq_hessian_set *s = &g->win;
    hfq_hessian *h = s->failed ? NULL : hfq_hessian_find(s, weight_name);
    if (!h) return;
    if (n_in != h->in.n) { /* hfq_hessian_observe's message */
        hfq_hessian_observe(s, weight_name, x, n_tokens, n_in);
        return;
    }
    const hfq_transform *t = g->ts ? hfq_transforms_find(g->ts, weight_name) : NULL;
    const size_t count = (size_t)n_tokens * (size_t)n_in;
    float *xf = malloc(2 * count * sizeof *xf), *xq = xf + count;
    if (!xf) {
        s->failed = true;
        hfq_fail(&s->err, weight_name, "out of memory for its quantized inputs");
        return;
    }
    for (size_t k = 0; k < count; k++) xf[k] = t && t->col ? x[k] / t->col[k % (size_t)n_in] : x[k];
    memcpy(xq, xf, count * sizeof *xq);
    if (g->o.act_quant(g->o.act_ctx, weight_name, xq, n_tokens, n_in, &s->err)) s->failed = true;
    else hfq_hessian_add_quantized(h, xf, xq, n_tokens, s->n_threads);
    free(xf);
}

void hfq_calib_gptq_observe(void *user, const char *weight_name, const float *x, int64_t n_tokens, int64_t n_in) {
    hfq_calib_gptq *g = user;
    if (g->o.act_quant) observe_quantized(g, weight_name, x, n_tokens, n_in);
    else hfq_hessian_observe(&g->win, weight_name, x, n_tokens, n_in);
}

int hfq_calib_gptq_pass_done(hfq_calib_gptq *g, hfq_error *err) {
    if (g->win.failed) {
        *err = g->win.err;
        hfq_error_prefix(err, g->model_path);
        return -1;
    }
    g->n_passes++;
    if (!g->o.note || g->w1 <= g->w0) return 0;
    int64_t bytes = 0;
    for (int64_t i = g->w0; i < g->w1; i++) bytes += hfq_hessian_bytes(&g->in[i]);
    char msg[2 * HFQ_HESSIAN_NAME + 160];
    int len = snprintf(msg, sizeof msg, "GPTQ Hessians, calibration pass %lld: %lld inputs (%s .. %s), %.1f MiB",
                       (long long)g->n_passes, (long long)(g->w1 - g->w0), g->in[g->w0].name, g->in[g->w1 - 1].name,
                       (double)bytes / (1 << 20));
    if (g->seq && len > 0 && (size_t)len < sizeof msg)
        snprintf(msg + len, sizeof msg - (size_t)len, ", on %lld quantized tensors", (long long)g->n_replaced);
    g->o.note(g->o.note_ctx, msg);
    return 0;
}

static int64_t find_input(const hfq_calib_gptq *g, const char *name) {
    char leader[HFQ_HESSIAN_NAME];
    hfq_calib_input_leader(name, leader, sizeof leader);
    for (int64_t i = 0; i < g->n_in; i++)
        if (strcmp(g->in[i].name, leader) == 0) return i;
    return -1;
}

static bool has(void *ctx, const char *name, int64_t n_per_row) {
    const int64_t i = find_input(ctx, name);
    return i >= 0 && ((hfq_calib_gptq *)ctx)->in[i].n == n_per_row;
}

/* Collects the window starting at the first input of in[i]'s layer. */
static int window_pass(hfq_calib_gptq *g, int64_t i, hfq_error *err) {
    int64_t first = i;
    while (first > 0 && g->in[first - 1].layer == g->in[i].layer) first--;
    if (open_window(g, first, err)) return -1;
    hfq_model *base = hfq_model_load(g->model_path, err), *m = base;
    g->n_replaced = 0;
    if (base && g->seq) m = hfq_gptq_seq_bind(g->seq, base, g->in[first].layer, &g->n_replaced, err);
    if (!m) {
        hfq_model_free(base);
        return -1;
    }
    hfq_calib_stats scratch; /* the statistics are the first pass's: these are dropped */
    hfq_calib_stats_init(&scratch, 0);
    hfq_calib_run_params rp = *g->rp;
    rp.observe = hfq_calib_gptq_observe;
    rp.observe_user = g;
    int rc = hfq_calibrate(m, g->seqs, &rp, &scratch, err) || hfq_calib_gptq_pass_done(g, err) ? -1 : 0;
    hfq_calib_stats_free(&scratch);
    if (m != base) hfq_model_free(m);
    hfq_model_free(base);
    return rc;
}

static const double *get(void *ctx, const char *name, int64_t n_per_row, hfq_error *err) {
    hfq_calib_gptq *g = ctx;
    const int64_t i = find_input(g, name);
    if (i < 0 || g->in[i].n != n_per_row) {
        hfq_fail(err, name, "no Hessian for its input");
        return NULL;
    }
    if ((i < g->w0 || i >= g->w1) && window_pass(g, i, err)) return NULL;
    hfq_hessian *h = &g->win.e[i - g->w0];
    if (g->ready[i - g->w0]) return h->h;
    const int64_t n = h->in.n;
    /* act_quant's inputs were folded before they were quantized */
    const hfq_transform *t = g->ts && !g->o.act_quant ? hfq_transforms_find(g->ts, name) : NULL;
    for (int64_t r = 0; t && t->col && r < n; r++)
        for (int64_t c = r; c < n; c++) h->h[r * n + c] /= (double)t->col[r] * (double)t->col[c];
    int64_t **perm = &g->perm[i - g->w0];
    if (g->o.act_order &&
        (!(*perm = malloc((size_t)n * sizeof **perm)) || hfq_gptq_act_order(h->h, n, *perm))) {
        hfq_fail(err, name, "out of memory for act-order");
        return NULL;
    }
    if (hfq_gptq_prepare(h->h, n, g->o.damp, g->o.n_threads)) {
        hfq_fail(err, name, "its input's Hessian plus damping %g is not positive definite (raise --gptq-damp)",
                 g->o.damp);
        return NULL;
    }
    if (g->o.act_quant && !g->shifted[i - g->w0]) {
        if (hfq_gptq_target_shift(h->cross, h->h, n, *perm, g->o.n_threads)) {
            hfq_fail(err, name, "out of memory for GPTQ's target shift");
            return NULL;
        }
        g->shifted[i - g->w0] = true;
    }
    g->ready[i - g->w0] = true;
    return h->h;
}

static const double *shift_of(void *ctx, const char *name) {
    hfq_calib_gptq *g = ctx;
    const int64_t i = find_input(g, name);
    if (i < g->w0 || i >= g->w1 || !g->shifted[i - g->w0]) return NULL;
    /* a follower whose inputs the runner quantizes otherwise gets none */
    return g->o.act_same(g->o.act_ctx, g->in[i].name, name) ? g->win.e[i - g->w0].cross : NULL;
}

static const int64_t *perm_of(void *ctx, const char *name) {
    hfq_calib_gptq *g = ctx;
    const int64_t i = find_input(g, name);
    return i >= g->w0 && i < g->w1 ? g->perm[i - g->w0] : NULL;
}

static int encoded(void *ctx, const char *name, int64_t n_rows, int64_t n_per_row, int64_t r, const float *row) {
    return hfq_gptq_seq_record(((hfq_calib_gptq *)ctx)->seq, name, n_rows, n_per_row, r, row);
}

hfq_gptq_source hfq_calib_gptq_source(hfq_calib_gptq *g, const hfq_calib_seqs *seqs, const hfq_calib_run_params *rp,
                                      const hfq_transforms *ts) {
    g->seqs = seqs;
    g->rp = rp;
    g->ts = ts;
    return (hfq_gptq_source){.has = has, .get = get, .ctx = g, .damp = g->o.damp, .batch = g->o.batch,
                             .perm = g->o.act_order ? perm_of : NULL, .encoded = g->seq ? encoded : NULL,
                             .shift = g->o.act_quant ? shift_of : NULL};
}
