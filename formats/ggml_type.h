/* ggml_type.h - the tensor data types a GGUF file can hold.
 *
 * Ids, names and block geometry are ggml's (ggml.h / gguf-py constants.py), so
 * files we write load in llama.cpp. Retired ids (4, 5, 31-33, 36-38) are
 * listed as comments and never reused. This header knows bytes only; the
 * number formats themselves live in quant/.
 */
#ifndef HFQ_FORMATS_GGML_TYPE_H
#define HFQ_FORMATS_GGML_TYPE_H

#include <stdbool.h>
#include <stdint.h>

enum ggml_type_id {
    GT_F32 = 0,
    GT_F16 = 1,
    GT_Q4_0 = 2,
    GT_Q4_1 = 3,
    /* 4, 5: Q4_2, Q4_3 (retired) */
    GT_Q5_0 = 6,
    GT_Q5_1 = 7,
    GT_Q8_0 = 8,
    GT_Q8_1 = 9,
    GT_Q2_K = 10,
    GT_Q3_K = 11,
    GT_Q4_K = 12,
    GT_Q5_K = 13,
    GT_Q6_K = 14,
    GT_Q8_K = 15,
    GT_IQ2_XXS = 16,
    GT_IQ2_XS = 17,
    GT_IQ3_XXS = 18,
    GT_IQ1_S = 19,
    GT_IQ4_NL = 20,
    GT_IQ3_S = 21,
    GT_IQ2_S = 22,
    GT_IQ4_XS = 23,
    GT_I8 = 24,
    GT_I16 = 25,
    GT_I32 = 26,
    GT_I64 = 27,
    GT_F64 = 28,
    GT_IQ1_M = 29,
    GT_BF16 = 30,
    /* 31-33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 (retired) */
    GT_TQ1_0 = 34,
    GT_TQ2_0 = 35,
    /* 36-38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 (retired) */
    GT_MXFP4 = 39,
    GT_NVFP4 = 40,
    GT_Q1_0 = 41,
    GT_Q2_0 = 42,
    GT_COUNT = 43,
};

typedef struct ggml_type_info {
    const char *name;      /* ggml's name, e.g. "q4_K"; NULL for unused ids */
    int64_t block_size;    /* elements per block (1 for plain types) */
    int64_t type_size;     /* bytes per block */
} ggml_type_info;

/* Info for a type id, or NULL when the id is not a known ggml type. */
const ggml_type_info *ggml_type_get(uint32_t id);

/* Bytes of a row of n elements; -1 when n is not a multiple of the block size
 * or the type is unknown. */
int64_t ggml_row_size(uint32_t id, int64_t n);

/* Looks a type up by ggml's name (case-insensitive); -1 if unknown. */
int ggml_type_from_name(const char *name);

#endif
