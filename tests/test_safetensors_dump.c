/* test_safetensors_dump - prints what our safetensors reader sees in a model
 * folder or file, as JSON, for tests that compare it with other readers:
 * {"shards": [...], "format": ..., "tensors": [{"name", "dtype", "shape",
 *  "shard", "offset", "nbytes", "checksum"}]} in reader order. checksum is
 * sum(byte[k] * (k % 251 + 1)) mod 2^64 over the tensor's bytes. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "formats/safetensors.h"

static cJSON *raw_u64(uint64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    return cJSON_CreateRaw(text);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_safetensors_dump MODEL_DIR|FILE.safetensors\n");
        return HFQ_EXIT_USAGE;
    }
    struct stat sb;
    hfq_error err = {{0}};
    st_model *m = stat(argv[1], &sb) == 0 && S_ISDIR(sb.st_mode) ? st_open_dir(argv[1], &err)
                                                                 : st_open_file(argv[1], &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *shards = cJSON_AddArrayToObject(root, "shards");
    for (int i = 0; i < st_n_shards(m); i++)
        cJSON_AddItemToArray(shards, cJSON_CreateString(st_shard_path(m, i)));
    const char *format = st_metadata_get(m, "format");
    cJSON_AddItemToObject(root, "format", format ? cJSON_CreateString(format) : cJSON_CreateNull());
    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (int64_t i = 0; i < st_n_tensors(m); i++) {
        const st_tensor *t = st_tensor_at(m, i);
        const unsigned char *p = st_data(m, t);
        uint64_t sum = 0;
        for (uint64_t k = 0; k < t->nbytes; k++) sum += p[k] * (k % 251 + 1);
        st_release(m, t);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", st_dtype_name(t->dtype));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, raw_u64((uint64_t)t->shape[d]));
        cJSON_AddNumberToObject(o, "shard", t->shard);
        cJSON_AddItemToObject(o, "offset", raw_u64(t->offset));
        cJSON_AddItemToObject(o, "nbytes", raw_u64(t->nbytes));
        cJSON_AddItemToObject(o, "checksum", raw_u64(sum));
        cJSON_AddItemToArray(tensors, o);
    }
    char *text = cJSON_PrintUnformatted(root);
    int ok = text && puts(text) >= 0;
    free(text);
    cJSON_Delete(root);
    st_close(m);
    return ok ? HFQ_EXIT_OK : HFQ_EXIT_FAILURE;
}
