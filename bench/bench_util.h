/* bench_util.h - what the C benchmarks share: a clock and a reproducible
 * source of random values. */
#ifndef HFQ_BENCH_UTIL_H
#define HFQ_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* This thread's CPU time (the benchmarks run one thread): on a shared
 * machine wall time also counts the time other processes held the core. */
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline float uniform(uint64_t *s) {   /* xorshift64: [-1, 1) */
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)(*s >> 40) / (float)(1 << 23) - 1.0f;
}

/* Seconds of the fastest of reps calls of run(ctx). */
static inline double best_of(int reps, void (*run)(const void *ctx), const void *ctx) {
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        const double t0 = now_s();
        run(ctx);
        const double t = now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

#endif
