/* plan.c - weight plans and the arena layout of the CUDA backend (plan.h). */
#include "kernels/cuda/plan.h"

#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/qtype.h"

/* Weight format -> activation format (the CPU backend's pairing) and the
 * GEMM path of its batches. */
typedef struct fmt_row {
    uint32_t ggml;           /* ggml type id; GT_I8 for the hfq.qext encodings */
    hfq_qext qext;
    cuda_act act;
    hfq_qtype act_qtype;     /* quantized activation rows; HFQ_QT_F32: none */
    cuda_gemm gemm;
} fmt_row;

static const fmt_row fmt_rows[CUDA_WF_COUNT] = {
    [CUDA_WF_F32] = {GT_F32, HFQ_QEXT_NONE, CUDA_ACT_F32, HFQ_QT_F32, CUDA_GEMM_F32},
    [CUDA_WF_F16] = {GT_F16, HFQ_QEXT_NONE, CUDA_ACT_F16, HFQ_QT_F32, CUDA_GEMM_F16},
    [CUDA_WF_BF16] = {GT_BF16, HFQ_QEXT_NONE, CUDA_ACT_BF16, HFQ_QT_F32, CUDA_GEMM_BF16},
    [CUDA_WF_Q8_0] = {GT_Q8_0, HFQ_QEXT_NONE, CUDA_ACT_Q8_0, HFQ_QT_Q8_0, CUDA_GEMM_DEQUANT},
    [CUDA_WF_Q4_0] = {GT_Q4_0, HFQ_QEXT_NONE, CUDA_ACT_Q8_0, HFQ_QT_Q8_0, CUDA_GEMM_DEQUANT},
    [CUDA_WF_Q5_0] = {GT_Q5_0, HFQ_QEXT_NONE, CUDA_ACT_Q8_0, HFQ_QT_Q8_0, CUDA_GEMM_DEQUANT},
    [CUDA_WF_Q5_1] = {GT_Q5_1, HFQ_QEXT_NONE, CUDA_ACT_Q8_1, HFQ_QT_Q8_1, CUDA_GEMM_DEQUANT},
    [CUDA_WF_Q4_K] = {GT_Q4_K, HFQ_QEXT_NONE, CUDA_ACT_Q8_K, HFQ_QT_Q8_K, CUDA_GEMM_DEQUANT},
    [CUDA_WF_Q5_K] = {GT_Q5_K, HFQ_QEXT_NONE, CUDA_ACT_Q8_K, HFQ_QT_Q8_K, CUDA_GEMM_DEQUANT},
    [CUDA_WF_Q6_K] = {GT_Q6_K, HFQ_QEXT_NONE, CUDA_ACT_Q8_K, HFQ_QT_Q8_K, CUDA_GEMM_DEQUANT},
    [CUDA_WF_MXFP4] = {GT_MXFP4, HFQ_QEXT_NONE, CUDA_ACT_Q8_0, HFQ_QT_Q8_0, CUDA_GEMM_DEQUANT},
    [CUDA_WF_NVFP4] = {GT_NVFP4, HFQ_QEXT_NONE, CUDA_ACT_Q8_0, HFQ_QT_Q8_0, CUDA_GEMM_DEQUANT},
    [CUDA_WF_INT8] = {GT_I8, HFQ_QEXT_INT8, CUDA_ACT_INT8, HFQ_QT_INT8, CUDA_GEMM_DEQUANT},
    [CUDA_WF_FP8_E4M3] = {GT_I8, HFQ_QEXT_FP8_E4M3, CUDA_ACT_FP8_E4M3, HFQ_QT_FP8_E4M3, CUDA_GEMM_FP8},
    [CUDA_WF_FP8_E5M2] = {GT_I8, HFQ_QEXT_FP8_E5M2, CUDA_ACT_FP8_E5M2, HFQ_QT_FP8_E5M2, CUDA_GEMM_DEQUANT},
};

/* cuBLASLt FP8 products want every dimension a multiple of 16. */
#define FP8_GEMM_MULTIPLE 16

