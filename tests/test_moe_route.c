/* The router of kernels/moe_route.h against a double-precision reference:
 * softmax, top-k, renormalisation, and the grouping per expert. */
#include "kernels/moe_route.h"

#include "tests/check.h"

enum { N_EXP = 6, K = 2, T = 5 };

/* The reference: probabilities in double, the k largest by a full sort
 * (lower index first on equal values). */
static void reference(const float *logits, bool renorm, int *ids, double *w) {
    double p[N_EXP], max = logits[0], sum = 0.0;
    for (int e = 1; e < N_EXP; e++) max = logits[e] > max ? logits[e] : max;
    for (int e = 0; e < N_EXP; e++) sum += p[e] = exp((double)logits[e] - max);
    int order[N_EXP];
    for (int e = 0; e < N_EXP; e++) order[e] = e;
    for (int i = 0; i < N_EXP; i++)
        for (int j = i + 1; j < N_EXP; j++)
            if (p[order[j]] > p[order[i]]) { int x = order[i]; order[i] = order[j]; order[j] = x; }
    double total = 0.0;
    for (int j = 0; j < K; j++) total += p[order[j]] / sum;
    for (int j = 0; j < K; j++) {
        ids[j] = order[j];
        w[j] = p[order[j]] / sum / (renorm ? total : 1.0);
    }
}

int main(void) {
    const float logits[T][N_EXP] = {
        {0.1f, 2.0f, -1.0f, 0.5f, 1.9f, 0.0f},
        {3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f},     /* all tied: experts 0 and 1 */
        {-5.0f, -4.0f, 10.0f, -3.0f, 9.5f, 0.0f},
        {0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 1.0f},     /* tied top two: 3 and 5 */
        {1e-3f, 2e-3f, 3e-3f, 4e-3f, 5e-3f, 6e-3f},
    };
    for (int renorm = 0; renorm < 2; renorm++) {
        hfq_moe_routes r;
        CHECK(hfq_moe_routes_init(&r, N_EXP, K, T) == 0);
        hfq_moe_route(&r, &logits[0][0], T, renorm);
        /* every token once per chosen expert, ascending within each expert */
        CHECK(r.offset[0] == 0 && r.offset[N_EXP] == T * K);
        for (int e = 0; e < N_EXP; e++)
            for (int64_t i = r.offset[e] + 1; i < r.offset[e + 1]; i++) CHECK(r.token[i - 1] < r.token[i]);
        for (int t = 0; t < T; t++) {
            int ids[K];
            double w[K];
            reference(logits[t], renorm, ids, w);
            for (int j = 0; j < K; j++) {
                int64_t found = -1;
                for (int64_t i = r.offset[ids[j]]; i < r.offset[ids[j] + 1]; i++)
                    if (r.token[i] == t) found = i;
                CHECK_MSG(found >= 0, "token %d: expert %d not chosen", t, ids[j]);
                if (found >= 0) CHECK_NEAR(r.weight[found], w[j], 2e-7);
            }
        }
        hfq_moe_routes_free(&r);
    }
    return check_exit();
}
