/* test_plan.c - per-tensor format choice against llama.cpp's rules.
 *
 * Expectations are worked out by hand from .cache/llama.cpp/src/llama-quant.cpp
 * (function names cited at each check), not from running quant/plan.c.
 * tests/ref_quant/compare_llama_quantize.sh checks the same against the real
 * llama-quantize binary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/plan.h"
#include "tests/check.h"

#include "tests/plan_models.h"

#define EXPECT(m, p, name, want) do { const hfq_plan_entry *e_ = entry(m, p, name); \
    CHECK_MSG(e_->fmt == (uint32_t)(want), "%s: got %s, want %s", name, hfq_fmt_name(e_->fmt), \
              hfq_fmt_name(want)); } while (0)

static void layer_name(char *buf, size_t n, int l, const char *suffix) {
    snprintf(buf, n, "blk.%d.%s", l, suffix);
}

/* Checks `suffix` in every layer: layers in `bumped` get `hi`, others `lo`. */
static void expect_layers(const model *m, const hfq_plan *p, const char *suffix, const int *bumped,
                          int n_bumped, uint32_t hi, uint32_t lo) {
    for (int l = 0; l < m->hp.n_layer; l++) {
        bool b = false;
        for (int k = 0; k < n_bumped; k++) b |= bumped[k] == l;
        char nm[64];
        layer_name(nm, sizeof nm, l, suffix);
        EXPECT(m, p, nm, b ? hi : lo);
    }
}

static void build(const model *m, hfq_plan *p, const hfq_plan_opts *o) {
    hfq_error err = {{0}};
    int rc = hfq_plan_build(p, &m->hp, m->t, m->n, o, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc != 0) exit(check_exit());
}

static void plan_preset(const model *m, hfq_plan *p, hfq_preset preset) {
    hfq_plan_opts o = hfq_plan_opts_default(preset);
    build(m, p, &o);
}

/* use_more_bits(i, 16): i < 2 || i >= 14 || (i - 2) % 3 == 2 */
static const int more16[] = {0, 1, 4, 7, 10, 13, 14, 15};

static void test_q4_k_m_16_layers(void) {
    static model m;
    hfq_plan p;
    llama_model(&m, 16, 2048, 8192, 32, 8, 32000, false, GT_F16);
    plan_preset(&m, &p, HFQ_PRESET_Q4_K_M);
    /* untied token_embd: no Q4_K_M rule -> base type */
    EXPECT(&m, &p, "token_embd.weight", GT_Q4_K);
    /* output: nx % 256 == 0 and base != Q8_0 -> Q6_K */
    EXPECT(&m, &p, "output.weight", GT_Q6_K);
    /* 1-D tensors are never quantized (tensor_allows_quantization) */
    EXPECT(&m, &p, "output_norm.weight", GT_F32);
    EXPECT(&m, &p, "blk.3.attn_norm.weight", GT_F32);
    EXPECT(&m, &p, "blk.3.ffn_norm.weight", GT_F32);
    CHECK(!entry(&m, &p, "blk.3.ffn_norm.weight")->convert);
    /* attn_v and ffn_down: Q6_K where use_more_bits(i, 16) */
    expect_layers(&m, &p, "attn_v.weight", more16, 8, GT_Q6_K, GT_Q4_K);
    expect_layers(&m, &p, "ffn_down.weight", more16, 8, GT_Q6_K, GT_Q4_K);
    /* no rule for these with Q4_K_M */
    expect_layers(&m, &p, "attn_q.weight", NULL, 0, 0, GT_Q4_K);
    expect_layers(&m, &p, "attn_k.weight", NULL, 0, 0, GT_Q4_K);
    expect_layers(&m, &p, "attn_output.weight", NULL, 0, 0, GT_Q4_K);
    expect_layers(&m, &p, "ffn_gate.weight", NULL, 0, 0, GT_Q4_K);
    expect_layers(&m, &p, "ffn_up.weight", NULL, 0, 0, GT_Q4_K);
    CHECK(p.n_fallback == 0);
    /* sizes: a Q4_K row of 2048 is 8 blocks of 144 bytes; a Q6_K row 8 x 210 */
    CHECK(entry(&m, &p, "blk.0.attn_q.weight")->nbytes == 2048 * 8 * 144);
    CHECK(entry(&m, &p, "output.weight")->nbytes == 32000LL * 8 * 210);
    CHECK(entry(&m, &p, "output_norm.weight")->nbytes == 2048 * 4);
    CHECK(p.n_elements == 2 * 2048LL * 32000 + 2048 +
                              16 * (2 * 2048LL * 2048 + 2 * 2048LL * 512 + 3 * 2048LL * 8192 + 2 * 2048));
    hfq_plan_free(&p);

    /* tied: token_embd takes the output's treatment -> Q6_K */
    llama_model(&m, 16, 2048, 8192, 32, 8, 32000, true, GT_F16);
    plan_preset(&m, &p, HFQ_PRESET_Q4_K_M);
    EXPECT(&m, &p, "token_embd.weight", GT_Q6_K);
    hfq_plan_free(&p);
}

