/* ppl-eval - perplexity of a GGUF model over a text, as llama.cpp's
 * perplexity tool computes it, and with a base (a model run side by side, or
 * its saved log-probabilities) the KL-divergence statistics of its
 * --kl-divergence mode, with quality gates (src/eval/ppl.h, src/eval/kld.h,
 * src/eval/base_logits.h, docs/ppl-eval.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "calib/overlap.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/device.h"
#include "kernels/graph.h"
#include "src/eval/base_logits.h"
#include "src/cli/cli.h"
#include "src/eval/kld.h"
#include "src/eval/lm.h"
#include "src/eval/ppl.h"
#include "src/common/output.h"
#include "src/common/read_text.h"

#define MAX_TEXT ((size_t)1 << 31)
#define TOOL "ppl-eval"

static const char usage_text[] =
    "usage: ppl-eval MODEL.gguf --text FILE [--ctx N] [--chunks N] [--batch N] [--threads N]\n"
    "                [--parallel N] [--device D] [--act-quant MODE] [--kv-type K[,V]] [--base-kv-type K[,V]]\n"
    "                [--base BASE.gguf | --base-logits FILE]\n"
    "                [--save-logits FILE] [--max-kld X] [--max-ppl-ratio R] [--min-top1 F] [--dry-run]\n"
    "                [--json] [--quiet]\n"
    "\n"
    "Perplexity of the model over a text, computed as llama.cpp's perplexity tool does:\n"
    "the whole text is tokenized once (with BOS when the model adds it), cut into\n"
    "non-overlapping chunks of --ctx tokens, each evaluated from an empty cache with BOS\n"
    "first, and only the second half of each chunk is scored. Prints PPL +/- its standard\n"
    "error. With a base, also the statistics of llama-perplexity --kl-divergence: PPL of\n"
    "both, their ratio and correlation, KL divergence, token probability differences and\n"
    "top-token agreement (docs/ppl-eval.md). Progress (a line every 5 s when stderr is\n"
    "not a terminal), warnings and throughput go to stderr.\n"
    "\n"
    "  --text FILE          the text, plain or gzip-compressed\n"
    "  --ctx N              tokens per chunk (default 512, or that of --base-logits)\n"
    "  --chunks N           evaluate only the first N chunks (default: all whole chunks, or\n"
    "                       all that --base-logits holds)\n"
    "  --batch N            tokens per forward batch (default: --ctx)\n"
    "  --threads N          CPU threads (default: all)\n"
    "  --parallel N         chunks evaluated side by side, each on threads/N threads (default:\n"
    "                       one per thread for tiny models, else 1); the result is the same\n"
    "  --device D           cpu (default), cuda, or auto: cuda when a device answers, else the\n"
    "                       cpu (saying so on stderr); cuda evaluates one chunk at a time\n"
    "  --act-quant MODE     activations of the model's INT8/FP8 (W8A8) and NVFP4 (W4A4)\n"
    "                       weights (and those hfq.act_quant marks mxfp4, int8_ct,\n"
    "                       fp8_e4m3_g<G>):\n"
    "                       auto (what the file says: input_scale, hfq.act_quant;\n"
    "                       default), none (float; Q8_0\n"
    "                       for NVFP4 as ggml), dynamic (per token), static (input_scale)\n"
    "  --kv-type K[,V]      KV cache formats, K and V (one name: both): f32, f16 (default, as\n"
    "                       llama.cpp), bf16, q8_0, q4_0, q5_0, q5_1, fp8_e4m3, fp8_e5m2 (FP8\n"
    "                       with the model's static scales (quantize --kv-scales) when it has\n"
    "                       them, else a dynamic scale per token and head); cuda: f32 only\n"
    "  --kv-dynamic         FP8 caches: dynamic scales even where the model has static ones\n"
    "  --base-kv-type K[,V] the --base model's KV cache formats (default f16): --base MODEL with\n"
    "                       another --kv-type measures what the KV format alone costs\n"
    "  --base BASE.gguf     the reference model, run side by side on the same tokens\n"
    "  --base-logits FILE   the reference's log-probabilities, saved by --save-logits\n"
    "  --save-logits FILE   save the log-probabilities of the base (with --base) or of MODEL;\n"
    "                       a new file or one to replace, never an input\n"
    "  --max-kld X          gate: mean KL divergence at most X (nats, >= 0)\n"
    "  --max-ppl-ratio R    gate: PPL(model) / PPL(base) at most R (1.02 = 2 % worse)\n"
    "  --min-top1 F         gate: the same top token as the base for at least a fraction F of\n"
    "                       the tokens, F in [0, 1] (0.9 = 90 %)\n"
    "  --dry-run            evaluate nothing: print the memory plan, in bytes (the weights, the\n"
    "                       KV cache at the context and KV types, the working buffers, and\n"
    "                       this process once the model and the text are loaded, measured)\n"
    "  --json               print one JSON object\n"
    "  --quiet              no progress and no throughput line (warnings and errors stay)\n"
    "  -h, --help           this help\n"
    "  --version            the version\n"
    "\n"
    "Exit status: 0 ok, 1 bad model, text or failure, 2 usage, 3 a gate failed.\n";

typedef struct options {
    const char *model, *text, *base, *base_logits, *save_logits;
    int64_t ctx, chunks, batch, threads, parallel;
    hfq_act_quant act_quant;
    hfq_kv_type kv_k, kv_v, base_kv_k, base_kv_v;
    hfq_device device;
    double max_kld, max_ppl_ratio, min_top1;   /* < 0: no gate */
    bool json, quiet, dry_run, kv_dynamic;
} options;

