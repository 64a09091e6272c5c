/* tokenizer.h - a small Llama-2-style tokenizer for synthetic checkpoints.
 *
 * The vocabulary is laid out as Llama 2's: <unk>=0, <s>=1, </s>=2, the 256
 * byte tokens "<0x00>".."<0xFF>" at 3..258, then the characters of a small
 * built-in English text (most frequent first, U+2581 "▁" standing for the
 * space), then tokens learned by byte-pair merges over that text (within words,
 * a word starting at each "▁"). When the text runs out of merges before the
 * requested size, more merges are made deterministically: each word token
 * joined with each continuation token, in vocabulary order. Every merge's two
 * parts and its result are in the vocabulary. Same size, same tokenizer.
 */
#ifndef HFQ_SRC_SYNTH_TOKENIZER_H
#define HFQ_SRC_SYNTH_TOKENIZER_H

#include "formats/error.h"

/* 3 specials + 256 bytes + "▁": without a "▁" token, spaces decode as "▁". */
#define SYNTH_VOCAB_MIN 260
#define SYNTH_VOCAB_MAX (1 << 20)

typedef struct synth_vocab {
    char **tokens;     /* id -> UTF-8 text */
    int n_tokens;
    char **merges;     /* "left right", in rank order */
    int n_merges;
} synth_vocab;

/* Builds a vocabulary of exactly vocab_size tokens (SYNTH_VOCAB_MIN..SYNTH_VOCAB_MAX). */
int synth_vocab_build(synth_vocab *v, int vocab_size, hfq_error *err);
void synth_vocab_free(synth_vocab *v);

/* Writes tokenizer.json (Hugging Face BPE with byte fallback, as Llama 2's),
 * tokenizer_config.json and special_tokens_map.json into dir, atomically. */
int synth_write_tokenizer(const char *dir, const synth_vocab *v, int model_max_length,
                          hfq_error *err);

/* Writes a cJSON tree as indented JSON to path, atomically (takes ownership of root). */
struct cJSON;
int synth_write_json(const char *path, struct cJSON *root, hfq_error *err);

#endif
