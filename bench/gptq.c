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
 * ffn_gate / ffn_up, N 8192 ROWS 2048 ffn_down. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "calib/hessian.h"
#include "quant/gptq.h"

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

int main(int argc, char **argv) {
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
    uint64_t seed = 21;
    const int64_t batch = 64;
    float *x = malloc((size_t)(batch * n) * sizeof *x), *w = malloc((size_t)(rows * n) * sizeof *w);
    void *out = malloc((size_t)rows * (size_t)(n / c->block) * c->block_bytes);
    hfq_hessian_input in = {.name = "w", .n = n};
    hfq_hessian_set s;
    if (!x || !w || !out || hfq_hessian_set_init(&s, &in, 1, threads, &(hfq_error){{0}})) {
        fprintf(stderr, "bench_gptq: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < rows * n; i++) w[i] = uniform(&seed);
    double t_h = 0.0, c_h = 0.0;
    for (int64_t done = 0; done < tokens; done += batch) {
        for (int64_t i = 0; i < batch * n; i++) x[i] = uniform(&seed) + (i % n == 0 ? uniform(&seed) : 0.0f);
        const double t0 = wall(), c0 = cpu();
        hfq_hessian_add(&s.e[0], x, batch, threads);
        t_h += wall() - t0;
        c_h += cpu() - c0;
    }
    double t0 = wall(), c0 = cpu();
    const int bad = hfq_gptq_prepare(s.e[0].h, n, HFQ_GPTQ_DEFAULT_DAMP, threads);
    const double t_p = wall() - t0, c_p = cpu() - c0;
    t0 = wall();
    c0 = cpu();
    const int oom = hfq_gptq_encode(c, s.e[0].h, w, rows, n, NULL, 0.0f, 0, out, threads);
    const double t_e = wall() - t0, c_e = cpu() - c0;
    if (bad || oom) {
        fprintf(stderr, "bench_gptq: %s\n", bad ? "not positive definite" : "out of memory");
        return 1;
    }
    printf("| N | rows | tokens | threads | format | Hessian wall / CPU (s) | Hessian GFLOP/CPU-s | prepare U wall / CPU "
           "(s) | encode wall / CPU (s) | peak RSS (MiB) |\n|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| %lld | %lld | %lld | %d | %s | %.2f / %.2f | %.1f | %.2f / %.2f | %.2f / %.2f | %.0f |\n", (long long)n,
           (long long)rows, (long long)tokens, threads, fmt, t_h, c_h,
           (double)tokens * (double)n * (double)n / c_h * 1e-9, t_p, c_p, t_e, c_e, peak_mib());
    hfq_hessian_set_free(&s);
    free(x);
    free(w);
    free(out);
    return 0;
}