/* Every option, for the nearest one to an unknown option. */
static const char *const known_options[] = {
    "--text", "--base", "--base-logits", "--save-logits", "--ctx", "--chunks", "--batch", "--threads", "--parallel",
    "--device", "--act-quant", "--kv-type", "--kv-dynamic", "--base-kv-type", "--max-kld", "--max-ppl-ratio", "--min-top1",
    "--dry-run", "--json", "--quiet", "--help",
    "--version", NULL};

/* A file option's value; "needs a value" when it is the last argument. */
static int path_option(const char *opt, const char *v, const char **out, hfq_error *err) {
    if (!v) return hfq_fail(err, opt, "needs a value");
    *out = v;
    return 0;
}

/* --min-top1 is a fraction, as the JSON's same_top: a percent given by habit
 * (90, 94.06, 90%) would make a gate that always passes, so the message says
 * the unit. */
static int parse_fraction(const char *opt, const char *v, double *out, hfq_error *err) {
    if (hfq_cli_float(opt, v, 0, 1, out, err) == 0) return 0;
    return hfq_fail(err, opt, "takes a fraction in [0, 1] (0.9 = 90 %%), got %s", v ? v : "nothing");
}

/* Parses the command line: 0, or HFQ_EXIT_USAGE after one line on stderr. */
static int parse_args(int argc, char **argv, options *o) {
    *o = (options){.max_kld = -1, .max_ppl_ratio = -1, .min_top1 = -1};
    hfq_error e = {{0}}, *err = &e;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "--text") == 0) rc = path_option(a, v, &o->text, err), i++;
        else if (strcmp(a, "--base") == 0) rc = path_option(a, v, &o->base, err), i++;
        else if (strcmp(a, "--base-logits") == 0) rc = path_option(a, v, &o->base_logits, err), i++;
        else if (strcmp(a, "--save-logits") == 0) rc = path_option(a, v, &o->save_logits, err), i++;
        else if (strcmp(a, "--ctx") == 0) rc = hfq_cli_int(a, v, 4, 1 << 24, &o->ctx, err), i++;
        else if (strcmp(a, "--chunks") == 0) rc = hfq_cli_int(a, v, 1, INT64_MAX, &o->chunks, err), i++;
        else if (strcmp(a, "--batch") == 0) rc = hfq_cli_int(a, v, 1, 1 << 24, &o->batch, err), i++;
        else if (strcmp(a, "--threads") == 0) rc = hfq_cli_int(a, v, 1, 1024, &o->threads, err), i++;
        else if (strcmp(a, "--parallel") == 0) rc = hfq_cli_int(a, v, 1, 1024, &o->parallel, err), i++;
        else if (strcmp(a, "--device") == 0) rc = hfq_device_parse(a, v, &o->device, err), i++;
        else if (strcmp(a, "--act-quant") == 0) rc = hfq_cli_act_quant(a, v, &o->act_quant, err), i++;
        else if (strcmp(a, "--kv-type") == 0) rc = hfq_cli_kv_types(a, v, &o->kv_k, &o->kv_v, err), i++;
        else if (strcmp(a, "--base-kv-type") == 0) rc = hfq_cli_kv_types(a, v, &o->base_kv_k, &o->base_kv_v, err), i++;
        /* limits are finite and >= 0 (hfq_cli_float refuses NaN, whose comparisons
         * are all false, and infinities): a gate that cannot fail is refused */
        else if (strcmp(a, "--max-kld") == 0) rc = hfq_cli_float(a, v, 0, 1e30, &o->max_kld, err), i++;
        else if (strcmp(a, "--max-ppl-ratio") == 0) rc = hfq_cli_float(a, v, 0, 1e30, &o->max_ppl_ratio, err), i++;
        else if (strcmp(a, "--min-top1") == 0) rc = parse_fraction(a, v, &o->min_top1, err), i++;
        else if (strcmp(a, "--kv-dynamic") == 0) o->kv_dynamic = true;
        else if (strcmp(a, "--json") == 0) o->json = true;
        else if (strcmp(a, "--dry-run") == 0) o->dry_run = true;
        else if (strcmp(a, "--quiet") == 0) o->quiet = true;
        else if (a[0] == '-' && a[1]) return hfq_cli_unknown_option(TOOL, a, known_options);
        else if (!o->model) o->model = a;
        else return hfq_cli_usage(TOOL, "unexpected argument '%s' (the model is %s)", a, o->model);
        if (rc) return hfq_cli_usage(TOOL, "%s", err->msg);
    }
    if (!o->model || !o->text) return hfq_cli_usage(TOOL, "a model and --text FILE are required");
    if (o->base && o->base_logits) return hfq_cli_usage(TOOL, "--base and --base-logits exclude each other");
    if (o->base_kv_k && !o->base) return hfq_cli_usage(TOOL, "--base-kv-type needs --base");
    if (o->base_logits && o->save_logits)
        return hfq_cli_usage(TOOL, "--save-logits saves a model's log-probabilities; "
                                   "with --base-logits there is none to save");
    const bool gates = o->max_kld >= 0 || o->max_ppl_ratio >= 0 || o->min_top1 >= 0;
    if (gates && !o->base && !o->base_logits)
        return hfq_cli_usage(TOOL, "--max-kld, --max-ppl-ratio and --min-top1 need --base or --base-logits");
    return 0;
}

