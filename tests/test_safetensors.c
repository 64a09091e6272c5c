/* test_safetensors.c - the safetensors reader and writer: round trips of every
 * dtype, metadata, shards with an index, a corpus of broken files each rejected
 * with a one-line error naming the file, RSS release, and the real fixtures. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/safetensors.h"
#include "check.h"

static char dir[] = "/tmp/hfq_st_XXXXXX";

static char *path_in(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*n + 1);
    CHECK(fread(buf, 1, *n, f) == *n);
    fclose(f);
    return buf;
}

/* A safetensors file from a header text (header length as given) and data_size zero bytes. */
static void write_st(const char *path, uint64_t claimed_len, const char *json, size_t data_size) {
    size_t jl = strlen(json), n = 8 + jl + data_size;
    unsigned char *buf = calloc(1, n);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(claimed_len >> (8 * i));
    memcpy(buf + 8, json, jl);
    write_bytes(path, buf, n);
    free(buf);
}

/* Opening must fail with one line naming `names` and containing `expect`. */
static void expect_fail_at(st_model *m, const hfq_error *err, const char *names,
                           const char *expect, const char *what) {
    CHECK_MSG(m == NULL, "%s: opened a broken file", what);
    st_close(m);
    if (m) return;
    CHECK_MSG(strstr(err->msg, names) != NULL, "%s: '%s' does not name %s", what, err->msg, names);
    CHECK_MSG(strstr(err->msg, expect) != NULL, "%s: '%s' lacks '%s'", what, err->msg, expect);
    CHECK_MSG(strchr(err->msg, '\n') == NULL, "%s: message has several lines", what);
}

static void expect_bad_header(const char *json, size_t data_size, const char *expect) {
    const char *path = path_in("bad.safetensors");
    write_st(path, strlen(json), json, data_size);
    hfq_error err = {{0}};
    expect_fail_at(st_open_file(path, &err), &err, path, expect, json);
}

/* Fill: byte k of tensor i is (i * 37 + k * 11) mod 256. */
static int fill_pattern(void *ctx, int64_t i, void *buf, uint64_t nbytes, hfq_error *err) {
    (void)ctx;
    (void)err;
    for (uint64_t k = 0; k < nbytes; k++) ((unsigned char *)buf)[k] = (unsigned char)(i * 37 + k * 11);
    return 0;
}

static int pattern_ok(const st_model *m, const st_tensor *t, int64_t i) {
    const unsigned char *p = st_data(m, t);
    for (uint64_t k = 0; k < t->nbytes; k++)
        if (p[k] != (unsigned char)(i * 37 + k * 11)) return 0;
    return 1;
}

static void test_reference_layout(void) {
    const char *path = path_in("one.safetensors");
    st_write_tensor t = {"a", ST_F32, 1, {2}};
    const char *meta[] = {"format", "pt"};
    hfq_error err = {{0}};
    CHECK(st_write_file(path, &t, 1, meta, 1, fill_pattern, NULL, &err) == 0);
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    /* the layout of the reference writer: compact JSON, __metadata__ first,
     * dtype/shape/data_offsets, spaces up to a multiple of 8 */
    const char *want = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t wl = strlen(want), padded = (wl + 7) / 8 * 8;
    CHECK(n == 8 + padded + 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];
    CHECK(hl == padded);
    CHECK(memcmp(b + 8, want, wl) == 0);
    for (size_t i = wl; i < padded; i++) CHECK(b[8 + i] == ' ');
    free(b);
}

