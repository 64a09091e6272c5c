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

/* The document being read: its top level and, for a multimodal wrapper, the
 * text model's `text_config`, whose fields win (llama.cpp's converter merges
 * it over the top level the same way). */
typedef struct doc {
    const cJSON *root, *text;
    /* the family's config-class defaults (hf_config_load_defaults), or NULL */
    const cJSON *defaults;
    const char *path;
    hfq_error *err;
} doc;

static bool is_set(const cJSON *v) { return v && !cJSON_IsNull(v); }

/* obj[key], its name for messages ("prefix.key", or "key") in name. */
static const cJSON *member(const cJSON *obj, const char *prefix, const char *key, char name[HF_KEY_MAX]) {
    if (prefix && prefix[0]) snprintf(name, HF_KEY_MAX, "%.*s.%s", HF_KEY_MAX / 2, prefix, key);
    else snprintf(name, HF_KEY_MAX, "%s", key);
    return obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

/* A top-level field: text_config's when it has it, else the top level's. */
static const cJSON *given(const doc *d, const char *key, char name[HF_KEY_MAX]) {
    const cJSON *v = member(d->text, "text_config", key, name);
    return v ? v : member(d->root, NULL, key, name);
}

/* As given, else the family's default (named "default KEY" in messages). */
static const cJSON *field(const doc *d, const char *key, char name[HF_KEY_MAX]) {
    const cJSON *v = given(d, key, name);
    char dname[HF_KEY_MAX];
    if (v || !d->defaults || !(v = member(d->defaults, NULL, key, dname))) return v;
    snprintf(name, HF_KEY_MAX, "default %.*s", HF_KEY_MAX / 2, key);
    return v;
}

static int int_value(const cJSON *v, const char *name, int64_t lo, int64_t hi, int64_t dflt, bool required,
                     int64_t *out, const char *path, hfq_error *err) {
    if (!is_set(v)) {
        if (required) return hfq_fail(err, path, "missing required field '%s'", name);
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v)) return hfq_fail(err, path, "field '%s' is not an integer", name);
    /* range first: converting a double outside int64 (1e30, inf) is undefined */
    if (!(fabs(v->valuedouble) < 0x1p62))
        return hfq_fail(err, path, "field '%s' = %g is out of range [%lld, %lld]", name, v->valuedouble,
                        (long long)lo, (long long)hi);
    if (v->valuedouble != (double)(int64_t)v->valuedouble)
        return hfq_fail(err, path, "field '%s' is not an integer", name);
    int64_t x = (int64_t)v->valuedouble;
    if (x < lo || x > hi)
        return hfq_fail(err, path, "field '%s' = %lld is out of range [%lld, %lld]", name, (long long)x,
                        (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

static int double_value(const cJSON *v, const char *name, double dflt, double *out, bool *present,
                        const char *path, hfq_error *err) {
    if (present) *present = is_set(v);
    if (!is_set(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))   /* 1e400 parses as inf */
        return hfq_fail(err, path, "field '%s' is not a finite number", name);
    *out = v->valuedouble;
    return 0;
}

static int get_int(const doc *d, const char *key, int64_t lo, int64_t hi, int64_t dflt, bool required,
                   int64_t *out) {
    char name[HF_KEY_MAX];
    const cJSON *v = field(d, key, name);
    return int_value(v, name, lo, hi, dflt, required, out, d->path, d->err);
}

static int get_double(const doc *d, const char *key, double dflt, double *out, bool *present) {
    char name[HF_KEY_MAX];
    const cJSON *v = field(d, key, name);
    return double_value(v, name, dflt, out, present, d->path, d->err);
}

/* bos/eos ids may be an integer or a list (first element is used). */
static int64_t first_id(const cJSON *v) {
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e9) return (int64_t)v->valuedouble;
    return -1;
}

/* A value for messages: numbers, strings and booleans as written. */
static void show(const cJSON *v, char *buf, size_t cap) {
    if (cJSON_IsNumber(v)) snprintf(buf, cap, "%g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, cap, "'%.60s'", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else snprintf(buf, cap, "%s", cJSON_IsArray(v) ? "a list" : "an object");
}

static int refuse(const doc *d, const char *name, const cJSON *v, const char *why) {
    char val[80];
    show(v, val, sizeof val);
    return hfq_fail(d->err, d->path, "field '%s' = %s: %s", name, val, why);
}

/* A number key whose only value the families compute is `neutral`. */
static int refuse_unless(const doc *d, const cJSON *v, const char *name, double neutral, const char *why) {
    if (!is_set(v)) return 0;
    if (cJSON_IsNumber(v) && v->valuedouble == neutral) return 0;
    return refuse(d, name, v, why);
}

/* --- rope ----------------------------------------------------------------- */

static const struct { const char *name; hf_rope_scaling type; } rope_types[] = {
    {"default", HF_ROPE_NONE}, {"linear", HF_ROPE_LINEAR}, {"llama3", HF_ROPE_LLAMA3},
    {"yarn", HF_ROPE_YARN}, {"longrope", HF_ROPE_LONGROPE},
    {"su", HF_ROPE_LONGROPE},   /* longrope's first name (Phi-3), as llama.cpp maps it */
};

const char *hf_rope_scaling_name(hf_rope_scaling s) {
    for (size_t i = 0; i < sizeof rope_types / sizeof rope_types[0]; i++)
        if (rope_types[i].type == s) return rope_types[i].name;
    return "?";
}

/* The keys each rope type reads (beside rope_type / type / rope_theta /
 * partial_rotary_factor, read for all); any other key of a rope object is
 * refused: transformers computes with it and we would not. */
static bool rope_key_known(hf_rope_scaling type, const char *key) {
    static const char *const common[] = {"rope_type", "type", "rope_theta", "partial_rotary_factor", NULL};
    static const char *const linear[] = {"factor", NULL};
    static const char *const llama3[] = {"factor", "low_freq_factor", "high_freq_factor",
                                         "original_max_position_embeddings", NULL};
    /* extrapolation_factor, truncate: checked for their neutral values below */
    static const char *const yarn[] = {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                                       "attention_factor", "extrapolation_factor", "truncate", NULL};
    static const char *const longrope[] = {"factor", "original_max_position_embeddings", "short_factor",
                                           "long_factor", "attention_factor", NULL};
    const char *const *by_type[] = {[HF_ROPE_NONE] = NULL, [HF_ROPE_LINEAR] = linear, [HF_ROPE_LLAMA3] = llama3,
                                    [HF_ROPE_YARN] = yarn, [HF_ROPE_LONGROPE] = longrope};
    for (const char *const *k = common; *k; k++)
        if (strcmp(*k, key) == 0) return true;
    for (const char *const *k = by_type[type]; k && *k; k++)
        if (strcmp(*k, key) == 0) return true;
    return false;
}

/* partial_rotary_factor (in a rope object or at the top level): in (0, 1],
 * one value wherever it is given. */
static int partial_rotary(const doc *d, hf_config *cfg, const cJSON *v, const char *name) {
    double x = 1.0;
    if (!is_set(v)) return 0;
    if (double_value(v, name, 1.0, &x, NULL, d->path, d->err)) return -1;
    if (!(x > 0 && x <= 1)) return refuse(d, name, v, "must be in (0, 1]");
    if (cfg->partial_rotary_key[0] && x != cfg->partial_rotary_factor)
        return hfq_fail(d->err, d->path, "field '%s' = %g disagrees with '%s' = %g", name, x, cfg->partial_rotary_key,
                        cfg->partial_rotary_factor);
    cfg->partial_rotary_factor = x;
    snprintf(cfg->partial_rotary_key, sizeof cfg->partial_rotary_key, "%s", name);
    return 0;
}

/* One list of longrope factors: finite positive numbers, at most
 * HF_MAX_ROPE_FACTORS (their count is the family's to check). */
static int factor_list(const doc *d, const cJSON *rs, const char *prefix, const char *key, float *out, int64_t *n) {
    char name[HF_KEY_MAX];
    const cJSON *v = member(rs, prefix, key, name);
    if (!is_set(v)) return hfq_fail(d->err, d->path, "field '%s' is missing (rope type 'longrope')", name);
    if (!cJSON_IsArray(v)) return refuse(d, name, v, "not a list of numbers");
    *n = 0;
    for (const cJSON *e = v->child; e; e = e->next) {
        if (*n == HF_MAX_ROPE_FACTORS)
            return hfq_fail(d->err, d->path, "field '%s' has more than %d factors", name, HF_MAX_ROPE_FACTORS);
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || !(e->valuedouble > 0))
            return hfq_fail(d->err, d->path, "field '%s': factor %lld is not a positive number", name, (long long)*n);
        out[(*n)++] = (float)e->valuedouble;   /* float32, as llama.cpp's converter stores them */
    }
    return 0;
}

/* longrope's factor lists and attention_factor. */
static int parse_longrope(const doc *d, hf_config *cfg, const cJSON *rs, const char *prefix) {
    char name[HF_KEY_MAX];
    if (factor_list(d, rs, prefix, "short_factor", cfg->rope_short_factors, &cfg->rope_n_short_factors) ||
        factor_list(d, rs, prefix, "long_factor", cfg->rope_long_factors, &cfg->rope_n_long_factors) ||
        double_value(member(rs, prefix, "attention_factor", name), name, 0, &cfg->rope_longrope_attn_factor,
                     &cfg->has_longrope_attn_factor, d->path, d->err))
        return -1;
    if (cfg->has_longrope_attn_factor && !(cfg->rope_longrope_attn_factor > 0))
        return refuse(d, name, member(rs, prefix, "attention_factor", name), "must be positive");
    return 0;
}

/* One rope object (rope_scaling, rope_parameters, or one layer type's entry
 * of rope_parameters) into cfg's rope fields; `prefix` names it in messages. */
static int parse_rope(const doc *d, hf_config *cfg, const cJSON *rs, const char *prefix) {
    char name[HF_KEY_MAX];
    snprintf(cfg->rope_key, sizeof cfg->rope_key, "%s", prefix);
    if (!cJSON_IsObject(rs)) return hfq_fail(d->err, d->path, "field '%s' is not an object", prefix);
    const cJSON *t = member(rs, prefix, "rope_type", name);
    const cJSON *t_old = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!is_set(t)) t = member(rs, prefix, "type", name);
    else if (is_set(t_old) && (!cJSON_IsString(t_old) || !cJSON_IsString(t) ||
                               strcmp(t->valuestring, t_old->valuestring) != 0))
        return hfq_fail(d->err, d->path, "fields '%s.rope_type' and '%s.type' disagree", prefix, prefix);
    cfg->rope_scaling = HF_ROPE_NONE;
    if (is_set(t)) {
        if (!cJSON_IsString(t)) return hfq_fail(d->err, d->path, "field '%s' is not a string", name);
        size_t i = 0;
        while (i < sizeof rope_types / sizeof rope_types[0] && strcmp(rope_types[i].name, t->valuestring) != 0) i++;
        if (i == sizeof rope_types / sizeof rope_types[0])
            return refuse(d, name, t, "rope type not supported (supported: default, linear, llama3, yarn, longrope)");
        cfg->rope_scaling = rope_types[i].type;
    } else if (cJSON_GetObjectItemCaseSensitive(rs, "factor")) {
        /* a scaling factor without a type: what would it scale? */
        return hfq_fail(d->err, d->path, "field '%s' has a factor but no rope_type", prefix);
    }
    for (const cJSON *k = rs->child; k; k = k->next)
        if (!rope_key_known(cfg->rope_scaling, k->string)) {
            char kname[HF_KEY_MAX];
            member(rs, prefix, k->string, kname);
            char why[96];
            snprintf(why, sizeof why, "not computed for rope type '%s'", hf_rope_scaling_name(cfg->rope_scaling));
            return refuse(d, kname, k, why);
        }
    bool has_theta;
    double theta = 0;
    if (double_value(member(rs, prefix, "rope_theta", name), name, 0, &theta, &has_theta, d->path, d->err) ||
        partial_rotary(d, cfg, member(rs, prefix, "partial_rotary_factor", name), name))
        return -1;
    if (has_theta) {
        if (!(theta > 0)) return refuse(d, name, member(rs, prefix, "rope_theta", name), "must be positive");
        cfg->rope_theta = theta;
        cfg->has_rope_theta = true;
    }
    const cJSON *f = member(rs, prefix, "factor", name);
    if (double_value(f, name, 1.0, &cfg->rope_factor, NULL, d->path, d->err)) return -1;
    bool needs_factor = cfg->rope_scaling == HF_ROPE_LINEAR || cfg->rope_scaling == HF_ROPE_LLAMA3 ||
                        cfg->rope_scaling == HF_ROPE_YARN;
    if (needs_factor && !is_set(f))
        return hfq_fail(d->err, d->path, "field '%s' is missing (rope type '%s')", name,
                        hf_rope_scaling_name(cfg->rope_scaling));
    if (!(cfg->rope_factor > 0)) return refuse(d, name, f, "must be positive");
    cfg->has_rope_factor = is_set(f);
    /* absent: the top level's (Phi-3 keeps it there), else, as transformers
     * 5 standardizes it, max_position_embeddings (llama.cpp's converter
     * takes 8192 for llama3: it would not compute what transformers does) */
    char top_name[HF_KEY_MAX];
    int64_t top_orig;
    if (int_value(member(rs, prefix, "original_max_position_embeddings", name), name, 1, (int64_t)1 << 31, 0,
                  false, &cfg->rope_original_context, d->path, d->err) ||
        get_int(d, "original_max_position_embeddings", 1, (int64_t)1 << 31, 0, false, &top_orig))
        return -1;
    field(d, "original_max_position_embeddings", top_name);
    if (top_orig && cfg->rope_original_context && top_orig != cfg->rope_original_context)
        return hfq_fail(d->err, d->path, "field '%s' = %lld disagrees with '%s' = %lld", top_name, (long long)top_orig,
                        name, (long long)cfg->rope_original_context);
    if (!cfg->rope_original_context) cfg->rope_original_context = top_orig;
    if (!cfg->rope_original_context && cfg->rope_scaling == HF_ROPE_LLAMA3) {
        if (!cfg->context_length)
            return hfq_fail(d->err, d->path, "field '%s' is missing and so is max_position_embeddings", name);
        cfg->rope_original_context = cfg->context_length;
    }
    if (cfg->rope_scaling == HF_ROPE_LLAMA3) {
        char lo_name[HF_KEY_MAX], hi_name[HF_KEY_MAX];
        if (double_value(member(rs, prefix, "low_freq_factor", lo_name), lo_name, 1.0, &cfg->rope_low_freq_factor,
                         NULL, d->path, d->err) ||
            double_value(member(rs, prefix, "high_freq_factor", hi_name), hi_name, 4.0, &cfg->rope_high_freq_factor,
                         NULL, d->path, d->err))
            return -1;
        if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor) || !(cfg->rope_low_freq_factor > 0))
            return hfq_fail(d->err, d->path, "%s: llama3 factors are inconsistent (low_freq_factor %g, high_freq_factor %g)",
                            prefix, cfg->rope_low_freq_factor, cfg->rope_high_freq_factor);
    }
    if (cfg->rope_scaling == HF_ROPE_LONGROPE && parse_longrope(d, cfg, rs, prefix)) return -1;
    if (cfg->rope_scaling == HF_ROPE_YARN) {
        const struct { const char *key; double *v; bool *has; } yk[] = {
            {"beta_fast", &cfg->rope_yarn_beta_fast, &cfg->has_yarn_beta_fast},
            {"beta_slow", &cfg->rope_yarn_beta_slow, &cfg->has_yarn_beta_slow},
            {"attention_factor", &cfg->rope_yarn_attn_factor, &cfg->has_yarn_attn_factor},
        };
        for (size_t i = 0; i < sizeof yk / sizeof yk[0]; i++)
            if (double_value(member(rs, prefix, yk[i].key, name), name, 0, yk[i].v, yk[i].has, d->path, d->err))
                return -1;
        if (cfg->has_yarn_attn_factor && !(cfg->rope_yarn_attn_factor > 0))
            return refuse(d, name, member(rs, prefix, "attention_factor", name), "must be positive");
        /* transformers does not read extrapolation_factor (llama.cpp would
         * scale the ramp by it): only its neutral value agrees in both */
        if (refuse_unless(d, member(rs, prefix, "extrapolation_factor", name), name, 1.0,
                          "a YaRN extrapolation factor other than 1 is not supported"))
            return -1;
        const cJSON *tr = member(rs, prefix, "truncate", name);
        if (is_set(tr) && !cJSON_IsTrue(tr))
            return refuse(d, name, tr, "YaRN without truncated correction bounds is not supported");
    }
    return 0;
}

