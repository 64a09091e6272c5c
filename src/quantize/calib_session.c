/* calib_session.c - see src/quantize/calib_session.h. */
#include "src/quantize/calib_session.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "calib/awq.h"
#include "calib/fold_eval.h"
#include "calib/fold.h"
#include "calib/kv_stats.h"
#include "calib/overlap.h"
#include "calib/smoothquant.h"
#include "calib/stats_file.h"
#include "formats/ggml_type.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/kv_scales.h"
#include "src/eval/lm.h"
#include "src/quantize/codec.h"
#include "src/common/read_text.h"

#define MAX_TEXT ((size_t)1 << 31)
#define DEFAULT_SAMPLE_ROWS 64

struct hfq_calib_session {
    hfq_calib_opts o;
    hfq_calib_stats stats;
    hfq_calib_seqs seqs;      /* the calibration sequences (none from a statistics file) */
    /* set by prepare */
    const gguf_file *f;
    const hfq_plan *plan;
    hfq_transforms ts;
    int64_t n_folded;
    float *imp;               /* the importance rows handed out last */
    hfq_calib_gptq *gptq;     /* uses.gptq: the Hessians */
    hfq_calib_run_params rp;  /* the calibration run's parameters (GPTQ's later passes) */
};

const hfq_calib_stats *hfq_calib_session_stats(const hfq_calib_session *s) { return &s->stats; }
const hfq_calib_uses *hfq_calib_session_uses(const hfq_calib_session *s) { return &s->o.uses; }
const hfq_calib_seqs *hfq_calib_session_seqs(const hfq_calib_session *s) { return s->seqs.n > 0 ? &s->seqs : NULL; }
int64_t hfq_calib_session_n_folded(const hfq_calib_session *s) { return s->n_folded; }

void hfq_calib_session_free(hfq_calib_session *s) {
    if (!s) return;
    hfq_calib_stats_free(&s->stats);
    hfq_calib_seqs_free(&s->seqs);
    hfq_transforms_free(&s->ts);
    free(s->imp);
    hfq_calib_gptq_free(s->gptq);
    free(s);
}

/* ---- calibrating ---- */

static int encode(void *ctx, const char *text, size_t len, bool add_special, bool special, int32_t **ids,
                  size_t *n_ids, hfq_error *err) {
    int flags = (add_special ? HFQ_TOK_ADD_SPECIAL : 0) | (special ? HFQ_TOK_PARSE_SPECIAL : 0);
    return hfq_tokenize(ctx, text, len, flags, ids, n_ids, err);
}

/* XXH3-64 of the file's bytes as stored (compressed, for .gz). */
static int file_xxh3(const char *path, uint64_t *out, hfq_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return hfq_fail(err, path, "cannot open: %s", strerror(errno));
    XXH3_state_t *st = XXH3_createState();
    char buf[1 << 16];
    size_t n;
    int rc = st && XXH3_64bits_reset(st) == XXH_OK ? 0 : hfq_fail(err, path, "out of memory");
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, fp)) > 0) XXH3_64bits_update(st, buf, n);
    if (rc == 0 && ferror(fp)) rc = hfq_fail(err, path, "cannot read: %s", strerror(errno));
    if (rc == 0) *out = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    fclose(fp);
    return rc;
}

static int act_quant_input(void *ctx, const char *name, float *x, int64_t rows, int64_t cols, hfq_error *err);
static bool act_quant_same(void *ctx, const char *leader, const char *name);