static void test_round_trip(void) {
    st_write_tensor ts[ST_DTYPE_COUNT + 2];
    int nt = 0;
    for (int d = 0; d < ST_DTYPE_COUNT; d++) {
        static char names[ST_DTYPE_COUNT][32];
        snprintf(names[d], sizeof names[d], "layer.%s.w", st_dtype_name((st_dtype)d));
        st_write_tensor t = {names[d], (st_dtype)d, d % 4, {3, 2, 5}};
        ts[nt++] = t;
    }
    ts[nt++] = (st_write_tensor){"empty", ST_F32, 2, {0, 7}};
    ts[nt++] = (st_write_tensor){"wide", ST_BF16, 3, {2, 1, 9}};
    const char *meta[] = {"format", "pt", "note", "tied \"x\" \xe2\x96\x81"};
    const char *path = path_in("all.safetensors");
    hfq_error err = {{0}};
    CHECK(st_write_file(path, ts, nt, meta, 2, fill_pattern, NULL, &err) == 0);

    st_model *m = st_open_file(path, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m) return;
    CHECK(st_n_tensors(m) == nt);
    CHECK(st_n_shards(m) == 1 && strcmp(st_shard_path(m, 0), path) == 0);
    CHECK(strcmp(st_metadata_get(m, "format"), "pt") == 0);
    CHECK(strcmp(st_metadata_get(m, "note"), meta[3]) == 0);
    CHECK(st_metadata_get(m, "absent") == NULL);
    CHECK(st_find(m, "absent") == NULL);
    uint64_t prev_end = 0;
    for (int i = 0; i < nt; i++) {
        const st_tensor *t = st_find(m, ts[i].name);
        CHECK_MSG(t != NULL, "%s missing", ts[i].name);
        if (!t) continue;
        /* written order = data order = st_tensor_at order (a zero-size tensor sorts
         * before a non-empty one at the same offset) */
        CHECK(t == st_tensor_at(m, i));
        CHECK(t->dtype == ts[i].dtype && t->n_dims == ts[i].n_dims && t->shard == 0);
        int64_t ne = 1;
        for (int d = 0; d < t->n_dims; d++) {
            CHECK(t->shape[d] == ts[i].shape[d]);
            ne *= ts[i].shape[d];
        }
        CHECK(t->n_elements == ne);
        CHECK(t->nbytes == (uint64_t)ne * st_dtype_size(t->dtype));
        CHECK(i == 0 ? t->offset % 8 == 0 : t->offset == prev_end);
        prev_end = t->offset + t->nbytes;
        CHECK_MSG(pattern_ok(m, t, i), "%s data differs", t->name);
        st_release(m, t);
        CHECK_MSG(pattern_ok(m, t, i), "%s data differs after release", t->name);
    }
    CHECK(st_tensor_at(m, nt) == NULL && st_tensor_at(m, -1) == NULL);
    st_close(m);

    /* same input, same bytes */
    const char *again = path_in("again.safetensors");
    CHECK(st_write_file(again, ts, nt, meta, 2, fill_pattern, NULL, &err) == 0);
    size_t n1, n2;
    unsigned char *b1 = read_bytes(path, &n1), *b2 = read_bytes(again, &n2);
    CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);

    /* the writer refuses what a reader would refuse, and leaves no file */
    st_write_tensor dup[2] = {{"x", ST_F32, 1, {1}}, {"x", ST_F16, 1, {1}}};
    const char *bad = path_in("refused.safetensors");
    CHECK(st_write_file(bad, dup, 2, NULL, 0, fill_pattern, NULL, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "twice");
    st_write_tensor neg = {"x", ST_F32, 1, {-1}};
    CHECK(st_write_file(bad, &neg, 1, NULL, 0, fill_pattern, NULL, &err) != 0);
    CHECK(access(bad, F_OK) != 0);
}

static int fill_fails(void *ctx, int64_t i, void *buf, uint64_t nbytes, hfq_error *err) {
    (void)ctx, (void)buf, (void)nbytes;
    return i == 1 ? hfq_fail(err, "fill", "no data for tensor %lld", (long long)i) : 0;
}

static void test_fill_failure(void) {
    st_write_tensor ts[2] = {{"a", ST_U8, 1, {4}}, {"b", ST_U8, 1, {4}}};
    const char *path = path_in("partial.safetensors");
    hfq_error err = {{0}};
    CHECK(st_write_file(path, ts, 2, NULL, 0, fill_fails, NULL, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "no data for tensor 1");
    CHECK(access(path, F_OK) != 0);
}

/* Every prefix of a valid file is rejected, naming the file. */
static void test_truncation(void) {
    st_write_tensor ts[3] = {{"a", ST_F32, 2, {2, 3}}, {"b", ST_I64, 1, {2}}, {"c", ST_BF16, 0, {0}}};
    const char *full = path_in("full.safetensors");
    hfq_error err = {{0}};
    CHECK(st_write_file(full, ts, 3, NULL, 0, fill_pattern, NULL, &err) == 0);
    size_t n;
    unsigned char *b = read_bytes(full, &n);
    const char *cut = path_in("cut.safetensors");
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];
    for (size_t len = 0; len < n; len++) {
        write_bytes(cut, b, len);
        char what[64];
        snprintf(what, sizeof what, "cut at %zu", len);
        const char *expect = len < 8 ? "too short" : len < 8 + hl ? "past the end of the file"
                                                                  : "past the end of the data";
        expect_fail_at(st_open_file(cut, &err), &err, cut, expect, what);
    }
    /* lying header lengths */
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    write_bytes(cut, b, n);
    expect_fail_at(st_open_file(cut, &err), &err, cut, "past the end of the file", "length = size");
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((1ull << 40) >> (8 * i));
    write_bytes(cut, b, n);
    expect_fail_at(st_open_file(cut, &err), &err, cut, "100 MB", "length 2^40");
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((hl - 9) >> (8 * i));
    write_bytes(cut, b, n);
    expect_fail_at(st_open_file(cut, &err), &err, cut, "not valid JSON", "length too small");
    free(b);
}

