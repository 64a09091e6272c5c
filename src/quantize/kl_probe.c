/* kl_probe.c - KL probes: the base model's output distribution over a few
 * calibration chunks, and the divergence from it of the base with one tensor
 * replaced; see kl_probe.h. */
#include "src/quantize/kl_probe.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/graph.h"

struct hfq_kl_probe {
    const hfq_model *base;
    int64_t n_ctx, n_chunks, n_vocab;
    int32_t *tokens;        /* [n_chunks][n_ctx], BOS placed */
    float *logp;            /* [n_chunks * n_ctx][n_vocab] base log-probabilities */
    int n_threads;
};

/* log softmax of one row, in double, stored as float */
static void log_softmax(const float *x, float *out, int64_t n) {
    double m = x[0], z = 0.0;
    for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++) z += exp((double)x[i] - m);
    const double lz = m + log(z);
    for (int64_t i = 0; i < n; i++) out[i] = (float)((double)x[i] - lz);
}

/* Runs model over every chunk; fn gets each chunk's logits [n_ctx][n_vocab].
 * Chunks of tiny models go side by side, each with its own context; fn only
 * writes what belongs to its chunk, so the order does not matter. */
static int run_chunks(hfq_kl_probe *k, const hfq_model *m, void (*fn)(void *u, int64_t chunk, const float *logits),
                      void *u, hfq_error *err) {
    const int n_threads = k->n_threads > 0 ? k->n_threads : omp_get_max_threads();
    int n_par = hfq_model_is_tiny(m) ? n_threads : 1;
    if (n_par > k->n_chunks) n_par = (int)k->n_chunks;
    int rc = 0;
#pragma omp parallel num_threads(n_par) reduction(min : rc)
    {
        hfq_error my_err = {{0}};
        hfq_context_params cp = {.n_ctx = k->n_ctx, .n_batch = k->n_ctx, .n_threads = n_threads / n_par};
        hfq_context *c = hfq_context_new(m, &cp, &my_err);
        float *logits = malloc((size_t)(k->n_ctx * k->n_vocab) * sizeof *logits);
        rc = c && logits ? 0 : -1;
        if (c && !logits) hfq_fail(&my_err, hfq_model_path(m), "out of memory for the KL probe");
#pragma omp for schedule(static)
        for (int64_t ch = 0; ch < k->n_chunks; ch++) {
            if (rc < 0) continue;
            hfq_context_reset(c);
            rc = hfq_forward(c, k->tokens + ch * k->n_ctx, k->n_ctx, k->n_ctx, logits, &my_err);
            if (rc == 0) fn(u, ch, logits);
        }
        if (rc < 0) {
#pragma omp critical
            *err = my_err;
        }
        hfq_context_free(c);
        free(logits);
    }
    return rc;
}

static void keep_logp(void *u, int64_t chunk, const float *logits) {
    hfq_kl_probe *k = u;
    for (int64_t t = 0; t < k->n_ctx; t++)
        log_softmax(logits + t * k->n_vocab, k->logp + (chunk * k->n_ctx + t) * k->n_vocab, k->n_vocab);
}

