/* synth.c - synthetic checkpoints: tensor list, deterministic values, shards, config. */

/* Same bits on every platform: no fused multiply-add contraction here. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "src/synth/synth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant/half.h"
#include "src/synth/tokenizer.h"

#define CHUNK 16384   /* elements per random stream */
#define MAX_SHARDS 99999

void synth_default_config(synth_config *c) {
    *c = (synth_config){
        .arch = SYNTH_LLAMA, .hidden = 64, .ffn = 172, .layers = 2, .heads = 4, .kv_heads = 2,
        .vocab = 512, .ctx = 256, .dtype = ST_F32, .shards = 1, .tied = 0,
        .rope_theta = 10000.0, .rms_eps = 1e-5, .seed = 1, .outliers = 0,
    };
}

static const char *const arch_names[] = {"llama", "mistral", "qwen2"};
static const char *const arch_classes[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                           "Qwen2ForCausalLM"};

int synth_arch_from_name(const char *name) {
    for (int i = 0; i < 3; i++)
        if (strcmp(name, arch_names[i]) == 0) return i;
    return -1;
}

int synth_dtype_from_name(const char *name) {
    if (strcmp(name, "f32") == 0) return ST_F32;
    if (strcmp(name, "f16") == 0) return ST_F16;
    if (strcmp(name, "bf16") == 0) return ST_BF16;
    return -1;
}

/* ------------------------------------------------------------- tensors */

typedef enum kind { K_GAUSS, K_NORM, K_LAYER_NORM } kind;

typedef struct spec {
    char name[80];
    int n_dims;
    int64_t shape[2];
    kind kind;
    double std;      /* K_GAUSS: scale; norms: noise around 1 */
} spec;

static int n_specs(const synth_config *c) {
    int per_layer = 9 + (c->arch == SYNTH_QWEN2 ? 3 : 0);
    return 2 + c->layers * per_layer + !c->tied;
}

