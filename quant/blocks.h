/* blocks.h - the on-disk block layouts of ggml's integer formats.
 *
 * Each struct is byte-for-byte ggml's block (ggml-common.h), so a row of them
 * is what a GGUF tensor of that type holds and llama.cpp loads. fp16 fields
 * are stored as raw IEEE binary16 bits (quant/half.h converts). Multi-byte
 * fields are little-endian: we only target little-endian hosts and devices
 * (x86-64, arm64, CUDA), which the static asserts below cannot check, so the
 * layout tests pin the bytes.
 *
 * Shared by C and CUDA (nvcc compiles this header as C++).
 */
#ifndef HFQ_QUANT_BLOCKS_H
#define HFQ_QUANT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define HFQ_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define HFQ_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#define HFQ_QK 32            /* elements per block of the 32-wide formats */
#define HFQ_QK_K 256         /* elements per K-quant super-block */
#define HFQ_K_SCALE_BYTES 12 /* eight 6-bit scales and eight 6-bit mins */

/* Q8_0: x = d * q, q in [-127, 127]. */
typedef struct hfq_block_q8_0 {
    uint16_t d;
    int8_t qs[HFQ_QK];
} hfq_block_q8_0;

/* Q8_1 (activations for Q5_1): Q8_0 plus s = d * sum(qs), so the dot
 * product with an offset format gets the offset term for free. */
typedef struct hfq_block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[HFQ_QK];
} hfq_block_q8_1;

/* Q4_0: x = d * (q - 8); byte j holds element j (low nibble) and j + 16
 * (high nibble). */
typedef struct hfq_block_q4_0 {
    uint16_t d;
    uint8_t qs[HFQ_QK / 2];
} hfq_block_q4_0;

/* Q1_0 (128 elements): x = +d or -d, bit j of the block (byte j / 8, bit
 * j % 8) set for +d; d the block's mean |x|. */
#define HFQ_QK1_0 128
typedef struct hfq_block_q1_0 {
    uint16_t d;
    uint8_t qs[HFQ_QK1_0 / 8];
} hfq_block_q1_0;

/* Q2_0 (64 elements): x = d * (q - 1), q in [0, 3] two bits each, element
 * j at byte j / 4, bits 2 (j % 4); d the block's max |x|. */
#define HFQ_QK2_0 64
typedef struct hfq_block_q2_0 {
    uint16_t d;
    uint8_t qs[HFQ_QK2_0 / 4];
} hfq_block_q2_0;

/* Q4_1: x = d * q + m, q in [0, 15], nibbles as Q4_0. */
typedef struct hfq_block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[HFQ_QK / 2];
} hfq_block_q4_1;

/* Q5_0: x = d * (q - 16); low nibbles as Q4_0, bit 4 of element j is bit j
 * of the little-endian word qh. */
typedef struct hfq_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[HFQ_QK / 2];
} hfq_block_q5_0;

/* Q5_1: x = d * q + m, q in [0, 31], packed as Q5_0. */
typedef struct hfq_block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[HFQ_QK / 2];
} hfq_block_q5_1;

/* Q2_K: sixteen sub-blocks of 16; x = d * sc[j] * q - dmin * m[j], with
 * scales[j] = sc[j] | m[j] << 4 (4 bits each) and q 2 bits: each 32-byte run
 * of qs holds 128 elements, element 32 s + l of the run in bits 2 s of byte
 * l (s = 0..3). */
typedef struct hfq_block_q2_k {
    uint8_t scales[HFQ_QK_K / 16];
    uint8_t qs[HFQ_QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} hfq_block_q2_k;

/* Q3_K: sixteen sub-blocks of 16; x = d * (sc[j] - 32) * (q - 4), sc 6 bits
 * (packed in `scales`, see hfq_q3_k_scale), q 3 bits: the low 2 as Q2_K,
 * the high one of element e in bit e / 32 of hmask[e % 32]. */
typedef struct hfq_block_q3_k {
    uint8_t hmask[HFQ_QK_K / 8];
    uint8_t qs[HFQ_QK_K / 4];
    uint8_t scales[HFQ_K_SCALE_BYTES];
    uint16_t d;
} hfq_block_q3_k;

/* Q4_K: eight sub-blocks of 32; x = d * sc[j] * q - dmin * m[j], with 6-bit
 * sc/m packed in `scales` (see hfq_k_scale_min in block_math.h). Each 32-byte
 * run of qs holds two sub-blocks: low nibbles the first, high the second. */
typedef struct hfq_block_q4_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[HFQ_K_SCALE_BYTES];
    uint8_t qs[HFQ_QK_K / 2];
} hfq_block_q4_k;

