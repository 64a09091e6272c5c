/* awq.h - activation-aware weight scaling (AWQ, Lin et al., 2024).
 *
 * For a fold group (calib/fold.h) the candidates are, for r = k / grid,
 * k = 0 .. grid-1,
 *
 *   s_j = max(mean|x_j|^r, 1e-4),  then s /= sqrt(max(s) * min(s))
 *
 * (mean|x_j| from the calibration statistics; r = 0 is s = 1), and the one
 * with the least output error on the calibration sample wins
 * (calib/fold_eval.h: each weight quantized to its target format with its
 * columns scaled, its activations divided by s).
 */
#ifndef HFQ_CALIB_AWQ_H
#define HFQ_CALIB_AWQ_H

#include "calib/fold.h"
#include "calib/fold_eval.h"
#include "calib/stats.h"
#include "formats/error.h"
#include "formats/gguf.h"

#define HFQ_AWQ_DEFAULT_GRID 20

typedef struct hfq_awq_result {
    double ratio;                   /* the chosen r */
    hfq_fold_search_result search;
} hfq_awq_result;

/* s: g->n_in scales (1 when no weight of the group is quantized); grid <= 0:
 * HFQ_AWQ_DEFAULT_GRID. */
int hfq_awq_search(const gguf_file *f, const hfq_fold_group *g, const hfq_calib_stats *st, const hfq_transforms *ts,
                   int grid, const hfq_fold_eval_params *p, float *s, hfq_awq_result *res, hfq_error *err);

#endif
