/* alloc.c - the budget solver; see alloc.h. */
#include "quant/alloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTIONS 255               /* option indices fit the DP's byte table */
#define MAX_TABLE ((int64_t)1 << 26)  /* bytes of the DP's choice table */

/* Checks the input; fills res's min/max totals and choice with each item's
 * smallest option (the first on ties). */
static int prepare(const hfq_alloc_item *items, int64_t n, int32_t *choice, hfq_alloc_result *res, hfq_error *err) {
    memset(res, 0, sizeof *res);
    if (n < 0 || (n > 0 && (!items || !choice))) return hfq_fail(err, "alloc", "bad item list");
    for (int64_t i = 0; i < n; i++) {
        const hfq_alloc_item *it = &items[i];
        if (it->n_options < 1 || it->n_options > MAX_OPTIONS || !it->options)
            return hfq_fail(err, "alloc", "item %" PRId64 ": %d options (1 to %d allowed)", i, it->n_options, MAX_OPTIONS);
        int64_t lo = INT64_MAX, hi = 0;
        choice[i] = 0;
        for (int k = 0; k < it->n_options; k++) {
            const hfq_alloc_option *o = &it->options[k];
            if (o->bytes < 0 || o->bytes > INT64_MAX / 4 / (n + 1) || !isfinite(o->err) || o->err < 0)
                return hfq_fail(err, "alloc", "item %" PRId64 " option %d: bad bytes or error", i, k);
            if (o->bytes < lo) lo = o->bytes, choice[i] = k;
            if (o->bytes > hi) hi = o->bytes;
        }
        res->min_bytes += lo;
        res->max_bytes += hi;
    }
    return 0;
}

static void totals(const hfq_alloc_item *items, int64_t n, const int32_t *choice, hfq_alloc_result *res) {
    res->bytes = 0;
    res->err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        res->bytes += items[i].options[choice[i]].bytes;
        res->err += items[i].options[choice[i]].err;
    }
}

/* Spends what the budget has left: repeatedly the single change of one
 * item's option that lowers the error most per extra byte and still fits
 * (changes that lower both come first). */
static void fill_up(const hfq_alloc_item *items, int64_t n, int64_t budget, int32_t *choice, hfq_alloc_result *res) {
    totals(items, n, choice, res);
    for (int64_t round = 0; round < n * MAX_OPTIONS; round++) {
        int64_t best_i = -1;
        int best_k = 0;
        double best_gain = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const hfq_alloc_option *cur = &items[i].options[choice[i]];
            for (int k = 0; k < items[i].n_options; k++) {
                const hfq_alloc_option *o = &items[i].options[k];
                int64_t extra = o->bytes - cur->bytes;
                double drop = cur->err - o->err;
                if (drop <= 0.0 || extra > budget - res->bytes) continue;
                double gain = extra <= 0 ? INFINITY : drop / (double)extra;
                if (best_i < 0 || gain > best_gain) best_i = i, best_k = k, best_gain = gain;
            }
        }
        if (best_i < 0) break;
        choice[best_i] = best_k;
        totals(items, n, choice, res);
    }
}

