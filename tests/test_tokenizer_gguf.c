/* Vocabulary <-> GGUF: round trips (a hand-made vocabulary and, when present,
 * every fixture tokenizer) and hostile files: each defect must give a
 * one-line error naming the file and the key, never a crash. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "formats/gguf.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/vocab.h"

static char tmpdir[] = "/tmp/hfq_tok_gguf_XXXXXX";
static char out_path[256];

/* Writes w (consumed) to out_path. */
static int write_gguf(gguf_writer *w) {
    hfq_error err;
    int rc = gguf_writer_begin(w, out_path, &err) || gguf_writer_finish(w, &err);
    if (rc) fprintf(stderr, "writing %s: %s\n", out_path, err.msg);
    gguf_writer_free(w);
    return rc;
}

/* Reads out_path's vocabulary (NULL with err on failure). */
static hfq_vocab *read_vocab(hfq_error *err) {
    gguf_file *f = gguf_open(out_path, err);
    if (!f) return NULL;
    hfq_vocab *v = hfq_vocab_from_gguf(f, err);
    gguf_close(f);
    return v;
}

static void check_same(const hfq_vocab *a, const hfq_vocab *b, const char *what) {
    CHECK_MSG(!strcmp(a->model, b->model) && !strcmp(a->pre, b->pre), "%s: model/pre", what);
    CHECK_MSG(a->n_tokens == b->n_tokens && a->n_merges == b->n_merges, "%s: counts", what);
    if (a->n_tokens != b->n_tokens || a->n_merges != b->n_merges) return;
    int64_t bad = -1;
    for (int64_t i = 0; i < a->n_tokens && bad < 0; i++) {
        if (a->token_lens[i] != b->token_lens[i] || memcmp(a->tokens[i], b->tokens[i], a->token_lens[i]) ||
            a->token_types[i] != b->token_types[i] || !a->scores != !b->scores ||
            (a->scores && a->scores[i] != b->scores[i]))
            bad = i;
    }
    CHECK_MSG(bad < 0, "%s: token %lld differs", what, (long long)bad);
    for (int64_t i = 0; i < a->n_merges; i++)
        CHECK_MSG(!strcmp(a->merges[i], b->merges[i]), "%s: merge %lld", what, (long long)i);
    CHECK_MSG(a->bos_id == b->bos_id && a->eos_id == b->eos_id && a->unk_id == b->unk_id && a->pad_id == b->pad_id &&
              a->sep_id == b->sep_id, "%s: special ids", what);
    CHECK_MSG(a->add_bos == b->add_bos && a->add_eos == b->add_eos && a->add_space_prefix == b->add_space_prefix,
              "%s: flags", what);
    CHECK_MSG(!a->chat_template == !b->chat_template &&
              (!a->chat_template || !strcmp(a->chat_template, b->chat_template)), "%s: chat template", what);
}

static void round_trip(const hfq_vocab *v, const char *what) {
    hfq_error err;
    gguf_writer *w = gguf_writer_new();
    CHECK(w && hfq_vocab_to_gguf(v, w, &err) == 0);
    if (!w || write_gguf(w)) return;
    hfq_vocab *back = read_vocab(&err);
    CHECK_MSG(back != NULL, "%s: %s", what, err.msg);
    if (back) check_same(v, back, what);
    hfq_vocab_free(back);
}

/* A small "llama" vocabulary with every kind of field set. */
static hfq_vocab *small_vocab(void) {
    static const char *texts[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "<0x0A>", "\xe2\x96\x81"};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 6, 1};
    hfq_error err;
    hfq_vocab *v = hfq_vocab_new("small", "llama", "default", &err);
    if (!v || hfq_vocab_resize(v, 8, true, &err)) return v;
    for (int i = 0; i < 8; i++) {
        hfq_vocab_set_token(v, i, texts[i], strlen(texts[i]), types[i], &err);
        v->scores[i] = -(float)i * 0.5f;
    }
    hfq_vocab_add_merge(v, "a b", 3, &err);
    v->unk_id = 0;
    v->bos_id = 1;
    v->eos_id = 2;
    v->pad_id = 0;
    v->add_bos = true;
    v->add_eos = true;
    v->add_space_prefix = false;
    v->chat_template = strdup("{{ messages }}");
    return v;
}

