/* test_runner_synth.h - small random Llama/Qwen2 models in memory for the
 * runner tests, and a plain double-precision reference forward pass written
 * from the formulas (naive loops, one token at a time), independent of the
 * runner's code. */
#ifndef HFQ_TESTS_RUNNER_SYNTH_H
#define HFQ_TESTS_RUNNER_SYNTH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "kernels/model.h"
#include "kernels/ops.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/qtype.h"

#define SYNTH_MAX_TENSORS 160

typedef struct synth_spec {
    hfq_arch arch;
    int64_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ctx_train;
    float rms_eps, rope_base, rope_scale;  /* rope_scale: hparams.rope_freq_scale */
    bool biases, tied, rope_factors;
    bool scales;                           /* per-tensor .scale of every layer matrix (NVFP4's global scale) */
    uint32_t wtype;                        /* type of the matrices: any quant/qtype.h format with a quantizer */
    hfq_qext wqext;                        /* instead: I8 matrices with this encoding and .scale tensors */
    int64_t qext_group;                    /* values per INT8 scale along a row; 0: one scale per row */
    bool input_scales;                     /* I8 and NVFP4 matrices: a static activation scale each */
    hfq_act_quant act_quant;               /* how I8/NVFP4 matrices quantize activations (ops.h) */
    /* n_expert > 0: each layer's feed-forward is n_expert SwiGLU experts of
     * n_ff_exp (wtype, stacked 3-D tensors, no .scale), n_expert_used chosen
     * by an F32 router; the double reference below computes dense layers only. */
    int64_t n_expert, n_expert_used, n_ff_exp;
    bool act_mxfp4;                        /* MXFP4 layer matrices: hfq.act_quant "mxfp4" (W4A4) */
    bool act_int8_ct;                      /* INT8 layer matrices: hfq.act_quant "int8_ct" */
    uint64_t seed;
} synth_spec;

typedef struct synth_model {
    synth_spec spec;
    hfq_hparams hp;
    int n;
    gguf_tensor_info info[SYNTH_MAX_TENSORS];
    char names[SYNTH_MAX_TENSORS][GGUF_MAX_NAME + 1];
    void *data[SYNTH_MAX_TENSORS];         /* as stored */
    double *values[SYNTH_MAX_TENSORS];     /* the stored values, exactly (I8: decoded and scaled) */
    hfq_qext qext[SYNTH_MAX_TENSORS];
} synth_model;

static inline const char *synth_qext_name(hfq_qext q) {
    return q == HFQ_QEXT_INT8 ? "int8" : q == HFQ_QEXT_FP8_E4M3 ? "fp8_e4m3" : q == HFQ_QEXT_FP8_E5M2 ? "fp8_e5m2" : NULL;
}

static inline synth_spec synth_default_spec(void) {
    /* n_embd, n_ff and head_dim are not multiples of 8: SIMD tails are exercised. */
    return (synth_spec){.arch = HFQ_ARCH_LLAMA, .n_vocab = 50, .n_embd = 36, .n_ff = 52, .n_layer = 2,
                        .n_head = 4, .n_head_kv = 2, .head_dim = 10, .n_rot = 10, .n_ctx_train = 64,
                        .rms_eps = 1e-5f, .rope_base = 10000.0f, .rope_scale = 1.0f, .wtype = GT_F32,
                        .seed = 1};
}

