#include "kernels/cpu/matmul.h"

#include <math.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "kernels/cpu/float_kernels.h"
#include "kernels/cpu/i8_kernels.h"
#include "kernels/cpu/panel.h"
#include "kernels/cpu/quant_kernels.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/lanes.h"

/* Tokens per block: a block's activation rows stay in L2 while every tile of
 * weight rows passes over them. */
#define TOKEN_BLOCK 64
/* Activation values below which converting them stays on one thread. */
#define PARALLEL_MIN_ACT_VALUES (1 << 18)

static hfq_fp8_format fp8_format(hfq_qext q) { return q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3; }

/* The activations of weight w under aq: k->act_kind and k->act_scale. */
static int choose_act(const hfq_tensor *w, hfq_act_quant aq, cpu_wkernel *k, const char *where, hfq_error *err) {
    const bool nvfp4 = w->type == GT_NVFP4 && !w->qext;
    if (aq == HFQ_ACT_QUANT_STATIC && (w->act_fp8_group || w->act_mxfp4))
        return hfq_fail(err, where, "tensor '%s' has no input_scale for static activation quantization", w->name);
    /* FP8_BLOCK's per-group FP8 activations, rounded as the checkpoint's forward does */
    if (w->act_fp8_group && (aq == HFQ_ACT_QUANT_AUTO || aq == HFQ_ACT_QUANT_DYNAMIC)) {
        k->act_kind = CPU_ACT_FP8_GROUP;
        k->tile = NULL;
        /* float weights: the SIMD float tiles on F32 rows (their order is
         * dot_float_f32's); FP8 codes where no panel takes them: the I8 tile */
        if (w->qext) k->i8 = cpu_i8_scaled_tile(w, &k->tile_cols);
        else k->tile = cpu_float_tile_f32_rows(w->type, &k->tile_cols);
        return 0;
    }
    /* MXFP4 W4A4: blocks of the checkpoint's dynamic MX rule (quant/fp4.h) */
    if (w->act_mxfp4 && (aq == HFQ_ACT_QUANT_AUTO || aq == HFQ_ACT_QUANT_DYNAMIC)) {
        k->act_kind = CPU_ACT_MXFP4;
        k->tile = cpu_quant_tile_act(HFQ_QT_MXFP4, HFQ_QT_MXFP4, &k->tile_cols);   /* hfq_dot_mxfp4_mxfp4's */
        return 0;
    }
    /* weight-only NVFP4 / MXFP4 (hfq.act_quant none, which bind_act allows
     * on those types only): float activations, as their checkpoints compute */
    if (!w->qext && w->act_none && (aq == HFQ_ACT_QUANT_AUTO || aq == HFQ_ACT_QUANT_NONE)) {
        k->act = hfq_qtype_get(HFQ_QT_F32);
        k->tile = cpu_quant_tile_act(k->w->type, HFQ_QT_F32, &k->tile_cols);
        k->act_f32 = false;
        k->dot = nvfp4 ? hfq_dot_nvfp4_f32 : hfq_dot_mxfp4_f32;   /* without NVFP4's global scale */
        return 0;
    }
    if (!w->qext && !nvfp4) return 0;   /* ggml's companion format, whatever aq says */
    if (aq == HFQ_ACT_QUANT_STATIC && !w->input_scale)
        return hfq_fail(err, where, "tensor '%s' has no input_scale for static activation quantization", w->name);
    const bool quantized = aq == HFQ_ACT_QUANT_DYNAMIC || aq == HFQ_ACT_QUANT_STATIC ||
                           (aq == HFQ_ACT_QUANT_AUTO && !w->act_none && (w->qext || w->input_scale));
    if (!quantized) {
        if (w->qext) k->act_kind = CPU_ACT_F32_CODES;
        return 0;
    }
    k->act_kind = w->qext ? CPU_ACT_CODES : CPU_ACT_NVFP4;
    k->act_scale = aq == HFQ_ACT_QUANT_DYNAMIC ? NULL : w->input_scale;
    /* W4A4: hfq_dot_nvfp4_nvfp4's tile (quant_kernels.h), then the token's scale */
    k->tile = w->qext ? NULL : cpu_quant_tile_act(HFQ_QT_NVFP4, HFQ_QT_NVFP4, &k->tile_cols);
    return 0;
}

