#include "src/hf/ct_read.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/half.h"
#include "src/common/json_file.h"
#include "src/hf/ct_kv.h"
#include "src/hf/ct_scheme.h"
#include "src/hf/modelopt_read.h"
#include "src/hf/pyregex.h"

static const struct { const char *name; ct_fmt fmt; } formats[] = {
    {"dense", FMT_DENSE}, {"naive-quantized", FMT_NAIVE}, {"int-quantized", FMT_INT},
    {"float-quantized", FMT_FLOAT}, {"pack-quantized", FMT_PACK}, {"nvfp4-pack-quantized", FMT_NVFP4},
    {"mxfp4-pack-quantized", FMT_MXFP4}};
static const char *const strat_names[] = {"tensor", "channel", "group", "block", "tensor_group", "token"};

static int fmt_parse(const char *s, ct_fmt *out) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(s, formats[i].name) == 0) return *out = formats[i].fmt, 0;
    return -1;
}

static bool is_set(const cJSON *v) { return v && !cJSON_IsNull(v); }

static int int_field(const hf_ct_config *c, const cJSON *o, const char *key, const char *where, int64_t lo,
                     int64_t hi, int64_t *out, hfq_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!is_set(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return hfq_fail(err, c->path, "field '%s.%s' is not an integer in %lld..%lld", where, key, (long long)lo,
                        (long long)hi);
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* One QuantizationArgs object (weights or input_activations). */
static int parse_args(const hf_ct_config *c, const cJSON *o, const char *where, ct_args *a, hfq_error *err) {
    static const char *const known[] = {"num_bits", "type", "symmetric", "group_size", "strategy",
                                        "block_structure", "dynamic", "actorder", "scale_dtype", "zp_dtype",
                                        "observer", "observer_kwargs", NULL};
    memset(a, 0, sizeof *a);
    if (!is_set(o)) return 0;
    if (!cJSON_IsObject(o)) return hfq_fail(err, c->path, "field '%s' is not an object", where);
    for (const cJSON *kv = o->child; kv; kv = kv->next) {
        bool ok = false;
        for (const char *const *k = known; *k && !ok; k++) ok = strcmp(*k, kv->string) == 0;
        if (!ok) return hfq_fail(err, c->path, "field '%s.%s' is not read by hfconv", where, kv->string);
    }
    a->present = true;
    int64_t bits = 8, group = 0;
    if (int_field(c, o, "num_bits", where, 1, 8, &bits, err) || int_field(c, o, "group_size", where, 1, 1 << 20,
                                                                         &group, err))
        return -1;
    a->bits = (int)bits;
    a->group = group;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (is_set(type) && !(cJSON_IsString(type) && (!strcmp(type->valuestring, "int") ||
                                                   !strcmp(type->valuestring, "float"))))
        return hfq_fail(err, c->path, "field '%s.type' is neither \"int\" nor \"float\"", where);
    a->is_float = is_set(type) && !strcmp(type->valuestring, "float");
    const cJSON *sym = cJSON_GetObjectItemCaseSensitive(o, "symmetric");
    if (is_set(sym) && !cJSON_IsBool(sym)) return hfq_fail(err, c->path, "field '%s.symmetric' is not a boolean", where);
    a->symmetric = !is_set(sym) || cJSON_IsTrue(sym);
    const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(o, "dynamic");
    if (!is_set(dyn) || cJSON_IsFalse(dyn)) a->dynamic = DYN_STATIC;
    else if (cJSON_IsTrue(dyn)) a->dynamic = DYN_TRUE;
    else if (cJSON_IsString(dyn) && !strcmp(dyn->valuestring, "local")) a->dynamic = DYN_LOCAL;
    else return hfq_fail(err, c->path, "field '%s.dynamic' is neither a boolean nor \"local\"", where);
    /* "static" and "dynamic" are compressed-tensors' aliases; true meant "group"
     * before 0.20 (which refuses it, and "group", as no longer written) */
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "actorder");
    const char *ao = cJSON_IsString(act) ? act->valuestring : "";
    if (!is_set(act) || cJSON_IsFalse(act)) a->actorder = ACTORDER_NONE;
    else if (!strcmp(ao, "weight") || !strcmp(ao, "static")) a->actorder = ACTORDER_WEIGHT;
    else if (cJSON_IsTrue(act) || !strcmp(ao, "group") || !strcmp(ao, "dynamic")) a->actorder = ACTORDER_GROUP;
    else return hfq_fail(err, c->path, "field '%s.actorder' is not false, \"weight\" or \"group\"", where);
    const cJSON *sdt = cJSON_GetObjectItemCaseSensitive(o, "scale_dtype");
    a->scale_e8m0 = cJSON_IsString(sdt) && !strcmp(sdt->valuestring, "torch.uint8");
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(o, "block_structure");
    if (is_set(bs)) {
        const cJSON *r = cJSON_GetArrayItem(bs, 0), *k = cJSON_GetArrayItem(bs, 1);
        if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 || !cJSON_IsNumber(r) || !cJSON_IsNumber(k) ||
            r->valuedouble < 1 || k->valuedouble < 1 || r->valuedouble > (1 << 20) || k->valuedouble > (1 << 20) ||
            r->valuedouble != floor(r->valuedouble) || k->valuedouble != floor(k->valuedouble))
            return hfq_fail(err, c->path, "field '%s.block_structure' is not two positive integers", where);
        a->br = (int64_t)r->valuedouble;
        a->bc = (int64_t)k->valuedouble;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "strategy");
    if (is_set(st)) {
        size_t i = 0;
        while (i < sizeof strat_names / sizeof strat_names[0] &&
               !(cJSON_IsString(st) && !strcmp(st->valuestring, strat_names[i])))
            i++;
        if (i == sizeof strat_names / sizeof strat_names[0])
            return hfq_fail(err, c->path, "field '%s.strategy' is not a strategy hfconv reads", where);
        a->strat = (ct_strat)i;
    } else {
        /* QuantizationArgs' validator: a group size means groups, a block structure blocks */
        a->strat = a->group ? S_GROUP : a->br ? S_BLOCK : S_TENSOR;
    }
    if ((a->strat == S_GROUP || a->strat == S_TENSOR_GROUP) && !a->group)
        return hfq_fail(err, c->path, "field '%s.strategy' is \"%s\" without a group_size", where,
                        strat_names[a->strat]);
    if (a->strat == S_BLOCK && !a->br)
        return hfq_fail(err, c->path, "field '%s.strategy' is \"block\" without a block_structure", where);
    return 0;
}