int hfq_alloc_solve(const hfq_alloc_item *items, int64_t n, int64_t budget, int64_t cells, int32_t *choice,
                    hfq_alloc_result *res, hfq_error *err) {
    if (prepare(items, n, choice, res, err) < 0) return -1;
    if (res->min_bytes > budget) {
        totals(items, n, choice, res);
        return 1;
    }
    const int64_t slack = budget - res->min_bytes;
    if (cells <= 0) cells = HFQ_ALLOC_CELLS;
    if (n > 0 && cells > MAX_TABLE / n) cells = MAX_TABLE / n > 1024 ? MAX_TABLE / n : 1024;
    const int64_t unit = slack <= cells ? 1 : (slack + cells - 1) / cells;
    const int64_t g = slack / unit; /* usable cells: g * unit <= slack */
    double *prev = malloc((size_t)(g + 1) * sizeof *prev), *cur = malloc((size_t)(g + 1) * sizeof *cur);
    uint8_t *pick = malloc((size_t)(n > 0 ? n : 1) * (size_t)(g + 1));
    int64_t *w = malloc(MAX_OPTIONS * sizeof *w);
    int rc = 0;
    if (!prev || !cur || !pick || !w) {
        rc = hfq_fail(err, "alloc", "out of memory for %" PRId64 " items x %" PRId64 " cells", n, g + 1);
        goto done;
    }
    /* prev[c]: least error of the items so far within c cells */
    for (int64_t c = 0; c <= g; c++) prev[c] = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const hfq_alloc_item *it = &items[i];
        const int64_t base = it->options[choice[i]].bytes; /* prepare() left the smallest there */
        for (int k = 0; k < it->n_options; k++) w[k] = (it->options[k].bytes - base + unit - 1) / unit;
        uint8_t *row = pick + i * (g + 1);
        for (int64_t c = 0; c <= g; c++) {
            double best = INFINITY;
            int bk = 0;
            for (int k = 0; k < it->n_options; k++) {
                if (w[k] > c) continue;
                double e = prev[c - w[k]] + it->options[k].err;
                if (e < best) best = e, bk = k;
            }
            cur[c] = best;
            row[c] = (uint8_t)bk;
        }
        double *t = prev;
        prev = cur;
        cur = t;
    }
    int64_t c = g;
    for (int64_t i = n - 1; i >= 0; i--) {
        const hfq_alloc_item *it = &items[i];
        int64_t lo = INT64_MAX;
        for (int k = 0; k < it->n_options; k++) lo = it->options[k].bytes < lo ? it->options[k].bytes : lo;
        int k = pick[i * (g + 1) + c];
        choice[i] = k;
        c -= (it->options[k].bytes - lo + unit - 1) / unit;
    }
    fill_up(items, n, budget, choice, res);
    /* the grid's rounding can cost more than the hull's gaps: keep the
     * Lagrangian solution (filled up the same way) when it is better */
    int32_t *alt = malloc((size_t)(n > 0 ? n : 1) * sizeof *alt);
    hfq_alloc_result ra;
    if (!alt) {
        rc = hfq_fail(err, "alloc", "out of memory");
        goto done;
    }
    if (hfq_alloc_lagrange(items, n, budget, alt, &ra, err) == 0) {
        fill_up(items, n, budget, alt, &ra);
        if (ra.err < res->err) {
            memcpy(choice, alt, (size_t)n * sizeof *alt);
            *res = ra;
        }
    }
    free(alt);
done:
    free(prev);
    free(cur);
    free(pick);
    free(w);
    return rc;
}

/* Each item's argmin of err + lambda * bytes (ties: fewer bytes, then the
 * earlier option); returns the total bytes. */
static int64_t lagrange_pick(const hfq_alloc_item *items, int64_t n, double lambda, int32_t *choice) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const hfq_alloc_item *it = &items[i];
        int bk = 0;
        for (int k = 1; k < it->n_options; k++) {
            const hfq_alloc_option *o = &it->options[k], *b = &it->options[bk];
            double vo = o->err + lambda * (double)o->bytes, vb = b->err + lambda * (double)b->bytes;
            if (vo < vb || (vo == vb && o->bytes < b->bytes)) bk = k;
        }
        choice[i] = bk;
        total += it->options[bk].bytes;
    }
    return total;
}

int hfq_alloc_lagrange(const hfq_alloc_item *items, int64_t n, int64_t budget, int32_t *choice, hfq_alloc_result *res,
                       hfq_error *err) {
    if (prepare(items, n, choice, res, err) < 0) return -1;
    if (res->min_bytes > budget) {
        totals(items, n, choice, res);
        return 1;
    }
    double lo = 0.0, hi = 1e-30;
    if (lagrange_pick(items, n, lo, choice) > budget) {
        while (lagrange_pick(items, n, hi, choice) > budget && hi < 1e300) hi *= 4.0;
        for (int it = 0; it < 200; it++) {
            double mid = 0.5 * (lo + hi);
            if (lagrange_pick(items, n, mid, choice) > budget) lo = mid;
            else hi = mid;
        }
        lagrange_pick(items, n, hi, choice);
    }
    totals(items, n, choice, res);
    return 0;
}
