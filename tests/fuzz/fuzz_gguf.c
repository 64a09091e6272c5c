/* libFuzzer target for the GGUF reader: any input must be refused with a
 * one-line error or parsed into something every accessor can walk safely.
 * Built only by tests/fuzz/build.sh (clang), never by the default build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/gguf.h"

static char path[64];

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

static void remove_input(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/fuzz_gguf_%d.gguf", (int)getpid());
        atexit(remove_input);
    }
    FILE *fp = fopen(path, "wb");
    if (!fp) return 0;
    if (size) fwrite(data, 1, size, fp);
    fclose(fp);
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    if (f) walk(f);
    else if (strchr(err.msg, '\n') || strncmp(err.msg, path, strlen(path)) != 0) abort();
    gguf_close(f);
    return 0;
}
