/* rope_llama3.c - see src/hf/rope_llama3.h. */
#include "src/hf/rope_llama3.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frequency i as the converter computes it: float32 throughout. */
static float wavelength(float base, float dim, int64_t i) {
    float freq = 1.0f / powf(base, (float)(2 * i) / dim);
    return 2.0f * 3.14159265358979323846f / freq;
}

void hf_llama3_rope_factors(const hf_llama3_rope *p, float *out, int64_t n) {
    float base = (float)p->theta, dim = (float)p->head_dim;
    float old_ctx = (float)p->original_context;
    float low = (float)p->low_freq_factor, high = (float)p->high_freq_factor;
    float factor = (float)p->factor;
    float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    for (int64_t i = 0; i < n; i++) {
        float wavelen = wavelength(base, dim, i);
        if (wavelen < high_wavelen) out[i] = 1.0f;
        else if (wavelen > low_wavelen) out[i] = factor;
        else {
            float smooth = (old_ctx / wavelen - low) / (high - low);
            out[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
}

static bool reproduces(const hf_llama3_rope *p, const float *factors, int64_t n, float *tmp) {
    hf_llama3_rope_factors(p, tmp, n);
    return memcmp(tmp, factors, (size_t)n * sizeof *tmp) == 0;
}

/* v with `digits` significant decimal digits (0: v itself). */
static double round_digits(double v, int digits) {
    if (digits == 0) return v;
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", digits, v);
    return strtod(buf, NULL);
}

int hf_llama3_rope_recover(const float *factors, int64_t n, hf_llama3_rope *p, const char **why) {
    if (n < 1 || p->head_dim != 2 * n) return *why = "its length is not half the head size", -1;
    float factor = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (!(factors[i] >= 1.0f) || !isfinite(factors[i])) return *why = "holds a factor below 1 or not finite", -1;
        if (factors[i] > factor) factor = factors[i];
    }
    /* s_i = L / w_i - 1 over hi - 1 (lo = 1): a / w_i - s_i b = 1 in a = L,
     * b = hi - 1, solved by least squares over the smoothed frequencies */
    const float base = (float)p->theta, dim = (float)p->head_dim;
    double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
    int n_smooth = 0;
    for (int64_t i = 0; i < n; i++) {
        if (factors[i] == 1.0f || factors[i] == factor) continue;
        const double s = (1.0 / factors[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
        const double x = 1.0 / wavelength(base, dim, i), y = -s;
        saa += x * x, sab += x * y, sbb += y * y, sa += x, sb += y;
        n_smooth++;
    }
    if (n_smooth < 2) return *why = "fewer than two smoothed frequencies: its parameters are not determined", -1;
    const double det = saa * sbb - sab * sab;
    if (!(fabs(det) > 0)) return *why = "its smoothed frequencies do not determine the parameters", -1;
    const double a = (sa * sbb - sb * sab) / det, b = (saa * sb - sab * sa) / det;
    float *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) return *why = "out of memory", -1;
    hf_llama3_rope q = *p;
    q.factor = factor, q.low_freq_factor = 1.0;
    q.original_context = (int64_t)llround(a);
    bool found = false;
    /* the shortest high_freq_factor that reproduces every factor */
    for (int digits = 1; digits <= 17 && !found; digits++) {
        q.high_freq_factor = round_digits(1.0 + b, digits == 17 ? 0 : digits);
        found = q.original_context > 0 && q.high_freq_factor > 1.0 && reproduces(&q, factors, n, tmp);
    }
    free(tmp);
    if (!found) return *why = "no Llama 3 parameters reproduce its factors", -1;
    *p = q;
    return 0;
}
