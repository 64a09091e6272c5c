/* stats.c - see stats.h. */
#include "calib/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/names.h"

/* Accumulation state of one entry. */
struct hfq_calib_acc {
    double *sum2, *sum_abs;   /* [n_mats][n_in] */
    int64_t *hist;            /* [n_mats][HFQ_CALIB_HIST_BINS] */
    int64_t sample_cap;       /* 0: this entry keeps no sample */
    int64_t n_seen;           /* rows offered to the reservoir */
    uint64_t rng;             /* splitmix64 state */
};

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* FNV-1a of the name: the reservoir's seed. */
static uint64_t name_seed(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

void hfq_calib_stats_init(hfq_calib_stats *s, int64_t sample_cap) {
    memset(s, 0, sizeof *s);
    s->sample_cap = sample_cap > 0 ? sample_cap : 0;
}

static void free_acc(hfq_calib_acc *a) {
    if (!a) return;
    free(a->sum2);
    free(a->sum_abs);
    free(a->hist);
    free(a);
}

static void free_entry(hfq_calib_entry *e) {
    free(e->name);
    free(e->in_sum2);
    free(e->in_sum_abs);
    free(e->in_max);
    free(e->tok_hist);
    free(e->counts);
    free(e->sample);
    free_acc(e->acc);
}

void hfq_calib_stats_free(hfq_calib_stats *s) {
    for (int64_t i = 0; i < s->n; i++) free_entry(&s->entries[i]);
    free(s->entries);
    for (int64_t i = 0; i < s->n_datasets; i++) free(s->datasets[i]);
    free(s->datasets);
    free(s->k_amax);
    free(s->v_amax);
    memset(s, 0, sizeof *s);
}

int hfq_calib_stats_add_dataset(hfq_calib_stats *s, const char *name, hfq_error *err) {
    char **d = realloc(s->datasets, (size_t)(s->n_datasets + 1) * sizeof *d);
    if (!d) return hfq_fail(err, name, "out of memory");
    s->datasets = d;
    if (!(d[s->n_datasets] = strdup(name))) return hfq_fail(err, name, "out of memory");
    s->n_datasets++;
    return 0;
}

static int64_t find_index(const hfq_calib_stats *s, const char *name) {
    int64_t start = s->cursor < s->n ? s->cursor : 0;
    for (int64_t k = 0; k < s->n; k++) {
        int64_t i = (start + k) % s->n;
        if (strcmp(s->entries[i].name, name) == 0) return i;
    }
    return -1;
}

const hfq_calib_entry *hfq_calib_stats_find(const hfq_calib_stats *s, const char *name) {
    int64_t i = find_index(s, name);
    return i < 0 ? NULL : &s->entries[i];
}

/* calloc of n elements with overflow checked. */
static void *alloc_n(int64_t n, size_t elem) {
    if (n < 0 || (uint64_t)n > SIZE_MAX / elem) return NULL;
    return calloc((size_t)(n > 0 ? n : 1), elem);
}

hfq_calib_entry *hfq_calib_stats_new_entry(hfq_calib_stats *s, const char *name, int64_t n_in, int64_t n_mats,
                                           hfq_error *err) {
    if (n_in < 1 || n_mats < 1 || n_in > ((int64_t)1 << 32) / n_mats) {
        hfq_fail(err, name, "statistics of %lld x %lld channels are out of range", (long long)n_mats,
                 (long long)n_in);
        return NULL;
    }
    if (find_index(s, name) >= 0) {
        hfq_fail(err, name, "statistics given twice");
        return NULL;
    }
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        hfq_calib_entry *e = realloc(s->entries, (size_t)cap * sizeof *e);
        if (!e) goto oom;
        s->entries = e;
        s->cap = cap;
    }
    hfq_calib_entry *e = &s->entries[s->n];
    memset(e, 0, sizeof *e);
    e->n_in = n_in;
    e->n_mats = n_mats;
    const int64_t nv = n_in * n_mats;
    if (!(e->name = strdup(name)) || !(e->in_sum2 = alloc_n(nv, sizeof(float))) ||
        !(e->in_sum_abs = alloc_n(nv, sizeof(float))) || !(e->in_max = alloc_n(nv, sizeof(float))) ||
        !(e->tok_hist = alloc_n(n_mats * HFQ_CALIB_HIST_BINS, sizeof(float))) ||
        !(e->counts = alloc_n(n_mats, sizeof(int64_t)))) {
        free_entry(e);
        goto oom;
    }
    s->n++;
    return e;
oom:
    hfq_fail(err, name, "out of memory for its statistics");
    return NULL;
}