static void test_round_trips(void) {
    hfq_vocab *v = small_vocab();
    CHECK(v != NULL);
    if (v) round_trip(v, "small vocabulary");
    hfq_vocab_free(v);

    const char *fix = getenv("HFQ_FIXTURES");
    static const char *dirs[] = {"tokenizers/llama3", "tokenizers/qwen3", "tokenizers/llama2", "models/stories260K",
                                 "models/TinyStories-656K"};
    for (size_t i = 0; fix && i < sizeof dirs / sizeof dirs[0]; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", fix, dirs[i]);
        if (access(dir, R_OK) != 0) continue;
        hfq_error err;
        v = hfq_vocab_from_dir(dir, &err);
        CHECK_MSG(v != NULL, "%s: %s", dir, err.msg);
        if (v) round_trip(v, dirs[i]);
        hfq_vocab_free(v);
    }
}

/* ---- hostile files ---- */

typedef enum defect {
    D_NONE, D_NO_MODEL, D_MODEL_U32, D_MODEL_BERT, D_NO_TOKENS, D_TOKENS_I32, D_TOKENS_EMPTY, D_SCORES_SHORT,
    D_SCORES_STR, D_TYPE_BAD, D_TYPES_U8, D_BOS_RANGE, D_BOS_STRING, D_BOS_NEG, D_ADD_BOS_U8, D_DUP_TOKEN,
    D_EMPTY_TOKEN, D_MERGE_NO_SPACE, D_TEMPLATE_U32, D_COUNT
} defect;

/* Writes a 3-token "llama" vocabulary ("a", "b", "ab") with one defect. */
static void write_defective(defect d) {
    gguf_writer *w = gguf_writer_new();
    const char *toks[] = {"a", d == D_DUP_TOKEN ? "a" : "b", d == D_EMPTY_TOKEN ? "" : "ab"};
    float scores[3] = {0, 0, -1};
    int32_t types[3] = {1, 1, d == D_TYPE_BAD ? 9 : 1};
    uint8_t types8[3] = {1, 1, 1};
    if (d == D_MODEL_U32) gguf_set_u32(w, HFQ_KEY_TOK_MODEL, 1);
    else if (d != D_NO_MODEL) gguf_set_str(w, HFQ_KEY_TOK_MODEL, d == D_MODEL_BERT ? "bert" : "llama");
    if (d == D_TOKENS_I32) gguf_set_arr(w, HFQ_KEY_TOKENS, GGUF_VT_INT32, types, 3);
    else if (d == D_TOKENS_EMPTY) gguf_set_arr_str(w, HFQ_KEY_TOKENS, toks, NULL, 0);
    else if (d != D_NO_TOKENS) gguf_set_arr_str(w, HFQ_KEY_TOKENS, toks, NULL, 3);
    if (d == D_SCORES_STR) gguf_set_arr_str(w, HFQ_KEY_SCORES, toks, NULL, 3);
    else gguf_set_arr(w, HFQ_KEY_SCORES, GGUF_VT_FLOAT32, scores, d == D_SCORES_SHORT ? 2 : 3);
    if (d == D_TYPES_U8) gguf_set_arr(w, HFQ_KEY_TOKEN_TYPE, GGUF_VT_UINT8, types8, 3);
    else gguf_set_arr(w, HFQ_KEY_TOKEN_TYPE, GGUF_VT_INT32, types, 3);
    if (d == D_BOS_RANGE) gguf_set_u32(w, HFQ_KEY_BOS_ID, 3);
    if (d == D_BOS_STRING) gguf_set_str(w, HFQ_KEY_BOS_ID, "1");
    if (d == D_BOS_NEG) gguf_set_i32(w, HFQ_KEY_BOS_ID, -1);
    if (d == D_ADD_BOS_U8) gguf_set_u8(w, HFQ_KEY_ADD_BOS, 1);
    const char *merges[] = {d == D_MERGE_NO_SPACE ? "ab" : "a b"};
    gguf_set_arr_str(w, HFQ_KEY_MERGES, merges, NULL, 1);
    if (d == D_TEMPLATE_U32) gguf_set_u32(w, HFQ_KEY_CHAT_TEMPLATE, 7);
    write_gguf(w);
}

