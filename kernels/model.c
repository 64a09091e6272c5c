#include "kernels/model.h"
#include "kernels/model_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/arch.h"
#include "quant/hadamard.h"
#include "quant/plan.h"

/* Far above any real model, low enough that products of two stay in int64. */
#define MAX_DIM ((int64_t)1 << 24)

struct hfq_model {
    hfq_hparams hp;
    char *path;
    gguf_file *gguf;          /* owned when loaded from a file */
    void (*close_gguf)(gguf_file *f);
    hfq_tensor tok_embd;
    hfq_tensor output_norm;
    hfq_tensor output;
    hfq_tensor rope_factors;  /* data NULL when absent */
    hfq_tensor rope_long, rope_short;   /* longrope's; data NULL when absent */
    hfq_layer *layers;        /* [n_layer] */
    float **owned;            /* scales expanded at load (FP8 block scales), [n_owned] */
    int64_t n_owned;
};

typedef struct binder {
    const hfq_tensor_source *src;
    const char *where;
    hfq_error *err;
    hfq_model *m;             /* owns what binding allocates */
} binder;

static int check_hparams(const hfq_hparams *hp, const char *where, hfq_error *err) {
    const struct { const char *name; int64_t v; } dims[] = {
        {"embedding_length", hp->n_embd}, {"feed_forward_length", hp->n_ff},
        {"block_count", hp->n_layer}, {"attention.head_count", hp->n_head},
        {"attention.head_count_kv", hp->n_head_kv}, {"attention.key_length", hp->head_dim},
        {"rope.dimension_count", hp->n_rot}, {"context_length", hp->n_ctx_train},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v <= 0 || dims[i].v > MAX_DIM)
            return hfq_fail(err, where, "%s = %lld is out of range [1, %lld]", dims[i].name,
                            (long long)dims[i].v, (long long)MAX_DIM);
    if (hp->n_head % hp->n_head_kv != 0)
        return hfq_fail(err, where, "attention.head_count %lld is not a multiple of head_count_kv %lld",
                        (long long)hp->n_head, (long long)hp->n_head_kv);
    if (hp->n_head * hp->head_dim > MAX_DIM)
        return hfq_fail(err, where, "head_count * key_length = %lld is too large",
                        (long long)(hp->n_head * hp->head_dim));
    if (hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return hfq_fail(err, where, "rope.dimension_count %lld must be even and at most the head size %lld",
                        (long long)hp->n_rot, (long long)hp->head_dim);
    if (!(hp->rms_eps > 0.0f) || !isfinite(hp->rms_eps))
        return hfq_fail(err, where, "attention.layer_norm_rms_epsilon %g must be positive", hp->rms_eps);
    if (!(hp->rope_freq_base > 0.0f) || !isfinite(hp->rope_freq_base))
        return hfq_fail(err, where, "rope.freq_base %g must be positive", hp->rope_freq_base);
    if (!(hp->rope_freq_scale > 0.0f) || !isfinite(hp->rope_freq_scale))
        return hfq_fail(err, where, "rope scaling factor %g must be positive", 1.0f / hp->rope_freq_scale);
    if (hp->yarn_orig_ctx < 0 || hp->yarn_orig_ctx > ((int64_t)1 << 31) ||
        (hp->yarn_orig_ctx > 0 && (!(hp->yarn_beta_fast > hp->yarn_beta_slow) || !(hp->yarn_beta_slow > 0.0f) ||
                                   !isfinite(hp->yarn_beta_fast) || !(hp->yarn_mscale > 0.0f) ||
                                   !isfinite(hp->yarn_mscale))))
        return hfq_fail(err, where, "YaRN parameters (original context %lld, beta %g / %g, magnitude %g) are invalid",
                        (long long)hp->yarn_orig_ctx, hp->yarn_beta_fast, hp->yarn_beta_slow, hp->yarn_mscale);
    if (hp->n_swa < 0 || hp->n_swa > ((int64_t)1 << 31) || hp->swa_pattern < 0 || hp->swa_pattern > MAX_DIM)
        return hfq_fail(err, where, "sliding window %lld / pattern %lld is out of range", (long long)hp->n_swa,
                        (long long)hp->swa_pattern);
    if (hp->n_swa > 0 && (!(hp->rope_freq_base_swa > 0.0f) || !isfinite(hp->rope_freq_base_swa) ||
                          !(hp->rope_freq_scale_swa > 0.0f) || !isfinite(hp->rope_freq_scale_swa)))
        return hfq_fail(err, where, "rope.freq_base_swa %g (scale %g) must be positive", hp->rope_freq_base_swa,
                        hp->rope_freq_scale_swa);
    const float caps[] = {hp->attn_softcap, hp->final_softcap, hp->attn_scale};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        if (!(caps[i] >= 0.0f) || !isfinite(caps[i]))
            return hfq_fail(err, where, "%s %g must be a non-negative number",
                            i == 0 ? "attn_logit_softcapping" : i == 1 ? "final_logit_softcapping" : "attention scale",
                            caps[i]);
    if (hp->rope_attn_factor < 0.0f || !isfinite(hp->rope_attn_factor) || hp->rope_orig_ctx < 0 ||
        hp->rope_orig_ctx > ((int64_t)1 << 31))
        return hfq_fail(err, where, "rope attn_factor %g or original context %lld is invalid", hp->rope_attn_factor,
                        (long long)hp->rope_orig_ctx);
    if (!hfq_arch_get(hp->arch)) return hfq_fail(err, where, "unknown architecture %d", (int)hp->arch);
    const hfq_arch_desc *desc = hfq_arch_get(hp->arch);
    if (hp->n_expert > 0 && !desc->experts && !desc->moe_only)
        return hfq_fail(err, where, "expert_count %lld: the runner computes no experts for %s", (long long)hp->n_expert,
                        desc->name);
    if (hp->n_expert < 0 || hp->n_expert > (1 << 16) || (desc->moe_only && hp->n_expert == 0) ||
        (hp->n_expert > 0 && (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert || hp->n_ff_exp <= 0 ||
                              hp->n_ff_exp * hp->n_expert > MAX_DIM || hp->n_embd * hp->n_expert > MAX_DIM)))
        return hfq_fail(err, where, "expert_count %lld, expert_used_count %lld, expert_feed_forward_length %lld are "
                        "out of range", (long long)hp->n_expert, (long long)hp->n_expert_used, (long long)hp->n_ff_exp);
    if (hp->rope_mode != HFQ_ROPE_NORMAL && hp->rope_mode != HFQ_ROPE_NEOX)
        return hfq_fail(err, where, "unknown rope mode %d", (int)hp->rope_mode);
    return 0;
}

/* Looks up `name` and checks it is a [ne0] x ne1 (x ne2) tensor (ne1 = 0: a
 * vector of ne0 elements), bound as a matrix of ne1 * ne2 rows. Matrices may
 * be of any known type, vectors must be F32. Absent tensors fail unless
 * optional (then out->data stays NULL). */
static int bind_tensor3(const binder *b, hfq_tensor *out, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                        bool optional) {
    memset(out, 0, sizeof *out);
    const gguf_tensor_info *ti = b->src->find(b->src->source, name);
    if (!ti) {
        if (optional) return 0;
        return hfq_fail(b->err, b->where, "tensor '%s' is missing", name);
    }
    bool vector = ne1 == 0;
    int64_t want1 = vector ? 1 : ne1;
    if (ti->ne[0] != ne0 || ti->ne[1] != want1 || ti->ne[2] != ne2 || ti->ne[3] != 1) {
        if (vector)
            return hfq_fail(b->err, b->where, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld]",
                            ti->name, (long long)ti->ne[0], (long long)ti->ne[1], (long long)ti->ne[2],
                            (long long)ti->ne[3], (long long)ne0);
        if (ne2 != 1)
            return hfq_fail(b->err, b->where, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]",
                            ti->name, (long long)ti->ne[0], (long long)ti->ne[1], (long long)ti->ne[2],
                            (long long)ti->ne[3], (long long)ne0, (long long)ne1, (long long)ne2);
        return hfq_fail(b->err, b->where, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                        ti->name, (long long)ti->ne[0], (long long)ti->ne[1], (long long)ti->ne[2],
                        (long long)ti->ne[3], (long long)ne0, (long long)ne1);
    }
    want1 *= ne2;
    const ggml_type_info *type = ggml_type_get(ti->type);
    if (!type) return hfq_fail(b->err, b->where, "tensor '%s' has unknown type id %u", ti->name, ti->type);
    if (vector && ti->type != GT_F32)
        return hfq_fail(b->err, b->where, "tensor '%s' has type %s, expected f32", ti->name, type->name);
    int64_t row_bytes = ggml_row_size(ti->type, ne0);
    if (row_bytes < 0)
        return hfq_fail(b->err, b->where, "tensor '%s': row length %lld is not a multiple of the %s block size %lld",
                        ti->name, (long long)ne0, type->name, (long long)type->block_size);
    if (!ti->data || ti->nbytes != (uint64_t)row_bytes * (uint64_t)want1)
        return hfq_fail(b->err, b->where, "tensor '%s' holds %llu bytes, expected %llu", ti->name,
                        (unsigned long long)ti->nbytes, (unsigned long long)row_bytes * (unsigned long long)want1);
    *out = (hfq_tensor){.name = ti->name, .type = ti->type, .ne0 = ne0, .ne1 = want1,
                        .row_bytes = (size_t)row_bytes, .data = ti->data};
    return 0;
}

