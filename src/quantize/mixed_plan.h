/* mixed_plan.h - plans a GGUF file with a recipe (quant/recipe.h), a
 * measured bit allocation to a size budget (quant/alloc.h over the
 * measurements of src/quantize/measure.h), or both; docs/mixed.md.
 *
 * The result is an ordinary plan (quant/plan.h) for hfq_quantize_write.
 * With a budget, each tensor the plan may quantize gets its options: a
 * recipe rule's format pins it, a rule's "candidates" restrict it, others
 * choose among the default candidates; options whose block or scale group
 * does not divide the rows, or that this build cannot write, are dropped (a
 * tensor left with none keeps its first candidate and the plan's shape
 * fallback). The solver then picks one option per tensor with the least total
 * measured error such that all tensor bytes (the copied ones and the pinned
 * ones included) stay within the budget.
 */
#ifndef HFQ_SRC_QUANTIZE_MIXED_PLAN_H
#define HFQ_SRC_QUANTIZE_MIXED_PLAN_H

#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/plan.h"
#include "quant/recipe.h"
#include "src/quantize/measure.h"

typedef struct hfq_mixed_opts {
    const hfq_recipe *recipe;           /* NULL: none */
    int64_t target_bytes;               /* > 0: allocate within this many tensor bytes */
    const hfq_measurements *meas;       /* needed with a budget */
    const char *meas_where;             /* names the measurements in errors */
    const hfq_fmt_spec *candidates;     /* tensors no rule restricts; NULL: every measured format */
    int n_candidates;
} hfq_mixed_opts;

typedef struct hfq_mixed_report {
    int64_t target_bytes;   /* the budget (0 without one) */
    int64_t fixed_bytes;    /* tensors left without a choice */
    int64_t min_bytes;      /* the smallest plan the options allow */
    int64_t max_bytes;      /* the largest */
    int64_t n_chosen;       /* tensors the solver chose a format for */
    double err;             /* total measured error of those choices */
} hfq_mixed_report;

/* Plans f. popts carries the other plan options (leave_output, token and
 * output formats); its preset is set to the recipe's file_type or, failing
 * that, the preset whose base format holds the most weights, and its choose
 * callback is left NULL. Fails before anything is written: bad recipe
 * against this model, measurements of another model or lacking a format, a
 * budget below the smallest plan, a budget with a recipe that pins every
 * tensor (it could not change the plan). */
int hfq_mixed_plan(const gguf_file *f, hfq_plan_opts *popts, const hfq_mixed_opts *mo, hfq_plan *plan,
                   hfq_mixed_report *rep, hfq_error *err);

/* Resolves the recipe against f's tensors without measurements (every
 * check hfq_mixed_plan makes of the recipe, with budget also that some
 * tensor has candidates), so a bad recipe fails before any measuring. */
int hfq_mixed_check_recipe(const gguf_file *f, const hfq_recipe *r, const hfq_plan_opts *popts, bool budget,
                           hfq_error *err);

#endif
