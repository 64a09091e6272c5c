/* IQ4_NL and IQ4_XS; see iq4.h. Both quantizers are ggml's
 * quantize_row_iq4_nl_impl (15 candidate scales per 32-element block),
 * IQ4_NL on super-blocks of one block, IQ4_XS of eight whose float scales
 * are then quantized to 6 bits. */
#include "quant/iq4.h"

#include <math.h>
#include <string.h>

#include "quant/block_math.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

#define NTRY 7 /* candidate scales (values[0] + t) / max, t = -NTRY..NTRY */

static const int8_t levels[16] = HFQ_IQ4NL_LEVELS;

/* L[j] = hfq_iq4_nearest_level(id * x[j]) for one 32-element block, in set isa. */
static void nearest_levels(hfq_isa isa, float id, const float *x, uint8_t L[HFQ_QK]) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (isa == HFQ_ISA_AVX2) {
        hfq_iq4_nearest_levels_avx2(id, x, L, HFQ_QK);
        return;
    }
#endif
    (void)isa;
    for (int j = 0; j < HFQ_QK; ++j) L[j] = hfq_iq4_nearest_level(id * x[j]);
}

/* The least-squares scale of one 32-element block over the candidates, or
 * 0 for an all-zero block (L then left as it was). L gets the levels of the
 * first candidate, which maps the signed extreme onto the most negative
 * level; the caller recomputes them from the scale it keeps. */
