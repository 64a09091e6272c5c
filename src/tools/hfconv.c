/* hfconv - convert a Hugging Face checkpoint folder to GGUF v3. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/cli/cli.h"
#include "src/common/output.h"
#include "src/hf/arch.h"
#include "src/hf/convert.h"

#define TOOL "hfconv"
#define MIB ((uint64_t)1 << 20)

static void usage(FILE *out) {
    fprintf(out,
            "usage: hfconv MODEL_DIR -o OUT.gguf [options]\n"
            "       hfconv MODEL_DIR --lora ADAPTER_DIR[:SCALE] --adapter-out ADAPTER.gguf\n"
            "\n"
            "Converts a Hugging Face checkpoint (config.json, *.safetensors or a sharded\n"
            "model.safetensors.index.json, tokenizer.model or tokenizer.json) to GGUF v3\n"
            "with llama.cpp's tensor names and metadata.\n"
            "Supported: %s.\n"
            "\n"
            "options:\n"
            "  -o, --outfile FILE     output GGUF (written to a temporary file, renamed when complete)\n"
            "  --outtype TYPE         f32, f16, bf16 or auto (default: f16, as llama.cpp's converter;\n"
            "                         auto keeps the checkpoint's 16-bit type). 1-D tensors and norms\n"
            "                         are always F32. A compressed-tensors checkpoint keeps the\n"
            "                         formats GGUF holds (FP8/INT8 per tensor or channel, NVFP4,\n"
            "                         MXFP4) unless --outtype is given; others are dequantized\n"
            "                         exactly, each named on stderr (docs/hfconv.md)\n"
            "  --vocab-only           write the tokenizer metadata only (no weights or config needed)\n"
            "  --lora DIR[:SCALE]     merge a PEFT LoRA adapter (adapter_config.json and\n"
            "                         adapter_model.safetensors) into the weights, times SCALE\n"
            "                         (default 1); repeatable: merged in the order given\n"
            "  --adapter-out FILE     instead of -o: write the one --lora adapter alone as llama.cpp's\n"
            "                         LoRA GGUF in F32 (llama-cli --lora FILE)\n"
            "  --json                 print a JSON summary on stdout\n"
            "  -q, --quiet            no progress or summary on stderr (progress: one line redrawn on\n"
            "                         a terminal, elsewhere a line every 5 s)\n"
            "  -h, --help             this help\n"
            "  --version              print the version\n"
            "\n"
            "exit status: 0 success, 1 bad input or I/O error, 2 bad command line\n",
            hf_arch_supported((char[512]){0}, 512));
}

/* Progress in MiB of output written, so that the counts stay short; the
 * last count only once everything is written (it ends the line). */
static void show_progress(void *ctx, uint64_t done, uint64_t total, const char *tensor) {
    const int64_t all = (int64_t)((total + MIB - 1) / MIB);
    int64_t now = done >= total ? all : (int64_t)(done / MIB);
    if (done < total && now >= all) now = all - 1;
    hfq_progress_report(ctx, now, all, "MiB, %s", tensor);
}

static int print_json(const hfq_convert_opts *opts, const hfq_convert_report *rep, double secs) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return -1;
    cJSON_AddStringToObject(o, "output", opts->out_path);
    cJSON_AddStringToObject(o, "architecture", rep->gguf_arch);
    cJSON_AddNumberToObject(o, "tensors", (double)rep->n_tensors);
    cJSON_AddNumberToObject(o, "parameters", (double)rep->n_params);
    cJSON_AddNumberToObject(o, "data_bytes", (double)rep->data_bytes);
    cJSON_AddNumberToObject(o, "file_type", rep->file_type);
    cJSON_AddBoolToObject(o, "vocab_only", opts->vocab_only);
    cJSON_AddNumberToObject(o, "loras", opts->n_loras);
    cJSON_AddBoolToObject(o, "adapter_only", opts->adapter_only);
    cJSON_AddNumberToObject(o, "seconds", secs);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) return -1;
    puts(text);
    free(text);
    return 0;
}

