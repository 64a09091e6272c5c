/* model_gguf.c - hyper-parameters from a GGUF file's metadata (llama.cpp's
 * keys and defaults), then binding to its tensors (model.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/arch.h"
#include "kernels/model.h"
#include "kernels/model_priv.h"

typedef struct keys {
    const gguf_file *f;
    const char *arch;
    hfq_error *err;
} keys;

/* Index of "{arch}.suffix", or -1 when absent. */
static int64_t find(const keys *k, const char *suffix, char *key, size_t key_size) {
    snprintf(key, key_size, "%s.%s", k->arch, suffix);
    return gguf_find_key(k->f, key);
}

/* Index of "{arch}.suffix" in *i: returns 1 when present, 0 when absent and
 * optional, -1 (error) when absent and required. */
static int locate(const keys *k, const char *suffix, bool optional, int64_t *i) {
    char key[128];
    if ((*i = find(k, suffix, key, sizeof key)) >= 0) return 1;
    return optional ? 0 : hfq_fail(k->err, gguf_path(k->f), "key '%s' is missing", key);
}

/* Integer key; def when absent and optional. */
static int get_int(const keys *k, const char *suffix, bool optional, int64_t def, int64_t *out) {
    int64_t i;
    int rc = locate(k, suffix, optional, &i);
    if (rc <= 0) {
        *out = def;
        return rc;
    }
    return gguf_get_int(k->f, i, out, k->err);
}

static int get_float(const keys *k, const char *suffix, bool optional, float def, float *out) {
    int64_t i;
    double v;
    int rc = locate(k, suffix, optional, &i);
    if (rc <= 0) {
        *out = def;
        return rc;
    }
    if (gguf_get_float(k->f, i, &v, k->err)) return -1;
    *out = (float)v;
    return 0;
}

/* YaRN's keys (hfconv and llama.cpp's converter write them): the context
 * the ramp is measured in (absent: context_length, as llama.cpp), beta_fast
 * and beta_slow (absent: 32 and 1), and the cos/sin magnitude
 * rope.scaling.yarn_attn_factor (transformers' attention_factor; absent:
 * 0.1 ln(factor) + 1, what both transformers and llama.cpp then compute). */
static int read_yarn(const keys *k, hfq_hparams *hp, float factor) {
    const char *path = gguf_path(k->f);
    float mscale_dflt = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
    if (get_int(k, "rope.scaling.original_context_length", true, hp->n_ctx_train, &hp->yarn_orig_ctx) ||
        get_float(k, "rope.scaling.yarn_beta_fast", true, 32.0f, &hp->yarn_beta_fast) ||
        get_float(k, "rope.scaling.yarn_beta_slow", true, 1.0f, &hp->yarn_beta_slow) ||
        get_float(k, "rope.scaling.yarn_attn_factor", true, mscale_dflt, &hp->yarn_mscale))
        return -1;
    float ext;
    if (get_float(k, "rope.scaling.yarn_ext_factor", true, 1.0f, &ext)) return -1;
    if (ext != 1.0f)
        return hfq_fail(k->err, path, "key '%s.rope.scaling.yarn_ext_factor' = %g is not supported", k->arch, ext);
    if (hp->yarn_orig_ctx <= 0 || hp->yarn_orig_ctx > ((int64_t)1 << 31))
        return hfq_fail(k->err, path, "key '%s.rope.scaling.original_context_length' = %lld is out of range", k->arch,
                        (long long)hp->yarn_orig_ctx);
    if (!(hp->yarn_beta_fast > hp->yarn_beta_slow) || !(hp->yarn_beta_slow > 0.0f) || !isfinite(hp->yarn_beta_fast))
        return hfq_fail(k->err, path, "keys '%s.rope.scaling.yarn_beta_fast' %g / yarn_beta_slow %g are inconsistent",
                        k->arch, hp->yarn_beta_fast, hp->yarn_beta_slow);
    if (!(hp->yarn_mscale > 0.0f) || !isfinite(hp->yarn_mscale))
        return hfq_fail(k->err, path, "key '%s.rope.scaling.yarn_attn_factor' = %g must be positive", k->arch,
                        hp->yarn_mscale);
    return 0;
}

/* As llama.cpp reads it: the type defaults to "linear", the factor comes
 * from rope.scaling.factor (or the older rope.scale_linear), 0 or absent
 * meaning unscaled; "yarn" adds its keys (read_yarn). */
