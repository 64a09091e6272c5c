/* tensor_scale.c - see src/quantize/tensor_scale.h. */
#include "src/quantize/tensor_scale.h"

#include <math.h>
#include <stdlib.h>

#include "formats/ggml_type.h"

/* NVFP4: 2^(k/8), k = 0, -2..9 - every alignment of the sub-block scales to
 * the E4M3 grid, and above 1 room for the top sub-blocks' max -> 4 (their
 * max -> 6 code is already 448); below 1 clips. INT8: 2^(-k/32), k = 0..31,
 * clipping down to half the maximum. (FP8 per tensor is not searched:
 * hfq_codec_importance_unused.) */
int hfq_tensor_scale_factors(const hfq_fmt_spec *spec, float *factors) {
    if (!hfq_codec_needs_amax(spec) || (spec->fmt != GT_NVFP4 && spec->fmt != HFQ_FMT_INT8)) return 0;
    const int lo = spec->fmt == GT_NVFP4 ? -2 : -31, hi = spec->fmt == GT_NVFP4 ? 9 : 0;
    const int div = spec->fmt == GT_NVFP4 ? 8 : 32;
    int n = 0;
    factors[n++] = 1.0f;
    for (int k = lo; k <= hi; k++)
        if (k != 0) factors[n++] = exp2f((float)k / (float)div);
    return n;
}

int hfq_tensor_scale_errors(const hfq_codec_job *job, float g0, const float *factors, int n_factors,
                            const float *rows, const float *const *imp, int64_t nrows, int n_threads, double *err,
                            hfq_error *err_out) {
    const int64_t n = job->n_per_row;
    double *per_row = malloc((size_t)(nrows * n_factors + 1) * sizeof *per_row);
    if (!per_row) return hfq_fail(err_out, "tensor scale search", "out of memory");
    int failed = 0;
#pragma omp parallel num_threads(n_threads > 0 ? n_threads : 1) reduction(| : failed)
    {
        uint8_t *enc = malloc(job->out_row_bytes + 1);
        float *dec = malloc((size_t)n * sizeof *dec);
        float row_scale = 0.0f; /* unused: tensor-scaled formats have no row scales */
        failed = !enc || !dec;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < nrows; r++) {
            for (int k = 0; k < n_factors && !failed; k++) {
                hfq_codec_job jk = *job;
                jk.global_scale = g0 * factors[k];
                const float *x = rows + r * n;
                hfq_codec_encode_row(&jk, x, enc, imp[r], &row_scale);
                hfq_codec_decode_encoded_row(&jk, enc, &row_scale, dec);
                double e = 0.0;
                for (int64_t j = 0; j < n; j++) {
                    const double diff = (double)x[j] - (double)dec[j];
                    e += (double)imp[r][j] * diff * diff;
                }
                per_row[r * n_factors + k] = e;
            }
        }
        free(enc);
        free(dec);
    }
    if (failed) {
        free(per_row);
        return hfq_fail(err_out, "tensor scale search", "out of memory");
    }
    for (int k = 0; k < n_factors; k++) {
        err[k] = 0.0;
        for (int64_t r = 0; r < nrows; r++) err[k] += per_row[r * n_factors + k];
    }
    free(per_row);
    return 0;
}
