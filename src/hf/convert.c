#include "src/hf/convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "quant/fp8.h"
#include "quant/half.h"
#include "quant/plan.h"
#include "src/hf/arch.h"
#include "src/hf/config.h"
#include "src/hf/ct_kv.h"
#include "src/hf/ct_read.h"
#include "src/hf/experts.h"
#include "src/hf/lora.h"
#include "src/hf/rope_llama3.h"
#include "src/tokenizer/vocab.h"

/* llama_ftype values written as general.file_type (llama.h). */
enum { FTYPE_ALL_F32 = 0, FTYPE_MOSTLY_F16 = 1, FTYPE_MOSTLY_BF16 = 32 };
#define GGML_QUANT_VERSION 2
/* Rows are converted in chunks of about this many bytes of float32. */
#define CHUNK_BYTES ((size_t)4 << 20)

int hfq_outtype_parse(const char *s) {
    if (strcmp(s, "auto") == 0) return HFQ_OUT_AUTO;
    if (strcmp(s, "f32") == 0) return HFQ_OUT_F32;
    if (strcmp(s, "f16") == 0) return HFQ_OUT_F16;
    if (strcmp(s, "bf16") == 0) return HFQ_OUT_BF16;
    return -1;
}

/* One output tensor and where its data comes from. */
typedef struct plan_entry {
    hf_tensor_map map;
    char name[GGUF_MAX_NAME + 1];
    const st_tensor *src;
    uint32_t out_type;            /* GT_F32 / GT_F16 / GT_BF16 */
    int64_t rows, cols;           /* source as a rows x cols matrix (1-D: 1 x n) */
    int n_dims;
    int64_t permute_heads;        /* > 0: un-permute rows with this many heads */
    bool plus_one;                /* a Gemma norm: 1 + w, in the source's 16-bit type if it has one */
    /* FP8 sources: weight = code * scale, the scale per tensor (1 x 1), per
     * row (rows x 1) or per block (ceil(rows/br) x ceil(cols/bc)). */
    const st_tensor *scale;
    int64_t scale_rows, scale_cols;
    int64_t block_rows, block_cols;
    hf_ct_weight *ct;             /* a compressed-tensors weight (src: its codes), or NULL */
    /* Stacked experts (NULL otherwise): each expert's expert_rows rows in
     * turn from its own source; rows counts them all, src is the first
     * expert found (its shape checked against config.json). */
    hf_expert_stack *experts;
    int64_t expert_rows;
} plan_entry;

typedef struct plan {
    plan_entry *entries;
    int64_t n;
    const hf_ct_config *ct;       /* the checkpoint's compressed-tensors config, or NULL */
} plan;

static void plan_free(plan *p) {
    for (int64_t i = 0; p->entries && i < p->n; i++) {
        hf_ct_weight_close(p->entries[i].ct);
        hf_experts_free(p->entries[i].experts);
    }
    free(p->entries);
}

static int entry_order(const void *a, const void *b) {
    const plan_entry *x = a, *y = b;
    /* token_embd first, then blocks in order, then output_norm and output */
    hf_role rx = x->map.row->role, ry = y->map.row->role;
    int kx = rx == ROLE_TOKEN_EMBD ? -1 : x->map.layer < 0 ? 1 << 30 : x->map.layer;
    int ky = ry == ROLE_TOKEN_EMBD ? -1 : y->map.layer < 0 ? 1 << 30 : y->map.layer;
    if (kx != ky) return kx < ky ? -1 : 1;
    return (int)rx - (int)ry;
}