static int bind_tensor(const binder *b, hfq_tensor *out, const char *name, int64_t ne0, int64_t ne1,
                       bool optional) {
    return bind_tensor3(b, out, name, ne0, ne1, 1, optional);
}

/* "<base>.<suffix>" of weight "<base>.weight". */
static const char *side_name(char *buf, size_t n, const char *weight, const char *suffix) {
    size_t base = strlen(weight) - strlen(".weight");
    snprintf(buf, n, "%.*s.%s", (int)base, weight, suffix);
    return buf;
}

/* Every value of an F32 tensor is finite and at least min (min_open: above). */
static int check_values(const binder *b, const gguf_tensor_info *ti, float min, bool min_open) {
    const int64_t n = ti->ne[0] * ti->ne[1];
    for (int64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, (const char *)ti->data + i * (int64_t)sizeof v, sizeof v);
        if (!isfinite(v) || v < min || (min_open && v == min))
            return hfq_fail(b->err, b->where, "tensor '%s' holds %g, not a valid scale", ti->name, v);
    }
    return 0;
}

/* "<base>.input_scale" ([1], > 0), the static activation scale of the
 * weights whose activations the runner quantizes to their own format (I8
 * codes: W8A8; NVFP4: W4A4). llama.cpp applies none (it pairs NVFP4 with
 * Q8_0 activations), so other types ignore it. */
