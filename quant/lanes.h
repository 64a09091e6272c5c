/* lanes.h - the order in which the float-summed dots of quant/ add their
 * terms (hfq_dot_int8_f32, hfq_dot_fp8_f32, hfq_dot_fp8_fp8): HFQ_LANES
 * partial sums, term i of a run (counted from the run's start) added to sum
 * i % HFQ_LANES in index order, each starting at +0, then the partial sums
 * combined as hfq_lanes_sum says - what one 256-bit vector of float sums and
 * its horizontal sum compute, so that SIMD code (kernels/cpu/i8_kernels.c)
 * gives the same bits with every lane independent, where one sequential sum
 * would wait on each addition. The formats have no outside definition of
 * this order (no ggml type); CUDA's sums are its own, within rounding. */
#ifndef HFQ_QUANT_LANES_H
#define HFQ_QUANT_LANES_H

#include "quant/hd.h"

#define HFQ_LANES 8

/* ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). */
static inline HFQ_HD float hfq_lanes_sum(const float s[HFQ_LANES]) {
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

#endif