/* The size of a shape's axis; 0 for HF_DIM_NONE. */
static int64_t dim_size(const hf_config *c, hf_dim d) {
    switch (d) {
    case HF_DIM_NONE: break;
    case HF_DIM_VOCAB: return c->vocab_size;
    case HF_DIM_HIDDEN: return c->hidden_size;
    case HF_DIM_FF: return c->intermediate_size;
    case HF_DIM_Q: return c->n_heads * c->head_dim;
    case HF_DIM_KV: return c->n_kv_heads * c->head_dim;
    case HF_DIM_HEAD: return c->head_dim;
    case HF_DIM_QKV: return (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
    case HF_DIM_FF2: return 2 * c->intermediate_size;
    case HF_DIM_EXPERTS: return c->n_experts;
    case HF_DIM_FF_EXP: return c->expert_ff;
    }
    return 0;
}

static bool is_float_dtype(st_dtype d) { return d == ST_F32 || d == ST_F16 || d == ST_BF16; }
static bool is_fp8_dtype(st_dtype d) { return d == ST_F8_E4M3 || d == ST_F8_E5M2; }

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* FP8 checkpoints carry scales beside each weight: "<base>.weight_scale"
 * (compressed-tensors: per tensor or per output channel, weight = q * s) or
 * "<base>.weight_scale_inv" (block-wise, quantization_config.weight_block_size;
 * despite the name also weight = q * s). Activation scales ("input_scale")
 * do not matter for conversion. */
static bool is_fp8_side_tensor(const char *name) {
    return has_suffix(name, ".weight_scale") || has_suffix(name, ".weight_scale_inv") ||
           has_suffix(name, ".input_scale");
}

static int attach_fp8_scale(plan_entry *e, const hf_config *cfg, const st_model *st, hfq_error *err) {
    const st_tensor *t = e->src;
    const char *file = st_shard_path(st, t->shard);
    char name[1024];
    size_t base = strlen(t->name) - strlen("weight");
    bool blockwise = false;
    snprintf(name, sizeof name, "%.*sweight_scale_inv", (int)base, t->name);
    const st_tensor *sc = st_find(st, name);
    if (sc) blockwise = true;
    else {
        snprintf(name, sizeof name, "%.*sweight_scale", (int)base, t->name);
        sc = st_find(st, name);
    }
    if (!sc) return hfq_fail(err, file, "tensor '%s': FP8 weight without a weight_scale tensor", t->name);
    if (!is_float_dtype(sc->dtype))
        return hfq_fail(err, file, "tensor '%s': scale dtype %s is not supported", sc->name, st_dtype_name(sc->dtype));
    int64_t n = sc->n_elements;
    e->scale = sc;
    e->block_rows = e->rows;
    e->block_cols = e->cols;
    if (blockwise) {
        if (cfg->fp8_block_rows <= 0)
            return hfq_fail(err, file, "tensor '%s': block scales but config.json has no quantization_config.weight_block_size",
                            sc->name);
        e->block_rows = cfg->fp8_block_rows;
        e->block_cols = cfg->fp8_block_cols;
        e->scale_rows = (e->rows + e->block_rows - 1) / e->block_rows;
        e->scale_cols = (e->cols + e->block_cols - 1) / e->block_cols;
        if (n != e->scale_rows * e->scale_cols)
            return hfq_fail(err, file, "tensor '%s': %lld block scales, expected %lld x %lld", sc->name,
                            (long long)n, (long long)e->scale_rows, (long long)e->scale_cols);
    } else if (n == 1) {
        e->scale_rows = e->scale_cols = 1;
    } else if (n == e->rows) {
        e->scale_rows = e->rows;
        e->scale_cols = 1;
        e->block_rows = 1;
    } else {
        return hfq_fail(err, file, "tensor '%s': %lld scales fit neither per tensor nor per channel (%lld rows)",
                        sc->name, (long long)n, (long long)e->rows);
    }
    return 0;
}

static void set_permute(plan_entry *e, const hf_arch *arch, const hf_config *cfg) {
    if (arch->permute_qk && e->map.row->role == ROLE_ATTN_Q) e->permute_heads = cfg->n_heads;
    if (arch->permute_qk && e->map.row->role == ROLE_ATTN_K) e->permute_heads = cfg->n_kv_heads;
}

/* A matrix the compressed-tensors config quantizes: its tensors checked
 * (src/hf/ct_read.h); the output type is chosen with the options later. */
static int add_ct_entry(plan *p, plan_entry *e, const st_model *st, int64_t rows, int64_t cols, const hf_arch *arch,
                        const hf_config *cfg, hfq_error *err) {
    char module[1024];
    const char *name = e->src->name;
    size_t n = strlen(name) - (has_suffix(name, ".weight_packed") ? strlen(".weight_packed") : strlen(".weight"));
    snprintf(module, sizeof module, "%.*s", (int)n, name);
    if (hf_ct_weight_open(p->ct, st, module, e->map.row->role == ROLE_TOKEN_EMBD, rows, cols, &e->ct, err)) return -1;
    if (!e->ct) {
        if (has_suffix(name, ".weight_packed"))
            return hfq_fail(err, st_shard_path(st, e->src->shard), "tensor '%s': packed codes of a module the "
                            "quantization_config does not quantize", name);
        return 0;
    }
    e->src = hf_ct_weight_codes(e->ct);
    e->n_dims = 2;
    e->rows = rows;
    e->cols = cols;
    set_permute(e, arch, cfg);
    p->n++;
    return 0;
}

static int add_entry(plan *p, const hf_config *cfg, const hf_arch *arch, const st_model *st,
                     const st_tensor *t, hf_tensor_map map, uint32_t matrix_type, hfq_error *err) {
    plan_entry *e = &p->entries[p->n];
    memset(e, 0, sizeof *e);
    e->map = map;
    e->src = t;
    hf_gguf_name(&map, e->name, sizeof e->name);
    const char *file = st_shard_path(st, t->shard);
    int64_t rows = dim_size(cfg, map.row->rows), cols = dim_size(cfg, map.row->cols);
    if (p->ct && cols && add_ct_entry(p, e, st, rows, cols, arch, cfg, err)) return -1;
    if (e->ct) return 0;
    if (!is_float_dtype(t->dtype) && !is_fp8_dtype(t->dtype))
        return hfq_fail(err, file, "tensor '%s': dtype %s is not supported for weights", t->name,
                        st_dtype_name(t->dtype));
    bool ok = cols ? (t->n_dims == 2 && t->shape[0] == rows && t->shape[1] == cols)
                   : (t->n_dims == 1 && t->shape[0] == rows);
    if (!ok) {
        char got[96] = "", *w = got;
        for (int d = 0; d < t->n_dims && w < got + sizeof got - 24; d++)
            w += snprintf(w, (size_t)(got + sizeof got - w), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        if (cols)
            return hfq_fail(err, file, "tensor '%s': shape [%s] does not match config.json (expected [%lld, %lld])",
                            t->name, got, (long long)rows, (long long)cols);
        return hfq_fail(err, file, "tensor '%s': shape [%s] does not match config.json (expected [%lld])",
                        t->name, got, (long long)rows);
    }
    e->n_dims = cols ? 2 : 1;
    e->rows = cols ? rows : 1;
    e->cols = cols ? cols : rows;
    /* 1-D tensors and norms stay F32, as llama.cpp's converter keeps them */
    e->out_type = cols ? matrix_type : GT_F32;
    set_permute(e, arch, cfg);
    /* llama.cpp's Gemma converters add the one to every "*norm.weight" */
    e->plus_one = arch->norm_plus_one && !cols && has_suffix(map.row->hf_name, "norm.weight");
    /* the router too, as llama.cpp's converter keeps ffn_gate_inp */
    if (map.row->role == ROLE_FFN_GATE_INP) e->out_type = GT_F32;
    if (is_fp8_dtype(t->dtype) && attach_fp8_scale(e, cfg, st, err)) return -1;
    p->n++;
    return 0;
}

static uint32_t choose_matrix_type(hfq_outtype out, const st_model *st) {
    switch (out) {
    case HFQ_OUT_F32: return GT_F32;
    case HFQ_OUT_F16: return GT_F16;
    case HFQ_OUT_BF16: return GT_BF16;
    case HFQ_OUT_AUTO: break;
    }
    /* like convert_hf_to_gguf's "auto": the first 2-D tensor's 16-bit type, else f16 */
    for (int64_t i = 0; i < st_n_tensors(st); i++) {
        const st_tensor *t = st_tensor_at(st, i);
        if (t->n_dims < 2) continue;
        if (t->dtype == ST_BF16) return GT_BF16;
        if (t->dtype == ST_F16) return GT_F16;
        break;
    }
    return GT_F16;
}

/* The family's layer row for a role, or NULL. */
static const hf_tensor_row *layer_row_for(const hf_arch *arch, hf_role role) {
    const hf_tensor_row *row;
    for (size_t i = 0; (row = hf_arch_layer_row(arch, i)); i++)
        if (row->role == role) return row;
    return NULL;
}

/* A multimodal checkpoint's text-model name as llama.cpp's converter sees
 * it ("language_model." dropped), or NULL for the vision tower's and the
 * projector's tensors, which the text GGUF leaves out. */
static const char *text_model_name(const char *name, char *buf, size_t cap) {
    if (strstr(name, "vision_tower.") || strstr(name, "multi_modal_projector.")) return NULL;
    const char *at = strstr(name, "language_model.");
    if (!at) return name;
    snprintf(buf, cap, "%.*s%s", (int)(at - name), name, at + strlen("language_model."));
    return buf;
}

/* A new stacked entry of n_experts experts of rows x cols each, sources
 * to come (src: the first, for messages). */
static plan_entry *stack_entry(plan *p, hf_tensor_map map, const st_tensor *src, int64_t rows, int64_t cols,
                               int64_t n_experts, uint32_t matrix_type) {
    plan_entry *e = &p->entries[p->n++];
    memset(e, 0, sizeof *e);
    e->map = map;
    e->src = src;
    hf_gguf_name(&map, e->name, sizeof e->name);
    e->expert_rows = rows;
    e->rows = rows * n_experts;
    e->cols = cols;
    e->n_dims = 3;
    e->out_type = matrix_type;
    return e;
}

/* Expert `map.expert` of a stacked tensor: the stack's entry is made by its
 * first expert found (the shape checked as any tensor's, or by
 * compressed-tensors' reader), the others join it. */
static int add_expert(plan *p, const hf_config *cfg, const hf_arch *arch, const st_model *st, const st_tensor *t,
                      hf_tensor_map map, uint32_t matrix_type, hfq_error *err) {
    const char *file = st_shard_path(st, t->shard);
    const int64_t rows = dim_size(cfg, map.row->rows), cols = dim_size(cfg, map.row->cols);
    hf_ct_weight *w = NULL;
    if (p->ct) {
        char module[1024];
        size_t n = strlen(t->name) - (has_suffix(t->name, ".weight_packed") ? strlen(".weight_packed") : strlen(".weight"));
        snprintf(module, sizeof module, "%.*s", (int)n, t->name);
        if (hf_ct_weight_open(p->ct, st, module, false, rows, cols, &w, err)) return -1;
    }
    if (is_fp8_dtype(t->dtype) && !w)
        return hfq_fail(err, file, "tensor '%s': FP8 experts are not supported", t->name);
    plan_entry *e = NULL;
    for (int64_t i = 0; i < p->n && !e; i++)
        if (p->entries[i].experts && p->entries[i].map.layer == map.layer && p->entries[i].map.row == map.row)
            e = &p->entries[i];
    if (!e && w) {
        e = stack_entry(p, map, hf_ct_weight_codes(w), rows, cols, cfg->n_experts, matrix_type);
    } else if (!e) {
        if (add_entry(p, cfg, arch, st, t, map, matrix_type, err)) return -1;
        e = &p->entries[p->n - 1];
        e->expert_rows = e->rows;
        e->rows *= cfg->n_experts;
        e->n_dims = 3;
    }
    if (!e->experts && !(e->experts = hf_experts_new(cfg->n_experts))) {
        hf_ct_weight_close(w);
        return hfq_fail(err, NULL, "out of memory");
    }
    return w ? hf_experts_add_ct(e->experts, map.expert, w, file, err) : hf_experts_add(e->experts, map.expert, t, file, err);
}

static bool is_expert_role(hf_role r) { return r >= ROLE_FFN_GATE_INP && r <= ROLE_FFN_DOWN_EXPS; }
static bool is_dense_ffn_role(hf_role r) { return r == ROLE_FFN_GATE || r == ROLE_FFN_UP || r == ROLE_FFN_DOWN; }

/* In a family with experts, a layer has either the experts or, where
 * config.json makes it dense (cfg->layer_dense), the dense SwiGLU. */
static int misplaced_ffn(const hf_config *cfg, const hf_arch *arch, const hf_tensor_map *map, const st_tensor *t,
                         const char *file, hfq_error *err) {
    if (map->layer < 0 || !hf_arch_has_experts(arch)) return 0;
    const bool dense = hf_config_layer_dense(cfg, map->layer);
    if (dense && is_expert_role(map->row->role))
        return hfq_fail(err, file, "tensor '%s': layer %d has no experts (mlp_only_layers / decoder_sparse_step "
                        "in config.json)", t->name, map->layer);
    if (!dense && is_dense_ffn_role(map->row->role))
        return hfq_fail(err, file, "tensor '%s': layer %d has experts, not a dense feed-forward", t->name, map->layer);
    return 0;
}

/* transformers 5's fused experts (experts.h): "model.layers.L.<fused_experts>
 * gate_up_proj" is ffn_gate_exps and ffn_up_exps, "...down_proj"
 * ffn_down_exps. Returns 1 when the name is not one of them. */
static int add_fused_experts(plan *p, const hf_config *cfg, const hf_arch *arch, const st_model *st,
                             const st_tensor *t, const char *name, uint32_t matrix_type, hfq_error *err) {
    static const char prefix[] = "model.layers.";
    if (!arch->fused_experts || strncmp(name, prefix, sizeof prefix - 1) != 0) return 1;
    char *end;
    long long layer = strtoll(name + sizeof prefix - 1, &end, 10);
    const size_t n = strlen(arch->fused_experts);
    if (end == name + sizeof prefix - 1 || *end != '.' || strncmp(end + 1, arch->fused_experts, n) != 0) return 1;
    const bool gate_up = strcmp(end + 1 + n, "gate_up_proj") == 0;
    if (!gate_up && strcmp(end + 1 + n, "down_proj") != 0) return 1;
    const char *file = st_shard_path(st, t->shard);
    if (layer < 0 || layer >= cfg->n_layers)
        return hfq_fail(err, file, "tensor '%s': layer %lld of %lld", t->name, layer, (long long)cfg->n_layers);
    if (p->ct || !is_float_dtype(t->dtype))
        return hfq_fail(err, file, "tensor '%s': fused experts of dtype %s%s are not supported", t->name,
                        st_dtype_name(t->dtype), p->ct ? " under compressed-tensors" : "");
    const int64_t X = cfg->n_experts, F = cfg->expert_ff, H = cfg->hidden_size;
    const int64_t rows = gate_up ? 2 * F : H, cols = gate_up ? H : F;
    if (t->n_dims != 3 || t->shape[0] != X || t->shape[1] != rows || t->shape[2] != cols)
        return hfq_fail(err, file, "tensor '%s': shape does not match config.json (expected [%lld, %lld, %lld])",
                        t->name, (long long)X, (long long)rows, (long long)cols);
    for (int half = 0; half < (gate_up ? 2 : 1); half++) {
        const hf_role role = gate_up ? (half ? ROLE_FFN_UP_EXPS : ROLE_FFN_GATE_EXPS) : ROLE_FFN_DOWN_EXPS;
        hf_tensor_map map = {layer_row_for(arch, role), (int)layer, -1};
        if (misplaced_ffn(cfg, arch, &map, t, file, err)) return -1;
        plan_entry *e = stack_entry(p, map, t, gate_up ? F : H, cols, X, matrix_type);
        if (!(e->experts = hf_experts_new_fused(X, t, rows, half * F))) return hfq_fail(err, NULL, "out of memory");
    }
    return 0;
}

static int build_plan(plan *p, const hf_config *cfg, const hf_arch *arch, const st_model *st,
                      uint32_t matrix_type, hfq_error *err) {
    int64_t n = st_n_tensors(st);
    p->entries = calloc((size_t)n * 2 + 1, sizeof *p->entries);   /* a fused gate_up_proj makes two */
    if (!p->entries) return hfq_fail(err, NULL, "out of memory");
    const st_tensor *embd = NULL, *lm_head = NULL;
    for (int64_t i = 0; i < n; i++) {
        const st_tensor *t = st_tensor_at(st, i);
        hf_tensor_map map;
        if (is_fp8_side_tensor(t->name)) continue;  /* consumed with its weight */
        char text_name[1024];
        const char *name = arch->text_model_only ? text_model_name(t->name, text_name, sizeof text_name) : t->name;
        if (!name) continue;
        char packed[1024];
        const bool is_packed = p->ct && hf_ct_packed_weight_name(name, packed, sizeof packed);
        if (p->ct && !is_packed && hf_ct_side_tensor(name)) continue;
        if (hf_map_tensor(arch, is_packed ? packed : name, (int)cfg->n_layers, (int)cfg->n_experts, &map) != 0) {
            int fused = add_fused_experts(p, cfg, arch, st, t, name, matrix_type, err);
            if (fused <= 0) {
                if (fused < 0) return -1;
                continue;
            }
            return hfq_fail(err, st_shard_path(st, t->shard), "tensor '%s' is not part of a %s model",
                            t->name, cfg->architecture);
        }
        if (map.row->role == ROLE_SKIP) continue;
        if (misplaced_ffn(cfg, arch, &map, t, st_shard_path(st, t->shard), err)) return -1;
        if (map.row->role == ROLE_TOKEN_EMBD) { embd = t; continue; }
        if (map.row->role == ROLE_OUTPUT) {
            if (!arch->drop_lm_head) lm_head = t;
            continue;
        }
        if (map.expert >= 0 ? add_expert(p, cfg, arch, st, t, map, matrix_type, err)
                            : add_entry(p, cfg, arch, st, t, map, matrix_type, err))
            return -1;
    }
    /* Tied embeddings: one matrix serves both; llama.cpp then has no output
     * tensor. Some checkpoints store only lm_head (with __metadata__ aliasing
     * the embedding to it): it becomes token_embd. */
    bool tied = cfg->tie_word_embeddings || !lm_head;   /* drop_lm_head: always */
    const st_tensor *embd_src = embd ? embd : (tied ? lm_head : NULL);
    if (!embd_src)
        return hfq_fail(err, st_shard_path(st, 0), "checkpoint has no model.embed_tokens.weight");
    hf_tensor_map m = {hf_arch_global_row(ROLE_TOKEN_EMBD), -1, -1};
    if (add_entry(p, cfg, arch, st, embd_src, m, matrix_type, err)) return -1;
    if (!tied) {
        hf_tensor_map mo = {hf_arch_global_row(ROLE_OUTPUT), -1, -1};
        if (add_entry(p, cfg, arch, st, lm_head, mo, matrix_type, err)) return -1;
    }
    qsort(p->entries, (size_t)p->n, sizeof *p->entries, entry_order);
    for (int64_t i = 1; i < p->n; i++)   /* two names for one tensor (a fused and a per-expert form) */
        if (strcmp(p->entries[i].name, p->entries[i - 1].name) == 0)
            return hfq_fail(err, st_shard_path(st, p->entries[i].src->shard), "tensors '%s' and '%s' are both '%s'",
                            p->entries[i - 1].src->name, p->entries[i].src->name, p->entries[i].name);
    /* every block must be complete: each of the family's layer rows (with
     * experts, the experts instead of the dense SwiGLU), the first missing
     * in tensor order named */
    bool moe = hf_arch_has_experts(arch);
    for (int64_t i = 0; i < p->n; i++)
        if (p->entries[i].experts &&
            hf_experts_check(p->entries[i].experts, p->entries[i].name, st_shard_path(st, 0), err))
            return -1;
    for (int layer = 0; layer < cfg->n_layers; layer++) {
        for (int r = 0; r < ROLE_COUNT; r++) {
            const hf_tensor_row *row = layer_row_for(arch, (hf_role)r);
            if (!row || !row->gguf_name) continue;
            if (moe && (hf_config_layer_dense(cfg, layer) ? is_expert_role((hf_role)r) : is_dense_ffn_role((hf_role)r)))
                continue;
            bool found = false;
            for (int64_t i = 0; i < p->n && !found; i++)
                found = p->entries[i].map.layer == layer && p->entries[i].map.row->role == row->role;
            if (!found) {
                hf_tensor_map want = {row, layer, -1};
                char name[80];
                hf_gguf_name(&want, name, sizeof name);
                return hfq_fail(err, st_shard_path(st, 0), "checkpoint lacks the tensor for '%s'", name);
            }
        }
    }
    bool has_norm = false;
    for (int64_t i = 0; i < p->n; i++) has_norm |= p->entries[i].map.row->role == ROLE_OUTPUT_NORM;
    if (!has_norm) return hfq_fail(err, st_shard_path(st, 0), "checkpoint has no model.norm.weight");
    return 0;
}

static int write_hparams(gguf_writer *w, const hf_config *c, const hf_arch *arch, uint32_t ftype) {
    char key[160];
    int rc = 0;
#define KEY(suffix) hf_arch_key(arch, suffix, key, sizeof key)
    rc |= gguf_set_str(w, "general.architecture", arch->gguf_arch);
    rc |= gguf_set_str(w, "general.type", "model");
    rc |= gguf_set_str(w, "general.name", c->name);
    if (c->context_length > 0) rc |= gguf_set_u32(w, KEY("context_length"), (uint32_t)c->context_length);
    rc |= gguf_set_u32(w, KEY("embedding_length"), (uint32_t)c->hidden_size);
    rc |= gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)c->intermediate_size);
    rc |= gguf_set_u32(w, KEY("block_count"), (uint32_t)c->n_layers);
    rc |= gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads);
    rc |= gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    if (c->has_rope_theta) rc |= gguf_set_f32(w, KEY("rope.freq_base"), (float)c->rope_theta);
    rc |= gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)c->rms_norm_eps);
    if (c->has_head_dim) {
        rc |= gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim);
        rc |= gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim);
    }
    rc |= gguf_set_u32(w, "general.file_type", ftype);
    if (c->n_experts > 0) {
        rc |= gguf_set_u32(w, KEY("expert_count"), (uint32_t)c->n_experts);
        rc |= gguf_set_u32(w, KEY("expert_used_count"), (uint32_t)c->n_experts_used);
    }
    if (arch->write_keys) rc |= arch->write_keys(w, c, arch);
    if (c->rope_scaling == HF_ROPE_LINEAR) {
        rc |= gguf_set_str(w, KEY("rope.scaling.type"), "linear");
        rc |= gguf_set_f32(w, KEY("rope.scaling.factor"), (float)c->rope_factor);
    } else if (c->rope_scaling == HF_ROPE_YARN) {
        /* TextModel.set_gguf_parameters: the optional yarn keys only when
         * config.json gives them (the runner then takes transformers' defaults) */
        rc |= gguf_set_str(w, KEY("rope.scaling.type"), "yarn");
        rc |= gguf_set_f32(w, KEY("rope.scaling.factor"), (float)c->rope_factor);
        if (c->rope_original_context > 0)
            rc |= gguf_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope_original_context);
        if (c->has_yarn_attn_factor)
            rc |= gguf_set_f32(w, KEY("rope.scaling.yarn_attn_factor"), (float)c->rope_yarn_attn_factor);
        if (c->has_yarn_beta_fast)
            rc |= gguf_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), (float)c->rope_yarn_beta_fast);
        if (c->has_yarn_beta_slow)
            rc |= gguf_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), (float)c->rope_yarn_beta_slow);
    }
    if (c->has_rope_theta_swa) rc |= gguf_set_f32(w, KEY("rope.freq_base_swa"), (float)c->rope_theta_swa);