static int calibrate(hfq_calib_session *s, const char *model_path, hfq_error *err) {
    const hfq_calib_opts *o = &s->o;
    hfq_lm lm;
    char *text = NULL;
    size_t len = 0;
    hfq_calib_seqs *seqs = &s->seqs;
    if (hfq_lm_load(&lm, model_path, err)) return -1;
    const hfq_vocab *v = lm.vocab;
    hfq_calib_tokenizer tok = {.encode = encode, .ctx = lm.tok, .bos_id = v->bos_id, .add_bos = v->add_bos,
                               .bos_text = v->bos_id >= 0 ? v->tokens[v->bos_id] : NULL,
                               .chat_template = v->chat_template, .model = model_path};
    s->rp = (hfq_calib_run_params){.n_threads = o->n_threads, .all_experts = o->all_experts, .kv_k = o->kv_k,
                                   .kv_v = o->kv_v, .progress = o->progress, .progress_ctx = o->progress_ctx};
    hfq_calib_run_params *rp = &s->rp;
    hfq_calib_gptq_opts go = o->gptq;
    go.n_threads = o->n_threads;
    go.act_quant = go.quantized_inputs ? act_quant_input : NULL;
    go.act_same = act_quant_same;
    go.act_ctx = s;
    if (o->uses.gptq && !(s->gptq = hfq_calib_gptq_new(model_path, hfq_model_gguf(lm.model), &go, err))) {
        hfq_lm_free(&lm);
        return -1;
    }
    /* window 0 in this pass, unless the inputs are quantized with the static
     * scales this pass measures */
    rp->observe = s->gptq && !go.act_quant ? hfq_calib_gptq_observe : NULL;
    rp->observe_user = s->gptq;
    int rc = hfq_read_text(o->text_path, MAX_TEXT, &text, &len, err) ||
                     file_xxh3(o->text_path, &s->stats.text_xxh3, err) ||
                     hfq_calib_sequences(text, len, o->text_path, &o->text, &tok, seqs, err) ||
                     hfq_calib_stats_add_dataset(&s->stats, o->text_path, err) ||
                     hfq_calibrate(lm.model, seqs, rp, &s->stats, err) ||
                     (s->gptq && hfq_calib_gptq_pass_done(s->gptq, err))
                 ? -1
                 : 0;
    s->stats.has_text_xxh3 = rc == 0;
    free(text);
    hfq_lm_free(&lm);
    return rc;
}

void hfq_calib_default_uses(hfq_preset preset, hfq_calib_uses *u) {
    u->importance = true;
    /* GPTQ (with importance headers) was better on both fixtures for every
     * preset measured: KLD 21-40 % below importance rounding (Q6_K, Q8_0:
     * 7-10 %), NVFP4 also below SmoothQuant, which it replaces
     * (docs/calibration.md, "GPTQ") */
    static const hfq_preset gptq_best[] = {
        HFQ_PRESET_Q2_K,   HFQ_PRESET_Q3_K_S, HFQ_PRESET_Q3_K_M, HFQ_PRESET_Q3_K_L, HFQ_PRESET_Q4_K_S, HFQ_PRESET_Q4_K_M,
        HFQ_PRESET_Q5_K_S, HFQ_PRESET_Q5_K_M, HFQ_PRESET_Q6_K,   HFQ_PRESET_Q4_0,   HFQ_PRESET_Q4_1,   HFQ_PRESET_Q5_0,
        HFQ_PRESET_Q5_1,   HFQ_PRESET_Q8_0,   HFQ_PRESET_IQ4_NL, HFQ_PRESET_IQ4_XS, HFQ_PRESET_NVFP4,  HFQ_PRESET_MXFP4};
    u->gptq = false;
    for (size_t i = 0; i < sizeof gptq_best / sizeof gptq_best[0]; i++) u->gptq |= preset == gptq_best[i];
    /* NVFP4 (block scales searched with four over six): SmoothQuant with its
     * alpha searched per group was best on both fixtures (KLD 8 % / 3 % below
     * AWQ on stories260K / TinyStories-656K); MXFP4: importance alone, the
     * rescalings were no better (docs/calibration.md, "NVFP4 and MXFP4
     * block scales") */
    if (preset == HFQ_PRESET_NVFP4) {
        u->fold_if_possible = HFQ_CALIB_FOLD_SMOOTHQUANT;
        u->smoothquant_alpha = -1.0;
    } else {
        u->fold_if_possible = preset == HFQ_PRESET_INT8 ? HFQ_CALIB_FOLD_AWQ : HFQ_CALIB_FOLD_NONE;
    }
}