/* The rope of sliding-window layers (transformers 5's per-layer-type entry):
 * only its base is kept, as llama.cpp's rope.freq_base_swa. */
static int parse_rope_swa(const doc *d, hf_config *cfg, const cJSON *rs, const char *prefix) {
    hf_config swa;
    memset(&swa, 0, sizeof swa);
    if (parse_rope(d, &swa, rs, prefix)) return -1;
    if (swa.rope_scaling != HF_ROPE_NONE)
        return hfq_fail(d->err, d->path, "field '%s': rope type '%s' is not supported for sliding-window layers",
                        prefix, hf_rope_scaling_name(swa.rope_scaling));
    cfg->rope_theta_swa = swa.rope_theta;
    cfg->has_rope_theta_swa = swa.has_rope_theta;
    return 0;
}

/* transformers 5: rope_parameters (one object, or one per layer type);
 * transformers 4: rope_theta and rope_scaling. */
static int parse_ropes(const doc *d, hf_config *cfg) {
    char pname[HF_KEY_MAX], sname[HF_KEY_MAX], tname[HF_KEY_MAX];
    const cJSON *rp = field(d, "rope_parameters", pname);
    const cJSON *rs = field(d, "rope_scaling", sname);
    double top_theta = 0;
    bool has_top_theta;
    /* the class default only when no rope object gives the base (below) */
    if (double_value(given(d, "rope_theta", tname), tname, 0, &top_theta, &has_top_theta, d->path, d->err))
        return -1;
    if (is_set(rp) && is_set(rs))
        return hfq_fail(d->err, d->path, "fields '%s' and '%s' are both given: which one holds?", pname, sname);
    const cJSON *full = is_set(rp) ? rp : rs;
    char full_name[HF_KEY_MAX];
    snprintf(full_name, sizeof full_name, "%s", is_set(rp) ? pname : sname);
    cfg->rope_scaling = HF_ROPE_NONE;
    if (cJSON_IsObject(rp) && (cJSON_GetObjectItemCaseSensitive(rp, "full_attention") ||
                               cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention"))) {
        full = NULL;
        for (const cJSON *k = rp->child; k; k = k->next) {
            char kname[HF_KEY_MAX];
            member(rp, pname, k->string, kname);
            if (strcmp(k->string, "full_attention") == 0) {
                full = k;
                snprintf(full_name, sizeof full_name, "%s", kname);
            } else if (strcmp(k->string, "sliding_attention") == 0) {
                if (parse_rope_swa(d, cfg, k, kname)) return -1;
            } else {
                return refuse(d, kname, k, "layer type not supported (full_attention, sliding_attention)");
            }
        }
    }
    if (is_set(full) && parse_rope(d, cfg, full, full_name)) return -1;
    if (has_top_theta) {
        if (!(top_theta > 0)) return refuse(d, tname, given(d, "rope_theta", tname), "must be positive");
        if (cfg->has_rope_theta && cfg->rope_theta != top_theta)
            return hfq_fail(d->err, d->path, "field '%s' = %g disagrees with '%s.rope_theta' = %g", tname, top_theta,
                            cfg->rope_key, cfg->rope_theta);
        cfg->rope_theta = top_theta;
        cfg->has_rope_theta = true;
    }
    if (!cfg->has_rope_theta &&
        get_double(d, "rope_theta", 0, &cfg->rope_theta, &cfg->has_rope_theta))
        return -1;
    if (cfg->has_rope_theta && !(cfg->rope_theta > 0))
        return refuse(d, tname, field(d, "rope_theta", tname), "must be positive");
    /* Phi-3 keeps its original context at the top level, rope scaling or not */
    if (!cfg->rope_original_context &&
        get_int(d, "original_max_position_embeddings", 1, (int64_t)1 << 31, 0, false, &cfg->rope_original_context))
        return -1;
    /* transformers 4's name of the sliding layers' base (Gemma 3) */
    bool has_local;
    double local = 0;
    if (get_double(d, "rope_local_base_freq", 0, &local, &has_local)) return -1;
    if (has_local && !cfg->has_rope_theta_swa) {
        cfg->rope_theta_swa = local;
        cfg->has_rope_theta_swa = true;
    }
    return 0;
}

/* --- layer types and sliding windows --------------------------------------- */

/* Counts the layers that are not full attention: layer_types (transformers
 * 5), else what transformers 4 derives from use_sliding_window and
 * max_window_layers (Qwen2), else sliding_window alone (Mistral). Whether an
 * active window narrower than the context is computed is the family's
 * business (the converter refuses it for the others). */
static int parse_layer_types(const doc *d, hf_config *cfg) {
    char name[HF_KEY_MAX], wname[HF_KEY_MAX], uname[HF_KEY_MAX];
    const cJSON *lt = field(d, "layer_types", name);
    const cJSON *use = field(d, "use_sliding_window", uname);
    if (get_int(d, "sliding_window", 0, (int64_t)1 << 31, 0, false, &cfg->sliding_window)) return -1;
    const cJSON *win = field(d, "sliding_window", wname);
    cfg->n_sliding_layers = 0;
    if (get_int(d, "sliding_window_pattern", 1, 100000, 0, false, &cfg->sliding_window_pattern)) return -1;
    if (is_set(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != cfg->n_layers)
            return hfq_fail(d->err, d->path, "field '%s' is not a list of %lld layer types", name,
                            (long long)cfg->n_layers);
        if (cfg->n_layers > HF_MAX_LAYER_TYPES)
            return hfq_fail(d->err, d->path, "field '%s': more than %d layer types are not supported", name,
                            HF_MAX_LAYER_TYPES);
        cfg->has_layer_types = true;
        int64_t i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            if (cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0) continue;
            if (cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0) {
                cfg->n_sliding_layers++;
                cfg->layer_sliding[i] = 1;
                continue;
            }
            return refuse(d, name, e, "layer type not supported (full_attention, sliding_attention)");
        }
    } else if (cfg->sliding_window_pattern > 0) {
        /* transformers 4's Gemma 3: layer i slides unless (i + 1) % pattern == 0 */
        for (int64_t i = 0; i < cfg->n_layers; i++) cfg->n_sliding_layers += (i + 1) % cfg->sliding_window_pattern != 0;
    } else if (is_set(use)) {
        if (!cJSON_IsBool(use)) return hfq_fail(d->err, d->path, "field '%s' is not a boolean", uname);
        int64_t max_window_layers = 28;   /* absent: 28, transformers' Qwen2/Qwen3 default */
        if (get_int(d, "max_window_layers", 0, 100000, 28, false, &max_window_layers)) return -1;
        if (cJSON_IsTrue(use) && cfg->n_layers > max_window_layers)
            cfg->n_sliding_layers = cfg->n_layers - max_window_layers;
    } else if (is_set(win)) {
        cfg->n_sliding_layers = cfg->n_layers;
    }
    /* a window as wide as the context changes nothing */
    bool narrow = cfg->sliding_window > 0 && (cfg->context_length == 0 || cfg->sliding_window < cfg->context_length);
    cfg->narrow_window = narrow;
    snprintf(cfg->window_key, sizeof cfg->window_key, "%s", wname);
    return 0;
}