/* --save-logits may not replace any input (the model, the base, the text),
 * be a folder, or lie in a missing folder: refused before any work, since
 * the file is only written at the end of a run. */
static int check_save_logits(const options *o, hfq_error *err) {
    const hfq_path_role out = {o->save_logits, "--save-logits", false};
    const hfq_path_role in[] = {{o->model, "the model", false}, {o->base, "--base", false},
                                {o->base_logits, "--base-logits", false}, {o->text, "--text", false}};
    return hfq_check_outputs(&out, 1, in, (int)(sizeof in / sizeof in[0]), err);
}

/* ---- the evaluation ---- */

/* Everything a run holds; freed by run_free. */
typedef struct run {
    hfq_lm lm, base_lm;
    char *text;
    size_t text_len;
    int32_t *ids;
    size_t n_ids;
    hfq_ppl *s, *base_s;
    hfq_base_logits_reader *reader;
    hfq_base_logits_writer *writer;
    hfq_kld *kld;
    float *base_logp;       /* [n_scored][n_vocab] */
    int64_t n_vocab;
    int64_t overlap_windows;          /* the text's windows in the model's calibration set */
    hfq_ppl_memory plan, base_plan;   /* --dry-run: instead of s and base_s */
} run;

static void run_free(run *r) {
    hfq_base_logits_abort(r->writer);
    hfq_base_logits_close(r->reader);
    hfq_kld_free(r->kld);
    free(r->base_logp);
    hfq_ppl_free(r->base_s);
    hfq_ppl_free(r->s);
    free(r->ids);
    free(r->text);
    hfq_lm_free(&r->base_lm);
    hfq_lm_free(&r->lm);
}

/* The base must read token ids as the model does. */
static int check_same_vocab(const hfq_lm *m, const hfq_lm *b, const char *base_path, hfq_error *err) {
    const int64_t nm = hfq_model_hparams(m->model)->n_vocab, nb = hfq_model_hparams(b->model)->n_vocab;
    if (nm != nb) return hfq_fail(err, base_path, "vocabulary mismatch: %lld tokens, the model has %lld", (long long)nb,
                                  (long long)nm);
    const hfq_vocab *vm = m->vocab, *vb = b->vocab;
    if (vm->n_tokens != vb->n_tokens)
        return hfq_fail(err, base_path, "vocabulary mismatch: the tokenizer has %lld tokens, the model's %lld",
                        (long long)vb->n_tokens, (long long)vm->n_tokens);
    for (int64_t i = 0; i < vm->n_tokens; i++)
        if (vm->token_lens[i] != vb->token_lens[i] || memcmp(vm->tokens[i], vb->tokens[i], vm->token_lens[i]) != 0)
            return hfq_fail(err, base_path, "vocabulary mismatch: token %lld is '%s', the model's is '%s'", (long long)i,
                            vb->tokens[i], vm->tokens[i]);
    if (vm->add_bos != vb->add_bos || (vm->add_bos && vm->bos_id != vb->bos_id))
        return hfq_fail(err, base_path, "vocabulary mismatch: BOS handling differs from the model's");
    return 0;
}

