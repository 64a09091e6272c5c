/* rotate.h - a randomized Hadamard rotation of the residual stream folded
 * into the weights (QuaRot / SpinQuant without training): `quantize --rotate`.
 *
 * The model's function is unchanged up to F32 rounding. First each RMSNorm
 * weight is folded into the columns of the linears that read its output
 * (attn_norm -> attn_q/k/v or attn_qkv; ffn_norm -> ffn_gate/up, the router
 * ffn_gate_inp and the experts' gate/up; output_norm -> output) and set to 1.
 * Then, with Q orthogonal (d = n_embd) and the residual stream x carried as
 * x Q: token_embd rows and every input-side weight (rows of length d) become
 * W Q, every output-side weight (attn_output, ffn_down, each expert's down
 * matrix; d rows) and its bias become Q^T W. RMSNorm commutes with Q once its
 * weight is 1 (an orthogonal map keeps the mean square); Gemma's sqrt(d)
 * embedding scale commutes too; qwen3's q/k norms act after the projections.
 *
 * Q = D H_b / sqrt(b) block-diagonally: D random signs from the seed
 * (splitmix64), H_b the Walsh-Hadamard matrix of b, the largest power of two
 * that divides d (b = d when d is one). Applied by the fast Walsh-Hadamard
 * transform in double, O(d log b) a vector; rows and column tiles are
 * independent, so the bytes do not depend on the thread count.
 *
 * A tied output (no output.weight) gets its own output.weight: the input
 * embedding must not carry output_norm's weight. Rotated tensors are written
 * as F32; the others are copied byte for byte. Metadata: every input key,
 * plus hfq.quantize.rotate = "hadamard:<seed>" and hfq.quantize.rotate_block.
 *
 * Refused (one line naming the file and the tensor or key): quantized
 * tensors, families other than llama, qwen2, qwen3, qwen3moe, phi3 and gemma
 * (Gemma 2/3's post-attention / post-FFN norms act on the branch outputs
 * before they reach the residual stream), any tensor the rotation does not
 * know, shapes that do not match n_embd, NaN/Inf weights, and n_embd whose
 * power-of-two block is below HFQ_ROTATE_MIN_BLOCK (no spreading to speak of).
 */
#ifndef HFQ_SRC_QUANTIZE_ROTATE_H
#define HFQ_SRC_QUANTIZE_ROTATE_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"

#define HFQ_ROTATE_DEFAULT_SEED 1
#define HFQ_ROTATE_MIN_BLOCK 16

typedef struct hfq_rotate_info {
    char arch[32];           /* general.architecture */
    int64_t n_embd, block;   /* d and the Hadamard block b */
    int64_t n_rotated;       /* tensors rewritten (norms included) */
    bool untied;             /* output.weight made from token_embd */
} hfq_rotate_info;

/* Writes the rotated model of f into a temporary GGUF beside near_path
 * ("<near_path>.rotated.tmp.XXXXXX") and returns its writer, finished but not
 * renamed (gguf_writer_finish_temp): *path is the file to read, valid and
 * present until gguf_writer_free, which removes it. NULL with err on failure
 * (nothing left behind; every refusal above comes before any writing).
 * info gets what the rotation did. n_threads 0: OpenMP's default. */
gguf_writer *hfq_rotate_write(const gguf_file *f, const char *near_path, uint64_t seed, int n_threads,
                              const char **path, hfq_rotate_info *info, hfq_error *err);

#endif
