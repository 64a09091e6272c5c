/* panel.h - batched products of K-quant, i-quant and Q8_0-activation
 * (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, NVFP4) weights on AVX512-VNNI, AVX-VNNI
 * and AVX2, one weight decode per product (panel.c); below, FP8 codes and
 * weight-only MXFP4 / NVFP4 for every batch size and INT8 weight-only
 * batches (panel_fp8.c), INT8 W8A8 batches (panel_int8.c), one token of the
 * 32-value nibble formats (rows_nibbles.c), and the one door cpu_matmul
 * takes to all of them.
 *
 * The tiles of quant_kernels.h decode a weight block for every few
 * activation rows and sum each (row, token) pair across vector lanes. Here a
 * thread decodes a panel of weight rows once per product into signed bytes
 * (with each block's integer sub-block scales and float scales), the
 * activation rows (Q8_K, Q8_0) are laid out 16 tokens side by side (4 bytes of
 * each token per 32-bit lane, as unsigned a + 128), and every 4-byte group
 * of a weight row, broadcast, meets 16 tokens in one vpdpbusd: no
 * horizontal sums, and the decode is shared by every token of the batch.
 *
 * The bits are the reference dot's (quant/qtype.h vec_dot) for every
 * (row, token): a sub-block's sum of products is an exact integer whatever
 * the order (each starts from -128 times the sum of its weight codes, which
 * takes the + 128 back), scaled by its integer scale exactly as the
 * reference does, and the float steps per block (of 256, or of 32 with Q8_0
 * activations, or per sub-block: IQ4_XS, NVFP4)
 * are the reference's, in its order, each lane a token. */
#ifndef HFQ_KERNELS_CPU_PANEL_H
#define HFQ_KERNELS_CPU_PANEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/model.h"
#include "quant/qtype.h"

typedef struct cpu_panel_format cpu_panel_format;

/* The panel kernel of weight format t with activations of format act (t's
 * vec_dot_type) for a batch of n_tokens, or NULL: none for the pair, fewer
 * tokens than panels need to beat the tiles (by format and instruction set:
 * panel.c), or this CPU lacks AVX2, BMI2 and FMA (or the runner was told to use
 * no SIMD). AVX512-VNNI, AVX-VNNI and AVX2 each have their kernels. */
const cpu_panel_format *cpu_panel_format_get(hfq_qtype t, hfq_qtype act, int64_t n_tokens);

/* y[t * w->ne1 + r] = dot(weight row r, activation row t) for every row r
 * of w and token t < n_tokens, on up to n_threads OpenMP threads: act holds
 * n_tokens rows of f's activation format (the weight's vec_dot_type, Q8_K or
 * Q8_0; W4A4: MXFP4 or NVFP4 blocks, the dot without NVFP4's global
 * scales, as hfq_dot_nvfp4_nvfp4), a_stride bytes apart.
 * Returns false, having written nothing, when its scratch cannot be
 * allocated (the tiles compute the same bits). */
bool cpu_panel_matmul(const cpu_panel_format *f, int n_threads, const hfq_tensor *w, const void *act,
                      size_t a_stride, int64_t n_tokens, float *y);

/* The same in instruction set isa (tests: every set gives the same bits);
 * false when this CPU does not run it. */
bool cpu_panel_matmul_isa(const cpu_panel_format *f, cpu_quant_isa isa, int n_threads, const hfq_tensor *w,
                          const void *act, size_t a_stride, int64_t n_tokens, float *y);

/* FP8 codes (I8, E4M3 / E5M2) for every batch size (panel_fp8.c), three
 * kinds of operands, each product the bits of its reference:
 * - W8A8: activations FP8 codes of the weight's encoding in the BF16 pair
 *   form cpu_i8_tile chose (CPU_I8_ACT_BF16_PAIRS), one scale each:
 *   hfq_dot_fp8_fp8 (in scale groups hfq_dot_fp8_fp8_groups), its eight
 *   partial sums per dot in its order;
 * - SCALED: float activation rows (weights marked act_fp8_group), each
 *   weight's float times its scale first, fused into partial sum i % 8,
 *   the sums combined as quant/lanes.h: the float tiles' order
 *   (float_kernels.c), so the bits of the F32 weights code * scale there
 *   (matmul.c's reference dot_fp8_codes_f32);
 * - FLOAT: float activation rows (weight-only FP8): hfq_dot_fp8_f32 (in
 *   scale groups hfq_dot_fp8_f32_groups); INT8 codes alike (weight-only):
 *   hfq_dot_int8_f32; MXFP4 / NVFP4 blocks (weights marked act_none):
 *   hfq_dot_mxfp4_f32 / hfq_dot_nvfp4_f32 (NVFP4's tensor scale is
 *   cpu_matmul's, after). */
typedef enum cpu_fp8_operands { CPU_FP8_W8A8, CPU_FP8_SCALED, CPU_FP8_FLOAT } cpu_fp8_operands;

