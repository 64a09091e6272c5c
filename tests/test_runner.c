/* test_runner.c - the forward pass against a plain double-precision
 * reference (tests/test_runner_synth.h) on small random models: every
 * linear layer's input (through the observer hook) and the logits, for llama
 * and qwen2 variants; batched vs token-by-token; F16/BF16 weights; binding
 * errors. */
#include "kernels/cuda/plan.h"
#include "kernels/graph.h"
#include "tests/check.h"
#include "tests/test_runner_synth.h"

#define N_PROMPT 11
#define N_CTX 24

/* Activations the observer saw, by token position: [N_CTX][n_layer][dim];
 * rows[kind][layer] counts the rows seen so far (batches come in order). */
typedef struct capture {
    const synth_spec *s;
    float *attn_in, *wo_in, *ffn_in, *down_in;
    int64_t rows[4][8];
    int calls, bad_calls;
} capture;

static void observe(void *user, const char *name, const float *x, int64_t n_tokens, int64_t n_in) {
    capture *c = user;
    const synth_spec *s = c->s;
    const int64_t E = s->n_embd, Q = s->n_head * s->head_dim, F = s->n_ff;
    c->calls++;
    int il;
    char kind[32];
    if (sscanf(name, "blk.%d.%31[a-z_].weight", &il, kind) != 2) {
        bool out_ok = strcmp(name, s->tied ? "token_embd.weight" : "output.weight") == 0 && n_in == E;
        if (!out_ok) c->bad_calls++;
        return;
    }
    float *dst = NULL;
    int64_t dim = 0;
    int k = -1;
    if (strcmp(kind, "attn_q") == 0) dst = c->attn_in, dim = E, k = 0;
    else if (strcmp(kind, "attn_output") == 0) dst = c->wo_in, dim = Q, k = 1;
    else if (strcmp(kind, "ffn_gate") == 0) dst = c->ffn_in, dim = E, k = 2;
    else if (strcmp(kind, "ffn_down") == 0) dst = c->down_in, dim = F, k = 3;
    else if (strcmp(kind, "attn_k") && strcmp(kind, "attn_v") && strcmp(kind, "ffn_up")) c->bad_calls++;
    if (!dst) return;
    if (n_in != dim || il < 0 || il >= s->n_layer || il >= 8 || c->rows[k][il] + n_tokens > N_CTX) {
        c->bad_calls++;
        return;
    }
    for (int64_t t = 0; t < n_tokens; t++)
        memcpy(dst + ((c->rows[k][il] + t) * s->n_layer + il) * dim, x + t * dim, (size_t)dim * sizeof *x);
    c->rows[k][il] += n_tokens;
}

/* max |a - r| / max |r| over n values */
static double rel_err(const float *a, const double *r, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]);
        if (d > num || d != d) num = d;
        if (fabs(r[i]) > den) den = fabs(r[i]);
    }
    return num / (den > 0 ? den : 1);
}

static const int32_t prompt[N_PROMPT] = {1, 17, 4, 42, 9, 9, 33, 0, 48, 25, 12};

/* Runs the prompt in batches of n_batch and compares every layer with the
 * reference; returns the worst relative error of the logits. */
