/* tokenizer.h - encode text to token ids and decode ids to text, from an
 * hfq_vocab alone (so a converted GGUF is self-contained).
 *
 * Algorithms (chosen by the vocabulary; docs/tokenizers.md has the details):
 *   "llama" without merges (from tokenizer.model): SentencePiece BPE: spaces
 *     become U+2581 with one prepended when add_space_prefix, then the
 *     adjacent pair whose concatenation is the highest-scoring piece is merged
 *     first (ties: leftmost); user-defined pieces are matched first and never
 *     merged; characters with no piece fall back to <0xNN> byte tokens, else
 *     the unknown token (consecutive unknowns fused).
 *   "llama" with merges (from tokenizer.json): the same text preparation, then
 *     Hugging Face BPE: merges applied by rank (ties: leftmost), byte fallback.
 *   "gpt2": pre-tokenizer split (llama-bpe or qwen2; qwen2 applies NFC first),
 *     GPT-2 byte-to-unicode mapping, merges by rank; llama-bpe looks a whole
 *     piece up in the vocabulary first (ignore_merges).
 * Added tokens are cut out of the text before any of this (leftmost, then
 * longest match): USER_DEFINED tokens always (for "llama" without merges
 * SentencePiece matches them itself), CONTROL and UNKNOWN tokens only with
 * HFQ_TOK_PARSE_SPECIAL. Invalid UTF-8: each bad byte becomes U+FFFD (see
 * unicode.h).
 */
#ifndef HFQ_SRC_TOKENIZER_TOKENIZER_H
#define HFQ_SRC_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "src/tokenizer/vocab.h"

typedef struct hfq_tokenizer hfq_tokenizer;

/* Builds the lookup tables. The vocabulary must outlive the tokenizer.
 * Fails (err names vocab->source and the key) on what it cannot tokenize with:
 * unsupported model or pre-tokenizer, merges naming unknown tokens. */
hfq_tokenizer *hfq_tokenizer_new(const hfq_vocab *vocab, hfq_error *err);
void hfq_tokenizer_free(hfq_tokenizer *t);
const hfq_vocab *hfq_tokenizer_vocab(const hfq_tokenizer *t);

enum {
    HFQ_TOK_ADD_SPECIAL = 1,    /* BOS/EOS as the vocabulary's add_bos/add_eos say */
    HFQ_TOK_PARSE_SPECIAL = 2,  /* match CONTROL/UNKNOWN token texts in the input */
};

/* Encodes text[0..len) (any bytes). On success *ids is a malloc'd array of
 * *n_ids ids (NULL when 0) and 0 is returned; -1 with err when out of memory. */
int hfq_tokenize(const hfq_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                 size_t *n_ids, hfq_error *err);

/* The bytes token id stands for, as llama.cpp's token_to_piece: text with
 * U+2581 as space ("llama"), byte-level decoded ("gpt2" normal tokens), the
 * byte of a <0xNN> token; CONTROL/UNKNOWN tokens give nothing unless special,
 * then their text. Writes up to cap bytes to buf and returns the piece's
 * length (which may exceed cap: then call again with a larger buffer), or -1
 * for an id outside the vocabulary. */
int hfq_token_to_piece(const hfq_tokenizer *t, int32_t id, bool special, char *buf, size_t cap);

/* Decodes ids into a malloc'd NUL-terminated string (*len bytes, may contain
 * invalid UTF-8 where a multi-byte character is cut): the pieces
 * concatenated, with one leading space removed for "llama" vocabularies with
 * add_space_prefix (as Hugging Face's Strip decoder and llama.cpp do).
 * Returns NULL with err on an id outside the vocabulary or out of memory. */
char *hfq_detokenize(const hfq_tokenizer *t, const int32_t *ids, size_t n_ids, bool special, size_t *len,
                     hfq_error *err);

#endif
