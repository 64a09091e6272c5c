/* GGUF writer -> reader round trip: every value type, block-type tensors, odd
 * alignments, key replacement and copying, stored hashes, determinism, and
 * writer failures that must leave no file behind. */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "formats/ggml_type.h"
#include "formats/gguf.h"

static char tmpdir[] = "/tmp/hfq_gguf_XXXXXX";

static const char *tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, fp) != *n) *n = 0;
    fclose(fp);
    return b;
}

/* ---- the sample content ---- */

typedef struct sample_tensor {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
} sample_tensor;

static const sample_tensor tensors[] = {
    {"tok_embd.weight", GT_F32, 2, {7, 3}},        /* 84 bytes: needs padding */
    {"norm.weight", GT_F16, 1, {5}},
    {"blk.0.attn_q.weight", GT_Q8_0, 2, {64, 2}},  /* 4 blocks of 34 bytes */
    {"empty", GT_F32, 2, {0, 4}},                   /* 0 bytes */
    {"blk.0.ffn_down.weight", GT_Q4_K, 3, {256, 3, 2}},
    {"one", GT_I8, 1, {1}},
};
#define N_TENSORS ((int64_t)(sizeof tensors / sizeof tensors[0]))

static uint64_t expected_nbytes(const sample_tensor *t) {
    const ggml_type_info *ti = ggml_type_get(t->type);
    uint64_t n = (uint64_t)(t->ne[0] / ti->block_size * ti->type_size);
    for (int d = 1; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
    return n;
}

static void fill(unsigned char *p, uint64_t n, int64_t tensor) {
    for (uint64_t k = 0; k < n; k++) p[k] = (unsigned char)(tensor * 37 + k * 11 + (k >> 8));
}

static const uint8_t u8s[] = {0, 1, 255};
static const int8_t i8s[] = {-128, 0, 127};
static const uint16_t u16s[] = {0, 65535};
static const int16_t i16s[] = {-32768, 32767};
static const uint32_t u32s[] = {0, 4294967295u, 7};
static const int32_t i32s[] = {INT32_MIN, -1, INT32_MAX};
static const float f32s[] = {-1.5f, 0.1f, 3.4e38f};
static const bool bools[] = {true, false, true};
static const uint64_t u64s[] = {UINT64_MAX, 0};
static const int64_t i64s[] = {INT64_MIN, INT64_MAX};
static const double f64s[] = {1e300, -0.0, 0.1};
static const char *const strs[] = {"", "a", "h\xc3\xa9llo \xe2\x9c\x93", "tab\there"};
static const char *const utf8 = "w\xc3\xb6rld \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac";

static void set_metadata(gguf_writer *w, uint32_t alignment) {
    CHECK(gguf_set_u32(w, "replace.me", 1) == 0);  /* replaced below, keeps its place */
    CHECK(gguf_set_u8(w, "s.u8", 255) == 0);
    CHECK(gguf_set_i8(w, "s.i8", -128) == 0);
    CHECK(gguf_set_u16(w, "s.u16", 65535) == 0);
    CHECK(gguf_set_i16(w, "s.i16", -32768) == 0);
    CHECK(gguf_set_u32(w, "s.u32", 4294967295u) == 0);
    CHECK(gguf_set_i32(w, "s.i32", INT32_MIN) == 0);
    CHECK(gguf_set_f32(w, "s.f32", -1.5f) == 0);
    CHECK(gguf_set_bool(w, "s.bool", true) == 0);
    CHECK(gguf_set_str(w, "s.str", utf8) == 0);
    CHECK(gguf_set_u64(w, "s.u64", UINT64_MAX) == 0);
    CHECK(gguf_set_i64(w, "s.i64", INT64_MIN) == 0);
    CHECK(gguf_set_f64(w, "s.f64", 1e300) == 0);
    CHECK(gguf_set_str(w, "s.empty", "") == 0);
    CHECK(gguf_set_arr(w, "a.u8", GGUF_VT_UINT8, u8s, 3) == 0);
    CHECK(gguf_set_arr(w, "a.i8", GGUF_VT_INT8, i8s, 3) == 0);
    CHECK(gguf_set_arr(w, "a.u16", GGUF_VT_UINT16, u16s, 2) == 0);
    CHECK(gguf_set_arr(w, "a.i16", GGUF_VT_INT16, i16s, 2) == 0);
    CHECK(gguf_set_arr(w, "a.u32", GGUF_VT_UINT32, u32s, 3) == 0);
    CHECK(gguf_set_arr(w, "a.i32", GGUF_VT_INT32, i32s, 3) == 0);
    CHECK(gguf_set_arr(w, "a.f32", GGUF_VT_FLOAT32, f32s, 3) == 0);
    CHECK(gguf_set_arr(w, "a.bool", GGUF_VT_BOOL, bools, 3) == 0);
    CHECK(gguf_set_arr(w, "a.u64", GGUF_VT_UINT64, u64s, 2) == 0);
    CHECK(gguf_set_arr(w, "a.i64", GGUF_VT_INT64, i64s, 2) == 0);
    CHECK(gguf_set_arr(w, "a.f64", GGUF_VT_FLOAT64, f64s, 3) == 0);
    CHECK(gguf_set_arr(w, "a.empty", GGUF_VT_UINT32, NULL, 0) == 0);
    CHECK(gguf_set_arr_str(w, "a.str", strs, NULL, 4) == 0);
    CHECK(gguf_set_arr_str(w, "a.str_empty", NULL, NULL, 0) == 0);
    CHECK(gguf_set_str(w, "gone", "x") == 0);
    CHECK(gguf_remove_key(w, "gone") == 0);
    CHECK(gguf_remove_key(w, "gone") == -1);
    CHECK(gguf_set_str(w, "replace.me", "now a string") == 0);
    if (alignment != GGUF_DEFAULT_ALIGNMENT) CHECK(gguf_set_u32(w, "general.alignment", alignment) == 0);
}

/* Writes the sample file; the q4_K tensor goes in three uneven pieces. */
static void write_sample(const char *path, uint32_t alignment) {
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    set_metadata(w, alignment);
    for (int64_t i = 0; i < N_TENSORS; i++) {
        const sample_tensor *t = &tensors[i];
        CHECK_MSG(gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err) == i, "%s", err.msg);
        CHECK(gguf_tensor_nbytes(w, i) == expected_nbytes(t));
    }
    CHECK_MSG(gguf_writer_begin(w, path, &err) == 0, "%s", err.msg);
    for (int64_t i = 0; i < N_TENSORS; i++) {
        uint64_t n = expected_nbytes(&tensors[i]);
        unsigned char *data = malloc(n + 1);
        fill(data, n, i);
        if (tensors[i].type == GT_Q4_K) {
            CHECK(gguf_writer_write_data(w, data, 100, &err) == 0);
            CHECK(gguf_writer_write_data(w, data + 100, 0, &err) == 0);
            CHECK(gguf_writer_write_data(w, data + 100, n - 100, &err) == 0);
        } else {
            CHECK_MSG(gguf_writer_write_tensor(w, i, data, &err) == 0, "%s", err.msg);
        }
        free(data);
    }
    CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
}

