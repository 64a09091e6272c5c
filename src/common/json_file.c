#include "src/common/json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Config and tokenizer files of real models are at most tens of MB. */
#define MAX_JSON_BYTES ((long)512 << 20)

cJSON *hfq_json_load(const char *path, hfq_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        hfq_fail(err, path, "cannot open: %s", strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    cJSON *root = NULL;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        hfq_fail(err, path, "cannot read: %s", strerror(errno));
        goto done;
    }
    if (size > MAX_JSON_BYTES) {
        hfq_fail(err, path, "JSON file is too large (%ld bytes)", size);
        goto done;
    }
    buf = malloc((size_t)size + 1);
    if (!buf) {
        hfq_fail(err, path, "out of memory");
        goto done;
    }
    if (fread(buf, 1, (size_t)size, fp) != (size_t)size) {
        hfq_fail(err, path, "read failed");
        goto done;
    }
    buf[size] = 0;
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(buf, (size_t)size, &end, 0);
    if (!root) {
        long at = end ? (long)(end - buf) : -1;
        hfq_fail(err, path, "invalid JSON near byte %ld", at);
    }
done:
    free(buf);
    fclose(fp);
    return root;
}
