/* bench_gptq - the costs of GPTQ (quant/gptq.h) for one weight shape:
 * the Hessian pass's accumulation (calib/hessian.h: H += X^T X over TOKENS
 * calibration tokens, in batches of 64 as a calibration run observes them),
 * the preparation of U (damping, factorization, inverse: O(N^3)) and the
 * error-feedback encoding of a ROWS x N weight in FMT, on THREADS threads.
 * Prints wall and CPU seconds of each step and the process's peak resident memory
 * (the Hessian is N^2 doubles). Random inputs; a benchmark, never a test.
 *
 * usage: bench_gptq [N [ROWS [TOKENS [THREADS [FMT]]]]]   (default 2048 8192 2048 0 Q4_K)
 * A 1B model (Llama-3.2-1B: hidden 2048, FFN 8192): N 2048 ROWS 8192 is
 * ffn_gate / ffn_up, N 8192 ROWS 2048 ffn_down.
 *
 *        bench_gptq model [TOKENS [THREADS [CALIB_TOKENS]]]   (default 512 0 65536)
 * TinyLlama 1.1B's inputs (hidden 2048, FFN 5632, 22 layers, 32000 words;
 * per layer attn_q's input (q/k/v: 2560 rows), attn_output's, ffn_gate's
 * (gate/up: 11264 rows), ffn_down's (5632 channels), then output.weight's):
 * each input's accumulation of TOKENS tokens in batches of 512 (a
 * calibration chunk), its U and the encoding of 256 of its rows in Q4_K
 * (scaled to all rows), then the layer's and the model's times extrapolated
 * to CALIB_TOKENS calibration tokens, and the Hessian bytes of a layer and
 * of the default --gptq-memory window. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "calib/hessian.h"
#include "quant/gptq.h"
#include "src/quantize/calib_gptq.h"

static double wall(void) { return omp_get_wtime(); }

/* CPU seconds of the whole process (all threads): on a shared machine wall
 * time also counts the time other processes held the cores. */
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

typedef struct cost {
    double t_h, c_h, t_p, c_p, t_e, c_e; /* wall / CPU s: accumulation, U, encoding */
} cost;

/* The three steps for an N-channel input over tokens (in batches) and a
 * rows x n weight in c; 0, or -1 with a message. */
static int measure(int64_t n, int64_t rows, int64_t tokens, int64_t batch, int threads, const hfq_gptq_codec *c,
                   cost *r) {
    uint64_t seed = 21;
    float *x = malloc((size_t)(batch * n) * sizeof *x), *w = malloc((size_t)(rows * n) * sizeof *w);
    void *out = malloc((size_t)rows * (size_t)(n / c->block) * c->block_bytes);
    hfq_hessian_input in = {.name = "w", .n = n};
    hfq_hessian_set s;
    if (!x || !w || !out || hfq_hessian_set_init(&s, &in, 1, threads, &(hfq_error){{0}})) {
        fprintf(stderr, "bench_gptq: out of memory\n");
        return -1;
    }
    for (int64_t i = 0; i < rows * n; i++) w[i] = uniform(&seed);
    memset(r, 0, sizeof *r);
    for (int64_t done = 0; done < tokens; done += batch) {
        const int64_t b = tokens - done < batch ? tokens - done : batch;
        for (int64_t i = 0; i < b * n; i++) x[i] = uniform(&seed) + (i % n == 0 ? uniform(&seed) : 0.0f);
        const double t0 = wall(), c0 = cpu();
        hfq_hessian_add(&s.e[0], x, b, threads);
        r->t_h += wall() - t0;
        r->c_h += cpu() - c0;
    }
    double t0 = wall(), c0 = cpu();
    const int bad = hfq_gptq_prepare(s.e[0].h, n, HFQ_GPTQ_DEFAULT_DAMP, threads);
    r->t_p = wall() - t0;
    r->c_p = cpu() - c0;
    t0 = wall();
    c0 = cpu();
    const int oom = bad ? 0 : hfq_gptq_encode(c, s.e[0].h, w, rows, n, NULL, 0.0f, 0, out, threads);
    r->t_e = wall() - t0;
    r->c_e = cpu() - c0;
    hfq_hessian_set_free(&s);
    free(x);
    free(w);
    free(out);
    if (bad || oom) fprintf(stderr, "bench_gptq: %s\n", bad ? "not positive definite" : "out of memory");
    return bad || oom ? -1 : 0;
}