static int read_rope_scaling(const keys *k, hfq_hparams *hp) {
    char key[128];
    const char *path = gguf_path(k->f);
    const char *type = "linear";
    int64_t i = find(k, "rope.scaling.type", key, sizeof key);
    if (i >= 0 && !(type = gguf_get_str(k->f, i, NULL, k->err))) return -1;
    float factor, attn_factor;
    if (get_float(k, "rope.scaling.factor", true, 0.0f, &factor)) return -1;
    if (factor == 0.0f && get_float(k, "rope.scale_linear", true, 0.0f, &factor)) return -1;
    if (get_float(k, "rope.scaling.attn_factor", true, 0.0f, &attn_factor)) return -1;
    if (strcmp(type, "none") == 0) {
        hp->rope_freq_scale = 1.0f;
    } else if (strcmp(type, "linear") == 0) {
        if (factor < 0.0f || !isfinite(factor))
            return hfq_fail(k->err, path, "key '%s.rope.scaling.factor' = %g is not a valid factor", k->arch, factor);
        hp->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    } else if (strcmp(type, "yarn") == 0) {
        /* unlike linear, no factor is no YaRN at all: refused */
        if (!(factor > 0.0f) || !isfinite(factor))
            return hfq_fail(k->err, path, "key '%s': rope scaling type '%s' is not supported without a factor "
                            "('%s.rope.scaling.factor' = %g)", key, type, k->arch, factor);
        hp->rope_freq_scale = 1.0f / factor;
        if (read_yarn(k, hp, factor)) return -1;
    } else {
        return hfq_fail(k->err, path, "key '%s': rope scaling type '%s' is not supported", key, type);
    }
    /* llama.cpp multiplies cos and sin by it (longrope's magnitude); absent
     * (0 here): 1. Absent original context (0): context_length. */
    if (find(k, "rope.scaling.attn_factor", key, sizeof key) >= 0 && (!(attn_factor > 0.0f) || !isfinite(attn_factor)))
        return hfq_fail(k->err, path, "key '%s.rope.scaling.attn_factor' = %g must be positive", k->arch, attn_factor);
    hp->rope_attn_factor = attn_factor;
    if (get_int(k, "rope.scaling.original_context_length", true, 0, &hp->rope_orig_ctx)) return -1;
    if (find(k, "rope.scaling.original_context_length", key, sizeof key) >= 0 &&
        (hp->rope_orig_ctx <= 0 || hp->rope_orig_ctx > ((int64_t)1 << 31)))
        return hfq_fail(k->err, path, "key '%s.rope.scaling.original_context_length' = %lld is out of range", k->arch,
                        (long long)hp->rope_orig_ctx);
    return 0;
}

/* The keys of families with sliding windows and soft-capping (arch.h's
 * swa, attn_softcap), with llama.cpp's defaults; any other family gets
 * none of them (llama.cpp's llama reads none either). */
static int read_swa(const keys *k, const hfq_arch_desc *arch, hfq_hparams *hp) {
    char key[128];
    const char *path = gguf_path(k->f);
    if (!arch->swa) return 0;
    hp->rope_freq_base_swa = arch->rope_freq_base_swa > 0.0f ? arch->rope_freq_base_swa : hp->rope_freq_base;
    hp->rope_freq_scale_swa = arch->rope_freq_base_swa > 0.0f ? 1.0f : hp->rope_freq_scale;
    if (get_int(k, "attention.sliding_window", true, arch->n_swa_default, &hp->n_swa) ||
        get_float(k, "final_logit_softcapping", true, 0.0f, &hp->final_softcap) ||
        get_float(k, "rope.freq_base_swa", true, hp->rope_freq_base_swa, &hp->rope_freq_base_swa))
        return -1;
    int64_t i = find(k, "attention.sliding_window_pattern", key, sizeof key);
    if (i >= 0 && gguf_kv_type(k->f, i) == GGUF_VT_ARRAY)
        return hfq_fail(k->err, path, "key '%s': a per-layer pattern is not supported", key);
    if (get_int(k, "attention.sliding_window_pattern", true, arch->swa_pattern, &hp->swa_pattern)) return -1;
    if (arch->attn_softcap) return get_float(k, "attn_logit_softcapping", true, 0.0f, &hp->attn_softcap);
    if (find(k, "attn_logit_softcapping", key, sizeof key) >= 0)
        return hfq_fail(k->err, path, "key '%s': attention soft-capping is not computed for %s", key, k->arch);
    return 0;
}

