/* test_runner_kv.c - the KV cache formats (kernels/kv_type.h) in the forward
 * pass: for every K, V pair the logits of a small random model against the
 * double-precision reference of test_runner_synth.h with its K and V rows
 * (and queries, for the key formats whose dot converts them) rounded as the
 * format defines; the same logits batched and token by token and for any
 * thread count; static FP8 scales (calibrated by the KV observer, codes
 * RNE(x / scale) saturated) against the reference rounding with them;
 * cache sizes; refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/kv_stats.h"
#include "kernels/graph.h"
#include "quant/fp8.h"
#include "quant/kv_scales.h"
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

/* ---- static FP8 scales ---- */

typedef struct static_round {
    hfq_fp8_format fmt;
    const float *k, *v;      /* stored (E4M3) scales per layer */
    int64_t n_layer, n_head_kv, k_calls;
    int64_t clipped;         /* values past 448 * scale (saturated) */
} static_round;

/* x through FP8 with one given scale: encode(x / scale) (round to nearest
 * even, saturated at the format's max, as vLLM's scaled FP8 KV cache), decoded. */
static int64_t round_static(hfq_fp8_format fmt, double *x, int64_t hd, float scale) {
    float f[64] = {0}, back[64];
    unsigned char codes[64];
    int64_t clipped = 0;
    for (int64_t i = 0; i < hd; i++) {
        f[i] = (float)x[i];
        clipped += fabs(x[i]) / scale > hfq_fp8_max(fmt);
    }
    hfq_quantize_fp8_static(fmt, f, codes, 1, hd, scale);
    hfq_dequantize_row_fp8(fmt, codes, back, hd, scale);
    for (int64_t i = 0; i < hd; i++) x[i] = back[i];
    return clipped;
}

/* The reference rounds K then V of each kv head, layer after layer, token
 * after token: the k calls count the layer. */
static void round_static_kv(void *user, char which, double *x, int64_t hd) {
    static_round *r = user;
    if (which == 'q') return;   /* FP8 keys take float queries */
    if (which == 'k') r->k_calls++;
    const int64_t il = (r->k_calls - 1) / r->n_head_kv % r->n_layer;
    r->clipped += round_static(r->fmt, x, hd, hfq_kv_scale_as(r->fmt, which == 'k' ? r->k[il] : r->v[il]));
}

static void collect_kv(void *user, int64_t layer, const float *k, const float *v, int64_t n_tokens, int64_t n_head_kv,
                       int64_t head_dim) {
    hfq_error err = {{0}};
    hfq_calib_stats *st = user;
    CHECK_MSG(hfq_calib_kv_add(st, layer, 2, k, v, n_tokens, n_head_kv, head_dim, &err) == 0, "%s", err.msg);
}

