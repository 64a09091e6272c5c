/* tokenizer.c - encode/decode from an hfq_vocab (see tokenizer.h). */
#include "src/tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/pretok.h"
#include "src/common/strmap.h"
#include "src/tokenizer/unicode.h"

static const char SPACE_MARK[] = "\xe2\x96\x81";   /* U+2581, SentencePiece's space */

typedef enum algorithm {
    ALG_SPM_SCORES,   /* "llama" without merges: SentencePiece */
    ALG_SPM_MERGES,   /* "llama" with merges: Hugging Face BPE with byte fallback */
    ALG_BYTE_BPE,     /* "gpt2": byte-level BPE */
} algorithm;

/* (left id, right id) -> (rank, merged id), open addressing. */
typedef struct merge_entry {
    uint64_t key;     /* left << 32 | right; EMPTY_KEY when free */
    int32_t rank, id;
} merge_entry;
#define EMPTY_KEY UINT64_MAX

/* Byte trie over token texts, for cutting added tokens out of the text. */
typedef struct trie_node {
    int32_t child, sibling;   /* first child, next sibling; -1 when none */
    int32_t token;            /* token ending here, or -1 */
    uint8_t byte;
} trie_node;

typedef struct trie {
    trie_node *nodes;
    size_t n, cap;
    uint8_t first[32];        /* bitmap of first bytes */
} trie;

struct hfq_tokenizer {
    const hfq_vocab *v;
    algorithm alg;
    hfq_pretok_kind pre;
    bool nfc, ignore_merges;
    hfq_strmap tokens;
    merge_entry *merges;
    size_t merge_mask;
    int32_t byte_token[256];    /* SPM: id of <0xNN>; gpt2: id of the byte's character; -1 */
    bool all_byte_tokens;
    uint32_t byte_char[256];    /* gpt2: byte -> code point */
    int16_t char_byte[512];     /* gpt2: code point -> byte, -1 */
    uint8_t *in_merge;          /* per token: 1 when some merge uses it (BPE merges) */
    uint8_t ascii_in_piece[128];/* SentencePiece: 1 when a longer mergeable piece has the byte */
    trie added;                 /* tokens cut out before tokenization */
    trie user_defined;          /* ALG_SPM_SCORES: pieces SentencePiece matches itself */
};

/* ---------------- construction ---------------- */

static int trie_insert(trie *t, const char *s, size_t len, int32_t token) {
    if (t->n == 0) {
        t->nodes = malloc(64 * sizeof *t->nodes);
        if (!t->nodes) return -1;
        t->cap = 64;
        t->nodes[0] = (trie_node){-1, -1, -1, 0};
        t->n = 1;
    }
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = t->nodes[node].child;
        while (c >= 0 && t->nodes[c].byte != b) c = t->nodes[c].sibling;
        if (c < 0) {
            if (t->n == t->cap) {
                trie_node *p = realloc(t->nodes, 2 * t->cap * sizeof *p);
                if (!p) return -1;
                t->nodes = p;
                t->cap *= 2;
            }
            c = (int32_t)t->n++;
            t->nodes[c] = (trie_node){-1, t->nodes[node].child, -1, b};
            t->nodes[node].child = c;
        }
        node = c;
    }
    if (t->nodes[node].token < 0) t->nodes[node].token = token;
    t->first[(uint8_t)s[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s[0] & 7));
    return 0;
}

/* Length of the longest token of t at s[0..len) accepted by ok(), 0 if none. */
static size_t trie_match(const trie *t, const char *s, size_t len, const hfq_tokenizer *tk, int flags,
                         bool (*ok)(const hfq_tokenizer *, int32_t, int), int32_t *token) {
    if (t->n == 0 || !(t->first[(uint8_t)s[0] >> 3] & (1u << ((uint8_t)s[0] & 7)))) return 0;
    size_t best = 0;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t c = t->nodes[node].child;
        while (c >= 0 && t->nodes[c].byte != (uint8_t)s[i]) c = t->nodes[c].sibling;
        if (c < 0) break;
        node = c;
        int32_t tok = t->nodes[node].token;
        if (tok >= 0 && (!ok || ok(tk, tok, flags))) {
            best = i + 1;
            *token = tok;
        }
    }
    return best;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static const merge_entry *merge_find(const hfq_tokenizer *t, int32_t a, int32_t b) {
    if (!t->merges) return NULL;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t h = mix64(key) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        if (t->merges[h].key == key) return &t->merges[h];
        if (t->merges[h].key == EMPTY_KEY) return NULL;
    }
}