#undef KEY
    rc |= gguf_set_u32(w, "general.quantization_version", GGML_QUANT_VERSION);
    rc |= gguf_set_str(w, "hfq.converter", "hfconv " HFQ_VERSION);
    return rc ? -1 : 0;
}

/* Llama 3 RoPE: per-frequency factors stored as rope_freqs.weight (src/hf/rope_llama3.h). */
static void llama3_rope_factors(const hf_config *c, float *out, int64_t n) {
    const hf_llama3_rope p = {c->has_rope_theta ? c->rope_theta : 10000.0, c->head_dim, c->rope_original_context,
                              c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor};
    hf_llama3_rope_factors(&p, out, n);
}

/* Loads the scales of an FP8 entry as floats (NULL for other entries). */
static float *load_scales(const st_model *st, const plan_entry *e, hfq_error *err) {
    if (!e->scale) return NULL;
    int64_t n = e->scale_rows * e->scale_cols;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        hfq_fail(err, NULL, "out of memory");
        return NULL;
    }
    const unsigned char *s = st_data(st, e->scale);
    for (int64_t i = 0; i < n; i++) {
        if (e->scale->dtype == ST_F32) memcpy(&v[i], s + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            v[i] = e->scale->dtype == ST_F16 ? hfq_fp16_to_f32(h) : hfq_bf16_to_f32(h);
        }
    }
    return v;
}

