/* modelopt_read.h - NVIDIA Model Optimizer exports as hfconv inputs, read
 * into the same per-module schemes as compressed-tensors (src/hf/ct_read.h):
 * hf_quant_config.json's "quantization" object (when config.json has no
 * quantization_config), or config.json's quantization_config with
 * quant_method "modelopt". Facts from vLLM's modelopt loader:
 *   quant_algo FP8: M.weight F8_E4M3, M.weight_scale F32 per tensor, static
 *     M.input_scale; W = code * weight_scale;
 *   FP8_PER_CHANNEL_PER_TOKEN: weight_scale per output row, dynamic per-token
 *     activations;
 *   NVFP4: M.weight U8 [rows, cols / 2] (compressed-tensors' nibble order),
 *     M.weight_scale F8_E4M3 [rows, cols / 16], M.weight_scale_2 F32 [1] (the
 *     global scale, multiplied: W = fp4 * weight_scale * weight_scale_2, in
 *     float32), M.input_scale F32 [1] (the activations' global scale, W4A4);
 *     kept as ggml NVFP4 with .scale = weight_scale_2 and .input_scale as is,
 *     bit for bit.
 * exclude_modules (or ignore) are fnmatch patterns of module names; every
 * other Linear module is quantized. Refused naming the key: another
 * quant_algo, kv_cache_quant_algo, a group_size other than 16 for NVFP4, and
 * keys this reader does not know. */
#ifndef HFQ_SRC_HF_MODELOPT_READ_H
#define HFQ_SRC_HF_MODELOPT_READ_H

#include <cjson/cJSON.h>

#include "formats/error.h"
#include "src/hf/ct_scheme.h"

/* Fills c (its path names the file q came from) from q. */
int hf_modelopt_parse(hf_ct_config *c, const cJSON *q, hfq_error *err);

#endif