static int32_t bos_of(const hfq_lm *lm) { return lm->vocab->add_bos && lm->vocab->bos_id >= 0 ? lm->vocab->bos_id : -1; }

/* Positions past a model's trained context ({arch}.context_length) give
 * logits it never learned to give, so the perplexity means little; the run
 * goes on (as llama-perplexity's), but not silently. whose: "model's",
 * "base's". */
static void warn_past_context(const options *o, int64_t n_ctx, const hfq_lm *lm, const char *whose) {
    const int64_t trained = hfq_model_hparams(lm->model)->n_ctx_train;
    if (trained <= 0 || n_ctx <= trained) return;
    char what[512];
    if (o->ctx) snprintf(what, sizeof what, "--ctx %lld", (long long)n_ctx);
    else if (o->base_logits) snprintf(what, sizeof what, "the context %lld of %s", (long long)n_ctx, o->base_logits);
    else snprintf(what, sizeof what, "the default context %lld (--ctx)", (long long)n_ctx);
    fprintf(stderr, TOOL ": warning: %s is past the %s trained context (%lld)\n", what, whose, (long long)trained);
}

/* A model scored on the text it was calibrated on looks better than it is:
 * say so (calib/overlap.h), in the JSON too. */
static int warn_calibration_overlap(const options *o, run *r, int64_t n_used, hfq_error *err) {
    bool stored;
    const int64_t n = n_used < (int64_t)r->n_ids ? n_used : (int64_t)r->n_ids;
    if (hfq_overlap_check(hfq_model_gguf(r->lm.model), r->ids, n, &stored, &r->overlap_windows, err)) return -1;
    if (r->overlap_windows > 0)
        fprintf(stderr,
                TOOL ": warning: %s shares %lld windows of %d tokens with the text %s was calibrated on: "
                "its scores are not held-out\n",
                o->text, (long long)r->overlap_windows, HFQ_OVERLAP_WINDOW, o->model);
    return 0;
}

/* Loads the model, the text and the base; makes the sessions on backend ops. */
static int run_open(run *r, const options *o, const hfq_ops *ops, hfq_error *err) {
    if (hfq_lm_load(&r->lm, o->model, err)) return -1;
    if (r->lm.vocab->add_eos)
        return hfq_fail(err, o->model, "the vocabulary appends EOS to every text; perplexity is not defined for that");
    if (hfq_read_text(o->text, MAX_TEXT, &r->text, &r->text_len, err) ||
        hfq_tokenize(r->lm.tok, r->text, r->text_len, HFQ_TOK_ADD_SPECIAL, &r->ids, &r->n_ids, err))
        return -1;
    r->n_vocab = hfq_model_hparams(r->lm.model)->n_vocab;
    const int32_t bos = bos_of(&r->lm);
    hfq_ppl_params pp = {.n_ctx = o->ctx ? o->ctx : 512, .n_chunks = o->chunks, .n_batch = o->batch,
                         .n_threads = (int)o->threads, .n_parallel = (int)o->parallel, .add_bos = bos >= 0,
                         .bos_id = bos, .act_quant = o->act_quant, .kv_k = o->kv_k, .kv_v = o->kv_v, .ops = ops,
                         .kv_dynamic = o->kv_dynamic, .text_path = o->text};
    if (o->base_logits) {   /* its context and chunks unless the options say otherwise */
        if (!(r->reader = hfq_base_logits_open(o->base_logits, err))) return -1;
        if (!o->ctx) pp.n_ctx = hfq_base_logits_info_get(r->reader)->n_ctx;
        if (!o->chunks) pp.n_chunks = hfq_base_logits_info_get(r->reader)->n_chunks;
    }
    if (o->dry_run ? hfq_ppl_plan(r->lm.model, (int64_t)r->n_ids, &pp, &r->plan, err)
                   : !(r->s = hfq_ppl_new(r->lm.model, r->ids, (int64_t)r->n_ids, &pp, err)))
        return -1;
    const int64_t n_chunks = o->dry_run ? r->plan.n_chunks : hfq_ppl_n_chunks(r->s);
    warn_past_context(o, pp.n_ctx, &r->lm, "model's");
    if (warn_calibration_overlap(o, r, n_chunks * pp.n_ctx, err)) return -1;
    if (o->chunks > n_chunks)   /* fewer than asked: say so rather than score less */
        fprintf(stderr, TOOL ": warning: --chunks %lld: %s holds %lld chunks of %lld tokens; evaluating those\n",
                (long long)o->chunks, o->text, (long long)n_chunks, (long long)pp.n_ctx);
    hfq_base_logits_info info = {.n_vocab = r->n_vocab, .n_ctx = pp.n_ctx, .n_chunks = n_chunks,
                                 .n_text_tokens = (int64_t)r->n_ids,
                                 .tokens_hash = hfq_tokens_hash(r->ids, (int64_t)r->n_ids), .bos_id = bos};
    if (r->reader && hfq_base_logits_check(r->reader, &info, r->ids, err)) return -1;
    if (o->base) {
        if (hfq_lm_load(&r->base_lm, o->base, err) || check_same_vocab(&r->lm, &r->base_lm, o->base, err)) return -1;
        /* the base's own line only when it was trained otherwise: one line for one fact */
        if (hfq_model_hparams(r->base_lm.model)->n_ctx_train != hfq_model_hparams(r->lm.model)->n_ctx_train)
            warn_past_context(o, pp.n_ctx, &r->base_lm, "base's");
        pp.act_quant = HFQ_ACT_QUANT_AUTO;
        pp.kv_k = o->base_kv_k;
        pp.kv_v = o->base_kv_v;
        if (o->dry_run ? hfq_ppl_plan(r->base_lm.model, (int64_t)r->n_ids, &pp, &r->base_plan, err)
                       : !(r->base_s = hfq_ppl_new(r->base_lm.model, r->ids, (int64_t)r->n_ids, &pp, err)))
            return -1;
    }
    if (o->dry_run) return 0;
    if (o->save_logits && !(r->writer = hfq_base_logits_create(o->save_logits, &info, err))) return -1;
    if (o->base || o->base_logits) {
        const size_t n = (size_t)hfq_base_logits_rows(pp.n_ctx) * (size_t)r->n_vocab;
        if (!(r->kld = hfq_kld_new(r->n_vocab, err))) {
            hfq_error_prefix(err, o->model);
            return -1;
        }
        if (!(r->base_logp = malloc(n * sizeof *r->base_logp)))
            return hfq_fail(err, o->model, "out of memory for the base's log-probabilities");
    }
    return 0;
}

