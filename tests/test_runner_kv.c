/* test_runner_kv.c - the KV cache formats (kernels/kv_type.h) in the forward
 * pass: for every K, V pair the logits of a small random model against the
 * double-precision reference of test_runner_synth.h with its K and V rows
 * (and queries, for the key formats whose dot converts them) rounded as the
 * format defines; the same logits batched and token by token and for any
 * thread count; cache sizes; refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/graph.h"
#include "quant/fp8.h"
#include "quant/qtype.h"
#include "tests/check.h"
#include "tests/test_runner_synth.h"

#define N_PROMPT 11
#define N_CTX 16

static const int32_t prompt[N_PROMPT] = {1, 7, 22, 3, 45, 18, 9, 30, 2, 41, 13};

/* A head_dim the block formats take (32) and GQA. */
static synth_spec kv_spec(void) {
    synth_spec s = synth_default_spec();
    s.n_embd = 40;
    s.head_dim = 32;
    s.n_rot = 32;
    return s;
}

/* x through format t and back: one row as stored. */
static void round_through(hfq_kv_type t, double *x, int64_t hd) {
    float f[64], back[64];
    unsigned char bytes[64 * 4 + 64];
    for (int64_t i = 0; i < hd; i++) f[i] = (float)x[i];
    if (t == HFQ_KV_FP8_E4M3 || t == HFQ_KV_FP8_E5M2) {
        const hfq_fp8_format fmt = t == HFQ_KV_FP8_E4M3 ? HFQ_FP8_E4M3 : HFQ_FP8_E5M2;
        const float scale = hfq_fp8_scale(fmt, f, hd);
        hfq_quantize_fp8_static(fmt, f, bytes, 1, hd, scale);
        hfq_dequantize_row_fp8(fmt, bytes, back, hd, scale);
    } else {
        const hfq_qtype_traits *tr = hfq_qtype_get(hfq_kv_type_qtype(t));
        tr->quantize(f, bytes, 1, hd, NULL);
        tr->dequantize(bytes, back, hd);
    }
    for (int64_t i = 0; i < hd; i++) x[i] = back[i];
}

/* A query as the key format's dot sees it: converted to its vec_dot_type
 * (FP8 keys: floats). */
static void round_query(hfq_kv_type k, double *q, int64_t hd) {
    float f[64], back[64];
    unsigned char bytes[64 * 4];
    for (int64_t i = 0; i < hd; i++) f[i] = (float)q[i];
    if (k != HFQ_KV_FP8_E4M3 && k != HFQ_KV_FP8_E5M2) {
        const hfq_qtype_traits *at = hfq_qtype_get(hfq_qtype_get(hfq_kv_type_qtype(k))->vec_dot_type);
        at->quantize_row(f, bytes, hd);
        at->dequantize(bytes, back, hd);
        memcpy(f, back, sizeof f);
    }
    for (int64_t i = 0; i < hd; i++) q[i] = f[i];
}

typedef struct kv_pair {
    hfq_kv_type k, v;
} kv_pair;

static void round_kv(void *user, char which, double *x, int64_t hd) {
    const kv_pair *p = user;
    if (which == 'q') round_query(p->k, x, hd);
    else round_through(which == 'k' ? p->k : p->v, x, hd);
}

/* max |a - r| / max |r| */
static double rel_err(const float *a, const double *r, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - r[i]);
        if (d > num || d != d) num = d;
        if (fabs(r[i]) > den) den = fabs(r[i]);
    }
    return den > 0 ? num / den : num;
}

/* All prompt logits of the model with K, V formats p in batches of n_batch
 * on n_threads; false when the context cannot be made. */
static bool run(hfq_model *m, kv_pair p, int64_t n_batch, int n_threads, float *logits, hfq_error *err) {
    hfq_context_params cp = {.n_ctx = N_CTX, .n_batch = n_batch, .n_threads = n_threads, .kv_k = p.k, .kv_v = p.v};
    hfq_context *c = hfq_context_new(m, &cp, err);
    if (!c) return false;
    const bool ok = hfq_forward(c, prompt, N_PROMPT, N_PROMPT, logits, err) == 0 && hfq_context_kv_k(c) == p.k &&
                    hfq_context_kv_v(c) == p.v;
    hfq_context_free(c);
    return ok;
}

