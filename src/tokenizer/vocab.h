/* vocab.h - a tokenizer vocabulary as llama.cpp's GGUF metadata holds it.
 *
 * Loaders:
 *   hfq_vocab_from_dir: a Hugging Face model folder (or a tokenizer folder):
 *     - tokenizer.model (SentencePiece BPE), preferred when present, as
 *       llama.cpp's convert_hf_to_gguf.py does -> model "llama", pre "default";
 *     - else tokenizer.json:
 *       BPE with byte_fallback (SentencePiece-style, e.g. Llama 2,
 *         TinyStories-656K) -> "llama", merges kept (see below);
 *       byte-level BPE -> "gpt2", pre detected from the pre-tokenizer regex:
 *         "llama-bpe" (Llama 3) or "qwen2" (Qwen2/Qwen3, NFC normalizer).
 *     plus tokenizer_config.json, special_tokens_map.json (not needed: its
 *     tokens are in tokenizer_config.json), config.json, chat_template.jinja,
 *     added_tokens.json, with gguf-py's SpecialVocab rules for special ids and
 *     add_bos/add_eos. Anything the tokenizer could not reproduce exactly
 *     (other pre-tokenizers, normalizers, unigram models, ...) is refused
 *     with a one-line error.
 *   hfq_vocab_from_gguf: the tokenizer.* keys of a GGUF file, validated.
 * hfq_vocab_to_gguf writes the tokenizer.* keys.
 *
 * Token ids up to config.json's vocab_size that no file names become
 * "[PAD<id>]" (UNUSED), so there is a token per embedding row.
 *
 * Differences from convert_hf_to_gguf.py (on purpose): "llama" vocabularies
 * from tokenizer.json keep their merges (tokenizer.ggml.merges, which
 * llama.cpp ignores for "llama") and get scores from merge ranks (-rank of the
 * first merge producing the token, -1e9 for multi-character tokens no merge
 * produces, 0 otherwise) instead of a flat -1000, so both our tokenizer
 * (exactly) and llama.cpp's (score-driven) reproduce the Hugging Face merges;
 * the unk token gets type UNKNOWN (as SentencePiece models have it).
 */
#ifndef HFQ_SRC_TOKENIZER_VOCAB_H
#define HFQ_SRC_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"

/* Token types: llama.cpp's values (and SentencePiece's). */
enum hfq_token_type {
    HFQ_TOKEN_NORMAL = 1,
    HFQ_TOKEN_UNKNOWN = 2,
    HFQ_TOKEN_CONTROL = 3,
    HFQ_TOKEN_USER_DEFINED = 4,
    HFQ_TOKEN_UNUSED = 5,
    HFQ_TOKEN_BYTE = 6,
};

typedef struct hfq_vocab {
    char *source;            /* file the vocabulary came from (for messages) */
    char *model;             /* tokenizer.ggml.model: "llama" or "gpt2" */
    char *pre;               /* tokenizer.ggml.pre: "default", "llama-bpe", "qwen2", ... */
    int64_t n_tokens;
    char **tokens;           /* token texts, NUL-terminated; token_lens holds the byte counts */
    uint32_t *token_lens;
    float *scores;           /* n_tokens, or NULL (gpt2 vocabularies have none) */
    int32_t *token_types;    /* n_tokens, enum hfq_token_type */
    int64_t n_merges;
    char **merges;           /* "left right" (split at the first space after byte 0) */
    int32_t bos_id, eos_id, unk_id, pad_id, sep_id;   /* -1 when absent */
    bool add_bos, add_eos, add_space_prefix;
    char *chat_template;     /* NULL when absent */
} hfq_vocab;

/* How a SentencePiece vocabulary (tokenizer.model) takes the added tokens
 * of the other files, after the model class of convert_hf_to_gguf.py:
 *   LLAMA (_create_vocab_sentencepiece): added_tokens.json, then
 *     tokenizer_config.json's added_tokens_decoder, CONTROL when "special" or
 *     shaped like a control token (<|...|>, <pad>, ...), U+2581 -> ' ' in the
 *     others;
 *   PHI3 (Phi3MiniModel.set_vocab): added_tokens.json, then
 *     added_tokens_decoder, then tokenizer.json's added_tokens, each taken as
 *     written, CONTROL exactly when "special"; and a tokenizer_config.json
 *     naming tokenizer_class "GPT2Tokenizer" (Phi-4) means tokenizer.json's
 *     byte-level BPE even beside a tokenizer.model;
 *   GEMMA (Gemma*Model.set_vocab): LLAMA's, and add_space_prefix false
 *     whatever tokenizer.model says. */
