#include "src/eval/kld.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "src/eval/expf_rows.h"

/* Base log-probabilities at or below this do not count in the KLD
 * (llama.cpp's cutoff, below which its saved log-probs hold nothing). */
#define BASE_LOGP_FLOOR (-16.0f)

const hfq_quantile hfq_kld_quantiles[HFQ_KLD_N_QUANTILES] = {
    {"Maximum", "max", 1.0f},  {"99.9%", "p99_9", 0.999f}, {"99.0%", "p99", 0.990f},
    {"95.0%", "p95", 0.950f},  {"90.0%", "p90", 0.900f},   {"Median", "median", 0.5f},
    {"10.0%", "p10", 0.100f},  {" 5.0%", "p5", 0.050f},    {" 1.0%", "p1", 0.010f},
    {" 0.1%", "p0_1", 0.001f}, {"Minimum", "min", 0.0f},
};

const hfq_quantile hfq_dp_quantiles[HFQ_DP_N_QUANTILES] = {
    {"Maximum", "max", 1.0f}, {"99.9%", "p99_9", 0.999f}, {"99.0%", "p99", 0.990f}, {"95.0%", "p95", 0.950f},
    {"90.0%", "p90", 0.900f}, {"75.0%", "p75", 0.750f},   {"Median", "median", 0.5f}, {"25.0%", "p25", 0.250f},
    {"10.0%", "p10", 0.100f}, {" 5.0%", "p5", 0.050f},    {" 1.0%", "p1", 0.010f},  {" 0.1%", "p0_1", 0.001f},
    {"Minimum", "min", 0.0f},
};

struct hfq_kld {
    int64_t n_vocab;
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_dp, sum_dp2, sum_dp4;
    int64_t count, n_same_top;
    float *kld_values, *dp_values;   /* per token, in order */
    size_t cap;
};

/* One token's comparison. */
typedef struct row_result {
    double kld;
    float nll, nll_base, dp;
    bool same_top;
} row_result;

hfq_kld *hfq_kld_new(int64_t n_vocab, hfq_error *err) {
    if (n_vocab < 1) {
        hfq_fail(err, NULL, "a vocabulary of %lld tokens cannot be compared", (long long)n_vocab);
        return NULL;
    }
    hfq_kld *k = calloc(1, sizeof *k);
    if (!k) {
        hfq_fail(err, NULL, "out of memory");
        return NULL;
    }
    k->n_vocab = n_vocab;
    return k;
}

void hfq_kld_free(hfq_kld *k) {
    if (!k) return;
    free(k->kld_values);
    free(k->dp_values);
    free(k);
}

int64_t hfq_kld_count(const hfq_kld *k) { return k->count; }

#define ROWS HFQ_LSE_ROWS
#define LSE_CHUNK 512   /* values of a row whose expf are taken together */

void hfq_log_sum_exp_rows(const float *l, int64_t n_vocab, int n, float max[], double log_sum[]) {
    double sum[ROWS];
    for (int r = 0; r < n; r++) {
        const float *row = l + r * n_vocab;
        max[r] = row[0];
        for (int64_t i = 1; i < n_vocab; i++) max[r] = row[i] > max[r] ? row[i] : max[r];
        sum[r] = 0.0;
    }
    float e[ROWS][LSE_CHUNK];   /* expf(l - max) of a chunk of each row */
    for (int64_t i0 = 0; i0 < n_vocab; i0 += LSE_CHUNK) {
        const int64_t len = n_vocab - i0 < LSE_CHUNK ? n_vocab - i0 : LSE_CHUNK;
        for (int r = 0; r < n; r++) hfq_expf_rows(l + r * n_vocab + i0, max[r], len, e[r]);
        if (n == ROWS) {   /* one chain of dependent adds a row: 8 overlap */
            for (int64_t i = 0; i < len; i++)
                for (int r = 0; r < ROWS; r++) sum[r] += e[r][i];
        } else {
            for (int r = 0; r < n; r++)
                for (int64_t i = 0; i < len; i++) sum[r] += e[r][i];
        }
    }
    for (int r = 0; r < n; r++) log_sum[r] = log(sum[r]);
}

/* hfq_log_sum_exp_rows with the log rounded to float, as llama.cpp's
 * KL-divergence takes it. */
static void log_sum_exp_rows(const float *l, int64_t n_vocab, int n, float max[ROWS], float lse[ROWS]) {
    double log_sum[ROWS];
    hfq_log_sum_exp_rows(l, n_vocab, n, max, log_sum);
    for (int r = 0; r < n; r++) lse[r] = (float)log_sum[r];
}

