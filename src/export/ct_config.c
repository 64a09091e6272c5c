#include "src/export/ct_config.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/atomic_file.h"
#include "formats/ggml_type.h"
#include "src/hf/rope_llama3.h"

const hf_arch *ct_family_find(const gguf_file *f, hfq_error *err) {
    int64_t i = gguf_find_key(f, "general.architecture");
    const char *arch = i < 0 || gguf_kv_type(f, i) != GGUF_VT_STRING ? NULL : gguf_get_str(f, i, NULL, NULL);
    const hf_arch *fam = hf_arch_find_gguf(arch);
    if (!fam) {
        char names[256];
        hfq_fail(err, gguf_path(f), "general.architecture '%s' has no transformers family to export to (%s)",
                 arch ? arch : "(missing)", hf_arch_supported(names, sizeof names));
    } else if (fam->norm_plus_one) {
        /* the export writes neither w back from 1 + w nor Gemma's config keys */
        hfq_fail(err, gguf_path(f), "general.architecture '%s': export to transformers is not supported for it yet",
                 arch);
        return NULL;
    }
    return fam;
}

/* ---- GGUF keys ---- */

typedef struct keys {
    const gguf_file *f;
    const char *arch;
    hfq_error *err;
} keys;

static int64_t key_index(const keys *k, const char *suffix) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", k->arch, suffix);
    return gguf_find_key(k->f, name);
}

/* {arch}.suffix as an integer; dflt when absent and dflt >= 0, else an error. */
static int key_int(const keys *k, const char *suffix, int64_t dflt, int64_t *out) {
    int64_t i = key_index(k, suffix);
    if (i < 0) {
        *out = dflt;
        return dflt >= 0 ? 0 : hfq_fail(k->err, gguf_path(k->f), "key %s.%s is missing", k->arch, suffix);
    }
    return gguf_get_int(k->f, i, out, k->err);
}

/* {arch}.suffix as a float; *has false when absent. */
static int key_float(const keys *k, const char *suffix, double *out, bool *has) {
    int64_t i = key_index(k, suffix);
    *has = i >= 0;
    return i < 0 ? 0 : gguf_get_float(k->f, i, out, k->err);
}

/* The shortest decimal that reads back as the same float: GGUF stores F32,
 * and config.json should say 1e-05, not 9.99999975e-06. */
static double short_float(double v) {
    const float f = (float)v;
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

static void add_token_id(cJSON *o, const gguf_file *f, const char *key, const char *json_key) {
    int64_t i = gguf_find_key(f, key), v;
    if (i >= 0 && gguf_get_int(f, i, &v, NULL) == 0) cJSON_AddNumberToObject(o, json_key, (double)v);
    else cJSON_AddNullToObject(o, json_key);
}

/* Llama 3's rope scaling, which the GGUF holds only as rope_freqs.weight:
 * the parameters that reproduce its factors (src/hf/rope_llama3.h). */
static cJSON *llama3_parameters(const keys *k, double theta, int64_t head_dim, const gguf_tensor_info *t,
                                hfq_error *err) {
    hf_llama3_rope p = {.theta = theta, .head_dim = head_dim};
    const char *why = "is not F32 of one dimension";
    if (t->type != GT_F32 || t->n_dims != 1 || hf_llama3_rope_recover(t->data, t->ne[0], &p, &why))
        return hfq_fail(err, gguf_path(k->f), "rope_freqs.weight (Llama 3 rope scaling): %s", why), NULL;
    cJSON *rp = cJSON_CreateObject();
    if (!rp) return hfq_fail(err, "config.json", "out of memory"), NULL;
    cJSON_AddStringToObject(rp, "rope_type", "llama3");
    cJSON_AddNumberToObject(rp, "rope_theta", short_float(theta));
    cJSON_AddNumberToObject(rp, "factor", short_float(p.factor));
    cJSON_AddNumberToObject(rp, "low_freq_factor", p.low_freq_factor);
    cJSON_AddNumberToObject(rp, "high_freq_factor", p.high_freq_factor);
    cJSON_AddNumberToObject(rp, "original_max_position_embeddings", (double)p.original_context);
    return rp;
}

/* rope_parameters as transformers 5 writes them. */
static cJSON *rope_parameters(const keys *k, int64_t head_dim, hfq_error *err) {
    double theta = 10000.0, v;
    bool has;
    if (key_float(k, "rope.freq_base", &v, &has)) return NULL;
    if (has) theta = v;
    const gguf_tensor_info *freqs = gguf_find_tensor(k->f, "rope_freqs.weight");
    if (freqs) return llama3_parameters(k, theta, head_dim, freqs, err);
    int64_t ti = key_index(k, "rope.scaling.type");
    const char *type = ti < 0 ? "none" : gguf_get_str(k->f, ti, NULL, err);
    if (!type) return NULL;
    cJSON *rp = cJSON_CreateObject();
    if (!rp) return hfq_fail(err, "config.json", "out of memory"), NULL;
    const bool yarn = strcmp(type, "yarn") == 0;
    if (strcmp(type, "none") != 0 && strcmp(type, "linear") != 0 && !yarn) {
        cJSON_Delete(rp);
        return hfq_fail(err, gguf_path(k->f), "%s.rope.scaling.type '%s' cannot be exported", k->arch, type), NULL;
    }
    cJSON_AddStringToObject(rp, "rope_type", strcmp(type, "none") == 0 ? "default" : type);
    cJSON_AddNumberToObject(rp, "rope_theta", short_float(theta));
    if (strcmp(type, "none") != 0) {
        if (key_float(k, "rope.scaling.factor", &v, &has) || !has) {
            cJSON_Delete(rp);
            if (!has) hfq_fail(err, gguf_path(k->f), "key %s.rope.scaling.factor is missing", k->arch);
            return NULL;
        }
        cJSON_AddNumberToObject(rp, "factor", short_float(v));
    }
    if (yarn) {
        static const char *const opt[][2] = {{"rope.scaling.yarn_attn_factor", "attention_factor"},
                                             {"rope.scaling.yarn_beta_fast", "beta_fast"},
                                             {"rope.scaling.yarn_beta_slow", "beta_slow"}};
        int64_t orig;
        if (key_int(k, "rope.scaling.original_context_length", 0, &orig)) return cJSON_Delete(rp), NULL;
        if (orig > 0) cJSON_AddNumberToObject(rp, "original_max_position_embeddings", (double)orig);
        for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
            if (key_float(k, opt[i][0], &v, &has)) return cJSON_Delete(rp), NULL;
            if (has) cJSON_AddNumberToObject(rp, opt[i][1], short_float(v));
        }
    }
    return rp;
}

