/* test_runner_gguf.c - models loaded from GGUF files (written here with the
 * GGUF writer from the synthetic models of test_runner_synth.h) give the same
 * logits as the same tensors bound in memory; hyper-parameter keys are read
 * with llama.cpp's defaults, and bad or unsupported metadata is refused in one
 * line naming the file and the key. */
#include <unistd.h>

#include "check.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/plan.h"
#include "kernels/graph.h"
#include "test_runner_synth.h"

static char tmpdir[] = "/tmp/hfq_runner_XXXXXX";

typedef void (*edit_fn)(gguf_writer *w);

/* Writes sm as a GGUF with llama.cpp's keys; edit (may be NULL) changes keys
 * before the header is written. */
static int write_model(const synth_model *sm, const char *path, edit_fn edit, hfq_error *err) {
    const synth_spec *s = &sm->spec;
    const char *arch = hfq_arch_get(s->arch)->name;
    char key[128];
    gguf_writer *w = gguf_writer_new();
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gguf_set_str(w, "general.architecture", arch);
    gguf_set_u32(w, KEY("context_length"), (uint32_t)s->n_ctx_train);
    gguf_set_u32(w, KEY("embedding_length"), (uint32_t)s->n_embd);
    gguf_set_u32(w, KEY("block_count"), (uint32_t)s->n_layer);
    gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)s->n_ff);
    gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)s->n_head);
    gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->n_head_kv);
    gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)s->head_dim);
    gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)s->head_dim);
    gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)s->n_rot);
    gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), s->rms_eps);
    gguf_set_f32(w, KEY("rope.freq_base"), s->rope_base);
    if (s->rope_scale != 1.0f) {
        gguf_set_str(w, KEY("rope.scaling.type"), "linear");
        gguf_set_f32(w, KEY("rope.scaling.factor"), 1.0f / s->rope_scale);
    }
#undef KEY
    for (int i = 0; i < sm->n; i++)
        if (sm->qext[i]) {
            snprintf(key, sizeof key, "hfq.qext.%s", sm->names[i]);
            gguf_set_str(w, key, synth_qext_name(sm->qext[i]));
            gguf_set_u32(w, "hfq.qext.version", 1);
        }
    if (edit) edit(w);
    int rc = -1;
    for (int i = 0; i < sm->n; i++)
        if (gguf_add_tensor(w, sm->info[i].name, sm->info[i].type, sm->info[i].n_dims, sm->info[i].ne, err) < 0)
            goto done;
    if (gguf_writer_begin(w, path, err)) goto done;
    for (int i = 0; i < sm->n; i++)
        if (gguf_writer_write_tensor(w, i, sm->data[i], err)) goto done;
    rc = gguf_writer_finish(w, err);
done:
    gguf_writer_free(w);
    return rc;
}

static float *logits_of(const hfq_model *m, const int32_t *tokens, int64_t n) {
    hfq_error err;
    hfq_context_params cp = {.n_ctx = 16, .n_threads = 1};
    hfq_context *c = hfq_context_new(m, &cp, &err);
    CHECK_MSG(c != NULL, "%s", err.msg);
    float *logits = calloc((size_t)(n * hfq_model_hparams(m)->n_vocab), sizeof(float));
    if (c) CHECK_MSG(hfq_forward(c, tokens, n, n, logits, &err) == 0, "%s", err.msg);
    hfq_context_free(c);
    return logits;
}

