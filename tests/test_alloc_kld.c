/* test_alloc_kld.c - helper for tests/mixed_alloc.py: the mean KL
 * divergence of quantized models from their base over a text, scored as
 * perplexity is (src/ppl.h: chunks of CTX tokens, BOS first, the second half
 * of each chunk), computed in double from the runner's logits.
 *
 *   test_alloc_kld TEXT CTX CHUNKS BASE.gguf MODEL.gguf...
 *
 * prints one JSON object: {"base_ppl": P, "models": [{"model": M, "kld": K,
 * "ppl": P}, ...]}. The text is tokenized with BASE's tokenizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/lm.h"
#include "src/ppl.h"
#include "src/read_text.h"

/* sum over the vocabulary of p log(p / q) for one row of logits each */
static double row_kld(const float *base, const float *q, int64_t n) {
    double mb = base[0], mq = q[0], zb = 0.0, zq = 0.0, kl = 0.0;
    for (int64_t i = 1; i < n; i++) mb = base[i] > mb ? base[i] : mb, mq = q[i] > mq ? q[i] : mq;
    for (int64_t i = 0; i < n; i++) zb += exp(base[i] - mb), zq += exp(q[i] - mq);
    for (int64_t i = 0; i < n; i++) {
        double lpb = base[i] - mb - log(zb), lpq = q[i] - mq - log(zq);
        kl += exp(lpb) * (lpb - lpq);
    }
    return kl;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s TEXT CTX CHUNKS BASE.gguf MODEL.gguf...\n", argv[0]);
        return 2;
    }
    hfq_error err = {{0}};
    hfq_lm base;
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    if (hfq_lm_load(&base, argv[4], &err) || hfq_read_text(argv[1], (size_t)1 << 30, &text, &len, &err) ||
        hfq_tokenize(base.tok, text, len, HFQ_TOK_ADD_SPECIAL, &ids, &n_ids, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const hfq_ppl_params pp = {.n_ctx = atoll(argv[2]), .n_chunks = atoll(argv[3]), .n_threads = 1, .n_parallel = 1,
                               .add_bos = base.vocab->add_bos && base.vocab->bos_id >= 0, .bos_id = base.vocab->bos_id};
    int rc = 0;
    printf("{\"models\": [");
    double base_ppl = 0.0;
    for (int k = 5; k < argc && rc == 0; k++) {
        hfq_model *m = hfq_model_load(argv[k], &err);
        hfq_ppl *sb = hfq_ppl_new(base.model, ids, (int64_t)n_ids, &pp, &err);
        hfq_ppl *sq = m && sb ? hfq_ppl_new(m, ids, (int64_t)n_ids, &pp, &err) : NULL;
        double kl = 0.0;
        int64_t count = 0;
        hfq_ppl_chunk cb, cq;
        int step = sq ? 1 : -1;
        while (step == 1) {
            int a = hfq_ppl_next(sb, &cb, &err), b = a == 1 ? hfq_ppl_next(sq, &cq, &err) : a;
            step = a < 0 || b < 0 ? -1 : a;
            for (int64_t j = 0; step == 1 && j < cb.n_scored; j++, count++)
                kl += row_kld(cb.logits + j * cb.n_vocab, cq.logits + j * cq.n_vocab, cb.n_vocab);
        }
        if (step < 0) {
            fprintf(stderr, "%s: %s\n", argv[k], err.msg);
            rc = 1;
        } else {
            base_ppl = hfq_ppl_result_get(sb).ppl;
            printf("%s{\"model\": \"%s\", \"kld\": %.10g, \"ppl\": %.10g, \"tokens\": %lld}", k > 5 ? ", " : "", argv[k],
                   kl / (double)count, hfq_ppl_result_get(sq).ppl, (long long)count);
        }
        hfq_ppl_free(sq);
        hfq_ppl_free(sb);
        hfq_model_free(m);
    }
    printf("], \"base_ppl\": %.10g}\n", base_ppl);
    free(ids);
    free(text);
    hfq_lm_free(&base);
    return rc;
}
