/* calib_kld - a quantized model against its base over a text, for the
 * calibration tests and examples/pipeline.sh (until ppl-eval has --base):
 *
 *   calib_kld BASE.gguf MODEL.gguf TEXT [--ctx N] [--chunks N] [--threads N]
 *
 * Both models are scored as ppl-eval scores one (src/ppl.h: chunks of --ctx
 * tokens, the second half of each scored), on the same tokens (the base's
 * tokenizer). Prints one JSON object: ppl and ppl_base, kld (mean over the
 * scored tokens of KL(base || model) in nats, softmax in double), top1 (share
 * of tokens where both models' most likely next token agree), n_scored.
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

int main(int argc, char **argv) {
    hfq_error err = {{0}};
    int64_t ctx = 256, chunks = 0, threads = 0;
    const char *pos[3];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "--ctx") == 0) rc = hfq_cli_int(a, v, 4, 1 << 20, &ctx, &err), i++;
        else if (strcmp(a, "--chunks") == 0) rc = hfq_cli_int(a, v, 1, 1 << 30, &chunks, &err), i++;
        else if (strcmp(a, "--threads") == 0) rc = hfq_cli_int(a, v, 1, 1024, &threads, &err), i++;
        else if (a[0] != '-' && n_pos < 3) pos[n_pos++] = a;
        else rc = hfq_fail(&err, a, "unexpected argument");
        if (rc) {
            fprintf(stderr, "calib_kld: %s\n", err.msg);
            return 2;
        }
    }
    if (n_pos != 3) {
        fprintf(stderr, "usage: calib_kld BASE.gguf MODEL.gguf TEXT [--ctx N] [--chunks N] [--threads N]\n");
        return 2;
    }
    hfq_lm base = {0}, model = {0};
    hfq_ppl *sb = NULL, *sm = NULL;
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    double *lb = NULL, *lm = NULL, kld = 0.0;
    int64_t agree = 0, n_scored = 0;
    int rc = 1;
    if (hfq_lm_load(&base, pos[0], &err) || hfq_lm_load(&model, pos[1], &err) ||
        hfq_read_text(pos[2], (size_t)1 << 31, &text, &len, &err) ||
        hfq_tokenize(base.tok, text, len, HFQ_TOK_ADD_SPECIAL, &ids, &n_ids, &err))
        goto done;
    const int64_t n_vocab = hfq_model_hparams(base.model)->n_vocab;
    if (hfq_model_hparams(model.model)->n_vocab != n_vocab) {
        hfq_fail(&err, pos[1], "another vocabulary than %s", pos[0]);
        goto done;
    }
    hfq_ppl_params pp = {.n_ctx = ctx, .n_chunks = chunks, .n_threads = (int)threads,
                         .add_bos = base.vocab->add_bos && base.vocab->bos_id >= 0, .bos_id = base.vocab->bos_id};
    if (!(sb = hfq_ppl_new(base.model, ids, (int64_t)n_ids, &pp, &err)) ||
        !(sm = hfq_ppl_new(model.model, ids, (int64_t)n_ids, &pp, &err)))
        goto done;
    lb = malloc((size_t)n_vocab * sizeof *lb);
    lm = malloc((size_t)n_vocab * sizeof *lm);
    if (!lb || !lm) {
        hfq_fail(&err, pos[1], "out of memory");
        goto done;
    }
    for (;;) {
        hfq_ppl_chunk cb, cm;
        int step_b = hfq_ppl_next(sb, &cb, &err);
        if (step_b <= 0) {
            if (step_b < 0) goto done;
            break;
        }
        /* the base's chunk is consumed before the model's call reuses buffers */
        float *saved = malloc((size_t)(cb.n_scored * n_vocab) * sizeof *saved);
        if (!saved) {
            hfq_fail(&err, pos[0], "out of memory");
            goto done;
        }
        memcpy(saved, cb.logits, (size_t)(cb.n_scored * n_vocab) * sizeof *saved);
        if (hfq_ppl_next(sm, &cm, &err) != 1) {
            free(saved);
            goto done;
        }
        for (int64_t t = 0; t < cb.n_scored; t++) {
            const float *xb = saved + t * n_vocab, *xm = cm.logits + t * n_vocab;
            log_softmax(xb, n_vocab, lb);
            log_softmax(xm, n_vocab, lm);
            double k = 0.0;
            for (int64_t v = 0; v < n_vocab; v++) k += exp(lb[v]) * (lb[v] - lm[v]);
            kld += k;
            agree += argmax(xb, n_vocab) == argmax(xm, n_vocab);
        }
        n_scored += cb.n_scored;
        free(saved);
    }
    hfq_ppl_result rb = hfq_ppl_result_get(sb), rm = hfq_ppl_result_get(sm);
    printf("{\"ppl\": %.6f, \"ppl_base\": %.6f, \"kld\": %.9g, \"top1\": %.6f, \"n_scored\": %lld}\n", rm.ppl, rb.ppl,
           kld / (double)n_scored, (double)agree / (double)n_scored, (long long)n_scored);
    rc = 0;
done:
    if (rc) fprintf(stderr, "calib_kld: %s\n", err.msg);
    hfq_ppl_free(sb);
    hfq_ppl_free(sm);
    hfq_lm_free(&base);
    hfq_lm_free(&model);
    free(text);
    free(ids);
    free(lb);
    free(lm);
    return rc;
}