/* --- keys no supported family computes -------------------------------------- */

static int refuse_unsupported(const doc *d, hf_config *cfg) {
    char name[HF_KEY_MAX];
    const cJSON *v;
    /* hidden_activation wins in the Gemma classes that read it; both given must agree */
    static const char *const acts[] = {"hidden_act", "hidden_activation"};
    const cJSON *first = NULL;
    char first_name[HF_KEY_MAX] = "";
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        v = field(d, acts[i], name);
        if (!is_set(v)) continue;
        const bool legacy = cJSON_IsString(v) && strcmp(v->valuestring, "gelu") == 0;
        bool gelu = legacy || (cJSON_IsString(v) && strcmp(v->valuestring, "gelu_pytorch_tanh") == 0);
        cfg->gelu_legacy |= legacy;
        if (!gelu && !(cJSON_IsString(v) && strcmp(v->valuestring, "silu") == 0))
            return refuse(d, name, v, "only silu (SwiGLU) and gelu_pytorch_tanh (GeGLU) feed-forwards are supported");
        if (first && gelu != cfg->gelu_tanh) {
            char why[HF_KEY_MAX + 40], val[80];
            show(first, val, sizeof val);
            snprintf(why, sizeof why, "disagrees with '%s' = %s", first_name, val);
            return refuse(d, cfg->gelu_tanh ? first_name : name, cfg->gelu_tanh ? first : v, why);
        }
        first = v;
        snprintf(first_name, sizeof first_name, "%s", name);
        cfg->gelu_tanh = gelu;
        snprintf(cfg->act_key, sizeof cfg->act_key, "%s", name);
    }
    if (get_double(d, "attn_logit_softcapping", 0, &cfg->attn_softcap, NULL) ||
        get_double(d, "final_logit_softcapping", 0, &cfg->final_softcap, NULL) ||
        get_double(d, "query_pre_attn_scalar", 0, &cfg->query_pre_attn_scalar, &cfg->has_query_pre_attn_scalar))
        return -1;
    static const char *const caps[] = {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        if (is_set(v = field(d, caps[i], name)) && !(v->valuedouble > 0))
            return refuse(d, name, v, "must be positive");
    v = field(d, "use_bidirectional_attention", name);
    if (is_set(v) && !cJSON_IsFalse(v)) return refuse(d, name, v, "bidirectional attention is not supported");
    /* attention_multiplier replaces 1/sqrt(head_dim) (Granite): any value changes it */
    if (is_set(v = field(d, "attention_multiplier", name)))
        return refuse(d, name, v, "attention scale multipliers are not supported");
    static const char *const mults[] = {"embedding_multiplier", "residual_multiplier", "logits_scaling"};
    for (size_t i = 0; i < sizeof mults / sizeof mults[0]; i++)
        if (refuse_unless(d, field(d, mults[i], name), name, 1.0, "multipliers are not supported")) return -1;
    if (partial_rotary(d, cfg, field(d, "partial_rotary_factor", name), name)) return -1;
    v = field(d, "mlp_bias", name);
    if (is_set(v) && !cJSON_IsFalse(v)) return refuse(d, name, v, "feed-forward biases are not supported");
    v = field(d, "attention_bias", name);
    if (is_set(v) && !cJSON_IsBool(v)) return hfq_fail(d->err, d->path, "field '%s' is not a boolean", name);
    cfg->attention_bias = cJSON_IsTrue(v);
    v = field(d, "tie_word_embeddings", name);
    if (is_set(v) && !cJSON_IsBool(v)) return hfq_fail(d->err, d->path, "field '%s' is not a boolean", name);
    cfg->tie_word_embeddings = cJSON_IsTrue(v);
    return 0;
}