static void add_spec(spec *s, int *n, const char *name, int n_dims, int64_t rows, int64_t cols,
                     kind kind, double std) {
    spec *p = &s[(*n)++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->n_dims = n_dims;
    p->shape[0] = rows;
    p->shape[1] = cols;
    p->kind = kind;
    p->std = std;
}

/* Hugging Face's state_dict order. */
static int build_specs(const synth_config *c, spec *s) {
    int n = 0;
    int64_t hd = c->hidden / c->heads, q = c->heads * hd, kv = c->kv_heads * hd;
    double in_std = 1.0 / sqrt((double)c->hidden);
    double out_scale = 1.0 / sqrt(2.0 * c->layers);
    add_spec(s, &n, "model.embed_tokens.weight", 2, c->vocab, c->hidden, K_GAUSS, in_std);
    for (int l = 0; l < c->layers; l++) {
        char name[80];
        const char *proj[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            int64_t rows = i == 0 ? q : kv;
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s_proj.weight", l, proj[i]);
            add_spec(s, &n, name, 2, rows, c->hidden, K_GAUSS, in_std);
            if (c->arch != SYNTH_QWEN2) continue;
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s_proj.bias", l, proj[i]);
            add_spec(s, &n, name, 1, rows, 0, K_GAUSS, 0.02);
        }
        snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", l);
        add_spec(s, &n, name, 2, c->hidden, q, K_GAUSS, out_scale / sqrt((double)q));
        snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", l);
        add_spec(s, &n, name, 2, c->ffn, c->hidden, K_GAUSS, in_std);
        snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", l);
        add_spec(s, &n, name, 2, c->ffn, c->hidden, K_GAUSS, in_std);
        snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", l);
        add_spec(s, &n, name, 2, c->hidden, c->ffn, K_GAUSS, out_scale / sqrt((double)c->ffn));
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        add_spec(s, &n, name, 1, c->hidden, 0, K_LAYER_NORM, 0.02);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        add_spec(s, &n, name, 1, c->hidden, 0, K_LAYER_NORM, 0.02);
    }
    add_spec(s, &n, "model.norm.weight", 1, c->hidden, 0, K_NORM, 0.02);
    if (!c->tied) add_spec(s, &n, "lm_head.weight", 2, c->vocab, c->hidden, K_GAUSS, in_std);
    return n;
}

static int64_t spec_elements(const spec *s) {
    return s->n_dims == 1 ? s->shape[0] : s->shape[0] * s->shape[1];
}

int synth_check_config(const synth_config *c, hfq_error *err) {
    const char *w = "mkmodel";
    if ((unsigned)c->arch > SYNTH_QWEN2) return hfq_fail(err, w, "unknown architecture");
    if (c->hidden < 2 || c->hidden > 65536) return hfq_fail(err, w, "hidden %d outside 2..65536", c->hidden);
    if (c->ffn < 1 || c->ffn > 1 << 20) return hfq_fail(err, w, "ffn %d outside 1..1048576", c->ffn);
    if (c->layers < 1 || c->layers > 1024) return hfq_fail(err, w, "layers %d outside 1..1024", c->layers);
    if (c->heads < 1 || c->hidden % c->heads || (c->hidden / c->heads) % 2)
        return hfq_fail(err, w, "heads %d must divide hidden %d into an even head size",
                        c->heads, c->hidden);
    if (c->kv_heads < 1 || c->heads % c->kv_heads)
        return hfq_fail(err, w, "kv-heads %d must divide heads %d", c->kv_heads, c->heads);
    if (c->vocab < SYNTH_VOCAB_MIN || c->vocab > SYNTH_VOCAB_MAX)
        return hfq_fail(err, w, "vocab %d outside %d..%d", c->vocab, SYNTH_VOCAB_MIN, SYNTH_VOCAB_MAX);
    if (c->ctx < 1) return hfq_fail(err, w, "ctx %d must be positive", c->ctx);
    if (c->dtype != ST_F32 && c->dtype != ST_F16 && c->dtype != ST_BF16)
        return hfq_fail(err, w, "dtype must be f32, f16 or bf16");
    if (c->shards < 1 || c->shards > n_specs(c) || c->shards > MAX_SHARDS)
        return hfq_fail(err, w, "shards %d outside 1..%d (the number of tensors)", c->shards,
                        n_specs(c) < MAX_SHARDS ? n_specs(c) : MAX_SHARDS);
    if (!(c->rope_theta > 0 && isfinite(c->rope_theta)))
        return hfq_fail(err, w, "rope-theta must be positive");
    if (!(c->rms_eps > 0 && c->rms_eps < 1)) return hfq_fail(err, w, "rms-eps must be in (0, 1)");
    if (c->outliers < 0 || c->outliers > c->hidden)
        return hfq_fail(err, w, "outliers %d outside 0..hidden", c->outliers);
    return 0;
}

/* -------------------------------------------------------------- values */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *state) {
    return mix64(*state += 0x9e3779b97f4a7c15ull);
}

static uint64_t name_key(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return mix64(seed ^ mix64(h));
}

/* Natural logarithm of a positive normal double from + - * / only, so that
 * every platform gets the same bits (libm's log may differ in the last ulp). */
static double ln_positive(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)(b >> 52) - 1023;
    b = (b & 0xfffffffffffffull) | 0x3ff0000000000000ull;
    double m;
    memcpy(&m, &b, sizeof m);   /* x = m * 2^e, m in [1, 2) */
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    /* ln m = 2 atanh(t), |t| <= 0.1716: the odd series to t^15 is good to ~1e-13,
     * far below the float rounding the values get */
    double t = (m - 1.0) / (m + 1.0), t2 = t * t, p = 1.0 / 15.0;
    for (int k = 13; k >= 1; k -= 2) p = p * t2 + 1.0 / k;
    return 2.0 * t * p + e * 0.69314718055994530942;
}