/* Decodes source row `row` (n elements at src) to float; fails on NaN/Inf. */
static int decode_row(const plan_entry *e, const float *scales, int64_t row, const void *src, float *dst,
                      int64_t n) {
    const unsigned char *s = src;
    st_dtype dt = e->src->dtype;
    const float *row_scales = scales ? scales + (row / e->block_rows) * e->scale_cols : NULL;
    for (int64_t i = 0; i < n; i++) {
        float v;
        if (dt == ST_F32) {
            memcpy(&v, s + 4 * i, 4);
        } else if (dt == ST_F16 || dt == ST_BF16) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            v = dt == ST_F16 ? hfq_fp16_to_f32(h) : hfq_bf16_to_f32(h);
        } else {
            v = hfq_fp8_to_f32(dt == ST_F8_E4M3 ? HFQ_FP8_E4M3 : HFQ_FP8_E5M2, s[i]) *
                row_scales[i / e->block_cols];
        }
        if (v - v != 0.0f) return -1;  /* NaN or Inf */
        dst[i] = v;
    }
    return 0;
}

/* w + 1 as llama.cpp's converter computes it: in torch, on the tensor as
 * loaded (F16 stays F16, so the sum is rounded to it; other types are
 * float32 by then). */
static void add_one(float *row, int64_t n, st_dtype dtype) {
    for (int64_t i = 0; i < n; i++) {
        row[i] += 1.0f;
        if (dtype == ST_F16) row[i] = hfq_fp16_to_f32(hfq_f32_to_fp16(row[i]));
    }
}

static void encode_row(uint32_t type, const float *src, void *dst, int64_t n) {
    if (type == GT_F32) { memcpy(dst, src, (size_t)n * 4); return; }
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++)
        d[i] = type == GT_F16 ? hfq_f32_to_fp16(src[i]) : hfq_f32_to_bf16(src[i]);
}

/* Source row for output row r of a q/k matrix: Hugging Face stores each head
 * as [first halves of the rotary pairs; second halves], GGUF interleaves them. */
static int64_t permuted_source_row(int64_t r, int64_t rows, int64_t n_heads) {
    int64_t per_head = rows / n_heads, half = per_head / 2;
    int64_t h = r / per_head, k = r % per_head;
    return h * per_head + (k % 2) * half + k / 2;
}

static bool is_float_type(uint32_t t) { return t == GT_F32 || t == GT_F16 || t == GT_BF16; }

/* ---- compressed-tensors weights (src/hf/ct_read.h) ---- */

/* The float type compressed-tensors decompresses w to. */
static uint32_t ct_float_type(const hf_ct_weight *w) {
    st_dtype dt = hf_ct_weight_dtype(w);
    return dt == ST_F32 ? GT_F32 : dt == ST_F16 ? GT_F16 : GT_BF16;
}

/* FP8 block scales stay as they are through the q/k row permutation only
 * when head_dim divides 128 (rows stay in their block). */
static bool ct_block_crosses_heads(const plan_entry *e) {
    int64_t nb0, nb1;
    return hf_ct_weight_block(e->ct, &nb0, &nb1) && e->permute_heads > 0 &&
           HFQ_SCALE_BLOCK % (e->rows / e->permute_heads) != 0;
}

/* Kept where a GGUF format of ours holds the same numbers, unless --outtype
 * asks for floats or adapters are merged; the embedding always as floats
 * (llama.cpp takes no .scale there). Else the exact float of compressed-
 * tensors' decompression. */
static uint32_t ct_out_type(const plan_entry *e, const hfq_convert_opts *opts, uint32_t matrix_type) {
    if (opts->outtype_given) return matrix_type;
    if (e->map.row->role != ROLE_TOKEN_EMBD && opts->n_loras == 0) {
        switch (hf_ct_weight_keep(e->ct)) {
        case HF_CT_KEEP_FP8:
            if (ct_block_crosses_heads(e)) break;
            return GT_I8;
        case HF_CT_KEEP_INT8: return GT_I8;
        case HF_CT_KEEP_NVFP4: return GT_NVFP4;
        case HF_CT_KEEP_MXFP4: return GT_MXFP4;
        case HF_CT_DEQUANT: break;
        }
    }
    return ct_float_type(e->ct);
}

/* Each matrix not kept is said on stderr (as a warning line); ct: its
 * weight (of stacked experts, the first expert's). */
static void ct_note(const hfq_convert_opts *opts, const plan_entry *e, const hf_ct_weight *ct) {
    if (!opts->warn || !is_float_type(e->out_type)) return;
    char msg[400];
    const char *why = opts->outtype_given || hf_ct_weight_keep(ct) == HF_CT_DEQUANT ? ""
                      : e->experts ? " (experts are stacked as floats)"
                      : ct_block_crosses_heads(e) ? " (its heads cross the 128-row scale blocks)"
                      : opts->n_loras ? " (adapters merged)" : " (the embedding)";
    snprintf(msg, sizeof msg, "%s (%s): dequantized %s to %s%s", e->name, hf_ct_weight_what(ct),
             opts->outtype_given ? "(--outtype)" : "exactly", ggml_type_get(e->out_type)->name, why);
    opts->warn(opts->warn_ctx, msg);
}

