/* experts.h - the experts of one mixture-of-experts projection: one Hugging
 * Face tensor per expert ("model.layers.L.mlp.experts.E.up_proj.weight"),
 * written as one GGUF tensor stacking them (ne = {cols, rows, experts}).
 *
 * The converter (convert.c) collects each expert's source here as it maps
 * the checkpoint's names, checks that every expert is there once with the
 * same shape and dtype, then streams the stacked tensor's rows expert after
 * expert from their sources: no expert, and no stacked tensor, is ever held
 * in memory whole.
 *
 * transformers 5's own layout (save_original_format=False) holds a
 * projection's experts in one 3-D tensor, [experts, rows, cols]: gate_up_proj
 * with each expert's gate rows then its up rows, down_proj as is. A fused
 * stack reads each expert's rows from there.
 *
 * Experts a compressed-tensors config quantizes (llm-compressor's MoE
 * checkpoints: one module per expert) are each dequantized exactly, row by
 * row, into the stacked float tensor. */
#ifndef HFQ_SRC_HF_EXPERTS_H
#define HFQ_SRC_HF_EXPERTS_H

#include <stdint.h>

#include "formats/error.h"
#include "formats/safetensors.h"
#include "src/hf/ct_read.h"

typedef struct hf_expert_stack hf_expert_stack;

/* A stack of n_experts sources, none found yet; NULL when out of memory. */
hf_expert_stack *hf_experts_new(int64_t n_experts);
/* A stack whose every expert is in t (no hf_experts_add): expert e's row i
 * is t's row e * stride + offset + i, t seen as a matrix of its rows; NULL
 * when out of memory. */
hf_expert_stack *hf_experts_new_fused(int64_t n_experts, const st_tensor *t, int64_t stride, int64_t offset);
void hf_experts_free(hf_expert_stack *s);

/* Records t as expert `expert` (< n_experts); fails, naming file and
 * tensor, when that expert already has a source or t's dtype or shape
 * differs from the experts recorded before. */
int hf_experts_add(hf_expert_stack *s, int64_t expert, const st_tensor *t, const char *file, hfq_error *err);

/* Records compressed-tensors weight w (owned from here on, closed with the
 * stack or on failure) as expert `expert`: its codes tensor is the source,
 * checked as hf_experts_add does; its rows are read with hf_ct_weight_row. */
int hf_experts_add_ct(hf_expert_stack *s, int64_t expert, hf_ct_weight *w, const char *file, hfq_error *err);

/* The compressed-tensors weight of stacked row r's expert, or NULL (floats). */
const hf_ct_weight *hf_experts_ct(const hf_expert_stack *s, int64_t rows_per, int64_t r);

/* Fails, naming file and the GGUF tensor, when an expert has no source. */
int hf_experts_check(const hf_expert_stack *s, const char *gguf_name, const char *file, hfq_error *err);

/* The source of stacked row r (rows_per rows per expert), that source's row
 * in *src_row (of a fused source, a row of its flattened rows) and how many
 * rows from there on are in the same source in *run. */
const st_tensor *hf_experts_row(const hf_expert_stack *s, int64_t rows_per, int64_t r, int64_t *src_row,
                                int64_t *run);

#endif
