/* unicode.c - UTF-8 decoding, character classes and NFC (see unicode.h). */
#include "src/tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

uint32_t hfq_utf8_next(const char *s, size_t len, size_t *pos) {
    const unsigned char *u = (const unsigned char *)s + *pos;
    size_t n = hfq_utf8_valid_len(s + *pos, len - *pos);
    if (n == 0) { *pos += 1; return HFQ_CP_REPLACEMENT; }
    *pos += n;
    switch (n) {
    case 1: return u[0];
    case 2: return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    case 3: return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    default:
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
               ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    }
}

int hfq_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static unsigned range_lookup(const hfq_ucd_range *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return r[mid].value;
    }
    return 0;
}

unsigned hfq_cp_flags(uint32_t cp) {
    if (cp < 0x80) {  /* fast path: ASCII */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return HFQ_UCD_L;
        if (cp >= '0' && cp <= '9') return HFQ_UCD_N;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return HFQ_UCD_WS;
        return 0;
    }
    return range_lookup(hfq_ucd_class, hfq_ucd_n_class, cp);
}

unsigned hfq_cp_ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    return range_lookup(hfq_ucd_ccc, hfq_ucd_n_ccc, cp);
}

/* ---- growable buffers ---- */

int hfq_buf_reserve(hfq_buf *b, size_t extra) {
    if (extra <= b->cap - b->len) return 0;
    if (extra > SIZE_MAX / 2 - b->len) return -1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int hfq_buf_append(hfq_buf *b, const void *p, size_t n) {
    if (hfq_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void hfq_buf_free(hfq_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

int hfq_utf8_sanitize(const char *text, size_t len, hfq_buf *out) {
    static const char repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    if (hfq_buf_reserve(out, len)) return -1;
    size_t pos = 0;
    while (pos < len) {
        size_t start = pos;   /* copy the longest valid run at once */
        size_t n;
        while (pos < len && (n = hfq_utf8_valid_len(text + pos, len - pos)) != 0) pos += n;
        if (hfq_buf_append(out, text + start, pos - start)) return -1;
        if (pos < len) {
            if (hfq_buf_append(out, repl, 3)) return -1;
            pos++;
        }
    }
    return 0;
}

/* ---- NFC (Unicode Standard Annex #15) ---- */

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
       L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT,
       S_COUNT = L_COUNT * N_COUNT };

typedef struct cp_vec {
    uint32_t *v;
    size_t n, cap;
} cp_vec;

static int cp_push(cp_vec *c, uint32_t cp) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        uint32_t *p = realloc(c->v, cap * sizeof *p);
        if (!p) return -1;
        c->v = p;
        c->cap = cap;
    }
    c->v[c->n++] = cp;
    return 0;
}

static const hfq_ucd_decomp *find_decomp(uint32_t cp) {
    size_t lo = 0, hi = hfq_ucd_n_decomp;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hfq_ucd_decomp_map[mid].cp < cp) lo = mid + 1;
        else if (hfq_ucd_decomp_map[mid].cp > cp) hi = mid;
        else return &hfq_ucd_decomp_map[mid];
    }
    return NULL;
}

static int decompose(uint32_t cp, cp_vec *out) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE;
        if (cp_push(out, L_BASE + s / N_COUNT) || cp_push(out, V_BASE + (s % N_COUNT) / T_COUNT))
            return -1;
        if (s % T_COUNT && cp_push(out, T_BASE + s % T_COUNT)) return -1;
        return 0;
    }
    const hfq_ucd_decomp *d = find_decomp(cp);
    if (!d) return cp_push(out, cp);
    for (unsigned i = 0; i < d->len; i++)
        if (cp_push(out, hfq_ucd_decomp_pool[d->off + i])) return -1;
    return 0;
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 &&
        b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = hfq_ucd_n_comp;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const hfq_ucd_comp *c = &hfq_ucd_comp_map[mid];
        if (c->first < a || (c->first == a && c->second < b)) lo = mid + 1;
        else if (c->first == a && c->second == b) return c->composite;
        else hi = mid;
    }
    return 0;
}

/* Stable sort of v[0..n) by combining class (all non-zero). Short runs, the
 * normal case, use insertion sort; long ones a counting sort, so hostile runs
 * of marks stay linear. */
static int sort_by_ccc(uint32_t *v, size_t n) {
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = v[i];
            unsigned cx = hfq_cp_ccc(x);
            size_t j = i;
            while (j > 0 && hfq_cp_ccc(v[j - 1]) > cx) { v[j] = v[j - 1]; j--; }
            v[j] = x;
        }
        return 0;
    }
    uint32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return -1;
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[hfq_cp_ccc(v[i]) + 1]++;
    for (int c = 1; c < 257; c++) count[c] += count[c - 1];
    for (size_t i = 0; i < n; i++) tmp[count[hfq_cp_ccc(v[i])]++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
    free(tmp);
    return 0;
}

int hfq_nfc(const char *text, size_t len, hfq_buf *out) {
    size_t i;
    for (i = 0; i < len; i++)
        if ((unsigned char)text[i] >= 0xCC) break;   /* U+0300 and above */
    if (i == len) return hfq_buf_append(out, text, len);   /* below U+0300: already NFC */

    cp_vec d = {0};
    int rc = -1;
    size_t pos = 0;
    while (pos < len)
        if (decompose(hfq_utf8_next(text, len, &pos), &d)) goto done;
    for (size_t a = 0; a < d.n;) {   /* canonical ordering */
        if (hfq_cp_ccc(d.v[a]) == 0) { a++; continue; }
        size_t b = a;
        while (b < d.n && hfq_cp_ccc(d.v[b]) != 0) b++;
        if (sort_by_ccc(d.v + a, b - a)) goto done;
        a = b;
    }
    /* canonical composition, in place */
    size_t n_out = 0, starter = 0;
    bool have_starter = false;
    unsigned last_ccc = 0;
    for (size_t k = 0; k < d.n; k++) {
        uint32_t cp = d.v[k];
        unsigned ccc = hfq_cp_ccc(cp);
        if (have_starter && (last_ccc < ccc || last_ccc == 0)) {
            /* not blocked: last_ccc == 0 means the starter is the last kept */
            uint32_t c = compose_pair(d.v[starter], cp);
            if (c) {
                d.v[starter] = c;
                continue;
            }
        }
        if (ccc == 0) { starter = n_out; have_starter = true; }
        last_ccc = ccc;
        d.v[n_out++] = cp;
    }
    if (hfq_buf_reserve(out, n_out * 4)) goto done;
    for (size_t k = 0; k < n_out; k++)
        out->len += (size_t)hfq_utf8_encode(d.v[k], out->data + out->len);
    rc = 0;
done:
    free(d.v);
    return rc;
}
