/* bench_forward - prompt-processing and decoding speed of a GGUF model on a
 * device, for tests/gpu/check.sh's table (speed is measured here, never in
 * tests). After one warm-up pass (CUDA loads kernels and cuBLAS picks
 * algorithms on first use), a prompt of --prompt synthetic token ids runs
 * as one batch --reps times from an empty cache, then --decode tokens are
 * decoded one at a time after it. Decoding reads every matrix once per token
 * (an untied embedding one row), which gives the achieved weight bandwidth.
 *
 * usage: bench_forward MODEL.gguf [--device cpu|cuda|auto] [--prompt N] [--decode N] [--reps N] [--threads N]
 * Prints one JSON object. Exit: 0 ok, 1 failure, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kernels/cuda/device.h"
#include "kernels/graph.h"
#include "src/cli/cli.h"

typedef struct totals {
    const hfq_tensor *tok_embd;   /* NULL when tied: the output reads all of it */
    double bytes;       /* every matrix */
    double per_token;   /* what one decoded token reads */
} totals;

static int add_matrix(void *user, const hfq_tensor *t) {
    totals *s = user;
    const double bytes = (double)t->row_bytes * (double)t->ne1;
    s->bytes += bytes;
    s->per_token += t == s->tok_embd ? (double)t->row_bytes : bytes;   /* one embedding row */
    return 0;
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int64_t n_prompt = 512, n_decode = 64, reps = 3, threads = 0;
    hfq_device device = HFQ_DEVICE_CUDA;
    hfq_error err = {{0}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "--device") == 0) rc = hfq_device_parse(a, v, &device, &err), i++;
        else if (strcmp(a, "--prompt") == 0) rc = hfq_cli_int(a, v, 1, 1 << 16, &n_prompt, &err), i++;
        else if (strcmp(a, "--decode") == 0) rc = hfq_cli_int(a, v, 1, 1 << 16, &n_decode, &err), i++;
        else if (strcmp(a, "--reps") == 0) rc = hfq_cli_int(a, v, 1, 1000, &reps, &err), i++;
        else if (strcmp(a, "--threads") == 0) rc = hfq_cli_int(a, v, 1, 1024, &threads, &err), i++;
        else if (a[0] != '-' && !path) path = a;
        else rc = hfq_fail(&err, a, "unexpected argument");
        if (rc) {
            fprintf(stderr, "bench_forward: %s\n", err.msg);
            return HFQ_EXIT_USAGE;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: bench_forward MODEL.gguf [--device D] [--prompt N] [--decode N] [--reps N]\n");
        return HFQ_EXIT_USAGE;
    }
    const hfq_ops *ops;
    char note[512];
    hfq_model *m = NULL;
    hfq_context *c = NULL;
    int32_t *tokens = NULL;
    float *logits = NULL;
    int rc = HFQ_EXIT_FAILURE;
    if (hfq_device_select(device, &ops, note, sizeof note, &err) || !(m = hfq_model_load(path, &err))) goto done;
    if (note[0]) fprintf(stderr, "bench_forward: %s\n", note);
    const hfq_hparams *hp = hfq_model_hparams(m);
    const int64_t n = n_prompt + n_decode;
    hfq_context_params cp = {.n_ctx = n, .n_batch = n_prompt, .n_threads = (int)threads, .ops = ops};
    tokens = malloc((size_t)n * sizeof *tokens);
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!tokens || !logits) {
        hfq_fail(&err, path, "out of memory");
        goto done;
    }
    uint64_t state = 12345;
    for (int64_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((state >> 33) % (uint64_t)hp->n_vocab);
    }
    double t0 = hfq_cli_seconds();
    if (!(c = hfq_context_new(m, &cp, &err))) goto done;
    const double t_setup = hfq_cli_seconds() - t0;
    /* warm-up: a prompt and a decoded token */
    if (hfq_forward(c, tokens, n_prompt, 1, logits, &err) || hfq_forward(c, tokens + n_prompt, 1, 1, logits, &err))
        goto done;
    double t_prompt = 0;
    for (int64_t r = 0; r < reps; r++) {
        hfq_context_reset(c);
        t0 = hfq_cli_seconds();
        if (hfq_forward(c, tokens, n_prompt, 1, logits, &err)) goto done;
        t_prompt += hfq_cli_seconds() - t0;
    }
    t0 = hfq_cli_seconds();
    for (int64_t i = 0; i < n_decode; i++)
        if (hfq_forward(c, tokens + n_prompt + i, 1, 1, logits, &err)) goto done;
    const double t_decode = hfq_cli_seconds() - t0;
    const bool tied = hfq_model_output(m)->data == hfq_model_tok_embd(m)->data;
    totals tot = {.tok_embd = tied ? NULL : hfq_model_tok_embd(m)};
    hfq_model_each_matrix(m, add_matrix, &tot);
    const double decode_tps = (double)n_decode / t_decode;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", path);
    cJSON_AddStringToObject(j, "device", ops->name);
    cJSON_AddNumberToObject(j, "setup_s", t_setup);
    cJSON_AddNumberToObject(j, "weight_bytes", tot.bytes);
    cJSON_AddNumberToObject(j, "decode_bytes_per_token", tot.per_token);
    cJSON_AddNumberToObject(j, "prompt_tokens", (double)n_prompt);
    cJSON_AddNumberToObject(j, "prompt_tps", (double)(n_prompt * reps) / t_prompt);
    cJSON_AddNumberToObject(j, "decode_tokens", (double)n_decode);
    cJSON_AddNumberToObject(j, "decode_tps", decode_tps);
    cJSON_AddNumberToObject(j, "decode_gbs", tot.per_token * decode_tps / 1e9);
    char *text = cJSON_PrintUnformatted(j);
    if (text) puts(text);
    free(text);
    cJSON_Delete(j);
    rc = HFQ_EXIT_OK;
done:
    if (rc) fprintf(stderr, "bench_forward: %s\n", err.msg);
    free(tokens);
    free(logits);
    hfq_context_free(c);
    hfq_model_free(m);
    return rc;
}
