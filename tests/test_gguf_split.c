/* Split GGUF (formats/gguf.h, docs/format.md "Split files"): files written by
 * our writer with llama.cpp's split keys, read whole through the first file;
 * each lie a split can tell refused with one line naming the file; the names
 * gguf_split_path makes. (tests/gguf_split_cli.py reads gguf-py's splits.) */
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "formats/ggml_type.h"
#include "formats/gguf.h"

static char dir[] = "/tmp/hfq_split_XXXXXX";

/* One file of a split: its keys and tensors f32 [4, rows] named names[i],
 * each element the tensor's global index times 100 plus the element's. */
typedef struct split_file {
    int no, count, tensors_count; /* split.no / split.count / split.tensors.count; -1: key absent */
    const char *names[4];
    int first;                    /* global index of names[0] */
} split_file;

static void path_of(char *out, size_t n, const char *prefix, int no, int count) {
    snprintf(out, n, "%s/%s-%05d-of-%05d.gguf", dir, prefix, no + 1, count);
}

static void write_file(const char *path, const split_file *s) {
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    CHECK(gguf_set_str(w, "general.architecture", s->no == 0 ? "llama" : "not-read") == 0);
    if (s->no >= 0) CHECK(gguf_set_u16(w, "split.no", (uint16_t)s->no) == 0);
    if (s->count >= 0) CHECK(gguf_set_u16(w, "split.count", (uint16_t)s->count) == 0);
    if (s->tensors_count >= 0) CHECK(gguf_set_i32(w, "split.tensors.count", s->tensors_count) == 0);
    int n = 0;
    while (n < 4 && s->names[n]) n++;
    for (int i = 0; i < n; i++) {
        const int64_t ne[2] = {4, 2 + i};
        CHECK_MSG(gguf_add_tensor(w, s->names[i], GT_F32, 2, ne, &err) == i, "%s", err.msg);
    }
    CHECK_MSG(gguf_writer_begin(w, path, &err) == 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        float v[4 * 5];
        for (int k = 0; k < 4 * (2 + i); k++) v[k] = (float)((s->first + i) * 100 + k);
        CHECK_MSG(gguf_writer_write_tensor(w, i, v, &err) == 0, "%s", err.msg);
    }
    CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
}

/* Writes prefix's files; returns the first file's path in first. */
static void write_split(char *first, size_t n, const char *prefix, const split_file *files, int n_files) {
    for (int i = 0; i < n_files; i++) {
        char p[512];
        path_of(p, sizeof p, prefix, i, n_files);
        write_file(p, &files[i]);
    }
    path_of(first, n, prefix, 0, n_files);
}

static void expect_error(const char *path, const char *names, const char *words) {
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    CHECK_MSG(f == NULL, "%s opened", path);
    gguf_close(f);
    CHECK_STR_CONTAINS(err.msg, names);
    CHECK_STR_CONTAINS(err.msg, words);
    CHECK_MSG(strchr(err.msg, '\n') == NULL, "more than one line: %s", err.msg);
}

static void test_whole(void) {
    const split_file files[] = {
        {0, 3, 5, {"a", "b"}, 0},
        {1, 3, -1, {"c", "d"}, 2},
        {2, 3, -1, {"e"}, 4},
    };
    char first[512];
    write_split(first, sizeof first, "m", files, 3);
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(first, &err);
    CHECK_MSG(f != NULL, "%s", err.msg);
    if (!f) return;
    CHECK(gguf_n_files(f) == 3 && gguf_n_tensors(f) == 5);
    static const char *const want[] = {"a", "b", "c", "d", "e"};
    static const int file_of[] = {0, 0, 1, 1, 2}, rows[] = {2, 3, 2, 3, 2};
    for (int i = 0; i < 5; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        CHECK_MSG(strcmp(t->name, want[i]) == 0 && t->file == file_of[i] && t->ne[1] == rows[i], "tensor %d: %s", i,
                  t->name);
        CHECK(gguf_find_tensor(f, want[i]) == t);
        const float *v = t->data;
        int same = 1;
        for (int k = 0; k < 4 * rows[i]; k++) same &= v[k] == (float)(i * 100 + k);
        CHECK_MSG(same, "tensor %s: data", t->name);
        gguf_release(f, t->data, t->nbytes); /* faulted back in: still readable */
        CHECK(v[1] == (float)(i * 100 + 1));
    }
    uint64_t len = 0;
    const char *arch = gguf_get_str(f, gguf_find_key(f, "general.architecture"), &len, &err);
    CHECK(arch && strcmp(arch, "llama") == 0); /* the first file's keys */
    uint64_t size = 0;
    for (int i = 0; i < 3; i++) {
        char p[512];
        path_of(p, sizeof p, "m", i, 3);
        FILE *fp = fopen(p, "rb");
        if (fp && fseek(fp, 0, SEEK_END) == 0) size += (uint64_t)ftell(fp);
        if (fp) fclose(fp);
    }
    CHECK(gguf_file_size(f) == size);
    gguf_close(f);

    char later[512];
    path_of(later, sizeof later, "m", 1, 3);
    expect_error(later, later, "is file 2 of 3 of a split GGUF: give the first");
    expect_error(later, first, "");

    /* later files without tensors, and no tensors at all */
    const split_file bare[] = {{0, 2, 1, {"a"}, 0}, {1, 2, -1, {NULL}, 1}};
    write_split(first, sizeof first, "bare", bare, 2);
    f = gguf_open(first, &err);
    CHECK_MSG(f && gguf_n_files(f) == 2 && gguf_n_tensors(f) == 1, "%s", err.msg);
    gguf_close(f);
    const split_file none[] = {{0, 2, 0, {NULL}, 0}, {1, 2, -1, {NULL}, 0}};
    write_split(first, sizeof first, "none", none, 2);
    f = gguf_open(first, &err);
    CHECK_MSG(f && gguf_n_files(f) == 2 && gguf_n_tensors(f) == 0, "%s", err.msg);
    gguf_close(f);

    /* one file that says it is the only one: a plain file */
    const split_file one[] = {{0, 1, 1, {"x"}, 0}};
    write_split(first, sizeof first, "one", one, 1);
    f = gguf_open(first, &err);
    CHECK_MSG(f && gguf_n_files(f) == 1 && gguf_n_tensors(f) == 1, "%s", err.msg);
    gguf_close(f);
}