static int bind_input_scale(const binder *b, hfq_tensor *w) {
    if (!w->qext && w->type != GT_NVFP4) return 0;
    char name[96];
    hfq_tensor in;
    if (bind_tensor(b, &in, side_name(name, sizeof name, w->name, "input_scale"), 1, 0, true)) return -1;
    if (!in.data) return 0;
    if (check_values(b, b->src->find(b->src->source, name), 0.0f, true)) return -1;
    w->input_scale = in.data;
    return 0;
}

/* FP8 block scales [ceil(ne0/128)][ceil(ne1/128)] (docs/format-quant-ext.md)
 * as the per-group scales [ne1][ceil(ne0/128)] the I8 dots take: each row
 * gets its block row's, one float per 128 codes (3 % of the codes' bytes),
 * owned by the model. The dots' groups are equal, so ne0 must be 128's
 * multiple or at most 128. */
static int expand_block_scales(const binder *b, hfq_tensor *w, const gguf_tensor_info *ti) {
    const int64_t nb0 = ti->ne[0];
    if (nb0 > 1 && w->ne0 % HFQ_SCALE_BLOCK != 0)
        return hfq_fail(b->err, b->where, "tensor '%s': FP8 block scales need rows of a multiple of %d values, not %lld",
                        ti->name, HFQ_SCALE_BLOCK, (long long)w->ne0);
    float **owned = realloc(b->m->owned, (size_t)(b->m->n_owned + 1) * sizeof *owned);
    if (owned) b->m->owned = owned;
    float *rows = owned ? malloc((size_t)(w->ne1 * nb0) * sizeof *rows) : NULL;
    if (!rows) return hfq_fail(b->err, b->where, "tensor '%s': out of memory", ti->name);
    b->m->owned[b->m->n_owned++] = rows;
    for (int64_t r = 0; r < w->ne1; r++)
        memcpy(rows + r * nb0, (const float *)ti->data + r / HFQ_SCALE_BLOCK * nb0, (size_t)nb0 * sizeof *rows);
    w->scale = rows;
    w->scale_groups = nb0;
    return 0;
}

/* "<base>.scale": per tensor ([1]) for any matrix, the factor of its product,
 * or per expert ([n_expert]) for a stacked matrix of ne2 > 1 experts of
 * ggml's types; I8 weights must have one, per tensor or [groups][ne1] (per
 * channel or per group along the rows; stacked experts [groups][ne1 of an
 * expert][ne2], as quantize writes them); FP8 also per 128x128 block
 * ([ceil(ne0/128)] [ceil(ne1/128)], told from per group by its fewer rows). */
