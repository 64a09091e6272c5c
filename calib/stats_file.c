/* stats_file.c - see stats_file.h. */
#include "calib/stats_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"

#define KEY_VERSION "hfq.calib.version"
#define KEY_MODE "hfq.calib.mode"
#define KEY_N_TOKENS "hfq.calib.n_tokens"
#define KEY_TEXT_XXH3 "hfq.calib.text_xxh3"
#define KEY_HIST_MIN "hfq.calib.hist.min_log2"
#define KEY_HIST_MAX "hfq.calib.hist.max_log2"
#define KEY_HIST_PER_OCTAVE "hfq.calib.hist.per_octave"
#define KEY_KV_HEADS "hfq.calib.kv.n_head_kv"
#define KEY_KV_K "hfq.calib.kv.k_amax"
#define KEY_KV_V "hfq.calib.kv.v_amax"

/* The tensors of one weight, in file order; in_sum2 and counts are llama.cpp's. */
enum { T_SUM2, T_COUNTS, T_SUM_ABS, T_MAX, T_HIST, T_SAMPLE, T_KINDS };
static const char *const suffixes[T_KINDS] = {".in_sum2", ".counts", ".in_sum_abs", ".in_max", ".tok_max_hist",
                                              ".in_sample"};

static int tensor_name(char *out, size_t cap, const char *weight, int kind) {
    int w = snprintf(out, cap, "%s%s", weight, suffixes[kind]);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}

/* ---- saving ---- */

/* Declares [ne0, ne1] as ggml would write it (ne1 == 1 dropped). */
static int add(gguf_writer *w, const char *weight, int kind, int64_t ne0, int64_t ne1, hfq_error *err) {
    char name[GGUF_MAX_NAME + 1];
    if (tensor_name(name, sizeof name, weight, kind) < 0)
        return hfq_fail(err, weight, "the name of its statistics tensor %s is too long", suffixes[kind]);
    const int64_t ne[2] = {ne0, ne1};
    return gguf_add_tensor(w, name, GT_F32, ne1 > 1 ? 2 : 1, ne, err) < 0 ? -1 : 0;
}

static int declare(gguf_writer *w, const hfq_calib_entry *e, hfq_error *err) {
    if (!e->in_sum2 || e->acc) return hfq_fail(err, e->name, "statistics are not finished");
    if (add(w, e->name, T_SUM2, e->n_in, e->n_mats, err) || add(w, e->name, T_COUNTS, 1, e->n_mats, err) ||
        (e->in_sum_abs && add(w, e->name, T_SUM_ABS, e->n_in, e->n_mats, err)) ||
        (e->in_max && add(w, e->name, T_MAX, e->n_in, e->n_mats, err)) ||
        (e->tok_hist && add(w, e->name, T_HIST, HFQ_CALIB_HIST_BINS, e->n_mats, err)) ||
        (e->sample && add(w, e->name, T_SAMPLE, e->n_in, e->n_sample, err)))
        return -1;
    return 0;
}

static int write_entry(gguf_writer *w, const hfq_calib_entry *e, float *counts, hfq_error *err) {
    const uint64_t nv = (uint64_t)(e->n_in * e->n_mats) * sizeof(float);
    for (int64_t m = 0; m < e->n_mats; m++) counts[m] = (float)e->counts[m];
    if (gguf_writer_write_data(w, e->in_sum2, nv, err) || gguf_writer_write_data(w, counts, (uint64_t)e->n_mats * 4, err) ||
        (e->in_sum_abs && gguf_writer_write_data(w, e->in_sum_abs, nv, err)) ||
        (e->in_max && gguf_writer_write_data(w, e->in_max, nv, err)) ||
        (e->tok_hist &&
         gguf_writer_write_data(w, e->tok_hist, (uint64_t)(e->n_mats * HFQ_CALIB_HIST_BINS) * sizeof(float), err)) ||
        (e->sample && gguf_writer_write_data(w, e->sample, (uint64_t)(e->n_in * e->n_sample) * sizeof(float), err)))
        return -1;
    return 0;
}

