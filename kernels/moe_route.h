/* moe_route.h - a mixture of experts' router, on the host: which experts
 * each token of a batch goes to and with which weight, grouped per expert.
 *
 * As transformers' Mixtral and Qwen3-MoE routers compute it: softmax over
 * the router's logits in float, the k experts of highest probability (exact
 * ties: the lower expert index first; torch.topk's order among exact ties
 * is its implementation's, [1,1,1,1] top-2 giving experts 2 and 3 on the
 * CPU, so a tie may choose other experts than transformers), their probabilities as
 * weights, divided by their sum (taken in that order) when the model
 * renormalises. The grouping lists each expert's tokens in ascending order,
 * so the forward pass reads each expert's weights once per batch and adds
 * the experts' outputs in ascending expert order (transformers' order). */
#ifndef HFQ_KERNELS_MOE_ROUTE_H
#define HFQ_KERNELS_MOE_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct hfq_moe_routes {
    int64_t n_expert, k, max_tokens;
    /* expert e's tokens: token[offset[e] .. offset[e + 1]) with weight[...] */
    int64_t *offset;          /* [n_expert + 1] */
    int32_t *token;           /* [max_tokens * k] */
    float *weight;            /* [max_tokens * k] */
    int32_t *chosen;          /* [max_tokens * k] scratch: each token's experts */
    float *chosen_w;          /* [max_tokens * k] scratch */
    float *prob;              /* [n_expert] scratch */
} hfq_moe_routes;

/* Allocates for batches of up to max_tokens; -1 when out of memory. */
int hfq_moe_routes_init(hfq_moe_routes *r, int64_t n_expert, int64_t k, int64_t max_tokens);
void hfq_moe_routes_free(hfq_moe_routes *r);

/* Routes n_tokens (<= max_tokens) tokens of router logits [n_tokens][n_expert]. */
void hfq_moe_route(hfq_moe_routes *r, const float *logits, int64_t n_tokens, bool renormalise);

#endif
