/* IQ1_S and IQ1_M; see iq1.h. The quantizers are ggml's
 * quantize_row_iq1_s_impl / quantize_row_iq1_m_impl: with three levels
 * (-1, 0, 1) shifted by +-delta, the best weighted least-squares split of
 * a sub-block's sorted values into three runs is found exhaustively; each
 * group of 8 levels is then put on the codebook (nearest listed neighbour
 * at that scale when it is off), the scale refitted, and the sub-block
 * scales quantized against the super-block's. */
#include "quant/iq1.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "quant/block_math.h"
#include "quant/iq_lattice.h"
#include "quant/iq_search.h"
#include "quant/rows.h"
#include "quant/scale_search.h"

#define IQ1S_SUB 32 /* weights per IQ1_S sub-block */
#define IQ1M_SUB 16

/* the three levels with the shift +delta (x_p) and -delta (x_m) */
static const float x_p[3] = {-1 + HFQ_IQ1_DELTA, HFQ_IQ1_DELTA, 1 + HFQ_IQ1_DELTA};
static const float x_m[3] = {-1 - HFQ_IQ1_DELTA, -HFQ_IQ1_DELTA, 1 - HFQ_IQ1_DELTA};

/* idx: 0..n-1 ordered by x ascending, ties in input order (stable, as
 * glibc's qsort of ggml's (value, index) pairs). */
static void sort_by_value(int n, const float *x, int *idx) {
    for (int j = 0; j < n; ++j) {
        int k = j;
        while (k > 0 && x[idx[k - 1]] > x[j]) {
            idx[k] = idx[k - 1];
            --k;
        }
        idx[k] = j;
    }
}

/* ggml's iq1_find_best_neighbour2: the listed entry minimising
 * sum w (scale * xx[l] - x)^2, the first on ties. */
static int best_neighbour(const uint16_t *nb, const float *x, const float *w, float scale, const float *xx,
                          int8_t *L) {
    const hfq_iq_lattice *lat = &hfq_iq_lattice_iq1s;
    float best_d2 = FLT_MAX;
    int best = nb[1];
    for (int j = 1; j <= nb[0]; ++j) {
        const int8_t *pg = lat->coords + 8 * (int)nb[j];
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            float q = xx[(pg[i] - 1) / 2];
            float diff = scale * q - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = nb[j];
        }
    }
    const int8_t *pg = lat->coords + 8 * best;
    for (int i = 0; i < 8; ++i) L[i] = (int8_t)((pg[i] - 1) / 2);
    return best;
}

/* Levels L of the sub-block from the split (sorted positions below i1 get
 * 0, below i2 1, the rest 2); a negative scale flips them (returns true). */
static bool levels_from_split(int n, const int *idx, int i1, int i2, float *scale, int8_t *L) {
    for (int j = 0; j < n; ++j) L[idx[j]] = (int8_t)(j < i1 ? 0 : j < i2 ? 1 : 2);
    if (*scale >= 0) return false;
    for (int j = 0; j < n; ++j) L[j] = (int8_t)(2 - L[j]);
    *scale = -*scale;
    return true;
}

/* Puts each group of 8 levels on the codebook (xx_of(k): the group's
 * shifted levels), then refits the scale if any group moved. */
