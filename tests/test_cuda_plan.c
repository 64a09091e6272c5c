/* test_cuda_plan.c - the CUDA backend's host-side decisions (kernels/cuda/plan.h),
 * which need no GPU: every weight format gets the activation format the CPU
 * backend pairs it with (quant/qtype.h's vec_dot_type; I8 codes per token), a
 * GEMM path that keeps that pairing, refusals named like the CPU's; the arena
 * holds every tensor the forward pass reads once, aligned and disjoint, a
 * tied output sharing the embedding's copy; scratch sizes cover the largest
 * batch. */
#include "check.h"
#include "formats/ggml_type.h"
#include "kernels/cuda/plan.h"
#include "quant/qtype.h"
#include "test_runner_synth.h"

static const cuda_caps no_fp8 = {.fp8_gemm = false}, fp8 = {.fp8_gemm = true};

static hfq_tensor matrix(uint32_t type, hfq_qext q, int64_t ne0, int64_t ne1, int64_t groups) {
    static const float scales[1] = {1.0f};
    return (hfq_tensor){.name = "blk.0.attn_q.weight", .type = type, .ne0 = ne0, .ne1 = ne1,
                        .row_bytes = (size_t)ggml_row_size(type, ne0), .data = scales, .qext = q,
                        .scale = q ? scales : NULL, .scale_groups = groups};
}

/* The CPU's activation format for a weight format, as a cuda_act. */
static cuda_act cpu_act(uint32_t type) {
    switch (hfq_qtype_get((hfq_qtype)hfq_qtype_from_ggml(type))->vec_dot_type) {
    case HFQ_QT_F32: return CUDA_ACT_F32;
    case HFQ_QT_F16: return CUDA_ACT_F16;
    case HFQ_QT_BF16: return CUDA_ACT_BF16;
    case HFQ_QT_Q8_0: return CUDA_ACT_Q8_0;
    case HFQ_QT_Q8_1: return CUDA_ACT_Q8_1;
    default: return CUDA_ACT_Q8_K;
    }
}

static void test_ggml_formats(void) {
    static const uint32_t types[] = {GT_F32, GT_F16, GT_BF16, GT_Q8_0, GT_Q4_0, GT_Q5_0, GT_Q5_1,
                                     GT_Q4_K, GT_Q5_K, GT_Q6_K, GT_MXFP4, GT_NVFP4};
    const int64_t ne0 = 512, ne1 = 48;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const uint32_t type = types[i];
        const char *name = ggml_type_get(type)->name;
        hfq_tensor w = matrix(type, HFQ_QEXT_NONE, ne0, ne1, 0);
        cuda_wplan p;
        hfq_error err = {{0}};
        CHECK_MSG(cuda_wplan_get(&w, &fp8, &p, "x.gguf", &err) == 0, "%s: %s", name, err.msg);
        const hfq_qtype_traits *wt = hfq_qtype_get((hfq_qtype)hfq_qtype_from_ggml(type));
        CHECK_MSG(p.act == cpu_act(type), "%s: activation format %d", name, (int)p.act);
        CHECK((int64_t)p.block_bytes == wt->type_size && p.block_elems == wt->block_size);
        const bool plain = type == GT_F32 || type == GT_F16 || type == GT_BF16;
        const size_t act_bytes = plain ? 0 : (size_t)hfq_qtype_row_size(wt->vec_dot_type, ne0);
        CHECK_MSG(p.act_row_bytes == act_bytes, "%s: activation row %zu bytes", name, p.act_row_bytes);
        /* plain types multiply their stored rows; the others need a decoded copy */
        CHECK_MSG(plain ? p.scratch_bytes == 0 && p.gemm != CUDA_GEMM_DEQUANT
                        : p.scratch_bytes == (size_t)(ne0 * ne1 * 2) && p.gemm == CUDA_GEMM_DEQUANT,
                  "%s: gemm %d scratch %zu", name, (int)p.gemm, p.scratch_bytes);
        CHECK(!p.raw_codes);
    }
}