/* Bytes of one session's contexts and slots. */
static void add_session(hfq_cli_memory_plan *mp, const hfq_ppl_memory *pm, const hfq_lm *lm) {
    mp->weights += (int64_t)gguf_file_size(hfq_model_gguf(lm->model));
    mp->kv_cache += pm->n_slots * pm->context.kv_cache;
    mp->buffers += pm->n_slots * (pm->context.buffers + pm->slot_buffers);
    mp->n_contexts += pm->n_slots;
}

/* --dry-run: the sessions' plans, the comparison's buffers (the base's
 * log-probabilities, a KL divergence and a probability difference per
 * scored token) and the process as loaded. */
static void print_plan(const options *o, const run *r) {
    hfq_cli_memory_plan mp = {.n_ctx = r->plan.context.n_ctx, .kv_k = r->plan.context.kv_k,
                              .kv_v = r->plan.context.kv_v, .loaded = hfq_cli_rss(),
                              .loaded_peak = hfq_cli_peak_rss()};
    add_session(&mp, &r->plan, &r->lm);
    if (o->base) add_session(&mp, &r->base_plan, &r->base_lm);
    if (o->base || o->base_logits) {
        const int64_t rows = hfq_base_logits_rows(r->plan.context.n_ctx + 1);
        mp.buffers += rows * r->n_vocab * (int64_t)sizeof(float) + r->plan.n_chunks * rows * 2 * (int64_t)sizeof(float);
    }
    hfq_cli_print_memory_plan(&mp, o->json);
}

/* The base's side of chunk c (the model's is done): its log-probs into
 * base_logp, and the rows to save. */
static int base_chunk(run *r, const hfq_ppl_chunk *c, int n_threads, hfq_error *err) {
    if (r->reader) return hfq_base_logits_read_chunk(r->reader, r->base_logp, err);
    if (!r->base_s) return r->writer ? hfq_base_logits_write_chunk(r->writer, c->logits, n_threads, err) : 0;
    hfq_ppl_chunk b;
    int step = hfq_ppl_next(r->base_s, &b, err);
    if (step <= 0) return step < 0 ? -1 : hfq_fail(err, hfq_model_path(r->base_lm.model), "the base ran out of chunks");
    if (r->writer && hfq_base_logits_write_chunk(r->writer, b.logits, n_threads, err)) return -1;
    hfq_log_softmax(b.logits, b.n_vocab, b.n_scored, n_threads, r->base_logp);
    return 0;
}

