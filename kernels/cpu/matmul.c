#include "kernels/cpu/matmul.h"

#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/cpu/float_kernels.h"

/* Tokens per block: a block's activation rows stay in L2 while every tile of
 * weight rows passes over them. */
#define TOKEN_BLOCK 64
/* Below this many multiply-adds a product runs on one thread: waking the
 * others would cost more than it saves. */
#define PARALLEL_MIN_MACS (1 << 17)

int cpu_wkernel_get(const hfq_tensor *w, cpu_wkernel *k, const char *where, hfq_error *err) {
    const ggml_type_info *gt = ggml_type_get(w->type);
    int qt = hfq_qtype_from_ggml(w->type);
    k->w = qt < 0 ? NULL : hfq_qtype_get((hfq_qtype)qt);
    k->act = k->w ? hfq_qtype_get(k->w->vec_dot_type) : NULL;
    if (!k->w || k->w->is_activation_only || !k->w->vec_dot || !k->w->dequantize || !k->act ||
        (k->act->type != HFQ_QT_F32 && !k->act->quantize_row))
        return hfq_fail(err, where, "tensor '%s': type %s is not supported by the cpu backend", w->name,
                        gt ? gt->name : "?");
    if (hfq_qtype_row_size(k->act->type, w->ne0) < 0)
        return hfq_fail(err, where, "tensor '%s': row length %lld is not a multiple of the %s block size %lld",
                        w->name, (long long)w->ne0, k->act->name, (long long)k->act->block_size);
    k->tile = cpu_float_tile(w->type, true);
    return 0;
}

size_t cpu_matmul_act_bytes(const hfq_tensor *w, int64_t n_tokens) {
    cpu_wkernel k;
    if (cpu_wkernel_get(w, &k, NULL, NULL) || k.act->type == HFQ_QT_F32) return 0;
    return (size_t)hfq_qtype_row_size(k.act->type, w->ne0) * (size_t)n_tokens;
}

/* out[c * out_stride + r] for r < nr, c < nc, one vec_dot each. */
static void tile_vec_dot(hfq_vec_dot_fn dot, int64_t n, const char *w, size_t ws, int nr, const char *a, size_t as,
                         int nc, float *out, size_t os) {
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++) out[c * os + r] = dot(w + r * ws, a + c * as, n);
}

void cpu_matmul(int n_threads, void *act, float *restrict y, const hfq_tensor *w, const float *restrict bias,
                const float *restrict x, int64_t n_tokens) {
    cpu_wkernel k;
    if (cpu_wkernel_get(w, &k, NULL, NULL)) return;
    const int64_t n_in = w->ne0, n_out = w->ne1;
    const int64_t macs = n_in * n_out * n_tokens;
    const char *a = (const char *)x;
    size_t a_stride = (size_t)n_in * sizeof(float);
    if (k.act->type != HFQ_QT_F32) {
        a_stride = (size_t)hfq_qtype_row_size(k.act->type, n_in);
        #pragma omp parallel for num_threads(n_threads) schedule(static) if (n_tokens > 1 && n_in * n_tokens >= PARALLEL_MIN_MACS / 4)
        for (int64_t t = 0; t < n_tokens; t++) k.act->quantize_row(x + t * n_in, (char *)act + (size_t)t * a_stride, n_in);
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
                const char *wt = wd + (size_t)r0 * w->row_bytes, *at = a + (size_t)t0 * a_stride;
                float *out = y + t0 * n_out + r0;
                if (k.tile) k.tile(n_in, wt, w->row_bytes, nr, at, a_stride, nc, out, (size_t)n_out);
                else tile_vec_dot(k.w->vec_dot, n_in, wt, w->row_bytes, nr, at, a_stride, nc, out, (size_t)n_out);
            }
        }
    if (w->scale) {
        const float scale = *w->scale;
        for (int64_t i = 0; i < n_tokens * n_out; i++) y[i] *= scale;
    }
    if (bias)
        for (int64_t t = 0; t < n_tokens; t++)
            for (int64_t o = 0; o < n_out; o++) y[t * n_out + o] += bias[o];
}