void hfq_log_softmax(const float *logits, int64_t n_vocab, int64_t n_rows, int n_threads, float *logp) {
    #pragma omp parallel for num_threads(n_threads > 0 ? n_threads : omp_get_num_procs()) schedule(static) \
        if (n_rows > ROWS)
    for (int64_t j = 0; j < n_rows; j += ROWS) {
        const int n = (int)(n_rows - j < ROWS ? n_rows - j : ROWS);
        float max[ROWS], lse[ROWS];
        log_sum_exp_rows(logits + j * n_vocab, n_vocab, n, max, lse);
        for (int r = 0; r < n; r++)
            for (int64_t i = 0; i < n_vocab; i++)
                logp[(j + r) * n_vocab + i] = (logits[(j + r) * n_vocab + i] - max[r]) - lse[r];
    }
}

/* One row's running comparison: the model's and the base's argmax so far,
 * the KLD's sum. */
typedef struct row_state {
    double kld;
    float q_max, b_max;
    int64_t q_arg, b_arg;
} row_state;

/* Term i of a row: q its model log-prob, b the base's (expf only for the
 * terms that count: most of a large vocabulary's are below the floor). */
static inline void compare_step(row_state *s, int64_t i, float q, float b) {
    if (i == 0 || q > s->q_max) s->q_max = q, s->q_arg = i;
    if (i == 0 || b > s->b_max) s->b_max = b, s->b_arg = i;
    if (b > BASE_LOGP_FLOOR) s->kld += expf(b) * (b - q);
}

/* Rows r < n (<= ROWS) of logits l and base log-probs b. The model's
 * log-probs are formed as hfq_log_softmax forms them, so a base given as
 * hfq_log_softmax of the same logits compares as exactly equal. */
static void compare_rows(const float *l, const float *b, int64_t n_vocab, const int32_t *targets, int n,
                         row_result out[]) {
    float max[ROWS], lse[ROWS];
    log_sum_exp_rows(l, n_vocab, n, max, lse);
    row_state s[ROWS];
    memset(s, 0, sizeof s);
    if (n == ROWS) {
        for (int64_t i = 0; i < n_vocab; i++)
            for (int r = 0; r < ROWS; r++)
                compare_step(&s[r], i, (l[r * n_vocab + i] - max[r]) - lse[r], b[r * n_vocab + i]);
    } else {
        for (int r = 0; r < n; r++)
            for (int64_t i = 0; i < n_vocab; i++)
                compare_step(&s[r], i, (l[r * n_vocab + i] - max[r]) - lse[r], b[r * n_vocab + i]);
    }
    for (int r = 0; r < n; r++) {
        const int64_t t = r * n_vocab + targets[r];
        out[r] = (row_result){.kld = s[r].kld, .nll = -((l[t] - max[r]) - lse[r]), .nll_base = -b[t],
                              .same_top = s[r].q_arg == s[r].b_arg};
        out[r].dp = expf(-out[r].nll) - expf(-out[r].nll_base);
    }
}

static int grow(hfq_kld *k, size_t need, hfq_error *err) {
    if (need <= k->cap) return 0;
    size_t cap = k->cap ? k->cap : 1024;
    while (cap < need) {
        if (cap > SIZE_MAX / 2 / sizeof(float)) return hfq_fail(err, NULL, "too many tokens to compare");
        cap *= 2;
    }
    float *kv = realloc(k->kld_values, cap * sizeof *kv);
    if (kv) k->kld_values = kv;
    float *dv = kv ? realloc(k->dp_values, cap * sizeof *dv) : NULL;
    if (dv) k->dp_values = dv;
    if (!kv || !dv) return hfq_fail(err, NULL, "out of memory for %zu token statistics", need);
    k->cap = cap;
    return 0;
}

int hfq_kld_add(hfq_kld *k, const float *logits, const float *base_logp, const int32_t *targets, int64_t n_rows,
                int n_threads, hfq_error *err) {
    if (n_rows <= 0) return 0;
    for (int64_t j = 0; j < n_rows; j++)
        if (targets[j] < 0 || targets[j] >= k->n_vocab)
            return hfq_fail(err, NULL, "target token %d is outside the vocabulary [0, %lld)", (int)targets[j],
                            (long long)k->n_vocab);
    if (grow(k, (size_t)k->count + (size_t)n_rows, err)) return -1;
    row_result *rows = malloc((size_t)n_rows * sizeof *rows);
    if (!rows) return hfq_fail(err, NULL, "out of memory for %lld token statistics", (long long)n_rows);
    const int64_t n = k->n_vocab;
    #pragma omp parallel for num_threads(n_threads > 0 ? n_threads : omp_get_num_procs()) schedule(static)
    for (int64_t j = 0; j < n_rows; j += ROWS)
        compare_rows(logits + j * n, base_logp + j * n, n, targets + j, (int)(n_rows - j < ROWS ? n_rows - j : ROWS),
                     rows + j);
    /* sums in token order; squares formed as llama.cpp forms them (float
     * products of the float values, double for the KLD) */
    for (int64_t j = 0; j < n_rows; j++) {
        const row_result *r = &rows[j];
        k->sum_nll += r->nll;
        k->sum_nll2 += r->nll * r->nll;
        k->sum_nll_base += r->nll_base;
        k->sum_nll_base2 += r->nll_base * r->nll_base;
        k->sum_nll_nll_base += r->nll * r->nll_base;
        k->sum_kld += r->kld;
        k->sum_kld2 += r->kld * r->kld;
        const double dp2 = r->dp * r->dp;
        k->sum_dp += r->dp;
        k->sum_dp2 += dp2;
        k->sum_dp4 += dp2 * dp2;
        k->n_same_top += r->same_top;
        k->kld_values[k->count] = (float)r->kld;
        k->dp_values[k->count] = r->dp;
        k->count++;
    }
    free(rows);
    return 0;
}

