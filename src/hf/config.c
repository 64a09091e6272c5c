#include "src/hf/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/json_file.h"

/* Upper bound for any dimension read from a config: far above real models,
 * low enough that products of three of them cannot overflow int64. */
#define MAX_DIM ((int64_t)1 << 24)

static int get_int(const cJSON *root, const char *key, int64_t lo, int64_t hi, int64_t dflt,
                   bool required, int64_t *out, const char *path, hfq_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (required) return hfq_fail(err, path, "missing required field '%s'", key);
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v)) return hfq_fail(err, path, "field '%s' is not an integer", key);
    /* range first: converting a double outside int64 (1e30, inf) is undefined */
    if (!(fabs(v->valuedouble) < 0x1p62))
        return hfq_fail(err, path, "field '%s' = %g is out of range [%lld, %lld]", key, v->valuedouble,
                        (long long)lo, (long long)hi);
    if (v->valuedouble != (double)(int64_t)v->valuedouble)
        return hfq_fail(err, path, "field '%s' is not an integer", key);
    int64_t x = (int64_t)v->valuedouble;
    if (x < lo || x > hi)
        return hfq_fail(err, path, "field '%s' = %lld is out of range [%lld, %lld]", key,
                        (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

static int get_double(const cJSON *obj, const char *key, double dflt, double *out, bool *present,
                      const char *path, hfq_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (present) *present = v && !cJSON_IsNull(v);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))   /* 1e400 parses as inf */
        return hfq_fail(err, path, "field '%s' is not a finite number", key);
    *out = v->valuedouble;
    return 0;
}

/* bos/eos ids may be an integer or a list (first element is used). */
static int64_t first_id(const cJSON *v) {
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e9) return (int64_t)v->valuedouble;
    return -1;
}

static int parse_rope_scaling(hf_config *cfg, const cJSON *rs, const char *path, hfq_error *err) {
    cfg->rope_scaling = HF_ROPE_NONE;
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) return hfq_fail(err, path, "field 'rope_scaling' is not an object");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(t)) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(t)) return 0;
    const char *type = t->valuestring;
    if (get_double(rs, "factor", 1.0, &cfg->rope_factor, NULL, path, err)) return -1;
    if (strcmp(type, "linear") == 0) {
        cfg->rope_scaling = HF_ROPE_LINEAR;
    } else if (strcmp(type, "llama3") == 0) {
        cfg->rope_scaling = HF_ROPE_LLAMA3;
        if (get_double(rs, "low_freq_factor", 1.0, &cfg->rope_low_freq_factor, NULL, path, err) ||
            get_double(rs, "high_freq_factor", 4.0, &cfg->rope_high_freq_factor, NULL, path, err) ||
            get_int(rs, "original_max_position_embeddings", 1, MAX_DIM, 8192, false,
                    &cfg->rope_original_context, path, err))
            return -1;
        if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor) || !(cfg->rope_factor > 0))
            return hfq_fail(err, path, "rope_scaling: llama3 factors are inconsistent");
    } else if (strcmp(type, "yarn") == 0) {
        cfg->rope_scaling = HF_ROPE_YARN;
        if (get_int(rs, "original_max_position_embeddings", 1, MAX_DIM, 0, false,
                    &cfg->rope_original_context, path, err))
            return -1;
    } else if (strcmp(type, "default") != 0) {
        return hfq_fail(err, path, "rope_scaling type '%s' is not supported", type);
    }
    return 0;
}

int hf_config_load(hf_config *cfg, const char *dir, hfq_error *err) {
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *root = hfq_json_load(path, err);
    if (!root) return -1;
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        hfq_fail(err, path, "top level is not a JSON object");
        goto done;
    }
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    if (!cJSON_IsString(a0)) {
        hfq_fail(err, path, "missing 'architectures' list");
        goto done;
    }
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", a0->valuestring);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "_name_or_path");
    if (cJSON_IsString(nm) && nm->valuestring[0]) {
        const char *slash = strrchr(nm->valuestring, '/');
        snprintf(cfg->name, sizeof cfg->name, "%s", slash ? slash + 1 : nm->valuestring);
    } else {
        const char *end = dir + strlen(dir);
        while (end > dir && end[-1] == '/') end--;
        const char *start = end;
        while (start > dir && start[-1] != '/') start--;
        snprintf(cfg->name, sizeof cfg->name, "%.*s", (int)(end - start), start);
    }
    if (get_int(root, "hidden_size", 1, MAX_DIM, 0, true, &cfg->hidden_size, path, err) ||
        get_int(root, "intermediate_size", 1, MAX_DIM, 0, true, &cfg->intermediate_size, path, err) ||
        get_int(root, "num_hidden_layers", 1, 100000, 0, true, &cfg->n_layers, path, err) ||
        get_int(root, "num_attention_heads", 1, MAX_DIM, 0, true, &cfg->n_heads, path, err) ||
        get_int(root, "num_key_value_heads", 1, MAX_DIM, cfg->n_heads, false, &cfg->n_kv_heads, path, err) ||
        get_int(root, "vocab_size", 1, (int64_t)1 << 31, 0, true, &cfg->vocab_size, path, err) ||
        get_int(root, "max_position_embeddings", 0, (int64_t)1 << 31, 0, false, &cfg->context_length, path, err))
        goto done;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    cfg->has_head_dim = hd && !cJSON_IsNull(hd);
    if (get_int(root, "head_dim", 1, MAX_DIM, cfg->hidden_size / cfg->n_heads, false, &cfg->head_dim, path, err))
        goto done;
    if (!cfg->has_head_dim && cfg->hidden_size % cfg->n_heads != 0) {
        hfq_fail(err, path, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                 (long long)cfg->hidden_size, (long long)cfg->n_heads);
        goto done;
    }
    if (cfg->n_heads % cfg->n_kv_heads != 0) {
        hfq_fail(err, path, "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                 (long long)cfg->n_heads, (long long)cfg->n_kv_heads);
        goto done;
    }
    if (get_double(root, "rms_norm_eps", 1e-6, &cfg->rms_norm_eps, NULL, path, err) ||
        get_double(root, "rope_theta", 0, &cfg->rope_theta, &cfg->has_rope_theta, path, err))
        goto done;
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    cfg->tie_word_embeddings = cJSON_IsTrue(tie);
    cfg->bos_token_id = first_id(cJSON_GetObjectItemCaseSensitive(root, "bos_token_id"));
    cfg->eos_token_id = first_id(cJSON_GetObjectItemCaseSensitive(root, "eos_token_id"));
    if (parse_rope_scaling(cfg, cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"), path, err)) goto done;
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    const cJSON *wbs = cJSON_IsObject(qc) ? cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size") : NULL;
    if (cJSON_IsArray(wbs) && cJSON_GetArraySize(wbs) == 2) {
        const cJSON *r = cJSON_GetArrayItem(wbs, 0), *c = cJSON_GetArrayItem(wbs, 1);
        if (!cJSON_IsNumber(r) || !cJSON_IsNumber(c) || r->valuedouble < 1 || c->valuedouble < 1 ||
            r->valuedouble > MAX_DIM || c->valuedouble > MAX_DIM) {
            hfq_fail(err, path, "quantization_config.weight_block_size is invalid");
            goto done;
        }
        cfg->fp8_block_rows = (int64_t)r->valuedouble;
        cfg->fp8_block_cols = (int64_t)c->valuedouble;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}