static double check_forward(const synth_spec *spec, int64_t n_batch, double tol, const char *label) {
    synth_model sm;
    synth_build(&sm, spec);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    CHECK_MSG(m != NULL, "%s: %s", label, err.msg);
    if (!m) return INFINITY;
    const int64_t E = spec->n_embd, Q = spec->n_head * spec->head_dim, F = spec->n_ff, V = spec->n_vocab;
    const int64_t L = spec->n_layer;
    /* an F32 KV cache, as the reference keeps k and v */
    hfq_context_params cp = {.n_ctx = N_CTX, .n_batch = n_batch, .n_threads = 2, .act_quant = spec->act_quant,
                             .kv_k = HFQ_KV_F32, .kv_v = HFQ_KV_F32};
    hfq_context *ctx = hfq_context_new(m, &cp, &err);
    CHECK_MSG(ctx != NULL, "%s: %s", label, err.msg);
    capture cap = {.s = spec};
    cap.attn_in = calloc((size_t)(N_CTX * L * E), sizeof(float));
    cap.wo_in = calloc((size_t)(N_CTX * L * Q), sizeof(float));
    cap.ffn_in = calloc((size_t)(N_CTX * L * E), sizeof(float));
    cap.down_in = calloc((size_t)(N_CTX * L * F), sizeof(float));
    float *logits = calloc((size_t)(N_PROMPT * V), sizeof(float));
    double worst = INFINITY;
    if (!ctx) goto done;
    hfq_context_set_observer(ctx, observe, &cap);
    /* two calls: the KV cache must carry over between them */
    const int64_t split = 4;
    CHECK_MSG(hfq_forward(ctx, prompt, split, split, logits, &err) == 0, "%s: %s", label, err.msg);
    CHECK_MSG(hfq_forward(ctx, prompt + split, N_PROMPT - split, N_PROMPT - split, logits + split * V, &err) == 0,
              "%s: %s", label, err.msg);
    CHECK(hfq_context_n_past(ctx) == N_PROMPT);
    int64_t n_batches = (split + n_batch - 1) / n_batch + (N_PROMPT - split + n_batch - 1) / n_batch;
    CHECK_MSG(cap.calls == n_batches * (7 * L + 1), "%s: %d observer calls", label, cap.calls);
    CHECK(cap.bad_calls == 0);

    ref_state ref;
    ref_init(&ref, &sm, N_CTX);
    ref_trace tr = {calloc((size_t)(L * E), sizeof(double)), calloc((size_t)(L * Q), sizeof(double)),
                    calloc((size_t)(L * E), sizeof(double)), calloc((size_t)(L * F), sizeof(double)),
                    calloc((size_t)V, sizeof(double))};
    worst = 0;
    for (int64_t t = 0; t < N_PROMPT; t++) {
        ref_token(&ref, prompt[t], &tr);
        for (int64_t il = 0; il < L; il++) {
            const struct { const char *what; double err; } stages[] = {
                {"attn_norm output", rel_err(cap.attn_in + (t * L + il) * E, tr.attn_in + il * E, E)},
                {"attention output", rel_err(cap.wo_in + (t * L + il) * Q, tr.wo_in + il * Q, Q)},
                {"ffn_norm output", rel_err(cap.ffn_in + (t * L + il) * E, tr.ffn_in + il * E, E)},
                {"swiglu output", rel_err(cap.down_in + (t * L + il) * F, tr.down_in + il * F, F)},
            };
            for (size_t k = 0; k < sizeof stages / sizeof stages[0]; k++)
                CHECK_MSG(stages[k].err <= tol, "%s: token %lld layer %lld %s: rel err %.3g", label, (long long)t,
                          (long long)il, stages[k].what, stages[k].err);
        }
        double e = rel_err(logits + t * V, tr.logits, V);
        CHECK_MSG(e <= tol, "%s: token %lld logits: rel err %.3g", label, (long long)t, e);
        if (e > worst || e != e) worst = e;
    }
    free(tr.attn_in); free(tr.wo_in); free(tr.ffn_in); free(tr.down_in); free(tr.logits);
    ref_free(&ref);
done:
    free(cap.attn_in); free(cap.wo_in); free(cap.ffn_in); free(cap.down_in); free(logits);
    hfq_context_free(ctx);
    hfq_model_free(m);
    synth_free(&sm);
    return worst;
}

static void test_variants(void) {
    synth_spec s = synth_default_spec();
    printf("llama gqa f32: %.3g\n", check_forward(&s, 64, 2e-5, "llama"));
    printf("llama, batches of 3: %.3g\n", check_forward(&s, 3, 2e-5, "llama n_batch 3"));

    synth_spec mha = s;
    mha.n_head_kv = mha.n_head;
    mha.tied = true;
    printf("llama mha tied: %.3g\n", check_forward(&mha, 64, 2e-5, "llama mha tied"));

    synth_spec mqa = s;
    mqa.n_head_kv = 1;
    mqa.n_rot = 6;               /* partial rotary: the last 4 values of each head pass through */
    mqa.rope_factors = true;     /* llama3 per-pair factors */
    mqa.rope_base = 500000.0f;
    printf("llama mqa partial rope factors: %.3g\n", check_forward(&mqa, 5, 2e-5, "llama mqa"));

    synth_spec qwen = s;
    qwen.arch = HFQ_ARCH_QWEN2;  /* NeoX rope, q/k/v biases */
    qwen.biases = true;
    qwen.rope_scale = 0.25f;     /* linear scaling by 4 */
    qwen.rms_eps = 1e-6f;
    printf("qwen2 biases linear scaling: %.3g\n", check_forward(&qwen, 64, 2e-5, "qwen2"));

    synth_spec scaled = s;
    scaled.scales = true;        /* per-tensor .scale factors on every layer matrix */
    printf("llama scaled matrices: %.3g\n", check_forward(&scaled, 64, 2e-5, "scales"));
}

