/* qtype.h - every number format the project stores or computes with, as one
 * table of traits indexed by hfq_qtype.
 *
 * A row says how the format is stored (ggml type id, block geometry) and
 * holds its row functions: quantize (weights, optionally importance-
 * weighted), dequantize, and vec_dot against activations quantized to the
 * row's vec_dot_type by that format's own quantize_row. The pairing follows
 * ggml's CPU backend: Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4/NVFP4 with Q8_0, Q4_1/Q5_1
 * with Q8_1, K-quants, IQ4_XS, the grid i-quants and TQ with Q8_K, plain types with themselves. To multiply a weight row
 * w of format t by float activations x:
 *
 *     const hfq_qtype_traits *wt = hfq_qtype_get(t);
 *     const hfq_qtype_traits *at = hfq_qtype_get(wt->vec_dot_type);
 *     at->quantize_row(x, act_buf, n);           // hfq_qtype_row_size(at->type, n) bytes
 *     float y = wt->vec_dot(w, act_buf, n);
 *
 * Function pointers are NULL where a format lacks the operation (Q8_1/Q8_K
 * are activation formats with no weight dot; the FP8/INT8/MXFP4/NVFP4 rows
 * are filled by quant/fp*). Row functions take n a multiple of block_size
 * and do not check it; quantize checks and returns 0 on a bad n_per_row.
 *
 * Inputs must be finite: the quantizers do not check (a NaN or Inf makes the
 * block's scale NaN/Inf and its bytes unspecified, as in ggml). Callers that
 * read untrusted tensors check with hfq_first_nonfinite and report the tensor.
 */
#ifndef HFQ_QUANT_QTYPE_H
#define HFQ_QUANT_QTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum hfq_qtype {
    HFQ_QT_F32 = 0,
    HFQ_QT_F16,
    HFQ_QT_BF16,
    HFQ_QT_Q8_0,
    HFQ_QT_Q4_0,
    HFQ_QT_Q4_1,
    HFQ_QT_Q5_0,
    HFQ_QT_Q5_1,
    HFQ_QT_Q2_K,
    HFQ_QT_Q3_K,
    HFQ_QT_Q4_K,
    HFQ_QT_Q5_K,
    HFQ_QT_Q6_K,
    HFQ_QT_IQ4_NL,
    HFQ_QT_IQ4_XS,
    HFQ_QT_Q8_1, /* activations for Q4_1 and Q5_1 */
    HFQ_QT_Q8_K, /* activations for the K-quants and IQ4_XS */
    HFQ_QT_MXFP4,
    HFQ_QT_NVFP4,
    HFQ_QT_INT8,
    HFQ_QT_FP8_E4M3,
    HFQ_QT_FP8_E5M2,
    HFQ_QT_IQ3_XXS, /* ggml's grid i-quants (quant/iq3.h) */
    HFQ_QT_IQ3_S,
    HFQ_QT_IQ2_XXS, /* quant/iq2.h */
    HFQ_QT_IQ2_XS,
    HFQ_QT_IQ2_S,
    HFQ_QT_IQ1_S, /* quant/iq1.h */
    HFQ_QT_IQ1_M,
    HFQ_QT_TQ1_0, /* ternary, quant/tq.h */
    HFQ_QT_TQ2_0,
    HFQ_QT_Q1_0, /* quant/q_lowbit.h */
    HFQ_QT_Q2_0,
    HFQ_QT_COUNT
} hfq_qtype;

/* ggml_type value of formats ggml has no type for. */
#define HFQ_NO_GGML_TYPE (-1)

/* Quantizes nrows rows of n_per_row floats into dst; importance is NULL
 * (ggml's reference quantizer) or n_per_row per-column weights shared by all
 * rows (ggml's importance-weighted quantizer). Returns bytes written, 0 when
 * n_per_row is not a positive multiple of the block size or nrows < 0. */
typedef size_t (*hfq_quantize_fn)(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                  const float *importance);
/* One row of n floats into the format (activations; no importance). */
typedef void (*hfq_quantize_row_fn)(const float *x, void *y, int64_t n);
/* n elements of the format back to floats. */
typedef void (*hfq_dequantize_fn)(const void *src, float *dst, int64_t n);
/* Dot of a weight row w (this format) with an activation row a (the format's
 * vec_dot_type), n elements. */
typedef float (*hfq_vec_dot_fn)(const void *w, const void *a, int64_t n);

typedef struct hfq_qtype_traits {
    hfq_qtype type;
    const char *name;          /* ggml's name where ggml has the type ("q4_K"), else ours ("fp8_e4m3") */
    int32_t ggml_type;         /* enum ggml_type_id (formats/ggml_type.h) or HFQ_NO_GGML_TYPE */
    bool is_ggml_native;       /* llama.cpp loads tensors of this format */
    bool is_activation_only;   /* Q8_1/Q8_K: never a stored weight format */
    bool uses_importance;      /* quantize honours importance (the others ignore it) */
    int64_t block_size;        /* elements per block */
    int64_t type_size;         /* bytes per block */
    hfq_quantize_fn quantize;
    hfq_quantize_row_fn quantize_row; /* activations, as llama.cpp's x86 CPU backend (may differ from quantize) */
    hfq_dequantize_fn dequantize;
    hfq_vec_dot_fn vec_dot;
    hfq_qtype vec_dot_type;    /* meaningful when vec_dot is set */
} hfq_qtype_traits;

/* The row for t, or NULL when t is not a valid hfq_qtype. */
const hfq_qtype_traits *hfq_qtype_get(hfq_qtype t);

/* Format by name, case-insensitive ("Q4_K", "q4_k", "bf16"); -1 if unknown. */
int hfq_qtype_from_name(const char *name);

/* Format stored as ggml type id `ggml_type`; -1 when none of ours is. */
int hfq_qtype_from_ggml(uint32_t ggml_type);

/* Bytes of n elements; -1 when t is invalid, n < 0 or n is not a multiple
 * of the block size, or the size overflows int64. */
int64_t hfq_qtype_row_size(hfq_qtype t, int64_t n);

/* Index of the first NaN or infinity in x[0..n), or -1 if all are finite. */
int64_t hfq_first_nonfinite(const float *x, int64_t n);

#endif
