/* test_runner_swa.c - the CPU backend's ops that Gemma brought, against plain
 * double-precision formulas: attention with a sliding window (token at i
 * sees j with i - j < n_swa, transformers' mask, llama.cpp's
 * LLAMA_SWA_TYPE_STANDARD) and with soft-capped scores (cap * tanh(scale *
 * q.k / cap)), in batches that start before and after the window is full,
 * on the transposed F32 cache and on the row caches (F16, Q8_0 rounded as
 * the format stores them); GeGLU with tanh GELU; scale. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "quant/half.h"
#include "quant/qtype.h"
#include "tests/check.h"
#include "tests/test_runner_synth.h"

#define N_CTX 40

/* x through KV format t and back, as a cache row holds it (F32: itself). */
static void round_row(hfq_kv_type t, double *x, int64_t hd) {
    if (t == HFQ_KV_F32) return;
    float f[64], back[64];
    unsigned char bytes[64 * 4];
    for (int64_t i = 0; i < hd; i++) f[i] = (float)x[i];
    const hfq_qtype_traits *tr = hfq_qtype_get(hfq_kv_type_qtype(t));
    tr->quantize(f, bytes, 1, hd, NULL);
    tr->dequantize(bytes, back, hd);
    for (int64_t i = 0; i < hd; i++) x[i] = back[i];
}

/* The query as the key format's dot takes it (its vec_dot_type). */
static void round_query(hfq_kv_type t, double *q, int64_t hd) {
    if (t == HFQ_KV_F32) return;
    float f[64], back[64];
    unsigned char bytes[64 * 4];
    for (int64_t i = 0; i < hd; i++) f[i] = (float)q[i];
    const hfq_qtype_traits *at = hfq_qtype_get(hfq_qtype_get(hfq_kv_type_qtype(t))->vec_dot_type);
    at->quantize_row(f, bytes, hd);
    at->dequantize(bytes, back, hd);
    for (int64_t i = 0; i < hd; i++) q[i] = back[i];
}

/* out[t][h] for token t (position t) of n: softmax over the window of the
 * (capped) scaled scores, times V; K, V of kv head h / group. */
static void ref_attention(double *out, const double *q, const double *k, const double *v, int64_t n,
                          const hfq_attn *a) {
    const int64_t hd = a->head_dim, qd = a->n_head * hd, kd = a->n_head_kv * hd, group = a->n_head / a->n_head_kv;
    double s[N_CTX];
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < a->n_head; h++) {
            const int64_t hk = h / group;
            const int64_t lo = a->n_swa > 0 && t - a->n_swa + 1 > 0 ? t - a->n_swa + 1 : 0;
            double max = -INFINITY, sum = 0;
            for (int64_t j = lo; j <= t; j++) {
                double d = 0;
                for (int64_t i = 0; i < hd; i++) d += q[t * qd + h * hd + i] * k[j * kd + hk * hd + i];
                d *= a->scale;
                if (a->softcap > 0) d = tanh(d / a->softcap) * a->softcap;
                s[j] = d;
                max = d > max ? d : max;
            }
            for (int64_t j = lo; j <= t; j++) sum += s[j] = exp(s[j] - max);
            for (int64_t i = 0; i < hd; i++) {
                double o = 0;
                for (int64_t j = lo; j <= t; j++) o += s[j] * v[j * kd + hk * hd + i];
                out[t * qd + h * hd + i] = o / sum;
            }
        }
}

/* The op (window n_swa) over batches of sizes `batches` (summing to N_CTX)
 * against the reference with window ref_swa; returns the largest relative
 * error. */
static double run_attention(const hfq_model *m, hfq_kv_type kt, hfq_kv_type vt, int64_t n_swa, int64_t ref_swa,
                            float softcap, const int64_t *batches, int n_batches) {
    const hfq_hparams *hp = hfq_model_hparams(m);
    const hfq_ops *ops = hfq_cpu_ops();
    hfq_error err;
    hfq_backend_params bp = {.n_threads = 2, .max_tokens = N_CTX, .n_ctx = N_CTX};
    hfq_backend *b = ops->create(m, &bp, &err);
    CHECK_MSG(b != NULL, "%s", err.msg);
    if (!b) return INFINITY;
    const hfq_attn a = {.n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
                        .scale = 1.0f / sqrtf((float)hp->head_dim), .n_swa = n_swa, .softcap = softcap,
                        .k_type = kt, .v_type = vt};
    const int64_t hd = a.head_dim, qd = a.n_head * hd, kd = a.n_head_kv * hd;
    float *q = calloc((size_t)(N_CTX * qd), sizeof *q), *k = calloc((size_t)(N_CTX * kd), sizeof *k);
    float *v = calloc((size_t)(N_CTX * kd), sizeof *v), *out = calloc((size_t)(N_CTX * qd), sizeof *out);
    double *dq = calloc((size_t)(N_CTX * qd), sizeof *dq), *dk = calloc((size_t)(N_CTX * kd), sizeof *dk);
    double *dv = calloc((size_t)(N_CTX * kd), sizeof *dv), *ref = calloc((size_t)(N_CTX * qd), sizeof *ref);
    float *kc = ops->alloc(b, (size_t)hfq_kv_cache_floats(kt, N_CTX, a.n_head_kv, hd));
    float *vc = ops->alloc(b, (size_t)hfq_kv_cache_floats(vt, N_CTX, a.n_head_kv, hd));
    uint64_t rng = 7;
    /* scores of a few units: a cap of 2 bites */
    for (int64_t i = 0; i < N_CTX * qd; i++) dq[i] = q[i] = 2.0f * synth_uniform(&rng);
    for (int64_t i = 0; i < N_CTX * kd; i++) dk[i] = k[i] = 2.0f * synth_uniform(&rng);
    for (int64_t i = 0; i < N_CTX * kd; i++) dv[i] = v[i] = synth_uniform(&rng);
    for (int64_t t = 0; t < N_CTX; t++) {
        for (int64_t h = 0; h < a.n_head_kv; h++) {
            round_row(kt, dk + t * kd + h * hd, hd);
            round_row(vt, dv + t * kd + h * hd, hd);
        }
        for (int64_t h = 0; h < a.n_head; h++) round_query(kt, dq + t * qd + h * hd, hd);
    }
    hfq_attn ra = a;
    ra.n_swa = ref_swa;
    ref_attention(ref, dq, dk, dv, N_CTX, &ra);
    int64_t pos = 0;
    for (int i = 0; i < n_batches; i++) {
        ops->attention(b, out + pos * qd, q + pos * qd, k + pos * kd, v + pos * kd, kc, vc, pos, batches[i], &a);
        pos += batches[i];
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < N_CTX * qd; i++) {
        const double d = fabs(out[i] - ref[i]);
        num = d > num || d != d ? d : num;
        den = fabs(ref[i]) > den ? fabs(ref[i]) : den;
    }
    ops->release(b, kc);
    ops->release(b, vc);
    ops->destroy(b);
    free(q), free(k), free(v), free(out), free(dq), free(dk), free(dv), free(ref);
    return num / den;
}

