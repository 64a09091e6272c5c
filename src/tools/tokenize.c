/* tokenize - text -> token ids with a model's tokenizer (or ids -> text). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "src/cli/cli.h"
#include "src/common/read_file.h"
#include "src/hf/arch.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/unicode.h"
#include "src/tokenizer/vocab.h"

#define MAX_INPUT ((size_t)1 << 31)
#define TOOL "tokenize"
#define SYNOPSIS "tokenize (MODEL.gguf | --tokenizer-dir DIR) (--text FILE | -p STRING | --batch-hex FILE)"

static void usage(FILE *out) {
    fprintf(out,
            "usage: " SYNOPSIS "\n"
            "                [options]\n"
            "\n"
            "Encodes text with the tokenizer stored in a GGUF file (tokenizer.* keys) or with the\n"
            "tokenizer of a Hugging Face model folder (tokenizer.model or tokenizer.json, with\n"
            "tokenizer_config.json / config.json) and prints the token ids, space-separated on one\n"
            "line.\n"
            "\n"
            "  MODEL.gguf           GGUF file with the tokenizer.* keys\n"
            "  --tokenizer-dir DIR  folder holding the Hugging Face tokenizer files instead\n"
            "  --text FILE          text to encode (bytes as they are)\n"
            "  -p STRING            text to encode\n"
            "  --batch-hex FILE     one text per line, written as hex bytes; prints one line of ids\n"
            "                       per input line (with --decode: ids in, hex text out; for tests)\n"
            "  --json               print {\"ids\": [...], \"pieces\": [...]} (pieces: token texts)\n"
            "  --no-bos             do not add the BOS/EOS tokens the vocabulary asks for\n"
            "  --parse-special      match control-token texts (e.g. <|eot_id|>) in the input\n"
            "  --decode             the input is token ids (whitespace-separated): print the text\n"
            "  --special            with --decode: render control tokens as their text\n"
            "  -h, --help           this help\n"
            "  --version            print the version\n"
            "\n"
            "Exit status: 0 ok, 1 bad input or tokenizer, 2 usage.\n");
}

/* Writes s[0..len) as a JSON string: valid UTF-8 passes, invalid bytes become U+FFFD. */
static void json_string(FILE *out, const char *s, size_t len) {
    fputc('"', out);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        size_t n = hfq_utf8_valid_len(s + i, len - i);
        if (n == 0) {
            fputs("\\ufffd", out);
            i++;
        } else if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
            i++;
        } else if (c < 0x20) {
            fprintf(out, "\\u%04x", c);
            i++;
        } else {
            fwrite(s + i, 1, n, out);
            i += n;
        }
    }
    fputc('"', out);
}