static float block_scale(hfq_isa isa, const float *x, const float *w, uint8_t L[HFQ_QK]) {
    float amax = 0, max = 0;
    for (int j = 0; j < HFQ_QK; ++j) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < HFQ_GROUP_MAX_EPS) return 0;
    float id = 1 / (-max / levels[0]);
    float sumqx = 0, sumq2 = 0;
    nearest_levels(isa, id, x, L);
    for (int j = 0; j < HFQ_QK; ++j) {
        float q = levels[L[j]];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int t = -NTRY; t <= NTRY; ++t) {
        id = (t + levels[0]) / max;
        sumqx = sumq2 = 0;
        uint8_t Lt[HFQ_QK];
        nearest_levels(isa, id, x, Lt);
        for (int j = 0; j < HFQ_QK; ++j) {
            float q = levels[Lt[j]];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        /* better fit: larger sumqx^2 / sumq2, compared without dividing */
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* One super-block of n (32 or 256) values: the float scale of each block
 * (error weights importance * sqrt(sigma2 + x^2), sigma2 twice the mean
 * square, or x^2 without importance), then codes L against the scale as
 * it will be decoded. IQ4_XS (n = 256) stores *d16 = -(signed extreme
 * scale) / 32 and 6-bit block scales in scales_l/scales_h; IQ4_NL (n = 32)
 * stores the block's scale itself. */
static void iq4_superblock(hfq_isa isa, int n, const float *x, const float *importance, uint16_t *d16, uint8_t *qs,
                           uint16_t *scales_h, uint8_t *scales_l, float *idl_out) {
    const int nblk = n / HFQ_QK;
    const float sigma2 = hfq_sum_squares(n, x) * (2.f / n);
    uint8_t L[HFQ_QK_K];
    float scales[HFQ_QK_K / HFQ_QK], w[HFQ_QK];
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < nblk; ++ib) {
        const float *xb = x + HFQ_QK * ib;
        if (importance) hfq_importance_weights(HFQ_QK, xb, importance + HFQ_QK * ib, sigma2, w);
        else
            for (int j = 0; j < HFQ_QK; ++j) w[j] = xb[j] * xb[j];
        scales[ib] = block_scale(isa, xb, w, L + HFQ_QK * ib);
        if (fabsf(scales[ib]) > amax_scale) {
            amax_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (nblk > 1) {
        /* codes against the 6-bit scale times the unrounded d, as ggml */
        const float d = -max_scale / 32;
        const float id = d ? 1 / d : 0.f;
        *d16 = hfq_f32_to_fp16(d);
        *scales_h = 0;
        for (int ib = 0; ib < nblk; ++ib) {
            int l = hfq_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.f;
            idl_out[ib] = idl;
            for (int j = 0; j < HFQ_QK; ++j) L[HFQ_QK * ib + j] = hfq_iq4_nearest_level(idl * x[HFQ_QK * ib + j]);
            l += 32;
            if (ib % 2 == 0) scales_l[ib / 2] = (uint8_t)(l & 0xf);
            else scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4);
            *scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
    } else {
        *d16 = hfq_f32_to_fp16(scales[0]);
        const float id = scales[0] ? 1 / scales[0] : 0;
        idl_out[0] = id;
        for (int j = 0; j < HFQ_QK; ++j) L[j] = hfq_iq4_nearest_level(id * x[j]);
    }
    for (int ib = 0; ib < nblk; ++ib)
        for (int j = 0; j < HFQ_QK / 2; ++j)
            qs[16 * ib + j] = (uint8_t)(L[HFQ_QK * ib + j] | L[HFQ_QK * ib + 16 + j] << 4);
}

static void iq4_block_isa(hfq_isa isa, int n, const float *x, const float *importance, void *block, float *idl) {
    if (n == HFQ_QK) {
        hfq_block_iq4_nl *b = (hfq_block_iq4_nl *)block;
        iq4_superblock(isa, HFQ_QK, x, importance, &b->d, b->qs, NULL, NULL, idl);
    } else {
        hfq_block_iq4_xs *b = (hfq_block_iq4_xs *)block;
        iq4_superblock(isa, HFQ_QK_K, x, importance, &b->d, b->qs, &b->scales_h, b->scales_l, idl);
    }
}

/* (every set gives the same bytes: the AVX2 search's codes are the scalar's) */
void hfq_iq4_block(int n, const float *x, const float *importance, void *block, float *idl) {
    iq4_block_isa(hfq_isa_best(), n, x, importance, block, idl);
}

static void iq4_nl_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    for (int64_t i = 0; i < n / HFQ_QK; i++) {
        float idl[1];
        iq4_block_isa(isa, HFQ_QK, x + i * HFQ_QK, importance ? importance + i * HFQ_QK : NULL,
                      (hfq_block_iq4_nl *)y + i, idl);
    }
}

static void iq4_xs_row(hfq_isa isa, const float *x, void *y, int64_t n, const float *importance) {
    for (int64_t i = 0; i < n / HFQ_QK_K; i++) {
        float idl[HFQ_QK_K / HFQ_QK];
        iq4_block_isa(isa, HFQ_QK_K, x + i * HFQ_QK_K, importance ? importance + i * HFQ_QK_K : NULL,
                      (hfq_block_iq4_xs *)y + i, idl);
    }
}

HFQ_DEFINE_QUANTIZE(hfq_quantize_iq4_nl, hfq_block_iq4_nl, HFQ_QK, iq4_nl_row)
HFQ_DEFINE_QUANTIZE(hfq_quantize_iq4_xs, hfq_block_iq4_xs, HFQ_QK_K, iq4_xs_row)

HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq4_nl, hfq_block_iq4_nl, HFQ_QK, hfq_decode_iq4_nl)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq4_xs, hfq_block_iq4_xs, HFQ_QK_K, hfq_decode_iq4_xs)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_iq4_nl, hfq_block_iq4_nl, hfq_block_q8_0, HFQ_QK, hfq_dot_iq4_nl_q8_0)

/* One running sum over all sub-blocks, in ggml's order. */
float hfq_vec_dot_iq4_xs(const void *w, const void *a, int64_t n) {
    const hfq_block_iq4_xs *wb = (const hfq_block_iq4_xs *)w;
    const hfq_block_q8_k *ab = (const hfq_block_q8_k *)a;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / HFQ_QK_K; i++)
        for (int j = 0; j < HFQ_QK_K / HFQ_QK; j++) sum += hfq_dot_iq4_xs_sub_q8_k(&wb[i], &ab[i], j);
    return sum;
}
