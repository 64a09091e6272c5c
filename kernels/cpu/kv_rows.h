/* kv_rows.h - the CPU backend's rows of a quantized (non-F32) KV cache
 * (kernels/kv_type.h formats): writing a row, and the two reads attention
 * makes of it without dequantizing the cache: key rows' dots with a query,
 * and value rows' weighted sum (a head's range of positions at a time).
 *
 * The query is first converted as ggml's flash attention converts it for the
 * key format (quant/qtype.h vec_dot_type: F16 for F16 keys, Q8_0 for Q8_0,
 * Q4_0 and Q5_0, Q8_1 for Q5_1); FP8 keys take it as floats. */
#ifndef HFQ_KERNELS_CPU_KV_ROWS_H
#define HFQ_KERNELS_CPU_KV_ROWS_H

#include <stdint.h>

#include "kernels/kv_type.h"

/* row = x [hd] in format t (hfq_kv_row_bytes(t, hd) bytes). FP8: with the
 * static scale fp8_scale when > 0 (the row still holds it first, so reads
 * are the same), else the row's own amax / max. */
void cpu_kv_row_store(hfq_kv_type t, const float *x, void *row, int64_t hd, float fp8_scale);

/* Bytes cpu_kv_query writes for head_dim hd (the query's converted form). */
int64_t cpu_kv_query_bytes(hfq_kv_type t, int64_t hd);
/* q [hd] converted for dots with key rows of format t. */
void cpu_kv_query(hfq_kv_type t, const float *q, void *qc, int64_t hd);
/* s[p] = the dot of key row p with a converted query, for the n rows
 * stride bytes apart from `rows`. */
void cpu_kv_rows_dot(hfq_kv_type t, const void *rows, size_t stride, const void *qc, int64_t hd, int64_t n,
                     float *s);

/* out[d] = sum over p < n in order of w[p] * row p's value d, for d < hd,
 * of the n value rows stride bytes apart from `rows`; tmp: [hd] scratch. */
void cpu_kv_rows_mix(hfq_kv_type t, const void *rows, size_t stride, const float *w, int64_t n, float *out,
                     float *tmp, int64_t hd);

#endif