/* Whether the statistics hold what the fold reads (calib/fold.h: maxima and
 * mean |x|; the searches, AWQ's and SmoothQuant's alpha, also samples): ours
 * do (the searches unless calibrated with --calib-samples 0), llama-imatrix's
 * hold sums of squares only. */
static bool can_fold(const hfq_calib_stats *st, const hfq_calib_uses *u) {
    bool sample = false;
    for (int64_t i = 0; i < st->n; i++) {
        if (!st->entries[i].in_max || !st->entries[i].in_sum_abs) return false;
        sample |= st->entries[i].n_sample > 0;
    }
    const bool searched = u->fold_if_possible == HFQ_CALIB_FOLD_AWQ || u->smoothquant_alpha < 0.0;
    return st->n > 0 && (!searched || sample);
}

/* One warning line per expert tensor with experts of too few tokens. */
static void warn_sparse_experts(const hfq_calib_session *s) {
    for (int64_t i = 0; s->o.warn && i < s->stats.n; i++) {
        const hfq_calib_entry *e = &s->stats.entries[i];
        char msg[512];
        int used = snprintf(msg, sizeof msg, "%s: experts with fewer than %d calibration tokens (their importance "
                            "rests on those tokens; none: neutral, as llama-quantize):", e->name,
                            HFQ_CALIB_MIN_EXPERT_TOKENS);
        int n = 0;
        for (int64_t m = 0; m < e->n_mats; m++) {
            if (!hfq_calib_expert_sparse(e, m)) continue;
            if (used > 0 && (size_t)used < sizeof msg - 40)
                used += snprintf(msg + used, sizeof msg - (size_t)used, "%s expert %lld (%lld tokens)", n ? "," : "",
                                 (long long)m, (long long)e->counts[m]);
            else if (used > 0 && (size_t)used < sizeof msg - 5)
                used += snprintf(msg + used, sizeof msg - (size_t)used, " ...");
            n++;
        }
        if (n) s->o.warn(s->o.warn_ctx, msg);
    }
}

hfq_calib_session *hfq_calib_session_new(const char *model_path, const hfq_calib_opts *o, hfq_error *err) {
    hfq_calib_session *s = calloc(1, sizeof *s);
    if (!s) {
        hfq_fail(err, model_path, "out of memory");
        return NULL;
    }
    s->o = *o;
    int rc;
    if (o->text_path) {
        hfq_calib_stats_init(&s->stats, o->sample_rows < 0 ? DEFAULT_SAMPLE_ROWS : o->sample_rows);
        rc = calibrate(s, model_path, err);
    } else if (o->stats_path && o->uses.gptq) {
        rc = hfq_fail(err, o->stats_path, "GPTQ needs a calibration text (--calibration-file): statistics files hold "
                      "no Hessians");
    } else if (o->stats_path) {
        rc = hfq_calib_stats_load(&s->stats, o->stats_path, err);
    } else {
        rc = hfq_fail(err, model_path, "calibration needs a text or a statistics file");
    }
    if (rc == 0 && o->save_path) rc = hfq_calib_stats_save(&s->stats, o->save_path, err);
    if (rc == 0) warn_sparse_experts(s);
    hfq_calib_uses *u = &s->o.uses;
    if (u->fold_if_possible != HFQ_CALIB_FOLD_NONE && !u->awq && !u->smoothquant && !u->gptq && can_fold(&s->stats, u))
        *(u->fold_if_possible == HFQ_CALIB_FOLD_AWQ ? &u->awq : &u->smoothquant) = true;
    if (rc) {
        hfq_calib_session_free(s);
        return NULL;
    }
    return s;
}