static void test_bad_headers(void) {
    expect_bad_header("{\"a\":", 0, "not valid JSON");
    expect_bad_header("{\"a\":{}} x", 0, "not valid JSON");
    expect_bad_header("[1, 2]", 0, "does not start with '{'");
    expect_bad_header("", 0, "does not start with '{'");
    expect_bad_header("{\"a\":5}", 0, "tensor 'a': entry is not an object");
    expect_bad_header("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': dtype missing");
    expect_bad_header("{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16,
                      "tensor 'a': unknown dtype 'F128'");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "shape missing");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                      "tensor 'a': shape entry 0 is not a non-negative integer");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,4]}}", 4,
                      "shape entry 1 is not a non-negative integer");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
                      "shape entry 0 is not");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
                      4, "too many dims");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4,
                      "shape entry 0 is not");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
                      "tensor 'a': data_offsets is not [begin, end]");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}", 4,
                      "data_offsets is not [begin, end]");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                      "data_offsets is not [begin, end]");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8,
                      "tensor 'a': data_offsets begin 8 > end 4");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 4,
                      "tensor 'a': data_offsets end 8 past the end of the data section (4 bytes)");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
                      "tensor 'a': data_offsets span 4 bytes but F32 x shape needs 8");
    /* element count past int64, then byte count past uint64 */
    expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                      "\"data_offsets\":[0,0]}}", 0, "tensor 'a': shape product overflows");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1073741824,1073741824,4],"
                      "\"data_offsets\":[0,0]}}", 0, "shape product overflows");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
                      "tensor 'b': data overlaps tensor 'a'");
    expect_bad_header("{\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[15,16]}}", 16,
                      "data overlaps tensor");
    expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                      "tensor 'a': appears twice");
    expect_bad_header("{\"__metadata__\":{\"format\":1}}", 0, "__metadata__ value of 'format'");
    expect_bad_header("{\"__metadata__\":[]}", 0, "__metadata__ is not an object");
    expect_bad_header("{\"a\\nb\":5}", 0, "tensor 'a?b'");
    expect_bad_header("{\"a\xff\":5}", 0, "not valid UTF-8");
    expect_bad_header("{\"a\xc0\xaf\":5}", 0, "not valid UTF-8");         /* overlong '/' */
    expect_bad_header("{\"a\xed\xa0\x80\":5}", 0, "not valid UTF-8");    /* surrogate */
    expect_bad_header("{\"\xe2\x96\x81\":5}", 0, "tensor '\xe2\x96\x81'");   /* valid */

    /* a NUL byte inside the header */
    const char *path = path_in("nul.safetensors");
    unsigned char raw[20] = {12, 0, 0, 0, 0, 0, 0, 0, '{', '"', 'a', 0, '"', ':', '1', '}', ' ', ' ', ' ', ' '};
    write_bytes(path, raw, sizeof raw);
    hfq_error err = {{0}};
    expect_fail_at(st_open_file(path, &err), &err, path, "NUL byte", "NUL in header");
    expect_fail_at(st_open_file(path_in("absent.safetensors"), &err), &err, "absent.safetensors",
                   "cannot open", "missing file");

    /* valid edge cases: no tensors, zero-size tensors (even inside another's range), holes */
    const char *ok = path_in("edge.safetensors");
    const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
                       "\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[12,16]}}";
    write_st(ok, strlen(json), json, 16);
    st_model *m = st_open_file(ok, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        CHECK(st_n_tensors(m) == 3);
        const st_tensor *z = st_find(m, "z"), *s = st_find(m, "s");
        CHECK(z && z->nbytes == 0 && z->n_elements == 0 && st_data(m, z) != NULL);
        CHECK(s && s->n_dims == 0 && s->n_elements == 1 && s->nbytes == 4);
        if (z) st_release(m, z);
        st_close(m);
    }
    write_st(ok, 2, "{}", 0);
    m = st_open_file(ok, &err);
    CHECK(m && st_n_tensors(m) == 0 && st_find(m, "a") == NULL);
    st_close(m);
}

