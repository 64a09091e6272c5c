/* test_tensor_scale - the tensor-scale search's errors (src/quantize/tensor_scale.h)
 * against the format quantizers called directly: NVFP4 with importance under
 * each candidate global scale (quant/fp4.h) and INT8 per tensor
 * (quant/int8.h), decoded and weighted here, equal bit for bit; the candidate
 * ladders; a tensor with outliers picks a clipped INT8 scale, never worse
 * than the reference. */
#include <stdlib.h>

#include "check.h"
#include "formats/ggml_type.h"
#include "quant/fp4.h"
#include "quant/int8.h"
#include "quant_rng.h"
#include "src/quantize/tensor_scale.h"

#define ROWS 24
#define COLS 128

/* sum over rows, in order, of each row's importance-weighted squared error. */
static double direct_error(uint32_t fmt, const float *x, const float *imp, float g) {
    double err = 0.0;
    for (int r = 0; r < ROWS; r++) {
        uint8_t enc[COLS];
        float dec[COLS];
        hfq_block_nvfp4 blk[COLS / HFQ_QK_NVFP4];
        const float *xr = x + r * COLS;
        if (fmt == GT_NVFP4) {
            hfq_quantize_nvfp4(xr, blk, 1, COLS, imp, g);
            hfq_dequantize_row_nvfp4(blk, dec, COLS);
            for (int j = 0; j < COLS; j++) dec[j] *= g;
        } else {
            hfq_quantize_int8_static(xr, enc, 1, COLS, g);
            hfq_dequantize_row_int8(enc, dec, COLS, &g, 0);
        }
        double e = 0.0;
        for (int j = 0; j < COLS; j++) {
            const double d = (double)xr[j] - (double)dec[j];
            e += (double)imp[j] * d * d;
        }
        err += e;
    }
    return err;
}

static void check_format(uint32_t fmt, const float *x, const float *imp) {
    /* NVFP4's global scale is its own; INT8 takes it from the granularity */
    const hfq_fmt_spec spec = {fmt, fmt == GT_NVFP4 ? HFQ_SCALE_PER_ROW : HFQ_SCALE_PER_TENSOR};
    const gguf_tensor_info t = {.name = "t", .type = GT_F32, .n_dims = 2, .ne = {COLS, ROWS, 1, 1}};
    hfq_codec_job job;
    hfq_error err;
    if (hfq_codec_begin(&job, &t, &spec, &err) < 0) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    float amax = 0.0f;
    for (int i = 0; i < ROWS * COLS; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float g0 = hfq_codec_global_scale(&spec, amax);
    float factors[HFQ_TENSOR_SCALE_MAX_CANDIDATES];
    const int n = hfq_tensor_scale_factors(&spec, factors);
    CHECK(n == (fmt == GT_NVFP4 ? 12 : 32) && factors[0] == 1.0f);
    const float *imps[ROWS];
    for (int r = 0; r < ROWS; r++) imps[r] = imp;
    double errs[HFQ_TENSOR_SCALE_MAX_CANDIDATES];
    CHECK(hfq_tensor_scale_errors(&job, g0, factors, n, x, imps, ROWS, 2, errs, &err) == 0);
    double errs1[HFQ_TENSOR_SCALE_MAX_CANDIDATES]; /* one thread: the same sums */
    CHECK(hfq_tensor_scale_errors(&job, g0, factors, n, x, imps, ROWS, 1, errs1, &err) == 0);
    for (int k = 0; k < n; k++) CHECK(errs1[k] == errs[k]);
    int best = 0;
    for (int k = 0; k < n; k++) {
        const double want = direct_error(fmt, x, imp, g0 * factors[k]);
        CHECK_MSG(errs[k] == want, "fmt %u candidate %d: %.17g vs %.17g", fmt, k, errs[k], want);
        if (errs[k] < errs[best]) best = k;
    }
    /* outliers: a clipped INT8 scale beats amax / 127 */
    if (fmt == HFQ_FMT_INT8) CHECK(best > 0 && factors[best] < 1.0f && errs[best] < errs[0]);
}

int main(void) {
    float *x = malloc(ROWS * COLS * sizeof *x), imp[COLS];
    if (!x) return 1;
    rnd_seed(21);
    for (int i = 0; i < ROWS * COLS; i++) x[i] = 0.05f * rnd_gauss();
    x[7] = 1.5f; /* one outlier far above the rest */
    x[COLS * 5 + 3] = -0.9f;
    for (int j = 0; j < COLS; j++) imp[j] = 0.1f + rnd_uniform();
    check_format(GT_NVFP4, x, imp);
    check_format(HFQ_FMT_INT8, x, imp);
    /* FP8 per tensor and per-row formats are not searched */
    float f[HFQ_TENSOR_SCALE_MAX_CANDIDATES];
    CHECK(hfq_tensor_scale_factors(&(hfq_fmt_spec){HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_TENSOR}, f) == 0);
    CHECK(hfq_tensor_scale_factors(&(hfq_fmt_spec){HFQ_FMT_INT8, HFQ_SCALE_PER_ROW}, f) == 0);
    free(x);
    return check_exit();
}