static inline uint64_t synth_next(uint64_t *s) {  /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float synth_uniform(uint64_t *s) {
    return (float)((double)(synth_next(s) >> 11) * 0x1.0p-52 - 1.0);
}

/* Adds a tensor of ne0 x ne1 values center + amp * uniform, stored as type
 * (any format quant/qtype.h can quantize). */
static inline void synth_add(synth_model *m, const char *name, uint32_t type, int64_t ne0, int64_t ne1, float center,
                             float amp, uint64_t *rng) {
    int i = m->n++;
    if (i >= SYNTH_MAX_TENSORS) abort();
    snprintf(m->names[i], sizeof m->names[i], "%.63s", name);
    const hfq_qtype_traits *tr = hfq_qtype_get((hfq_qtype)hfq_qtype_from_ggml(type));
    int64_t row_bytes = ggml_row_size(type, ne0);
    size_t n = (size_t)(ne0 * ne1), nbytes = (size_t)(row_bytes * ne1);
    float *f = malloc(n * sizeof *f);
    m->data[i] = malloc(nbytes);
    m->values[i] = malloc(n * sizeof(double));
    if (!tr || row_bytes < 0 || !f || !m->data[i] || !m->values[i]) abort();
    for (size_t j = 0; j < n; j++) f[j] = center + amp * synth_uniform(rng);
    if (tr->quantize(f, m->data[i], ne1, ne0, NULL) != nbytes) abort();
    tr->dequantize(m->data[i], f, (int64_t)n);
    for (size_t j = 0; j < n; j++) m->values[i][j] = f[j];
    free(f);
    m->info[i] = (gguf_tensor_info){.name = m->names[i], .type = type, .n_dims = ne1 > 1 ? 2 : 1,
                                    .ne = {ne0, ne1, 1, 1}, .nbytes = nbytes, .data = m->data[i]};
}

/* Adds I8 weight "<base>.weight" of ne0 x ne1 values center + amp * uniform,
 * quantized as q says (INT8 per row or per group of `group` values, FP8 per
 * row), its "<base>.scale", and with input_scale a "<base>.input_scale". */
static inline void synth_add_qext(synth_model *m, const char *name, hfq_qext q, int64_t group, bool input_scale,
                                  int64_t ne0, int64_t ne1, float center, float amp, uint64_t *rng) {
    const int64_t groups = q == HFQ_QEXT_INT8 && group ? ne0 / group : 1;
    const size_t n = (size_t)(ne0 * ne1);
    char side[96];
    synth_add(m, name, GT_F32, ne0, ne1, center, amp, rng);   /* the values to quantize */
    const int w = m->n - 1;
    snprintf(side, sizeof side, "%.*s.scale", (int)(strlen(name) - strlen(".weight")), name);
    synth_add(m, side, GT_F32, groups, ne1, 0.0f, 0.0f, rng);
    const int sc = m->n - 1;
    float *f = malloc(n * sizeof *f), *scales = (float *)m->data[sc];
    int8_t *codes = malloc(n);
    if (!f || !codes) abort();
    for (size_t j = 0; j < n; j++) f[j] = (float)m->values[w][j];
    const hfq_fp8_format fmt = q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
    if (q == HFQ_QEXT_INT8) hfq_quantize_int8(f, codes, ne1, ne0, NULL, scales, group);
    else hfq_quantize_fp8(fmt, f, codes, ne1, ne0, NULL, scales);
    for (int64_t r = 0; r < ne1; r++) {
        if (q == HFQ_QEXT_INT8) hfq_dequantize_row_int8(codes + r * ne0, f + r * ne0, ne0, scales + r * groups, group);
        else hfq_dequantize_row_fp8(fmt, codes + r * ne0, f + r * ne0, ne0, scales[r]);
    }
    for (size_t j = 0; j < n; j++) m->values[w][j] = f[j];
    for (int64_t j = 0; j < groups * ne1; j++) m->values[sc][j] = scales[j];
    free(f);
    free(m->data[w]);
    m->data[w] = codes;
    m->qext[w] = q;
    m->info[w].type = GT_I8;
    m->info[w].nbytes = n;
    m->info[w].data = codes;
    if (input_scale) {
        snprintf(side, sizeof side, "%.*s.input_scale", (int)(strlen(name) - strlen(".weight")), name);
        synth_add(m, side, GT_F32, 1, 1, 0.03f, 0.01f, rng);
    }
}

/* A weight matrix as the spec says: wtype, or I8 with wqext. */
static inline void synth_matrix(synth_model *m, const char *name, int64_t ne0, int64_t ne1, float center, float amp,
                                uint64_t *rng) {
    const synth_spec *s = &m->spec;
    if (s->wqext) {
        synth_add_qext(m, name, s->wqext, s->qext_group, s->input_scales, ne0, ne1, center, amp, rng);
        return;
    }
    synth_add(m, name, s->wtype, ne0, ne1, center, amp, rng);
    if (s->input_scales && s->wtype == GT_NVFP4) {   /* activation global scales ~ amax 5 / (6 * 448) */
        char side[96];
        snprintf(side, sizeof side, "%.*s.input_scale", (int)(strlen(name) - strlen(".weight")), name);
        synth_add(m, side, GT_F32, 1, 1, 0.002f, 0.0005f, rng);
    }
}

static inline const char *synth_qext(const void *source, const char *name) {
    const synth_model *m = source;
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->names[i], name) == 0) return synth_qext_name(m->qext[i]);
    return NULL;
}

