/* test_runner_sample.c - the sampler of the generate tool: greedy, top-k,
 * top-p, temperature, drawn frequencies against the probabilities they
 * should have, and seeded determinism. */
#include <stdint.h>

#include "check.h"
#include "src/eval/sample.h"

#define N_DRAWS 200000

/* Frequencies of the ids drawn from logits (n values). */
static void frequencies(const float *logits, int n, hfq_sampler_params p, double *freq) {
    hfq_error err;
    hfq_sampler *s = hfq_sampler_new(n, &p, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    int64_t count[8] = {0};
    for (int k = 0; s && k < N_DRAWS; k++) {
        int32_t id = hfq_sample(s, logits);
        CHECK(id >= 0 && id < n);
        if (id >= 0 && id < n) count[id]++;
    }
    for (int i = 0; i < n; i++) freq[i] = (double)count[i] / N_DRAWS;
    hfq_sampler_free(s);
}

/* Within 5 standard deviations of a binomial frequency. */
static void expect_freqs(const double *freq, const double *want, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        double sd = sqrt(want[i] * (1 - want[i]) / N_DRAWS);
        CHECK_MSG(fabs(freq[i] - want[i]) <= 5 * sd + 1e-12, "%s: id %d drawn %.4f, expected %.4f", what, i, freq[i], want[i]);
    }
}

static void test_distributions(void) {
    const float logits[4] = {logf(0.5f), logf(0.3f), logf(0.2f), -INFINITY};
    double freq[4];
    frequencies(logits, 4, (hfq_sampler_params){.temp = 1, .top_p = 1, .seed = 1}, freq);
    expect_freqs(freq, (double[]){0.5, 0.3, 0.2, 0}, 4, "temp 1");
    frequencies(logits, 4, (hfq_sampler_params){.temp = 1, .top_k = 2, .top_p = 1, .seed = 2}, freq);
    expect_freqs(freq, (double[]){0.625, 0.375, 0, 0}, 4, "top-k 2");
    frequencies(logits, 4, (hfq_sampler_params){.temp = 1, .top_p = 0.7f, .seed = 3}, freq);
    expect_freqs(freq, (double[]){0.625, 0.375, 0, 0}, 4, "top-p 0.7");
    frequencies(logits, 4, (hfq_sampler_params){.temp = 1, .top_p = 0.45f, .seed = 4}, freq);
    expect_freqs(freq, (double[]){1, 0, 0, 0}, 4, "top-p 0.45");
    /* temperature 2: p^(1/2), renormalized */
    double a = sqrt(0.5), b = sqrt(0.3), c = sqrt(0.2), z = a + b + c;
    frequencies(logits, 4, (hfq_sampler_params){.temp = 2, .top_p = 1, .seed = 5}, freq);
    expect_freqs(freq, (double[]){a / z, b / z, c / z, 0}, 4, "temp 2");
}

static void test_greedy_and_seeds(void) {
    const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    hfq_error err;
    hfq_sampler *g = hfq_sampler_new(5, &(hfq_sampler_params){.temp = 0, .top_p = 1}, &err);
    CHECK(hfq_sample(g, logits) == 1);   /* tie between 1 and 3: the lower id */
    hfq_sampler_free(g);
    hfq_sampler *k1 = hfq_sampler_new(5, &(hfq_sampler_params){.temp = 5, .top_k = 1, .top_p = 1, .seed = 9}, &err);
    for (int i = 0; i < 100; i++) CHECK(hfq_sample(k1, logits) == 1);
    hfq_sampler_free(k1);

    int32_t seq[3][64];
    const uint64_t seeds[3] = {7, 7, 8};
    for (int r = 0; r < 3; r++) {
        hfq_sampler *s = hfq_sampler_new(5, &(hfq_sampler_params){.temp = 1.5f, .top_p = 1, .seed = seeds[r]}, &err);
        for (int i = 0; i < 64; i++) seq[r][i] = hfq_sample(s, logits);
        hfq_sampler_free(s);
    }
    CHECK(memcmp(seq[0], seq[1], sizeof seq[0]) == 0);
    CHECK(memcmp(seq[0], seq[2], sizeof seq[0]) != 0);

    CHECK(hfq_sampler_new(5, &(hfq_sampler_params){.temp = 1, .top_p = 0}, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "top-p 0 must be above 0");
    CHECK(hfq_sampler_new(5, &(hfq_sampler_params){.temp = NAN, .top_p = 1}, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "temperature");
}

int main(void) {
    test_distributions();
    test_greedy_and_seeds();
    return check_exit();
}
