/* matmul.h - CPU products of stored weight rows with activation rows.
 *
 * As ggml's CPU backend does, each weight format names the format its
 * activation rows are quantized to once per batch (quant/qtype.h
 * vec_dot_type: F16 weights dot F16 activations, Q4_K weights Q8_K ones, F32
 * stays F32), then every weight row is dotted with every activation row.
 * F32/F16/BF16 use SIMD tiles of up to CPU_TILE_ROWS weight rows x
 * CPU_TILE_COLS activation rows, the quant formats theirs
 * (quant_kernels.h), the others their traits' vec_dot; panel.h takes
 * batches of enough tokens of the K-quants, i-quants, Q8_0-activation
 * formats (NVFP4 too), W4A4 and INT8 W8A8 (each weight row decoded once a
 * product), and FP8 codes of every batch size, where the CPU has the
 * instructions.
 * INT8/FP8 weights (I8 codes with scales, docs/format-quant-ext.md) take
 * activations quantized per token (or with a static input scale) to their
 * encoding, W8A8, and the dots of quant/int8.h and quant/fp8.h; NVFP4
 * weights take Q8_0 activations as ggml, or NVFP4 blocks (W4A4) with a
 * global scale per token or static; NVFP4 / MXFP4 weights marked
 * hfq.act_quant "none" (weight-only checkpoints) take the float rows,
 * dotted with their decoded blocks. hfq_act_quant (ops.h) chooses. A
 * result never depends on the tile it was computed in: batched and
 * single-token products agree bit for bit, whatever the thread count.
 */
#ifndef HFQ_KERNELS_CPU_MATMUL_H
#define HFQ_KERNELS_CPU_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"
#include "kernels/model.h"
#include "kernels/ops.h"
#include "quant/qtype.h"

#define CPU_TILE_ROWS 4
#define CPU_TILE_COLS 3
/* Below this many multiply-adds (tens of microseconds on one thread) a
 * product runs on one thread. Each parallel region ends in a barrier, which
 * costs microseconds on an idle machine, so a decoded token forks for every
 * product from a GQA key projection (256 x 1024) up: a 1024-wide 12-layer model decoded
 * 1.7x faster on two threads than at 1 << 22, which kept every layer's
 * product on one thread (docs/benchmarks.md "Decode on two threads").
 * Where other processes hold the cores, a descheduled thread holds each
 * barrier for a scheduler slice and two threads lose to one at any
 * threshold here (as llama.cpp's do): --threads is the user's to set. */
#define CPU_PARALLEL_MIN_MACS (1 << 18)
/* K-quant tiles take more activation rows: unpacking a weight block's
 * levels costs about as much as one dot, so it is shared by more of them. */
#define CPU_TILE_COLS_K 16
/* AVX-512 float tiles: 32 vector registers hold this many columns' sums. */
#define CPU_TILE_COLS_F512 8

/* How an I8 tile takes W8A8 activation codes (i8_kernels.h): as stored,
 * widened to the F32 values they stand for, or as BF16 pairs
 * (cpu_i8_fp8_pairs). */
typedef enum cpu_i8_act { CPU_I8_ACT_CODES, CPU_I8_ACT_F32, CPU_I8_ACT_BF16_PAIRS } cpu_i8_act;

/* I8 weight codes times activation rows r0.., as i8_kernels.h says. */
typedef void (*cpu_i8_tile_fn)(const hfq_tensor *w, int64_t r0, int nr, const void *a, size_t as,
                               const float *a_scales, int nc, float *out, size_t os);

/* out[c * out_stride + r] = dot(w row r, a row c), rows n values long,
 * for r < nr <= CPU_TILE_ROWS and c < nc <= the kernel's tile_cols. */
typedef void (*cpu_tile_fn)(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
                            size_t a_stride, int nc, float *out, size_t out_stride);

/* What a weight's activation rows become before the dots. */
typedef enum cpu_act {
    CPU_ACT_FORMAT,     /* `act` of the traits (F32: used as given), dotted by `tile` or `dot` */
    CPU_ACT_F32_CODES,  /* I8 weights times float rows: hfq_dot_int8_f32 / hfq_dot_fp8_f32 */
    CPU_ACT_CODES,      /* I8 weights: rows in the weight's encoding, one scale each (W8A8) */
    CPU_ACT_NVFP4,      /* NVFP4 weights: rows in NVFP4 blocks, one global scale each (W4A4) */
    CPU_ACT_MXFP4,      /* MXFP4 weights marked act_mxfp4: rows in MXFP4 blocks (W4A4) */
    CPU_ACT_FP8_GROUP,  /* float weights marked act_fp8_group: F32 rows of FP8-rounded values */
} cpu_act;

typedef struct cpu_wkernel {
    const hfq_qtype_traits *w;     /* the weight's format (NULL for I8 codes) */
    const hfq_qtype_traits *act;   /* its activation format; F32: used as given */
    cpu_tile_fn tile;              /* NULL: `dot` (or the I8 dot) one pair at a time */
    cpu_i8_tile_fn i8;             /* I8 codes times float rows or codes (i8_kernels.h), else NULL */
    int tile_cols;                 /* activation rows per tile call */
    bool act_f32;                  /* `tile` takes `act`'s values widened to F32 rows */
    cpu_i8_act i8_act;             /* how `i8` takes CPU_ACT_CODES rows */
    hfq_vec_dot_fn dot;            /* w->vec_dot, or its SIMD twin (quant_kernels.h) */
    hfq_qext qext;                 /* I8 codes: how they encode values */
    cpu_act act_kind;
    /* CPU_ACT_CODES / CPU_ACT_NVFP4: the static scale (the weight's
     * input_scale); NULL: each token's own */
    const float *act_scale;
} cpu_wkernel;

/* Fills *k for weight w on this CPU with activations as aq says; returns -1
 * (err naming `where` and the tensor) when its type cannot be multiplied by,
 * the row length does not fit the activation format's blocks, or aq is
 * static and the weight has no input_scale. */
int cpu_wkernel_get(const hfq_tensor *w, hfq_act_quant aq, cpu_wkernel *k, const char *where, hfq_error *err);

/* Row `row` of matrix t as floats, scales applied ([t->ne0] values). */
void cpu_row_to_f32(const hfq_tensor *t, int64_t row, float *y);

/* Bytes cpu_matmul needs in `act` for n_tokens rows of the weight's input. */
size_t cpu_matmul_act_bytes(const hfq_tensor *w, hfq_act_quant aq, int64_t n_tokens);

/* y[t] = W x[t] * scale (+ bias), scale = *w->scale when set: x [n_tokens][w->ne0] -> y [n_tokens][w->ne1], on up
 * to n_threads OpenMP threads; act is scratch of cpu_matmul_act_bytes. The
 * weight must have passed cpu_wkernel_get with the same aq. */
void cpu_matmul(int n_threads, hfq_act_quant aq, void *act, float *y, const hfq_tensor *w, const float *bias,
                const float *x, int64_t n_tokens);

#endif