static const char *stats_source(const hfq_calib_session *s) {
    return s->o.stats_path ? s->o.stats_path : s->o.text_path;
}

/* The fold groups of f (calib/fold.h), for its layers and heads. */
static int model_groups(const gguf_file *f, hfq_fold_group **groups, int64_t *n, hfq_error *err) {
    hfq_plan_model model;
    *groups = NULL;
    *n = 0;
    return hfq_plan_model_from_gguf(f, &model, err) ||
                   hfq_fold_groups(f, model.n_layer, model.n_head, model.n_head_kv, groups, n, err)
               ? -1
               : 0;
}

/* What the uses read that the statistics may lack (a llama-imatrix file:
 * sums of squares only; --calib-samples 0: no samples), checked before
 * anything is computed, in a dry run too. */
static int check_uses(const hfq_calib_session *s, const gguf_file *f, hfq_error *err) {
    const hfq_calib_uses *u = &s->o.uses;
    for (int64_t i = 0; u->act_scales && i < s->stats.n; i++)
        if (!s->stats.entries[i].in_max || !s->stats.entries[i].tok_hist)
            return hfq_fail(err, stats_source(s),
                            "tensor %s: --act-scales needs activation maxima, which the statistics lack (files from "
                            "llama-imatrix hold only sums of squares: calibrate with --calibration-file)",
                            s->stats.entries[i].name);
    hfq_plan_model model;
    if (u->kv_scales && (hfq_plan_model_from_gguf(f, &model, err) ||
                         hfq_calib_kv_check(&s->stats, model.n_layer, model.n_head_kv, stats_source(s), err)))
        return -1;
    if (!u->smoothquant && !u->awq) return 0;
    hfq_fold_group *groups;
    int64_t n;
    int rc = model_groups(f, &groups, &n, err);
    const bool sample = u->awq || u->smoothquant_alpha < 0.0; /* the searches evaluate the sample */
    for (int64_t i = 0; rc == 0 && i < n; i++)
        if (!hfq_fold_input_stats(&s->stats, &groups[i], true, sample, u->awq ? "--awq" : "--smoothquant", err)) {
            hfq_error_prefix(err, stats_source(s));
            rc = -1;
        }
    free(groups);
    return rc;
}

int hfq_calib_session_check(const hfq_calib_session *s, const gguf_file *f, hfq_error *err) {
    const char *src = s->o.stats_path ? s->o.stats_path : gguf_path(f);
    for (int64_t i = 0; i < s->stats.n; i++) {
        const hfq_calib_entry *e = &s->stats.entries[i];
        const gguf_tensor_info *t = gguf_find_tensor(f, e->name);
        if (!t)
            return hfq_fail(err, src, "statistics for tensor %s, which %s does not have (statistics of another model?)",
                            e->name, gguf_path(f));
        if (t->ne[0] != e->n_in || t->ne[2] * t->ne[3] != e->n_mats)
            return hfq_fail(err, src,
                            "tensor %s: statistics for %lld x %lld inputs, the model's tensor takes %lld x %lld "
                            "(statistics of another model?)",
                            e->name, (long long)e->n_mats, (long long)e->n_in, (long long)(t->ne[2] * t->ne[3]),
                            (long long)t->ne[0]);
    }
    return check_uses(s, f, err);
}

/* ---- using the statistics ---- */

static const hfq_plan_entry *plan_entry(const hfq_calib_session *s, const char *name) {
    for (int64_t i = 0; i < s->plan->n; i++)
        if (strcmp(gguf_tensor_at(s->f, i)->name, name) == 0) return &s->plan->entries[i];
    return NULL;
}

/* The format the scale searches quantize weight `name` to: its planned
 * format (or --awq-format, per row); false when it stays unquantized or its
 * rows do not fit that format. */