static int64_t key(const gguf_file *f, const char *k) {
    int64_t i = gguf_find_key(f, k);
    CHECK_MSG(i >= 0, "key %s missing", k);
    return i;
}

static void check_array(const gguf_file *f, const char *k, gguf_vtype t, const void *want, int64_t n) {
    int64_t i = key(f, k);
    CHECK(gguf_kv_type(f, i) == GGUF_VT_ARRAY);
    CHECK_MSG(gguf_arr_type(f, i) == t, "%s", k);
    CHECK_MSG(gguf_arr_n(f, i) == n, "%s", k);
    CHECK_MSG(n == 0 || memcmp(gguf_arr_data(f, i), want, (size_t)n * gguf_vtype_size(t)) == 0, "%s", k);
}

static void check_metadata(const gguf_file *f, const char *hash_key_after) {
    hfq_error err = {{0}};
    int64_t iv;
    uint64_t uv, len;
    double dv;
    bool bv;
    /* replaced in place: still the first key, now a string */
    CHECK(strcmp(gguf_kv_key(f, 0), "replace.me") == 0);
    CHECK(gguf_kv_type(f, 0) == GGUF_VT_STRING);
    CHECK(strcmp(gguf_get_str(f, 0, NULL, &err), "now a string") == 0);
    CHECK(gguf_find_key(f, "gone") == -1);
    CHECK(gguf_find_key(f, "nope") == -1);

    CHECK(gguf_get_uint64(f, key(f, "s.u8"), &uv, &err) == 0 && uv == 255);
    CHECK(gguf_get_int(f, key(f, "s.i8"), &iv, &err) == 0 && iv == -128);
    CHECK(gguf_get_uint64(f, key(f, "s.u16"), &uv, &err) == 0 && uv == 65535);
    CHECK(gguf_get_int(f, key(f, "s.i16"), &iv, &err) == 0 && iv == -32768);
    CHECK(gguf_get_int(f, key(f, "s.u32"), &iv, &err) == 0 && iv == 4294967295);
    CHECK(gguf_get_int(f, key(f, "s.i32"), &iv, &err) == 0 && iv == INT32_MIN);
    CHECK(gguf_get_float(f, key(f, "s.f32"), &dv, &err) == 0 && dv == -1.5);
    CHECK(gguf_get_bool(f, key(f, "s.bool"), &bv, &err) == 0 && bv);
    CHECK(gguf_get_int(f, key(f, "s.bool"), &iv, &err) == 0 && iv == 1);
    CHECK(gguf_get_uint64(f, key(f, "s.u64"), &uv, &err) == 0 && uv == UINT64_MAX);
    CHECK(gguf_get_int(f, key(f, "s.i64"), &iv, &err) == 0 && iv == INT64_MIN);
    CHECK(gguf_get_float(f, key(f, "s.f64"), &dv, &err) == 0 && dv == 1e300);
    const char *s = gguf_get_str(f, key(f, "s.str"), &len, &err);
    CHECK(s && len == strlen(utf8) && strcmp(s, utf8) == 0);
    s = gguf_get_str(f, key(f, "s.empty"), &len, &err);
    CHECK(s && len == 0 && s[0] == '\0');
    CHECK(gguf_get_val_data(f, key(f, "s.str")) == NULL);
    uint16_t raw16;
    memcpy(&raw16, gguf_get_val_data(f, key(f, "s.u16")), 2);
    CHECK(raw16 == 65535);

    /* type mismatches and out-of-range values name the file and key */
    CHECK(gguf_get_int(f, key(f, "s.str"), &iv, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, gguf_path(f));
    CHECK_STR_CONTAINS(err.msg, "key 's.str': has type str, expected an integer");
    CHECK(gguf_get_int(f, key(f, "s.u64"), &iv, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "does not fit int64");
    CHECK(gguf_get_uint64(f, key(f, "s.i8"), &uv, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "value -128 is negative");
    CHECK(gguf_get_float(f, key(f, "s.u8"), &dv, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "expected a float");
    CHECK(gguf_get_bool(f, key(f, "s.u8"), &bv, &err) == -1);
    CHECK(gguf_get_str(f, key(f, "a.str"), &len, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "is an array of str");
    CHECK(gguf_get_int(f, 1 << 20, &iv, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "out of range");

    check_array(f, "a.u8", GGUF_VT_UINT8, u8s, 3);
    check_array(f, "a.i8", GGUF_VT_INT8, i8s, 3);
    check_array(f, "a.u16", GGUF_VT_UINT16, u16s, 2);
    check_array(f, "a.i16", GGUF_VT_INT16, i16s, 2);
    check_array(f, "a.u32", GGUF_VT_UINT32, u32s, 3);
    check_array(f, "a.i32", GGUF_VT_INT32, i32s, 3);
    check_array(f, "a.f32", GGUF_VT_FLOAT32, f32s, 3);
    check_array(f, "a.bool", GGUF_VT_BOOL, bools, 3);
    check_array(f, "a.u64", GGUF_VT_UINT64, u64s, 2);
    check_array(f, "a.i64", GGUF_VT_INT64, i64s, 2);
    check_array(f, "a.f64", GGUF_VT_FLOAT64, f64s, 3);
    check_array(f, "a.empty", GGUF_VT_UINT32, NULL, 0);
    int64_t ia = key(f, "a.str");
    CHECK(gguf_arr_type(f, ia) == GGUF_VT_STRING && gguf_arr_n(f, ia) == 4);
    CHECK(gguf_arr_data(f, ia) == NULL);
    for (int j = 0; j < 4; j++) {
        s = gguf_arr_str(f, ia, j, &len);
        CHECK_MSG(s && len == strlen(strs[j]) && strcmp(s, strs[j]) == 0, "a.str[%d]", j);
    }
    CHECK(gguf_arr_str(f, ia, 4, &len) == NULL);
    CHECK(gguf_arr_str(f, key(f, "a.u8"), 0, &len) == NULL);
    CHECK(gguf_arr_n(f, key(f, "a.str_empty")) == 0);
    CHECK(gguf_arr_n(f, key(f, "s.u8")) == -1 && gguf_arr_type(f, key(f, "s.u8")) == GGUF_VT_COUNT);

    /* the hash key sits where it was first set (or at the end) */
    int64_t ih = key(f, GGUF_KEY_TENSOR_HASHES);
    CHECK(strcmp(gguf_kv_key(f, ih - 1), hash_key_after) == 0);
}

static void check_tensors(const gguf_file *f, uint32_t alignment) {
    hfq_error err = {{0}};
    CHECK(gguf_alignment(f) == alignment);
    CHECK(gguf_data_offset(f) % alignment == 0);
    CHECK(gguf_n_tensors(f) == N_TENSORS);
    uint64_t offset = 0;
    for (int64_t i = 0; i < N_TENSORS; i++) {
        const sample_tensor *want = &tensors[i];
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        CHECK(t && strcmp(t->name, want->name) == 0);
        CHECK(gguf_find_tensor(f, want->name) == t);
        CHECK(t->type == want->type && t->n_dims == want->n_dims);
        for (int d = 0; d < 4; d++) CHECK(t->ne[d] == (d < want->n_dims ? want->ne[d] : 1));
        CHECK(t->nbytes == expected_nbytes(want));
        CHECK_MSG(t->offset == offset, "%s at %llu, expected %llu", t->name, (unsigned long long)t->offset,
                  (unsigned long long)offset);
        unsigned char *data = malloc(t->nbytes + 1);
        fill(data, t->nbytes, i);
        CHECK_MSG(memcmp(t->data, data, t->nbytes) == 0, "%s data", t->name);
        uint64_t stored = 0;
        CHECK(gguf_stored_hash(f, i, &stored, &err) == 1);
        CHECK_MSG(stored == XXH3_64bits(data, t->nbytes), "%s hash", t->name);
        CHECK(gguf_tensor_hash(t) == stored);
        free(data);
        offset += (t->nbytes + alignment - 1) / alignment * alignment;
    }
    CHECK(gguf_find_tensor(f, "missing") == NULL);
    CHECK(gguf_tensor_at(f, N_TENSORS) == NULL);
    /* the last tensor is padded too, as llama.cpp and gguf-py write it */
    CHECK(gguf_file_size(f) == gguf_data_offset(f) + offset);
}

/* Header fields at their fixed offsets, read without the reader. */
static void check_raw_header(const char *path, int64_t n_kv) {
    size_t n;
    unsigned char *b = read_all(path, &n);
    CHECK(b && n > 24);
    uint32_t version;
    int64_t nt, nkv;
    memcpy(&version, b + 4, 4);
    memcpy(&nt, b + 8, 8);
    memcpy(&nkv, b + 16, 8);
    CHECK(memcmp(b, "GGUF", 4) == 0 && version == 3 && nt == N_TENSORS && nkv == n_kv);
    /* first key: u64 length 10, "replace.me", type STRING (8) */
    uint64_t klen;
    uint32_t type;
    memcpy(&klen, b + 24, 8);
    memcpy(&type, b + 42, 4);
    CHECK(klen == 10 && memcmp(b + 32, "replace.me", 10) == 0 && type == GGUF_VT_STRING);
    free(b);
}

static void test_round_trip(uint32_t alignment) {
    char path[256], path2[256];
    tmp_path(path, sizeof path, "rt.gguf");
    tmp_path(path2, sizeof path2, "rt2.gguf");
    write_sample(path, alignment);
    write_sample(path2, alignment);
    CHECK(count_entries(tmpdir) == 2);  /* no temporary files left */

    size_t n1, n2;
    unsigned char *b1 = read_all(path, &n1), *b2 = read_all(path2, &n2);
    CHECK_MSG(n1 == n2 && memcmp(b1, b2, n1) == 0, "output is not deterministic");
    free(b1);
    free(b2);

    hfq_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    CHECK_MSG(f != NULL, "%s", err.msg);
    if (!f) return;
    CHECK(gguf_version(f) == 3);
    const char *last = alignment != GGUF_DEFAULT_ALIGNMENT ? "general.alignment" : "replace.me";
    /* keys: 28 kept, the hash key (+ general.alignment) */
    int64_t n_kv = 29 + (alignment != GGUF_DEFAULT_ALIGNMENT);
    CHECK_MSG(gguf_n_kv(f) == n_kv, "%lld keys", (long long)gguf_n_kv(f));
    check_raw_header(path, n_kv);
    check_metadata(f, alignment != GGUF_DEFAULT_ALIGNMENT ? last : "a.str_empty");
    check_tensors(f, alignment);

    /* released pages read back the same bytes (faulted in from the file) */
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        unsigned char *copy = malloc(t->nbytes + 1);
        memcpy(copy, t->data, t->nbytes);
        gguf_release(f, t->data, t->nbytes);
        gguf_release(f, (const char *)t->data + t->nbytes / 2, UINT64_MAX); /* clamped to the mapping */
        CHECK_MSG(memcmp(copy, t->data, t->nbytes) == 0, "tensor %s changed after gguf_release", t->name);
        free(copy);
    }
    gguf_release(f, "not in the mapping", 4); /* ignored */

    /* copy every key into a new file with one tensor: values and types survive,
     * the copied hash key is rewritten in place for the new tensor table */
    tmp_path(path2, sizeof path2, "copy.gguf");
    gguf_writer *w = gguf_writer_new();
    for (int64_t i = 0; i < gguf_n_kv(f); i++) CHECK(gguf_copy_kv(w, f, i) == 0);
    const gguf_tensor_info *src = gguf_tensor_at(f, 2);
    CHECK(gguf_add_tensor(w, src->name, src->type, src->n_dims, src->ne, &err) == 0);
    CHECK_MSG(gguf_writer_begin(w, path2, &err) == 0, "%s", err.msg);
    CHECK(gguf_writer_write_tensor(w, 0, src->data, &err) == 0);
    CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    gguf_file *g = gguf_open(path2, &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    if (g) {
        CHECK(gguf_n_kv(g) == gguf_n_kv(f));
        for (int64_t i = 0; i < gguf_n_kv(f); i++) {
            CHECK(strcmp(gguf_kv_key(g, i), gguf_kv_key(f, i)) == 0);
            CHECK(gguf_kv_type(g, i) == gguf_kv_type(f, i));
        }
        check_metadata(g, alignment != GGUF_DEFAULT_ALIGNMENT ? last : "a.str_empty");
        CHECK(gguf_alignment(g) == alignment);
        CHECK(gguf_arr_n(g, key(g, GGUF_KEY_TENSOR_HASHES)) == 1);
        uint64_t h;
        CHECK(gguf_stored_hash(g, 0, &h, &err) == 1 && h == XXH3_64bits(src->data, src->nbytes));
        gguf_close(g);
    }
    gguf_close(f);
    unlink(path);
    unlink(path2);
    tmp_path(path2, sizeof path2, "rt2.gguf");
    unlink(path2);
}

/* Metadata only: no hash key, readable, data section still aligned. */
static void test_no_tensors(void) {
    char path[256];
    tmp_path(path, sizeof path, "kv.gguf");
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    CHECK(gguf_set_str(w, "general.name", "x") == 0);
    CHECK(gguf_set_arr(w, GGUF_KEY_TENSOR_HASHES, GGUF_VT_UINT64, (uint64_t[]){1}, 1) == 0);
    CHECK(gguf_writer_begin(w, path, &err) == 0);
    CHECK(gguf_writer_finish(w, &err) == 0);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, &err);
    CHECK_MSG(f != NULL, "%s", err.msg);
    if (f) {
        CHECK(gguf_n_kv(f) == 1 && gguf_n_tensors(f) == 0);
        CHECK(gguf_find_key(f, GGUF_KEY_TENSOR_HASHES) == -1);
        uint64_t h;
        CHECK(gguf_stored_hash(f, 0, &h, &err) == 0);
        CHECK(gguf_file_size(f) == gguf_data_offset(f) && gguf_data_offset(f) % 32 == 0);
        gguf_close(f);
    }
    unlink(path);
}

/* Starts a writer with two f32 tensors of 4 and 2 elements. */
static gguf_writer *two_tensor_writer(const char *path, hfq_error *err) {
    gguf_writer *w = gguf_writer_new();
    CHECK(gguf_add_tensor(w, "a", GT_F32, 1, (int64_t[]){4}, err) == 0);
    CHECK(gguf_add_tensor(w, "b", GT_F32, 1, (int64_t[]){2}, err) == 1);
    CHECK_MSG(gguf_writer_begin(w, path, err) == 0, "%s", err->msg);
    return w;
}

static void test_writer_failures(void) {
    char path[256], bad[300];
    tmp_path(path, sizeof path, "out.gguf");
    hfq_error err = {{0}};
    const float data[4] = {1, 2, 3, 4};
    const int64_t ne33[] = {33}, ne5[] = {1, 1, 1, 1, 1}, neg[] = {-1}, big[] = {INT64_MAX / 2, 4};

    /* an existing destination survives every failure below */
    FILE *fp = fopen(path, "wb");
    fputs("old", fp);
    fclose(fp);

    /* missing folder: begin fails naming the path */
    snprintf(bad, sizeof bad, "%s/missing/out.gguf", tmpdir);
    gguf_writer *w = gguf_writer_new();
    CHECK(gguf_writer_begin(w, bad, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, bad);
    gguf_writer_free(w);

    /* the destination is a folder: the final rename fails, nothing is left */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/folder.gguf", tmpdir);
    CHECK(mkdir(sub, 0755) == 0);
    w = two_tensor_writer(sub, &err);
    CHECK(gguf_writer_write_tensor(w, 0, data, &err) == 0 && gguf_writer_write_tensor(w, 1, data, &err) == 0);
    CHECK(gguf_writer_finish(w, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "rename failed");
    CHECK(gguf_writer_finish(w, &err) == -1);
    gguf_writer_free(w);
    CHECK(count_entries(tmpdir) == 2);
    rmdir(sub);

    /* too many bytes for a tensor: error, temporary removed, later calls fail */
    w = two_tensor_writer(path, &err);
    CHECK(count_entries(tmpdir) == 2);
    CHECK(gguf_writer_write_data(w, data, 12, &err) == 0);
    CHECK(gguf_writer_write_data(w, data, 8, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "tensor 'a': 20 bytes written, more than its size 16");
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK(count_entries(tmpdir) == 1);
    CHECK(gguf_writer_finish(w, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "more than its size");
    gguf_writer_free(w);

    /* a tensor left incomplete: finish fails */
    w = two_tensor_writer(path, &err);
    CHECK(gguf_writer_write_tensor(w, 0, data, &err) == 0);
    CHECK(gguf_writer_write_data(w, data, 4, &err) == 0);
    CHECK(gguf_writer_finish(w, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "tensor 'b': incomplete: 4 of 8 bytes written");
    CHECK(count_entries(tmpdir) == 1);
    gguf_writer_free(w);

    /* out of order */
    w = two_tensor_writer(path, &err);
    CHECK(gguf_writer_write_tensor(w, 1, data, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "tensor 'b': written out of order (next: a)");
    CHECK(count_entries(tmpdir) == 1);
    gguf_writer_free(w);

    /* free before finish removes the temporary */
    w = two_tensor_writer(path, &err);
    CHECK(gguf_writer_write_tensor(w, 0, data, &err) == 0);
    CHECK(count_entries(tmpdir) == 2);
    gguf_writer_free(w);
    CHECK(count_entries(tmpdir) == 1);

    /* metadata changes after begin fail the writer */
    w = two_tensor_writer(path, &err);
    CHECK(gguf_set_u32(w, "late", 1) == -1);
    CHECK(count_entries(tmpdir) == 1);
    CHECK(gguf_writer_write_tensor(w, 0, data, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "key 'late': set after gguf_writer_begin");
    gguf_writer_free(w);

    /* bad setters are reported by begin */
    w = gguf_writer_new();
    CHECK(gguf_set_u32(w, "", 1) == -1);
    CHECK(gguf_set_u32(w, "fine", 1) == 0);
    CHECK(gguf_writer_begin(w, path, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "key is empty");
    CHECK_STR_CONTAINS(err.msg, path);
    gguf_writer_free(w);
    w = gguf_writer_new();
    CHECK(gguf_set_arr(w, "k", GGUF_VT_STRING, NULL, 0) == -1);
    CHECK(gguf_set_arr(w, "k2", GGUF_VT_UINT8, NULL, -1) == -1);
    CHECK(gguf_writer_begin(w, path, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "key 'k': gguf_set_arr needs a numeric element type, not str");
    gguf_writer_free(w);

    /* alignment must be a u32 power of two */
    w = gguf_writer_new();
    CHECK(gguf_set_i32(w, "general.alignment", 32) == 0);
    CHECK(gguf_writer_begin(w, path, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "key 'general.alignment': has type i32, expected u32");
    gguf_writer_free(w);
    w = gguf_writer_new();
    CHECK(gguf_set_u32(w, "general.alignment", 48) == 0);
    CHECK(gguf_writer_begin(w, path, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "alignment 48 is not a power of two");
    gguf_writer_free(w);

    /* tensor declarations */
    w = gguf_writer_new();
    CHECK(gguf_add_tensor(w, "q", GT_Q8_0, 1, ne33, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "tensor 'q': ne[0] = 33 is not a multiple of the q8_0 block size 32");
    CHECK(gguf_add_tensor(w, "d", GT_F32, 5, ne5, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "n_dims 5 is outside 1..4");
    CHECK(gguf_add_tensor(w, "d", GT_F32, 0, ne5, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "n_dims 0 is outside 1..4");
    CHECK(gguf_add_tensor(w, "n", GT_F32, 1, neg, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "ne[0] = -1 is negative");
    CHECK(gguf_add_tensor(w, "o", GT_F32, 2, big, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "overflows");
    CHECK(gguf_add_tensor(w, "r", 4, 1, ne33, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "unknown ggml type 4");
    CHECK(gguf_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123", GT_F32, 1,
                          ne33, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "longer than 63");
    CHECK(gguf_add_tensor(w, "", GT_F32, 1, ne33, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "tensor name is empty");
    CHECK(gguf_add_tensor(w, "012345678901234567890123456789012345678901234567890123456789012", GT_F32, 1,
                          ne33, &err) == 0);
    CHECK(gguf_add_tensor(w, "x", GT_F32, 1, ne33, &err) == 1);
    CHECK(gguf_add_tensor(w, "x", GT_F16, 1, ne33, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "tensor 'x': duplicate tensor name");
    gguf_writer_free(w);

    size_t n;
    unsigned char *old = read_all(path, &n);
    CHECK(old && n == 3 && memcmp(old, "old", 3) == 0);
    free(old);
    CHECK(count_entries(tmpdir) == 1);
    unlink(path);
}

/* Many tensors: the name table grows and still finds duplicates. */
static void test_many_tensors(void) {
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    char name[32];
    const int64_t ne[] = {1};
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "t.%d", i);
        CHECK(gguf_add_tensor(w, name, GT_F32, 1, ne, &err) == i);
    }
    for (int i = 0; i < 3000; i += 97) {
        snprintf(name, sizeof name, "t.%d", i);
        CHECK(gguf_add_tensor(w, name, GT_F32, 1, ne, &err) == -1);
    }
    gguf_writer_free(w);
}

/* gguf_writer_finish_temp: a complete file readable at the temporary's path,
 * nothing at the destination, and gguf_writer_free removes it. */
static void test_finish_temp(void) {
    char path[256];
    tmp_path(path, sizeof path, "kept.gguf");
    hfq_error err = {{0}};
    gguf_writer *w = two_tensor_writer(path, &err);
    CHECK(gguf_writer_write_tensor(w, 0, (float[]){1, 2, 3, 4}, &err) == 0);
    CHECK(gguf_writer_finish_temp(w, &err) == NULL); /* b is not written yet */
    gguf_writer_free(w);
    CHECK(count_entries(tmpdir) == 0);
    w = two_tensor_writer(path, &err);
    CHECK(gguf_writer_write_tensor(w, 0, (float[]){1, 2, 3, 4}, &err) == 0);
    CHECK(gguf_writer_write_tensor(w, 1, (float[]){5, 6}, &err) == 0);
    const char *kept = gguf_writer_finish_temp(w, &err);
    CHECK_MSG(kept != NULL, "%s", err.msg);
    CHECK(access(path, F_OK) != 0);
    gguf_file *f = kept ? gguf_open(kept, &err) : NULL;
    CHECK_MSG(f != NULL, "%s", err.msg);
    if (f) {
        const gguf_tensor_info *b = gguf_find_tensor(f, "b");
        uint64_t h;
        CHECK(b && memcmp(b->data, (float[]){5, 6}, 8) == 0);
        CHECK(gguf_stored_hash(f, 1, &h, &err) == 1 && h == gguf_tensor_hash(b));
        gguf_close(f);
    }
    CHECK(gguf_writer_finish(w, &err) == -1); /* no second completion */
    gguf_writer_free(w);
    CHECK(count_entries(tmpdir) == 0);
}

int main(void) {
    CHECK(mkdtemp(tmpdir) != NULL);
    test_finish_temp();
    test_round_trip(GGUF_DEFAULT_ALIGNMENT);
    test_round_trip(64);
    test_round_trip(8);
    test_no_tensors();
    test_writer_failures();
    test_many_tensors();
    CHECK(count_entries(tmpdir) == 0);
    rmdir(tmpdir);
    return check_exit();
}
