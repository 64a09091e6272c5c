/* plan.h - how the CUDA backend stores and multiplies a model's weights,
 * decided on the host without any CUDA call, so that every decision is
 * tested on machines without a GPU.
 *
 * Weights keep their stored bytes (the GGUF rows, block by block): the
 * kernels decode them with quant/'s HFQ_HD functions, as the CPU does. Every
 * tensor the forward pass reads (matrices, norms, biases, I8 scales) gets an
 * aligned range of one device arena; a tied output shares the embedding's.
 *
 * Products follow the CPU backend's activation semantics (kernels/cpu/matmul.h):
 * activations are rounded/quantized to the weight's companion format before
 * the dot (F16, BF16, Q8_0, Q8_1, Q8_K, INT8/FP8 per token or with the static
 * input scale). Batches of at most CUDA_MATVEC_MAX_TOKENS tokens (decoding)
 * go through dequantizing matrix-vector kernels that read every weight block
 * once; larger batches (prompts) through cuBLAS: F32 SGEMM, F16/BF16 GEMM on
 * the stored rows, FP8 E4M3 GEMM with cuBLASLt on sm_89+ (codes times codes,
 * scales after), and for everything else a BF16 GEMM of the weights decoded
 * into a scratch buffer with the activations quantized as for the dot, then
 * decoded. I8 codes with at most one scale per row are exact in BF16, so
 * their scales are applied after the product, as the CPU applies them.
 */
#ifndef HFQ_KERNELS_CUDA_PLAN_H
#define HFQ_KERNELS_CUDA_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "kernels/model.h"
#include "kernels/ops.h"

/* Largest batch the matrix-vector kernels take; larger ones use cuBLAS. */
#define CUDA_MATVEC_MAX_TOKENS 8
/* Alignment of every range of the arena and of the scratch buffers. */
#define CUDA_ALIGN 256

typedef enum cuda_wfmt {
    CUDA_WF_F32,
    CUDA_WF_F16,
    CUDA_WF_BF16,
    CUDA_WF_Q8_0,
    CUDA_WF_Q4_0,
    CUDA_WF_Q5_0,
    CUDA_WF_Q5_1,
    CUDA_WF_Q4_K,
    CUDA_WF_Q5_K,
    CUDA_WF_Q6_K,
    CUDA_WF_MXFP4,
    CUDA_WF_NVFP4,
    CUDA_WF_INT8,
    CUDA_WF_FP8_E4M3,
    CUDA_WF_FP8_E5M2,
    CUDA_WF_COUNT
} cuda_wfmt;

/* What activation rows become before the product. */
typedef enum cuda_act {
    CUDA_ACT_F32,
    CUDA_ACT_F16,
    CUDA_ACT_BF16,
    CUDA_ACT_Q8_0,
    CUDA_ACT_Q8_1,
    CUDA_ACT_Q8_K,
    CUDA_ACT_INT8,       /* per token (amax / 127) or the static input scale */
    CUDA_ACT_FP8_E4M3,   /* per token (amax / 448) or the static input scale */
    CUDA_ACT_FP8_E5M2,   /* per token (amax / 57344) or the static input scale */
} cuda_act;

/* How batches above CUDA_MATVEC_MAX_TOKENS are multiplied. */
typedef enum cuda_gemm {
    CUDA_GEMM_F32,       /* cublasSgemm on the stored rows, full FP32 (no TF32) */
    CUDA_GEMM_F16,       /* F16 x F16 -> F32 on the stored rows, activations rounded to F16 */
    CUDA_GEMM_BF16,      /* BF16 x BF16 -> F32 on the stored rows, activations rounded to BF16 */
    CUDA_GEMM_DEQUANT,   /* weights decoded to a BF16 scratch, activations quantized then decoded */
    CUDA_GEMM_FP8,       /* cuBLASLt E4M3 x E4M3 -> F32 on the stored codes; DEQUANT if it fails */
} cuda_gemm;

