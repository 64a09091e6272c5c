/* kv_type.h - the number formats the KV cache can hold, their names and sizes.
 *
 * K and V are stored per position and kv head as rows of head_dim values:
 * F32/F16/BF16 values; ggml's Q8_0/Q4_0/Q5_0/Q5_1 blocks of 32 along
 * head_dim, quantized as llama.cpp's x86 CPU backend writes its
 * --cache-type-k/-v rows (its from_float: Q8_0 the activation quantizer,
 * quant/qtype.h quantize_row; the others ggml's reference); FP8 E4M3/E5M2
 * codes with one dynamic F32 scale per row (per token and head: amax / the
 * format's max, quant/fp8.h), the scale first. A format with blocks needs
 * head_dim a multiple of its block size (llama.cpp refuses the others too).
 */
#ifndef HFQ_KERNELS_KV_TYPE_H
#define HFQ_KERNELS_KV_TYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/qtype.h"

typedef enum hfq_kv_type {
    HFQ_KV_DEFAULT = 0,   /* the backend's default (ops.h kv_default) */
    HFQ_KV_F32,
    HFQ_KV_F16,
    HFQ_KV_BF16,
    HFQ_KV_Q8_0,
    HFQ_KV_Q4_0,
    HFQ_KV_Q5_0,
    HFQ_KV_Q5_1,
    HFQ_KV_FP8_E4M3,
    HFQ_KV_FP8_E5M2,
    HFQ_KV_COUNT
} hfq_kv_type;

/* "f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q5_1", "fp8_e4m3",
 * "fp8_e5m2"; "default" for HFQ_KV_DEFAULT; NULL when t is out of range. */
const char *hfq_kv_type_name(hfq_kv_type t);

/* The type named s (case-insensitive, one of the names above but "default");
 * -1 when none is. */
int hfq_kv_type_from_name(const char *s);

/* Whether t is FP8 E4M3 or E5M2 (codes with a scale). */
bool hfq_kv_type_is_fp8(hfq_kv_type t);

/* The number format of a row's values (FP8: the codes, without the scale). */
hfq_qtype hfq_kv_type_qtype(hfq_kv_type t);

/* Bytes of one row of head_dim values (FP8: the scale included); -1 when t
 * is out of range or HFQ_KV_DEFAULT, or head_dim is not a positive multiple
 * of its block size. */
int64_t hfq_kv_row_bytes(hfq_kv_type t, int64_t head_dim);

/* Floats of one layer's K or V cache: n_ctx * n_head_kv rows of head_dim
 * values in format t, rounded up to whole floats (the unit backends
 * allocate); -1 when head_dim does not suit t or the size overflows. */
int64_t hfq_kv_cache_floats(hfq_kv_type t, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim);

#endif
