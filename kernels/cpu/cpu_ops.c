/* cpu_ops.c - the CPU backend's ops table (ops.h).
 *
 * Parallel loops run on the backend's OpenMP threads, one region per op
 * (never nested), and only when the op is big enough to pay for waking them.
 * SIMD lives in the kernels (vec_kernels.h, matmul.h), chosen through
 * quant/cpu_features.h; the residual add is left to the compiler's baseline
 * vectors (it waits on memory, not on arithmetic).
 *
 * KV cache layout: F32 K and V transposed per kv head, [n_head_kv][head_dim][n_ctx],
 * so the scores of consecutive positions are one vectorized multiply-add per
 * head value, and so is each value's weighted sum over the positions. The
 * other formats (kernels/kv_type.h) are rows, [n_head_kv][n_ctx][row], as
 * their blocks run along head_dim; attention reads each row in its format
 * (kv_rows.h). K and V each take their own layout.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/vec_kernels.h"
#include "kernels/moe_rows.h"

/* Elementwise work below this many values, and attention below this many
 * multiply-adds, stays on one thread (see CPU_PARALLEL_MIN_MACS in matmul.h).
 * A decoded token's attention is worth splitting by heads from a few dozen
 * positions (a parallel region costs about 0.4 us here): at 2^19 it ran on
 * one thread below 512 positions while the other waited, 4-8 % of a
 * 1024-wide model's decode. */
#define PARALLEL_MIN_VALUES (1 << 16)
#define PARALLEL_MIN_ATTENTION (1 << 14)

struct hfq_backend {
    int n_threads;
    hfq_act_quant act_quant;
    int64_t max_tokens, n_ctx, head_dim;
    void *act;          /* activation rows converted for a weight type */
    float *scores;      /* [n_threads][n_ctx] attention scores */
    float *kv_scratch;  /* [n_threads][2 * head_dim]: a converted query, a value row as floats */
};

typedef struct type_check {
    const char *path;
    hfq_act_quant act_quant;
    int64_t max_tokens;
    size_t act_bytes;   /* most any matrix needs */
    hfq_error *err;
} type_check;

static int check_matrix(void *user, const hfq_tensor *t) {
    type_check *tc = user;
    cpu_wkernel k;
    if (cpu_wkernel_get(t, tc->act_quant, &k, tc->path, tc->err)) return -1;
    size_t n = cpu_matmul_act_bytes(t, tc->act_quant, tc->max_tokens);
    if (n > tc->act_bytes) tc->act_bytes = n;
    return 0;
}

static void cpu_destroy(hfq_backend *b) {
    if (!b) return;
    free(b->act);
    free(b->scores);
    free(b->kv_scratch);
    free(b);
}

/* The sizes of a backend's scratch; -1 with err when a weight type is not supported. */
typedef struct scratch_sizes {
    int n_threads;
    size_t act, scores, kv;   /* bytes */
} scratch_sizes;

static int scratch_sizes_of(const hfq_model *m, const hfq_backend_params *p, scratch_sizes *sz, hfq_error *err) {
    type_check tc = {hfq_model_path(m), p->act_quant, p->max_tokens, 0, err};
    if (hfq_model_each_matrix(m, check_matrix, &tc)) return -1;
    sz->n_threads = p->n_threads > 0 ? p->n_threads : omp_get_num_procs();
    sz->act = tc.act_bytes;
    sz->scores = (size_t)sz->n_threads * (size_t)p->n_ctx * sizeof(float);
    sz->kv = (size_t)sz->n_threads * 2 * (size_t)hfq_model_hparams(m)->head_dim * sizeof(float);
    return 0;
}

static int64_t cpu_scratch_bytes(const hfq_model *m, const hfq_backend_params *p, hfq_error *err) {
    scratch_sizes sz;
    if (scratch_sizes_of(m, p, &sz, err)) return -1;
    return (int64_t)(sz.act + sz.scores + sz.kv + sizeof(hfq_backend));
}

