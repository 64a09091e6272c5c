#include "src/cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <sys/resource.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

bool hfq_cli_help(int argc, char **argv, const char *usage) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return true;
        }
    return false;
}

bool hfq_cli_version(int argc, char **argv, const char *tool) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s (hfq) %s\n", tool, HFQ_VERSION);
            return true;
        }
    return false;
}

int hfq_cli_usage(const char *tool, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (see %s --help)\n", tool, msg, tool);
    return HFQ_EXIT_USAGE;
}

/* Levenshtein distance, capped at cap + 1 (names are short). */
static size_t edit_distance(const char *a, const char *b, size_t cap) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 63 || nb > 63) return cap + 1;
    size_t row[64];
    for (size_t j = 0; j <= nb; j++) row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[nb];
}

const char *hfq_cli_nearest(const char *arg, const char *const *known) {
    const size_t len = strlen(arg), cap = len / 3 > 2 ? len / 3 : 2;
    const char *best = NULL;
    size_t best_d = cap + 1;
    for (size_t k = 0; known && known[k]; k++) {
        size_t d = strncmp(known[k], arg, len) == 0 && len > 2 ? 1 : edit_distance(arg, known[k], cap);
        if (d < best_d) best_d = d, best = known[k];
    }
    return best;
}

int hfq_cli_unknown_option(const char *tool, const char *arg, const char *const *known) {
    const char *near = hfq_cli_nearest(arg, known);
    if (near) return hfq_cli_usage(tool, "unknown option '%s' (did you mean '%s'?)", arg, near);
    return hfq_cli_usage(tool, "unknown option '%s'", arg);
}

void hfq_progress_init(hfq_progress *p, bool enabled, double interval) {
    *p = (hfq_progress){.enabled = enabled, .tty = isatty(STDERR_FILENO) != 0,
                        .interval = interval > 0 ? interval : 5.0, .last = hfq_cli_seconds()};
}

void hfq_progress_report(hfq_progress *p, int64_t done, int64_t total, const char *fmt, ...) {
    if (!p->enabled) return;
    const bool end = done >= total;
    const double now = hfq_cli_seconds();
    if (!end && now - p->last < (p->tty ? 0.1 : p->interval)) return;
    p->last = now;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->tty) fprintf(stderr, "\r\033[K[%4" PRId64 "/%4" PRId64 "] %s%s", done, total, msg, end ? "\n" : "");
    else fprintf(stderr, "[%" PRId64 "/%" PRId64 "] %s\n", done, total, msg);
    fflush(stderr);
}

bool hfq_cli_json_number(cJSON *o, const char *name, double v) {
    if (!isfinite(v)) return cJSON_AddNullToObject(o, name) != NULL;
    char buf[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    return cJSON_AddRawToObject(o, name, buf) != NULL;
}

double hfq_cli_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int hfq_cli_int(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out, hfq_error *err) {
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < min || v > max)
        return hfq_fail(err, opt, "expects an integer in [%lld, %lld], got '%s'", (long long)min, (long long)max,
                        s ? s : "");
    *out = v;
    return 0;
}

int hfq_cli_float(const char *opt, const char *s, double min, double max, double *out, hfq_error *err) {
    char *end;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || !isfinite(v) || v < min || v > max)
        return hfq_fail(err, opt, "expects a number in [%g, %g], got '%s'", min, max, s ? s : "");
    *out = v;
    return 0;
}

static const char *const act_quant_names[] = {
    [HFQ_ACT_QUANT_AUTO] = "auto", [HFQ_ACT_QUANT_NONE] = "none", [HFQ_ACT_QUANT_DYNAMIC] = "dynamic",
    [HFQ_ACT_QUANT_STATIC] = "static"};

int hfq_cli_act_quant(const char *opt, const char *s, hfq_act_quant *out, hfq_error *err) {
    for (int i = HFQ_ACT_QUANT_AUTO; s && i <= HFQ_ACT_QUANT_STATIC; i++)
        if (strcmp(s, act_quant_names[i]) == 0) {
            *out = (hfq_act_quant)i;
            return 0;
        }
    return hfq_fail(err, opt, "expects auto, none, dynamic or static, got '%s'", s ? s : "");
}

const char *hfq_cli_act_quant_name(hfq_act_quant aq) {
    return aq >= HFQ_ACT_QUANT_AUTO && aq <= HFQ_ACT_QUANT_STATIC ? act_quant_names[aq] : "?";
}

