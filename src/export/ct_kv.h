/* ct_kv.h - static FP8 KV-cache scales in a compressed-tensors export.
 *
 * A GGUF with hfq.kv_cache.k_scale / v_scale (quant/kv_scales.h: the E4M3
 * scale of each layer's K after rope and V) is exported as llm-compressor
 * writes an FP8 KV cache: quantization_config.kv_cache_scheme (8-bit float,
 * strategy tensor, static, symmetric; src/export/ct_config.c) and, per layer,
 * model.layers.N.self_attn.k_scale / v_scale (F32, shape [1]), which
 * compressed-tensors loads into the attention module (its QuantizedKVCache
 * fake-quantizes K and V with them in transformers) and vLLM into its FP8
 * cache. */
#ifndef HFQ_SRC_EXPORT_CT_KV_H
#define HFQ_SRC_EXPORT_CT_KV_H

#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"

typedef struct ct_kv {
    float *k, *v;      /* [n_layer] stored scales; NULL when the GGUF has none */
    int64_t n_layer;   /* 0 when the GGUF has none */
} ct_kv;

/* Reads f's scales for its {arch}.block_count layers (checked as the runner
 * checks them); errors name `where`. */
int ct_kv_read(const gguf_file *f, const char *where, ct_kv *kv, hfq_error *err);
void ct_kv_free(ct_kv *kv);

/* "model.layers.<il>.self_attn.k_scale" (which 'k') or "...v_scale". */
void ct_kv_tensor_name(char which, int64_t il, char *buf, size_t cap);

#endif