/* general.file_type of a compressed-tensors conversion: the type holding
 * most matrix values, as llama_ftype's "mostly" reads (dequantized BF16
 * projections beside an F16 embedding: MOSTLY_BF16); the given ftype on a
 * tie. NVFP4 and MXFP4 are llama.cpp's MOSTLY_NVFP4 and MOSTLY_MXFP4_MOE
 * (what convert_hf_to_gguf.py writes for them); the I8 codes are quantize's
 * INT8 / FP8_E4M3 values, which no llama_ftype names. */
static uint32_t ct_file_type(const plan *p, uint32_t ftype) {
    static const hfq_preset presets[] = {HFQ_PRESET_INT8, HFQ_PRESET_FP8_E4M3, HFQ_PRESET_NVFP4, HFQ_PRESET_MXFP4,
                                         HFQ_PRESET_F32, HFQ_PRESET_F16, HFQ_PRESET_BF16};
    static const uint32_t types[] = {GT_I8, GT_I8, GT_NVFP4, GT_MXFP4, GT_F32, GT_F16, GT_BF16};
    enum { N = sizeof presets / sizeof presets[0] };
    if (!p->ct) return ftype;
    int64_t n[N] = {0};
    int best = -1;
    for (int k = 0; k < N; k++)
        if (hfq_preset_file_type(presets[k]) == ftype) best = k;
    for (int64_t i = 0; i < p->n; i++) {
        const plan_entry *e = &p->entries[i];
        const bool fp8 = e->out_type == GT_I8 && e->ct && hf_ct_weight_keep(e->ct) == HF_CT_KEEP_FP8;
        for (int k = fp8; e->rows > 1 && k < N; k++)
            if (types[k] == e->out_type) {
                n[k] += e->rows * e->cols;
                break;
            }
    }
    for (int k = 0; k < N; k++)
        if (best < 0 || n[k] > n[best]) best = k;
    return hfq_preset_file_type(presets[best]);
}

/* "<base>.<suffix>" of GGUF weight "<base>.weight". */
static void ct_side_name(char *buf, size_t cap, const char *weight, const char *suffix) {
    snprintf(buf, cap, "%.*s.%s", (int)(strlen(weight) - strlen(".weight")), weight, suffix);
}

/* The kept weight's side tensors and keys (docs/format-quant-ext.md):
 * .scale (I8: per tensor [1], else [groups, rows]; NVFP4: the global [1])
 * and .input_scale [1]; hfq.qext.<name> for I8, and hfq.act_quant.<name> =
 * "none" (I8, NVFP4, MXFP4) when its checkpoint quantizes no activations;
 * a float matrix only hfq.act_quant, for activations quantized per group. */
static int ct_add_sides(gguf_writer *w, const plan_entry *e, int64_t *n_added, uint64_t *bytes, hfq_error *err) {
    char name[GGUF_MAX_NAME + 16];
    if (is_float_type(e->out_type)) {
        const char *act = hf_ct_weight_float_act_quant(e->ct);
        snprintf(name, sizeof name, "hfq.act_quant.%s", e->name);
        if (act && e->map.row->role != ROLE_TOKEN_EMBD && gguf_set_str(w, name, act))
            return hfq_fail(err, NULL, "cannot set metadata");
        return 0;
    }
    int64_t idx;
    if (e->out_type == GT_I8) {
        snprintf(name, sizeof name, "hfq.qext.%s", e->name);
        if (gguf_set_str(w, name, hf_ct_weight_keep(e->ct) == HF_CT_KEEP_FP8 ? "fp8_e4m3" : "int8") ||
            gguf_set_u32(w, "hfq.qext.version", 1))
            return hfq_fail(err, NULL, "cannot set metadata");
        int64_t ne0, nb0, nb1;
        hf_ct_weight_scales(e->ct, &ne0);
        int64_t ne[2] = {ne0 ? ne0 : 1, hf_ct_weight_block(e->ct, &nb0, &nb1) ? nb1 : e->rows};
        ct_side_name(name, sizeof name, e->name, "scale");
        if ((idx = gguf_add_tensor(w, name, GT_F32, ne0 ? 2 : 1, ne, err)) < 0) return -1;
        *bytes += gguf_tensor_nbytes(w, idx), ++*n_added;
    } else if (e->out_type == GT_NVFP4) {
        int64_t ne[1] = {1};
        ct_side_name(name, sizeof name, e->name, "scale");
        if ((idx = gguf_add_tensor(w, name, GT_F32, 1, ne, err)) < 0) return -1;
        *bytes += gguf_tensor_nbytes(w, idx), ++*n_added;
    }
    /* weight-only (W8A16, NVFP4A16, MXFP4A16): the runner's default then keeps float activations */
    snprintf(name, sizeof name, "hfq.act_quant.%s", e->name);
    const char *act = hf_ct_weight_act_quant(e->ct);
    if (act && gguf_set_str(w, name, act))
        return hfq_fail(err, NULL, "cannot set metadata");
    float s;
    if (hf_ct_weight_input_scale(e->ct, &s)) {
        int64_t ne[1] = {1};
        ct_side_name(name, sizeof name, e->name, "input_scale");
        if ((idx = gguf_add_tensor(w, name, GT_F32, 1, ne, err)) < 0) return -1;
        *bytes += gguf_tensor_nbytes(w, idx), ++*n_added;
    }
    return 0;
}

/* A stack of dequantized compressed-tensors experts: the activation mark
 * their checkpoint gives them (per-group FP8), which must be every expert's. */
static int ct_mark_experts(gguf_writer *w, const plan_entry *e, int64_t n_experts, hfq_error *err) {
    const int64_t rows_per = e->rows / n_experts;
    const hf_ct_weight *first = hf_experts_ct(e->experts, rows_per, 0);
    const char *act = first && is_float_type(e->out_type) ? hf_ct_weight_float_act_quant(first) : NULL;
    for (int64_t x = 1; act && x < n_experts; x++) {
        const hf_ct_weight *ct = hf_experts_ct(e->experts, rows_per, x * rows_per);
        const char *other = ct ? hf_ct_weight_float_act_quant(ct) : NULL;
        if (!other || strcmp(other, act) != 0)
            return hfq_fail(err, NULL, "tensor '%s': expert %lld's activations are quantized unlike expert 0's (%s)",
                            e->name, (long long)x, act);
    }
    char name[GGUF_MAX_NAME + 16];
    snprintf(name, sizeof name, "hfq.act_quant.%s", e->name);
    if (act && gguf_set_str(w, name, act)) return hfq_fail(err, NULL, "cannot set metadata");
    return 0;
}

/* The data of ct_add_sides' tensors, per-row scales in the GGUF's row order. */
static int ct_write_sides(gguf_writer *w, const plan_entry *e, uint64_t *done, hfq_error *err) {
    if (is_float_type(e->out_type)) return 0;
    int rc = 0;
    if (e->out_type == GT_I8) {
        int64_t ne0, nb0, nb1 = 0;
        const float *sc = hf_ct_weight_scales(e->ct, &ne0);
        const bool block = hf_ct_weight_block(e->ct, &nb0, &nb1);   /* the blocks as stored: rows stay in them */
        const int64_t per_row = ne0 ? ne0 : 1, n = block ? nb0 * nb1 : ne0 ? per_row * e->rows : 1;
        float *v = malloc((size_t)n * sizeof *v);
        if (!v) return hfq_fail(err, NULL, "out of memory");
        for (int64_t r = 0; r < (block ? nb1 : ne0 ? e->rows : 1); r++) {
            int64_t sr = e->permute_heads && ne0 && !block ? permuted_source_row(r, e->rows, e->permute_heads) : r;
            memcpy(v + r * per_row, sc + sr * per_row, (size_t)per_row * sizeof *v);
        }
        rc = gguf_writer_write_data(w, v, (uint64_t)n * 4, err);
        *done += (uint64_t)n * 4;
        free(v);
    } else if (e->out_type == GT_NVFP4) {
        float g = hf_ct_weight_global(e->ct);
        rc = gguf_writer_write_data(w, &g, 4, err);
        *done += 4;
    }
    float s;
    if (rc == 0 && hf_ct_weight_input_scale(e->ct, &s)) {
        rc = gguf_writer_write_data(w, &s, 4, err);
        *done += 4;
    }
    return rc;
}

