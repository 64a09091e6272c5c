#include "src/hf/lora.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "quant/half.h"
#include "src/common/json_file.h"
#include "src/hf/pyregex.h"

/* peft saves the adapted model's names under this prefix */
#define PEFT_PREFIX "base_model.model."
#define MAX_RANK ((int64_t)1 << 20)

typedef struct adapter {
    char dir[4096];
    char config_path[4200];
    st_model *st;
    cJSON *config;
    const cJSON *rank_pattern, *alpha_pattern;  /* objects, or NULL */
    double scale, alpha;
    int64_t r;
    bool rslora, dora;
} adapter;

struct hf_lora_set {
    adapter *ads;
    int n;
    const hf_config *cfg;
    const hf_arch *arch;
    const st_model *base;
};

/* What an adapter tensor is, by its name's ending. */
typedef enum tensor_kind {
    T_LORA_A, T_LORA_B, T_EMBED_A, T_EMBED_B, T_MAGNITUDE, T_BASE_LAYER,
    T_WHOLE                   /* a whole base tensor (modules_to_save) */
} tensor_kind;

static const struct {
    const char *suffix;
    tensor_kind kind;
} suffixes[] = {
    {".lora_A.weight", T_LORA_A},          {".lora_B.weight", T_LORA_B},
    {".lora_embedding_A", T_EMBED_A},      {".lora_embedding_B", T_EMBED_B},
    {".lora_magnitude_vector", T_MAGNITUDE}, {".base_layer.weight", T_BASE_LAYER},
};

/* adapter_config.json keys: read here, or without effect on the merged
 * weights (initialisation, training, bookkeeping; target_modules and
 * modules_to_save are what the tensors show), or refused unless neutral
 * (null, false, empty) because they change the math and are not implemented. */
static const char *const read_keys[] = {"peft_type", "r", "lora_alpha", "use_rslora", "use_dora", "rank_pattern",
                                        "alpha_pattern", "fan_in_fan_out", "bias", "base_model_name_or_path", NULL};
static const char *const inert_keys[] = {
    "auto_mapping", "corda_config", "eva_config", "exclude_modules", "inference_mode", "init_lora_weights",
    "layers_pattern", "layers_to_transform", "loftq_config", "lora_dropout", "lora_ga_config", "megatron_core",
    "modules_to_save", "peft_version", "qalora_group_size", "revision", "runtime_config", "target_modules",
    "task_type", "velora_config", "ensure_weight_tying", NULL};

static bool in_list(const char *const *list, const char *key) {
    for (; *list; list++)
        if (strcmp(*list, key) == 0) return true;
    return false;
}

static bool is_neutral(const cJSON *v) {
    return cJSON_IsNull(v) || cJSON_IsFalse(v) || ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child) ||
           (cJSON_IsString(v) && !v->valuestring[0]);
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A pattern key as peft matches it: re.match(rf"(.*\.)?({key})$", module).
 * Python-only syntax (\d, (?...)) would mean something else here: refused. */
static int compile_pattern(const char *key, regex_t *re) { return hf_pyregex_compile(re, "^(.*\\.)?", key, "$"); }

/* The value of the first pattern matching module, or NULL. */
static const cJSON *pattern_value(const cJSON *patterns, const char *module) {
    if (!patterns) return NULL;
    for (const cJSON *kv = patterns->child; kv; kv = kv->next) {
        regex_t re;
        if (compile_pattern(kv->string, &re)) continue;   /* checked when opened */
        bool hit = regexec(&re, module, 0, NULL, 0) == 0;
        regfree(&re);
        if (hit) return kv;
    }
    return NULL;
}

static int read_number(const adapter *ad, const cJSON *v, const char *key, bool integer, double *out,
                       hfq_error *err) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0 ||
        (integer && (v->valuedouble != floor(v->valuedouble) || v->valuedouble > (double)MAX_RANK)))
        return hfq_fail(err, ad->config_path, "field '%s' must be a positive %s", key, integer ? "integer" : "number");
    *out = v->valuedouble;
    return 0;
}

/* A flag peft reads as Python truthiness: only true, false or null (absent)
 * are read, anything else (1, "yes") is refused rather than guessed. */