static void model_name(hf_config *cfg, const cJSON *root, const char *dir) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "_name_or_path");
    if (cJSON_IsString(nm) && nm->valuestring[0]) {
        const char *slash = strrchr(nm->valuestring, '/');
        snprintf(cfg->name, sizeof cfg->name, "%s", slash ? slash + 1 : nm->valuestring);
        return;
    }
    const char *end = dir + strlen(dir);
    while (end > dir && end[-1] == '/') end--;
    const char *start = end;
    while (start > dir && start[-1] != '/') start--;
    snprintf(cfg->name, sizeof cfg->name, "%.*s", (int)(end - start), start);
}

static int parse_dims(const doc *d, hf_config *cfg) {
    if (get_int(d, "hidden_size", 1, MAX_DIM, 0, true, &cfg->hidden_size) ||
        get_int(d, "intermediate_size", 1, MAX_DIM, 0, true, &cfg->intermediate_size) ||
        get_int(d, "num_hidden_layers", 1, 100000, 0, true, &cfg->n_layers) ||
        get_int(d, "num_attention_heads", 1, MAX_DIM, 0, true, &cfg->n_heads) ||
        get_int(d, "num_key_value_heads", 1, MAX_DIM, cfg->n_heads, false, &cfg->n_kv_heads) ||
        get_int(d, "vocab_size", 1, (int64_t)1 << 31, 0, true, &cfg->vocab_size) ||
        get_int(d, "max_position_embeddings", 0, (int64_t)1 << 31, 0, false, &cfg->context_length))
        return -1;
    char name[HF_KEY_MAX];
    cfg->has_head_dim = is_set(field(d, "head_dim", name));
    if (get_int(d, "head_dim", 1, MAX_DIM, cfg->hidden_size / cfg->n_heads, false, &cfg->head_dim)) return -1;
    if (!cfg->has_head_dim && cfg->hidden_size % cfg->n_heads != 0)
        return hfq_fail(d->err, d->path, "hidden_size %lld is not a multiple of num_attention_heads %lld",
                        (long long)cfg->hidden_size, (long long)cfg->n_heads);
    /* rope rotates pairs of a head's values */
    if (cfg->head_dim % 2 != 0)
        return hfq_fail(d->err, d->path, "head size %lld (%s) is odd: rope needs pairs", (long long)cfg->head_dim,
                        cfg->has_head_dim ? name : "hidden_size / num_attention_heads");
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return hfq_fail(d->err, d->path, "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                        (long long)cfg->n_heads, (long long)cfg->n_kv_heads);
    return get_double(d, "rms_norm_eps", 1e-6, &cfg->rms_norm_eps, NULL);
}

static int parse_fp8(const doc *d, hf_config *cfg) {
    char name[HF_KEY_MAX];
    const cJSON *qc = field(d, "quantization_config", name);
    const cJSON *wbs = cJSON_IsObject(qc) ? cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size") : NULL;
    if (!cJSON_IsArray(wbs) || cJSON_GetArraySize(wbs) != 2) return 0;
    const cJSON *r = cJSON_GetArrayItem(wbs, 0), *c = cJSON_GetArrayItem(wbs, 1);
    if (!cJSON_IsNumber(r) || !cJSON_IsNumber(c) || r->valuedouble < 1 || c->valuedouble < 1 ||
        r->valuedouble > MAX_DIM || c->valuedouble > MAX_DIM)
        return hfq_fail(d->err, d->path, "quantization_config.weight_block_size is invalid");
    cfg->fp8_block_rows = (int64_t)r->valuedouble;
    cfg->fp8_block_cols = (int64_t)c->valuedouble;
    return 0;
}

/* Qwen3-MoE's dense layers (transformers' Qwen3MoeDecoderLayer): layer i
 * has experts unless it is in mlp_only_layers or (i + 1) % decoder_sparse_step
 * != 0; the others a dense SwiGLU of intermediate_size. */
static int parse_dense_layers(const doc *d, hf_config *cfg) {
    char name[HF_KEY_MAX];
    int64_t step;
    if (get_int(d, "decoder_sparse_step", 1, 100000, 1, false, &step)) return -1;
    const cJSON *v = field(d, "mlp_only_layers", name);
    if (is_set(v) && !cJSON_IsArray(v)) return refuse(d, name, v, "must be a list of layer indices");
    bool any = step != 1 || (is_set(v) && cJSON_GetArraySize(v) > 0);
    if (!any) return 0;
    if (cfg->n_layers > HF_MAX_LAYER_TYPES)
        return hfq_fail(d->err, d->path, "dense layers among more than %d layers are not supported",
                        HF_MAX_LAYER_TYPES);
    for (int64_t i = 0; i < cfg->n_layers; i++) cfg->layer_dense[i] = (i + 1) % step != 0;
    for (const cJSON *e = is_set(v) ? v->child : NULL; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int64_t)e->valuedouble || e->valuedouble < 0 ||
            e->valuedouble >= (double)cfg->n_layers)
            return refuse(d, name, e, "not a layer index below num_hidden_layers");
        cfg->layer_dense[(int64_t)e->valuedouble] = 1;
    }
    for (int64_t i = 0; i < cfg->n_layers; i++) cfg->n_dense_layers += cfg->layer_dense[i];
    return 0;
}

