/* chat_template.c - see chat_template.h. */
#include "calib/chat_template.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hfq_chat_kind hfq_chat_detect(const char *tmpl) {
    if (!tmpl) return HFQ_CHAT_UNSUPPORTED;
    if (strstr(tmpl, "<|im_start|>")) return HFQ_CHAT_CHATML;
    if (strstr(tmpl, "<|start_header_id|>") && strstr(tmpl, "<|eot_id|>")) return HFQ_CHAT_LLAMA3;
    if (strstr(tmpl, "[INST]") && strstr(tmpl, "[/INST]")) return HFQ_CHAT_LLAMA2;
    return HFQ_CHAT_UNSUPPORTED;
}

const char *hfq_chat_kind_name(hfq_chat_kind kind) {
    switch (kind) {
    case HFQ_CHAT_CHATML: return "chatml";
    case HFQ_CHAT_LLAMA3: return "llama3";
    case HFQ_CHAT_LLAMA2: return "llama2";
    default: return "unsupported";
    }
}

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Jinja's trim / Python's strip of ASCII whitespace. */
static void put_trimmed(sbuf *b, const char *s, size_t n) {
    while (n > 0 && is_space(*s)) s++, n--;
    while (n > 0 && is_space(s[n - 1])) n--;
    put(b, s, n);
}

/* The default system message of a ChatML template: a string literal
 * '<|im_start|>system\n...<|im_end|>\n' whose text is written out in the
 * template (not built from messages[0]). Unescapes \n, \t, \\ and \'. */
static void put_default_system(sbuf *b, const char *tmpl) {
    static const char open[] = "'<|im_start|>system\\n";
    for (const char *at = strstr(tmpl, open); at; at = strstr(at + 1, open)) {
        const char *text = at + sizeof open - 1, *end = strstr(text, "<|im_end|>");
        if (!end || end == text || memchr(text, '\'', (size_t)(end - text))) continue;
        puts_(b, "<|im_start|>system\n");
        for (const char *c = text; c < end; c++) {
            char ch = *c;
            if (ch == '\\' && c + 1 < end) {
                c++;
                ch = *c == 'n' ? '\n' : *c == 't' ? '\t' : *c;
            }
            put(b, &ch, 1);
        }
        puts_(b, "<|im_end|>\n");
        return;
    }
}

char *hfq_chat_render_user(const char *tmpl, const char *bos_text, const char *msg, size_t len, size_t *out_len,
                           hfq_error *err) {
    hfq_chat_kind kind = hfq_chat_detect(tmpl);
    if (kind == HFQ_CHAT_UNSUPPORTED) {
        hfq_fail(err, "tokenizer.chat_template",
                 "unsupported template (recognised: ChatML/Qwen, Llama 3, Llama 2/Mistral [INST])");
        return NULL;
    }
    sbuf b = {0};
    if (bos_text && strstr(tmpl, "bos_token")) puts_(&b, bos_text);
    switch (kind) {
    case HFQ_CHAT_CHATML:
        put_default_system(&b, tmpl);
        puts_(&b, "<|im_start|>user\n");
        put(&b, msg, len);
        puts_(&b, "<|im_end|>\n<|im_start|>assistant\n");
        break;
    case HFQ_CHAT_LLAMA3:
        puts_(&b, "<|start_header_id|>user<|end_header_id|>\n\n");
        put_trimmed(&b, msg, len);
        puts_(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    default:
        puts_(&b, "[INST] ");
        put_trimmed(&b, msg, len);
        puts_(&b, " [/INST]");
        break;
    }
    if (b.oom || !b.p) {
        free(b.p);
        hfq_fail(err, "chat template", "out of memory");
        return NULL;
    }
    *out_len = b.len;
    return b.p;
}
