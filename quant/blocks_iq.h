/* blocks_iq.h - the on-disk blocks of ggml's grid i-quants (IQ3, IQ2, IQ1)
 * and ternary formats (TQ1_0, TQ2_0): byte for byte ggml-common.h's, so a
 * row of them is what a GGUF tensor of that type holds (see quant/blocks.h
 * for the conventions: fp16 as raw bits, little-endian). Shared by C and
 * CUDA. */
#ifndef HFQ_QUANT_BLOCKS_IQ_H
#define HFQ_QUANT_BLOCKS_IQ_H

#include "quant/blocks.h"

/* IQ3_XXS: eight sub-blocks of 32, each eight codebook indices (qs[0..63],
 * hfq_iq3xxs_grid, 4 magnitudes each) and one 32-bit word after them
 * (qs[64 + 4 j ..]): bits 7 k .. 7 k + 6 the signs of 8 weights k (the
 * eighth sign makes the count of negatives even), bits 28..31 the scale s:
 * x = d * (0.5 + s) * 0.5 * grid * sign. */
typedef struct hfq_block_iq3_xxs {
    uint16_t d;
    uint8_t qs[3 * HFQ_QK_K / 8];
} hfq_block_iq3_xxs;

/* IQ3_S: eight sub-blocks of 32; 9-bit indices into hfq_iq3s_grid (low 8
 * in qs, bit 8 of index 8 j + k in bit k of qh[j]), one sign bit per weight,
 * 4-bit scales s (nibble j % 2 of scales[j / 2]): x = d * (1 + 2 s) * grid
 * * sign. */
typedef struct hfq_block_iq3_s {
    uint16_t d;
    uint8_t qs[HFQ_QK_K / 4];
    uint8_t qh[HFQ_QK_K / 32];
    uint8_t signs[HFQ_QK_K / 8];
    uint8_t scales[HFQ_QK_K / 64];
} hfq_block_iq3_s;

/* IQ2_XXS: eight sub-blocks of 32, two 32-bit words each (qs[4 j ..]):
 * the first the codebook indices (hfq_iq2xxs_grid, 8 magnitudes each) of
 * its four groups of 8, one byte each; the second their signs, 7 bits a
 * group (the eighth the parity), and the scale s in bits 28..31:
 * x = d * (0.5 + s) * 0.25 * grid * sign. */
typedef struct hfq_block_iq2_xxs {
    uint16_t d;
    uint16_t qs[HFQ_QK_K / 8];
} hfq_block_iq2_xxs;

/* IQ2_XS: one 16-bit word per group of 8 (9-bit index into
 * hfq_iq2xs_grid, 7 sign bits above), a 4-bit scale per 16 weights (nibble
 * h % 2 of scales[h / 2]): x = d * (0.5 + s) * 0.25 * grid * sign. */
typedef struct hfq_block_iq2_xs {
    uint16_t d;
    uint16_t qs[HFQ_QK_K / 8];
    uint8_t scales[HFQ_QK_K / 32];
} hfq_block_iq2_xs;

/* IQ2_S: 10-bit indices into hfq_iq2s_grid (low 8 in qs[g], the top 2 in
 * bits 2 (g % 4) of qh[g / 4]), 8 sign bits per group in qs[32 + g], 4-bit
 * scales per 16 weights as IQ2_XS. */
typedef struct hfq_block_iq2_s {
    uint16_t d;
    uint8_t qs[HFQ_QK_K / 4];
    uint8_t qh[HFQ_QK_K / 32];
    uint8_t scales[HFQ_QK_K / 32];
} hfq_block_iq2_s;

/* IQ1_S: eight sub-blocks of 32, each four 11-bit indices into
 * hfq_iq1s_grid (8 values -1/0/+1 each; low 8 bits in qs[4 j + l], the
 * top 3 in bits 3 l of qh[j]) and in qh[j] bits 12..14 the scale s, bit 15
 * the sign of the shift: x = d * (2 s + 1) * (grid +- 0.125). */
typedef struct hfq_block_iq1_s {
    uint16_t d;
    uint8_t qs[HFQ_QK_K / 8];
    uint16_t qh[HFQ_QK_K / 32];
} hfq_block_iq1_s;

/* IQ1_M: sixteen sub-blocks of 16, indices as IQ1_S (the top 3 bits of
 * group g in nibble g % 2 of qh[g / 2], whose bit 3 is the group's shift
 * sign), 3-bit scales (sub-block k in bits 3 (k % 4) of the 16-bit word
 * k / 4 of scales) and the fp16 scale d in the words' top nibbles:
 * x = d * (2 s + 1) * (grid +- 0.125). No d field. */
typedef struct hfq_block_iq1_m {
    uint8_t qs[HFQ_QK_K / 8];
    uint8_t qh[HFQ_QK_K / 16];
    uint8_t scales[HFQ_QK_K / 32];
} hfq_block_iq1_m;

/* TQ1_0: ternary x = d * (t - 1), t in 0..2, five trits a byte stored as
 * ceil(value * 256 / 243) so the n-th trit is the top of byte * 3^n * 3:
 * qs[m] of the first 32 holds elements m + 32 n (n = 0..4), qs[32 + m]
 * elements 160 + m + 16 n, qh[j] four elements 240 + j + 4 n. */
typedef struct hfq_block_tq1_0 {
    uint8_t qs[(HFQ_QK_K - 4 * HFQ_QK_K / 64) / 5];
    uint8_t qh[HFQ_QK_K / 64];
    uint16_t d;
} hfq_block_tq1_0;

/* TQ2_0: x = d * (t - 1), 2 bits a trit: bits 2 l of qs[32 j + m] hold
 * element 128 j + 32 l + m. */
typedef struct hfq_block_tq2_0 {
    uint8_t qs[HFQ_QK_K / 4];
    uint16_t d;
} hfq_block_tq2_0;

HFQ_STATIC_ASSERT(sizeof(hfq_block_tq1_0) == 54, "tq1_0 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_tq2_0) == 66, "tq2_0 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq1_s) == 50, "iq1_s block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq1_m) == 56, "iq1_m block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq2_xxs) == 66, "iq2_xxs block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq2_xs) == 74, "iq2_xs block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq2_s) == 82, "iq2_s block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq3_xxs) == 98, "iq3_xxs block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq3_s) == 110, "iq3_s block size");

#endif
