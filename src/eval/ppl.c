#include "src/eval/ppl.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "src/eval/kld.h"

/* One chunk in flight: its own context and buffers. */
typedef struct slot {
    hfq_context *ctx;
    int32_t *tokens;        /* [n_ctx]: the chunk as evaluated */
    float *logits;          /* [n_scored][n_vocab] */
    double *token_nll;      /* [n_scored] */
    int64_t chunk;          /* chunk index held, -1 when none */
    int rc;
    hfq_error err;
} slot;

struct hfq_ppl {
    const hfq_model *model;
    const int32_t *tokens;
    int64_t n_ctx, first, n_scored, n_vocab, n_chunks, next_chunk;
    bool add_bos;
    int32_t bos_id;
    int n_lanes;            /* chunks evaluated at once, each on threads_per_slot threads */
    int n_slots, threads_per_slot;   /* n_slots: chunks per round, handed to the lanes as they free up */
    slot *slots;
    double nll, nll2;       /* sums of -log p and its square */
    int64_t count;
};

/* Lanes of a tiny model take this many chunks each per round: a lane that
 * finishes early takes another instead of waiting for the others at the
 * end of every chunk (a tiny model's contexts cost little memory). */
#define TINY_ROUND_CHUNKS_PER_LANE 4

static int lanes_for(bool tiny, int n_threads, int n_parallel, int64_t n_chunks) {
    int64_t n = n_parallel > 0 ? n_parallel : tiny ? n_threads : 1;
    if (n > n_threads) n = n_threads;
    if (n > n_chunks) n = n_chunks;
    return n < 1 ? 1 : (int)n;
}

/* A session's shape: checked parameters, chunks, lanes and slots. */
typedef struct session_shape {
    int64_t n_ctx, n_chunks, n_scored;
    int n_lanes, n_slots, threads_per_slot;
    hfq_context_params cp;
} session_shape;

static int session_shape_of(const hfq_model *m, int64_t n_tokens, const hfq_ppl_params *p, session_shape *sh,
                            hfq_error *err) {
    const char *path = hfq_model_path(m);
    const int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : 512;
    const int64_t n_vocab = hfq_model_hparams(m)->n_vocab;
    if (n_ctx < 4)
        return hfq_fail(err, path, "a perplexity chunk of %lld tokens is too short (at least 4)", (long long)n_ctx);
    if (n_tokens < 2 * n_ctx)
        return hfq_fail(err, p->text_path ? p->text_path : path,
                        "the text has %lld tokens; a context of %lld needs at least %lld", (long long)n_tokens,
                        (long long)n_ctx, (long long)(2 * n_ctx));
    if (p->add_bos && (p->bos_id < 0 || p->bos_id >= n_vocab))
        return hfq_fail(err, path, "BOS id %d is outside the vocabulary [0, %lld)", (int)p->bos_id, (long long)n_vocab);
    *sh = (session_shape){.n_ctx = n_ctx, .n_chunks = n_tokens / n_ctx, .n_scored = n_ctx - n_ctx / 2 - 1};
    if (p->n_chunks > 0 && p->n_chunks < sh->n_chunks) sh->n_chunks = p->n_chunks;
    const int n_threads = p->n_threads > 0 ? p->n_threads : omp_get_num_procs();
    const bool tiny = hfq_model_is_tiny(m);
    sh->n_lanes = lanes_for(tiny, n_threads, p->n_parallel, sh->n_chunks);
    sh->threads_per_slot = n_threads / sh->n_lanes;
    const int64_t per_round = sh->n_lanes > 1 && tiny ? (int64_t)sh->n_lanes * TINY_ROUND_CHUNKS_PER_LANE : sh->n_lanes;
    sh->n_slots = (int)(per_round < sh->n_chunks ? per_round : sh->n_chunks);
    /* the last token of a chunk is only ever a target: n_ctx - 1 positions suffice */
    sh->cp = (hfq_context_params){.n_ctx = n_ctx - 1, .n_batch = p->n_batch > 0 ? p->n_batch : n_ctx,
                                  .n_outputs = sh->n_scored,
                                  .n_threads = sh->threads_per_slot, .act_quant = p->act_quant, .kv_k = p->kv_k,
                                  .kv_v = p->kv_v, .kv_dynamic = p->kv_dynamic, .ops = p->ops};
    return 0;
}

