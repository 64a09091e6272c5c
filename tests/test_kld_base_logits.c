/* test_kld_base_logits.c - saved base log-probabilities (src/eval/base_logits.h):
 * the row encoding against llama.cpp's (written here from its
 * perplexity.cpp) and its error bound, file round trips, the checks that
 * refuse a file made for another evaluation, hostile files, and reading
 * llama-perplexity's own files. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/eval/base_logits.h"
#include "src/eval/kld.h"
#include "tests/check.h"
#include "tests/quant_rng.h"

static double uniform(void) { return rnd_uniform(); }   /* [0, 1) */

static char dir[] = "/tmp/hfq_base_logits_XXXXXX";

/* dir/name; the last four results stay valid. */
static const char *tmp_path(const char *name) {
    static char bufs[4][256];
    static int next;
    char *buf = bufs[next++ % 4];
    snprintf(buf, sizeof bufs[0], "%s/%s", dir, name);
    return buf;
}

/* llama.cpp's row (perplexity.cpp log_softmax with uint16 output):
 * nearest_int by the 1.5 * 2^23 trick, the row as uint16 [4 + n]. */
static int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

static void llama_row(const float *logits, int n, uint16_t *out) {
    float max_logit = logits[0], min_logit = logits[0];
    for (int i = 1; i < n; ++i) {
        max_logit = fmaxf(max_logit, logits[i]);
        min_logit = fminf(min_logit, logits[i]);
    }
    min_logit = fmaxf(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (int i = 0; i < n; ++i) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    memcpy(out, &scale, 4);
    memcpy(out + 2, &min_log_prob, 4);
    for (int i = 0; i < n; ++i)
        out[4 + i] = scale ? (uint16_t)(logits[i] > min_logit ? nearest_int((1 / scale) * (logits[i] - min_logit)) : 0) : 0;
}

static void random_row(float *l, int64_t n, double spread) {
    for (int64_t i = 0; i < n; i++) l[i] = (float)(spread * (uniform() - 0.5));
}

/* Rows equal llama.cpp's bytes; decoded values within half a step of the
 * exact log-probs inside the window, the window's minimum below it. */
static void test_encoding(void) {
    enum { N = 301 };
    float l[N], exact[N], dec[N];
    unsigned char row[8 + 2 * N];
    uint16_t ref[4 + N];
    double worst = 0;
    for (int round = 0; round < 200; round++) {
        random_row(l, N, round % 3 == 0 ? 10.0 : 60.0);   /* some rows fit the 16-nat window, some do not */
        if (round == 7) for (int i = 0; i < N; i++) l[i] = 2.5f;   /* a constant row: scale 0 */
        hfq_base_logits_encode(l, N, 1, 1, row);
        llama_row(l, N, ref);
        CHECK_MSG(memcmp(row, ref, sizeof row) == 0, "round %d: bytes differ from llama.cpp's row", round);
        hfq_base_logits_decode(row, N, dec);
        hfq_log_softmax(l, N, 1, 1, exact);
        float scale, min_logp, max = l[0];
        memcpy(&scale, row, 4);
        memcpy(&min_logp, row + 4, 4);
        for (int i = 1; i < N; i++) max = fmaxf(max, l[i]);
        for (int i = 0; i < N; i++) {
            if (l[i] > max - 16) {
                const double e = fabs((double)dec[i] - exact[i]);
                CHECK_MSG(e <= scale / 2 + 2e-6, "round %d value %d: %.9g vs exact %.9g", round, i, dec[i], exact[i]);
                worst = fmax(worst, e);
            } else {
                CHECK(dec[i] == min_logp && dec[i] <= -16.0f && dec[i] >= exact[i]);
            }
        }
        if (round == 7) CHECK(scale == 0 && fabsf(dec[0] + logf((float)N)) < 1e-6f);
    }
    printf("encoding: largest error %.3g (step %.3g)\n", worst, 16.0 / 65535);
    CHECK(worst > 1e-5 && worst <= 16.0 / 65535 / 2 + 2e-6);
}

/* ---- files ---- */

enum { V = 7, CTX = 10, ROWS = CTX - CTX / 2 - 1, CHUNKS = 3, TEXT = 35 };

static int32_t text_tokens[TEXT];

static hfq_base_logits_info text_info(void) {
    return (hfq_base_logits_info){.n_vocab = V, .n_ctx = CTX, .n_chunks = CHUNKS, .n_text_tokens = TEXT,
                                  .tokens_hash = hfq_tokens_hash(text_tokens, TEXT), .bos_id = 1};
}

static int write_file(const char *path, const hfq_base_logits_info *info, const float *logits, int chunks,
                      hfq_error *err) {
    hfq_base_logits_writer *w = hfq_base_logits_create(path, info, err);
    if (!w) return -1;
    for (int c = 0; c < chunks; c++)
        if (hfq_base_logits_write_chunk(w, logits + c * ROWS * V, 2, err)) {
            hfq_base_logits_abort(w);
            return -1;
        }
    return hfq_base_logits_commit(w, err);
}

static void expect_check_error(const hfq_base_logits_reader *r, hfq_base_logits_info want, const char *msg) {
    hfq_error err = {{0}};
    CHECK(hfq_base_logits_check(r, &want, text_tokens, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, msg);
}

static void test_round_trip(void) {
    float logits[CHUNKS * ROWS * V], got[ROWS * V], want[ROWS * V];
    unsigned char row[8 + 2 * V];
    for (int i = 0; i < TEXT; i++) text_tokens[i] = (int32_t)(i * 5 % V);
    random_row(logits, CHUNKS * ROWS * V, 30.0);
    const char *path = tmp_path("a.hfql");
    hfq_base_logits_info info = text_info();
    hfq_error err = {{0}};
    CHECK_MSG(write_file(path, &info, logits, CHUNKS, &err) == 0, "%s", err.msg);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    CHECK(ftell(f) == HFQ_BASE_LOGITS_HEADER_BYTES + CHUNKS * ROWS * hfq_base_logits_row_bytes(V));
    fclose(f);
    hfq_base_logits_reader *r = hfq_base_logits_open(path, &err);
    CHECK_MSG(r != NULL, "%s", err.msg);
    if (!r) return;
    const hfq_base_logits_info *in = hfq_base_logits_info_get(r);
    CHECK(in->n_vocab == V && in->n_ctx == CTX && in->n_chunks == CHUNKS && in->n_text_tokens == TEXT &&
          in->tokens_hash == info.tokens_hash && in->bos_id == 1 && in->chunk_tokens == NULL);
    CHECK(hfq_base_logits_check(r, &info, text_tokens, &err) == 0);
    hfq_base_logits_info fewer = info;
    fewer.n_chunks = 2;   /* fewer chunks than saved is fine */
    CHECK(hfq_base_logits_check(r, &fewer, text_tokens, &err) == 0);
    for (int c = 0; c < CHUNKS; c++) {
        CHECK(hfq_base_logits_read_chunk(r, got, &err) == 0);
        for (int j = 0; j < ROWS; j++) {
            hfq_base_logits_encode(logits + (c * ROWS + j) * V, V, 1, 1, row);
            hfq_base_logits_decode(row, V, want + j * V);
        }
        CHECK(memcmp(got, want, sizeof got) == 0);
    }
    CHECK(hfq_base_logits_read_chunk(r, got, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "all 3 chunks already read");

    hfq_base_logits_info w = info;
    w.n_vocab = 8;
    expect_check_error(r, w, "saved for a vocabulary of 7 tokens; the model has 8");
    w = info, w.n_ctx = 12;
    expect_check_error(r, w, "saved with a context of 10; this run uses 12 (--ctx)");
    w = info, w.n_text_tokens = 36;
    expect_check_error(r, w, "saved for another text or tokenizer: 35 tokens, hash");
    w = info, w.tokens_hash ^= 1;
    expect_check_error(r, w, "saved for another text or tokenizer");
    w = info, w.bos_id = -1;
    expect_check_error(r, w, "saved with BOS id 1 first in every chunk; this model uses -1");
    w = info, w.n_chunks = 4;
    expect_check_error(r, w, "holds 3 chunks; 4 asked for (--chunks)");
    hfq_base_logits_close(r);

    /* the same logits give the same bytes */
    const char *again = tmp_path("b.hfql");
    CHECK(write_file(again, &info, logits, CHUNKS, &err) == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", path, again);
    CHECK(system(cmd) == 0);
}

/* Writing: a chunk too many, too few (nothing left behind), a bad header. */
static void test_writer_errors(void) {
    float logits[(CHUNKS + 1) * ROWS * V] = {0};
    hfq_base_logits_info info = text_info();
    hfq_error err = {{0}};
    const char *path = tmp_path("short.hfql");
    CHECK(write_file(path, &info, logits, CHUNKS - 1, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "2 of 3 chunks written");
    CHECK(access(path, F_OK) != 0);
    CHECK(write_file(path, &info, logits, CHUNKS + 1, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "more chunks than the 3 announced");
    CHECK(access(path, F_OK) != 0);
    info.n_chunks = 4;   /* 4 chunks of 10 do not fit 35 tokens */
    CHECK(hfq_base_logits_create(path, &info, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "4 chunks of 10 tokens do not fit a text of 35 tokens");
}

/* Copies file src to dst with bytes [at, at + n) replaced by bytes (NULL:
 * cut the file at `at`). */
static void patched_copy(const char *src, const char *dst, long at, const void *bytes, size_t n) {
    FILE *f = fopen(src, "rb");
    unsigned char buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (bytes) memcpy(buf + at, bytes, n);
    else len = (size_t)at;
    f = fopen(dst, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
}

static void expect_open_error(const char *path, const char *msg) {
    hfq_error err = {{0}};
    hfq_base_logits_reader *r = hfq_base_logits_open(path, &err);
    CHECK_MSG(r == NULL, "%s opened", path);
    hfq_base_logits_close(r);
    CHECK_STR_CONTAINS(err.msg, msg);
}

static void test_hostile(void) {
    const char *good = tmp_path("a.hfql"), *bad = tmp_path("bad.hfql");
    const long size = HFQ_BASE_LOGITS_HEADER_BYTES + CHUNKS * ROWS * hfq_base_logits_row_bytes(V);
    patched_copy(good, bad, size - 1, NULL, 0);
    expect_open_error(bad, "expected 3 chunks of 88 bytes (truncated?)");
    patched_copy(good, bad, 3, NULL, 0);
    expect_open_error(bad, "not a base-logits file");
    patched_copy(good, bad, 20, NULL, 0);
    expect_open_error(bad, "truncated header");
    patched_copy(good, bad, 0, "HFQBLOGX", 8);
    expect_open_error(bad, "not a base-logits file");
    const uint32_t v2 = 2, huge_vocab = 1u << 30, rows = 5;
    patched_copy(good, bad, 8, &v2, 4);
    expect_open_error(bad, "base-logits version 2 is not supported");
    patched_copy(good, bad, 12, &huge_vocab, 4);
    expect_open_error(bad, "vocabulary size 1073741824 is out of range");
    patched_copy(good, bad, 48, &rows, 4);
    expect_open_error(bad, "rows per chunk 5 or row size 22 do not match context 10 and vocabulary 7");
    const uint64_t many = (uint64_t)1 << 62;
    patched_copy(good, bad, 24, &many, 8);
    expect_open_error(bad, "chunks of 10 tokens do not fit a text of 35 tokens");
    expect_open_error(tmp_path("absent.hfql"), "cannot open");
    /* rows whose scale or minimum no encoder writes */
    const float nan_scale = NAN, big_scale = 1.0f, pos_min = 0.5f;
    const struct { long at; const float *v; } rows_bad[] = {
        {HFQ_BASE_LOGITS_HEADER_BYTES, &nan_scale},
        {HFQ_BASE_LOGITS_HEADER_BYTES + 22 * 5, &big_scale},       /* chunk 1, row 1 */
        {HFQ_BASE_LOGITS_HEADER_BYTES + 22 * 2 + 4, &pos_min},
    };
    for (size_t i = 0; i < sizeof rows_bad / sizeof rows_bad[0]; i++) {
        patched_copy(good, bad, rows_bad[i].at, rows_bad[i].v, 4);
        hfq_error err = {{0}};
        hfq_base_logits_reader *r = hfq_base_logits_open(bad, &err);
        float got[ROWS * V];
        int rc = 0;
        for (int c = 0; r && c < CHUNKS && rc == 0; c++) rc = hfq_base_logits_read_chunk(r, got, &err);
        CHECK_MSG(r && rc == -1, "bad row %zu read", i);
        CHECK_STR_CONTAINS(err.msg, "are not an encoded row");
        hfq_base_logits_close(r);
    }
}

/* A file as llama-perplexity --kl-divergence-base writes it (odd vocabulary:
 * rows padded by one code). */
static void test_llama_file(void) {
    enum { LV = 5, LCTX = 8, LROWS = LCTX - LCTX / 2 - 1, LCHUNKS = 2, NV = 2 * ((LV + 1) / 2) + 4 };
    float logits[LCHUNKS * LROWS * LV], got[LROWS * LV], want[LROWS * LV];
    random_row(logits, LCHUNKS * LROWS * LV, 20.0);
    const char *path = tmp_path("llama.kld");
    FILE *f = fopen(path, "wb");
    const uint32_t n_ctx = LCTX;
    const int32_t n_vocab = LV, n_chunk = LCHUNKS;
    fwrite("_logits_", 1, 8, f);
    fwrite(&n_ctx, 4, 1, f);
    fwrite(&n_vocab, 4, 1, f);
    fwrite(&n_chunk, 4, 1, f);
    fwrite(text_tokens, 4, LCTX * LCHUNKS, f);
    for (int j = 0; j < LCHUNKS * LROWS; j++) {
        uint16_t row[NV] = {0};
        llama_row(logits + j * LV, LV, row);
        fwrite(row, 2, NV, f);
    }
    fclose(f);
    hfq_error err = {{0}};
    hfq_base_logits_reader *r = hfq_base_logits_open(path, &err);
    CHECK_MSG(r != NULL, "%s", err.msg);
    if (!r) return;
    const hfq_base_logits_info *in = hfq_base_logits_info_get(r);
    CHECK(in->n_vocab == LV && in->n_ctx == LCTX && in->n_chunks == LCHUNKS && in->chunk_tokens != NULL);
    hfq_base_logits_info info = {.n_vocab = LV, .n_ctx = LCTX, .n_chunks = LCHUNKS, .n_text_tokens = TEXT,
                                 .tokens_hash = 99, .bos_id = 1};
    CHECK_MSG(hfq_base_logits_check(r, &info, text_tokens, &err) == 0, "%s", err.msg);
    int32_t other[TEXT];
    memcpy(other, text_tokens, sizeof other);
    other[11] = (other[11] + 1) % LV;
    CHECK(hfq_base_logits_check(r, &info, other, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "saved for another text or tokenizer: token 11 is");
    for (int c = 0; c < LCHUNKS; c++) {
        CHECK(hfq_base_logits_read_chunk(r, got, &err) == 0);
        unsigned char row[8 + 2 * LV];
        for (int j = 0; j < LROWS; j++) {
            hfq_base_logits_encode(logits + (c * LROWS + j) * LV, LV, 1, 1, row);
            hfq_base_logits_decode(row, LV, want + j * LV);
        }
        CHECK(memcmp(got, want, sizeof got) == 0);
    }
    hfq_base_logits_close(r);
    patched_copy(path, tmp_path("llama_cut.kld"), 30, NULL, 0);
    expect_open_error(tmp_path("llama_cut.kld"), "the file is too short");
}

/* Rows encoded together (their sums 8 at a time, on two threads) give
 * each row's bytes alone. */
static void test_encoding_rows(void) {
    enum { R = 21, N = 1013 };
    const int64_t rb = hfq_base_logits_row_bytes(N);
    float *l = malloc((size_t)(R * N) * sizeof *l);
    unsigned char *together = malloc((size_t)(R * rb)), *alone = malloc((size_t)rb);
    for (int r = 0; r < R; r++) random_row(l + r * N, N, r % 3 ? 60.0 : 10.0);
    hfq_base_logits_encode(l, N, R, 2, together);
    for (int r = 0; r < R; r++) {
        hfq_base_logits_encode(l + r * N, N, 1, 1, alone);
        CHECK_MSG(memcmp(together + r * rb, alone, (size_t)rb) == 0, "row %d of %d encoded together differs", r, R);
    }
    free(l), free(together), free(alone);
}

int main(void) {
    rnd_seed(777);
    if (!mkdtemp(dir)) CHECK_SKIP("cannot make a temporary folder");
    test_encoding();
    test_encoding_rows();
    test_round_trip();
    test_writer_errors();
    test_hostile();
    test_llama_file();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_exit();
}