static void test_lies(void) {
    char first[512], p[512];
    /* split.tensors.count unlike the files' tensors */
    const split_file count_lie[] = {{0, 2, 4, {"a"}, 0}, {1, 2, -1, {"b", "c"}, 1}};
    write_split(first, sizeof first, "cnt", count_lie, 2);
    expect_error(first, first, "split.tensors.count says 4 tensors, the 2 files hold 3");
    /* a tensor in two files */
    const split_file dup[] = {{0, 2, 2, {"a"}, 0}, {1, 2, -1, {"a"}, 1}};
    write_split(first, sizeof first, "dup", dup, 2);
    expect_error(first, "'a'", "duplicate tensor name");
    /* a later file that says it is another */
    const split_file wrong_no[] = {{0, 3, 3, {"a"}, 0}, {1, 3, -1, {"b"}, 1}, {1, 3, -1, {"c"}, 2}};
    write_split(first, sizeof first, "no", wrong_no, 3);
    path_of(p, sizeof p, "no", 2, 3);
    expect_error(first, p, "says it is file 2 of 3 of a split GGUF (split.no, split.count), expected file 3 of 3");
    const split_file wrong_count[] = {{0, 2, 2, {"a"}, 0}, {1, 3, -1, {"b"}, 1}};
    write_split(first, sizeof first, "count", wrong_count, 2);
    path_of(p, sizeof p, "count", 1, 2);
    expect_error(first, p, "says it is file 2 of 3");
    const split_file no_keys[] = {{0, 2, 2, {"a"}, 0}, {-1, -1, -1, {"b"}, 1}};
    write_split(first, sizeof first, "nokeys", no_keys, 2);
    path_of(p, sizeof p, "nokeys", 1, 2);
    expect_error(first, p, "has no split.no or split.count: not file 2 of 2 of the split GGUF");
    /* a missing file */
    write_split(first, sizeof first, "gone", count_lie, 2);
    path_of(p, sizeof p, "gone", 1, 2);
    CHECK(unlink(p) == 0);
    expect_error(first, p, "cannot open");
    /* the first file's keys out of range */
    const split_file zero[] = {{0, 0, -1, {"a"}, 0}};
    write_split(first, sizeof first, "zero", zero, 1);
    expect_error(first, first, "split.count is 0");
    const split_file past[] = {{3, 3, -1, {"a"}, 0}};
    write_split(first, sizeof first, "past", past, 1);
    expect_error(first, first, "split.no 3 is not below split.count 3");
    /* the first file not named as llama.cpp names it */
    const split_file lone[] = {{0, 2, -1, {"a"}, 0}};
    snprintf(first, sizeof first, "%s/model.gguf", dir);
    write_file(first, &lone[0]);
    expect_error(first, first, "its name does not end in -00001-of-00002.gguf");
    /* split.count of another type */
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    CHECK(gguf_set_str(w, "split.count", "2") == 0);
    snprintf(first, sizeof first, "%s/str-00001-of-00002.gguf", dir);
    CHECK_MSG(gguf_writer_begin(w, first, &err) == 0 && gguf_writer_finish(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    expect_error(first, "split.count", "");
    w = gguf_writer_new();
    CHECK(gguf_set_u32(w, "split.count", 70000) == 0);
    snprintf(first, sizeof first, "%s/big-00001-of-70000.gguf", dir);
    CHECK_MSG(gguf_writer_begin(w, first, &err) == 0 && gguf_writer_finish(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    expect_error(first, "split.count", "70000 is outside 0..65535");
}

static void test_names(void) {
    char out[64];
    CHECK(gguf_split_path("d/m-00001-of-00012.gguf", 11, out, sizeof out) == 12 &&
          strcmp(out, "d/m-00012-of-00012.gguf") == 0);
    CHECK(gguf_split_path("-00001-of-00002.gguf", 1, out, sizeof out) == 2 && strcmp(out, "-00002-of-00002.gguf") == 0);
    CHECK(gguf_split_path("d/m-00001-of-00012.gguf", 12, out, sizeof out) == 0);        /* past the last */
    CHECK(gguf_split_path("d/m-00002-of-00012.gguf", 0, out, sizeof out) == 0);         /* not the first */
    CHECK(gguf_split_path("d/m-00001-of-0001x.gguf", 0, out, sizeof out) == 0);
    CHECK(gguf_split_path("d/m-00001-of-00000.gguf", 0, out, sizeof out) == 0);
    CHECK(gguf_split_path("model.gguf", 0, out, sizeof out) == 0);
    CHECK(gguf_split_path("m-00001-of-00002.bin", 0, out, sizeof out) == 0);
    CHECK(gguf_split_path("d/m-00001-of-00002.gguf", 1, out, 23) == 0);                /* no room for the NUL */
    CHECK(gguf_split_path("d/m-00001-of-00002.gguf", 1, out, 24) == 2);
}

int main(void) {
    if (!mkdtemp(dir)) CHECK_SKIP("cannot create a temporary folder");
    test_whole();
    test_lies();
    test_names();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_exit();
}
