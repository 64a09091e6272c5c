/* libFuzzer target for the tokenizer on arbitrary bytes, with the fixture
 * vocabularies (Llama 3, Qwen3, Llama 2 tokenizer.json; stories260K
 * tokenizer.model; Llama 3's again under GPT-2's pre-tokenizers "gpt-2" and
 * "smollm", as a GGUF naming them reads) loaded once from $HFQ_FIXTURES
 * (default ../shared/fixtures, relative to the repository root the fuzzer
 * runs in).
 *
 * Input: byte 0 picks the vocabulary, byte 1 the flags, the rest is the text.
 * Checks: encoding succeeds with ids inside the vocabulary; decoding them
 * succeeds; Llama 3's vocabulary (byte-level BPE, no normalizer) gives back exactly the
 * text (invalid bytes as U+FFFD) when special tokens are not parsed; for every
 * vocabulary encode+decode is idempotent (special tokens not parsed); the text's bytes read as ids decode
 * iff every id is in range; token_to_piece agrees across buffer sizes.
 * Built only by tests/fuzz/build.sh. */
#include <stdint.h>

#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/unicode.h"
#include "src/tokenizer/vocab.h"
#include "tests/fuzz/fuzz_common.h"

static const char *const DIRS[] = {"tokenizers/llama3", "tokenizers/qwen3", "tokenizers/llama2",
                                   "models/stories260K", "tokenizers/llama3", "tokenizers/llama3"};
static const char *const PRES[] = {NULL, NULL, NULL, NULL, "gpt-2", "smollm"};   /* NULL: the folder's */
#define N_VOCABS 6
#define BYTE_LEVEL_EXACT(i) ((i) == 0 || (i) == 4 || (i) == 5)   /* Llama 3's vocabulary: no normalizer */

static hfq_vocab *vocabs[N_VOCABS];
static hfq_tokenizer *toks[N_VOCABS];

static void load_all(void) {
    const char *root = getenv("HFQ_FIXTURES");
    if (!root || !*root) root = "../shared/fixtures";
    for (int i = 0; i < N_VOCABS; i++) {
        char dir[1024];
        hfq_error err;
        snprintf(dir, sizeof dir, "%s/%s", root, DIRS[i]);
        vocabs[i] = hfq_vocab_from_dir(dir, &err);
        if (vocabs[i] && PRES[i]) {
            free(vocabs[i]->pre);
            if (!(vocabs[i]->pre = strdup(PRES[i]))) abort();
        }
        toks[i] = vocabs[i] ? hfq_tokenizer_new(vocabs[i], &err) : NULL;
        if (!toks[i]) {   /* 77: skipped, for the replay test */
            fprintf(stderr, "fuzz_tokenize: %s (set HFQ_FIXTURES)\n", err.msg);
            exit(77);
        }
    }
}

/* encode + decode; returns the decoded text (malloc'd) and its length. */
static char *round_trip(const hfq_tokenizer *t, const char *text, size_t len, int flags, size_t *out_len) {
    hfq_error err = {{0}};
    int32_t *ids = NULL;
    size_t n = 0;
    if (hfq_tokenize(t, text, len, flags, &ids, &n, &err)) abort();
    int64_t n_tokens = hfq_tokenizer_vocab(t)->n_tokens;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_tokens) abort();
    char *back = hfq_detokenize(t, ids, n, (flags & HFQ_TOK_PARSE_SPECIAL) != 0, out_len, &err);
    if (!back) abort();
    free(ids);
    return back;
}

static void decode_raw_ids(const hfq_tokenizer *t, const uint8_t *p, size_t len) {
    int64_t n_tokens = hfq_tokenizer_vocab(t)->n_tokens;
    size_t n = len / 4;
    int32_t *ids = malloc(n * sizeof *ids + 1);
    if (!ids) abort();
    bool all_valid = true;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        ids[i] = (int32_t)((int64_t)(u % (uint32_t)(n_tokens + 8)) - 4);
        if (ids[i] < 0 || ids[i] >= n_tokens) all_valid = false;
        char small[8], big[512];
        int need = hfq_token_to_piece(t, ids[i], i & 1, small, sizeof small);
        int again = hfq_token_to_piece(t, ids[i], i & 1, big, sizeof big);
        if (need != again || (ids[i] >= 0 && ids[i] < n_tokens) != (need >= 0)) abort();
        if (need > 0 && (size_t)need <= sizeof small && memcmp(small, big, (size_t)need)) abort();
    }
    hfq_error err = {{0}};
    size_t out_len;
    char *text = hfq_detokenize(t, ids, n, true, &out_len, &err);
    if (!text != !all_valid) abort();
    if (!text) fuzz_check_error(err.msg, NULL);
    free(text);
    free(ids);
}

/* Loading takes seconds: done before libFuzzer's per-input timer starts. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    load_all();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int which = data[0] % N_VOCABS;
    int flags = data[1] & (HFQ_TOK_ADD_SPECIAL | HFQ_TOK_PARSE_SPECIAL);
    const hfq_tokenizer *t = toks[which];
    const char *text = (const char *)data + 2;
    size_t len = size - 2;

    size_t once_len, twice_len;
    char *once = round_trip(t, text, len, flags, &once_len);
    if (BYTE_LEVEL_EXACT(which) && !(flags & HFQ_TOK_PARSE_SPECIAL)) {
        hfq_buf clean = {0};
        if (hfq_utf8_sanitize(text, len, &clean)) abort();
        if (clean.len != once_len || (once_len && memcmp(clean.data, once, once_len)))
            fuzz_fail("Llama 3 decode(encode(text)) != text", NULL);
        hfq_buf_free(&clean);
    }
    if (!(flags & HFQ_TOK_PARSE_SPECIAL)) {   /* rendered control tokens would be parsed again */
        char *twice = round_trip(t, once, once_len, flags, &twice_len);
        if (twice_len != once_len || memcmp(once, twice, once_len)) fuzz_fail("encode+decode is not idempotent", DIRS[which]);
        free(twice);
    }
    free(once);
    decode_raw_ids(t, data + 2, len);
    return 0;
}
