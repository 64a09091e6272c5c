/* test_cuda_backend.c - the CUDA backend against the CPU backend on small
 * random models (tests/test_runner_synth.h) for every weight format, llama
 * and qwen2 variants, and with experts: logits of a prompt run in one batch (cuBLAS), token by
 * token and in batches of 5 (matrix-vector kernels), and a long prompt
 * split over batches then decoded. Bound: the one test_runner.c derives for
 * each format against its double reference (a few steps of the activation
 * format, whose roundings may fall the other way on either device), 1e-4
 * for F32. Skips (77) when the build has no CUDA backend or no device
 * answers. */
#include "check.h"
#include "kernels/cuda/cuda.h"
#include "kernels/graph.h"
#include "test_runner_synth.h"

#define N_PROMPT 13   /* above CUDA_MATVEC_MAX_TOKENS: one batch goes through cuBLAS */
#define N_CTX 48

static const int32_t prompt[N_PROMPT] = {1, 17, 4, 42, 9, 9, 33, 0, 48, 25, 12, 3, 30};

/* Logits of tokens[0..n) run in calls of `step` tokens on a fresh context. */
static int run(const hfq_model *m, const hfq_ops *ops, int64_t n_ctx, int64_t n_batch, int64_t step,
               const int32_t *tokens, int64_t n, float *logits, hfq_error *err) {
    /* an F32 KV cache on both backends (the CPU's default is F16, CUDA's F32) */
    hfq_context_params cp = {.n_ctx = n_ctx, .n_batch = n_batch, .n_threads = 2, .kv_k = HFQ_KV_F32,
                             .kv_v = HFQ_KV_F32, .ops = ops};
    hfq_context *c = hfq_context_new(m, &cp, err);
    if (!c) return -1;
    const int64_t V = hfq_model_hparams(m)->n_vocab;
    int rc = 0;
    for (int64_t done = 0; done < n && rc == 0; done += step) {
        const int64_t k = n - done < step ? n - done : step;
        rc = hfq_forward(c, tokens + done, k, k, logits + done * V, err);
    }
    hfq_context_free(c);
    return rc;
}

/* Worst over tokens of max |a - b| / max |b| in each token's row. */
static double worst_rel(const float *a, const float *b, int64_t n_tokens, int64_t V) {
    double worst = 0;
    for (int64_t t = 0; t < n_tokens; t++) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < V; i++) {
            const double d = fabs((double)a[t * V + i] - b[t * V + i]);
            if (d > num || d != d) num = d;
            if (fabs(b[t * V + i]) > den) den = fabs(b[t * V + i]);
        }
        const double e = num / (den > 0 ? den : 1);
        if (e > worst || e != e) worst = e;
    }
    return worst;
}

/* Where the CPU's best token leads the second by more than twice the bound,
 * the device must pick it too. */
static int top1_disagreements(const float *gpu, const float *cpu, int64_t n_tokens, int64_t V, double tol) {
    int bad = 0;
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *c = cpu + t * V, *g = gpu + t * V;
        int64_t best = 0, gbest = 0;
        double amax = 0;
        for (int64_t i = 0; i < V; i++) {
            if (c[i] > c[best]) best = i;
            if (g[i] > g[gbest]) gbest = i;
            amax = fmax(amax, fabs(c[i]));
        }
        double second = -INFINITY;
        for (int64_t i = 0; i < V; i++)
            if (i != best && c[i] > second) second = c[i];
        if (c[best] - second > 2 * tol * amax && gbest != best) bad++;
    }
    return bad;
}