static inline const gguf_tensor_info *synth_lookup(const void *source, const char *name) {
    const synth_model *m = source;
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->names[i], name) == 0) return &m->info[i];
    return NULL;
}

/* The tensor added last as n_expert stacked experts: ne {ne0, ne1 / n_expert, n_expert}. */
static inline void synth_stack_experts(synth_model *m, int64_t n_expert) {
    gguf_tensor_info *t = &m->info[m->n - 1];
    t->n_dims = 3;
    t->ne[1] /= n_expert;
    t->ne[2] = n_expert;
}

/* The exact values of a tensor (NULL when absent). */
static inline const double *synth_values(const synth_model *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->names[i], name) == 0) return m->values[i];
    return NULL;
}

static inline const double *synth_layer_values(const synth_model *m, int64_t il, const char *suffix) {
    char name[96];
    snprintf(name, sizeof name, "blk.%lld.%s", (long long)il, suffix);
    return synth_values(m, name);
}

static inline void synth_build(synth_model *m, const synth_spec *s) {
    memset(m, 0, sizeof *m);
    m->spec = *s;
    uint64_t rng = s->seed;
    const int64_t E = s->n_embd, Q = s->n_head * s->head_dim, KV = s->n_head_kv * s->head_dim, F = s->n_ff;
    const float aE = 1.0f / sqrtf((float)E), aQ = 1.0f / sqrtf((float)Q), aF = 1.0f / sqrtf((float)F);
    synth_matrix(m, "token_embd.weight", E, s->n_vocab, 0.0f, 1.0f, &rng);
    synth_add(m, "output_norm.weight", GT_F32, E, 1, 1.0f, 0.2f, &rng);
    if (!s->tied) synth_matrix(m, "output.weight", E, s->n_vocab, 0.0f, 2.0f * aE, &rng);
    if (s->rope_factors) synth_add(m, "rope_freqs.weight", GT_F32, s->n_rot / 2, 1, 2.0f, 1.0f, &rng);
    for (int64_t il = 0; il < s->n_layer; il++) {
        char name[96];
#define SYNTH_LAYER(suffix, type, ne0, ne1, center, amp) \
        (snprintf(name, sizeof name, "blk.%lld." suffix, (long long)il), synth_add(m, name, type, ne0, ne1, center, amp, &rng))
#define SYNTH_MATRIX(suffix, ne0, ne1, center, amp) \
        (snprintf(name, sizeof name, "blk.%lld." suffix, (long long)il), synth_matrix(m, name, ne0, ne1, center, amp, &rng))
        SYNTH_LAYER("attn_norm.weight", GT_F32, E, 1, 1.0f, 0.2f);
        SYNTH_MATRIX("attn_q.weight", E, Q, 0.0f, 2.0f * aE);
        SYNTH_MATRIX("attn_k.weight", E, KV, 0.0f, 2.0f * aE);
        SYNTH_MATRIX("attn_v.weight", E, KV, 0.0f, 2.0f * aE);
        if (s->biases) {
            SYNTH_LAYER("attn_q.bias", GT_F32, Q, 1, 0.0f, 0.5f);
            SYNTH_LAYER("attn_k.bias", GT_F32, KV, 1, 0.0f, 0.5f);
            SYNTH_LAYER("attn_v.bias", GT_F32, KV, 1, 0.0f, 0.5f);
        }
        SYNTH_MATRIX("attn_output.weight", Q, E, 0.0f, aQ);
        SYNTH_LAYER("ffn_norm.weight", GT_F32, E, 1, 1.0f, 0.2f);
        if (s->n_expert) {
            const int64_t X = s->n_expert, FX = s->n_ff_exp;
            SYNTH_LAYER("ffn_gate_inp.weight", GT_F32, E, X, 0.0f, 4.0f * aE);
            SYNTH_LAYER("ffn_gate_exps.weight", s->wtype, E, FX * X, 0.0f, 2.0f * aE), synth_stack_experts(m, X);
            SYNTH_LAYER("ffn_up_exps.weight", s->wtype, E, FX * X, 0.0f, 2.0f * aE), synth_stack_experts(m, X);
            SYNTH_LAYER("ffn_down_exps.weight", s->wtype, FX, E * X, 0.0f, 1.0f / sqrtf((float)FX)),
                synth_stack_experts(m, X);
        } else {
            SYNTH_MATRIX("ffn_gate.weight", E, F, 0.0f, 2.0f * aE);
            SYNTH_MATRIX("ffn_up.weight", E, F, 0.0f, 2.0f * aE);
            SYNTH_MATRIX("ffn_down.weight", F, E, 0.0f, aF);
        }
        static const char *const matrices[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
        const size_t n_scaled = s->n_expert ? 4 : sizeof matrices / sizeof matrices[0];
        for (size_t j = 0; s->scales && j < n_scaled; j++) {
            snprintf(name, sizeof name, "blk.%lld.%s.scale", (long long)il, matrices[j]);
            synth_add(m, name, GT_F32, 1, 1, 1.0f, 0.75f, &rng);
        }
#undef SYNTH_LAYER
#undef SYNTH_MATRIX
    }
    m->hp = (hfq_hparams){.arch = s->arch, .n_embd = E, .n_ff = F, .n_layer = s->n_layer, .n_head = s->n_head,
                          .n_head_kv = s->n_head_kv, .head_dim = s->head_dim, .n_rot = s->n_rot,
                          .n_ctx_train = s->n_ctx_train, .rms_eps = s->rms_eps, .rope_freq_base = s->rope_base,
                          .rope_freq_scale = s->rope_scale,
                          .rope_mode = s->arch == HFQ_ARCH_QWEN2 ? HFQ_ROPE_NEOX : HFQ_ROPE_NORMAL,
                          .n_expert = s->n_expert, .n_expert_used = s->n_expert_used, .n_ff_exp = s->n_ff_exp,
                          .expert_weights_norm = s->n_expert > 0};
}

static inline void synth_free(synth_model *m) {
    for (int i = 0; i < m->n; i++) {
        free(m->data[i]);
        free(m->values[i]);
    }
    m->n = 0;
}

/* hfq.act_quant.<name>: "mxfp4" on the MXFP4 layer matrices when act_mxfp4,
 * "int8_ct" on the INT8 ones when act_int8_ct. */
static inline const char *synth_act(const void *source, const char *name) {
    const synth_model *m = source;
    const gguf_tensor_info *t = synth_lookup(source, name);
    if (!t || strncmp(name, "blk.", 4) != 0) return NULL;
    if (m->spec.act_mxfp4 && t->type == GT_MXFP4) return "mxfp4";
    const char *q = synth_qext(source, name);
    return m->spec.act_int8_ct && q && !strcmp(q, "int8") ? "int8_ct" : NULL;
}

static inline hfq_model *synth_bind(synth_model *m, hfq_error *err) {
    hfq_tensor_source src = {.source = m, .where = "synthetic", .find = synth_lookup, .qext = synth_qext,
                             .act = synth_act};
    return hfq_model_bind(&m->hp, &src, err);
}

/* ---- reference forward (double) ---- */

/* What the reference records for one token: the input of every linear layer
 * of every layer, and the logits. */
typedef struct ref_trace {
    double *attn_in;   /* [n_layer][E]  input of attn_q/k/v */
    double *wo_in;     /* [n_layer][Q]  attention output */
    double *ffn_in;    /* [n_layer][E]  input of ffn_gate/up */
    double *down_in;   /* [n_layer][F]  silu(gate) * up */
    double *logits;    /* [V] */
} ref_trace;

/* Rounds one head's row of hd values in place, as a KV cache format stores
 * it: which 'k' (a key row), 'v' (a value row) or 'q' (a query, as the key
 * format's dot converts it). */
typedef void (*ref_round_fn)(void *user, char which, double *x, int64_t hd);

typedef struct ref_state {
    const synth_model *m;
    int64_t n_past, n_ctx;
    double *k_cache, *v_cache;   /* [n_layer][n_ctx][KV] */
    ref_round_fn round;          /* NULL: exact K, V and q */
    void *round_user;
} ref_state;

static inline void ref_init(ref_state *r, const synth_model *m, int64_t n_ctx) {
    const synth_spec *s = &m->spec;
    size_t n = (size_t)(s->n_layer * n_ctx * s->n_head_kv * s->head_dim);
    *r = (ref_state){.m = m, .n_ctx = n_ctx, .k_cache = calloc(n, sizeof(double)), .v_cache = calloc(n, sizeof(double))};
    if (!r->k_cache || !r->v_cache) abort();
}

static inline void ref_free(ref_state *r) {
    free(r->k_cache);
    free(r->v_cache);
}

static inline void ref_rmsnorm(double *y, const double *x, const double *w, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double scale = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

/* The activations weight `name` multiplies: x rounded to float and through
 * the format the runner gives them under spec.act_quant (ops.h): the
 * quant/qtype.h vec_dot_type of wtype (F32 leaves them as they are); for I8
 * weights the same encoding with a per-token scale (amax / max code) or the
 * weight's static input_scale, or floats; for NVFP4 weights NVFP4 blocks
 * with a per-token (amax / (6 * 448)) or static global scale, or Q8_0;
 * for MXFP4 layer matrices with act_mxfp4 (AUTO, DYNAMIC) MXFP4 blocks of
 * hfq_quantize_block_mxfp4_act. */
static inline void ref_act(const synth_model *m, const char *name, double *xa, const double *x, int64_t n) {
    const synth_spec *s = &m->spec;
    const char *act = synth_act(m, name);
    if (act && !strcmp(act, "mxfp4") && (s->act_quant == HFQ_ACT_QUANT_AUTO || s->act_quant == HFQ_ACT_QUANT_DYNAMIC)) {
        float f[HFQ_QK_MXFP4];
        hfq_block_mxfp4 b;
        for (int64_t i = 0; i < n; i += HFQ_QK_MXFP4) {
            for (int j = 0; j < HFQ_QK_MXFP4; j++) f[j] = (float)x[i + j];
            hfq_quantize_block_mxfp4_act(f, &b);
            hfq_decode_block_mxfp4(&b, f);
            for (int j = 0; j < HFQ_QK_MXFP4; j++) xa[i + j] = f[j];
        }
        return;
    }
    char side[96];
    snprintf(side, sizeof side, "%.*s.input_scale", (int)(strlen(name) - strlen(".weight")), name);
    const double *in = synth_values(m, side);
    const hfq_act_quant aq = s->act_quant;
    const bool quantized = aq == HFQ_ACT_QUANT_DYNAMIC || aq == HFQ_ACT_QUANT_STATIC ||
                           (aq == HFQ_ACT_QUANT_AUTO && (s->wqext || in));
    const bool nvfp4 = !s->wqext && s->wtype == GT_NVFP4 && quantized;
    if (aq == HFQ_ACT_QUANT_DYNAMIC) in = NULL;
    const hfq_qtype_traits *at = hfq_qtype_get(hfq_qtype_get((hfq_qtype)hfq_qtype_from_ggml(s->wtype))->vec_dot_type);
    if ((s->wqext && !quantized) || (!s->wqext && !nvfp4 && at->type == HFQ_QT_F32)) {
        for (int64_t i = 0; i < n; i++) xa[i] = (float)x[i];
        return;
    }
    float *f = malloc((size_t)n * sizeof *f);
    void *q = malloc((size_t)n * 4);
    if (!f || !q) abort();
    for (int64_t i = 0; i < n; i++) f[i] = (float)x[i];
    float scale = in ? (float)in[0] : 0.0f;
    if (nvfp4) {
        if (!in) scale = hfq_nvfp4_global_scale(f, n);
        hfq_quantize_nvfp4(f, q, 1, n, NULL, scale);
        hfq_dequantize_row_nvfp4(q, f, n);
        for (int64_t i = 0; i < n; i++) f[i] *= scale > 0.0f ? scale : 1.0f;
    } else if (s->wqext) {
        const hfq_fp8_format fmt = s->wqext == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
        if (s->wqext == HFQ_QEXT_INT8) {
            if (in) hfq_quantize_int8_static(f, q, 1, n, scale);
            else if (synth_act(m, name)) scale = hfq_quantize_int8_ct(f, q, n);
            else hfq_quantize_int8(f, q, 1, n, NULL, &scale, 0);
            hfq_dequantize_row_int8(q, f, n, &scale, 0);
        } else {
            if (in) hfq_quantize_fp8_static(fmt, f, q, 1, n, scale);
            else hfq_quantize_fp8(fmt, f, q, 1, n, NULL, &scale);
            hfq_dequantize_row_fp8(fmt, q, f, n, scale);
        }
    } else {
        at->quantize_row(f, q, n);
        at->dequantize(q, f, n);
    }
    for (int64_t i = 0; i < n; i++) xa[i] = f[i];
    free(f);
    free(q);
}

/* y = W x (+ bias) for layer il's weight "blk.il.<base>.weight" (il < 0:
 * "<base>.weight"), times its per-tensor scale when it has one (I8 weights'
 * values already hold their scales). */
static inline void ref_linear(double *y, const synth_model *m, int64_t il, const char *base, const double *x,
                              int64_t n_in, int64_t n_out) {
    char name[96], weight[96];
    const char *prefix = il < 0 ? "" : "blk.";
    char layer[24] = "";
    if (il >= 0) snprintf(layer, sizeof layer, "%lld.", (long long)il);
#define REF_NAME(suffix) (snprintf(name, sizeof name, "%s%s%s.%s", prefix, layer, base, suffix), name)
    const double *W = synth_values(m, REF_NAME("weight"));
    snprintf(weight, sizeof weight, "%s", name);
    const double *b = synth_values(m, REF_NAME("bias"));
    const double *scale = m->spec.wqext ? NULL : synth_values(m, REF_NAME("scale"));
#undef REF_NAME
    double *xa = malloc((size_t)n_in * sizeof *xa);
    if (!W || !xa) abort();
    ref_act(m, weight, xa, x, n_in);
    for (int64_t o = 0; o < n_out; o++) {
        double acc = 0.0;
        for (int64_t i = 0; i < n_in; i++) acc += W[o * n_in + i] * xa[i];
        y[o] = acc * (scale ? scale[0] : 1.0) + (b ? b[o] : 0.0);
    }
    free(xa);
}

/* Rotates each head of x by the formula: angle of pair i at pos is
 * pos * freq_scale * base^(-2i/n_rot) / factor_i; NORMAL pairs are
 * (2i, 2i+1), NEOX pairs (i, i + n_rot/2); values past n_rot stay. */
static inline void ref_rope(double *x, int64_t n_heads, int64_t pos, const synth_model *m) {
    const synth_spec *s = &m->spec;
    const double *factors = synth_values(m, "rope_freqs.weight");
    for (int64_t h = 0; h < n_heads; h++) {
        double *v = x + h * s->head_dim;
        for (int64_t i = 0; i < s->n_rot / 2; i++) {
            double theta = (double)pos * s->rope_scale * pow(s->rope_base, -2.0 * (double)i / (double)s->n_rot);
            if (factors) theta /= factors[i];
            int64_t a = s->arch == HFQ_ARCH_QWEN2 ? i : 2 * i;
            int64_t b = s->arch == HFQ_ARCH_QWEN2 ? i + s->n_rot / 2 : 2 * i + 1;
            double x0 = v[a], x1 = v[b];
            v[a] = x0 * cos(theta) - x1 * sin(theta);
            v[b] = x0 * sin(theta) + x1 * cos(theta);
        }
    }
}

/* Runs one token at position r->n_past; fills the trace (any field NULL is skipped). */
static inline void ref_token(ref_state *r, int32_t token, const ref_trace *tr) {
    const synth_model *m = r->m;
    const synth_spec *s = &m->spec;
    const int64_t E = s->n_embd, Q = s->n_head * s->head_dim, KV = s->n_head_kv * s->head_dim, F = s->n_ff;
    const int64_t hd = s->head_dim, pos = r->n_past;
    double *x = calloc((size_t)E, sizeof *x), *xn = calloc((size_t)E, sizeof *xn), *q = calloc((size_t)Q, sizeof *q);
    double *att = calloc((size_t)Q, sizeof *att), *g = calloc((size_t)F, sizeof *g), *u = calloc((size_t)F, sizeof *u);
    double *tmp = calloc((size_t)E, sizeof *tmp), *sc = calloc((size_t)(pos + 1), sizeof *sc);
    if (!x || !xn || !q || !att || !g || !u || !tmp || !sc) abort();
    memcpy(x, synth_values(m, "token_embd.weight") + token * E, (size_t)E * sizeof *x);
    for (int64_t il = 0; il < s->n_layer; il++) {
        double *kc = r->k_cache + (il * r->n_ctx) * KV, *vc = r->v_cache + (il * r->n_ctx) * KV;
        ref_rmsnorm(xn, x, synth_layer_values(m, il, "attn_norm.weight"), E, s->rms_eps);
        if (tr->attn_in) memcpy(tr->attn_in + il * E, xn, (size_t)E * sizeof *xn);
        ref_linear(q, m, il, "attn_q", xn, E, Q);
        ref_linear(kc + pos * KV, m, il, "attn_k", xn, E, KV);
        ref_linear(vc + pos * KV, m, il, "attn_v", xn, E, KV);
        ref_rope(q, s->n_head, pos, m);
        ref_rope(kc + pos * KV, s->n_head_kv, pos, m);
        for (int64_t h = 0; r->round && h < s->n_head_kv; h++) {
            r->round(r->round_user, 'k', kc + pos * KV + h * hd, hd);
            r->round(r->round_user, 'v', vc + pos * KV + h * hd, hd);
        }
        for (int64_t h = 0; r->round && h < s->n_head; h++) r->round(r->round_user, 'q', q + h * hd, hd);
        for (int64_t h = 0; h < s->n_head; h++) {
            int64_t hk = h / (s->n_head / s->n_head_kv);
            double mx = -INFINITY, sum = 0;
            for (int64_t p = 0; p <= pos; p++) {   /* causal: positions up to this token's */
                double d = 0;
                for (int64_t j = 0; j < hd; j++) d += q[h * hd + j] * kc[p * KV + hk * hd + j];
                sc[p] = d / sqrt((double)hd);
                if (sc[p] > mx) mx = sc[p];
            }
            for (int64_t p = 0; p <= pos; p++) sum += (sc[p] = exp(sc[p] - mx));
            for (int64_t j = 0; j < hd; j++) {
                double acc = 0;
                for (int64_t p = 0; p <= pos; p++) acc += sc[p] / sum * vc[p * KV + hk * hd + j];
                att[h * hd + j] = acc;
            }
        }
        if (tr->wo_in) memcpy(tr->wo_in + il * Q, att, (size_t)Q * sizeof *att);
        ref_linear(tmp, m, il, "attn_output", att, Q, E);
        for (int64_t i = 0; i < E; i++) x[i] += tmp[i];
        ref_rmsnorm(xn, x, synth_layer_values(m, il, "ffn_norm.weight"), E, s->rms_eps);
        if (tr->ffn_in) memcpy(tr->ffn_in + il * E, xn, (size_t)E * sizeof *xn);
        ref_linear(g, m, il, "ffn_gate", xn, E, F);
        ref_linear(u, m, il, "ffn_up", xn, E, F);
        for (int64_t i = 0; i < F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        if (tr->down_in) memcpy(tr->down_in + il * F, g, (size_t)F * sizeof *g);
        ref_linear(tmp, m, il, "ffn_down", g, F, E);
        for (int64_t i = 0; i < E; i++) x[i] += tmp[i];
    }
    if (tr->logits) {
        ref_rmsnorm(xn, x, synth_values(m, "output_norm.weight"), E, s->rms_eps);
        ref_linear(tr->logits, m, -1, s->tied ? "token_embd" : "output", xn, E, s->n_vocab);
    }
    r->n_past++;
    free(x); free(xn); free(q); free(att); free(g); free(u); free(tmp); free(sc);
}

#endif