/* Two independent N(0, 1) values (Marsaglia's polar method). */
static void gauss_pair(uint64_t *state, double *z0, double *z1) {
    for (;;) {
        double u = (double)(splitmix64(state) >> 11) * 0x1p-52 - 1.0;
        double v = (double)(splitmix64(state) >> 11) * 0x1p-52 - 1.0;
        double r = u * u + v * v;
        if (r >= 1.0 || r == 0.0) continue;
        double f = sqrt(-2.0 * ln_positive(r) / r);
        *z0 = u * f;
        *z1 = v * f;
        return;
    }
}

static void store(st_dtype dt, unsigned char *p, float x) {
    uint32_t bits = dt == ST_F32 ? hfq_f32_bits(x) : dt == ST_F16 ? hfq_f32_to_fp16(x)
                                                                  : hfq_f32_to_bf16(x);
    size_t n = st_dtype_size(dt);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(bits >> (8 * i));   /* little-endian */
}

typedef struct gen_ctx {
    const synth_config *c;
    const spec *specs;
    const int *order;             /* shard's tensor i -> spec index */
    const unsigned char *outlier; /* hidden flags */
} gen_ctx;

static float value(const gen_ctx *g, const spec *s, int64_t i, double z) {
    if (s->kind == K_GAUSS) return (float)(s->std * z);
    float w = (float)(1.0 + s->std * z);
    return s->kind == K_LAYER_NORM && g->outlier[i] ? w * SYNTH_OUTLIER_SCALE : w;
}

static int fill_tensor(void *ctx, int64_t i, void *buf, uint64_t nbytes, hfq_error *err) {
    (void)err;
    const gen_ctx *g = ctx;
    const spec *s = &g->specs[g->order[i]];
    st_dtype dt = g->c->dtype;
    size_t esize = st_dtype_size(dt);
    int64_t ne = (int64_t)(nbytes / esize), n_chunks = (ne + CHUNK - 1) / CHUNK;
    uint64_t key = name_key(g->c->seed, s->name);
    #pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < n_chunks; ch++) {
        uint64_t state = mix64(key + mix64((uint64_t)ch));
        int64_t end = (ch + 1) * CHUNK < ne ? (ch + 1) * CHUNK : ne;
        for (int64_t e = ch * CHUNK; e < end; e += 2) {
            double z0, z1;
            gauss_pair(&state, &z0, &z1);
            store(dt, (unsigned char *)buf + e * esize, value(g, s, e, z0));
            if (e + 1 < end) store(dt, (unsigned char *)buf + (e + 1) * esize, value(g, s, e + 1, z1));
        }
    }
    return 0;
}

void synth_outlier_channels(const synth_config *c, int *out) {
    /* Floyd's sampling: c->outliers distinct channels of 0..hidden-1 */
    uint64_t state = name_key(c->seed, "outlier channels");
    int n = 0;
    for (int j = c->hidden - c->outliers; j < c->hidden; j++) {
        int t = (int)(splitmix64(&state) % (uint64_t)(j + 1)), taken = 0;
        for (int k = 0; k < n; k++) taken |= out[k] == t;
        out[n++] = taken ? j : t;
    }
    for (int i = 1; i < n; i++)   /* insertion sort, ascending */
        for (int k = i; k > 0 && out[k - 1] > out[k]; k--) {
            int tmp = out[k];
            out[k] = out[k - 1];
            out[k - 1] = tmp;
        }
}

/* -------------------------------------------------------------- files */

/* Shard of each tensor in state_dict order: contiguous runs of about equal
 * bytes, none empty. */
static void assign_shards(const synth_config *c, const spec *s, int n, uint64_t esize, int *shard) {
    uint64_t total = 0, before = 0;
    for (int i = 0; i < n; i++) total += (uint64_t)spec_elements(&s[i]) * esize;
    int prev = 0, k = c->shards;
    for (int i = 0; i < n; i++) {
        int want = (int)((double)before / (double)total * k);
        int lo = k - (n - i) > prev ? k - (n - i) : prev, hi = i == 0 ? 0 : prev + 1;
        if (hi > k - 1) hi = k - 1;
        shard[i] = want < lo ? lo : want > hi ? hi : want;
        prev = shard[i];
        before += (uint64_t)spec_elements(&s[i]) * esize;
    }
}

