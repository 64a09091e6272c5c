/* cli.h - command-line numbers for the tools: whole strings only, in range,
 * with one-line messages naming the option. */
#ifndef HFQ_SRC_CLI_CLI_H
#define HFQ_SRC_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "kernels/ops.h"

/* Called first in main by the tools that run OpenMP threads: where neither
 * OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, sets GOMP_SPINCOUNT to
 * HFQ_OMP_SPINCOUNT and runs the program again with it (/proc/self/exe;
 * libgomp reads it only as it loads). A thread that reaches a barrier first
 * then spins about 0.1 ms before it sleeps, not libgomp's default 300000
 * spins: on a machine whose cores other work shares, a thread spinning for
 * a partner that is not running held each of the thousands of barriers a
 * second for a scheduler slice (2 threads beside 2 busy processes, Gemma 3
 * 270M ppl-eval ctx 256 x 4: 24 s -> 6.7 s, decode 39 -> 178 tokens/s;
 * alone the same speed). Returns only when it does not re-run (set
 * already, or the exec failed). */
#define HFQ_OMP_SPINCOUNT "10000"
void hfq_cli_openmp_env(char **argv);

/* True (after printing usage to stdout) when -h or --help is among the arguments. */
bool hfq_cli_help(int argc, char **argv, const char *usage);

/* True (after printing "TOOL (hfq) VERSION" to stdout) when --version is
 * among the arguments. */
bool hfq_cli_version(int argc, char **argv, const char *tool);

/* A usage error in one line on stderr, "TOOL: MESSAGE (see TOOL --help)";
 * returns HFQ_EXIT_USAGE. */
int hfq_cli_usage(const char *tool, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "TOOL: unknown option 'ARG' (did you mean '--X'?) (see TOOL --help)" in
 * one line: the nearest of known (NULL-terminated) by edit distance, when
 * one is near enough; returns HFQ_EXIT_USAGE. */
int hfq_cli_unknown_option(const char *tool, const char *arg, const char *const *known);

/* The nearest of known (NULL-terminated) to arg, or NULL when none is within
 * a third of its length (at least 2 edits); a known option that arg is a
 * prefix of counts as near. */
const char *hfq_cli_nearest(const char *arg, const char *const *known);

/* Progress of long work on stderr: on a terminal one line redrawn at most
 * every 0.1 s; elsewhere (CI logs, pipes) a full line every `interval`
 * seconds and at the end, so logs show work advancing; nothing when
 * disabled. */
typedef struct hfq_progress {
    bool enabled, tty;
    double interval, last;
} hfq_progress;

/* enabled: false for --quiet; interval <= 0: 5 s. */
void hfq_progress_init(hfq_progress *p, bool enabled, double interval);
/* Reports done of total (done == total ends the line); msg is printf-style. */
void hfq_progress_report(hfq_progress *p, int64_t done, int64_t total, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Adds number v to object o as its shortest text that reads back as exactly
 * v (cJSON's own printing may drop the last bits: a value read from the JSON
 * and given back as a gate's limit must compare equal); NaN/Inf as null.
 * Returns false when out of memory. */
struct cJSON;
bool hfq_cli_json_number(struct cJSON *o, const char *name, double v);

/* Seconds on a monotonic clock, for throughput figures. */
double hfq_cli_seconds(void);

/* The process's peak resident memory so far in bytes (/proc/self/status
 * VmHWM, else getrusage's ru_maxrss); -1 when the system does not say. */
int64_t hfq_cli_peak_rss(void);
/* The resident memory now in bytes (/proc/self/statm); the peak where
 * that file is missing. */
int64_t hfq_cli_rss(void);

/* A run's memory, planned before it (--dry-run of ppl-eval and generate). */
typedef struct hfq_cli_memory_plan {
    int64_t weights;        /* the GGUF files, mapped (every byte is read) */
    int64_t kv_cache;       /* K and V of every context, full */
    int64_t buffers;        /* activations, rope tables, backend scratch, logits, statistics */
    int64_t loaded;         /* the process's resident memory before its contexts: measured */
    int64_t loaded_peak;    /* ... and its peak so far (tokenizing a long text): measured */
    int64_t n_contexts, n_ctx;
    hfq_kv_type kv_k, kv_v;
} hfq_cli_memory_plan;

/* Prints the plan to stdout: lines of text, or one JSON object. Its total,
 * the peak the run will reach: loaded + weights + KV cache + buffers, or
 * loaded_peak when that is more. */
void hfq_cli_print_memory_plan(const hfq_cli_memory_plan *p, bool json);

/* Parses s as a decimal integer in [min, max]; -1 with err naming opt. */
int hfq_cli_int(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out, hfq_error *err);

/* Parses s as a finite number in [min, max]; -1 with err naming opt. */
int hfq_cli_float(const char *opt, const char *s, double min, double max, double *out, hfq_error *err);

/* Parses s as an activation quantization mode: "auto" (what the model file
 * says), "none", "dynamic" or "static"; -1 with err naming opt. */
int hfq_cli_act_quant(const char *opt, const char *s, hfq_act_quant *out, hfq_error *err);

/* The name hfq_cli_act_quant parses for a mode. */
const char *hfq_cli_act_quant_name(hfq_act_quant aq);

/* Parses s as KV cache formats "K[,V]" (kernels/kv_type.h names: f32, f16,
 * bf16, q8_0, q4_0, q5_0, q5_1, fp8_e4m3, fp8_e5m2); one name is both K
 * and V. -1 with err naming opt. */
int hfq_cli_kv_types(const char *opt, const char *s, hfq_kv_type *k, hfq_kv_type *v, hfq_error *err);

#endif
