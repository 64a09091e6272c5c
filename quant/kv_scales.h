/* kv_scales.h - static FP8 KV-cache scales as a GGUF stores them
 * (docs/format-quant-ext.md, "Static KV-cache scales").
 *
 * Two metadata keys (not tensors: llama.cpp's loader refuses tensors it does
 * not know, and ignores keys), both or neither:
 *   hfq.kv_cache.k_scale   F32 array, one value per layer
 *   hfq.kv_cache.v_scale   F32 array, one value per layer
 * Each value is what vLLM's and compressed-tensors' per-tensor k_scale /
 * v_scale mean: the E4M3 scale, calibrated max |K| (after rope, as the cache
 * stores it) or max |V| of the layer over 448, so K ~= scale * e4m3(code) with
 * code = e4m3(K / scale) rounded to nearest even and saturated. An E5M2 cache
 * takes the same maximum over 57344 (hfq_kv_scale_as). Values are finite and
 * > 0 (an all-zero layer has FLT_EPSILON, as compressed-tensors clamps it).
 */
#ifndef HFQ_QUANT_KV_SCALES_H
#define HFQ_QUANT_KV_SCALES_H

#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/fp8.h"

#define HFQ_KV_KEY_K_SCALE "hfq.kv_cache.k_scale"
#define HFQ_KV_KEY_V_SCALE "hfq.kv_cache.v_scale"

/* The stored (E4M3) scale of a layer whose maximum |x| is amax. */
float hfq_kv_scale_of_amax(float amax);

/* The scale codes of format fmt take, from a stored (E4M3) scale. */
float hfq_kv_scale_as(hfq_fp8_format fmt, float stored);

/* Reads f's scales for n_layer layers into k and v (malloc'd, n_layer each);
 * both NULL (and 0) when f has neither key. Fails naming the file and key
 * when only one is present, a key is not an F32 array of n_layer values, or
 * a value is not finite and > 0. */
int hfq_kv_scales_read(const gguf_file *f, int64_t n_layer, float **k, float **v, hfq_error *err);

/* Sets both keys on w (n_layer values each, checked as the reader does:
 * -1 with err naming `where` otherwise). */
int hfq_kv_scales_write(gguf_writer *w, const float *k, const float *v, int64_t n_layer, const char *where,
                        hfq_error *err);

#endif
