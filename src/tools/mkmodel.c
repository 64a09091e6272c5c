/* mkmodel - write a deterministic synthetic Hugging Face checkpoint. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/cli/cli.h"
#include "src/common/output.h"
#include "src/synth/synth.h"

#define TOOL "mkmodel"

static void usage(FILE *out) {
    fprintf(out,
            "usage: mkmodel OUT_DIR [options]\n"
            "Writes a synthetic checkpoint in Hugging Face layout: config.json,\n"
            "generation_config.json, tokenizer.json, tokenizer_config.json,\n"
            "special_tokens_map.json and model.safetensors (or shards with\n"
            "model.safetensors.index.json). Same options and seed, same bytes.\n"
            "\n"
            "  --arch A          llama (default), mistral or qwen2 (adds q/k/v biases)\n"
            "  --hidden N        hidden size (default 64)\n"
            "  --ffn N           feed-forward size (default 172)\n"
            "  --layers N        layers (default 2)\n"
            "  --heads N         attention heads (default 4)\n"
            "  --kv-heads N      key/value heads, dividing --heads (default 2)\n"
            "  --vocab N         vocabulary size, 260..1048576 (default 512)\n"
            "  --ctx N           max_position_embeddings (default 256)\n"
            "  --dtype T         f32 (default), f16 or bf16\n"
            "  --shards N        write N shards and an index (default 1)\n"
            "  --tied            tie lm_head to the embeddings (no lm_head.weight)\n"
            "  --untied          store lm_head.weight (default)\n"
            "  --rope-theta X    rope_theta (default 10000)\n"
            "  --rms-eps X       rms_norm_eps (default 1e-5)\n"
            "  --seed N          random seed (default 1)\n"
            "  --outliers K      K hidden channels get %gx norm weights (default 0)\n"
            "  -h, --help        this text\n"
            "  --version         print the version\n"
            "\n"
            "Exit status: 0 written, 1 failure, 2 bad command line.\n",
            (double)SYNTH_OUTLIER_SCALE);
}

/* An int option, as a one-line usage error when it is not one. */
static int parse_int(const char *opt, const char *s, int *out) {
    int64_t v;
    hfq_error err;
    if (hfq_cli_int(opt, s, 0, INT_MAX, &v, &err)) return hfq_cli_usage(TOOL, "%s", err.msg);
    *out = (int)v;
    return 0;
}

/* A number option; the exact bounds are synth_check_config's. */
static int parse_double(const char *opt, const char *s, double max, double *out) {
    hfq_error err;
    return hfq_cli_float(opt, s, 0, max, out, &err) ? hfq_cli_usage(TOOL, "%s", err.msg) : 0;
}

static void show_progress(void *ctx, uint64_t done, uint64_t total) {
    (void)ctx;
    fprintf(stderr, "\rmkmodel: %3d%% of %.1f MB", total ? (int)(100.0 * done / total) : 100,
            total / 1e6);
    if (done == total) fputc('\n', stderr);
}

enum { O_ARCH = 256, O_HIDDEN, O_FFN, O_LAYERS, O_HEADS, O_KV, O_VOCAB, O_CTX, O_DTYPE,
       O_SHARDS, O_TIED, O_UNTIED, O_THETA, O_EPS, O_SEED, O_OUTLIERS, O_VERSION };

static int parse_option(int opt, const char *arg, synth_config *c) {
    static const struct { int opt; const char *name; size_t offset; } ints[] = {
        {O_HIDDEN, "--hidden", offsetof(synth_config, hidden)},
        {O_FFN, "--ffn", offsetof(synth_config, ffn)},
        {O_LAYERS, "--layers", offsetof(synth_config, layers)},
        {O_HEADS, "--heads", offsetof(synth_config, heads)},
        {O_KV, "--kv-heads", offsetof(synth_config, kv_heads)},
        {O_VOCAB, "--vocab", offsetof(synth_config, vocab)},
        {O_CTX, "--ctx", offsetof(synth_config, ctx)},
        {O_SHARDS, "--shards", offsetof(synth_config, shards)},
        {O_OUTLIERS, "--outliers", offsetof(synth_config, outliers)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].opt == opt) return parse_int(ints[i].name, arg, (int *)((char *)c + ints[i].offset));
    int v;
    char *end;
    switch (opt) {
    case O_ARCH:
        if ((v = synth_arch_from_name(arg)) >= 0) return c->arch = (synth_arch)v, 0;
        return hfq_cli_usage(TOOL, "--arch: expects llama, mistral or qwen2, got '%s'", arg);
    case O_DTYPE:
        if ((v = synth_dtype_from_name(arg)) >= 0) return c->dtype = (st_dtype)v, 0;
        return hfq_cli_usage(TOOL, "--dtype: expects f32, f16 or bf16, got '%s'", arg);
    case O_TIED: c->tied = 1; return 0;
    case O_UNTIED: c->tied = 0; return 0;
    case O_THETA: return parse_double("--rope-theta", arg, 1e30, &c->rope_theta);
    case O_EPS: return parse_double("--rms-eps", arg, 1, &c->rms_eps);
    case O_SEED:
        errno = 0;
        c->seed = strtoull(arg, &end, 10);
        if (!errno && end != arg && !*end && *arg >= '0' && *arg <= '9') return 0;
        return hfq_cli_usage(TOOL, "--seed: expects an unsigned 64-bit integer, got '%s'", arg);
    default:
        return hfq_cli_usage(TOOL, "unexpected option code %d", opt);
    }
}

