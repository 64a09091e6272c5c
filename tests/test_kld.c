/* test_kld.c - the KL statistics (src/eval/kld.h) against a double-precision
 * reference written here from llama.cpp's formulas, a model against itself,
 * and the errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/eval/kld.h"
#include "tests/check.h"
#include "tests/quant_rng.h"

static double uniform(void) { return rnd_uniform(); }   /* [0, 1) */

/* Rows of logits: a shared random "true" distribution per row, and noise of
 * size `noise` on top for the second model. */
static void make_rows(float *a, float *b, int64_t n_rows, int64_t n_vocab, double noise) {
    for (int64_t j = 0; j < n_rows; j++)
        for (int64_t i = 0; i < n_vocab; i++) {
            double base = 8.0 * uniform() * uniform() - 2.0;
            a[j * n_vocab + i] = (float)base;
            b[j * n_vocab + i] = (float)(base + noise * (2.0 * uniform() - 1.0));
        }
}

/* ---- the reference, in double ---- */

typedef struct ref_sums {
    double nll, nll2, base, base2, cross, kld, kld2, dp, dp2, dp4;
    int64_t same, count;
    double *klds, *dps;
} ref_sums;

static void ref_row(ref_sums *r, const float *l, const float *b, int64_t n, int32_t t) {
    double max = l[0], sum = 0.0;
    for (int64_t i = 1; i < n; i++) max = fmax(max, l[i]);
    for (int64_t i = 0; i < n; i++) sum += exp(l[i] - max);
    const double lse = log(sum);
    double kld = 0.0;
    int64_t qa = 0, ba = 0;
    for (int64_t i = 0; i < n; i++) {
        if (l[i] > l[qa]) qa = i;
        if (b[i] > b[ba]) ba = i;
        if (b[i] > -16.0) kld += exp(b[i]) * (b[i] - (l[i] - max - lse));
    }
    const double nll = -(l[t] - max - lse), nll_base = -(double)b[t];
    const double dp = exp(-nll) - exp(-nll_base);
    r->nll += nll, r->nll2 += nll * nll, r->base += nll_base, r->base2 += nll_base * nll_base;
    r->cross += nll * nll_base;
    r->kld += kld, r->kld2 += kld * kld;
    r->dp += dp, r->dp2 += dp * dp, r->dp4 += dp * dp * dp * dp;
    r->same += qa == ba;
    r->klds[r->count] = kld;
    r->dps[r->count] = dp;
    r->count++;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between order statistics at fraction * (n - 1). */
static double ref_quantile(double *v, int64_t n, double fraction) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const double p = fraction * (double)(n - 1);
    const int64_t i = (int64_t)p;
    return i + 1 < n ? v[i] + (p - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

static void near(const char *what, double got, double want, double rel, double abs_tol) {
    CHECK_MSG(fabs(got - want) <= rel * fabs(want) + abs_tol, "%s: %.9g vs reference %.9g", what, got, want);
}

/* Every statistic of hfq_kld against the reference on noisy rows. */
static void test_against_reference(void) {
    const int64_t n_rows = 1500, n_vocab = 37;
    float *a = malloc((size_t)(n_rows * n_vocab) * sizeof *a), *b = malloc((size_t)(n_rows * n_vocab) * sizeof *b);
    float *base_logp = malloc((size_t)(n_rows * n_vocab) * sizeof *base_logp);
    int32_t *targets = malloc((size_t)n_rows * sizeof *targets);
    ref_sums r = {.klds = malloc((size_t)n_rows * sizeof(double)), .dps = malloc((size_t)n_rows * sizeof(double))};
    make_rows(a, b, n_rows, n_vocab, 0.7);
    for (int64_t j = 0; j < n_rows; j++) {
        targets[j] = (int32_t)(uniform() * (double)n_vocab);
        hfq_log_softmax(a + j * n_vocab, n_vocab, 1, 1, base_logp + j * n_vocab);
        base_logp[j * n_vocab + j % n_vocab] -= 20.0f;   /* some base log-probs below the -16 cutoff */
        ref_row(&r, b + j * n_vocab, base_logp + j * n_vocab, n_vocab, targets[j]);
    }
    hfq_error err;
    hfq_kld *k = hfq_kld_new(n_vocab, &err);
    /* in three calls and on two threads: the totals do not depend on either */
    CHECK(hfq_kld_add(k, b, base_logp, targets, 700, 2, &err) == 0);
    CHECK(hfq_kld_add(k, b + 700 * n_vocab, base_logp + 700 * n_vocab, targets + 700, 0, 1, &err) == 0);
    CHECK(hfq_kld_add(k, b + 700 * n_vocab, base_logp + 700 * n_vocab, targets + 700, n_rows - 700, 1, &err) == 0);
    CHECK(hfq_kld_count(k) == n_rows);
    hfq_kld_stats s;
    CHECK(hfq_kld_stats_get(k, &s, &err) == 0);

    const double N = (double)n_rows;
    const double m_q = r.nll / N, m_b = r.base / N;
    const double e_q = sqrt((r.nll2 / N - m_q * m_q) / (N - 1)), e_b = sqrt((r.base2 / N - m_b * m_b) / (N - 1));
    const double cov = (r.cross / N - m_q * m_b) / (N - 1);
    near("PPL(Q)", s.ppl, exp(m_q), 1e-6, 0);
    near("PPL(Q) err", s.ppl_err, exp(m_q) * e_q, 1e-5, 0);
    near("PPL(base)", s.ppl_base, exp(m_b), 1e-6, 0);
    near("PPL(base) err", s.ppl_base_err, exp(m_b) * e_b, 1e-5, 0);
    near("Cor", s.ln_ppl_cor, cov / (e_q * e_b), 1e-5, 0);
    near("ln ratio", s.ln_ppl_ratio, m_q - m_b, 1e-5, 1e-7);
    const double e_ratio = sqrt(e_q * e_q + e_b * e_b - 2 * cov);
    near("ln ratio err", s.ln_ppl_ratio_err, e_ratio, 1e-4, 0);
    near("ratio", s.ppl_ratio, exp(m_q - m_b), 1e-6, 0);
    near("ratio err", s.ppl_ratio_err, exp(m_q - m_b) * e_ratio, 1e-4, 0);
    near("diff", s.ppl_diff, exp(m_q) - exp(m_b), 1e-5, 1e-7);
    const double pe = exp(m_q) * e_q, pbe = exp(m_b) * e_b;
    near("diff err", s.ppl_diff_err, sqrt(pe * pe + pbe * pbe - 2 * exp(m_q) * exp(m_b) * cov), 1e-4, 0);
    const double m_kld = r.kld / N;
    near("KLD", s.kld, m_kld, 1e-5, 0);
    near("KLD err", s.kld_err, sqrt((r.kld2 / N - m_kld * m_kld) / (N - 1)), 1e-4, 0);
    for (int i = 0; i < HFQ_KLD_N_QUANTILES; i++)
        near(hfq_kld_quantiles[i].name, s.kld_q[i], ref_quantile(r.klds, n_rows, hfq_kld_quantiles[i].fraction), 1e-5,
             1e-7);
    const double m_dp = r.dp / N;
    near("dp", s.dp, m_dp, 1e-4, 1e-8);
    near("dp err", s.dp_err, sqrt((r.dp2 / N - m_dp * m_dp) / (N - 1)), 1e-4, 0);
    for (int i = 0; i < HFQ_DP_N_QUANTILES; i++)
        near(hfq_dp_quantiles[i].name, s.dp_q[i], ref_quantile(r.dps, n_rows, hfq_dp_quantiles[i].fraction), 1e-5,
             1e-7);
    const double mse = r.dp2 / N, rms = sqrt(mse);
    near("RMS dp", s.dp_rms, rms, 1e-5, 0);
    near("RMS dp err", s.dp_rms_err, 0.5 / rms * sqrt((r.dp4 / N - mse * mse) / (N - 1)), 1e-4, 0);
    const double same = (double)r.same / N;
    CHECK_MSG(s.same_top == same, "same top %.9g vs %.9g", s.same_top, same);
    near("same top err", s.same_top_err, sqrt(same * (1 - same) / (N - 1)), 1e-9, 0);
    printf("reference rows: KLD %.6f, same top %.2f%%, PPL(Q)/PPL(base) %.6f\n", s.kld, 100 * s.same_top, s.ppl_ratio);
    CHECK(s.kld > 0.01 && s.same_top > 0.3 && s.same_top < 1);   /* the rows differ enough to test something */
    hfq_kld_free(k);
    free(a), free(b), free(base_logp), free(targets), free(r.klds), free(r.dps);
}

/* Rows together (hfq_log_softmax of many rows, hfq_kld_add of many: their
 * sums advance 8 rows at a time) give the bits of one row at a time, on
 * one thread or two; a vocabulary that is not a multiple of anything. */
static void test_rows_together(void) {
    const int64_t n_rows = 21, n_vocab = 1013;
    float *a = malloc((size_t)(n_rows * n_vocab) * sizeof *a), *b = malloc((size_t)(n_rows * n_vocab) * sizeof *b);
    float *together = malloc((size_t)(n_rows * n_vocab) * sizeof *together);
    float *alone = malloc((size_t)(n_rows * n_vocab) * sizeof *alone);
    int32_t targets[21];
    make_rows(a, b, n_rows, n_vocab, 0.9);
    for (int64_t j = 0; j < n_rows; j++) targets[j] = (int32_t)(uniform() * (double)n_vocab);
    hfq_log_softmax(a, n_vocab, n_rows, 2, together);
    for (int64_t j = 0; j < n_rows; j++) hfq_log_softmax(a + j * n_vocab, n_vocab, 1, 1, alone + j * n_vocab);
    CHECK(memcmp(together, alone, (size_t)(n_rows * n_vocab) * sizeof *alone) == 0);
    hfq_error err;
    hfq_kld *k_together = hfq_kld_new(n_vocab, &err), *k_alone = hfq_kld_new(n_vocab, &err);
    CHECK(hfq_kld_add(k_together, b, alone, targets, n_rows, 2, &err) == 0);
    for (int64_t j = 0; j < n_rows; j++)
        CHECK(hfq_kld_add(k_alone, b + j * n_vocab, alone + j * n_vocab, targets + j, 1, 1, &err) == 0);
    hfq_kld_stats s_together, s_alone;
    memset(&s_together, 0, sizeof s_together), memset(&s_alone, 0, sizeof s_alone);
    CHECK(hfq_kld_stats_get(k_together, &s_together, &err) == 0 && hfq_kld_stats_get(k_alone, &s_alone, &err) == 0);
    CHECK(memcmp(&s_together, &s_alone, sizeof s_alone) == 0);
    CHECK(s_alone.kld > 0.0);
    hfq_kld_free(k_together), hfq_kld_free(k_alone);
    free(a), free(b), free(together), free(alone);
}

/* A model against its own log-probabilities: every difference is exactly 0. */
static void test_self(void) {
    const int64_t n_rows = 300, n_vocab = 50;
    float *a = malloc((size_t)(n_rows * n_vocab) * sizeof *a), *b = malloc((size_t)(n_rows * n_vocab) * sizeof *b);
    int32_t targets[300];
    make_rows(a, b, n_rows, n_vocab, 0.0);
    for (int64_t j = 0; j < n_rows; j++) {
        targets[j] = (int32_t)(j * 7 % n_vocab);
        a[j * n_vocab + 3] = a[j * n_vocab + 9] = 30.0f;   /* tied largest logits */
        hfq_log_softmax(a + j * n_vocab, n_vocab, 1, 1, b + j * n_vocab);
    }
    hfq_error err;
    hfq_kld *k = hfq_kld_new(n_vocab, &err);
    hfq_kld_stats s;
    CHECK(hfq_kld_add(k, a, b, targets, n_rows, 0, &err) == 0 && hfq_kld_stats_get(k, &s, &err) == 0);
    CHECK(s.kld == 0 && s.kld_err == 0 && s.dp == 0 && s.dp_rms == 0 && s.ln_ppl_ratio == 0);
    for (int i = 0; i < HFQ_KLD_N_QUANTILES; i++) CHECK(s.kld_q[i] == 0);
    for (int i = 0; i < HFQ_DP_N_QUANTILES; i++) CHECK(s.dp_q[i] == 0);
    CHECK(s.same_top == 1.0 && s.same_top_err == 0);
    CHECK(s.ppl == s.ppl_base && s.ppl_ratio == 1.0 && s.ppl_diff == 0);
    CHECK_NEAR(s.ln_ppl_cor, 1.0, 1e-9);
    hfq_kld_free(k);
    free(a), free(b);
}

/* Few tokens: no errors below 11 (llama.cpp's rule), quantiles still defined. */
static void test_small_and_errors(void) {
    const float logits[3 * 2] = {1, 2, 3, 1, 0, 0}, other[3 * 2] = {2, 1, 3, 1, 0, 0};
    float base[3 * 2];
    hfq_log_softmax(other, 2, 3, 1, base);
    const int32_t targets[3] = {1, 0, 1}, bad[3] = {1, 2, 0};
    hfq_error err = {{0}};
    hfq_kld *k = hfq_kld_new(2, &err);
    hfq_kld_stats s;
    CHECK(hfq_kld_stats_get(k, &s, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "no tokens compared");
    CHECK(hfq_kld_add(k, logits, base, bad, 3, 1, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "target token 2 is outside the vocabulary [0, 2)");
    CHECK(hfq_kld_count(k) == 0);
    CHECK(hfq_kld_add(k, logits, base, targets, 3, 1, &err) == 0 && hfq_kld_stats_get(k, &s, &err) == 0);
    CHECK(s.count == 3 && s.kld_err == 0 && s.ppl_err == 0 && s.ln_ppl_cor == 0 && s.kld_q[0] > 0);
    CHECK(s.kld_q[0] >= s.kld_q[5] && s.kld_q[5] >= s.kld_q[HFQ_KLD_N_QUANTILES - 1]);
    hfq_kld_free(k);
    CHECK(hfq_kld_new(0, &err) == NULL);
}

int main(void) {
    test_rows_together();
    rnd_seed(12345);
    test_against_reference();
    test_self();
    test_small_and_errors();
    return check_exit();
}
