/* ppl.h - perplexity of a model over a token stream, computed as llama.cpp's
 * perplexity tool does (tools/perplexity/perplexity.cpp, default mode):
 *
 *   - the text is tokenized once (the caller's job); it must hold at least
 *     2 * n_ctx tokens;
 *   - it is cut into non-overlapping chunks of n_ctx tokens (the tokens past
 *     the last whole chunk are unused); each chunk is evaluated from an empty
 *     KV cache, its first token replaced by BOS when the model adds BOS;
 *   - only the second half is scored: with first = n_ctx / 2, the logits at
 *     positions first .. n_ctx - 2 predict tokens first + 1 .. n_ctx - 1,
 *     -log softmax summed in double (max-subtracted expf, as llama.cpp);
 *   - PPL = exp(mean NLL), its standard error
 *     PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1)).
 *
 * Evaluation is a session stepped chunk by chunk, so the logits of two
 * models (a base and a quantized one) can be compared chunk against chunk.
 * Chunks may be evaluated side by side, each with its own context and a share
 * of the threads; results do not depend on how (same bytes).
 */
#ifndef HFQ_SRC_EVAL_PPL_H
#define HFQ_SRC_EVAL_PPL_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "kernels/graph.h"

typedef struct hfq_ppl_params {
    int64_t n_ctx;          /* chunk length (>= 4); <= 0: 512 */
    int64_t n_chunks;       /* chunks to evaluate; <= 0: every whole chunk */
    int64_t n_batch;        /* tokens per forward batch; <= 0: n_ctx */
    int n_threads;          /* <= 0: all available */
    /* chunks evaluated side by side, each on n_threads / n_parallel threads;
     * <= 0: one per thread for tiny models (at most 2^24 matrix elements,
     * whose operations are too small to share among threads), else 1 */
    int n_parallel;
    bool add_bos;           /* put bos_id first in every chunk */
    int32_t bos_id;
    hfq_act_quant act_quant;/* W8A8/W4A4 activations (kernels/ops.h); 0: what the file says */
    hfq_kv_type kv_k, kv_v; /* KV cache formats (kernels/kv_type.h); 0: the backend's default */
    bool kv_dynamic;        /* FP8 caches: dynamic scales even where the model has static ones (graph.h) */
    const hfq_ops *ops;     /* the backend; NULL: the CPU */
    /* names the tokens' source (the text file) in errors about them, so a
     * text too short is not blamed on the model; NULL: the model's path */
    const char *text_path;
} hfq_ppl_params;

/* One evaluated chunk; pointers stay valid until the next hfq_ppl_next. */
typedef struct hfq_ppl_chunk {
    int64_t index;          /* 0-based */
    int64_t n_scored;       /* n_ctx - n_ctx/2 - 1 */
    int64_t n_vocab;
    const float *logits;    /* [n_scored][n_vocab]: row j predicts targets[j] */
    const int32_t *targets; /* [n_scored] */
    double nll;             /* sum of -log p(target) over the chunk */
} hfq_ppl_chunk;

typedef struct hfq_ppl_result {
    int64_t n_ctx;
    int64_t n_chunks;       /* evaluated so far */
    int64_t n_scored;       /* tokens scored so far */
    double nll_mean;        /* mean -log p */
    double ppl;             /* exp(nll_mean) */
    double ppl_err;         /* standard error of ppl; 0 with fewer than 2 tokens scored */
} hfq_ppl_result;

typedef struct hfq_ppl hfq_ppl;

/* Prepares a session over tokens[0..n_tokens) (borrowed, must outlive the
 * session). Fails when the tokens are fewer than 2 * n_ctx, n_ctx is beyond
 * the model's vocabulary checks, or the context cannot be created. */
hfq_ppl *hfq_ppl_new(const hfq_model *m, const int32_t *tokens, int64_t n_tokens, const hfq_ppl_params *p,
                     hfq_error *err);
void hfq_ppl_free(hfq_ppl *s);

/* What hfq_ppl_new would allocate for the same arguments, allocating
 * nothing: n_slots contexts (kernels/graph.h hfq_context_plan) and each
 * slot's buffers (its chunk's tokens, logits and NLLs). */
typedef struct hfq_ppl_memory {
    int n_slots;                    /* contexts */
    int64_t n_chunks;               /* chunks the session would evaluate */
    int n_parallel;                 /* ... side by side */
    hfq_context_memory context;     /* each */
    int64_t slot_buffers;           /* bytes, each */
} hfq_ppl_memory;

/* Fails as hfq_ppl_new would (but on memory). */
int hfq_ppl_plan(const hfq_model *m, int64_t n_tokens, const hfq_ppl_params *p, hfq_ppl_memory *out,
                 hfq_error *err);

int64_t hfq_ppl_n_chunks(const hfq_ppl *s);   /* chunks the session will evaluate */
int hfq_ppl_n_parallel(const hfq_ppl *s);     /* chunks evaluated side by side */
/* The KV cache formats the chunks are evaluated with (defaults resolved). */
hfq_kv_type hfq_ppl_kv_k(const hfq_ppl *s);
hfq_kv_type hfq_ppl_kv_v(const hfq_ppl *s);
/* Whether its FP8 cache(s) use the model's static scales. */
bool hfq_ppl_kv_static(const hfq_ppl *s);

/* Evaluates the next chunk: returns 1 with *chunk filled, 0 when every chunk
 * is done, -1 with err. */
int hfq_ppl_next(hfq_ppl *s, hfq_ppl_chunk *chunk, hfq_error *err);

/* Totals over the chunks evaluated so far. */
hfq_ppl_result hfq_ppl_result_get(const hfq_ppl *s);

#endif
