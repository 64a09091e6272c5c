/* measure.h - per-tensor quantization error, measured once per model and
 * candidate format, for measured bit allocation (quant/alloc.h,
 * docs/mixed.md).
 *
 * Activation statistics: for the input of every linear layer, each input
 * channel's second moment E[x_j^2] = sum x_j^2 / count over calibration
 * tokens run through the runner (its observer, kernels/graph.h), and how
 * often each token id was fed (for the embedding table). This is llama.cpp's
 * imatrix (<name>.in_sum2, <name>.counts), and can be read from such a file.
 *
 * The error of storing weight W (rows i, input channels j) in format Q is the
 * expected squared change of the layer's output per token:
 *
 *     E ||(W - Q(W)) x||^2  ~  sum_i sum_j (W_ij - Q(W)_ij)^2 E[x_j^2]
 *
 * The cross terms sum_{j != k} dW_ij dW_ik E[x_j x_k] are dropped: they vanish
 * when input channels are uncorrelated, or when rounding errors are
 * independent with mean zero, and keeping them would cost a product with the
 * full covariance per candidate. Q(W) is what a reader of the file gets
 * (the codec's decode of the encoded rows, scales included). Embedding rows
 * are weighted by token frequency: sum_t p(t) ||E_t - Q(E)_t||^2 (uniform p
 * when the statistics hold no token counts); a tied embedding adds both uses.
 * Rows are measured in parallel but summed in row order: the result does not
 * depend on the thread count.
 */
#ifndef HFQ_SRC_QUANTIZE_MEASURE_H
#define HFQ_SRC_QUANTIZE_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "kernels/graph.h"
#include "quant/plan.h"
#include "src/quantize/driver.h"

/* ---- activation statistics ---- */

typedef struct hfq_act_stats hfq_act_stats;

typedef struct hfq_calib_params {
    int64_t n_ctx;          /* tokens per chunk; <= 0: min(512, the model's context) */
    int64_t n_chunks;       /* <= 0: every whole chunk of the tokens */
    int n_threads;          /* <= 0: all */
    bool add_bos;           /* each chunk starts with bos_id, as llama.cpp's imatrix does */
    int32_t bos_id;
} hfq_calib_params;

/* Runs the tokens through the model chunk by chunk (each from an empty cache)
 * and accumulates the statistics; fails with fewer tokens than one chunk. */
hfq_act_stats *hfq_act_stats_collect(const hfq_model *m, const int32_t *tokens, int64_t n_tokens,
                                     const hfq_calib_params *p, hfq_error *err);
/* Reads llama.cpp's GGUF imatrix layout: F32 <name>.in_sum2 [n_in, n_mat] and
 * <name>.counts [1, n_mat] per weight; other tensors are ignored. Fails,
 * naming the file and tensor, on a missing or ill-shaped partner, negative or
 * non-finite values. */
hfq_act_stats *hfq_act_stats_from_imatrix(const gguf_file *f, hfq_error *err);
void hfq_act_stats_free(hfq_act_stats *s);
int64_t hfq_act_stats_n_entries(const hfq_act_stats *s);
int64_t hfq_act_stats_n_tokens(const hfq_act_stats *s);   /* tokens counted for the embedding (0: none) */
/* E[x_j^2] of weight `name`'s input, n_in values per matrix for n_mat
 * matrices (*n_mat_out: 1 when shared by all); NULL when absent or of another
 * width. */
const double *hfq_act_stats_moments(const hfq_act_stats *s, const char *name, int64_t n_in, int64_t *n_mat_out);

/* How many calibration chunks go side by side, each on its own context and
 * a share of n_threads: one per thread for tiny models (at most 2^24 matrix
 * elements, whose operations are too small to share), else 1. */
int hfq_measure_chunks_side_by_side(const hfq_model *m, int n_threads, int64_t n_chunks);

/* ---- KL probes ---- */

/* Calibrates the output error into the model's output: a tensor's measured
 * error e_k (per format k) becomes the predicted KL divergence
 * s * e_k, s = KL(base || base with this tensor alone stored in the
 * reference format r) / e_r, r being the tensor's format with the largest
 * error (the strongest signal). The KL divergence is second order in the
 * weight change, as e_k is, so one probe per tensor calibrates them all;
 * what it corrects is that equal output errors of different layers move the
 * logits very differently (the output layer's errors land on them directly). */
typedef struct hfq_kl_probe hfq_kl_probe;

/* The base model's log-probabilities over the first tokens: chunks of
 * p->n_ctx with BOS first, every position scored, at most max_scores
 * (position, vocabulary) values kept (fewer chunks for large vocabularies). */
hfq_kl_probe *hfq_kl_probe_new(const hfq_model *base, const int32_t *tokens, int64_t n_tokens,
                               const hfq_calib_params *p, int64_t max_scores, hfq_error *err);
void hfq_kl_probe_free(hfq_kl_probe *k);
int64_t hfq_kl_probe_n_tokens(const hfq_kl_probe *k);
/* Mean KL(base || model) per scored token, the model being the base with
 * one tensor replaced by `values` (F32, the tensor's shape). */
int hfq_kl_probe_run(hfq_kl_probe *k, const char *tensor_name, const float *values, double *kl, hfq_error *err);

/* ---- measurements ---- */

typedef struct hfq_measured_tensor {
    char *name;
    int64_t ne[4];
    double *err;            /* one per spec; NAN: the spec cannot hold this tensor's rows */
    int kl_ref;             /* the spec probed for the KL divergence, -1: not probed */
    double kl;              /* KL divergence with that spec */
} hfq_measured_tensor;

/* The error the solver minimises for spec k of t: the KL divergence
 * predicted from the probe (t->kl / t->err[kl_ref] * t->err[k]) when there
 * is one, else the output error; NAN when the spec cannot hold the rows. */
double hfq_measured_cost(const hfq_measured_tensor *t, int k);

typedef struct hfq_measurements {
    int n_specs;
    hfq_fmt_spec *specs;
    int64_t n_tensors;
    hfq_measured_tensor *tensors;
    char source[512];       /* what was measured on, for the record */
} hfq_measurements;

typedef struct hfq_measure_opts {
    int n_threads;                      /* <= 0: all */
    hfq_importance_source importance;   /* as the quantize run will use it; get NULL: none */
    hfq_kl_probe *probe;                /* NULL: output errors only */
    /* Called before each tensor is measured; may be NULL. */
    void (*progress)(void *ctx, int64_t i, int64_t n, const char *name);
    void *progress_ctx;
} hfq_measure_opts;

/* Measures every tensor the plan may quantize (quant/plan.h's rules; the
 * output layer included) with every spec this build can encode; specs whose
 * block or group does not divide a tensor's rows get NAN. Needs statistics
 * for every such matrix (the embedding table only needs token counts, or is
 * weighted uniformly). */
int hfq_measure(const gguf_file *f, const hfq_act_stats *st, const hfq_fmt_spec *specs, int n_specs,
                const hfq_measure_opts *o, hfq_measurements *out, hfq_error *err);
void hfq_measurements_free(hfq_measurements *m);
/* The tensor's entry, or NULL. */
const hfq_measured_tensor *hfq_measurements_find(const hfq_measurements *m, const char *name);

/* JSON file (docs/mixed.md), written atomically; numbers round-trip exactly. */
int hfq_measurements_save(const hfq_measurements *m, const char *path, hfq_error *err);
/* Reads and checks a file hfq_measurements_save wrote; one-line errors
 * naming the file and the problem. */
int hfq_measurements_load(hfq_measurements *m, const char *path, hfq_error *err);

#endif
