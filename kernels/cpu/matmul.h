/* matmul.h - CPU products of stored weight rows with activation rows.
 *
 * As ggml's CPU backend does, each weight type names the format its
 * activation rows are converted to once per batch (F16 weights dot F16
 * activations, BF16 weights BF16 ones, F32 stays F32), and a kernel dots a
 * tile of up to CPU_TILE_ROWS weight rows with up to CPU_TILE_COLS activation
 * rows. A result never depends on the tile it was computed in: batched and
 * single-token products agree bit for bit, whatever the thread count.
 */
#ifndef HFQ_KERNELS_CPU_MATMUL_H
#define HFQ_KERNELS_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/model.h"

#define CPU_TILE_ROWS 4
#define CPU_TILE_COLS 3

/* out[c * out_stride + r] = dot(w row r, a row c), rows n values long,
 * for r < nr <= CPU_TILE_ROWS and c < nc <= CPU_TILE_COLS. */
typedef void (*cpu_tile_fn)(int64_t n, const void *w, size_t w_stride, int nr, const void *a,
                            size_t a_stride, int nc, float *out, size_t out_stride);

typedef struct cpu_wkernel {
    uint32_t act_type;                                        /* ggml type of activation rows */
    void (*act_from_f32)(const float *x, void *a, int64_t n); /* NULL when act_type is F32 */
    void (*row_to_f32)(const void *w, float *y, int64_t n);   /* one stored row as floats */
    cpu_tile_fn tile;
} cpu_wkernel;

/* Fills *k with the kernel for weights of a ggml type on this CPU; returns
 * -1 when the type is not supported. */
int cpu_wkernel_get(uint32_t type, cpu_wkernel *k);

/* Bytes cpu_matmul needs in `act` for n_tokens rows of the weight's input. */
size_t cpu_matmul_act_bytes(const hfq_tensor *w, int64_t n_tokens);

/* y[t] = W x[t] (+ bias): x [n_tokens][w->ne0] -> y [n_tokens][w->ne1], on up
 * to n_threads OpenMP threads; act is scratch of cpu_matmul_act_bytes. */
void cpu_matmul(int n_threads, void *act, float *y, const hfq_tensor *w, const float *bias, const float *x,
                int64_t n_tokens);

#endif
