/* Test helper for the Python GGUF tests.
 *   gguf_spec_writer write SPEC.json OUT.gguf   writes a GGUF file with our writer
 *   gguf_spec_writer crc FILE.gguf              prints "name crc32" per tensor (our reader)
 * SPEC: {"alignment": 64 (optional),
 *        "kv": [{"key": K, "type": "u32"|...|"str", "value": V},
 *               {"key": K, "type": "arr", "elem_type": T, "value": [V, ...]}],
 *        "tensors": [{"name": N, "type": "q4_K", "ne": [..], "seed": S}]}
 * Numbers and bools are given as strings (exact 64-bit values); tensor byte k
 * is (S*37 + k*11 + (k>>8)) & 255. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"

static gguf_vtype vtype_from_name(const char *name) {
    for (int t = 0; t < GGUF_VT_COUNT; t++)
        if (strcmp(gguf_vtype_name((gguf_vtype)t), name) == 0) return (gguf_vtype)t;
    fprintf(stderr, "unknown value type %s\n", name);
    exit(1);
}

/* One numeric value of type t from its decimal text, stored at out. */
static void parse_number(gguf_vtype t, const char *s, void *out) {
    uint64_t u = strtoull(s, NULL, 10);
    int64_t i = strtoll(s, NULL, 10);
    switch (t) {
    case GGUF_VT_UINT8: *(uint8_t *)out = (uint8_t)u; break;
    case GGUF_VT_INT8: *(int8_t *)out = (int8_t)i; break;
    case GGUF_VT_UINT16: *(uint16_t *)out = (uint16_t)u; break;
    case GGUF_VT_INT16: *(int16_t *)out = (int16_t)i; break;
    case GGUF_VT_UINT32: *(uint32_t *)out = (uint32_t)u; break;
    case GGUF_VT_INT32: *(int32_t *)out = (int32_t)i; break;
    case GGUF_VT_UINT64: *(uint64_t *)out = u; break;
    case GGUF_VT_INT64: *(int64_t *)out = i; break;
    case GGUF_VT_FLOAT32: *(float *)out = strtof(s, NULL); break;
    case GGUF_VT_FLOAT64: *(double *)out = strtod(s, NULL); break;
    case GGUF_VT_BOOL: *(uint8_t *)out = strcmp(s, "true") == 0; break;
    default: fprintf(stderr, "not a number type\n"); exit(1);
    }
}

static void set_kv(gguf_writer *w, const cJSON *kv) {
    const char *key = cJSON_GetObjectItem(kv, "key")->valuestring;
    gguf_vtype t = vtype_from_name(cJSON_GetObjectItem(kv, "type")->valuestring);
    const cJSON *v = cJSON_GetObjectItem(kv, "value");
    if (t == GGUF_VT_STRING) {
        gguf_set_str(w, key, v->valuestring);
        return;
    }
    if (t != GGUF_VT_ARRAY) {
        unsigned char raw[8];
        parse_number(t, v->valuestring, raw);
        switch (t) {
        case GGUF_VT_UINT8: gguf_set_u8(w, key, *(uint8_t *)raw); break;
        case GGUF_VT_INT8: gguf_set_i8(w, key, *(int8_t *)raw); break;
        case GGUF_VT_UINT16: gguf_set_u16(w, key, *(uint16_t *)raw); break;
        case GGUF_VT_INT16: gguf_set_i16(w, key, *(int16_t *)raw); break;
        case GGUF_VT_UINT32: gguf_set_u32(w, key, *(uint32_t *)raw); break;
        case GGUF_VT_INT32: gguf_set_i32(w, key, *(int32_t *)raw); break;
        case GGUF_VT_UINT64: gguf_set_u64(w, key, *(uint64_t *)raw); break;
        case GGUF_VT_INT64: gguf_set_i64(w, key, *(int64_t *)raw); break;
        case GGUF_VT_FLOAT32: gguf_set_f32(w, key, *(float *)raw); break;
        case GGUF_VT_FLOAT64: gguf_set_f64(w, key, *(double *)raw); break;
        default: gguf_set_bool(w, key, raw[0]); break;
        }
        return;
    }
    gguf_vtype et = vtype_from_name(cJSON_GetObjectItem(kv, "elem_type")->valuestring);
    int n = cJSON_GetArraySize(v);
    if (et == GGUF_VT_STRING) {
        const char **strs = calloc((size_t)n + 1, sizeof *strs);
        for (int j = 0; j < n; j++) strs[j] = cJSON_GetArrayItem(v, j)->valuestring;
        gguf_set_arr_str(w, key, strs, NULL, n);
        free(strs);
        return;
    }
    size_t size = gguf_vtype_size(et);
    unsigned char *data = calloc((size_t)n + 1, size);
    for (int j = 0; j < n; j++) parse_number(et, cJSON_GetArrayItem(v, j)->valuestring, data + (size_t)j * size);
    gguf_set_arr(w, key, et, data, n);
    free(data);
}