static void print_ids(const hfq_tokenizer *t, const int32_t *ids, size_t n, int json) {
    const hfq_vocab *v = hfq_tokenizer_vocab(t);
    if (!json) {
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
        return;
    }
    fputs("{\"ids\": [", stdout);
    for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    fputs("], \"pieces\": [", stdout);
    for (size_t i = 0; i < n; i++) {
        if (i) fputs(", ", stdout);
        json_string(stdout, v->tokens[ids[i]], v->token_lens[ids[i]]);
    }
    fputs("]}\n", stdout);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parses whitespace/comma-separated ids from s[0..len) into a malloc'd array. */
static int parse_ids(const char *s, size_t len, int32_t **out, size_t *n_out) {
    size_t n = 0, cap = 64;
    int32_t *ids = malloc(cap * sizeof *ids);
    for (size_t pos = 0; ids;) {
        while (pos < len && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == ','))
            pos++;
        if (pos == len) {
            *out = ids;
            *n_out = n;
            return 0;
        }
        long long v = 0;
        size_t start = pos;
        bool neg = s[pos] == '-';
        if (neg) pos++;
        while (pos < len && s[pos] >= '0' && s[pos] <= '9' && v <= INT32_MAX) v = v * 10 + (s[pos++] - '0');
        if (neg) v = -v;
        if (pos == start + neg || v < INT32_MIN || v > INT32_MAX ||
            (pos < len && s[pos] != ' ' && s[pos] != '\t' && s[pos] != '\n' && s[pos] != '\r' && s[pos] != ',')) {
            fprintf(stderr, "tokenize: \"%.20s\" is not a token id\n", s + start);
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *q = realloc(ids, 2 * cap * sizeof *ids);
            if (!q) break;
            ids = q;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
    }
    free(ids);
    fprintf(stderr, "tokenize: out of memory\n");
    return -1;
}

/* Decodes ids; prints the text, or its hex and a newline (batch mode). */
static int decode_one(const hfq_tokenizer *t, const char *s, size_t len, bool special, bool hex) {
    int32_t *ids;
    size_t n, text_len;
    hfq_error err;
    if (parse_ids(s, len, &ids, &n)) return HFQ_EXIT_FAILURE;
    char *text = hfq_detokenize(t, ids, n, special, &text_len, &err);
    free(ids);
    if (!text) {
        fprintf(stderr, "%s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    if (hex) {
        for (size_t i = 0; i < text_len; i++) printf("%02x", (unsigned char)text[i]);
        putchar('\n');
    } else {
        fwrite(text, 1, text_len, stdout);
    }
    free(text);
    return HFQ_EXIT_OK;
}

/* One input per line: hex bytes of a text (or, with decode, ids); one output
 * line each. */
static int run_batch(const hfq_tokenizer *t, const char *path, const char *data, size_t len, int flags, int json,
                     bool decode, bool special) {
    char *text = malloc(len / 2 + 1);
    if (!text) {
        fprintf(stderr, "tokenize: out of memory\n");
        return HFQ_EXIT_FAILURE;
    }
    int rc = HFQ_EXIT_OK;
    size_t line = 1;
    for (size_t pos = 0; pos < len && rc == HFQ_EXIT_OK; line++) {
        size_t end = pos;
        while (end < len && data[end] != '\n') end++;
        if (decode) {
            rc = decode_one(t, data + pos, end - pos, special, true);
            pos = end + 1;
            continue;
        }
        size_t n = 0;
        for (size_t i = pos; i < end; i += 2) {
            int hi = hexval((unsigned char)data[i]), lo = i + 1 < end ? hexval((unsigned char)data[i + 1]) : -1;
            if (hi < 0 || lo < 0) {
                fprintf(stderr, "%s: line %zu: not hex\n", path, line);
                rc = HFQ_EXIT_FAILURE;
                break;
            }
            text[n++] = (char)(hi * 16 + lo);
        }
        int32_t *ids;
        size_t n_ids;
        hfq_error err;
        if (rc == HFQ_EXIT_OK && hfq_tokenize(t, text, n, flags, &ids, &n_ids, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            rc = HFQ_EXIT_FAILURE;
        } else if (rc == HFQ_EXIT_OK) {
            print_ids(t, ids, n_ids, json);
            free(ids);
        }
        pos = end + 1;
    }
    free(text);
    return rc;
}

typedef struct options {
    const char *dir, *gguf_path, *text_file, *prompt, *batch;
    int json, flags;
    bool decode, special;
} options;

static const char *const known_options[] = {"--tokenizer-dir", "--text", "-p", "--batch-hex", "--json",
                                            "--no-bos", "--parse-special", "--decode", "--special",
                                            "-h", "--help", "--version", NULL};

/* Parses the command line into o; returns -1 when done (help, version), an
 * exit status for a usage error, or 0. */
static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **value = !strcmp(a, "--tokenizer-dir") ? &o->dir : !strcmp(a, "--text") ? &o->text_file :
                             !strcmp(a, "-p") ? &o->prompt : !strcmp(a, "--batch-hex") ? &o->batch : NULL;
        if (value) {
            if (i + 1 >= argc) return hfq_cli_usage(TOOL, "%s needs a value", a);
            *value = argv[++i];
        } else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--no-bos")) o->flags &= ~HFQ_TOK_ADD_SPECIAL;
        else if (!strcmp(a, "--parse-special")) o->flags |= HFQ_TOK_PARSE_SPECIAL;
        else if (!strcmp(a, "--decode")) o->decode = true;
        else if (!strcmp(a, "--special")) o->special = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--version")) {
            hfq_cli_version(argc, argv, TOOL);
            return -1;
        } else if (a[0] == '-' && a[1]) {
            return hfq_cli_unknown_option(TOOL, a, known_options);
        } else if (o->gguf_path) {
            return hfq_cli_usage(TOOL, "unexpected argument '%s' (one MODEL.gguf)", a);
        } else {
            o->gguf_path = a;
        }
    }
    if (!o->dir == !o->gguf_path)
        return hfq_cli_usage(TOOL, "%s; usage: " SYNOPSIS, o->dir ? "MODEL.gguf or --tokenizer-dir, not both"
                                                                  : "no MODEL.gguf or --tokenizer-dir");
    if (!!o->text_file + !!o->prompt + !!o->batch != 1)
        return hfq_cli_usage(TOOL, "one of --text, -p and --batch-hex; usage: " SYNOPSIS);
    return 0;
}

int main(int argc, char **argv) {
    options o = {.flags = HFQ_TOK_ADD_SPECIAL};
    int prc = parse_args(argc, argv, &o);
    if (prc) return prc < 0 ? HFQ_EXIT_OK : prc;
    hfq_error err;
    char *data = NULL;
    size_t len = 0;
    if (o.prompt) {
        data = strdup(o.prompt);
        len = strlen(o.prompt);
    } else {
        const char *path = o.text_file ? o.text_file : o.batch;
        if (hfq_read_file(path, MAX_INPUT, &data, &len, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return HFQ_EXIT_FAILURE;
        }
    }
    hfq_vocab *v = NULL;
    if (data && o.dir) {
        v = hfq_vocab_from_dir_as(o.dir, hf_arch_vocab_rules(o.dir), &err);   /* as hfconv reads it */
    } else if (data) {
        gguf_file *f = gguf_open(o.gguf_path, &err);
        v = f ? hfq_vocab_from_gguf(f, &err) : NULL;
        gguf_close(f);
    }
    hfq_tokenizer *t = v ? hfq_tokenizer_new(v, &err) : NULL;
    int rc = HFQ_EXIT_FAILURE;
    if (!data) fprintf(stderr, "tokenize: out of memory\n");
    else if (!t) fprintf(stderr, "%s\n", err.msg);
    else if (o.batch) rc = run_batch(t, o.batch, data, len, o.flags, o.json, o.decode, o.special);
    else if (o.decode) rc = decode_one(t, data, len, o.special, false);
    else {
        int32_t *ids;
        size_t n;
        if (hfq_tokenize(t, data, len, o.flags, &ids, &n, &err)) {
            fprintf(stderr, "%s\n", err.msg);
        } else {
            print_ids(t, ids, n, o.json);
            free(ids);
            rc = HFQ_EXIT_OK;
        }
    }
    if (fflush(stdout) != 0 && rc == HFQ_EXIT_OK) {
        fprintf(stderr, "tokenize: cannot write the output\n");
        rc = HFQ_EXIT_FAILURE;
    }
    hfq_tokenizer_free(t);
    hfq_vocab_free(v);
    free(data);
    return rc;
}
