#include "kernels/kv_type.h"

#include <stdbool.h>
#include <strings.h>

static const struct {
    const char *name;
    hfq_qtype qtype;
} kv_types[HFQ_KV_COUNT] = {
    [HFQ_KV_DEFAULT] = {"default", HFQ_QT_F32},
    [HFQ_KV_F32] = {"f32", HFQ_QT_F32},
    [HFQ_KV_F16] = {"f16", HFQ_QT_F16},
    [HFQ_KV_BF16] = {"bf16", HFQ_QT_BF16},
    [HFQ_KV_Q8_0] = {"q8_0", HFQ_QT_Q8_0},
    [HFQ_KV_Q4_0] = {"q4_0", HFQ_QT_Q4_0},
    [HFQ_KV_Q5_0] = {"q5_0", HFQ_QT_Q5_0},
    [HFQ_KV_Q5_1] = {"q5_1", HFQ_QT_Q5_1},
    [HFQ_KV_FP8_E4M3] = {"fp8_e4m3", HFQ_QT_FP8_E4M3},
    [HFQ_KV_FP8_E5M2] = {"fp8_e5m2", HFQ_QT_FP8_E5M2},
};

const char *hfq_kv_type_name(hfq_kv_type t) {
    return t >= HFQ_KV_DEFAULT && t < HFQ_KV_COUNT ? kv_types[t].name : NULL;
}

int hfq_kv_type_from_name(const char *s) {
    for (int t = HFQ_KV_DEFAULT + 1; t < HFQ_KV_COUNT; t++)
        if (strcasecmp(s, kv_types[t].name) == 0) return t;
    return -1;
}

hfq_qtype hfq_kv_type_qtype(hfq_kv_type t) { return kv_types[t].qtype; }

bool hfq_kv_type_is_fp8(hfq_kv_type t) { return t == HFQ_KV_FP8_E4M3 || t == HFQ_KV_FP8_E5M2; }

int64_t hfq_kv_row_bytes(hfq_kv_type t, int64_t head_dim) {
    if (t <= HFQ_KV_DEFAULT || t >= HFQ_KV_COUNT || head_dim <= 0) return -1;
    const int64_t codes = hfq_qtype_row_size(kv_types[t].qtype, head_dim);
    if (codes < 0) return -1;
    return hfq_kv_type_is_fp8(t) ? codes + (int64_t)sizeof(float) : codes;
}

int64_t hfq_kv_cache_floats(hfq_kv_type t, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim) {
    const int64_t row = hfq_kv_row_bytes(t, head_dim);
    if (row < 0 || n_ctx < 0 || n_head_kv < 0 || (n_head_kv && n_ctx > INT64_MAX / 8 / n_head_kv / row)) return -1;
    const int64_t bytes = n_ctx * n_head_kv * row;
    return (bytes + (int64_t)sizeof(float) - 1) / (int64_t)sizeof(float);
}