static int read_bool(const adapter *ad, const char *key, bool *out, hfq_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ad->config, key);
    *out = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return hfq_fail(err, ad->config_path, "field '%s' is not true, false or null", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int read_pattern(adapter *ad, const char *key, bool integer, const cJSON **out, hfq_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(ad->config, key);
    *out = NULL;
    if (!p || cJSON_IsNull(p)) return 0;
    if (!cJSON_IsObject(p)) return hfq_fail(err, ad->config_path, "field '%s' is not an object", key);
    for (const cJSON *kv = p->child; kv; kv = kv->next) {
        char shown[200], name[300];
        st_printable_name(shown, sizeof shown, kv->string);
        snprintf(name, sizeof name, "%s.%s", key, shown);
        double v;
        if (read_number(ad, kv, name, integer, &v, err)) return -1;
        regex_t re;
        if (compile_pattern(kv->string, &re))
            return hfq_fail(err, ad->config_path, "field '%s': key is not a pattern read here (POSIX extended regular "
                            "expression, without Python's \\d, \\w, (?...))", name);
        regfree(&re);
    }
    *out = p;
    return 0;
}

static int read_config(adapter *ad, hf_warn_fn warn, void *warn_ctx, hfq_error *err) {
    if (!(ad->config = hfq_json_load(ad->config_path, err))) return -1;
    const cJSON *c = ad->config;
    if (!cJSON_IsObject(c)) return hfq_fail(err, ad->config_path, "not a JSON object");
    for (const cJSON *kv = c->child; kv; kv = kv->next) {
        if (in_list(read_keys, kv->string) || in_list(inert_keys, kv->string) || is_neutral(kv)) continue;
        char shown[200];
        st_printable_name(shown, sizeof shown, kv->string);
        return hfq_fail(err, ad->config_path, "field '%s' is set: not implemented (it changes the merged weights)",
                        shown);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "peft_type");
    if (type && !(cJSON_IsString(type) && strcmp(type->valuestring, "LORA") == 0))
        return hfq_fail(err, ad->config_path, "field 'peft_type' is not \"LORA\": only LoRA adapters are read");
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(c, "bias");
    if (bias && !cJSON_IsNull(bias) && !(cJSON_IsString(bias) && strcmp(bias->valuestring, "none") == 0))
        return hfq_fail(err, ad->config_path, "field 'bias' is not \"none\": trained biases are not implemented");
    double r = 0;
    if (read_number(ad, cJSON_GetObjectItemCaseSensitive(c, "r"), "r", true, &r, err)) return -1;
    ad->r = (int64_t)r;
    if (read_number(ad, cJSON_GetObjectItemCaseSensitive(c, "lora_alpha"), "lora_alpha", false, &ad->alpha, err))
        return -1;
    bool fan_in_fan_out = false;
    if (read_bool(ad, "use_rslora", &ad->rslora, err) || read_bool(ad, "use_dora", &ad->dora, err) ||
        read_bool(ad, "fan_in_fan_out", &fan_in_fan_out, err))
        return -1;
    if (read_pattern(ad, "rank_pattern", true, &ad->rank_pattern, err) ||
        read_pattern(ad, "alpha_pattern", false, &ad->alpha_pattern, err))
        return -1;
    if (warn && fan_in_fan_out) {
        char msg[4800];
        snprintf(msg, sizeof msg, "%s: fan_in_fan_out = true is reset to false for Linear and Embedding layers, "
                 "as peft does", ad->config_path);
        warn(warn_ctx, msg);
    }
    /* a local path that is not there: maybe a machine the adapter was trained on */
    const cJSON *bm = cJSON_GetObjectItemCaseSensitive(c, "base_model_name_or_path");
    struct stat sb;
    if (warn && cJSON_IsString(bm) && bm->valuestring[0] == '/' && stat(bm->valuestring, &sb) != 0) {
        char msg[4800];
        char shown[200];
        st_printable_name(shown, sizeof shown, bm->valuestring);
        snprintf(msg, sizeof msg, "%s: base_model_name_or_path '%s' does not exist (shapes are checked against "
                 "the base given)", ad->config_path, shown);
        warn(warn_ctx, msg);
    }
    return 0;
}

/* The rank and alpha adapter_config.json gives a module. */
static void module_rank_alpha(const adapter *ad, const char *module, int64_t *r, double *alpha) {
    const cJSON *rp = pattern_value(ad->rank_pattern, module), *ap = pattern_value(ad->alpha_pattern, module);
    *r = rp ? (int64_t)rp->valuedouble : ad->r;
    *alpha = ap ? ap->valuedouble : ad->alpha;
}

static tensor_kind classify(const char *rest, char *base_name, size_t cap) {
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (!has_suffix(rest, suffixes[i].suffix)) continue;
        snprintf(base_name, cap, "%.*s.weight", (int)(strlen(rest) - strlen(suffixes[i].suffix)), rest);
        return suffixes[i].kind;
    }
    snprintf(base_name, cap, "%s", rest);
    return T_WHOLE;
}

