/* driver.h - quantize a GGUF file tensor by tensor (the `quantize` tool's work).
 *
 * The input is planned with quant/plan.h, then streamed: each converted
 * tensor is read in slabs of whole rows (never crossing an expert matrix),
 * decoded to float, checked for NaN/Inf, quantized with OpenMP over rows and
 * appended to the output through the GGUF writer (temporary file + rename).
 * Rows are independent, so the bytes do not depend on the thread count.
 * Tensors the plan leaves alone are copied byte for byte. NVFP4 weights of a
 * fused group (q/k/v, gate/up: src/quantize/fused.h) share one global scale.
 *
 * The output keeps every metadata key of the input except the split keys and
 * the writer's hash key, and sets general.quantization_version = 2,
 * general.file_type (hfq_preset_file_type) and hfq.quantize.* (tool version,
 * preset, overrides and options, recipe and budget).
 */
#ifndef HFQ_SRC_QUANTIZE_DRIVER_H
#define HFQ_SRC_QUANTIZE_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/plan.h"

/* Importance weights (calibration). get returns n_per_row * n_mats floats -
 * one row of weights per 2-D matrix of the tensor (n_mats = ne[2]*ne[3], the
 * experts) - for the named tensor, or NULL when it has none. The pointer must
 * stay valid until the tensor is written. has says, without computing them,
 * whether get would return rows (the output records, before any tensor is
 * written, which tensors were rounded with importance); NULL: get is taken
 * to have rows for every tensor it is asked about. */
typedef struct hfq_importance_source {
    const float *(*get)(void *ctx, const char *tensor_name, int64_t n_per_row, int64_t n_mats);
    void *ctx;
    bool (*has)(void *ctx, const char *tensor_name, int64_t n_per_row, int64_t n_mats);
} hfq_importance_source;

/* What calibration changes in a write, counted before it starts
 * (hfq_quantize_effect), so the output's metadata can say it and the tool
 * can say what it cannot change. */
#define HFQ_EFFECT_MAX_UNUSED 8
typedef struct hfq_write_effect {
    int64_t n_importance;       /* converted tensors rounded with importance */
    int64_t n_rescaled;         /* tensors whose values calibration multiplies (SmoothQuant/AWQ) */
    int64_t n_input_scales;     /* "<base>.input_scale" tensors written */
    int64_t n_gptq;             /* converted tensors rounded by GPTQ (hfq_gptq_source) */
    /* importance rows given to quantized formats that cannot use them: how
     * many tensors per format, and why (hfq_codec_importance_unused) */
    int n_unused;
    struct {
        hfq_fmt_spec spec;
        int64_t n;
        const char *why;
    } unused[HFQ_EFFECT_MAX_UNUSED];
} hfq_write_effect;

/* Changes calibration makes to a tensor (src/quantize/calib_session.h). */
typedef struct hfq_tensor_adjust {
    const float *col_scale;   /* ne0 multipliers of every row's elements, or NULL */
    const float *row_scale;   /* one multiplier per row (ne1 * ne2 * ne3), or NULL */
    float input_scale;        /* > 0: "<base>.input_scale" (F32 [1]) follows the tensor */
} hfq_tensor_adjust;

/* get fills *out for tensor `name` converted to fmt (its own type when it is
 * copied): values are multiplied before encoding (a copied tensor with
 * multipliers is re-encoded to its own type, which must be F32/F16/BF16);
 * metadata adds keys to the output (may be NULL), knowing what the write
 * changes. */
typedef struct hfq_adjust_source {
    void (*get)(void *ctx, const char *name, uint32_t fmt, hfq_tensor_adjust *out);
    int (*metadata)(void *ctx, gguf_writer *w, const hfq_write_effect *effect);
    void *ctx;
} hfq_adjust_source;

/* GPTQ's inverse Hessians (quant/gptq.h). has says whether tensor `name`
 * (one matrix of n_per_row columns) has one; get returns its U
 * [n_per_row][n_per_row], valid until the next get, or NULL with err set
 * (a calibration pass failed, a Hessian not positive definite). A tensor
 * with one whose format has a GPTQ codec (quant/gptq_codec.h) is encoded by
 * hfq_gptq_encode, importance rows included; experts (3-D tensors) and the
 * token embedding (its rows are also looked up) are not. */
