/* calibrate.h - run a model over calibration text and collect activation
 * statistics (calib/stats.h) at the input of every linear layer, through the
 * runner's observer (kernels/graph.h).
 *
 * Text to token sequences, two modes:
 *   chunks  the whole text is tokenized once (BOS first when the vocabulary
 *           adds it) and cut into consecutive chunks of n_ctx tokens, each
 *           evaluated from an empty cache with its first token replaced by BOS
 *           (as llama.cpp's llama-imatrix and perplexity do); the tokens past
 *           the last whole chunk are unused. Fewer tokens than one chunk fail.
 *   lines   every line that is not blank is one sequence of its own, BOS
 *           first, cut to n_ctx tokens; with chat, the line is first rendered
 *           as a user turn of the model's chat template (calib/chat_template.h)
 *           and tokenized with special tokens recognised.
 * max_chunks limits the sequences taken (from the start: deterministic).
 *
 * Every token's logits are computed so the output layer is observed too
 * (in batches of n_batch tokens, so the logits buffer stays small).
 */
#ifndef HFQ_CALIB_CALIBRATE_H
#define HFQ_CALIB_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calib/stats.h"
#include "formats/error.h"
#include "kernels/kv_type.h"
#include "kernels/model.h"

/* The model's tokenizer, as calibration needs it. */
typedef struct hfq_calib_tokenizer {
    /* Encodes text[0..len): add_special puts BOS (and EOS) where the
     * vocabulary adds them, special recognises special-token texts. *ids is
     * malloc'd (NULL when *n_ids is 0). */
    int (*encode)(void *ctx, const char *text, size_t len, bool add_special, bool special, int32_t **ids,
                  size_t *n_ids, hfq_error *err);
    void *ctx;
    int32_t bos_id;            /* -1: none */
    bool add_bos;              /* the vocabulary puts BOS first */
    const char *bos_text;      /* BOS token's text (chat templates), or NULL */
    const char *chat_template; /* tokenizer.chat_template, or NULL */
    const char *model;         /* the model file, named in errors about its template (NULL: the text's) */
} hfq_calib_tokenizer;

/* Tokens per chunk when none is asked for. */
#define HFQ_CALIB_DEFAULT_CTX 512

typedef struct hfq_calib_text_opts {
    int64_t n_ctx;             /* tokens per chunk / at most per line; <= 0: HFQ_CALIB_DEFAULT_CTX */
    int64_t max_chunks;        /* sequences at most; <= 0: all */
    bool lines;                /* one sequence per line */
    bool chat;                 /* lines only: wrap each line in the chat template */
} hfq_calib_text_opts;

typedef struct hfq_calib_seqs {
    int32_t *tokens;           /* all sequences, one after the other */
    int64_t *start;            /* [n + 1]: sequence i is tokens[start[i] .. start[i+1]) */
    int64_t n;
    int64_t n_tokens;
    int64_t max_len;
    int64_t n_ctx;
    char mode[16];             /* "chunks", "lines", "lines-chat" */
} hfq_calib_seqs;

/* Cuts text (named `where` in errors) into sequences. Fails with one line
 * when the text is empty, shorter than one chunk, has no non-blank line, or
 * chat is asked without a supported template. */
int hfq_calib_sequences(const char *text, size_t len, const char *where, const hfq_calib_text_opts *o,
                        const hfq_calib_tokenizer *tok, hfq_calib_seqs *out, hfq_error *err);
void hfq_calib_seqs_free(hfq_calib_seqs *s);

typedef struct hfq_calib_run_params {
    int n_threads;             /* <= 0: all, or 1 for tiny models (2^24 matrix elements at most) */
    int64_t n_batch;           /* tokens per forward call; <= 0: 64 */
    /* mixtures of experts: every expert's statistics over every token, not
     * the routed ones only (the forward pass is unchanged; graph.h) */
    bool all_experts;
    /* the KV cache formats the run keeps (kernels/kv_type.h; 0: the
     * backend's default, F16 on the CPU): calibrating under the cache the
     * model will be served with; an FP8 cache takes the model file's static
     * scales when it has them (kernels/graph.h) */
    hfq_kv_type kv_k, kv_v;
    /* called after each sequence (may be NULL) */
    void (*progress)(void *ctx, int64_t done, int64_t n);
    void *progress_ctx;
    /* also called with every dense weight's input (kernels/graph.h's
     * observer; may be NULL): GPTQ's Hessians (calib/hessian.h) */
    void (*observe)(void *user, const char *weight_name, const float *x, int64_t n_tokens, int64_t n_in);
    void *observe_user;
} hfq_calib_run_params;

/* Evaluates every sequence from an empty cache, adding the activations to
 * stats (hfq_calib_stats_init'ed) and the KV cache's maxima (calib/kv_stats.h)
 * to its k_amax / v_amax, then finishes the statistics and records
 * the mode, chunk count, chunk size and token count. */
int hfq_calibrate(const hfq_model *m, const hfq_calib_seqs *seqs, const hfq_calib_run_params *p,
                  hfq_calib_stats *stats, hfq_error *err);

#endif
