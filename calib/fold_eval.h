/* fold_eval.h - how well a fold group (calib/fold.h) survives quantization
 * under candidate per-channel scales, measured on the calibration sample:
 * the shared search of AWQ and SmoothQuant's automatic alpha.
 *
 * For scales s, every weight W of the group with sample activations X
 * (rows x of the group's input, calib/stats.h) contributes
 *
 *   E_W(s) = sum over x in X of | W x - Q(W diag(s)) A(diag(1/s) x) |^2
 *
 * where Q is the weight's round trip through its target format (with its
 * importance divided by s^2 when asked) and A the round trip of the
 * activations as the runner quantizes them for that format (identity when
 * none is given). E(s) sums the group's weights; per-row errors are added in
 * a fixed order, so any thread count gives the same value.
 *
 * A search evaluates candidates 0..n-1 (candidate 0 must be s = 1) and keeps
 * the one with the least E (the earliest on ties), so it never does worse
 * than the unscaled weights on the sample.
 */
#ifndef HFQ_CALIB_FOLD_EVAL_H
#define HFQ_CALIB_FOLD_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "calib/fold.h"
#include "calib/stats.h"
#include "formats/error.h"
#include "formats/gguf.h"

/* Quantizes rows x cols floats w as weight `name` will be and decodes them
 * into out. Returns 0, 1 when the weight is not quantized (out untouched: it
 * adds no error), -1 with err. importance: cols weights or NULL. */
typedef int (*hfq_weight_roundtrip_fn)(void *ctx, const char *name, const float *w, float *out, int64_t rows,
                                       int64_t cols, const float *importance, hfq_error *err);
/* Quantizes and decodes, in place, rows x cols activations as the runner does
 * for weight `name` (static_amax: the calibrated maximum of these inputs, for
 * static scales). Returns 0, or -1 with err. */
typedef int (*hfq_act_roundtrip_fn)(void *ctx, const char *name, float *x, int64_t rows, int64_t cols,
                                    float static_amax, hfq_error *err);

typedef struct hfq_fold_eval_params {
    bool importance;                   /* pass each weight's importance row to the round trip */
    hfq_weight_roundtrip_fn weight_rt;
    hfq_act_roundtrip_fn act_rt;       /* NULL: activations stay exact */
    void *ctx;
    int n_threads;                     /* <= 0: OpenMP's default */
} hfq_fold_eval_params;

typedef struct hfq_fold_eval hfq_fold_eval;

/* Reads the group's weights (transforms ts applied) and its sample; fails,
 * naming `use`, when the statistics lack max|x|, sum|x| or the sample. */
hfq_fold_eval *hfq_fold_eval_new(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st,
                                 const hfq_transforms *ts, const hfq_fold_eval_params *p, const char *use,
                                 hfq_error *err);
void hfq_fold_eval_free(hfq_fold_eval *ev);
/* The statistics of the group's input. */
const hfq_calib_entry *hfq_fold_eval_input(const hfq_fold_eval *ev);

/* E(s); *quantized is false when no weight of the group is quantized. */
int hfq_fold_eval_error(hfq_fold_eval *ev, const float *s, double *out, bool *quantized, hfq_error *err);

typedef struct hfq_fold_search_result {
    int best;                  /* the chosen candidate */
    double err_unscaled, err;  /* E of candidate 0 and of the chosen one */
    bool searched;             /* false: no weight is quantized (s = 1 returned) */
} hfq_fold_search_result;

/* Fills s (n_in) with candidate k. */
typedef void (*hfq_fold_candidate_fn)(void *ctx, int k, float *s);

/* The least-error candidate of n into s. */
int hfq_fold_search(hfq_fold_eval *ev, int n, hfq_fold_candidate_fn candidate, void *ctx, float *s,
                    hfq_fold_search_result *res, hfq_error *err);

#endif
