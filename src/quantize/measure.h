/* measure.h - per-tensor quantization error, measured once per model and
 * candidate format, for measured bit allocation (quant/alloc.h,
 * docs/mixed.md).
 *
 * Activation statistics are calibration's (calib/stats.h, one collector for
 * the whole project): for the input of every linear layer, each input
 * channel's second moment E[x_j^2] = in_sum2_j / counts (llama.cpp's
 * imatrix), and, when the calibration tokens are at hand, how often each
 * token id was fed (for the embedding table).
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

#include "calib/stats.h"
#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/plan.h"
#include "src/quantize/driver.h"
#include "src/quantize/kl_probe.h"

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
    /* How often each token id was fed (the embedding rows' weights), over
     * n_tokens tokens; NULL: rows weighted uniformly. */
    const double *token_count;
    int64_t n_vocab, n_tokens;
    /* Called before each tensor is measured; may be NULL. */
    void (*progress)(void *ctx, int64_t i, int64_t n, const char *name);
    void *progress_ctx;
} hfq_measure_opts;

/* Measures every tensor the plan may quantize (quant/plan.h's rules; the
 * output layer included) with every spec this build can encode; specs whose
 * block or group does not divide a tensor's rows get NAN. Needs statistics
 * for every such matrix (the embedding table only needs token counts, or is
 * weighted uniformly). */
int hfq_measure(const gguf_file *f, const hfq_calib_stats *st, const hfq_fmt_spec *specs, int n_specs,
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