/* The reference's logits for every prompt token, rounding as p (NULL: exact). */
static void reference(const synth_model *sm, kv_pair *p, double *out) {
    const int64_t V = sm->spec.n_vocab;
    ref_state ref;
    ref_init(&ref, sm, N_CTX);
    if (p) ref.round = round_kv, ref.round_user = p;
    for (int64_t t = 0; t < N_PROMPT; t++) {
        ref_trace tr = {.logits = out + t * V};
        ref_token(&ref, prompt[t], &tr);
    }
    ref_free(&ref);
}

/* Worst relative error over the prompt's logits. */
static double worst_err(const float *logits, const double *ref, int64_t V) {
    double worst = 0;
    for (int64_t t = 0; t < N_PROMPT; t++) {
        const double e = rel_err(logits + t * V, ref + t * V, V);
        if (e > worst || e != e) worst = e;
    }
    return worst;
}

static void test_formats(void) {
    synth_spec s = kv_spec();
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m) return;
    const int64_t V = s.n_vocab;
    const size_t n = (size_t)(N_PROMPT * V);
    float *logits = malloc(n * sizeof *logits), *again = malloc(n * sizeof *again);
    double *exact = malloc(n * sizeof *exact), *rounded = malloc(n * sizeof *rounded);
    if (!logits || !again || !exact || !rounded) abort();
    reference(&sm, NULL, exact);
    /* each format as K and V, and mixed pairs; the tolerance is the float
     * rounding of the runner (2e-5 for F32), widened to 1e-4 where the
     * float and the double form of a value may round to neighbouring levels
     * of the format; Q5_1 keys' dot takes Q8_1 queries, whose F16 block sum
     * (ggml's, ours byte-identical) enters the offset term: a rounding the
     * dequantized query does not model, about 1e-3 */
    const struct { kv_pair p; double tol; } cases[] = {
        {{HFQ_KV_F32, HFQ_KV_F32}, 2e-5},          {{HFQ_KV_F16, HFQ_KV_F16}, 1e-4},
        {{HFQ_KV_BF16, HFQ_KV_BF16}, 1e-4},        {{HFQ_KV_Q8_0, HFQ_KV_Q8_0}, 1e-4},
        {{HFQ_KV_Q4_0, HFQ_KV_Q4_0}, 1e-4},        {{HFQ_KV_Q5_0, HFQ_KV_Q5_0}, 1e-4},
        {{HFQ_KV_Q5_1, HFQ_KV_Q5_1}, 3e-3},        {{HFQ_KV_FP8_E4M3, HFQ_KV_FP8_E4M3}, 1e-4},
        {{HFQ_KV_FP8_E5M2, HFQ_KV_FP8_E5M2}, 1e-4}, {{HFQ_KV_Q8_0, HFQ_KV_F16}, 1e-4},
        {{HFQ_KV_F32, HFQ_KV_Q4_0}, 1e-4},          {{HFQ_KV_FP8_E4M3, HFQ_KV_F32}, 1e-4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_pair p = cases[i].p;
        char label[64];
        snprintf(label, sizeof label, "K %s V %s", hfq_kv_type_name(p.k), hfq_kv_type_name(p.v));
        if (!run(m, p, N_PROMPT, 2, logits, &err)) {
            CHECK_MSG(0, "%s: %s", label, err.msg);
            continue;
        }
        reference(&sm, &p, rounded);
        const double e = worst_err(logits, rounded, V), e_exact = worst_err(logits, exact, V);
        printf("%s: rel err %.3g against the rounded reference, %.3g against the exact one\n", label, e, e_exact);
        CHECK_MSG(e <= cases[i].tol, "%s: rel err %.3g against the reference rounding as the format", label, e);
        /* the lossy formats differ from exact K, V by more than the runner's
         * own rounding: the rounded reference is what the check stands on */
        if (p.k != HFQ_KV_F32 || p.v != HFQ_KV_F32)
            CHECK_MSG(e_exact > e, "%s: no closer to the rounded reference (%.3g) than to the exact (%.3g)", label, e,
                      e_exact);
        /* token by token on one thread: the same bytes */
        CHECK_MSG(run(m, p, 1, 1, again, &err), "%s: %s", label, err.msg);
        CHECK_MSG(memcmp(logits, again, n * sizeof *logits) == 0,
                  "%s: token by token on one thread differs from one batch on two", label);
    }
    free(logits); free(again); free(exact); free(rounded);
    hfq_model_free(m);
    synth_free(&sm);
}