/* "[12/100] chunks  34567 tokens/s  ETA 0:00:12" on stderr: redrawn on a
 * terminal, a line every 5 s elsewhere (CI logs show a long run advancing). */
static void report_progress(hfq_progress *p, int64_t done, int64_t total, int64_t tokens, double seconds) {
    const double rate = seconds > 0 ? (double)tokens / seconds : 0.0;
    const long eta = done > 0 ? (long)(seconds * (double)(total - done) / (double)done + 0.5) : 0;
    hfq_progress_report(p, done, total, "chunks  %.0f tokens/s  ETA %ld:%02ld:%02ld", rate, eta / 3600,
                        eta / 60 % 60, eta % 60);
}

static int run_chunks(run *r, const options *o, double *seconds, hfq_error *err) {
    hfq_progress progress;
    hfq_progress_init(&progress, !o->quiet, 0);
    const int64_t n_chunks = hfq_ppl_n_chunks(r->s);
    const int64_t per_chunk = (hfq_ppl_result_get(r->s).n_ctx - 1) * (r->base_s ? 2 : 1);
    const double t0 = hfq_cli_seconds();
    hfq_ppl_chunk c;
    int step;
    while ((step = hfq_ppl_next(r->s, &c, err)) == 1) {
        if (base_chunk(r, &c, (int)o->threads, err)) return -1;
        if (r->kld && hfq_kld_add(r->kld, c.logits, r->base_logp, c.targets, c.n_scored, (int)o->threads, err)) {
            hfq_error_prefix(err, o->model);
            return -1;
        }
        report_progress(&progress, c.index + 1, n_chunks, (c.index + 1) * per_chunk, hfq_cli_seconds() - t0);
    }
    *seconds = hfq_cli_seconds() - t0;
    if (step < 0) return -1;
    hfq_base_logits_writer *w = r->writer;
    r->writer = NULL;   /* commit frees it, whatever happens */
    return w ? hfq_base_logits_commit(w, err) : 0;
}

/* ---- gates ---- */

typedef struct gate {
    const char *name, *option, *what;
    double limit, value;
    bool is_max, passed;
} gate;

/* The gates asked for, evaluated on st; returns how many. */
static int eval_gates(const options *o, const hfq_kld_stats *st, gate *g) {
    int n = 0;
    if (o->max_kld >= 0) g[n++] = (gate){"max_kld", "--max-kld", "mean KLD", o->max_kld, st->kld, true, false};
    if (o->max_ppl_ratio >= 0)
        g[n++] = (gate){"max_ppl_ratio", "--max-ppl-ratio", "PPL(Q)/PPL(base)", o->max_ppl_ratio, st->ppl_ratio, true, false};
    if (o->min_top1 >= 0)   /* fractions both: the limit as given, the value as the JSON's same_top */
        g[n++] = (gate){"min_top1", "--min-top1", "same-top fraction", o->min_top1, st->same_top, false, false};
    for (int i = 0; i < n; i++) g[i].passed = g[i].is_max ? g[i].value <= g[i].limit : g[i].value >= g[i].limit;
    return n;
}

/* ---- output ---- */

static void print_kld_text(const hfq_kld_stats *s) {
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6lf ± %10.6lf\n", s->ppl, s->ppl_err);
    printf("Mean PPL(base)                : %10.6lf ± %10.6lf\n", s->ppl_base, s->ppl_base_err);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * s->ln_ppl_cor);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6lf ± %10.6lf\n", s->ln_ppl_ratio, s->ln_ppl_ratio_err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf\n", s->ppl_ratio, s->ppl_ratio_err);
    printf("Mean PPL(Q)-PPL(base)         : %10.6lf ± %10.6lf\n", s->ppl_diff, s->ppl_diff_err);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6lf ± %10.6lf\n", s->kld, s->kld_err);
    for (int i = 0; i < HFQ_KLD_N_QUANTILES; i++) {
        const char *name = hfq_kld_quantiles[i].name;
        printf("%s%*s KLD: %10.6f\n", name, (int)(7 - strlen(name)), "", s->kld_q[i]);
    }
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3lf ± %5.3lf %%\n", 100.0 * s->dp, 100.0 * s->dp_err);
    for (int i = 0; i < HFQ_DP_N_QUANTILES; i++) {
        const char *name = hfq_dp_quantiles[i].name;
        printf("%s%*s Δp: %6.3lf%%\n", name, (int)(7 - strlen(name)), "", 100.0 * s->dp_q[i]);
    }
    printf("RMS Δp    : %6.3lf ± %5.3lf %%\n", 100.0 * s->dp_rms, 100.0 * s->dp_rms_err);
    printf("Same top p: %6.3lf ± %5.3lf %%\n", 100.0 * s->same_top, 100.0 * s->same_top_err);
}

