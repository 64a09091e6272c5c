/* sample.h - picking the next token from logits.
 *
 * temp <= 0: greedy (the highest logit; the lowest id on ties). Otherwise,
 * in llama.cpp's order: keep the top_k highest logits (top_k <= 0: all),
 * then the smallest set of those whose probabilities (softmax of the logits)
 * reach top_p (top_p >= 1: all), then divide the logits by temp and draw
 * from their softmax with a seeded generator: the same seed and logits give
 * the same tokens. Ties in logits are ordered by id, so results do not depend
 * on the sort.
 */
#ifndef HFQ_SRC_EVAL_SAMPLE_H
#define HFQ_SRC_EVAL_SAMPLE_H

#include <stdint.h>

#include "formats/error.h"

typedef struct hfq_sampler_params {
    float temp;
    int top_k;
    float top_p;
    uint64_t seed;
} hfq_sampler_params;

typedef struct hfq_sampler hfq_sampler;

hfq_sampler *hfq_sampler_new(int64_t n_vocab, const hfq_sampler_params *p, hfq_error *err);
void hfq_sampler_free(hfq_sampler *s);
/* Bytes hfq_sampler_new allocates for n_vocab tokens (memory plans). */
int64_t hfq_sampler_bytes(int64_t n_vocab);

/* The next token for logits[0..n_vocab). */
int32_t hfq_sample(hfq_sampler *s, const float *logits);

#endif
