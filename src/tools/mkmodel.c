/* mkmodel - write a deterministic synthetic Hugging Face checkpoint. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/synth/synth.h"

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
            "  --help            this text\n"
            "\n"
            "Exit status: 0 written, 1 failure, 2 bad command line.\n",
            (double)SYNTH_OUTLIER_SCALE);
}

static int parse_int(const char *opt, const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) {
        fprintf(stderr, "mkmodel: %s wants an integer, not '%s'\n", opt, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_double(const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    if (errno || end == s || *end) {
        fprintf(stderr, "mkmodel: %s wants a number, not '%s'\n", opt, s);
        return -1;
    }
    return 0;
}

static void show_progress(void *ctx, uint64_t done, uint64_t total) {
    (void)ctx;
    fprintf(stderr, "\rmkmodel: %3d%% of %.1f MB", total ? (int)(100.0 * done / total) : 100,
            total / 1e6);
    if (done == total) fputc('\n', stderr);
}

enum { O_ARCH = 256, O_HIDDEN, O_FFN, O_LAYERS, O_HEADS, O_KV, O_VOCAB, O_CTX, O_DTYPE,
       O_SHARDS, O_TIED, O_UNTIED, O_THETA, O_EPS, O_SEED, O_OUTLIERS, O_HELP };

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
        fprintf(stderr, "mkmodel: unknown --arch '%s' (llama, mistral, qwen2)\n", arg);
        return -1;
    case O_DTYPE:
        if ((v = synth_dtype_from_name(arg)) >= 0) return c->dtype = (st_dtype)v, 0;
        fprintf(stderr, "mkmodel: unknown --dtype '%s' (f32, f16, bf16)\n", arg);
        return -1;
    case O_TIED: c->tied = 1; return 0;
    case O_UNTIED: c->tied = 0; return 0;
    case O_THETA: return parse_double("--rope-theta", arg, &c->rope_theta);
    case O_EPS: return parse_double("--rms-eps", arg, &c->rms_eps);
    case O_SEED:
        errno = 0;
        c->seed = strtoull(arg, &end, 10);
        if (!errno && end != arg && !*end && *arg != '-') return 0;
        fprintf(stderr, "mkmodel: --seed wants a non-negative integer, not '%s'\n", arg);
        return -1;
    default:
        fprintf(stderr, "mkmodel: try --help\n");
        return -1;
    }
}

int main(int argc, char **argv) {
    static const struct option options[] = {
        {"arch", required_argument, 0, O_ARCH},      {"hidden", required_argument, 0, O_HIDDEN},
        {"ffn", required_argument, 0, O_FFN},        {"layers", required_argument, 0, O_LAYERS},
        {"heads", required_argument, 0, O_HEADS},    {"kv-heads", required_argument, 0, O_KV},
        {"vocab", required_argument, 0, O_VOCAB},    {"ctx", required_argument, 0, O_CTX},
        {"dtype", required_argument, 0, O_DTYPE},    {"shards", required_argument, 0, O_SHARDS},
        {"tied", no_argument, 0, O_TIED},            {"untied", no_argument, 0, O_UNTIED},
        {"rope-theta", required_argument, 0, O_THETA}, {"rms-eps", required_argument, 0, O_EPS},
        {"seed", required_argument, 0, O_SEED},      {"outliers", required_argument, 0, O_OUTLIERS},
        {"help", no_argument, 0, O_HELP},            {0, 0, 0, 0},
    };
    synth_config c;
    synth_default_config(&c);
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == O_HELP) {
            usage(stdout);
            return HFQ_EXIT_OK;
        }
        if (parse_option(opt, optarg, &c) != 0) return HFQ_EXIT_USAGE;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "mkmodel: expected one OUT_DIR (try --help)\n");
        return HFQ_EXIT_USAGE;
    }
    hfq_error err = {{0}};
    if (synth_check_config(&c, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return HFQ_EXIT_USAGE;
    }
    int64_t n_params = 0;
    const char *dir = argv[optind];
    if (synth_write_model(dir, &c, isatty(STDERR_FILENO) ? show_progress : NULL, NULL, &n_params,
                          &err) != 0) {
        fprintf(stderr, "mkmodel: %s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    printf("%s: %" PRId64 " parameters, %s, %d shard%s\n", dir, n_params,
           st_dtype_name(c.dtype), c.shards, c.shards == 1 ? "" : "s");
    return HFQ_EXIT_OK;
}
