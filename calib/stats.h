/* stats.h - activation statistics per weight matrix input (calibration).
 *
 * One entry per weight that multiplies activations ("blk.3.attn_q.weight",
 * "output.weight", experts "blk.3.ffn_up_exps.weight" with one matrix per
 * expert). For matrix m of entry e and input channel j over the tokens seen:
 *
 *   in_sum2[m][j]     sum of x^2      (llama.cpp's imatrix "in_sum2")
 *   in_sum_abs[m][j]  sum of |x|
 *   in_max[m][j]      max of |x|
 *   counts[m]         tokens          (llama.cpp's imatrix "counts")
 *   tok_hist[m][b]    tokens whose max_j |x_j| falls in bin b: fixed
 *                     log-spaced bins (HFQ_CALIB_HIST_*), so percentiles of
 *                     the per-token maximum cost O(1) memory
 *
 * plus, for the first weight of each shared input (calib/fold.h:
 * attn_q for q/k/v, ffn_gate for gate/up, and every other dense weight),
 * a bounded reservoir sample of whole activation rows (for AWQ's search):
 * the first sample_cap rows, then each later row replaces a random slot with
 * probability sample_cap / rows seen (Algorithm R, a splitmix64 stream seeded
 * from the weight's name, so the sample is deterministic).
 *
 * Memory is O(channels) per entry (plus the reservoir). Sums accumulate in
 * double while adding; hfq_calib_stats_finish rounds them to the float values
 * a statistics file stores, and every use reads those, so statistics used at
 * once or saved and reloaded give the same results.
 */
#ifndef HFQ_CALIB_STATS_H
#define HFQ_CALIB_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"

/* Per-token max|x| histogram: bin 0 holds values below 2^MIN_LOG2 (zero
 * included), bin b >= 1 [2^(MIN_LOG2 + (b-1)/PER_OCTAVE), 2^(MIN_LOG2 + b/PER_OCTAVE)),
 * the last bin everything from 2^MAX_LOG2 up. */
#define HFQ_CALIB_HIST_MIN_LOG2 (-20)
#define HFQ_CALIB_HIST_MAX_LOG2 20
#define HFQ_CALIB_HIST_PER_OCTAVE 8
#define HFQ_CALIB_HIST_BINS ((HFQ_CALIB_HIST_MAX_LOG2 - HFQ_CALIB_HIST_MIN_LOG2) * HFQ_CALIB_HIST_PER_OCTAVE + 2)

typedef struct hfq_calib_acc hfq_calib_acc;

typedef struct hfq_calib_entry {
    char *name;
    int64_t n_in;        /* channels: the weight's row length (ne0) */
    int64_t n_mats;      /* matrices: ne2 * ne3 (experts), 1 for dense weights */
    /* Final statistics, [n_mats][n_in] (NULL until finished, or absent from a file). */
    float *in_sum2;
    float *in_sum_abs;   /* NULL in files written by llama-imatrix */
    float *in_max;       /* NULL in files written by llama-imatrix */
    float *tok_hist;     /* [n_mats][HFQ_CALIB_HIST_BINS]; NULL when absent */
    int64_t *counts;     /* [n_mats] */
    float *sample;       /* [n_sample][n_in] activation rows of matrix 0; NULL when none */
    int64_t n_sample;
    hfq_calib_acc *acc;  /* accumulation state while adding; NULL once finished */
} hfq_calib_entry;

