/* Scale searches; see scale_search.h. Every float expression keeps ggml's
 * operand order (a * b * c is (a * b) * c, ints convert where ggml's do):
 * float arithmetic is not associative and the output must match to the bit. */
#include "quant/scale_search.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "quant/block_math.h"

void hfq_importance_weights(int n, const float *x, const float *importance, float sigma2, float *w) {
    for (int i = 0; i < n; ++i) w[i] = importance[i] * sqrtf(sigma2 + x[i] * x[i]);
}

float hfq_sum_squares(int64_t n, const float *x) {
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
    return sum;
}

/* The symmetric search tries a fixed ladder of independent candidate
 * scales. ggml tries them one after another; here they run side by side over
 * the values, so several accumulations are in flight at once (and the
 * compiler may vectorize across candidates). Each candidate still adds its
 * terms in value order with the same expressions, so every sum has ggml's
 * bits, and the winner is then picked in ggml's order with ggml's tests. */

#define SYMMETRIC_CANDIDATES 19 /* the starting scale, then nmax + 0.1 * (-9..9, not 0) */

float hfq_search_symmetric(int n, int nmax, const float *x, const float *w, int8_t *L) {
    float iscale;
    return hfq_search_symmetric_iscale(n, nmax, x, w, L, &iscale);
}