/* A boolean key; def when absent. */
static int get_bool(const keys *k, const char *suffix, bool def, bool *out) {
    char key[128];
    int64_t i = find(k, suffix, key, sizeof key);
    *out = def;
    if (i < 0) return 0;
    return gguf_get_bool(k->f, i, out, k->err);
}

/* The experts' keys, as llama.cpp reads them: the used count is required,
 * the width defaults to feed_forward_length, the renormalisation of the
 * chosen weights to on (llama.cpp's llama and qwen3moe always renormalise;
 * hfconv writes expert_weights_norm = false for a Qwen3-MoE that does not).
 * What would change the router's math beyond that is refused. */
static int read_experts(const keys *k, hfq_hparams *hp) {
    const char *path = gguf_path(k->f);
    int64_t gating, shared;
    float scale;
    if (get_int(k, "expert_used_count", false, 0, &hp->n_expert_used) ||
        get_int(k, "expert_feed_forward_length", true, hp->n_ff, &hp->n_ff_exp) ||
        get_bool(k, "expert_weights_norm", true, &hp->expert_weights_norm) ||
        get_int(k, "expert_gating_func", true, 1, &gating) ||
        get_int(k, "expert_shared_count", true, 0, &shared) ||
        get_float(k, "expert_weights_scale", true, 1.0f, &scale))
        return -1;
    if (gating != 1)
        return hfq_fail(k->err, path, "key '%s.expert_gating_func' = %lld: only softmax routing (1) is supported",
                        k->arch, (long long)gating);
    if (shared != 0)
        return hfq_fail(k->err, path, "key '%s.expert_shared_count' = %lld: shared experts are not supported", k->arch,
                        (long long)shared);
    if (scale != 1.0f && scale != 0.0f)
        return hfq_fail(k->err, path, "key '%s.expert_weights_scale' = %g is not supported", k->arch, scale);
    return 0;
}

int hfq_hparams_from_gguf(const gguf_file *f, hfq_hparams *hp, hfq_error *err) {
    const char *path = gguf_path(f);
    int64_t ia = gguf_find_key(f, "general.architecture");
    if (ia < 0) return hfq_fail(err, path, "key 'general.architecture' is missing");
    const char *arch = gguf_get_str(f, ia, NULL, err);
    if (!arch) return -1;
    memset(hp, 0, sizeof *hp);
    if (hfq_arch_find(arch, &hp->arch, path, err)) return -1;
    hp->rope_mode = hfq_arch_get(hp->arch)->rope_mode;
    keys k = {f, arch, err};
    int64_t value_length;
    if (get_int(&k, "embedding_length", false, 0, &hp->n_embd) ||
        get_int(&k, "feed_forward_length", false, 0, &hp->n_ff) ||
        get_int(&k, "block_count", false, 0, &hp->n_layer) ||
        get_int(&k, "context_length", false, 0, &hp->n_ctx_train) ||
        get_int(&k, "attention.head_count", false, 0, &hp->n_head) ||
        get_int(&k, "attention.head_count_kv", true, hp->n_head, &hp->n_head_kv) ||
        get_int(&k, "expert_count", true, 0, &hp->n_expert) ||
        get_float(&k, "attention.layer_norm_rms_epsilon", false, 0.0f, &hp->rms_eps) ||
        get_float(&k, "rope.freq_base", true, 10000.0f, &hp->rope_freq_base))
        return -1;
    if (hp->n_expert != 0 && read_experts(&k, hp)) return -1;
    if (hp->n_head <= 0)
        return hfq_fail(err, path, "key '%s.attention.head_count' = %lld must be positive", arch,
                        (long long)hp->n_head);
    char key[128];
    if (find(&k, "attention.key_length", key, sizeof key) < 0 && hp->n_embd % hp->n_head != 0)
        return hfq_fail(err, path, "key '%s.embedding_length' = %lld is not a multiple of the head count %lld "
                        "and attention.key_length is absent", arch, (long long)hp->n_embd, (long long)hp->n_head);
    if (get_int(&k, "attention.key_length", true, hp->n_embd / hp->n_head, &hp->head_dim) ||
        get_int(&k, "attention.value_length", true, hp->head_dim, &value_length) ||
        get_int(&k, "rope.dimension_count", true, hp->head_dim, &hp->n_rot))
        return -1;
    /* after context_length and key_length: YaRN's ramp reads them */
    if (read_rope_scaling(&k, hp) || read_swa(&k, hfq_arch_get(hp->arch), hp)) return -1;
    const hfq_arch_desc *desc = hfq_arch_get(hp->arch);
    if (desc->attn_scale_embd_layers && hp->n_layer == desc->attn_scale_embd_layers)
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    if (value_length != hp->head_dim)
        return hfq_fail(err, path, "key '%s.attention.value_length' = %lld differs from key_length %lld", arch,
                        (long long)value_length, (long long)hp->head_dim);
    return 0;
}