int cpu_wkernel_get(const hfq_tensor *w, hfq_act_quant aq, cpu_wkernel *k, const char *where, hfq_error *err) {
    *k = (cpu_wkernel){.qext = w->qext, .tile_cols = CPU_TILE_COLS};
    /* I8 codes: quant/int8.h and quant/fp8.h, with the tensor's scales */
    if (w->qext) {
        if (choose_act(w, aq, k, where, err) < 0) return -1;
        if (k->act_kind == CPU_ACT_CODES || k->act_kind == CPU_ACT_F32_CODES)
            k->i8 = cpu_i8_tile(CPU_FLOAT_BEST, w, &k->tile_cols, &k->i8_act);
        return 0;
    }
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
    k->tile = cpu_float_tile(w->type, CPU_FLOAT_BEST, &k->tile_cols, &k->act_f32);
    if (!k->tile) k->tile = cpu_quant_tile(k->w->type, &k->tile_cols);
    k->dot = cpu_quant_vec_dot(k->w->type);
    if (!k->dot) k->dot = k->w->vec_dot;
    return choose_act(w, aq, k, where, err);
}

/* Bytes of one converted activation row (0: the F32 rows are used as given). */
static size_t act_row_bytes(const cpu_wkernel *k, int64_t n) {
    switch (k->act_kind) {
    case CPU_ACT_F32_CODES: return 0;
    case CPU_ACT_CODES:
        return k->i8_act == CPU_I8_ACT_F32          ? (size_t)n * sizeof(float)
               : k->i8_act == CPU_I8_ACT_BF16_PAIRS ? (size_t)n * sizeof(uint16_t)
                                                    : (size_t)n;
    case CPU_ACT_NVFP4: return (size_t)(n / HFQ_QK_NVFP4) * sizeof(hfq_block_nvfp4);
    case CPU_ACT_MXFP4: return (size_t)(n / HFQ_QK_MXFP4) * sizeof(hfq_block_mxfp4);
    case CPU_ACT_FP8_GROUP: return (size_t)n * sizeof(float);
    case CPU_ACT_FORMAT: break;
    }
    if (k->act->type == HFQ_QT_F32) return 0;
    return k->act_f32 ? (size_t)n * sizeof(float) : (size_t)hfq_qtype_row_size(k->act->type, n);
}

/* x rounded to the values of activation format `act` (block size 1), as
 * floats: its quantize_row then dequantize, a chunk at a time. */
static void widen_act_row(const hfq_qtype_traits *act, const float *x, float *y, int64_t n) {
    char buf[1024];
    const int64_t chunk = (int64_t)(sizeof buf / (size_t)hfq_qtype_row_size(act->type, 1));
    for (int64_t i = 0; i < n; i += chunk) {
        const int64_t m = n - i < chunk ? n - i : chunk;
        act->quantize_row(x + i, buf, m);
        act->dequantize(buf, y + i, m);
    }
}

/* n FP8 codes at the start of row, in place, as the n floats they stand
 * for (exact): from the last, so that no float overwrites a code still to
 * be read (float i covers codes 4 i.. 4 i + 3, all at or past i). */
static void widen_fp8_codes(hfq_fp8_format f, void *row, int64_t n) {
    const uint8_t *codes = row;
    float *y = row;
    for (int64_t i = n - 1; i >= 0; i--) {
        const float v = hfq_fp8_to_f32(f, codes[i]);
        y[i] = v;
    }
}

static bool act_has_scales(const cpu_wkernel *k) {
    return k->act_kind == CPU_ACT_CODES || k->act_kind == CPU_ACT_NVFP4;
}

/* Quantized activations with scales: n_tokens rows, then one float scale per token. */
static float *act_scales(void *act, size_t row_bytes, int64_t n_tokens) {
    size_t off = (row_bytes * (size_t)n_tokens + sizeof(float) - 1) / sizeof(float) * sizeof(float);
    return (float *)((char *)act + off);
}

size_t cpu_matmul_act_bytes(const hfq_tensor *w, hfq_act_quant aq, int64_t n_tokens) {
    cpu_wkernel k;
    if (cpu_wkernel_get(w, aq, &k, NULL, NULL)) return 0;
    size_t rows = act_row_bytes(&k, w->ne0) * (size_t)n_tokens;
    if (!act_has_scales(&k)) return rows;
    return (rows + sizeof(float) - 1) / sizeof(float) * sizeof(float) + (size_t)n_tokens * sizeof(float);
}

