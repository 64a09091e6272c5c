/* synth.h - deterministic synthetic Hugging Face checkpoints (Llama, Mistral, Qwen2).
 *
 * synth_write_model writes a folder that loads like a real checkpoint:
 * config.json, generation_config.json, the tokenizer files (src/synth/tokenizer.h)
 * and model.safetensors, or model-0000K-of-0000N.safetensors shards with
 * model.safetensors.index.json. Tensor names and shapes are Hugging Face's.
 *
 * Values come from the seed alone and are the same on every platform:
 * splitmix64 streams (one per tensor name and block of elements, so values do
 * not depend on sharding or thread count) feed Marsaglia's polar form of the
 * Box-Muller transform, computed with a logarithm of our own and without fused
 * multiply-add. The dtype only rounds the same values differently.
 *   q/k/v/gate/up: N(0, 1/fan_in)     o/down: N(0, 1/(fan_in * 2 * layers))
 *   embed_tokens, lm_head: N(0, 1/hidden)   norms: 1 + N(0, 0.02^2)
 *   q/k/v biases (qwen2): N(0, 0.02^2)
 * With --outliers K, K channels (drawn from the seed, the same in every layer)
 * of input_layernorm and post_attention_layernorm are multiplied by
 * SYNTH_OUTLIER_SCALE, so the inputs of q/k/v and gate/up have K channels of
 * larger scale for calibration to find.
 *
 * Memory stays bounded by the largest tensor: tensors are generated one by one
 * while the file is written.
 */
#ifndef HFQ_SRC_SYNTH_SYNTH_H
#define HFQ_SRC_SYNTH_SYNTH_H

#include <stdint.h>

#include "formats/error.h"
#include "formats/safetensors.h"

#define SYNTH_OUTLIER_SCALE 8.0f

typedef enum synth_arch { SYNTH_LLAMA, SYNTH_MISTRAL, SYNTH_QWEN2 } synth_arch;

typedef struct synth_config {
    synth_arch arch;
    int hidden, ffn, layers, heads, kv_heads, vocab, ctx;
    st_dtype dtype;        /* ST_F32, ST_F16 or ST_BF16 */
    int shards;            /* 1: model.safetensors; N > 1: N shards and an index */
    int tied;              /* no lm_head.weight; tie_word_embeddings true */
    double rope_theta, rms_eps;
    uint64_t seed;
    int outliers;          /* channels with a larger activation scale, 0..hidden */
} synth_config;

/* Defaults: llama, hidden 64, ffn 172, 2 layers, 4 heads, 2 kv heads, vocab 512,
 * ctx 256, f32, 1 shard, untied, rope_theta 10000, rms_eps 1e-5, seed 1, 0 outliers. */
void synth_default_config(synth_config *c);
/* Rejects sizes that do not make a model (heads not dividing hidden, odd head
 * size, kv heads not dividing heads, vocab out of range, more shards than tensors...). */
int synth_check_config(const synth_config *c, hfq_error *err);

/* Name parsers for the tool: -1 when unknown. */
int synth_arch_from_name(const char *name);
int synth_dtype_from_name(const char *name);   /* "f32", "f16", "bf16" */

/* The outlier channels (c->outliers of them, ascending) into out. */
void synth_outlier_channels(const synth_config *c, int *out);

/* Called after each tensor is written. */
/* The files synth_write_model writes, replaces or removes in its folder,
 * k in [0, synth_n_files(c)): what a caller checks before any work. */
int synth_n_files(const synth_config *c);
void synth_file_name(const synth_config *c, int k, char *out, size_t size);

typedef void (*synth_progress_fn)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);

/* Writes the checkpoint into out_dir (created if missing). Each file is
 * written atomically. n_params (may be NULL) receives the parameter count. */
int synth_write_model(const char *out_dir, const synth_config *c, synth_progress_fn progress,
                      void *progress_ctx, int64_t *n_params, hfq_error *err);

#endif
