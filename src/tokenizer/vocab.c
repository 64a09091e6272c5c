/* vocab.c - the vocabulary struct, its invariants, and its GGUF keys. */
#include "src/tokenizer/vocab.h"

#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "src/common/strmap.h"
#include "src/tokenizer/unicode.h"

const hfq_vocab_id_key hfq_vocab_id_keys[HFQ_VOCAB_N_ID_KEYS] = {
    {HFQ_KEY_BOS_ID, offsetof(hfq_vocab, bos_id)},
    {HFQ_KEY_EOS_ID, offsetof(hfq_vocab, eos_id)},
    {HFQ_KEY_UNK_ID, offsetof(hfq_vocab, unk_id)},
    {HFQ_KEY_PAD_ID, offsetof(hfq_vocab, pad_id)},
    {HFQ_KEY_SEP_ID, offsetof(hfq_vocab, sep_id)},
};

hfq_vocab *hfq_vocab_new(const char *source, const char *model, const char *pre, hfq_error *err) {
    hfq_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        hfq_fail(err, source, "out of memory");
        return NULL;
    }
    v->bos_id = v->eos_id = v->unk_id = v->pad_id = v->sep_id = -1;
    v->source = strdup(source);
    v->model = strdup(model);
    v->pre = strdup(pre);
    if (!v->source || !v->model || !v->pre) {
        hfq_vocab_free(v);
        hfq_fail(err, source, "out of memory");
        return NULL;
    }
    return v;
}

void hfq_vocab_free(hfq_vocab *v) {
    if (!v) return;
    for (int64_t i = 0; i < v->n_tokens; i++) free(v->tokens[i]);
    for (int64_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->token_lens);
    free(v->scores);
    free(v->token_types);
    free(v->merges);
    free(v->source);
    free(v->model);
    free(v->pre);
    free(v->chat_template);
    free(v);
}

int hfq_vocab_resize(hfq_vocab *v, int64_t n, bool with_scores, hfq_error *err) {
    if (v->n_tokens != 0 || n <= 0 || n > INT32_MAX)
        return hfq_fail(err, v->source, "bad vocabulary size %lld", (long long)n);
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    v->token_lens = calloc((size_t)n, sizeof *v->token_lens);
    v->token_types = malloc((size_t)n * sizeof *v->token_types);
    if (with_scores) v->scores = calloc((size_t)n, sizeof *v->scores);
    if (!v->tokens || !v->token_lens || !v->token_types || (with_scores && !v->scores)) {
        free(v->tokens);
        free(v->token_lens);
        free(v->token_types);
        free(v->scores);
        v->tokens = NULL;
        v->token_lens = NULL;
        v->token_types = NULL;
        v->scores = NULL;
        return hfq_fail(err, v->source, "out of memory for %lld tokens", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) v->token_types[i] = HFQ_TOKEN_UNUSED;
    v->n_tokens = n;
    return 0;
}

static char *dup_bytes(const char *s, size_t len) {
    char *p = malloc(len + 1);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

int hfq_vocab_set_token(hfq_vocab *v, int64_t id, const char *text, size_t len, int32_t type,
                        hfq_error *err) {
    if (id < 0 || id >= v->n_tokens) return hfq_fail(err, v->source, "token id %lld out of range", (long long)id);
    if (len > UINT32_MAX) return hfq_fail(err, v->source, "token %lld too long", (long long)id);
    char *p = dup_bytes(text, len);
    if (!p) return hfq_fail(err, v->source, "out of memory");
    free(v->tokens[id]);
    v->tokens[id] = p;
    v->token_lens[id] = (uint32_t)len;
    v->token_types[id] = type;
    return 0;
}

int hfq_vocab_add_merge(hfq_vocab *v, const char *text, size_t len, hfq_error *err) {
    if ((v->n_merges & (v->n_merges - 1)) == 0) {   /* grow at powers of two */
        size_t cap = v->n_merges ? (size_t)v->n_merges * 2 : 256;
        char **p = realloc(v->merges, cap * sizeof *p);
        if (!p) return hfq_fail(err, v->source, "out of memory");
        v->merges = p;
    }
    char *m = dup_bytes(text, len);
    if (!m) return hfq_fail(err, v->source, "out of memory");
    v->merges[v->n_merges++] = m;
    return 0;
}

int hfq_vocab_validate(const hfq_vocab *v, hfq_error *err) {
    if (strcmp(v->model, "llama") != 0 && strcmp(v->model, "gpt2") != 0)
        return hfq_fail(err, v->source, "%s: unsupported tokenizer model \"%s\" (supported: llama, gpt2)",
                        HFQ_KEY_TOK_MODEL, v->model);
    if (v->n_tokens <= 0) return hfq_fail(err, v->source, "%s: empty vocabulary", HFQ_KEY_TOKENS);
    for (int64_t i = 0; i < v->n_tokens; i++) {
        if (!v->tokens[i] || v->token_lens[i] == 0)
            return hfq_fail(err, v->source, "%s[%lld]: empty token", HFQ_KEY_TOKENS, (long long)i);
        if (v->token_types[i] < HFQ_TOKEN_NORMAL || v->token_types[i] > HFQ_TOKEN_BYTE)
            return hfq_fail(err, v->source, "%s[%lld]: invalid token type %d", HFQ_KEY_TOKEN_TYPE, (long long)i,
                            v->token_types[i]);
    }
    for (int k = 0; k < HFQ_VOCAB_N_ID_KEYS; k++) {
        int32_t id = *(const int32_t *)((const char *)v + hfq_vocab_id_keys[k].offset);
        if (id < -1 || id >= v->n_tokens)
            return hfq_fail(err, v->source, "%s = %d is outside the vocabulary of %lld tokens",
                            hfq_vocab_id_keys[k].key,
                            id, (long long)v->n_tokens);
    }
    for (int64_t i = 0; i < v->n_merges; i++) {
        const char *sp = strchr(v->merges[i] + (v->merges[i][0] != '\0'), ' ');
        if (!sp || sp[1] == '\0')
            return hfq_fail(err, v->source, "%s[%lld]: \"%.40s\" is not \"left right\"", HFQ_KEY_MERGES, (long long)i,
                            v->merges[i]);
    }
    hfq_strmap m;
    int64_t a, b;
    int rc = hfq_strmap_build(&m, v->tokens, v->token_lens, v->n_tokens, &a, &b);
    if (rc < 0) return hfq_fail(err, v->source, "out of memory");
    if (rc > 0)
        return hfq_fail(err, v->source, "%s: tokens %lld and %lld are both \"%.40s\"", HFQ_KEY_TOKENS, (long long)a,
                        (long long)b, v->tokens[a]);
    hfq_strmap_free(&m);
    return 0;
}

