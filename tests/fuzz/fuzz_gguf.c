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
#include "tests/fuzz/fuzz_vocab.h"

static void walk(const gguf_file *f) {
    hfq_error err;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        int64_t iv;
        uint64_t uv, len;
        double dv;
        bool bv;
        (void)gguf_get_int(f, i, &iv, &err);
        (void)gguf_get_uint64(f, i, &uv, &err);
        (void)gguf_get_float(f, i, &dv, &err);
        (void)gguf_get_bool(f, i, &bv, &err);
        const char *s = gguf_get_str(f, i, &len, &err);
        if (s && strlen(s) > len) abort();
        const void *v = gguf_get_val_data(f, i);
        if (v) memcpy(&uv, v, gguf_vtype_size(gguf_kv_type(f, i)));
        int64_t n = gguf_arr_n(f, i);
        const unsigned char *d = gguf_arr_data(f, i);
        size_t esz = gguf_vtype_size(gguf_arr_type(f, i));
        for (int64_t j = 0; j < n; j++) {
            if (d) memcpy(&uv, d + (size_t)j * esz, esz);
            else if (!gguf_arr_str(f, i, j, &len)) abort();
        }
        if (gguf_find_key(f, gguf_kv_key(f, i)) != i) abort();
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        uint64_t h;
        if (gguf_find_tensor(f, t->name) != t) abort();
        (void)gguf_tensor_hash(t);
        (void)gguf_stored_hash(f, i, &h, &err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[320];
    fuzz_put_memfd(data, size, path, sizeof path);
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    if (f) {
        walk(f);
        hfq_vocab *v = hfq_vocab_from_gguf(f, &err);
        if (v) fuzz_use_vocab(v);
        else fuzz_check_error(err.msg, NULL);
        hfq_vocab_free(v);
    } else if (strncmp(err.msg, path, strlen(path)) != 0) abort();
    else fuzz_check_error(err.msg, path);
    gguf_close(f);
    return 0;
}