static bool is_float(st_dtype d) { return d == ST_F32 || d == ST_F16 || d == ST_BF16; }

/* The other factor's name ("X.lora_B.weight" for "X.lora_A.weight"): the A
 * or B is before ".weight", or last in ".lora_embedding_A". */
static void partner_name(const char *name, tensor_kind kind, char *out, size_t cap) {
    snprintf(out, cap, "%s", name);
    size_t at = strlen(out) - (kind == T_LORA_A || kind == T_LORA_B ? strlen("A.weight") : 1);
    out[at] = out[at] == 'A' ? 'B' : 'A';
}

/* Checks one adapter tensor against the base. */
static int check_tensor(const hf_lora_set *set, const adapter *ad, const st_tensor *t, hfq_error *err) {
    const char *file = st_shard_path(ad->st, 0);
    char name[200], target[200];   /* as messages show them: one line */
    st_printable_name(name, sizeof name, t->name);
    if (strncmp(t->name, PEFT_PREFIX, strlen(PEFT_PREFIX)) != 0)
        return hfq_fail(err, file, "tensor '%s' is not a PEFT adapter tensor (no '" PEFT_PREFIX "' prefix)", name);
    const char *rest = t->name + strlen(PEFT_PREFIX);
    if (!is_float(t->dtype))
        return hfq_fail(err, file, "tensor '%s': dtype %s is not supported", name, st_dtype_name(t->dtype));
    char base_name[1024];
    tensor_kind kind = classify(rest, base_name, sizeof base_name);
    st_printable_name(target, sizeof target, base_name);
    if (kind == T_WHOLE && strstr(rest, ".lora_"))
        return hfq_fail(err, file, "tensor '%s' is no LoRA tensor this converter knows", name);
    const st_tensor *b = st_find(set->base, base_name);
    hf_tensor_map map;
    if (!b || hf_map_tensor(set->arch, base_name, (int)set->cfg->n_layers, (int)set->cfg->n_experts, &map) != 0 ||
        map.row->role == ROLE_SKIP)
        return hfq_fail(err, file, "tensor '%s' targets '%s', which the base model does not have (an adapter for "
                        "another base?)", name, target);
    if (map.expert >= 0)   /* the experts are written stacked, without edits */
        return hfq_fail(err, file, "tensor '%s' changes expert '%s': adapters of experts are not supported", name,
                        target);
    bool embedding = map.row->role == ROLE_TOKEN_EMBD;
    if (map.row->role == ROLE_OUTPUT && set->cfg->tie_word_embeddings)
        return hfq_fail(err, file, "tensor '%s' changes lm_head, which this base ties to the embeddings", name);
    if ((kind == T_EMBED_A || kind == T_EMBED_B) != embedding && kind <= T_EMBED_B)
        return hfq_fail(err, file, "tensor '%s': %s factors on %s", name, embedding ? "Linear" : "Embedding",
                        embedding ? "an embedding" : "a Linear layer");
    if (kind == T_WHOLE || kind == T_BASE_LAYER) {
        bool same = t->n_dims == b->n_dims;
        for (int d = 0; same && d < t->n_dims; d++) same = t->shape[d] == b->shape[d];
        if (!same) return hfq_fail(err, file, "tensor '%s': shape differs from the base's '%s'", name, target);
        return 0;
    }
    int64_t rows = b->shape[0], cols = b->n_dims == 2 ? b->shape[1] : 0;
    if (kind == T_MAGNITUDE) {
        if (!ad->dora) return hfq_fail(err, file, "tensor '%s': a DoRA magnitude but use_dora is false", name);
        if (embedding) return hfq_fail(err, file, "tensor '%s': DoRA on an embedding is not implemented", name);
        /* peft would still rescale W's rows by m / ||W||: dropping it is wrong, doing it is not implemented */
        char factor[1100];
        snprintf(factor, sizeof factor, PEFT_PREFIX "%.*s.lora_A.weight",
                 (int)(strlen(base_name) - strlen(".weight")), base_name);
        if (!st_find(ad->st, factor))
            return hfq_fail(err, file, "tensor '%s': a DoRA magnitude without lora_A/lora_B", name);
        if (t->n_dims != 1 || t->shape[0] != rows)
            return hfq_fail(err, file, "tensor '%s': shape does not fit the base's '%s' (%lld rows)", name,
                            target, (long long)rows);
        return 0;
    }
    /* the axis the factor shares with the base, and its rank axis */
    int64_t want = kind == T_LORA_A ? cols : kind == T_LORA_B ? rows : kind == T_EMBED_A ? rows : cols;
    int shared = kind == T_LORA_A || kind == T_EMBED_A ? 1 : 0;
    if (b->n_dims != 2 || t->n_dims != 2 || t->shape[shared] != want)
        return hfq_fail(err, file, "tensor '%s': shape does not fit the base's '%s' (an adapter for another base?)",
                        name, target);
    int64_t rank = t->shape[1 - shared], r;
    double alpha;
    char module[1024];
    snprintf(module, sizeof module, "%.*s", (int)(strlen(base_name) - strlen(".weight")), base_name);
    module_rank_alpha(ad, module, &r, &alpha);
    if (rank != r)
        return hfq_fail(err, ad->config_path, "tensor '%s' has rank %lld, but adapter_config.json gives r = %lld "
                        "for '%s'", name, (long long)rank, (long long)r, target);
    char partner[1100];
    partner_name(t->name, kind, partner, sizeof partner);
    if (!st_find(ad->st, partner))
        return hfq_fail(err, file, "tensor '%s' has no partner '%s'", name, partner);
    if (ad->dora && kind == T_LORA_A) {
        char mag[1100];
        snprintf(mag, sizeof mag, PEFT_PREFIX "%s.lora_magnitude_vector", module);
        if (!st_find(ad->st, mag)) return hfq_fail(err, file, "use_dora is true but '%s' is missing", mag);
    }
    return 0;
}

