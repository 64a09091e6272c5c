/* generate - continue a prompt with a GGUF model, streaming the text
 * (docs/runner.md). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/device.h"
#include "kernels/graph.h"
#include "src/cli/cli.h"
#include "src/eval/lm.h"
#include "src/eval/sample.h"

#define TOOL "generate"

static const char usage_text[] =
    "usage: generate MODEL.gguf -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]\n"
    "                [--ctx N] [--threads N] [--device D] [--act-quant MODE] [--kv-type K[,V]] [--dry-run]\n"
    "\n"
    "Prints the prompt, then the tokens the model continues it with as they come, until\n"
    "N tokens, the end-of-sequence token or a full context; prompt and generation speed\n"
    "go to stderr, and a warning when prompt + N is past the model's trained context. The\n"
    "prompt gets BOS when the model adds it.\n"
    "\n"
    "  -p PROMPT      the text to continue\n"
    "  -n N           tokens to generate (default 128)\n"
    "  --temp T       temperature; 0: greedy, always the most likely token (default 0.8)\n"
    "  --top-k K      sample among the K most likely tokens; 0: all (default 40)\n"
    "  --top-p P      ... and among the fewest whose probabilities reach P (default 0.95)\n"
    "  --seed S       seed of the sampler: the same seed gives the same text (default 0)\n"
    "  --ignore-eos   go on past the end-of-sequence token (for speed measurements)\n"
    "  --ctx N        context positions (default: prompt + N, at most the model's)\n"
    "  --threads N    CPU threads (default: all)\n"
    "  --device D     cpu (default), cuda, or auto: cuda when a device answers, else the\n"
    "                 cpu (saying so on stderr)\n"
    "  --act-quant M  activations of INT8/FP8 (W8A8) and NVFP4 (W4A4) weights: auto (what the\n"
    "                 file says, default), none, dynamic (per token) or static (input_scale)\n"
    "  --kv-type K[,V] KV cache formats, K and V (one name: both): f32, f16 (default), bf16,\n"
    "                 q8_0, q4_0, q5_0, q5_1, fp8_e4m3, fp8_e5m2 (the model's static FP8 scales\n"
    "                 when it has them, else dynamic ones); cuda: f32 only\n"
    "  --kv-dynamic   FP8 caches: dynamic scales even where the model has static ones\n"
    "  --dry-run      generate nothing: print the memory plan, in bytes (the weights, the KV\n"
    "                 cache at the context and KV types, the working buffers, and this\n"
    "                 process once the model is loaded, measured)\n"
    "  -h, --help     this help\n"
    "  --version      the version\n"
    "\n"
    "Exit status: 0 ok, 1 bad model or failure, 2 usage.\n";

typedef struct options {
    const char *model, *prompt;
    int64_t n, ctx, threads, top_k, seed;
    double temp, top_p;
    hfq_device device;
    hfq_act_quant act_quant;
    hfq_kv_type kv_k, kv_v;
    bool ignore_eos, dry_run, kv_dynamic;
} options;

/* Every option, for the nearest one to an unknown option. */
static const char *const known_options[] = {"-p", "-n", "--temp", "--top-k", "--top-p", "--seed", "--ctx",
                                            "--threads", "--device", "--ignore-eos", "--act-quant", "--kv-type", "--kv-dynamic",
                                            "--dry-run", "--help", "--version", NULL};