typedef struct hfq_gptq_source {
    bool (*has)(void *ctx, const char *name, int64_t n_per_row);
    const double *(*get)(void *ctx, const char *name, int64_t n_per_row, hfq_error *err);
    void *ctx;
    double damp;                    /* recorded as hfq.quantize.gptq_damp */
    int64_t batch;                  /* lazy batch (quant/gptq.h); <= 0: the default */
    /* Act-order (may be NULL: column order): the column order of the U get
     * returned last for `name` (hfq_gptq_encode_perm). */
    const int64_t *(*perm)(void *ctx, const char *name);
    /* Sequential GPTQ (may be NULL): each converted matrix's rows (2-D
     * tensors, row r of n_rows) as a reader of the output decodes them,
     * column and row multipliers undone, once written; -1: out of memory. */
    int (*encoded)(void *ctx, const char *name, int64_t n_rows, int64_t n_per_row, int64_t r, const float *row);
    /* GPTQ against quantized inputs (may be NULL, or return NULL: none):
     * the [n][n] M of the U get returned last for `name`; every row w of
     * the tensor, multiplied as its adjust says, becomes w + w M before its
     * maximum is taken and it is rounded (quant/gptq.h's target shift). */
    const double *(*shift)(void *ctx, const char *name);
} hfq_gptq_source;

typedef struct hfq_quantize_opts {
    hfq_plan_opts plan;
    int n_threads;                  /* 0: OpenMP's default */
    int64_t slab_floats;            /* floats decoded at a time; 0: 16 Mi (at least one row is) */
    bool allow_requantize;          /* convert tensors that are already quantized */
    const char *const *override_args; /* the --tensor-type arguments, recorded in the metadata */
    int n_override_args;
    hfq_importance_source importance; /* get == NULL: none */
    hfq_adjust_source adjust;       /* get == NULL: none */
    hfq_gptq_source gptq;           /* get == NULL: none */
    const char *recipe_name;        /* recorded as hfq.quantize.recipe; NULL: none */
    int64_t target_bytes;           /* measured allocation's budget, recorded as hfq.quantize.target_bytes; 0: none */
    /* Called before each tensor is written (i counts from 0); may be NULL. */
    void (*progress)(void *ctx, int64_t i, int64_t n, const char *name, uint32_t fmt);
    void *progress_ctx;
} hfq_quantize_opts;

/* Options with every field at its default for the preset. */
hfq_quantize_opts hfq_quantize_opts_default(hfq_preset preset);

/* Reads the hyper-parameters the plan needs from general.architecture and the
 * "{arch}.*" keys. */
int hfq_plan_model_from_gguf(const gguf_file *f, hfq_plan_model *m, hfq_error *err);

/* Plans every tensor of f (entries in f's tensor order). */
int hfq_quantize_plan(const gguf_file *f, const hfq_plan_opts *opts, hfq_plan *plan, hfq_error *err);

/* Every refusal hfq_quantize_write makes before writing (quantized input
 * without allow_requantize, a type the codec cannot read, calibration
 * rescaling a tensor stored quantized, names too long for their scale
 * tensors), so a dry run and the planning phase of a real run fail exactly
 * where the write would. A format this build cannot produce is refused only
 * with need_encode (a dry run plans every preset: docs/quantize-tool.md). */
int hfq_quantize_check(const gguf_file *f, const hfq_plan *plan, const hfq_quantize_opts *opts, bool need_encode,
                       hfq_error *err);

/* What the write of plan with opts would change (importance, multipliers,
 * input scales), tensor by tensor; the same counts the metadata callback
 * gets. */
int hfq_quantize_effect(const gguf_file *f, const hfq_plan *plan, const hfq_quantize_opts *opts,
                        hfq_write_effect *out, hfq_error *err);

/* Writes out_path from f following plan (made by hfq_quantize_plan with
 * opts->plan). Fails, leaving nothing at out_path, on I/O errors, NaN/Inf
 * input (naming the tensor), or anything hfq_quantize_check refuses. The
 * output records hfq.quantize.importance (true when at least one tensor was
 * rounded with importance) and hfq.quantize.importance_tensors (their
 * names). */
int hfq_quantize_write(const gguf_file *f, const hfq_plan *plan, const char *out_path,
                       const hfq_quantize_opts *opts, hfq_error *err);

#endif
