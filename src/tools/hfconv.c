/* hfconv - convert a Hugging Face checkpoint folder to GGUF v3. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/hf/convert.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: hfconv MODEL_DIR -o OUT.gguf [options]\n"
            "\n"
            "Converts a Hugging Face checkpoint (config.json, *.safetensors or a sharded\n"
            "model.safetensors.index.json, tokenizer.model or tokenizer.json) to GGUF v3\n"
            "with llama.cpp's tensor names and metadata.\n"
            "Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM.\n"
            "\n"
            "options:\n"
            "  -o, --outfile FILE     output GGUF (written to a temporary file, renamed when complete)\n"
            "  --outtype TYPE         f32, f16, bf16 or auto (default: f16, as llama.cpp's converter;\n"
            "                         auto keeps the checkpoint's 16-bit type). 1-D tensors and norms\n"
            "                         are always F32.\n"
            "  --vocab-only           write the tokenizer metadata only (no weights or config needed)\n"
            "  --json                 print a JSON summary on stdout\n"
            "  -q, --quiet            no progress or summary on stderr\n"
            "  -h, --help             this help\n"
            "\n"
            "exit status: 0 success, 1 bad input or I/O error, 2 bad command line\n");
}

typedef struct progress_state {
    bool enabled;
    struct timespec last;
} progress_state;

static double seconds_since(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + 1e-9 * (double)(now.tv_nsec - t->tv_nsec);
}

static void show_progress(void *ctx, uint64_t done, uint64_t total, const char *tensor) {
    progress_state *ps = ctx;
    if (!ps->enabled || (done < total && seconds_since(&ps->last) < 0.2)) return;
    clock_gettime(CLOCK_MONOTONIC, &ps->last);
    fprintf(stderr, "\r[%5.1f%%] %-40.40s", total ? 100.0 * (double)done / (double)total : 100.0, tensor);
    if (done >= total) fputc('\n', stderr);
    fflush(stderr);
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

int main(int argc, char **argv) {
    hfq_convert_opts opts = {0};
    opts.outtype = HFQ_OUT_F16;
    bool json = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-o") || !strcmp(a, "--outfile")) && i + 1 < argc) opts.out_path = argv[++i];
        else if (!strcmp(a, "--outtype") && i + 1 < argc) {
            int t = hfq_outtype_parse(argv[++i]);
            if (t < 0) { fprintf(stderr, "hfconv: unknown --outtype '%s' (f32, f16, bf16, auto)\n", argv[i]); return 2; }
            opts.outtype = (hfq_outtype)t;
        }
        else if (!strcmp(a, "--vocab-only")) opts.vocab_only = true;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else if (a[0] == '-') { fprintf(stderr, "hfconv: unknown option '%s' (see --help)\n", a); return 2; }
        else if (!opts.model_dir) opts.model_dir = a;
        else { fprintf(stderr, "hfconv: unexpected argument '%s' (see --help)\n", a); return 2; }
    }
    if (!opts.model_dir || !opts.out_path) {
        fprintf(stderr, "hfconv: need MODEL_DIR and -o OUT.gguf (see --help)\n");
        return 2;
    }
    if (!model_folder_ok(opts.model_dir)) return 1;
    progress_state ps = {.enabled = !quiet && isatty(STDERR_FILENO)};
    clock_gettime(CLOCK_MONOTONIC, &ps.last);
    struct timespec start = ps.last;
    opts.progress = show_progress;
    opts.progress_ctx = &ps;
    hfq_convert_report rep;
    hfq_error err;
    if (hfq_convert(&opts, &rep, &err) != 0) {
        fprintf(stderr, "hfconv: %s\n", err.msg);
        return 1;
    }
    double secs = seconds_since(&start);
    if (json && print_json(&opts, &rep, secs) != 0) {
        fprintf(stderr, "hfconv: out of memory\n");
        return 1;
    }
    if (!quiet)
        fprintf(stderr, "hfconv: wrote %s (%s, %lld tensors, %llu parameters, %.1f MiB) in %.2f s\n",
                opts.out_path, rep.gguf_arch, (long long)rep.n_tensors, (unsigned long long)rep.n_params,
                (double)rep.data_bytes / 1048576.0, secs);
    return 0;
}
