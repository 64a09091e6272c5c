/* calib_kld - quantized models against their base over a text, for the
 * calibration tests and examples/pipeline.sh (until ppl-eval has --base):
 *
 *   calib_kld BASE.gguf TEXT MODEL.gguf... [--ctx N] [--chunks N] [--threads N]
 *
 * Every model is scored as ppl-eval scores one (src/ppl.h: chunks of --ctx
 * tokens, the second half of each scored), on the same tokens (the base's
 * tokenizer); the base is evaluated once. Prints one JSON object per model,
 * one per line: model, ppl and ppl_base, kld (mean over the scored tokens of
 * KL(base || model) in nats, softmax in double), top1 (share of tokens where
 * both models' most likely next token agree), n_scored.
 * Exit status 0, 1 on failure, 2 on bad usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/cli.h"
#include "src/lm.h"
#include "src/ppl.h"
#include "src/read_text.h"

#define MAX_MODELS 32

/* log-softmax of n logits into out (double). */
static void log_softmax(const float *x, int64_t n, double *out) {
    double mx = x[0], sum = 0.0;
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    const double lse = mx + log(sum);
    for (int64_t i = 0; i < n; i++) out[i] = (double)x[i] - lse;
}

static int64_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

typedef struct scored {
    const char *path;
    hfq_lm lm;
    hfq_ppl *s;
    double kld;
    int64_t agree;
} scored;

/* Adds one chunk of a model against the base's chunk (logits saved, log-softmax in lb). */
static void compare(scored *m, const hfq_ppl_chunk *cm, const float *base_logits, const double *lb_all,
                    double *lm, int64_t n_vocab) {
    for (int64_t t = 0; t < cm->n_scored; t++) {
        const double *lb = lb_all + t * n_vocab;
        const float *xm = cm->logits + t * n_vocab;
        log_softmax(xm, n_vocab, lm);
        double k = 0.0;
        for (int64_t v = 0; v < n_vocab; v++) k += exp(lb[v]) * (lb[v] - lm[v]);
        m->kld += k;
        m->agree += argmax(base_logits + t * n_vocab, n_vocab) == argmax(xm, n_vocab);
    }
}

int main(int argc, char **argv) {
    hfq_error err = {{0}};
    int64_t ctx = 256, chunks = 0, threads = 0;
    const char *pos[2 + MAX_MODELS];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "--ctx") == 0) rc = hfq_cli_int(a, v, 4, 1 << 20, &ctx, &err), i++;
        else if (strcmp(a, "--chunks") == 0) rc = hfq_cli_int(a, v, 1, 1 << 30, &chunks, &err), i++;
        else if (strcmp(a, "--threads") == 0) rc = hfq_cli_int(a, v, 1, 1024, &threads, &err), i++;
        else if (a[0] != '-' && n_pos < 2 + MAX_MODELS) pos[n_pos++] = a;
        else rc = hfq_fail(&err, a, "unexpected argument");
        if (rc) {
            fprintf(stderr, "calib_kld: %s\n", err.msg);
            return 2;
        }
    }
    if (n_pos < 3) {
        fprintf(stderr, "usage: calib_kld BASE.gguf TEXT MODEL.gguf... [--ctx N] [--chunks N] [--threads N]\n");
        return 2;
    }
    const int n_models = n_pos - 2;
    scored base = {.path = pos[0]}, models[MAX_MODELS] = {{0}};
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    float *saved = NULL;
    double *lb = NULL, *lm = NULL;
    int64_t n_scored = 0;
    int rc = 1;
    if (hfq_lm_load(&base.lm, base.path, &err) || hfq_read_text(pos[1], (size_t)1 << 31, &text, &len, &err) ||
        hfq_tokenize(base.lm.tok, text, len, HFQ_TOK_ADD_SPECIAL, &ids, &n_ids, &err))
        goto done;
    const int64_t n_vocab = hfq_model_hparams(base.lm.model)->n_vocab;
    hfq_ppl_params pp = {.n_ctx = ctx, .n_chunks = chunks, .n_threads = (int)threads,
                         .add_bos = base.lm.vocab->add_bos && base.lm.vocab->bos_id >= 0,
                         .bos_id = base.lm.vocab->bos_id};
    if (!(base.s = hfq_ppl_new(base.lm.model, ids, (int64_t)n_ids, &pp, &err))) goto done;
    for (int i = 0; i < n_models; i++) {
        models[i].path = pos[2 + i];
        if (hfq_lm_load(&models[i].lm, models[i].path, &err)) goto done;
        if (hfq_model_hparams(models[i].lm.model)->n_vocab != n_vocab) {
            hfq_fail(&err, models[i].path, "another vocabulary than %s", base.path);
            goto done;
        }
        if (!(models[i].s = hfq_ppl_new(models[i].lm.model, ids, (int64_t)n_ids, &pp, &err))) goto done;
    }
    const int64_t n_per_chunk = ctx - ctx / 2 - 1;
    saved = malloc((size_t)(n_per_chunk * n_vocab) * sizeof *saved);
    lb = malloc((size_t)(n_per_chunk * n_vocab) * sizeof *lb);
    lm = malloc((size_t)n_vocab * sizeof *lm);
    if (!saved || !lb || !lm) {
        hfq_fail(&err, base.path, "out of memory");
        goto done;
    }
    for (;;) {
        hfq_ppl_chunk cb, cm;
        int step = hfq_ppl_next(base.s, &cb, &err);
        if (step < 0) goto done;
        if (step == 0) break;
        /* the base's chunk is kept: each model's step reuses its own buffers only */
        memcpy(saved, cb.logits, (size_t)(cb.n_scored * n_vocab) * sizeof *saved);
        for (int64_t t = 0; t < cb.n_scored; t++) log_softmax(saved + t * n_vocab, n_vocab, lb + t * n_vocab);
        for (int i = 0; i < n_models; i++) {
            if (hfq_ppl_next(models[i].s, &cm, &err) != 1) goto done;
            compare(&models[i], &cm, saved, lb, lm, n_vocab);
        }
        n_scored += cb.n_scored;
    }
    const double ppl_base = hfq_ppl_result_get(base.s).ppl;
    for (int i = 0; i < n_models; i++)
        printf("{\"model\": \"%s\", \"ppl\": %.6f, \"ppl_base\": %.6f, \"kld\": %.9g, \"top1\": %.6f, "
               "\"n_scored\": %lld}\n",
               models[i].path, hfq_ppl_result_get(models[i].s).ppl, ppl_base, models[i].kld / (double)n_scored,
               (double)models[i].agree / (double)n_scored, (long long)n_scored);
    rc = 0;
done:
    if (rc) fprintf(stderr, "calib_kld: %s\n", err.msg);
    for (int i = 0; i < n_models; i++) {
        hfq_ppl_free(models[i].s);
        hfq_lm_free(&models[i].lm);
    }
    hfq_ppl_free(base.s);
    hfq_lm_free(&base.lm);
    free(text);
    free(ids);
    free(saved);
    free(lb);
    free(lm);
    return rc;
}