static void test_other_k_presets(void) {
    static model m;
    hfq_plan p;
    llama_model(&m, 16, 2048, 8192, 32, 8, 32000, false, GT_F16);

    /* Q4_K_S: attn_v Q5_K for i_attention_wv < 4; ffn_down Q5_K for i < n/8 */
    plan_preset(&m, &p, HFQ_PRESET_Q4_K_S);
    static const int first4[] = {0, 1, 2, 3}, first2[] = {0, 1};
    expect_layers(&m, &p, "attn_v.weight", first4, 4, GT_Q5_K, GT_Q4_K);
    expect_layers(&m, &p, "ffn_down.weight", first2, 2, GT_Q5_K, GT_Q4_K);
    EXPECT(&m, &p, "output.weight", GT_Q6_K);
    EXPECT(&m, &p, "token_embd.weight", GT_Q4_K);
    hfq_plan_free(&p);

    /* Q5_K_M: use_more_bits -> Q6_K for attn_v and ffn_down */
    plan_preset(&m, &p, HFQ_PRESET_Q5_K_M);
    expect_layers(&m, &p, "attn_v.weight", more16, 8, GT_Q6_K, GT_Q5_K);
    expect_layers(&m, &p, "ffn_down.weight", more16, 8, GT_Q6_K, GT_Q5_K);
    expect_layers(&m, &p, "ffn_up.weight", NULL, 0, 0, GT_Q5_K);
    EXPECT(&m, &p, "output.weight", GT_Q6_K);
    hfq_plan_free(&p);

    /* Q6_K: everything Q6_K (output: base != Q8_0 -> Q6_K) */
    plan_preset(&m, &p, HFQ_PRESET_Q6_K);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, GT_Q6_K);
    EXPECT(&m, &p, "output.weight", GT_Q6_K);
    EXPECT(&m, &p, "token_embd.weight", GT_Q6_K);
    hfq_plan_free(&p);

    /* Q3_K_M: attn_v Q5_K for i < 2 else Q4_K; ffn_down Q5_K for i < n/16,
     * else Q4_K (arch != falcon); attn_output Q4_K */
    plan_preset(&m, &p, HFQ_PRESET_Q3_K_M);
    static const int first1[] = {0};
    expect_layers(&m, &p, "attn_v.weight", first2, 2, GT_Q5_K, GT_Q4_K);
    expect_layers(&m, &p, "ffn_down.weight", first1, 1, GT_Q5_K, GT_Q4_K);
    expect_layers(&m, &p, "attn_output.weight", NULL, 0, 0, GT_Q4_K);
    expect_layers(&m, &p, "attn_q.weight", NULL, 0, 0, GT_Q3_K);
    EXPECT(&m, &p, "output.weight", GT_Q6_K);
    hfq_plan_free(&p);

    /* Q2_K with n_gqa = 4: attn_v Q4_K, ffn_down Q3_K, attn_output Q3_K */
    plan_preset(&m, &p, HFQ_PRESET_Q2_K);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, GT_Q4_K);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_Q3_K);
    expect_layers(&m, &p, "attn_output.weight", NULL, 0, 0, GT_Q3_K);
    expect_layers(&m, &p, "ffn_gate.weight", NULL, 0, 0, GT_Q2_K);
    hfq_plan_free(&p);
}

