/* graph.c - the Llama forward pass, written once over the ops table.
 *
 * Shapes: T = tokens in the batch, E = n_embd, Q = n_head * head_dim,
 * KV = n_head_kv * head_dim, F = n_ff, V = n_vocab.
 */
#include "kernels/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/moe_route.h"
#include "quant/hadamard.h"
#include "quant/kv_scales.h"

struct hfq_context {
    const hfq_model *model;
    const hfq_hparams *hp;
    const hfq_ops *ops;
    hfq_backend *be;
    int64_t n_ctx, n_batch, n_outputs, n_past;
    hfq_observer_fn observer;
    void *observer_user;
    hfq_expert_observer_fn expert_observer;
    void *expert_observer_user;
    bool experts_all_tokens;   /* every expert sees every token (calibration) */
    hfq_kv_observer_fn kv_observer;
    void *kv_observer_user;
    float *kv_scales;          /* [2][n_layer] FP8 caches' static K, V scales in their formats; NULL: dynamic */
    hfq_rope rope, rope_swa;   /* rope_swa: the sliding layers' (cos_sin_swa, or rope's table) */
    hfq_attn attn;

    /* backend buffers, allocated once */
    float *x;          /* [T][E]   residual stream */
    float *xn;         /* [T][E]   normalized input of a block */
    float *q;          /* [T][Q] */
    float *k, *v;      /* [T][KV] */
    float *att;        /* [T][Q]   attention output, before attn_output */
    float *gate, *up;  /* [T][F] */
    float *proj;       /* [T][E]   output of attn_output / ffn_down */
    float *logits;     /* [n_outputs][V] */
    float *cos_sin;    /* [n_ctx][n_rot/2][2] */
    float *cos_sin_swa;/* as cos_sin, of the sliding layers when their rope differs; else NULL */
    float **k_cache;   /* [n_layer] -> n_ctx rows of KV in attn.k_type, layout the backend's */
    float **v_cache;
    /* mixtures of experts only (moe_block): backend buffers router [T][X]
     * (X = n_expert) and xg [T][E] (an expert's tokens), host copies of the
     * router's logits and zeros [T][E], the routes */
    float *router, *xg;
    float *router_host, *zeros_host;
    hfq_moe_routes routes;
    /* experts_all_tokens: rows 0..T-1, and each expert's weight per token (0: not routed) */
    int32_t *all_rows;
    float *all_weights;
    /* host rows [T][widest rotated input] for weights marked hfq.block_rotate; NULL: none */
    float *rot;
};

/* YaRN's pair index that turns `rotations` times in the original context. */
static double yarn_corr_dim(const hfq_hparams *hp, double rotations) {
    return (double)hp->n_rot * log((double)hp->yarn_orig_ctx / (rotations * 2.0 * 3.14159265358979323846)) /
           (2.0 * log((double)hp->rope_freq_base));
}

/* Angles in double: pos * freq_i, freq_i = base^(-2i/n_rot) / factor_i scaled
 * by freq_scale; with YaRN, the scaled and the unscaled frequency blended as
 * transformers' _compute_yarn_parameters does (pairs below `low` keep the
 * original, above `high` take the scaled one, a linear ramp between), and
 * cos, sin times its magnitude. */
static void fill_rope_table(float *cs, const hfq_hparams *hp, const float *factors, int64_t n_ctx) {
    const int64_t n_pairs = hp->n_rot / 2;
    const bool yarn = hp->yarn_orig_ctx > 0;
    double low = 0, high = 0, mscale = 1.0;
    if (yarn) {
        low = fmax(floor(yarn_corr_dim(hp, hp->yarn_beta_fast)), 0.0);
        high = fmin(ceil(yarn_corr_dim(hp, hp->yarn_beta_slow)), (double)(hp->n_rot - 1));
        if (low == high) high += 0.001;   /* as transformers: no division by zero */
        mscale = hp->yarn_mscale;
    }
    if (hp->rope_attn_factor > 0.0f) mscale *= hp->rope_attn_factor;   /* longrope's magnitude */
    for (int64_t i = 0; i < n_pairs; i++) {
        double base_freq = pow((double)hp->rope_freq_base, -2.0 * (double)i / (double)hp->n_rot);
        if (factors) base_freq /= factors[i];
        double freq = hp->rope_freq_scale * base_freq;
        if (yarn) {
            double ramp = fmin(fmax(((double)i - low) / (high - low), 0.0), 1.0);
            double keep = 1.0 - ramp;   /* the share of the unscaled frequency */
            freq = freq * (1.0 - keep) + base_freq * keep;
        }
        for (int64_t pos = 0; pos < n_ctx; pos++) {
            double theta = (double)pos * freq;
            cs[(pos * n_pairs + i) * 2 + 0] = (float)(cos(theta) * mscale);
            cs[(pos * n_pairs + i) * 2 + 1] = (float)(sin(theta) * mscale);
        }
    }
}

