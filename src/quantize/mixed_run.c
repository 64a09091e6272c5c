/* mixed_run.c - see mixed_run.h. */
#include "src/quantize/mixed_run.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/model.h"
#include "quant/recipe.h"
#include "src/common/json_file.h"
#include "src/quantize/codec.h"

/* (position, vocabulary) values a KL probe keeps at most */
#define KL_MAX_SCORES ((int64_t)1 << 25)
#define MAX_CANDIDATES 64

bool hfq_mixed_measure_only(const hfq_mixed_job *job) {
    return !job->recipe_path && job->target_bpw <= 0 && job->target_size <= 0;
}

void hfq_mixed_result_free(hfq_mixed_result *res) {
    hfq_plan_free(&res->plan);
    hfq_measurements_free(&res->meas);
}

static int64_t total_elements(const gguf_file *f) {
    int64_t n = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return n;
}

/* Bytes of tensor data in a written file (what the plan predicted). */
static int64_t tensor_bytes(const char *path, uint64_t *file_size, hfq_error *err) {
    gguf_file *g = gguf_open(path, err);
    if (!g) return -1;
    int64_t n = 0;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) n += (int64_t)gguf_tensor_at(g, i)->nbytes;
    *file_size = gguf_file_size(g);
    gguf_close(g);
    return n;
}

/* How often each token id was fed: the calibration sequences' tokens. */
static double *token_counts(const hfq_calib_seqs *seqs, int64_t n_vocab) {
    double *c = calloc((size_t)(n_vocab > 0 ? n_vocab : 1), sizeof *c);
    for (int64_t i = 0; c && i < seqs->n_tokens; i++)
        if (seqs->tokens[i] >= 0 && seqs->tokens[i] < n_vocab) c[seqs->tokens[i]] += 1.0;
    return c;
}

/* The formats tensors no recipe rule restricts choose among: --candidates,
 * or the default list (those this build can write). */
static int default_candidates(const hfq_mixed_job *job, hfq_fmt_spec *out) {
    if (job->candidates) {
        memcpy(out, job->candidates, (size_t)job->n_candidates * sizeof *out);
        return job->n_candidates;
    }
    char list[] = HFQ_MIXED_DEFAULT_CANDIDATES;
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && n < MAX_CANDIDATES;
         tok = strtok_r(NULL, ",", &save))
        if (hfq_fmt_spec_parse(tok, &out[n]) == 0 && hfq_codec_can_encode(out[n].fmt)) n++;
    return n;
}

/* What is measured: the default candidates and every candidate the recipe's
 * rules list (docs/mixed.md: a rule's "candidates" restrict its tensors to
 * them, so each must have been measured). */
static int measured_specs(const hfq_mixed_job *job, const hfq_recipe *recipe, hfq_fmt_spec *out) {
    int n = default_candidates(job, out);
    hfq_fmt_spec rc[MAX_CANDIDATES];
    const int n_rc = recipe ? hfq_recipe_candidates(recipe, rc, MAX_CANDIDATES) : 0;
    for (int k = 0; k < n_rc && n < 2 * MAX_CANDIDATES; k++) {
        bool seen = !hfq_codec_can_encode(rc[k].fmt);
        for (int j = 0; j < n; j++) seen |= out[j].fmt == rc[k].fmt && out[j].scale_group == rc[k].scale_group;
        if (!seen) out[n++] = rc[k];
    }
    return n;
}

/* Measures f on the session's statistics; with the calibration sequences
 * at hand the embedding rows are weighted by token frequency and the KL
 * probes run on their first chunks. */
static int measure(hfq_mixed_job *job, const hfq_recipe *recipe, const gguf_file *f, hfq_calib_session *cs,
                   hfq_measurements *m, hfq_error *err) {
    hfq_fmt_spec specs[2 * MAX_CANDIDATES];
    const int n_specs = measured_specs(job, recipe, specs);
    const hfq_calib_stats *st = hfq_calib_session_stats(cs);
    const hfq_calib_seqs *seqs = hfq_calib_session_seqs(cs);
    hfq_model *model = NULL;
    hfq_kl_probe *probe = NULL;
    double *counts = NULL;
    int64_t n_vocab = 0;
    int rc = 0;
    if (seqs) {
        if (!(model = hfq_model_load(job->in, err))) return -1;
        n_vocab = hfq_model_hparams(model)->n_vocab;
        if (!(counts = token_counts(seqs, n_vocab))) rc = hfq_fail(err, job->in, "out of memory");
        if (rc == 0 && job->kl_chunks > 0 &&
            !(probe = hfq_kl_probe_new(model, seqs, job->kl_chunks, job->q.n_threads, KL_MAX_SCORES, err)))
            rc = -1;
    }
    if (rc == 0) {
        hfq_measure_opts mo = {.n_threads = job->q.n_threads, .importance = hfq_calib_session_importance(cs),
                               .probe = probe, .progress = job->measure_progress,
                               .progress_ctx = job->measure_progress_ctx, .token_count = counts,
                               .n_vocab = n_vocab, .n_tokens = seqs ? seqs->n_tokens : 0};
        rc = hfq_measure(f, st, specs, n_specs, &mo, m, err);
    }
    if (rc == 0)
        snprintf(m->source, sizeof m->source, "%s on %s (%" PRId64 " weights' statistics over %" PRId64 " tokens; "
                 "KL probes over %" PRId64 " tokens)", job->in, job->calib.stats_path ? job->calib.stats_path
                 : job->calib.text_path, st->n, st->n_tokens, probe ? hfq_kl_probe_n_tokens(probe) : 0);
    hfq_kl_probe_free(probe);
    hfq_model_free(model);
    free(counts);
    return rc;
}

