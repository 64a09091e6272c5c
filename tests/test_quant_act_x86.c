/* The runner's activation quantizers (the quantize_row of Q8_0, Q8_1 and
 * Q8_K in quant/qtype.c: Q8_0's and Q8_K's through their AVX2 twins of
 * quant/act_simd.c on this test's CPUs, which test_quant_simd holds to the
 * portable C) give bit for bit the bytes of what
 * llama.cpp's CPU backend runs on x86: ggml-cpu/arch/x86/quants.c's
 * quantize_row_q8_0/q8_1 (AVX2, round-half-even of x * 127 / amax) and
 * quantize_row_q8_K (the reference), compiled from .cache/llama.cpp into a
 * test-only library (tests/ref/meson.build). Rows: gaussian, uniform, heavy
 * tailed, all-zero and tiny/huge blocks, and blocks built so that x * id is
 * exactly k + 0.5 (ties, where round-half-even and roundf part), which also
 * checks that the data does separate ggml's x86 code from its reference.
 * Skips without the sources, off x86-64, or on a CPU without AVX2/F16C. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "quant/blocks.h"
#include "quant/qtype.h"
#include "quant_rng.h"

#if !defined(HFQ_HAVE_GGML_X86) || !defined(__x86_64__)
int main(void) {
    CHECK_SKIP("llama.cpp's x86 sources (.cache/llama.cpp) were absent at configure time, or this is not x86-64");
}
#else
void ggml_x86_quantize_row_q8_0(const float *x, void *y, int64_t k);
void ggml_x86_quantize_row_q8_1(const float *x, void *y, int64_t k);
void ggml_x86_quantize_row_q8_K(const float *x, void *y, int64_t k);
void quantize_row_q8_0_ref(const float *x, void *y, int64_t k);

enum { N = 1024, ROWS = 400 };

/* Row r: one of several distributions; ties in every fourth row. */
static void fill(int r, float *x) {
    const int kind = r % 8;
    for (int i = 0; i < N; i++) {
        float g = rnd_gauss();
        switch (kind) {
        case 0: x[i] = g; break;
        case 1: x[i] = 2 * rnd_uniform() - 1; break;
        case 2: x[i] = g * g * g * 30; break;                   /* heavy tails */
        case 3: x[i] = (i / 32) % 3 == 0 ? 0.0f : g; break;     /* all-zero blocks */
        case 4: x[i] = g * 1e-30f; break;                       /* d underflows fp16 */
        case 5: x[i] = g * 3e9f; break;                         /* d overflows fp16 */
        default: {
            /* amax 127 (id = 1) or 63.5 (id = 2): x * id = k + 0.5 exactly */
            const float amax = kind == 6 ? 127.0f : 63.5f, id = 127.0f / amax;
            const int k = (int)(rnd_u32() % 254) - 127;
            x[i] = i % 32 == 0 ? (rnd_u32() & 1 ? amax : -amax) : ((float)k + 0.5f) / id;
            if (rnd_u32() % 4 == 0) x[i] = g; /* some non-ties among them */
        }
        }
    }
}

static void check_type(hfq_qtype type, void (*theirs_fn)(const float *, void *, int64_t), const float *x, int r) {
    static uint8_t ours[N * 2], theirs[N * 2];
    const hfq_qtype_traits *t = hfq_qtype_get(type);
    const size_t bytes = (size_t)hfq_qtype_row_size(type, N);
    memset(ours, 0, bytes);
    memset(theirs, 0, bytes); /* ggml leaves an all-zero Q8_K block's bsums unwritten */
    t->quantize_row(x, ours, N);
    theirs_fn(x, theirs, N);
    size_t at = 0;
    while (at < bytes && ours[at] == theirs[at]) at++;
    CHECK_MSG(at == bytes, "%s row %d: byte %zu is %u, ggml's x86 code gives %u", t->name, r, at,
              at < bytes ? ours[at] : 0, at < bytes ? theirs[at] : 0);
}

int main(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c"))
        CHECK_SKIP("this CPU has no AVX2/F16C: llama.cpp's x86 quantizers cannot run here");
    static float x[N];
    static uint8_t a[N * 2], b[N * 2];
    int tie_rows_apart = 0;
    rnd_seed(19);
    for (int r = 0; r < ROWS; r++) {
        fill(r, x);
        check_type(HFQ_QT_Q8_0, ggml_x86_quantize_row_q8_0, x, r);
        check_type(HFQ_QT_Q8_1, ggml_x86_quantize_row_q8_1, x, r);
        check_type(HFQ_QT_Q8_K, ggml_x86_quantize_row_q8_K, x, r);
        if (r % 8 >= 6) {
            ggml_x86_quantize_row_q8_0(x, a, N);
            quantize_row_q8_0_ref(x, b, N);
            tie_rows_apart += memcmp(a, b, (size_t)hfq_qtype_row_size(HFQ_QT_Q8_0, N)) != 0;
        }
    }
    /* the ties must be where ggml's x86 code and its reference part */
    CHECK_MSG(tie_rows_apart == ROWS / 4, "only %d of %d tie rows separate x86 from the reference", tie_rows_apart,
              ROWS / 4);
    return check_exit();
}
#endif
