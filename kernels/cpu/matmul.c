#include "kernels/cpu/matmul.h"

#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/cpu/float_kernels.h"
#include "quant/half.h"

/* Tokens per block: a block's activation rows stay in L2 while every tile of
 * weight rows passes over them. */
#define TOKEN_BLOCK 64
/* Below this many multiply-adds a product runs on one thread: waking the
 * others would cost more than it saves. */
#define PARALLEL_MIN_MACS (1 << 17)

static void f32_to_f16_row(const float *x, void *a, int64_t n) {
    uint16_t *h = a;
    for (int64_t i = 0; i < n; i++) h[i] = hfq_f32_to_fp16(x[i]);
}

static void f32_to_bf16_row(const float *x, void *a, int64_t n) {
    uint16_t *h = a;
    for (int64_t i = 0; i < n; i++) h[i] = hfq_f32_to_bf16(x[i]);
}

static void f32_row_to_f32(const void *w, float *y, int64_t n) { memcpy(y, w, (size_t)n * sizeof *y); }

static void f16_row_to_f32(const void *w, float *y, int64_t n) {
    const uint16_t *h = w;
    for (int64_t i = 0; i < n; i++) y[i] = hfq_fp16_to_f32(h[i]);
}

static void bf16_row_to_f32(const void *w, float *y, int64_t n) {
    const uint16_t *h = w;
    for (int64_t i = 0; i < n; i++) y[i] = hfq_bf16_to_f32(h[i]);
}

int cpu_wkernel_get(uint32_t type, cpu_wkernel *k) {
    switch (type) {
    case GT_F32: *k = (cpu_wkernel){GT_F32, NULL, f32_row_to_f32, NULL}; break;
    case GT_F16: *k = (cpu_wkernel){GT_F16, f32_to_f16_row, f16_row_to_f32, NULL}; break;
    case GT_BF16: *k = (cpu_wkernel){GT_BF16, f32_to_bf16_row, bf16_row_to_f32, NULL}; break;
    default: return -1;
    }
    k->tile = cpu_float_tile(type, true);
    return 0;
}

size_t cpu_matmul_act_bytes(const hfq_tensor *w, int64_t n_tokens) {
    cpu_wkernel k;
    if (cpu_wkernel_get(w->type, &k) || !k.act_from_f32) return 0;
    return (size_t)ggml_row_size(k.act_type, w->ne0) * (size_t)n_tokens;
}

void cpu_matmul(int n_threads, void *act, float *restrict y, const hfq_tensor *w, const float *restrict bias,
                const float *restrict x, int64_t n_tokens) {
    cpu_wkernel k;
    if (cpu_wkernel_get(w->type, &k)) return;  /* types were checked when the backend was created */
    const int64_t n_in = w->ne0, n_out = w->ne1;
    const int64_t macs = n_in * n_out * n_tokens;
    const char *a = (const char *)x;
    size_t a_stride = (size_t)n_in * sizeof(float);
    if (k.act_from_f32) {
        a_stride = (size_t)ggml_row_size(k.act_type, n_in);
        #pragma omp parallel for num_threads(n_threads) schedule(static) if (n_tokens > 1 && n_in * n_tokens >= PARALLEL_MIN_MACS / 4)
        for (int64_t t = 0; t < n_tokens; t++) k.act_from_f32(x + t * n_in, (char *)act + (size_t)t * a_stride, n_in);
        a = act;
    }
    const char *wd = w->data;
    const int64_t n_row_tiles = (n_out + CPU_TILE_ROWS - 1) / CPU_TILE_ROWS;
    const int64_t n_token_blocks = (n_tokens + TOKEN_BLOCK - 1) / TOKEN_BLOCK;
    #pragma omp parallel for collapse(2) num_threads(n_threads) schedule(static) if (macs >= PARALLEL_MIN_MACS)
    for (int64_t tb = 0; tb < n_token_blocks; tb++)
        for (int64_t rt = 0; rt < n_row_tiles; rt++) {
            const int64_t r0 = rt * CPU_TILE_ROWS;
            const int nr = (int)(n_out - r0 < CPU_TILE_ROWS ? n_out - r0 : CPU_TILE_ROWS);
            const int64_t t_end = (tb + 1) * TOKEN_BLOCK < n_tokens ? (tb + 1) * TOKEN_BLOCK : n_tokens;
            for (int64_t t0 = tb * TOKEN_BLOCK; t0 < t_end; t0 += CPU_TILE_COLS) {
                const int nc = (int)(t_end - t0 < CPU_TILE_COLS ? t_end - t0 : CPU_TILE_COLS);
                k.tile(n_in, wd + (size_t)r0 * w->row_bytes, w->row_bytes, nr, a + (size_t)t0 * a_stride, a_stride,
                       nc, y + t0 * n_out + r0, (size_t)n_out);
            }
        }
    if (bias)
        for (int64_t t = 0; t < n_tokens; t++)
            for (int64_t o = 0; o < n_out; o++) y[t * n_out + o] += bias[o];
}