static const struct option options[] = {
    {"arch", required_argument, 0, O_ARCH},      {"hidden", required_argument, 0, O_HIDDEN},
    {"ffn", required_argument, 0, O_FFN},        {"layers", required_argument, 0, O_LAYERS},
    {"heads", required_argument, 0, O_HEADS},    {"kv-heads", required_argument, 0, O_KV},
    {"vocab", required_argument, 0, O_VOCAB},    {"ctx", required_argument, 0, O_CTX},
    {"dtype", required_argument, 0, O_DTYPE},    {"shards", required_argument, 0, O_SHARDS},
    {"tied", no_argument, 0, O_TIED},            {"untied", no_argument, 0, O_UNTIED},
    {"rope-theta", required_argument, 0, O_THETA}, {"rms-eps", required_argument, 0, O_EPS},
    {"seed", required_argument, 0, O_SEED},      {"outliers", required_argument, 0, O_OUTLIERS},
    {"help", no_argument, 0, 'h'},               {"version", no_argument, 0, O_VERSION},
    {0, 0, 0, 0},
};
#define N_OPTIONS (sizeof options / sizeof options[0] - 1)

/* "unknown option" with the nearest of the long options above. */
static int unknown_option(const char *arg) {
    char names[N_OPTIONS][24];
    const char *known[N_OPTIONS + 1];
    for (size_t i = 0; i < N_OPTIONS; i++) {
        snprintf(names[i], sizeof names[i], "--%s", options[i].name);
        known[i] = names[i];
    }
    known[N_OPTIONS] = NULL;
    return hfq_cli_unknown_option(TOOL, arg, known);
}

/* Before any work: OUT_DIR is a folder, or can be made in one that exists,
 * and no file written into it is a folder (the rename would fail at the end,
 * after the others were replaced). Each file on its own: their names differ. */
static int check_out_dir(const char *dir, const synth_config *c, hfq_error *err) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        const hfq_path_role out = {dir, "OUT_DIR", false};
        return hfq_check_outputs(&out, 1, NULL, 0, err);
    }
    if (!S_ISDIR(st.st_mode)) return hfq_fail(err, dir, "OUT_DIR exists and is not a folder");
    for (int k = 0; k < synth_n_files(c); k++) {
        char name[64], path[PATH_MAX];
        synth_file_name(c, k, name, sizeof name);
        int n = snprintf(path, sizeof path, "%s/%s", dir, name);
        if (n < 0 || (size_t)n >= sizeof path) return hfq_fail(err, dir, "path too long");
        const hfq_path_role out = {path, "the output", false};
        if (hfq_check_outputs(&out, 1, NULL, 0, err)) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    synth_config c;
    synth_default_config(&c);
    int opt;
    opterr = 0; /* its messages are not ours: one line with the nearest option */
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return HFQ_EXIT_OK;
        }
        if (opt == O_VERSION) {
            hfq_cli_version(argc, argv, TOOL);
            return HFQ_EXIT_OK;
        }
        if (opt == ':') return hfq_cli_usage(TOOL, "%s needs a value", argv[optind - 1]);
        if (opt == '?') {
            char s[3] = {'-', (char)optopt, 0};
            return unknown_option(optopt ? s : argv[optind - 1]);
        }
        if (parse_option(opt, optarg, &c) != 0) return HFQ_EXIT_USAGE;
    }
    if (optind == argc) return hfq_cli_usage(TOOL, "expected OUT_DIR");
    if (optind != argc - 1) return hfq_cli_usage(TOOL, "expected one OUT_DIR, got '%s' too", argv[argc - 1]);
    hfq_error err = {{0}};
    if (synth_check_config(&c, &err) != 0) {
        /* synth_check_config names the tool itself */
        const char *why = strncmp(err.msg, TOOL ": ", strlen(TOOL) + 2) ? err.msg : err.msg + strlen(TOOL) + 2;
        return hfq_cli_usage(TOOL, "%s", why);
    }
    const char *dir = argv[optind];
    if (check_out_dir(dir, &c, &err) != 0) {
        fprintf(stderr, TOOL ": %s\n", err.msg);
        return HFQ_EXIT_USAGE;  /* a refused output, as in every tool */
    }
    int64_t n_params = 0;
    if (synth_write_model(dir, &c, isatty(STDERR_FILENO) ? show_progress : NULL, NULL, &n_params,
                          &err) != 0) {
        fprintf(stderr, TOOL ": %s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    printf("%s: %" PRId64 " parameters, %s, %d shard%s\n", dir, n_params,
           st_dtype_name(c.dtype), c.shards, c.shards == 1 ? "" : "s");
    return HFQ_EXIT_OK;
}
