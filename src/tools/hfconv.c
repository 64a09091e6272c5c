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
            "                         are always F32.\n"
            "  --vocab-only           write the tokenizer metadata only (no weights or config needed)\n"
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

static const char *const known_options[] = {"-o", "--outfile", "--outtype", "--vocab-only", "--json",
                                            "-q", "--quiet", "-h", "--help", "--version", NULL};

/* Parses the command line into opts; returns -1 when done (help, version),
 * an exit status for a usage error, or 0. */
static int parse_args(int argc, char **argv, hfq_convert_opts *opts, bool *json, bool *quiet) {
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
        } else if (!strcmp(a, "--vocab-only")) opts->vocab_only = true;
        else if (!strcmp(a, "--json")) *json = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) *quiet = true;
        else if (a[0] == '-' && a[1]) return hfq_cli_unknown_option(TOOL, a, known_options);
        else if (!opts->model_dir) opts->model_dir = a;
        else return hfq_cli_usage(TOOL, "unexpected argument '%s' (one MODEL_DIR)", a);
    }
    if (!opts->model_dir || !opts->out_path) return hfq_cli_usage(TOOL, "need MODEL_DIR and -o OUT.gguf");
    return 0;
}

int main(int argc, char **argv) {
    hfq_convert_opts opts = {0};
    opts.outtype = HFQ_OUT_F16;
    bool json = false, quiet = false;
    int rc = parse_args(argc, argv, &opts, &json, &quiet);
    if (rc) return rc < 0 ? HFQ_EXIT_OK : rc;
    if (!model_folder_ok(opts.model_dir)) return HFQ_EXIT_FAILURE;
    /* -o inside the model folder would replace the checkpoint being read; a
     * refused output is a command-line mistake (exit 2), as in quantize and ppl-eval */
    const hfq_path_role out = {opts.out_path, "-o", false}, in = {opts.model_dir, "the model folder", true};
    hfq_error err;
    if (hfq_check_outputs(&out, 1, &in, 1, &err) != 0) {
        fprintf(stderr, TOOL ": %s\n", err.msg);
        return HFQ_EXIT_USAGE;
    }
    hfq_progress progress;
    hfq_progress_init(&progress, !quiet, 0);
    const double start = hfq_cli_seconds();
    opts.progress = show_progress;
    opts.progress_ctx = &progress;
    hfq_convert_report rep;
    if (hfq_convert(&opts, &rep, &err) != 0) {
        fprintf(stderr, TOOL ": %s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    const double secs = hfq_cli_seconds() - start;
    if (json && print_json(&opts, &rep, secs) != 0) {
        fprintf(stderr, TOOL ": out of memory\n");
        return HFQ_EXIT_FAILURE;
    }
    if (!quiet)
        fprintf(stderr, TOOL ": wrote %s (%s, %lld tensors, %llu parameters, %.1f MiB) in %.2f s\n",
                opts.out_path, rep.gguf_arch, (long long)rep.n_tensors, (unsigned long long)rep.n_params,
                (double)rep.data_bytes / 1048576.0, secs);
    return HFQ_EXIT_OK;
}
