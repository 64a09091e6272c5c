#include "src/eval/base_logits.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "formats/atomic_file.h"
#include "src/eval/kld.h"

/* The log-probability window kept per row, in nats below the largest. */
#define LOGIT_WINDOW 16.0f
#define CODE_MAX 65535.0f
/* Far above any real vocabulary or context; keeps every product in int64. */
#define MAX_VOCAB ((int64_t)1 << 26)
#define MAX_CTX ((int64_t)1 << 24)

int64_t hfq_base_logits_rows(int64_t n_ctx) { return n_ctx - n_ctx / 2 - 1; }

int64_t hfq_base_logits_row_bytes(int64_t n_vocab) { return 8 + 2 * n_vocab; }

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_f32(unsigned char *p, float f) {
    uint32_t v;
    memcpy(&v, &f, sizeof v);
    put_u32(p, v);
}

static float get_f32(const unsigned char *p) {
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}

uint64_t hfq_tokens_hash(const int32_t *tokens, int64_t n) {
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, 0);
    unsigned char buf[4096];
    size_t used = 0;
    for (int64_t i = 0; i < n; i++) {
        put_u32(buf + used, (uint32_t)tokens[i]);
        if ((used += 4) == sizeof buf) XXH64_update(st, buf, used), used = 0;
    }
    XXH64_update(st, buf, used);
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

/* llama.cpp's rounding of the codes (nearest, ties to even). */
static uint16_t code_of(float v) {
    float r = rintf(v);
    return (uint16_t)(r < 0 ? 0 : r > CODE_MAX ? CODE_MAX : r);
}

/* Rows r < n (<= HFQ_LSE_ROWS) of logits to their stored forms (row_bytes
 * apart from rows): their log-sum-exps together (hfq_log_sum_exp_rows). */
static void encode_rows(const float *logits, int64_t n_vocab, int n, unsigned char *rows) {
    float max[HFQ_LSE_ROWS];
    double log_sum[HFQ_LSE_ROWS];
    hfq_log_sum_exp_rows(logits, n_vocab, n, max, log_sum);
    for (int r = 0; r < n; r++) {
        const float *l = logits + r * n_vocab;
        unsigned char *p = rows + r * hfq_base_logits_row_bytes(n_vocab);
        float lo = l[0];
        for (int64_t i = 1; i < n_vocab; i++) lo = l[i] < lo ? l[i] : lo;
        if (lo < max[r] - LOGIT_WINDOW) lo = max[r] - LOGIT_WINDOW;
        const float lse = (float)log_sum[r], scale = (max[r] - lo) / CODE_MAX;
        put_f32(p, scale);
        put_f32(p + 4, (lo - max[r]) - lse);
        p += 8;
        const float inv_scale = scale > 0 ? 1.0f / scale : 0.0f;
        for (int64_t i = 0; i < n_vocab; i++) {
            const uint16_t c = scale > 0 && l[i] > lo ? code_of(inv_scale * (l[i] - lo)) : 0;
            p[2 * i] = (unsigned char)c;
            p[2 * i + 1] = (unsigned char)(c >> 8);
        }
    }
}

void hfq_base_logits_encode(const float *logits, int64_t n_vocab, int64_t n_rows, int n_threads, void *rows) {
    unsigned char *out = rows;
    #pragma omp parallel for num_threads(n_threads > 0 ? n_threads : omp_get_num_procs()) schedule(static) \
        if (n_rows > HFQ_LSE_ROWS)
    for (int64_t j = 0; j < n_rows; j += HFQ_LSE_ROWS)
        encode_rows(logits + j * n_vocab, n_vocab, (int)(n_rows - j < HFQ_LSE_ROWS ? n_rows - j : HFQ_LSE_ROWS),
                    out + j * hfq_base_logits_row_bytes(n_vocab));
}

void hfq_base_logits_decode(const void *row, int64_t n_vocab, float *logp) {
    const unsigned char *p = row;
    const float scale = get_f32(p), min_logp = get_f32(p + 4);
    p += 8;
    for (int64_t i = 0; i < n_vocab; i++) logp[i] = scale * (float)(p[2 * i] | p[2 * i + 1] << 8) + min_logp;
}