typedef struct mean_err {
    double mean, err;
} mean_err;

static mean_err mean_and_err(double sum, double sum2, int64_t count) {
    mean_err m = {sum / (double)count, 0.0};
    const double var = sum2 / (double)count - m.mean * m.mean;
    if (var > 0 && count > 10) m.err = sqrt(var / (double)(count - 1));
    return m;
}

static double covariance(double sum_a, double sum_b, double sum_ab, int64_t count) {
    if (count < 10) return 0.0;
    const double n = (double)count;
    return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

static double sqrt0(double x) { return x > 0 ? sqrt(x) : 0.0; }

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* llama.cpp's percentile (float steps) and median over sorted v[0..n). */
static float quantile(const float *v, size_t n, float fraction) {
    if (fraction == 0.5f) return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    const size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static int sorted_quantiles(const float *values, size_t n, const hfq_quantile *q, int n_q, double *out,
                            hfq_error *err) {
    float *v = malloc(n * sizeof *v);
    if (!v) return hfq_fail(err, NULL, "out of memory for %zu token statistics", n);
    memcpy(v, values, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_float);
    for (int i = 0; i < n_q; i++) out[i] = quantile(v, n, q[i].fraction);
    free(v);
    return 0;
}

int hfq_kld_stats_get(const hfq_kld *k, hfq_kld_stats *s, hfq_error *err) {
    const int64_t n = k->count;
    if (n < 1) return hfq_fail(err, NULL, "no tokens compared");
    *s = (hfq_kld_stats){.count = n};
    const mean_err nll = mean_and_err(k->sum_nll, k->sum_nll2, n);
    const mean_err base = mean_and_err(k->sum_nll_base, k->sum_nll_base2, n);
    const double cov = covariance(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, n);
    s->ppl = exp(nll.mean);
    s->ppl_err = s->ppl * nll.err;
    s->ppl_base = exp(base.mean);
    s->ppl_base_err = s->ppl_base * base.err;
    s->ln_ppl_cor = nll.err > 0 && base.err > 0 ? cov / (nll.err * base.err) : 0.0;
    s->ln_ppl_ratio = nll.mean - base.mean;
    s->ln_ppl_ratio_err = sqrt0(nll.err * nll.err + base.err * base.err - 2.0 * cov);
    s->ppl_ratio = exp(s->ln_ppl_ratio);
    s->ppl_ratio_err = s->ppl_ratio * s->ln_ppl_ratio_err;
    s->ppl_diff = s->ppl - s->ppl_base;
    s->ppl_diff_err = sqrt0(s->ppl_err * s->ppl_err + s->ppl_base_err * s->ppl_base_err -
                            2.0 * s->ppl * s->ppl_base * cov);
    const mean_err kld = mean_and_err(k->sum_kld, k->sum_kld2, n);
    s->kld = kld.mean;
    s->kld_err = kld.err;
    const mean_err dp = mean_and_err(k->sum_dp, k->sum_dp2, n);
    s->dp = dp.mean;
    s->dp_err = dp.err;
    const mean_err dp_mse = mean_and_err(k->sum_dp2, k->sum_dp4, n);
    s->dp_rms = sqrt0(dp_mse.mean);
    s->dp_rms_err = s->dp_rms > 0 ? 0.5 / s->dp_rms * dp_mse.err : 0.0;
    s->same_top = (double)k->n_same_top / (double)n;
    s->same_top_err = n > 1 ? sqrt0(s->same_top * (1.0 - s->same_top) / (double)(n - 1)) : 0.0;
    if (sorted_quantiles(k->kld_values, (size_t)n, hfq_kld_quantiles, HFQ_KLD_N_QUANTILES, s->kld_q, err) ||
        sorted_quantiles(k->dp_values, (size_t)n, hfq_dp_quantiles, HFQ_DP_N_QUANTILES, s->dp_q, err))
        return -1;
    return 0;
}