/* What a context's parameters come to, resolved and checked once for both
 * hfq_context_new and hfq_context_plan. */
typedef struct context_shape {
    const hfq_ops *ops;
    int64_t n_ctx, n_batch, n_outputs;
    hfq_kv_type kv_k, kv_v;
    int64_t k_floats, v_floats;   /* one layer's K and V cache */
    hfq_backend_params bp;
} context_shape;

#define N_BUFFERS 12

/* Whether the sliding layers have a rope of their own (Gemma 3's local base);
 * never where every layer slides (swa_pattern 0, Phi-3): their rope is the
 * file's one, with its factors and scaling. */
static bool own_swa_rope(const hfq_hparams *hp) {
    return hp->n_swa > 0 && hp->swa_pattern > 0 && (hp->rope_freq_base_swa != hp->rope_freq_base ||
                             hp->rope_freq_scale_swa != hp->rope_freq_scale || hp->yarn_orig_ctx > 0);
}

/* Floats of each activation buffer, in struct hfq_context's order (x ..
 * cos_sin_swa); 0: not allocated. */
static void buffer_sizes(const hfq_hparams *hp, const context_shape *sh, size_t n[N_BUFFERS]) {
    const size_t T = (size_t)sh->n_batch, E = (size_t)hp->n_embd, Q = (size_t)(hp->n_head * hp->head_dim),
                 KV = (size_t)(hp->n_head_kv * hp->head_dim), V = (size_t)hp->n_vocab;
    const size_t F = (size_t)(hp->n_ff_exp > hp->n_ff ? hp->n_ff_exp : hp->n_ff);   /* gate, up: an expert's too */
    const size_t sizes[N_BUFFERS] = {T * E, T * E, T * Q, T * KV, T * KV, T * Q, T * F, T * F, T * E,
                                     (size_t)sh->n_outputs * V, (size_t)sh->n_ctx * (size_t)hp->n_rot,
                                     own_swa_rope(hp) ? (size_t)sh->n_ctx * (size_t)hp->n_rot : 0};
    memcpy(n, sizes, sizeof sizes);
}

static int alloc_buffers(hfq_context *c, const context_shape *sh, hfq_error *err) {
    const hfq_hparams *hp = c->hp;
    float **bufs[N_BUFFERS] = {&c->x, &c->xn, &c->q, &c->k, &c->v, &c->att, &c->gate, &c->up, &c->proj, &c->logits,
                               &c->cos_sin, &c->cos_sin_swa};
    size_t n[N_BUFFERS];
    buffer_sizes(hp, sh, n);
    for (size_t i = 0; i < N_BUFFERS; i++)
        if (n[i] && !(*bufs[i] = c->ops->alloc(c->be, n[i]))) goto oom;
    c->k_cache = calloc((size_t)hp->n_layer, sizeof *c->k_cache);
    c->v_cache = calloc((size_t)hp->n_layer, sizeof *c->v_cache);
    if (!c->k_cache || !c->v_cache) goto oom;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (!(c->k_cache[il] = c->ops->alloc(c->be, (size_t)sh->k_floats)) ||
            !(c->v_cache[il] = c->ops->alloc(c->be, (size_t)sh->v_floats)))
            goto oom;
    return 0;
oom:
    return hfq_fail(err, hfq_model_path(c->model), "out of memory for a context of %lld positions",
                    (long long)c->n_ctx);
}

/* Floats of the buffers only mixtures of experts have: router, xg. */
static size_t moe_buffer_floats(const hfq_hparams *hp, int64_t n_batch) {
    return hp->n_expert ? (size_t)n_batch * (size_t)(hp->n_expert + hp->n_embd) : 0;
}