/* ---- quantization_config ---- */

static const char *format_name(ct_kind kind) {
    return kind == CT_FP8    ? "float-quantized"
           : kind == CT_INT8 ? "int-quantized"
           : kind == CT_INT4 ? "pack-quantized"
                             : "nvfp4-pack-quantized";
}

static bool same_scheme(const ct_scheme *a, const ct_scheme *b) {
    return a->kind == b->kind && a->group == b->group && a->static_input == b->static_input &&
           a->asymmetric == b->asymmetric;
}

/* QuantizationArgs as compressed-tensors' model_dump writes them. */
static cJSON *quant_args(ct_kind kind, bool symmetric, const char *strategy, int64_t group_size, bool dynamic) {
    cJSON *a = cJSON_CreateObject();
    if (!a) return NULL;
    cJSON_AddNumberToObject(a, "num_bits", kind == CT_NVFP4 || kind == CT_INT4 ? 4 : 8);
    cJSON_AddStringToObject(a, "type", kind == CT_INT8 || kind == CT_INT4 ? "int" : "float");
    cJSON_AddBoolToObject(a, "symmetric", symmetric);
    if (group_size > 0) cJSON_AddNumberToObject(a, "group_size", (double)group_size);
    else cJSON_AddNullToObject(a, "group_size");
    cJSON_AddStringToObject(a, "strategy", strategy);
    cJSON_AddBoolToObject(a, "dynamic", dynamic);
    if (kind == CT_NVFP4) cJSON_AddStringToObject(a, "scale_dtype", "torch.float8_e4m3fn");
    return a;
}

static cJSON *weight_args(const ct_scheme *s) {
    if (s->kind == CT_NVFP4) return quant_args(s->kind, true, "tensor_group", 16, false);
    if (s->group == CT_GROUP_BLOCK) { /* compressed-tensors' FP8_BLOCK: block_structure [128, 128] */
        cJSON *a = quant_args(s->kind, true, "block", 0, false), *bs = cJSON_CreateIntArray((const int[]){128, 128}, 2);
        if (a && bs) cJSON_AddItemToObject(a, "block_structure", bs);
        else cJSON_Delete(bs);
        return a;
    }
    return quant_args(s->kind, !s->asymmetric, s->group == 0 ? "tensor" : s->group < 0 ? "channel" : "group",
                      s->group > 0 ? s->group : 0, false);
}