static int set_keys(gguf_writer *w, const hfq_calib_stats *s) {
    int rc = gguf_set_str(w, "general.type", "imatrix");
    rc |= gguf_set_arr_str(w, "imatrix.datasets", (const char *const *)s->datasets, NULL, s->n_datasets);
    rc |= gguf_set_u32(w, "imatrix.chunk_count", (uint32_t)(s->n_chunks > UINT32_MAX ? UINT32_MAX : s->n_chunks));
    rc |= gguf_set_u32(w, "imatrix.chunk_size", (uint32_t)(s->chunk_size > UINT32_MAX ? UINT32_MAX : s->chunk_size));
    rc |= gguf_set_u32(w, KEY_VERSION, 1);
    if (s->mode[0]) rc |= gguf_set_str(w, KEY_MODE, s->mode);
    if (s->n_tokens > 0) rc |= gguf_set_u64(w, KEY_N_TOKENS, (uint64_t)s->n_tokens);
    if (s->has_text_xxh3) rc |= gguf_set_u64(w, KEY_TEXT_XXH3, s->text_xxh3);
    rc |= gguf_set_i32(w, KEY_HIST_MIN, HFQ_CALIB_HIST_MIN_LOG2);
    rc |= gguf_set_i32(w, KEY_HIST_MAX, HFQ_CALIB_HIST_MAX_LOG2);
    rc |= gguf_set_i32(w, KEY_HIST_PER_OCTAVE, HFQ_CALIB_HIST_PER_OCTAVE);
    if (s->k_amax) { /* keys, not tensors: llama.cpp reads the tensors and ignores keys it does not know */
        rc |= gguf_set_u32(w, KEY_KV_HEADS, (uint32_t)s->kv_heads);
        rc |= gguf_set_arr(w, KEY_KV_K, GGUF_VT_FLOAT32, s->k_amax, s->kv_layers * s->kv_heads);
        rc |= gguf_set_arr(w, KEY_KV_V, GGUF_VT_FLOAT32, s->v_amax, s->kv_layers * s->kv_heads);
    }
    return rc ? -1 : 0;
}

int hfq_calib_stats_save(const hfq_calib_stats *s, const char *path, hfq_error *err) {
    if (s->n == 0) return hfq_fail(err, path, "no statistics to write");
    gguf_writer *w = gguf_writer_new();
    float *counts = NULL;
    int64_t max_mats = 1;
    for (int64_t i = 0; i < s->n; i++)
        if (s->entries[i].n_mats > max_mats) max_mats = s->entries[i].n_mats;
    if (!w || !(counts = malloc((size_t)max_mats * sizeof *counts))) {
        gguf_writer_free(w);
        return hfq_fail(err, path, "out of memory");
    }
    set_keys(w, s);
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < s->n; i++) rc = declare(w, &s->entries[i], err);
    if (rc == 0) rc = gguf_writer_begin(w, path, err);
    for (int64_t i = 0; rc == 0 && i < s->n; i++) rc = write_entry(w, &s->entries[i], counts, err);
    if (rc == 0) rc = gguf_writer_finish(w, err);
    gguf_writer_free(w);
    free(counts);
    return rc;
}

/* ---- loading ---- */

typedef struct loader {
    const gguf_file *f;
    const char *path;
    hfq_error *err;
} loader;

/* Copies tensor t (F32, n elements, each finite and >= 0) into dst. */
static int read_values(const loader *L, const gguf_tensor_info *t, int64_t n, float *dst) {
    if (t->type != GT_F32) return hfq_fail(L->err, L->path, "tensor %s: must be F32", t->name);
    if (t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] != n || t->nbytes != (uint64_t)n * sizeof(float))
        return hfq_fail(L->err, L->path, "tensor %s: %lld values where %lld are expected", t->name,
                        (long long)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]), (long long)n);
    memcpy(dst, t->data, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(dst[i]) || dst[i] < 0.0f)
            return hfq_fail(L->err, L->path, "tensor %s: value %g at %lld is not a finite non-negative number",
                            t->name, dst[i], (long long)i);
    return 0;
}

static const gguf_tensor_info *companion(const loader *L, const char *weight, int kind) {
    char name[GGUF_MAX_NAME + 1];
    return tensor_name(name, sizeof name, weight, kind) < 0 ? NULL : gguf_find_tensor(L->f, name);
}

/* An optional per-channel array: kept when present, freed when absent. */
static int read_optional(const loader *L, const char *weight, int kind, int64_t n, float **dst) {
    const gguf_tensor_info *t = companion(L, weight, kind);
    if (t) return read_values(L, t, n, *dst);
    free(*dst);
    *dst = NULL;
    return 0;
}