/* ---- header ---- */

static void header_encode(const hfq_base_logits_info *in, unsigned char h[HFQ_BASE_LOGITS_HEADER_BYTES]) {
    memcpy(h, HFQ_BASE_LOGITS_MAGIC, 8);
    put_u32(h + 8, HFQ_BASE_LOGITS_VERSION);
    put_u32(h + 12, (uint32_t)in->n_vocab);
    put_u32(h + 16, (uint32_t)in->n_ctx);
    put_u32(h + 20, (uint32_t)in->bos_id);
    put_u64(h + 24, (uint64_t)in->n_chunks);
    put_u64(h + 32, (uint64_t)in->n_text_tokens);
    put_u64(h + 40, in->tokens_hash);
    put_u32(h + 48, (uint32_t)hfq_base_logits_rows(in->n_ctx));
    put_u32(h + 52, (uint32_t)hfq_base_logits_row_bytes(in->n_vocab));
}

/* Checks what a header says against the limits; -1 with err naming path. */
static int info_check(const hfq_base_logits_info *in, const char *path, hfq_error *err) {
    if (in->n_vocab < 1 || in->n_vocab > MAX_VOCAB)
        return hfq_fail(err, path, "vocabulary size %lld is out of range [1, %lld]", (long long)in->n_vocab,
                        (long long)MAX_VOCAB);
    if (in->n_ctx < 4 || in->n_ctx > MAX_CTX)
        return hfq_fail(err, path, "context %lld is out of range [4, %lld]", (long long)in->n_ctx, (long long)MAX_CTX);
    if (in->bos_id < -1 || in->bos_id >= in->n_vocab)
        return hfq_fail(err, path, "BOS id %d is outside the vocabulary", (int)in->bos_id);
    if (in->n_chunks < 1 || in->n_text_tokens < 0 || in->n_chunks > in->n_text_tokens / in->n_ctx)
        return hfq_fail(err, path, "%lld chunks of %lld tokens do not fit a text of %lld tokens",
                        (long long)in->n_chunks, (long long)in->n_ctx, (long long)in->n_text_tokens);
    return 0;
}

static int64_t chunk_bytes(const hfq_base_logits_info *in) {
    return hfq_base_logits_rows(in->n_ctx) * hfq_base_logits_row_bytes(in->n_vocab);
}

/* ---- writer ---- */

struct hfq_base_logits_writer {
    hfq_atomic_file file;
    hfq_base_logits_info info;
    int64_t chunks_written;
    unsigned char *buf;     /* one chunk of rows */
};

hfq_base_logits_writer *hfq_base_logits_create(const char *path, const hfq_base_logits_info *info, hfq_error *err) {
    if (info_check(info, path, err)) return NULL;
    hfq_base_logits_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->buf = malloc((size_t)chunk_bytes(info)))) {
        free(w);
        hfq_fail(err, path, "out of memory for the base logits");
        return NULL;
    }
    w->info = *info;
    unsigned char h[HFQ_BASE_LOGITS_HEADER_BYTES];
    header_encode(info, h);
    if (hfq_atomic_open(&w->file, path, err) || hfq_atomic_write(&w->file, h, sizeof h, err)) {
        hfq_base_logits_abort(w);
        return NULL;
    }
    return w;
}

int hfq_base_logits_write_chunk(hfq_base_logits_writer *w, const float *logits, int n_threads, hfq_error *err) {
    const int64_t rows = hfq_base_logits_rows(w->info.n_ctx), n_vocab = w->info.n_vocab;
    const int64_t row_bytes = hfq_base_logits_row_bytes(n_vocab);
    if (w->chunks_written >= w->info.n_chunks)
        return hfq_fail(err, w->file.path, "more chunks than the %lld announced", (long long)w->info.n_chunks);
    hfq_base_logits_encode(logits, n_vocab, rows, n_threads, w->buf);
    if (hfq_atomic_write(&w->file, w->buf, (size_t)(rows * row_bytes), err)) return -1;
    w->chunks_written++;
    return 0;
}

