/* ct_kv.h - a compressed-tensors checkpoint's static FP8 KV cache as the
 * GGUF's hfq.kv_cache.k_scale / v_scale (quant/kv_scales.h).
 *
 * quantization_config.kv_cache_scheme as llm-compressor writes an FP8 KV
 * cache: num_bits 8, type "float", strategy "tensor", dynamic false,
 * symmetric true (group_size / block_structure null); anything else (other
 * strategies, dynamic scales, integer types, asymmetric) is refused in one
 * line naming the field. Its scales: model.layers.N.self_attn.k_scale and
 * v_scale, one value each (shape [1] or []), F32 / F16 / BF16, finite and
 * > 0, present for every layer; such tensors without a kv_cache_scheme are
 * refused too. */
#ifndef HFQ_SRC_HF_CT_KV_H
#define HFQ_SRC_HF_CT_KV_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"

/* Checks a kv_cache_scheme that is set (not null); errors name path. */
int hf_ct_kv_check_scheme(const char *path, const cJSON *scheme, hfq_error *err);

/* Whether name is a layer's self_attn.k_scale / v_scale (read here, not as a weight). */
bool hf_ct_kv_tensor(const char *name);

/* Sets the keys on w from st's scales of n_layer layers when `scheme` (the
 * checked kv_cache_scheme or NULL: none); without one, fails when st holds
 * KV scales. */
int hf_ct_kv_write(const char *path, bool scheme, const st_model *st, int64_t n_layer, gguf_writer *w,
                   hfq_error *err);

#endif