/* Bytes of one slot's own buffers (slot's tokens, logits, NLLs). */
static int64_t slot_bytes(const session_shape *sh, int64_t n_vocab) {
    return (int64_t)(sizeof(slot) + (size_t)sh->n_ctx * sizeof(int32_t) +
                     (size_t)sh->n_scored * (size_t)n_vocab * sizeof(float) + (size_t)sh->n_scored * sizeof(double));
}

hfq_ppl *hfq_ppl_new(const hfq_model *m, const int32_t *tokens, int64_t n_tokens, const hfq_ppl_params *p,
                     hfq_error *err) {
    session_shape sh;
    if (session_shape_of(m, n_tokens, p, &sh, err)) return NULL;
    const int64_t n_vocab = hfq_model_hparams(m)->n_vocab;
    hfq_ppl *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    *s = (hfq_ppl){.model = m, .tokens = tokens, .n_ctx = sh.n_ctx, .first = sh.n_ctx / 2, .n_vocab = n_vocab,
                   .n_chunks = sh.n_chunks, .n_scored = sh.n_scored, .add_bos = p->add_bos, .bos_id = p->bos_id,
                   .n_lanes = sh.n_lanes, .n_slots = sh.n_slots, .threads_per_slot = sh.threads_per_slot};
    if (!(s->slots = calloc((size_t)s->n_slots, sizeof *s->slots))) goto oom;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        sl->chunk = -1;
        sl->tokens = malloc((size_t)sh.n_ctx * sizeof *sl->tokens);
        sl->logits = malloc((size_t)s->n_scored * (size_t)n_vocab * sizeof *sl->logits);
        sl->token_nll = malloc((size_t)s->n_scored * sizeof *sl->token_nll);
        if (!sl->tokens || !sl->logits || !sl->token_nll) goto oom;
        if (!(sl->ctx = hfq_context_new(m, &sh.cp, err))) {
            hfq_ppl_free(s);
            return NULL;
        }
    }
    return s;
oom:
    hfq_ppl_free(s);
    hfq_fail(err, hfq_model_path(m), "out of memory for perplexity over chunks of %lld", (long long)sh.n_ctx);
    return NULL;
}

int hfq_ppl_plan(const hfq_model *m, int64_t n_tokens, const hfq_ppl_params *p, hfq_ppl_memory *out,
                 hfq_error *err) {
    session_shape sh;
    if (session_shape_of(m, n_tokens, p, &sh, err)) return -1;
    *out = (hfq_ppl_memory){.n_slots = sh.n_slots, .n_chunks = sh.n_chunks, .n_parallel = sh.n_lanes,
                            .slot_buffers = slot_bytes(&sh, hfq_model_hparams(m)->n_vocab)};
    return hfq_context_plan(m, &sh.cp, &out->context, err);
}

void hfq_ppl_free(hfq_ppl *s) {
    if (!s) return;
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        hfq_context_free(s->slots[i].ctx);
        free(s->slots[i].tokens);
        free(s->slots[i].logits);
        free(s->slots[i].token_nll);
    }
    free(s->slots);
    free(s);
}

int64_t hfq_ppl_n_chunks(const hfq_ppl *s) { return s->n_chunks; }
int hfq_ppl_n_parallel(const hfq_ppl *s) { return s->n_lanes; }
hfq_kv_type hfq_ppl_kv_k(const hfq_ppl *s) { return hfq_context_kv_k(s->slots[0].ctx); }
hfq_kv_type hfq_ppl_kv_v(const hfq_ppl *s) { return hfq_context_kv_v(s->slots[0].ctx); }
bool hfq_ppl_kv_static(const hfq_ppl *s) { return hfq_context_kv_static(s->slots[0].ctx); }