static int alloc_moe(hfq_context *c, hfq_error *err) {
    const hfq_hparams *hp = c->hp;
    if (!hp->n_expert) return 0;
    const size_t T = (size_t)c->n_batch;
    if (!(c->router = c->ops->alloc(c->be, T * (size_t)hp->n_expert)) ||
        !(c->xg = c->ops->alloc(c->be, T * (size_t)hp->n_embd)) ||
        !(c->router_host = malloc(T * (size_t)hp->n_expert * sizeof(float))) ||
        !(c->zeros_host = calloc(T * (size_t)hp->n_embd, sizeof(float))) ||
        hfq_moe_routes_init(&c->routes, hp->n_expert, hp->n_expert_used, c->n_batch) ||
        !(c->all_rows = malloc(T * sizeof *c->all_rows)) || !(c->all_weights = malloc(T * sizeof(float))))
        return hfq_fail(err, hfq_model_path(c->model), "out of memory for the experts' buffers");
    return 0;
}

static int init_rope(hfq_context *c, hfq_error *err) {
    const hfq_hparams *hp = c->hp;
    size_t n = (size_t)c->n_ctx * (size_t)hp->n_rot;
    float *host = malloc(n * sizeof *host);
    if (!host) return hfq_fail(err, hfq_model_path(c->model), "out of memory for the rope table");
    fill_rope_table(host, hp, hfq_model_rope_factors(c->model, c->n_ctx), c->n_ctx);
    c->ops->upload(c->be, c->cos_sin, host, n);
    c->rope = (hfq_rope){.mode = hp->rope_mode, .n_rot = hp->n_rot, .head_dim = hp->head_dim,
                         .cos_sin = c->cos_sin};
    c->rope_swa = c->rope;
    if (c->cos_sin_swa) {
        /* the sliding layers' base and linear scale, without the global
         * layers' per-frequency factors or YaRN */
        hfq_hparams swa = *hp;
        swa.rope_freq_base = hp->rope_freq_base_swa;
        swa.rope_freq_scale = hp->rope_freq_scale_swa;
        swa.yarn_orig_ctx = 0;
        fill_rope_table(host, &swa, NULL, c->n_ctx);
        c->ops->upload(c->be, c->cos_sin_swa, host, n);
        c->rope_swa.cos_sin = c->cos_sin_swa;
    }
    free(host);
    return 0;
}

/* A KV format the backend takes and head_dim suits; HFQ_KV_DEFAULT resolved.
 * which: "K", "V". */
static int kv_type_for(const hfq_ops *ops, hfq_kv_type want, const hfq_hparams *hp, const char *path,
                       const char *which, hfq_kv_type *out, hfq_error *err) {
    const hfq_kv_type t = want == HFQ_KV_DEFAULT ? ops->kv_default : want;
    const char *name = hfq_kv_type_name(t);
    if (!name) return hfq_fail(err, path, "unknown %s cache type %d", which, (int)want);
    if (!(ops->kv_types & (1u << t)))
        return hfq_fail(err, path, "the %s backend has no %s cache of type %s", ops->name, which, name);
    if (hfq_kv_row_bytes(t, hp->head_dim) < 0)
        return hfq_fail(err, path, "%s cache type %s needs a head size that is a multiple of %lld, not %lld", which,
                        name, (long long)hfq_qtype_get(hfq_kv_type_qtype(t))->block_size, (long long)hp->head_dim);
    *out = t;
    return 0;
}

