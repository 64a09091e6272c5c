/* hessian.c - see calib/hessian.h. */
#include "calib/hessian.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "calib/names.h"
#include "quant/dgemm.h"

/* Rows and columns of H per thread's tile (the tile's columns of a chunk
 * stay in cache while its rows stream past). */
#define TILE 128

/* Doubles of the copies of a chunk: by channels (the broadcast side, a
 * channel's tokens contiguous) and by panels of 8 channels (quant/dgemm.h's
 * packed B): a tile's tokens then lie in a few pages, not one page each. */
static int64_t chunk_doubles(int64_t n) { return HFQ_HESSIAN_CHUNK * (n + (n + 7) / 8 * 8); }

static int64_t layer_of(const char *name, int64_t n_layer) {
    if (strncmp(name, "blk.", 4) != 0) return n_layer;
    return strtoll(name + 4, NULL, 10);
}

static int by_layer(const void *a, const void *b) {
    const hfq_hessian_input *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

int hfq_hessian_plan(const gguf_file *f, hfq_hessian_input **out, int64_t *n, hfq_error *err) {
    const int64_t nt = gguf_n_tensors(f);
    *out = calloc((size_t)(nt > 0 ? nt : 1), sizeof **out);
    *n = 0;
    if (!*out) return hfq_fail(err, gguf_path(f), "out of memory");
    int64_t max_layer = -1;
    for (int64_t i = 0; i < nt; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const size_t len = strlen(t->name);
        char leader[HFQ_HESSIAN_NAME];
        const bool blk = strncmp(t->name, "blk.", 4) == 0;
        if (!(blk || strcmp(t->name, "output.weight") == 0) || len >= HFQ_HESSIAN_NAME || t->n_dims != 2 ||
            len < 7 || strcmp(t->name + len - 7, ".weight") != 0 ||
            !hfq_calib_input_leader(t->name, leader, sizeof leader))
            continue;
        hfq_hessian_input *in = &(*out)[(*n)++];
        memcpy(in->name, t->name, len + 1);
        in->n = t->ne[0];
        in->layer = blk ? layer_of(t->name, 0) : -1;
        if (in->layer > max_layer) max_layer = in->layer;
    }
    for (int64_t i = 0; i < *n; i++)
        if ((*out)[i].layer < 0) (*out)[i].layer = max_layer + 1;
    qsort(*out, (size_t)*n, sizeof **out, by_layer);
    return 0;
}

int64_t hfq_hessian_bytes(const hfq_hessian_input *in) { return in->n * in->n * (int64_t)sizeof(double); }

int64_t hfq_hessian_window(const hfq_hessian_input *in, int64_t n, int64_t first, int64_t budget) {
    int64_t end = first, used = 0;
    while (end < n) {
        int64_t e = end, layer_bytes = 0;
        while (e < n && in[e].layer == in[end].layer) layer_bytes += hfq_hessian_bytes(&in[e++]);
        if (end > first && used + layer_bytes > budget) break;
        used += layer_bytes;
        end = e;
    }
    return end;
}

int hfq_hessian_set_init(hfq_hessian_set *s, const hfq_hessian_input *in, int64_t n, int n_threads, hfq_error *err) {
    memset(s, 0, sizeof *s);
    s->n_threads = n_threads;
    s->e = calloc((size_t)(n > 0 ? n : 1), sizeof *s->e);
    int64_t widest = 1;
    for (int64_t i = 0; i < n; i++) widest = in[i].n > widest ? in[i].n : widest;
    s->chunk = malloc((size_t)chunk_doubles(widest) * sizeof(double));
    if (!s->e || !s->chunk) {
        hfq_hessian_set_free(s);
        return hfq_fail(err, "GPTQ", "out of memory");
    }
    for (int64_t i = 0; i < n; i++, s->n++) {
        s->e[i].in = in[i];
        s->e[i].xd = s->chunk;
        s->e[i].h = calloc((size_t)(in[i].n * in[i].n), sizeof(double));
        if (!s->e[i].h) {
            hfq_hessian_set_free(s);
            return hfq_fail(err, in[i].name, "out of memory for its %lld x %lld Hessian (--gptq-memory)",
                            (long long)in[i].n, (long long)in[i].n);
        }
    }
    return 0;
}

int hfq_hessian_set_cross(hfq_hessian_set *s, hfq_error *err) {
    int64_t widest = 1;
    for (int64_t i = 0; i < s->n; i++) widest = s->e[i].in.n > widest ? s->e[i].in.n : widest;
    if (!s->dchunk && !(s->dchunk = malloc((size_t)(HFQ_HESSIAN_CHUNK * widest) * sizeof(double))))
        return hfq_fail(err, "GPTQ", "out of memory");
    for (int64_t i = 0; i < s->n; i++) {
        hfq_hessian *h = &s->e[i];
        h->dd = s->dchunk;
        if (!h->cross && !(h->cross = calloc((size_t)(h->in.n * h->in.n), sizeof(double))))
            return hfq_fail(err, h->in.name, "out of memory for its %lld x %lld cross term (--gptq-memory)",
                            (long long)h->in.n, (long long)h->in.n);
    }
    return 0;
}

void hfq_hessian_set_free(hfq_hessian_set *s) {
    for (int64_t i = 0; s->e && i < s->n; i++) {
        free(s->e[i].h);
        free(s->e[i].cross);
    }
    free(s->e);
    free(s->chunk);
    free(s->dchunk);
    memset(s, 0, sizeof *s);
}

hfq_hessian *hfq_hessian_find(hfq_hessian_set *s, const char *name) {
    for (int64_t i = 0; i < s->n; i++)
        if (strcmp(s->e[i].in.name, name) == 0) return &s->e[i];
    return NULL;
}

/* H += X^T X over its upper triangle's tiles and, with xq (h->cross),
 * D += (X - Xq)^T X over all of D's tiles, a chunk of tokens at a time. */
static void accumulate(hfq_hessian *h, const float *x, const float *xq, int64_t n_tokens, int n_threads, hfq_isa isa) {
    enum { CH = HFQ_HESSIAN_CHUNK, NR = HFQ_DGEMM_NR };
    const int64_t n = h->in.n, nt = (n + TILE - 1) / TILE, n_tri = nt * (nt + 1) / 2;
    const int64_t n_tiles = n_tri + (xq ? nt * nt : 0);
    double *hh = h->h, *xt = h->xd, *xp = h->xd + n * CH, *dt = h->dd;
    h->n_tokens += n_tokens;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += CH) {
        const int64_t tc = n_tokens - t0 < CH ? n_tokens - t0 : CH;
        for (int64_t t = 0; t < tc; t++)
            for (int64_t i = 0; i < n; i++) {
                const double v = x[(t0 + t) * n + i];
                xt[i * CH + t] = v;
                xp[i / NR * (CH * NR) + t * NR + i % NR] = v;
                if (xq) dt[i * CH + t] = v - (double)xq[(t0 + t) * n + i]; /* exact: two floats */
            }
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads > 0 ? n_threads : omp_get_max_threads()) if (n > 256)
        for (int64_t k = 0; k < n_tiles; k++) {
            const bool tri = k < n_tri;
            int64_t bi = 0, bj, rem = k;
            if (tri) { /* tile k of H's upper triangle: row block bi, column block bj >= bi */
                while (rem >= nt - bi) rem -= nt - bi++;
                bj = bi + rem;
            } else {
                bi = (k - n_tri) / nt;
                bj = (k - n_tri) % nt;
            }
            const int64_t i0 = bi * TILE, i1 = i0 + TILE < n ? i0 + TILE : n;
            const int64_t j0 = bj * TILE, j1 = j0 + TILE < n ? j0 + TILE : n;
            /* c_ij += a_ti x_tj for the chunk's tokens t in order (H: j >= i) */
            const hfq_dgemm g = {.m = i1 - i0, .n = j1 - j0, .k = tc, .a = (tri ? xt : dt) + i0 * CH, .a_row = CH,
                                 .a_col = 1, .b = xp + j0 / NR * (CH * NR), .ldb = NR, .b_panel = CH * NR,
                                 .c = (tri ? hh : h->cross) + i0 * n + j0, .ldc = n,
                                 .lo = tri ? i0 - j0 : INT64_MIN / 2, .hi = INT64_MAX / 2};
            hfq_dgemm_run(&g, isa);
        }
    }
}