static int build_merges(hfq_tokenizer *t, hfq_error *err) {
    const hfq_vocab *v = t->v;
    size_t cap = 16;
    while (cap < (size_t)v->n_merges * 2) cap *= 2;
    t->merges = malloc(cap * sizeof *t->merges);
    if (!t->merges) return hfq_fail(err, v->source, "out of memory");
    for (size_t i = 0; i < cap; i++) t->merges[i].key = EMPTY_KEY;
    t->merge_mask = cap - 1;
    hfq_buf joined = {0};
    for (int64_t r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r];
        const char *sp = strchr(m + 1, ' ');   /* validated: present, not last */
        size_t la = (size_t)(sp - m), lb = strlen(sp + 1);
        int32_t a = hfq_strmap_get(&t->tokens, m, la), b = hfq_strmap_get(&t->tokens, sp + 1, lb);
        joined.len = 0;
        int32_t id = -1;
        if (a >= 0 && b >= 0) {
            if (hfq_buf_append(&joined, m, la) || hfq_buf_append(&joined, sp + 1, lb)) {
                hfq_buf_free(&joined);
                return hfq_fail(err, v->source, "out of memory");
            }
            id = hfq_strmap_get(&t->tokens, joined.data, joined.len);
        }
        if (id < 0) {
            hfq_buf_free(&joined);
            return hfq_fail(err, v->source, "tokenizer.ggml.merges[%lld]: \"%.60s\" names a token that is not in the "
                            "vocabulary", (long long)r, m);
        }
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        size_t h = mix64(key) & t->merge_mask;
        while (t->merges[h].key != EMPTY_KEY && t->merges[h].key != key) h = (h + 1) & t->merge_mask;
        /* a repeated pair keeps its last rank, as Hugging Face's merge map */
        t->merges[h] = (merge_entry){key, (int32_t)r, id};
    }
    hfq_buf_free(&joined);
    return 0;
}

/* GPT-2's reversible byte -> printable code point mapping. */
static void build_byte_chars(hfq_tokenizer *t) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        t->byte_char[b] = printable ? (uint32_t)b : next++;
    }
    for (int c = 0; c < 512; c++) t->char_byte[c] = -1;
    for (int b = 0; b < 256; b++) t->char_byte[t->byte_char[b]] = (int16_t)b;
}

static bool is_spm(const hfq_vocab *v) { return strcmp(v->model, "llama") == 0; }