int hfq_base_logits_commit(hfq_base_logits_writer *w, hfq_error *err) {
    int rc;
    if (w->chunks_written != w->info.n_chunks) {
        rc = hfq_fail(err, w->file.path, "%lld of %lld chunks written", (long long)w->chunks_written,
                      (long long)w->info.n_chunks);
        hfq_atomic_abort(&w->file);
    } else {
        rc = hfq_atomic_commit(&w->file, err);
    }
    free(w->buf);
    free(w);
    return rc;
}

void hfq_base_logits_abort(hfq_base_logits_writer *w) {
    if (!w) return;
    hfq_atomic_abort(&w->file);
    free(w->buf);
    free(w);
}

/* ---- reader ---- */

#define LLAMA_MAGIC "_logits_"
#define LLAMA_HEADER_BYTES 20

struct hfq_base_logits_reader {
    char *path;
    FILE *fp;
    hfq_base_logits_info info;
    int64_t row_bytes;      /* stored: ours 8 + 2 n_vocab, llama.cpp's padded to 4 bytes */
    int64_t chunks_read;
    int32_t *tokens;        /* llama.cpp's files: info.chunk_tokens */
    unsigned char *buf;     /* one chunk of rows */
};

void hfq_base_logits_close(hfq_base_logits_reader *r) {
    if (!r) return;
    if (r->fp) fclose(r->fp);
    free(r->tokens);
    free(r->buf);
    free(r->path);
    free(r);
}

const hfq_base_logits_info *hfq_base_logits_info_get(const hfq_base_logits_reader *r) { return &r->info; }

/* The file holds exactly header_bytes then n_chunks chunks of rows. */
static int check_size(const hfq_base_logits_reader *r, int64_t header_bytes, hfq_error *err) {
    struct stat st;
    if (fstat(fileno(r->fp), &st) != 0) return hfq_fail(err, r->path, "cannot stat: %s", strerror(errno));
    const int64_t per_chunk = hfq_base_logits_rows(r->info.n_ctx) * r->row_bytes;
    const int64_t data = (int64_t)st.st_size - header_bytes;
    if (data != per_chunk * r->info.n_chunks)   /* n_chunks <= n_text_tokens / n_ctx: no overflow */
        return hfq_fail(err, r->path, "holds %lld bytes of rows, expected %lld chunks of %lld bytes (truncated?)",
                        (long long)data, (long long)r->info.n_chunks, (long long)per_chunk);
    return 0;
}

static int read_header(hfq_base_logits_reader *r, unsigned char *h, hfq_error *err) {
    const char *path = r->path;
    if (fread(h + 8, 1, HFQ_BASE_LOGITS_HEADER_BYTES - 8, r->fp) != HFQ_BASE_LOGITS_HEADER_BYTES - 8)
        return hfq_fail(err, path, "truncated header");
    if (get_u32(h + 8) != HFQ_BASE_LOGITS_VERSION)
        return hfq_fail(err, path, "base-logits version %u is not supported (this build reads %u)", get_u32(h + 8),
                        HFQ_BASE_LOGITS_VERSION);
    hfq_base_logits_info *in = &r->info;
    const uint64_t chunks = get_u64(h + 24), text_tokens = get_u64(h + 32);
    *in = (hfq_base_logits_info){.n_vocab = get_u32(h + 12), .n_ctx = get_u32(h + 16),
                                 .bos_id = (int32_t)get_u32(h + 20),
                                 .n_chunks = chunks > INT64_MAX ? -1 : (int64_t)chunks,
                                 .n_text_tokens = text_tokens > INT64_MAX ? -1 : (int64_t)text_tokens,
                                 .tokens_hash = get_u64(h + 40)};
    if (info_check(in, path, err)) return -1;
    r->row_bytes = hfq_base_logits_row_bytes(in->n_vocab);
    if (get_u32(h + 48) != (uint32_t)hfq_base_logits_rows(in->n_ctx) || get_u32(h + 52) != (uint32_t)r->row_bytes)
        return hfq_fail(err, path, "rows per chunk %u or row size %u do not match context %lld and vocabulary %lld",
                        get_u32(h + 48), get_u32(h + 52), (long long)in->n_ctx, (long long)in->n_vocab);
    return check_size(r, HFQ_BASE_LOGITS_HEADER_BYTES, err);
}

