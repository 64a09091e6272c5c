/* kv_stats.h - the KV cache's statistics of a calibration run: the maximum
 * |K| (after rope, as the cache stores it) and |V| per layer and kv head
 * (calib/stats.h k_amax, v_amax), and the static FP8 scales they give
 * (quant/kv_scales.h: per layer, the maximum over its heads / 448). */
#ifndef HFQ_CALIB_KV_STATS_H
#define HFQ_CALIB_KV_STATS_H

#include <stdint.h>

#include "calib/stats.h"
#include "formats/error.h"

/* Adds one batch of layer `layer` (of n_layer): k, v [n_tokens][n_head_kv *
 * head_dim]. The first call sizes the maxima; a later one with another
 * n_layer / n_head_kv fails. */
int hfq_calib_kv_add(hfq_calib_stats *s, int64_t layer, int64_t n_layer, const float *k, const float *v,
                     int64_t n_tokens, int64_t n_head_kv, int64_t head_dim, hfq_error *err);

/* Fails, naming `where`, unless s holds maxima for n_layer layers of
 * n_head_kv heads. */
int hfq_calib_kv_check(const hfq_calib_stats *s, int64_t n_layer, int64_t n_head_kv, const char *where,
                       hfq_error *err);

/* Per-layer stored scales (quant/kv_scales.h) k, v [kv_layers] of s's maxima. */
void hfq_calib_kv_scales(const hfq_calib_stats *s, float *k, float *v);

#endif
