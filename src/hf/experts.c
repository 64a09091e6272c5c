#include "src/hf/experts.h"

#include <stdbool.h>
#include <stdlib.h>

struct hf_expert_stack {
    int64_t n;
    /* one tensor holding every expert (hf_experts_new_fused), or NULL */
    const st_tensor *fused;
    int64_t stride, offset;
    hf_ct_weight **ct;        /* [n] compressed-tensors experts (hf_experts_add_ct), or NULL */
    const st_tensor *src[];   /* [n] */
};

hf_expert_stack *hf_experts_new(int64_t n_experts) {
    if (n_experts <= 0 || n_experts > (1 << 16)) return NULL;
    hf_expert_stack *s = calloc(1, sizeof *s + (size_t)n_experts * sizeof s->src[0]);
    if (s) s->n = n_experts;
    return s;
}

hf_expert_stack *hf_experts_new_fused(int64_t n_experts, const st_tensor *t, int64_t stride, int64_t offset) {
    hf_expert_stack *s = hf_experts_new(n_experts);
    if (s) {
        s->fused = t;
        s->stride = stride;
        s->offset = offset;
    }
    return s;
}

void hf_experts_free(hf_expert_stack *s) {
    for (int64_t e = 0; s && s->ct && e < s->n; e++) hf_ct_weight_close(s->ct[e]);
    if (s) free(s->ct);
    free(s);
}

static bool same_layout(const st_tensor *a, const st_tensor *b) {
    if (a->dtype != b->dtype || a->n_dims != b->n_dims) return false;
    for (int d = 0; d < a->n_dims; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

int hf_experts_add(hf_expert_stack *s, int64_t expert, const st_tensor *t, const char *file, hfq_error *err) {
    if (expert < 0 || expert >= s->n)
        return hfq_fail(err, file, "tensor '%s': expert %lld of %lld", t->name, (long long)expert, (long long)s->n);
    if (s->src[expert] || s->fused)
        return hfq_fail(err, file, "tensor '%s' appears twice%s", t->name, s->fused ? " (also in fused experts)" : "");
    for (int64_t e = 0; e < s->n; e++)
        if (s->src[e] && !same_layout(s->src[e], t))
            return hfq_fail(err, file, "tensor '%s': dtype or shape differs from the other experts' ('%s')", t->name,
                            s->src[e]->name);
    s->src[expert] = t;
    return 0;
}

int hf_experts_check(const hf_expert_stack *s, const char *gguf_name, const char *file, hfq_error *err) {
    for (int64_t e = 0; e < s->n && !s->fused; e++)
        if (!s->src[e])
            return hfq_fail(err, file, "checkpoint lacks expert %lld of %lld for '%s'", (long long)e, (long long)s->n,
                            gguf_name);
    return 0;
}

const st_tensor *hf_experts_row(const hf_expert_stack *s, int64_t rows_per, int64_t r, int64_t *src_row,
                                int64_t *run) {
    *run = rows_per - r % rows_per;
    if (s->fused) {
        *src_row = r / rows_per * s->stride + s->offset + r % rows_per;
        return s->fused;
    }
    *src_row = r % rows_per;
    return s->src[r / rows_per];
}

int hf_experts_add_ct(hf_expert_stack *s, int64_t expert, hf_ct_weight *w, const char *file, hfq_error *err) {
    if (!s->ct && !(s->ct = calloc((size_t)s->n, sizeof *s->ct))) {
        hf_ct_weight_close(w);
        return hfq_fail(err, NULL, "out of memory");
    }
    if (hf_experts_add(s, expert, hf_ct_weight_codes(w), file, err)) {
        hf_ct_weight_close(w);
        return -1;
    }
    s->ct[expert] = w;
    return 0;
}

const hf_ct_weight *hf_experts_ct(const hf_expert_stack *s, int64_t rows_per, int64_t r) {
    return s->ct ? s->ct[r / rows_per] : NULL;
}