hfq_tokenizer *hfq_tokenizer_new(const hfq_vocab *v, hfq_error *err) {
    if (hfq_vocab_validate(v, err)) return NULL;
    hfq_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        hfq_fail(err, v->source, "out of memory");
        return NULL;
    }
    t->v = v;
    if (is_spm(v)) {
        t->alg = v->n_merges ? ALG_SPM_MERGES : ALG_SPM_SCORES;
        if (t->alg == ALG_SPM_SCORES && !v->scores) {
            hfq_fail(err, v->source, "tokenizer.ggml.scores: missing (needed by the \"llama\" tokenizer)");
            goto fail;
        }
    } else {
        t->alg = ALG_BYTE_BPE;
        const hfq_pretok_info *pi = hfq_pretok_find(v->pre);
        if (!pi) {
            char names[1024];
            hfq_pretok_names(names, sizeof names);
            hfq_fail(err, v->source, "tokenizer.ggml.pre: pre-tokenizer \"%s\" is not supported (supported: %s)",
                     v->pre, names);
            goto fail;
        }
        t->pre = pi->kind;
        t->ignore_merges = pi->ignore_merges;
        t->nfc = pi->nfc;
    }
    int64_t a, b;
    int rc = hfq_strmap_build(&t->tokens, v->tokens, v->token_lens, v->n_tokens, &a, &b);
    if (rc) {   /* duplicates were refused by hfq_vocab_validate */
        hfq_fail(err, v->source, "out of memory");
        goto fail;
    }
    if (v->n_merges && build_merges(t, err)) goto fail;
    if (v->n_merges) {
        t->in_merge = calloc((size_t)v->n_tokens, 1);
        if (!t->in_merge) goto oom;
        for (size_t h = 0; h <= t->merge_mask; h++) {
            if (t->merges[h].key == EMPTY_KEY) continue;
            t->in_merge[t->merges[h].key >> 32] = 1;
            t->in_merge[t->merges[h].key & 0xFFFFFFFFu] = 1;
        }
    }
    for (int64_t i = 0; i < v->n_tokens && t->alg == ALG_SPM_SCORES; i++) {
        int32_t type = v->token_types[i];
        if (v->token_lens[i] < 2 || (type != HFQ_TOKEN_NORMAL && type != HFQ_TOKEN_USER_DEFINED)) continue;
        for (uint32_t k = 0; k < v->token_lens[i]; k++)
            if ((unsigned char)v->tokens[i][k] < 128) t->ascii_in_piece[(unsigned char)v->tokens[i][k]] = 1;
    }
    if (t->alg == ALG_BYTE_BPE) build_byte_chars(t);
    t->all_byte_tokens = true;
    for (int c = 0; c < 256; c++) {
        char name[8];
        size_t n;
        if (t->alg == ALG_BYTE_BPE) n = (size_t)hfq_utf8_encode(t->byte_char[c], name);
        else n = (size_t)snprintf(name, sizeof name, "<0x%02X>", c);
        t->byte_token[c] = hfq_strmap_get(&t->tokens, name, n);
        if (t->alg != ALG_BYTE_BPE && t->byte_token[c] >= 0 && v->token_types[t->byte_token[c]] != HFQ_TOKEN_BYTE &&
            v->token_types[t->byte_token[c]] != HFQ_TOKEN_NORMAL)
            t->byte_token[c] = -1;
        if (t->byte_token[c] < 0) t->all_byte_tokens = false;
    }
    for (int64_t i = 0; i < v->n_tokens; i++) {
        int32_t type = v->token_types[i];
        bool user = type == HFQ_TOKEN_USER_DEFINED;
        if (type == HFQ_TOKEN_CONTROL || type == HFQ_TOKEN_UNKNOWN || (user && t->alg != ALG_SPM_SCORES)) {
            if (trie_insert(&t->added, v->tokens[i], v->token_lens[i], (int32_t)i)) goto oom;
        } else if (user && trie_insert(&t->user_defined, v->tokens[i], v->token_lens[i], (int32_t)i)) {
            goto oom;
        }
    }
    return t;
oom:
    hfq_fail(err, v->source, "out of memory");
fail:
    hfq_tokenizer_free(t);
    return NULL;
}

void hfq_tokenizer_free(hfq_tokenizer *t) {
    if (!t) return;
    hfq_strmap_free(&t->tokens);
    free(t->merges);
    free(t->in_merge);
    free(t->added.nodes);
    free(t->user_defined.nodes);
    free(t);
}

const hfq_vocab *hfq_tokenizer_vocab(const hfq_tokenizer *t) { return t->v; }

/* ---------------- encoding ---------------- */

/* Min-heap entry: key orders, x/y are payload. */
typedef struct heap_item {
    uint64_t key;
    int32_t x, y;
} heap_item;

typedef struct symbol {
    uint32_t start, len;    /* text span (SentencePiece); len 0 = merged away */
    int32_t id;             /* token id (BPE) */
    int32_t prev, next;
    bool frozen;            /* user-defined piece: never merged */
} symbol;

/* Per-call state; buffers are reused across words. */
typedef struct encoder {
    const hfq_tokenizer *t;
    int32_t *ids;
    size_t n_ids, cap_ids;
    symbol *syms;
    size_t cap_syms;
    heap_item *heap;
    size_t n_heap, cap_heap;
    hfq_buf tmp, norm;
    bool oom;
} encoder;

/* Array p (capacity *cap elements of size elem) with room for n: p itself or
 * a larger copy (capacities double); NULL with e->oom set when out of memory
 * (p is then unchanged). */
static void *reserve(encoder *e, void *p, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < n) c *= 2;
    void *q = realloc(p, c * elem);
    if (!q) {
        e->oom = true;
        return NULL;
    }
    *cap = c;
    return q;
}

static void push_id(encoder *e, int32_t id) {
    int32_t *p = reserve(e, e->ids, &e->cap_ids, e->n_ids + 1, sizeof *p);
    if (!p) return;
    e->ids = p;
    e->ids[e->n_ids++] = id;
}

static bool reserve_syms(encoder *e, size_t n) {
    symbol *p = reserve(e, e->syms, &e->cap_syms, n, sizeof *p);
    if (p) e->syms = p;
    return p != NULL;
}

