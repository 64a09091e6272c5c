/* ct_kv.c - see ct_kv.h. */
#include "src/hf/ct_kv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/half.h"
#include "quant/kv_scales.h"

static bool is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

int hf_ct_kv_check_scheme(const char *path, const cJSON *s, hfq_error *err) {
    const cJSON *bits = cJSON_GetObjectItemCaseSensitive(s, "num_bits"), *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    const cJSON *strat = cJSON_GetObjectItemCaseSensitive(s, "strategy"), *dyn = cJSON_GetObjectItemCaseSensitive(s, "dynamic");
    const cJSON *sym = cJSON_GetObjectItemCaseSensitive(s, "symmetric");
    if (!cJSON_IsObject(s)) return hfq_fail(err, path, "field 'quantization_config.kv_cache_scheme' is not an object");
    if (!cJSON_IsNumber(bits) || bits->valuedouble != 8 || !cJSON_IsString(type) || strcmp(type->valuestring, "float"))
        return hfq_fail(err, path, "field 'quantization_config.kv_cache_scheme': only 8-bit float (FP8 E4M3) KV "
                                   "caches are implemented");
    if (!cJSON_IsString(strat) || strcmp(strat->valuestring, "tensor"))
        return hfq_fail(err, path, "field 'quantization_config.kv_cache_scheme.strategy': only \"tensor\" (one "
                                   "scale per layer) is implemented");
    if (!cJSON_IsFalse(dyn))
        return hfq_fail(err, path, "field 'quantization_config.kv_cache_scheme.dynamic': only static scales "
                                   "(false) are implemented");
    if (!is_null(sym) && !cJSON_IsTrue(sym))
        return hfq_fail(err, path, "field 'quantization_config.kv_cache_scheme.symmetric': asymmetric KV caches "
                                   "are not implemented");
    if (!is_null(cJSON_GetObjectItemCaseSensitive(s, "group_size")) ||
        !is_null(cJSON_GetObjectItemCaseSensitive(s, "block_structure")))
        return hfq_fail(err, path, "field 'quantization_config.kv_cache_scheme': groups or blocks with strategy "
                                   "\"tensor\"");
    return 0;
}

bool hf_ct_kv_tensor(const char *name) {
    const size_t n = strlen(name);
    return strncmp(name, "model.layers.", 13) == 0 && n > 18 &&
           (strcmp(name + n - 18, ".self_attn.k_scale") == 0 || strcmp(name + n - 18, ".self_attn.v_scale") == 0);
}

/* The one value of tensor `name`; -1 when absent or not a positive finite scalar. */
static int scale_of(const char *path, const st_model *st, const char *name, float *out, hfq_error *err) {
    const st_tensor *t = st_find(st, name);
    if (!t) return hfq_fail(err, path, "tensor '%s' is missing (kv_cache_scheme)", name);
    if (t->n_elements != 1 || t->n_dims > 1)
        return hfq_fail(err, path, "tensor '%s': %lld values, a static KV scale has 1", name,
                        (long long)t->n_elements);
    const unsigned char *p = st_data(st, t);
    uint16_t h = 0;
    if (t->dtype != ST_F32) memcpy(&h, p, 2);
    switch (t->dtype) {
    case ST_F32: memcpy(out, p, 4); break;
    case ST_F16: *out = hfq_fp16_to_f32(h); break;
    case ST_BF16: *out = hfq_bf16_to_f32(h); break;
    default: return hfq_fail(err, path, "tensor '%s': a KV scale must be F32, F16 or BF16", name);
    }
    if (!isfinite(*out) || *out <= 0.0f)
        return hfq_fail(err, path, "tensor '%s': scale %g is not a finite number > 0", name, (double)*out);
    return 0;
}

int hf_ct_kv_write(const char *path, bool scheme, const st_model *st, int64_t n_layer, gguf_writer *w,
                   hfq_error *err) {
    char name[96];
    if (!scheme) {
        for (int64_t i = 0; i < st_n_tensors(st); i++)
            if (hf_ct_kv_tensor(st_tensor_at(st, i)->name))
                return hfq_fail(err, path, "tensor '%s' without quantization_config.kv_cache_scheme",
                                st_tensor_at(st, i)->name);
        return 0;
    }
    float *k = malloc((size_t)(n_layer > 0 ? n_layer : 1) * sizeof *k), *v = malloc((size_t)(n_layer > 0 ? n_layer : 1) * sizeof *v);
    int rc = k && v ? 0 : hfq_fail(err, path, "out of memory");
    for (int64_t il = 0; rc == 0 && il < n_layer; il++) {
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.k_scale", (long long)il);
        rc = scale_of(path, st, name, &k[il], err);
        snprintf(name, sizeof name, "model.layers.%lld.self_attn.v_scale", (long long)il);
        if (rc == 0) rc = scale_of(path, st, name, &v[il], err);
    }
    if (rc == 0) rc = hfq_kv_scales_write(w, k, v, n_layer, path, err);
    free(k);
    free(v);
    return rc;
}