static int write_entry(gguf_writer *w, const st_model *st, const plan_entry *e, const hf_lora_set *loras,
                       float *fbuf, void *obuf, int64_t chunk_rows, uint64_t *done, uint64_t total,
                       const hfq_convert_opts *opts, hfq_error *err) {
    hf_lora_edit *edit = NULL;
    /* adapters of experts are refused where they are matched (lora.c) */
    if (!e->experts && hf_lora_edit_for(loras, e->src, e->rows, e->cols, &edit, err)) return -1;
    /* a tensor an adapter stores whole is read from there instead */
    plan_entry from = *e;
    const st_model *from_st = st;
    if (edit && edit->replace) {
        from.src = edit->replace;
        from.scale = NULL;
        from_st = edit->replace_st;
    }
    const unsigned char *base = st_data(from_st, from.src);
    size_t in_es = st_dtype_size(from.src->dtype);
    const size_t out_row = (size_t)ggml_row_size(e->out_type, e->cols);
    const bool raw = e->ct && !is_float_type(e->out_type);   /* kept codes */
    uint64_t in_row_bytes = e->ct ? from.src->nbytes / (uint64_t)e->rows : (uint64_t)e->cols * in_es;
    const char *file = st_shard_path(from_st, from.src->shard);
    /* a permuted chunk must hold whole heads: its source rows are then the
     * same set as its output rows, and can be released after it */
    if (e->permute_heads) {
        int64_t per_head = e->rows / e->permute_heads;
        chunk_rows = chunk_rows < per_head ? per_head : chunk_rows / per_head * per_head;
    }
    hfq_error scale_err;
    float *scales = load_scales(from_st, &from, &scale_err);
    int rc = 0;
    if (from.scale && !scales) {
        *err = scale_err;
        rc = -1;
    }
    for (int64_t r0 = 0, nr = 0; r0 < e->rows && rc == 0; r0 += nr) {
        nr = e->rows - r0 < chunk_rows ? e->rows - r0 : chunk_rows;
        int64_t first = r0;   /* the chunk's first row in its source */
        const hf_ct_weight *ct = e->ct;
        if (e->experts) {     /* a chunk stays within one expert */
            int64_t run;
            from.src = hf_experts_row(e->experts, e->expert_rows, r0, &first, &run);
            base = st_data(from_st, from.src);
            if ((ct = hf_experts_ct(e->experts, e->expert_rows, r0)))
                in_row_bytes = from.src->nbytes / (uint64_t)e->expert_rows;
            if (nr > run) nr = run;
        }
        for (int64_t r = r0; r < r0 + nr; r++) {
            int64_t sr = e->permute_heads ? permuted_source_row(r, e->rows, e->permute_heads) : r - r0 + first;
            float *row = fbuf + (r - r0) * e->cols;
            if (raw) {
                hf_ct_weight_raw_row(e->ct, sr, (unsigned char *)obuf + (size_t)(r - r0) * out_row);
                continue;
            }
            if (ct ? hf_ct_weight_row(ct, sr, row)
                      : decode_row(&from, scales, sr, base + (size_t)sr * in_row_bytes, row, e->cols)) {
                rc = hfq_fail(err, file, "tensor '%s': row %lld holds NaN or Inf", from.src->name, (long long)sr);
                break;
            }
            if (e->plus_one) add_one(row, e->cols, from.src->dtype);
            /* merged in Hugging Face row order, before the permutation */
            if (edit && hf_lora_edit_row(edit, sr, row)) {
                rc = hfq_fail(err, file, "tensor '%s': row %lld is not finite once the adapters are merged",
                              e->src->name, (long long)sr);
                break;
            }
            encode_row(e->out_type, row, (unsigned char *)obuf + (size_t)(r - r0) * out_row, e->cols);
        }
        if (rc == 0) rc = gguf_writer_write_data(w, obuf, (uint64_t)nr * out_row, err);
        /* a permuted chunk's source rows are its own rows (whole heads) */
        st_release_range(from_st, from.src, (uint64_t)first * in_row_bytes, (uint64_t)nr * in_row_bytes);
        *done += (uint64_t)nr * out_row;
        if (opts->progress) opts->progress(opts->progress_ctx, *done, total, e->name);
    }
    if (from.scale) st_release(from_st, from.scale);
    free(scales);
    hf_lora_edit_free(edit);
    return rc;
}

static int convert_weights(const hfq_convert_opts *opts, gguf_writer *w, const hf_config *cfg,
                           const hf_arch *arch, const hfq_vocab *vocab, hfq_convert_report *rep,
                           hfq_error *err) {
    st_model *st = st_open_dir(opts->model_dir, err);
    if (!st) return -1;
    plan p = {0};
    float *fbuf = NULL, *rope = NULL;
    void *obuf = NULL;
    hf_lora_set *loras = NULL;
    hf_ct_config *ct = NULL;
    int rc = -1;
    uint32_t matrix_type = choose_matrix_type(opts->outtype, st);
    uint32_t ftype = matrix_type == GT_F32 ? FTYPE_ALL_F32 : matrix_type == GT_F16 ? FTYPE_MOSTLY_F16 : FTYPE_MOSTLY_BF16;
    char cfg_path[4096];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", opts->model_dir);
    if (hf_ct_config_load(cfg_path, &ct, err)) goto done;
    p.ct = ct;
    if (build_plan(&p, cfg, arch, st, matrix_type, err)) goto done;
    /* adapters name "M.weight", which packed formats do not have */
    for (int64_t i = 0; i < p.n && opts->n_loras > 0; i++)
        if (p.entries[i].ct && has_suffix(p.entries[i].src->name, "_packed")) {
            hfq_fail(err, opts->model_dir, "--lora on packed compressed-tensors weights ('%s') is not implemented",
                     p.entries[i].src->name);
            goto done;
        }
    for (int64_t i = 0; i < p.n; i++) {
        plan_entry *e = &p.entries[i];
        const hf_ct_weight *first_expert = e->experts ? hf_experts_ct(e->experts, 1, 0) : NULL;
        if (e->ct) e->out_type = ct_out_type(e, opts, matrix_type);
        else if (first_expert) e->out_type = opts->outtype_given ? matrix_type : ct_float_type(first_expert);
        if (e->ct || first_expert) ct_note(opts, e, e->ct ? e->ct : first_expert);
    }
    ftype = ct_file_type(&p, ftype);
    if (opts->n_loras > 0 &&
        !(loras = hf_lora_open(opts->loras, opts->n_loras, cfg, arch, st, opts->warn, opts->warn_ctx, err)))
        goto done;
    if (write_hparams(w, cfg, arch, ftype)) { hfq_fail(err, opts->out_path, "cannot set metadata"); goto done; }
    if (vocab->n_tokens != cfg->vocab_size) {
        hfq_fail(err, opts->model_dir, "the tokenizer has %lld tokens but the embedding has %lld rows",
                 (long long)vocab->n_tokens, (long long)cfg->vocab_size);
        goto done;
    }
    if (hfq_vocab_to_gguf(vocab, w, err)) goto done;
    if (ct && hf_ct_kv_write(cfg_path, hf_ct_config_kv_scheme(ct), st, cfg->n_layers, w, err)) goto done;
    int64_t max_cols = 1;
    uint64_t total = 0;
    for (int64_t i = 0; i < p.n; i++) {
        const plan_entry *e = &p.entries[i];
        int64_t ne[3] = {e->cols, e->rows, 1};
        if (e->experts) {
            ne[1] = e->expert_rows;
            ne[2] = cfg->n_experts;
        }
        if (gguf_add_tensor(w, e->name, e->out_type, e->n_dims, ne, err) < 0) goto done;
        if (e->cols > max_cols) max_cols = e->cols;
        total += (uint64_t)ggml_row_size(e->out_type, e->cols) * (uint64_t)e->rows;
        rep->n_params += (uint64_t)(e->rows * e->cols);
    }
    int64_t n_rope = 0;
    if (cfg->rope_scaling == HF_ROPE_LLAMA3) {
        n_rope = cfg->head_dim / 2;
        int64_t ne[1] = {n_rope};
        if (gguf_add_tensor(w, "rope_freqs.weight", GT_F32, 1, ne, err) < 0) goto done;
        total += (uint64_t)n_rope * 4;
    }
    int64_t n_sides = 0;
    for (int64_t i = 0; i < p.n; i++)
        if ((p.entries[i].ct && ct_add_sides(w, &p.entries[i], &n_sides, &total, err)) ||
            (p.entries[i].experts && ct_mark_experts(w, &p.entries[i], cfg->n_experts, err)))
            goto done;
    const int64_t n_extra = arch->n_extra_tensors ? arch->n_extra_tensors(cfg) : 0;
    for (int64_t i = 0; i < n_extra; i++) {
        const char *name;
        const float *values;
        int64_t ne[1];
        arch->extra_tensor(cfg, i, &name, &ne[0], &values);
        if (gguf_add_tensor(w, name, GT_F32, 1, ne, err) < 0) goto done;
        total += (uint64_t)ne[0] * 4;
    }
    int64_t chunk_rows = (int64_t)(CHUNK_BYTES / sizeof(float) / (size_t)max_cols);
    if (chunk_rows < 1) chunk_rows = 1;
    fbuf = malloc((size_t)chunk_rows * (size_t)max_cols * sizeof(float));
    obuf = malloc((size_t)chunk_rows * (size_t)max_cols * sizeof(float));
    if (!fbuf || !obuf) { hfq_fail(err, NULL, "out of memory"); goto done; }
    if (gguf_writer_begin(w, opts->out_path, err)) goto done;
    uint64_t written = 0;
    for (int64_t i = 0; i < p.n; i++)
        if (write_entry(w, st, &p.entries[i], loras, fbuf, obuf, chunk_rows, &written, total, opts, err)) goto done;
    if (n_rope) {
        rope = malloc((size_t)n_rope * sizeof *rope);
        if (!rope) { hfq_fail(err, NULL, "out of memory"); goto done; }
        llama3_rope_factors(cfg, rope, n_rope);
        if (gguf_writer_write_data(w, rope, (uint64_t)n_rope * 4, err)) goto done;
        written += (uint64_t)n_rope * 4;
    }
    for (int64_t i = 0; i < p.n; i++)
        if (p.entries[i].ct && ct_write_sides(w, &p.entries[i], &written, err)) goto done;
    for (int64_t i = 0; i < n_extra; i++) {
        const char *name;
        const float *values;
        int64_t n;
        arch->extra_tensor(cfg, i, &name, &n, &values);
        if (gguf_writer_write_data(w, values, (uint64_t)n * 4, err)) goto done;
        written += (uint64_t)n * 4;
    }
    rep->n_tensors = p.n + (n_rope ? 1 : 0) + n_sides + n_extra;
    rep->data_bytes = written;
    rep->file_type = ftype;
    rc = 0;
done:
    free(rope);
    free(fbuf);
    free(obuf);
    plan_free(&p);
    hf_ct_config_free(ct);
    hf_lora_close(loras);
    st_close(st);
    return rc;
}