static void check_same_as_bound(const synth_spec *spec) {
    synth_model sm;
    synth_build(&sm, spec);
    char path[256];
    snprintf(path, sizeof path, "%s/model.gguf", tmpdir);
    hfq_error err;
    CHECK_MSG(write_model(&sm, path, NULL, &err) == 0, "%s", err.msg);
    hfq_model *loaded = hfq_model_load(path, &err);
    CHECK_MSG(loaded != NULL, "%s", err.msg);
    hfq_model *bound = synth_bind(&sm, &err);
    if (loaded && bound) {
        const hfq_hparams *a = hfq_model_hparams(loaded), *b = hfq_model_hparams(bound);
        CHECK(memcmp(a, b, sizeof *a) == 0);
        CHECK(hfq_model_gguf(loaded) != NULL && hfq_model_gguf(bound) == NULL);
        CHECK(strcmp(hfq_model_path(loaded), path) == 0);
        static const int32_t toks[] = {3, 1, 4, 1, 5, 9, 2, 6};
        const int64_t n = sizeof toks / sizeof toks[0];
        float *la = logits_of(loaded, toks, n), *lb = logits_of(bound, toks, n);
        CHECK(memcmp(la, lb, (size_t)(n * a->n_vocab) * sizeof(float)) == 0);
        free(la);
        free(lb);
    }
    hfq_model_free(loaded);
    hfq_model_free(bound);
    synth_free(&sm);
    unlink(path);
}

static void test_load(void) {
    synth_spec s = synth_default_spec();
    check_same_as_bound(&s);
    s.wqext = HFQ_QEXT_INT8;
    s.qext_group = 4;
    s.input_scales = true;
    check_same_as_bound(&s);
    s = synth_default_spec();
    s.wqext = HFQ_QEXT_FP8_E4M3;
    check_same_as_bound(&s);
    s = synth_default_spec();
    s.arch = HFQ_ARCH_QWEN2;
    s.biases = true;
    s.rope_scale = 0.5f;
    s.tied = true;
    check_same_as_bound(&s);
}

/* ---- metadata the loader must refuse ---- */

static void arch_gpt2(gguf_writer *w) { gguf_set_str(w, "general.architecture", "gpt2"); }
static void no_arch(gguf_writer *w) { gguf_remove_key(w, "general.architecture"); }
static void no_blocks(gguf_writer *w) { gguf_remove_key(w, "llama.block_count"); }
static void no_eps(gguf_writer *w) { gguf_remove_key(w, "llama.attention.layer_norm_rms_epsilon"); }
static void gemma3_attn_cap(gguf_writer *w) { gguf_set_f32(w, "gemma3.attn_logit_softcapping", 50.0f); }
static void gemma2_pattern_array(gguf_writer *w) {
    const uint8_t pattern[2] = {1, 0};
    gguf_set_arr(w, "gemma2.attention.sliding_window_pattern", GGUF_VT_BOOL, pattern, 2);
}
static void gemma2_negative_cap(gguf_writer *w) { gguf_set_f32(w, "gemma2.final_logit_softcapping", -30.0f); }
static void gemma2_window_str(gguf_writer *w) { gguf_set_str(w, "gemma2.attention.sliding_window", "64"); }
static void gemma2_experts(gguf_writer *w) {
    gguf_set_u32(w, "gemma2.expert_count", 8);
    gguf_set_u32(w, "gemma2.expert_used_count", 2);
}
static void yarn(gguf_writer *w) { gguf_set_str(w, "llama.rope.scaling.type", "yarn"); }
static void moe(gguf_writer *w) { gguf_set_u32(w, "llama.expert_count", 8); }
static void moe_dense(gguf_writer *w) {
    gguf_set_u32(w, "llama.expert_count", 8);
    gguf_set_u32(w, "llama.expert_used_count", 2);
}
static void moe_sigmoid(gguf_writer *w) {
    moe_dense(w);
    gguf_set_u32(w, "llama.expert_gating_func", 2);
}
static void moe_used(gguf_writer *w) {
    gguf_set_u32(w, "llama.expert_count", 2);
    gguf_set_u32(w, "llama.expert_used_count", 3);
}
static void heads_str(gguf_writer *w) { gguf_set_str(w, "llama.attention.head_count", "4"); }
static void value_len(gguf_writer *w) { gguf_set_u32(w, "llama.attention.value_length", 12); }
static void attn_factor(gguf_writer *w) { gguf_set_f32(w, "llama.rope.scaling.attn_factor", 0.0f); }
static void bad_factor(gguf_writer *w) {
    gguf_set_str(w, "llama.rope.scaling.type", "linear");
    gguf_set_f32(w, "llama.rope.scaling.factor", -2.0f);
}
/* without key_length the head size is n_embd / n_head: 36 / 4 = 9, too
 * small for rope.dimension_count 10; 36 / 5 is no size at all */