static hfq_backend *cpu_create(const hfq_model *m, const hfq_backend_params *p, hfq_error *err) {
    scratch_sizes sz;
    if (scratch_sizes_of(m, p, &sz, err)) return NULL;
    hfq_backend *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    b->n_threads = sz.n_threads;
    b->act_quant = p->act_quant;
    b->max_tokens = p->max_tokens;
    b->n_ctx = p->n_ctx;
    b->head_dim = hfq_model_hparams(m)->head_dim;
    b->scores = malloc(sz.scores);
    b->kv_scratch = malloc(sz.kv);
    if (!b->scores || !b->kv_scratch || (sz.act && !(b->act = malloc(sz.act)))) goto oom;
    return b;
oom:
    cpu_destroy(b);
    hfq_fail(err, hfq_model_path(m), "out of memory for the cpu backend");
    return NULL;
}

static float *cpu_alloc(hfq_backend *b, size_t n) {
    (void)b;
    return calloc(n ? n : 1, sizeof(float));
}

static void cpu_release(hfq_backend *b, float *buf) {
    (void)b;
    free(buf);
}

static void cpu_copy(hfq_backend *b, float *dst, const float *src, size_t n) {
    (void)b;
    memcpy(dst, src, n * sizeof *dst);
}

static void cpu_embed(hfq_backend *b, float *x, const hfq_tensor *tok_embd, const int32_t *tokens, int64_t n_tokens) {
    (void)b;
    for (int64_t t = 0; t < n_tokens; t++) cpu_row_to_f32(tok_embd, tokens[t], x + t * tok_embd->ne0);
}

/* As ggml: the mean square summed in double, then x * scale * w in float. */
static void cpu_rmsnorm(hfq_backend *b, float *y, const float *x, const hfq_tensor *w, int64_t n_tokens, float eps) {
    const int64_t n = w->ne0;
    const float *wd = w->data;
    #pragma omp parallel for num_threads(b->n_threads) if (n * n_tokens >= PARALLEL_MIN_VALUES)
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *xr = x + t * n;
        float *yr = y + t * n;
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)(xr[i] * xr[i]);
        const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
        for (int64_t i = 0; i < n; i++) yr[i] = xr[i] * scale * wd[i];
    }
}

static void cpu_matmul_op(hfq_backend *b, float *y, const hfq_tensor *w, const hfq_tensor *bias, const float *x,
                          int64_t n_tokens) {
    cpu_matmul(b->n_threads, b->act_quant, b->act, y, w, bias ? bias->data : NULL, x, n_tokens);
}

static void cpu_rope(hfq_backend *b, float *x, int64_t n_tokens, int64_t n_heads, int64_t pos0, const hfq_rope *r) {
    const int64_t n_pairs = r->n_rot / 2, hd = r->head_dim;
    /* pair i rotates values (lo + i*step, lo + i*step + gap) */
    const int64_t step = r->mode == HFQ_ROPE_NORMAL ? 2 : 1;
    const int64_t gap = r->mode == HFQ_ROPE_NORMAL ? 1 : n_pairs;
    #pragma omp parallel for num_threads(b->n_threads) if (n_tokens * n_heads * hd >= PARALLEL_MIN_VALUES)
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *cs = r->cos_sin + (pos0 + t) * n_pairs * 2;   /* [n_pairs][2] */
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = x + (t * n_heads + h) * hd;
            for (int64_t i = 0; i < n_pairs; i++) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float x0 = v[i * step], x1 = v[i * step + gap];
                v[i * step] = x0 * c - x1 * s;
                v[i * step + gap] = x0 * s + x1 * c;
            }
        }
    }
}

/* Where row p of kv head h of a row-layout cache starts. */
static size_t kv_row(int64_t row_bytes, int64_t n_ctx, int64_t h, int64_t p) {
    return (size_t)((h * n_ctx + p) * row_bytes);
}

/* Writes the k or v rows of positions pos0.. into one cache in its layout.
 * x: [n_tokens][n_kv * hd] */