static bool mul_size(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

static bool round_up(size_t n, size_t *out) {
    if (n > SIZE_MAX - (CUDA_ALIGN - 1)) return false;
    *out = (n + CUDA_ALIGN - 1) / CUDA_ALIGN * CUDA_ALIGN;
    return true;
}

int64_t cuda_i8_scale_count(const hfq_tensor *w) { return w->scale_groups ? w->ne1 * w->scale_groups : 1; }

int cuda_wplan_get(const hfq_tensor *w, const cuda_caps *caps, cuda_wplan *p, const char *where, hfq_error *err) {
    int f = 0;
    while (f < CUDA_WF_COUNT && !(fmt_rows[f].ggml == w->type && fmt_rows[f].qext == w->qext)) f++;
    const ggml_type_info *gt = ggml_type_get(w->type);
    if (f == CUDA_WF_COUNT || !gt)
        return hfq_fail(err, where, "tensor '%s': type %s is not supported by the cuda backend", w->name,
                        gt ? gt->name : "?");
    const fmt_row *r = &fmt_rows[f];
    *p = (cuda_wplan){.fmt = (cuda_wfmt)f, .act = r->act, .block_elems = gt->block_size,
                      .block_bytes = (size_t)gt->type_size, .gemm = r->gemm};
    if (w->scale_experts)
        return hfq_fail(err, where, "tensor '%s': per-expert scales are not supported by the cuda backend (the cpu "
                        "backend runs them)", w->name);
    if ((w->qext == HFQ_QEXT_FP8_E4M3 || w->qext == HFQ_QEXT_FP8_E5M2) && w->scale_groups > 1)
        return hfq_fail(err, where, "tensor '%s': FP8 scales per group or 128x128 block are not supported by the cuda "
                        "backend (the cpu backend runs them)", w->name);
    if (w->ne0 <= 0 || w->ne1 <= 0 || w->ne0 % gt->block_size)
        return hfq_fail(err, where, "tensor '%s': row length %lld is not a multiple of the %s block size %lld",
                        w->name, (long long)w->ne0, gt->name, (long long)gt->block_size);
    if (r->act_qtype != HFQ_QT_F32) {
        const int64_t bytes = hfq_qtype_row_size(r->act_qtype, w->ne0);
        if (bytes < 0)
            return hfq_fail(err, where, "tensor '%s': row length %lld does not fit %s activation blocks", w->name,
                            (long long)w->ne0, hfq_qtype_get(r->act_qtype)->name);
        p->act_row_bytes = (size_t)bytes;
    }
    p->raw_codes = w->qext != HFQ_QEXT_NONE && w->scale_groups <= 1;
    if (p->gemm == CUDA_GEMM_FP8 && !(caps->fp8_gemm && w->ne0 % FP8_GEMM_MULTIPLE == 0))
        p->gemm = CUDA_GEMM_DEQUANT;
    if (!(mul_size((size_t)w->ne0, (size_t)w->ne1, &p->scratch_bytes) &&
          mul_size(p->scratch_bytes, 2, &p->scratch_bytes)))
        return hfq_fail(err, where, "tensor '%s': too large", w->name);
    *p = cuda_wplan_rows(p, w->ne0, w->ne1);
    return 0;
}

cuda_wplan cuda_wplan_rows(const cuda_wplan *p, int64_t ne0, int64_t n_rows) {
    cuda_wplan r = *p;
    if (r.gemm == CUDA_GEMM_FP8 && n_rows % FP8_GEMM_MULTIPLE != 0) r.gemm = CUDA_GEMM_DEQUANT;
    /* no overflow: n_rows is at most the matrix's rows, checked in cuda_wplan_get */
    r.scratch_bytes = r.gemm == CUDA_GEMM_DEQUANT || r.gemm == CUDA_GEMM_FP8 ? (size_t)ne0 * (size_t)n_rows * 2 : 0;
    return r;
}

/* ---- layout ---- */

typedef struct builder {
    cuda_layout *l;
    size_t cap;
    const cuda_caps *caps;
    const char *path;
    hfq_error *err;
} builder;

static bool same_tensor(const hfq_tensor *a, const hfq_tensor *b) {
    return a->data == b->data && a->type == b->type && a->qext == b->qext && a->ne0 == b->ne0 && a->ne1 == b->ne1 &&
           a->row_bytes == b->row_bytes && a->scale == b->scale && a->scale_groups == b->scale_groups;
}

static int add_slot(builder *b, const hfq_tensor *t, bool matrix) {
    if (!t->data) return 0;   /* an absent bias */
    cuda_layout *l = b->l;
    if (l->n_slots == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        cuda_slot *s = realloc(l->slots, cap * sizeof *s);
        if (!s) return hfq_fail(b->err, b->path, "out of memory for the cuda weight layout");
        l->slots = s;
        b->cap = cap;
    }
    cuda_slot s = {.t = *t, .matrix = matrix};
    if (!mul_size((size_t)t->ne1, t->row_bytes, &s.bytes))
        return hfq_fail(b->err, b->path, "tensor '%s': too large", t->name);
    if (matrix) {
        if (cuda_wplan_get(t, b->caps, &s.plan, b->path, b->err)) return -1;
        if (t->qext) s.scales_bytes = (size_t)cuda_i8_scale_count(t) * sizeof(float);
    }
    l->slots[l->n_slots++] = s;
    return 0;
}

static int add_matrix(void *user, const hfq_tensor *t) { return add_slot(user, t, true); }

static int by_data(const void *a, const void *b) {
    const char *x = ((const cuda_slot *)a)->t.data, *y = ((const cuda_slot *)b)->t.data;
    return x < y ? -1 : x > y;
}

static int add_vectors(builder *b, const hfq_model *m) {
    if (add_slot(b, hfq_model_output_norm(m), false)) return -1;
    for (int64_t il = 0; il < hfq_model_hparams(m)->n_layer; il++) {
        const hfq_layer *ly = hfq_model_layer(m, il);
        const hfq_tensor *v[] = {&ly->attn_norm, &ly->ffn_norm, &ly->bq, &ly->bk, &ly->bv, &ly->q_norm, &ly->k_norm};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            if (add_slot(b, v[i], false)) return -1;
    }
    return 0;
}

/* Bytes of n_tokens rows of n values of `size` bytes, rounded up to CUDA_ALIGN; false on overflow. */
static bool rows_bytes(int64_t n, int64_t n_tokens, size_t size, size_t *out) {
    return mul_size((size_t)n, (size_t)n_tokens, out) && mul_size(*out, size, out) && round_up(*out, out);
}

/* Arena offsets in address order; sizes of the scratch buffers. */
static int place(cuda_layout *l, int64_t max_tokens, const char *path, hfq_error *err) {
    const bool gemm = max_tokens > CUDA_MATVEC_MAX_TOKENS;
    size_t at = 0;
    for (size_t i = 0; i < l->n_slots; i++) {
        cuda_slot *s = &l->slots[i];
        size_t n;
        s->offset = at;
        if (!round_up(s->bytes, &n) || n > SIZE_MAX - at) goto too_large;
        at += n;
        if (s->scales_bytes) {
            s->scales_offset = at;
            if (!round_up(s->scales_bytes, &n) || n > SIZE_MAX - at) goto too_large;
            at += n;
        }
        if (!s->matrix) continue;
        const cuda_wplan *p = &s->plan;
        if (!rows_bytes(max_tokens, 1, p->act_row_bytes, &n)) goto too_large;
        if (n > l->act_bytes) l->act_bytes = n;
        if (!gemm) continue;
        if (p->gemm != CUDA_GEMM_F32) {
            if (!rows_bytes(s->t.ne0, max_tokens, 2, &n)) goto too_large;
            if (n > l->half_bytes) l->half_bytes = n;
        }
        if (!round_up(p->scratch_bytes, &n)) goto too_large;
        if (n > l->wscratch_bytes) l->wscratch_bytes = n;
        if (p->gemm == CUDA_GEMM_FP8) l->any_fp8_gemm = true;
    }
    l->arena_bytes = at;
    return 0;
too_large:
    return hfq_fail(err, path, "the model is too large for the cuda backend's address space");
}

/* Drops slots that read the same bytes the same way as an earlier one. */
static void dedupe(cuda_layout *l) {
    size_t kept = 0;
    for (size_t i = 0; i < l->n_slots; i++) {
        bool dup = false;
        for (size_t j = kept; j-- > 0 && l->slots[j].t.data == l->slots[i].t.data;)
            if (same_tensor(&l->slots[j].t, &l->slots[i].t)) dup = true;
        if (!dup) l->slots[kept++] = l->slots[i];
    }
    l->n_slots = kept;
}

/* Stacked expert tensors are multiplied one expert's rows at a time. */
static void plan_experts(cuda_layout *l, const hfq_model *m) {
    const hfq_hparams *hp = hfq_model_hparams(m);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const hfq_layer *ly = hfq_model_layer(m, il);
        const hfq_tensor *stacked[] = {&ly->gate_exps, &ly->up_exps, &ly->down_exps};
        for (size_t i = 0; ly->ffn_gate_inp.data && i < sizeof stacked / sizeof stacked[0]; i++) {
            cuda_slot *s = (cuda_slot *)cuda_layout_find(l, stacked[i]);
            if (s) s->plan = cuda_wplan_rows(&s->plan, stacked[i]->ne0, stacked[i]->ne1 / hp->n_expert);
        }
    }
}