typedef struct hfq_calib_stats {
    hfq_calib_entry *entries;    /* sorted by name once finished or loaded */
    int64_t n, cap;
    int64_t sample_cap;          /* reservoir rows per shared input (0: none) */
    /* Provenance, written to and read from statistics files. */
    char **datasets;             /* calibration text files (imatrix.datasets) */
    int64_t n_datasets;
    uint64_t text_xxh3;          /* XXH3-64 of the (last) text file's bytes */
    bool has_text_xxh3;
    char mode[16];               /* "chunks", "lines", "lines-chat"; "" when unknown */
    int64_t n_chunks;            /* sequences evaluated (imatrix.chunk_count) */
    int64_t chunk_size;          /* tokens per chunk (imatrix.chunk_size) */
    int64_t n_tokens;            /* tokens evaluated; 0 when unknown */
    int64_t cursor;              /* lookup hint: the observer sees weights in the same order every batch */
    /* KV-cache maxima (calib/kv_stats.h): max |K| (after rope, as the cache
     * stores it) and max |V| per layer and kv head, [kv_layers][kv_heads];
     * NULL when not collected (llama-imatrix's files, older files) */
    float *k_amax, *v_amax;
    int64_t kv_layers, kv_heads;
} hfq_calib_stats;

/* An empty set; sample_cap rows are kept per shared input. */
void hfq_calib_stats_init(hfq_calib_stats *s, int64_t sample_cap);
void hfq_calib_stats_free(hfq_calib_stats *s);
/* Appends a dataset name (copied). */
int hfq_calib_stats_add_dataset(hfq_calib_stats *s, const char *name, hfq_error *err);

/* The named entry, or NULL. */
const hfq_calib_entry *hfq_calib_stats_find(const hfq_calib_stats *s, const char *name);

/* Adds n_tokens activation rows x [n_tokens][n_in] seen by matrix mat of the
 * weight `name` (n_mats matrices). Fails when the weight was seen before with
 * another shape, or out of memory. */
int hfq_calib_stats_add(hfq_calib_stats *s, const char *name, int64_t mat, int64_t n_mats, const float *x,
                        int64_t n_tokens, int64_t n_in, hfq_error *err);

/* Ends accumulation: sums rounded to float, entries sorted by name. */
int hfq_calib_stats_finish(hfq_calib_stats *s, hfq_error *err);

/* A new entry with the given shape and zeroed statistics (all arrays
 * allocated, no sample), for loaders; NULL when out of memory or a duplicate. */
hfq_calib_entry *hfq_calib_stats_new_entry(hfq_calib_stats *s, const char *name, int64_t n_in, int64_t n_mats,
                                           hfq_error *err);
/* Sorts the entries by name (loaders call it once done). */
void hfq_calib_stats_sort(hfq_calib_stats *s);

/* llama.cpp's importance row of matrix mat, exactly as llama-quantize turns
 * an imatrix file into quantize_<type>'s weights: in_sum2 / (float)count in
 * float, all 1 when the count is 0. out: n_in floats. */
void hfq_calib_importance(const hfq_calib_entry *e, int64_t mat, float *out);

/* An expert (a matrix of an entry with n_mats > 1) that saw fewer tokens
 * than this: its statistics rest on few tokens, and quantize names it in a
 * warning (its importance stays llama-quantize's: the mean, all 1 for none). */
#define HFQ_CALIB_MIN_EXPERT_TOKENS 16
bool hfq_calib_expert_sparse(const hfq_calib_entry *e, int64_t mat);

/* Mean |x| of channel j of matrix mat (0 when no tokens); needs in_sum_abs. */
float hfq_calib_mean_abs(const hfq_calib_entry *e, int64_t mat, int64_t j);

/* Maximum |x| over the channels of matrix mat; needs in_max. */
float hfq_calib_amax(const hfq_calib_entry *e, int64_t mat);

/* p-th percentile (0 < p <= 100) of the per-token max|x| of matrix mat: the
 * upper edge of the histogram bin where the count reaches p% of the tokens,
 * never above the maximum (p = 100 gives the maximum itself); needs tok_hist
 * and in_max. 0 when no tokens were seen. */
float hfq_calib_token_max_percentile(const hfq_calib_entry *e, int64_t mat, double p);

/* Histogram bin of a per-token maximum v >= 0. */
int hfq_calib_hist_bin(float v);

#endif