static bool search_spec(const hfq_calib_session *s, const char *name, int64_t cols, hfq_fmt_spec *spec) {
    const hfq_plan_entry *e = plan_entry(s, name);
    if (s->o.uses.awq && s->o.uses.awq_fmt >= 0) *spec = (hfq_fmt_spec){(uint32_t)s->o.uses.awq_fmt, HFQ_SCALE_PER_ROW};
    else if (e && e->convert) *spec = (hfq_fmt_spec){e->fmt, e->scale_group};
    else return false;
    return hfq_fmt_is_quantized(spec->fmt) && !hfq_fmt_spec_problem(spec, cols) &&
           cols % hfq_fmt_block_size(spec->fmt) == 0;
}

static int weight_roundtrip(void *ctx, const char *name, const float *w, float *out, int64_t rows, int64_t cols,
                            const float *importance, hfq_error *err) {
    hfq_fmt_spec spec;
    return !search_spec(ctx, name, cols, &spec) ? 1 : hfq_codec_roundtrip(&spec, w, out, rows, cols, importance, err);
}

static float act_code_max(uint32_t fmt);

static int act_roundtrip(void *ctx, const char *name, float *x, int64_t rows, int64_t cols, float static_amax,
                         hfq_error *err) {
    const hfq_calib_session *s = ctx;
    hfq_fmt_spec spec;
    if (!search_spec(s, name, cols, &spec)) return 0;
    /* the runner applies the input scales it finds (I8: static W8A8, NVFP4: W4A4) */
    const float scale = s->o.uses.act_scales && act_code_max(spec.fmt) > 0.0f ? static_amax / act_code_max(spec.fmt) : 0.0f;
    return hfq_codec_act_roundtrip(spec.fmt, x, rows, cols, scale, s->o.uses.act_search, err);
}

static int fold_groups(hfq_calib_session *s, hfq_error *err) {
    const hfq_calib_uses *u = &s->o.uses;
    hfq_fold_group *groups;
    int64_t n;
    if (model_groups(s->f, &groups, &n, err)) return -1;
    hfq_fold_eval_params ep = {.importance = u->importance, .weight_rt = weight_roundtrip, .act_rt = act_roundtrip,
                               .ctx = s, .n_threads = s->o.n_threads};
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        const hfq_fold_group *g = &groups[i];
        float *scales = malloc((size_t)g->n_in * sizeof *scales);
        hfq_awq_result awq = {0};
        hfq_fold_search_result sq = {0};
        double alpha = 0.0;
        bool fold = u->smoothquant && u->smoothquant_alpha >= 0.0;
        if (!scales) rc = hfq_fail(err, g->consumers[0], "out of memory");
        else if (fold) rc = hfq_smoothquant_scales(s->f, g, &s->stats, &s->ts, u->smoothquant_alpha, scales, err);
        else if (u->smoothquant) {
            rc = hfq_smoothquant_search(s->f, g, &s->stats, &s->ts, 0, &ep, scales, &alpha, &sq, err);
            fold = sq.searched && sq.best > 0;
        } else {
            rc = hfq_awq_search(s->f, g, &s->stats, &s->ts, u->awq_grid, &ep, scales, &awq, err);
            fold = awq.search.searched && awq.search.best > 0;
        }
        if (rc == 0 && fold) {
            rc = hfq_transforms_fold(&s->ts, g, scales, err);
            s->n_folded++;
        }
        free(scales);
    }
    free(groups);
    return rc;
}

static bool has_importance(void *ctx, const char *name, int64_t n_per_row, int64_t n_mats) {
    const hfq_calib_session *s = ctx;
    const hfq_calib_entry *e = hfq_calib_stats_find(&s->stats, name);
    return e && e->n_in == n_per_row && e->n_mats == n_mats;
}