static void no_key_length(gguf_writer *w) {
    gguf_remove_key(w, "llama.attention.key_length");
    gguf_remove_key(w, "llama.attention.value_length");
}
static void no_key_length_5_heads(gguf_writer *w) {
    no_key_length(w);
    gguf_set_u32(w, "llama.attention.head_count", 5);
}
static void huge_ff(gguf_writer *w) { gguf_set_u64(w, "llama.feed_forward_length", (uint64_t)1 << 40); }

static void qext_no_version(gguf_writer *w) { gguf_remove_key(w, "hfq.qext.version"); }
static void qext_version_2(gguf_writer *w) { gguf_set_u32(w, "hfq.qext.version", 2); }
static void qext_not_i8(gguf_writer *w) { gguf_set_str(w, "hfq.qext.output_norm.weight", "int8"); }
static void qext_no_tensor(gguf_writer *w) { gguf_set_str(w, "hfq.qext.blk.9.ffn_up.weight", "int8"); }
static void qext_not_str(gguf_writer *w) { gguf_set_u32(w, "hfq.qext.blk.0.ffn_up.weight", 8); }
static void qext_int4(gguf_writer *w) { gguf_set_str(w, "hfq.qext.blk.1.attn_q.weight", "int4"); }
static void act_dynamic(gguf_writer *w) { gguf_set_str(w, "hfq.act_quant.blk.0.ffn_up.weight", "dynamic"); }
static void act_none(gguf_writer *w) { gguf_set_str(w, "hfq.act_quant.blk.0.ffn_up.weight", "none"); }
static void act_mxfp4(gguf_writer *w) { gguf_set_str(w, "hfq.act_quant.blk.0.ffn_up.weight", "mxfp4"); }
static void act_fp8_g16(gguf_writer *w) { gguf_set_str(w, "hfq.act_quant.blk.0.ffn_up.weight", "fp8_e4m3_g16"); }
static void act_int8_ct(gguf_writer *w) { gguf_set_str(w, "hfq.act_quant.blk.0.ffn_up.weight", "int8_ct"); }
static void act_fp8_g0(gguf_writer *w) { gguf_set_str(w, "hfq.act_quant.blk.0.ffn_up.weight", "fp8_e4m3_g0"); }
static void act_nvfp4_search(gguf_writer *w) { gguf_set_str(w, "hfq.act_quant.blk.0.ffn_up.weight", "nvfp4_search"); }

static void expect_load_error_spec(const synth_spec *spec, edit_fn edit, const char *want);

static void expect_load_error(edit_fn edit, const char *want) {
    synth_spec s = synth_default_spec();
    expect_load_error_spec(&s, edit, want);
}

