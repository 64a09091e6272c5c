/* hfq_expf_rows (src/eval/expf_rows.h) gives the C library's expf bit for
 * bit: every float of [-104, 0] (the log-softmax's arguments, l - max l; a
 * sample of them under the sanitizers), a sample of the positive ones and
 * of all bit patterns (NaN, infinities, the special cases' edges), with a
 * shift subtracted first, at every offset of a group of 8 (tails). Skips
 * where it uses expf itself (no AVX2 and FMA, or a library whose expf its
 * probes found different). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "src/eval/expf_rows.h"

#if defined(__SANITIZE_ADDRESS__)
#define STRIDE 61   /* the sanitized build: a sample */
#else
#define STRIDE 1
#endif

enum { BATCH = 1 << 16 };

static int bad;

/* Checks hfq_expf_rows on n values x (shift 0) against expf. */
static void check_values(const float *x, int64_t n, float *got) {
    hfq_expf_rows(x, 0.0f, n, got);
    for (int64_t i = 0; i < n; i++) {
        const float want = expf(x[i]);
        if (memcmp(&want, &got[i], sizeof want) != 0 && !(isnan(want) && isnan(got[i])) && bad++ < 5)
            fprintf(stderr, "expf(%a): %a, the library's %a\n", x[i], got[i], want);
    }
}

/* Every STRIDE-th float whose bits run from lo to hi (inclusive). */
static int64_t sweep(uint32_t lo, uint32_t hi, uint32_t stride) {
    static float x[BATCH], got[BATCH];
    int64_t n = 0, checked = 0;
    for (uint64_t b = lo; b <= hi; b += stride) {
        const uint32_t bits = (uint32_t)b;
        memcpy(&x[n++], &bits, sizeof bits);
        if (n == BATCH) check_values(x, n, got), checked += n, n = 0;
    }
    check_values(x, n, got);
    return checked + n;
}

int main(void) {
    if (!hfq_expf_rows_vector()) CHECK_SKIP("hfq_expf_rows uses expf itself here");
    /* -0 down to -104 (0xC2D00000): every float */
    const int64_t neg = sweep(0x80000000u, 0xC2D00000u, STRIDE);
    /* 0 up to 89, and all bit patterns, sampled */
    const int64_t pos = sweep(0x00000000u, 0x42B20000u, 97 * STRIDE);
    const int64_t all = sweep(0x00000000u, 0xFFFFFFFFu, 4099 * STRIDE);
    /* a shift, and tails: y[i] = expf(x[i] - shift) at lengths 0..17 from every offset */
    float x[40], got[40];
    for (int i = 0; i < 40; i++) x[i] = -3.0f + 0.37f * (float)i;
    for (int len = 0; len <= 17; len++)
        for (int off = 0; off + len <= 40 && off < 8; off++) {
            for (int i = 0; i < 40; i++) got[i] = -1.0f;
            hfq_expf_rows(x + off, 1.25f, len, got);
            for (int i = 0; i < 40; i++) {
                const float want = i < len ? expf(x[off + i] - 1.25f) : -1.0f;
                if (memcmp(&want, &got[i], sizeof want) != 0 && bad++ < 5)
                    fprintf(stderr, "length %d offset %d value %d: %a, want %a\n", len, off, i, got[i], want);
            }
        }
    CHECK_MSG(bad == 0, "%d values differ from expf", bad);
    if (bad == 0)
        printf("expf_rows == expf on %lld floats of [-104, 0], %lld of [0, 89], %lld bit patterns\n", (long long)neg,
               (long long)pos, (long long)all);
    return check_exit();
}