static void heap_push(encoder *e, uint64_t key, int32_t x, int32_t y) {
    heap_item *p = reserve(e, e->heap, &e->cap_heap, e->n_heap + 1, sizeof *p);
    if (!p) return;
    e->heap = p;
    size_t i = e->n_heap++;
    heap_item it = {key, x, y};
    while (i > 0 && e->heap[(i - 1) / 2].key > key) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = it;
}

static heap_item heap_pop(encoder *e) {
    heap_item top = e->heap[0], last = e->heap[--e->n_heap];
    size_t i = 0, n = e->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && e->heap[c + 1].key < e->heap[c].key) c++;
        if (e->heap[c].key >= last.key) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = last;
    return top;
}

/* Appends a symbol for token id (BPE). */
static void add_sym(encoder *e, size_t *n, int32_t id) {
    if (!reserve_syms(e, *n + 1)) return;
    e->syms[*n] = (symbol){0, 1, id, (int32_t)*n - 1, (int32_t)*n + 1, false};
    (*n)++;
}

typedef void (*push_pair_fn)(encoder *e, int32_t left);

/* Makes syms[a..b) (a < b) a list of its own and queues its adjacent pairs. */
static void queue_pairs(encoder *e, size_t a, size_t b, push_pair_fn push) {
    e->syms[a].prev = -1;
    e->syms[b - 1].next = -1;
    e->n_heap = 0;
    for (size_t i = a; i + 1 < b; i++) push(e, (int32_t)i);
}

/* Runs merge on every stretch of syms[0..n) between symbols that can never
 * merge (isolated): merges cannot cross them, so the stretches are independent
 * and their queues stay small. */
typedef bool (*isolated_fn)(const encoder *e, const symbol *s);
static void merge_stretches(encoder *e, size_t n, isolated_fn isolated, void (*merge)(encoder *, size_t, size_t)) {
    size_t a = 0;
    for (size_t i = 0; i <= n && !e->oom; i++) {
        if (i < n && !isolated(e, &e->syms[i])) continue;
        if (i > a) merge(e, a, i);
        a = i + 1;
    }
}

/* Drops right, just merged into left, from the list and queues the two pairs
 * the grown left symbol now forms. */
static void unlink_merged(encoder *e, int32_t left, int32_t right, push_pair_fn push) {
    symbol *s = e->syms;
    s[right].len = 0;
    s[left].next = s[right].next;
    if (s[left].next >= 0) s[s[left].next].prev = left;
    if (s[left].prev >= 0) push(e, s[left].prev);
    push(e, left);
}

static void bpe_push_pair(encoder *e, int32_t pos) {
    const symbol *s = e->syms;
    if (s[pos].next < 0) return;
    const merge_entry *m = merge_find(e->t, s[pos].id, s[s[pos].next].id);
    if (m) heap_push(e, (uint64_t)(uint32_t)m->rank << 32 | (uint32_t)pos, pos, m->id);
}

/* Hugging Face's Word::merge_all over syms[a..b): lowest rank first, then
 * leftmost; a queued merge is stale when the pair at its position no longer
 * yields the same token. */
static void bpe_merge_range(encoder *e, size_t a, size_t b) {
    symbol *s = e->syms;
    queue_pairs(e, a, b, bpe_push_pair);
    while (e->n_heap && !e->oom) {
        heap_item top = heap_pop(e);
        int32_t pos = top.x;
        if (s[pos].len == 0 || s[pos].next < 0) continue;
        const merge_entry *m = merge_find(e->t, s[pos].id, s[s[pos].next].id);
        if (!m || m->id != top.y) continue;
        s[pos].id = top.y;
        unlink_merged(e, pos, s[pos].next, bpe_push_pair);
    }
}

static bool bpe_isolated(const encoder *e, const symbol *s) {
    return !e->t->in_merge || !e->t->in_merge[s->id];
}

static void bpe_merge_emit(encoder *e, size_t n) {
    if (n == 0 || e->oom) return;
    merge_stretches(e, n, bpe_isolated, bpe_merge_range);
    for (size_t i = 0; i < n && !e->oom; i++)   /* merges absorb to the left: survivors are in order */
        if (e->syms[i].len) push_id(e, e->syms[i].id);
}