int cuda_layout_build(const hfq_model *m, const cuda_caps *caps, int64_t max_tokens, cuda_layout *l,
                      hfq_error *err) {
    memset(l, 0, sizeof *l);
    builder b = {.l = l, .caps = caps, .path = hfq_model_path(m), .err = err};
    if (max_tokens < 1) max_tokens = 1;
    if (hfq_model_each_matrix(m, add_matrix, &b) || add_vectors(&b, m)) goto fail;
    qsort(l->slots, l->n_slots, sizeof *l->slots, by_data);
    dedupe(l);
    plan_experts(l, m);
    if (place(l, max_tokens, b.path, err)) goto fail;
    return 0;
fail:
    cuda_layout_free(l);
    return -1;
}

void cuda_layout_free(cuda_layout *l) {
    free(l->slots);
    memset(l, 0, sizeof *l);
}

const cuda_slot *cuda_layout_find(const cuda_layout *l, const hfq_tensor *t) {
    size_t lo = 0, hi = l->n_slots;
    while (lo < hi) {   /* the first slot whose data is not below t's */
        size_t mid = lo + (hi - lo) / 2;
        if ((const char *)l->slots[mid].t.data < (const char *)t->data) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < l->n_slots && l->slots[lo].t.data == t->data; lo++)
        if (same_tensor(&l->slots[lo].t, t)) return &l->slots[lo];
    return NULL;
}