static void test_hostile(void) {
    static const struct { defect d; const char *key, *msg; } cases[] = {
        {D_NO_MODEL, HFQ_KEY_TOK_MODEL, "missing"},
        {D_MODEL_U32, HFQ_KEY_TOK_MODEL, "expected a string"},
        {D_MODEL_BERT, HFQ_KEY_TOK_MODEL, "unsupported tokenizer model"},
        {D_NO_TOKENS, HFQ_KEY_TOKENS, "missing"},
        {D_TOKENS_I32, HFQ_KEY_TOKENS, "expected an array of"},
        {D_TOKENS_EMPTY, HFQ_KEY_TOKENS, "bad token count 0"},
        {D_SCORES_SHORT, HFQ_KEY_SCORES, "2 elements for 3 tokens"},
        {D_SCORES_STR, HFQ_KEY_SCORES, "expected an array of"},
        {D_TYPE_BAD, HFQ_KEY_TOKEN_TYPE, "invalid token type 9"},
        {D_TYPES_U8, HFQ_KEY_TOKEN_TYPE, "expected an array of"},
        {D_BOS_RANGE, HFQ_KEY_BOS_ID, "outside the vocabulary"},
        {D_BOS_STRING, HFQ_KEY_BOS_ID, ""},
        {D_BOS_NEG, HFQ_KEY_BOS_ID, "outside the vocabulary"},
        {D_ADD_BOS_U8, HFQ_KEY_ADD_BOS, "expected a bool"},
        {D_DUP_TOKEN, HFQ_KEY_TOKENS, "tokens 0 and 1"},
        {D_EMPTY_TOKEN, HFQ_KEY_TOKENS, "empty token"},
        {D_MERGE_NO_SPACE, HFQ_KEY_MERGES, "is not \"left right\""},
        {D_TEMPLATE_U32, HFQ_KEY_CHAT_TEMPLATE, "expected a string"},
    };
    hfq_error err;
    write_defective(D_NONE);
    hfq_vocab *v = read_vocab(&err);
    CHECK_MSG(v != NULL, "the defect-free file: %s", v ? "" : err.msg);
    if (v) {   /* llama.cpp's defaults for the absent keys */
        CHECK(v->bos_id == 1 && v->eos_id == 2 && v->unk_id == 0 && v->add_bos && !v->add_eos &&
              v->add_space_prefix);
    }
    hfq_vocab_free(v);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_defective(cases[i].d);
        v = read_vocab(&err);
        CHECK_MSG(v == NULL, "defect %d accepted", cases[i].d);
        if (v) {
            hfq_vocab_free(v);
            continue;
        }
        CHECK_MSG(strchr(err.msg, '\n') == NULL, "multi-line message: %s", err.msg);
        CHECK_STR_CONTAINS(err.msg, out_path);
        CHECK_STR_CONTAINS(err.msg, cases[i].key);
        CHECK_STR_CONTAINS(err.msg, cases[i].msg);
    }
}

/* Files that load but cannot be tokenized with: the tokenizer says why. */
static void test_unusable(void) {
    hfq_error err;
    gguf_writer *w = gguf_writer_new();
    const char *toks[] = {"a", "b"};
    gguf_set_str(w, HFQ_KEY_TOK_MODEL, "gpt2");
    gguf_set_str(w, HFQ_KEY_TOK_PRE, "tekken");
    gguf_set_arr_str(w, HFQ_KEY_TOKENS, toks, NULL, 2);
    const char *merges[] = {"a c"};
    gguf_set_arr_str(w, HFQ_KEY_MERGES, merges, NULL, 1);
    write_gguf(w);
    hfq_vocab *v = read_vocab(&err);
    CHECK(v != NULL);
    if (!v) return;
    CHECK(v->scores == NULL && !v->add_bos && !v->add_space_prefix && v->bos_id == -1);
    hfq_tokenizer *t = hfq_tokenizer_new(v, &err);
    CHECK(t == NULL);
    if (!t) {
        CHECK_STR_CONTAINS(err.msg, out_path);
        CHECK_STR_CONTAINS(err.msg, "\"tekken\" is not supported");
    }
    free(v->pre);
    v->pre = strdup("llama-bpe");
    t = hfq_tokenizer_new(v, &err);
    CHECK(t == NULL);
    if (!t) CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.merges[0]");
    free(v->model);
    v->model = strdup("llama");   /* neither merges nor scores */
    v->n_merges = 0;
    free(v->merges[0]);
    t = hfq_tokenizer_new(v, &err);
    CHECK(t == NULL);
    if (!t) CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.scores: missing");
    hfq_vocab_free(v);
}

int main(void) {
    if (!mkdtemp(tmpdir)) CHECK_SKIP("cannot create a temporary folder");
    snprintf(out_path, sizeof out_path, "%s/vocab.gguf", tmpdir);
    test_round_trips();
    test_hostile();
    test_unusable();
    unlink(out_path);
    rmdir(tmpdir);
    return check_exit();
}
