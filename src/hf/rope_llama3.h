/* rope_llama3.h - Llama 3 rope scaling as llama.cpp stores it: one factor per
 * rotary frequency in rope_freqs.weight (F32, head_dim / 2 values), computed
 * in float32 as llama.cpp's converter computes them (conversion/llama.py
 * generate_extra_tensors), and the way back to config.json's parameters.
 *
 * Frequency i has wavelength w = 2 pi base^(2i / head_dim); with L the
 * original context, lo / hi the low / high frequency factors: w < L / hi
 * keeps 1, w > L / lo takes `factor`, between them
 * s = (L / w - lo) / (hi - lo) gives 1 / ((1 - s) / factor + s).
 * Only L / lo and L / hi shape the factors (transformers' llama3 rope is the
 * same formula), so the way back fixes lo = 1.
 */
#ifndef HFQ_SRC_HF_ROPE_LLAMA3_H
#define HFQ_SRC_HF_ROPE_LLAMA3_H

#include <stdint.h>

typedef struct hf_llama3_rope {
    double theta;                 /* rope base */
    int64_t head_dim;
    int64_t original_context;     /* original_max_position_embeddings */
    double factor, low_freq_factor, high_freq_factor;
} hf_llama3_rope;

/* The n = head_dim / 2 factors of rope_freqs.weight. */
void hf_llama3_rope_factors(const hf_llama3_rope *p, float *out, int64_t n);

/* Parameters (theta and head_dim given in p) whose factors equal the n given
 * ones bit for bit: factor the largest, low_freq_factor 1, the original
 * context and high_freq_factor solved from the smoothed frequencies (at least
 * two are needed) and rounded to the shortest values that still reproduce
 * every factor. Returns 0, or -1 with *why saying what fails. */
int hf_llama3_rope_recover(const float *factors, int64_t n, hf_llama3_rope *p, const char **why);

#endif
