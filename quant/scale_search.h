/* scale_search.h - the scale searches behind ggml's integer quantizers.
 *
 * Each search picks a scale (and for affine formats a min) for a small group
 * of values and the integer levels that go with it, minimising a weighted
 * squared error over a fixed ladder of candidate scales. They reproduce
 * ggml's make_qx_quants (rmse_type 1), make_qkx2/make_qkx3_quants (squared
 * error, which coincide once weights are given) and make_qp_quants bit for
 * bit: same candidates, same float expressions in the same order, same
 * tie-breaking. That is the whole point of them, so any change here must keep
 * tests/test_quant_ref passing.
 *
 * Internal to quant/: callers use the format quantizers.
 */
#ifndef HFQ_QUANT_SCALE_SEARCH_H
#define HFQ_QUANT_SCALE_SEARCH_H

#include <stdint.h>

/* ggml's threshold below which a group counts as all zero. */
#define HFQ_GROUP_MAX_EPS 1e-15f

/* ggml's importance-weighted error weights: w[i] = importance[i] *
 * sqrt(sigma2 + x[i]^2), where sigma2 is a mean square of the surrounding
 * values (the row for Q4_0/Q5_0/Q5_1, twice the super-block's for K-quants):
 * large values matter more, but small ones never drop to zero weight. */
void hfq_importance_weights(int n, const float *x, const float *importance, float sigma2, float *w);

/* sum of x[i]^2 over n values, accumulated in order (as ggml). */
float hfq_sum_squares(int64_t n, const float *x);

/* Symmetric levels: x ~ scale * (L - nmax), L in [0, 2 nmax - 1]. Weights w
 * (NULL: x^2). Tries 19 scales around the one mapping the signed extreme to
 * -nmax and keeps the best weighted least-squares fit. Returns scale (0 with
 * all L = 0 for an all-zero group). */
float hfq_search_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L);

/* Largest group hfq_search_affine takes (ggml's are 32). */
#define HFQ_AFFINE_MAX_N 32

/* Affine levels: x ~ scale * L - neg_min, L in [0, nmax], min <= 0. Starts at
 * the range fit, then tries nstep + 1 scales (nmax + rmin + rdelta * i) /
 * range with a least-squares scale and min each. w must not be NULL; n at
 * most HFQ_AFFINE_MAX_N. Returns scale; *neg_min gets -min (>= 0). */
float hfq_search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                        float rdelta, int nstep);

/* Non-negative levels for non-negative values (the K-quant sub-block scales
 * and mins): x ~ scale * L, L in [0, nmax], weights w. Tries 9 scales, then
 * improves single levels for up to 5 rounds. Returns scale. */
float hfq_search_positive(int n, int nmax, const float *x, const float *w, uint8_t *L);

#endif
