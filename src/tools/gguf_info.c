/* gguf-info - print a GGUF file's metadata and tensor table; --verify checks
 * the stored XXH3-64 of every tensor. See docs/gguf-info.md. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "src/cli/cli.h"

#define TOOL "gguf-info"

#define TEXT_ARRAY_ELEMS 8    /* array elements shown in text mode */
#define JSON_ARRAY_ELEMS 16   /* ... in JSON mode */
#define TEXT_STRING_BYTES 160 /* string bytes shown in text mode */

typedef struct options {
    const char *path;
    bool json, verify, no_tensors, full;
} options;

static const char usage_text[] =
    "usage: gguf-info FILE.gguf [--json] [--verify] [--no-tensors] [--full-arrays]\n"
    "\n"
    "Prints the metadata and the tensor table of a GGUF file after validating it.\n"
    "\n"
    "  --json         print one JSON document (arrays: type, count and the first 16\n"
    "                 elements unless --full-arrays)\n"
    "  --verify       recompute the XXH3-64 of every tensor and compare it with the\n"
    "                 hashes stored in " GGUF_KEY_TENSOR_HASHES "; files without them\n"
    "                 (e.g. written by llama.cpp) get a note and pass\n"
    "  --no-tensors   leave out the tensor table\n"
    "  --full-arrays  show every array element (and whole strings in text mode)\n"
    "  -h, --help     show this help\n"
    "  --version      print the version\n"
    "\n"
    "Exit status: 0 ok, 1 unreadable or invalid file, 2 bad usage,\n"
    "4 --verify found a tensor whose data does not match its stored hash.\n";

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, uint64_t n) {
    size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : s[0] >= 0xe0 && s[0] < 0xf0 ? 3
               : s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

/* Prints s quoted: JSON escapes (invalid UTF-8 as U+FFFD) or, in text mode,
 * C-like escapes (invalid bytes as \xNN). At most max bytes; a cut string
 * ends with "..." after the quote. */
static void put_string(FILE *out, const char *s, uint64_t len, uint64_t max, bool json) {
    const unsigned char *u = (const unsigned char *)s;
    uint64_t i = 0;
    fputc('"', out);
    while (i < len && i < max) {
        unsigned char c = u[i];
        size_t n = utf8_len(u + i, len - i);
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c == '\r') fputs("\\r", out);
        else if (c < 0x20 || c == 0x7f) fprintf(out, json ? "\\u%04x" : "\\x%02x", c);
        else if (n == 0) fprintf(out, json ? "\\ufffd" : "\\x%02x", c);
        else fwrite(u + i, 1, n, out);
        i += n ? n : 1;
    }
    fputc('"', out);
    if (i < len) fprintf(out, "...(%" PRIu64 " bytes)", len);
}

/* A key or tensor name for text output: control bytes shown as '?'. */
static const char *plain(char *buf, size_t n, const char *s) {
    size_t k = 0;
    for (; s[k] && k + 1 < n; k++) buf[k] = (unsigned char)s[k] < 0x20 || s[k] == 0x7f ? '?' : s[k];
    buf[k] = '\0';
    return buf;
}