static void add_quantiles(cJSON *j, const char *prefix, const hfq_quantile *q, const double *v, int n) {
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s_%s", prefix, q[i].key);
        hfq_cli_json_number(j, key, v[i]);
    }
}

static cJSON *kld_json(const hfq_kld_stats *s) {
    cJSON *j = cJSON_CreateObject();
    const struct { const char *key; double v; } fields[] = {
        {"tokens", (double)s->count}, {"ppl", s->ppl}, {"ppl_err", s->ppl_err}, {"ppl_base", s->ppl_base},
        {"ppl_base_err", s->ppl_base_err}, {"ln_ppl_cor", s->ln_ppl_cor}, {"ln_ppl_ratio", s->ln_ppl_ratio},
        {"ln_ppl_ratio_err", s->ln_ppl_ratio_err}, {"ppl_ratio", s->ppl_ratio}, {"ppl_ratio_err", s->ppl_ratio_err},
        {"ppl_diff", s->ppl_diff}, {"ppl_diff_err", s->ppl_diff_err}, {"kld", s->kld}, {"kld_err", s->kld_err},
        {"dp", s->dp}, {"dp_err", s->dp_err}, {"dp_rms", s->dp_rms}, {"dp_rms_err", s->dp_rms_err},
        {"same_top", s->same_top}, {"same_top_err", s->same_top_err},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) hfq_cli_json_number(j, fields[i].key, fields[i].v);
    add_quantiles(j, "kld", hfq_kld_quantiles, s->kld_q, HFQ_KLD_N_QUANTILES);
    add_quantiles(j, "dp", hfq_dp_quantiles, s->dp_q, HFQ_DP_N_QUANTILES);
    return j;
}

static bool kv_fp8(const hfq_ppl *s) { return hfq_kv_type_is_fp8(hfq_ppl_kv_k(s)) || hfq_kv_type_is_fp8(hfq_ppl_kv_v(s)); }

/* ", static FP8 scales" / ", dynamic FP8 scales" after the KV types; "" without an FP8 cache. */
static const char *kv_scales_text(const hfq_ppl *s) {
    return !kv_fp8(s) ? "" : hfq_ppl_kv_static(s) ? ", static FP8 scales" : ", dynamic FP8 scales";
}

/* {"k": "f16", "v": "q8_0"} (with "scales": "static" / "dynamic" for an FP8
 * cache): the formats a session's KV cache holds. */
static void add_kv_type(cJSON *j, const char *key, const hfq_ppl *s) {
    cJSON *kv = cJSON_AddObjectToObject(j, key);
    cJSON_AddStringToObject(kv, "k", hfq_kv_type_name(hfq_ppl_kv_k(s)));
    cJSON_AddStringToObject(kv, "v", hfq_kv_type_name(hfq_ppl_kv_v(s)));
    if (kv_fp8(s)) cJSON_AddStringToObject(kv, "scales", hfq_ppl_kv_static(s) ? "static" : "dynamic");
}

static void print_json(const options *o, const run *rn, const hfq_ppl_result *r, const hfq_kld_stats *ks,
                       const gate *g, int n_gates) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddStringToObject(j, "text", o->text);
    if (o->base) cJSON_AddStringToObject(j, "base", o->base);
    if (o->base_logits) cJSON_AddStringToObject(j, "base_logits", o->base_logits);
    if (o->save_logits) cJSON_AddStringToObject(j, "saved_logits", o->save_logits);
    cJSON_AddStringToObject(j, "act_quant", hfq_cli_act_quant_name(o->act_quant));
    add_kv_type(j, "kv_type", rn->s);
    if (rn->base_s) add_kv_type(j, "base_kv_type", rn->base_s);
    hfq_cli_json_number(j, "n_ctx", (double)r->n_ctx);
    hfq_cli_json_number(j, "n_chunks", (double)r->n_chunks);
    hfq_cli_json_number(j, "n_tokens", (double)rn->n_ids);
    hfq_cli_json_number(j, "tokens_scored", (double)r->n_scored);
    hfq_cli_json_number(j, "calibration_overlap_windows", (double)rn->overlap_windows);
    hfq_cli_json_number(j, "nll_mean", r->nll_mean);
    hfq_cli_json_number(j, "ppl", r->ppl);
    hfq_cli_json_number(j, "ppl_err", r->ppl_err);
    if (ks) cJSON_AddItemToObject(j, "kl", kld_json(ks));
    if (n_gates) {
        cJSON *arr = cJSON_AddArrayToObject(j, "gates");
        bool all = true;
        for (int i = 0; i < n_gates; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "gate", g[i].name);
            hfq_cli_json_number(e, "limit", g[i].limit);
            hfq_cli_json_number(e, "value", g[i].value);
            cJSON_AddBoolToObject(e, "passed", g[i].passed);
            cJSON_AddItemToArray(arr, e);
            all = all && g[i].passed;
        }
        cJSON_AddBoolToObject(j, "gates_passed", all);
    }
    char *s = cJSON_Print(j);
    if (s) puts(s);
    free(s);
    cJSON_Delete(j);
}