/* The weight arguments each format stores, and the activations the runner emulates. */
static int check_group(const hf_ct_config *c, const ct_group *g, const char *where, hfq_error *err) {
    const ct_args *w = &g->w, *in = &g->in;
    char key[200];
    snprintf(key, sizeof key, "%s.weights", where);
    if (g->fmt == FMT_DENSE) return 0;
    if (!w->present) return hfq_fail(err, c->path, "field '%s' is missing for a quantized format", key);
    bool ok;
    switch (g->fmt) {
    case FMT_NAIVE: case FMT_INT: case FMT_FLOAT:
        ok = (w->is_float ? w->bits == 8 : w->bits >= 2) && w->strat <= S_BLOCK && (!w->is_float || w->symmetric);
        break;
    case FMT_PACK: ok = !w->is_float && w->strat <= S_GROUP; break;
    case FMT_NVFP4:
        ok = w->is_float && w->bits == 4 && w->group == 16 && w->symmetric &&
             (w->strat == S_TENSOR_GROUP || w->strat == S_GROUP);
        break;
    case FMT_MXFP4: ok = w->is_float && w->bits == 4 && w->group == 32 && w->symmetric && w->strat == S_GROUP; break;
    default: ok = false;
    }
    if (!ok)
        return hfq_fail(err, c->path, "field '%s': %d-bit %s %s weights are not stored by format '%s'", key, w->bits,
                        w->is_float ? "float" : "int", strat_names[w->strat], formats[g->fmt].name);
    if (w->actorder == ACTORDER_GROUP && (w->strat != S_GROUP || g->fmt == FMT_NVFP4 || g->fmt == FMT_MXFP4))
        return hfq_fail(err, c->path, "field '%s.actorder' is \"group\" on %s %s weights: only int / fp8 groups are "
                        "read with a group index", key, formats[g->fmt].name, strat_names[w->strat]);
    if (!in->present) return 0;
    snprintf(key, sizeof key, "%s.input_activations", where);
    if (in->actorder != ACTORDER_NONE)
        return hfq_fail(err, c->path, "field '%s.actorder': activation ordering applies to weights only", key);
    bool nvfp4_acts = g->fmt == FMT_NVFP4 && in->is_float && in->bits == 4 && in->group == 16 &&
                      in->strat == S_TENSOR_GROUP && in->dynamic == DYN_LOCAL && in->symmetric;
    bool i8_acts = g->fmt != FMT_NVFP4 && g->fmt != FMT_MXFP4 && in->bits == 8 && in->symmetric &&
                   ((in->dynamic == DYN_STATIC && in->strat == S_TENSOR) ||
                    (in->dynamic == DYN_TRUE && (in->strat == S_TOKEN || in->strat == S_GROUP)));
    /* compressed-tensors' MXFP4 (W4A4): dynamic E2M1 per 32 with E8M0 scales */
    bool mxfp4_acts = g->fmt == FMT_MXFP4 && in->is_float && in->bits == 4 && in->group == 32 &&
                      in->strat == S_GROUP && in->dynamic == DYN_TRUE && in->symmetric && in->scale_e8m0;
    if (!nvfp4_acts && !i8_acts && !mxfp4_acts)
        return hfq_fail(err, c->path, "field '%s': %s %d-bit %s %s%s activations are not implemented", key,
                        in->dynamic == DYN_STATIC ? "static" : "dynamic", in->bits, in->is_float ? "float" : "int",
                        strat_names[in->strat], in->symmetric ? "" : " asymmetric");
    return 0;
}

int hf_ct_add_target(hf_ct_config *c, const char *text, int group, bool glob, hfq_error *err) {
    ct_target **list = group < 0 ? &c->ignore : &c->targets;
    int *n = group < 0 ? &c->n_ignore : &c->n_targets;
    for (int i = 0; i < *n; i++)
        if (!strcmp((*list)[i].text, text)) return (*list)[i].group = group, 0;  /* the last group wins, as a dict */
    ct_target *t = realloc(*list, (size_t)(*n + 1) * sizeof **list);
    if (!t) return hfq_fail(err, NULL, "out of memory");
    *list = t;
    ct_target *e = &t[*n];
    memset(e, 0, sizeof *e);
    e->text = text;
    e->group = group;
    e->is_glob = glob;
    e->is_re = !glob && !strncmp(text, "re:", 3);
    if (e->is_re && hf_pyregex_compile(&e->rx, "^", text + 3, ""))
        return hfq_fail(err, c->path, "target '%s' is not a regular expression hfconv reads (Python-only syntax?)",
                        text);
    (*n)++;
    return 0;
}

static int target_order(const void *a, const void *b) {
    const ct_target *x = a, *y = b;
    if (x->is_re != y->is_re) return x->is_re ? 1 : -1;
    return strcmp(x->text, y->text);
}

static int parse_list(hf_ct_config *c, const cJSON *list, const char *where, int group, hfq_error *err) {
    if (!is_set(list)) return 0;
    if (!cJSON_IsArray(list)) return hfq_fail(err, c->path, "field '%s' is not a list", where);
    for (const cJSON *v = list->child; v; v = v->next) {
        if (!cJSON_IsString(v)) return hfq_fail(err, c->path, "field '%s' holds a non-string", where);
        if (hf_ct_add_target(c, v->valuestring, group, false, err)) return -1;
    }
    return 0;
}