/* Shortest decimal that reads back as the same float/double. */
static void put_float(FILE *out, double v, bool is_f32, bool json) {
    if (!isfinite(v)) {
        const char *s = isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
        fprintf(out, json ? "\"%s\"" : "%s", s);
        return;
    }
    char buf[40];
    for (int prec = is_f32 ? 6 : 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (is_f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
    }
    /* always look like a float, so JSON readers keep -0.0 and the type */
    fputs(buf, out);
    if (!strpbrk(buf, ".e")) fputs(".0", out);
}

/* One numeric element of type t stored at p (little-endian, unaligned). */
static void put_number(FILE *out, gguf_vtype t, const unsigned char *p, bool json) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } v;
    memcpy(&v, p, gguf_vtype_size(t));
    switch (t) {
    case GGUF_VT_UINT8: fprintf(out, "%" PRIu8, v.u8); break;
    case GGUF_VT_INT8: fprintf(out, "%" PRId8, v.i8); break;
    case GGUF_VT_UINT16: fprintf(out, "%" PRIu16, v.u16); break;
    case GGUF_VT_INT16: fprintf(out, "%" PRId16, v.i16); break;
    case GGUF_VT_UINT32: fprintf(out, "%" PRIu32, v.u32); break;
    case GGUF_VT_INT32: fprintf(out, "%" PRId32, v.i32); break;
    case GGUF_VT_UINT64: fprintf(out, "%" PRIu64, v.u64); break;
    case GGUF_VT_INT64: fprintf(out, "%" PRId64, v.i64); break;
    case GGUF_VT_FLOAT32: put_float(out, v.f32, true, json); break;
    case GGUF_VT_FLOAT64: put_float(out, v.f64, false, json); break;
    default: fputs(v.u8 ? "true" : "false", out); break;  /* BOOL */
    }
}

/* The value of key i: a scalar, or an array's elements (abbreviated unless
 * --full-arrays); in JSON the array header fields come first. */
static void put_value(FILE *out, const gguf_file *f, int64_t i, const options *o) {
    uint64_t max_bytes = o->json || o->full ? UINT64_MAX : TEXT_STRING_BYTES;
    gguf_vtype t = gguf_kv_type(f, i);
    uint64_t len;
    if (t == GGUF_VT_STRING) {
        const char *s = gguf_get_str(f, i, &len, NULL);
        put_string(out, s, len, max_bytes, o->json);
        return;
    }
    if (t != GGUF_VT_ARRAY) {
        put_number(out, t, gguf_get_val_data(f, i), o->json);
        return;
    }
    gguf_vtype et = gguf_arr_type(f, i);
    int64_t n = gguf_arr_n(f, i), shown = n;
    if (!o->full) {
        int64_t max = o->json ? JSON_ARRAY_ELEMS : TEXT_ARRAY_ELEMS;
        if (shown > max) shown = max;
    }
    const unsigned char *data = gguf_arr_data(f, i);
    fputc('[', out);
    for (int64_t j = 0; j < shown; j++) {
        if (j) fputs(", ", out);
        if (et == GGUF_VT_STRING) {
            const char *s = gguf_arr_str(f, i, j, &len);
            put_string(out, s, len, max_bytes, o->json);
        } else {
            put_number(out, et, data + (uint64_t)j * gguf_vtype_size(et), o->json);
        }
    }
    if (shown < n && !o->json) fputs(", ...", out);
    fputc(']', out);
}

static void put_shape(FILE *out, const gguf_tensor_info *t) {
    fputc('[', out);
    for (int d = 0; d < t->n_dims; d++) fprintf(out, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    fputc(']', out);
}

static const char *type_name(uint32_t type) {
    const ggml_type_info *ti = ggml_type_get(type);
    return ti ? ti->name : "?";
}

static void print_text(FILE *out, const gguf_file *f, const options *o) {
    fprintf(out, "%s: GGUF v%" PRIu32 ", %" PRId64 " keys, %" PRId64 " tensors, alignment %" PRIu32
            ", data at %" PRIu64 ", %" PRIu64 " bytes\n",
            gguf_path(f), gguf_version(f), gguf_n_kv(f), gguf_n_tensors(f), gguf_alignment(f),
            gguf_data_offset(f), gguf_file_size(f));
    if (gguf_n_files(f) > 1)
        fprintf(out, "split GGUF: %d files (bytes: all of them; tensor offsets: within each one's data section)\n",
                gguf_n_files(f));
    fputs("metadata:\n", out);
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        char key[512];
        fprintf(out, "  %s: ", plain(key, sizeof key, gguf_kv_key(f, i)));
        if (gguf_kv_type(f, i) == GGUF_VT_ARRAY)
            fprintf(out, "arr[%s; %" PRId64 "] ", gguf_vtype_name(gguf_arr_type(f, i)), gguf_arr_n(f, i));
        else
            fprintf(out, "%s ", gguf_vtype_name(gguf_kv_type(f, i)));
        put_value(out, f, i, o);
        fputc('\n', out);
    }
    if (o->no_tensors) return;
    const bool split = gguf_n_files(f) > 1;
    fprintf(out, "tensors:\n  %5s %-40s %-8s %-24s %14s %14s%s\n", "#", "name", "type", "ne", "bytes", "offset",
            split ? "  file" : "");
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        char shape[128];
        int n = snprintf(shape, sizeof shape, "[%" PRId64, t->ne[0]);
        for (int d = 1; d < t->n_dims; d++) n += snprintf(shape + n, sizeof shape - (size_t)n, ", %" PRId64, t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        char name[GGUF_MAX_NAME + 1];
        fprintf(out, "  %5" PRId64 " %-40s %-8s %-24s %14" PRIu64 " %14" PRIu64, i, plain(name, sizeof name, t->name),
                type_name(t->type), shape, t->nbytes, t->offset);
        if (split) fprintf(out, "  %4d", t->file + 1);
        fputc('\n', out);
    }
}