void cpu_row_to_f32(const hfq_tensor *t, int64_t row, float *y) {
    const char *src = (const char *)t->data + (size_t)row * t->row_bytes;
    const int64_t n = t->ne0;
    if (t->qext == HFQ_QEXT_INT8) {
        const int64_t g = t->scale_groups;
        hfq_dequantize_row_int8(src, y, n, t->scale + (g ? row * g : 0), g ? n / g : 0);
        return;
    }
    if (t->qext) { /* per group (FP8 block scales, expanded): groups of n / g */
        const int64_t g = t->scale_groups > 1 ? t->scale_groups : 1;
        for (int64_t k = 0; k < g; k++)
            hfq_dequantize_row_fp8(fp8_format(t->qext), src + k * (n / g), y + k * (n / g), n / g,
                                   t->scale[t->scale_groups ? row * t->scale_groups + k : 0]);
        return;
    }
    cpu_wkernel k;
    if (cpu_wkernel_get(t, HFQ_ACT_QUANT_NONE, &k, NULL, NULL)) return;
    k.w->dequantize(src, y, n);
    if (t->scale)
        for (int64_t i = 0; i < n; i++) y[i] *= t->scale[0];
}

/* Activation row x quantized as k says (the weight's I8 encoding or NVFP4
 * blocks, their scale codes searched when the weight is so marked), with
 * the static scale or the token's own: amax / largest code (I8), amax /
 * (6 * 448) (NVFP4's global scale). */
static void quantize_act(const cpu_wkernel *k, const hfq_tensor *w, const float *x, void *a, float *scale) {
    const int64_t n = w->ne0;
    if (k->act_kind == CPU_ACT_NVFP4) {
        *scale = k->act_scale ? *k->act_scale : hfq_nvfp4_global_scale(x, n);
        if (w->act_nvfp4_search) hfq_quantize_nvfp4_act_search(x, a, n, *scale);
        else hfq_quantize_nvfp4(x, a, 1, n, NULL, *scale);
    } else if (w->qext == HFQ_QEXT_INT8) {
        if (k->act_scale) hfq_quantize_int8_static(x, a, 1, n, *scale = *k->act_scale);
        else if (w->act_int8_ct) *scale = hfq_quantize_int8_ct(x, a, n);
        else hfq_quantize_int8(x, a, 1, n, NULL, scale, 0);
    } else {
        if (k->act_scale) hfq_quantize_fp8_static(fp8_format(w->qext), x, a, 1, n, *scale = *k->act_scale);
        else hfq_quantize_fp8(fp8_format(w->qext), x, a, 1, n, NULL, scale);
    }
}

/* The products of a tile: weight rows r0..r0+nr-1, activation rows t0..t0+nc-1. */
typedef struct product {
    const hfq_tensor *w;
    cpu_wkernel k;
    const char *a;          /* activation rows, a_stride bytes apart */
    size_t a_stride;
    const float *a_scales;  /* quantized activations: per token */
    float *y;
    int64_t n_tokens;
} product;

/* The float tiles' order (float_kernels.c), which weights marked
 * act_fp8_group keep on every path: value i's product fused into partial
 * sum i % 8 (from +0, never -0 after: the tiles' zero padding adds
 * nothing), the sums combined as hfq_lanes_sum. The weights come as floats
 * in chunks. */
enum { FMA_CHUNK = 256 };

static void fma_lanes(float sum[HFQ_LANES], const float *w, const float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++) sum[i % HFQ_LANES] = fmaf(w[i], a[i], sum[i % HFQ_LANES]);
}

/* Float weight row wr (F32, F16 or BF16) times F32 activations: the float
 * tiles' bits (the SIMD ones; this where none runs or takes F32 rows). */
static float dot_float_f32(uint32_t type, const void *wr, const float *a, int64_t n) {
    float sum[HFQ_LANES] = {0}, w[FMA_CHUNK];
    const uint16_t *h = wr;
    for (int64_t i0 = 0; i0 < n; i0 += FMA_CHUNK) {
        const int64_t m = n - i0 < FMA_CHUNK ? n - i0 : FMA_CHUNK;
        for (int64_t i = 0; i < m; i++)
            w[i] = type == GT_F32 ? ((const float *)wr)[i0 + i]
                   : type == GT_F16 ? hfq_fp16_to_f32(h[i0 + i]) : hfq_bf16_to_f32(h[i0 + i]);
        fma_lanes(sum, w, a + i0, m);
    }
    return hfq_lanes_sum(sum);
}

