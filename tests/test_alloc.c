/* test_alloc.c - the budget solver against exhaustive search: the least
 * total error within the budget on random small instances (exactly, when a
 * grid cell is one byte; never over budget and never better than the optimum
 * on coarse grids), the Lagrangian never better than the DP and strictly
 * worse where the error curve is not convex, infeasible budgets, bad input,
 * and a model-sized instance that uses its budget to within 0.1 %. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/alloc.h"
#include "tests/check.h"

#define MAX_N 7
#define MAX_K 5

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Least error within budget by trying every combination; -1 if none fits. */
static double brute(const hfq_alloc_item *items, int n, int64_t budget) {
    int idx[MAX_N] = {0};
    double best = -1.0;
    for (;;) {
        int64_t bytes = 0;
        double e = 0.0;
        for (int i = 0; i < n; i++) bytes += items[i].options[idx[i]].bytes, e += items[i].options[idx[i]].err;
        if (bytes <= budget && (best < 0 || e < best)) best = e;
        int i = 0;
        while (i < n && ++idx[i] == items[i].n_options) idx[i++] = 0;
        if (i == n) return best;
    }
}

static void check_choice(const hfq_alloc_item *items, int n, const int32_t *choice, const hfq_alloc_result *r) {
    int64_t bytes = 0;
    double e = 0.0;
    for (int i = 0; i < n; i++) {
        CHECK(choice[i] >= 0 && choice[i] < items[i].n_options);
        bytes += items[i].options[choice[i]].bytes, e += items[i].options[choice[i]].err;
    }
    CHECK(bytes == r->bytes);
    CHECK_NEAR(e, r->err, 1e-9 * (1 + e));
}

static void test_random(void) {
    hfq_alloc_option opts[MAX_N][MAX_K];
    hfq_alloc_item items[MAX_N];
    int32_t choice[MAX_N];
    int exact = 0, coarse_worse = 0, lagrange_worse = 0;
    for (int trial = 0; trial < 3000; trial++) {
        int n = 1 + (int)(next_u64() % MAX_N);
        int64_t total_min = 0, total_max = 0;
        for (int i = 0; i < n; i++) {
            items[i].n_options = 1 + (int)(next_u64() % MAX_K);
            items[i].options = opts[i];
            int64_t lo = INT64_MAX, hi = 0;
            for (int k = 0; k < items[i].n_options; k++) {
                /* not sorted, duplicates and dominated options on purpose */
                opts[i][k].bytes = (int64_t)(next_u64() % 200);
                opts[i][k].err = (double)(next_u64() % 1000) / 7.0;
                lo = opts[i][k].bytes < lo ? opts[i][k].bytes : lo;
                hi = opts[i][k].bytes > hi ? opts[i][k].bytes : hi;
            }
            total_min += lo, total_max += hi;
        }
        int64_t budget = total_min - 20 + (int64_t)(next_u64() % (uint64_t)(total_max - total_min + 40));
        double want = brute(items, n, budget);
        hfq_alloc_result r;
        hfq_error err;
        int rc = hfq_alloc_solve(items, n, budget, 1 << 20, choice, &r, &err);
        if (want < 0) {
            CHECK(rc == 1);
            CHECK(r.bytes == r.min_bytes && r.min_bytes == total_min);
            continue;
        }
        CHECK_MSG(rc == 0, "rc %d", rc);
        check_choice(items, n, choice, &r);
        CHECK(r.bytes <= budget);
        CHECK_MSG(r.err == want, "trial %d: dp %.6f, optimum %.6f", trial, r.err, want);
        exact += r.err == want;
        /* a coarse grid: still within budget, never below the optimum */
        hfq_alloc_result rc8;
        CHECK(hfq_alloc_solve(items, n, budget, 8, choice, &rc8, &err) == 0);
        check_choice(items, n, choice, &rc8);
        CHECK(rc8.bytes <= budget && rc8.err >= want - 1e-9);
        coarse_worse += rc8.err > want;
        hfq_alloc_result rl;
        CHECK(hfq_alloc_lagrange(items, n, budget, choice, &rl, &err) == 0);
        check_choice(items, n, choice, &rl);
        CHECK(rl.bytes <= budget && rl.err >= want - 1e-9);
        lagrange_worse += rl.err > want;
    }
    printf("random: %d exact, coarse grid worse in %d, lagrangian worse in %d\n", exact, coarse_worse, lagrange_worse);
    CHECK(exact > 2000 && lagrange_worse > 0);
}

