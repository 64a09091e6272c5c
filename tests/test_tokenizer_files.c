/* Tokenizer files: the SentencePiece protobuf reader (hand-assembled models,
 * hostile bytes, truncations and corruptions of the fixture) and
 * hfq_vocab_from_dir on hand-written tokenizer folders (what it reads, what it
 * refuses, with one-line errors naming the file). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "src/common/read_file.h"
#include "src/tokenizer/spm_proto.h"
#include "src/tokenizer/vocab.h"

/* ---- protobuf assembly ---- */

typedef struct pbw {
    uint8_t b[4096];
    size_t n;
} pbw;

static void put_varint(pbw *w, uint64_t v) {
    do {
        w->b[w->n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
}
static void put_key(pbw *w, uint32_t field, int wire) { put_varint(w, (uint64_t)field << 3 | (uint64_t)wire); }
static void put_bytes(pbw *w, uint32_t field, const void *p, size_t n) {
    put_key(w, field, 2);
    put_varint(w, n);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void put_msg(pbw *w, uint32_t field, const pbw *m) { put_bytes(w, field, m->b, m->n); }
static void put_int(pbw *w, uint32_t field, int64_t v) {
    put_key(w, field, 0);
    put_varint(w, (uint64_t)v);   /* negative int32: ten-byte two's complement */
}

static void piece(pbw *model, const char *text, float score, int type) {
    pbw p = {0};
    put_bytes(&p, 1, text, strlen(text));
    if (score != 0) {
        put_key(&p, 2, 5);
        memcpy(p.b + p.n, &score, 4);
        p.n += 4;
    }
    if (type) put_int(&p, 3, type);
    put_msg(model, 1, &p);
}

/* <unk>, a, ▁ ; BPE, byte_fallback, pad_id -1, an unknown fixed64 field;
 * identity normalizer without dummy prefix. */
static void build_model(pbw *m) {
    memset(m, 0, sizeof *m);
    piece(m, "<unk>", 0, SPM_UNKNOWN);
    piece(m, "a", -1.5f, 0);
    piece(m, "\xe2\x96\x81", -2.0f, SPM_NORMAL);
    pbw t = {0};
    put_int(&t, 3, SPM_MODEL_BPE);
    put_int(&t, 35, 1);
    put_int(&t, 43, -1);
    put_int(&t, 41, -1);
    put_int(&t, 42, -1);
    put_key(&t, 99, 1);
    memset(t.b + t.n, 0xAB, 8);
    t.n += 8;
    put_msg(m, 2, &t);
    pbw nz = {0};
    put_bytes(&nz, 1, "identity", 8);
    put_int(&nz, 3, 0);
    put_int(&nz, 4, 0);
    put_msg(m, 3, &nz);
}

static void test_spm_parse(void) {
    pbw m;
    build_model(&m);
    hfq_spm_model s;
    hfq_error err;
    CHECK(hfq_spm_parse(m.b, m.n, "mem", &s, &err) == 0);
    CHECK(s.n_pieces == 3 && !strcmp(s.pieces[0].text, "<unk>") && s.pieces[0].type == SPM_UNKNOWN);
    CHECK(s.pieces[1].type == SPM_NORMAL && s.pieces[1].score == -1.5f && s.pieces[1].len == 1);
    CHECK(s.pieces[2].len == 3 && s.pieces[2].score == -2.0f);
    CHECK(s.model_type == SPM_MODEL_BPE && s.byte_fallback && s.pad_id == -1 && s.unk_id == 0);
    CHECK(!strcmp(s.normalizer_name, "identity") && !s.add_dummy_prefix && !s.remove_extra_whitespaces &&
          s.escape_whitespaces && s.precompiled_charsmap_len == 0);
    hfq_spm_free(&s);

    /* every truncation of the message fails cleanly or parses a prefix of it */
    for (size_t n = 0; n < m.n; n++) {
        int rc = hfq_spm_parse(m.b, n, "mem", &s, &err);
        if (rc == 0) {
            CHECK(s.n_pieces >= 1 && s.n_pieces <= 3);
            hfq_spm_free(&s);
        } else {
            CHECK_STR_CONTAINS(err.msg, "mem: ");
        }
    }
    CHECK(hfq_spm_parse(m.b, m.n - 1, "mem", &s, &err) != 0);

    static const struct { uint8_t bytes[16]; size_t n; const char *msg; } bad[] = {
        {{0x0B}, 1, "wire type 3"},                                   /* group start */
        {{0x0A, 0x05, 0x0A}, 3, "runs past the end"},                 /* length beyond the data */
        {{0x0A, 0x04, 0x0A, 0x02, 0xC3, 0x28}, 6, "not valid UTF-8"},
        {{0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x07}, 7, "unknown type 7"},
        {{0x0A, 0x02, 0x18, 0x01}, 4, "has no text"},
        {{0x12, 0x00}, 2, "no pieces"},
        {{0x0A, 0x03, 0x0A, 0x01, 'a', 0x12, 0x03, 0xC8, 0x02, 0x05}, 10, "bos_id = 5"},
        {{0x0A, 0x0B, 0x0A, 0x01, 'a', 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, 14, "truncated varint"},
        {{0x00}, 1, "bad field number"},
        {{0x1A, 0x02, 0x08, 0x01}, 4, "wire type 0"},                 /* normalizer name as a varint */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = hfq_spm_parse(bad[i].bytes, bad[i].n, "bad.model", &s, &err);
        CHECK_MSG(rc != 0, "bad case %zu accepted", i);
        if (rc == 0) {
            hfq_spm_free(&s);
            continue;
        }
        CHECK_STR_CONTAINS(err.msg, "bad.model: ");
        CHECK_STR_CONTAINS(err.msg, bad[i].msg);
    }
}

/* The fixture model: its known fields, and no crash on truncations and corruptions. */
static void test_spm_fixture(void) {
    const char *fix = getenv("HFQ_FIXTURES");
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K/tokenizer.model", fix ? fix : ".");
    char *data;
    size_t len;
    hfq_error err;
    if (!fix || hfq_read_file(path, 1 << 20, &data, &len, &err)) {
        printf("stories260K tokenizer.model not found: fixture checks skipped\n");
        return;
    }
    hfq_spm_model s;
    CHECK(hfq_spm_parse(data, len, path, &s, &err) == 0);
    CHECK(s.n_pieces == 512 && s.model_type == SPM_MODEL_BPE && s.byte_fallback && s.bos_id == 1 &&
          s.eos_id == 2 && s.unk_id == 0 && s.add_dummy_prefix && !s.remove_extra_whitespaces);
    CHECK(s.pieces[3].type == SPM_BYTE && !strcmp(s.pieces[3].text, "<0x00>"));
    hfq_spm_free(&s);
    for (size_t n = 0; n < len; n += 37) {
        if (hfq_spm_parse(data, n, path, &s, &err) == 0) hfq_spm_free(&s);
    }
    uint32_t x = 2463534242u;
    for (int k = 0; k < 400; k++) {
        char *copy = malloc(len);
        memcpy(copy, data, len);
        for (int j = 0; j < 3; j++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            copy[x % len] ^= (char)(1u << (x >> 29));
        }
        if (hfq_spm_parse(copy, len, path, &s, &err) == 0) hfq_spm_free(&s);
        free(copy);
    }
    free(data);
}

/* ---- tokenizer folders ---- */

static char dir[] = "/tmp/hfq_tok_files_XXXXXX";

static void put_file(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void clear_dir(void) {
    static const char *names[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
}

static void expect_refused(const char *file, const char *msg) {
    hfq_error err;
    hfq_vocab *v = hfq_vocab_from_dir(dir, &err);
    CHECK_MSG(v == NULL, "accepted, expected \"%s\"", msg);
    hfq_vocab_free(v);
    if (v) return;
    CHECK_STR_CONTAINS(err.msg, file);
    CHECK_STR_CONTAINS(err.msg, msg);
    CHECK_MSG(strchr(err.msg, '\n') == NULL, "multi-line message: %s", err.msg);
}

#define LLAMA3_REGEX \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| " \
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

static const char BYTE_LEVEL_JSON[] =
    "{\"added_tokens\": [{\"id\": 5, \"content\": \"<|bos|>\", \"special\": true},"
    "  {\"id\": 6, \"content\": \"<|eos|>\", \"special\": true},"
    "  {\"id\": 7, \"content\": \"<think>\", \"special\": false}],"
    " \"normalizer\": null,"
    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
    "  {\"type\": \"Split\", \"pattern\": {\"Regex\": \"" LLAMA3_REGEX "\"}, \"behavior\": \"Isolated\","
    "   \"invert\": false},"
    "  {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
    " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3, \"\\u0120a\": 4},"
    "  \"merges\": [[\"a\", \"b\"], \"\\u0120 a\"]}}";

static void test_from_dir(void) {
    hfq_error err;
    clear_dir();
    expect_refused(dir, "no tokenizer.model or tokenizer.json");
    put_file("tokenizer.json", "{");
    expect_refused("tokenizer.json", "invalid JSON");
    put_file("tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}");
    expect_refused("tokenizer.json", "\"WordPiece\" is not supported");
    put_file("tokenizer.json", "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true},"
                               " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
    expect_refused("tokenizer.json", "unsupported pre-tokenizer");
    put_file("tokenizer.json", "{\"normalizer\": {\"type\": \"NFKC\"}, \"model\": {\"type\": \"BPE\", "
                               "\"byte_fallback\": true, \"vocab\": {\"a\": 0}, \"merges\": []}}");
    expect_refused("tokenizer.json", "unsupported normalizer");
    put_file("tokenizer.json", "{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
                               "\"content\": \"\\u2581\"}, \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, "
                               "\"vocab\": {\"a\": 0, \"b\": 2}, \"merges\": []}}");
    expect_refused("tokenizer.json", "token id 1 is neither");
    put_file("tokenizer.json", "{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
                               "\"content\": \"\\u2581\"}, \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, "
                               "\"vocab\": {\"a\": 0.5}}}");
    expect_refused("tokenizer.json", "model.vocab: bad id");
    put_file("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {\"a\": 0}}}");
    expect_refused("tokenizer.json", "dropout");

    /* a complete byte-level folder */
    put_file("tokenizer.json", BYTE_LEVEL_JSON);
    put_file("tokenizer_config.json", "{\"bos_token\": \"<|bos|>\", \"eos_token\": {\"content\": \"<|eos|>\"},"
                                      " \"add_bos_token\": false, \"chat_template\": \"{{ x }}\"}");
    put_file("config.json", "{\"vocab_size\": 10, \"pad_token_id\": 3}");
    hfq_vocab *v = hfq_vocab_from_dir(dir, &err);
    CHECK_MSG(v != NULL, "%s", v ? "" : err.msg);
    if (v) {
        CHECK(!strcmp(v->model, "gpt2") && !strcmp(v->pre, "llama-bpe") && v->n_tokens == 10 && !v->scores);
        CHECK(v->bos_id == 5 && v->eos_id == 6 && v->pad_id == 3 && v->unk_id == -1);
        CHECK(!v->add_bos && !v->add_eos && !v->add_space_prefix);
        CHECK(v->chat_template && !strcmp(v->chat_template, "{{ x }}"));
        CHECK(v->token_types[5] == HFQ_TOKEN_CONTROL && v->token_types[7] == HFQ_TOKEN_USER_DEFINED &&
              v->token_types[2] == HFQ_TOKEN_NORMAL);
        CHECK(v->token_types[9] == HFQ_TOKEN_UNUSED && !strcmp(v->tokens[9], "[PAD9]"));
        CHECK(v->n_merges == 2 && !strcmp(v->merges[0], "a b") && !strcmp(v->merges[1], "\xc4\xa0 a"));
    }
    hfq_vocab_free(v);
    /* the Qwen2 regex needs its NFC normalizer */
    clear_dir();
    char *qwen = strdup(BYTE_LEVEL_JSON);
    char *p = strstr(qwen, "\\\\p{N}{1,3}");
    memmove(p + 6, p + 11, strlen(p + 11) + 1);   /* drop {1,3} */
    put_file("tokenizer.json", qwen);
    expect_refused("tokenizer.json", "unsupported pre-tokenizer regex");
    free(qwen);

    /* SentencePiece: only BPE models */
    clear_dir();
    pbw t = {0}, model = {0};
    piece(&model, "<unk>", 0, SPM_UNKNOWN);
    piece(&model, "a", 0, 0);
    put_int(&t, 3, SPM_MODEL_UNIGRAM);
    put_int(&t, 41, -1);
    put_int(&t, 42, -1);
    put_msg(&model, 2, &t);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(model.b, 1, model.n, f) == model.n);
    if (f) fclose(f);
    expect_refused("tokenizer.model", "only BPE models");
    clear_dir();
}

int main(void) {
    test_spm_parse();
    test_spm_fixture();
    if (!mkdtemp(dir)) CHECK_SKIP("cannot create a temporary folder");
    test_from_dir();
    rmdir(dir);
    return check_exit();
}
