/* block_rotate.h - block Hadamard rotations of the linear weights, undone
 * on the fly by our runner: `quantize --block-rotate [N]` (MR-GPTQ's
 * rotations for NVFP4 / MXFP4; docs/calibration.md "Block rotations").
 *
 * Each 2-D weight the graph multiplies by (attn_q/k/v/qkv, attn_output,
 * ffn_gate/up/down, ffn_gate_inp, an untied output.weight) whose rows are
 * whole blocks of N gets its rows replaced by w Q (quant/hadamard.h: Q
 * block-diagonal Walsh-Hadamard with the seed's signs) and the key
 * hfq.block_rotate.<name> = "hadamard:<N>:<seed>" (docs/format-quant-ext.md);
 * the runner multiplies its input rows by Q before the product, so the
 * function is unchanged up to float rounding in our runner, and different
 * in llama.cpp, which reads no such key: a rotated file is ours only.
 * Experts (3-D), the token embedding (its rows are also looked up) and rows
 * N does not divide are left as they are.
 *
 * The rotated model is written as a temporary GGUF (rotated tensors F32,
 * the others byte for byte, every input key kept) that replaces the input
 * for the rest of the run: calibration then runs the rotated model, whose
 * observer sees the rotated inputs, so importance rows, GPTQ's Hessians
 * (Q^T H Q) and static activation scales describe what the rotated rows
 * meet. Rows are independent: the bytes do not depend on the thread count.
 *
 * Refused (one line naming the file and tensor): a rotatable tensor stored
 * quantized or already rotated, NaN/Inf weights, N not a power of two in
 * [2, HFQ_HADAMARD_MAX_BLOCK], no tensor N fits.
 */
#ifndef HFQ_SRC_QUANTIZE_BLOCK_ROTATE_H
#define HFQ_SRC_QUANTIZE_BLOCK_ROTATE_H

#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"

#define HFQ_BLOCK_ROTATE_SEED 1

typedef struct hfq_block_rotate_info {
    int64_t n_rotated;   /* tensors rotated and marked */
    int64_t n_left;      /* rotatable names whose rows N does not divide */
} hfq_block_rotate_info;

/* Writes f with its weights rotated in blocks of `block` into a temporary
 * beside near_path ("<near_path>.brot.tmp.XXXXXX") and returns its writer,
 * finished but not renamed: *path is the file, present until
 * gguf_writer_free removes it. NULL with err on failure (nothing left
 * behind). n_threads 0: OpenMP's default. */
gguf_writer *hfq_block_rotate_write(const gguf_file *f, const char *near_path, int64_t block, uint64_t seed,
                                    int n_threads, const char **path, hfq_block_rotate_info *info, hfq_error *err);

#endif