/* FP8 codes row r times the F32 activations a, each weight decoded and
 * scaled first (code * scale, rounded to float), then as dot_float_f32:
 * the bits of the F32 weights code * scale (hfconv --outtype f32) through
 * the float tiles; cpu_panel_fp8_matmul's SCALED products (panel.h), the
 * same bits fast. */
static float dot_fp8_codes_f32(const hfq_tensor *w, int64_t r, const float *a) {
    const uint8_t *q = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    const int64_t n = w->ne0, g = w->scale_groups, len = g ? n / g : n;
    const float *scales = w->scale + (g ? r * g : 0);
    const hfq_fp8_format f = fp8_format(w->qext);
    float sum[HFQ_LANES] = {0}, wv[FMA_CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += FMA_CHUNK) {
        const int64_t m = n - i0 < FMA_CHUNK ? n - i0 : FMA_CHUNK;
        for (int64_t i = 0; i < m; i++) wv[i] = hfq_fp8_to_f32(f, q[i0 + i]) * scales[(i0 + i) / len];
        fma_lanes(sum, wv, a + i0, m);
    }
    return hfq_lanes_sum(sum);
}

/* Weight row r times activation row a of token t, without a tile. */
static float dot_one(const product *p, int64_t r, const char *a) {
    const hfq_tensor *w = p->w;
    const char *wr = (const char *)w->data + (size_t)r * w->row_bytes;
    switch (p->k.act_kind) {
    case CPU_ACT_FORMAT: return p->k.dot(wr, a, w->ne0);
    case CPU_ACT_NVFP4: return hfq_dot_nvfp4_nvfp4(wr, a, w->ne0);
    case CPU_ACT_MXFP4: return hfq_dot_mxfp4_mxfp4(wr, a, w->ne0);
    case CPU_ACT_FP8_GROUP:
        return w->qext ? dot_fp8_codes_f32(w, r, (const float *)a) : dot_float_f32(w->type, wr, (const float *)a, w->ne0);
    case CPU_ACT_CODES:
    case CPU_ACT_F32_CODES: break;   /* p->k.i8's */
    }
    return 0.0f;
}

static void tile(const product *p, int64_t r0, int nr, int64_t t0, int nc) {
    const hfq_tensor *w = p->w;
    const char *wt = (const char *)w->data + (size_t)r0 * w->row_bytes, *at = p->a + (size_t)t0 * p->a_stride;
    float *out = p->y + t0 * w->ne1 + r0;
    if (p->k.tile) {
        p->k.tile(w->ne0, wt, w->row_bytes, nr, at, p->a_stride, nc, out, (size_t)w->ne1);
        return;
    }
    if (p->k.i8) {
        p->k.i8(w, r0, nr, at, p->a_stride, p->k.act_kind == CPU_ACT_CODES ? p->a_scales + t0 : NULL, nc, out,
              (size_t)w->ne1);
        return;
    }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++) out[c * w->ne1 + r] = dot_one(p, r0 + r, at + c * p->a_stride);
}

/* Every product of the weight rows with the activation rows, by tiles. */
static void products(const product *pp, int n_threads) {
    const product p = *pp;
    const hfq_tensor *w = p.w;
    const int64_t n_out = w->ne1, n_tokens = p.n_tokens;
    const int64_t macs = w->ne0 * n_out * n_tokens;
    const int64_t n_row_tiles = (n_out + CPU_TILE_ROWS - 1) / CPU_TILE_ROWS;
    const int64_t n_token_blocks = (n_tokens + TOKEN_BLOCK - 1) / TOKEN_BLOCK;
    /* tiles handed out as threads free up: on a shared machine one thread
     * often runs slower than the other, and static halves would wait for it
     * (each result is the same whichever thread computes it). Guided: big
     * runs of consecutive tiles first, so that each thread streams its own
     * stretch of weights - dynamic runs of 8 interleaved the threads' reads
     * and a memory-bound decode got slower on two threads than on one
     * (Q8_0 262144 x 768: 35 GB/s one thread, 31 two; guided 51). */
    #pragma omp parallel for collapse(2) num_threads(n_threads) schedule(guided, 8) if (macs >= CPU_PARALLEL_MIN_MACS)
    for (int64_t tb = 0; tb < n_token_blocks; tb++)
        for (int64_t rt = 0; rt < n_row_tiles; rt++) {
            const int64_t r0 = rt * CPU_TILE_ROWS;
            const int nr = (int)(n_out - r0 < CPU_TILE_ROWS ? n_out - r0 : CPU_TILE_ROWS);
            const int64_t t_end = (tb + 1) * TOKEN_BLOCK < n_tokens ? (tb + 1) * TOKEN_BLOCK : n_tokens;
            const int cols = p.k.tile_cols;   /* CPU_TILE_COLS unless a tile takes more */
            for (int64_t t0 = tb * TOKEN_BLOCK; t0 < t_end; t0 += cols)
                tile(&p, r0, nr, t0, (int)(t_end - t0 < cols ? t_end - t0 : cols));
        }
}