static void test_legacy_and_plain_presets(void) {
    static model m;
    hfq_plan p;
    llama_model(&m, 16, 2048, 8192, 32, 8, 32000, false, GT_F16);

    /* Q8_0: output keeps Q8_0 (the "!= Q8_0" test) */
    plan_preset(&m, &p, HFQ_PRESET_Q8_0);
    EXPECT(&m, &p, "output.weight", GT_Q8_0);
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_Q8_0);
    hfq_plan_free(&p);

    /* Q4_0: output Q6_K; no imatrix -> ffn_down stays Q4_0 */
    plan_preset(&m, &p, HFQ_PRESET_Q4_0);
    EXPECT(&m, &p, "output.weight", GT_Q6_K);
    EXPECT(&m, &p, "token_embd.weight", GT_Q4_0);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_Q4_0);
    hfq_plan_free(&p);

    /* Q4_0 with an imatrix: ffn_down Q4_1 for i < n/8 */
    hfq_plan_opts o = hfq_plan_opts_default(HFQ_PRESET_Q4_0);
    o.has_imatrix = true;
    build(&m, &p, &o);
    static const int first2[] = {0, 1};
    expect_layers(&m, &p, "ffn_down.weight", first2, 2, GT_Q4_1, GT_Q4_0);
    hfq_plan_free(&p);

    /* F16 / BF16: base type not quantized: every quantizable tensor gets it */
    plan_preset(&m, &p, HFQ_PRESET_BF16);
    EXPECT(&m, &p, "output.weight", GT_BF16);
    EXPECT(&m, &p, "blk.0.attn_v.weight", GT_BF16);
    EXPECT(&m, &p, "blk.0.attn_norm.weight", GT_F32);
    CHECK(entry(&m, &p, "blk.0.attn_v.weight")->convert);
    hfq_plan_free(&p);
    plan_preset(&m, &p, HFQ_PRESET_F16);
    EXPECT(&m, &p, "output.weight", GT_F16);
    CHECK(!entry(&m, &p, "output.weight")->convert);
    CHECK(p.in_nbytes == p.out_nbytes);
    hfq_plan_free(&p);

    /* MXFP4_MOE on a dense model: no 3-D tensors -> all Q8_0 */
    plan_preset(&m, &p, HFQ_PRESET_MXFP4_MOE);
    EXPECT(&m, &p, "output.weight", GT_Q8_0);
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    expect_layers(&m, &p, "ffn_up.weight", NULL, 0, 0, GT_Q8_0);
    hfq_plan_free(&p);
}

