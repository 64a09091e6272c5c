/* mixed_run.h - the quantize tool's mixed-precision job as one library call
 * (docs/mixed.md): statistics from calibration (src/quantize/calib_session.h),
 * per-tensor errors measured on them or read from a file
 * (src/quantize/measure.h), a recipe and/or a size budget turned into a plan
 * (src/quantize/mixed_plan.h), and the plan written (src/quantize/driver.h).
 *
 * Order: every check that needs no measuring (the recipe against the model,
 * the statistics against the model) comes first, so a bad input fails
 * before minutes of measuring; the plan is checked as the write checks it
 * (hfq_quantize_check) in a dry run too. The statistics serve twice: the measurement,
 * and the uses of calibration in the write (importance-weighted rounding by
 * default, as with a preset). Measurement sees the statistics before any
 * SmoothQuant/AWQ fold (the folds need the plan the measurement decides).
 */
#ifndef HFQ_SRC_QUANTIZE_MIXED_RUN_H
#define HFQ_SRC_QUANTIZE_MIXED_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/plan.h"
#include "src/quantize/calib_session.h"
#include "src/quantize/driver.h"
#include "src/quantize/measure.h"
#include "src/quantize/mixed_plan.h"

/* The formats measured and chosen from when none are named: ggml formats
 * and the FP4 ones (their activations are quantized per block as ggml
 * does); INT8/FP8 quantize activations per token in the runner, which the
 * weight-only measurement does not see, so they are asked for by name. */
#define HFQ_MIXED_DEFAULT_CANDIDATES "q4_0,q5_0,q5_1,q8_0,q4_K,q5_K,q6_K,mxfp4,nvfp4,f16"
/* Calibration chunks measured on when --calib-chunks is not given. */
#define HFQ_MIXED_DEFAULT_CHUNKS 64

typedef struct hfq_mixed_job {
    const char *in;                 /* the model (also named in errors) */
    const char *out;                /* NULL: nothing written (dry run, or measuring only) */
    const char *recipe_path;        /* NULL: none */
    double target_bpw;              /* > 0: budget in bits per weight of all tensors */
    int64_t target_size;            /* > 0: budget in bytes of tensor data */
    const char *meas_in;            /* measurements saved earlier, or NULL */
    const char *meas_out;           /* save the measurements made now, or NULL */
    int64_t kl_chunks;              /* chunks of the KL probes (0: output errors only) */
    const hfq_fmt_spec *candidates; /* NULL: HFQ_MIXED_DEFAULT_CANDIDATES */
    int n_candidates;
    hfq_calib_opts calib;           /* text_path or stats_path: statistics to measure on and use */
    hfq_quantize_opts q;            /* plan options, threads, progress; importance/adjust set here */
    /* called before each tensor is measured; may be NULL */
    void (*measure_progress)(void *ctx, int64_t i, int64_t n, const char *name);
    void *measure_progress_ctx;
} hfq_mixed_job;

typedef struct hfq_mixed_result {
    hfq_plan plan;                  /* empty when only measuring */
    hfq_mixed_report rep;
    hfq_measurements meas;          /* what was measured or read (empty when neither) */
    int64_t written_bytes;          /* tensor data written; -1: nothing written */
    uint64_t file_size;
    int64_t n_folded;               /* groups SmoothQuant/AWQ folded */
    /* with statistics: what they change in the plan (a dry run: importance
     * only, no folds are computed) */
    bool effect_known;
    hfq_write_effect effect;
} hfq_mixed_result;

/* True when the job only measures (saves measurements, plans nothing). */
bool hfq_mixed_measure_only(const hfq_mixed_job *job);

/* Runs the job on f (opened from job->in). res is filled even on failure,
 * for hfq_mixed_result_free. Fails with one line naming the file. */
int hfq_mixed_run(hfq_mixed_job *job, const gguf_file *f, hfq_mixed_result *res, hfq_error *err);
void hfq_mixed_result_free(hfq_mixed_result *res);

#endif