/* -log softmax(logits row r)[targets[r]] for rows r < n (<=
 * HFQ_LSE_ROWS), as llama.cpp's log_softmax (the log of the sum in
 * double). */
static void neg_log_probs(const float *logits, int64_t n_vocab, const int32_t *targets, int n, double *out) {
    float max[HFQ_LSE_ROWS];
    double log_sum[HFQ_LSE_ROWS];
    hfq_log_sum_exp_rows(logits, n_vocab, n, max, log_sum);
    for (int r = 0; r < n; r++) out[r] = -((double)(logits[r * n_vocab + targets[r]] - max[r]) - log_sum[r]);
}

/* Evaluates chunk sl->chunk into the slot; its rows' -log p in token_nll. */
static void eval_chunk(const hfq_ppl *s, slot *sl) {
    const int32_t *src = s->tokens + sl->chunk * s->n_ctx;
    memcpy(sl->tokens, src, (size_t)s->n_ctx * sizeof *src);
    if (s->add_bos) sl->tokens[0] = s->bos_id;
    hfq_context_reset(sl->ctx);
    sl->rc = hfq_forward(sl->ctx, sl->tokens, s->n_ctx - 1, s->n_scored, sl->logits, &sl->err);
    if (sl->rc) return;
    const int32_t *targets = src + s->first + 1;
    #pragma omp parallel for num_threads(s->threads_per_slot) schedule(static)
    for (int64_t j = 0; j < s->n_scored; j += HFQ_LSE_ROWS)
        neg_log_probs(sl->logits + j * s->n_vocab, s->n_vocab, targets + j,
                      (int)(s->n_scored - j < HFQ_LSE_ROWS ? s->n_scored - j : HFQ_LSE_ROWS), sl->token_nll + j);
}

int hfq_ppl_next(hfq_ppl *s, hfq_ppl_chunk *chunk, hfq_error *err) {
    if (s->next_chunk >= s->n_chunks) return 0;
    slot *sl = &s->slots[s->next_chunk % s->n_slots];
    if (sl->chunk != s->next_chunk) {
        /* the slots hold the next n_slots chunks, evaluated n_lanes at a time */
        const int n = (int)(s->n_chunks - s->next_chunk < s->n_slots ? s->n_chunks - s->next_chunk : s->n_slots);
        for (int i = 0; i < n; i++) s->slots[(s->next_chunk + i) % s->n_slots].chunk = s->next_chunk + i;
        #pragma omp parallel for num_threads(n < s->n_lanes ? n : s->n_lanes) schedule(dynamic, 1)
        for (int i = 0; i < n; i++) eval_chunk(s, &s->slots[(s->next_chunk + i) % s->n_slots]);
    }
    if (sl->rc) {   /* chunks before a failed one are still returned first */
        if (err) *err = sl->err;
        for (int k = 0; k < s->n_slots; k++) s->slots[k].chunk = -1;
        return -1;
    }
    /* sums in chunk and token order: the same bytes whatever the threads */
    double nll = 0.0, nll2 = 0.0;
    for (int64_t j = 0; j < s->n_scored; j++) {
        nll += sl->token_nll[j];
        nll2 += sl->token_nll[j] * sl->token_nll[j];
    }
    s->nll += nll;
    s->nll2 += nll2;
    s->count += s->n_scored;
    *chunk = (hfq_ppl_chunk){.index = s->next_chunk, .n_scored = s->n_scored, .n_vocab = s->n_vocab,
                             .logits = sl->logits, .targets = s->tokens + s->next_chunk * s->n_ctx + s->first + 1,
                             .nll = nll};
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