static int bind_scales(const binder *b, hfq_tensor *w, int64_t ne2) {
    char name[96];
    const gguf_tensor_info *ti = b->src->find(b->src->source, side_name(name, sizeof name, w->name, "scale"));
    if (!ti) return w->qext ? hfq_fail(b->err, b->where, "tensor '%s' has no scales '%s'", w->name, name) : 0;
    const int64_t bs = HFQ_SCALE_BLOCK;
    const bool fp8 = w->qext == HFQ_QEXT_FP8_E4M3 || w->qext == HFQ_QEXT_FP8_E5M2;
    const bool per_tensor = ti->n_dims == 1 && ti->ne[0] == 1;
    const bool per_expert = !w->qext && ne2 > 1 && ti->n_dims == 1 && ti->ne[0] == ne2;
    /* stacked experts' I8 scales: [groups][rows of an expert][ne2], w's rows in expert order */
    const bool stacked = w->qext && ne2 > 1 && ti->n_dims == 3 && ti->ne[2] == ne2;
    const int64_t scale_rows = ti->ne[1] * (stacked ? ne2 : 1);
    const bool per_rows = scale_rows == w->ne1 && ti->ne[0] >= 1 && w->ne0 % ti->ne[0] == 0;
    const bool per_block = fp8 && ti->n_dims == 2 && ti->ne[1] < w->ne1 && ti->ne[0] == (w->ne0 + bs - 1) / bs &&
                           ti->ne[1] == (w->ne1 + bs - 1) / bs;
    if (ti->type != GT_F32 || (ti->ne[2] != 1 && !stacked) || ti->ne[3] != 1 ||
        !(per_tensor || per_expert || (w->qext && per_rows) || per_block) ||
        ti->nbytes != (uint64_t)(ti->ne[0] * scale_rows) * sizeof(float) || !ti->data)
        return hfq_fail(b->err, b->where, "tensor '%s' (%s [%lld, %lld]) is not the F32 scale%s of '%s'", ti->name,
                        ggml_type_get(ti->type) ? ggml_type_get(ti->type)->name : "?", (long long)ti->ne[0],
                        (long long)ti->ne[1], w->qext ? "s" : " [1]", w->name);
    if (check_values(b, ti, w->qext ? 0.0f : -INFINITY, false)) return -1;
    if (per_block) return expand_block_scales(b, w, ti);
    w->scale = ti->data;
    w->scale_groups = per_tensor || per_expert ? 0 : ti->ne[0];
    w->scale_experts = per_expert ? ne2 : 0;
    return 0;
}

/* The I8 encoding of w, from the source's hfq.qext keys. */
static int bind_qext(const binder *b, hfq_tensor *w) {
    static const struct { const char *name; hfq_qext qext; } encodings[] = {
        {"int8", HFQ_QEXT_INT8}, {"fp8_e4m3", HFQ_QEXT_FP8_E4M3}, {"fp8_e5m2", HFQ_QEXT_FP8_E5M2}};
    const char *enc = b->src->qext ? b->src->qext(b->src->source, w->name) : NULL;
    if (!enc) {
        if (w->type == GT_I8)
            return hfq_fail(b->err, b->where, "tensor '%s' has type i8 but no hfq.qext encoding", w->name);
        return 0;
    }
    if (w->type != GT_I8)
        return hfq_fail(b->err, b->where, "tensor '%s' has an hfq.qext encoding but type %s, not i8", w->name,
                        ggml_type_get(w->type)->name);
    for (size_t i = 0; i < sizeof encodings / sizeof encodings[0]; i++)
        if (strcmp(enc, encodings[i].name) == 0) {
            w->qext = encodings[i].qext;
            return 0;
        }
    return hfq_fail(b->err, b->where, "tensor '%s': unknown hfq.qext encoding '%s'", w->name, enc);
}

/* hfq.act_quant.<name>: "none" on an I8, NVFP4 or MXFP4 weight without an
 * input scale (an input scale says its activations are quantized); "mxfp4"
 * on an MXFP4 weight; "nvfp4_search" on an NVFP4 weight; "fp8_e4m3_g<G>" on
 * a float weight; "int8_ct" on an INT8 weight. */