/* llama.cpp's adapter GGUF cannot hold a whole tensor or DoRA's magnitudes. */
static int check_adapter_edit(const hf_lora_set *loras, const hf_lora_edit *edit, hfq_error *err) {
    if (edit->replace)
        return hfq_fail(err, hf_lora_dir(loras, 0), "'%s' is stored whole (modules_to_save, or a changed "
                        "base_layer): llama.cpp's LoRA GGUF cannot hold it; merge instead (-o)", edit->base_name);
    if (edit->factors[0].magnitude)
        return hfq_fail(err, hf_lora_dir(loras, 0), "'%s' is DoRA: llama.cpp's LoRA GGUF cannot hold it; merge "
                        "instead (-o)", edit->base_name);
    return 0;
}

/* lora_a and lora_b of one edited tensor, as llama-adapter.cpp reads them:
 * for token_embd a = the factor b [vocab, rank] and b = a^T [hidden, rank];
 * elsewhere a [rank, cols] as is and b [rows, rank] in GGUF row order. The
 * scale that lora_alpha / rank does not give goes into b. */
/* "<tensor><suffix>", the name of an adapter factor, when it fits a GGUF name. */
static int factor_name(char *buf, size_t cap, const char *tensor, const char *suffix, hfq_error *err) {
    int n = snprintf(buf, cap, "%s%s", tensor, suffix);
    if (n < 0 || (size_t)n >= cap)
        return hfq_fail(err, tensor, "adapter tensor name '%s%s' is too long for GGUF", tensor, suffix);
    return 0;
}

static int write_adapter_factors(gguf_writer *w, const plan_entry *e, const hf_lora_factor *f, hfq_error *err) {
    bool embedding = e->map.row->role == ROLE_TOKEN_EMBD;
    int64_t n_out = embedding ? e->cols : e->rows, rank = f->rank;
    float *b = malloc((size_t)(n_out * rank) * sizeof *b);
    if (!b) return hfq_fail(err, NULL, "out of memory");
    for (int64_t i = 0; i < n_out; i++) {
        int64_t src = e->permute_heads ? permuted_source_row(i, e->rows, e->permute_heads) : i;
        for (int64_t k = 0; k < rank; k++) {
            float v = embedding ? f->a[k * e->cols + i] : f->b[src * rank + k];
            b[i * rank + k] = f->rel_scale == 1.0 ? v : (float)(v * f->rel_scale);
        }
    }
    const float *a = embedding ? f->b : f->a;
    uint64_t a_bytes = (uint64_t)(embedding ? e->rows * rank : rank * e->cols) * 4;
    int rc = gguf_writer_write_data(w, a, a_bytes, err);
    if (rc == 0) rc = gguf_writer_write_data(w, b, (uint64_t)(n_out * rank) * 4, err);
    free(b);
    return rc;
}

/* The one adapter alone, in llama.cpp's LoRA GGUF layout (convert.h). */
static int convert_adapter(const hfq_convert_opts *opts, gguf_writer *w, const hf_config *cfg, const hf_arch *arch,
                           hfq_convert_report *rep, hfq_error *err) {
    if (opts->n_loras != 1) return hfq_fail(err, opts->out_path, "an adapter GGUF holds exactly one adapter");
    st_model *st = st_open_dir(opts->model_dir, err);
    if (!st) return -1;
    plan p = {0};
    hf_lora_set *loras = NULL;
    hf_lora_edit *edit = NULL;
    int rc = -1;
    if (build_plan(&p, cfg, arch, st, GT_F32, err)) goto done;
    if (!(loras = hf_lora_open(opts->loras, 1, cfg, arch, st, opts->warn, opts->warn_ctx, err))) goto done;
    int r = 0;
    r |= gguf_set_str(w, "general.architecture", arch->gguf_arch);
    r |= gguf_set_str(w, "general.type", "adapter");
    r |= gguf_set_str(w, "general.name", cfg->name);
    r |= gguf_set_u32(w, "general.file_type", FTYPE_ALL_F32);
    r |= gguf_set_str(w, "adapter.type", "lora");
    r |= gguf_set_f32(w, "adapter.lora.alpha", (float)hf_lora_alpha(loras, 0));
    r |= gguf_set_u32(w, "general.quantization_version", GGML_QUANT_VERSION);
    r |= gguf_set_str(w, "hfq.converter", "hfconv " HFQ_VERSION);
    if (r) { hfq_fail(err, opts->out_path, "cannot set metadata"); goto done; }
    /* tied as build_plan has it (the config's flag, or no lm_head): no output
     * entry, so llama.cpp computes the output with token_embd.weight and, as it
     * finds adapter tensors by name, with the embedding's factors too */
    bool tied = true;
    for (int64_t i = 0; i < p.n; i++) tied &= p.entries[i].map.row->role != ROLE_OUTPUT;
    /* the table first (the factors' shapes), then the data, one tensor's edit at a time */
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < p.n; i++) {
            const plan_entry *e = &p.entries[i];
            if (hf_lora_edit_for(loras, e->src, e->rows, e->cols, &edit, err)) goto done;
            if (!edit) continue;
            if (check_adapter_edit(loras, edit, err)) goto done;
            if (tied && e->map.row->role == ROLE_TOKEN_EMBD) {
                hfq_fail(err, hf_lora_dir(loras, 0), "'%s': an embedding adapter on a tied base cannot be a "
                         "llama.cpp adapter: merge instead (-o)", edit->base_name);
                goto done;
            }
            const hf_lora_factor *f = &edit->factors[0];
            if (pass == 0) {
                bool embedding = e->map.row->role == ROLE_TOKEN_EMBD;
                char name[GGUF_MAX_NAME + 1];
                int64_t ne_a[2] = {embedding ? f->rank : e->cols, embedding ? e->rows : f->rank};
                int64_t ne_b[2] = {f->rank, embedding ? e->cols : e->rows};
                if (factor_name(name, sizeof name, e->name, ".lora_a", err) < 0 ||
                    gguf_add_tensor(w, name, GT_F32, 2, ne_a, err) < 0 ||
                    factor_name(name, sizeof name, e->name, ".lora_b", err) < 0 ||
                    gguf_add_tensor(w, name, GT_F32, 2, ne_b, err) < 0)
                    goto done;
                rep->n_tensors += 2;
                rep->n_params += (uint64_t)(f->rank * (e->rows + e->cols));
            } else if (write_adapter_factors(w, e, f, err)) {
                goto done;
            }
            hf_lora_edit_free(edit);
            edit = NULL;
        }
        if (pass == 0 && rep->n_tensors == 0) {
            hfq_fail(err, hf_lora_dir(loras, 0), "the adapter changes no tensor of the base");
            goto done;
        }
        if (pass == 0 && gguf_writer_begin(w, opts->out_path, err)) goto done;
    }
    rep->data_bytes = rep->n_params * 4;
    rep->file_type = FTYPE_ALL_F32;
    rc = 0;