/* Lower-precision weights. The reference multiplies the stored values with
 * its activations rounded through the same companion format the runner uses
 * (F16, BF16, Q8_0, Q8_1, Q8_K), so most results agree to float rounding; but
 * an activation within float rounding of a boundary of that format may round
 * the other way in one of the two (and then stays different in the KV cache):
 * one step of the format, 2^-11 (F16), 2^-8 (BF16) or 1/127 of a block's
 * largest value (8-bit), times the few such flips a run has. Q5_1 also differs
 * by the fp16 block sums of its Q8_1 activations (ggml's layout, bounded in
 * test_runner_ops.c), ~1e-3 per product, growing through the layers. */
static void test_lower_precision_weights(void) {
    synth_spec s = synth_default_spec();
    s.wtype = GT_F16;
    printf("f16: %.3g\n", check_forward(&s, 64, 16 * 0x1p-11, "f16"));
    s.wtype = GT_BF16;
    printf("bf16: %.3g\n", check_forward(&s, 64, 16 * 0x1p-8, "bf16"));

    s.n_embd = 64, s.n_ff = 96, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 16, s.n_rot = 16;
    static const uint32_t legacy[] = {GT_Q8_0, GT_Q4_0, GT_Q5_0, GT_Q5_1};
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
        s.wtype = legacy[i];
        printf("%s: %.3g\n", ggml_type_get(s.wtype)->name, check_forward(&s, 64, 12.0 / 127, ggml_type_get(s.wtype)->name));
    }
    s.n_embd = 256, s.n_ff = 256, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32;
    s.scales = true;             /* NVFP4 checkpoints carry a per-tensor scale */
    static const uint32_t kquants[] = {GT_Q4_K, GT_Q5_K, GT_Q6_K, GT_MXFP4, GT_NVFP4};
    for (size_t i = 0; i < sizeof kquants / sizeof kquants[0]; i++) {
        s.wtype = kquants[i];
        printf("%s: %.3g\n", ggml_type_get(s.wtype)->name, check_forward(&s, 64, 12.0 / 127, ggml_type_get(s.wtype)->name));
    }
}

/* INT8/FP8 weights (I8 codes with scales, W8A8): the reference quantizes its
 * activations per token the same way, so only flips at rounding boundaries
 * (one code step: 1/127 of a row's largest value for INT8, 2^-4 / 2^-3
 * relative for E4M3 / E5M2) separate the two. Token embeddings and the output
 * are I8 too. */
static void test_qext_weights(void) {
    synth_spec s = synth_default_spec();
    s.wqext = HFQ_QEXT_INT8;
    printf("int8 per row: %.3g\n", check_forward(&s, 64, 12.0 / 127, "int8"));
    s.qext_group = 4;            /* divides 36, 40 and 52 */
    printf("int8 per 4 values: %.3g\n", check_forward(&s, 64, 12.0 / 127, "int8 groups"));
    s.input_scales = true;
    printf("int8 static activation scales: %.3g\n", check_forward(&s, 5, 12.0 / 127, "int8 input_scale"));
    s.act_quant = HFQ_ACT_QUANT_DYNAMIC;   /* per token although the file has static scales */
    printf("int8 dynamic despite input_scale: %.3g\n", check_forward(&s, 5, 12.0 / 127, "int8 dynamic"));
    s.act_quant = HFQ_ACT_QUANT_NONE;      /* float activations: only float rounding differs */
    printf("int8 float activations: %.3g\n", check_forward(&s, 64, 2e-5, "int8 none"));
    s = synth_default_spec();
    s.wqext = HFQ_QEXT_FP8_E4M3;
    printf("fp8 e4m3: %.3g\n", check_forward(&s, 64, 0.25, "fp8_e4m3"));
    s.wqext = HFQ_QEXT_FP8_E5M2;
    s.tied = true;
    printf("fp8 e5m2 tied: %.3g\n", check_forward(&s, 64, 0.5, "fp8_e5m2"));
    s.act_quant = HFQ_ACT_QUANT_NONE;
    printf("fp8 e5m2 float activations: %.3g\n", check_forward(&s, 64, 2e-5, "fp8_e5m2 none"));
    s.act_quant = HFQ_ACT_QUANT_STATIC;
    s.input_scales = true;
    s.wqext = HFQ_QEXT_FP8_E4M3;
    printf("fp8 e4m3 static: %.3g\n", check_forward(&s, 64, 0.25, "fp8_e4m3 static"));
}