static int bind_act(const binder *b, hfq_tensor *w) {
    const char *v = b->src->act ? b->src->act(b->src->source, w->name) : NULL;
    if (!v) return 0;
    long long g = 0;
    int end = 0;
    if (sscanf(v, "fp8_e4m3_g%lld%n", &g, &end) == 1 && v[end] == 0) {
        /* float weights, or FP8 codes (their scales applied after each group's dot) */
        const bool float_w = !w->qext && (w->type == GT_F32 || w->type == GT_F16 || w->type == GT_BF16);
        const bool fp8_w = w->qext == HFQ_QEXT_FP8_E4M3 || w->qext == HFQ_QEXT_FP8_E5M2;
        if (!(float_w || (fp8_w && !w->input_scale)) || g < 1 || w->ne0 % g)
            return hfq_fail(b->err, b->where, "tensor '%s': hfq.act_quant '%s' needs an F32, F16, BF16 or FP8 weight "
                            "(without input_scale) whose rows are whole groups", w->name, v);
        w->act_fp8_group = g;
        return 0;
    }
    if (!strcmp(v, "int8_ct")) {
        if (w->qext != HFQ_QEXT_INT8 || w->input_scale)
            return hfq_fail(b->err, b->where, "tensor '%s': hfq.act_quant 'int8_ct' needs an INT8 I8 weight without "
                            "input_scale", w->name);
        w->act_int8_ct = true;
        return 0;
    }
    if (!strcmp(v, "mxfp4")) {
        if (w->type != GT_MXFP4 || w->qext)
            return hfq_fail(b->err, b->where, "tensor '%s': hfq.act_quant 'mxfp4' needs an MXFP4 weight", w->name);
        w->act_mxfp4 = true;
        return 0;
    }
    if (!strcmp(v, "nvfp4_search")) {
        if (w->type != GT_NVFP4 || w->qext)
            return hfq_fail(b->err, b->where, "tensor '%s': hfq.act_quant 'nvfp4_search' needs an NVFP4 weight", w->name);
        w->act_nvfp4_search = true;
        return 0;
    }
    if (strcmp(v, "none"))
        return hfq_fail(b->err, b->where, "tensor '%s': hfq.act_quant '%s' is not \"none\", \"mxfp4\", \"nvfp4_search\", "
                        "\"int8_ct\" or \"fp8_e4m3_g<G>\"", w->name, v);
    if ((!w->qext && w->type != GT_NVFP4 && w->type != GT_MXFP4) || w->input_scale)
        return hfq_fail(b->err, b->where,
                        "tensor '%s': hfq.act_quant 'none' needs an I8, NVFP4 or MXFP4 weight without input_scale",
                        w->name);
    w->act_none = true;
    return 0;
}

/* hfq.block_rotate.<name> = "hadamard:<N>:<seed>" on a 2-D weight other than
 * the token embedding (whose rows are also looked up), N fitting its rows. */
static int bind_rot(const binder *b, hfq_tensor *w, int64_t ne2) {
    const char *v = b->src->rot ? b->src->rot(b->src->source, w->name) : NULL;
    if (!v) return 0;
    long long n = 0;
    unsigned long long seed = 0;
    int end = 0;
    if (sscanf(v, "hadamard:%lld:%llu%n", &n, &seed, &end) != 2 || v[end] || !hfq_hadamard_fits(w->ne0, n))
        return hfq_fail(b->err, b->where, "tensor '%s': hfq.block_rotate '%s' is not \"hadamard:<N>:<seed>\" with N a "
                        "power of two from 2 to %d dividing the rows (%lld)", w->name, v, HFQ_HADAMARD_MAX_BLOCK,
                        (long long)w->ne0);
    if (ne2 != 1 || strcmp(w->name, "token_embd.weight") == 0)
        return hfq_fail(b->err, b->where, "tensor '%s': hfq.block_rotate is for 2-D linear weights (not experts or "
                        "the token embedding)", w->name);
    w->rot_block = n;
    w->rot_seed = seed;
    return 0;
}

/* A weight matrix [ne0] x ne1 (x ne2 experts) with its encoding and scales. */
static int bind_matrix3(const binder *b, hfq_tensor *w, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                        bool optional) {
    if (bind_tensor3(b, w, name, ne0, ne1, ne2, optional)) return -1;
    if (!w->data) return 0;
    return bind_qext(b, w) || bind_scales(b, w, ne2) || bind_input_scale(b, w) || bind_act(b, w) ||
                   bind_rot(b, w, ne2)
               ? -1
               : 0;
}

/* Rows [row0, row0 + n) of matrix t, as a matrix of its own (the same
 * bytes; per-row scales follow their rows). */
static hfq_tensor row_view(const hfq_tensor *t, int64_t row0, int64_t n) {
    hfq_tensor v = *t;
    v.data = (const char *)t->data + (size_t)row0 * t->row_bytes;
    v.ne1 = n;
    if (t->scale && t->scale_groups > 0) v.scale = t->scale + row0 * t->scale_groups;
    v.view_tail = row0 > 0;
    return v;
}

/* The fused matrices as the graph's separate ones: attn_qkv (when the file
 * has it, instead of all of attn_q/k/v) as q, k, v rows; a fused ffn_up as
 * the gate's half, then the up's (llama.cpp's swiglu takes the first half
 * as the gate). */