/* The weight of tensor `sum2` (named "<weight>.in_sum2"), with its companions. */
static int load_entry(const loader *L, hfq_calib_stats *s, const gguf_tensor_info *sum2, size_t base_len) {
    char weight[GGUF_MAX_NAME + 1];
    memcpy(weight, sum2->name, base_len);
    weight[base_len] = '\0';
    const gguf_tensor_info *tc = companion(L, weight, T_COUNTS);
    if (!tc) return hfq_fail(L->err, L->path, "tensor %s has no %s.counts", sum2->name, weight);
    const int64_t n_mats = tc->ne[0] * tc->ne[1] * tc->ne[2] * tc->ne[3];
    const int64_t n_vals = sum2->ne[0] * sum2->ne[1] * sum2->ne[2] * sum2->ne[3];
    if (n_mats < 1 || n_mats > 1 << 20 || n_vals % n_mats != 0 || (sum2->ne[1] != 1 && sum2->ne[1] != n_mats))
        return hfq_fail(L->err, L->path, "tensor %s: %lld sums do not split into %lld counts", sum2->name,
                        (long long)n_vals, (long long)n_mats);
    hfq_calib_entry *e = hfq_calib_stats_new_entry(s, weight, n_vals / n_mats, n_mats, L->err);
    if (!e) {
        hfq_error_prefix(L->err, L->path);
        return -1;
    }
    float *counts = malloc((size_t)n_mats * sizeof *counts);
    if (!counts) return hfq_fail(L->err, L->path, "out of memory");
    int rc = read_values(L, sum2, n_vals, e->in_sum2) || read_values(L, tc, n_mats, counts) ? -1 : 0;
    for (int64_t m = 0; rc == 0 && m < n_mats; m++) {
        if (counts[m] > 9007199254740992.0f || counts[m] != floorf(counts[m]))
            rc = hfq_fail(L->err, L->path, "tensor %s: count %g is not a whole number of tokens", tc->name, counts[m]);
        e->counts[m] = lroundf(counts[m]);
    }
    free(counts);
    if (rc || read_optional(L, weight, T_SUM_ABS, n_vals, &e->in_sum_abs) ||
        read_optional(L, weight, T_MAX, n_vals, &e->in_max) ||
        read_optional(L, weight, T_HIST, n_mats * HFQ_CALIB_HIST_BINS, &e->tok_hist))
        return -1;
    const gguf_tensor_info *ts = companion(L, weight, T_SAMPLE);
    if (!ts) return 0;
    if (ts->ne[0] != e->n_in || ts->ne[1] < 1 || ts->ne[1] > 1 << 24 || ts->ne[2] != 1 || ts->ne[3] != 1)
        return hfq_fail(L->err, L->path, "tensor %s: rows of %lld values for %lld channels", ts->name,
                        (long long)ts->ne[0], (long long)e->n_in);
    if (!(e->sample = malloc((size_t)(ts->ne[0] * ts->ne[1]) * sizeof(float))))
        return hfq_fail(L->err, L->path, "out of memory");
    e->n_sample = ts->ne[1];
    memcpy(e->sample, ts->data, (size_t)(ts->ne[0] * ts->ne[1]) * sizeof(float));
    for (int64_t i = 0; i < ts->ne[0] * ts->ne[1]; i++)
        if (!isfinite(e->sample[i])) return hfq_fail(L->err, L->path, "tensor %s: a value is not finite", ts->name);
    return 0;
}

/* Which of our suffixes name ends with (T_KINDS: none). */
static int kind_of(const char *name, size_t *base_len) {
    size_t len = strlen(name);
    for (int k = 0; k < T_KINDS; k++) {
        size_t sl = strlen(suffixes[k]);
        if (len > sl && strcmp(name + len - sl, suffixes[k]) == 0) {
            *base_len = len - sl;
            return k;
        }
    }
    return T_KINDS;
}

static int get_int_key(const loader *L, const char *key, int64_t *out) {
    int64_t i = gguf_find_key(L->f, key);
    return i < 0 ? 0 : gguf_get_int(L->f, i, out, L->err);
}

/* One of the KV maxima arrays: F32, n values, finite and >= 0. */
static int kv_array(const loader *L, const char *key, int64_t n, float **out) {
    const int64_t i = gguf_find_key(L->f, key);
    if (i < 0) return hfq_fail(L->err, L->path, "key %s is missing beside %s", key, KEY_KV_HEADS);
    if (gguf_arr_type(L->f, i) != GGUF_VT_FLOAT32 || gguf_arr_n(L->f, i) != n)
        return hfq_fail(L->err, L->path, "key %s: not an F32 array of %lld values", key, (long long)n);
    if (!(*out = malloc((size_t)n * sizeof **out))) return hfq_fail(L->err, L->path, "out of memory");
    memcpy(*out, gguf_arr_data(L->f, i), (size_t)n * sizeof **out);
    for (int64_t j = 0; j < n; j++)
        if (!isfinite((*out)[j]) || (*out)[j] < 0.0f)
            return hfq_fail(L->err, L->path, "key %s: value %g at %lld is not a finite non-negative number", key,
                            (*out)[j], (long long)j);
    return 0;
}

