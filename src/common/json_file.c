#include "src/common/json_file.h"

#include <stdlib.h>

#include "src/common/read_file.h"

/* Config and tokenizer files of real models are at most tens of MB. */
#define MAX_JSON_BYTES ((size_t)512 << 20)

cJSON *hfq_json_load(const char *path, hfq_error *err) {
    char *buf = NULL;
    size_t len = 0;
    if (hfq_read_file(path, MAX_JSON_BYTES, &buf, &len, err)) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!root) hfq_fail(err, path, "invalid JSON near byte %ld", end ? (long)(end - buf) : -1L);
    free(buf);
    return root;
}
