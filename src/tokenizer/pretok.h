/* pretok.h - the regex pre-tokenizers of byte-level BPE tokenizers, as
 * hand-written matchers that agree exactly with the regexes (leftmost
 * alternative wins, greedy quantifiers with backtracking):
 *
 *   LLAMA3 ("llama-bpe", Llama 3):
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *      ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   QWEN2 ("qwen2", Qwen2/Qwen3): the same with \p{N} instead of \p{N}{1,3}.
 *   GPT2 ("gpt-2", "phi-2", "mpt", "olmo", ...): GPT-2's
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     (llama.cpp's regex ends at \s+(?!\S); its matcher, unicode.cpp's
 *     unicode_regex_split_custom_gpt2, takes a whitespace run the lookahead
 *     refuses whole, which is the \s+ alternative).
 *   GPT2_DIGITS ("smollm", "starcoder", "refact", "command-r", ...): each
 *     \p{N} a piece of its own first (Hugging Face's Digits with
 *     individual_digits, llama.cpp's "\p{N}" split), then GPT2 within the
 *     text between them.
 *
 * Which tokenizer.ggml.pre names take which kind, and llama.cpp's defaults
 * that come with the name (llama-vocab.cpp, llama_vocab::impl::load), are
 * the table behind hfq_pretok_find.
 *
 * Classes as Hugging Face tokenizers (Oniguruma) see them: \p{L}/\p{N} are the
 * General_Category L and N (all subcategories) of Unicode 16, \s is White_Space, and (?i:) makes
 * 's also match U+017F LATIN SMALL LETTER LONG S. The text must be
 * well-formed UTF-8 (see unicode.h); pieces cover it completely, in order.
 */
#ifndef HFQ_SRC_TOKENIZER_PRETOK_H
#define HFQ_SRC_TOKENIZER_PRETOK_H

#include <stdbool.h>
#include <stddef.h>

typedef enum hfq_pretok_kind {
    HFQ_PRETOK_LLAMA3,
    HFQ_PRETOK_QWEN2,
    HFQ_PRETOK_GPT2,
    HFQ_PRETOK_GPT2_DIGITS,
} hfq_pretok_kind;

/* A tokenizer.ggml.pre name: its splitter and what llama.cpp does with it. */
typedef struct hfq_pretok_info {
    const char *name;
    hfq_pretok_kind kind;
    bool ignore_merges;  /* a piece that is a whole token is that token */
    bool nfc;            /* NFC-normalized first (Qwen2's normalizer) */
    bool add_bos;        /* llama.cpp's add_bos where tokenizer.ggml.add_bos_token is absent */
} hfq_pretok_info;

/* The entry for name; NULL when the names we support do not include it.
 * hfq_pretok_names writes them, comma-separated, into out (n bytes, cut
 * where too small). */
const hfq_pretok_info *hfq_pretok_find(const char *name);
void hfq_pretok_names(char *out, size_t n);

/* Called for each piece text[off .. off+len); a non-zero return stops the split. */
typedef int (*hfq_pretok_emit)(void *ctx, size_t off, size_t len);

/* Splits text[0..len). Returns 0, the first non-zero emit result, or -1 when
 * out of memory. */
int hfq_pretok_split(hfq_pretok_kind kind, const char *text, size_t len, hfq_pretok_emit emit, void *ctx);

#endif