static void check_case(const synth_spec *spec, double tol, const char *label) {
    synth_model sm;
    synth_build(&sm, spec);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    CHECK_MSG(m != NULL, "%s: %s", label, err.msg);
    if (!m) {
        synth_free(&sm);
        return;
    }
    const int64_t V = spec->n_vocab;
    float *cpu = calloc((size_t)(N_PROMPT * V), sizeof(float)), *gpu = calloc((size_t)(N_PROMPT * V), sizeof(float));
    CHECK_MSG(run(m, NULL, N_CTX, 64, N_PROMPT, prompt, N_PROMPT, cpu, &err) == 0, "%s cpu: %s", label, err.msg);
    static const struct { const char *how; int64_t n_batch, step; } ways[] = {
        {"one batch", 64, N_PROMPT}, {"token by token", 64, 1}, {"batches of 5", 5, N_PROMPT}};
    printf("%-28s", label);
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        memset(gpu, 0, (size_t)(N_PROMPT * V) * sizeof(float));
        const int rc = run(m, hfq_cuda_ops(), N_CTX, ways[w].n_batch, ways[w].step, prompt, N_PROMPT, gpu, &err);
        CHECK_MSG(rc == 0, "%s %s: %s", label, ways[w].how, err.msg);
        if (rc) continue;
        const double e = worst_rel(gpu, cpu, N_PROMPT, V);
        printf("  %s %.3g", ways[w].how, e);
        CHECK_MSG(e <= tol, "%s %s: logits rel err %.3g > %.3g", label, ways[w].how, e, tol);
        const int bad = top1_disagreements(gpu, cpu, N_PROMPT, V, tol);
        CHECK_MSG(bad == 0, "%s %s: %d clear top-1 disagreements", label, ways[w].how, bad);
    }
    printf("  (bound %.3g)\n", tol);
    free(cpu);
    free(gpu);
    hfq_model_free(m);
    synth_free(&sm);
}

static void test_f32_variants(void) {
    synth_spec s = synth_default_spec();
    check_case(&s, 1e-4, "llama gqa f32");
    synth_spec mha = s;
    mha.n_head_kv = mha.n_head;
    mha.tied = true;
    check_case(&mha, 1e-4, "llama mha tied");
    synth_spec mqa = s;
    mqa.n_head_kv = 1;
    mqa.n_rot = 6;
    mqa.rope_factors = true;
    mqa.rope_base = 500000.0f;
    check_case(&mqa, 1e-4, "llama mqa partial rope");
    synth_spec qwen = s;
    qwen.arch = HFQ_ARCH_QWEN2;
    qwen.biases = true;
    qwen.rope_scale = 0.25f;
    qwen.rms_eps = 1e-6f;
    check_case(&qwen, 1e-4, "qwen2 biases neox");
    synth_spec scaled = s;
    scaled.scales = true;
    check_case(&scaled, 1e-4, "llama scaled matrices");
}

static void test_formats(void) {
    synth_spec s = synth_default_spec();
    s.wtype = GT_F16;
    check_case(&s, 16 * 0x1p-11, "f16");
    s.wtype = GT_BF16;
    check_case(&s, 16 * 0x1p-8, "bf16");

    s.n_embd = 64, s.n_ff = 96, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 16, s.n_rot = 16;
    static const uint32_t legacy[] = {GT_Q8_0, GT_Q4_0, GT_Q5_0, GT_Q5_1};
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
        s.wtype = legacy[i];
        check_case(&s, 12.0 / 127, ggml_type_get(s.wtype)->name);
    }
    s.n_embd = 256, s.n_ff = 512, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32, s.n_vocab = 64;
    s.scales = true;
    static const uint32_t kquants[] = {GT_Q4_K, GT_Q5_K, GT_Q6_K, GT_MXFP4, GT_NVFP4};
    for (size_t i = 0; i < sizeof kquants / sizeof kquants[0]; i++) {
        s.wtype = kquants[i];
        check_case(&s, 12.0 / 127, ggml_type_get(s.wtype)->name);
    }
}

static void test_i8_formats(void) {
    synth_spec s = synth_default_spec();
    s.wqext = HFQ_QEXT_INT8;
    check_case(&s, 12.0 / 127, "int8 per row");
    s.qext_group = 4;
    check_case(&s, 12.0 / 127, "int8 per 4 values");
    s.input_scales = true;
    check_case(&s, 12.0 / 127, "int8 static input scales");
    s.qext_group = 0;
    s.n_embd = 256, s.n_ff = 512, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32, s.n_vocab = 64;
    check_case(&s, 12.0 / 127, "int8 per row, 16-byte rows");
    s = synth_default_spec();
    s.wqext = HFQ_QEXT_FP8_E4M3;
    check_case(&s, 0.25, "fp8 e4m3");
    s.n_embd = 256, s.n_ff = 512, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32, s.n_vocab = 64;
    check_case(&s, 0.25, "fp8 e4m3 (cuBLASLt shapes)");
    s.input_scales = true;
    check_case(&s, 0.25, "fp8 e4m3 static input scales");
    s = synth_default_spec();
    s.wqext = HFQ_QEXT_FP8_E5M2;
    s.tied = true;
    check_case(&s, 0.5, "fp8 e5m2 tied");
}