static void test_bad_qext(void) {
    synth_spec s = synth_default_spec();
    s.wqext = HFQ_QEXT_INT8;
    expect_load_error_spec(&s, qext_no_version, "key 'hfq.qext.version' is missing");
    expect_load_error_spec(&s, qext_version_2, "key 'hfq.qext.version' = 2: this runner reads version 1");
    expect_load_error_spec(&s, qext_not_i8, "key 'hfq.qext.output_norm.weight' names no i8 tensor of the file");
    expect_load_error_spec(&s, qext_no_tensor, "key 'hfq.qext.blk.9.ffn_up.weight' names no i8 tensor");
    expect_load_error_spec(&s, qext_not_str, "key 'hfq.qext.blk.0.ffn_up.weight' is not a string");
    expect_load_error_spec(&s, qext_int4, "tensor 'blk.1.attn_q.weight': unknown hfq.qext encoding 'int4'");
    /* hfq.act_quant: "none" on an I8 (NVFP4, MXFP4) weight without an input scale, "mxfp4" on MXFP4 */
    expect_load_error_spec(&s, act_dynamic, "tensor 'blk.0.ffn_up.weight': hfq.act_quant 'dynamic' is not "
                           "\"none\", \"mxfp4\", \"nvfp4_search\", \"int8_ct\" or \"fp8_e4m3_g<G>\"");
    expect_load_error_spec(&s, act_mxfp4, "tensor 'blk.0.ffn_up.weight': hfq.act_quant 'mxfp4' needs an MXFP4 weight");
    expect_load_error_spec(&s, act_nvfp4_search, "tensor 'blk.0.ffn_up.weight': hfq.act_quant 'nvfp4_search' needs an "
                           "NVFP4 weight");
    expect_load_error_spec(&s, act_fp8_g16, "tensor 'blk.0.ffn_up.weight': hfq.act_quant 'fp8_e4m3_g16' needs an F32, "
                           "F16, BF16 or FP8 weight (without input_scale) whose rows are whole groups");
    synth_spec fp8 = synth_default_spec();
    fp8.wqext = HFQ_QEXT_FP8_E4M3;
    expect_load_error_spec(&fp8, act_int8_ct, "tensor 'blk.0.ffn_up.weight': hfq.act_quant 'int8_ct' needs an INT8 I8 "
                           "weight without input_scale");
    synth_spec f32 = synth_default_spec();   /* rows of 36: not groups of 16, nor of 0 */
    expect_load_error_spec(&f32, act_fp8_g16, "hfq.act_quant 'fp8_e4m3_g16' needs an F32, F16, BF16 or FP8 weight");
    expect_load_error_spec(&f32, act_fp8_g0, "hfq.act_quant 'fp8_e4m3_g0' needs an F32, F16, BF16 or FP8 weight");
    s.input_scales = true;
    expect_load_error_spec(&s, act_none, "tensor 'blk.0.ffn_up.weight': hfq.act_quant 'none' needs an I8, NVFP4 or "
                           "MXFP4 weight without input_scale");
    synth_spec plain = synth_default_spec();
    expect_load_error_spec(&plain, act_none, "tensor 'blk.0.ffn_up.weight': hfq.act_quant 'none' needs an I8, NVFP4");
}

/* Each act_none matrix: its name, and whether the cpu backend gives it float activations under AUTO. */
static int fp4_act_none_matrix(void *user, const hfq_tensor *w) {
    int *n = user;
    if (!w->act_none) return 0;
    cpu_wkernel k;
    CHECK(strcmp(w->name, "blk.0.ffn_up.weight") == 0);
    CHECK(cpu_wkernel_get(w, HFQ_ACT_QUANT_AUTO, &k, NULL, NULL) == 0 && k.act->type == HFQ_QT_F32);
    ++*n;
    return 0;
}

/* hfq.act_quant none on an NVFP4 / MXFP4 weight (weight-only FP4, as hfconv
 * writes): loaded, float activations on the cpu backend, refused by the cuda
 * backend's check in one line. */
static void test_fp4_act_none(void) {
    static const uint32_t types[] = {GT_NVFP4, GT_MXFP4};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        synth_spec s = synth_default_spec();
        s.n_embd = 64, s.n_ff = 128, s.head_dim = 16, s.n_rot = 16;
        s.wtype = types[i];
        synth_model sm;
        synth_build(&sm, &s);
        char path[256];
        snprintf(path, sizeof path, "%s/fp4.gguf", tmpdir);
        hfq_error err = {{0}};
        CHECK_MSG(write_model(&sm, path, act_none, &err) == 0, "%s", err.msg);
        hfq_model *m = hfq_model_load(path, &err);
        CHECK_MSG(m != NULL, "%s", err.msg);
        int n = 0;
        if (m) hfq_model_each_matrix(m, fp4_act_none_matrix, &n);
        CHECK_MSG(n == 1, "%d act_none matrices", n);
        CHECK(m && cuda_act_quant_check(m, HFQ_ACT_QUANT_AUTO, &err) == -1);
        CHECK_STR_CONTAINS(err.msg, "tensor 'blk.0.ffn_up.weight': float activations of nvfp4/mxfp4 weights are "
                           "not supported by the cuda backend");
        hfq_model_free(m);
        synth_free(&sm);
        unlink(path);
    }
}