static char *read_text(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    if (fread(s, 1, (size_t)n, fp) != (size_t)n) s[0] = '\0';
    fclose(fp);
    return s;
}

static int write_spec(const char *spec_path, const char *out) {
    char *text = read_text(spec_path);
    cJSON *spec = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!spec) {
        fprintf(stderr, "%s: cannot parse\n", spec_path);
        return 1;
    }
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(spec, "kv")) set_kv(w, item);
    const cJSON *tensors = cJSON_GetObjectItem(spec, "tensors");
    int rc = 0;
    cJSON_ArrayForEach(item, tensors) {
        int64_t ne[GGUF_MAX_DIMS];
        const cJSON *dims = cJSON_GetObjectItem(item, "ne");
        int n_dims = cJSON_GetArraySize(dims);
        for (int d = 0; d < n_dims && d < GGUF_MAX_DIMS; d++) ne[d] = (int64_t)cJSON_GetArrayItem(dims, d)->valuedouble;
        int type = ggml_type_from_name(cJSON_GetObjectItem(item, "type")->valuestring);
        if (gguf_add_tensor(w, cJSON_GetObjectItem(item, "name")->valuestring, (uint32_t)type, n_dims, ne, &err) < 0)
            rc = 1;
    }
    if (rc == 0) rc = gguf_writer_begin(w, out, &err) != 0;
    int64_t i = 0;
    cJSON_ArrayForEach(item, tensors) {
        if (rc) break;
        uint64_t n = gguf_tensor_nbytes(w, i);
        int seed = cJSON_GetObjectItem(item, "seed")->valueint;
        unsigned char *data = malloc(n + 1);
        for (uint64_t k = 0; k < n; k++) data[k] = (unsigned char)(seed * 37 + k * 11 + (k >> 8));
        rc = gguf_writer_write_tensor(w, i++, data, &err) != 0;
        free(data);
    }
    if (rc == 0) rc = gguf_writer_finish(w, &err) != 0;
    if (rc) fprintf(stderr, "%s\n", err.msg);
    gguf_writer_free(w);
    cJSON_Delete(spec);
    return rc;
}

static int print_crcs(const char *path) {
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    if (!f) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        uLong crc = crc32(0L, Z_NULL, 0);
        for (uint64_t off = 0; off < t->nbytes; off += 1u << 30) {
            uint64_t n = t->nbytes - off < (1u << 30) ? t->nbytes - off : (1u << 30);
            crc = crc32(crc, (const Bytef *)t->data + off, (uInt)n);
        }
        printf("%s %08lx\n", t->name, (unsigned long)crc);
    }
    gguf_close(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "write") == 0) return write_spec(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "crc") == 0) return print_crcs(argv[2]);
    fprintf(stderr, "usage: gguf_spec_writer write SPEC.json OUT.gguf | crc FILE.gguf\n");
    return 2;
}
