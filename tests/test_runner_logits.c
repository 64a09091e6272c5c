/* test_runner_logits.c - test helper for runner_*.py: runs a GGUF model on
 * token ids and writes what the Python checks compare.
 *
 *   test_runner_logits MODEL.gguf logits OUT.f32 ID...   all logits, [n][n_vocab] f32
 *   test_runner_logits MODEL.gguf greedy N ID...        prints N greedy ids after the prompt
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/graph.h"

static int argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int)best;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf logits OUT.f32 ID... | greedy N ID...\n", argv[0]);
        return 2;
    }
    hfq_error err;
    hfq_model *m = hfq_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int64_t n_vocab = hfq_model_hparams(m)->n_vocab;
    const int n_prompt = argc - 4;
    int32_t *tokens = malloc((size_t)n_prompt * sizeof *tokens);
    for (int i = 0; i < n_prompt; i++) tokens[i] = atoi(argv[4 + i]);
    /* an F32 KV cache: the checks compare with transformers' float32 logits */
    hfq_context_params cp = {.n_ctx = 0, .n_threads = 2, .kv_k = HFQ_KV_F32, .kv_v = HFQ_KV_F32};
    /* HFQ_TEST_KV_TYPE=fp8_e4m3: the checks of a quantized KV cache (the file's static scales) */
    const char *kv = getenv("HFQ_TEST_KV_TYPE");
    if (kv && hfq_kv_type_from_name(kv) > 0) cp.kv_k = cp.kv_v = (hfq_kv_type)hfq_kv_type_from_name(kv);
    hfq_context *c = hfq_context_new(m, &cp, &err);
    int rc = 1;
    float *logits = c ? malloc((size_t)(n_prompt * n_vocab) * sizeof *logits) : NULL;
    if (c && !logits) snprintf(err.msg, sizeof err.msg, "out of memory");
    if (!logits) goto done;
    if (strcmp(argv[2], "logits") == 0) {
        if (hfq_forward(c, tokens, n_prompt, n_prompt, logits, &err)) goto done;
        FILE *f = fopen(argv[3], "wb");
        if (!f || fwrite(logits, sizeof *logits, (size_t)(n_prompt * n_vocab), f) != (size_t)(n_prompt * n_vocab)) {
            snprintf(err.msg, sizeof err.msg, "%s: cannot write", argv[3]);
            if (f) fclose(f);
            goto done;
        }
        if (fclose(f)) goto done;
    } else {
        int n = atoi(argv[3]);
        if (hfq_forward(c, tokens, n_prompt, 1, logits, &err)) goto done;
        for (int i = 0; i < n; i++) {
            int32_t next = argmax(logits, n_vocab);
            printf("%d%c", next, i + 1 < n ? ' ' : '\n');
            if (i + 1 < n && hfq_forward(c, &next, 1, 1, logits, &err)) goto done;
        }
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "%s\n", err.msg);
    free(logits);
    free(tokens);
    hfq_context_free(c);
    hfq_model_free(m);
    return rc;
}