static int open_adapter(const hf_lora_set *set, adapter *ad, const hf_lora_spec *spec, hf_warn_fn warn,
                        void *warn_ctx, hfq_error *err) {
    snprintf(ad->dir, sizeof ad->dir, "%s", spec->dir);
    snprintf(ad->config_path, sizeof ad->config_path, "%s/adapter_config.json", spec->dir);
    ad->scale = spec->scale;
    if (!isfinite(ad->scale)) return hfq_fail(err, spec->dir, "the adapter's scale is not finite");
    if (read_config(ad, warn, warn_ctx, err)) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", spec->dir);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(path, sizeof path, "%s/adapter_model.bin", spec->dir);
        if (stat(path, &sb) == 0)
            return hfq_fail(err, path, "pickled adapters are not read: save it with safe_serialization (safetensors)");
        snprintf(path, sizeof path, "%s/adapter_model.safetensors", spec->dir);
        return hfq_fail(err, path, "no such file (an adapter folder holds adapter_config.json and "
                        "adapter_model.safetensors)");
    }
    if (!(ad->st = st_open_file(path, err))) return -1;
    if (st_n_tensors(ad->st) == 0) return hfq_fail(err, path, "the adapter holds no tensors");
    for (int64_t i = 0; i < st_n_tensors(ad->st); i++)
        if (check_tensor(set, ad, st_tensor_at(ad->st, i), err)) return -1;
    return 0;
}

hf_lora_set *hf_lora_open(const hf_lora_spec *specs, int n_specs, const hf_config *cfg, const hf_arch *arch,
                          const st_model *base, hf_warn_fn warn, void *warn_ctx, hfq_error *err) {
    hf_lora_set *set = calloc(1, sizeof *set);
    if (!set || !(set->ads = calloc((size_t)n_specs, sizeof *set->ads))) {
        free(set);
        hfq_fail(err, NULL, "out of memory");
        return NULL;
    }
    set->cfg = cfg;
    set->arch = arch;
    set->base = base;
    for (int i = 0; i < n_specs; i++) {
        set->n = i + 1;
        if (open_adapter(set, &set->ads[i], &specs[i], warn, warn_ctx, err)) {
            hf_lora_close(set);
            return NULL;
        }
    }
    return set;
}

void hf_lora_close(hf_lora_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n; i++) {
        st_close(set->ads[i].st);
        cJSON_Delete(set->ads[i].config);
    }
    free(set->ads);
    free(set);
}

double hf_lora_alpha(const hf_lora_set *set, int i) { return set->ads[i].alpha; }
const char *hf_lora_dir(const hf_lora_set *set, int i) { return set->ads[i].dir; }