/* A new entry for accumulation: the final arrays hold the maxima meanwhile. */
static hfq_calib_entry *new_acc_entry(hfq_calib_stats *s, const char *name, int64_t n_in, int64_t n_mats,
                                      hfq_error *err) {
    hfq_calib_entry *e = hfq_calib_stats_new_entry(s, name, n_in, n_mats, err);
    if (!e) return NULL;
    char leader[128];
    hfq_calib_acc *a = calloc(1, sizeof *a);
    if (!a || !(a->sum2 = alloc_n(n_in * n_mats, sizeof(double))) ||
        !(a->sum_abs = alloc_n(n_in * n_mats, sizeof(double))) ||
        !(a->hist = alloc_n(n_mats * HFQ_CALIB_HIST_BINS, sizeof(int64_t))))
        goto oom;
    /* one sample per shared input, for dense weights; a weight whose leader
     * is not in the model (phi3's fused ffn_up: no ffn_gate) keeps its own */
    if (s->sample_cap > 0 && n_mats == 1 &&
        (hfq_calib_input_leader(name, leader, sizeof leader) || !hfq_calib_stats_find(s, leader))) {
        if (!(e->sample = alloc_n(s->sample_cap * n_in, sizeof(float)))) goto oom;
        a->sample_cap = s->sample_cap;
    }
    a->rng = name_seed(name);
    e->acc = a;
    return e;
oom:
    free_acc(a);
    free_entry(e);
    s->n--;
    hfq_fail(err, name, "out of memory for its statistics");
    return NULL;
}

int hfq_calib_hist_bin(float v) {
    if (!(v >= ldexpf(1.0f, HFQ_CALIB_HIST_MIN_LOG2))) return 0;
    if (v >= ldexpf(1.0f, HFQ_CALIB_HIST_MAX_LOG2)) return HFQ_CALIB_HIST_BINS - 1;
    int b = 1 + (int)floor((log2((double)v) - HFQ_CALIB_HIST_MIN_LOG2) * HFQ_CALIB_HIST_PER_OCTAVE);
    return b < 1 ? 1 : b > HFQ_CALIB_HIST_BINS - 2 ? HFQ_CALIB_HIST_BINS - 2 : b;
}

static void offer_sample(hfq_calib_entry *e, const float *x) {
    hfq_calib_acc *a = e->acc;
    int64_t slot = -1;
    if (e->n_sample < a->sample_cap) {
        slot = e->n_sample++;
    } else {
        const int64_t j = (int64_t)(splitmix64(&a->rng) % (uint64_t)(a->n_seen + 1));
        if (j < a->sample_cap) slot = j;
    }
    a->n_seen++;
    if (slot >= 0) memcpy(e->sample + slot * e->n_in, x, (size_t)e->n_in * sizeof *x);
}

int hfq_calib_stats_add(hfq_calib_stats *s, const char *name, int64_t mat, int64_t n_mats, const float *x,
                        int64_t n_tokens, int64_t n_in, hfq_error *err) {
    int64_t i = find_index(s, name);
    hfq_calib_entry *e = i >= 0 ? &s->entries[i] : new_acc_entry(s, name, n_in, n_mats, err);
    if (!e) return -1;
    if (i < 0) i = s->n - 1;
    if (!e->acc) return hfq_fail(err, name, "statistics are already finished");
    if (e->n_in != n_in || e->n_mats != n_mats || mat < 0 || mat >= n_mats)
        return hfq_fail(err, name, "activations of %lld channels (matrix %lld of %lld) after %lld (%lld)",
                        (long long)n_in, (long long)mat, (long long)n_mats, (long long)e->n_in,
                        (long long)e->n_mats);
    s->cursor = i + 1;
    hfq_calib_acc *a = e->acc;
    double *sum2 = a->sum2 + mat * n_in, *sum_abs = a->sum_abs + mat * n_in;
    float *mx = e->in_max + mat * n_in;
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *row = x + t * n_in;
        float tok_max = 0.0f;
        for (int64_t j = 0; j < n_in; j++) {
            const float v = fabsf(row[j]);
            sum2[j] += (double)row[j] * (double)row[j];
            sum_abs[j] += (double)v;
            if (v > mx[j]) mx[j] = v;
            if (v > tok_max) tok_max = v;
        }
        a->hist[mat * HFQ_CALIB_HIST_BINS + hfq_calib_hist_bin(tok_max)]++;
        if (a->sample_cap > 0 && mat == 0) offer_sample(e, row);
    }
    e->counts[mat] += n_tokens;
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const hfq_calib_entry *)a)->name, ((const hfq_calib_entry *)b)->name);
}