static cJSON *input_args(const ct_scheme *s) {
    /* W4A16: INT4 has no activation quantization, NVFP4 without input scales none either */
    if (s->kind == CT_INT4 || (s->kind == CT_NVFP4 && !s->static_input)) return NULL;
    if (s->kind == CT_NVFP4) {
        /* W4A4 (compressed-tensors' NVFP4): the static global scale input_global_scale, the E4M3 scale of
         * each 16 values computed per token ("dynamic": "local") */
        cJSON *a = quant_args(s->kind, true, "tensor_group", 16, false);
        if (a) cJSON_ReplaceItemInObject(a, "dynamic", cJSON_CreateString("local"));
        return a;
    }
    if (s->group == CT_GROUP_BLOCK) return quant_args(s->kind, true, "group", 128, true); /* FP8_BLOCK's */
    return s->static_input ? quant_args(s->kind, true, "tensor", 0, false) : quant_args(s->kind, true, "token", 0, true);
}

static cJSON *quantization_config(const ct_linear *lin, int64_t n) {
    cJSON *q = cJSON_CreateObject(), *groups = cJSON_AddObjectToObject(q, "config_groups");
    if (!q || !groups) return cJSON_Delete(q), NULL;
    /* distinct schemes in order of first use */
    int64_t n_schemes = 0, first_kind = -1;
    bool mixed_formats = false;
    for (int64_t i = 0; i < n; i++) {
        const ct_scheme *s = &lin[i].scheme;
        bool seen = s->kind == CT_DENSE;
        for (int64_t j = 0; j < i && !seen; j++) seen = same_scheme(&lin[j].scheme, s);
        if (seen) continue;
        if (first_kind < 0) first_kind = s->kind;
        else if (strcmp(format_name(s->kind), format_name((ct_kind)first_kind)) != 0) mixed_formats = true;
        n_schemes++;
    }
    int64_t g = 0;
    for (int64_t i = 0; i < n; i++) {
        const ct_scheme *s = &lin[i].scheme;
        bool seen = s->kind == CT_DENSE;
        for (int64_t j = 0; j < i && !seen; j++) seen = same_scheme(&lin[j].scheme, s);
        if (seen) continue;
        char name[32];
        snprintf(name, sizeof name, "group_%" PRId64, g++);
        cJSON *grp = cJSON_AddObjectToObject(groups, name), *targets = cJSON_AddArrayToObject(grp, "targets");
        if (n_schemes == 1) {
            cJSON_AddItemToArray(targets, cJSON_CreateString("Linear"));
        } else {
            for (int64_t j = i; j < n; j++)
                if (same_scheme(&lin[j].scheme, s)) cJSON_AddItemToArray(targets, cJSON_CreateString(lin[j].name));
        }
        cJSON_AddItemToObject(grp, "weights", weight_args(s));
        cJSON *in = input_args(s);
        if (in) cJSON_AddItemToObject(grp, "input_activations", in);
        else cJSON_AddNullToObject(grp, "input_activations");
        cJSON_AddNullToObject(grp, "output_activations");
        cJSON_AddStringToObject(grp, "format", format_name(s->kind));
    }
    cJSON_AddStringToObject(q, "quant_method", "compressed-tensors");
    cJSON_AddNullToObject(q, "kv_cache_scheme");
    cJSON_AddStringToObject(q, "format", mixed_formats ? "mixed-precision"
                                         : first_kind < 0 ? "dense" : format_name((ct_kind)first_kind));
    cJSON_AddStringToObject(q, "quantization_status", "compressed");
    cJSON_AddNullToObject(q, "global_compression_ratio");
    cJSON *ignore = cJSON_AddArrayToObject(q, "ignore");
    for (int64_t i = 0; i < n; i++)
        if (lin[i].scheme.kind == CT_DENSE) cJSON_AddItemToArray(ignore, cJSON_CreateString(lin[i].name));
    return q;
}

/* ---- config.json ---- */

int ct_write_json(cJSON *root, const char *path, hfq_error *err) {
    char *text = cJSON_Print(root);
    if (!text) return hfq_fail(err, path, "out of memory");
    hfq_atomic_file af;
    int rc = hfq_atomic_open(&af, path, err);
    if (rc == 0) rc = hfq_atomic_write(&af, text, strlen(text), err);
    if (rc == 0) rc = hfq_atomic_write(&af, "\n", 1, err);
    if (rc == 0) rc = hfq_atomic_commit(&af, err);
    else if (af.fp) hfq_atomic_abort(&af);
    free(text);
    return rc;
}

