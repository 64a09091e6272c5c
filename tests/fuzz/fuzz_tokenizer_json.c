/* libFuzzer target for the Hugging Face tokenizer folder reader
 * (hfq_vocab_from_dir without tokenizer.model). The input holds up to four
 * files separated by NUL bytes: tokenizer.json, tokenizer_config.json,
 * config.json, chat_template.jinja (a file absent from the input is absent
 * from the folder). Any input must be refused with a one-line error naming the
 * folder's files, or give a valid vocabulary that tokenizes (fuzz_vocab.h).
 * Built only by tests/fuzz/build.sh. */
#include <stdint.h>

#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_vocab.h"

static const char *const FILES[] = {"tokenizer.json", "tokenizer_config.json", "config.json",
                                    "chat_template.jinja"};
#define N_FILES 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t at = 0;   /* start of the next file; size + 1 once the input is used up */
    char path[320];
    for (int i = 0; i < N_FILES; i++) {
        if (at > size || (i > 0 && at == size)) {
            fuzz_drop(FILES[i]);
            continue;
        }
        const uint8_t *nul = memchr(data + at, 0, size - at);
        size_t stop = nul ? (size_t)(nul - data) : size;
        fuzz_put(FILES[i], data + at, stop - at, path, sizeof path);
        at = stop + 1;
    }
    fuzz_vocab_from_fuzz_dir();
    return 0;
}