static int context_shape_of(const hfq_model *m, const hfq_context_params *p, context_shape *sh, hfq_error *err) {
    const hfq_hparams *hp = hfq_model_hparams(m);
    const char *path = hfq_model_path(m);
    *sh = (context_shape){.ops = p->ops ? p->ops : hfq_cpu_ops()};
    sh->n_ctx = p->n_ctx > 0 ? p->n_ctx : hp->n_ctx_train;
    sh->n_batch = p->n_batch > 0 ? p->n_batch : (sh->n_ctx < 512 ? sh->n_ctx : 512);
    if (sh->n_ctx > ((int64_t)1 << 24))
        return hfq_fail(err, path, "context of %lld positions is too large", (long long)sh->n_ctx);
    const hfq_arch_desc *arch = hfq_arch_get(hp->arch);
    if ((arch->ffn_act == HFQ_FFN_GELU_TANH && !sh->ops->geglu) || (arch->embd_scale && !sh->ops->scale))
        return hfq_fail(err, path, "the %s backend lacks the %s op %s needs", sh->ops->name,
                        sh->ops->geglu ? "scale" : "geglu", arch->name);
    if (p->act_quant < HFQ_ACT_QUANT_AUTO || p->act_quant > HFQ_ACT_QUANT_STATIC)
        return hfq_fail(err, path, "unknown activation quantization mode %d", (int)p->act_quant);
    if (sh->n_batch > sh->n_ctx) sh->n_batch = sh->n_ctx;
    if (hp->n_expert && (!sh->ops->gather_rows || !sh->ops->add_rows_scaled))
        return hfq_fail(err, path, "the %s backend does not run mixture-of-experts models", sh->ops->name);
    sh->n_outputs = p->n_outputs > 0 && p->n_outputs < sh->n_batch ? p->n_outputs : sh->n_batch;
    if (kv_type_for(sh->ops, p->kv_k, hp, path, "K", &sh->kv_k, err) ||
        kv_type_for(sh->ops, p->kv_v, hp, path, "V", &sh->kv_v, err))
        return -1;
    sh->k_floats = hfq_kv_cache_floats(sh->kv_k, sh->n_ctx, hp->n_head_kv, hp->head_dim);
    sh->v_floats = hfq_kv_cache_floats(sh->kv_v, sh->n_ctx, hp->n_head_kv, hp->head_dim);
    if (sh->k_floats < 0 || sh->v_floats < 0)
        return hfq_fail(err, path, "a KV cache of %lld positions is too large", (long long)sh->n_ctx);
    sh->bp = (hfq_backend_params){.n_threads = p->n_threads, .act_quant = p->act_quant, .max_tokens = sh->n_batch,
                                  .n_ctx = sh->n_ctx};
    return 0;
}

/* An FP8 cache's format (E4M3 for the others, which take no scale). */
static hfq_fp8_format kv_fp8(hfq_kv_type t) { return t == HFQ_KV_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3; }

/* The static scales of the context's FP8 caches in their formats (c->kv_scales),
 * from the parameters or the model's file; none without an FP8 cache. */
static int static_kv_scales(hfq_context *c, const hfq_context_params *p, hfq_error *err) {
    const bool k8 = hfq_kv_type_is_fp8(c->attn.k_type), v8 = hfq_kv_type_is_fp8(c->attn.v_type);
    const int64_t n = c->hp->n_layer;
    float *k = NULL, *v = NULL;
    if ((!k8 && !v8) || p->kv_dynamic) return 0;
    if (p->k_scales && p->v_scales) {
        if (!(k = malloc((size_t)n * sizeof *k)) || !(v = malloc((size_t)n * sizeof *v))) {
            free(k);
            return hfq_fail(err, hfq_model_path(c->model), "out of memory");
        }
        memcpy(k, p->k_scales, (size_t)n * sizeof *k);
        memcpy(v, p->v_scales, (size_t)n * sizeof *v);
        for (int64_t il = 0; il < n; il++)
            if (!(k[il] > 0.0f && v[il] > 0.0f && isfinite(k[il]) && isfinite(v[il]))) {
                free(k);
                free(v);
                return hfq_fail(err, hfq_model_path(c->model), "layer %lld's static KV scales %g, %g are not finite "
                                "numbers > 0", (long long)il, (double)p->k_scales[il], (double)p->v_scales[il]);
            }
    } else if (hfq_model_gguf(c->model) && hfq_kv_scales_read(hfq_model_gguf(c->model), n, &k, &v, err)) {
        return -1;
    }
    if (!k) return 0;
    float *s = realloc(k, (size_t)(2 * n) * sizeof *s);
    if (!s) {
        free(k);
        free(v);
        return hfq_fail(err, hfq_model_path(c->model), "out of memory");
    }
    for (int64_t il = 0; il < n; il++) {
        s[il] = k8 ? hfq_kv_scale_as(kv_fp8(c->attn.k_type), s[il]) : 0.0f;
        s[n + il] = v8 ? hfq_kv_scale_as(kv_fp8(c->attn.v_type), v[il]) : 0.0f;
    }
    free(v);
    c->kv_scales = s;
    return 0;
}

static int widest_rotated(void *user, const hfq_tensor *t) {
    int64_t *n = user;
    if (t->rot_block && t->ne0 > *n) *n = t->ne0;
    return 0;
}

/* c->rot, when the model has rotated weights: host memory, as the backends
 * that run them (cpu) keep their buffers (cuda refuses such weights). */
static int alloc_rot(hfq_context *c, hfq_error *err) {
    int64_t n = 0;
    hfq_model_each_matrix(c->model, widest_rotated, &n);
    if (n && !(c->rot = malloc((size_t)c->n_batch * (size_t)n * sizeof *c->rot)))
        return hfq_fail(err, hfq_model_path(c->model), "out of memory");
    return 0;
}