/* The expert counts and widths; a shared expert is refused (no family
 * computes it). */
static int parse_experts(const doc *d, hf_config *cfg) {
    char name[HF_KEY_MAX];
    const char *count_key = is_set(field(d, "num_local_experts", name)) ? "num_local_experts" : "num_experts";
    if (get_int(d, count_key, 0, 1 << 16, 0, false, &cfg->n_experts) ||
        get_int(d, "num_experts_per_tok", 1, 1 << 16, 1, false, &cfg->n_experts_used) ||
        get_int(d, "moe_intermediate_size", 1, MAX_DIM, cfg->intermediate_size, false, &cfg->expert_ff))
        return -1;
    const cJSON *v = field(d, "norm_topk_prob", name);
    cfg->has_norm_topk_prob = is_set(v);
    if (cfg->has_norm_topk_prob && !cJSON_IsBool(v)) return refuse(d, name, v, "must be true or false");
    cfg->norm_topk_prob = cJSON_IsTrue(v);
    if (cfg->n_experts == 0) return 0;
    if (cfg->n_experts_used > cfg->n_experts)
        return refuse(d, "num_experts_per_tok", field(d, "num_experts_per_tok", name), "exceeds the number of experts");
    if (parse_dense_layers(d, cfg)) return -1;
    static const char *const shared[] = {"shared_expert_intermediate_size", "n_shared_experts"};
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
        if (refuse_unless(d, field(d, shared[i], name), name, 0.0, "shared experts are not supported")) return -1;
    return 0;
}