int hfq_mixed_run(hfq_mixed_job *job, const gguf_file *f, hfq_mixed_result *res, hfq_error *err) {
    memset(res, 0, sizeof *res);
    res->written_bytes = -1;
    const bool measure_only = hfq_mixed_measure_only(job);
    const bool calibrated = job->calib.text_path || job->calib.stats_path;
    const bool need_meas = job->target_bpw > 0 || job->target_size > 0 || job->meas_out;
    cJSON *doc = NULL;
    hfq_recipe *recipe = NULL;
    hfq_calib_session *cs = NULL;
    int rc = -1;
    /* every check that needs no measuring first */
    if (job->recipe_path) {
        if (!(doc = hfq_json_load(job->recipe_path, err)) || !(recipe = hfq_recipe_from_json(doc, job->recipe_path, err)) ||
            hfq_mixed_check_recipe(f, recipe, &job->q.plan, job->target_bpw > 0 || job->target_size > 0, err) < 0)
            goto done;
    }
    if (need_meas && !job->meas_in && !calibrated) {
        hfq_fail(err, job->in, "a budget needs measurements: --measurements FILE, or --calibration-file / --stats");
        goto done;
    }
    if (calibrated) {
        hfq_calib_opts co = job->calib;
        if (need_meas && !job->meas_in && co.text_path && co.text.max_chunks <= 0)
            co.text.max_chunks = HFQ_MIXED_DEFAULT_CHUNKS;
        if (!(cs = hfq_calib_session_new(job->in, &co, err)) || hfq_calib_session_check(cs, f, err) < 0) goto done;
    }
    if (job->meas_in ? hfq_measurements_load(&res->meas, job->meas_in, err) < 0
                     : need_meas && measure(job, recipe, f, cs, &res->meas, err) < 0)
        goto done;
    if (job->meas_out && hfq_measurements_save(&res->meas, job->meas_out, err) < 0) goto done;
    if (measure_only) {
        rc = 0;
        goto done;
    }
    const int64_t target = job->target_size > 0 ? job->target_size
                           : job->target_bpw > 0 ? (int64_t)(job->target_bpw * (double)total_elements(f) / 8.0) : 0;
    /* measured now, the file holds the recipe's candidates too: tensors no
     * rule restricts still choose among the default list only */
    hfq_fmt_spec defaults[MAX_CANDIDATES];
    const int n_defaults = job->meas_in ? 0 : default_candidates(job, defaults);
    const hfq_mixed_opts mo = {recipe, target, res->meas.specs ? &res->meas : NULL,
                               job->meas_in ? job->meas_in : "measurements",
                               job->meas_in ? job->candidates : defaults,
                               job->meas_in ? job->n_candidates : n_defaults};
    if (hfq_mixed_plan(f, &job->q.plan, &mo, &res->plan, &res->rep, err) < 0 ||
        hfq_quantize_check(f, &res->plan, &job->q, job->out != NULL, err) < 0)
        goto done;
    job->q.recipe_name = recipe ? hfq_recipe_name(recipe) : NULL;
    job->q.target_bytes = target;
    if (cs && !job->out) job->q.importance = hfq_calib_session_importance(cs);
    if (cs && job->out && hfq_calib_session_prepare(cs, f, &res->plan, &job->q, err) < 0) goto done;
    if (cs) {
        if (hfq_quantize_effect(f, &res->plan, &job->q, &res->effect, err) < 0) goto done;
        res->effect_known = true;
        res->n_folded = hfq_calib_session_n_folded(cs);
    }
    if (job->out && (hfq_quantize_write(f, &res->plan, job->out, &job->q, err) < 0 ||
                     (res->written_bytes = tensor_bytes(job->out, &res->file_size, err)) < 0))
        goto done;
    rc = 0;
done:
    /* the write is done: nothing may point into the session any more */
    job->q.importance = (hfq_importance_source){0};
    job->q.adjust = (hfq_adjust_source){0};
    job->q.recipe_name = NULL;
    hfq_calib_session_free(cs);
    hfq_recipe_free(recipe);
    cJSON_Delete(doc);
    return rc;
}