static void test_attention(const hfq_model *m) {
    static const int64_t batches[] = {5, 1, 13, 21};   /* before, at and past a full window of 7 */
    static const int64_t one_batch[] = {N_CTX};
    static const struct { hfq_kv_type k, v; } kv[] = {
        {HFQ_KV_F32, HFQ_KV_F32}, {HFQ_KV_F16, HFQ_KV_F16}, {HFQ_KV_Q8_0, HFQ_KV_F32}, {HFQ_KV_F32, HFQ_KV_Q8_0}};
    static const struct { int64_t n_swa; float cap; } cases[] = {{7, 0}, {0, 2.0f}, {7, 2.0f}, {1, 0}, {N_CTX, 0}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int64_t w = cases[c].n_swa;
            const double e = run_attention(m, kv[i].k, kv[i].v, w, w, cases[c].cap, batches, 4);
            const double e1 = run_attention(m, kv[i].k, kv[i].v, w, w, cases[c].cap, one_batch, 1);
            printf("K %s V %s window %lld cap %g: relative error %.1e (batched), %.1e (one batch)\n",
                   hfq_kv_type_name(kv[i].k), hfq_kv_type_name(kv[i].v), (long long)cases[c].n_swa, cases[c].cap,
                   e, e1);
            CHECK_MSG(e <= 2e-5 && e1 <= 2e-5, "attention off the reference: %g / %g", e, e1);
        }
    /* the comparison tells windows apart: a window of 7 is far from the causal mask */
    const double apart = run_attention(m, HFQ_KV_F32, HFQ_KV_F32, 7, 0, 0, batches, 4);
    printf("window 7 against no window: relative difference %.1e\n", apart);
    CHECK(apart > 1e-2);
}

static void test_geglu_scale(const hfq_model *m) {
    const hfq_ops *ops = hfq_cpu_ops();
    hfq_error err;
    hfq_backend_params bp = {.n_threads = 2, .max_tokens = 4, .n_ctx = 4};
    hfq_backend *b = ops->create(m, &bp, &err);
    CHECK_MSG(b != NULL, "%s", err.msg);
    if (!b) return;
    enum { N = 1 << 17 };   /* past the threshold where the ranges go to threads */
    float *g = ops->alloc(b, N), *u = ops->alloc(b, N);
    double *ref = malloc(N * sizeof *ref), *ref_s = malloc(N * sizeof *ref_s);
    float *x_of = malloc(N * sizeof *x_of), *u_of = malloc(N * sizeof *u_of);
    uint64_t rng = 3;
    for (int i = 0; i < N; i++) {
        g[i] = 12.0f * synth_uniform(&rng);   /* both tails of the GELU */
        u[i] = synth_uniform(&rng);
        const double x = x_of[i] = g[i];
        u_of[i] = u[i];
        ref[i] = 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))) * u[i];
        ref_s[i] = (double)u[i] * 8.0;
    }
    ops->geglu(b, g, u, N);
    ops->scale(b, u, 8.0f, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        /* against |x u|: 1 + tanh cancels in float for negative x, as in torch's own float kernel */
        const double e = fabs(g[i] - ref[i]) / (fabs(x_of[i] * u_of[i]) + 1e-30);
        worst = e > worst ? e : worst;
        CHECK(u[i] == (float)ref_s[i]);
    }
    printf("geglu: relative error %.1e\n", worst);
    CHECK_MSG(worst <= 1e-6, "geglu off by %g", worst);
    ops->release(b, g);
    ops->release(b, u);
    ops->destroy(b);
    free(ref);
    free(ref_s);
    free(x_of);
    free(u_of);
}

int main(void) {
    synth_spec s = synth_default_spec();
    s.head_dim = 32;   /* a size Q8_0 rows take */
    s.n_rot = 32;
    synth_model sm;
    synth_build(&sm, &s);
    hfq_error err;
    hfq_model *m = synth_bind(&sm, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        test_attention(m);
        test_geglu_scale(m);
    }
    hfq_model_free(m);
    synth_free(&sm);
    return check_exit();
}