int main(int argc, char **argv) {
    hfq_cli_openmp_env(argv);
    if (hfq_cli_help(argc, argv, usage_text) || hfq_cli_version(argc, argv, TOOL)) return HFQ_EXIT_OK;
    options o;
    hfq_error err = {{0}};
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (check_save_logits(&o, &err)) {   /* a command-line mistake, as quantize's: exit 2 */
        fprintf(stderr, TOOL ": %s\n", err.msg);
        return HFQ_EXIT_USAGE;
    }
    rc = HFQ_EXIT_FAILURE;
    run r = {0};
    double seconds = 0;
    hfq_kld_stats ks;
    const hfq_ops *ops;
    char note[512];
    if (hfq_device_select(o.device, &ops, note, sizeof note, &err)) goto done;
    if (note[0]) fprintf(stderr, TOOL ": %s\n", note);
    /* a device backend holds its own copy of the weights: one chunk at a time unless asked */
    if (ops != hfq_cpu_ops() && !o.parallel) o.parallel = 1;
    if (run_open(&r, &o, ops, &err)) goto done;
    if (o.dry_run) {
        print_plan(&o, &r);
        rc = HFQ_EXIT_OK;
        goto done;
    }
    if (run_chunks(&r, &o, &seconds, &err)) goto done;
    if (r.kld && hfq_kld_stats_get(r.kld, &ks, &err)) {
        hfq_error_prefix(&err, o.model);
        goto done;
    }
    const hfq_ppl_result pr = hfq_ppl_result_get(r.s);
    gate gates[3];
    const int n_gates = r.kld ? eval_gates(&o, &ks, gates) : 0;
    if (o.json) {
        print_json(&o, &r, &pr, r.kld ? &ks : NULL, gates, n_gates);
    } else {
        printf("PPL = %.4f +/- %.5f (%lld chunks of %lld tokens, %lld tokens scored, KV cache K %s V %s%s)\n", pr.ppl,
               pr.ppl_err, (long long)pr.n_chunks, (long long)pr.n_ctx, (long long)pr.n_scored,
               hfq_kv_type_name(hfq_ppl_kv_k(r.s)), hfq_kv_type_name(hfq_ppl_kv_v(r.s)), kv_scales_text(r.s));
        if (r.base_s)
            printf("base KV cache K %s V %s%s\n", hfq_kv_type_name(hfq_ppl_kv_k(r.base_s)),
                   hfq_kv_type_name(hfq_ppl_kv_v(r.base_s)), kv_scales_text(r.base_s));
        if (r.kld) print_kld_text(&ks);
        if (n_gates) printf("\n");
        for (int i = 0; i < n_gates; i++)
            printf("gate %s %g: %s %.6g %s\n", gates[i].option, gates[i].limit, gates[i].what, gates[i].value,
                   gates[i].passed ? "passed" : "FAILED");
    }
    fflush(stdout);
    const int64_t evaluated = pr.n_chunks * (pr.n_ctx - 1) * (r.base_s ? 2 : 1);
    if (!o.quiet)
        fprintf(stderr, TOOL ": %lld tokens evaluated in %.2f s (%.0f tokens/s, %d chunk(s) side by side)\n",
                (long long)evaluated, seconds, seconds > 0 ? (double)evaluated / seconds : 0.0,
                hfq_ppl_n_parallel(r.s));
    if (o.save_logits && !o.quiet)
        fprintf(stderr, TOOL ": saved the %s's log-probabilities to %s\n", o.base ? "base" : "model", o.save_logits);
    rc = HFQ_EXIT_OK;
    for (int i = 0; i < n_gates; i++)
        if (!gates[i].passed) {
            fprintf(stderr, TOOL ": gate failed: %s %.6g %s %s %.6g\n", gates[i].what, gates[i].value,
                    gates[i].is_max ? ">" : "<", gates[i].option, gates[i].limit);
            rc = HFQ_EXIT_GATE;
        }
done:
    if (rc == HFQ_EXIT_FAILURE) fprintf(stderr, TOOL ": %s\n", err.msg);
    run_free(&r);
    return rc;
}