/* NVFP4 weights with NVFP4 activations (W4A4): the reference rounds its
 * activations through NVFP4 blocks with the same global scale (per token or
 * the static input_scale); flips at rounding boundaries are one E2M1 step
 * (up to a third of a value), so the bound is looser than Q8_0's. */
static void test_nvfp4_w4a4(void) {
    synth_spec s = synth_default_spec();
    s.n_embd = 256, s.n_ff = 256, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32;
    s.wtype = GT_NVFP4;
    s.scales = true;
    s.act_quant = HFQ_ACT_QUANT_DYNAMIC;
    printf("nvfp4 w4a4 dynamic: %.3g\n", check_forward(&s, 64, 12.0 / 127, "nvfp4 dynamic"));
    s.input_scales = true;
    s.act_quant = HFQ_ACT_QUANT_AUTO;      /* the file's input_scale: static */
    printf("nvfp4 w4a4 static: %.3g\n", check_forward(&s, 5, 12.0 / 127, "nvfp4 static"));
    s.act_quant = HFQ_ACT_QUANT_NONE;      /* Q8_0 as ggml, input_scale ignored */
    printf("nvfp4 q8_0 activations: %.3g\n", check_forward(&s, 64, 12.0 / 127, "nvfp4 none"));
}

/* MXFP4 weights with dynamic MXFP4 activations (compressed-tensors' MXFP4,
 * hfq.act_quant "mxfp4"): the reference rounds its activations through the
 * same blocks; flips at rounding boundaries are one E2M1 step, as for NVFP4.
 * Under NONE the same file takes Q8_0 activations (ggml's pairing). */
static void test_mxfp4_w4a4(void) {
    synth_spec s = synth_default_spec();
    s.n_embd = 256, s.n_ff = 256, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32;
    s.wtype = GT_MXFP4;
    s.act_mxfp4 = true;
    printf("mxfp4 w4a4 (auto): %.3g\n", check_forward(&s, 64, 12.0 / 127, "mxfp4 w4a4"));
    s.act_quant = HFQ_ACT_QUANT_DYNAMIC;
    printf("mxfp4 w4a4 (dynamic, batches of 5): %.3g\n", check_forward(&s, 5, 12.0 / 127, "mxfp4 w4a4 dynamic"));
}

/* INT8 weights marked int8_ct: per-token activations by compressed-tensors'
 * rule (amax / 127.5, [-128, 127]), which the reference applies too. A
 * token's largest value lands on +-127.5 give or take an ulp of float
 * rounding, and a negative one then codes -128 or -127 (measured 0.0093);
 * amax / 127 in place of the rule is 0.016-0.019 here, past the bound. */
static void test_int8_ct(void) {
    synth_spec s = synth_default_spec();
    s.wqext = HFQ_QEXT_INT8;
    s.act_int8_ct = true;
    printf("int8 w8a8, compressed-tensors' rounding: %.3g\n", check_forward(&s, 64, 2.0 / 127, "int8_ct"));
}

/* The CUDA backend's kernels compute I8 weights with the file's activation
 * quantization and NVFP4 with Q8_0 activations: other modes are refused
 * before any device work (host-side check, no GPU needed). */
