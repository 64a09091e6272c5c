/* iq_search.h - the sub-block search shared by ggml's IQ3 and IQ2
 * quantizers (quantize_row_iq3_xxs_impl, _iq3_s_impl, _iq2_xxs_impl,
 * _iq2_xs_impl, _iq2_s_impl): fold each weight's sign out, try a ladder of
 * scales, round each group of lattice->dim magnitudes to levels and, off
 * the codebook, to its best listed neighbour (quant/iq_lattice.h), keep the
 * best weighted least-squares fit, round once more at that scale.
 * The formats differ only in the knobs below; every float expression is
 * ggml's, in its order, so the results are bit-identical.
 * Internal to quant/. */
#ifndef HFQ_QUANT_IQ_SEARCH_H
#define HFQ_QUANT_IQ_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/iq_lattice.h"

typedef enum hfq_iq_refine {
    HFQ_IQ_REFINE_OFF_GRID,    /* only the groups the best fit left off the codebook, if any */
    HFQ_IQ_REFINE_ALL_IF_OFF,  /* every group, if any was off the codebook */
    HFQ_IQ_REFINE_ALL,         /* every group, always */
} hfq_iq_refine;

typedef struct hfq_iq_search {
    const hfq_iq_lattice *lat;
    int kmaxq;              /* levels 0 .. kmaxq - 1 (coordinate 2 l + 1) */
    int n_steps;            /* candidate scales (2 kmaxq - 1 + step * is) / max, |is| <= n_steps */
    float step;
    float eps;              /* a sub-block whose largest magnitude is below counts as zero; 0: exactly zero */
    bool even_signs;        /* 7 signs stored per 8: flip the cheapest weight to make the negatives even */
    bool qp_start;          /* the ladder spans the make_qp_quants scale times kmaxq instead of the max */
    hfq_iq_refine refine;
} hfq_iq_search;

/* The largest sub-block: 32 weights. */
#define HFQ_IQ_MAX_SUB 32

/* One sub-block of n weights (a multiple of 8 and of the lattice's dim)
 * with error weights `weight`: its scale (>= 0), the sign bits of each 8
 * weights (the low 7 only when even_signs) and the codebook position of
 * each group. Returns false, with *scale 0 and nothing else written, when
 * the sub-block counts as zero (ggml skips it: callers do as it does). */
bool hfq_iq_search_block(const hfq_iq_search *v, int n, const float *xb, const float *weight, float *scale,
                         uint8_t *signs, uint16_t *index);

/* ggml's error weights for sub-block x of n: importance qw times
 * sqrt(sigma2 + x^2), or x^2 without importance. */
void hfq_iq_weights(int n, const float *x, const float *qw, float sigma2, float *weight);

/* ggml's 4-bit sub-block scale code nearest_int(0.5 (id s - 1)), clamped
 * to 0..15. */
int hfq_iq_scale4(float id, float s);

#endif