/* A long prompt over several batches (positions past 64 in the cache, the
 * batch GEMMs at pos0 > 0), then decoding. */
static void test_long_sequence(void) {
    synth_spec s = synth_default_spec();
    s.n_ctx_train = 512;
    s.n_head = 8, s.n_head_kv = 2, s.head_dim = 64, s.n_rot = 64, s.n_embd = 128, s.n_ff = 256;
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m) return;
    enum { N = 300 };
    int32_t toks[N];
    uint64_t rng = 7;
    for (int i = 0; i < N; i++) toks[i] = (int32_t)(synth_next(&rng) % (uint64_t)s.n_vocab);
    const int64_t V = s.n_vocab;
    float *cpu = calloc((size_t)(N * V), sizeof(float)), *gpu = calloc((size_t)(N * V), sizeof(float));
    CHECK(run(m, NULL, N, 64, N, toks, N, cpu, &err) == 0);
    /* 290 prompt tokens in batches of 64 (the last of 34), then 10 one by one */
    hfq_context_params cp = {.n_ctx = N, .n_batch = 64, .ops = hfq_cuda_ops()};
    hfq_context *c = hfq_context_new(m, &cp, &err);
    CHECK_MSG(c != NULL, "%s", err.msg);
    if (c) {
        CHECK_MSG(hfq_forward(c, toks, 290, 290, gpu, &err) == 0, "%s", err.msg);
        for (int i = 290; i < N; i++) CHECK_MSG(hfq_forward(c, toks + i, 1, 1, gpu + i * V, &err) == 0, "%s", err.msg);
        const double e = worst_rel(gpu, cpu, N, V);
        printf("long sequence f32 (300 positions): %.3g\n", e);
        CHECK_MSG(e <= 1e-4, "long sequence: rel err %.3g", e);
        hfq_context_free(c);
    }
    free(cpu);
    free(gpu);
    hfq_model_free(m);
    synth_free(&sm);
}

/* Mixtures of experts (gather_rows, add_rows_scaled, each expert's slice
 * of the stacked tensors, through the matrix-vector kernels and cuBLAS):
 * 4 experts, top 2, in F32, Q8_0 and Q4_K. */
static void test_experts(void) {
    synth_spec s = synth_default_spec();
    s.n_expert = 4, s.n_expert_used = 2, s.n_ff_exp = 24;
    check_case(&s, 1e-4, "llama 4 experts f32");
    s.n_embd = 64, s.n_ff = 96, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 16, s.n_rot = 16, s.n_ff_exp = 64;
    s.wtype = GT_Q8_0;
    check_case(&s, 12.0 / 127, "llama 4 experts q8_0");
    s.n_embd = 256, s.n_ff = 512, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 32, s.n_rot = 32, s.n_vocab = 64;
    s.n_ff_exp = 256;
    s.wtype = GT_Q4_K;
    check_case(&s, 12.0 / 127, "llama 4 experts q4_K");
}

int main(void) {
    hfq_cuda_probe p;
    hfq_cuda_probe_get(&p);
    if (!p.built) CHECK_SKIP("this build has no CUDA backend");
    if (p.n_devices == 0) CHECK_SKIP("no CUDA device (%s)", p.reason);
    printf("device: %s (sm_%d%d, %.1f GiB)\n", p.name, p.cc_major, p.cc_minor, (double)p.total_bytes / (1 << 30));
    test_f32_variants();
    test_formats();
    test_i8_formats();
    test_long_sequence();
    test_experts();
    return check_exit();
}