const cuda_slot *cuda_layout_find_rows(const cuda_layout *l, const hfq_tensor *t, int64_t *row0) {
    *row0 = 0;
    const cuda_slot *s = cuda_layout_find(l, t);
    if (s) return s;
    const char *at = t->data;
    size_t hi = l->n_slots;   /* past the last slot whose data is not above t's */
    for (size_t lo = 0; lo < hi;) {
        size_t mid = lo + (hi - lo) / 2;
        if ((const char *)l->slots[mid].t.data <= at) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = hi; i-- > 0;) {
        const hfq_tensor *st = &l->slots[i].t;
        const size_t off = (size_t)(at - (const char *)st->data);
        if (!l->slots[i].matrix || st->type != t->type || st->qext != t->qext || st->ne0 != t->ne0 ||
            st->row_bytes != t->row_bytes || st->scale_groups != t->scale_groups || off % st->row_bytes != 0 ||
            st->input_scale != t->input_scale || st->act_none != t->act_none)
            continue;
        const int64_t r = (int64_t)(off / st->row_bytes);
        const float *scale = st->scale && st->scale_groups ? st->scale + r * st->scale_groups : st->scale;
        if (r + t->ne1 <= st->ne1 && scale == t->scale) {
            *row0 = r;
            return &l->slots[i];
        }
    }
    return NULL;
}

typedef struct act_check {
    hfq_act_quant aq;
    const char *path;
    hfq_error *err;
} act_check;

static int check_act(void *user, const hfq_tensor *w) {
    const act_check *c = user;
    const hfq_act_quant aq = c->aq;
    if (aq == HFQ_ACT_QUANT_STATIC && (w->qext || w->type == GT_NVFP4) && !w->input_scale)
        return hfq_fail(c->err, c->path, "tensor '%s' has no input_scale for static activation quantization", w->name);
    const char *what = NULL;
    if (w->rot_block) what = "block Hadamard rotations of the inputs (hfq.block_rotate)";
    else if (w->qext && (aq == HFQ_ACT_QUANT_NONE || (aq == HFQ_ACT_QUANT_AUTO && w->act_none)))
        what = "float activations of int8/fp8 weights";
    else if (!w->qext && w->act_none && (aq == HFQ_ACT_QUANT_NONE || aq == HFQ_ACT_QUANT_AUTO))
        what = "float activations of nvfp4/mxfp4 weights";
    else if (w->qext && aq == HFQ_ACT_QUANT_DYNAMIC && w->input_scale) what = "per-token activation scales in place of input_scale";
    else if (!w->qext && w->type == GT_NVFP4 && (aq == HFQ_ACT_QUANT_DYNAMIC || aq == HFQ_ACT_QUANT_STATIC ||
                                                 (aq == HFQ_ACT_QUANT_AUTO && w->input_scale)))
        what = "NVFP4 activations (W4A4)";
    else if (w->act_mxfp4 && (aq == HFQ_ACT_QUANT_AUTO || aq == HFQ_ACT_QUANT_DYNAMIC))
        what = "MXFP4 activations (W4A4)";
    else if (w->act_int8_ct && (aq == HFQ_ACT_QUANT_AUTO || aq == HFQ_ACT_QUANT_DYNAMIC))
        what = "compressed-tensors' per-token int8 activations (amax / 127.5)";
    else if (w->act_fp8_group && (aq == HFQ_ACT_QUANT_AUTO || aq == HFQ_ACT_QUANT_DYNAMIC))
        what = "per-group FP8 activations of float weights";
    return what ? hfq_fail(c->err, c->path, "tensor '%s': %s are not supported by the cuda backend (the cpu backend "
                           "computes them)", w->name, what)
                : 0;
}

int cuda_act_quant_check(const hfq_model *m, hfq_act_quant aq, hfq_error *err) {
    act_check c = {aq, hfq_model_path(m), err};
    return hfq_model_each_matrix(m, check_act, &c);
}
