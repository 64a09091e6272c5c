#include "src/cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
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