hfq_context *hfq_context_new(const hfq_model *m, const hfq_context_params *p, hfq_error *err) {
    const hfq_hparams *hp = hfq_model_hparams(m);
    context_shape sh;
    if (context_shape_of(m, p, &sh, err)) return NULL;
    hfq_context *c = calloc(1, sizeof *c);
    if (!c) {
        hfq_fail(err, hfq_model_path(m), "out of memory");
        return NULL;
    }
    c->model = m;
    c->hp = hp;
    c->ops = sh.ops;
    c->attn = (hfq_attn){.n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                         .scale = hp->attn_scale > 0.0f ? hp->attn_scale : (float)(1.0 / sqrt((double)hp->head_dim)),
                         .softcap = hp->attn_softcap, .k_type = sh.kv_k, .v_type = sh.kv_v};
    c->n_ctx = sh.n_ctx;
    c->n_batch = sh.n_batch;
    c->n_outputs = sh.n_outputs;
    if (static_kv_scales(c, p, err) || !(c->be = c->ops->create(m, &sh.bp, err)) || alloc_buffers(c, &sh, err) ||
        alloc_moe(c, err) || alloc_rot(c, err) || init_rope(c, err) ||
        (c->ops->sync && c->ops->sync(c->be, err))) {
        hfq_context_free(c);
        return NULL;
    }
    return c;
}

int hfq_context_plan(const hfq_model *m, const hfq_context_params *p, hfq_context_memory *out, hfq_error *err) {
    context_shape sh;
    if (context_shape_of(m, p, &sh, err)) return -1;
    if (!sh.ops->scratch_bytes)
        return hfq_fail(err, hfq_model_path(m), "the %s backend has no memory plan", sh.ops->name);
    const int64_t scratch = sh.ops->scratch_bytes(m, &sh.bp, err);
    if (scratch < 0) return -1;
    size_t n[N_BUFFERS];
    buffer_sizes(hfq_model_hparams(m), &sh, n);
    int64_t buffers = scratch + (int64_t)(moe_buffer_floats(hfq_model_hparams(m), sh.n_batch) * sizeof(float));
    int64_t rot = 0;   /* alloc_rot's buffer */
    hfq_model_each_matrix(m, widest_rotated, &rot);
    buffers += rot * sh.n_batch * (int64_t)sizeof(float);
    for (size_t i = 0; i < N_BUFFERS; i++) buffers += (int64_t)(n[i] * sizeof(float));
    *out = (hfq_context_memory){.kv_k = sh.kv_k, .kv_v = sh.kv_v, .n_ctx = sh.n_ctx,
                                .kv_cache = hfq_model_hparams(m)->n_layer * (sh.k_floats + sh.v_floats) *
                                            (int64_t)sizeof(float),
                                .buffers = buffers};
    return 0;
}

void hfq_context_free(hfq_context *c) {
    if (!c) return;
    if (c->be) {
        float *bufs[] = {c->x, c->xn, c->q, c->k, c->v, c->att, c->gate, c->up, c->proj, c->logits, c->cos_sin,
                         c->cos_sin_swa};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) c->ops->release(c->be, bufs[i]);
        if (c->router) c->ops->release(c->be, c->router);
        if (c->xg) c->ops->release(c->be, c->xg);
        for (int64_t il = 0; il < c->hp->n_layer; il++) {
            if (c->k_cache && c->k_cache[il]) c->ops->release(c->be, c->k_cache[il]);
            if (c->v_cache && c->v_cache[il]) c->ops->release(c->be, c->v_cache[il]);
        }
        c->ops->destroy(c->be);
    }
    free(c->k_cache);
    free(c->v_cache);
    free(c->router_host);
    free(c->zeros_host);
    free(c->all_rows);
    free(c->all_weights);
    free(c->kv_scales);
    free(c->rot);
    hfq_moe_routes_free(&c->routes);
    free(c);
}

int64_t hfq_context_n_ctx(const hfq_context *c) { return c->n_ctx; }
int64_t hfq_context_n_batch(const hfq_context *c) { return c->n_batch; }
int64_t hfq_context_n_past(const hfq_context *c) { return c->n_past; }
hfq_kv_type hfq_context_kv_k(const hfq_context *c) { return c->attn.k_type; }
hfq_kv_type hfq_context_kv_v(const hfq_context *c) { return c->attn.v_type; }
bool hfq_context_kv_static(const hfq_context *c) { return c->kv_scales != NULL; }
void hfq_context_reset(hfq_context *c) { c->n_past = 0; }