void cpu_matmul(int n_threads, hfq_act_quant aq, void *act, float *restrict y, const hfq_tensor *w,
                const float *restrict bias, const float *restrict x, int64_t n_tokens) {
    product p = {.w = w, .a = (const char *)x, .a_stride = (size_t)w->ne0 * sizeof(float), .y = y, .n_tokens = n_tokens};
    if (cpu_wkernel_get(w, aq, &p.k, NULL, NULL)) return;
    const int64_t n_in = w->ne0, n_out = w->ne1;
    const size_t row_bytes = act_row_bytes(&p.k, n_in);
    if (row_bytes) {
        float *scales = act_has_scales(&p.k) ? act_scales(act, row_bytes, n_tokens) : NULL;
        /* searched NVFP4 scales cost about five plain conversions a value
         * (AVX2: 4.3 against 0.83 ns) */
        const int64_t cost = p.k.act_kind == CPU_ACT_NVFP4 && w->act_nvfp4_search ? 5 : 1;
        const bool parallel = n_tokens > 1 && n_in * n_tokens * cost >= PARALLEL_MIN_ACT_VALUES;
        #pragma omp parallel for num_threads(n_threads) schedule(static) if (parallel)
        for (int64_t t = 0; t < n_tokens; t++) {
            void *row = (char *)act + (size_t)t * row_bytes;
            if (scales) {
                quantize_act(&p.k, w, x + t * n_in, row, &scales[t]);
                if (p.k.act_kind == CPU_ACT_CODES && p.k.i8_act == CPU_I8_ACT_F32)
                    widen_fp8_codes(fp8_format(w->qext), row, n_in);
                else if (p.k.act_kind == CPU_ACT_CODES && p.k.i8_act == CPU_I8_ACT_BF16_PAIRS)
                    cpu_i8_fp8_pairs(fp8_format(w->qext), row, n_in);
            }
            else if (p.k.act_kind == CPU_ACT_MXFP4) hfq_quantize_row_mxfp4_act(x + t * n_in, row, n_in);
            else if (p.k.act_kind == CPU_ACT_FP8_GROUP)
                hfq_fp8_fake_quant_groups(HFQ_FP8_E4M3, x + t * n_in, row, n_in, w->act_fp8_group);
            else if (p.k.act_f32) widen_act_row(p.k.act, x + t * n_in, row, n_in);
            else p.k.act->quantize_row(x + t * n_in, row, n_in);
        }
        p.a = act;
        p.a_stride = row_bytes;
        p.a_scales = scales;
    }
    /* a batch whose weight rows are better decoded once (panel.h), else the tiles */
    if (!cpu_panel_products(&p.k, n_threads, w, p.a, p.a_stride, p.a_scales, n_tokens, y)) products(&p, n_threads);
    if (p.k.act_kind == CPU_ACT_NVFP4)   /* W4A4: each token's global scale, then the weight's */
        for (int64_t t = 0; t < n_tokens; t++)
            for (int64_t o = 0; o < n_out; o++) y[t * n_out + o] *= p.a_scales[t];
    if (w->scale && !w->qext) {   /* a per-tensor factor (I8 scales are inside the dots) */
        const float scale = *w->scale;
        for (int64_t i = 0; i < n_tokens * n_out; i++) y[i] *= scale;
    }
    if (bias)
        for (int64_t t = 0; t < n_tokens; t++)
            for (int64_t o = 0; o < n_out; o++) y[t * n_out + o] += bias[o];
}