/* Whether weight w takes them with operands o: FP8 codes with one scale,
 * one per row or groups of whole 16s (SCALED 32s; FLOAT also INT8 codes and
 * MXFP4 / NVFP4 blocks), rows of whole 16s, on a CPU with AVX-512 (F, BW,
 * DQ, VL) and VBMI, W8A8 also AVX512-BF16. */
bool cpu_panel_fp8_fits(const hfq_tensor *w, cpu_fp8_operands o);

/* From this many tokens the weights are decoded into panels once per
 * product, the tokens paired in the lanes; below, rows decoded as they
 * stream, paired in the lanes, a token or two at a time. */
#define CPU_PANEL_FP8_MIN_TOKENS 12

/* y as cpu_panel_matmul's: act n_tokens rows a_stride bytes apart (W8A8:
 * pairs with their scales a_scales; else floats); false (nothing written)
 * when the panels' scratch cannot be allocated. Only where
 * cpu_panel_fp8_fits. */
bool cpu_panel_fp8_matmul(cpu_fp8_operands o, int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                          const float *a_scales, int64_t n_tokens, float *y);

/* How a W8A8 batch's products are made from CPU_PANEL_FP8_MIN_TOKENS, the
 * same bits either way (a NaN result is NaN either way, its payload not
 * promised): BF16 pairs in vdpbf16ps (32 products an instruction), or the
 * codes' floats fused-multiply-added (16 an instruction: a product of two
 * FP8 values is exact in a float and no sum of them is subnormal, so each
 * fused step is vdpbf16ps's rounded one), faster where vdpbf16ps issues at
 * under half the rate of vfmadd231ps (Intel's Sapphire Rapids: a quarter).
 * CPU_FP8_BY_MEASURED, cpu_panel_fp8_matmul's: whichever this CPU runs
 * faster, timed once per process (16 chains of 512 of each instruction,
 * best of five: tens of microseconds). */
typedef enum cpu_fp8_w8a8_by { CPU_FP8_BY_MEASURED, CPU_FP8_BY_BF16, CPU_FP8_BY_FMA } cpu_fp8_w8a8_by;
bool cpu_panel_fp8_matmul_by(cpu_fp8_w8a8_by by, cpu_fp8_operands o, int n_threads, const hfq_tensor *w,
                             const void *act, size_t a_stride, const float *a_scales, int64_t n_tokens, float *y);

/* INT8 W8A8 (I8 INT8 codes, activations INT8 codes as stored with one
 * scale per token; panel_int8.c): the bits of hfq_dot_int8_int8, each
 * scale group's exact integer sum by vpdpbusd against 16 tokens at once.
 * Whether weight w takes them for a batch of n_tokens: scale groups (or
 * rows) of whole 4s and at most 2^16 values, at least 8 rows, AVX512-VNNI,
 * enough tokens. */
#define CPU_PANEL_INT8_MIN_TOKENS 64
bool cpu_panel_int8_fits(const hfq_tensor *w, int64_t n_tokens);

/* y as cpu_panel_matmul's, act n_tokens rows of codes a_stride bytes apart
 * with their scales; false (nothing written) when out of memory. */
bool cpu_panel_int8_matmul(int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                           const float *a_scales, int64_t n_tokens, float *y);

/* MXFP4, Q4_0, IQ4_NL and Q5_0 weights times one Q8_0 activation row (decoding;
 * rows_nibbles.c): the bits of their reference dots, a vector's rows'
 * block sums (16 on AVX512-VNNI, 8 on AVX-VNNI and AVX2) in the lanes of
 * one float step. Whether weight w takes them for a batch of n_tokens: one
 * token, in this CPU's best set (on AVX2 not IQ4_NL; Q5_0 on AVX512-VNNI
 * only). */
bool cpu_rows_nibbles_fits(const hfq_tensor *w, int64_t n_tokens);

/* y[0..n_out) from act, one row of Q8_0 blocks, in this CPU's best set or
 * in set isa; false (nothing written) where that set has no such step (or
 * the CPU does not run it) or out of memory. */
bool cpu_rows_nibbles_matmul(int n_threads, const hfq_tensor *w, const void *act, float *y);
bool cpu_rows_nibbles_matmul_isa(cpu_quant_isa isa, int n_threads, const hfq_tensor *w, const void *act, float *y);

/* cpu_matmul's one door to the panels: the products of weight w (kernel k,
 * act its activation rows as k says, a_scales theirs) by whichever panel
 * kernel above takes them, into y, as the tiles write them (W4A4 NVFP4:
 * before the global scales, which cpu_matmul applies to both); false when
 * none does for this weight, batch and CPU, or out of memory (nothing
 * written: the tiles compute the same bits). */
bool cpu_panel_products(const cpu_wkernel *k, int n_threads, const hfq_tensor *w, const void *act, size_t a_stride,
                        const float *a_scales, int64_t n_tokens, float *y);

/* The (weight, activation) formats with panel kernels (on x86-64 builds,
 * whatever this CPU), at most max of them into types and acts; returns how
 * many (tests and benchmarks). */
size_t cpu_panel_formats(hfq_qtype *types, hfq_qtype *acts, size_t max);

#endif
