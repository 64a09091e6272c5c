/* plan_models.h - synthetic tensor lists for the plan and recipe tests:
 * Llama-layout models as convert_hf_to_gguf writes them. */
#ifndef HFQ_TESTS_PLAN_MODELS_H
#define HFQ_TESTS_PLAN_MODELS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/plan.h"

#define MAX_T 2048

typedef struct model {
    hfq_plan_model hp;
    hfq_plan_tensor t[MAX_T];
    char names[MAX_T][64];
    int64_t n;
} model;

static void add(model *m, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, uint32_t type) {
    int64_t i = m->n++;
    snprintf(m->names[i], sizeof m->names[i], "%s", name);
    m->t[i] = (hfq_plan_tensor){m->names[i], {ne0, ne1, ne2, 1}, type};
}

/* A Llama-layout model as convert_hf_to_gguf writes it: 2-D weights in `wtype`,
 * norms F32. */
static void llama_model(model *m, int n_layer, int64_t n_embd, int64_t n_ff, int n_head,
                        int n_head_kv, int64_t n_vocab, bool tied, uint32_t wtype) {
    memset(m, 0, sizeof *m);
    snprintf(m->hp.arch, sizeof m->hp.arch, "llama");
    m->hp.n_layer = n_layer;
    m->hp.n_head = n_head;
    m->hp.n_head_kv = n_head_kv;
    int64_t kv = n_embd / n_head * n_head_kv;
    add(m, "token_embd.weight", n_embd, n_vocab, 1, wtype);
    add(m, "output_norm.weight", n_embd, 1, 1, GT_F32);
    if (!tied) add(m, "output.weight", n_embd, n_vocab, 1, wtype);
    for (int l = 0; l < n_layer; l++) {
        char nm[64];
#define L(suffix, a, b, ty) (snprintf(nm, sizeof nm, "blk.%d." suffix, l), add(m, nm, a, b, 1, ty))
        L("attn_norm.weight", n_embd, 1, GT_F32);
        L("attn_q.weight", n_embd, n_embd, wtype);
        L("attn_k.weight", n_embd, kv, wtype);
        L("attn_v.weight", n_embd, kv, wtype);
        L("attn_output.weight", n_embd, n_embd, wtype);
        L("ffn_norm.weight", n_embd, 1, GT_F32);
        L("ffn_gate.weight", n_embd, n_ff, wtype);
        L("ffn_up.weight", n_embd, n_ff, wtype);
        L("ffn_down.weight", n_ff, n_embd, wtype);
#undef L
    }
}

static const hfq_plan_entry *entry(const model *m, const hfq_plan *p, const char *name) {
    for (int64_t i = 0; i < m->n; i++)
        if (strcmp(m->t[i].name, name) == 0) return &p->entries[i];
    fprintf(stderr, "no tensor %s\n", name);
    exit(1);
}

#endif
