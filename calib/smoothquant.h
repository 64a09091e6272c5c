/* smoothquant.h - SmoothQuant's per-channel smoothing scales (Xiao et al.,
 * 2023), for W8A8: activation outliers are moved into the weights.
 *
 * For a fold group (calib/fold.h) with calibrated per-channel max|x_j| (the
 * group's input statistics) and max|w_j| = the largest |w| in column j over
 * all the group's weights (with the transforms folded so far applied):
 *
 *   s_j = max|x_j|^alpha / max|w_j|^(1 - alpha)     (computed in double)
 *
 * clamped to [1e-5, 1e5]; s_j = 1 for a channel whose activations or weights
 * are all zero. Folding s divides x_j (the norm weight or producing rows) and
 * multiplies the weights' columns, so the model is unchanged before rounding.
 *
 * With alpha chosen automatically, the candidates are s = 1 and alpha =
 * 0, 1/(grid-1), ..., 1, and the least output error on the calibration
 * sample wins (calib/fold_eval.h, with the activations quantized as the
 * runner quantizes them).
 */
#ifndef HFQ_CALIB_SMOOTHQUANT_H
#define HFQ_CALIB_SMOOTHQUANT_H

#include "calib/fold.h"
#include "calib/fold_eval.h"
#include "calib/stats.h"
#include "formats/error.h"
#include "formats/gguf.h"

#define HFQ_SMOOTHQUANT_DEFAULT_GRID 11

/* s: g->n_in scales for a fixed alpha. Fails when the statistics lack max|x|
 * (files written by llama-imatrix) or the group's weights cannot be decoded. */
int hfq_smoothquant_scales(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st,
                           const hfq_transforms *ts, double alpha, float *s, hfq_error *err);

/* The searched alpha (*alpha < 0: s = 1 won); grid <= 1:
 * HFQ_SMOOTHQUANT_DEFAULT_GRID. */
int hfq_smoothquant_search(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st,
                           const hfq_transforms *ts, int grid, const hfq_fold_eval_params *p, float *s,
                           double *alpha, hfq_fold_search_result *res, hfq_error *err);

#endif