void hfq_hessian_add_isa(hfq_hessian *h, const float *x, int64_t n_tokens, int n_threads, hfq_isa isa) {
    accumulate(h, x, NULL, n_tokens, n_threads, isa);
}

void hfq_hessian_add_quantized_isa(hfq_hessian *h, const float *x, const float *xq, int64_t n_tokens,
                                   int n_threads, hfq_isa isa) {
    accumulate(h, x, h->cross ? xq : NULL, n_tokens, n_threads, isa);
}

void hfq_hessian_add_quantized(hfq_hessian *h, const float *x, const float *xq, int64_t n_tokens, int n_threads) {
    hfq_hessian_add_quantized_isa(h, x, xq, n_tokens, n_threads, hfq_dgemm_isa());
}

void hfq_hessian_add(hfq_hessian *h, const float *x, int64_t n_tokens, int n_threads) {
    hfq_hessian_add_isa(h, x, n_tokens, n_threads, hfq_dgemm_isa());
}

void hfq_hessian_observe(void *user, const char *weight_name, const float *x, int64_t n_tokens, int64_t n_in) {
    hfq_hessian_set *s = user;
    hfq_hessian *h = s->failed ? NULL : hfq_hessian_find(s, weight_name);
    if (!h) return;
    if (n_in != h->in.n) {
        s->failed = true;
        hfq_fail(&s->err, weight_name, "input of %lld channels, the weight takes %lld", (long long)n_in,
                 (long long)h->in.n);
        return;
    }
    hfq_hessian_add(h, x, n_tokens, s->n_threads);
}
