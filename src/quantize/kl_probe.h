/* kl_probe.h - KL probes for measured bit allocation (src/quantize/measure.h).
 *
 * Calibrates a tensor's measured output error into the model's output: a
 * tensor's error e_k (per format k) becomes the predicted KL divergence
 * s * e_k, s = KL(base || base with this tensor alone stored in the
 * reference format r) / e_r, r being the tensor's format with the largest
 * error (the strongest signal). The KL divergence is second order in the
 * weight change, as e_k is, so one probe per tensor calibrates them all;
 * what it corrects is that equal output errors of different layers move the
 * logits very differently (the output layer's errors land on them directly).
 *
 * The probe keeps the base model's log-probabilities over the first
 * calibration chunks (every position scored) and measures, per tensor, the
 * mean KL(base || base with that tensor replaced). Chunks of tiny models
 * (hfq_model_is_tiny) run side by side, one per thread; sums are taken in
 * chunk order, so results do not depend on the thread count.
 */
#ifndef HFQ_SRC_QUANTIZE_KL_PROBE_H
#define HFQ_SRC_QUANTIZE_KL_PROBE_H

#include <stdint.h>

#include "calib/calibrate.h"
#include "formats/error.h"
#include "kernels/model.h"

typedef struct hfq_kl_probe hfq_kl_probe;

/* The base's log-probabilities over the first max_chunks sequences of seqs
 * (calibration chunks, BOS placed: all of one length), at most max_scores
 * (position, vocabulary) values kept (fewer chunks for large vocabularies).
 * Fails when seqs are not chunks of one length or none fits. */
hfq_kl_probe *hfq_kl_probe_new(const hfq_model *base, const hfq_calib_seqs *seqs, int64_t max_chunks,
                               int n_threads, int64_t max_scores, hfq_error *err);
void hfq_kl_probe_free(hfq_kl_probe *k);
int64_t hfq_kl_probe_n_tokens(const hfq_kl_probe *k);
/* Mean KL(base || model) per scored token, the model being the base with
 * one tensor replaced by `values` (F32, the tensor's shape). */
int hfq_kl_probe_run(hfq_kl_probe *k, const char *tensor_name, const float *values, double *kl, hfq_error *err);

#endif