static int cmp_spec_ptr(const void *a, const void *b) {
    return strcmp((*(const spec *const *)a)->name, (*(const spec *const *)b)->name);
}

typedef struct writer {
    const char *dir;
    const synth_config *c;
    const spec *specs;
    int n_specs;
    const unsigned char *outlier;
    synth_progress_fn progress;
    void *progress_ctx;
    uint64_t done, total;
} writer;

static void shard_name(char *out, size_t size, const synth_config *c, int k) {
    if (c->shards == 1) snprintf(out, size, "model.safetensors");
    else snprintf(out, size, "model-%05d-of-%05d.safetensors", k + 1, c->shards);
}

/* Every file the writer writes, replaces or removes, besides the shards. */
static const char *const fixed_files[] = {"config.json", "generation_config.json", "tokenizer.json",
                                          "tokenizer_config.json", "special_tokens_map.json", "model.safetensors",
                                          "model.safetensors.index.json"};
#define N_FIXED_FILES ((int)(sizeof fixed_files / sizeof fixed_files[0]))

int synth_n_files(const synth_config *c) { return N_FIXED_FILES + (c->shards > 1 ? c->shards : 0); }

void synth_file_name(const synth_config *c, int k, char *out, size_t size) {
    if (k < N_FIXED_FILES) snprintf(out, size, "%s", fixed_files[k]);
    else shard_name(out, size, c, k - N_FIXED_FILES);
}

static int path_in(char *out, size_t size, const char *dir, const char *name, hfq_error *err) {
    if ((size_t)snprintf(out, size, "%s/%s", dir, name) < size) return 0;
    return hfq_fail(err, dir, "path too long");
}

typedef struct shard_fill {
    gen_ctx gen;
    writer *w;
} shard_fill;

static int fill_and_report(void *ctx, int64_t i, void *buf, uint64_t nbytes, hfq_error *err) {
    shard_fill *f = ctx;
    if (fill_tensor(&f->gen, i, buf, nbytes, err) != 0) return -1;
    f->w->done += nbytes;
    if (f->w->progress) f->w->progress(f->w->progress_ctx, f->w->done, f->w->total);
    return 0;
}

/* One shard: its tensors sorted by name, as the reference writer orders them. */
static int write_shard(writer *w, int k, const int *shard, const spec **sorted,
                       st_write_tensor *wt, int *order, hfq_error *err) {
    int m = 0;
    for (int i = 0; i < w->n_specs; i++)
        if (shard[i] == k) sorted[m++] = &w->specs[i];
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_spec_ptr);
    for (int j = 0; j < m; j++) {
        order[j] = (int)(sorted[j] - w->specs);
        wt[j] = (st_write_tensor){sorted[j]->name, w->c->dtype, sorted[j]->n_dims,
                                  {sorted[j]->shape[0], sorted[j]->shape[1]}};
    }
    char name[64], path[4096];
    shard_name(name, sizeof name, w->c, k);
    if (path_in(path, sizeof path, w->dir, name, err) != 0) return -1;
    static const char *const meta[] = {"format", "pt"};
    shard_fill f = {{w->c, w->specs, order, w->outlier}, w};
    return st_write_file(path, wt, m, meta, 1, fill_and_report, &f, err);
}

static int add_raw(cJSON *obj, const char *key, const char *text) {
    return cJSON_AddRawToObject(obj, key, text) != NULL;
}

/* A float as Python writes it: integral values as "10000.0", others as the
 * shortest text that reads back the same. */
static int add_float(cJSON *obj, const char *key, double v) {
    char text[40];
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(text, sizeof text, "%.1f", v);
    } else {
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(text, sizeof text, "%.*g", digits, v);
            if (strtod(text, NULL) == v) break;
        }
    }
    return add_raw(obj, key, text);
}