static const float *get_importance(void *ctx, const char *name, int64_t n_per_row, int64_t n_mats) {
    hfq_calib_session *s = ctx;
    const hfq_calib_entry *e = hfq_calib_stats_find(&s->stats, name);
    if (!has_importance(s, name, n_per_row, n_mats)) return NULL;
    const hfq_transform *t = hfq_transforms_find(&s->ts, name);
    for (int64_t m = 0; m < n_mats; m++) {
        float *row = s->imp + m * n_per_row;
        hfq_calib_importance(e, m, row);
        for (int64_t j = 0; t && t->col && j < n_per_row; j++) row[j] /= t->col[j] * t->col[j];
    }
    return s->imp;
}

/* Room for the largest importance rows get_importance hands out. */
static int importance_buffer(hfq_calib_session *s, hfq_error *err) {
    int64_t max_vals = 1;
    for (int64_t i = 0; i < s->stats.n; i++)
        if (s->stats.entries[i].n_in * s->stats.entries[i].n_mats > max_vals)
            max_vals = s->stats.entries[i].n_in * s->stats.entries[i].n_mats;
    free(s->imp);
    s->imp = malloc((size_t)max_vals * sizeof *s->imp);
    return s->imp ? 0 : hfq_fail(err, s->o.text_path ? s->o.text_path : s->o.stats_path, "out of memory");
}

hfq_importance_source hfq_calib_session_importance(hfq_calib_session *s) {
    if (!s->o.uses.importance || (!s->imp && importance_buffer(s, &(hfq_error){{0}}))) return (hfq_importance_source){0};
    return (hfq_importance_source){get_importance, s, has_importance};
}

/* The largest value of each format's activation codes, for static scales. */
static float act_code_max(uint32_t fmt) {
    switch (fmt) {
    case HFQ_FMT_INT8: return (float)HFQ_INT8_QMAX;
    case HFQ_FMT_FP8_E4M3: return HFQ_FP8_E4M3_MAX;
    case HFQ_FMT_FP8_E5M2: return HFQ_FP8_E5M2_MAX;
    case GT_NVFP4: return HFQ_NVFP4_GLOBAL_DIV;
    default: return 0.0f;
    }
}

/* The calibrated maximum |x| of the (rescaled) input of weight e. */
static float input_amax(const hfq_calib_session *s, const hfq_calib_entry *e, const hfq_transform *t) {
    float amax = 0.0f;
    for (int64_t m = 0; m < e->n_mats; m++) {
        if (s->o.uses.act_percentile < 100.0) {
            amax = fmaxf(amax, hfq_calib_token_max_percentile(e, m, s->o.uses.act_percentile));
            continue;
        }
        for (int64_t j = 0; j < e->n_in; j++)
            amax = fmaxf(amax, e->in_max[m * e->n_in + j] / (t && t->col ? t->col[j] : 1.0f));
    }
    return amax;
}

/* The static input scale ("<base>.input_scale") weight name written in fmt
 * gets: with --act-scales, for the formats that take one; else 0. */
static float input_scale_of(const hfq_calib_session *s, const char *name, uint32_t fmt) {
    const hfq_calib_entry *e = hfq_calib_stats_find(&s->stats, name);
    const float code_max = act_code_max(fmt);
    if (!s->o.uses.act_scales || code_max == 0.0f || !e || !e->in_max) return 0.0f;
    return input_amax(s, e, hfq_transforms_find(&s->ts, name)) / code_max;
}

/* The format weight name is written in, when quantized (its inputs then
 * are too, as that format's runner path quantizes them). */
static bool written_quantized(const hfq_calib_session *s, const char *name, uint32_t *fmt) {
    const hfq_plan_entry *e = plan_entry(s, name);
    if (!e || !e->convert || !hfq_fmt_is_quantized(e->fmt)) return false;
    *fmt = e->fmt;
    return true;
}

/* GPTQ's quantized inputs (src/quantize/calib_gptq.h): the runner's
 * quantization of weight name's input, in its planned format (not
 * --awq-format's), with the static scale the output gets for it. */
