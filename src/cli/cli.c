#include "src/cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool hfq_cli_help(int argc, char **argv, const char *usage) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return true;
        }
    return false;
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