/* One name of s[0..n); -1 when it names no KV type. */
static int kv_type_of(const char *s, size_t n) {
    char name[16];
    if (n == 0 || n >= sizeof name) return -1;
    memcpy(name, s, n);
    name[n] = 0;
    return hfq_kv_type_from_name(name);
}

int hfq_cli_kv_types(const char *opt, const char *s, hfq_kv_type *k, hfq_kv_type *v, hfq_error *err) {
    if (!s) return hfq_fail(err, opt, "needs a value");
    const char *comma = strchr(s, ',');
    const int tk = kv_type_of(s, comma ? (size_t)(comma - s) : strlen(s));
    const int tv = comma ? kv_type_of(comma + 1, strlen(comma + 1)) : tk;
    if (tk < 0 || tv < 0)
        return hfq_fail(err, opt, "expects K[,V] of f32, f16, bf16, q8_0, q4_0, q5_0, q5_1, fp8_e4m3, fp8_e5m2, "
                                  "got '%s'", s);
    *k = (hfq_kv_type)tk;
    *v = (hfq_kv_type)tv;
    return 0;
}

/* VmHWM of /proc/self/status in bytes, -1 without it: the process's own
 * peak (getrusage's ru_maxrss keeps, across exec, that of the image forked
 * from the parent). */
static int64_t vm_hwm(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (kb < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) != 1) kb = -1;
    fclose(f);
    return kb >= 0 ? (int64_t)kb * 1024 : -1;
}

int64_t hfq_cli_peak_rss(void) {
    const int64_t hwm = vm_hwm();
    if (hwm >= 0) return hwm;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return (int64_t)ru.ru_maxrss * 1024;   /* Linux: kilobytes */
}

int64_t hfq_cli_rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = -1;
    if (f) {
        if (fscanf(f, "%lld %lld", &size, &resident) != 2) resident = -1;
        fclose(f);
    }
    const long page = sysconf(_SC_PAGESIZE);
    return resident >= 0 && page > 0 ? (int64_t)resident * page : hfq_cli_peak_rss();
}

void hfq_cli_print_memory_plan(const hfq_cli_memory_plan *p, bool json) {
    const int64_t run = p->weights + p->kv_cache + p->buffers + p->loaded;
    const int64_t total = run > p->loaded_peak ? run : p->loaded_peak;
    if (json) {
        cJSON *j = cJSON_CreateObject(), *plan = cJSON_AddObjectToObject(j, "memory_plan");
        const struct { const char *key; int64_t v; } fields[] = {
            {"total", total}, {"weights", p->weights}, {"kv_cache", p->kv_cache}, {"buffers", p->buffers},
            {"loaded", p->loaded}, {"loaded_peak", p->loaded_peak}, {"contexts", p->n_contexts}, {"n_ctx", p->n_ctx},
        };
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            hfq_cli_json_number(plan, fields[i].key, (double)fields[i].v);
        cJSON *kv = cJSON_AddObjectToObject(plan, "kv_type");
        cJSON_AddStringToObject(kv, "k", hfq_kv_type_name(p->kv_k));
        cJSON_AddStringToObject(kv, "v", hfq_kv_type_name(p->kv_v));
        char *text = cJSON_Print(j);
        if (text) puts(text);
        free(text);
        cJSON_Delete(j);
        return;
    }
    printf("memory plan: %lld bytes (%.1f MiB), %lld context(s) of %lld positions, KV cache K %s V %s\n",
           (long long)total, (double)total / 1048576.0, (long long)p->n_contexts, (long long)p->n_ctx,
           hfq_kv_type_name(p->kv_k), hfq_kv_type_name(p->kv_v));
    printf("  weights   %14lld  the GGUF file(s), mapped\n", (long long)p->weights);
    printf("  KV cache  %14lld  K and V of every layer, every context full\n", (long long)p->kv_cache);
    printf("  buffers   %14lld  activations, rope tables, backend scratch, logits\n", (long long)p->buffers);
    printf("  loaded    %14lld  this process before its contexts (runtime, tokenizer, text): measured\n",
           (long long)p->loaded);
    printf("  (its peak so far %lld%s)\n", (long long)p->loaded_peak,
           p->loaded_peak > run ? ": above the rest, so the total" : "");
}

void hfq_cli_openmp_env(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", HFQ_OMP_SPINCOUNT, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* no /proc: carry on with libgomp's default */
}
