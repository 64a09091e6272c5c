/* quant_rng.h - deterministic random numbers for the quant tests
 * (xorshift64; each test program seeds its own copy). */
#ifndef HFQ_TESTS_QUANT_RNG_H
#define HFQ_TESTS_QUANT_RNG_H

#include <math.h>
#include <stdint.h>

static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;

static inline void rnd_seed(uint64_t seed) { rnd_state = seed ? seed : 1; }

static inline uint32_t rnd_u32(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return (uint32_t)(rnd_state >> 16);
}

/* uniform in [0, 1) */
static inline float rnd_uniform(void) { return (float)(rnd_u32() / 4294967296.0); }

/* standard normal (Box-Muller) */
static inline float rnd_gauss(void) {
    const double u1 = (rnd_u32() + 1.0) / 4294967297.0, u2 = rnd_u32() / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