void hfq_context_set_observer(hfq_context *c, hfq_observer_fn fn, void *user) {
    c->observer = fn;
    c->observer_user = user;
}

void hfq_context_set_expert_observer(hfq_context *c, hfq_expert_observer_fn fn, void *user, bool all_tokens) {
    c->expert_observer = fn;
    c->expert_observer_user = user;
    c->experts_all_tokens = fn && all_tokens;
}

void hfq_context_set_kv_observer(hfq_context *c, hfq_kv_observer_fn fn, void *user) {
    c->kv_observer = fn;
    c->kv_observer_user = user;
}

/* y = W_e x for expert e's slice of a stacked W, telling the expert observer about x first. */
static void expert_linear(hfq_context *c, float *y, const hfq_tensor *stacked, int64_t e, const float *x, int64_t n) {
    const int64_t X = c->hp->n_expert;
    if (c->expert_observer) c->expert_observer(c->expert_observer_user, stacked->name, e, X, x, n, stacked->ne0);
    const hfq_tensor w = hfq_expert_slice(stacked, X, e);
    c->ops->matmul(c->be, y, &w, NULL, x, n);
}

/* y = W x, telling the observer about x first.   x: [T][W.ne0] -> y: [T][W.ne1]
 * A rotated W (hfq.block_rotate) stores W Q: x Q is what it multiplies, and
 * what the observer sees (calibration describes the inputs the rows meet). */
static void linear(hfq_context *c, float *y, const hfq_tensor *w, const hfq_tensor *bias, const float *x,
                   int64_t T) {
    if (w->rot_block) {
        memcpy(c->rot, x, (size_t)T * (size_t)w->ne0 * sizeof *x);
        for (int64_t t = 0; t < T; t++) hfq_hadamard_rotate_row(c->rot + t * w->ne0, w->ne0, w->rot_block, w->rot_seed);
        x = c->rot;
    }
    if (c->observer && !w->view_tail) c->observer(c->observer_user, w->name, x, T, w->ne0);
    c->ops->matmul(c->be, y, w, bias->data ? bias : NULL, x, T);
}

static const hfq_tensor no_bias;

/* The attention block of layer il: x += wo(attention(rope(q), rope(k), v)) over
 * norm(x). */
static void attention_block(hfq_context *c, const hfq_layer *l, int64_t il, int64_t T, int64_t pos0) {
    const hfq_ops *ops = c->ops;
    hfq_backend *be = c->be;
    const hfq_hparams *hp = c->hp;
    ops->rmsnorm(be, c->xn, c->x, &l->attn_norm, T, hp->rms_eps);       /* xn: [T][E] */
    linear(c, c->q, &l->wq, &l->bq, c->xn, T);                         /* q: [T][Q] */
    linear(c, c->k, &l->wk, &l->bk, c->xn, T);                         /* k: [T][KV] */
    linear(c, c->v, &l->wv, &l->bv, c->xn, T);                         /* v: [T][KV] */
    /* per-head RMSNorm of q and k (qwen3): each head is one row of head_dim */
    if (l->q_norm.data) ops->rmsnorm(be, c->q, c->q, &l->q_norm, T * hp->n_head, hp->rms_eps);
    if (l->k_norm.data) ops->rmsnorm(be, c->k, c->k, &l->k_norm, T * hp->n_head_kv, hp->rms_eps);
    /* a sliding layer: its window and its rope */
    const bool slides = hfq_layer_slides(hp, il);
    const hfq_rope *rope = slides ? &c->rope_swa : &c->rope;
    hfq_attn attn = c->attn;
    attn.n_swa = slides ? hp->n_swa : 0;
    if (c->kv_scales) {
        attn.k_scale = c->kv_scales[il];
        attn.v_scale = c->kv_scales[hp->n_layer + il];
    }
    ops->rope(be, c->q, T, hp->n_head, pos0, rope);
    ops->rope(be, c->k, T, hp->n_head_kv, pos0, rope);
    if (c->kv_observer) c->kv_observer(c->kv_observer_user, il, c->k, c->v, T, hp->n_head_kv, hp->head_dim);
    ops->attention(be, c->att, c->q, c->k, c->v, c->k_cache[il], c->v_cache[il], pos0, T,
                   &attn);                                                 /* att: [T][Q] */
    linear(c, c->proj, &l->wo, &no_bias, c->att, T);                       /* proj: [T][E] */
    if (l->attn_post_norm.data) ops->rmsnorm(be, c->proj, c->proj, &l->attn_post_norm, T, hp->rms_eps);
    ops->add(be, c->x, c->proj, (size_t)(T * hp->n_embd));
}

