/* fused.h - the weights a serving engine fuses into one matrix.
 *
 * vLLM loads q/k/v of an attention block as one QKVParallelLinear and gate/up
 * of a feed-forward block as one MergedColumnParallelLinear, with one NVFP4
 * global scale for the fused matrix. llm-compressor therefore gives the
 * members of each group one global scale before computing the block scales
 * (update_fused_layer_weight_global_scales: the smallest compressed-tensors
 * global scale 448 * 6 / amax, i.e. the largest amax). The quantize driver
 * does the same for NVFP4 weights of one group (src/quantize/driver.c), so
 * our GGUF and its export hold the same codes and one scale per group.
 * Families whose GGUF already fuses them (phi3's attn_qkv, ffn_up holding
 * gate and up) have one tensor per group: nothing to share.
 */
#ifndef HFQ_SRC_QUANTIZE_FUSED_H
#define HFQ_SRC_QUANTIZE_FUSED_H

#include <stdbool.h>
#include <stddef.h>

/* Writes the group of GGUF weight `name` into key ("blk.3.attn_qkv" for
 * blk.3.attn_q/k/v.weight, "blk.3.ffn_gate_up" for blk.3.ffn_gate/up.weight)
 * and returns true; false (key untouched) when it belongs to none. */
bool hfq_fused_group(const char *name, char *key, size_t n);

#endif
