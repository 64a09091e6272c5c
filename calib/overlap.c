/* overlap.c - see calib/overlap.h. */
#include "calib/overlap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static uint64_t window_hash(const int32_t *t, int64_t window) { return XXH3_64bits(t, (size_t)window * sizeof *t); }

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int hfq_overlap_windows(const hfq_calib_seqs *seqs, uint64_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    for (int64_t i = 0; i < seqs->n; i++) {
        int64_t len = seqs->start[i + 1] - seqs->start[i] - 1;
        if (len >= HFQ_OVERLAP_WINDOW) cap += (size_t)(len / HFQ_OVERLAP_WINDOW);
    }
    if (cap == 0) return 0;
    uint64_t *h = malloc(cap * sizeof *h);
    if (!h) return -1;
    size_t k = 0;
    for (int64_t i = 0; i < seqs->n; i++) {
        const int32_t *t = seqs->tokens + seqs->start[i] + 1;
        int64_t len = seqs->start[i + 1] - seqs->start[i] - 1;
        for (int64_t p = 0; p + HFQ_OVERLAP_WINDOW <= len; p += HFQ_OVERLAP_WINDOW)
            h[k++] = window_hash(t + p, HFQ_OVERLAP_WINDOW);
    }
    qsort(h, k, sizeof *h, cmp_u64);
    size_t u = 0;
    for (size_t j = 0; j < k; j++)
        if (u == 0 || h[j] != h[u - 1]) h[u++] = h[j];
    if (u > HFQ_OVERLAP_MAX_WINDOWS) u = HFQ_OVERLAP_MAX_WINDOWS;
    *out = h;
    *n = u;
    return 0;
}

int64_t hfq_overlap_count(const uint64_t *set, size_t n_set, int64_t window, const int32_t *tokens,
                          int64_t n_tokens) {
    int64_t hits = 0;
    if (n_set == 0 || window <= 0) return 0;
    for (int64_t p = 0; p + window <= n_tokens; p++) {
        uint64_t h = window_hash(tokens + p, window);
        if (h > set[n_set - 1]) continue;
        if (bsearch(&h, set, n_set, sizeof *set, cmp_u64)) hits++;
    }
    return hits;
}

#define KEY_WINDOWS "hfq.calib.token_windows"
#define KEY_WINDOW "hfq.calib.token_window"

int hfq_overlap_write(gguf_writer *w, const hfq_calib_seqs *seqs) {
    uint64_t *set;
    size_t n;
    if (hfq_overlap_windows(seqs, &set, &n)) return -1;
    int rc = n == 0 ? 0
                    : gguf_set_u32(w, KEY_WINDOW, HFQ_OVERLAP_WINDOW) |
                          gguf_set_arr(w, KEY_WINDOWS, GGUF_VT_UINT64, set, (int64_t)n);
    free(set);
    return rc ? -1 : 0;
}

int hfq_overlap_check(const gguf_file *f, const int32_t *tokens, int64_t n_tokens, bool *stored, int64_t *hits,
                      hfq_error *err) {
    *stored = false;
    *hits = 0;
    const int64_t ki = gguf_find_key(f, KEY_WINDOWS), kw = gguf_find_key(f, KEY_WINDOW);
    if (ki < 0 && kw < 0) return 0;
    int64_t window = 0;
    if (ki < 0 || kw < 0 || gguf_get_int(f, kw, &window, err) || window <= 0 || window > 4096 ||
        gguf_arr_type(f, ki) != GGUF_VT_UINT64)
        return hfq_fail(err, gguf_path(f), "malformed %s / %s", KEY_WINDOWS, KEY_WINDOW);
    const int64_t n = gguf_arr_n(f, ki);
    uint64_t *set = n > 0 ? malloc((size_t)n * sizeof *set) : NULL;
    if (n > 0 && !set) return hfq_fail(err, gguf_path(f), "out of memory for %s", KEY_WINDOWS);
    if (n > 0) memcpy(set, gguf_arr_data(f, ki), (size_t)n * sizeof *set);
    for (int64_t i = 1; i < n; i++)
        if (set[i] <= set[i - 1]) {
            free(set);
            return hfq_fail(err, gguf_path(f), "malformed %s: not ascending", KEY_WINDOWS);
        }
    *stored = true;
    *hits = hfq_overlap_count(set, (size_t)n, window, tokens, n_tokens);
    free(set);
    return 0;
}
