#include "src/ppl.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

struct hfq_ppl {
    const hfq_model *model;
    hfq_context *ctx;
    const int32_t *tokens;
    int64_t n_ctx, first, n_chunks, next_chunk;
    bool add_bos;
    int32_t bos_id;
    int32_t *chunk_tokens;  /* [n_ctx - 1]: the chunk as evaluated */
    float *logits;          /* [n_scored][n_vocab] */
    double *token_nll;      /* [n_scored] */
    int n_threads;
    double nll, nll2;       /* sums of -log p and its square */
    int64_t count;
};

hfq_ppl *hfq_ppl_new(const hfq_model *m, const int32_t *tokens, int64_t n_tokens, const hfq_ppl_params *p,
                     hfq_error *err) {
    const char *path = hfq_model_path(m);
    const int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : 512;
    const int64_t n_vocab = hfq_model_hparams(m)->n_vocab;
    if (n_ctx < 4) {
        hfq_fail(err, path, "a perplexity chunk of %lld tokens is too short (at least 4)", (long long)n_ctx);
        return NULL;
    }
    if (n_tokens < 2 * n_ctx) {
        hfq_fail(err, path, "the text has %lld tokens; a context of %lld needs at least %lld", (long long)n_tokens,
                 (long long)n_ctx, (long long)(2 * n_ctx));
        return NULL;
    }
    if (p->add_bos && (p->bos_id < 0 || p->bos_id >= n_vocab)) {
        hfq_fail(err, path, "BOS id %d is outside the vocabulary [0, %lld)", (int)p->bos_id, (long long)n_vocab);
        return NULL;
    }
    hfq_ppl *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->model = m;
    s->tokens = tokens;
    s->n_ctx = n_ctx;
    s->first = n_ctx / 2;
    s->n_chunks = n_tokens / n_ctx;
    if (p->n_chunks > 0 && p->n_chunks < s->n_chunks) s->n_chunks = p->n_chunks;
    s->add_bos = p->add_bos;
    s->bos_id = p->bos_id;
    const int64_t n_scored = n_ctx - s->first - 1;
    s->chunk_tokens = malloc((size_t)n_ctx * sizeof *s->chunk_tokens);
    s->logits = malloc((size_t)n_scored * (size_t)n_vocab * sizeof *s->logits);
    s->token_nll = malloc((size_t)n_scored * sizeof *s->token_nll);
    if (!s->chunk_tokens || !s->logits || !s->token_nll) goto oom;
    s->n_threads = p->n_threads > 0 ? p->n_threads : omp_get_num_procs();
    /* the last token of a chunk is only ever a target: n_ctx - 1 positions suffice */
    hfq_context_params cp = {.n_ctx = n_ctx - 1, .n_batch = p->n_batch > 0 ? p->n_batch : n_ctx,
                             .n_threads = p->n_threads};
    if (!(s->ctx = hfq_context_new(m, &cp, err))) {
        hfq_ppl_free(s);
        return NULL;
    }
    return s;
oom:
    hfq_ppl_free(s);
    hfq_fail(err, path, "out of memory for perplexity over chunks of %lld", (long long)n_ctx);
    return NULL;
}

void hfq_ppl_free(hfq_ppl *s) {
    if (!s) return;
    hfq_context_free(s->ctx);
    free(s->chunk_tokens);
    free(s->logits);
    free(s->token_nll);
    free(s);
}

int64_t hfq_ppl_n_chunks(const hfq_ppl *s) { return s->n_chunks; }

/* -log softmax(logits)[target], as llama.cpp's log_softmax. */
static double neg_log_prob(const float *logits, int64_t n_vocab, int32_t target) {
    float max = logits[0];
    for (int64_t i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum_exp = 0.0;
    for (int64_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max);
    return -((double)(logits[target] - max) - log(sum_exp));
}

int hfq_ppl_next(hfq_ppl *s, hfq_ppl_chunk *chunk, hfq_error *err) {
    if (s->next_chunk >= s->n_chunks) return 0;
    const int64_t n_vocab = hfq_model_hparams(s->model)->n_vocab;
    const int64_t n_scored = s->n_ctx - s->first - 1;
    const int32_t *src = s->tokens + s->next_chunk * s->n_ctx;
    memcpy(s->chunk_tokens, src, (size_t)s->n_ctx * sizeof *src);
    if (s->add_bos) s->chunk_tokens[0] = s->bos_id;
    hfq_context_reset(s->ctx);
    if (hfq_forward(s->ctx, s->chunk_tokens, s->n_ctx - 1, n_scored, s->logits, err)) return -1;
    const int32_t *targets = src + s->first + 1;
    /* rows in parallel, sums in order: the same bytes whatever the thread count */
    #pragma omp parallel for num_threads(s->n_threads) schedule(static)
    for (int64_t j = 0; j < n_scored; j++) s->token_nll[j] = neg_log_prob(s->logits + j * n_vocab, n_vocab, targets[j]);
    double nll = 0.0, nll2 = 0.0;
    for (int64_t j = 0; j < n_scored; j++) {
        nll += s->token_nll[j];
        nll2 += s->token_nll[j] * s->token_nll[j];
    }
    s->nll += nll;
    s->nll2 += nll2;
    s->count += n_scored;
    *chunk = (hfq_ppl_chunk){.index = s->next_chunk, .n_scored = n_scored, .n_vocab = n_vocab, .logits = s->logits,
                             .targets = targets, .nll = nll};
    s->next_chunk++;
    return 1;
}

hfq_ppl_result hfq_ppl_result_get(const hfq_ppl *s) {
    hfq_ppl_result r = {.n_ctx = s->n_ctx, .n_chunks = s->next_chunk, .n_scored = s->count};
    if (s->count == 0) return r;
    r.nll_mean = s->nll / (double)s->count;
    r.ppl = exp(r.nll_mean);
    double var = s->nll2 / (double)s->count - r.nll_mean * r.nll_mean;
    if (s->count > 1 && var > 0) r.ppl_err = sqrt(var / (double)(s->count - 1)) * r.ppl;
    return r;
}