float hfq_search_symmetric_iscale(int n, int nmax, const float *x, const float *w, int8_t *L, float *code_iscale) {
    const float extreme = hfq_signed_extreme(x, n);
    *code_iscale = 0.f;
    if (fabsf(extreme) < HFQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale[SYMMETRIC_CANDIDATES], sumlx[SYMMETRIC_CANDIDATES] = {0}, suml2[SYMMETRIC_CANDIDATES] = {0};
    iscale[0] = -nmax / extreme;
    for (int is = -9, c = 1; is <= 9; ++is)
        if (is != 0) iscale[c++] = -(nmax + 0.1f * is) / extreme;
    for (int i = 0; i < n; ++i) {
        const float xi = x[i], wi = w ? w[i] : x[i] * x[i];
        for (int c = 0; c < SYMMETRIC_CANDIDATES; ++c) {
            int l = hfq_level_symmetric(iscale[c], xi, nmax);
            sumlx[c] += wi * xi * l;
            suml2[c] += wi * l * l;
        }
    }
    int chosen = 0;
    float scale = suml2[0] ? sumlx[0] / suml2[0] : 0.0f;
    float best = scale * sumlx[0];
    for (int c = 1; c < SYMMETRIC_CANDIDATES; ++c) {
        /* better fit: larger sumlx^2 / suml2, compared without dividing */
        if (suml2[c] > 0 && sumlx[c] * sumlx[c] > best * suml2[c]) {
            chosen = c;
            scale = sumlx[c] / suml2[c];
            best = scale * sumlx[c];
        }
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(hfq_level_symmetric(iscale[chosen], x[i], nmax) + nmax);
    *code_iscale = iscale[chosen];
    return scale;
}

/* Weighted squared (or absolute) error of x against scale * L + min. */
static float affine_error(int n, const float *x, const float *w, const uint8_t *L, float scale, float min,
                          bool abs_error) {
    float err = 0;
    for (int i = 0; i < n; ++i) {
        float diff = scale * L[i] + min - x[i];
        diff = abs_error ? fabsf(diff) : diff * diff;
        err += w[i] * diff;
    }
    return err;
}

float hfq_search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                        float rdelta, int nstep, bool abs_error) {
    float iscale, min;
    return hfq_search_affine_map(n, nmax, x, w, L, neg_min, rmin, rdelta, nstep, abs_error, &iscale, &min);
}

float hfq_search_affine_map(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                            float rdelta, int nstep, bool abs_error, float *code_iscale, float *code_min) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0; /* the format's offset only ever lowers values */
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        *code_iscale = *code_min = 0.f;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)hfq_level_affine(iscale, x[i], min, nmax);
    *code_iscale = iscale;
    *code_min = min;
    float best_error = affine_error(n, x, w, L, scale, min, abs_error);

    /* Each candidate rounds with the min of the best fit so far, so unlike
     * the symmetric search the candidates depend on each other: one at a
     * time, in order. */
    uint8_t aux[HFQ_AFFINE_MAX_N];
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = hfq_level_affine(iscale, x[i], min, nmax);
            aux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        /* weighted least squares for x ~ scale * l + min */
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = affine_error(n, x, w, aux, this_scale, this_min, abs_error);
        if (err < best_error) {
            memcpy(L, aux, (size_t)n);
            *code_iscale = iscale;
            *code_min = min; /* the min aux was rounded with, before this fit's */
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

float hfq_search_symmetric_refined(int n, int nmax, const float *x, int8_t *L) {
    const float extreme = hfq_signed_extreme(x, n);
    if (fabsf(extreme) < HFQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    const float iscale = -nmax / extreme;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = hfq_clamp_int(hfq_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    /* move single levels to their least-squares value while the fit
     * (sumlx^2 / suml2) improves; L holds signed levels until the end */
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            int new_l = hfq_clamp_int(hfq_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == L[i]) continue;
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                ++n_changed;
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float hfq_search_positive(int n, int nmax, const float *x, const float *w, uint8_t *L) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
    if (max < HFQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    /* coarse: the best of nine scales around nmax / max, by weighted error;
     * the starting candidate is not clamped to nmax, as in ggml */
    float iscale = nmax / max;
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = (uint8_t)hfq_nearest_int(iscale * x[i]);
        float diff = x[i] - scale * L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = (0.1f * is + nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = hfq_nearest_int(iscale_is * x[i]);
            l = l < nmax ? l : nmax;
            float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = hfq_nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    /* fine: move single levels to their least-squares value while the fit
     * (sumlx^2 / suml2) improves */
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int new_l = hfq_nearest_int(x[i] * sl2 / slx);
            new_l = new_l < nmax ? new_l : nmax;
            if (new_l == L[i]) continue;
            slx += w[i] * x[i] * new_l;
            sl2 += w[i] * new_l * new_l;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                ++n_changed;
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- eight groups at once ---- */

void hfq_search_affine_x8(hfq_isa isa, int n, int nmax, const float *x, const float *w, uint8_t *L, float scale[8],
                          float neg_min[8], float rmin, float rdelta, int nstep) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (isa == HFQ_ISA_AVX2) {
        hfq_search_affine_x8_avx2(n, nmax, x, w, L, scale, neg_min, rmin, rdelta, nstep);
        return;
    }
#endif
    (void)isa;
    for (int g = 0; g < 8; ++g)
        scale[g] = hfq_search_affine(n, nmax, x + n * g, w + n * g, L + n * g, &neg_min[g], rmin, rdelta, nstep,
                                     false);
}

void hfq_search_symmetric_x8(hfq_isa isa, int n, int nmax, const float *x, const float *w, int8_t *L,
                             float scale[8]) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (isa == HFQ_ISA_AVX2) {
        hfq_search_symmetric_x8_avx2(n, nmax, x, w, L, scale);
        return;
    }
#endif
    (void)isa;
    for (int g = 0; g < 8; ++g) scale[g] = hfq_search_symmetric(n, nmax, x + n * g, w ? w + n * g : NULL, L + n * g);
}

void hfq_requantize_affine(hfq_isa isa, int n, int nmax, const float *x, float d, float m, uint8_t *L) {
    int i = 0;
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (isa == HFQ_ISA_AVX2) {
        i = n / 8 * 8;
        hfq_requantize_affine_avx2(i, nmax, x, d, m, L);
    }
#endif
    (void)isa;
    for (; i < n; ++i) L[i] = (uint8_t)hfq_relevel_affine(x[i], d, m, nmax);
}

void hfq_requantize_symmetric(hfq_isa isa, int n, int nmax, const float *x, float d, int8_t *L) {
    int i = 0;
#ifdef HFQ_HAVE_AVX2_KERNELS
    if (isa == HFQ_ISA_AVX2) {
        i = n / 8 * 8;
        hfq_requantize_symmetric_avx2(i, nmax, x, d, L);
    }
#endif
    (void)isa;
    for (; i < n; ++i) L[i] = (int8_t)hfq_relevel_symmetric(x[i], d, nmax);
}
