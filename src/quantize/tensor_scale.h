/* tensor_scale.h - with importance, the one scale of a tensor (NVFP4's
 * global scale, INT8/FP8 with one scale per tensor) chosen for the tensor's
 * importance-weighted error instead of its maximum alone.
 *
 * Searched: NVFP4 and INT8 per tensor (FP8 per tensor measured no gain).
 * Candidates are g0 * factor, g0 the amax-derived scale
 * (hfq_codec_global_scale); factor 1 (the reference) comes first. For each,
 * the rows are encoded as hfq_codec_encode_row does under that scale (NVFP4:
 * with its importance-searched sub-block scales) and decoded back, and the
 * error is sum over rows and columns of importance[j] * (x - x^)^2, summed in
 * row order (the same for any thread count). The caller sums the errors of
 * the tensors that must share a scale (fused.h) and keeps the least, the
 * reference on ties: never worse than the reference on that error.
 */
#ifndef HFQ_SRC_QUANTIZE_TENSOR_SCALE_H
#define HFQ_SRC_QUANTIZE_TENSOR_SCALE_H

#include <stdint.h>

#include "formats/error.h"
#include "src/quantize/codec.h"

#define HFQ_TENSOR_SCALE_MAX_CANDIDATES 32

/* The candidate factors for spec into factors[HFQ_TENSOR_SCALE_MAX_CANDIDATES],
 * factors[0] = 1; returns their count (0: spec has no tensor scale). */
int hfq_tensor_scale_factors(const hfq_fmt_spec *spec, float *factors);

/* err[k] = the weighted error of nrows decoded rows (rows, n_per_row each)
 * under the scale g0 * factors[k], k < n_factors; imp[r] the importance of
 * row r (n_per_row values); n_threads > 0 threads (the result does not
 * depend on them). Fails only out of memory. */
int hfq_tensor_scale_errors(const hfq_codec_job *job, float g0, const float *factors, int n_factors,
                            const float *rows, const float *const *imp, int64_t nrows, int n_threads, double *err,
                            hfq_error *err_out);

#endif
