/* kld.h - how far a model's next-token distributions are from a base
 * model's over the same scored tokens: the statistics llama.cpp's perplexity
 * tool prints in KL-divergence mode (tools/perplexity/perplexity.cpp,
 * --kl-divergence), with its formulas, so the two can be read side by side.
 *
 * Per scored token, from the model's logits l and the base's
 * log-probabilities b (either the base's own, computed by hfq_log_softmax,
 * or decoded from a saved file, base_logits.h) and the target t:
 *
 *   q_i   = log softmax(l)_i = (l_i - max l) - log sum_j expf(l_j - max l),
 *           the sum in double, its log rounded to float (llama.cpp's steps)
 *   nll   = -q_t,  nll_base = -b_t                         (float)
 *   KLD   = sum over i with b_i > -16 of expf(b_i) * (b_i - q_i)
 *           (float terms summed in double; llama.cpp's cutoff)
 *   dp    = expf(-nll) - expf(-nll_base)                  (float)
 *   same  = argmax q == argmax b (the first index on ties)
 *
 * Totals are summed in token order (the same bytes whatever the threads).
 * The statistics (with count N, mean/err as below):
 *
 *   mean_err(S, S2): f = S/N, err = sqrt((S2/N - f^2) / (N-1)), 0 when
 *                    N <= 10 or the variance is not positive
 *   cov(A, B, AB)  = (AB/N - A/N * B/N) / (N-1), 0 when N < 10
 *   PPL(Q) = exp(f_nll) +/- PPL(Q) * err_nll; PPL(base) the same of nll_base
 *   Cor(ln PPL(Q), ln PPL(base)) = cov / (err_nll * err_nll_base)
 *   ln(PPL(Q)/PPL(base)) = f_nll - f_base +/- sqrt(err_nll^2 + err_base^2 - 2 cov)
 *   PPL(Q)/PPL(base) = exp(ln ratio) +/- ratio * err_ln_ratio
 *   PPL(Q)-PPL(base) +/- sqrt(err_ppl^2 + err_ppl_base^2 - 2 PPL(Q) PPL(base) cov)
 *   KLD: mean_err(sum KLD, sum KLD^2), quantiles of the per-token values
 *   dp: mean_err(sum dp, sum dp^2), quantiles; RMS dp = sqrt(mean dp^2)
 *       +/- 0.5 / RMS * err(dp^2) (mean_err(sum dp^2, sum dp^4))
 *   same top p = n_same / N +/- sqrt(p (1 - p) / (N - 1))
 *   quantile(f) over the sorted float values v[0..N): p = f * (N-1) in
 *   float, v[floor p] * (1 - frac) + v[floor p + 1] * frac; median
 *   0.5 * (v[N/2] + v[N/2-1]) for even N.
 *
 * Values that are undefined (a correlation with no spread, a square root of
 * a negative rounding residue) are 0. llama.cpp prints the summary only from
 * 100 tokens on; these are computed from 1.
 */
#ifndef HFQ_SRC_EVAL_KLD_H
#define HFQ_SRC_EVAL_KLD_H

#include <stdint.h>

#include "formats/error.h"

#define HFQ_KLD_N_QUANTILES 11  /* max, 99.9%, 99%, 95%, 90%, median, 10%, 5%, 1%, 0.1%, min */
#define HFQ_DP_N_QUANTILES 13   /* max, 99.9%, 99%, 95%, 90%, 75%, median, 25%, 10%, 5%, 1%, 0.1%, min */

/* A quantile as llama.cpp labels it: name ("Maximum", "99.9%", "Median",
 * ...), key (for JSON: "max", "p99_9", "median", ...) and fraction. */
typedef struct hfq_quantile {
    const char *name;
    const char *key;
    float fraction;
} hfq_quantile;

extern const hfq_quantile hfq_kld_quantiles[HFQ_KLD_N_QUANTILES];
extern const hfq_quantile hfq_dp_quantiles[HFQ_DP_N_QUANTILES];

typedef struct hfq_kld_stats {
    int64_t count;                       /* tokens compared */
    double ppl, ppl_err;                 /* PPL(Q) */
    double ppl_base, ppl_base_err;       /* PPL(base) */
    double ln_ppl_cor;                   /* Cor(ln PPL(Q), ln PPL(base)), a fraction */
    double ln_ppl_ratio, ln_ppl_ratio_err;
    double ppl_ratio, ppl_ratio_err;
    double ppl_diff, ppl_diff_err;
    double kld, kld_err;                 /* mean KLD (nats) */
    double kld_q[HFQ_KLD_N_QUANTILES];   /* as hfq_kld_quantiles */
    double dp, dp_err;                   /* mean dp (a fraction, not percent) */
    double dp_q[HFQ_DP_N_QUANTILES];     /* as hfq_dp_quantiles */
    double dp_rms, dp_rms_err;
    double same_top, same_top_err;       /* a fraction */
} hfq_kld_stats;

typedef struct hfq_kld hfq_kld;

/* An empty accumulator for rows of n_vocab values. */
hfq_kld *hfq_kld_new(int64_t n_vocab, hfq_error *err);
void hfq_kld_free(hfq_kld *k);

/* Rows at a time hfq_log_sum_exp_rows takes. */
#define HFQ_LSE_ROWS 8

/* For rows r < n (<= HFQ_LSE_ROWS) of n_vocab logits l: max[r], the row's
 * largest, and log_sum[r] = log sum_i expf(l_i - max), the sum in double in
 * index order as llama.cpp's log_softmax. The rows' sums advance together,
 * so that their chains of dependent adds overlap: the same bits as one row
 * at a time; the expf are hfq_expf_rows' (expf_rows.h: the C library's
 * bits, a chunk of a row at a time). */
void hfq_log_sum_exp_rows(const float *l, int64_t n_vocab, int n, float max[], double log_sum[]);

/* logp[j][i] = log softmax(logits[j])_i as above (the base's exact
 * log-probs) for n_rows rows of n_vocab, on up to n_threads threads (<= 0:
 * all); the same bits whatever the threads. */
void hfq_log_softmax(const float *logits, int64_t n_vocab, int64_t n_rows, int n_threads, float *logp);

/* Adds n_rows tokens: logits [n_rows][n_vocab] of the model, base_logp
 * [n_rows][n_vocab] of the base, targets[n_rows] (each in [0, n_vocab)).
 * Rows are computed on up to n_threads threads (<= 0: all). -1 with err
 * when out of memory or a target is out of range (nothing is added). */
int hfq_kld_add(hfq_kld *k, const float *logits, const float *base_logp, const int32_t *targets, int64_t n_rows,
                int n_threads, hfq_error *err);

int64_t hfq_kld_count(const hfq_kld *k);

/* The statistics over every token added so far (count >= 1). -1 with err
 * when there is none or out of memory. */
int hfq_kld_stats_get(const hfq_kld *k, hfq_kld_stats *s, hfq_error *err);

#endif