static void to_grid(int n, const float *xb, const float *weight, const float *const *xx, float *scale, int8_t *L,
                    uint16_t *index) {
    const hfq_iq_lattice *lat = &hfq_iq_lattice_iq1s;
    bool all_on_grid = true;
    for (int k = 0; k < n / 8; ++k) {
        uint16_t u = 0;
        for (int j = 0; j < 8; ++j) u |= (uint16_t)(L[8 * k + j] << 2 * j);
        int32_t m = lat->map[u];
        if (m < 0) {
            all_on_grid = false;
            m = best_neighbour(hfq_iq_neighbours(lat, m), xb + 8 * k, weight + 8 * k, *scale, xx[k], L + 8 * k);
        }
        index[k] = (uint16_t)m;
    }
    if (all_on_grid) return;
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < n / 8; ++k) {
        const int8_t *pg = lat->coords + 8 * index[k];
        for (int j = 0; j < 8; ++j) {
            float w = weight[8 * k + j], q = xx[k][(pg[j] - 1) / 2];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    if (sumqx > 0 && sumq2 > 0) *scale = sumqx / sumq2;
}

static float abs_max(int n, const float *x) {
    float max = fabsf(x[0]);
    for (int i = 1; i < n; ++i) max = fabsf(x[i]) > max ? fabsf(x[i]) : max;
    return max;
}

/* One IQ1_S sub-block of 32: false (zero) or its scale, shift (+-1) and
 * the codebook positions of its 4 groups. */
static bool iq1_s_subblock(const float *xb, const float *weight, float *scale_out, int *shift_out,
                           uint16_t index[4]) {
    const int n = IQ1S_SUB;
    const float max = abs_max(n, xb);
    if (max < 1e-12f) return false; /* ggml's GROUP_MAX_EPS_IQ1_S */
    int idx[IQ1S_SUB];
    float sumx[IQ1S_SUB + 1], sumw[IQ1S_SUB + 1];
    sort_by_value(n, xb, idx);
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < n; ++j) {
        sumx[j + 1] = sumx[j] + weight[idx[j]] * xb[idx[j]];
        sumw[j + 1] = sumw[j] + weight[idx[j]];
    }
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= n; ++i1) {
        for (int i2 = i1; i2 <= n; ++i2) {
            for (int sh = 1; sh >= -1; sh -= 2) {
                const float *v = sh == 1 ? x_p : x_m;
                float sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[n] - sumx[i2]) * v[2];
                float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                              (sumw[n] - sumw[i2]) * v[2] * v[2];
                if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                    scale = sumqx / sumq2;
                    best_score = scale * sumqx;
                    besti1 = i1;
                    besti2 = i2;
                    best_shift = sh;
                }
            }
        }
    }
    if (besti1 < 0 || besti2 < 0 || best_shift == 0) return false;
    int8_t L[IQ1S_SUB];
    if (levels_from_split(n, idx, besti1, besti2, &scale, L)) best_shift = -best_shift;
    const float *xx = best_shift == 1 ? x_p : x_m;
    const float *const xxs[4] = {xx, xx, xx, xx};
    to_grid(n, xb, weight, xxs, &scale, L, index);
    *scale_out = scale;
    *shift_out = best_shift;
    return true;
}

static void iq1_s_superblock(const float *x, const float *qw, hfq_block_iq1_s *y) {
    memset(y, 0, sizeof *y);
    if (!qw) return;
    const float sigma2 = 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K;
    float scales[8] = {0}, weight[IQ1S_SUB], max_scale = 0;
    int shifts[8];
    for (int ib = 0; ib < 8; ++ib) {
        const float *xb = x + IQ1S_SUB * ib;
        uint16_t index[4];
        hfq_importance_weights(IQ1S_SUB, xb, qw + IQ1S_SUB * ib, sigma2, weight);
        shifts[ib] = 1;
        if (!iq1_s_subblock(xb, weight, &scales[ib], &shifts[ib], index)) continue;
        uint16_t h = 0;
        for (int k = 0; k < 4; ++k) {
            y->qs[4 * ib + k] = (uint8_t)(index[k] & 255);
            h |= (uint16_t)((index[k] >> 8) << 3 * k);
        }
        y->qh[ib] = h;
        max_scale = scales[ib] > max_scale ? scales[ib] : max_scale;
    }
    if (!max_scale) return;
    const float d = max_scale / 15, id = 1 / d;
    y->d = hfq_f32_to_fp16(d * 1.125f); /* ggml's fudge factor */
    for (int ib = 0; ib < 8; ++ib) {
        int l = hfq_nearest_int(0.5f * (id * scales[ib] - 1));
        l = l < 0 ? 0 : l > 7 ? 7 : l;
        if (shifts[ib] == -1) l |= 8;
        y->qh[ib] |= (uint16_t)(l << 12);
    }
}