done:
    hf_lora_edit_free(edit);
    plan_free(&p);
    hf_lora_close(loras);
    st_close(st);
    return rc;
}

/* The keys that change the layer's graph: GeGLU, soft-capping,
 * query_pre_attn_scalar, a sliding window on every layer (Phi-3) or on the
 * layers of the family's pattern (Gemma); refused where the family does not
 * compute them as the config asks. */
static int check_graph_keys(const hf_config *c, const hf_arch *arch, const char *path, hfq_error *err) {
    if (c->gelu_legacy && !arch->gelu_legacy)
        return hfq_fail(err, path, "field '%s' = 'gelu': the exact GELU is not supported", c->act_key);
    if (c->act_key[0] && c->gelu_tanh != arch->gelu_tanh)   /* absent: the family's */
        return hfq_fail(err, path, "field '%s' = '%s': not computed for %s (its feed-forward is %s)",
                        c->act_key[0] ? c->act_key : "hidden_act", c->gelu_tanh ? "gelu_pytorch_tanh" : "silu",
                        arch->gguf_arch, arch->gelu_tanh ? "GeGLU" : "SwiGLU");
    if (c->attn_softcap > 0 && !arch->attn_softcap)
        return hfq_fail(err, path, "field 'attn_logit_softcapping' = %g: soft-capping is not supported for %s",
                        c->attn_softcap, arch->gguf_arch);
    if (c->final_softcap > 0 && !arch->final_softcap)
        return hfq_fail(err, path, "field 'final_logit_softcapping' = %g: soft-capping is not supported for %s",
                        c->final_softcap, arch->gguf_arch);
    if (c->has_query_pre_attn_scalar) {
        /* llama.cpp computes the scale from key_length (or n_embd / n_head, "27B") */
        int64_t want = arch->attn_scale_embd_layers == c->n_layers ? c->hidden_size / c->n_heads : c->head_dim;
        if (!arch->query_pre_attn_scalar || c->query_pre_attn_scalar != (double)want)
            return hfq_fail(err, path, "field 'query_pre_attn_scalar' = %g: only %lld (the scale llama.cpp computes) "
                            "is supported for %s", c->query_pre_attn_scalar, (long long)want, arch->gguf_arch);
    }
    const int64_t n = arch->swa_pattern;
    /* a window as wide as the context changes nothing; Gemma 3's pattern 1: no window */
    if (!c->narrow_window || (n > 0 && c->sliding_window_pattern == 1) || (n == 0 && c->n_sliding_layers == 0))
        return 0;
    if (n == 0 && arch->sliding_window && c->n_sliding_layers == c->n_layers) return 0;
    if (n == 0)
        return hfq_fail(err, path, "field '%s' = %lld: sliding-window attention (%lld of %lld layers, window below "
                        "the context %lld) is not supported", c->window_key, (long long)c->sliding_window,
                        (long long)c->n_sliding_layers, (long long)c->n_layers, (long long)c->context_length);
    /* GGUF says only "every layer but each n-th slides" (llama.cpp's pattern) */
    for (int64_t i = 0; i < c->n_layers; i++) {
        bool slides = i % n < n - 1;
        bool given = c->has_layer_types ? c->layer_sliding[i] != 0
                     : c->sliding_window_pattern > 0 ? (i + 1) % c->sliding_window_pattern != 0 : slides;
        if (given != slides)
            return hfq_fail(err, path, "field '%s': layer %lld is %s; %s slides all layers but every %lld-th",
                            c->has_layer_types ? "layer_types" : "sliding_window_pattern", (long long)i,
                            given ? "sliding" : "full attention", arch->gguf_arch, (long long)n);
    }
    return 0;
}

/* The config keys whose meaning depends on the family (config.c refuses
 * those no family computes): refused where this family lacks them. */
static int check_family_keys(const hf_config *c, const hf_arch *arch, const char *path, hfq_error *err) {
    if (c->rope_scaling == HF_ROPE_LONGROPE && !arch->longrope)
        return hfq_fail(err, path, "field '%s' asks for rope type 'longrope': not implemented for %s", c->rope_key,
                        arch->gguf_arch);
    /* q/k/v (and o) biases: a family with bias rows has them anyway (Qwen2) */
    bool has_bias_rows = false;
    const hf_tensor_row *row;
    for (size_t i = 0; (row = hf_arch_layer_row(arch, i)); i++) has_bias_rows |= row->role == ROLE_ATTN_Q_BIAS;
    if (c->attention_bias && !has_bias_rows)
        return hfq_fail(err, path, "field 'attention_bias' = true: %s has no attention biases", arch->gguf_arch);
    if (c->partial_rotary_factor != 1.0 && !arch->partial_rotary)
        return hfq_fail(err, path, "field '%s' = %g: partial rotary embeddings are not supported for %s",
                        c->partial_rotary_key, c->partial_rotary_factor, arch->gguf_arch);
    if (check_graph_keys(c, arch, path, err)) return -1;
    bool moe = hf_arch_has_experts(arch);
    if (c->n_experts > 0 && !moe)
        return hfq_fail(err, path, "config.json gives %lld experts: %s has none", (long long)c->n_experts,
                        c->architecture);
    if (c->n_dense_layers > 0 && !arch->dense_layers)
        return hfq_fail(err, path, "mlp_only_layers / decoder_sparse_step make %lld of %lld layers dense: %s has no "
                        "dense layers", (long long)c->n_dense_layers, (long long)c->n_layers, c->architecture);
    if (moe && c->n_experts == 0)
        return hfq_fail(err, path, "missing required field 'num_local_experts' (or 'num_experts') for %s",
                        c->architecture);
    return arch->check_config ? arch->check_config(c, path, err) : 0;
}

int hfq_convert(const hfq_convert_opts *opts, hfq_convert_report *rep, hfq_error *err) {
    memset(rep, 0, sizeof *rep);
    gguf_writer *w = gguf_writer_new();
    if (!w) return hfq_fail(err, NULL, "out of memory");
    hfq_vocab *vocab = NULL;
    int rc = -1;
    hf_config cfg;
    const hf_arch *arch = NULL;
    char cfg_path[4096];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", opts->model_dir);
    FILE *probe = opts->vocab_only ? fopen(cfg_path, "rb") : NULL;
    bool want_config = !opts->vocab_only || probe;
    if (probe) fclose(probe);
    if (want_config) {
        if (hf_config_load_defaults(&cfg, opts->model_dir, hf_arch_config_defaults, err)) goto done;
        if (!(arch = hf_arch_find(cfg.architecture, cfg_path, err))) goto done;
        if (check_family_keys(&cfg, arch, cfg_path, err)) goto done;
        snprintf(rep->gguf_arch, sizeof rep->gguf_arch, "%s", arch->gguf_arch);
    }
    /* an adapter GGUF carries no tokenizer */
    if (!opts->adapter_only &&
        !(vocab = hfq_vocab_from_dir_as(opts->model_dir, arch ? arch->vocab_rules : HFQ_VOCAB_SPM_LLAMA, err)))
        goto done;
    if (opts->vocab_only) {
        if (want_config ? write_hparams(w, &cfg, arch, FTYPE_ALL_F32)
                        : gguf_set_str(w, "general.architecture", "llama")) {
            hfq_fail(err, opts->out_path, "cannot set metadata");
            goto done;
        }
        if (!want_config) snprintf(rep->gguf_arch, sizeof rep->gguf_arch, "llama");
        if (hfq_vocab_to_gguf(vocab, w, err)) goto done;
        if (gguf_writer_begin(w, opts->out_path, err)) goto done;
    } else if (opts->adapter_only) {
        if (convert_adapter(opts, w, &cfg, arch, rep, err)) goto done;
    } else {
        if (convert_weights(opts, w, &cfg, arch, vocab, rep, err)) goto done;
    }
    rc = gguf_writer_finish(w, err);
done:
    hfq_vocab_free(vocab);
    gguf_writer_free(w);
    return rc;
}