static void test_i8_formats(void) {
    static const hfq_qext encodings[] = {HFQ_QEXT_INT8, HFQ_QEXT_FP8_E4M3, HFQ_QEXT_FP8_E5M2};
    static const cuda_act acts[] = {CUDA_ACT_INT8, CUDA_ACT_FP8_E4M3, CUDA_ACT_FP8_E5M2};
    for (size_t i = 0; i < 3; i++) {
        for (int64_t groups = 0; groups <= (encodings[i] == HFQ_QEXT_INT8 ? 4 : 1); groups++) {
            hfq_tensor w = matrix(GT_I8, encodings[i], 64, 32, groups);
            cuda_wplan p;
            hfq_error err = {{0}};
            CHECK_MSG(cuda_wplan_get(&w, &fp8, &p, "x.gguf", &err) == 0, "%s", err.msg);
            CHECK(p.act == acts[i] && p.act_row_bytes == 64 && p.block_bytes == 1);
            /* one scale per row or tensor: codes are exact in BF16, scales come after */
            CHECK_MSG(p.raw_codes == (groups <= 1), "encoding %d groups %lld", (int)i, (long long)groups);
            /* cuBLASLt FP8 takes E4M3 codes only, and only when the device has it */
            CHECK((p.gemm == CUDA_GEMM_FP8) == (encodings[i] == HFQ_QEXT_FP8_E4M3));
            CHECK(p.scratch_bytes == 64 * 32 * 2);   /* FP8's fallback needs it too */
            cuda_wplan q;
            CHECK(cuda_wplan_get(&w, &no_fp8, &q, "x.gguf", &err) == 0 && q.gemm == CUDA_GEMM_DEQUANT);
        }
    }
    /* FP8 GEMMs want dimensions in multiples of 16 */
    hfq_tensor odd = matrix(GT_I8, HFQ_QEXT_FP8_E4M3, 40, 32, 1);
    cuda_wplan p;
    CHECK(cuda_wplan_get(&odd, &fp8, &p, "x.gguf", NULL) == 0 && p.gemm == CUDA_GEMM_DEQUANT);
}

