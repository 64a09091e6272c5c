/* ppl-eval - perplexity of a GGUF model over a text, as llama.cpp's
 * perplexity tool computes it (src/ppl.h, docs/runner.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "kernels/cuda/device.h"
#include "kernels/cpu/cpu.h"
#include "kernels/graph.h"
#include "src/cli.h"
#include "src/lm.h"
#include "src/ppl.h"
#include "src/read_text.h"

#define MAX_TEXT ((size_t)1 << 31)

static const char usage_text[] =
    "usage: ppl-eval MODEL.gguf --text FILE [--ctx N] [--chunks N] [--batch N] [--threads N]\n"
    "                [--parallel N] [--device D] [--json]\n"
    "\n"
    "Perplexity of the model over a text, computed as llama.cpp's perplexity tool does:\n"
    "the whole text is tokenized once (with BOS when the model adds it), cut into\n"
    "non-overlapping chunks of --ctx tokens, each evaluated from an empty cache with BOS\n"
    "first, and only the second half of each chunk is scored. Prints\n"
    "PPL +/- its standard error; throughput goes to stderr.\n"
    "\n"
    "  --text FILE    the text, plain or gzip-compressed\n"
    "  --ctx N        tokens per chunk (default 512)\n"
    "  --chunks N     evaluate only the first N chunks (default: all whole chunks)\n"
    "  --batch N      tokens per forward batch (default: --ctx)\n"
    "  --threads N    CPU threads (default: all)\n"
    "  --parallel N   chunks evaluated side by side, each on threads/N threads (default:\n"
    "                 one per thread for tiny models, else 1); the result is the same\n"
    "  --device D     cpu (default), cuda, or auto: cuda when a device answers, else the\n"
    "                 cpu (saying so on stderr); cuda evaluates one chunk at a time\n"
    "  --json         print one JSON object\n"
    "  -h, --help     this help\n"
    "\n"
    "Exit status: 0 ok, 1 bad model, text or failure, 2 usage.\n";

typedef struct options {
    const char *model, *text;
    int64_t ctx, chunks, batch, threads, parallel;
    bool json;
    hfq_device device;
} options;

static int parse_args(int argc, char **argv, options *o, hfq_error *err) {
    *o = (options){.ctx = 512};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "--text") == 0 && v) o->text = v, i++;
        else if (strcmp(a, "--ctx") == 0) rc = hfq_cli_int(a, v, 4, 1 << 24, &o->ctx, err), i++;
        else if (strcmp(a, "--chunks") == 0) rc = hfq_cli_int(a, v, 1, INT64_MAX, &o->chunks, err), i++;
        else if (strcmp(a, "--batch") == 0) rc = hfq_cli_int(a, v, 1, 1 << 24, &o->batch, err), i++;
        else if (strcmp(a, "--threads") == 0) rc = hfq_cli_int(a, v, 1, 1024, &o->threads, err), i++;
        else if (strcmp(a, "--parallel") == 0) rc = hfq_cli_int(a, v, 1, 1024, &o->parallel, err), i++;
        else if (strcmp(a, "--device") == 0) rc = hfq_device_parse(a, v, &o->device, err), i++;
        else if (strcmp(a, "--json") == 0) o->json = true;
        else if (a[0] != '-' && !o->model) o->model = a;
        else return hfq_fail(err, a, v || a[0] != '-' ? "unexpected argument" : "needs a value");
        if (rc) return -1;
    }
    if (!o->model || !o->text) return hfq_fail(err, NULL, "a model and --text FILE are required");
    return 0;
}

static void print_json(const options *o, int64_t n_tokens, const hfq_ppl_result *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddStringToObject(j, "text", o->text);
    cJSON_AddNumberToObject(j, "n_ctx", (double)r->n_ctx);
    cJSON_AddNumberToObject(j, "n_chunks", (double)r->n_chunks);
    cJSON_AddNumberToObject(j, "n_tokens", (double)n_tokens);
    cJSON_AddNumberToObject(j, "tokens_scored", (double)r->n_scored);
    cJSON_AddNumberToObject(j, "nll_mean", r->nll_mean);
    cJSON_AddNumberToObject(j, "ppl", r->ppl);
    cJSON_AddNumberToObject(j, "ppl_err", r->ppl_err);
    char *s = cJSON_Print(j);
    if (s) puts(s);
    free(s);
    cJSON_Delete(j);
}

int main(int argc, char **argv) {
    if (hfq_cli_help(argc, argv, usage_text)) return HFQ_EXIT_OK;
    options o;
    hfq_error err = {{0}};
    if (parse_args(argc, argv, &o, &err)) {
        fprintf(stderr, "ppl-eval: %s\n\n%s", err.msg, usage_text);
        return HFQ_EXIT_USAGE;
    }
    int rc = HFQ_EXIT_FAILURE;
    hfq_lm lm;
    hfq_ppl *s = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t text_len = 0, n_ids = 0;
    const hfq_ops *ops;
    char note[512];
    memset(&lm, 0, sizeof lm);
    if (hfq_device_select(o.device, &ops, note, sizeof note, &err)) goto done;
    if (note[0]) fprintf(stderr, "ppl-eval: %s\n", note);
    /* a device backend holds its own copy of the weights: one chunk at a time unless asked */
    if (ops != hfq_cpu_ops() && !o.parallel) o.parallel = 1;
    if (hfq_lm_load(&lm, o.model, &err)) goto done;
    if (lm.vocab->add_eos) {
        hfq_fail(&err, o.model, "the vocabulary appends EOS to every text; perplexity is not defined for that");
        goto done;
    }
    if (hfq_read_text(o.text, MAX_TEXT, &text, &text_len, &err) ||
        hfq_tokenize(lm.tok, text, text_len, HFQ_TOK_ADD_SPECIAL, &ids, &n_ids, &err))
        goto done;
    hfq_ppl_params pp = {.n_ctx = o.ctx, .n_chunks = o.chunks, .n_batch = o.batch, .n_threads = (int)o.threads,
                         .n_parallel = (int)o.parallel, .add_bos = lm.vocab->add_bos && lm.vocab->bos_id >= 0,
                         .bos_id = lm.vocab->bos_id, .ops = ops};
    if (!(s = hfq_ppl_new(lm.model, ids, (int64_t)n_ids, &pp, &err))) goto done;
    const bool progress = isatty(STDERR_FILENO);
    const int64_t n_chunks = hfq_ppl_n_chunks(s);
    double t0 = hfq_cli_seconds();
    hfq_ppl_chunk chunk;
    int step;
    while ((step = hfq_ppl_next(s, &chunk, &err)) == 1)
        if (progress)
            fprintf(stderr, "\r[%lld/%lld] ppl %.4f", (long long)(chunk.index + 1), (long long)n_chunks,
                    hfq_ppl_result_get(s).ppl);
    if (progress) fputc('\n', stderr);
    if (step < 0) goto done;
    double seconds = hfq_cli_seconds() - t0;
    hfq_ppl_result r = hfq_ppl_result_get(s);
    if (o.json) print_json(&o, (int64_t)n_ids, &r);
    else
        printf("PPL = %.4f +/- %.5f (%lld chunks of %lld tokens, %lld tokens scored)\n", r.ppl, r.ppl_err,
               (long long)r.n_chunks, (long long)r.n_ctx, (long long)r.n_scored);
    const int64_t evaluated = r.n_chunks * (r.n_ctx - 1);
    fprintf(stderr, "ppl-eval: %lld tokens evaluated in %.2f s (%.0f tokens/s, %d chunk(s) side by side)\n",
            (long long)evaluated, seconds, (double)evaluated / seconds, hfq_ppl_n_parallel(s));
    rc = HFQ_EXIT_OK;
done:
    if (rc != HFQ_EXIT_OK) fprintf(stderr, "ppl-eval: %s\n", err.msg);
    hfq_ppl_free(s);
    free(ids);
    free(text);
    hfq_lm_free(&lm);
    return rc;
}