/* Parses the command line: 0, or HFQ_EXIT_USAGE after one line on stderr. */
static int parse_args(int argc, char **argv, options *o) {
    *o = (options){.n = 128, .top_k = 40, .temp = 0.8, .top_p = 0.95};
    hfq_error e = {{0}}, *err = &e;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "-p") == 0) {
            if (!v) return hfq_cli_usage(TOOL, "-p: needs a value");
            o->prompt = v, i++;
        }
        else if (strcmp(a, "-n") == 0) rc = hfq_cli_int(a, v, 0, 1 << 24, &o->n, err), i++;
        else if (strcmp(a, "--temp") == 0) rc = hfq_cli_float(a, v, 0, 100, &o->temp, err), i++;
        else if (strcmp(a, "--top-k") == 0) rc = hfq_cli_int(a, v, 0, INT32_MAX, &o->top_k, err), i++;
        else if (strcmp(a, "--top-p") == 0) rc = hfq_cli_float(a, v, 1e-9, 1, &o->top_p, err), i++;
        else if (strcmp(a, "--seed") == 0) rc = hfq_cli_int(a, v, 0, INT64_MAX, &o->seed, err), i++;
        else if (strcmp(a, "--ctx") == 0) rc = hfq_cli_int(a, v, 1, 1 << 24, &o->ctx, err), i++;
        else if (strcmp(a, "--threads") == 0) rc = hfq_cli_int(a, v, 1, 1024, &o->threads, err), i++;
        else if (strcmp(a, "--device") == 0) rc = hfq_device_parse(a, v, &o->device, err), i++;
        else if (strcmp(a, "--ignore-eos") == 0) o->ignore_eos = true;
        else if (strcmp(a, "--dry-run") == 0) o->dry_run = true;
        else if (strcmp(a, "--kv-dynamic") == 0) o->kv_dynamic = true;
        else if (strcmp(a, "--act-quant") == 0) rc = hfq_cli_act_quant(a, v, &o->act_quant, err), i++;
        else if (strcmp(a, "--kv-type") == 0) rc = hfq_cli_kv_types(a, v, &o->kv_k, &o->kv_v, err), i++;
        else if (a[0] == '-' && a[1]) return hfq_cli_unknown_option(TOOL, a, known_options);
        else if (!o->model) o->model = a;
        else return hfq_cli_usage(TOOL, "unexpected argument '%s' (the model is %s)", a, o->model);
        if (rc) return hfq_cli_usage(TOOL, "%s", err->msg);
    }
    if (!o->model || !o->prompt) return hfq_cli_usage(TOOL, "a model and -p PROMPT are required");
    return 0;
}

/* The context: --ctx, else prompt + -n up to the model's trained context
 * ({arch}.context_length). Positions past that give logits the model never
 * learned to give, so a run that would use them says so in one line. */
static int64_t choose_context(const options *o, size_t n_prompt, int64_t trained) {
    const int64_t want = (int64_t)n_prompt + o->n;
    const int64_t n_ctx = o->ctx ? o->ctx : want < trained ? want : trained;
    if (want > trained && (n_ctx > trained || !o->ctx))   /* not when --ctx itself stops it before */
        fprintf(stderr, TOOL ": warning: the prompt's %zu tokens + -n %lld are past the model's trained context "
                "(%lld)%s\n", n_prompt, (long long)o->n, (long long)trained,
                n_ctx > trained ? "" : "; stopping there (--ctx N goes past)");
    return n_ctx;
}

/* Writes the text of token id to stdout at once. *strip_space: drop a
 * leading space once (the space SentencePiece-style vocabularies prefix to
 * the text, as hfq_detokenize drops it), cleared by the first text written. */
static int put_token(const hfq_lm *lm, int32_t id, bool *strip_space, hfq_error *err) {
    const char *path = hfq_model_path(lm->model);
    char small[64];
    int n = hfq_token_to_piece(lm->tok, id, false, small, sizeof small);
    if (n < 0) return hfq_fail(err, path, "token id %d is outside the vocabulary", (int)id);
    char *buf = (size_t)n <= sizeof small ? small : malloc((size_t)n);
    if (!buf) return hfq_fail(err, path, "out of memory for token %d's text", (int)id);
    if (buf != small) hfq_token_to_piece(lm->tok, id, false, buf, (size_t)n);
    const char *text = buf;
    if (*strip_space && n > 0) {
        if (text[0] == ' ') text++, n--;
        *strip_space = false;
    }
    fwrite(text, 1, (size_t)n, stdout);
    fflush(stdout);
    if (buf != small) free(buf);
    return 0;
}

/* --dry-run: the context's plan, the logits row and the sampler, and the
 * process as loaded. */
static int print_plan(const hfq_lm *lm, const hfq_context_params *cp, hfq_error *err) {
    hfq_context_memory cm;
    if (hfq_context_plan(lm->model, cp, &cm, err)) return -1;
    const int64_t n_vocab = hfq_model_hparams(lm->model)->n_vocab;
    const hfq_cli_memory_plan mp = {
        .weights = (int64_t)gguf_file_size(hfq_model_gguf(lm->model)), .kv_cache = cm.kv_cache,
        .buffers = cm.buffers + n_vocab * (int64_t)sizeof(float) + hfq_sampler_bytes(n_vocab),
        .loaded = hfq_cli_rss(), .loaded_peak = hfq_cli_peak_rss(), .n_contexts = 1, .n_ctx = cm.n_ctx,
        .kv_k = cm.kv_k, .kv_v = cm.kv_v};
    hfq_cli_print_memory_plan(&mp, false);
    return 0;
}

