/* base_logits.h - a base model's log-probabilities over a text, saved once
 * and compared against many quantized models (ppl-eval --save-logits /
 * --base-logits; docs/ppl-eval.md has the format).
 *
 * Rows are stored as llama.cpp's perplexity tool stores them for
 * --kl-divergence-base: per scored token, with max the row's largest logit,
 * lo = max(min logit, max - 16) and lse = log sum expf(l - max):
 *   scale = (max - lo) / 65535, min_logp = (lo - max) - lse   (two floats)
 *   code_i = round((l_i - lo) / scale) for l_i > lo, else 0   (uint16 each)
 * decoded as logp_i = scale * code_i + min_logp. A decoded value is within
 * scale / 2 <= 1.3e-4 of the exact log-prob for logits above lo; every
 * smaller one reads as min_logp <= -16, which the KL statistics skip.
 *
 * The header names what the rows belong to: vocabulary size, n_ctx, chunks,
 * the text's token count and an XXH64 of its token ids, and the BOS id put
 * first in every chunk; hfq_base_logits_check refuses a file made for
 * another text, tokenizer, context or model vocabulary, saying which.
 * Files are little-endian; written atomically (formats/atomic_file.h).
 *
 * The reader also takes llama.cpp's files (llama-perplexity
 * --kl-divergence-base): "_logits_", n_ctx (u32), n_vocab, n_chunks (i32),
 * the evaluated token ids (int32 [n_chunks * n_ctx]), then the same rows,
 * each padded to an even number of codes. They carry the tokens instead of
 * a count and hash, and no BOS id (llama.cpp puts the model's BOS first).
 */
#ifndef HFQ_SRC_EVAL_BASE_LOGITS_H
#define HFQ_SRC_EVAL_BASE_LOGITS_H

#include <stdint.h>

#include "formats/error.h"

#define HFQ_BASE_LOGITS_MAGIC "HFQBLOGP"
#define HFQ_BASE_LOGITS_VERSION 1u
#define HFQ_BASE_LOGITS_HEADER_BYTES 56

typedef struct hfq_base_logits_info {
    int64_t n_vocab;        /* values per row */
    int64_t n_ctx;          /* chunk length; each chunk has n_ctx - n_ctx/2 - 1 rows */
    int64_t n_chunks;       /* chunks stored */
    int64_t n_text_tokens;  /* tokens of the whole text */
    uint64_t tokens_hash;   /* XXH64 (seed 0) of the text's token ids as int32 little-endian */
    int32_t bos_id;         /* put first in every chunk; -1: none */
    /* llama.cpp's files: the evaluated tokens [n_chunks * n_ctx] (n_text_tokens
     * -1, hash and bos_id unknown); NULL for ours */
    const int32_t *chunk_tokens;
} hfq_base_logits_info;

/* Rows per chunk: the scored positions n_ctx/2 .. n_ctx-2. */
int64_t hfq_base_logits_rows(int64_t n_ctx);

/* Bytes of one stored row (two floats and n_vocab codes). */
int64_t hfq_base_logits_row_bytes(int64_t n_vocab);

/* XXH64 of n token ids as int32 little-endian, for tokens_hash. */
uint64_t hfq_tokens_hash(const int32_t *tokens, int64_t n);

/* n_rows rows of logits to their stored forms (row_bytes bytes each, one
 * after another; on up to n_threads threads, <= 0: all, the same bytes
 * whatever the threads), and one back to log-probabilities. */
void hfq_base_logits_encode(const float *logits, int64_t n_vocab, int64_t n_rows, int n_threads, void *rows);
void hfq_base_logits_decode(const void *row, int64_t n_vocab, float *logp);

typedef struct hfq_base_logits_writer hfq_base_logits_writer;

/* Starts path (a temporary file until commit) with the header of info. */
hfq_base_logits_writer *hfq_base_logits_create(const char *path, const hfq_base_logits_info *info, hfq_error *err);
/* Appends the next chunk: logits [rows][n_vocab], rows = hfq_base_logits_rows(n_ctx),
 * encoded on up to n_threads threads. */
int hfq_base_logits_write_chunk(hfq_base_logits_writer *w, const float *logits, int n_threads, hfq_error *err);
/* Renames the file into place once every chunk of the header is written;
 * frees w either way. */
int hfq_base_logits_commit(hfq_base_logits_writer *w, hfq_error *err);
/* Removes the temporary file and frees w (NULL is fine). */
void hfq_base_logits_abort(hfq_base_logits_writer *w);

typedef struct hfq_base_logits_reader hfq_base_logits_reader;

/* Opens a file (ours or llama.cpp's), checks the header and that its size
 * is exactly the header plus n_chunks chunks of rows. */
hfq_base_logits_reader *hfq_base_logits_open(const char *path, hfq_error *err);
void hfq_base_logits_close(hfq_base_logits_reader *r);
const hfq_base_logits_info *hfq_base_logits_info_get(const hfq_base_logits_reader *r);

/* Fails, naming the file and what differs, unless the file holds rows for
 * this evaluation: want's n_vocab, n_ctx, text (token count and hash; for
 * llama.cpp's files the tokens of the chunks, compared with text_tokens)
 * and BOS, and at least want->n_chunks chunks. */
int hfq_base_logits_check(const hfq_base_logits_reader *r, const hfq_base_logits_info *want,
                          const int32_t *text_tokens, hfq_error *err);

/* Reads the next chunk decoded to log-probabilities, logp [rows][n_vocab];
 * fails on a read error or a row whose scale or minimum is not a finite
 * number in range (scale >= 0, minimum <= 0). */
int hfq_base_logits_read_chunk(hfq_base_logits_reader *r, float *logp, hfq_error *err);

#endif