static const gguf_tensor_info *lookup_tensor(const void *file, const char *name) {
    return gguf_find_tensor(file, name);
}

#define QEXT_PREFIX "hfq.qext."
#define QEXT_VERSION_KEY QEXT_PREFIX "version"

static const char *lookup_str(const void *file, const char *prefix, const char *name) {
    char key[160];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    int64_t i = gguf_find_key(file, key);
    return i < 0 || gguf_kv_type(file, i) != GGUF_VT_STRING ? NULL : gguf_get_str(file, i, NULL, NULL);
}

static const char *lookup_qext(const void *file, const char *name) { return lookup_str(file, QEXT_PREFIX, name); }
static const char *lookup_act(const void *file, const char *name) { return lookup_str(file, "hfq.act_quant.", name); }

#define ROT_PREFIX "hfq.block_rotate."

static const char *lookup_rot(const void *file, const char *name) { return lookup_str(file, ROT_PREFIX, name); }

/* hfq.block_rotate.* keys: strings naming tensors of the file (their values
 * are checked where the weights are bound). */
static int check_rot_keys(const gguf_file *f, hfq_error *err) {
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const char *key = gguf_kv_key(f, i);
        if (strncmp(key, ROT_PREFIX, strlen(ROT_PREFIX)) != 0) continue;
        if (gguf_kv_type(f, i) != GGUF_VT_STRING) return hfq_fail(err, gguf_path(f), "key '%s' is not a string", key);
        if (!gguf_find_tensor(f, key + strlen(ROT_PREFIX)))
            return hfq_fail(err, gguf_path(f), "key '%s' names no tensor of the file", key);
    }
    return 0;
}

/* hfq.qext.* keys: version 1 when any is present; each a string naming an I8
 * tensor of the file (docs/format-quant-ext.md). Values are checked where the
 * tensors are bound. */
static int check_qext_keys(const gguf_file *f, hfq_error *err) {
    const char *path = gguf_path(f);
    bool any = false;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const char *key = gguf_kv_key(f, i);
        if (strncmp(key, QEXT_PREFIX, strlen(QEXT_PREFIX)) != 0 || strcmp(key, QEXT_VERSION_KEY) == 0) continue;
        any = true;
        const gguf_tensor_info *t = gguf_find_tensor(f, key + strlen(QEXT_PREFIX));
        if (gguf_kv_type(f, i) != GGUF_VT_STRING)
            return hfq_fail(err, path, "key '%s' is not a string", key);
        if (!t || t->type != GT_I8)
            return hfq_fail(err, path, "key '%s' names no i8 tensor of the file", key);
    }
    if (!any) return 0;
    int64_t iv = gguf_find_key(f, QEXT_VERSION_KEY);
    int64_t version;
    if (iv < 0) return hfq_fail(err, path, "key '" QEXT_VERSION_KEY "' is missing");
    if (gguf_get_int(f, iv, &version, err)) return -1;
    if (version != 1)
        return hfq_fail(err, path, "key '" QEXT_VERSION_KEY "' = %lld: this runner reads version 1",
                        (long long)version);
    return 0;
}

hfq_model *hfq_model_load(const char *path, hfq_error *err) {
    gguf_file *f = gguf_open(path, err);
    if (!f) return NULL;
    hfq_hparams hp;
    hfq_model *m = NULL;
    hfq_tensor_source src = {.source = f, .where = path, .find = lookup_tensor, .qext = lookup_qext,
                               .act = lookup_act, .rot = lookup_rot};
    if (hfq_hparams_from_gguf(f, &hp, err) == 0 && check_qext_keys(f, err) == 0 && check_rot_keys(f, err) == 0)
        m = hfq_model_bind(&hp, &src, err);
    if (!m) {
        gguf_close(f);
        return NULL;
    }
    hfq_model_adopt_file(m, f, gguf_close);
    return m;
}
