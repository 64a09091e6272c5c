/* fold.h - per-channel rescaling that leaves a model's function unchanged
 * (before rounding): the shared mechanism of SmoothQuant and AWQ.
 *
 * A fold group is a set of weights ("consumers") that read the same input
 * x, and the operation that produces x. Scaling input channel j by 1/s_j where
 * x is produced and the consumers' column j by s_j gives the same products:
 *
 *   NORM  x = rmsnorm(h) * gamma        gamma_j /= s_j
 *         attn_norm -> attn_q, attn_k, attn_v;  ffn_norm -> ffn_gate, ffn_up
 *   ROWS  x_j is linear in row j of a weight W (and its bias)
 *         W_j /= s_j: ffn_up rows -> ffn_down (x = silu(gate) * up);
 *         attn_v rows (+ bias) -> attn_output, only when n_head == n_head_kv
 *         (each attention output channel then reads exactly one v channel)
 *
 * Transforms collect the multipliers per tensor (columns and rows, or the
 * elements of a vector) as groups are folded; a tensor can get both (ffn_up:
 * columns from the gate/up group, rows from the down group). Dense weights
 * only: expert tensors are not folded.
 */
#ifndef HFQ_CALIB_FOLD_H
#define HFQ_CALIB_FOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "calib/stats.h"
#include "formats/error.h"
#include "formats/gguf.h"

#define HFQ_FOLD_NAME 64
#define HFQ_FOLD_MAX_CONSUMERS 3

typedef enum hfq_fold_kind { HFQ_FOLD_NORM, HFQ_FOLD_ROWS } hfq_fold_kind;

typedef struct hfq_fold_group {
    hfq_fold_kind kind;
    char target[HFQ_FOLD_NAME];        /* the norm weight (NORM) or W (ROWS) */
    char target_bias[HFQ_FOLD_NAME];   /* ROWS: W's bias, "" when it has none */
    char consumers[HFQ_FOLD_MAX_CONSUMERS][HFQ_FOLD_NAME];
    int n_consumers;
    int64_t n_in;                      /* channels of x */
} hfq_fold_group;

/* The groups of every layer of f whose tensors are all present with
 * consistent 2-D shapes, in the order to search them: per layer ffn_down,
 * attn_output, then attn_q/k/v and ffn_gate/up (so the row multipliers of
 * ffn_up and attn_v are known when their own columns are searched).
 * *out is malloc'd (NULL when *n is 0). */
int hfq_fold_groups(const gguf_file *f, int64_t n_layer, int64_t n_head, int64_t n_head_kv, hfq_fold_group **out,
                    int64_t *n, hfq_error *err);

/* The statistics of g's input (its first consumer's entry), checked to hold
 * max|x| (need_max) and activation rows (need_sample); NULL with an error
 * naming `use` (the option that needs them) otherwise. */
const hfq_calib_entry *hfq_fold_input_stats(const hfq_calib_stats *st, const hfq_fold_group *g, bool need_max,
                                            bool need_sample, const char *use, hfq_error *err);

typedef struct hfq_transform {
    char *name;
    float *col;       /* [n_col]: element j of every row times col[j]; NULL: none */
    int64_t n_col;
    float *row;       /* [n_row]: row i (over all matrices) times row[i]; NULL: none */
    int64_t n_row;
} hfq_transform;

typedef struct hfq_transforms {
    hfq_transform *t;
    int64_t n, cap;
} hfq_transforms;

void hfq_transforms_free(hfq_transforms *ts);
const hfq_transform *hfq_transforms_find(const hfq_transforms *ts, const char *name);

/* Folds scales s[n_in] (> 0, finite) for group g into ts: the consumers'
 * columns times s, the NORM target's elements or the ROWS target's rows and
 * bias divided by s. */
int hfq_transforms_fold(hfq_transforms *ts, const hfq_fold_group *g, const float *s, hfq_error *err);

/* Applies t (may be NULL) to nrows rows of n values starting at row `row0`
 * of the tensor. */
void hfq_transform_apply(const hfq_transform *t, float *rows, int64_t row0, int64_t nrows, int64_t n);

/* Tensor `name` of f decoded to float ([*rows][*cols], rows over all
 * matrices), with its transform in ts (may be NULL) applied; malloc'd. Fails
 * for formats that do not decode on their own (NVFP4, I8). */
float *hfq_fold_read(const gguf_file *f, const char *name, const hfq_transforms *ts, int64_t *rows, int64_t *cols,
                     hfq_error *err);

#endif