/* stories260K: hidden 64, ffn 172, 5 layers, 8/4 heads, vocab 512, tied */
static void test_stories260k_fallbacks(void) {
    static model m;
    hfq_plan p;
    llama_model(&m, 5, 64, 172, 8, 4, 512, true, GT_F32);

    plan_preset(&m, &p, HFQ_PRESET_Q4_K_M);
    /* tied token_embd, nx = 64 not a multiple of Q4_K's 256 -> Q8_0 */
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    /* use_more_bits(i, 5): n/8 = 0, 7n/8 = 4 -> i = 2 ((i-0)%3 == 2) and 4;
     * Q6_K falls back to Q8_0, Q4_K to Q5_0 (tensor_type_fallback) */
    static const int more5[] = {2, 4};
    expect_layers(&m, &p, "attn_v.weight", more5, 2, GT_Q8_0, GT_Q5_0);
    expect_layers(&m, &p, "attn_q.weight", NULL, 0, 0, GT_Q5_0);
    expect_layers(&m, &p, "ffn_up.weight", NULL, 0, 0, GT_Q5_0);
    /* ffn_down rows are 172: neither Q5_0 nor Q8_0 (32) fits -> F16 */
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_F16);
    CHECK(p.n_fallback == 35); /* 7 weights x 5 layers */
    CHECK_STR_CONTAINS(entry(&m, &p, "blk.0.attn_q.weight")->note, "not a multiple of 256");
    CHECK_STR_CONTAINS(entry(&m, &p, "blk.0.ffn_down.weight")->note, "unusual shape");
    CHECK(entry(&m, &p, "token_embd.weight")->note[0] == '\0');
    hfq_plan_free(&p);

    /* Q4_0: token_embd gets Q6_K (64 % 32 == 0), which falls back to Q8_0 */
    plan_preset(&m, &p, HFQ_PRESET_Q4_0);
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    expect_layers(&m, &p, "attn_k.weight", NULL, 0, 0, GT_Q4_0);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_F16);
    CHECK(p.n_fallback == 6); /* token_embd + 5 ffn_down */
    hfq_plan_free(&p);

    /* Q5_K_S: Q5_K -> Q5_1 everywhere, token_embd Q8_0 */
    plan_preset(&m, &p, HFQ_PRESET_Q5_K_S);
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, GT_Q5_1);
    hfq_plan_free(&p);

    /* Q3_K_S: Q3_K -> Q4_0 */
    plan_preset(&m, &p, HFQ_PRESET_Q3_K_S);
    expect_layers(&m, &p, "ffn_gate.weight", NULL, 0, 0, GT_Q4_0);
    hfq_plan_free(&p);

    /* Q2_K (n_gqa 2): attn_v Q3_K and ffn_gate Q2_K both -> Q4_0; ffn_down
     * Q3_K -> Q4_0, which rows of 172 cannot hold either -> F16 */
    plan_preset(&m, &p, HFQ_PRESET_Q2_K);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, GT_Q4_0);
    expect_layers(&m, &p, "ffn_gate.weight", NULL, 0, 0, GT_Q4_0);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_F16);
    hfq_plan_free(&p);

    /* IQ4_XS: IQ4_XS -> IQ4_NL (a 32-block format), ffn_down -> F16; the
     * tied token_embd is the output: Q8_0 (64 % 256 != 0) */
    plan_preset(&m, &p, HFQ_PRESET_IQ4_XS);
    expect_layers(&m, &p, "attn_q.weight", NULL, 0, 0, GT_IQ4_NL);
    expect_layers(&m, &p, "ffn_up.weight", NULL, 0, 0, GT_IQ4_NL);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_F16);
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    CHECK_STR_CONTAINS(entry(&m, &p, "blk.0.attn_q.weight")->note, "iq4_nl");
    hfq_plan_free(&p);
}

/* Where llama.cpp loads a per-tensor .scale, and NVFP4's bytes without one
 * elsewhere. */
static void test_llama_scale_slots(void) {
    const char *with[] = {"blk.0.attn_q.weight", "blk.12.attn_output.weight", "blk.3.ffn_down_exps.weight",
                          "blk.1.nextn.eh_proj.weight", "blk.0.ffn_up_shexp.weight", "output.weight"};
    const char *without[] = {"token_embd.weight", "blk.0.attn_norm.weight", "blk.x.attn_q.weight",
                             "blk.0.attn_q.bias", "blk.0.attn_q", "output_norm.weight", "blk.0.attn_qq.weight",
                             "per_layer_token_embd.weight", "blk.-1.attn_q.weight"};
    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++)
        CHECK_MSG(hfq_plan_llama_loads_scale(with[i]), "%s", with[i]);
    for (size_t i = 0; i < sizeof without / sizeof without[0]; i++)
        CHECK_MSG(!hfq_plan_llama_loads_scale(without[i]), "%s", without[i]);
    const hfq_fmt_spec nv = {GT_NVFP4, HFQ_SCALE_PER_ROW};
    const int64_t ne[4] = {128, 4, 1, 1};
    CHECK(hfq_fmt_tensor_nbytes(&nv, "llama", "blk.0.attn_q.weight", ne) == 4 * 2 * 36 + 4);
    CHECK(hfq_fmt_tensor_nbytes(&nv, "llama", "token_embd.weight", ne) == 4 * 2 * 36);
    /* the FFN's scales: applied by llama.cpp's llama / qwen3 / qwen3moe graphs, dropped by
     * the others' (gemma3.cpp, qwen2.cpp, phi3.cpp pass NULL to build_ffn) */
    const char *applied[][2] = {{"llama", "blk.0.ffn_gate.weight"}, {"qwen3", "blk.2.ffn_down.weight"},
                                {"qwen3moe", "blk.1.ffn_up_exps.weight"}, {"gemma3", "blk.0.attn_q.weight"},
                                {"qwen2", "blk.0.attn_output.weight"}, {"phi3", "output.weight"}};
    const char *dropped[][2] = {{"gemma3", "blk.0.ffn_gate.weight"}, {"gemma2", "blk.0.ffn_up.weight"},
                                {"qwen2", "blk.3.ffn_down.weight"}, {"phi3", "blk.0.ffn_up.weight"},
                                {"unknown", "blk.0.ffn_gate_exps.weight"}, {"llama", "token_embd.weight"}};
    for (size_t i = 0; i < sizeof applied / sizeof applied[0]; i++)
        CHECK_MSG(hfq_plan_llama_applies_scale(applied[i][0], applied[i][1]), "%s %s", applied[i][0], applied[i][1]);
    for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
        CHECK_MSG(!hfq_plan_llama_applies_scale(dropped[i][0], dropped[i][1]), "%s %s", dropped[i][0], dropped[i][1]);
    CHECK(hfq_fmt_tensor_nbytes(&nv, "gemma3", "blk.0.ffn_gate.weight", ne) == 4 * 2 * 36);
    const int64_t exps[4] = {128, 4, 8, 1};
    CHECK(hfq_plan_nvfp4_scales("qwen3moe", "blk.0.ffn_gate_exps.weight", exps) == 8);
    CHECK(hfq_plan_nvfp4_scales("gemma3", "blk.0.ffn_gate_exps.weight", exps) == 0);
}

