/* libFuzzer target for the GGUF reader: any input must be refused with a
 * one-line error or parsed into something every accessor can walk safely;
 * then its tokenizer.* keys must give a vocabulary that tokenizes
 * (fuzz_vocab.h) or a one-line refusal.
 * Built only by tests/fuzz/build.sh (clang), never by the default build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_gguf_walk.h"
#include "tests/fuzz/fuzz_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[320];
    fuzz_put_memfd(data, size, path, sizeof path);
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    if (f) {
        fuzz_gguf_walk(f);
        hfq_vocab *v = hfq_vocab_from_gguf(f, &err);
        if (v) fuzz_use_vocab(v);
        else fuzz_check_error(err.msg, NULL);
        hfq_vocab_free(v);
    } else if (strncmp(err.msg, path, strlen(path)) != 0) abort();
    else fuzz_check_error(err.msg, path);
    gguf_close(f);
    return 0;
}
