/* Unit tests of the tokenizer building blocks: UTF-8 and NFC, the
 * pre-tokenizer matchers, the merge engines on small hand-made vocabularies,
 * added-token matching, BOS/EOS, decoding. Expected values come from the
 * reference libraries (tokenizers / unicodedata) or follow from the rules by
 * hand; the fixtures are compared wholesale in tokenizer_golden.py. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "src/tokenizer/pretok.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/unicode.h"
#include "src/tokenizer/vocab.h"

/* ---- UTF-8 ---- */

static void test_utf8(void) {
    static const struct { const char *s; size_t len, valid; } cases[] = {
        {"A", 1, 1}, {"\xc2\x80", 2, 2}, {"\xc1\xbf", 2, 0}, {"\xe0\x9f\xbf", 3, 0}, {"\xe0\xa0\x80", 3, 3},
        {"\xed\x9f\xbf", 3, 3}, {"\xed\xa0\x80", 3, 0}, {"\xf0\x8f\xbf\xbf", 4, 0}, {"\xf0\x90\x80\x80", 4, 4},
        {"\xf4\x8f\xbf\xbf", 4, 4}, {"\xf4\x90\x80\x80", 4, 0}, {"\xf5\x80\x80\x80", 4, 0}, {"\x80", 1, 0},
        {"\xe2\x82", 2, 0}, {"\xe2\x82\x41", 3, 0}, {"\xff", 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(hfq_utf8_valid_len(cases[i].s, cases[i].len) == cases[i].valid, "case %zu", i);

    /* each invalid byte becomes one U+FFFD */
    hfq_buf b = {0};
    CHECK(hfq_utf8_sanitize("a\xff" "b\xe2\x82" "c", 6, &b) == 0);
    CHECK(b.len == 12 && memcmp(b.data, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c", 12) == 0);
    hfq_buf_free(&b);

    char enc[4];
    CHECK(hfq_utf8_encode(0x10FFFF, enc) == 4 && hfq_utf8_valid_len(enc, 4) == 4);
    size_t pos = 0;
    CHECK(hfq_utf8_next(enc, 4, &pos) == 0x10FFFF && pos == 4);
}

/* ---- NFC (expected values from unicodedata.normalize) ---- */

static void check_nfc(const char *in, const char *want) {
    hfq_buf b = {0};
    CHECK(hfq_nfc(in, strlen(in), &b) == 0);
    CHECK_MSG(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "NFC of \"%s\"", in);
    hfq_buf_free(&b);
}

static void test_nfc(void) {
    check_nfc("e\xcc\x81", "\xc3\xa9");                                   /* e + U+0301 */
    check_nfc("\xe2\x84\xab", "\xc3\x85");                                /* U+212B -> U+00C5 */
    check_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81");    /* Hangul L V T */
    check_nfc("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81");                /* LV + T */
    check_nfc("q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87");                  /* reordering by ccc */
    check_nfc("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc");                /* exclusion U+0958 */
    check_nfc("A\xcc\x8a\xcc\x81", "\xc7\xba");                           /* two steps */
    check_nfc("\xcc\x81" "a", "\xcc\x81" "a");                           /* leading mark */
    check_nfc("\xe0\xbd\xb3", "\xe0\xbd\xb1\xe0\xbd\xb2");                /* non-starter decomposition */
    check_nfc("plain ascii", "plain ascii");
    /* a long run of marks (counting-sort path): a + 40 x (U+0301 U+0316) */
    char in[1 + 160 + 1], want[2 + 160 + 1];
    strcpy(in, "a");
    for (int i = 0; i < 40; i++) strcat(in, "\xcc\x81\xcc\x96");
    strcpy(want, "\xc3\xa1");
    for (int i = 0; i < 40; i++) strcat(want, "\xcc\x96");
    for (int i = 0; i < 39; i++) strcat(want, "\xcc\x81");
    check_nfc(in, want);
}

/* ---- pre-tokenizer (expected splits from tokenizers' pre_tokenize_str) ---- */

typedef struct pieces {
    const char *text;
    char out[512];
} pieces;

static int collect(void *ctx, size_t off, size_t len) {
    pieces *p = ctx;
    if (p->out[0]) strcat(p->out, "|");
    strncat(p->out, p->text + off, len);
    return 0;
}

static void check_split(hfq_pretok_kind kind, const char *text, const char *want) {
    pieces p = {text, ""};
    CHECK(hfq_pretok_split(kind, text, strlen(text), collect, &p) == 0);
    CHECK_MSG(!strcmp(p.out, want), "split of \"%s\": got \"%s\", want \"%s\"", text, p.out, want);
}

static void test_pretok(void) {
    static const char *both[][2] = {
        {"Hello world", "Hello| world"}, {"it's", "it|'s"}, {"a  b", "a| | b"}, {"a \n\n b", "a| \n\n| b"},
        {"x   ", "x|   "}, {"  \n  x", "  \n| | x"}, {"!!!\n\nabc", "!!!\n\n|abc"}, {" !!", " !!"},
        {"'\xc5\xbfx", "'\xc5\xbf|x"}, {"\xc2\xa0x", "\xc2\xa0x"}, {"\r\nfoo", "\r\n|foo"}, {"a\tb", "a|\tb"},
        {"I'LL 'Ve", "I|'LL| '|Ve"}, {"\xe4\xb8\xad\xe6\x96\x87 x", "\xe4\xb8\xad\xe6\x96\x87| x"},
        {"e\xcc\x81!", "e|\xcc\x81!"},
    };
    for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) {
        check_split(HFQ_PRETOK_LLAMA3, both[i][0], both[i][1]);
        check_split(HFQ_PRETOK_QWEN2, both[i][0], both[i][1]);
    }
    check_split(HFQ_PRETOK_LLAMA3, "1234567", "123|456|7");
    check_split(HFQ_PRETOK_QWEN2, "1234567", "1|2|3|4|5|6|7");
    /* GPT-2's regex (case-sensitive contractions, one optional space, \s+(?!\S) then \s+), and with
     * every digit a piece first (tests/tokenizer_gpt2_pre.py holds both against tokenizers and llama.cpp) */
    static const char *gpt2[][3] = {
        {"it's IT'S", "it|'s| IT|'|S", "it|'s| IT|'|S"},
        {"a  b", "a| | b", "a| | b"},
        {"a\n\nb", "a|\n|\n|b", "a|\n|\n|b"},
        {"a \n b", "a| \n| b", "a| \n| b"},
        {"x   ", "x|   ", "x|   "},
        {"\ta", "\t|a", "\t|a"},
        {"!!!\n\nabc", "!!!|\n|\n|abc", "!!!|\n|\n|abc"},
        {" 1234 x", " 1234| x", " |1|2|3|4| x"},
        {"v1.22b", "v|1|.|22|b", "v|1|.|2|2|b"},
        {"a 1", "a| 1", "a| |1"},
        {"'\xc5\xbfx", "'|\xc5\xbfx", "'|\xc5\xbfx"},
    };
    for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++) {
        check_split(HFQ_PRETOK_GPT2, gpt2[i][0], gpt2[i][1]);
        check_split(HFQ_PRETOK_GPT2_DIGITS, gpt2[i][0], gpt2[i][2]);
    }
    CHECK(hfq_pretok_find("smollm") && hfq_pretok_find("smollm")->kind == HFQ_PRETOK_GPT2_DIGITS);
    CHECK(hfq_pretok_find("falcon3") && hfq_pretok_find("falcon3")->add_bos && hfq_pretok_find("falcon3")->ignore_merges);
    CHECK(hfq_pretok_find("gpt-2") && !hfq_pretok_find("gpt-2")->add_bos);
    CHECK(hfq_pretok_find("tekken") == NULL && hfq_pretok_find(NULL) == NULL);
    char names[1024], small[12];
    hfq_pretok_names(names, sizeof names);
    CHECK_STR_CONTAINS(names, "llama-bpe, llama3");
    CHECK_STR_CONTAINS(names, "minerva-7b, mellum2");
    hfq_pretok_names(small, sizeof small);
    CHECK(strlen(small) < sizeof small);
}

/* ---- small vocabularies ---- */

typedef struct tok_spec {
    const char *text;
    int32_t type;
    float score;
} tok_spec;

static hfq_vocab *make_vocab(const char *model, const tok_spec *toks, int n, const char *const *merges,
                             int n_merges) {
    hfq_error err;
    hfq_vocab *v = hfq_vocab_new("test", model, strcmp(model, "gpt2") ? "default" : "llama-bpe", &err);
    CHECK(v != NULL);
    if (!v || hfq_vocab_resize(v, n, true, &err)) return v;
    for (int i = 0; i < n; i++) {
        CHECK(hfq_vocab_set_token(v, i, toks[i].text, strlen(toks[i].text), toks[i].type, &err) == 0);
        v->scores[i] = toks[i].score;
    }
    for (int i = 0; i < n_merges; i++) CHECK(hfq_vocab_add_merge(v, merges[i], strlen(merges[i]), &err) == 0);
    return v;
}

/* Encodes text and compares with want[0..n_want). */
static void check_encode(const hfq_tokenizer *t, const char *text, size_t len, int flags, const int32_t *want,
                         size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    hfq_error err;
    CHECK(hfq_tokenize(t, text, len, flags, &ids, &n, &err) == 0);
    int same = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    CHECK_MSG(same, "encoding of \"%.*s\" (%zu ids)", (int)len, text, n);
    free(ids);
}
#define ENC(t, text, flags, ...) do { const int32_t w_[] = {__VA_ARGS__}; \
    check_encode(t, text, strlen(text), flags, w_, sizeof w_ / sizeof w_[0]); } while (0)
#define ENC_NONE(t, text, flags) check_encode(t, text, strlen(text), flags, NULL, 0)

enum { N = HFQ_TOKEN_NORMAL, C = HFQ_TOKEN_CONTROL, U = HFQ_TOKEN_USER_DEFINED, B = HFQ_TOKEN_BYTE,
       K = HFQ_TOKEN_UNKNOWN };
#define SP "\xe2\x96\x81"

/* "llama" with merges: Hugging Face BPE on SentencePiece-style text. */
static void test_spm_merges(void) {
    static const tok_spec toks[] = {
        {"<unk>", K, 0}, {"<s>", C, 0}, {"</s>", C, 0}, {"a", N, 0}, {"b", N, 0}, {"c", N, 0}, {SP, N, 0},
        {"ab", N, 0}, {"bc", N, 0}, {"abc", N, 0}, {SP "a", N, 0}, {"aa", N, 0}, {"<|x|>", C, 0},
        {"<|xy|>", C, 0}, {"<u>", U, 0},
    };
    static const char *merges[] = {"b c", "a b", "a bc", SP " a", "a a"};
    hfq_vocab *v = make_vocab("llama", toks, sizeof toks / sizeof toks[0], merges, 5);
    v->unk_id = 0;
    v->bos_id = 1;
    v->eos_id = 2;
    v->add_bos = true;
    v->add_eos = true;
    v->add_space_prefix = false;
    hfq_error err;
    hfq_tokenizer *t = hfq_tokenizer_new(v, &err);
    CHECK(t != NULL);
    if (!t) { hfq_vocab_free(v); return; }
    ENC(t, "abc", 0, 9);            /* b c (rank 0) first, then a bc */
    ENC(t, "aaa", 0, 11, 3);        /* equal ranks: leftmost first */
    ENC(t, "ab", 0, 7);
    ENC(t, " a", 0, 10);            /* space -> U+2581, merged with a */
    ENC(t, "xyz a", 0, 0, 10);      /* unknown characters fuse into one <unk> */
    ENC(t, "", HFQ_TOK_ADD_SPECIAL, 1, 2);
    ENC(t, "a", HFQ_TOK_ADD_SPECIAL, 1, 3, 2);
    /* added tokens: control ones only when asked, leftmost then longest; user-defined always */
    ENC(t, "a<|xy|>b", HFQ_TOK_PARSE_SPECIAL, 3, 13, 4);
    ENC(t, "<|x|>", HFQ_TOK_PARSE_SPECIAL, 12);
    ENC(t, "<u>a", 0, 14, 3);
    v->add_space_prefix = true;     /* one U+2581 before every stretch of text */
    ENC(t, "a<u>a", 0, 10, 14, 10);
    ENC(t, "<u>", 0, 14);
    hfq_tokenizer_free(t);
    hfq_vocab_free(v);
}

/* "llama" without merges: SentencePiece's score-driven BPE. */
static void test_spm_scores(void) {
    tok_spec toks[3 + 256 + 8];
    static char byte_names[256][8];
    int n = 0;
    toks[n++] = (tok_spec){"<unk>", K, 0};
    toks[n++] = (tok_spec){"<s>", C, 0};
    toks[n++] = (tok_spec){"</s>", C, 0};
    for (int i = 0; i < 256; i++) {
        snprintf(byte_names[i], sizeof byte_names[i], "<0x%02X>", i);
        toks[n++] = (tok_spec){byte_names[i], B, 0};
    }
    int a = n;
    toks[n++] = (tok_spec){"a", N, -10};     /* a = 259 */
    toks[n++] = (tok_spec){"b", N, -10};
    toks[n++] = (tok_spec){SP, N, -10};
    toks[n++] = (tok_spec){"ab", N, -1};     /* 262 */
    toks[n++] = (tok_spec){"ba", N, -1};     /* 263: same score as ab */
    toks[n++] = (tok_spec){SP "b", N, -5};   /* 264 */
    toks[n++] = (tok_spec){"bab", N, -3};    /* 265 */
    toks[n++] = (tok_spec){"<ud>", U, 0};    /* 266 */
    hfq_vocab *v = make_vocab("llama", toks, n, NULL, 0);
    v->unk_id = 0;
    v->add_space_prefix = true;
    hfq_error err;
    hfq_tokenizer *t = hfq_tokenizer_new(v, &err);
    CHECK(t != NULL);
    if (!t) { hfq_vocab_free(v); return; }
    /* "▁bab": pairs ▁b (-5), ba (-1), ab (-1): the tie goes to the left one (ba); then
     * ▁+ba is no piece and ba+b = bab (-3) */
    ENC(t, "bab", 0, a + 2, a + 6);
    ENC(t, "ab", 0, a + 2, a + 3);
    /* é has no piece: byte fallback of its UTF-8 bytes */
    ENC(t, "\xc3\xa9", 0, a + 2, 3 + 0xC3, 3 + 0xA9);
    /* user-defined pieces are matched whole and never merged */
    ENC(t, "a<ud>b", 0, a + 2, a + 0, a + 7, a + 1);
    hfq_tokenizer_free(t);
    hfq_vocab_free(v);
}

/* "gpt2": byte-level BPE with the llama-bpe pre-tokenizer. */
static void test_byte_bpe(void) {
    /* GPT-2 maps ' ' to U+0120 and '\n' to U+010A */
    static const tok_spec toks[] = {
        {"h", N, 0}, {"i", N, 0}, {"\xc4\xa0", N, 0}, {"hi", N, 0}, {"\xc4\xa0h", N, 0}, {"\xc4\xa0hi", N, 0},
        {"!", N, 0}, {"<|eot|>", C, 0}, {"\xc4\x8a", N, 0}, {"ih", N, 0},
    };
    static const char *merges[] = {"h i", "\xc4\xa0 h", "\xc4\xa0h i"};
    hfq_vocab *v = make_vocab("gpt2", toks, sizeof toks / sizeof toks[0], merges, 3);
    hfq_error err;
    hfq_tokenizer *t = hfq_tokenizer_new(v, &err);
    CHECK(t != NULL);
    if (!t) { hfq_vocab_free(v); return; }
    ENC(t, "hi hi!", 0, 3, 5, 6);
    ENC(t, "ih", 0, 9);             /* llama-bpe: a whole piece in the vocabulary wins over merges */
    ENC(t, "hi\n", 0, 3, 8);
    ENC_NONE(t, "x", 0);            /* bytes without a token are dropped (as Hugging Face) */
    ENC(t, "<|eot|>", HFQ_TOK_PARSE_SPECIAL, 7);
    /* decoding: byte-level characters back to bytes; control tokens only when asked */
    char buf[16];
    CHECK(hfq_token_to_piece(t, 5, false, buf, sizeof buf) == 3 && !memcmp(buf, " hi", 3));
    CHECK(hfq_token_to_piece(t, 8, false, buf, sizeof buf) == 1 && buf[0] == '\n');
    CHECK(hfq_token_to_piece(t, 7, false, buf, sizeof buf) == 0);
    CHECK(hfq_token_to_piece(t, 7, true, buf, 2) == 7);   /* too small: reports the size */
    CHECK(hfq_token_to_piece(t, 10, false, buf, sizeof buf) == -1);
    const int32_t ids[] = {3, 5, 7, 8};
    size_t len;
    char *s = hfq_detokenize(t, ids, 4, true, &len, &err);
    CHECK(s && len == 13 && !strcmp(s, "hi hi<|eot|>\n"));
    free(s);
    hfq_tokenizer_free(t);
    v->n_merges--;   /* a merge naming a missing token is refused, naming the key */
    free(v->merges[v->n_merges]);
    v->merges[v->n_merges++] = strdup("h zz");
    t = hfq_tokenizer_new(v, &err);
    CHECK(t == NULL);
    if (!t) CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.merges[2]");
    hfq_tokenizer_free(t);
    hfq_vocab_free(v);
}

static void test_validate(void) {
    static const tok_spec toks[] = {{"a", N, 0}, {"a", N, 0}};
    hfq_vocab *v = make_vocab("llama", toks, 2, NULL, 0);
    hfq_error err;
    CHECK(hfq_vocab_validate(v, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "tokens 0 and 1");
    hfq_vocab_free(v);
    static const tok_spec ok[] = {{"a", N, 0}, {"b", 9, 0}};
    v = make_vocab("llama", ok, 2, NULL, 0);
    CHECK(hfq_vocab_validate(v, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "invalid token type 9");
    v->token_types[1] = N;
    v->eos_id = 2;
    CHECK(hfq_vocab_validate(v, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.eos_token_id");
    v->eos_id = 1;
    CHECK(hfq_vocab_validate(v, &err) == 0);
    free(v->model);
    v->model = strdup("bert");
    CHECK(hfq_vocab_validate(v, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "unsupported tokenizer model");
    hfq_vocab_free(v);
}

int main(void) {
    test_utf8();
    test_nfc();
    test_pretok();
    test_spm_merges();
    test_spm_scores();
    test_byte_bpe();
    test_validate();
    return check_exit();
}