static void print_json_start(FILE *out, const gguf_file *f, const options *o) {
    fputs("{\n  \"file\": ", out);
    put_string(out, gguf_path(f), strlen(gguf_path(f)), UINT64_MAX, true);
    fprintf(out, ",\n  \"version\": %" PRIu32 ",\n  \"alignment\": %" PRIu32 ",\n  \"data_offset\": %" PRIu64
            ",\n  \"file_size\": %" PRIu64 ",\n  \"n_files\": %d,\n  \"n_kv\": %" PRId64 ",\n  \"n_tensors\": %" PRId64
            ",\n  \"metadata\": {",
            gguf_version(f), gguf_alignment(f), gguf_data_offset(f), gguf_file_size(f), gguf_n_files(f), gguf_n_kv(f),
            gguf_n_tensors(f));
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const char *key = gguf_kv_key(f, i);
        fputs(i ? ",\n    " : "\n    ", out);
        put_string(out, key, strlen(key), UINT64_MAX, true);
        fprintf(out, ": {\"type\": \"%s\", ", gguf_vtype_name(gguf_kv_type(f, i)));
        if (gguf_kv_type(f, i) == GGUF_VT_ARRAY) {
            int64_t n = gguf_arr_n(f, i);
            fprintf(out, "\"elem_type\": \"%s\", \"count\": %" PRId64 ", \"truncated\": %s, ",
                    gguf_vtype_name(gguf_arr_type(f, i)), n, !o->full && n > JSON_ARRAY_ELEMS ? "true" : "false");
        }
        fputs("\"value\": ", out);
        put_value(out, f, i, o);
        fputc('}', out);
    }
    fputs(gguf_n_kv(f) ? "\n  }" : "}", out);
    if (o->no_tensors) return;
    fputs(",\n  \"tensors\": [", out);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", out);
        put_string(out, t->name, strlen(t->name), UINT64_MAX, true);
        fprintf(out, ", \"type\": \"%s\", \"type_id\": %" PRIu32 ", \"ne\": ", type_name(t->type), t->type);
        put_shape(out, t);
        fprintf(out, ", \"n_bytes\": %" PRIu64 ", \"offset\": %" PRIu64 ", \"file\": %d}", t->nbytes, t->offset,
                t->file);
    }
    fputs(gguf_n_tensors(f) ? "\n  ]" : "]", out);
}

/* Recomputes every tensor's hash; returns the exit status. Mismatches are
 * listed on out (and counted on stderr); a file without stored hashes passes
 * with a note. */