static void expect_load_error_spec(const synth_spec *spec, edit_fn edit, const char *want) {
    synth_spec s = *spec;
    synth_model sm;
    synth_build(&sm, &s);
    char path[256];
    snprintf(path, sizeof path, "%s/bad.gguf", tmpdir);
    hfq_error err;
    CHECK_MSG(write_model(&sm, path, edit, &err) == 0, "%s", err.msg);
    hfq_model *m = hfq_model_load(path, &err);
    CHECK_MSG(m == NULL, "loaded despite: %s", want);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK_MSG(strncmp(err.msg, path, strlen(path)) == 0, "message does not start with the file: %s", err.msg);
    hfq_model_free(m);
    synth_free(&sm);
    unlink(path);
}

static void test_bad_metadata(void) {
    expect_load_error(arch_gpt2, "architecture 'gpt2' is not supported");
    expect_load_error(no_arch, "key 'general.architecture' is missing");
    expect_load_error(no_blocks, "key 'llama.block_count' is missing");
    expect_load_error(no_eps, "key 'llama.attention.layer_norm_rms_epsilon' is missing");
    expect_load_error(yarn, "rope scaling type 'yarn' is not supported");
    expect_load_error(moe, "key 'llama.expert_used_count' is missing");
    /* experts replace the dense feed-forward: its tensors are refused */
    expect_load_error(moe_dense, "tensor 'blk.0.ffn_gate.weight' is not supported by the runner");
    expect_load_error(moe_sigmoid, "expert_gating_func' = 2: only softmax routing (1) is supported");
    expect_load_error(moe_used, "expert_count 2, expert_used_count 3");
    expect_load_error(heads_str, "llama.attention.head_count");
    expect_load_error(value_len, "value_length' = 12 differs from key_length 10");
    expect_load_error(attn_factor, "attn_factor' = 0 must be positive");
    expect_load_error(bad_factor, "rope.scaling.factor' = -2 is not a valid factor");
    expect_load_error(no_key_length, "rope.dimension_count 10 must be even and at most the head size 9");
    expect_load_error(no_key_length_5_heads, "embedding_length' = 36 is not a multiple of the head count 5");
    expect_load_error(huge_ff, "feed_forward_length = 1099511627776 is out of range");
    /* the keys of the families with windows and soft-capping (Gemma) */
    synth_spec g = synth_default_spec();
    g.arch = HFQ_ARCH_GEMMA3;
    expect_load_error_spec(&g, gemma3_attn_cap, "key 'gemma3.attn_logit_softcapping': attention soft-capping is "
                           "not computed for gemma3");
    g.arch = HFQ_ARCH_GEMMA2;
    expect_load_error_spec(&g, gemma2_pattern_array, "key 'gemma2.attention.sliding_window_pattern': a per-layer "
                           "pattern is not supported");
    expect_load_error_spec(&g, gemma2_negative_cap, "final_logit_softcapping -30 must be a non-negative number");
    expect_load_error_spec(&g, gemma2_window_str, "gemma2.attention.sliding_window");
    /* experts only where moe_block computes the family's feed-forward */
    expect_load_error_spec(&g, gemma2_experts, "expert_count 8: the runner computes no experts for gemma2");
    /* Gemma's tensors: the post-block norms are required */
    expect_load_error_spec(&g, NULL, "tensor 'blk.0.post_attention_norm.weight' is missing");

    hfq_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/absent.gguf", tmpdir);
    CHECK(hfq_model_load(path, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "absent.gguf");
}

int main(void) {
    if (!mkdtemp(tmpdir)) CHECK_SKIP("no temporary directory");
    test_load();
    test_bad_metadata();
    test_bad_qext();
    test_fp4_act_none();
    rmdir(tmpdir);
    return check_exit();
}