/* The shifted levels of half h (0, 1) of an IQ1_M sub-block under shift
 * combination k: 0 (+,+), 1 (+,-), 2 (-,+), 3 (-,-). */
static const float *iq1_m_levels(int k, int h) {
    return (h == 0 ? k < 2 : k % 2 == 0) ? x_p : x_m;
}

/* One IQ1_M sub-block of 16: false (zero) or its scale, shift combination
 * and the codebook positions of its 2 groups. Prefix sums are kept per
 * half, each half having its own shift; with v0 - v1 = v1 - v2 = -1 the sum
 * over a split is T v2 - px[i1] - px[i2] (ggml's algebra, kept). */
static bool iq1_m_subblock(const float *xb, const float *weight, float *scale_out, int *combo_out,
                           uint16_t index[2]) {
    const int n = IQ1M_SUB;
    const float max = abs_max(n, xb);
    if (max < 1e-7f) return false; /* ggml's GROUP_MAX_EPS_IQ1_M */
    int idx[IQ1M_SUB];
    sort_by_value(n, xb, idx);
    float px[2][IQ1M_SUB + 1], pw[2][IQ1M_SUB + 1];
    px[0][0] = px[1][0] = pw[0][0] = pw[1][0] = 0;
    for (int j = 0; j < n; ++j) {
        const int i = idx[j], h = i < n / 2 ? 0 : 1;
        px[h][j + 1] = px[h][j] + weight[i] * xb[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[h][j + 1] = pw[h][j] + weight[i];
        pw[1 - h][j + 1] = pw[1 - h][j];
    }
    const float txs[2] = {px[0][n], px[1][n]}, tws[2] = {pw[0][n], pw[1][n]};
    const float p2 = x_p[2], m2 = x_m[2];
    const float cp1 = x_p[0] * x_p[0] - x_p[1] * x_p[1], cp2 = x_p[1] * x_p[1] - x_p[2] * x_p[2];
    const float cm1 = x_m[0] * x_m[0] - x_m[1] * x_m[1], cm2 = x_m[1] * x_m[1] - x_m[2] * x_m[2];
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_k = -1;
    for (int i1 = 0; i1 <= n; ++i1) {
        for (int i2 = i1; i2 <= n; ++i2) {
            float qx_p[2], qx_m[2], q2_p[2], q2_m[2], sumqx[4], sumq2[4];
            for (int h = 0; h < 2; ++h) {
                const float sx = px[h][i1] + px[h][i2];
                qx_p[h] = txs[h] * p2 - sx;
                qx_m[h] = txs[h] * m2 - sx;
                q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
            }
            sumqx[0] = qx_p[0] + qx_p[1];
            sumqx[1] = qx_p[0] + qx_m[1];
            sumqx[2] = qx_m[0] + qx_p[1];
            sumqx[3] = qx_m[0] + qx_m[1];
            sumq2[0] = q2_p[0] + q2_p[1];
            sumq2[1] = q2_p[0] + q2_m[1];
            sumq2[2] = q2_m[0] + q2_p[1];
            sumq2[3] = q2_m[0] + q2_m[1];
            for (int k = 0; k < 4; ++k) {
                if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                    scale = sumqx[k] / sumq2[k];
                    best_score = scale * sumqx[k];
                    besti1 = i1;
                    besti2 = i2;
                    best_k = k;
                }
            }
        }
    }
    if (besti1 < 0 || besti2 < 0 || best_k < 0) return false;
    int8_t L[IQ1M_SUB];
    if (levels_from_split(n, idx, besti1, besti2, &scale, L)) best_k = 3 - best_k;
    const float *const xxs[2] = {iq1_m_levels(best_k, 0), iq1_m_levels(best_k, 1)};
    to_grid(n, xb, weight, xxs, &scale, L, index);
    *scale_out = scale;
    *combo_out = best_k;
    return true;
}