/* Two items whose middle option lies above the convex hull: the Lagrangian
 * can only choose the ends, the DP takes the middle. */
static void test_nonconvex(void) {
    const hfq_alloc_option a[3] = {{100, 10.0}, {150, 6.0}, {200, 0.0}};
    const hfq_alloc_option b[1] = {{50, 0.0}};
    const hfq_alloc_item items[2] = {{3, a}, {1, b}};
    int32_t choice[2];
    hfq_alloc_result r, rl;
    hfq_error err;
    CHECK(hfq_alloc_solve(items, 2, 210, 0, choice, &r, &err) == 0);
    CHECK(choice[0] == 1 && r.bytes == 200 && r.err == 6.0);
    CHECK(hfq_alloc_lagrange(items, 2, 210, choice, &rl, &err) == 0);
    CHECK(choice[0] == 0 && rl.err == 10.0);
    /* the whole budget: both take the best */
    CHECK(hfq_alloc_solve(items, 2, 250, 0, choice, &r, &err) == 0 && choice[0] == 2 && r.err == 0.0);
    CHECK(hfq_alloc_lagrange(items, 2, 250, choice, &rl, &err) == 0 && choice[0] == 2);
}

static void test_errors(void) {
    hfq_alloc_option bad[2] = {{10, 1.0}, {-1, 0.0}};
    hfq_alloc_item items[1] = {{2, bad}};
    int32_t choice[1];
    hfq_alloc_result r;
    hfq_error err = {{0}};
    CHECK(hfq_alloc_solve(items, 1, 100, 0, choice, &r, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "item 0 option 1");
    bad[1] = (hfq_alloc_option){5, -2.0};
    CHECK(hfq_alloc_solve(items, 1, 100, 0, choice, &r, &err) == -1);
    bad[1] = (hfq_alloc_option){5, 0.0 / 0.0};
    CHECK(hfq_alloc_lagrange(items, 1, 100, choice, &r, &err) == -1);
    items[0].n_options = 0;
    CHECK(hfq_alloc_solve(items, 1, 100, 0, choice, &r, &err) == -1);
    /* no items: nothing to choose, zero bytes */
    CHECK(hfq_alloc_solve(NULL, 0, 0, 0, NULL, &r, &err) == 0 && r.bytes == 0);
}

/* A model-sized instance: 300 tensors of 5 formats whose sizes and errors
 * follow bits per weight; the budget is used to within 0.1 %, the same
 * choice comes back twice, and it beats the Lagrangian. */
static void test_large(void) {
    enum { N = 300, K = 5 };
    static hfq_alloc_option opts[N][K];
    static hfq_alloc_item items[N];
    static int32_t choice[N], again[N];
    const double bits[K] = {4.5, 5.5, 6.5625, 8.5, 16.0};
    int64_t min_total = 0, max_total = 0;
    for (int i = 0; i < N; i++) {
        int64_t ne = (int64_t)(1 + next_u64() % 64) * 65536;
        double sens = (double)(1 + next_u64() % 1000);
        for (int k = 0; k < K; k++) {
            opts[i][k].bytes = (int64_t)(bits[k] * (double)ne / 8.0);
            opts[i][k].err = sens * (double)ne * ldexp(1.0, -2 * (int)bits[k]);
        }
        items[i] = (hfq_alloc_item){K, opts[i]};
        min_total += opts[i][0].bytes, max_total += opts[i][K - 1].bytes;
    }
    int64_t budget = min_total + (max_total - min_total) / 7;
    hfq_alloc_result r, r2, rl;
    hfq_error err;
    CHECK(hfq_alloc_solve(items, N, budget, 0, choice, &r, &err) == 0);
    CHECK(r.bytes <= budget && r.bytes >= budget - budget / 1000);
    CHECK(hfq_alloc_solve(items, N, budget, 0, again, &r2, &err) == 0);
    CHECK(memcmp(choice, again, sizeof choice) == 0);
    CHECK(hfq_alloc_lagrange(items, N, budget, again, &rl, &err) == 0);
    CHECK(rl.bytes <= budget && rl.err >= r.err);
    printf("large: budget %" PRId64 ", dp %" PRId64 " bytes err %.6g; lagrangian %" PRId64 " bytes err %.6g\n", budget,
           r.bytes, r.err, rl.bytes, rl.err);
}

int main(void) {
    test_random();
    test_nonconvex();
    test_errors();
    test_large();
    return check_exit();
}
