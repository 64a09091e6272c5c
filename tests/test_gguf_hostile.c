/* Hostile GGUF files, built byte by byte here (not with our writer): each must
 * be refused with a one-line error naming the file, the item and the problem.
 * Then every truncation and many byte corruptions of a good file: refused (or,
 * for a change that leaves a valid file, accepted) without crashing. */
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "formats/ggml_type.h"
#include "formats/gguf.h"

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(buf *b, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    u32(b, 3);
    u64(b, n_tensors);
    u64(b, n_kv);
}
static void kv_u32(buf *b, const char *key, uint32_t v) {
    str(b, key);
    u32(b, 4);  /* UINT32 */
    u32(b, v);
}
static void kv_str(buf *b, const char *key, const char *v) {
    str(b, key);
    u32(b, 8);  /* STRING */
    str(b, v);
}
static void tensor(buf *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type, uint64_t offset) {
    str(b, name);
    u32(b, n_dims);
    put(b, ne, 8 * n_dims);
    u32(b, type);
    u64(b, offset);
}
static void pad(buf *b, size_t align) {
    while (b->n % align) put(b, "", 1);
}
static void zeros(buf *b, size_t n) {
    for (size_t i = 0; i < n; i++) put(b, "\x5a", 1);
}

static const int64_t NE4[] = {4}, NE8[] = {8};

/* A valid file: two keys, f32 [4] at 0 and f32 [8] at 32. */
static void good_file(buf *b) {
    header(b, 2, 2);
    kv_str(b, "general.name", "ok");
    kv_u32(b, "n", 7);
    tensor(b, "t0", 1, NE4, GT_F32, 0);
    tensor(b, "t1", 1, NE8, GT_F32, 32);
    pad(b, 32);
    zeros(b, 64);
}

static char path[256];

/* A new file each time: rewriting one in place makes ext4 flush it to disk
 * on close (auto_da_alloc), which is slow. */
static void save(const buf *b) {
    unlink(path);
    FILE *fp = fopen(path, "wb");
    if (b->n) fwrite(b->p, 1, b->n, fp);
    fclose(fp);
}

