/* scale_search.h - the scale searches behind ggml's integer quantizers.
 *
 * Each search picks a scale (and for affine formats a min) for a small group
 * of values and the integer levels that go with it, minimising a weighted
 * error over a fixed ladder of candidate scales. They reproduce ggml's
 * make_qx_quants (rmse_type 1), make_qkx2/make_qkx3_quants (which coincide
 * once weights are given), make_q3_quants and make_qp_quants bit for bit:
 * same candidates, same float expressions in the same order, same
 * tie-breaking. That is the whole point of them, so any change here must keep
 * tests/test_quant_ref passing.
 *
 * Internal to quant/: callers use the format quantizers.
 */
#ifndef HFQ_QUANT_SCALE_SEARCH_H
#define HFQ_QUANT_SCALE_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/block_math.h"
#include "quant/isa.h"

static inline int hfq_clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- the level of one value, as the searches and the final passes compute
 * it (shared with the GPTQ codecs, which round one value at a time) ---- */

/* Symmetric level under a candidate inverse scale: in [-nmax, nmax - 1]. */
static inline int hfq_level_symmetric(float iscale, float x, int nmax) {
    return hfq_clamp_int(hfq_nearest_int(iscale * x), -nmax, nmax - 1);
}

/* Affine level under a candidate inverse scale and min: in [0, nmax]. */
static inline int hfq_level_affine(float iscale, float x, float min, int nmax) {
    return hfq_clamp_int(hfq_nearest_int(iscale * (x - min)), 0, nmax);
}

/* Level against a stored scale d and offset m (hfq_requantize_affine). */
static inline int hfq_relevel_affine(float x, float d, float m, int nmax) {
    return hfq_clamp_int(hfq_nearest_int((x + m) / d), 0, nmax);
}

/* Level against a stored scale d, biased by nmax (hfq_requantize_symmetric). */
static inline int hfq_relevel_symmetric(float x, float d, int nmax) {
    return hfq_clamp_int(hfq_nearest_int(x / d), -nmax, nmax - 1) + nmax;
}

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

/* The same, also giving the inverse scale the levels were rounded with:
 * L[i] = hfq_level_symmetric(*iscale, x[i], nmax) + nmax; *iscale is 0
 * for an all-zero group (whose levels are all 0). */
float hfq_search_symmetric_iscale(int n, int nmax, const float *x, const float *w, int8_t *L, float *iscale);

/* Largest group hfq_search_affine takes (ggml's are 32). */
#define HFQ_AFFINE_MAX_N 32

/* Affine levels: x ~ scale * L - neg_min, L in [0, nmax], min <= 0. Starts at
 * the range fit, then tries nstep + 1 scales (nmax + rmin + rdelta * i) /
 * range with a least-squares scale and min each, keeping the one of least
 * weighted squared error (abs_error: absolute error, ggml's use_mad, which
 * only Q2_K's reference quantizer uses). w must not be NULL; n at most
 * HFQ_AFFINE_MAX_N. Returns scale; *neg_min gets -min (>= 0). */
float hfq_search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                        float rdelta, int nstep, bool abs_error);

/* The same, also giving the inverse scale and min the levels were rounded
 * with: L[i] = hfq_level_affine(*iscale, x[i], *min, nmax) (0 and 0 for a
 * constant group, whose levels are all 0). */
float hfq_search_affine_map(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                            float rdelta, int nstep, bool abs_error, float *iscale, float *min);

/* Symmetric levels as hfq_search_symmetric, weights x^2, from the one
 * scale mapping the signed extreme to -nmax, then single levels moved to
 * their least-squares value for up to 5 rounds (ggml's make_q3_quants with
 * do_rmse, Q3_K's reference). L in [0, 2 nmax - 1]; all L = 0 and 0 for an
 * all-zero group. Returns the least-squares scale. */
float hfq_search_symmetric_refined(int n, int nmax, const float *x, int8_t *L);

/* Non-negative levels for non-negative values (the K-quant sub-block scales
 * and mins): x ~ scale * L, L in [0, nmax], weights w. Tries 9 scales, then
 * improves single levels for up to 5 rounds. Returns scale. */
float hfq_search_positive(int n, int nmax, const float *x, const float *w, uint8_t *L);

/* ---- eight groups at once ----
 *
 * Group g holds x[n g .. n g + n) (weights and levels likewise). The results
 * equal eight calls of the one-group search for every isa: the AVX2 kernels
 * run group g in lane g with the scalar code's float operations in its
 * order, so each lane rounds exactly as the scalar code. */

/* hfq_search_affine on each group; scale[g], neg_min[g] its results. */
void hfq_search_affine_x8(hfq_isa isa, int n, int nmax, const float *x, const float *w, uint8_t *L, float scale[8],
                          float neg_min[8], float rmin, float rdelta, int nstep);

/* Largest group hfq_search_symmetric_x8 takes. */
#define HFQ_SYMMETRIC_X8_MAX_N 32

/* hfq_search_symmetric on each group (w NULL: x^2); scale[g] its result. */
void hfq_search_symmetric_x8(hfq_isa isa, int n, int nmax, const float *x, const float *w, int8_t *L,
                             float scale[8]);

/* Levels against a stored scale d and offset m (the final pass of the
 * K-quants): L[i] = clamp(nearest_int((x[i] + m) / d), 0, nmax). */
void hfq_requantize_affine(hfq_isa isa, int n, int nmax, const float *x, float d, float m, uint8_t *L);

/* L[i] = clamp(nearest_int(x[i] / d), -nmax, nmax - 1) + nmax. */
void hfq_requantize_symmetric(hfq_isa isa, int n, int nmax, const float *x, float d, int8_t *L);


#endif