/* The counters follow llama.cpp's tensor order (layer number, then name),
 * whatever the file order. */
static void test_order_independent(void) {
    static model m, r;
    hfq_plan p;
    llama_model(&m, 16, 2048, 8192, 32, 8, 32000, false, GT_F16);
    r = m;
    for (int64_t i = 0; i < m.n; i++) {
        r.t[i] = m.t[m.n - 1 - i];
        memcpy(r.names[i], m.names[m.n - 1 - i], sizeof r.names[i]);
        r.t[i].name = r.names[i];
    }
    plan_preset(&r, &p, HFQ_PRESET_Q4_K_M);
    expect_layers(&r, &p, "attn_v.weight", more16, 8, GT_Q6_K, GT_Q4_K);
    expect_layers(&r, &p, "ffn_down.weight", more16, 8, GT_Q6_K, GT_Q4_K);
    hfq_plan_free(&p);
}

static void test_options(void) {
    static model m;
    hfq_plan p;
    hfq_error err = {{0}};
    llama_model(&m, 16, 2048, 8192, 32, 8, 32000, false, GT_F16);

    /* --pure: the base type everywhere, output included */
    hfq_plan_opts o = hfq_plan_opts_default(HFQ_PRESET_Q4_K_M);
    o.pure = true;
    build(&m, &p, &o);
    EXPECT(&m, &p, "output.weight", GT_Q4_K);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, GT_Q4_K);
    hfq_plan_free(&p);

    /* --leave-output-tensor */
    o = hfq_plan_opts_default(HFQ_PRESET_Q4_K_M);
    o.leave_output = true;
    build(&m, &p, &o);
    EXPECT(&m, &p, "output.weight", GT_F16);
    CHECK(!entry(&m, &p, "output.weight")->convert);
    hfq_plan_free(&p);

    /* --token-embedding-type / --output-tensor-type */
    o = hfq_plan_opts_default(HFQ_PRESET_Q4_K_M);
    o.token_embd_fmt = GT_Q8_0;
    o.output_fmt = GT_Q5_K;
    build(&m, &p, &o);
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    EXPECT(&m, &p, "output.weight", GT_Q5_K);
    CHECK_STR_CONTAINS(entry(&m, &p, "output.weight")->note, "--output-tensor-type");
    hfq_plan_free(&p);

    /* tied + --output-tensor-type: token_embd takes the output type */
    static model t;
    llama_model(&t, 16, 2048, 8192, 32, 8, 32000, true, GT_F16);
    o = hfq_plan_opts_default(HFQ_PRESET_Q4_K_M);
    o.output_fmt = GT_Q8_0;
    build(&t, &p, &o);
    EXPECT(&t, &p, "token_embd.weight", GT_Q8_0);
    hfq_plan_free(&p);

    /* --tensor-type on blk.0's attn_v only: that tensor skips the rules, so
     * i_attention_wv is not counted for it and layer L sees i = L - 1:
     * Q6_K where use_more_bits(L - 1, 16) */
    hfq_plan_override ov[2];
    CHECK(hfq_plan_override_parse(&ov[0], "blk\\.0\\.attn_v=q8_0", &err) == 0);
    CHECK(hfq_plan_override_parse(&ov[1], "attn_v=q5_k", &err) == 0);
    o = hfq_plan_opts_default(HFQ_PRESET_Q4_K_M);
    o.overrides = ov;
    o.n_overrides = 1;
    build(&m, &p, &o);
    static const int shifted[] = {1, 2, 5, 8, 11, 14, 15};
    for (int l = 1; l < 16; l++) {
        bool b = false;
        for (int k = 0; k < 7; k++) b |= shifted[k] == l;
        char nm[64];
        layer_name(nm, sizeof nm, l, "attn_v.weight");
        EXPECT(&m, &p, nm, b ? GT_Q6_K : GT_Q4_K);
    }
    EXPECT(&m, &p, "blk.0.attn_v.weight", GT_Q8_0);
    CHECK_STR_CONTAINS(entry(&m, &p, "blk.0.attn_v.weight")->note, "--tensor-type");
    hfq_plan_free(&p);

    /* first match wins */
    o.n_overrides = 2;
    build(&m, &p, &o);
    EXPECT(&m, &p, "blk.0.attn_v.weight", GT_Q8_0);
    EXPECT(&m, &p, "blk.1.attn_v.weight", GT_Q5_K);
    hfq_plan_free(&p);
    hfq_plan_override_free(&ov[0]);
    hfq_plan_override_free(&ov[1]);

    /* a K-type override on a 172-wide tensor still falls back */
    static model s;
    llama_model(&s, 5, 64, 172, 8, 4, 512, true, GT_F32);
    CHECK(hfq_plan_override_parse(&ov[0], "ffn_down=Q6_K", &err) == 0);
    o = hfq_plan_opts_default(HFQ_PRESET_Q8_0);
    o.overrides = ov;
    o.n_overrides = 1;
    build(&s, &p, &o);
    EXPECT(&s, &p, "blk.2.ffn_down.weight", GT_F16);
    hfq_plan_free(&p);
    hfq_plan_override_free(&ov[0]);

    /* malformed overrides */
    CHECK(hfq_plan_override_parse(&ov[0], "attn_v", &err) < 0);
    CHECK(hfq_plan_override_parse(&ov[0], "=q8_0", &err) < 0);
    CHECK(hfq_plan_override_parse(&ov[0], "attn_v=", &err) < 0);
    CHECK(hfq_plan_override_parse(&ov[0], "attn_v=q9_9", &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "q9_9");
    CHECK(hfq_plan_override_parse(&ov[0], "attn_v=i32", &err) < 0);
    CHECK(hfq_plan_override_parse(&ov[0], "attn_(v=q8_0", &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "bad regex");
}

/* 80 layers, GQA llama: LLM_TYPE_70B -> attn_v Q4_K becomes Q5_K */
static void test_70b(void) {
    static model m;
    hfq_plan p;
    llama_model(&m, 80, 1024, 2048, 64, 8, 1000, false, GT_F16);
    plan_preset(&m, &p, HFQ_PRESET_Q4_K_M);
    /* use_more_bits(i, 80): i < 10 || i >= 70 || (i - 10) % 3 == 2 */
    int bumped[80], nb = 0;
    for (int i = 0; i < 80; i++)
        if (i < 10 || i >= 70 || (i - 10) % 3 == 2) bumped[nb++] = i;
    expect_layers(&m, &p, "attn_v.weight", bumped, nb, GT_Q6_K, GT_Q5_K);
    expect_layers(&m, &p, "ffn_down.weight", bumped, nb, GT_Q6_K, GT_Q4_K);
    hfq_plan_free(&p);
    /* n_head == n_head_kv: LLM_TYPE_65B, no bump */
    m.hp.n_head_kv = 64;
    plan_preset(&m, &p, HFQ_PRESET_Q4_K_M);
    expect_layers(&m, &p, "attn_v.weight", bumped, nb, GT_Q6_K, GT_Q4_K);
    hfq_plan_free(&p);
}

/* 8 experts: attn_v and attn_k Q8_0, attn_output Q5_K; ffn_down's layer from
 * its name; MXFP4_MOE puts experts in MXFP4 */
static void test_moe(void) {
    static model m;
    hfq_plan p;
    memset(&m, 0, sizeof m);
    snprintf(m.hp.arch, sizeof m.hp.arch, "llama");
    m.hp.n_layer = 8;
    m.hp.n_head = 32;
    m.hp.n_head_kv = 8;
    m.hp.n_expert = 8;
    add(&m, "token_embd.weight", 1024, 1000, 1, GT_BF16);
    add(&m, "output.weight", 1024, 1000, 1, GT_BF16);
    for (int l = 7; l >= 0; l--) {
        char nm[64];
#define L(suffix, a, b, c, ty) (snprintf(nm, sizeof nm, "blk.%d." suffix, l), add(&m, nm, a, b, c, ty))
        L("attn_k.weight", 1024, 256, 1, GT_BF16);
        L("attn_v.weight", 1024, 256, 1, GT_BF16);
        L("attn_output.weight", 1024, 1024, 1, GT_BF16);
        L("ffn_gate_inp.weight", 1024, 8, 1, GT_F32);
        L("ffn_down_exps.weight", 512, 1024, 8, GT_BF16);
        L("ffn_up_exps.weight", 1024, 512, 8, GT_BF16);
#undef L
    }
    plan_preset(&m, &p, HFQ_PRESET_Q4_K_M);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, GT_Q8_0);
    expect_layers(&m, &p, "attn_k.weight", NULL, 0, 0, GT_Q8_0);
    expect_layers(&m, &p, "attn_output.weight", NULL, 0, 0, GT_Q5_K);
    expect_layers(&m, &p, "ffn_gate_inp.weight", NULL, 0, 0, GT_F32);
    /* use_more_bits(l, 8): l < 1 || l >= 7 || (l - 1) % 3 == 2 -> 0, 3, 6, 7 */
    static const int more8[] = {0, 3, 6, 7};
    expect_layers(&m, &p, "ffn_down_exps.weight", more8, 4, GT_Q6_K, GT_Q4_K);
    CHECK(entry(&m, &p, "blk.0.ffn_down_exps.weight")->nbytes == 1024LL * 8 * 2 * 210);
    hfq_plan_free(&p);

    plan_preset(&m, &p, HFQ_PRESET_MXFP4_MOE);
    expect_layers(&m, &p, "ffn_up_exps.weight", NULL, 0, 0, GT_MXFP4);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, GT_Q8_0);
    EXPECT(&m, &p, "output.weight", GT_Q8_0);
    hfq_plan_free(&p);

    /* with experts, an ffn_down outside "blk.N." has no layer: refused */
    add(&m, "ffn_down_extra.weight", 512, 1024, 1, GT_BF16);
    hfq_plan_opts o = hfq_plan_opts_default(HFQ_PRESET_Q4_K_M);
    hfq_error err = {{0}};
    CHECK(hfq_plan_build(&p, &m.hp, m.t, m.n, &o, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "ffn_down_extra.weight");
}