/* The KV-cache maxima (optional: files from llama-imatrix have none). */
static int load_kv(const loader *L, hfq_calib_stats *s) {
    const int64_t i = gguf_find_key(L->f, KEY_KV_HEADS);
    int64_t heads = 0;
    if (i < 0) {
        if (gguf_find_key(L->f, KEY_KV_K) >= 0 || gguf_find_key(L->f, KEY_KV_V) >= 0)
            return hfq_fail(L->err, L->path, "KV maxima without key %s", KEY_KV_HEADS);
        return 0;
    }
    if (gguf_get_int(L->f, i, &heads, L->err)) return -1;
    const int64_t k = gguf_find_key(L->f, KEY_KV_K);
    const int64_t n = k < 0 ? 0 : gguf_arr_n(L->f, k);
    if (heads < 1 || heads > 1 << 20 || n < 1 || n % heads != 0)
        return hfq_fail(L->err, L->path, "key %s: %lld kv heads do not divide the %lld maxima of %s", KEY_KV_HEADS,
                        (long long)heads, (long long)n, KEY_KV_K);
    s->kv_heads = heads;
    s->kv_layers = n / heads;
    return kv_array(L, KEY_KV_K, n, &s->k_amax) || kv_array(L, KEY_KV_V, n, &s->v_amax) ? -1 : 0;
}

static int load_keys(const loader *L, hfq_calib_stats *s) {
    int64_t i = gguf_find_key(L->f, "general.type");
    const char *type = i < 0 ? NULL : gguf_get_str(L->f, i, NULL, L->err);
    if (!type || strcmp(type, "imatrix") != 0)
        return hfq_fail(L->err, L->path, "not a statistics file (general.type is %s, not imatrix)", type ? type : "absent");
    i = gguf_find_key(L->f, "imatrix.datasets");
    for (int64_t j = 0; i >= 0 && j < gguf_arr_n(L->f, i); j++) {
        const char *d = gguf_arr_str(L->f, i, j, NULL);
        if (!d) return hfq_fail(L->err, L->path, "key imatrix.datasets: not an array of strings");
        if (hfq_calib_stats_add_dataset(s, d, L->err)) return -1;
    }
    int64_t hist[3] = {HFQ_CALIB_HIST_MIN_LOG2, HFQ_CALIB_HIST_MAX_LOG2, HFQ_CALIB_HIST_PER_OCTAVE};
    if (get_int_key(L, "imatrix.chunk_count", &s->n_chunks) || get_int_key(L, "imatrix.chunk_size", &s->chunk_size) ||
        get_int_key(L, KEY_N_TOKENS, &s->n_tokens) || get_int_key(L, KEY_HIST_MIN, &hist[0]) ||
        get_int_key(L, KEY_HIST_MAX, &hist[1]) || get_int_key(L, KEY_HIST_PER_OCTAVE, &hist[2]))
        return -1;
    if (hist[0] != HFQ_CALIB_HIST_MIN_LOG2 || hist[1] != HFQ_CALIB_HIST_MAX_LOG2 || hist[2] != HFQ_CALIB_HIST_PER_OCTAVE)
        return hfq_fail(L->err, L->path, "histogram bins [2^%lld, 2^%lld) x %lld per octave are not this build's",
                        (long long)hist[0], (long long)hist[1], (long long)hist[2]);
    if ((i = gguf_find_key(L->f, KEY_TEXT_XXH3)) >= 0) {
        if (gguf_get_uint64(L->f, i, &s->text_xxh3, L->err)) return -1;
        s->has_text_xxh3 = true;
    }
    if ((i = gguf_find_key(L->f, KEY_MODE)) >= 0) {
        uint64_t len = 0;
        const char *mode = gguf_get_str(L->f, i, &len, L->err);
        if (!mode) return -1;
        if (len >= sizeof s->mode) return hfq_fail(L->err, L->path, "key %s: value too long", KEY_MODE);
        memcpy(s->mode, mode, len + 1);
    }
    return load_kv(L, s);
}

int hfq_calib_stats_load(hfq_calib_stats *s, const char *path, hfq_error *err) {
    hfq_calib_stats_init(s, 0);
    gguf_file *f = gguf_open(path, err);
    if (!f) return -1;
    loader L = {f, path, err};
    int rc = load_keys(&L, s);
    for (int64_t i = 0; rc == 0 && i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        size_t base_len = 0;
        int kind = kind_of(t->name, &base_len);
        if (kind == T_SUM2) {
            rc = load_entry(&L, s, t, base_len);
        } else if (kind != T_KINDS) {
            char weight[GGUF_MAX_NAME + 1];
            snprintf(weight, sizeof weight, "%.*s", (int)base_len, t->name);
            if (!companion(&L, weight, T_SUM2)) rc = hfq_fail(err, path, "tensor %s has no %s.in_sum2", t->name, weight);
        }
    }
    if (rc == 0 && s->n == 0) rc = hfq_fail(err, path, "no statistics in the file");
    gguf_close(f);
    if (rc) hfq_calib_stats_free(s);
    else hfq_calib_stats_sort(s);
    return rc;
}
