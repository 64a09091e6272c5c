#include "src/export/ct_int4.h"

#include <math.h>

#include "src/hf/ct_read.h"

/* torch.finfo(dtype).eps: what calculate_qparams puts in place of a zero scale */
static float dtype_eps(st_dtype dt) {
    return dt == ST_BF16 ? 0x1p-7f : dt == ST_F16 ? 0x1p-10f : 0x1p-23f;
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The scale and zero point of one group of range [lo, hi] (lo <= 0 <= hi). */
static void range_params(float lo, float hi, bool symmetric, st_dtype dt, float *s, float *z) {
    *s = symmetric ? hf_ct_round_to(dt, fmaxf(-lo, hi) / 7.5f) : hf_ct_round_to(dt, hf_ct_round_to(dt, hi - lo) / 15.0f);
    if (*s == 0.0f) *s = dtype_eps(dt);
    *z = symmetric ? 0.0f : rintf(clampf(hf_ct_round_to(dt, -8.0f - hf_ct_round_to(dt, lo / *s)), -8.0f, 7.0f));
}

int ct_int4_code(float x, float s, float z, bool symmetric, st_dtype dt) {
    float t = hf_ct_round_to(dt, x / s);
    if (!symmetric) t = hf_ct_round_to(dt, t + z);
    return (int)rintf(clampf(t, -8.0f, 7.0f));
}

/* Weighted squared error of a group coded with (s, z), decoded as
 * compressed-tensors does: (q - z) * s. */
static double group_error(const float *x, const float *w, int64_t n, float s, float z, bool symmetric, st_dtype dt) {
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = x[i] - ((double)ct_int4_code(x[i], s, z, symmetric, dt) - z) * s;
        e += w[i] * d * d;
    }
    return e;
}

/* The range shrinks a group's min-max is tried at, min-max first (kept on ties). */
#define SHRINK_STEPS 20
#define SHRINK_STEP 0.01f

void ct_int4_group_params(const float *xg, const float *wg, int64_t group, bool symmetric, st_dtype dt, float *s,
                          float *z) {
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < group; i++) {
        lo = fminf(lo, xg[i]);
        hi = fmaxf(hi, xg[i]);
    }
    range_params(lo, hi, symmetric, dt, s, z);
    if (!wg) return;
    double best = group_error(xg, wg, group, *s, *z, symmetric, dt);
    for (int k = 1; k <= SHRINK_STEPS; k++) {
        const float f = 1.0f - SHRINK_STEP * (float)k;
        float sk, zk;
        range_params(lo * f, hi * f, symmetric, dt, &sk, &zk);
        const double e = group_error(xg, wg, group, sk, zk, symmetric, dt);
        if (e < best) best = e, *s = sk, *z = zk;
    }
}

void ct_int4_row(const float *x, int64_t cols, int64_t group, bool symmetric, st_dtype dt, const float *importance,
                 uint32_t *packed, float *scales, int8_t *zero_points) {
    for (int64_t w = 0; w < cols / 8; w++) packed[w] = 0;
    for (int64_t g = 0; g < cols / group; g++) {
        const float *xg = x + g * group;
        float s, z;
        ct_int4_group_params(xg, importance ? importance + g * group : NULL, group, symmetric, dt, &s, &z);
        scales[g] = s;
        zero_points[g] = (int8_t)z;
        for (int64_t i = 0; i < group; i++) {
            const int64_t j = g * group + i;
            packed[j / 8] |= (uint32_t)(ct_int4_code(xg[i], s, z, symmetric, dt) + 8) << (4 * (j % 8));
        }
    }
}