/* The file must be refused with a message holding each expected part. */
static void expect_fail(const char *what, buf *b, const char *want1, const char *want2) {
    save(b);
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    CHECK_MSG(f == NULL, "%s: accepted", what);
    gguf_close(f);
    CHECK_MSG(strncmp(err.msg, path, strlen(path)) == 0, "%s: %s", what, err.msg);
    CHECK_MSG(strchr(err.msg, '\n') == NULL, "%s: multi-line error", what);
    CHECK_STR_CONTAINS(err.msg, want1);
    if (want2) CHECK_STR_CONTAINS(err.msg, want2);
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void test_corpus(void) {
    buf b = {0};
    hfq_error err = {{0}};
    const int64_t ne_neg[] = {4, -2}, ne_big[] = {INT64_C(1) << 40, INT64_C(1) << 40}, ne33[] = {33},
                  ne5[] = {1, 1, 1, 1, 1};

    /* the builder itself makes files the reader accepts */
    good_file(&b);
    save(&b);
    gguf_file *f = gguf_open(path, &err);
    CHECK_MSG(f != NULL, "good file: %s", err.msg);
    if (f) {
        CHECK(gguf_n_tensors(f) == 2 && gguf_tensor_at(f, 1)->offset == 32 && gguf_data_offset(f) % 32 == 0);
        gguf_close(f);
    }
    free(b.p);
    b = (buf){0};

    expect_fail("empty file", &b, "truncated: magic", NULL);
    put(&b, "GGUX", 4), u32(&b, 3), u64(&b, 0), u64(&b, 0);
    expect_fail("bad magic", &b, "not a GGUF file (bad magic)", NULL);
    put(&b, "GGUF", 4), u32(&b, 2), u64(&b, 0), u64(&b, 0);
    expect_fail("version 2", &b, "unsupported GGUF version 2", NULL);
    put(&b, "GGUF", 4), u32(&b, 4), u64(&b, 0), u64(&b, 0);
    expect_fail("version 4", &b, "unsupported GGUF version 4", NULL);
    header(&b, UINT64_C(1) << 62, 0);
    expect_fail("huge tensor count", &b, "tensor count 4611686018427387904 is impossible", NULL);
    header(&b, 0, UINT64_MAX);
    expect_fail("key count -1", &b, "key count -1 is impossible", NULL);
    header(&b, 0, 1000), kv_u32(&b, "a", 1);
    expect_fail("key count over file", &b, "key count 1000 is impossible", NULL);
    header(&b, 0, 2), kv_u32(&b, "a", 1);
    zeros(&b, 20);
    expect_fail("key count lies", &b, "key #1", "key length");

    header(&b, 0, 1), u64(&b, 1000), zeros(&b, 20);
    expect_fail("key length lies", &b, "key #0", "key length 1000 exceeds the 20 bytes left");
    header(&b, 0, 1), u64(&b, (UINT64_C(1) << 30) + 1), zeros(&b, 10);
    expect_fail("key over 1 GiB", &b, "key length 1073741825 is over the 1 GiB limit", NULL);
    header(&b, 0, 1), str(&b, "s"), u32(&b, 8), u64(&b, 50), put(&b, "short", 5);
    expect_fail("string length lies", &b, "key 's'", "string value length 50 exceeds the 5 bytes left");
    header(&b, 0, 1), str(&b, ""), u32(&b, 4), u32(&b, 0);
    expect_fail("empty key", &b, "key #0", "key is empty");
    header(&b, 0, 1), u64(&b, 3), put(&b, "a\0b", 3), u32(&b, 4), u32(&b, 0);
    expect_fail("NUL in key", &b, "key #0", "NUL byte");
    header(&b, 0, 1), str(&b, "t"), u32(&b, 13), u32(&b, 0);
    expect_fail("value type 13", &b, "key 't'", "unknown value type 13");
    header(&b, 0, 1), str(&b, "t"), u32(&b, 0x80000000u), u32(&b, 0);
    expect_fail("value type negative", &b, "key 't'", "unknown value type 2147483648");
    header(&b, 0, 1), str(&b, "arr"), u32(&b, 9), u32(&b, 9), u64(&b, 1);
    expect_fail("nested array", &b, "key 'arr'", "nested arrays are not supported");
    header(&b, 0, 1), str(&b, "arr"), u32(&b, 9), u32(&b, 99), u64(&b, 0);
    expect_fail("array element type", &b, "key 'arr'", "unknown array element type 99");
    header(&b, 0, 1), str(&b, "arr"), u32(&b, 9), u32(&b, 4), u64(&b, 1000), u32(&b, 1);
    expect_fail("array count lies", &b, "key 'arr'", "array of 1000 u32 elements exceeds the 4 bytes left");
    header(&b, 0, 1), str(&b, "arr"), u32(&b, 9), u32(&b, 0), u64(&b, UINT64_C(1) << 40);
    expect_fail("array count huge", &b, "key 'arr'", "over the 2^30 limit");
    header(&b, 0, 1), str(&b, "arr"), u32(&b, 9), u32(&b, 8), u64(&b, 2), str(&b, "x"), u64(&b, 99);
    expect_fail("string element lies", &b, "key 'arr'", "string element 1 length 99 exceeds");
    header(&b, 0, 1), str(&b, "v"), u32(&b, 11), u32(&b, 1);
    expect_fail("value truncated", &b, "key 'v'", "truncated: value needs 8 bytes");
    header(&b, 0, 3), kv_u32(&b, "dup", 1), kv_u32(&b, "x", 1), kv_str(&b, "dup", "again");
    expect_fail("duplicate key", &b, "key 'dup'", "duplicate key");

    header(&b, 0, 1), kv_u32(&b, "general.alignment", 48);
    expect_fail("alignment 48", &b, "key 'general.alignment'", "alignment 48 is not a power of two");
    header(&b, 0, 1), kv_u32(&b, "general.alignment", 0);
    expect_fail("alignment 0", &b, "key 'general.alignment'", "alignment 0 is not a power of two");
    header(&b, 0, 1), str(&b, "general.alignment"), u32(&b, 10), u64(&b, 32);
    expect_fail("alignment type", &b, "key 'general.alignment'", "has type u64, expected u32");

    header(&b, 1, 0), tensor(&b, "0123456789012345678901234567890123456789012345678901234567890123", 1, NE4,
                             GT_F32, 0);
    expect_fail("long name", &b, "tensor #0", "tensor name of 64 bytes is longer than 63");
    header(&b, 1, 0), u64(&b, 500), zeros(&b, 40);
    expect_fail("name length lies", &b, "tensor #0", "tensor name length 500 exceeds the 40 bytes left");
    header(&b, 1, 0), tensor(&b, "t", 0, NE4, GT_F32, 0), zeros(&b, 8);
    expect_fail("n_dims 0", &b, "tensor 't'", "n_dims 0 is outside 1..4");
    header(&b, 1, 0), tensor(&b, "t", 5, ne5, GT_F32, 0);
    expect_fail("n_dims 5", &b, "tensor 't'", "n_dims 5 is outside 1..4");
    header(&b, 1, 0), tensor(&b, "t", 2, ne_neg, GT_F32, 0);
    expect_fail("negative ne", &b, "tensor 't'", "ne[1] = -2 is negative");
    header(&b, 1, 0), tensor(&b, "t", 2, ne_big, GT_F32, 0);
    expect_fail("ne overflow", &b, "tensor 't'", "overflows");
    header(&b, 1, 0), tensor(&b, "q", 1, ne33, GT_Q8_0, 0);
    expect_fail("block size", &b, "tensor 'q'", "ne[0] = 33 is not a multiple of the q8_0 block size 32");
    header(&b, 1, 0), tensor(&b, "k", 1, NE8, GT_Q4_K, 0);
    expect_fail("block size K", &b, "tensor 'k'", "not a multiple of the q4_K block size 256");
    header(&b, 1, 0), tensor(&b, "t", 1, NE4, 4, 0);
    expect_fail("retired type", &b, "tensor 't'", "unknown ggml type 4");
    header(&b, 1, 0), tensor(&b, "t", 1, NE4, 1000, 0);
    expect_fail("type out of range", &b, "tensor 't'", "unknown ggml type 1000");
    header(&b, 2, 0), tensor(&b, "t", 1, NE4, GT_F32, 0), tensor(&b, "t", 1, NE4, GT_F32, 32);
    pad(&b, 32), zeros(&b, 64);
    expect_fail("duplicate tensor", &b, "tensor 't'", "duplicate tensor name");

    header(&b, 2, 0), tensor(&b, "t0", 1, NE4, GT_F32, 0), tensor(&b, "t1", 1, NE4, GT_F32, 16);
    pad(&b, 32), zeros(&b, 64);
    expect_fail("unaligned offset", &b, "tensor 't1'", "data offset 16 is not a multiple of the alignment 32");
    header(&b, 2, 0), tensor(&b, "t0", 1, NE4, GT_F32, 0), tensor(&b, "t1", 1, NE4, GT_F32, UINT64_C(1) << 40);
    pad(&b, 32), zeros(&b, 64);
    expect_fail("offset out of file", &b, "tensor 't1'", "data extends past end of file");
    header(&b, 2, 0), tensor(&b, "t0", 1, NE4, GT_F32, 0), tensor(&b, "t1", 1, NE8, GT_F32, 32);
    pad(&b, 32), zeros(&b, 60);
    expect_fail("data truncated", &b, "tensor 't1'", "data extends past end of file");
    header(&b, 2, 0), tensor(&b, "t0", 1, NE8, GT_F32, 0), tensor(&b, "t1", 1, NE4, GT_F32, 0);
    pad(&b, 32), zeros(&b, 64);
    expect_fail("overlap", &b, "tensor 't1'", "overlaps tensor 't0'");
    header(&b, 2, 0), tensor(&b, "t0", 1, NE4, GT_F32, 0), tensor(&b, "t1", 1, NE4, GT_F32, 64);
    pad(&b, 32), zeros(&b, 96);
    expect_fail("gap", &b, "tensor 't1'", "leaves a gap (expected 32");
    header(&b, 1, 0), tensor(&b, "z", 1, (int64_t[]){0}, GT_F32, 0);
    expect_fail("data section past end", &b, "data section starts at", NULL);
    header(&b, 1, 0), str(&b, "tt"), u32(&b, 1), u64(&b, 4), u32(&b, GT_F32), zeros(&b, 7);
    expect_fail("truncated tensor info", &b, "tensor 'tt'", "truncated: offset needs 8 bytes");

    f = gguf_open("/nonexistent/x.gguf", &err);
    CHECK(f == NULL);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/x.gguf: cannot open");
    f = gguf_open("/tmp", &err);
    CHECK(f == NULL);
    CHECK_STR_CONTAINS(err.msg, "not a regular file");
}

/* A richer good file written by our writer, then every prefix of it. */
static void test_truncations_and_flips(void) {
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    const char *toks[] = {"<s>", "</s>", "h\xc3\xa9"};
    const float scores[] = {0, -1, -2};
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 3);
    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, scores, 3);
    gguf_set_u32(w, "general.alignment", 64);
    const int64_t ne_q[] = {32, 2}, ne_f[] = {3};
    gguf_add_tensor(w, "q", GT_Q8_0, 2, ne_q, &err);
    gguf_add_tensor(w, "f", GT_F32, 1, ne_f, &err);
    CHECK_MSG(gguf_writer_begin(w, path, &err) == 0, "%s", err.msg);
    unsigned char data[68];
    for (int i = 0; i < 68; i++) data[i] = (unsigned char)(i * 7);
    gguf_writer_write_tensor(w, 0, data, &err);
    gguf_writer_write_tensor(w, 1, data, &err);
    CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);

    FILE *fp = fopen(path, "rb");
    unsigned char whole[4096];
    size_t n = fread(whole, 1, sizeof whole, fp);
    fclose(fp);
    gguf_file *f = gguf_open(path, &err);
    CHECK_MSG(f != NULL, "%s", err.msg);
    if (!f) return;
    const gguf_tensor_info *last = gguf_tensor_at(f, 1);
    size_t needed = (size_t)(gguf_data_offset(f) + last->offset + last->nbytes);
    gguf_close(f);
    CHECK(needed < n);  /* the last tensor's padding is not required */

    buf b = {0};
    int refused = 0;
    for (size_t cut = 0; cut <= n; cut++) {
        b.n = 0;
        put(&b, whole, cut);
        save(&b);
        f = gguf_open(path, &err);
        if (cut < needed) {
            CHECK_MSG(f == NULL, "prefix of %zu bytes accepted", cut);
            CHECK(strncmp(err.msg, path, strlen(path)) == 0 && strchr(err.msg, '\n') == NULL);
            refused += f == NULL;
        } else {
            CHECK_MSG(f != NULL, "prefix of %zu bytes: %s", cut, err.msg);
        }
        gguf_close(f);
    }
    CHECK(refused == (int)needed);

    /* each header byte set to a few values: no crash, and any refusal is one line */
    static const unsigned char vals[] = {0x00, 0x01, 0x3f, 0x80, 0xff};
    size_t header_end = (size_t)gguf_data_offset(f = gguf_open(path, &err));
    gguf_close(f);
    for (size_t pos = 0; pos < header_end; pos++)
        for (size_t v = 0; v < sizeof vals; v++) {
            b.n = 0;
            put(&b, whole, n);
            b.p[pos] = vals[v];
            save(&b);
            f = gguf_open(path, &err);
            if (!f) CHECK(strncmp(err.msg, path, strlen(path)) == 0 && strchr(err.msg, '\n') == NULL);
            for (int64_t i = 0; f && i < gguf_n_tensors(f); i++) gguf_tensor_hash(gguf_tensor_at(f, i));
            gguf_close(f);
        }
    free(b.p);
}

int main(void) {
    char dir[] = "/tmp/hfq_gguf_bad_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    test_corpus();
    test_truncations_and_flips();
    unlink(path);
    rmdir(dir);
    return check_exit();
}