/* Our presets (docs/quantize-tool.md) */
static void test_hfq_presets(void) {
    static model m;
    hfq_plan p;
    llama_model(&m, 5, 64, 172, 8, 4, 512, false, GT_F32);

    /* NVFP4 (64-blocks): linear weights NVFP4; 172 -> MXFP4 would need 32 | 172
     * too -> F16; embeddings and LM head 16-bit */
    plan_preset(&m, &p, HFQ_PRESET_NVFP4);
    expect_layers(&m, &p, "attn_q.weight", NULL, 0, 0, GT_NVFP4);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_F16);
    EXPECT(&m, &p, "token_embd.weight", GT_F16);
    EXPECT(&m, &p, "output.weight", GT_F16);
    EXPECT(&m, &p, "output_norm.weight", GT_F32);
    /* 64 x 64 NVFP4: 64 rows x 1 block x 36 bytes + the 4-byte global scale */
    CHECK(entry(&m, &p, "blk.0.attn_q.weight")->nbytes == 64 * 36 + 4);
    hfq_plan_free(&p);

    /* INT8 / FP8: one scale per row, any row length */
    plan_preset(&m, &p, HFQ_PRESET_INT8);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, HFQ_FMT_INT8);
    EXPECT(&m, &p, "output.weight", GT_F16);
    CHECK(entry(&m, &p, "blk.0.ffn_down.weight")->nbytes == 64 * 172 + 64 * 4);
    hfq_plan_free(&p);
    plan_preset(&m, &p, HFQ_PRESET_FP8_E4M3);
    expect_layers(&m, &p, "attn_v.weight", NULL, 0, 0, HFQ_FMT_FP8_E4M3);
    hfq_plan_free(&p);

    /* MXFP4 (dense): linear weights MXFP4, 172 -> F16, head and embedding Q8_0 */
    plan_preset(&m, &p, HFQ_PRESET_MXFP4);
    expect_layers(&m, &p, "ffn_gate.weight", NULL, 0, 0, GT_MXFP4);
    expect_layers(&m, &p, "ffn_down.weight", NULL, 0, 0, GT_F16);
    EXPECT(&m, &p, "output.weight", GT_Q8_0);
    EXPECT(&m, &p, "token_embd.weight", GT_Q8_0);
    hfq_plan_free(&p);

    /* BF16 input keeps BF16 for the head under FP8 */
    llama_model(&m, 2, 128, 256, 4, 4, 256, true, GT_BF16);
    plan_preset(&m, &p, HFQ_PRESET_FP8_E5M2);
    EXPECT(&m, &p, "token_embd.weight", GT_BF16);
    CHECK(!entry(&m, &p, "token_embd.weight")->convert);
    expect_layers(&m, &p, "ffn_up.weight", NULL, 0, 0, HFQ_FMT_FP8_E5M2);
    hfq_plan_free(&p);
}

