/* block_rotate.c - see src/quantize/block_rotate.h. */
#include "src/quantize/block_rotate.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/fold.h"
#include "formats/ggml_type.h"
#include "quant/hadamard.h"

#define MARK_PREFIX "hfq.block_rotate."

/* The weights the runner's graph multiplies through `linear` (kernels/graph.c). */
static const char *const layer_suffixes[] = {"attn_q.weight", "attn_k.weight",  "attn_v.weight", "attn_qkv.weight",
                                             "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                             "ffn_down.weight", "ffn_gate_inp.weight"};

static bool is_linear_name(const char *name) {
    if (strcmp(name, "output.weight") == 0) return true;
    unsigned layer;
    int used = 0;
    if (sscanf(name, "blk.%u.%n", &layer, &used) != 1 || used == 0) return false;
    for (size_t i = 0; i < sizeof layer_suffixes / sizeof layer_suffixes[0]; i++)
        if (strcmp(name + used, layer_suffixes[i]) == 0) return true;
    return false;
}

/* Whether tensor t is rotated: a 2-D linear weight whose rows are whole blocks. */
static bool rotated(const gguf_tensor_info *t, int64_t block) {
    return t->n_dims == 2 && is_linear_name(t->name) && hfq_hadamard_fits(t->ne[0], block);
}

static bool is_float(uint32_t type) { return type == GT_F32 || type == GT_F16 || type == GT_BF16; }

/* Every refusal, before anything is written. */
static int check(const gguf_file *f, int64_t block, hfq_block_rotate_info *info, hfq_error *err) {
    const char *path = gguf_path(f);
    if (!hfq_hadamard_fits(block, block))
        return hfq_fail(err, path, "--block-rotate %" PRId64 ": the block must be a power of two from 2 to %d", block,
                        HFQ_HADAMARD_MAX_BLOCK);
    *info = (hfq_block_rotate_info){0};
    for (int64_t i = 0; i < gguf_n_kv(f); i++)
        if (strncmp(gguf_kv_key(f, i), MARK_PREFIX, strlen(MARK_PREFIX)) == 0)
            return hfq_fail(err, path, "key %s: the model is already block-rotated", gguf_kv_key(f, i));
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        if (t->n_dims != 2 || !is_linear_name(t->name)) continue;
        if (!rotated(t, block)) {
            info->n_left++;
            continue;
        }
        if (!is_float(t->type))
            return hfq_fail(err, path, "tensor %s is stored as %s: --block-rotate needs F32/F16/BF16 weights", t->name,
                            ggml_type_get(t->type) ? ggml_type_get(t->type)->name : "?");
        info->n_rotated++;
    }
    if (info->n_rotated == 0)
        return hfq_fail(err, path, "--block-rotate %" PRId64 ": no linear weight has rows of whole blocks", block);
    return 0;
}

/* Tensor t decoded, checked finite, its rows rotated; written as F32. */
static int write_rotated(gguf_writer *w, int64_t idx, const gguf_file *f, const gguf_tensor_info *t, int64_t block,
                         uint64_t seed, int n_threads, hfq_error *err) {
    int64_t rows, cols;
    float *x = hfq_fold_read(f, t->name, NULL, &rows, &cols, err);
    if (!x) return -1;
    int64_t bad = INT64_MAX;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : omp_get_max_threads()) schedule(static) \
    reduction(min : bad)
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * cols;
        for (int64_t j = 0; j < cols; j++)
            if (!isfinite(row[j]) && r * cols + j < bad) bad = r * cols + j;
        hfq_hadamard_rotate_row(row, cols, block, seed);
    }
    int rc = bad != INT64_MAX ? hfq_fail(err, gguf_path(f), "tensor %s: NaN or Inf at element %" PRId64 " (cannot "
                                         "rotate)", t->name, bad)
                              : gguf_writer_write_tensor(w, idx, x, err);
    free(x);
    return rc;
}

gguf_writer *hfq_block_rotate_write(const gguf_file *f, const char *near_path, int64_t block, uint64_t seed,
                                    int n_threads, const char **path, hfq_block_rotate_info *info, hfq_error *err) {
    hfq_block_rotate_info bi;
    if (check(f, block, &bi, err) < 0) return NULL;
    gguf_writer *w = gguf_writer_new();
    char dest[4096], key[sizeof MARK_PREFIX + GGUF_MAX_NAME], spec[64];
    if (!w) {
        hfq_fail(err, near_path, "out of memory");
        return NULL;
    }
    if (snprintf(dest, sizeof dest, "%s.brot", near_path) >= (int)sizeof dest) {
        hfq_fail(err, near_path, "path too long");
        goto fail;
    }
    snprintf(spec, sizeof spec, "hadamard:%" PRId64 ":%" PRIu64, block, seed);
    int rc = 0;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) rc |= gguf_copy_kv(w, f, i);
    const int64_t n = gguf_n_tensors(f);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const bool rot = rotated(t, block);
        if (rot) {
            snprintf(key, sizeof key, MARK_PREFIX "%s", t->name);
            rc |= gguf_set_str(w, key, spec);
        }
        if (rc == 0 && gguf_add_tensor(w, t->name, rot ? GT_F32 : t->type, t->n_dims, t->ne, err) < 0) goto fail;
    }
    if (rc != 0 || gguf_writer_begin(w, dest, err) < 0) goto fail;
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        if (rotated(t, block) ? write_rotated(w, i, f, t, block, seed, n_threads, err)
                              : gguf_writer_write_tensor(w, i, t->data, err))
            goto fail;
    }
    if (!(*path = gguf_writer_finish_temp(w, err))) goto fail;
    if (info) *info = bi;
    return w;
fail:
    gguf_writer_free(w);
    return NULL;
}
