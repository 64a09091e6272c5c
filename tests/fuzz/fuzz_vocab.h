/* fuzz_vocab.h - what the vocabulary targets do with a vocabulary a loader
 * accepted: it must pass validation, build a tokenizer (or be refused with a
 * one-line error naming its source), and that tokenizer must encode a mixed
 * text to ids inside the vocabulary and decode them back. */
#ifndef HFQ_TESTS_FUZZ_VOCAB_H
#define HFQ_TESTS_FUZZ_VOCAB_H

#include <stdint.h>

#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/vocab.h"
#include "tests/fuzz/fuzz_common.h"

static inline void fuzz_use_vocab(const hfq_vocab *v) {
    hfq_error err = {{0}};
    if (hfq_vocab_validate(v, &err) != 0) abort();
    hfq_tokenizer *t = hfq_tokenizer_new(v, &err);
    if (!t) {
        fuzz_check_error(err.msg, v->source);
        return;
    }
    static const char text[] = "Hello  world\n\xe2\x96\x81 caf\xc3\xa9 \xff<s></s><|endoftext|> 123 \xe4\xb8\xad";
    int32_t *ids = NULL;
    size_t n = 0;
    if (hfq_tokenize(t, text, sizeof text - 1, HFQ_TOK_ADD_SPECIAL | HFQ_TOK_PARSE_SPECIAL, &ids, &n, &err))
        abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v->n_tokens) abort();
    size_t len;
    char *back = hfq_detokenize(t, ids, n, true, &len, &err);
    if (!back || strlen(back) > len) abort();
    free(back);
    free(ids);
    hfq_tokenizer_free(t);
}

/* Loads the fuzz folder's tokenizer files (hfq_vocab_from_dir) and uses the
 * vocabulary, or checks the refusal names the folder. */
static inline void fuzz_vocab_from_fuzz_dir(void) {
    hfq_error err = {{0}};
    hfq_vocab *v = hfq_vocab_from_dir(fuzz_dir(), &err);
    if (!v) {
        fuzz_check_error(err.msg, fuzz_dir());
        return;
    }
    fuzz_use_vocab(v);
    hfq_vocab_free(v);
}

#endif
