/* libFuzzer target for the SentencePiece model reader (spm_proto.h), then
 * the vocabulary and tokenizer built from it: any bytes must be refused with a
 * one-line error naming the file, or give pieces that are non-empty, valid
 * UTF-8 (NUL bytes included: lengths are kept) and NUL-terminated, and (when
 * the folder loader accepts them) a vocabulary that tokenizes (fuzz_vocab.h).
 * Built only by tests/fuzz/build.sh. */
#include <stdint.h>

#include "src/tokenizer/spm_proto.h"
#include "src/tokenizer/unicode.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char name[] = "tokenizer.model";
    hfq_spm_model m;
    hfq_error err = {{0}};
    if (hfq_spm_parse(data, size, name, &m, &err) != 0) {
        fuzz_check_error(err.msg, name);
        return 0;
    }
    for (int64_t i = 0; i < m.n_pieces; i++) {
        const hfq_spm_piece *p = &m.pieces[i];
        if (!p->len || p->text[p->len] != '\0') abort();
        for (size_t k = 0, step; k < p->len; k += step)
            if (!(step = hfq_utf8_valid_len(p->text + k, p->len - k))) abort();
    }
    hfq_spm_free(&m);
    char path[320];
    fuzz_put(name, data, size, path, sizeof path);
    fuzz_vocab_from_fuzz_dir();
    return 0;
}
