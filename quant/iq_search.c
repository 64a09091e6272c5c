/* The grid sub-block search; see iq_search.h. */
#include "quant/iq_search.h"

#include <math.h>
#include <string.h>

#include "quant/block_math.h"
#include "quant/scale_search.h"

/* The lattice index of one group's levels. */
static uint16_t point_of(const hfq_iq_lattice *lat, const int8_t *L) {
    uint16_t u = 0;
    for (int i = 0; i < lat->dim; ++i) u |= (uint16_t)(L[i] << lat->bits * i);
    return u;
}

/* Rounds one group's magnitudes xv at inverse scale id to levels L, then
 * onto the codebook (neighbours compared at scale); returns whether the
 * rounding was already on it. */
static bool round_group(const hfq_iq_search *v, const float *xv, const float *wv, float id, float scale,
                        int8_t *L) {
    for (int i = 0; i < v->lat->dim; ++i) {
        int l = hfq_nearest_int(0.5f * (id * xv[i] - 1));
        L[i] = (int8_t)(l < 0 ? 0 : l > v->kmaxq - 1 ? v->kmaxq - 1 : l);
    }
    int32_t m = v->lat->map[point_of(v->lat, L)];
    if (m >= 0) return true;
    hfq_iq_best_neighbour(v->lat, hfq_iq_neighbours(v->lat, m), xv, wv, scale, L);
    return false;
}

/* sum w x q, with sum w q^2 in *sumq2 (q = 2 L + 1). */
static float fit(int n, const float *xval, const float *weight, const int8_t *L, float *sumq2_out) {
    float sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; ++i) {
        float w = weight[i], q = 2 * L[i] + 1;
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    *sumq2_out = sumq2;
    return sumqx;
}

/* Magnitudes and sign bits of each 8 weights. */
static void fold_signs(const hfq_iq_search *v, int n, const float *xb, const float *weight, float *xval,
                       uint8_t *signs) {
    for (int k = 0; k < n / 8; ++k) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            if (xb[8 * k + i] >= 0) xval[8 * k + i] = xb[8 * k + i];
            else {
                xval[8 * k + i] = -xb[8 * k + i];
                ++nflip;
                s |= (uint8_t)(1 << i);
            }
        }
        if (v->even_signs && nflip % 2) {
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; ++i) {
                float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= (uint8_t)(1 << imin);
        }
        signs[k] = v->even_signs ? s & 127 : s;
    }
}

bool hfq_iq_search_block(const hfq_iq_search *v, int n, const float *xb, const float *weight, float *scale_out,
                         uint8_t *signs, uint16_t *index) {
    const int dim = v->lat->dim, ng = n / dim;
    float xval[HFQ_IQ_MAX_SUB] = {0}, waux[HFQ_IQ_MAX_SUB];
    int8_t L[HFQ_IQ_MAX_SUB] = {0}, Laux[HFQ_IQ_MAX_SUB];
    bool on_grid[HFQ_IQ_MAX_SUB / 4], on_grid_aux[HFQ_IQ_MAX_SUB / 4];
    uint8_t s[HFQ_IQ_MAX_SUB / 8];
    *scale_out = 0;
    for (int i = 0; i < n; ++i) waux[i] = sqrtf(weight[i]);
    fold_signs(v, n, xb, weight, xval, s);
    float max = xval[0];
    for (int i = 1; i < n; ++i) max = xval[i] > max ? xval[i] : max;
    if (v->eps > 0 ? max < v->eps : !max) return false;
    float scale = max / (2 * v->kmaxq - 1), base = max;
    if (v->qp_start) {
        uint8_t Lqp[HFQ_IQ_MAX_SUB];
        scale = hfq_search_positive(n, v->kmaxq + 1, xval, weight, Lqp);
        base = scale * v->kmaxq;
        if (base <= 0) return false;
    }
    float best = 0;
    for (int k = 0; k < ng; ++k) on_grid[k] = v->refine != HFQ_IQ_REFINE_ALL_IF_OFF;
    for (int is = -v->n_steps; is <= v->n_steps; ++is) {
        float id = (2 * v->kmaxq - 1 + is * v->step) / base, this_scale = 1 / id;
        for (int k = 0; k < ng; ++k)
            on_grid_aux[k] = round_group(v, xval + dim * k, waux + dim * k, id, this_scale, Laux + dim * k);
        float sumq2, sumqx = fit(n, xval, weight, Laux, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)n);
            memcpy(on_grid, on_grid_aux, sizeof on_grid);
        }
    }
    int n_off = 0;
    for (int k = 0; k < ng; ++k) n_off += !on_grid[k];
    if ((n_off > 0 || v->refine == HFQ_IQ_REFINE_ALL) && scale > 0) {
        float id = 1 / scale;
        for (int k = 0; k < ng; ++k)
            if (v->refine != HFQ_IQ_REFINE_OFF_GRID || !on_grid[k])
                round_group(v, xval + dim * k, waux + dim * k, id, scale, L + dim * k);
        float sumq2, sumqx = fit(n, xval, weight, L, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        /* ggml: cannot happen, but the stored scale is unsigned */
        scale = -scale;
        for (int k = 0; k < n / 8; ++k) s[k] = (uint8_t)(~s[k] & (v->even_signs ? 127 : 255));
    }
    for (int k = 0; k < ng; ++k) index[k] = (uint16_t)v->lat->map[point_of(v->lat, L + dim * k)];
    memcpy(signs, s, (size_t)(n / 8));
    *scale_out = scale;
    return true;
}

void hfq_iq_weights(int n, const float *x, const float *qw, float sigma2, float *weight) {
    if (qw) hfq_importance_weights(n, x, qw, sigma2, weight);
    else
        for (int i = 0; i < n; ++i) weight[i] = x[i] * x[i];
}

int hfq_iq_scale4(float id, float s) {
    int l = hfq_nearest_int(0.5f * (id * s - 1));
    return l < 0 ? 0 : l > 15 ? 15 : l;
}
