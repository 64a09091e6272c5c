/* libFuzzer target for the safetensors reader: any file must be refused with
 * a one-line error naming it, or opened into tensors whose every byte lies
 * inside the mapping. Built only by tests/fuzz/build.sh. */
#include <stdint.h>

#include "formats/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[320];
    fuzz_put_memfd(data, size, path, sizeof path);
    hfq_error err = {{0}};
    st_model *m = st_open_file(path, &err);
    if (!m) {
        fuzz_check_error(err.msg, path);
        return 0;
    }
    volatile unsigned char sink = 0;
    for (int64_t i = 0; i < st_n_tensors(m); i++) {
        const st_tensor *t = st_tensor_at(m, i);
        if (st_find(m, t->name) != t || t->shard != 0) abort();
        if (t->offset < 8 || t->offset + t->nbytes > (uint64_t)size) abort();
        if (t->nbytes) {
            const unsigned char *p = st_data(m, t);
            sink ^= p[0];
            sink ^= p[t->nbytes - 1];
        }
        (void)st_metadata_get(m, t->name);
    }
    (void)sink;
    st_close(m);
    return 0;
}