/* A two-shard checkpoint with an index; `index_body` is the weight_map text. */
static void write_sharded(const char *sub, const char *index_body, int extra_tensor) {
    char d[512], p[600];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    mkdir(d, 0755);
    st_write_tensor s1[2] = {{"embed", ST_BF16, 2, {4, 8}}, {"l0.w", ST_F16, 2, {8, 8}}};
    st_write_tensor s2[3] = {{"l1.w", ST_F16, 2, {8, 8}}, {"norm", ST_F32, 1, {8}},
                             {"stray", ST_F32, 1, {2}}};
    hfq_error err = {{0}};
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", d);
    CHECK(st_write_file(p, s1, 2, NULL, 0, fill_pattern, NULL, &err) == 0);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
    const char *meta[] = {"format", "pt"};
    CHECK(st_write_file(p, s2, 2 + extra_tensor, meta, 1, fill_pattern, NULL, &err) == 0);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    FILE *f = fopen(p, "w");
    fprintf(f, "{\"metadata\": {\"total_size\": 432}, \"weight_map\": {%s}}", index_body);
    fclose(f);
}

#define S1 "\"model-00001-of-00002.safetensors\""
#define S2 "\"model-00002-of-00002.safetensors\""
#define GOOD_MAP "\"embed\": " S1 ", \"l0.w\": " S1 ", \"l1.w\": " S2 ", \"norm\": " S2

static void expect_bad_dir(const char *sub, const char *names, const char *expect) {
    char d[512];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    hfq_error err = {{0}};
    expect_fail_at(st_open_dir(d, &err), &err, names, expect, sub);
}

static void test_shards(void) {
    write_sharded("good", GOOD_MAP, 0);
    char d[512];
    snprintf(d, sizeof d, "%s/good", dir);
    hfq_error err = {{0}};
    st_model *m = st_open_dir(d, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        CHECK(st_n_shards(m) == 2 && st_n_tensors(m) == 4);
        CHECK(strstr(st_shard_path(m, 0), "model-00001-of-00002.safetensors") != NULL);
        const char *order[4] = {"embed", "l0.w", "l1.w", "norm"};
        for (int i = 0; i < 4; i++) {
            const st_tensor *t = st_tensor_at(m, i);
            CHECK(t && strcmp(t->name, order[i]) == 0 && t->shard == i / 2);
            CHECK(t && pattern_ok(m, t, i % 2));
        }
        CHECK(strcmp(st_metadata_get(m, "format"), "pt") == 0);
        st_close(m);
    }
    write_sharded("missing", GOOD_MAP ", \"extra\": \"model-00003-of-00002.safetensors\"", 0);
    expect_bad_dir("missing", "missing/model-00003-of-00002.safetensors", "cannot open");
    write_sharded("wrong", "\"embed\": " S1 ", \"l0.w\": " S2 ", \"l1.w\": " S2 ", \"norm\": " S2, 0);
    expect_bad_dir("wrong", "wrong/model.safetensors.index.json",
                   "tensor 'l0.w' is mapped to model-00002-of-00002.safetensors but stored in "
                   "model-00001-of-00002.safetensors");
    write_sharded("extra", GOOD_MAP, 1);
    expect_bad_dir("extra", "extra/model-00002-of-00002.safetensors",
                   "tensor 'stray': not listed in");
    write_sharded("phantom", GOOD_MAP ", \"ghost\": " S2, 0);
    expect_bad_dir("phantom", "phantom/model.safetensors.index.json",
                   "tensor 'ghost' is mapped to model-00002-of-00002.safetensors, which does not hold it");
    write_sharded("escape", GOOD_MAP ", \"x\": \"../good/model-00001-of-00002.safetensors\"", 0);
    expect_bad_dir("escape", "escape/model.safetensors.index.json", "not a file name");
    write_sharded("twice", GOOD_MAP ", \"norm\": " S2, 0);
    expect_bad_dir("twice", "twice/model.safetensors.index.json", "tensor 'norm' is listed twice");
    write_sharded("badjson", GOOD_MAP ",", 0);
    expect_bad_dir("badjson", "badjson/model.safetensors.index.json", "not valid JSON");
    write_sharded("nomap", "", 0);
    expect_bad_dir("nomap", "nomap/model.safetensors.index.json", "weight_map is empty");

    /* a folder without an index: model.safetensors, else the only .safetensors file */
    char p[600];
    snprintf(p, sizeof p, "%s/good/model.safetensors.index.json", dir);
    unlink(p);
    expect_bad_dir("good", "good", "2 .safetensors files but no model.safetensors.index.json");
    snprintf(p, sizeof p, "%s/good/model-00002-of-00002.safetensors", dir);
    unlink(p);
    m = st_open_dir(d, &err);
    CHECK_MSG(m && st_n_tensors(m) == 2, "%s", err.msg);
    st_close(m);
    snprintf(p, sizeof p, "%s/good/model-00001-of-00002.safetensors", dir);
    unlink(p);
    expect_bad_dir("good", "good", "no .safetensors file");
}