static void test_static_scales(void) {
    synth_spec s = kv_spec();
    synth_model sm;
    synth_build(&sm, &s);
    CHECK(s.n_layer == 2);
    hfq_error err = {{0}};
    hfq_model *m = synth_bind(&sm, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m) return;
    const int64_t V = s.n_vocab, L = s.n_layer, KV = s.n_head_kv * s.head_dim;
    const size_t n = (size_t)(N_PROMPT * V);
    float *logits = malloc(n * sizeof *logits), *dyn = malloc(n * sizeof *dyn);
    double *rounded = malloc(n * sizeof *rounded);
    if (!logits || !dyn || !rounded) abort();

    /* the observer's maxima: K after rope, V, per layer and head, as the exact reference has them */
    hfq_calib_stats st = {0};
    hfq_context_params cp = {.n_ctx = N_CTX, .n_batch = 4, .kv_k = HFQ_KV_F32, .kv_v = HFQ_KV_F32};
    hfq_context *c = hfq_context_new(m, &cp, &err);
    hfq_context_set_kv_observer(c, collect_kv, &st);
    CHECK(c && hfq_forward(c, prompt, N_PROMPT, 0, NULL, &err) == 0);
    hfq_context_free(c);
    ref_state ref;
    ref_init(&ref, &sm, N_CTX);
    for (int64_t t = 0; t < N_PROMPT; t++) ref_token(&ref, prompt[t], &(ref_trace){0});
    CHECK(st.kv_layers == L && st.kv_heads == s.n_head_kv);
    for (int64_t il = 0; st.k_amax && il < L; il++)
        for (int64_t h = 0; h < s.n_head_kv; h++) {
            double km = 0, vm = 0;
            for (int64_t p = 0; p < N_PROMPT; p++)
                for (int64_t d = 0; d < s.head_dim; d++) {
                    km = fmax(km, fabs(ref.k_cache[(il * N_CTX + p) * KV + h * s.head_dim + d]));
                    vm = fmax(vm, fabs(ref.v_cache[(il * N_CTX + p) * KV + h * s.head_dim + d]));
                }
            CHECK_MSG(fabs(st.k_amax[il * s.n_head_kv + h] - km) <= 1e-5 * km &&
                          fabs(st.v_amax[il * s.n_head_kv + h] - vm) <= 1e-5 * vm,
                      "layer %lld head %lld: K, V maxima %g, %g against the reference's %g, %g", (long long)il,
                      (long long)h, st.k_amax[il * s.n_head_kv + h], st.v_amax[il * s.n_head_kv + h], km, vm);
        }
    ref_free(&ref);
    float k[2], v[2];
    hfq_calib_kv_scales(&st, k, v);
    k[1] *= 0.5f;   /* layer 1's K saturates: the largest values clip at 448 * scale */
    for (int fi = 0; fi < 2; fi++) {
        const hfq_kv_type t = fi ? HFQ_KV_FP8_E5M2 : HFQ_KV_FP8_E4M3;
        static_round sr = {.fmt = fi ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3, .k = k, .v = v, .n_layer = L,
                           .n_head_kv = s.n_head_kv};
        cp = (hfq_context_params){.n_ctx = N_CTX, .n_batch = N_PROMPT, .n_threads = 2, .kv_k = t, .kv_v = t,
                                  .k_scales = k, .v_scales = v};
        c = hfq_context_new(m, &cp, &err);
        CHECK_MSG(c && hfq_context_kv_static(c), "%s", err.msg);
        CHECK(c && hfq_forward(c, prompt, N_PROMPT, N_PROMPT, logits, &err) == 0);
        hfq_context_free(c);
        ref_init(&ref, &sm, N_CTX);
        ref.round = round_static_kv, ref.round_user = &sr;
        for (int64_t tk = 0; tk < N_PROMPT; tk++) ref_token(&ref, prompt[tk], &(ref_trace){.logits = rounded + tk * V});
        ref_free(&ref);
        const double e = worst_err(logits, rounded, V);
        printf("static %s: rel err %.3g against the reference rounding with the static scales\n", hfq_kv_type_name(t),
               e);
        CHECK_MSG(e <= 1e-4, "static %s: rel err %.3g", hfq_kv_type_name(t), e);
        CHECK_MSG(sr.clipped > 0, "static %s: no value saturated", hfq_kv_type_name(t));
        /* kv_dynamic: the per-row scales, another rounding */
        cp.kv_dynamic = true;
        c = hfq_context_new(m, &cp, &err);
        CHECK(c && !hfq_context_kv_static(c) && hfq_forward(c, prompt, N_PROMPT, N_PROMPT, dyn, &err) == 0);
        hfq_context_free(c);
        kv_pair p = {t, t};
        CHECK(memcmp(logits, dyn, n * sizeof *dyn) != 0);
        CHECK(run(m, p, N_PROMPT, 2, logits, &err) && memcmp(logits, dyn, n * sizeof *dyn) == 0);
    }
    /* a scale that is not > 0 is refused */
    const float bad[2] = {k[0], -1.0f};
    cp = (hfq_context_params){.n_ctx = N_CTX, .kv_k = HFQ_KV_FP8_E4M3, .kv_v = HFQ_KV_FP8_E4M3, .k_scales = bad,
                              .v_scales = v};
    CHECK(hfq_context_new(m, &cp, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "layer 1's static KV scales -1");
    /* no FP8 cache: the scales change nothing */
    cp = (hfq_context_params){.n_ctx = N_CTX, .kv_k = HFQ_KV_F16, .kv_v = HFQ_KV_F16, .k_scales = k, .v_scales = v};
    c = hfq_context_new(m, &cp, &err);
    CHECK(c && !hfq_context_kv_static(c));
    hfq_context_free(c);
    hfq_calib_stats_free(&st);
    free(logits); free(dyn); free(rounded);
    hfq_model_free(m);
    synth_free(&sm);
}

int main(void) {
    test_formats();
    test_static_scales();
    test_sizes_and_refusals();
    return check_exit();
}
