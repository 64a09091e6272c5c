/* pretok.c - regex pre-tokenizers as hand-written matchers (see pretok.h). */
#include "src/tokenizer/pretok.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/unicode.h"

enum { F_L = HFQ_UCD_L, F_N = HFQ_UCD_N, F_WS = HFQ_UCD_WS, F_CRLF = 8 };

typedef struct cps {
    const uint32_t *cp;
    const uint8_t *fl;    /* class flags per code point */
    size_t n;
} cps;

static bool has(const cps *s, size_t i, unsigned f) { return i < s->n && (s->fl[i] & f); }

/* [^\s\p{L}\p{N}] */
static bool is_other(const cps *s, size_t i) { return i < s->n && !(s->fl[i] & (F_L | F_N | F_WS)); }

/* Case-insensitive ASCII letter test ((?i) folds U+017F to s). */
static bool letter_is(const cps *s, size_t i, char c) {
    if (i >= s->n) return false;
    uint32_t x = s->cp[i];
    if (x == 0x17F) x = 's';
    if (x >= 'A' && x <= 'Z') x += 'a' - 'A';
    return x == (uint32_t)c;
}

/* End (exclusive) of the match starting at i (< n); every code point is
 * matched by some alternative, so the result is always > i. */
static size_t match_at(const cps *s, size_t i, size_t max_digits) {
    size_t n = s->n, j;
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    if (s->cp[i] == '\'') {
        if (letter_is(s, i + 1, 's') || letter_is(s, i + 1, 't') || letter_is(s, i + 1, 'm') ||
            letter_is(s, i + 1, 'd'))
            return i + 2;
        if ((letter_is(s, i + 1, 'r') && letter_is(s, i + 2, 'e')) ||
            (letter_is(s, i + 1, 'v') && letter_is(s, i + 2, 'e')) ||
            (letter_is(s, i + 1, 'l') && letter_is(s, i + 2, 'l')))
            return i + 3;
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    j = i;
    if (!has(s, i, F_L | F_N | F_CRLF) && has(s, i + 1, F_L)) j = i + 1;
    if (has(s, j, F_L)) {
        while (has(s, j, F_L)) j++;
        return j;
    }
    /* \p{N}{1,3} or \p{N} */
    if (has(s, i, F_N)) {
        j = i + 1;
        while (j - i < max_digits && has(s, j, F_N)) j++;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    j = (s->cp[i] == ' ' && is_other(s, i + 1)) ? i + 1 : i;
    if (is_other(s, j)) {
        while (is_other(s, j)) j++;
        while (has(s, j, F_CRLF)) j++;
        return j;
    }
    /* s->cp[i] is whitespace now; end = end of the whitespace run */
    size_t end = i;
    while (has(s, end, F_WS)) end++;
    /* \s*[\r\n]+ : backtracks to the last CR/LF of the run */
    for (j = end; j > i; j--)
        if (has(s, j - 1, F_CRLF)) return j;
    /* \s+(?!\S) then \s+ */
    if (end == n || end - i == 1) return end;
    return end - 1;
}

/* End of GPT-2's match at i (< s->n, the end of the piece). */
static size_t match_gpt2(const cps *s, size_t i) {
    size_t j;
    /* 's|'t|'re|'ve|'m|'ll|'d (case-sensitive) */
    if (s->cp[i] == '\'' && i + 1 < s->n) {
        const uint32_t a = s->cp[i + 1], b = i + 2 < s->n ? s->cp[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ : the optional space takes the next code point's class */
    j = s->cp[i] == ' ' && i + 1 < s->n ? i + 1 : i;
    if (has(s, j, F_L) || has(s, j, F_N)) {
        const unsigned f = has(s, j, F_L) ? F_L : F_N;
        while (has(s, j, f)) j++;
        return j;
    }
    if (is_other(s, j)) {
        while (is_other(s, j)) j++;
        return j;
    }
    /* \s+(?!\S), else \s+: s->cp[i] is whitespace */
    size_t end = i;
    while (has(s, end, F_WS)) end++;
    return end - i > 1 && end < s->n ? end - 1 : end;
}

#define LLAMA3_ROW(n) {n, HFQ_PRETOK_LLAMA3, true, false, true}
#define QWEN2_ROW(n) {n, HFQ_PRETOK_QWEN2, false, true, false}
#define GPT2_ROW(n) {n, HFQ_PRETOK_GPT2, false, false, false}
#define DIGITS_ROW(n) {n, HFQ_PRETOK_GPT2_DIGITS, false, false, false}
static const hfq_pretok_info pretoks[] = {
    LLAMA3_ROW("llama-bpe"), LLAMA3_ROW("llama3"), LLAMA3_ROW("llama-v3"), LLAMA3_ROW("falcon3"),
    LLAMA3_ROW("falcon-h1"), LLAMA3_ROW("pixtral"), LLAMA3_ROW("midm-2.0"), LLAMA3_ROW("lfm2"),
    LLAMA3_ROW("jina-v5-nano"),
    QWEN2_ROW("qwen2"), QWEN2_ROW("deepseek-r1-qwen"), QWEN2_ROW("kormo"), QWEN2_ROW("f2llmv2"), QWEN2_ROW("megrez"),
    GPT2_ROW("gpt-2"), GPT2_ROW("phi-2"), GPT2_ROW("gigachat"), GPT2_ROW("a.x-4.0"), GPT2_ROW("mellum"),
    GPT2_ROW("exaone4"), GPT2_ROW("mpt"), GPT2_ROW("olmo"), GPT2_ROW("jais"), GPT2_ROW("trillion"),
    GPT2_ROW("granite-docling"),
    DIGITS_ROW("smollm"), DIGITS_ROW("starcoder"), DIGITS_ROW("refact"), DIGITS_ROW("command-r"),
    DIGITS_ROW("codeshell"), DIGITS_ROW("exaone"), DIGITS_ROW("minerva-7b"), DIGITS_ROW("mellum2"),
};

const hfq_pretok_info *hfq_pretok_find(const char *name) {
    for (size_t i = 0; name && i < sizeof pretoks / sizeof pretoks[0]; i++)
        if (strcmp(pretoks[i].name, name) == 0) return &pretoks[i];
    return NULL;
}

void hfq_pretok_names(char *out, size_t n) {
    size_t used = 0;
    if (n) out[0] = '\0';
    for (size_t i = 0; i < sizeof pretoks / sizeof pretoks[0] && used < n; i++) {
        int w = snprintf(out + used, n - used, "%s%s", i ? ", " : "", pretoks[i].name);
        if (w < 0) break;
        used += (size_t)w;
    }
}

int hfq_pretok_split(hfq_pretok_kind kind, const char *text, size_t len, hfq_pretok_emit emit, void *ctx) {
    if (len == 0) return 0;
    uint32_t *cp = malloc(len * sizeof *cp);
    size_t *off = malloc((len + 1) * sizeof *off);
    uint8_t *fl = malloc(len);
    int rc = -1;
    if (!cp || !off || !fl) goto done;
    size_t n = 0, pos = 0;
    while (pos < len) {
        off[n] = pos;
        uint32_t c = hfq_utf8_next(text, len, &pos);
        cp[n] = c;
        fl[n] = (uint8_t)(hfq_cp_flags(c) | ((c == '\r' || c == '\n') ? F_CRLF : 0));
        n++;
    }
    off[n] = len;
    cps s = {cp, fl, n};
    size_t max_digits = kind == HFQ_PRETOK_LLAMA3 ? 3 : 1;
    rc = 0;
    size_t piece_end = kind == HFQ_PRETOK_GPT2 ? n : 0;  /* GPT2_DIGITS: the text before the next digit */
    for (size_t i = 0; i < n && rc == 0;) {
        size_t j;
        if (kind == HFQ_PRETOK_LLAMA3 || kind == HFQ_PRETOK_QWEN2) {
            j = match_at(&s, i, max_digits);
        } else {
            /* a digit's piece ends after it; GPT-2 takes no more than the digit there */
            if (i >= piece_end)
                for (piece_end = i + 1; piece_end < n && !has(&s, piece_end, F_N);) piece_end++;
            const cps piece = {cp, fl, piece_end};
            j = match_gpt2(&piece, i);
        }
        rc = emit(ctx, off[i], off[j] - off[i]);
        i = j;
    }
done:
    free(cp);
    free(off);
    free(fl);
    return rc;
}
