/* pretok.h - the regex pre-tokenizers of byte-level BPE tokenizers, as
 * hand-written matchers that agree exactly with the regexes (leftmost
 * alternative wins, greedy quantifiers with backtracking):
 *
 *   LLAMA3 ("llama-bpe", Llama 3):
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *      ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   QWEN2 ("qwen2", Qwen2/Qwen3): the same with \p{N} instead of \p{N}{1,3}.
 *
 * Classes as Hugging Face tokenizers (Oniguruma) see them: \p{L}/\p{N} are the
 * General_Category L and N (all subcategories) of Unicode 16, \s is White_Space, and (?i:) makes
 * 's also match U+017F LATIN SMALL LETTER LONG S. The text must be
 * well-formed UTF-8 (see unicode.h); pieces cover it completely, in order.
 */
#ifndef HFQ_SRC_TOKENIZER_PRETOK_H
#define HFQ_SRC_TOKENIZER_PRETOK_H

#include <stddef.h>

typedef enum hfq_pretok_kind {
    HFQ_PRETOK_LLAMA3,
    HFQ_PRETOK_QWEN2,
} hfq_pretok_kind;

/* Called for each piece text[off .. off+len); a non-zero return stops the split. */
typedef int (*hfq_pretok_emit)(void *ctx, size_t off, size_t len);

/* Splits text[0..len). Returns 0, the first non-zero emit result, or -1 when
 * out of memory. */
int hfq_pretok_split(hfq_pretok_kind kind, const char *text, size_t len, hfq_pretok_emit emit, void *ctx);

#endif
