/* calib_session.h - calibration for the quantize tool: where the
 * statistics come from and how they are used (docs/calibration.md).
 *
 * Statistics come from running the model (our runner, kernels/) over a
 * calibration text (calib/calibrate.h), or from a statistics file written
 * earlier (calib/stats_file.h; llama-imatrix files too); either can be saved.
 * They must belong to the model being quantized: every entry names one of
 * its weights with that weight's row length and matrix count.
 *
 * Uses, each asked for by name:
 *   importance   the per-column importance row of every weight with
 *                statistics, exactly as llama-quantize --imatrix computes it
 *                (ggml formats' importance-weighted rounding, the NVFP4
 *                block-scale search, INT8/FP8 per-channel scale searches)
 *   act_scales   "<name>.input_scale" for INT8 / FP8 / NVFP4 weights: the
 *                calibrated activation maximum (or a percentile of the
 *                per-token maxima) over 127 / 448 / 57344 / 6*448
 *   smoothquant  SmoothQuant scales (calib/smoothquant.h) folded per group,
 *                alpha fixed or searched
 *   awq          AWQ scales (calib/awq.h)
 *   kv_scales    static FP8 KV-cache scales hfq.kv_cache.k_scale / v_scale
 *                (quant/kv_scales.h): per layer, the calibrated max |K|
 *                (after rope) or |V| over 448 (calib/kv_stats.h)
 *   gptq         GPTQ's error-feedback rounding (quant/gptq.h) with each
 *                dense weight input's Hessian (src/quantize/calib_gptq.h);
 *                needs a calibration text (statistics files hold no
 *                Hessians)
 * The searches (AWQ, SmoothQuant's automatic alpha) quantize each weight to
 * its planned format (or awq_fmt) and its activations as the runner does.
 * A rescaled weight's importance is divided by its column scale squared and
 * its activation maximum by the column scale, as the folded input is.
 *
 * The output records in hfq.calib.* keys what was asked for
 * (hfq.calib.requested) and what changed at least one tensor
 * (hfq.calib.applied: importance only when some tensor's format rounds with
 * it, act_scales when an input scale was written, smoothquant / awq when a
 * group was folded, gptq when a tensor was rounded by GPTQ).
 */
#ifndef HFQ_SRC_QUANTIZE_CALIB_SESSION_H
#define HFQ_SRC_QUANTIZE_CALIB_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "calib/calibrate.h"
#include "calib/stats.h"
#include "formats/error.h"
#include "src/quantize/calib_gptq.h"
#include "formats/gguf.h"
#include "quant/plan.h"
#include "src/quantize/driver.h"

/* A rescaling folded into the model before rounding. */
typedef enum hfq_calib_fold {
    HFQ_CALIB_FOLD_NONE,
    HFQ_CALIB_FOLD_SMOOTHQUANT,
    HFQ_CALIB_FOLD_AWQ,
} hfq_calib_fold;

typedef struct hfq_calib_uses {
    bool importance, act_scales, smoothquant, awq, kv_scales, gptq;
    /* with act_scales, NVFP4 W4A4's activation scale codes searched per 16
     * values (hfq.act_quant.<name> = "nvfp4_search" beside each NVFP4 input
     * scale; the searches quantize the activations so): GGUF outputs only */
    bool act_search;
    /* the preset's default rescaling (docs/calibration.md, "Defaults"),
     * taken when no rescaling is named, GPTQ is not used and the statistics
     * can serve it
     * (activation maxima and mean |x|, and for AWQ and SmoothQuant with a
     * searched alpha samples: not a llama-imatrix file, for those not
     * --calib-samples 0); hfq_calib_session_uses says whether it was */
    hfq_calib_fold fold_if_possible;
    double act_percentile;     /* (0, 100]; 100: the maximum */
    double smoothquant_alpha;  /* [0, 1]; < 0: searched per group (calib/smoothquant.h) */
    int awq_grid;              /* <= 0: 20 */
    int awq_fmt;               /* format AWQ searches with; -1: each weight's planned format */
} hfq_calib_uses;

/* The uses with none named: importance-weighted rounding, plus what
 * measured best with it on the fixtures for the preset: GPTQ for the ggml
 * presets Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, IQ4_NL, IQ4_XS and for NVFP4, MXFP4 (gptq: it needs a
 * calibration text, so a caller with a
 * statistics file clears it); the rescaling, when the statistics can serve
 * it and GPTQ is not used: SmoothQuant with alpha searched per group
 * (smoothquant_alpha = -1) for NVFP4, AWQ for INT8, none for the others
 * (docs/calibration.md, "Defaults"). Leaves the other fields. */
void hfq_calib_default_uses(hfq_preset preset, hfq_calib_uses *u);

typedef struct hfq_calib_opts {
    const char *text_path;         /* calibrate on this text, or NULL */
    hfq_calib_text_opts text;
    int64_t sample_rows;           /* activation rows kept per shared input (AWQ); < 0: 64 */
    const char *stats_path;        /* or read statistics from this file */
    const char *save_path;         /* write the statistics here (may be NULL) */
    hfq_calib_uses uses;
    hfq_calib_gptq_opts gptq;      /* uses.gptq: its options (n_threads is taken from here) */
    int n_threads;                 /* <= 0: all */
    bool all_experts;              /* every expert over every calibration token (calibrate.h) */
    hfq_kv_type kv_k, kv_v;        /* the calibration run's KV cache formats (calibrate.h; 0: default) */
    /* called after each calibration sequence (may be NULL) */
    void (*progress)(void *ctx, int64_t done, int64_t n);
    void *progress_ctx;
    /* called with one line per expert tensor whose experts saw fewer than
     * HFQ_CALIB_MIN_EXPERT_TOKENS tokens, naming them with their counts
     * (their importance stays llama-quantize's); may be NULL */
    void (*warn)(void *ctx, const char *msg);
    void *warn_ctx;
} hfq_calib_opts;

typedef struct hfq_calib_session hfq_calib_session;

/* Gets the statistics for the model at model_path (running it when
 * o->text_path is set) and saves them when o->save_path is set. */
hfq_calib_session *hfq_calib_session_new(const char *model_path, const hfq_calib_opts *o, hfq_error *err);
void hfq_calib_session_free(hfq_calib_session *s);
const hfq_calib_stats *hfq_calib_session_stats(const hfq_calib_session *s);
/* The uses as settled once the statistics are known (fold_if_possible
 * resolved into awq or smoothquant). */
const hfq_calib_uses *hfq_calib_session_uses(const hfq_calib_session *s);
/* The calibration sequences the statistics came from; NULL when they were
 * read from a file. */
const hfq_calib_seqs *hfq_calib_session_seqs(const hfq_calib_session *s);
/* The importance rows (uses.importance), of the statistics as they are
 * before prepare's transforms or after them; get is NULL without the use
 * (or out of memory, which prepare reports). Valid while s lives. */
hfq_importance_source hfq_calib_session_importance(hfq_calib_session *s);

/* Fails when the statistics are not f's (a name f lacks, another row
 * length or matrix count). */
int hfq_calib_session_check(const hfq_calib_session *s, const gguf_file *f, hfq_error *err);

/* Computes the transforms for plan and points q->importance, q->adjust
 * (and with uses.gptq q->gptq) at the session (which must outlive the
 * write). */
int hfq_calib_session_prepare(hfq_calib_session *s, const gguf_file *f, const hfq_plan *plan, hfq_quantize_opts *q,
                              hfq_error *err);

/* Groups folded by SmoothQuant / AWQ in the last prepare. */
int64_t hfq_calib_session_n_folded(const hfq_calib_session *s);

#endif