static bool empty(const cJSON *v) {
    return !is_set(v) || ((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child);
}

static int parse_config(hf_ct_config *c, const cJSON *qc, hfq_error *err) {
    static const char *const known[] = {"quant_method", "format", "quantization_status", "config_groups",
                                        "ignore", "kv_cache_scheme", "global_compression_ratio",
                                        "sparsity_config", "transform_config", "version", "moe_sparsity_config",
                                        NULL};
    for (const cJSON *kv = qc->child; kv; kv = kv->next) {
        bool ok = false;
        for (const char *const *k = known; *k && !ok; k++) ok = !strcmp(*k, kv->string);
        if (!ok) return hfq_fail(err, c->path, "field 'quantization_config.%s' is not read by hfconv", kv->string);
    }
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(qc, "kv_cache_scheme");
    if (!empty(kv) && hf_ct_kv_check_scheme(c->path, kv, err)) return -1;
    c->kv_scheme = !empty(kv);
    const char *refused[] = {"sparsity_config", "transform_config", "moe_sparsity_config"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (!empty(cJSON_GetObjectItemCaseSensitive(qc, refused[i])))
            return hfq_fail(err, c->path, "field 'quantization_config.%s': not implemented", refused[i]);
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(qc, "quantization_status");
    if (!cJSON_IsString(status) || strcmp(status->valuestring, "compressed"))
        return hfq_fail(err, c->path, "field 'quantization_config.quantization_status' is not \"compressed\"");
    ct_fmt top = FMT_DENSE;
    bool mixed = false;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(qc, "format");
    if (is_set(f)) {
        if (!cJSON_IsString(f)) return hfq_fail(err, c->path, "field 'quantization_config.format' is not a string");
        mixed = !strcmp(f->valuestring, "mixed-precision");
        if (!mixed && fmt_parse(f->valuestring, &top))
            return hfq_fail(err, c->path, "field 'quantization_config.format': unknown format '%s'", f->valuestring);
    }
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups");
    if (!cJSON_IsObject(groups) || !groups->child)
        return hfq_fail(err, c->path, "field 'quantization_config.config_groups' is missing or empty");
    c->n_groups = cJSON_GetArraySize(groups);
    if (!(c->groups = calloc((size_t)c->n_groups, sizeof *c->groups))) return hfq_fail(err, NULL, "out of memory");
    int gi = 0;
    for (const cJSON *g = groups->child; g; g = g->next, gi++) {
        char where[160];
        snprintf(where, sizeof where, "quantization_config.config_groups.%.64s", g->string);
        if (!cJSON_IsObject(g))
            return hfq_fail(err, c->path, "field '%s' is not a scheme object (preset names are not read)", where);
        for (const cJSON *kv = g->child; kv; kv = kv->next)
            if (strcmp(kv->string, "targets") && strcmp(kv->string, "weights") &&
                strcmp(kv->string, "input_activations") && strcmp(kv->string, "output_activations") &&
                strcmp(kv->string, "format"))
                return hfq_fail(err, c->path, "field '%s.%s' is not read by hfconv", where, kv->string);
        if (is_set(cJSON_GetObjectItemCaseSensitive(g, "output_activations")))
            return hfq_fail(err, c->path, "field '%s.output_activations': not implemented", where);
        ct_group *grp = &c->groups[gi];
        grp->fmt = top;
        const cJSON *gf = cJSON_GetObjectItemCaseSensitive(g, "format");
        if (is_set(gf)) {
            if (!cJSON_IsString(gf) || fmt_parse(gf->valuestring, &grp->fmt))
                return hfq_fail(err, c->path, "field '%s.format': unknown format '%s'", where,
                                cJSON_IsString(gf) ? gf->valuestring : "?");
        } else if (mixed) {
            return hfq_fail(err, c->path, "field '%s.format' is missing (format is mixed-precision)", where);
        }
        char key[200];
        snprintf(key, sizeof key, "%s.weights", where);
        if (parse_args(c, cJSON_GetObjectItemCaseSensitive(g, "weights"), key, &grp->w, err)) return -1;
        snprintf(key, sizeof key, "%s.input_activations", where);
        if (parse_args(c, cJSON_GetObjectItemCaseSensitive(g, "input_activations"), key, &grp->in, err)) return -1;
        if (check_group(c, grp, where, err)) return -1;
        snprintf(key, sizeof key, "%s.targets", where);
        if (parse_list(c, cJSON_GetObjectItemCaseSensitive(g, "targets"), key, gi, err)) return -1;
    }
    if (parse_list(c, cJSON_GetObjectItemCaseSensitive(qc, "ignore"), "quantization_config.ignore", -1, err))
        return -1;
    /* compressed-tensors' match_targets: exact names, then regexes, each sorted by text */
    if (c->n_targets) qsort(c->targets, (size_t)c->n_targets, sizeof *c->targets, target_order);
    return 0;
}

void hf_ct_config_free(hf_ct_config *c) {
    if (!c) return;
    for (int i = 0; i < c->n_targets; i++)
        if (c->targets[i].is_re) regfree(&c->targets[i].rx);
    for (int i = 0; i < c->n_ignore; i++)
        if (c->ignore[i].is_re) regfree(&c->ignore[i].rx);
    free(c->targets);
    free(c->ignore);
    free(c->groups);
    cJSON_Delete(c->root);
    cJSON_Delete(c->extra_root);
    free(c);
}

int hf_ct_config_load(const char *config_path, hf_ct_config **out, hfq_error *err) {
    *out = NULL;
    cJSON *root = hfq_json_load(config_path, err);
    if (!root) return -1;
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    const cJSON *m = cJSON_IsObject(qc) ? cJSON_GetObjectItemCaseSensitive(qc, "quant_method") : NULL;
    const bool ct = cJSON_IsString(m) && !strcmp(m->valuestring, "compressed-tensors");
    bool mo = cJSON_IsString(m) && !strcmp(m->valuestring, "modelopt");
    /* Model Optimizer's own file, beside config.json, when config.json says nothing */
    char mo_path[4096];
    const char *slash = strrchr(config_path, '/');
    snprintf(mo_path, sizeof mo_path, "%.*shf_quant_config.json", slash ? (int)(slash - config_path + 1) : 0,
             config_path);
    FILE *probe = !is_set(qc) ? fopen(mo_path, "rb") : NULL;
    if (probe) fclose(probe);
    if (!ct && !mo && !probe) {
        cJSON_Delete(root);
        return 0;
    }
    hf_ct_config *c = calloc(1, sizeof *c);
    if (!c) {
        cJSON_Delete(root);
        return hfq_fail(err, NULL, "out of memory");
    }
    c->root = root;
    snprintf(c->path, sizeof c->path, "%s", probe ? mo_path : config_path);
    if (probe) {
        if (!(c->extra_root = hfq_json_load(mo_path, err))) {
            hf_ct_config_free(c);
            return -1;
        }
        qc = cJSON_GetObjectItemCaseSensitive(c->extra_root, "quantization");
        mo = true;
    }
    if (mo ? hf_modelopt_parse(c, qc, err) : parse_config(c, qc, err)) {
        hf_ct_config_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

bool hf_ct_config_kv_scheme(const hf_ct_config *c) { return c->kv_scheme; }

bool hf_ct_side_tensor(const char *name) {
    if (hf_ct_kv_tensor(name)) return true;   /* src/hf/ct_kv.h reads them */
    static const char *const sides[] = {".weight_scale", ".weight_zero_point", ".weight_global_scale",
                                        ".weight_shape", ".input_scale", ".input_global_scale",
                                        ".input_zero_point", ".weight_packed", ".weight_scale_2", ".weight_g_idx",
                                        NULL};
    for (const char *const *s = sides; *s; s++)
        if (has_suffix(name, *s)) return true;
    return false;
}

bool hf_ct_packed_weight_name(const char *name, char *buf, size_t cap) {
    if (!has_suffix(name, ".weight_packed")) return false;
    int n = snprintf(buf, cap, "%.*s", (int)(strlen(name) - strlen("_packed")), name);
    return n > 0 && (size_t)n < cap;
}

static bool target_hit(const ct_target *t, const char *module) {
    if (t->is_re) return regexec(&t->rx, module, 0, NULL, 0) == 0;
    if (t->is_glob) return fnmatch(t->text, module, 0) == 0;
    return !strcmp(t->text, module);
}

/* The config group quantizing module, or -1. */
static int group_of(const hf_ct_config *c, const char *module, bool embedding) {
    const char *cls = embedding ? "Embedding" : "Linear";
    for (int i = 0; i < c->n_ignore; i++)
        if (target_hit(&c->ignore[i], module) || !strcmp(c->ignore[i].text, cls)) return -1;
    for (int i = 0; i < c->n_targets; i++)
        if (target_hit(&c->targets[i], module)) return c->targets[i].group;
    for (int i = 0; i < c->n_targets; i++)
        if (!strcmp(c->targets[i].text, cls)) return c->targets[i].group;
    return -1;
}

/* ---- one weight ---- */

struct hf_ct_weight {
    const st_model *st;
    const ct_group *g;
    char what[96];
    const st_tensor *codes;
    const unsigned char *data;
    int64_t rows, cols, words;      /* words: I32 words of a packed row */
    st_dtype sdt;                   /* scales' dtype: the decompression's arithmetic */
    float *scale;                   /* as stored, decoded */
    int64_t scols;                  /* scales per row of scale blocks */
    float *zero;                    /* zero points (asymmetric), the scale's layout */
    int32_t *gidx;                  /* actorder "group": each column's scale group; NULL: i / G */
    float global;                   /* NVFP4 weight_global_scale; 0: none */
    st_dtype gdt;
    bool has_input;
    float input;                    /* GGUF input scale */
    const unsigned char *raw_scale; /* NVFP4 E4M3 / MXFP4 E8M0 bytes */
    hf_ct_keep keep;
    char float_act[32];             /* hf_ct_weight_float_act_quant, or "" */
};

float hf_ct_round_to(st_dtype dt, float x) {
    if (dt == ST_BF16) return hfq_bf16_to_f32(hfq_f32_to_bf16(x));
    if (dt == ST_F16) return hfq_fp16_to_f32(hfq_f32_to_fp16(x));
    return x;
}

static bool float_dtype(st_dtype d) { return d == ST_F32 || d == ST_F16 || d == ST_BF16; }

static float float_at(const unsigned char *p, st_dtype dt, int64_t i) {
    if (dt == ST_F32) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    if (dt == ST_F8_E4M3) return hfq_fp8_to_f32(HFQ_FP8_E4M3, p[i]);
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return dt == ST_F16 ? hfq_fp16_to_f32(h) : hfq_bf16_to_f32(h);
}

static const char *shape_str(const st_tensor *t, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int d = 0; d < t->n_dims && n + 24 < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    return buf;
}

/* module + suffix, required (or optional: NULL without error). */
static const st_tensor *side(const hf_ct_weight *w, const char *module, const char *suffix, bool required,
                             hfq_error *err) {
    char name[1024];
    snprintf(name, sizeof name, "%s.%s", module, suffix);
    const st_tensor *t = st_find(w->st, name);
    if (!t && required)
        hfq_fail(err, st_shard_path(w->st, 0), "tensor '%s' is missing (format %s of %s)", name,
                 formats[w->g->fmt].name, module);
    return t;
}

static int want_shape(const hf_ct_weight *w, const st_tensor *t, int64_t a, int64_t b, hfq_error *err) {
    bool ok = b < 0 ? t->n_elements == a && t->n_dims <= 1 : t->n_dims == 2 && t->shape[0] == a && t->shape[1] == b;
    if (ok) return 0;
    char got[96];
    if (b < 0)
        return hfq_fail(err, st_shard_path(w->st, t->shard), "tensor '%s': shape [%s], expected [%lld]", t->name,
                        shape_str(t, got, sizeof got), (long long)a);
    return hfq_fail(err, st_shard_path(w->st, t->shard), "tensor '%s': shape [%s], expected [%lld, %lld]", t->name,
                    shape_str(t, got, sizeof got), (long long)a, (long long)b);
}

static int want_dtype(const hf_ct_weight *w, const st_tensor *t, bool ok, const char *expected, hfq_error *err) {
    if (ok) return 0;
    return hfq_fail(err, st_shard_path(w->st, t->shard), "tensor '%s': dtype %s, expected %s", t->name,
                    st_dtype_name(t->dtype), expected);
}

/* A scale tensor's n values as floats: finite and >= 0. */
static float *load_floats(const hf_ct_weight *w, const st_tensor *t, int64_t n, hfq_error *err) {
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return hfq_fail(err, NULL, "out of memory"), NULL;
    const unsigned char *p = st_data(w->st, t);
    for (int64_t i = 0; i < n; i++) {
        v[i] = float_at(p, t->dtype, i);
        if (!(v[i] >= 0.0f) || isinf(v[i])) {
            hfq_fail(err, st_shard_path(w->st, t->shard), "tensor '%s' holds %g at %lld, not a valid scale", t->name,
                     v[i], (long long)i);
            free(v);
            return NULL;
        }
    }
    return v;
}

/* Scales per strategy: [1], [rows, 1], [rows, cols / G], blocks. */
static int scale_layout(const hf_ct_weight *w, int64_t *srows, int64_t *scols) {
    const ct_args *a = &w->g->w;
    switch (a->strat) {
    case S_TENSOR: *srows = *scols = 1; return 0;
    case S_CHANNEL: *srows = w->rows, *scols = 1; return 0;
    case S_GROUP: case S_TENSOR_GROUP: *srows = w->rows, *scols = w->cols / a->group; return 0;
    case S_BLOCK:
        *srows = (w->rows + a->br - 1) / a->br;
        *scols = (w->cols + a->bc - 1) / a->bc;
        return 0;
    default: return -1;
    }
}

/* A packed int32 row element: bits [i*b, i*b + b) of the words at p. */
static int packed_code(const unsigned char *p, int64_t i, int bits) {
    uint64_t bit = (uint64_t)i * (uint64_t)bits, word = bit / 32, off = bit % 32;
    uint32_t lo, hi = 0;
    memcpy(&lo, p + 4 * word, 4);
    uint64_t v = lo >> off;
    if (off + (uint64_t)bits > 32) {
        memcpy(&hi, p + 4 * (word + 1), 4);
        v |= (uint64_t)hi << (32 - off);
    }
    return (int)(v & ((1u << bits) - 1)) - (1 << (bits - 1));
}

static int open_zero_points(hf_ct_weight *w, const char *module, int64_t srows, int64_t scols, hfq_error *err) {
    const st_tensor *z = side(w, module, "weight_zero_point", true, err);
    if (!z) return -1;
    int64_t n = srows * scols;
    if (!(w->zero = malloc((size_t)n * sizeof *w->zero))) return hfq_fail(err, NULL, "out of memory");
    const unsigned char *p = st_data(w->st, z);
    const int bits = w->g->w.bits;
    if (w->g->fmt == FMT_PACK && w->g->w.strat != S_TENSOR) {
        /* packed down the rows: [ceil(rows * b / 32), scols] words */
        int64_t zwords = (srows * bits + 31) / 32;
        if (want_dtype(w, z, z->dtype == ST_I32, "I32", err) || want_shape(w, z, zwords, scols, err)) return -1;
        uint32_t *col = malloc((size_t)zwords * 4);
        if (!col) return hfq_fail(err, NULL, "out of memory");
        for (int64_t c = 0; c < scols; c++) {
            for (int64_t k = 0; k < zwords; k++) memcpy(&col[k], p + 4 * (k * scols + c), 4);
            for (int64_t r = 0; r < srows; r++) w->zero[r * scols + c] = (float)packed_code((const void *)col, r, bits);
        }
        free(col);
        return 0;
    }
    if (w->g->w.strat == S_TENSOR ? want_shape(w, z, 1, -1, err) : want_shape(w, z, srows, scols, err)) return -1;
    for (int64_t i = 0; i < n; i++) {
        if (z->dtype == ST_I8) w->zero[i] = (float)(int8_t)p[i];
        else if (z->dtype == ST_I32) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            w->zero[i] = (float)v;
        } else if (float_dtype(z->dtype) || z->dtype == ST_F8_E4M3) {
            w->zero[i] = float_at(p, z->dtype, i);
        } else {
            return want_dtype(w, z, false, "I8, I32 or a float", err);
        }
        if (!isfinite(w->zero[i]))
            return hfq_fail(err, st_shard_path(w->st, z->shard), "tensor '%s' holds a non-finite zero point", z->name);
    }
    return 0;
}

/* actorder "group": M.weight_g_idx, column i's scale group (I32 [cols]).
 * compressed-tensors (before 0.20; _process_group) permutes the columns by
 * argsort(g_idx), takes contiguous groups and permutes back, which is column
 * i in group g_idx[i] when every group holds exactly G columns: required.
 * A -1 anywhere is an index never filled, read as column order as it does;
 * so is the identity (i / G), and the weight stays keepable. */
static int open_g_idx(hf_ct_weight *w, const char *module, hfq_error *err) {
    const st_tensor *t = side(w, module, "weight_g_idx", true, err);
    if (!t || want_dtype(w, t, t->dtype == ST_I32 || t->dtype == ST_I64, "I32 or I64", err) ||
        want_shape(w, t, w->cols, -1, err))
        return -1;
    const int64_t group = w->g->w.group, n_groups = w->cols / group;
    const unsigned char *p = st_data(w->st, t);
    int64_t *v = malloc((size_t)w->cols * sizeof *v), *count = calloc((size_t)n_groups, sizeof *count);
    int rc = v && count ? 0 : hfq_fail(err, NULL, "out of memory");
    bool unset = false, identity = true;
    for (int64_t i = 0; !rc && i < w->cols; i++) {
        if (t->dtype == ST_I64) memcpy(&v[i], p + 8 * i, 8);
        else {
            int32_t v32;
            memcpy(&v32, p + 4 * i, 4);
            v[i] = v32;
        }
        unset |= v[i] == -1;
        identity &= v[i] == i / group;
    }
    for (int64_t i = 0; !rc && !unset && !identity && i < w->cols; i++) {
        if (v[i] < 0 || v[i] >= n_groups)
            rc = hfq_fail(err, st_shard_path(w->st, t->shard), "tensor '%s' holds group %lld at %lld, not in 0..%lld",
                          t->name, (long long)v[i], (long long)i, (long long)n_groups - 1);
        else count[v[i]]++;
    }
    for (int64_t g = 0; !rc && !unset && !identity && g < n_groups; g++)
        if (count[g] != group)
            rc = hfq_fail(err, st_shard_path(w->st, t->shard), "tensor '%s' puts %lld columns in group %lld, not %lld",
                          t->name, (long long)count[g], (long long)g, (long long)group);
    if (!rc && !unset && !identity && !(w->gidx = malloc((size_t)w->cols * sizeof *w->gidx)))
        rc = hfq_fail(err, NULL, "out of memory");
    for (int64_t i = 0; w->gidx && i < w->cols; i++) w->gidx[i] = (int32_t)v[i];
    free(v);
    free(count);
    return rc;
}

/* One static activation scale [1] > 0, in the GGUF's terms. */
static int open_input(hf_ct_weight *w, const char *module, hfq_error *err) {
    const ct_args *in = &w->g->in;
    if (!in->present) return 0;
    const bool nvfp4 = w->g->fmt == FMT_NVFP4 && !w->g->modelopt;   /* Model Optimizer: input_scale as ours */
    if (w->g->fmt != FMT_NVFP4 && in->dynamic != DYN_STATIC) return 0;
    const st_tensor *t = side(w, module, nvfp4 ? "input_global_scale" : "input_scale", true, err);
    if (!t || want_dtype(w, t, float_dtype(t->dtype), "F32, F16 or BF16", err) || want_shape(w, t, 1, -1, err))
        return -1;
    float v = float_at(st_data(w->st, t), t->dtype, 0);
    if (!(v > 0.0f) || isinf(v))
        return hfq_fail(err, st_shard_path(w->st, t->shard), "tensor '%s' holds %g, not a valid scale", t->name, v);
    /* compressed-tensors divides by its global scales where our runner multiplies */
    w->input = nvfp4 ? 1.0f / v : v;
    w->has_input = true;
    return 0;
}

static int open_fp4(hf_ct_weight *w, const char *module, hfq_error *err) {
    const bool nv = w->g->fmt == FMT_NVFP4;
    const int64_t gsz = nv ? 16 : 32;
    if (w->cols % gsz)
        return hfq_fail(err, st_shard_path(w->st, w->codes->shard), "tensor '%s': %lld columns are not whole groups of %lld",
                        w->codes->name, (long long)w->cols, (long long)gsz);
    if (want_dtype(w, w->codes, w->codes->dtype == ST_U8, "U8", err) ||
        want_shape(w, w->codes, w->rows, w->cols / 2, err))
        return -1;
    const st_tensor *s = side(w, module, "weight_scale", true, err);
    if (!s || want_shape(w, s, w->rows, w->cols / gsz, err)) return -1;
    w->scols = w->cols / gsz;
    w->sdt = w->g->modelopt ? ST_F32 : ST_BF16;
    if (nv) {
        if (want_dtype(w, s, s->dtype == ST_F8_E4M3, "F8_E4M3", err)) return -1;
        if (!(w->scale = load_floats(w, s, w->rows * w->scols, err))) return -1;
        w->raw_scale = st_data(w->st, s);
        if (w->g->w.strat == S_TENSOR_GROUP) {
            const st_tensor *gs = side(w, module, w->g->modelopt ? "weight_scale_2" : "weight_global_scale", true, err);
            if (!gs || want_dtype(w, gs, float_dtype(gs->dtype), "F32, F16 or BF16", err) ||
                want_shape(w, gs, 1, -1, err))
                return -1;
            w->gdt = gs->dtype == ST_BF16 ? ST_BF16 : ST_F32;   /* torch's promotion with the BF16 scales */
            w->global = float_at(st_data(w->st, gs), gs->dtype, 0);
            if (!(w->global > 0.0f) || isinf(w->global))
                return hfq_fail(err, st_shard_path(w->st, gs->shard), "tensor '%s' holds %g, not a valid scale",
                                gs->name, w->global);
        }
        bool whole = w->cols % HFQ_QK_NVFP4 == 0 && w->global > 0.0f;
        for (int64_t i = 0; whole && i < w->rows * w->scols; i++) whole = w->raw_scale[i] < 0x7F;
        w->keep = whole ? HF_CT_KEEP_NVFP4 : HF_CT_DEQUANT;
        snprintf(w->what, sizeof w->what, "NVFP4 (E4M3 scales per 16%s)", w->global > 0.0f ? ", global scale" : "");
    } else {
        if (want_dtype(w, s, s->dtype == ST_U8, "U8 (E8M0)", err)) return -1;
        w->raw_scale = st_data(w->st, s);
        if (!(w->scale = malloc((size_t)(w->rows * w->scols) * sizeof *w->scale)))
            return hfq_fail(err, NULL, "out of memory");
        for (int64_t i = 0; i < w->rows * w->scols; i++) {
            if (w->raw_scale[i] == 0xFF)
                return hfq_fail(err, st_shard_path(w->st, s->shard), "tensor '%s' holds the E8M0 NaN at %lld", s->name,
                                (long long)i);
            w->scale[i] = hf_ct_round_to(ST_BF16, ldexpf(1.0f, (int)w->raw_scale[i] - 127));
        }
        w->keep = HF_CT_KEEP_MXFP4;
        snprintf(w->what, sizeof w->what, "MXFP4 (E8M0 scales per 32)");
    }
    return open_input(w, module, err);
}

static int open_int_or_fp8(hf_ct_weight *w, const char *module, hfq_error *err) {
    const ct_args *a = &w->g->w;
    const st_tensor *c = w->codes;
    if (w->g->fmt == FMT_PACK) {
        const st_tensor *shape = side(w, module, "weight_shape", true, err);
        if (!shape || want_dtype(w, shape, shape->dtype == ST_I64 || shape->dtype == ST_I32, "I64 or I32", err) ||
            want_shape(w, shape, 2, -1, err))
            return -1;
        const unsigned char *p = st_data(w->st, shape);
        int64_t dims[2];
        for (int i = 0; i < 2; i++) {
            if (shape->dtype == ST_I64) memcpy(&dims[i], p + 8 * i, 8);
            else {
                int32_t v;
                memcpy(&v, p + 4 * i, 4);
                dims[i] = v;
            }
        }
        if (dims[0] != w->rows || dims[1] != w->cols)
            return hfq_fail(err, st_shard_path(w->st, shape->shard), "tensor '%s' says [%lld, %lld], the model [%lld, %lld]",
                            shape->name, (long long)dims[0], (long long)dims[1], (long long)w->rows, (long long)w->cols);
        w->words = (w->cols * a->bits + 31) / 32;
        if (want_dtype(w, c, c->dtype == ST_I32, "I32", err) || want_shape(w, c, w->rows, w->words, err)) return -1;
    } else {
        bool ok = a->is_float ? c->dtype == ST_F8_E4M3 : c->dtype == ST_I8;
        if (want_dtype(w, c, ok, a->is_float ? "F8_E4M3" : "I8", err) || want_shape(w, c, w->rows, w->cols, err))
            return -1;
    }
    if ((a->strat == S_GROUP) && w->cols % a->group)
        return hfq_fail(err, st_shard_path(w->st, c->shard), "tensor '%s': %lld columns are not whole groups of %lld",
                        c->name, (long long)w->cols, (long long)a->group);
    int64_t srows, scols;
    if (scale_layout(w, &srows, &scols)) return hfq_fail(err, st_shard_path(w->st, c->shard), "bad strategy");
    const st_tensor *s = side(w, module, "weight_scale", true, err);
    if (!s || want_dtype(w, s, float_dtype(s->dtype), "F32, F16 or BF16", err) ||
        (a->strat == S_TENSOR || (w->g->modelopt && a->strat == S_CHANNEL && s->n_dims == 1)
             ? want_shape(w, s, srows * scols, -1, err)   /* Model Optimizer: per channel [rows] */
             : want_shape(w, s, srows, scols, err)))
        return -1;
    w->sdt = s->dtype;
    w->scols = scols;
    if (!(w->scale = load_floats(w, s, srows * scols, err))) return -1;
    if (!a->symmetric && open_zero_points(w, module, srows, scols, err)) return -1;
    if (a->actorder == ACTORDER_GROUP ? open_g_idx(w, module, err) : 0) return -1;
    const st_tensor *gi = a->actorder == ACTORDER_GROUP ? NULL : side(w, module, "weight_g_idx", false, NULL);
    if (gi)
        return hfq_fail(err, st_shard_path(w->st, gi->shard), "tensor '%s' is a group index but actorder is not "
                        "\"group\"", gi->name);
    char gran[64];
    if (a->strat == S_GROUP)
        snprintf(gran, sizeof gran, "per group of %lld%s", (long long)a->group, w->gidx ? ", activation order" : "");
    else if (a->strat == S_BLOCK) snprintf(gran, sizeof gran, "per block %lldx%lld", (long long)a->br, (long long)a->bc);
    else snprintf(gran, sizeof gran, "per %s", strat_names[a->strat]);
    if (a->is_float) snprintf(w->what, sizeof w->what, "FP8 E4M3 %s", gran);
    else snprintf(w->what, sizeof w->what, "INT%d %s%s", a->bits, gran, a->symmetric ? "" : " asymmetric");
    /* the runner's I8 activations are per token or static, in the weight's own
     * encoding: a weight whose checkpoint quantizes them per group (FP8_BLOCK's)
     * or in the other number kind (INT8 weights, FP8 activations) is dequantized */
    const ct_args *in = &w->g->in;
    const bool same_kind = !in->present || in->is_float == a->is_float;
    const bool acts_ok = same_kind && !(in->present && in->strat == S_GROUP);
    const bool i8 = !a->is_float && a->bits == 8 && a->symmetric && a->strat <= S_GROUP && acts_ok;
    /* FP8 per 128x128 block: docs/format-quant-ext.md's block granularity; FP8 codes
     * also take per-group FP8 activations (hfq.act_quant fp8_e4m3_g<G>, below) */
    const bool fp8 = a->is_float && (a->strat <= S_CHANNEL || (a->strat == S_BLOCK && a->br == 128 && a->bc == 128)) &&
                     same_kind;
    w->keep = i8 && !w->gidx ? HF_CT_KEEP_INT8 : fp8 ? HF_CT_KEEP_FP8 : HF_CT_DEQUANT;
    if (w->keep == HF_CT_KEEP_FP8 && in->present && in->strat == S_GROUP) {
        snprintf(w->float_act, sizeof w->float_act, "fp8_e4m3_g%lld", (long long)in->group);
        w->sdt = ST_F32;   /* --outtype: dequantized unrounded, as below */
        return open_input(w, module, err);
    }
    /* dynamic FP8 activations of a dequantized weight, emulated (check_group: 8-bit,
     * symmetric, dynamic per group or token; a token is one group of the whole row);
     * static ones of the other number kind stay float */
    if (!acts_ok && in->is_float && in->dynamic == DYN_TRUE) {
        snprintf(w->float_act, sizeof w->float_act, "fp8_e4m3_g%lld",
                 (long long)(in->strat == S_GROUP ? in->group : w->cols));
        /* code * scale in float32, unrounded: what the checkpoint's float model (its scale
         * parameters float32) and vLLM's FP8 GEMM multiply the emulated activations by;
         * a 2^-9 rounding here flips activation codes downstream (KL 4e-4 measured) */
        w->sdt = ST_F32;
    }
    return open_input(w, module, err);
}

int hf_ct_weight_open(const hf_ct_config *c, const st_model *st, const char *module, bool embedding, int64_t rows,
                      int64_t cols, hf_ct_weight **out, hfq_error *err) {
    *out = NULL;
    int gi = group_of(c, module, embedding);
    if (gi < 0 || c->groups[gi].fmt == FMT_DENSE) return 0;
    hf_ct_weight *w = calloc(1, sizeof *w);
    if (!w) return hfq_fail(err, NULL, "out of memory");
    w->st = st;
    w->g = &c->groups[gi];
    w->rows = rows;
    w->cols = cols;
    const bool packed = w->g->fmt == FMT_PACK || (w->g->fmt == FMT_NVFP4 && !w->g->modelopt) || w->g->fmt == FMT_MXFP4;
    int rc = 0;
    if (!(w->codes = side(w, module, packed ? "weight_packed" : "weight", true, err))) rc = -1;
    else if (w->g->fmt == FMT_NVFP4 || w->g->fmt == FMT_MXFP4) rc = open_fp4(w, module, err);
    else rc = open_int_or_fp8(w, module, err);
    if (rc) {
        hf_ct_weight_close(w);
        return -1;
    }
    w->data = st_data(st, w->codes);
    *out = w;
    return 0;
}

void hf_ct_weight_close(hf_ct_weight *w) {
    if (!w) return;
    free(w->scale);
    free(w->zero);
    free(w->gidx);
    free(w);
}

const st_tensor *hf_ct_weight_codes(const hf_ct_weight *w) { return w->codes; }
st_dtype hf_ct_weight_dtype(const hf_ct_weight *w) { return w->sdt; }
const char *hf_ct_weight_what(const hf_ct_weight *w) { return w->what; }
hf_ct_keep hf_ct_weight_keep(const hf_ct_weight *w) { return w->keep; }
float hf_ct_weight_global(const hf_ct_weight *w) {
    if (w->g->modelopt) return w->global;
    return w->global > 0.0f ? 1.0f / w->global : 1.0f;
}

const char *hf_ct_weight_float_act_quant(const hf_ct_weight *w) { return w->float_act[0] ? w->float_act : NULL; }

const char *hf_ct_weight_act_quant(const hf_ct_weight *w) {
    const ct_args *in = &w->g->in;
    if (!in->present) return "none";
    if (w->keep == HF_CT_KEEP_INT8 && !in->is_float && in->dynamic == DYN_TRUE && in->strat == S_TOKEN) return "int8_ct";
    if (w->keep == HF_CT_KEEP_FP8 && w->float_act[0]) return w->float_act;
    return w->g->fmt == FMT_MXFP4 ? "mxfp4" : NULL;
}

bool hf_ct_weight_input_scale(const hf_ct_weight *w, float *s) {
    if (w->has_input) *s = w->input;
    return w->has_input;
}

/* E2M1 code to its value (compressed-tensors' kE2M1ToFloat with the sign). */
static float e2m1(unsigned code) { return (code & 8 ? -0.5f : 0.5f) * (float)hfq_e2m1_doubled(code & 7); }

/* Code i of row r of the int / fp8 formats, as the float compressed-tensors casts it to. */
static float code_at(const hf_ct_weight *w, const unsigned char *row, int64_t i) {
    if (w->g->fmt == FMT_PACK) return (float)packed_code(row, i, w->g->w.bits);
    if (w->g->w.is_float) return hfq_fp8_to_f32(HFQ_FP8_E4M3, row[i]);
    return (float)(int8_t)row[i];
}

int hf_ct_weight_row(const hf_ct_weight *w, int64_t r, float *dst) {
    const ct_args *a = &w->g->w;
    if (w->g->fmt == FMT_NVFP4 || w->g->fmt == FMT_MXFP4) {
        const unsigned char *row = w->data + (size_t)(r * (w->cols / 2));
        const int64_t gsz = w->g->fmt == FMT_NVFP4 ? 16 : 32;
        for (int64_t i = 0; i < w->cols; i++) {
            float s = w->scale[r * w->scols + i / gsz];
            const unsigned code = i % 2 ? row[i / 2] >> 4 : row[i / 2] & 0xF;
            if (w->g->modelopt) {
                dst[i] = e2m1(code) * s * w->global;   /* vLLM: block product, then the global scale */
            } else {
                if (w->global > 0.0f) s = hf_ct_round_to(w->gdt, s / w->global);
                dst[i] = hf_ct_round_to(ST_BF16, hf_ct_round_to(w->gdt, e2m1(code) * s));
            }
            if (!isfinite(dst[i])) return -1;
        }
        return 0;
    }
    const size_t row_bytes = w->g->fmt == FMT_PACK ? (size_t)w->words * 4 : (size_t)w->cols * st_dtype_size(w->codes->dtype);
    const unsigned char *row = w->data + (size_t)r * row_bytes;
    int64_t srow = a->strat == S_TENSOR ? 0 : a->strat == S_BLOCK ? r / a->br : r;
    for (int64_t i = 0; i < w->cols; i++) {
        int64_t sc = a->strat == S_GROUP ? (w->gidx ? w->gidx[i] : i / a->group) : a->strat == S_BLOCK ? i / a->bc : 0;
        int64_t k = srow * w->scols + sc;
        float q = hf_ct_round_to(w->sdt, code_at(w, row, i));
        if (w->zero) q = hf_ct_round_to(w->sdt, q - hf_ct_round_to(w->sdt, w->zero[k]));
        dst[i] = hf_ct_round_to(w->sdt, q * w->scale[k]);
        if (!isfinite(dst[i])) return -1;
    }
    return 0;
}

void hf_ct_weight_raw_row(const hf_ct_weight *w, int64_t r, void *dst) {
    if (w->keep == HF_CT_KEEP_INT8 || w->keep == HF_CT_KEEP_FP8) {
        int8_t *d = dst;
        const unsigned char *row = w->data + (size_t)r * (w->g->fmt == FMT_PACK ? (size_t)w->words * 4 : (size_t)w->cols);
        for (int64_t i = 0; i < w->cols; i++)
            d[i] = w->g->fmt == FMT_PACK ? (int8_t)packed_code(row, i, 8) : (int8_t)row[i];
        return;
    }
    const unsigned char *row = w->data + (size_t)(r * (w->cols / 2));
    if (w->keep == HF_CT_KEEP_NVFP4) {
        hfq_block_nvfp4 *b = dst;
        for (int64_t blk = 0; blk < w->cols / HFQ_QK_NVFP4; blk++) {
            for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++) {
                const int64_t base = blk * HFQ_QK_NVFP4 + s * HFQ_QK_NVFP4_SUB;
                b[blk].d[s] = w->raw_scale[r * w->scols + base / 16];
                for (int j = 0; j < HFQ_QK_NVFP4_SUB / 2; j++) {
                    const int64_t lo = base + j, hi = base + j + HFQ_QK_NVFP4_SUB / 2;
                    const unsigned a = lo % 2 ? row[lo / 2] >> 4 : row[lo / 2] & 0xF;
                    const unsigned c = hi % 2 ? row[hi / 2] >> 4 : row[hi / 2] & 0xF;
                    b[blk].qs[s * (HFQ_QK_NVFP4_SUB / 2) + j] = (uint8_t)(a | c << 4);
                }
            }
        }
        return;
    }
    hfq_block_mxfp4 *b = dst;
    for (int64_t blk = 0; blk < w->cols / HFQ_QK_MXFP4; blk++) {
        b[blk].e = w->raw_scale[r * w->scols + blk];
        for (int j = 0; j < HFQ_QK_MXFP4 / 2; j++) {
            const int64_t lo = blk * HFQ_QK_MXFP4 + j, hi = lo + HFQ_QK_MXFP4 / 2;
            const unsigned a = lo % 2 ? row[lo / 2] >> 4 : row[lo / 2] & 0xF;
            const unsigned c = hi % 2 ? row[hi / 2] >> 4 : row[hi / 2] & 0xF;
            b[blk].qs[j] = (uint8_t)(a | c << 4);
        }
    }
}

bool hf_ct_weight_block(const hf_ct_weight *w, int64_t *nb0, int64_t *nb1) {
    if (w->keep != HF_CT_KEEP_FP8 || w->g->w.strat != S_BLOCK) return false;
    *nb0 = w->scols;
    *nb1 = (w->rows + w->g->w.br - 1) / w->g->w.br;
    return true;
}

const float *hf_ct_weight_scales(const hf_ct_weight *w, int64_t *ne0) {
    *ne0 = w->g->w.strat == S_TENSOR ? 0 : w->scols;
    return w->scale;
}
