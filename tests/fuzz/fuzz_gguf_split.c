/* libFuzzer target for split GGUF (formats/gguf.h): the input is two files
 * back to back, the second starting at the input's second "GGUF" magic (none:
 * an empty second file), written as m-00001-of-00002.gguf and
 * m-00002-of-00002.gguf; opening the first must give something every
 * accessor can walk (fuzz_gguf_walk.h) or a one-line error naming one of the
 * two files. Built only by tests/fuzz/build.sh (clang), never by the default
 * build; replayed on its seeds by the suite. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_gguf_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t cut = size;
    for (size_t i = 4; i + 4 <= size; i++)
        if (memcmp(data + i, "GGUF", 4) == 0) {
            cut = i;
            break;
        }
    char first[320], second[320];
    fuzz_put("m-00001-of-00002.gguf", data, cut, first, sizeof first);
    fuzz_put("m-00002-of-00002.gguf", data + cut, size - cut, second, sizeof second);
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(first, &err);
    if (f) {
        if (gguf_n_files(f) != 1 && gguf_n_files(f) != 2) abort();
        fuzz_gguf_walk(f);
    } else {
        fuzz_check_error(err.msg, strncmp(err.msg, second, strlen(second)) == 0 ? second : first);
    }
    gguf_close(f);
    return 0;
}
