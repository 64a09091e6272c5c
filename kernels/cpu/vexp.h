/* vexp.h - e^x in plain float arithmetic that gcc vectorizes (softmax, SiLU).
 *
 * Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, and Cephes' degree-6
 * polynomial for e^r: within 1.5 ulp of e^x on [-87, 88.3]; inputs outside
 * are clamped (e^-87.3 ~ 1e-38 stands in for smaller values, e^88.3 for
 * larger ones). */
#ifndef HFQ_KERNELS_CPU_VEXP_H
#define HFQ_KERNELS_CPU_VEXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float cpu_expf(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
    float n = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f;          /* ln2 in two parts: exact product first */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;   /* 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

#endif