/* The feed-forward block: x += down(act(gate(xn)) * up(xn)), xn = norm(x),
 * act SiLU or the family's (GELU); Gemma normalizes the output first. */
static void ffn_block(hfq_context *c, const hfq_layer *l, int64_t T) {
    const hfq_ops *ops = c->ops;
    hfq_backend *be = c->be;
    const hfq_hparams *hp = c->hp;
    ops->rmsnorm(be, c->xn, c->x, &l->ffn_norm, T, hp->rms_eps);        /* xn: [T][E] */
    linear(c, c->gate, &l->w_gate, &no_bias, c->xn, T);                /* gate: [T][F] */
    linear(c, c->up, &l->w_up, &no_bias, c->xn, T);                    /* up: [T][F] */
    if (hfq_arch_get(hp->arch)->ffn_act == HFQ_FFN_GELU_TANH)
        ops->geglu(be, c->gate, c->up, (size_t)(T * hp->n_ff));        /* gate: [T][F] */
    else
        ops->swiglu(be, c->gate, c->up, (size_t)(T * hp->n_ff));
    linear(c, c->proj, &l->w_down, &no_bias, c->gate, T);              /* proj: [T][E] */
    if (l->ffn_post_norm.data) ops->rmsnorm(be, c->proj, c->proj, &l->ffn_post_norm, T, hp->rms_eps);
    ops->add(be, c->x, c->proj, (size_t)(T * hp->n_embd));
}

/* The mixture-of-experts feed-forward: x += sum over the k experts the
 * router chose for each token of weight * down_e(silu(gate_e(xn)) * up_e(xn)),
 * xn = norm(x); each expert multiplies the batch's tokens routed to it at
 * once, and the experts' sums are accumulated in ascending expert order
 * before the residual add (as transformers does). */
static void moe_block(hfq_context *c, const hfq_layer *l, int64_t T) {
    const hfq_ops *ops = c->ops;
    hfq_backend *be = c->be;
    const hfq_hparams *hp = c->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert;
    ops->rmsnorm(be, c->xn, c->x, &l->ffn_norm, T, hp->rms_eps);        /* xn: [T][E] */
    linear(c, c->router, &l->ffn_gate_inp, &no_bias, c->xn, T);        /* router: [T][X] */
    ops->download(be, c->router_host, c->router, (size_t)(T * X));
    hfq_moe_route(&c->routes, c->router_host, T, hp->expert_weights_norm);
    ops->upload(be, c->proj, c->zeros_host, (size_t)(T * E));          /* proj: the experts' sum */
    for (int64_t e = 0; e < X; e++) {
        int64_t at = c->routes.offset[e], n = c->routes.offset[e + 1] - at;
        const int32_t *rows = c->routes.token + at;
        const float *weights = c->routes.weight + at;
        if (c->experts_all_tokens) {   /* adding 0 * y to the others changes no sum */
            for (int64_t t = 0; t < T; t++) c->all_rows[t] = (int32_t)t, c->all_weights[t] = 0.0f;
            for (int64_t i = 0; i < n; i++) c->all_weights[rows[i]] = weights[i];
            rows = c->all_rows;
            weights = c->all_weights;
            n = T;
        }
        if (n == 0) continue;
        ops->gather_rows(be, c->xg, c->xn, rows, n, E);                  /* xg: [n][E] */
        expert_linear(c, c->gate, &l->gate_exps, e, c->xg, n);           /* gate: [n][F] */
        expert_linear(c, c->up, &l->up_exps, e, c->xg, n);               /* up: [n][F] */
        ops->swiglu(be, c->gate, c->up, (size_t)(n * hp->n_ff_exp));
        expert_linear(c, c->xg, &l->down_exps, e, c->gate, n);           /* xg: [n][E] */
        ops->add_rows_scaled(be, c->proj, c->xg, rows, weights, n, E);
    }
    ops->add(be, c->x, c->proj, (size_t)(T * E));
}