typedef enum hfq_vocab_spm_rules { HFQ_VOCAB_SPM_LLAMA, HFQ_VOCAB_SPM_PHI3, HFQ_VOCAB_SPM_GEMMA } hfq_vocab_spm_rules;

/* hfq_vocab_from_dir_as with the LLAMA rules. */
hfq_vocab *hfq_vocab_from_dir(const char *dir, hfq_error *err);
hfq_vocab *hfq_vocab_from_dir_as(const char *dir, hfq_vocab_spm_rules rules, hfq_error *err);
hfq_vocab *hfq_vocab_from_gguf(const gguf_file *f, hfq_error *err);
int hfq_vocab_to_gguf(const hfq_vocab *v, gguf_writer *w, hfq_error *err);
void hfq_vocab_free(hfq_vocab *v);

/* GGUF keys (llama.cpp's names; "seperator" is spelled as llama.cpp does). */
#define HFQ_KEY_TOK_MODEL "tokenizer.ggml.model"
#define HFQ_KEY_TOK_PRE "tokenizer.ggml.pre"
#define HFQ_KEY_TOKENS "tokenizer.ggml.tokens"
#define HFQ_KEY_SCORES "tokenizer.ggml.scores"
#define HFQ_KEY_TOKEN_TYPE "tokenizer.ggml.token_type"
#define HFQ_KEY_MERGES "tokenizer.ggml.merges"
#define HFQ_KEY_BOS_ID "tokenizer.ggml.bos_token_id"
#define HFQ_KEY_EOS_ID "tokenizer.ggml.eos_token_id"
#define HFQ_KEY_UNK_ID "tokenizer.ggml.unknown_token_id"
#define HFQ_KEY_PAD_ID "tokenizer.ggml.padding_token_id"
#define HFQ_KEY_SEP_ID "tokenizer.ggml.seperator_token_id"
#define HFQ_KEY_ADD_BOS "tokenizer.ggml.add_bos_token"
#define HFQ_KEY_ADD_EOS "tokenizer.ggml.add_eos_token"
#define HFQ_KEY_ADD_SPACE_PREFIX "tokenizer.ggml.add_space_prefix"
#define HFQ_KEY_CHAT_TEMPLATE "tokenizer.chat_template"

/* The Split regexes of Llama 3's and Qwen2's tokenizer.json (llama-bpe, qwen2). */
extern const char HFQ_LLAMA3_REGEX[];
extern const char HFQ_QWEN2_REGEX[];

/* The special-token id fields (int32_t inside hfq_vocab) and their keys. */
typedef struct hfq_vocab_id_key {
    const char *key;
    size_t offset;
} hfq_vocab_id_key;
#define HFQ_VOCAB_N_ID_KEYS 5
extern const hfq_vocab_id_key hfq_vocab_id_keys[HFQ_VOCAB_N_ID_KEYS];

/* ---- building blocks for the loaders ---- */

/* An empty vocabulary (all ids -1) with source, model and pre copied. */
hfq_vocab *hfq_vocab_new(const char *source, const char *model, const char *pre, hfq_error *err);
/* Sets the token count (all tokens empty, type UNUSED, score 0); scores are
 * allocated when with_scores. Only on an empty vocabulary. */
int hfq_vocab_resize(hfq_vocab *v, int64_t n_tokens, bool with_scores, hfq_error *err);
/* Sets token id's text (copied; len bytes) and type. */
int hfq_vocab_set_token(hfq_vocab *v, int64_t id, const char *text, size_t len, int32_t type,
                        hfq_error *err);
/* Appends a merge "left right" (copied). */
int hfq_vocab_add_merge(hfq_vocab *v, const char *text, size_t len, hfq_error *err);
/* Checks the invariants every loader guarantees: ids in range, types valid,
 * non-empty unique token texts, merges well-formed. */
int hfq_vocab_validate(const hfq_vocab *v, hfq_error *err);

#endif
