/* libFuzzer target for sharded safetensors checkpoints: the input is
 * model.safetensors.index.json in a folder that also holds two small valid
 * shards (and the index itself, which a hostile index may name as a shard).
 * Any index must be refused with a one-line error naming the folder's files,
 * or agree exactly with the shards. Built only by tests/fuzz/build.sh. */
#include <stdint.h>

#include "formats/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

static int fill(void *ctx, int64_t i, void *buf, uint64_t nbytes, hfq_error *err) {
    (void)ctx;
    (void)err;
    memset(buf, (int)i + 1, nbytes);
    return 0;
}

static void write_shards(void) {
    static const st_write_tensor a[] = {
        {.name = "a", .dtype = ST_F32, .n_dims = 2, .shape = {2, 3}},
        {.name = "b", .dtype = ST_BF16, .n_dims = 1, .shape = {4}},
    };
    static const st_write_tensor b[] = {
        {.name = "c", .dtype = ST_F16, .n_dims = 1, .shape = {8}},
    };
    char p[320];
    hfq_error err;
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", fuzz_dir());
    if (st_write_file(p, a, 2, NULL, 0, fill, NULL, &err)) abort();
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", fuzz_dir());
    if (st_write_file(p, b, 1, NULL, 0, fill, NULL, &err)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        write_shards();
        ready = 1;
    }
    char path[320];
    fuzz_put("model.safetensors.index.json", data, size, path, sizeof path);
    hfq_error err = {{0}};
    st_model *m = st_open_dir(fuzz_dir(), &err);
    if (!m) {
        fuzz_check_error(err.msg, fuzz_dir());
        return 0;
    }
    volatile unsigned char sink = 0;
    for (int64_t i = 0; i < st_n_tensors(m); i++) {
        const st_tensor *t = st_tensor_at(m, i);
        if (st_find(m, t->name) != t || t->shard < 0 || t->shard >= st_n_shards(m)) abort();
        if (t->nbytes) sink ^= ((const unsigned char *)st_data(m, t))[t->nbytes - 1];
    }
    (void)sink;
    st_close(m);
    return 0;
}