int hf_config_load(hf_config *cfg, const char *dir, hfq_error *err) {
    return hf_config_load_defaults(cfg, dir, NULL, err);
}

int hf_config_load_defaults(hf_config *cfg, const char *dir, const char *(*defaults_for)(const char *architecture),
                            hfq_error *err) {
    memset(cfg, 0, sizeof *cfg);
    cJSON *defaults = NULL;
    cfg->partial_rotary_factor = 1.0;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *root = hfq_json_load(path, err);
    if (!root) return -1;
    int rc = -1;
    doc d = {.root = root, .path = path, .err = err};
    if (!cJSON_IsObject(root)) {
        hfq_fail(err, path, "top level is not a JSON object");
        goto done;
    }
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (is_set(text) && !cJSON_IsObject(text)) {
        hfq_fail(err, path, "field 'text_config' is not an object");
        goto done;
    }
    d.text = is_set(text) ? text : NULL;
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    if (!cJSON_IsString(a0)) {
        hfq_fail(err, path, "missing 'architectures' list");
        goto done;
    }
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", a0->valuestring);
    const char *dtext = defaults_for ? defaults_for(cfg->architecture) : NULL;
    if (dtext && !(defaults = cJSON_Parse(dtext))) {
        hfq_fail(err, path, "out of memory for the defaults of %s", cfg->architecture);
        goto done;
    }
    d.defaults = defaults;
    model_name(cfg, root, dir);
    char name[HF_KEY_MAX];
    cfg->bos_token_id = first_id(field(&d, "bos_token_id", name));
    cfg->eos_token_id = first_id(field(&d, "eos_token_id", name));
    if (parse_dims(&d, cfg) || parse_ropes(&d, cfg) || parse_layer_types(&d, cfg) || refuse_unsupported(&d, cfg) ||
        parse_fp8(&d, cfg) || parse_experts(&d, cfg))
        goto done;
    rc = 0;
done:
    cJSON_Delete(defaults);
    cJSON_Delete(root);
    return rc;
}