/* One pre-tokenized piece of a byte-level BPE vocabulary. */
static int byte_bpe_piece(void *ctx, size_t off, size_t len) {
    encoder *e = ctx;
    const hfq_tokenizer *t = e->t;
    const unsigned char *p = (const unsigned char *)e->tmp.data + off;
    if (t->ignore_merges) {   /* a whole piece in the vocabulary wins */
        hfq_buf *chars = &e->norm;
        chars->len = 0;
        if (hfq_buf_reserve(chars, 2 * len)) {   /* mapped characters are below U+0800 */
            e->oom = true;
            return -1;
        }
        for (size_t i = 0; i < len; i++)
            chars->len += (size_t)hfq_utf8_encode(t->byte_char[p[i]], chars->data + chars->len);
        int32_t id = hfq_strmap_get(&t->tokens, chars->data, chars->len);
        if (id >= 0 && t->v->token_types[id] == HFQ_TOKEN_NORMAL) {
            push_id(e, id);
            return e->oom ? -1 : 0;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (t->byte_token[p[i]] >= 0) add_sym(e, &n, t->byte_token[p[i]]);   /* unmapped bytes are dropped */
    bpe_merge_emit(e, n);
    return e->oom ? -1 : 0;
}

/* SentencePiece text preparation: U+2581 for spaces, one prepended. */
static void spm_normalize(encoder *e, const char *s, size_t len) {
    hfq_buf *b = &e->norm;
    b->len = 0;
    if (hfq_buf_reserve(b, 3 * len + 3)) { e->oom = true; return; }
    if (e->t->v->add_space_prefix) hfq_buf_append(b, SPACE_MARK, 3);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') hfq_buf_append(b, SPACE_MARK, 3);
        else b->data[b->len++] = s[i];
    }
}

/* Hugging Face BPE with byte fallback over the characters of e->norm. */
static void spm_merges_encode(encoder *e) {
    const hfq_tokenizer *t = e->t;
    const char *s = e->norm.data;
    size_t len = e->norm.len, n = 0, pos = 0;
    bool pending_unk = false;
    while (pos < len && !e->oom) {
        size_t start = pos;
        hfq_utf8_next(s, len, &pos);
        int32_t id = hfq_strmap_get(&t->tokens, s + start, pos - start);
        if (id >= 0) {
            if (pending_unk) add_sym(e, &n, t->v->unk_id);
            pending_unk = false;
            add_sym(e, &n, id);
            continue;
        }
        bool bytes = true;
        for (size_t i = start; i < pos; i++) bytes = bytes && t->byte_token[(uint8_t)s[i]] >= 0;
        if (bytes) {   /* Hugging Face adds these before a pending unknown */
            for (size_t i = start; i < pos; i++) add_sym(e, &n, t->byte_token[(uint8_t)s[i]]);
        } else if (t->v->unk_id >= 0) {
            pending_unk = true;   /* consecutive unknown characters fuse */
        }
    }
    if (pending_unk) add_sym(e, &n, t->v->unk_id);
    bpe_merge_emit(e, n);
}

/* Pieces SentencePiece's BPE may merge into. */
static int32_t spm_piece(const hfq_tokenizer *t, const char *s, size_t len) {
    int32_t id = hfq_strmap_get(&t->tokens, s, len);
    if (id < 0) return -1;
    int32_t type = t->v->token_types[id];
    return type == HFQ_TOKEN_NORMAL || type == HFQ_TOKEN_USER_DEFINED ? id : -1;
}

/* Heap key ordering higher scores first, then lower left positions. */
static uint64_t score_key(float score, int32_t left) {
    uint32_t bits;
    memcpy(&bits, &score, 4);
    bits = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;   /* ascending float order */
    return (uint64_t)(~bits) << 32 | (uint32_t)left;
}

static void spm_push_pair(encoder *e, int32_t left) {
    const symbol *s = e->syms;
    int32_t right = s[left].next;
    if (right < 0 || s[left].frozen || s[right].frozen) return;
    int32_t id = spm_piece(e->t, e->norm.data + s[left].start, s[left].len + s[right].len);
    if (id >= 0) heap_push(e, score_key(e->t->v->scores[id], left), right, (int32_t)(s[left].len + s[right].len));
}

/* SentencePiece's merge loop over syms[a..b): highest score first, then leftmost. */
static void spm_merge_range(encoder *e, size_t a, size_t b) {
    symbol *sy = e->syms;
    queue_pairs(e, a, b, spm_push_pair);
    while (e->n_heap && !e->oom) {
        heap_item top = heap_pop(e);
        int32_t left = (int32_t)(uint32_t)top.key, right = top.x;
        if (sy[left].len == 0 || sy[right].len == 0 || sy[left].len + sy[right].len != (uint32_t)top.y) continue;
        sy[left].len += sy[right].len;
        unlink_merged(e, left, right, spm_push_pair);
    }
}

/* A user-defined piece, or an ASCII character no longer piece contains. */
static bool spm_isolated(const encoder *e, const symbol *s) {
    unsigned char c = (unsigned char)e->norm.data[s->start];
    return s->frozen || (s->len == 1 && c < 128 && !e->t->ascii_in_piece[c]);
}

/* SentencePiece's BPE over e->norm. */
static void spm_scores_encode(encoder *e) {
    const hfq_tokenizer *t = e->t;
    const char *s = e->norm.data;
    size_t len = e->norm.len, n = 0, pos = 0;
    while (pos < len && !e->oom) {
        int32_t tok;
        size_t m = trie_match(&t->user_defined, s + pos, len - pos, t, 0, NULL, &tok);
        size_t start = pos;
        if (m) pos += m;
        else hfq_utf8_next(s, len, &pos);
        if (!reserve_syms(e, n + 1)) return;
        e->syms[n] = (symbol){(uint32_t)start, (uint32_t)(pos - start), -1, (int32_t)n - 1, (int32_t)n + 1, m > 0};
        n++;
    }
    if (n == 0 || e->oom) return;
    merge_stretches(e, n, spm_isolated, spm_merge_range);
    const symbol *sy = e->syms;
    bool prev_unk = false;
    for (size_t i = 0; i < n && !e->oom; i++) {   /* survivors, in order */
        if (sy[i].len == 0) continue;
        const char *p = s + sy[i].start;
        int32_t id = spm_piece(t, p, sy[i].len);
        if (id >= 0) {
            push_id(e, id);
            prev_unk = false;
            continue;
        }
        bool bytes = true;   /* an unknown character: byte fallback, else <unk> */
        for (uint32_t k = 0; k < sy[i].len; k++) bytes = bytes && t->byte_token[(uint8_t)p[k]] >= 0;
        if (bytes) {
            for (uint32_t k = 0; k < sy[i].len; k++) push_id(e, t->byte_token[(uint8_t)p[k]]);
            prev_unk = false;
        } else if (t->v->unk_id >= 0 && !prev_unk) {
            push_id(e, t->v->unk_id);
            prev_unk = true;
        }
    }
}

/* Tokenizes one stretch of text between added tokens. */
static void encode_segment(encoder *e, const char *s, size_t len) {
    const hfq_tokenizer *t = e->t;
    if (len == 0 || e->oom) return;
    if (t->alg == ALG_BYTE_BPE) {
        e->tmp.len = 0;
        if (t->nfc ? hfq_nfc(s, len, &e->tmp) : hfq_buf_append(&e->tmp, s, len)) {
            e->oom = true;
            return;
        }
        if (hfq_pretok_split(t->pre, e->tmp.data, e->tmp.len, byte_bpe_piece, e)) e->oom = true;
        return;
    }
    spm_normalize(e, s, len);
    if (e->oom) return;
    if (t->alg == ALG_SPM_MERGES) spm_merges_encode(e);
    else spm_scores_encode(e);
}

static bool added_allowed(const hfq_tokenizer *t, int32_t id, int flags) {
    int32_t type = t->v->token_types[id];
    if (type == HFQ_TOKEN_USER_DEFINED) return true;
    return (flags & HFQ_TOK_PARSE_SPECIAL) != 0;
}

int hfq_tokenize(const hfq_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                 size_t *n_ids, hfq_error *err) {
    encoder e = {.t = t};
    hfq_buf clean = {0};
    const hfq_vocab *v = t->v;
    *ids = NULL;
    *n_ids = 0;
    if (hfq_utf8_sanitize(text, len, &clean)) e.oom = true;
    if ((flags & HFQ_TOK_ADD_SPECIAL) && v->add_bos && v->bos_id >= 0) push_id(&e, v->bos_id);
    size_t seg = 0;
    for (size_t pos = 0; pos < clean.len && !e.oom;) {
        int32_t tok;
        size_t m = trie_match(&t->added, clean.data + pos, clean.len - pos, t, flags, added_allowed, &tok);
        if (!m) {
            pos++;
            continue;
        }
        encode_segment(&e, clean.data + seg, pos - seg);
        push_id(&e, tok);
        pos += m;
        seg = pos;
    }
    if (seg < clean.len) encode_segment(&e, clean.data + seg, clean.len - seg);   /* data is NULL for "" */
    if ((flags & HFQ_TOK_ADD_SPECIAL) && v->add_eos && v->eos_id >= 0) push_id(&e, v->eos_id);
    hfq_buf_free(&clean);
    hfq_buf_free(&e.tmp);
    hfq_buf_free(&e.norm);
    free(e.syms);
    free(e.heap);
    if (e.oom) {
        free(e.ids);
        return hfq_fail(err, v->source, "out of memory while tokenizing %zu bytes", len);
    }
    *ids = e.ids;
    *n_ids = e.n_ids;
    return 0;
}

/* ---------------- decoding ---------------- */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Appends n bytes to buf when they fit; returns the new length. */
static size_t put(char *buf, size_t cap, size_t at, const void *p, size_t n) {
    if (at + n <= cap) memcpy(buf + at, p, n);
    return at + n;
}

int hfq_token_to_piece(const hfq_tokenizer *t, int32_t id, bool special, char *buf, size_t cap) {
    const hfq_vocab *v = t->v;
    if (id < 0 || id >= v->n_tokens) return -1;
    const char *text = v->tokens[id];
    size_t len = v->token_lens[id], out = 0;
    switch (v->token_types[id]) {
    case HFQ_TOKEN_CONTROL:
    case HFQ_TOKEN_UNKNOWN:
        return special ? (int)put(buf, cap, 0, text, len) : 0;
    case HFQ_TOKEN_USER_DEFINED:
        return (int)put(buf, cap, 0, text, len);
    case HFQ_TOKEN_BYTE:
        if (len == 6 && hex_digit(text[3]) >= 0 && hex_digit(text[4]) >= 0) {
            char byte = (char)(hex_digit(text[3]) * 16 + hex_digit(text[4]));
            return (int)put(buf, cap, 0, &byte, 1);
        }
        return (int)put(buf, cap, 0, text, len);
    case HFQ_TOKEN_NORMAL:
        break;
    default:   /* UNUSED */
        return 0;
    }
    if (t->alg != ALG_BYTE_BPE) {   /* U+2581 -> space */
        for (size_t i = 0; i < len;) {
            if (i + 3 <= len && !memcmp(text + i, SPACE_MARK, 3)) {
                out = put(buf, cap, out, " ", 1);
                i += 3;
            } else {
                out = put(buf, cap, out, text + i++, 1);
            }
        }
        return (int)out;
    }
    for (size_t pos = 0; pos < len;) {   /* byte-level: characters -> bytes */
        size_t start = pos;
        uint32_t c = hfq_utf8_next(text, len, &pos);
        if (c < 512 && t->char_byte[c] >= 0) {
            char byte = (char)t->char_byte[c];
            out = put(buf, cap, out, &byte, 1);
        } else {
            out = put(buf, cap, out, text + start, pos - start);
        }
    }
    return (int)out;
}

char *hfq_detokenize(const hfq_tokenizer *t, const int32_t *ids, size_t n_ids, bool special, size_t *len,
                     hfq_error *err) {
    hfq_buf out = {0};
    for (size_t i = 0; i < n_ids; i++) {
        int n = hfq_token_to_piece(t, ids[i], special, NULL, 0);
        if (n < 0) {
            hfq_buf_free(&out);
            hfq_fail(err, t->v->source, "token id %d is outside the vocabulary of %lld tokens", ids[i],
                     (long long)t->v->n_tokens);
            return NULL;
        }
        if (hfq_buf_reserve(&out, (size_t)n + 1)) {
            hfq_buf_free(&out);
            hfq_fail(err, t->v->source, "out of memory");
            return NULL;
        }
        out.len += (size_t)hfq_token_to_piece(t, ids[i], special, out.data + out.len, (size_t)n);
    }
    if (hfq_buf_reserve(&out, 1)) {
        hfq_buf_free(&out);
        hfq_fail(err, t->v->source, "out of memory");
        return NULL;
    }
    size_t skip = t->alg != ALG_BYTE_BPE && t->v->add_space_prefix && out.len && out.data[0] == ' ';
    memmove(out.data, out.data + skip, out.len - skip);
    out.len -= skip;
    out.data[out.len] = '\0';
    *len = out.len;
    return out.data;
}
