#include "src/eval/sample.h"

#include <math.h>
#include <stdlib.h>

typedef struct candidate {
    int32_t id;
    float logit;
} candidate;

struct hfq_sampler {
    hfq_sampler_params p;
    int64_t n_vocab;
    uint64_t rng;
    candidate *cand;     /* [n_vocab] */
    double *prob;        /* [n_vocab] */
};

int64_t hfq_sampler_bytes(int64_t n_vocab) {
    return (int64_t)(sizeof(hfq_sampler) + (size_t)n_vocab * (sizeof(candidate) + sizeof(double)));
}

hfq_sampler *hfq_sampler_new(int64_t n_vocab, const hfq_sampler_params *p, hfq_error *err) {
    if (!isfinite(p->temp)) {
        hfq_fail(err, "sampler", "temperature %g is not a number", p->temp);
        return NULL;
    }
    if (!(p->top_p > 0.0f)) {
        hfq_fail(err, "sampler", "top-p %g must be above 0", p->top_p);
        return NULL;
    }
    hfq_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
        s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    }
    if (!s || !s->cand || !s->prob) {
        hfq_sampler_free(s);
        hfq_fail(err, "sampler", "out of memory");
        return NULL;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed;
    return s;
}

void hfq_sampler_free(hfq_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->prob);
    free(s);
}

/* splitmix64, then 53 bits as a double in [0, 1) */
static double uniform(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Highest logit first; equal logits by id. */
static int by_logit(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* prob[i] = e^((logit_i - logit_0) / temp) for the first n candidates (sorted); returns the sum. */
static double weights(const candidate *c, int64_t n, double temp, double *prob) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += prob[i] = exp(((double)c[i].logit - (double)c[0].logit) / temp);
    return sum;
}

int32_t hfq_sample(hfq_sampler *s, const float *logits) {
    if (s->p.temp <= 0.0f) {
        int64_t best = 0;
        for (int64_t i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return (int32_t)best;
    }
    candidate *c = s->cand;
    for (int64_t i = 0; i < s->n_vocab; i++) c[i] = (candidate){(int32_t)i, logits[i]};
    qsort(c, (size_t)s->n_vocab, sizeof *c, by_logit);
    int64_t n = s->p.top_k > 0 && s->p.top_k < s->n_vocab ? s->p.top_k : s->n_vocab;
    if (s->p.top_p < 1.0f) {
        double sum = weights(c, n, 1.0, s->prob), cum = 0.0;
        int64_t keep = 0;
        while (keep < n) {
            cum += s->prob[keep++] / sum;
            if (cum >= s->p.top_p) break;
        }
        n = keep;
    }
    double sum = weights(c, n, s->p.temp, s->prob);
    double u = uniform(&s->rng) * sum;
    for (int64_t i = 0; i < n; i++) {
        u -= s->prob[i];
        if (u < 0.0) return c[i].id;
    }
    return c[n - 1].id;   /* rounding left u at or just above 0 */
}