void hfq_calib_stats_sort(hfq_calib_stats *s) {
    if (s->n > 1) qsort(s->entries, (size_t)s->n, sizeof *s->entries, by_name);
    s->cursor = 0;
}

int hfq_calib_stats_finish(hfq_calib_stats *s, hfq_error *err) {
    (void)err;
    for (int64_t i = 0; i < s->n; i++) {
        hfq_calib_entry *e = &s->entries[i];
        hfq_calib_acc *a = e->acc;
        if (!a) continue;
        for (int64_t k = 0; k < e->n_in * e->n_mats; k++) {
            e->in_sum2[k] = (float)a->sum2[k];
            e->in_sum_abs[k] = (float)a->sum_abs[k];
        }
        for (int64_t k = 0; k < e->n_mats * HFQ_CALIB_HIST_BINS; k++) e->tok_hist[k] = (float)a->hist[k];
        if (e->sample && e->n_sample == 0) {
            free(e->sample);
            e->sample = NULL;
        }
        free_acc(a);
        e->acc = NULL;
    }
    hfq_calib_stats_sort(s);
    return 0;
}

void hfq_calib_importance(const hfq_calib_entry *e, int64_t mat, float *out) {
    /* llama-quantize: counts are stored as float and read back with lround */
    const float count = (float)e->counts[mat];
    const float *sum2 = e->in_sum2 + mat * e->n_in;
    for (int64_t j = 0; j < e->n_in; j++) out[j] = count > 0.0f ? sum2[j] / count : 1.0f;
}

bool hfq_calib_expert_sparse(const hfq_calib_entry *e, int64_t mat) {
    return e->n_mats > 1 && e->counts[mat] < HFQ_CALIB_MIN_EXPERT_TOKENS;
}

float hfq_calib_mean_abs(const hfq_calib_entry *e, int64_t mat, int64_t j) {
    const float count = (float)e->counts[mat];
    return count > 0.0f ? e->in_sum_abs[mat * e->n_in + j] / count : 0.0f;
}

float hfq_calib_amax(const hfq_calib_entry *e, int64_t mat) {
    float m = 0.0f;
    for (int64_t j = 0; j < e->n_in; j++) m = fmaxf(m, e->in_max[mat * e->n_in + j]);
    return m;
}

float hfq_calib_token_max_percentile(const hfq_calib_entry *e, int64_t mat, double p) {
    const float amax = hfq_calib_amax(e, mat);
    if (p >= 100.0 || e->counts[mat] <= 0) return e->counts[mat] > 0 ? amax : 0.0f;
    const float *h = e->tok_hist + mat * HFQ_CALIB_HIST_BINS;
    double total = 0.0;
    for (int b = 0; b < HFQ_CALIB_HIST_BINS; b++) total += h[b];
    const double target = ceil(p / 100.0 * total);
    double cum = 0.0;
    for (int b = 0; b < HFQ_CALIB_HIST_BINS - 1; b++) {
        cum += h[b];
        if (cum >= target && cum > 0.0) {
            const float edge = ldexpf(exp2f((float)b / HFQ_CALIB_HIST_PER_OCTAVE), HFQ_CALIB_HIST_MIN_LOG2);
            return edge < amax ? edge : amax;
        }
    }
    return amax;
}