static int split_fused(const binder *b, const hfq_hparams *hp, const hfq_arch_desc *arch, int64_t il,
                       const hfq_tensor *qkv, hfq_layer *l) {
    const int64_t n_q = hp->n_head * hp->head_dim, n_kv = hp->n_head_kv * hp->head_dim;
    const hfq_tensor *sep[] = {&l->wq, &l->wk, &l->wv};
    const char *sep_name[] = {"attn_q", "attn_k", "attn_v"};
    for (size_t i = 0; i < 3; i++) {
        if (qkv->data && sep[i]->data)
            return hfq_fail(b->err, b->where, "blk.%lld has both attn_qkv.weight and %s.weight", (long long)il,
                            sep_name[i]);
        if (!qkv->data && !sep[i]->data)
            return hfq_fail(b->err, b->where, "tensor 'blk.%lld.%s.weight' is missing", (long long)il, sep_name[i]);
    }
    if (qkv->data) {
        l->wq = row_view(qkv, 0, n_q);
        l->wk = row_view(qkv, n_q, n_kv);
        l->wv = row_view(qkv, n_q + n_kv, n_kv);
    }
    if (arch->fused_gate_up) {
        const hfq_tensor up = l->w_up;
        l->w_gate = row_view(&up, 0, hp->n_ff);
        l->w_up = row_view(&up, hp->n_ff, hp->n_ff);
    }
    return 0;
}

static int bind_matrix(const binder *b, hfq_tensor *w, const char *name, int64_t ne0, int64_t ne1, bool optional) {
    return bind_matrix3(b, w, name, ne0, ne1, 1, optional);
}

/* Every layer tensor the runner knows, with its need unless the family
 * says otherwise (kernels/arch.h); rows without a field are tensors
 * llama.cpp may find in a file of these families that the forward pass does
 * not compute, always refused. */