/* TinyLlama 1.1B's inputs: see the usage above. */
static int model(int64_t tokens, int threads, int64_t calib) {
    enum { LAYERS = 22, SLAB = 256 };
    static const struct {
        const char *name;
        int64_t n, rows;
    } in[] = {{"blk.N.attn_q (q, k, v)", 2048, 2560}, {"blk.N.attn_output", 2048, 2048},
              {"blk.N.ffn_gate (gate, up)", 2048, 11264}, {"blk.N.ffn_down", 5632, 2048}, {"output", 2048, 32000}};
    const int n_in = (int)(sizeof in / sizeof *in);
    const hfq_gptq_codec *c = hfq_gptq_codec_get(HFQ_QT_Q4_K);
    const double scale = (double)calib / (double)tokens;
    double layer[3] = {0}, out[3] = {0}; /* CPU s for calib tokens: accumulation, U, encoding */
    int64_t layer_bytes = 0;
    printf("TinyLlama 1.1B inputs, %lld tokens measured in batches of 512, %d threads, Q4_K; CPU s\n\n"
           "| input | n | rows | Hessian MiB | accumulate %lld tok wall / CPU s | GFLOP/CPU-s | U wall / CPU s | "
           "encode all rows CPU s |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
           (long long)tokens, threads, (long long)tokens);
    for (int i = 0; i < n_in; i++) {
        cost r;
        const int64_t slab = in[i].rows < SLAB ? in[i].rows : SLAB;
        if (measure(in[i].n, slab, tokens, 512, threads, c, &r)) return 1;
        const double enc = r.c_e * (double)in[i].rows / (double)slab;
        const double v[3] = {r.c_h * scale, r.c_p, enc};
        for (int k = 0; k < 3; k++) *(i < n_in - 1 ? &layer[k] : &out[k]) += v[k];
        if (i < n_in - 1) layer_bytes += in[i].n * in[i].n * (int64_t)sizeof(double);
        printf("| %s | %lld | %lld | %.0f | %.2f / %.2f | %.1f | %.2f / %.2f | %.1f |\n", in[i].name,
               (long long)in[i].n, (long long)in[i].rows, (double)(in[i].n * in[i].n * 8) / (1 << 20), r.t_h, r.c_h,
               (double)tokens * (double)in[i].n * (double)in[i].n / r.c_h * 1e-9, r.t_p, r.c_p, enc);
    }
    const int64_t per_window = HFQ_GPTQ_DEFAULT_MEMORY / layer_bytes > 0 ? HFQ_GPTQ_DEFAULT_MEMORY / layer_bytes : 1;
    const double model_s[3] = {LAYERS * layer[0] + out[0], LAYERS * layer[1] + out[1], LAYERS * layer[2] + out[2]};
    printf("\nFor %lld calibration tokens (CPU s): a layer: accumulation %.0f, U %.1f, encoding %.1f; the model "
           "(%d layers + output): accumulation %.0f, U %.0f, encoding %.0f, total %.1f CPU min.\n"
           "Hessians: %.0f MiB a layer; the default --gptq-memory (%lld MiB) holds %lld layers a pass: %.0f MiB "
           "(%lld passes); peak RSS of this run %.0f MiB.\n",
           (long long)calib, layer[0], layer[1], layer[2], LAYERS, model_s[0], model_s[1], model_s[2],
           (model_s[0] + model_s[1] + model_s[2]) / 60.0, (double)layer_bytes / (1 << 20),
           (long long)(HFQ_GPTQ_DEFAULT_MEMORY >> 20), (long long)per_window,
           (double)(per_window * layer_bytes) / (1 << 20), (long long)((LAYERS + per_window - 1) / per_window),
           peak_mib());
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "model") == 0)
        return model(argc > 2 && atoll(argv[2]) > 0 ? atoll(argv[2]) : 512,
                     argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : omp_get_max_threads(),
                     argc > 4 && atoll(argv[4]) > 0 ? atoll(argv[4]) : 65536);
    const int64_t n = argc > 1 ? atoll(argv[1]) : 2048, rows = argc > 2 ? atoll(argv[2]) : 8192;
    const int64_t tokens = argc > 3 ? atoll(argv[3]) : 2048;
    const int threads = argc > 4 && atoi(argv[4]) > 0 ? atoi(argv[4]) : omp_get_max_threads();
    const char *fmt = argc > 5 ? argv[5] : "Q4_K";
    const int qt = hfq_qtype_from_name(fmt);
    const hfq_gptq_codec *c = qt >= 0 ? hfq_gptq_codec_get((hfq_qtype)qt) : NULL;
    if (!c || n % c->block) {
        fprintf(stderr, "bench_gptq: %s has no GPTQ codec or does not divide %lld\n", fmt, (long long)n);
        return 1;
    }
    cost r;
    if (measure(n, rows, tokens, 64, threads, c, &r)) return 1;
    printf("| N | rows | tokens | threads | format | Hessian wall / CPU (s) | Hessian GFLOP/CPU-s | prepare U wall / CPU "
           "(s) | encode wall / CPU (s) | peak RSS (MiB) |\n|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| %lld | %lld | %lld | %d | %s | %.2f / %.2f | %.1f | %.2f / %.2f | %.2f / %.2f | %.0f |\n", (long long)n,
           (long long)rows, (long long)tokens, threads, fmt, r.t_h, r.c_h,
           (double)tokens * (double)n * (double)n / r.c_h * 1e-9, r.t_p, r.c_p, r.t_e, r.c_e, peak_mib());
    return 0;
}