static void test_cuda_act_quant(void) {
    static const struct { uint32_t wtype; hfq_qext q; bool input_scales; hfq_act_quant aq; const char *refused; } cases[] = {
        {GT_F32, HFQ_QEXT_INT8, false, HFQ_ACT_QUANT_AUTO, NULL},
        {GT_F32, HFQ_QEXT_INT8, false, HFQ_ACT_QUANT_DYNAMIC, NULL},
        {GT_F32, HFQ_QEXT_INT8, true, HFQ_ACT_QUANT_STATIC, NULL},
        {GT_F32, HFQ_QEXT_INT8, false, HFQ_ACT_QUANT_NONE, "float activations of int8/fp8 weights are not supported"},
        {GT_F32, HFQ_QEXT_FP8_E4M3, true, HFQ_ACT_QUANT_DYNAMIC, "per-token activation scales in place of input_scale"},
        {GT_F32, HFQ_QEXT_INT8, false, HFQ_ACT_QUANT_STATIC, "has no input_scale for static activation quantization"},
        {GT_NVFP4, 0, false, HFQ_ACT_QUANT_AUTO, NULL},
        {GT_NVFP4, 0, true, HFQ_ACT_QUANT_NONE, NULL},
        {GT_NVFP4, 0, true, HFQ_ACT_QUANT_AUTO, "NVFP4 activations (W4A4) are not supported by the cuda backend"},
        {GT_NVFP4, 0, false, HFQ_ACT_QUANT_DYNAMIC, "NVFP4 activations (W4A4)"},
        {GT_Q8_0, 0, false, HFQ_ACT_QUANT_DYNAMIC, NULL},
        {GT_MXFP4, 0, false, HFQ_ACT_QUANT_AUTO, "MXFP4 activations (W4A4) are not supported by the cuda backend"},
        {GT_MXFP4, 0, false, HFQ_ACT_QUANT_NONE, NULL},
        {GT_F32, HFQ_QEXT_INT8, false, HFQ_ACT_QUANT_DYNAMIC, "compressed-tensors' per-token int8 activations"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        synth_spec s = synth_default_spec();
        s.n_embd = 64, s.n_ff = 128, s.head_dim = 16, s.n_rot = 16;
        s.wtype = cases[i].wtype, s.wqext = cases[i].q, s.input_scales = cases[i].input_scales;
        s.act_mxfp4 = cases[i].wtype == GT_MXFP4;
        s.act_int8_ct = i + 1 == sizeof cases / sizeof cases[0];   /* the last case */
        synth_model sm;
        synth_build(&sm, &s);
        hfq_error err = {{0}};
        hfq_model *m = synth_bind(&sm, &err);
        CHECK_MSG(m != NULL, "case %zu: %s", i, err.msg);
        const int rc = m ? cuda_act_quant_check(m, cases[i].aq, &err) : -1;
        CHECK_MSG(rc == (cases[i].refused ? -1 : 0), "case %zu: %d %s", i, rc, err.msg);
        if (cases[i].refused) CHECK_STR_CONTAINS(err.msg, cases[i].refused);
        hfq_model_free(m);
        synth_free(&sm);
    }
}

/* Static activation quantization of a model without input scales is refused
 * when the context is made; unknown modes too. */
static void test_act_quant_errors(void) {
    synth_spec s = synth_default_spec();
    s.wqext = HFQ_QEXT_INT8;
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    CHECK(m != NULL);
    hfq_context_params cp = {.n_ctx = 8, .act_quant = HFQ_ACT_QUANT_STATIC};
    CHECK(hfq_context_new(m, &cp, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "synthetic: tensor 'token_embd.weight' has no input_scale for static activation quantization");
    cp.act_quant = (hfq_act_quant)7;
    CHECK(hfq_context_new(m, &cp, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "unknown activation quantization mode 7");
    hfq_model_free(m);
    synth_free(&sm);
}

/* All logits of a prompt in one batch == token by token decode. */
static void test_batched_vs_decode(void) {
    synth_spec s = synth_default_spec();
    s.n_layer = 3;
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err;
    hfq_model *m = synth_bind(&sm, &err);
    hfq_context_params big = {.n_ctx = N_CTX, .n_batch = N_CTX, .n_threads = 2};
    hfq_context_params one = {.n_ctx = N_CTX, .n_batch = 1, .n_threads = 1};
    hfq_context *cb = hfq_context_new(m, &big, &err), *cd = hfq_context_new(m, &one, &err);
    CHECK(cb && cd);
    const int64_t V = s.n_vocab;
    float *all = calloc((size_t)(N_PROMPT * V), sizeof(float)), *step = calloc((size_t)V, sizeof(float));
    float *last = calloc((size_t)V, sizeof(float));
    CHECK(hfq_forward(cb, prompt, N_PROMPT, N_PROMPT, all, &err) == 0);
    double worst = 0;
    for (int t = 0; t < N_PROMPT; t++) {
        CHECK(hfq_forward(cd, prompt + t, 1, 1, step, &err) == 0);
        for (int64_t i = 0; i < V; i++) worst = fmax(worst, fabs(step[i] - all[t * V + i]));
    }
    printf("batched vs decode: max abs diff %.3g\n", worst);
    CHECK(worst <= 1e-5);
    /* the logits of the last 5 tokens, over batches of 3: the last rows of all */
    hfq_context_params three = {.n_ctx = N_CTX, .n_batch = 3, .n_threads = 2};
    hfq_context *c3 = hfq_context_new(m, &three, &err);
    float *tail = calloc((size_t)(5 * V), sizeof(float));
    CHECK(hfq_forward(c3, prompt, N_PROMPT, 5, tail, &err) == 0);
    CHECK(memcmp(tail, all + (N_PROMPT - 5) * V, (size_t)(5 * V) * sizeof(float)) == 0);
    CHECK(hfq_forward(c3, prompt, 2, 3, tail, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "logits of 3 tokens asked for 2 tokens");
    free(tail);
    hfq_context_free(c3);
    /* the last token's logits over a whole prompt are the last row of all; reset starts over */
    hfq_context_reset(cb);
    CHECK(hfq_context_n_past(cb) == 0);
    CHECK(hfq_forward(cb, prompt, N_PROMPT, 1, last, &err) == 0);
    CHECK(memcmp(last, all + (N_PROMPT - 1) * V, (size_t)V * sizeof(float)) == 0);
    /* no logits: the cache fills only */
    hfq_context_reset(cb);
    CHECK(hfq_forward(cb, prompt, N_PROMPT - 1, 0, NULL, &err) == 0);
    CHECK(hfq_forward(cb, prompt + N_PROMPT - 1, 1, 1, last, &err) == 0);
    CHECK(memcmp(last, all + (N_PROMPT - 1) * V, (size_t)V * sizeof(float)) == 0);
    free(all); free(step); free(last);
    hfq_context_free(cb);
    hfq_context_free(cd);
    hfq_model_free(m);
    synth_free(&sm);
}

/* A context big enough that every operation runs on both threads (attention,
 * norms, rope and SwiGLU included): the logits of a 400-token prompt equal
 * those of one thread, and those of token-by-token decoding, bit for bit. */
static void test_parallel_paths(void) {
    synth_spec s = synth_default_spec();
    s.n_embd = 256, s.n_ff = 320, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32;
    s.n_vocab = 64, s.n_ctx_train = 512, s.n_layer = 1;
    enum { N = 400 };
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err;
    hfq_model *m = synth_bind(&sm, &err);
    int32_t toks[N];
    uint64_t rng = 3;
    for (int i = 0; i < N; i++) toks[i] = (int32_t)(synth_next(&rng) % 64);
    float *two = malloc(N * 64 * sizeof(float)), *one = malloc(N * 64 * sizeof(float));
    hfq_context_params p2 = {.n_ctx = N, .n_batch = N, .n_threads = 2}, p1 = {.n_ctx = N, .n_batch = 1, .n_threads = 1};
    hfq_context *c2 = hfq_context_new(m, &p2, &err), *c1 = hfq_context_new(m, &p1, &err);
    CHECK(hfq_forward(c2, toks, N, N, two, &err) == 0);
    CHECK(hfq_forward(c1, toks, N, N, one, &err) == 0);   /* one token per batch */
    CHECK(memcmp(one, two, N * 64 * sizeof(float)) == 0);
    free(two);
    free(one);
    hfq_context_free(c2);
    hfq_context_free(c1);
    hfq_model_free(m);
    synth_free(&sm);
}

static void test_forward_errors(void) {
    synth_spec s = synth_default_spec();
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err;
    hfq_model *m = synth_bind(&sm, &err);
    hfq_context_params cp = {.n_ctx = 8, .n_batch = 4, .n_threads = 1};
    hfq_context *c = hfq_context_new(m, &cp, &err);
    float logits[64 * 8];
    int32_t bad[2] = {3, 50};
    CHECK(hfq_forward(c, bad, 2, 1, logits, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "token id 50 at 1");
    CHECK(hfq_context_n_past(c) == 0);
    CHECK(hfq_forward(c, prompt, 9, 1, logits, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "do not fit");
    CHECK(hfq_forward(c, prompt, 8, 0, NULL, &err) == 0);
    CHECK(hfq_forward(c, prompt, 1, 1, logits, &err) == -1);
    CHECK(hfq_forward(c, prompt, 1, 1, NULL, &err) == -1);
    hfq_context_free(c);
    hfq_model_free(m);
    synth_free(&sm);
}

/* Binding refuses what the forward pass could not compute, in one line
 * naming the source and the tensor. */
static void expect_bind_error(synth_model *sm, const char *want) {
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(sm, &err);
    CHECK_MSG(m == NULL, "bound despite: %s", want);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK(strncmp(err.msg, "synthetic: ", 11) == 0 && strchr(err.msg, '\n') == NULL);
    hfq_model_free(m);
}

static gguf_tensor_info *find_info(synth_model *sm, const char *name) {
    for (int i = 0; i < sm->n; i++)
        if (strcmp(sm->names[i], name) == 0) return &sm->info[i];
    return NULL;
}

static void test_bind_errors(void) {
    synth_spec s = synth_default_spec();
    synth_model sm;
    synth_build(&sm, &s);
    gguf_tensor_info *t, saved;

    t = find_info(&sm, "blk.1.ffn_up.weight");
    snprintf(sm.names[t - sm.info], sizeof sm.names[0], "blk.1.ffn_upx.weight");
    expect_bind_error(&sm, "tensor 'blk.1.ffn_up.weight' is missing");
    snprintf(sm.names[t - sm.info], sizeof sm.names[0], "blk.1.ffn_up.weight");

    t = find_info(&sm, "blk.0.attn_k.weight");
    saved = *t;
    t->ne[1] = 40;
    expect_bind_error(&sm, "tensor 'blk.0.attn_k.weight' has shape [36, 40, 1, 1], expected [36, 20]");
    *t = saved;

    t = find_info(&sm, "blk.0.ffn_norm.weight");
    saved = *t;
    t->type = GT_F16;
    t->nbytes /= 2;
    expect_bind_error(&sm, "tensor 'blk.0.ffn_norm.weight' has type f16, expected f32");
    *t = saved;

    t = find_info(&sm, "blk.1.attn_q.weight");
    saved = *t;
    t->type = GT_Q4_0;   /* rows of 36 are not whole 32-value blocks */
    expect_bind_error(&sm, "tensor 'blk.1.attn_q.weight': row length 36 is not a multiple of the q4_0 block size 32");
    t->type = 77;
    expect_bind_error(&sm, "tensor 'blk.1.attn_q.weight' has unknown type id 77");
    *t = saved;
    t->nbytes -= 4;
    expect_bind_error(&sm, "tensor 'blk.1.attn_q.weight' holds");
    *t = saved;

    t = find_info(&sm, "token_embd.weight");
    snprintf(sm.names[t - sm.info], sizeof sm.names[0], "tok_embd.weight");
    expect_bind_error(&sm, "'token_embd.weight' is missing");
    snprintf(sm.names[t - sm.info], sizeof sm.names[0], "token_embd.weight");

    sm.hp.n_head_kv = 3;
    expect_bind_error(&sm, "head_count 4 is not a multiple of head_count_kv 3");
    sm.hp.n_head_kv = 2;
    sm.hp.n_rot = 12;
    expect_bind_error(&sm, "rope.dimension_count 12 must be even and at most the head size 10");
    sm.hp.n_rot = 10;
    sm.hp.n_layer = 0;
    expect_bind_error(&sm, "block_count = 0 is out of range");
    sm.hp.n_layer = 2;
    sm.hp.rms_eps = -1.0f;
    expect_bind_error(&sm, "layer_norm_rms_epsilon");
    sm.hp.rms_eps = 1e-5f;

    /* qwen2 needs its biases */
    sm.hp.arch = HFQ_ARCH_QWEN2;
    expect_bind_error(&sm, "tensor 'blk.0.attn_q.bias' is missing");
    sm.hp.arch = HFQ_ARCH_LLAMA;

    /* a bias this runner does not add must not be silently dropped */
    uint64_t rng = 7;
    synth_add(&sm, "blk.1.attn_output.bias", GT_F32, 36, 1, 0.0f, 1.0f, &rng);
    expect_bind_error(&sm, "tensor 'blk.1.attn_output.bias' is not supported by the runner");
    sm.names[sm.n - 1][0] = 'x';

    synth_add(&sm, "blk.0.ffn_gate.scale", GT_F32, 2, 1, 1.0f, 0.0f, &rng);
    expect_bind_error(&sm, "tensor 'blk.0.ffn_gate.scale' (f32 [2, 1]) is not the F32 scale [1] of 'blk.0.ffn_gate.weight'");
    sm.names[sm.n - 1][0] = 'x';
    synth_add(&sm, "blk.1.attn_v.scale", GT_F32, 1, 1, 1.0f, 0.0f, &rng);
    ((float *)sm.data[sm.n - 1])[0] = INFINITY;
    expect_bind_error(&sm, "tensor 'blk.1.attn_v.scale' holds inf, not a valid scale");
    sm.names[sm.n - 1][0] = 'x';

    synth_add(&sm, "rope_freqs.weight", GT_F32, 5, 1, 0.0f, 0.0f, &rng);
    expect_bind_error(&sm, "tensor 'rope_freqs.weight': factor 0 = 0 is not a positive number");
    sm.names[sm.n - 1][0] = 'x';

    /* a type binding accepts but the CPU backend cannot multiply by */
    t = find_info(&sm, "blk.0.ffn_down.weight");
    t->type = GT_I32;
    hfq_error err;
    hfq_model *m = synth_bind(&sm, &err);
    CHECK(m != NULL);
    hfq_context_params cp = {.n_ctx = 8};
    CHECK(hfq_context_new(m, &cp, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "synthetic: tensor 'blk.0.ffn_down.weight': type i32 is not supported by the cpu backend");
    hfq_model_free(m);
    synth_free(&sm);
}

/* I8 weights need a known encoding, and scales of a shape and sign that make sense. */
static void test_qext_bind_errors(void) {
    synth_spec s = synth_default_spec();
    s.wqext = HFQ_QEXT_INT8;
    s.qext_group = 4;
    synth_model sm;
    synth_build(&sm, &s);
    gguf_tensor_info *t = find_info(&sm, "blk.0.attn_k.scale");
    sm.names[t - sm.info][0] = 'x';
    expect_bind_error(&sm, "tensor 'blk.0.attn_k.weight' has no scales 'blk.0.attn_k.scale'");
    sm.names[t - sm.info][0] = 'b';
    t->ne[0] = 5;   /* 36 values a row are not 5 groups */
    expect_bind_error(&sm, "tensor 'blk.0.attn_k.scale' (f32 [5, 20]) is not the F32 scales of 'blk.0.attn_k.weight'");
    t->ne[0] = 9;
    ((float *)sm.data[t - sm.info])[7] = -1.0f;
    expect_bind_error(&sm, "tensor 'blk.0.attn_k.scale' holds -1, not a valid scale");
    ((float *)sm.data[t - sm.info])[7] = 1.0f;
    int iw = (int)(find_info(&sm, "blk.1.ffn_down.weight") - sm.info);
    sm.qext[iw] = HFQ_QEXT_NONE;
    expect_bind_error(&sm, "tensor 'blk.1.ffn_down.weight' has type i8 but no hfq.qext encoding");
    sm.qext[iw] = HFQ_QEXT_FP8_E4M3;   /* its scales come in groups of 4: FP8 per group binds */
    hfq_error gerr = {{0}};
    hfq_model *gm = synth_bind(&sm, &gerr);
    CHECK_MSG(gm, "FP8 per group: %s", gerr.msg);
    hfq_model_free(gm);
    sm.qext[iw] = HFQ_QEXT_INT8;
    synth_model plain;
    synth_spec ps = synth_default_spec();
    synth_build(&plain, &ps);
    plain.qext[find_info(&plain, "blk.0.ffn_up.weight") - plain.info] = HFQ_QEXT_INT8;
    expect_bind_error(&plain, "tensor 'blk.0.ffn_up.weight' has an hfq.qext encoding but type f32, not i8");
    synth_free(&plain);
    synth_free(&sm);
}

int main(void) {
    test_variants();
    test_lower_precision_weights();
    test_qext_weights();
    test_nvfp4_w4a4();
    test_mxfp4_w4a4();
    test_int8_ct();
    test_act_quant_errors();
    test_cuda_act_quant();
    test_batched_vs_decode();
    test_parallel_paths();
    test_forward_errors();
    test_bind_errors();
    test_qext_bind_errors();
    return check_exit();
}