static void expect_refused(hfq_tensor w, const char *want) {
    cuda_wplan p;
    hfq_error err = {{0}};
    CHECK(cuda_wplan_get(&w, &fp8, &p, "x.gguf", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK(strncmp(err.msg, "x.gguf: ", 8) == 0 && !strchr(err.msg, '\n'));
}

static void test_refused(void) {
    expect_refused(matrix(GT_I32, HFQ_QEXT_NONE, 64, 4, 0),
                   "tensor 'blk.0.attn_q.weight': type i32 is not supported by the cuda backend");
    expect_refused(matrix(GT_Q4_1, HFQ_QEXT_NONE, 64, 4, 0), "type q4_1 is not supported by the cuda backend");
    expect_refused(matrix(GT_I8, HFQ_QEXT_NONE, 64, 4, 0), "type i8 is not supported by the cuda backend");
    hfq_tensor q8 = matrix(GT_Q8_0, HFQ_QEXT_NONE, 64, 4, 0);
    q8.ne0 = 48;
    expect_refused(q8, "row length 48 is not a multiple of the q8_0 block size 32");
}

/* Every tensor the forward pass reads has a slot; slots are aligned,
 * disjoint and inside the arena. */
static void check_layout(const hfq_model *m, const cuda_layout *l, const char *label) {
    const hfq_tensor *tensors[256];
    int n = 0;
    tensors[n++] = hfq_model_tok_embd(m);
    tensors[n++] = hfq_model_output(m);
    tensors[n++] = hfq_model_output_norm(m);
    for (int64_t il = 0; il < hfq_model_hparams(m)->n_layer; il++) {
        const hfq_layer *ly = hfq_model_layer(m, il);
        const hfq_tensor *t[] = {&ly->attn_norm, &ly->wq, &ly->wk, &ly->wv, &ly->bq, &ly->bk, &ly->bv,
                                 &ly->wo, &ly->ffn_norm, &ly->w_gate, &ly->w_up, &ly->w_down,
                                 &ly->ffn_gate_inp, &ly->gate_exps, &ly->up_exps, &ly->down_exps};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            if (t[i]->data) tensors[n++] = t[i];
    }
    for (int i = 0; i < n; i++) {
        const cuda_slot *s = cuda_layout_find(l, tensors[i]);
        CHECK_MSG(s != NULL, "%s: no slot for %s", label, tensors[i]->name);
        if (!s) continue;
        CHECK(s->bytes == (size_t)tensors[i]->ne1 * tensors[i]->row_bytes);
        CHECK(s->matrix == (tensors[i]->ne1 > 1));
    }
    size_t end = 0;
    for (size_t i = 0; i < l->n_slots; i++) {
        const cuda_slot *s = &l->slots[i];
        CHECK_MSG(s->offset % CUDA_ALIGN == 0 && s->offset >= end, "%s: slot %zu at %zu", label, i, s->offset);
        end = s->offset + s->bytes;
        if (s->scales_bytes) {
            CHECK(s->scales_offset % CUDA_ALIGN == 0 && s->scales_offset >= end);
            CHECK(s->scales_bytes == (size_t)cuda_i8_scale_count(&s->t) * sizeof(float));
            end = s->scales_offset + s->scales_bytes;
        }
    }
    CHECK(end <= l->arena_bytes);
    /* no tensor twice: as many slots as distinct tensors */
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= tensors[j]->data == tensors[i]->data;
        distinct += !seen;
    }
    CHECK_MSG((size_t)distinct == l->n_slots, "%s: %zu slots for %d tensors", label, l->n_slots, distinct);
}

/* Scratch bounds from the matrices themselves. */
static void check_scratch(const hfq_model *m, const cuda_layout *l, int64_t max_tokens, const char *label) {
    size_t act = 0, half = 0, wscratch = 0;
    for (size_t i = 0; i < l->n_slots; i++) {
        const cuda_slot *s = &l->slots[i];
        if (!s->matrix) continue;
        /* stacked experts are multiplied one expert's rows at a time */
        const int64_t n_exp = strstr(s->t.name, "_exps.") ? hfq_model_hparams(m)->n_expert : 1;
        const size_t ne0 = (size_t)s->t.ne0, ne1 = (size_t)(s->t.ne1 / n_exp);
        if (s->plan.act_row_bytes * (size_t)max_tokens > act) act = s->plan.act_row_bytes * (size_t)max_tokens;
        if (s->plan.gemm != CUDA_GEMM_F32 && ne0 * (size_t)max_tokens * 2 > half) half = ne0 * (size_t)max_tokens * 2;
        if (s->plan.gemm >= CUDA_GEMM_DEQUANT && ne0 * ne1 * 2 > wscratch) wscratch = ne0 * ne1 * 2;
    }
    const bool gemm = max_tokens > CUDA_MATVEC_MAX_TOKENS;
    CHECK_MSG(l->act_bytes >= act && l->act_bytes < act + CUDA_ALIGN, "%s: act %zu for %zu", label, l->act_bytes, act);
    CHECK_MSG(gemm ? l->half_bytes >= half && l->half_bytes < half + CUDA_ALIGN : l->half_bytes == 0,
              "%s: half %zu for %zu", label, l->half_bytes, half);
    CHECK_MSG(gemm ? l->wscratch_bytes >= wscratch && l->wscratch_bytes < wscratch + CUDA_ALIGN
                   : l->wscratch_bytes == 0,
              "%s: wscratch %zu for %zu", label, l->wscratch_bytes, wscratch);
}

/* Each expert's slice (hfq_expert_slice) is found as rows of its stacked
 * tensor's slot, with that slot's per-expert plan; a descriptor between
 * rows, or past the tensor, is not. */
static void check_expert_slices(const hfq_model *m, const cuda_layout *l, const char *label) {
    const hfq_hparams *hp = hfq_model_hparams(m);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const hfq_layer *ly = hfq_model_layer(m, il);
        const hfq_tensor *stacked[] = {&ly->gate_exps, &ly->up_exps, &ly->down_exps};
        for (size_t i = 0; i < 3; i++) {
            const cuda_slot *whole = cuda_layout_find(l, stacked[i]);
            CHECK_MSG(whole != NULL, "%s: no slot for %s", label, stacked[i]->name);
            if (!whole) continue;
            const int64_t rows = stacked[i]->ne1 / hp->n_expert;
            CHECK(whole->plan.scratch_bytes == (whole->plan.gemm >= CUDA_GEMM_DEQUANT
                                                ? (size_t)(stacked[i]->ne0 * rows * 2) : 0));
            for (int64_t e = 0; e < hp->n_expert; e++) {
                const hfq_tensor slice = hfq_expert_slice(stacked[i], hp->n_expert, e);
                int64_t row0 = -1;
                CHECK_MSG(cuda_layout_find_rows(l, &slice, &row0) == whole && row0 == e * rows,
                          "%s: %s expert %lld at row %lld", label, stacked[i]->name, (long long)e, (long long)row0);
            }
            hfq_tensor off = hfq_expert_slice(stacked[i], hp->n_expert, 1);
            off.data = (const char *)off.data + 1;
            int64_t row0;
            CHECK(cuda_layout_find_rows(l, &off, &row0) == NULL);
            off = hfq_expert_slice(stacked[i], hp->n_expert, hp->n_expert - 1);
            off.ne1 += 1;
            CHECK(cuda_layout_find_rows(l, &off, &row0) == NULL);
        }
    }
}