int ct_write_config(const gguf_file *f, const hf_arch *fam, const ct_model_facts *facts, const ct_linear *lin,
                    int64_t n_lin, const char *path, hfq_error *err) {
    const keys k = {f, fam->gguf_arch, err};
    int64_t hidden, ff, layers, heads, kv_heads, head_dim, ctx;
    double eps;
    bool has_eps;
    if (key_int(&k, "embedding_length", -1, &hidden) || key_int(&k, "feed_forward_length", -1, &ff) ||
        key_int(&k, "block_count", -1, &layers) || key_int(&k, "attention.head_count", -1, &heads) ||
        key_int(&k, "attention.head_count_kv", heads, &kv_heads) || key_int(&k, "context_length", 0, &ctx) ||
        key_float(&k, "attention.layer_norm_rms_epsilon", &eps, &has_eps))
        return -1;
    if (!has_eps) return hfq_fail(err, gguf_path(f), "key %s.attention.layer_norm_rms_epsilon is missing", k.arch);
    if (heads <= 0 || hidden % heads) return hfq_fail(err, gguf_path(f), "%s.attention.head_count %" PRId64 " does not "
                                                      "divide embedding_length %" PRId64, k.arch, heads, hidden);
    int64_t n_rot, n_swa;
    if (key_int(&k, "attention.key_length", hidden / heads, &head_dim) ||
        key_int(&k, "rope.dimension_count", head_dim, &n_rot) || key_int(&k, "attention.sliding_window", 0, &n_swa))
        return -1;
    /* what the config.json written here would not state (phi3's partial rotary, windows) */
    if (n_rot != head_dim)
        return hfq_fail(err, gguf_path(f), "%s.rope.dimension_count %" PRId64 " of a head of %" PRId64
                        " (partial rotary): not exported yet", k.arch, n_rot, head_dim);
    if (n_swa > 0)
        return hfq_fail(err, gguf_path(f), "%s.attention.sliding_window %" PRId64 ": not exported yet", k.arch, n_swa);
    cJSON *rope = rope_parameters(&k, head_dim, err);
    if (!rope) return -1;
    cJSON *c = cJSON_CreateObject(), *archs = cJSON_AddArrayToObject(c, "architectures");
    cJSON *q = quantization_config(lin, n_lin);
    if (q && facts->kv_scales)   /* llm-compressor's FP8 KV cache: E4M3, one static scale per layer's K and V */
        cJSON_ReplaceItemInObject(q, "kv_cache_scheme", quant_args(CT_FP8, true, "tensor", 0, false));
    if (!c || !archs || !q) {
        cJSON_Delete(c), cJSON_Delete(q), cJSON_Delete(rope);
        return hfq_fail(err, path, "out of memory");
    }
    cJSON_AddItemToArray(archs, cJSON_CreateString(fam->hf_names[0]));
    if (fam->config_attention_bias) cJSON_AddBoolToObject(c, "attention_bias", facts->attention_bias);
    cJSON_AddNumberToObject(c, "attention_dropout", 0.0);
    add_token_id(c, f, "tokenizer.ggml.bos_token_id", "bos_token_id");
    cJSON_AddStringToObject(c, "dtype", facts->dtype);
    add_token_id(c, f, "tokenizer.ggml.eos_token_id", "eos_token_id");
    cJSON_AddNumberToObject(c, "head_dim", (double)head_dim);
    cJSON_AddStringToObject(c, "hidden_act", "silu");
    cJSON_AddNumberToObject(c, "hidden_size", (double)hidden);
    cJSON_AddNumberToObject(c, "initializer_range", 0.02);
    cJSON_AddNumberToObject(c, "intermediate_size", (double)ff);
    if (ctx > 0) cJSON_AddNumberToObject(c, "max_position_embeddings", (double)ctx);
    if (fam->config_mlp_bias) cJSON_AddBoolToObject(c, "mlp_bias", false);
    cJSON_AddStringToObject(c, "model_type", fam->model_type);
    cJSON_AddNumberToObject(c, "num_attention_heads", (double)heads);
    cJSON_AddNumberToObject(c, "num_hidden_layers", (double)layers);
    cJSON_AddNumberToObject(c, "num_key_value_heads", (double)kv_heads);
    /* null when absent: Phi3Config's default (32000) would not fit every vocabulary */
    add_token_id(c, f, "tokenizer.ggml.padding_token_id", "pad_token_id");
    cJSON_AddItemToObject(c, "quantization_config", q);
    cJSON_AddNumberToObject(c, "rms_norm_eps", short_float(eps));
    cJSON_AddItemToObject(c, "rope_parameters", rope);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", facts->tied);
    cJSON_AddBoolToObject(c, "use_cache", true);
    if (fam->config_sliding_window) cJSON_AddBoolToObject(c, "use_sliding_window", false);
    cJSON_AddNumberToObject(c, "vocab_size", (double)facts->vocab_size);
    int rc = ct_write_json(c, path, err);
    cJSON_Delete(c);
    return rc;
}