/* MODEL_DIR must be a folder; say what was given when it is not. */
static bool model_folder_ok(const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return true;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "hfconv: %s: no such folder (expected a Hugging Face model folder: config.json and "
                        "*.safetensors)\n", dir);
        return false;
    }
    char magic[4] = {0};
    FILE *fp = fopen(dir, "rb");
    bool gguf = fp && fread(magic, 1, 4, fp) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (fp) fclose(fp);
    fprintf(stderr, "hfconv: %s is a %s, not a Hugging Face model folder (expected a folder with config.json and "
                    "*.safetensors)\n", dir, gguf ? "GGUF file already" : "file");
    return false;
}

static const char *const known_options[] = {"-o", "--outfile", "--outtype", "--vocab-only", "--lora",
                                            "--adapter-out", "--json", "-q", "--quiet", "-h", "--help",
                                            "--version", NULL};

/* "DIR[:SCALE]": the text after the last ':' is the scale unless the whole
 * argument is an existing folder. dir_buf has room for the argument. */
static int parse_lora(const char *arg, char *dir_buf, hf_lora_spec *spec) {
    struct stat sb;
    const char *colon = strrchr(arg, ':');
    spec->dir = arg;
    spec->scale = 1.0;
    if (!colon || (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode))) return 0;
    hfq_error err;
    if (hfq_cli_float("--lora", colon + 1, -1000.0, 1000.0, &spec->scale, &err) != 0)
        return hfq_cli_usage(TOOL, "%s", err.msg);
    memcpy(dir_buf, arg, (size_t)(colon - arg));
    dir_buf[colon - arg] = '\0';
    spec->dir = dir_buf;
    return 0;
}

/* Parses the command line into opts; returns -1 when done (help, version),
 * an exit status for a usage error, or 0. */
static int parse_args(int argc, char **argv, hfq_convert_opts *opts, hf_lora_spec *loras, char **lora_dirs,
                      bool *json, bool *quiet) {
    const char *adapter_out = NULL;
    bool outtype_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--version")) {
            hfq_cli_version(argc, argv, TOOL);
            return -1;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--outfile")) {
            if (i + 1 >= argc) return hfq_cli_usage(TOOL, "%s needs a value", a);
            opts->out_path = argv[++i];
        } else if (!strcmp(a, "--outtype")) {
            if (i + 1 >= argc) return hfq_cli_usage(TOOL, "%s needs a value", a);
            int t = hfq_outtype_parse(argv[++i]);
            if (t < 0) return hfq_cli_usage(TOOL, "--outtype: expects f32, f16, bf16 or auto, got '%s'", argv[i]);
            opts->outtype = (hfq_outtype)t;
            outtype_given = true;
            opts->outtype_given = true;
        } else if (!strcmp(a, "--lora")) {
            if (i + 1 >= argc) return hfq_cli_usage(TOOL, "%s needs a value", a);
            i++;   /* the folder's copy gets the room of its own argument */
            int rc = parse_lora(argv[i], lora_dirs[i], &loras[opts->n_loras]);
            if (rc) return rc;
            opts->n_loras++;
        } else if (!strcmp(a, "--adapter-out")) {
            if (i + 1 >= argc) return hfq_cli_usage(TOOL, "%s needs a value", a);
            adapter_out = argv[++i];
        } else if (!strcmp(a, "--vocab-only")) opts->vocab_only = true;
        else if (!strcmp(a, "--json")) *json = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) *quiet = true;
        else if (a[0] == '-' && a[1]) return hfq_cli_unknown_option(TOOL, a, known_options);
        else if (!opts->model_dir) opts->model_dir = a;
        else return hfq_cli_usage(TOOL, "unexpected argument '%s' (one MODEL_DIR)", a);
    }
    if (adapter_out) {
        if (opts->out_path) return hfq_cli_usage(TOOL, "--adapter-out writes the adapter alone: give it or -o, not both");
        if (opts->n_loras != 1)
            return hfq_cli_usage(TOOL, "--adapter-out needs exactly one --lora (llama.cpp takes one --lora per file)");
        if (outtype_given && opts->outtype != HFQ_OUT_F32)
            return hfq_cli_usage(TOOL, "--adapter-out writes F32 factors (llama.cpp's converter's default): "
                                 "no --outtype");
        opts->out_path = adapter_out;
        opts->adapter_only = true;
    }
    if (opts->n_loras && opts->vocab_only) return hfq_cli_usage(TOOL, "--lora changes weights: not with --vocab-only");
    if (!opts->model_dir || !opts->out_path) return hfq_cli_usage(TOOL, "need MODEL_DIR and -o OUT.gguf");
    opts->loras = loras;
    return 0;
}

