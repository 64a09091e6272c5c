/* fuzz_gguf_walk.h - what the GGUF targets do with a file the reader
 * accepted: every accessor on every key and tensor, each answer checked
 * against the others (abort() on a broken promise). */
#ifndef HFQ_TESTS_FUZZ_GGUF_WALK_H
#define HFQ_TESTS_FUZZ_GGUF_WALK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"

static inline void fuzz_gguf_walk(const gguf_file *f) {
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
        if (gguf_find_tensor(f, t->name) != t || t->file < 0 || t->file >= gguf_n_files(f)) abort();
        (void)gguf_tensor_hash(t);
        (void)gguf_stored_hash(f, i, &h, &err);
    }
}

#endif
