#include "kernels/moe_route.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hfq_moe_routes_init(hfq_moe_routes *r, int64_t n_expert, int64_t k, int64_t max_tokens) {
    memset(r, 0, sizeof *r);
    r->n_expert = n_expert;
    r->k = k;
    r->max_tokens = max_tokens;
    const size_t n = (size_t)(max_tokens * k);
    r->offset = calloc((size_t)n_expert + 1, sizeof *r->offset);
    r->token = malloc(n * sizeof *r->token);
    r->weight = malloc(n * sizeof *r->weight);
    r->chosen = malloc(n * sizeof *r->chosen);
    r->chosen_w = malloc(n * sizeof *r->chosen_w);
    r->prob = malloc((size_t)n_expert * sizeof *r->prob);
    if (r->offset && r->token && r->weight && r->chosen && r->chosen_w && r->prob) return 0;
    hfq_moe_routes_free(r);
    return -1;
}

void hfq_moe_routes_free(hfq_moe_routes *r) {
    free(r->offset);
    free(r->token);
    free(r->weight);
    free(r->chosen);
    free(r->chosen_w);
    free(r->prob);
    memset(r, 0, sizeof *r);
}

/* One token: softmax, top k, optional renormalisation into ids[k], w[k]. */
static void route_token(hfq_moe_routes *r, const float *logits, bool renormalise, int32_t *ids, float *w) {
    const int64_t n = r->n_expert;
    float max = logits[0], sum = 0.0f;
    for (int64_t e = 1; e < n; e++) max = logits[e] > max ? logits[e] : max;
    for (int64_t e = 0; e < n; e++) sum += r->prob[e] = expf(logits[e] - max);
    for (int64_t e = 0; e < n; e++) r->prob[e] /= sum;
    for (int64_t j = 0; j < r->k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < n; e++) {
            bool taken = false;
            for (int64_t i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (!taken && (best < 0 || r->prob[e] > r->prob[best])) best = e;
        }
        ids[j] = (int32_t)best;
        w[j] = r->prob[best];
    }
    if (!renormalise) return;
    float total = 0.0f;
    for (int64_t j = 0; j < r->k; j++) total += w[j];
    for (int64_t j = 0; j < r->k; j++) w[j] /= total;
}

void hfq_moe_route(hfq_moe_routes *r, const float *logits, int64_t n_tokens, bool renormalise) {
    const int64_t k = r->k;
    memset(r->offset, 0, (size_t)(r->n_expert + 1) * sizeof *r->offset);
    for (int64_t t = 0; t < n_tokens; t++) {
        route_token(r, logits + t * r->n_expert, renormalise, r->chosen + t * k, r->chosen_w + t * k);
        for (int64_t j = 0; j < k; j++) r->offset[r->chosen[t * k + j] + 1]++;
    }
    for (int64_t e = 0; e < r->n_expert; e++) r->offset[e + 1] += r->offset[e];
    /* counting sort by expert, tokens ascending within each */
    int64_t *fill = r->offset;   /* reused as cursors, restored below */
    for (int64_t t = 0; t < n_tokens; t++)
        for (int64_t j = 0; j < k; j++) {
            const int64_t at = fill[r->chosen[t * k + j]]++;
            r->token[at] = (int32_t)t;
            r->weight[at] = r->chosen_w[t * k + j];
        }
    for (int64_t e = r->n_expert; e > 0; e--) r->offset[e] = r->offset[e - 1];
    r->offset[0] = 0;
}