static void test_names_and_errors(void) {
    CHECK(hfq_preset_from_name("q4_k_m") == HFQ_PRESET_Q4_K_M);
    CHECK(hfq_preset_from_name("Q4_K") == HFQ_PRESET_Q4_K_M);
    CHECK(hfq_preset_from_name("fp8_e4m3") == HFQ_PRESET_FP8_E4M3);
    CHECK(hfq_preset_from_name("Q4_K_X") == -1);
    /* llama.h's llama_ftype values */
    CHECK(hfq_preset_file_type(HFQ_PRESET_Q4_K_M) == 15);
    CHECK(hfq_preset_file_type(HFQ_PRESET_Q8_0) == 7);
    CHECK(hfq_preset_file_type(HFQ_PRESET_Q6_K) == 18);
    CHECK(hfq_preset_file_type(HFQ_PRESET_BF16) == 32);
    CHECK(hfq_preset_file_type(HFQ_PRESET_MXFP4_MOE) == 38);
    CHECK(hfq_preset_file_type(HFQ_PRESET_NVFP4) == 39);
    CHECK((hfq_preset_file_type(HFQ_PRESET_INT8) & 1024) == 0);
    CHECK(hfq_fmt_from_name("Q4_k") == GT_Q4_K);
    CHECK(hfq_fmt_from_name("FP8_E4M3") == HFQ_FMT_FP8_E4M3);
    CHECK(strcmp(hfq_fmt_name(GT_Q6_K), "q6_K") == 0);

    static model m;
    hfq_plan p;
    hfq_error err = {{0}};
    hfq_plan_opts o = hfq_plan_opts_default(HFQ_PRESET_Q8_0);
    llama_model(&m, 2, 64, 128, 4, 4, 100, true, GT_F16);
    m.t[3].ne[1] = 0;
    CHECK(hfq_plan_build(&p, &m.hp, m.t, m.n, &o, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, m.t[3].name);
    m.t[3].ne[1] = 64;
    m.t[3].type = GT_Q4_K; /* 64 is not a multiple of 256 */
    CHECK(hfq_plan_build(&p, &m.hp, m.t, m.n, &o, &err) < 0);
    m.t[3].type = GT_F16;
    m.hp.n_layer = 0;
    CHECK(hfq_plan_build(&p, &m.hp, m.t, m.n, &o, &err) < 0);
}

int main(void) {
    test_q4_k_m_16_layers();
    test_other_k_presets();
    test_legacy_and_plain_presets();
    test_stories260k_fallbacks();
    test_llama_scale_slots();
    test_order_independent();
    test_options();
    test_70b();
    test_moe();
    test_hfq_presets();
    test_names_and_errors();
    return check_exit();
}