static void layout_case(synth_spec s, const cuda_caps *caps, const char *label, bool want_fp8_gemm) {
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    CHECK_MSG(m != NULL, "%s: %s", label, err.msg);
    if (!m) {
        synth_free(&sm);
        return;
    }
    for (int64_t max_tokens = 1; max_tokens <= 64; max_tokens *= 8) {
        cuda_layout l;
        CHECK_MSG(cuda_layout_build(m, caps, max_tokens, &l, &err) == 0, "%s: %s", label, err.msg);
        check_layout(m, &l, label);
        check_scratch(m, &l, max_tokens, label);
        if (s.n_expert) check_expert_slices(m, &l, label);
        CHECK_MSG(l.any_fp8_gemm == (want_fp8_gemm && max_tokens > CUDA_MATVEC_MAX_TOKENS), "%s: fp8 gemm", label);
        /* the tied output is the embedding's copy */
        CHECK(cuda_layout_find(&l, hfq_model_output(m)) == cuda_layout_find(&l, hfq_model_tok_embd(m)) || !s.tied);
        /* a descriptor of the same bytes read another way is not on the device */
        hfq_tensor other = *hfq_model_tok_embd(m);
        other.type = other.type == GT_F16 ? GT_BF16 : GT_F16;
        CHECK(cuda_layout_find(&l, &other) == NULL);
        cuda_layout_free(&l);
    }
    hfq_model_free(m);
    synth_free(&sm);
}

static void test_layouts(void) {
    synth_spec s = synth_default_spec();
    layout_case(s, &fp8, "f32", false);
    s.tied = true;
    s.arch = HFQ_ARCH_QWEN2;
    s.biases = true;
    layout_case(s, &fp8, "qwen2 tied biases", false);

    synth_spec k = synth_default_spec();
    k.n_embd = 256, k.n_ff = 512, k.n_head = 8, k.n_head_kv = 4, k.head_dim = 32, k.n_rot = 32, k.n_vocab = 64;
    k.wtype = GT_Q4_K;
    k.scales = true;
    layout_case(k, &fp8, "q4_K", false);

    synth_spec i8 = synth_default_spec();
    i8.wqext = HFQ_QEXT_INT8;
    i8.qext_group = 4;
    i8.input_scales = true;
    layout_case(i8, &fp8, "int8 groups", false);

    synth_spec f8 = k;
    f8.wtype = GT_F32;
    f8.scales = false;
    f8.wqext = HFQ_QEXT_FP8_E4M3;
    layout_case(f8, &fp8, "fp8 e4m3", true);
    layout_case(f8, &no_fp8, "fp8 e4m3 before sm_89", false);

    synth_spec moe = k;
    moe.scales = false;
    moe.n_expert = 4, moe.n_expert_used = 2, moe.n_ff_exp = 256;
    layout_case(moe, &fp8, "q4_K 4 experts", false);
    moe.wtype = GT_F32;
    layout_case(moe, &fp8, "f32 4 experts", false);
}

/* Products of fewer rows: the FP8 GEMM wants a multiple of 16 rows, the
 * scratch holds only those rows. */
static void test_plan_rows(void) {
    cuda_wplan p = {.fmt = CUDA_WF_FP8_E4M3, .gemm = CUDA_GEMM_FP8, .scratch_bytes = 256 * 64 * 2};
    cuda_wplan r = cuda_wplan_rows(&p, 256, 16);
    CHECK(r.gemm == CUDA_GEMM_FP8 && r.scratch_bytes == 256 * 16 * 2);
    r = cuda_wplan_rows(&p, 256, 8);
    CHECK(r.gemm == CUDA_GEMM_DEQUANT && r.scratch_bytes == 256 * 8 * 2);
    p.gemm = CUDA_GEMM_BF16;
    p.scratch_bytes = 0;
    r = cuda_wplan_rows(&p, 256, 8);
    CHECK(r.gemm == CUDA_GEMM_BF16 && r.scratch_bytes == 0);
}

int main(void) {
    test_ggml_formats();
    test_i8_formats();
    test_refused();
    test_layouts();
    test_plan_rows();
    return check_exit();
}