static int write_index(const writer *w, const int *shard, const spec **sorted, hfq_error *err) {
    for (int i = 0; i < w->n_specs; i++) sorted[i] = &w->specs[i];
    qsort(sorted, (size_t)w->n_specs, sizeof *sorted, cmp_spec_ptr);
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
    char total[24], name[64];
    snprintf(total, sizeof total, "%" PRIu64, w->total);
    cJSON *map = meta && add_raw(meta, "total_size", total)
                     ? cJSON_AddObjectToObject(root, "weight_map") : NULL;
    int ok = map != NULL;
    for (int i = 0; ok && i < w->n_specs; i++) {
        shard_name(name, sizeof name, w->c, shard[sorted[i] - w->specs]);
        ok = cJSON_AddStringToObject(map, sorted[i]->name, name) != NULL;
    }
    char path[4096];
    if (path_in(path, sizeof path, w->dir, "model.safetensors.index.json", err) != 0) {
        cJSON_Delete(root);
        return -1;
    }
    if (!ok) {
        cJSON_Delete(root);
        root = NULL;
    }
    return synth_write_json(path, root, err);
}

static int write_weights(writer *w, hfq_error *err) {
    int n = w->n_specs;
    int *shard = malloc(sizeof *shard * (size_t)n), *order = malloc(sizeof *order * (size_t)n);
    const spec **sorted = malloc(sizeof *sorted * (size_t)n);
    st_write_tensor *wt = malloc(sizeof *wt * (size_t)n);
    int rc = shard && order && sorted && wt ? 0 : hfq_fail(err, w->dir, "out of memory");
    if (rc == 0) assign_shards(w->c, w->specs, n, st_dtype_size(w->c->dtype), shard);
    for (int k = 0; k < w->c->shards && rc == 0; k++)
        rc = write_shard(w, k, shard, sorted, wt, order, err);
    if (rc == 0 && w->c->shards > 1) rc = write_index(w, shard, sorted, err);
    /* a checkpoint written earlier into this folder must not shadow this one */
    char stale[4096];
    const char *other = w->c->shards > 1 ? "model.safetensors" : "model.safetensors.index.json";
    if (rc == 0 && path_in(stale, sizeof stale, w->dir, other, err) == 0 && unlink(stale) != 0 &&
        errno != ENOENT)
        rc = hfq_fail(err, stale, "cannot remove stale file: %s", strerror(errno));
    free(shard);
    free(order);
    free(sorted);
    free(wt);
    return rc;
}

static cJSON *config_json(const synth_config *c, const int *outliers) {
    static const char *const torch_dtypes[ST_DTYPE_COUNT] = {
        [ST_F32] = "float32", [ST_F16] = "float16", [ST_BF16] = "bfloat16"};
    cJSON *root = cJSON_CreateObject();
    cJSON *arch = cJSON_CreateStringArray(&arch_classes[c->arch], 1);
    int ok = root && arch && cJSON_AddItemToObject(root, "architectures", arch);
    if (!ok) cJSON_Delete(arch);
    /* keys sorted, as transformers writes them */
    if (c->arch == SYNTH_LLAMA) ok = ok && cJSON_AddFalseToObject(root, "attention_bias");
    ok = ok && cJSON_AddNumberToObject(root, "bos_token_id", 1);
    ok = ok && cJSON_AddNumberToObject(root, "eos_token_id", 2);
    cJSON *synth = ok ? cJSON_AddObjectToObject(root, "hfq_synthetic") : NULL;
    char seed[24];
    snprintf(seed, sizeof seed, "%" PRIu64, c->seed);
    ok = synth && add_raw(synth, "seed", seed);
    cJSON *chan = ok ? cJSON_CreateIntArray(outliers, c->outliers) : NULL;
    ok = chan && cJSON_AddItemToObject(synth, "outlier_channels", chan);
    if (!ok) cJSON_Delete(chan);
    ok = ok && add_float(synth, "outlier_scale", SYNTH_OUTLIER_SCALE);
    ok = ok && cJSON_AddStringToObject(root, "hidden_act", "silu");
    ok = ok && cJSON_AddNumberToObject(root, "hidden_size", c->hidden);
    ok = ok && add_float(root, "initializer_range", 0.02);
    ok = ok && cJSON_AddNumberToObject(root, "intermediate_size", c->ffn);
    ok = ok && cJSON_AddNumberToObject(root, "max_position_embeddings", c->ctx);
    if (c->arch == SYNTH_QWEN2) ok = ok && cJSON_AddNumberToObject(root, "max_window_layers", c->layers);
    ok = ok && cJSON_AddStringToObject(root, "model_type", arch_names[c->arch]);
    ok = ok && cJSON_AddNumberToObject(root, "num_attention_heads", c->heads);
    ok = ok && cJSON_AddNumberToObject(root, "num_hidden_layers", c->layers);
    ok = ok && cJSON_AddNumberToObject(root, "num_key_value_heads", c->kv_heads);
    ok = ok && add_float(root, "rms_norm_eps", c->rms_eps);
    ok = ok && add_float(root, "rope_theta", c->rope_theta);
    if (c->arch == SYNTH_MISTRAL) ok = ok && cJSON_AddNullToObject(root, "sliding_window");
    ok = ok && cJSON_AddBoolToObject(root, "tie_word_embeddings", c->tied);
    ok = ok && cJSON_AddStringToObject(root, "torch_dtype", torch_dtypes[c->dtype]);
    if (c->arch == SYNTH_QWEN2) ok = ok && cJSON_AddFalseToObject(root, "use_sliding_window");
    ok = ok && cJSON_AddNumberToObject(root, "vocab_size", c->vocab);
    if (ok) return root;
    cJSON_Delete(root);
    return NULL;
}