static int act_quant_input(void *ctx, const char *name, float *x, int64_t rows, int64_t cols, hfq_error *err) {
    const hfq_calib_session *s = ctx;
    uint32_t fmt;
    if (!written_quantized(s, name, &fmt)) return 0;
    return hfq_codec_act_roundtrip(fmt, x, rows, cols, input_scale_of(s, name, fmt), s->o.uses.act_search, err);
}

/* Whether weight name's inputs are quantized as its leader's are (the same
 * format: the same input, statistics and fold give the same static scale),
 * so that the leader's target shift is name's. */
static bool act_quant_same(void *ctx, const char *leader, const char *name) {
    uint32_t a = 0, b = 0;
    const bool qa = written_quantized(ctx, leader, &a), qb = written_quantized(ctx, name, &b);
    return qa == qb && a == b;
}

static void get_adjust(void *ctx, const char *name, uint32_t fmt, hfq_tensor_adjust *out) {
    const hfq_calib_session *s = ctx;
    const hfq_transform *t = hfq_transforms_find(&s->ts, name);
    memset(out, 0, sizeof *out);
    if (t) {
        out->col_scale = t->col;
        out->row_scale = t->row;
    }
    out->input_scale = input_scale_of(s, name, fmt);
}

/* hfq.kv_cache.k_scale / v_scale from the KV maxima (checked by check_uses). */
static int write_kv_scales(const hfq_calib_session *s, gguf_writer *w) {
    const int64_t n = s->stats.kv_layers;
    float *k = malloc((size_t)n * sizeof *k), *v = malloc((size_t)n * sizeof *v);
    hfq_error err = {{0}};
    int rc = -1;
    if (k && v) {
        hfq_calib_kv_scales(&s->stats, k, v);
        rc = hfq_kv_scales_write(w, k, v, n, stats_source(s), &err);
    }
    free(k);
    free(v);
    return rc;
}

/* hfq.act_quant.<name> = "nvfp4_search" for each NVFP4 weight written with
 * an input scale (uses.act_search). */
static int write_act_search_marks(const hfq_calib_session *s, gguf_writer *w) {
    int rc = 0;
    for (int64_t i = 0; i < s->plan->n; i++) {
        const char *name = gguf_tensor_at(s->f, i)->name;
        if (!s->plan->entries[i].convert || s->plan->entries[i].fmt != GT_NVFP4 ||
            !(input_scale_of(s, name, GT_NVFP4) > 0.0f))
            continue;
        char key[32 + GGUF_MAX_NAME + 1];
        snprintf(key, sizeof key, "hfq.act_quant.%s", name);
        rc |= gguf_set_str(w, key, "nvfp4_search");
    }
    return rc;
}