int main(int argc, char **argv) {
    hfq_cli_openmp_env(argv);
    if (hfq_cli_help(argc, argv, usage_text) || hfq_cli_version(argc, argv, TOOL)) return HFQ_EXIT_OK;
    options o;
    hfq_error err = {{0}};
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    rc = HFQ_EXIT_FAILURE;
    hfq_lm lm;
    hfq_context *ctx = NULL;
    hfq_sampler *smp = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    size_t n_ids = 0;
    const hfq_ops *ops;
    char note[512];
    memset(&lm, 0, sizeof lm);
    if (hfq_device_select(o.device, &ops, note, sizeof note, &err)) goto done;
    if (note[0]) fprintf(stderr, TOOL ": %s\n", note);
    if (hfq_lm_load(&lm, o.model, &err) ||
        hfq_tokenize(lm.tok, o.prompt, strlen(o.prompt), HFQ_TOK_ADD_SPECIAL, &ids, &n_ids, &err))
        goto done;
    if (n_ids == 0) {
        hfq_fail(&err, o.model, "the prompt has no tokens (and the model adds no BOS)");
        goto done;
    }
    const hfq_hparams *hp = hfq_model_hparams(lm.model);
    const int64_t n_ctx = choose_context(&o, n_ids, hp->n_ctx_train);
    if ((int64_t)n_ids > n_ctx) {
        hfq_fail(&err, o.model, "the prompt's %zu tokens do not fit in a context of %lld", n_ids, (long long)n_ctx);
        goto done;
    }
    /* one row of logits: the next token's */
    hfq_context_params cp = {.n_ctx = n_ctx, .n_outputs = 1, .n_threads = (int)o.threads, .act_quant = o.act_quant,
                             .kv_k = o.kv_k, .kv_v = o.kv_v, .kv_dynamic = o.kv_dynamic, .ops = ops};
    hfq_sampler_params sp = {.temp = (float)o.temp, .top_k = (int)o.top_k, .top_p = (float)o.top_p,
                             .seed = (uint64_t)o.seed};
    if (o.dry_run) {
        if (print_plan(&lm, &cp, &err)) goto done;
        rc = HFQ_EXIT_OK;
        goto done;
    }
    if (!(ctx = hfq_context_new(lm.model, &cp, &err)) || !(smp = hfq_sampler_new(hp->n_vocab, &sp, &err))) goto done;
    if (!(logits = malloc((size_t)hp->n_vocab * sizeof *logits))) {
        hfq_fail(&err, o.model, "out of memory for the logits");
        goto done;
    }
    fputs(o.prompt, stdout);
    fflush(stdout);
    double t0 = hfq_cli_seconds();
    if (hfq_forward(ctx, ids, (int64_t)n_ids, 1, logits, &err)) goto done;
    double t_prompt = hfq_cli_seconds() - t0;
    int64_t n_gen = 0;
    bool strip_space = o.prompt[0] == '\0' && lm.vocab->add_space_prefix;
    t0 = hfq_cli_seconds();
    while (n_gen < o.n) {
        int32_t next = hfq_sample(smp, logits);
        if (next == lm.vocab->eos_id && !o.ignore_eos) break;
        n_gen++;
        if (put_token(&lm, next, &strip_space, &err)) goto done;
        if (hfq_context_n_past(ctx) == n_ctx) {
            fprintf(stderr, "\n" TOOL ": the context of %lld positions is full\n", (long long)n_ctx);
            break;
        }
        if (n_gen < o.n && hfq_forward(ctx, &next, 1, 1, logits, &err)) goto done;
    }
    double t_gen = hfq_cli_seconds() - t0;
    putchar('\n');
    fflush(stdout);
    fprintf(stderr, TOOL ": prompt %zu tokens in %.3f s (%.1f tokens/s); generated %lld tokens in %.3f s "
            "(%.1f tokens/s); KV cache K %s V %s%s\n", n_ids, t_prompt, (double)n_ids / t_prompt, (long long)n_gen,
            t_gen, t_gen > 0 ? (double)n_gen / t_gen : 0.0, hfq_kv_type_name(hfq_context_kv_k(ctx)),
            hfq_kv_type_name(hfq_context_kv_v(ctx)), hfq_context_kv_static(ctx) ? ", static FP8 scales" : "");
    rc = HFQ_EXIT_OK;
done:
    if (rc != HFQ_EXIT_OK) fprintf(stderr, TOOL ": %s\n", err.msg);
    free(logits);
    free(ids);
    hfq_sampler_free(smp);
    hfq_context_free(ctx);
    hfq_lm_free(&lm);
    return rc;
}