/* llama.cpp's header (after the magic) and the evaluated tokens. */
static int read_llama_header(hfq_base_logits_reader *r, unsigned char *h, hfq_error *err) {
    const char *path = r->path;
    if (fread(h + 8, 1, LLAMA_HEADER_BYTES - 8, r->fp) != LLAMA_HEADER_BYTES - 8)
        return hfq_fail(err, path, "truncated llama.cpp log-probabilities header");
    hfq_base_logits_info *in = &r->info;
    *in = (hfq_base_logits_info){.n_ctx = get_u32(h + 8), .n_vocab = (int32_t)get_u32(h + 12),
                                 .n_chunks = (int32_t)get_u32(h + 16), .n_text_tokens = -1, .bos_id = -1};
    if (in->n_vocab < 1 || in->n_vocab > MAX_VOCAB || in->n_ctx < 4 || in->n_ctx > MAX_CTX || in->n_chunks < 1)
        return hfq_fail(err, path, "llama.cpp header: vocabulary %lld, context %lld, %lld chunks are out of range",
                        (long long)in->n_vocab, (long long)in->n_ctx, (long long)in->n_chunks);
    const int64_t n_tokens = in->n_ctx * in->n_chunks;   /* < 2^24 * 2^31 */
    struct stat st;
    if (fstat(fileno(r->fp), &st) != 0) return hfq_fail(err, path, "cannot stat: %s", strerror(errno));
    if (n_tokens > ((int64_t)st.st_size - LLAMA_HEADER_BYTES) / 4)
        return hfq_fail(err, path, "llama.cpp header announces %lld tokens; the file is too short", (long long)n_tokens);
    if (!(r->tokens = malloc((size_t)n_tokens * sizeof *r->tokens)))
        return hfq_fail(err, path, "out of memory for %lld tokens", (long long)n_tokens);
    unsigned char buf[4096];
    for (int64_t i = 0; i < n_tokens;) {
        const size_t n = (size_t)(n_tokens - i < 1024 ? n_tokens - i : 1024);
        if (fread(buf, 4, n, r->fp) != n) return hfq_fail(err, path, "truncated token ids");
        for (size_t j = 0; j < n; j++, i++) r->tokens[i] = (int32_t)get_u32(buf + 4 * j);
    }
    in->chunk_tokens = r->tokens;
    r->row_bytes = 2 * (2 * ((in->n_vocab + 1) / 2) + 4);
    return check_size(r, LLAMA_HEADER_BYTES + 4 * n_tokens, err);
}

hfq_base_logits_reader *hfq_base_logits_open(const char *path, hfq_error *err) {
    hfq_base_logits_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        hfq_fail(err, path, "out of memory");
        return NULL;
    }
    if (!(r->fp = fopen(path, "rb"))) {
        hfq_fail(err, path, "cannot open: %s", strerror(errno));
        hfq_base_logits_close(r);
        return NULL;
    }
    unsigned char h[HFQ_BASE_LOGITS_HEADER_BYTES];
    const bool ok = fread(h, 1, 8, r->fp) == 8;
    if (!ok || (memcmp(h, HFQ_BASE_LOGITS_MAGIC, 8) != 0 && memcmp(h, LLAMA_MAGIC, 8) != 0)) {
        hfq_fail(err, path, "not a base-logits file (ppl-eval --save-logits or llama-perplexity "
                 "--kl-divergence-base writes them)");
        hfq_base_logits_close(r);
        return NULL;
    }
    if (memcmp(h, LLAMA_MAGIC, 8) == 0 ? read_llama_header(r, h, err) : read_header(r, h, err)) {
        hfq_base_logits_close(r);
        return NULL;
    }
    if (!(r->buf = malloc((size_t)(hfq_base_logits_rows(r->info.n_ctx) * r->row_bytes)))) {
        hfq_fail(err, path, "out of memory for a chunk of base logits");
        hfq_base_logits_close(r);
        return NULL;
    }
    return r;
}