/* One batch of T tokens at positions pos0..pos0+T-1; logits of the last
 * n_out tokens go to `logits` ([n_out][V]). */
static void forward_batch(hfq_context *c, const int32_t *tokens, int64_t T, int64_t pos0, int64_t n_out,
                          float *logits) {
    const hfq_ops *ops = c->ops;
    hfq_backend *be = c->be;
    const hfq_hparams *hp = c->hp;
    const int64_t E = hp->n_embd;

    ops->embed(be, c->x, hfq_model_tok_embd(c->model), tokens, T);          /* x: [T][E] */
    if (hfq_arch_get(hp->arch)->embd_scale) ops->scale(be, c->x, sqrtf((float)E), (size_t)(T * E));
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const hfq_layer *l = hfq_model_layer(c->model, il);
        attention_block(c, l, il, T, pos0);
        if (l->ffn_gate_inp.data) moe_block(c, l, T);
        else ffn_block(c, l, T);
    }
    if (n_out == 0) return;
    const float *last = c->x + (T - n_out) * E;                             /* [n_out][E] */
    ops->rmsnorm(be, c->xn, last, hfq_model_output_norm(c->model), n_out, hp->rms_eps);
    linear(c, c->logits, hfq_model_output(c->model), &no_bias, c->xn, n_out); /* logits: [n_out][V] */
    ops->download(be, logits, c->logits, (size_t)(n_out * hp->n_vocab));
    /* on the host, as transformers: logits / cap, tanh, * cap */
    if (hp->final_softcap > 0.0f)
        for (int64_t i = 0; i < n_out * hp->n_vocab; i++)
            logits[i] = tanhf(logits[i] / hp->final_softcap) * hp->final_softcap;
}

/* Logits rows of the batch of tokens [done, done + n_batch) of n_tokens
 * when tokens first_out.. have theirs asked for. */
static int64_t batch_outputs(int64_t done, int64_t n_tokens, int64_t n_batch, int64_t first_out) {
    const int64_t end = n_tokens - done < n_batch ? n_tokens : done + n_batch;
    const int64_t n_out = end - (first_out > done ? first_out : done);
    return n_out < 0 ? 0 : n_out;
}

int hfq_forward(hfq_context *c, const int32_t *tokens, int64_t n_tokens, int64_t n_logits, float *logits,
                hfq_error *err) {
    const char *path = hfq_model_path(c->model);
    const int64_t n_vocab = c->hp->n_vocab;
    if (n_tokens <= 0) return hfq_fail(err, path, "no tokens to evaluate");
    if (n_tokens > c->n_ctx - c->n_past)
        return hfq_fail(err, path, "%lld tokens do not fit after %lld in a context of %lld", (long long)n_tokens,
                        (long long)c->n_past, (long long)c->n_ctx);
    if (n_logits < 0 || n_logits > n_tokens)
        return hfq_fail(err, path, "logits of %lld tokens asked for %lld tokens", (long long)n_logits,
                        (long long)n_tokens);
    for (int64_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return hfq_fail(err, path, "token id %d at %lld is outside the vocabulary [0, %lld)", (int)tokens[i],
                            (long long)i, (long long)n_vocab);
    if (n_logits > 0 && !logits) return hfq_fail(err, path, "no buffer for the logits");
    if ((c->observer || c->expert_observer || c->kv_observer) && !c->ops->host_visible)
        return hfq_fail(err, path, "the %s backend cannot show activations to an observer", c->ops->name);
    const int64_t first_out = n_tokens - n_logits;  /* first token whose logits are asked for */
    for (int64_t done = 0; done < n_tokens; done += c->n_batch) {
        const int64_t n_out = batch_outputs(done, n_tokens, c->n_batch, first_out);
        if (n_out > c->n_outputs)
            return hfq_fail(err, path, "logits of %lld tokens in one batch asked of a context that keeps %lld",
                            (long long)n_out, (long long)c->n_outputs);
    }
    for (int64_t done = 0; done < n_tokens; done += c->n_batch) {
        const int64_t T = n_tokens - done < c->n_batch ? n_tokens - done : c->n_batch;
        const int64_t n_out = batch_outputs(done, n_tokens, c->n_batch, first_out);
        float *out = n_out ? logits + (done + T - n_out - first_out) * n_vocab : NULL;
        forward_batch(c, tokens + done, T, c->n_past, n_out, out);
        if (c->ops->sync && c->ops->sync(c->be, err)) return -1;
        c->n_past += T;
    }
    return 0;
}