static void iq1_m_superblock(const float *x, const float *qw, hfq_block_iq1_m *y) {
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88}; /* shift bits of a combination */
    memset(y, 0, sizeof *y);
    const float sigma2 = 2 * hfq_sum_squares(HFQ_QK_K, x) / HFQ_QK_K;
    float scales[16] = {0}, weight[IQ1M_SUB], max_scale = 0;
    int combos[16];
    for (int ib = 0; ib < 16; ++ib) {
        const float *xb = x + IQ1M_SUB * ib;
        uint16_t index[2];
        hfq_iq_weights(IQ1M_SUB, xb, qw ? qw + IQ1M_SUB * ib : NULL, sigma2, weight);
        combos[ib] = 0;
        if (!iq1_m_subblock(xb, weight, &scales[ib], &combos[ib], index)) continue;
        y->qs[2 * ib] = (uint8_t)(index[0] & 255);
        y->qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
        y->qh[ib] = (uint8_t)((index[0] >> 8) | (index[1] >> 8) << 4);
        max_scale = scales[ib] > max_scale ? scales[ib] : max_scale;
    }
    if (!max_scale) return;
    /* 3-bit scales against max / 15, then the super-block scale refitted
     * to the rounded ones */
    uint16_t sc[4] = {0};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ++ib) {
        int l = hfq_nearest_int(0.5f * (id * scales[ib] - 1));
        l = l < 0 ? 0 : l > 7 ? 7 : l;
        sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
        y->qh[ib] |= masks[combos[ib]];
        const float *xb = x + IQ1M_SUB * ib;
        hfq_iq_weights(IQ1M_SUB, xb, qw ? qw + IQ1M_SUB * ib : NULL, sigma2, weight);
        for (int k = 0; k < 2; ++k) {
            const float *xx = iq1_m_levels(combos[ib], k);
            const int8_t *pg =
                hfq_iq_lattice_iq1s.coords + 8 * (y->qs[2 * ib + k] + ((y->qh[ib] << (8 - 4 * k)) & 0x700));
            for (int j = 0; j < 8; ++j) {
                float w = weight[8 * k + j], q = xx[(pg[j] - 1) / 2] * (2 * l + 1);
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const uint16_t s = hfq_f32_to_fp16(d * 1.1125f); /* ggml's fudge factor */
    sc[0] |= (uint16_t)((s & 0x000f) << 12);
    sc[1] |= (uint16_t)((s & 0x00f0) << 8);
    sc[2] |= (uint16_t)((s & 0x0f00) << 4);
    sc[3] |= (uint16_t)(s & 0xf000);
    for (int k = 0; k < 4; ++k) {
        y->scales[2 * k] = (uint8_t)sc[k];
        y->scales[2 * k + 1] = (uint8_t)(sc[k] >> 8);
    }
}

HFQ_DEFINE_QUANTIZE_BLOCKS(quantize_iq1_s_rows, hfq_block_iq1_s, HFQ_QK_K, iq1_s_superblock)
HFQ_DEFINE_QUANTIZE_BLOCKS(hfq_quantize_iq1_m, hfq_block_iq1_m, HFQ_QK_K, iq1_m_superblock)

/* Without importance: zero blocks and 0, see iq1.h. */
size_t hfq_quantize_iq1_s(const float *src, void *dst, int64_t nrows, int64_t n_per_row, const float *importance) {
    size_t bytes = quantize_iq1_s_rows(src, dst, nrows, n_per_row, importance);
    return importance ? bytes : 0;
}

HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq1_s, hfq_block_iq1_s, HFQ_QK_K, hfq_decode_iq1_s)
HFQ_DEFINE_DEQUANTIZE_ROW(hfq_dequantize_iq1_m, hfq_block_iq1_m, HFQ_QK_K, hfq_decode_iq1_m)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_iq1_s, hfq_block_iq1_s, hfq_block_q8_k, HFQ_QK_K, hfq_dot_iq1_s_q8_k)
HFQ_DEFINE_VEC_DOT(hfq_vec_dot_iq1_m, hfq_block_iq1_m, hfq_block_q8_k, HFQ_QK_K, hfq_dot_iq1_m_q8_k)