static void show_warning(void *ctx, const char *msg) {
    (void)ctx;
    fprintf(stderr, TOOL ": warning: %s\n", msg);
}

/* Room for every --lora: a spec and a copy of its folder per argument. */
typedef struct lora_args {
    hf_lora_spec *specs;
    char **dirs;
    int n;
} lora_args;

static int lora_args_init(lora_args *la, int argc, char **argv) {
    la->n = argc;
    la->specs = calloc((size_t)argc, sizeof *la->specs);
    la->dirs = calloc((size_t)argc, sizeof *la->dirs);
    if (!la->specs || !la->dirs) return -1;
    for (int i = 0; i < argc; i++)
        if (!(la->dirs[i] = malloc(strlen(argv[i]) + 1))) return -1;
    return 0;
}

static void lora_args_free(lora_args *la) {
    for (int i = 0; la->dirs && i < la->n; i++) free(la->dirs[i]);
    free(la->dirs);
    free(la->specs);
}

/* The tool once the --lora room exists; returns the exit status. */
static int run(int argc, char **argv, hfq_convert_opts *opts, lora_args *la, bool *json, bool *quiet) {
    int rc = parse_args(argc, argv, opts, la->specs, la->dirs, json, quiet);
    if (rc) return rc < 0 ? HFQ_EXIT_OK : rc;
    if (!model_folder_ok(opts->model_dir)) return HFQ_EXIT_FAILURE;
    /* -o inside the model folder would replace the checkpoint being read; a
     * refused output is a command-line mistake (exit 2), as in quantize and ppl-eval */
    const hfq_path_role out = {opts->out_path, opts->adapter_only ? "--adapter-out" : "-o", false};
    hfq_path_role *in = calloc((size_t)opts->n_loras + 1, sizeof *in);
    if (!in) {
        fprintf(stderr, TOOL ": out of memory\n");
        return HFQ_EXIT_FAILURE;
    }
    in[0] = (hfq_path_role){opts->model_dir, "the model folder", true};
    for (int i = 0; i < opts->n_loras; i++) in[i + 1] = (hfq_path_role){opts->loras[i].dir, "an adapter folder", true};
    hfq_error err;
    rc = hfq_check_outputs(&out, 1, in, opts->n_loras + 1, &err);
    free(in);
    if (rc != 0) {
        fprintf(stderr, TOOL ": %s\n", err.msg);
        return HFQ_EXIT_USAGE;
    }
    hfq_progress progress;
    hfq_progress_init(&progress, !*quiet, 0);
    const double start = hfq_cli_seconds();
    opts->progress = show_progress;
    opts->progress_ctx = &progress;
    opts->warn = show_warning;
    hfq_convert_report rep;
    if (hfq_convert(opts, &rep, &err) != 0) {
        fprintf(stderr, TOOL ": %s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    const double secs = hfq_cli_seconds() - start;
    if (*json && print_json(opts, &rep, secs) != 0) {
        fprintf(stderr, TOOL ": out of memory\n");
        return HFQ_EXIT_FAILURE;
    }
    if (!*quiet)
        fprintf(stderr, TOOL ": wrote %s (%s, %lld tensors, %llu parameters, %.1f MiB) in %.2f s\n",
                opts->out_path, rep.gguf_arch, (long long)rep.n_tensors, (unsigned long long)rep.n_params,
                (double)rep.data_bytes / 1048576.0, secs);
    return HFQ_EXIT_OK;
}

int main(int argc, char **argv) {
    hfq_cli_openmp_env(argv);
    hfq_convert_opts opts = {0};
    opts.outtype = HFQ_OUT_F16;
    bool json = false, quiet = false;
    lora_args la = {0};
    if (lora_args_init(&la, argc, argv) != 0) {
        lora_args_free(&la);
        fprintf(stderr, TOOL ": out of memory\n");
        return HFQ_EXIT_FAILURE;
    }
    int rc = run(argc, argv, &opts, &la, &json, &quiet);
    lora_args_free(&la);
    return rc;
}