static float element(const unsigned char *p, st_dtype dt, int64_t i) {
    if (dt == ST_F32) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return dt == ST_F16 ? hfq_fp16_to_f32(h) : hfq_bf16_to_f32(h);
}

/* Whether two tensors of the same shape hold the same values. */
static bool same_values(const st_model *sa, const st_tensor *a, const st_model *sb, const st_tensor *b) {
    const unsigned char *pa = st_data(sa, a), *pb = st_data(sb, b);
    bool same = true;
    for (int64_t i = 0; i < a->n_elements && same; i++) same = element(pa, a->dtype, i) == element(pb, b->dtype, i);
    st_release(sa, a);
    st_release(sb, b);
    return same;
}

static const st_tensor *find_named(const st_model *st, const char *module, const char *suffix) {
    char name[1200];
    snprintf(name, sizeof name, PEFT_PREFIX "%s%s", module, suffix);
    return st_find(st, name);
}

/* Loads factor A and B of a module (checked when opened) into f. */
static int load_factor(const adapter *ad, const char *module, bool embedding, int64_t rows, int64_t cols,
                       hf_lora_factor *f, hfq_error *err) {
    const st_tensor *ta = find_named(ad->st, module, embedding ? ".lora_embedding_A" : ".lora_A.weight");
    const st_tensor *tb = find_named(ad->st, module, embedding ? ".lora_embedding_B" : ".lora_B.weight");
    int64_t rank = ta->shape[0], r;
    double alpha;
    module_rank_alpha(ad, module, &r, &alpha);
    f->rank = rank;
    f->scale = ad->scale * alpha / (ad->rslora ? sqrt((double)r) : (double)r);
    f->rel_scale = ad->scale * (alpha / ad->alpha) * (ad->rslora ? sqrt((double)r) : 1.0);
    f->a = malloc((size_t)(rank * cols) * sizeof(float));
    f->b = malloc((size_t)(rows * rank) * sizeof(float));
    if (!f->a || !f->b) return hfq_fail(err, NULL, "out of memory");
    const unsigned char *pa = st_data(ad->st, ta), *pb = st_data(ad->st, tb);
    for (int64_t k = 0; k < rank; k++) {
        /* Embedding: delta = (B A)^T, so b = A^T (rows = vocab) and a = B^T */
        for (int64_t j = 0; j < cols; j++)
            f->a[k * cols + j] = embedding ? element(pb, tb->dtype, j * rank + k) : element(pa, ta->dtype, k * cols + j);
        for (int64_t i = 0; i < rows; i++)
            f->b[i * rank + k] = embedding ? element(pa, ta->dtype, k * rows + i) : element(pb, tb->dtype, i * rank + k);
    }
    st_release(ad->st, ta);
    st_release(ad->st, tb);
    if (ad->dora) {
        const st_tensor *tm = find_named(ad->st, module, ".lora_magnitude_vector");
        if (!(f->magnitude = malloc((size_t)rows * sizeof(float)))) return hfq_fail(err, NULL, "out of memory");
        const unsigned char *pm = st_data(ad->st, tm);
        for (int64_t i = 0; i < rows; i++) f->magnitude[i] = element(pm, tm->dtype, i);
        st_release(ad->st, tm);
    }
    for (int64_t i = 0; i < rank * cols; i++)
        if (!isfinite(f->a[i])) return hfq_fail(err, st_shard_path(ad->st, 0), "tensor '%s' holds NaN or Inf", ta->name);
    for (int64_t i = 0; i < rows * rank; i++)
        if (!isfinite(f->b[i])) return hfq_fail(err, st_shard_path(ad->st, 0), "tensor '%s' holds NaN or Inf", tb->name);
    return 0;
}

static void free_factors(hf_lora_edit *e) {
    for (int i = 0; i < e->n_factors; i++) {
        free(e->factors[i].a);
        free(e->factors[i].b);
        free(e->factors[i].magnitude);
    }
    e->n_factors = 0;
}

void hf_lora_edit_free(hf_lora_edit *e) {
    if (!e) return;
    free_factors(e);
    free(e->factors);
    free(e->scratch);
    free(e);
}