static int write_config_files(const char *dir, const synth_config *c, const int *outliers,
                              hfq_error *err) {
    char path[4096];
    if (path_in(path, sizeof path, dir, "generation_config.json", err) != 0) return -1;
    cJSON *gen = cJSON_CreateObject();
    if (gen && (!cJSON_AddNumberToObject(gen, "bos_token_id", 1) ||
                !cJSON_AddNumberToObject(gen, "eos_token_id", 2))) {
        cJSON_Delete(gen);
        gen = NULL;
    }
    if (synth_write_json(path, gen, err) != 0) return -1;
    /* config.json last: a folder that has it is complete */
    if (path_in(path, sizeof path, dir, "config.json", err) != 0) return -1;
    return synth_write_json(path, config_json(c, outliers), err);
}

int synth_write_model(const char *out_dir, const synth_config *c, synth_progress_fn progress,
                      void *progress_ctx, int64_t *n_params, hfq_error *err) {
    if (synth_check_config(c, err) != 0) return -1;
    struct stat sb;
    if (mkdir(out_dir, 0777) != 0 && !(errno == EEXIST && stat(out_dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return hfq_fail(err, out_dir, "cannot create folder: %s", strerror(errno));
    int n = n_specs(c);
    spec *specs = malloc(sizeof *specs * (size_t)n);
    int *outliers = malloc(sizeof *outliers * (size_t)(c->outliers + 1));
    unsigned char *flags = calloc((size_t)c->hidden, 1);
    synth_vocab vocab = {0};
    int rc = specs && outliers && flags ? 0 : hfq_fail(err, out_dir, "out of memory");
    if (rc == 0) {
        build_specs(c, specs);
        synth_outlier_channels(c, outliers);
        for (int i = 0; i < c->outliers; i++) flags[outliers[i]] = 1;
        rc = synth_vocab_build(&vocab, c->vocab, err);
    }
    if (rc == 0) rc = synth_write_tokenizer(out_dir, &vocab, c->ctx, err);
    writer w = {out_dir, c, specs, n, flags, progress, progress_ctx, 0, 0};
    int64_t params = 0;
    for (int i = 0; rc == 0 && i < n; i++) params += spec_elements(&specs[i]);
    w.total = (uint64_t)params * st_dtype_size(c->dtype);
    if (rc == 0) rc = write_weights(&w, err);
    if (rc == 0) rc = write_config_files(out_dir, c, outliers, err);
    if (rc == 0 && n_params) *n_params = params;
    synth_vocab_free(&vocab);
    free(specs);
    free(outliers);
    free(flags);
    return rc;
}
