/* kv_scales.c - see kv_scales.h. */
#include "quant/kv_scales.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

float hfq_kv_scale_of_amax(float amax) {
    const float s = amax / HFQ_FP8_E4M3_MAX;
    return s > FLT_EPSILON ? s : FLT_EPSILON;
}

float hfq_kv_scale_as(hfq_fp8_format fmt, float stored) {
    return fmt == HFQ_FP8_E4M3 ? stored : stored * (HFQ_FP8_E4M3_MAX / HFQ_FP8_E5M2_MAX);
}

static int check_values(const float *x, int64_t n, const char *where, const char *key, hfq_error *err) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || x[i] <= 0.0f)
            return hfq_fail(err, where, "key %s: layer %lld's scale %g is not a finite number > 0", key, (long long)i,
                            x[i]);
    return 0;
}

static int read_one(const gguf_file *f, int64_t i, const char *key, int64_t n_layer, float **out, hfq_error *err) {
    const char *path = gguf_path(f);
    if (gguf_arr_type(f, i) != GGUF_VT_FLOAT32)
        return hfq_fail(err, path, "key %s: not an array of F32 (static KV scales)", key);
    if (gguf_arr_n(f, i) != n_layer)
        return hfq_fail(err, path, "key %s: %lld scales for a model of %lld layers", key, (long long)gguf_arr_n(f, i),
                        (long long)n_layer);
    if (!(*out = malloc((size_t)(n_layer > 0 ? n_layer : 1) * sizeof **out))) return hfq_fail(err, path, "out of memory");
    memcpy(*out, gguf_arr_data(f, i), (size_t)n_layer * sizeof **out);
    return check_values(*out, n_layer, path, key, err);
}

int hfq_kv_scales_read(const gguf_file *f, int64_t n_layer, float **k, float **v, hfq_error *err) {
    const int64_t ik = gguf_find_key(f, HFQ_KV_KEY_K_SCALE), iv = gguf_find_key(f, HFQ_KV_KEY_V_SCALE);
    *k = *v = NULL;
    if (ik < 0 && iv < 0) return 0;
    if (ik < 0 || iv < 0)
        return hfq_fail(err, gguf_path(f), "key %s without %s: static KV scales come in pairs",
                        ik < 0 ? HFQ_KV_KEY_V_SCALE : HFQ_KV_KEY_K_SCALE, ik < 0 ? HFQ_KV_KEY_K_SCALE : HFQ_KV_KEY_V_SCALE);
    if (read_one(f, ik, HFQ_KV_KEY_K_SCALE, n_layer, k, err) || read_one(f, iv, HFQ_KV_KEY_V_SCALE, n_layer, v, err)) {
        free(*k);
        free(*v);
        *k = *v = NULL;
        return -1;
    }
    return 0;
}

int hfq_kv_scales_write(gguf_writer *w, const float *k, const float *v, int64_t n_layer, const char *where,
                        hfq_error *err) {
    if (n_layer < 1) return hfq_fail(err, where, "static KV scales for %lld layers", (long long)n_layer);
    if (check_values(k, n_layer, where, HFQ_KV_KEY_K_SCALE, err) || check_values(v, n_layer, where, HFQ_KV_KEY_V_SCALE, err))
        return -1;
    if (gguf_set_arr(w, HFQ_KV_KEY_K_SCALE, GGUF_VT_FLOAT32, k, n_layer) ||
        gguf_set_arr(w, HFQ_KV_KEY_V_SCALE, GGUF_VT_FLOAT32, v, n_layer))
        return hfq_fail(err, where, "cannot set the static KV scale keys");
    return 0;
}
