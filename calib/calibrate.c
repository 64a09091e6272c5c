/* calibrate.c - see calibrate.h. */
#include "calib/calibrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/chat_template.h"
#include "calib/kv_stats.h"
#include "kernels/graph.h"

#define DEFAULT_BATCH 64

void hfq_calib_seqs_free(hfq_calib_seqs *s) {
    free(s->tokens);
    free(s->start);
    memset(s, 0, sizeof *s);
}

/* Appends a sequence of n tokens. */
static int push(hfq_calib_seqs *s, const int32_t *ids, int64_t n, int64_t *cap, const char *where, hfq_error *err) {
    if (s->n_tokens + n > *cap) {
        int64_t c = *cap ? *cap : 4096;
        while (c < s->n_tokens + n) c *= 2;
        int32_t *t = realloc(s->tokens, (size_t)c * sizeof *t);
        if (!t) return hfq_fail(err, where, "out of memory for %lld tokens", (long long)c);
        s->tokens = t;
        *cap = c;
    }
    int64_t *st = realloc(s->start, (size_t)(s->n + 2) * sizeof *st);
    if (!st) return hfq_fail(err, where, "out of memory");
    s->start = st;
    st[s->n] = s->n_tokens;
    memcpy(s->tokens + s->n_tokens, ids, (size_t)n * sizeof *ids);
    s->n_tokens += n;
    st[++s->n] = s->n_tokens;
    if (n > s->max_len) s->max_len = n;
    return 0;
}

static int chunks(const char *text, size_t len, const char *where, const hfq_calib_text_opts *o,
                  const hfq_calib_tokenizer *tok, hfq_calib_seqs *out, hfq_error *err) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (tok->encode(tok->ctx, text, len, true, false, &ids, &n_ids, err)) return -1;
    int64_t n_chunks = (int64_t)n_ids / out->n_ctx, cap = 0;
    int rc = 0;
    if (n_chunks == 0)
        rc = hfq_fail(err, where, "the text has %zu tokens, fewer than one chunk of %lld (--calib-ctx)", n_ids,
                      (long long)out->n_ctx);
    if (o->max_chunks > 0 && n_chunks > o->max_chunks) n_chunks = o->max_chunks;
    for (int64_t i = 0; rc == 0 && i < n_chunks; i++) {
        int32_t *chunk = ids + i * out->n_ctx;
        if (tok->add_bos && tok->bos_id >= 0) chunk[0] = tok->bos_id;
        rc = push(out, chunk, out->n_ctx, &cap, where, err);
    }
    free(ids);
    return rc;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\v' && s[i] != '\f') return false;
    return true;
}

/* One line's tokens: BOS first, cut to n_ctx. */
static int line_tokens(const char *line, size_t n, const hfq_calib_text_opts *o, const hfq_calib_tokenizer *tok,
                       int32_t **ids, size_t *n_ids, hfq_error *err) {
    if (!o->chat) return tok->encode(tok->ctx, line, n, true, false, ids, n_ids, err);
    size_t r_len = 0;
    char *rendered = hfq_chat_render_user(tok->chat_template, tok->bos_text, line, n, &r_len, err);
    if (!rendered) return -1;
    int rc = tok->encode(tok->ctx, rendered, r_len, false, true, ids, n_ids, err);
    free(rendered);
    if (rc || !tok->add_bos || tok->bos_id < 0 || (*n_ids > 0 && (*ids)[0] == tok->bos_id)) return rc;
    int32_t *with = malloc((*n_ids + 1) * sizeof *with);
    if (!with) return hfq_fail(err, "calibration", "out of memory");
    with[0] = tok->bos_id;
    if (*n_ids) memcpy(with + 1, *ids, *n_ids * sizeof *with);
    free(*ids);
    *ids = with;
    (*n_ids)++;
    return 0;
}

static int lines(const char *text, size_t len, const char *where, const hfq_calib_text_opts *o,
                 const hfq_calib_tokenizer *tok, hfq_calib_seqs *out, hfq_error *err) {
    /* the template is the model's: errors about it name the model */
    const char *model = tok->model ? tok->model : where;
    if (o->chat && !tok->chat_template)
        return hfq_fail(err, model, "--calib-chat: the model has no tokenizer.chat_template");
    if (o->chat && hfq_chat_detect(tok->chat_template) == HFQ_CHAT_UNSUPPORTED)
        return hfq_fail(err, model, "--calib-chat: tokenizer.chat_template is not a shape this build renders "
                                    "(ChatML/Qwen, Llama 3, Llama 2/Mistral [INST])");
    int64_t cap = 0;
    for (size_t pos = 0; pos < len && (o->max_chunks <= 0 || out->n < o->max_chunks);) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len, n = end - pos;
        const char *line = text + pos;
        pos = end + 1;
        if (n > 0 && line[n - 1] == '\r') n--;
        if (blank(line, n)) continue;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (line_tokens(line, n, o, tok, &ids, &n_ids, err)) return -1;
        int rc = n_ids == 0 ? 0 : push(out, ids, (int64_t)n_ids < out->n_ctx ? (int64_t)n_ids : out->n_ctx, &cap, where, err);
        free(ids);
        if (rc) return -1;
    }
    if (out->n == 0) return hfq_fail(err, where, "no line of the text holds anything to calibrate on");
    return 0;
}

