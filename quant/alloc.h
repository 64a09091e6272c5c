/* alloc.h - the budget solver of measured bit allocation: one option per
 * item (a format per tensor), least total error within a byte budget.
 *
 * Exact multiple-choice knapsack by dynamic programming over a byte grid:
 * each item's bytes above its smallest option are rounded UP to grid cells
 * of ceil(slack / cells) bytes (slack = budget - the sum of the smallest
 * options), so every solution the table admits fits the real budget; the
 * table finds the least error among them (ties: the earlier option of the
 * earlier item keeps its place, so the result is deterministic). With slack
 * of at most `cells` bytes a cell is one byte and the result is the exact
 * optimum. Rounding leaves at most n_items cells unused; a greedy pass then
 * spends what is left, upgrading the item with the largest error decrease
 * per extra byte that still fits, until nothing fits. The Lagrangian
 * solution below, filled up the same way, is kept instead when its error is
 * lower (on large instances the grid's rounding can cost more than the
 * hull's gaps), so the result is never worse than either.
 *
 * The Lagrangian relaxation (each item's argmin err + lambda * bytes, lambda
 * bisected) is provided too: it only reaches points of the lower convex hull
 * of each item's (bytes, error) curve, which is why the DP is the solver.
 */
#ifndef HFQ_QUANT_ALLOC_H
#define HFQ_QUANT_ALLOC_H

#include <stdint.h>

#include "formats/error.h"

typedef struct hfq_alloc_option {
    int64_t bytes;        /* >= 0 */
    double err;           /* finite, >= 0 */
} hfq_alloc_option;

typedef struct hfq_alloc_item {
    int n_options;        /* >= 1 */
    const hfq_alloc_option *options;
} hfq_alloc_item;

typedef struct hfq_alloc_result {
    int64_t bytes;        /* total bytes of the chosen options */
    double err;           /* total error of the chosen options */
    int64_t min_bytes;    /* the smallest possible total */
    int64_t max_bytes;    /* the total of every item's largest option */
} hfq_alloc_result;

/* Default grid: 2^16 cells. */
#define HFQ_ALLOC_CELLS ((int64_t)1 << 16)

/* Fills choice[i] (an option index per item) with the least total error
 * whose total bytes are <= budget. cells <= 0: HFQ_ALLOC_CELLS. Returns 0;
 * 1 when even the smallest options exceed the budget (choice: the smallest
 * option of each item, the first on ties); -1 with err on bad input or
 * memory. */
int hfq_alloc_solve(const hfq_alloc_item *items, int64_t n_items, int64_t budget, int64_t cells, int32_t *choice,
                    hfq_alloc_result *res, hfq_error *err);

/* The Lagrangian solution: the least lambda >= 0 (bisected) whose per-item
 * argmin of err + lambda * bytes fits the budget (ties: fewer bytes, then
 * the earlier option). Same returns as hfq_alloc_solve. */
int hfq_alloc_lagrange(const hfq_alloc_item *items, int64_t n_items, int64_t budget, int32_t *choice,
                       hfq_alloc_result *res, hfq_error *err);

#endif