static long rss_pages(void) {
    long size = 0, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    if (f) fclose(f);
    return resident;
}

/* st_release gives the pages of a read tensor back. */
static void test_release_rss(void) {
    st_write_tensor t = {"big", ST_U8, 1, {32 << 20}};
    const char *path = path_in("big.safetensors");
    hfq_error err = {{0}};
    CHECK(st_write_file(path, &t, 1, NULL, 0, fill_pattern, NULL, &err) == 0);
    st_model *m = st_open_file(path, &err);
    if (!m || rss_pages() < 0) {
        st_close(m);
        unlink(path);
        return;
    }
    const st_tensor *bt = st_tensor_at(m, 0);
    long page = sysconf(_SC_PAGESIZE), before = rss_pages();
    CHECK(pattern_ok(m, bt, 0));
    long touched = rss_pages();
    st_release(m, bt);
    long after = rss_pages();
    CHECK_MSG((touched - before) * page > (24 << 20), "reading did not grow RSS (%ld pages)",
              touched - before);
    CHECK_MSG((touched - after) * page > (24 << 20), "release kept %ld of %ld pages",
              after - before, touched - before);
    CHECK(pattern_ok(m, bt, 0));   /* the pages come back from the file */
    st_close(m);
    unlink(path);
}

static void test_fixtures(void) {
    const char *fx = getenv("HFQ_FIXTURES");
    char p[1024];
    snprintf(p, sizeof p, "%s/models/stories260K/model.safetensors", fx ? fx : "");
    if (!fx || access(p, R_OK) != 0) {
        printf("fixtures absent (HFQ_FIXTURES=%s): real checkpoints not read\n", fx ? fx : "");
        return;
    }
    hfq_error err = {{0}};
    st_model *m = st_open_file(p, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        CHECK(st_n_tensors(m) == 2 + 5 * 9);
        const st_tensor *e = st_find(m, "model.embed_tokens.weight");
        CHECK(e && e->dtype == ST_F32 && e->n_dims == 2 && e->shape[0] == 512 && e->shape[1] == 64);
        const st_tensor *g = st_find(m, "model.layers.4.mlp.gate_proj.weight");
        CHECK(g && g->shape[0] == 172 && g->shape[1] == 64);
        CHECK(st_find(m, "lm_head.weight") == NULL);
        CHECK(strcmp(st_metadata_get(m, "format"), "pt") == 0);
        const st_tensor *n = st_find(m, "model.norm.weight");
        float v = 0;
        if (n) memcpy(&v, st_data(m, n), 4);
        CHECK(n && n->nbytes == 256 && isfinite(v) && v != 0);
        const st_tensor *last = st_tensor_at(m, st_n_tensors(m) - 1);
        struct stat sb;
        CHECK(stat(p, &sb) == 0 && last->offset + last->nbytes == (uint64_t)sb.st_size);
        st_close(m);
    }
    snprintf(p, sizeof p, "%s/models/TinyStories-656K", fx);
    m = st_open_dir(p, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        const st_tensor *h = st_find(m, "lm_head.weight");
        CHECK(h && h->dtype == ST_F32 && h->shape[0] == 2048 && h->shape[1] == 128);
        CHECK(st_find(m, "model.embed_tokens.weight") == NULL);
        const char *alias = st_metadata_get(m, "model.embed_tokens.weight");
        CHECK(alias && strcmp(alias, "lm_head.weight") == 0);
        const st_tensor *d = st_find(m, "model.layers.1.mlp.down_proj.weight");
        CHECK(d && d->shape[0] == 128 && d->shape[1] == 384);
        st_close(m);
    }
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    test_reference_layout();
    test_round_trip();
    test_fill_failure();
    test_truncation();
    test_bad_headers();
    test_shards();
    test_release_rss();
    test_fixtures();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_exit();
}
