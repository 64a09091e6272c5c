/* gptq.h - GPTQ: rounding a weight matrix column by column, each column's
 * rounding error pushed onto the columns not yet rounded through the inverse
 * of its input's Hessian (Frantar et al., "GPTQ", 2022; the same algorithm as
 * auto-gptq's fasterquant; act-order with static groups as an option).
 *
 * For a weight W [rows][n] whose inputs x (calibration tokens) give the
 * Hessian H = sum x x^T [n][n]:
 *
 *   hfq_gptq_prepare  H += damp * mean(diag H) * I (a column never active,
 *                     H_jj = 0, gets H_jj = 1 first: its weights are only
 *                     rounded), then U = the upper Cholesky factor of H^-1
 *                     (H^-1 = U^T U), in double, in place. U is the same for
 *                     every weight reading that input.
 *   hfq_gptq_encode   each row, left to right in lazy batches of `batch`
 *                     columns (a multiple of the codec's block, so a block's
 *                     header is chosen once all earlier columns have fed it):
 *                     at each block start the codec's header from the current
 *                     values, then per column q = round(w_j),
 *                     e = (w_j - q) / U_jj, w_k -= e U_jk for the batch's later
 *                     columns; after the batch, the later columns get the
 *                     batch's errors at once (a GEMM-shaped update).
 *
 * Rows are independent given U; each row's arithmetic has a fixed order
 * (double, column by column), so the bytes do not depend on the thread
 * count or on how rows are split. With a diagonal H (no feedback) the bytes
 * are the codec's plain ones (quant/gptq_codec.h's promise): the format's
 * quantizer with the same importance.
 */
#ifndef HFQ_QUANT_GPTQ_H
#define HFQ_QUANT_GPTQ_H

#include <stdint.h>

#include "quant/gptq_codec.h"
#include "quant/isa.h"

#define HFQ_GPTQ_DEFAULT_DAMP 0.01
#define HFQ_GPTQ_DEFAULT_BATCH 128

/* Damps H [n][n] (symmetric, row-major; only its upper triangle is read) and
 * overwrites it with U (upper triangle; the strict lower triangle is set to
 * 0). Returns 0, or -1 when H + damping is not positive definite (a NaN or
 * negative diagonal: the caller names the tensor). n_threads <= 0: OpenMP's
 * default. */
int hfq_gptq_prepare(double *h, int64_t n, double damp, int n_threads);
/* The same with the kernels of isa (quant/dgemm.h; for tests). */
int hfq_gptq_prepare_isa(double *h, int64_t n, double damp, int n_threads, hfq_isa isa);

/* GPTQ against quantized inputs (W4A4): a layer whose float inputs x are
 * quantized to xq = x - d before the product computes Q xq = Q x - Q d. To
 * first order (Q d ~ W d) its output error is (W - Q) x + W d, whose least
 * squares over the calibration tokens, plus the damping's lambda |Q - W|^2,
 * is least at the target
 *
 *     Q* = W + W D (H + lambda I)^-1,   D = sum_t (x_t - xq_t) x_t^T,
 *
 * H = sum x x^T: the part of the activation error's effect W d that the
 * float input predicts, moved into the weights (GPTAQ's asymmetric target,
 * Li et al. 2025, with the float inputs; Q* = W where xq = x). GPTQ then
 * rounds Q* under H's U. The exact least squares of |W x - Q xq| (the
 * regression on xq under xq's own Hessian) shrinks the weights against the
 * activations' rounding noise and measured worse end to end
 * (docs/calibration.md).
 *
 * hfq_gptq_target_shift overwrites d [n][n] (row-major, full) with
 * M = D (H + lambda I)^-1 = D U^T U, u from hfq_gptq_prepare of H, or with
 * perm (act-order: u prepared from hfq_gptq_act_order's P H P^T) the same M
 * as D P^T U^T U P; each row of M in a fixed order (any thread count, the
 * same bits).
 * hfq_gptq_shift_row replaces row w [n] by w + w M (double sums over i in
 * order; tmp: n doubles). hfq_gptq_target_shift returns 0, or -1 out of
 * memory (d unchanged). */
int hfq_gptq_target_shift(double *d, const double *u, int64_t n, const int64_t *perm, int n_threads);
void hfq_gptq_shift_row(const double *m, int64_t n, float *w, double *tmp);

/* The lazy batch used for codec c: batch (<= 0: HFQ_GPTQ_DEFAULT_BATCH)
 * rounded up to a multiple of c->block. */
int64_t hfq_gptq_batch(const hfq_gptq_codec *c, int64_t batch);

/* Encodes rows w [nrows][n] (n a multiple of c->block) with U from
 * hfq_gptq_prepare into out (nrows rows of n / c->block * c->block_bytes
 * bytes). importance: n floats shared by all rows, or NULL; global_scale:
 * NVFP4's per-tensor scale (0: none). w is left unchanged. Returns 0, or -1
 * out of memory. */
int hfq_gptq_encode(const hfq_gptq_codec *c, const double *u, const float *w, int64_t nrows, int64_t n,
                    const float *importance, float global_scale, int64_t batch, void *out, int n_threads);

/* Act-order (GPTQ's desc_act with static groups): perm [n] = the columns by
 * descending H_jj (ties: by column), and H [n][n] (upper triangle) replaced
 * by the permuted P H P^T, to be prepared into the U of that order. Returns
 * 0, or -1 out of memory (H unchanged). */
int hfq_gptq_act_order(double *h, int64_t n, int64_t *perm);

/* hfq_gptq_encode in act-order when perm != NULL (hfq_gptq_act_order's, u
 * prepared from its permuted H): every block's header is chosen first from
 * the original row (ggml's blocks are fixed column runs, so their headers
 * stay static), then the columns are rounded in perm's order under their
 * block's header, with the same error feedback and lazy batches in that
 * order. Without feedback (diagonal H) the bytes are the codec's plain ones,
 * as in column order. perm NULL: hfq_gptq_encode. */
int hfq_gptq_encode_perm(const hfq_gptq_codec *c, const double *u, const float *w, int64_t nrows, int64_t n,
                         const float *importance, float global_scale, int64_t batch, const int64_t *perm, void *out,
                         int n_threads);

#endif