static int verify(FILE *out, const gguf_file *f, const options *o) {
    int64_t n = gguf_n_tensors(f), bad = 0;
    hfq_error err = {{0}};
    uint64_t stored = 0;
    int have = n > 0 ? gguf_stored_hash(f, 0, &stored, &err) : 1;
    bool tty = isatty(STDERR_FILENO);
    if (o->json) fputs(",\n  \"verify\": {", out);
    if (have < 0) {
        fprintf(stderr, "%s\n", err.msg);
        if (o->json) {
            fputs("\"status\": \"malformed\", \"error\": ", out);
            put_string(out, err.msg, strlen(err.msg), UINT64_MAX, true);
            fputs("}", out);
        } else {
            fprintf(out, "verify: FAILED: %s\n", err.msg);
        }
        return HFQ_EXIT_VERIFY;
    }
    if (have == 0) {
        if (o->json) fputs("\"status\": \"no_hashes\"}", out);
        else fprintf(out, "verify: note: no stored hashes (%s absent); nothing to verify\n", GGUF_KEY_TENSOR_HASHES);
        return HFQ_EXIT_OK;
    }
    if (o->json) fputs("\"mismatches\": [", out);
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        gguf_stored_hash(f, i, &stored, &err);
        uint64_t computed = gguf_tensor_hash(t);
        if (tty) fprintf(stderr, "\rverifying %" PRId64 "/%" PRId64, i + 1, n);
        if (computed == stored) continue;
        if (o->json) {
            fputs(bad ? ", " : "", out);
            put_string(out, t->name, strlen(t->name), UINT64_MAX, true);
        } else {
            char name[GGUF_MAX_NAME + 1];
            fprintf(out, "verify: tensor '%s': hash mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")\n",
                    plain(name, sizeof name, t->name), stored, computed);
        }
        bad++;
    }
    if (tty) fputc('\n', stderr);
    if (o->json) fprintf(out, "], \"status\": \"%s\"}", bad ? "mismatch" : "ok");
    else if (!bad) fprintf(out, "verify: all %" PRId64 " tensor hashes match\n", n);
    if (!bad) return HFQ_EXIT_OK;
    fprintf(stderr, "%s: verify failed: %" PRId64 " of %" PRId64 " tensors do not match their stored hashes\n",
            gguf_path(f), bad, n);
    return HFQ_EXIT_VERIFY;
}

static const char *const known_options[] = {"--json", "--verify", "--no-tensors", "--full-arrays",
                                            "-h", "--help", "--version", NULL};

/* Parses the command line into o; returns -1 when done (help, version), an
 * exit status for a usage error, or 0. */
static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return -1;
        }
        if (strcmp(a, "--version") == 0) {
            hfq_cli_version(argc, argv, TOOL);
            return -1;
        }
        if (strcmp(a, "--json") == 0) o->json = true;
        else if (strcmp(a, "--verify") == 0) o->verify = true;
        else if (strcmp(a, "--no-tensors") == 0) o->no_tensors = true;
        else if (strcmp(a, "--full-arrays") == 0) o->full = true;
        else if (a[0] == '-' && a[1] != '\0') return hfq_cli_unknown_option(TOOL, a, known_options);
        else if (o->path) return hfq_cli_usage(TOOL, "more than one file given ('%s' and '%s')", o->path, a);
        else o->path = a;
    }
    return o->path ? 0 : hfq_cli_usage(TOOL, "no file given");
}

int main(int argc, char **argv) {
    options o = {0};
    int prc = parse_args(argc, argv, &o);
    if (prc) return prc < 0 ? HFQ_EXIT_OK : prc;
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(o.path, &err);
    if (!f) {
        fprintf(stderr, "%s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    int rc = HFQ_EXIT_OK;
    if (o.json) print_json_start(stdout, f, &o);
    else print_text(stdout, f, &o);
    if (o.verify) rc = verify(stdout, f, &o);
    if (o.json) fputs("\n}\n", stdout);
    gguf_close(f);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "gguf-info: cannot write output\n");
        return HFQ_EXIT_FAILURE;
    }
    return rc;
}