static int bind_layer(const binder *b, const hfq_hparams *hp, int64_t il, hfq_layer *l) {
    const hfq_arch_desc *arch = hfq_arch_get(hp->arch);
    const int64_t n_q = hp->n_head * hp->head_dim, n_kv = hp->n_head_kv * hp->head_dim;
    const int64_t n_up = arch->fused_gate_up ? 2 * hp->n_ff : hp->n_ff;
    hfq_tensor qkv = {0};   /* stays empty where the family refuses it */
    /* experts replace the dense SwiGLU (where the family has dense layers,
     * in the layers with a router) */
    char router[96];
    snprintf(router, sizeof router, "blk.%lld.ffn_gate_inp.weight", (long long)il);
    const bool experts = hp->n_expert && (!arch->dense_layers || b->src->find(b->src->source, router));
    const hfq_need dense = experts ? HFQ_NEED_REFUSED : HFQ_NEED_REQUIRED;
    const hfq_need moe = experts ? HFQ_NEED_REQUIRED : HFQ_NEED_REFUSED;
    const int64_t n_exp = hp->n_expert ? hp->n_expert : 1;
    const struct { hfq_tensor *t; const char *suffix; int64_t ne0, ne1; hfq_need need; } spec[] = {
        {&l->attn_norm, "attn_norm.weight", hp->n_embd, 0, HFQ_NEED_REQUIRED},
        {&qkv, "attn_qkv.weight", hp->n_embd, n_q + 2 * n_kv, HFQ_NEED_REFUSED},
        {&l->wq, "attn_q.weight", hp->n_embd, n_q, HFQ_NEED_REQUIRED},
        {&l->wk, "attn_k.weight", hp->n_embd, n_kv, HFQ_NEED_REQUIRED},
        {&l->wv, "attn_v.weight", hp->n_embd, n_kv, HFQ_NEED_REQUIRED},
        {&l->bq, "attn_q.bias", n_q, 0, HFQ_NEED_OPTIONAL},
        {&l->bk, "attn_k.bias", n_kv, 0, HFQ_NEED_OPTIONAL},
        {&l->bv, "attn_v.bias", n_kv, 0, HFQ_NEED_OPTIONAL},
        {&l->q_norm, "attn_q_norm.weight", hp->head_dim, 0, HFQ_NEED_REFUSED},
        {&l->k_norm, "attn_k_norm.weight", hp->head_dim, 0, HFQ_NEED_REFUSED},
        {&l->wo, "attn_output.weight", n_q, hp->n_embd, HFQ_NEED_REQUIRED},
        {&l->attn_post_norm, "post_attention_norm.weight", hp->n_embd, 0, HFQ_NEED_REFUSED},
        {&l->ffn_norm, "ffn_norm.weight", hp->n_embd, 0, HFQ_NEED_REQUIRED},
        {&l->w_gate, "ffn_gate.weight", hp->n_embd, hp->n_ff, dense},
        {&l->w_up, "ffn_up.weight", hp->n_embd, n_up, dense},
        {&l->w_down, "ffn_down.weight", hp->n_ff, hp->n_embd, dense},
        {&l->ffn_post_norm, "post_ffw_norm.weight", hp->n_embd, 0, HFQ_NEED_REFUSED},
        {&l->ffn_gate_inp, "ffn_gate_inp.weight", hp->n_embd, n_exp, moe},
        {&l->gate_exps, "ffn_gate_exps.weight", hp->n_embd, hp->n_ff_exp, moe},
        {&l->up_exps, "ffn_up_exps.weight", hp->n_embd, hp->n_ff_exp, moe},
        {&l->down_exps, "ffn_down_exps.weight", hp->n_ff_exp, hp->n_embd, moe},
        {NULL, "attn_output.bias", 0, 0, HFQ_NEED_REFUSED},
        {NULL, "ffn_gate.bias", 0, 0, HFQ_NEED_REFUSED},
        {NULL, "ffn_up.bias", 0, 0, HFQ_NEED_REFUSED},
        {NULL, "ffn_down.bias", 0, 0, HFQ_NEED_REFUSED},
        {NULL, "ffn_gate_shexp.weight", 0, 0, HFQ_NEED_REFUSED},
        {NULL, "ffn_gate_inp_shexp.weight", 0, 0, HFQ_NEED_REFUSED},
        {NULL, "ffn_gate_inp.bias", 0, 0, HFQ_NEED_REFUSED},
        {NULL, "exp_probs_b.bias", 0, 0, HFQ_NEED_REFUSED},
    };
    char name[96];
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)il, spec[i].suffix);
        hfq_need need = spec[i].t ? hfq_arch_need(arch, spec[i].suffix, spec[i].need) : HFQ_NEED_REFUSED;
        if (need == HFQ_NEED_REFUSED) {
            if (b->src->find(b->src->source, name))
                return hfq_fail(b->err, b->where, "tensor '%s' is not supported by the runner", name);
            continue;
        }
        const bool optional = need == HFQ_NEED_OPTIONAL;
        const bool stacked = spec[i].t == &l->gate_exps || spec[i].t == &l->up_exps || spec[i].t == &l->down_exps;
        const int64_t ne2 = stacked ? n_exp : 1;
        if (spec[i].ne1 ? bind_matrix3(b, spec[i].t, name, spec[i].ne0, spec[i].ne1, ne2, optional)
                        : bind_tensor(b, spec[i].t, name, spec[i].ne0, 0, optional))
            return -1;
    }
    return split_fused(b, hp, arch, il, &qkv, l);
}

/* Each factor divides a rotation frequency: it must be a positive number. */
static int check_rope_factors(const hfq_tensor *t, const char *where, hfq_error *err) {
    for (int64_t i = 0; t->data && i < t->ne0; i++) {
        float f;
        memcpy(&f, (const char *)t->data + i * sizeof f, sizeof f);
        if (!(f > 0.0f) || !isfinite(f))
            return hfq_fail(err, where, "tensor '%s': factor %lld = %g is not a positive number", t->name,
                            (long long)i, f);
    }
    return 0;
}

