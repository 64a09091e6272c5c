#include "src/export/ct_int4.h"

#include <math.h>

#include "src/hf/ct_read.h"

/* torch.finfo(dtype).eps: what calculate_qparams puts in place of a zero scale */
static float dtype_eps(st_dtype dt) {
    return dt == ST_BF16 ? 0x1p-7f : dt == ST_F16 ? 0x1p-10f : 0x1p-23f;
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

void ct_int4_row(const float *x, int64_t cols, int64_t group, bool symmetric, st_dtype dt, uint32_t *packed,
                 float *scales, int8_t *zero_points) {
    for (int64_t w = 0; w < cols / 8; w++) packed[w] = 0;
    for (int64_t g = 0; g < cols / group; g++) {
        const float *xg = x + g * group;
        float lo = 0.0f, hi = 0.0f;
        for (int64_t i = 0; i < group; i++) {
            lo = fminf(lo, xg[i]);
            hi = fmaxf(hi, xg[i]);
        }
        float s, z = 0.0f;
        if (symmetric) {
            s = hf_ct_round_to(dt, fmaxf(-lo, hi) / 7.5f);
        } else {
            s = hf_ct_round_to(dt, hf_ct_round_to(dt, hi - lo) / 15.0f);
        }
        if (s == 0.0f) s = dtype_eps(dt);
        if (!symmetric) z = rintf(clampf(hf_ct_round_to(dt, -8.0f - hf_ct_round_to(dt, lo / s)), -8.0f, 7.0f));
        scales[g] = s;
        zero_points[g] = (int8_t)z;
        for (int64_t i = 0; i < group; i++) {
            float t = hf_ct_round_to(dt, xg[i] / s);
            if (!symmetric) t = hf_ct_round_to(dt, t + z);
            const int q = (int)rintf(clampf(t, -8.0f, 7.0f));
            const int64_t j = g * group + i;
            packed[j / 8] |= (uint32_t)(q + 8) << (4 * (j % 8));
        }
    }
}
