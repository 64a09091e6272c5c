#include "formats/ggml_type.h"

#include <stddef.h>
#include <strings.h>

#define QK_K 256

static const ggml_type_info type_table[GT_COUNT] = {
    [GT_F32] = {"f32", 1, 4},
    [GT_F16] = {"f16", 1, 2},
    [GT_Q4_0] = {"q4_0", 32, 2 + 16},
    [GT_Q4_1] = {"q4_1", 32, 2 + 2 + 16},
    [GT_Q5_0] = {"q5_0", 32, 2 + 4 + 16},
    [GT_Q5_1] = {"q5_1", 32, 2 + 2 + 4 + 16},
    [GT_Q8_0] = {"q8_0", 32, 2 + 32},
    [GT_Q8_1] = {"q8_1", 32, 2 + 2 + 32}, /* ggml.c; gguf-py still says 40 (the old float d, s) */
    [GT_Q2_K] = {"q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4},
    [GT_Q3_K] = {"q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12},
    [GT_Q4_K] = {"q4_K", QK_K, 2 + 2 + QK_K / 2 + 12},
    [GT_Q5_K] = {"q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12},
    [GT_Q6_K] = {"q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16},
    [GT_Q8_K] = {"q8_K", QK_K, 4 + QK_K + QK_K / 8},
    [GT_IQ2_XXS] = {"iq2_xxs", QK_K, 2 + QK_K / 4},
    [GT_IQ2_XS] = {"iq2_xs", QK_K, 2 + QK_K / 4 + QK_K / 32},
    [GT_IQ3_XXS] = {"iq3_xxs", QK_K, 2 + QK_K / 4 + QK_K / 8},
    [GT_IQ1_S] = {"iq1_s", QK_K, 2 + QK_K / 8 + QK_K / 16},
    [GT_IQ4_NL] = {"iq4_nl", 32, 2 + 16},
    [GT_IQ3_S] = {"iq3_s", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4},
    [GT_IQ2_S] = {"iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 16},
    [GT_IQ4_XS] = {"iq4_xs", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64},
    [GT_I8] = {"i8", 1, 1},
    [GT_I16] = {"i16", 1, 2},
    [GT_I32] = {"i32", 1, 4},
    [GT_I64] = {"i64", 1, 8},
    [GT_F64] = {"f64", 1, 8},
    [GT_IQ1_M] = {"iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},
    [GT_BF16] = {"bf16", 1, 2},
    [GT_TQ1_0] = {"tq1_0", QK_K, 2 + 4 * 13},
    [GT_TQ2_0] = {"tq2_0", QK_K, 2 + 64},
    [GT_MXFP4] = {"mxfp4", 32, 1 + 16},
    [GT_NVFP4] = {"nvfp4", 64, 4 + 32},
    [GT_Q1_0] = {"q1_0", 128, 2 + 16},
    [GT_Q2_0] = {"q2_0", 64, 2 + 16},
};

const ggml_type_info *ggml_type_get(uint32_t id) {
    if (id >= GT_COUNT || type_table[id].name == NULL) return NULL;
    return &type_table[id];
}

int64_t ggml_row_size(uint32_t id, int64_t n) {
    const ggml_type_info *t = ggml_type_get(id);
    if (!t || n < 0 || n % t->block_size != 0) return -1;
    return n / t->block_size * t->type_size;
}

int ggml_type_from_name(const char *name) {
    for (int i = 0; i < GT_COUNT; i++)
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0) return i;
    return -1;
}