/* llama.cpp's files: the tokens of the chunks evaluated are the text's. */
static int check_chunk_tokens(const hfq_base_logits_reader *r, const hfq_base_logits_info *want,
                              const int32_t *text_tokens, hfq_error *err) {
    const int64_t n = want->n_chunks * want->n_ctx;
    for (int64_t i = 0; i < n; i++)
        if (r->tokens[i] != text_tokens[i])
            return hfq_fail(err, r->path, "saved for another text or tokenizer: token %lld is %d, this text's is %d",
                            (long long)i, (int)r->tokens[i], (int)text_tokens[i]);
    return 0;
}

int hfq_base_logits_check(const hfq_base_logits_reader *r, const hfq_base_logits_info *want,
                          const int32_t *text_tokens, hfq_error *err) {
    const hfq_base_logits_info *in = &r->info;
    if (in->n_vocab != want->n_vocab)
        return hfq_fail(err, r->path, "saved for a vocabulary of %lld tokens; the model has %lld",
                        (long long)in->n_vocab, (long long)want->n_vocab);
    if (in->n_ctx != want->n_ctx)
        return hfq_fail(err, r->path, "saved with a context of %lld; this run uses %lld (--ctx)",
                        (long long)in->n_ctx, (long long)want->n_ctx);
    if (in->n_chunks < want->n_chunks)
        return hfq_fail(err, r->path, "holds %lld chunks; %lld asked for (--chunks)", (long long)in->n_chunks,
                        (long long)want->n_chunks);
    if (in->chunk_tokens) return check_chunk_tokens(r, want, text_tokens, err);
    if (in->n_text_tokens != want->n_text_tokens || in->tokens_hash != want->tokens_hash)
        return hfq_fail(err, r->path,
                        "saved for another text or tokenizer: %lld tokens, hash %016llx; this text gives %lld tokens, "
                        "hash %016llx",
                        (long long)in->n_text_tokens, (unsigned long long)in->tokens_hash,
                        (long long)want->n_text_tokens, (unsigned long long)want->tokens_hash);
    if (in->bos_id != want->bos_id)
        return hfq_fail(err, r->path, "saved with BOS id %d first in every chunk; this model uses %d",
                        (int)in->bos_id, (int)want->bos_id);
    return 0;
}

/* What encode can write: 0 <= scale <= 16 / 65535; the largest log-prob
 * (scale * 65535 + min) is -lse <= 0 and the smallest at least
 * -16 - log(n_vocab) (lse <= log n_vocab); slack for float rounding. */
static bool row_valid(float scale, float min_logp, int64_t n_vocab) {
    const double slack = 1e-3;
    return isfinite(scale) && isfinite(min_logp) && scale >= 0 && scale * CODE_MAX <= LOGIT_WINDOW + slack &&
           min_logp >= -(LOGIT_WINDOW + log((double)n_vocab) + slack) && scale * CODE_MAX + min_logp <= slack;
}

int hfq_base_logits_read_chunk(hfq_base_logits_reader *r, float *logp, hfq_error *err) {
    const int64_t rows = hfq_base_logits_rows(r->info.n_ctx), n_vocab = r->info.n_vocab, row_bytes = r->row_bytes;
    if (r->chunks_read >= r->info.n_chunks)
        return hfq_fail(err, r->path, "all %lld chunks already read", (long long)r->info.n_chunks);
    if (fread(r->buf, 1, (size_t)(rows * row_bytes), r->fp) != (size_t)(rows * row_bytes))
        return hfq_fail(err, r->path, "chunk %lld: read failed", (long long)r->chunks_read);
    for (int64_t j = 0; j < rows; j++) {
        const unsigned char *row = r->buf + j * row_bytes;
        const float scale = get_f32(row), min_logp = get_f32(row + 4);
        if (!row_valid(scale, min_logp, n_vocab))
            return hfq_fail(err, r->path, "chunk %lld row %lld: scale %g and minimum %g are not an encoded row",
                            (long long)r->chunks_read, (long long)j, scale, min_logp);
        hfq_base_logits_decode(row, n_vocab, logp + j * n_vocab);
    }
    r->chunks_read++;
    return 0;
}