static void test_sizes_and_refusals(void) {
    /* rows: 32 values as stored (FP8: with its F32 scale) */
    const struct { hfq_kv_type t; int64_t bytes; } rows[] = {
        {HFQ_KV_F32, 128}, {HFQ_KV_F16, 64}, {HFQ_KV_BF16, 64}, {HFQ_KV_Q8_0, 34}, {HFQ_KV_Q4_0, 18},
        {HFQ_KV_Q5_0, 22}, {HFQ_KV_Q5_1, 24}, {HFQ_KV_FP8_E4M3, 36}, {HFQ_KV_FP8_E5M2, 36},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        CHECK_MSG(hfq_kv_row_bytes(rows[i].t, 32) == rows[i].bytes, "%s row bytes %lld",
                  hfq_kv_type_name(rows[i].t), (long long)hfq_kv_row_bytes(rows[i].t, 32));
        CHECK(hfq_kv_type_from_name(hfq_kv_type_name(rows[i].t)) == (int)rows[i].t);
    }
    CHECK(hfq_kv_cache_floats(HFQ_KV_Q4_0, 5, 3, 32) == (5 * 3 * 18 + 3) / 4);
    CHECK(hfq_kv_row_bytes(HFQ_KV_Q8_0, 40) == -1);
    CHECK(hfq_kv_row_bytes(HFQ_KV_DEFAULT, 32) == -1);
    CHECK(hfq_kv_type_from_name("default") == -1 && hfq_kv_type_from_name("q4_1") == -1);
    CHECK(hfq_kv_type_from_name("Q8_0") == HFQ_KV_Q8_0);

    /* head_dim 10: the block formats are refused in one line, F16 (the default) runs */
    synth_spec s = synth_default_spec();
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    hfq_context_params cp = {.n_ctx = 8, .kv_k = HFQ_KV_F16, .kv_v = HFQ_KV_Q4_0};
    CHECK(hfq_context_new(m, &cp, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "V cache type q4_0 needs a head size that is a multiple of 32, not 10");
    cp.kv_v = (hfq_kv_type)99;
    CHECK(hfq_context_new(m, &cp, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "unknown V cache type 99");
    cp = (hfq_context_params){.n_ctx = 8};
    hfq_context *c = hfq_context_new(m, &cp, &err);
    CHECK(c && hfq_context_kv_k(c) == HFQ_KV_F16 && hfq_context_kv_v(c) == HFQ_KV_F16);
    hfq_context_free(c);

    /* one row of logits kept (generate's): more in one batch is refused before any work */
    cp = (hfq_context_params){.n_ctx = 8, .n_batch = 4, .n_outputs = 1};
    float logits[2 * 50];
    c = hfq_context_new(m, &cp, &err);
    CHECK(c && hfq_forward(c, prompt, 3, 2, logits, &err) == -1 && hfq_context_n_past(c) == 0);
    CHECK_STR_CONTAINS(err.msg, "logits of 2 tokens in one batch asked of a context that keeps 1");
    CHECK(c && hfq_forward(c, prompt, 3, 1, logits, &err) == 0 && hfq_context_n_past(c) == 3);
    hfq_context_free(c);

    /* the plan: the KV bytes from the shape, the default resolved */
    hfq_context_memory mem;
    cp = (hfq_context_params){.n_ctx = 8, .kv_v = HFQ_KV_FP8_E5M2};
    CHECK(hfq_context_plan(m, &cp, &mem, &err) == 0);
    CHECK(mem.kv_k == HFQ_KV_F16 && mem.kv_v == HFQ_KV_FP8_E5M2 && mem.n_ctx == 8);
    CHECK(mem.kv_cache == s.n_layer * 8 * s.n_head_kv * (10 * 2 + (10 + 4)));
    CHECK(mem.buffers > 0);
    hfq_model_free(m);
    synth_free(&sm);
}

int main(void) {
    test_formats();
    test_sizes_and_refusals();
    return check_exit();
}