static void kv_store(hfq_kv_type t, float fp8_scale, float *cache, const float *x, int64_t pos0, int64_t n_tokens,
                     int64_t n_kv, int64_t hd, int64_t n_ctx) {
    const int64_t kv_dim = n_kv * hd;
    if (t == HFQ_KV_F32) {
        for (int64_t j = 0; j < kv_dim; j++)
            for (int64_t i = 0; i < n_tokens; i++) cache[j * n_ctx + pos0 + i] = x[i * kv_dim + j];
        return;
    }
    const int64_t rb = hfq_kv_row_bytes(t, hd);
    for (int64_t i = 0; i < n_tokens; i++)
        for (int64_t h = 0; h < n_kv; h++)
            cpu_kv_row_store(t, x + i * kv_dim + h * hd, (char *)cache + kv_row(rb, n_ctx, h, pos0 + i), hd,
                             fp8_scale);
}

/* Soft-caps n raw scores in place, scale folded in (transformers' order:
 * scale, / cap, tanh, * cap); returns the largest. */
static float softcap_scores(float *s, int64_t n, float scale, float cap) {
    float max = -INFINITY;
    for (int64_t p = 0; p < n; p++) {
        s[p] = tanhf(s[p] * scale / cap) * cap;
        max = s[p] > max ? s[p] : max;
    }
    return max;
}

/* One query head against cached positions p0..p0+n_keys-1 of kv head hk:
 *   out = softmax(scale * q.K^T) V   (or of the soft-capped scores)
 * q, out: [hd];  s: [n_keys] scratch;  scratch: [2 * hd] */
static void attend(const cpu_vec_kernels *k, const hfq_attn *a, const float *q, const float *k_cache,
                   const float *v_cache, int64_t hk, int64_t p0, int64_t n_keys, int64_t n_ctx, float *s,
                   float *scratch, float *out) {
    const int64_t hd = a->head_dim;
    float max;
    if (a->k_type == HFQ_KV_F32) {
        max = k->scores(q, k_cache + hk * hd * n_ctx + p0, n_ctx, hd, n_keys, s);
    } else {
        const int64_t rb = hfq_kv_row_bytes(a->k_type, hd);
        cpu_kv_query(a->k_type, q, scratch, hd);
        cpu_kv_rows_dot(a->k_type, (const char *)k_cache + kv_row(rb, n_ctx, hk, p0), (size_t)rb, scratch, hd, n_keys, s);
        max = -INFINITY;
        for (int64_t p = 0; p < n_keys; p++) max = s[p] > max ? s[p] : max;
    }
    float scale = a->scale;
    if (a->softcap > 0.0f) {
        max = softcap_scores(s, n_keys, scale, a->softcap);
        scale = 1.0f;
    }
    const float inv = 1.0f / k->softmax(s, n_keys, max, scale);
    if (a->v_type == HFQ_KV_F32) {
        k->mix(s, v_cache + hk * hd * n_ctx + p0, n_ctx, n_keys, hd, out);
    } else {
        const int64_t rb = hfq_kv_row_bytes(a->v_type, hd);
        cpu_kv_rows_mix(a->v_type, (const char *)v_cache + kv_row(rb, n_ctx, hk, p0), (size_t)rb, s, n_keys, out,
                        scratch + hd, hd);
    }
    for (int64_t d = 0; d < hd; d++) out[d] *= inv;
}