static int set_keys(void *ctx, gguf_writer *w, const hfq_write_effect *effect) {
    const hfq_calib_session *s = ctx;
    const hfq_calib_stats *st = &s->stats;
    const hfq_calib_uses *u = &s->o.uses;
    /* requested: what the command line (or the format's default) asked for;
     * applied: what changed at least one tensor's bytes */
    const char *requested[6], *applied[6];
    int n_req = 0, n = 0, rc = 0;
    const struct {
        bool asked, changed;
        const char *name;
    } uses[] = {{u->importance, effect->n_importance > 0, "importance"},
                {u->act_scales, effect->n_input_scales > 0, "act_scales"},
                {u->smoothquant, s->n_folded > 0, "smoothquant"},
                {u->awq, s->n_folded > 0, "awq"},
                {u->kv_scales, true, "kv_scales"},
                {u->gptq, effect->n_gptq > 0, "gptq"}};
    for (size_t k = 0; k < sizeof uses / sizeof uses[0]; k++) {
        if (uses[k].asked) requested[n_req++] = uses[k].name;
        if (uses[k].asked && uses[k].changed) applied[n++] = uses[k].name;
    }
    if (st->n_datasets > 0) rc |= gguf_set_str(w, "hfq.calib.text", st->datasets[st->n_datasets - 1]);
    if (st->has_text_xxh3) rc |= gguf_set_u64(w, "hfq.calib.text_xxh3", st->text_xxh3);
    if (s->o.stats_path && !s->o.text_path) rc |= gguf_set_str(w, "hfq.calib.stats_file", s->o.stats_path);
    if (st->mode[0]) rc |= gguf_set_str(w, "hfq.calib.mode", st->mode);
    rc |= gguf_set_u64(w, "hfq.calib.chunk_count", (uint64_t)st->n_chunks);
    rc |= gguf_set_u64(w, "hfq.calib.chunk_size", (uint64_t)st->chunk_size);
    if (st->n_tokens > 0) rc |= gguf_set_u64(w, "hfq.calib.n_tokens", (uint64_t)st->n_tokens);
    if (s->seqs.n > 0) rc |= hfq_overlap_write(w, &s->seqs);   /* ppl-eval warns on calibration text */
    rc |= gguf_set_arr_str(w, "hfq.calib.requested", requested, NULL, n_req);
    rc |= gguf_set_arr_str(w, "hfq.calib.applied", applied, NULL, n);
    if (u->act_scales) rc |= gguf_set_f32(w, "hfq.calib.act_percentile", (float)u->act_percentile);
    if (u->smoothquant && u->smoothquant_alpha >= 0.0)
        rc |= gguf_set_f32(w, "hfq.calib.smoothquant_alpha", (float)u->smoothquant_alpha);
    if (u->smoothquant && u->smoothquant_alpha < 0.0) rc |= gguf_set_str(w, "hfq.calib.smoothquant_alpha", "auto");
    if (u->awq) {
        rc |= gguf_set_u32(w, "hfq.calib.awq_grid", (uint32_t)(u->awq_grid > 0 ? u->awq_grid : HFQ_AWQ_DEFAULT_GRID));
        rc |= gguf_set_str(w, "hfq.calib.awq_format", u->awq_fmt >= 0 ? hfq_fmt_name((uint32_t)u->awq_fmt) : "planned");
    }
    if (u->smoothquant || u->awq) rc |= gguf_set_u64(w, "hfq.calib.folded_groups", (uint64_t)s->n_folded);
    if (s->o.kv_k || s->o.kv_v) {
        rc |= gguf_set_str(w, "hfq.calib.kv_type_k", hfq_kv_type_name(s->o.kv_k));
        rc |= gguf_set_str(w, "hfq.calib.kv_type_v", hfq_kv_type_name(s->o.kv_v));
    }
    if (u->act_scales && u->act_search) rc |= write_act_search_marks(s, w);
    return rc || (u->kv_scales && write_kv_scales(s, w)) ? -1 : 0;
}

int hfq_calib_session_prepare(hfq_calib_session *s, const gguf_file *f, const hfq_plan *plan, hfq_quantize_opts *q,
                              hfq_error *err) {
    hfq_transforms_free(&s->ts);
    s->f = f;
    s->plan = plan;
    s->n_folded = 0;
    if (hfq_calib_session_check(s, f, err)) return -1;
    if (s->o.uses.smoothquant && s->o.uses.awq)
        return hfq_fail(err, gguf_path(f), "SmoothQuant and AWQ rescale the same channels: choose one");
    if ((s->o.uses.smoothquant || s->o.uses.awq) && fold_groups(s, err)) {
        hfq_error_prefix(err, stats_source(s));
        return -1;
    }
    if (importance_buffer(s, err)) return -1;
    q->importance = hfq_calib_session_importance(s);
    q->adjust = (hfq_adjust_source){get_adjust, set_keys, s};
    if (s->gptq) q->gptq = hfq_calib_gptq_source(s->gptq, &s->seqs, &s->rp, &s->ts);
    return 0;
}