int hf_lora_edit_for(const hf_lora_set *set, const st_tensor *base, int64_t rows, int64_t cols,
                     hf_lora_edit **out, hfq_error *err) {
    *out = NULL;
    if (!set) return 0;
    hf_lora_edit *e = calloc(1, sizeof *e);
    if (!e || !(e->factors = calloc((size_t)set->n, sizeof *e->factors)) ||
        !(e->scratch = malloc((size_t)cols * sizeof *e->scratch))) {
        hf_lora_edit_free(e);
        return hfq_fail(err, NULL, "out of memory");
    }
    e->base_name = base->name;
    e->rows = rows;
    e->cols = cols;
    e->replaced_by = -1;
    char module[1024] = "";
    bool is_weight = has_suffix(base->name, ".weight");
    if (is_weight) snprintf(module, sizeof module, "%.*s", (int)(strlen(base->name) - strlen(".weight")), base->name);
    hf_tensor_map map;
    bool embedding =
        hf_map_tensor(set->arch, base->name, (int)set->cfg->n_layers, (int)set->cfg->n_experts, &map) == 0 &&
        map.row->role == ROLE_TOKEN_EMBD;
    for (int i = 0; i < set->n; i++) {
        const adapter *ad = &set->ads[i];
        const char *file = st_shard_path(ad->st, 0);
        const st_tensor *whole = find_named(ad->st, base->name, "");
        const st_tensor *layer = is_weight ? find_named(ad->st, module, ".base_layer.weight") : NULL;
        /* peft saves base_layer.weight next to the module's factors (embedding
         * targets): loaded, it replaces the base's, and the factors apply to it */
        bool layer_replaced = false;
        /* peft stacks adapters on the merged model: a later adapter's saved
         * base layer is then the merge so far or the original base, which
         * we cannot tell apart from its bytes alone */
        if (layer && (e->n_factors > 0 || e->replace)) {
            hf_lora_edit_free(e);
            return hfq_fail(err, file, "'%s' is changed by an earlier adapter and this one saves its base_layer.weight "
                                       "too: ambiguous, merge one such adapter at a time", base->name);
        }
        if (!whole && layer && !same_values(ad->st, layer, set->base, base)) {
            whole = layer;
            layer_replaced = true;
        }
        const st_tensor *a = is_weight ? find_named(ad->st, module, embedding ? ".lora_embedding_A" : ".lora_A.weight")
                                       : NULL;
        if (whole && a && !layer_replaced) {
            hf_lora_edit_free(e);
            return hfq_fail(err, file, "adapter both replaces and adapts '%s'", base->name);
        }
        if (whole) {  /* later adapters apply to the replacement, earlier ones are gone */
            free_factors(e);
            e->replace_st = ad->st;
            e->replace = whole;
            e->replaced_by = i;
        }
        if (!a) continue;
        hf_lora_factor *f = &e->factors[e->n_factors++];
        f->adapter = i;
        if (load_factor(ad, module, embedding, rows, cols, f, err)) {
            hf_lora_edit_free(e);
            return -1;
        }
    }
    for (int i = 0; i < e->n_factors; i++)
        if (e->factors[i].magnitude && (e->n_factors > 1 || e->replace)) {
            hfq_fail(err, set->ads[e->factors[i].adapter].dir,
                     "DoRA on '%s', which another adapter changes too: not implemented", base->name);
            hf_lora_edit_free(e);
            return -1;
        }
    if (!e->replace && e->n_factors == 0) {
        hf_lora_edit_free(e);
        return 0;
    }
    *out = e;
    return 0;
}

int hf_lora_edit_row(const hf_lora_edit *e, int64_t row, float *w) {
    double *acc = e->scratch;
    for (int i = 0; i < e->n_factors; i++) {
        const hf_lora_factor *f = &e->factors[i];
        const float *b = f->b + row * f->rank;
        memset(acc, 0, (size_t)e->cols * sizeof *acc);
        for (int64_t k = 0; k < f->rank; k++) {
            const float *a = f->a + k * e->cols;
            double bk = b[k];
            for (int64_t j = 0; j < e->cols; j++) acc[j] += bk * a[j];
        }
        /* as peft: delta = (B A) * s in float32, then W + delta */
        double norm2 = 0;
        for (int64_t j = 0; j < e->cols; j++) {
            w[j] += (float)((float)acc[j] * f->scale);
            norm2 += (double)w[j] * w[j];
        }
        if (f->magnitude) {
            float norm = (float)sqrt(norm2);
            if (!(norm > 0)) return -1;
            float factor = f->magnitude[row] / norm;
            for (int64_t j = 0; j < e->cols; j++) w[j] *= factor;
        }
    }
    for (int64_t j = 0; j < e->cols; j++)
        if (!isfinite(w[j])) return -1;
    return 0;
}