static void cpu_attention(hfq_backend *b, float *out, const float *q, const float *k, const float *v, float *k_cache,
                          float *v_cache, int64_t pos0, int64_t n_tokens, const hfq_attn *a) {
    const int64_t hd = a->head_dim, n_kv = a->n_head_kv, q_dim = a->n_head * hd;
    const int64_t n_ctx = b->n_ctx, group = a->n_head / n_kv;
    kv_store(a->k_type, a->k_scale, k_cache, k, pos0, n_tokens, n_kv, hd, n_ctx);
    kv_store(a->v_type, a->v_scale, v_cache, v, pos0, n_tokens, n_kv, hd, n_ctx);
    const int64_t work = n_tokens * a->n_head * (pos0 + n_tokens) * hd;
    const cpu_vec_kernels kern = cpu_vec_kernels_get(true);
    /* heads outer: one kv head's K and V stay in cache over the tokens, and
     * each thread's range spans whole heads when the threads divide n_head
     * (tokens differ in work, later ones more; a range of tokens would not) */
    #pragma omp parallel for collapse(2) num_threads(b->n_threads) schedule(static) if (work >= PARALLEL_MIN_ATTENTION)
    for (int64_t h = 0; h < a->n_head; h++)
        for (int64_t t = 0; t < n_tokens; t++) {
            const size_t th = (size_t)omp_get_thread_num();
            /* the window: positions pos - n_swa + 1 .. pos */
            const int64_t pos = pos0 + t, p0 = a->n_swa > 0 && pos >= a->n_swa ? pos - a->n_swa + 1 : 0;
            attend(&kern, a, q + t * q_dim + h * hd, k_cache, v_cache, h / group, p0, pos + 1 - p0, n_ctx,
                   b->scores + th * (size_t)n_ctx, b->kv_scratch + th * 2 * (size_t)hd, out + t * q_dim + h * hd);
        }
}

static void add_range(float *restrict x, const float *restrict y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* Splits n values into one contiguous range per thread. */
#define FOR_RANGES(b, n, call)                                                                          \
    do {                                                                                                \
        const int n_parts = (n) >= PARALLEL_MIN_VALUES ? (b)->n_threads : 1;                            \
        _Pragma("omp parallel for num_threads(n_parts) schedule(static)")                               \
        for (int part = 0; part < n_parts; part++) {                                                    \
            const size_t lo = (n) * (size_t)part / (size_t)n_parts, hi = (n) * (size_t)(part + 1) / (size_t)n_parts; \
            call;                                                                                       \
        }                                                                                               \
    } while (0)

static void cpu_swiglu(hfq_backend *b, float *gate, const float *up, size_t n) {
    const cpu_vec_kernels kern = cpu_vec_kernels_get(true);
    FOR_RANGES(b, n, kern.swiglu(gate + lo, up + lo, hi - lo));
}

static void cpu_geglu(hfq_backend *b, float *gate, const float *up, size_t n) {
    const cpu_vec_kernels kern = cpu_vec_kernels_get(true);
    FOR_RANGES(b, n, kern.geglu(gate + lo, up + lo, hi - lo));
}

static void scale_range(float *x, float s, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static void cpu_scale(hfq_backend *b, float *x, float s, size_t n) {
    FOR_RANGES(b, n, scale_range(x + lo, s, hi - lo));
}

static void cpu_add(hfq_backend *b, float *x, const float *y, size_t n) {
    FOR_RANGES(b, n, add_range(x + lo, y + lo, hi - lo));
}

static void cpu_gather_rows(hfq_backend *b, float *y, const float *x, const int32_t *rows, int64_t n_rows,
                            int64_t width) {
    (void)b;
    for (int64_t i = 0; i < n_rows * width; i++) hfq_gather_value(y, x, rows, width, i);
}

static void cpu_add_rows_scaled(hfq_backend *b, float *x, const float *y, const int32_t *rows, const float *w,
                                int64_t n_rows, int64_t width) {
    (void)b;
    for (int64_t i = 0; i < n_rows * width; i++) hfq_add_scaled_value(x, y, rows, w, width, i);
}

static const hfq_ops cpu_ops = {
    .name = "cpu",
    .host_visible = true,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul_op,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .gather_rows = cpu_gather_rows,
    .add_rows_scaled = cpu_add_rows_scaled,
    .kv_types = (1u << HFQ_KV_COUNT) - 2,   /* all but HFQ_KV_DEFAULT */
    .kv_default = HFQ_KV_F16,
    .scratch_bytes = cpu_scratch_bytes,
    .geglu = cpu_geglu,
    .scale = cpu_scale,
};

const hfq_ops *hfq_cpu_ops(void) { return &cpu_ops; }
