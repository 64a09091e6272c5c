/* safetensors_write.c - the safetensors writer (header as the reference writer
 * lays it out: compact JSON, keys in the given order, "__metadata__" first,
 * padded with spaces so the data starts at a multiple of 8). */
#include "formats/safetensors.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/atomic_file.h"

/* Integers as raw JSON text: cJSON would print large ones through a double. */
static int add_int(cJSON *array, uint64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    cJSON *item = cJSON_CreateRaw(text);
    if (item && cJSON_AddItemToArray(array, item)) return 1;
    cJSON_Delete(item);
    return 0;
}

static int add_tensor_entry(cJSON *root, const st_write_tensor *t, uint64_t begin, uint64_t end) {
    cJSON *obj = cJSON_CreateObject();
    int ok = obj && cJSON_AddStringToObject(obj, "dtype", st_dtype_name(t->dtype));
    cJSON *shape = ok ? cJSON_AddArrayToObject(obj, "shape") : NULL;
    ok = shape != NULL;
    for (int d = 0; ok && d < t->n_dims; d++) ok = add_int(shape, (uint64_t)t->shape[d]);
    cJSON *offsets = ok ? cJSON_AddArrayToObject(obj, "data_offsets") : NULL;
    ok = offsets && add_int(offsets, begin) && add_int(offsets, end);
    if (ok && cJSON_AddItemToObject(root, t->name, obj)) return 1;
    cJSON_Delete(obj);
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Rejects what a reader would reject: bad dtype or shape, empty or repeated names. */
static int check_tensors(const char *path, const st_write_tensor *tensors, int64_t n,
                         uint64_t *nbytes, hfq_error *err) {
    const char **names = malloc(sizeof *names * (size_t)(n ? n : 1));
    if (!names) return hfq_fail(err, path, "out of memory");
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        const st_write_tensor *t = &tensors[i];
        int64_t ne;
        names[i] = t->name;
        if (!t->name || !*t->name || strcmp(t->name, "__metadata__") == 0)
            rc = hfq_fail(err, path, "tensor %" PRId64 ": empty or reserved name", i);
        else if ((unsigned)t->dtype >= ST_DTYPE_COUNT || t->n_dims < 0 || t->n_dims > ST_MAX_DIMS ||
                 st_shape_bytes(t->dtype, t->n_dims, t->shape, &ne, &nbytes[i]) != 0)
            rc = hfq_fail(err, path, "tensor '%s': bad dtype or shape", t->name);
    }
    if (rc == 0 && n > 1) {
        qsort(names, (size_t)n, sizeof *names, cmp_name);
        for (int64_t i = 1; i < n && rc == 0; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                rc = hfq_fail(err, path, "tensor '%s': name given twice", names[i]);
    }
    free(names);
    return rc;
}

/* The header: 8-byte little-endian length, then the padded JSON. */
static char *build_header(const char *path, const st_write_tensor *tensors, int64_t n,
                          const uint64_t *nbytes, const char *const *metadata, int n_metadata,
                          size_t *header_size, hfq_error *err) {
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    if (ok && n_metadata > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        ok = meta != NULL;
        for (int i = 0; ok && i < n_metadata; i++) {
            if (cJSON_GetObjectItemCaseSensitive(meta, metadata[2 * i])) {
                cJSON_Delete(root);
                hfq_fail(err, path, "metadata key '%s' given twice", metadata[2 * i]);
                return NULL;
            }
            ok = cJSON_AddStringToObject(meta, metadata[2 * i], metadata[2 * i + 1]) != NULL;
        }
    }
    uint64_t offset = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        ok = add_tensor_entry(root, &tensors[i], offset, offset + nbytes[i]);
        offset += nbytes[i];
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) {
        hfq_fail(err, path, "out of memory");
        return NULL;
    }
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    char *header = malloc(8 + padded);
    if (!header) {
        free(json);
        hfq_fail(err, path, "out of memory");
        return NULL;
    }
    for (int i = 0; i < 8; i++) header[i] = (char)((uint64_t)padded >> (8 * i));
    memcpy(header + 8, json, len);
    memset(header + 8 + len, ' ', padded - len);
    free(json);
    *header_size = 8 + padded;
    return header;
}

int st_write_file(const char *path, const st_write_tensor *tensors, int64_t n_tensors,
                  const char *const *metadata, int n_metadata,
                  st_fill_fn fill, void *ctx, hfq_error *err) {
    if (n_tensors < 0 || n_metadata < 0) return hfq_fail(err, path, "negative count");
    uint64_t *nbytes = malloc(sizeof *nbytes * (size_t)(n_tensors ? n_tensors : 1));
    if (!nbytes) return hfq_fail(err, path, "out of memory");
    size_t header_size = 0;
    char *header = NULL;
    uint64_t largest = 0;
    int rc = check_tensors(path, tensors, n_tensors, nbytes, err);
    if (rc == 0) {
        header = build_header(path, tensors, n_tensors, nbytes, metadata, n_metadata,
                              &header_size, err);
        rc = header ? 0 : -1;
    }
    for (int64_t i = 0; i < n_tensors; i++)
        if (nbytes[i] > largest) largest = nbytes[i];
    void *buf = NULL;
    if (rc == 0 && (largest > SIZE_MAX || !(buf = malloc(largest ? (size_t)largest : 1))))
        rc = hfq_fail(err, path, "out of memory for a %llu-byte tensor", (unsigned long long)largest);
    hfq_atomic_file af;
    if (rc == 0) rc = hfq_atomic_open(&af, path, err);
    if (rc == 0) {
        rc = hfq_atomic_write(&af, header, header_size, err);
        for (int64_t i = 0; i < n_tensors && rc == 0; i++) {
            rc = fill(ctx, i, buf, nbytes[i], err);
            if (rc == 0) rc = hfq_atomic_write(&af, buf, (size_t)nbytes[i], err);
        }
        if (rc == 0) rc = hfq_atomic_commit(&af, err);
        else hfq_atomic_abort(&af);
    }
    free(buf);
    free(header);
    free(nbytes);
    return rc;
}