/* Q5_K: Q4_K with a fifth bit per element: sub-block j's bit 4 of element l
 * is bit j of qh[l]. */
typedef struct hfq_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[HFQ_K_SCALE_BYTES];
    uint8_t qh[HFQ_QK_K / 8];
    uint8_t qs[HFQ_QK_K / 2];
} hfq_block_q5_k;

/* Q6_K: sixteen sub-blocks of 16; x = d * scales[j] * (q - 32), q 6 bits:
 * low 4 in ql, high 2 in qh (layout in block_math.h's level extraction). */
typedef struct hfq_block_q6_k {
    uint8_t ql[HFQ_QK_K / 2];
    uint8_t qh[HFQ_QK_K / 4];
    int8_t scales[HFQ_QK_K / 16];
    uint16_t d;
} hfq_block_q6_k;

/* Q8_K (activations for the K-quants): float scale, and the sums of each 16
 * quants so the min terms of Q4_K/Q5_K cost one multiply per sub-block. */
typedef struct hfq_block_q8_k {
    float d;
    int8_t qs[HFQ_QK_K];
    int16_t bsums[HFQ_QK_K / 16];
} hfq_block_q8_k;

/* IQ4_NL: x = d * v[q], v the 16 non-uniform levels of hfq_iq4nl_value
 * (quant/iq4.h); nibbles as Q4_0. */
typedef struct hfq_block_iq4_nl {
    uint16_t d;
    uint8_t qs[HFQ_QK / 2];
} hfq_block_iq4_nl;

/* IQ4_XS: eight sub-blocks of 32; x = d * (ls[j] - 32) * v[q], ls 6 bits:
 * the low 4 in nibble j % 2 of scales_l[j / 2], the high 2 in bits 2 j of
 * scales_h; each 16 bytes of qs hold one sub-block, nibbles as Q4_0. */
typedef struct hfq_block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[HFQ_QK_K / 64];
    uint8_t qs[HFQ_QK_K / 2];
} hfq_block_iq4_xs;

HFQ_STATIC_ASSERT(sizeof(hfq_block_q8_0) == 34, "q8_0 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q8_1) == 36, "q8_1 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q4_0) == 18, "q4_0 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q1_0) == 18, "q1_0 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q2_0) == 18, "q2_0 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q4_1) == 20, "q4_1 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q5_0) == 22, "q5_0 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q5_1) == 24, "q5_1 block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q2_k) == 84, "q2_K block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q3_k) == 110, "q3_K block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q4_k) == 144, "q4_K block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q5_k) == 176, "q5_K block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q6_k) == 210, "q6_K block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_q8_k) == 292, "q8_K block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq4_nl) == 18, "iq4_nl block size");
HFQ_STATIC_ASSERT(sizeof(hfq_block_iq4_xs) == 136, "iq4_xs block size");
HFQ_STATIC_ASSERT(offsetof(hfq_block_q5_1, qh) == 4 && offsetof(hfq_block_q5_1, qs) == 8, "q5_1 layout");
HFQ_STATIC_ASSERT(offsetof(hfq_block_q2_k, d) == 80 && offsetof(hfq_block_q3_k, d) == 108, "q2_K/q3_K layout");
HFQ_STATIC_ASSERT(offsetof(hfq_block_q5_k, qh) == 16 && offsetof(hfq_block_q5_k, qs) == 48, "q5_K layout");
HFQ_STATIC_ASSERT(offsetof(hfq_block_q6_k, scales) == 192 && offsetof(hfq_block_q6_k, d) == 208, "q6_K layout");
HFQ_STATIC_ASSERT(offsetof(hfq_block_q8_k, bsums) == 260, "q8_K layout");

#endif