hfq_model *hfq_model_bind(const hfq_hparams *hp, const hfq_tensor_source *src, hfq_error *err) {
    const char *where = src->where ? src->where : "model";
    hfq_hparams h = *hp;
    h.n_vocab = 1;  /* checked below, once token_embd is known */
    if (check_hparams(&h, where, err)) return NULL;
    hfq_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(where)) || !(m->layers = calloc((size_t)h.n_layer, sizeof *m->layers))) {
        hfq_model_free(m);
        hfq_fail(err, where, "out of memory");
        return NULL;
    }
    binder b = {src, m->path, err, m};
    const gguf_tensor_info *te = src->find(src->source, "token_embd.weight");
    if (!te) {
        hfq_fail(err, where, "tensor 'token_embd.weight' is missing");
        goto fail;
    }
    h.n_vocab = te->ne[1];
    if (h.n_vocab <= 0 || h.n_vocab > MAX_DIM) {
        hfq_fail(err, where, "tensor 'token_embd.weight': vocabulary size %lld is out of range",
                 (long long)h.n_vocab);
        goto fail;
    }
    m->hp = h;
    if (bind_matrix(&b, &m->tok_embd, "token_embd.weight", h.n_embd, h.n_vocab, false) ||
        bind_tensor(&b, &m->output_norm, "output_norm.weight", h.n_embd, 0, false) ||
        bind_matrix(&b, &m->output, "output.weight", h.n_embd, h.n_vocab, true) ||
        bind_tensor(&b, &m->rope_factors, "rope_freqs.weight", h.n_rot / 2, 0, true) ||
        bind_tensor(&b, &m->rope_long, "rope_factors_long.weight", h.n_rot / 2, 0, true) ||
        bind_tensor(&b, &m->rope_short, "rope_factors_short.weight", h.n_rot / 2, 0, true))
        goto fail;
    if (!m->output.data) m->output = m->tok_embd;
    if (check_rope_factors(&m->rope_factors, m->path, err) || check_rope_factors(&m->rope_long, m->path, err) ||
        check_rope_factors(&m->rope_short, m->path, err))
        goto fail;
    if (!m->rope_long.data != !m->rope_short.data) {
        hfq_fail(err, where, "tensor '%s' comes without its partner (longrope needs both rope_factors_long and "
                 "rope_factors_short)", m->rope_long.data ? "rope_factors_long.weight" : "rope_factors_short.weight");
        goto fail;
    }
    for (int64_t il = 0; il < h.n_layer; il++)
        if (bind_layer(&b, &h, il, &m->layers[il])) goto fail;
    return m;
fail:
    hfq_model_free(m);
    return NULL;
}

void hfq_model_free(hfq_model *m) {
    if (!m) return;
    if (m->gguf) m->close_gguf(m->gguf);
    for (int64_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->path);
    free(m);
}

void hfq_model_adopt_file(hfq_model *m, gguf_file *f, void (*close_gguf)(gguf_file *f)) {
    m->gguf = f;
    m->close_gguf = close_gguf;
}

bool hfq_layer_slides(const hfq_hparams *hp, int64_t il) {
    const int64_t n = hp->swa_pattern;
    return hp->n_swa > 0 && (n == 0 || il % n < n - 1);
}

const hfq_hparams *hfq_model_hparams(const hfq_model *m) { return &m->hp; }
const char *hfq_model_path(const hfq_model *m) { return m->path; }
const gguf_file *hfq_model_gguf(const hfq_model *m) { return m->gguf; }
const hfq_tensor *hfq_model_tok_embd(const hfq_model *m) { return &m->tok_embd; }
const hfq_tensor *hfq_model_output(const hfq_model *m) { return &m->output; }
const hfq_tensor *hfq_model_output_norm(const hfq_model *m) { return &m->output_norm; }
const hfq_layer *hfq_model_layer(const hfq_model *m, int64_t il) { return &m->layers[il]; }
const float *hfq_model_rope_factors(const hfq_model *m, int64_t n_ctx) {
    if (m->rope_factors.data || !m->rope_long.data) return m->rope_factors.data;
    const int64_t orig = m->hp.rope_orig_ctx > 0 ? m->hp.rope_orig_ctx : m->hp.n_ctx_train;
    return n_ctx > orig ? m->rope_long.data : m->rope_short.data;
}

int hfq_model_each_matrix(const hfq_model *m, int (*fn)(void *user, const hfq_tensor *t), void *user) {
    int rc;
    if ((rc = fn(user, &m->tok_embd))) return rc;
    if (m->output.data != m->tok_embd.data && (rc = fn(user, &m->output))) return rc;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const hfq_layer *l = &m->layers[il];
        const hfq_tensor *mats[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down,
                                    &l->ffn_gate_inp, &l->gate_exps, &l->up_exps, &l->down_exps};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (mats[i]->data && (rc = fn(user, mats[i]))) return rc;
    }
    return 0;
}

hfq_tensor hfq_expert_slice(const hfq_tensor *stacked, int64_t n_expert, int64_t e) {
    hfq_tensor t = *stacked;
    t.ne1 = stacked->ne1 / n_expert;
    t.data = (const char *)stacked->data + (size_t)e * (size_t)t.ne1 * stacked->row_bytes;
    if (t.scale && t.scale_groups) t.scale += e * t.ne1 * t.scale_groups;
    if (t.scale && t.scale_experts) t.scale += e;
    t.scale_experts = 0;
    return t;
}

static int count_elements(void *user, const hfq_tensor *t) {
    *(int64_t *)user += t->ne0 * t->ne1;
    return 0;
}

bool hfq_model_is_tiny(const hfq_model *m) {
    int64_t elements = 0;
    hfq_model_each_matrix(m, count_elements, &elements);
    return elements <= ((int64_t)1 << 24);
}