int hfq_calib_sequences(const char *text, size_t len, const char *where, const hfq_calib_text_opts *o,
                        const hfq_calib_tokenizer *tok, hfq_calib_seqs *out, hfq_error *err) {
    memset(out, 0, sizeof *out);
    out->n_ctx = o->n_ctx > 0 ? o->n_ctx : HFQ_CALIB_DEFAULT_CTX;
    snprintf(out->mode, sizeof out->mode, "%s", !o->lines ? "chunks" : o->chat ? "lines-chat" : "lines");
    if (o->chat && !o->lines) return hfq_fail(err, where, "--calib-chat needs --calib-lines");
    if (len == 0) return hfq_fail(err, where, "the calibration text is empty");
    int rc = o->lines ? lines(text, len, where, o, tok, out, err) : chunks(text, len, where, o, tok, out, err);
    if (rc) hfq_calib_seqs_free(out);
    return rc;
}

/* ---- running the model ---- */

typedef struct observe_ctx {
    hfq_calib_stats *stats;
    const hfq_calib_run_params *p;
    int64_t n_layer;
    hfq_error err;
    bool failed;
} observe_ctx;

static void observe(void *user, const char *weight_name, const float *x, int64_t n_tokens, int64_t n_in) {
    observe_ctx *o = user;
    if (o->failed) return;
    if (hfq_calib_stats_add(o->stats, weight_name, 0, 1, x, n_tokens, n_in, &o->err)) o->failed = true;
    if (o->p->observe) o->p->observe(o->p->observe_user, weight_name, x, n_tokens, n_in);
}

static void observe_kv(void *user, int64_t layer, const float *k, const float *v, int64_t n_tokens, int64_t n_head_kv,
                       int64_t head_dim) {
    observe_ctx *o = user;
    if (o->failed) return;
    if (hfq_calib_kv_add(o->stats, layer, o->n_layer, k, v, n_tokens, n_head_kv, head_dim, &o->err)) o->failed = true;
}

/* Expert e's rows: matrix e of the stacked weight's entry (llama-imatrix's
 * layout, each expert's count its routed tokens). */
static void observe_expert(void *user, const char *weight_name, int64_t expert, int64_t n_expert, const float *x,
                           int64_t n_tokens, int64_t n_in) {
    observe_ctx *o = user;
    if (o->failed) return;
    if (hfq_calib_stats_add(o->stats, weight_name, expert, n_expert, x, n_tokens, n_in, &o->err)) o->failed = true;
}

int hfq_calibrate(const hfq_model *m, const hfq_calib_seqs *seqs, const hfq_calib_run_params *p,
                  hfq_calib_stats *stats, hfq_error *err) {
    const hfq_hparams *hp = hfq_model_hparams(m);
    const int64_t n_vocab = hp->n_vocab;
    const int64_t n_batch = p->n_batch > 0 ? p->n_batch : DEFAULT_BATCH;
    /* a tiny model's threads would wait for each other at every operation
     * longer than they share it, and the sequences must run one after the
     * other for the statistics' order: one thread */
    const int n_threads = p->n_threads > 0 ? p->n_threads : hfq_model_is_tiny(m) ? 1 : 0;
    hfq_context_params cp = {.n_ctx = seqs->max_len, .n_batch = n_batch, .n_threads = n_threads,
                             .kv_k = p->kv_k, .kv_v = p->kv_v};
    if (seqs->n < 1 || seqs->max_len < 1) return hfq_fail(err, hfq_model_path(m), "nothing to calibrate on");
    hfq_context *c = hfq_context_new(m, &cp, err);
    float *logits = c ? malloc((size_t)(n_batch * n_vocab) * sizeof *logits) : NULL;
    if (!logits) {
        hfq_context_free(c);
        return c ? hfq_fail(err, hfq_model_path(m), "out of memory for the logits") : -1;
    }
    observe_ctx oc = {.stats = stats, .p = p, .n_layer = hp->n_layer};
    hfq_context_set_observer(c, observe, &oc);
    hfq_context_set_kv_observer(c, observe_kv, &oc);
    hfq_context_set_expert_observer(c, observe_expert, &oc, p->all_experts);
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < seqs->n; i++) {
        hfq_context_reset(c);
        const int32_t *tokens = seqs->tokens + seqs->start[i];
        const int64_t n = seqs->start[i + 1] - seqs->start[i];
        for (int64_t done = 0; rc == 0 && done < n; done += n_batch) {
            const int64_t t = n - done < n_batch ? n - done : n_batch;
            rc = hfq_forward(c, tokens + done, t, t, logits, err);
            if (rc == 0 && oc.failed) { /* the observer's error names the weight: add the model */
                *err = oc.err;
                hfq_error_prefix(err, hfq_model_path(m));
                rc = -1;
            }
        }
        if (rc == 0 && p->progress) p->progress(p->progress_ctx, i + 1, seqs->n);
    }
    hfq_context_free(c);
    free(logits);
    if (rc) return -1;
    snprintf(stats->mode, sizeof stats->mode, "%s", seqs->mode);
    stats->n_chunks = seqs->n;
    stats->chunk_size = seqs->n_ctx;
    stats->n_tokens = seqs->n_tokens;
    if (hfq_calib_stats_finish(stats, err) == 0) return 0;
    hfq_error_prefix(err, hfq_model_path(m));
    return -1;
}