typedef struct cuda_wplan {
    cuda_wfmt fmt;
    cuda_act act;
    int64_t block_elems;     /* weight values per block (1 for plain and I8 formats) */
    size_t block_bytes;
    /* Bytes of one quantized activation row (Q8_*, I8 codes); 0 for F32/F16/BF16,
     * which the kernels round as they read. */
    size_t act_row_bytes;
    cuda_gemm gemm;
    /* I8 with one scale per row or tensor: the BF16 scratch holds the codes
     * and the scales multiply the product (exactly the CPU's order). */
    bool raw_codes;
    size_t scratch_bytes;    /* BF16 copy for CUDA_GEMM_DEQUANT / CUDA_GEMM_FP8's fallback; else 0 */
} cuda_wplan;

/* What the device offers. */
typedef struct cuda_caps {
    bool fp8_gemm;           /* sm_89 or later with cuBLASLt FP8 */
} cuda_caps;

/* The plan for matrix w; -1 (err naming `where` and the tensor) when its
 * type cannot be multiplied or its rows do not fit the activation blocks. */
int cuda_wplan_get(const hfq_tensor *w, const cuda_caps *caps, cuda_wplan *p, const char *where, hfq_error *err);

/* One tensor's place in the arena. Tensors are matched by their stored
 * bytes and how they are read (data, type, shape, scales), so a tied output
 * shares the embedding's copy while tensors that only overlap in the file
 * get copies of their own. */
typedef struct cuda_slot {
    hfq_tensor t;            /* the host descriptor (data: the key) */
    size_t offset, bytes;    /* rows: ne1 * row_bytes */
    size_t scales_offset, scales_bytes;   /* I8 matrices: their scales */
    bool matrix;
    /* Matrices only. A stacked expert tensor's is the plan of one expert's
     * rows (cuda_wplan_rows): the graph multiplies each expert's slice. */
    cuda_wplan plan;
} cuda_slot;

typedef struct cuda_layout {
    cuda_slot *slots;        /* sorted by host address */
    size_t n_slots;
    size_t arena_bytes;
    /* scratch, each rounded up to CUDA_ALIGN (0: not needed) */
    size_t act_bytes;        /* quantized activation rows of a batch */
    size_t half_bytes;       /* F16/BF16 activation rows of a GEMM batch */
    size_t wscratch_bytes;   /* largest BF16 weight copy */
    bool any_fp8_gemm;       /* a cuBLASLt workspace is needed */
} cuda_layout;

/* Lays out every tensor the forward pass reads and sizes the scratch for
 * batches of max_tokens. -1 with err (naming the model's file) on an
 * unsupported weight, a size overflow or out of memory. */
int cuda_layout_build(const hfq_model *m, const cuda_caps *caps, int64_t max_tokens, cuda_layout *l, hfq_error *err);
void cuda_layout_free(cuda_layout *l);

/* The slot holding tensor t (one the layout was built from, or a copy of
 * its descriptor), or NULL. */
const cuda_slot *cuda_layout_find(const cuda_layout *l, const hfq_tensor *t);

/* The slot holding t, or holding t as rows [*row0, *row0 + t->ne1) of the
 * slot's matrix read the same way (an expert of a stacked tensor:
 * hfq_expert_slice, its per-row scales following its rows); NULL otherwise. */
const cuda_slot *cuda_layout_find_rows(const cuda_layout *l, const hfq_tensor *t, int64_t *row0);

/* Plan p (of a matrix of rows of ne0 values) for products of n_rows rows at
 * a time: the FP8 GEMM wants a multiple of 16 rows, the BF16 scratch holds
 * n_rows rows. */
cuda_wplan cuda_wplan_rows(const cuda_wplan *p, int64_t ne0, int64_t n_rows);

/* Scales of an I8 matrix: how many floats it has ([1], [ne1] or [ne1][groups]). */
int64_t cuda_i8_scale_count(const hfq_tensor *w);

/* The activation quantization modes (kernels/ops.h) the kernels compute:
 * I8 weights with their file's (static with an input_scale, else per
 * token), NVFP4 weights with Q8_0 activations (none). -1 with err naming
 * the first matrix another mode would change (the CPU backend computes
 * every mode). */
int cuda_act_quant_check(const hfq_model *m, hfq_act_quant aq, hfq_error *err);

#endif