hfq_kl_probe *hfq_kl_probe_new(const hfq_model *base, const hfq_calib_seqs *seqs, int64_t max_chunks,
                               int n_threads, int64_t max_scores, hfq_error *err) {
    const hfq_hparams *hp = hfq_model_hparams(base);
    const int64_t n_ctx = seqs->n_ctx;
    int64_t n_chunks = seqs->n;
    if (strcmp(seqs->mode, "chunks") != 0 || n_ctx < 1 || seqs->n_tokens != n_chunks * n_ctx) {
        hfq_fail(err, hfq_model_path(base), "a KL probe needs calibration chunks of one length (not --calib-lines)");
        return NULL;
    }
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
    if (max_scores > 0 && n_chunks * n_ctx * hp->n_vocab > max_scores) n_chunks = max_scores / (n_ctx * hp->n_vocab);
    if (n_chunks < 1) {
        hfq_fail(err, hfq_model_path(base), "a KL probe needs a chunk of %" PRId64 " tokens (%" PRId64 " given, at most "
                 "%" PRId64 " scores)", n_ctx, seqs->n_tokens, max_scores);
        return NULL;
    }
    hfq_kl_probe *k = calloc(1, sizeof *k);
    if (k) {
        *k = (hfq_kl_probe){base, n_ctx, n_chunks, hp->n_vocab, malloc((size_t)(n_chunks * n_ctx) * sizeof(int32_t)),
                            malloc((size_t)(n_chunks * n_ctx * hp->n_vocab) * sizeof(float)), n_threads};
    }
    if (!k || !k->tokens || !k->logp) {
        hfq_kl_probe_free(k);
        hfq_fail(err, hfq_model_path(base), "out of memory for the KL probe");
        return NULL;
    }
    memcpy(k->tokens, seqs->tokens, (size_t)(n_chunks * n_ctx) * sizeof(int32_t));
    if (run_chunks(k, base, keep_logp, k, err) < 0) {
        hfq_kl_probe_free(k);
        return NULL;
    }
    return k;
}

void hfq_kl_probe_free(hfq_kl_probe *k) {
    if (!k) return;
    free(k->tokens);
    free(k->logp);
    free(k);
}

int64_t hfq_kl_probe_n_tokens(const hfq_kl_probe *k) { return k->n_chunks * k->n_ctx; }

/* The base's tensors, one of them replaced. */
typedef struct replaced {
    const gguf_file *f;
    gguf_tensor_info t;
} replaced;

static const gguf_tensor_info *find_replaced(const void *source, const char *name) {
    const replaced *r = source;
    return strcmp(name, r->t.name) == 0 ? &r->t : gguf_find_tensor(r->f, name);
}

typedef struct kl_sums {
    const hfq_kl_probe *k;
    double *per_chunk;      /* [n_chunks] */
} kl_sums;

static void add_kl(void *u, int64_t chunk, const float *logits) {
    kl_sums *s = u;
    const int64_t n = s->k->n_vocab;
    double sum = 0.0;
    for (int64_t t = 0; t < s->k->n_ctx; t++) {
        const float *lp = s->k->logp + (chunk * s->k->n_ctx + t) * n, *x = logits + t * n;
        double m = x[0], z = 0.0;
        for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
        for (int64_t i = 0; i < n; i++) z += exp((double)x[i] - m);
        const double lz = m + log(z);
        for (int64_t i = 0; i < n; i++) sum += exp((double)lp[i]) * ((double)lp[i] - ((double)x[i] - lz));
    }
    s->per_chunk[chunk] = sum;
}

int hfq_kl_probe_run(hfq_kl_probe *k, const char *tensor_name, const float *values, double *kl, hfq_error *err) {
    const gguf_file *f = hfq_model_gguf(k->base);
    const gguf_tensor_info *orig = f ? gguf_find_tensor(f, tensor_name) : NULL;
    if (!orig) return hfq_fail(err, hfq_model_path(k->base), "KL probe: no tensor %s", tensor_name);
    replaced r = {f, *orig};
    r.t.type = GT_F32;
    r.t.data = values;
    r.t.nbytes = (uint64_t)(orig->ne[0] * orig->ne[1] * orig->ne[2] * orig->ne[3]) * sizeof(float);
    const hfq_tensor_source src = {&r, hfq_model_path(k->base), find_replaced, NULL, NULL, NULL};
    hfq_model *m = hfq_model_bind(hfq_model_hparams(k->base), &src, err);
    if (!m) return -1;
    kl_sums s = {k, calloc((size_t)k->n_chunks, sizeof(double))};
    int rc = s.per_chunk ? run_chunks(k, m, add_kl, &s, err) : hfq_fail(err, hfq_model_path(k->base), "out of memory");
    hfq_model_free(m);
    double sum = 0.0;
    for (int64_t ch = 0; rc == 0 && ch < k->n_chunks; ch++) sum += s.per_chunk[ch]; /* in chunk order */
    if (rc == 0) *kl = sum / (double)(k->n_chunks * k->n_ctx);
    free(s.per_chunk);
    return rc;
}
