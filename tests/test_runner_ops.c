/* test_runner_ops.c - the CPU matmul over every weight format it supports
 * (F32/F16/BF16 SIMD tiles, ggml quant formats through quant/qtype.h) against
 * a double-precision product of the stored weights with the activations as
 * converted to the companion format; shapes that leave SIMD tails and partial
 * tiles; batched == single-token and 1 thread == 2 threads bit for bit; the
 * portable float kernels agree with the SIMD ones, the SIMD quant tiles equal
 * the reference vec_dots bit for bit; unsupported formats are
 * refused by name. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "formats/ggml_type.h"
#include "kernels/cpu/float_kernels.h"
#include "kernels/cpu/i8_kernels.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/panel.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cpu/vec_kernels.h"
#include "quant/cpu_features.h"
#include "quant/fp4.h"
#include "quant/int8.h"
#include "quant/tq.h"
#include "quant/half.h"
#include "test_runner_synth.h"

typedef struct shape {
    int64_t n_in, n_out, n_tokens;
} shape;

/* Checks y [T][n_out] against the exact product of the stored weights with
 * the converted activations a_values [T][n_in]; the bound is float
 * accumulation error, n * 2^-24 * sum |w a|, with headroom. Q8_1 activations
 * (for Q5_1) also carry each 32-value block's sum s = d * sum(q) in fp16 with
 * d unrounded, as ggml stores it, while the values dequantize with d in fp16:
 * the affine term min_w * s is off by up to 2 * 2^-11 of it per block, and
 * |min_w| <= max |w| of the block. */
static void check_product(const synth_model *sm, const double *a_values, const float *bias, const float *y,
                          shape s, bool fp16_sums, const char *what) {
    const double *w = sm->values[0];
    for (int64_t t = 0; t < s.n_tokens; t++)
        for (int64_t o = 0; o < s.n_out; o++) {
            const double *wr = w + o * s.n_in, *ar = a_values + t * s.n_in;
            double ref = bias ? bias[o] : 0.0, mag = fabs(ref), sums_err = 0;
            for (int64_t i = 0; i < s.n_in; i++) {
                ref += wr[i] * ar[i];
                mag += fabs(wr[i] * ar[i]);
            }
            for (int64_t b0 = 0; fp16_sums && b0 < s.n_in; b0 += 32) {
                double wmax = 0, asum = 0;
                for (int64_t i = b0; i < b0 + 32; i++) {
                    wmax = fmax(wmax, fabs(wr[i]));
                    asum += ar[i];
                }
                sums_err += 2.02 * 0x1p-11 * wmax * fabs(asum);
            }
            double tol = 2.0 * (double)(s.n_in + 2) * 0x1p-24 * mag + sums_err + 1e-30;
            CHECK_MSG(fabs(y[t * s.n_out + o] - ref) <= tol, "%s %s n_in %lld n_out %lld T %lld: [%lld][%lld] %.9g vs %.9g",
                      what, ggml_type_get(sm->info[0].type)->name, (long long)s.n_in, (long long)s.n_out,
                      (long long)s.n_tokens, (long long)t, (long long)o, y[t * s.n_out + o], ref);
        }
}

/* The portable float kernel, tile by tile, on activations already converted. */
static void portable_product(uint32_t type, const hfq_tensor *w, const char *act, size_t a_stride, float *y, shape s) {
    int cols = 0;
    bool act_f32 = false;
    cpu_tile_fn portable = cpu_float_tile(type, CPU_FLOAT_PORTABLE, &cols, &act_f32);
    for (int64_t t = 0; t < s.n_tokens; t += CPU_TILE_COLS)
        for (int64_t o = 0; o < s.n_out; o += CPU_TILE_ROWS) {
            int nr = (int)(s.n_out - o < CPU_TILE_ROWS ? s.n_out - o : CPU_TILE_ROWS);
            int nc = (int)(s.n_tokens - t < CPU_TILE_COLS ? s.n_tokens - t : CPU_TILE_COLS);
            portable(s.n_in, (const char *)w->data + o * w->row_bytes, w->row_bytes, nr, act + t * a_stride, a_stride, nc,
                     y + t * s.n_out + o, (size_t)s.n_out);
        }
}

static void test_shape(uint32_t type, shape s, bool with_bias, uint64_t seed) {
    synth_model sm;
    memset(&sm, 0, sizeof sm);
    uint64_t rng = seed;
    synth_add(&sm, "w", type, s.n_in, s.n_out, 0.0f, 1.0f, &rng);
    hfq_tensor w = {.name = "w", .type = type, .ne0 = s.n_in, .ne1 = s.n_out,
                    .row_bytes = (size_t)ggml_row_size(type, s.n_in), .data = sm.data[0]};
    cpu_wkernel k;
    hfq_error err;
    CHECK_MSG(cpu_wkernel_get(&w, HFQ_ACT_QUANT_AUTO, &k, "test", &err) == 0, "%s", err.msg);
    const int64_t T = s.n_tokens, n_in = s.n_in, n_out = s.n_out;
    const size_t a_stride = (size_t)hfq_qtype_row_size(k.act->type, n_in);
    float *x = malloc((size_t)(T * n_in) * sizeof *x), *bias = malloc((size_t)n_out * sizeof *bias);
    float *y = malloc((size_t)(T * n_out) * sizeof *y), *y1 = malloc((size_t)(T * n_out) * sizeof *y1);
    float *yt = malloc((size_t)n_out * sizeof *yt), *back = malloc((size_t)(T * n_in) * sizeof *back);
    double *a_values = malloc((size_t)(T * n_in) * sizeof *a_values);
    /* cpu_matmul's rows: the companion format, or its values widened to F32 (AVX-512 float tiles) */
    const size_t matmul_stride = k.act->type == HFQ_QT_F32 ? 0 : k.act_f32 ? (size_t)n_in * sizeof(float) : a_stride;
    CHECK(cpu_matmul_act_bytes(&w, HFQ_ACT_QUANT_AUTO, T) == matmul_stride * (size_t)T);
    char *act = malloc((matmul_stride > a_stride ? matmul_stride : a_stride) * (size_t)T);
    for (int64_t i = 0; i < T * n_in; i++) x[i] = 4.0f * synth_uniform(&rng);
    for (int64_t o = 0; o < n_out; o++) bias[o] = synth_uniform(&rng);
    const float *b = with_bias ? bias : NULL;
    /* the activations as the product sees them: quantized to the companion format */
    for (int64_t t = 0; t < T; t++) {
        k.act->quantize_row(x + t * n_in, act + t * a_stride, n_in);
        k.act->dequantize(act + t * a_stride, back + t * n_in, n_in);
    }
    for (int64_t i = 0; i < T * n_in; i++) a_values[i] = back[i];

    cpu_matmul(2, HFQ_ACT_QUANT_AUTO, act, y, &w, b, x, T);
    const bool fp16_sums = k.act->type == HFQ_QT_Q8_1;
    check_product(&sm, a_values, b, y, s, fp16_sums, "cpu_matmul");
    cpu_matmul(1, HFQ_ACT_QUANT_AUTO, act, y1, &w, b, x, T);
    CHECK_MSG(memcmp(y, y1, (size_t)(T * n_out) * sizeof *y) == 0, "1 vs 2 threads differ");
    for (int64_t t = 0; t < T; t++) {
        cpu_matmul(2, HFQ_ACT_QUANT_AUTO, act, yt, &w, b, x + t * n_in, 1);
        CHECK_MSG(memcmp(yt, y + t * n_out, (size_t)n_out * sizeof *yt) == 0,
                  "%s n_in %lld n_out %lld: token %lld alone differs from the batch", ggml_type_get(type)->name,
                  (long long)n_in, (long long)n_out, (long long)t);
    }
    for (int64_t t = 0; t < T; t++) k.act->quantize_row(x + t * n_in, act + t * a_stride, n_in);
    int float_cols = 0;
    bool act_f32 = false;
    if (k.tile && !cpu_float_tile(type, CPU_FLOAT_PORTABLE, &float_cols, &act_f32)) {
        /* quant tiles: every result is the reference vec_dot's, bit for bit */
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < n_out; o++) {
                float want = k.w->vec_dot((const char *)w.data + o * w.row_bytes, act + t * a_stride, n_in);
                if (b) want += b[o];
                CHECK_MSG(memcmp(&want, &y[t * n_out + o], sizeof want) == 0, "%s tile [%lld][%lld]: %.9g vs %.9g",
                          ggml_type_get(type)->name, (long long)t, (long long)o, y[t * n_out + o], want);
            }
    } else if (k.tile) {
        portable_product(type, &w, act, a_stride, y1, s);
        if (b)
            for (int64_t t = 0; t < T; t++)
                for (int64_t o = 0; o < n_out; o++) y1[t * n_out + o] += b[o];
        check_product(&sm, a_values, b, y1, s, false, "portable");
    }
    free(x); free(bias); free(y); free(y1); free(yt); free(back); free(a_values); free(act);
    synth_free(&sm);
}

static void test_float_formats(void) {
    static const uint32_t types[] = {GT_F32, GT_F16, GT_BF16};
    const int64_t n_ins[] = {1, 7, 8, 9, 36, 100, 257};
    const int64_t n_outs[] = {1, 3, 4, 5, 13};
    const int64_t Ts[] = {1, 2, 3, 5, 70};   /* 70: two token blocks */
    uint64_t seed = 11;
    for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++)
        for (size_t i = 0; i < sizeof n_ins / sizeof n_ins[0]; i++)
            for (size_t o = 0; o < sizeof n_outs / sizeof n_outs[0]; o++)
                for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
                    test_shape(types[ty], (shape){n_ins[i], n_outs[o], Ts[t]}, (i + o + t) % 2 == 0, seed++);
    /* big enough to run on both threads, every edge at once */
    for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++) test_shape(types[ty], (shape){203, 517, 131}, true, 99);
}

/* Every float tile this CPU runs gives the AVX2 tile's bits (AVX-512 keeps
 * its 8-lane sums, and takes F16/BF16 activations widened to F32), for
 * every row count, column count and length. */
static void test_float_isas(void) {
    static const uint32_t types[] = {GT_F32, GT_F16, GT_BF16};
    const int64_t n_ins[] = {1, 7, 8, 9, 36, 100, 257};
    enum { MAXN = 257, COLS = 11 };
    static char w[CPU_TILE_ROWS][MAXN * 4], a[COLS][MAXN * 4];
    static float a_f32[COLS][MAXN];
    float want[COLS * CPU_TILE_ROWS], got[COLS * CPU_TILE_ROWS];
    uint64_t rng = 5;
    int checked = 0;
    for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++) {
        int cols_avx2 = 0, cols = 0;
        bool f32_avx2 = false, act_f32 = false;
        cpu_tile_fn avx2 = cpu_float_tile(types[ty], CPU_FLOAT_AVX2, &cols_avx2, &f32_avx2);
        if (!avx2) continue;
        CHECK(!f32_avx2);
        for (int isa = CPU_FLOAT_AVX512; isa < CPU_FLOAT_BEST; isa++) {
            cpu_tile_fn tile = cpu_float_tile(types[ty], (cpu_float_isa)isa, &cols, &act_f32);
            if (!tile) continue;
            CHECK(cols >= 1 && cols <= COLS);
            for (size_t i = 0; i < sizeof n_ins / sizeof n_ins[0]; i++) {
                const int64_t n = n_ins[i];
                char(*rows[2])[MAXN * 4] = {w, a};
                const int n_rows[2] = {CPU_TILE_ROWS, COLS};
                for (int m = 0; m < 2; m++)
                    for (int r = 0; r < n_rows[m]; r++)
                        for (int64_t j = 0; j < n; j++) {
                            float v = 3.0f * synth_uniform(&rng);
                            const uint16_t h = types[ty] == GT_F16 ? hfq_f32_to_fp16(v) : hfq_f32_to_bf16(v);
                            if (types[ty] == GT_F32) memcpy(rows[m][r] + 4 * j, &v, 4);
                            else memcpy(rows[m][r] + 2 * j, &h, 2);
                            if (types[ty] != GT_F32) v = types[ty] == GT_F16 ? hfq_fp16_to_f32(h) : hfq_bf16_to_f32(h);
                            if (m == 1) a_f32[r][j] = v;
                        }
                for (int nr = 1; nr <= CPU_TILE_ROWS; nr++)
                    for (int nc = 1; nc <= cols; nc++) {
                        memset(want, 0, sizeof want);
                        memset(got, 0, sizeof got);
                        for (int c0 = 0; c0 < nc; c0 += cols_avx2)
                            avx2(n, w, sizeof w[0], nr, a[c0], sizeof a[0], nc - c0 < cols_avx2 ? nc - c0 : cols_avx2,
                                 want + c0 * CPU_TILE_ROWS, CPU_TILE_ROWS);
                        if (act_f32) tile(n, w, sizeof w[0], nr, a_f32, sizeof a_f32[0], nc, got, CPU_TILE_ROWS);
                        else tile(n, w, sizeof w[0], nr, a, sizeof a[0], nc, got, CPU_TILE_ROWS);
                        CHECK_MSG(memcmp(want, got, sizeof want) == 0, "%s isa %d n %lld: %d x %d tile differs",
                                  ggml_type_get(types[ty])->name, isa, (long long)n, nr, nc);
                        checked++;
                    }
            }
        }
    }
    printf("%d float tiles checked against AVX2\n", checked);
}

static void test_quant_formats(void) {
    static const uint32_t legacy[] = {GT_Q8_0, GT_Q4_0, GT_Q5_0, GT_Q5_1};
    static const uint32_t kquants[] = {GT_Q4_K, GT_Q5_K, GT_Q6_K, GT_MXFP4, GT_NVFP4};
    static const shape shapes[] = {{256, 1, 1}, {256, 5, 4}, {512, 13, 70}, {256, 130, 67}};
    uint64_t seed = 500;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t ty = 0; ty < sizeof legacy / sizeof legacy[0]; ty++) test_shape(legacy[ty], shapes[s], s % 2, seed++);
        for (size_t ty = 0; ty < sizeof kquants / sizeof kquants[0]; ty++) test_shape(kquants[ty], shapes[s], s % 2, seed++);
    }
    for (size_t ty = 0; ty < sizeof legacy / sizeof legacy[0]; ty++) test_shape(legacy[ty], (shape){96, 7, 5}, true, seed++);
}

/* I8 weights: products equal quant/int8.h's and quant/fp8.h's dots bit for
 * bit, for each activation mode: per token (dynamic, and the default without
 * an input_scale), static (the input_scale, and the default with one), none
 * (float activations). */
static void test_qext_products(void) {
    static const struct { hfq_qext q; int64_t group; } cases[] = {
        {HFQ_QEXT_INT8, 0}, {HFQ_QEXT_INT8, 8}, {HFQ_QEXT_FP8_E4M3, 0}, {HFQ_QEXT_FP8_E5M2, 0}};
    static const struct { hfq_act_quant aq; bool input_scale; } modes[] = {
        {HFQ_ACT_QUANT_AUTO, false}, {HFQ_ACT_QUANT_DYNAMIC, true}, {HFQ_ACT_QUANT_AUTO, true},
        {HFQ_ACT_QUANT_STATIC, true}, {HFQ_ACT_QUANT_NONE, true}};
    const int64_t n_out = 37;
    /* 144: rows of whole 16s, which FP8 W8A8 takes as BF16 pairs where the CPU has AVX512-BF16;
     * 130 tokens: past CPU_PANEL_FP8_MIN_TOKENS, so its panels (panel.h) too */
    for (int64_t T = 7; T <= 130; T += 123)
    for (int64_t n_in = 72; n_in <= 144; n_in += 72)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            synth_model sm;
            memset(&sm, 0, sizeof sm);
            uint64_t rng = 900 + c;
            synth_add_qext(&sm, "w.weight", cases[c].q, cases[c].group, true, n_in, n_out, 0.0f, 1.0f, &rng);
            const int64_t groups = cases[c].group ? n_in / cases[c].group : 1;
            const float in_scale = 0.02f;
            hfq_tensor w = {.name = "w.weight", .type = GT_I8, .ne0 = n_in, .ne1 = n_out, .row_bytes = (size_t)n_in,
                            .data = sm.data[0], .scale = sm.data[1], .scale_groups = groups, .qext = cases[c].q,
                            .input_scale = modes[m].input_scale ? &in_scale : NULL};
            const hfq_act_quant aq = modes[m].aq;
            const bool per_token = aq == HFQ_ACT_QUANT_DYNAMIC || (aq == HFQ_ACT_QUANT_AUTO && !w.input_scale);
            static float x[130 * 144], y[130 * 37];
            float a_scale = in_scale;
            int8_t a[144];
            for (int64_t i = 0; i < T * n_in; i++) x[i] = 3.0f * synth_uniform(&rng);
            void *act = malloc(cpu_matmul_act_bytes(&w, aq, T) + 1);
            cpu_matmul(2, aq, act, y, &w, NULL, x, T);
            const hfq_fp8_format fmt = cases[c].q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
            for (int64_t t = 0; t < T; t++) {
                const float *xt = x + t * n_in;
                if (cases[c].q == HFQ_QEXT_INT8) {
                    if (per_token) hfq_quantize_int8(xt, a, 1, n_in, NULL, &a_scale, 0);
                    else hfq_quantize_int8_static(xt, a, 1, n_in, a_scale);
                } else {
                    if (per_token) hfq_quantize_fp8(fmt, xt, a, 1, n_in, NULL, &a_scale);
                    else hfq_quantize_fp8_static(fmt, xt, a, 1, n_in, a_scale);
                }
                for (int64_t o = 0; o < n_out; o++) {
                    const int8_t *wr = (const int8_t *)sm.data[0] + o * n_in;
                    const float *ws = (const float *)sm.data[1];
                    float want;
                    if (aq == HFQ_ACT_QUANT_NONE)
                        want = cases[c].q == HFQ_QEXT_INT8 ? hfq_dot_int8_f32(wr, ws + o * groups, cases[c].group, xt, n_in)
                                                           : hfq_dot_fp8_f32(fmt, wr, ws[o], xt, n_in);
                    else
                        want = cases[c].q == HFQ_QEXT_INT8
                                   ? hfq_dot_int8_int8(wr, ws + o * groups, cases[c].group, a, a_scale, n_in)
                                   : hfq_dot_fp8_fp8(fmt, wr, ws[o], fmt, a, a_scale, n_in);
                    CHECK_MSG(y[t * n_out + o] == want, "qext case %zu mode %zu [%lld][%lld]: %.9g vs %.9g", c, m,
                              (long long)t, (long long)o, y[t * n_out + o], want);
                }
            }
            free(act);
            synth_free(&sm);
        }
}

/* NVFP4 weights with NVFP4 activations (W4A4): hfq_dot_nvfp4_nvfp4 times the
 * activation's global scale (each token's amax / (6 * 448), or the static
 * input_scale), then the weight's, bit for bit; without a mode that asks for
 * it, Q8_0 activations as ggml. */
static void test_nvfp4_w4a4(void) {
    const int64_t n_in = 192, n_out = 9, T = 5;
    synth_model sm;
    memset(&sm, 0, sizeof sm);
    uint64_t rng = 31;
    synth_add(&sm, "w.weight", GT_NVFP4, n_in, n_out, 0.0f, 1.0f, &rng);
    const float g_w = 0.75f, in_scale = 0.004f;
    hfq_tensor w = {.name = "w.weight", .type = GT_NVFP4, .ne0 = n_in, .ne1 = n_out,
                    .row_bytes = (size_t)ggml_row_size(GT_NVFP4, n_in), .data = sm.data[0], .scale = &g_w};
    float x[5 * 192], y[5 * 9], ya[5 * 9];
    hfq_block_nvfp4 a[3];
    for (int64_t i = 0; i < T * n_in; i++) x[i] = 3.0f * synth_uniform(&rng) * (i == 77 ? 0.0f : 1.0f);
    for (int i = 0; i < 2; i++) x[i * n_in + 5] = 20.0f;   /* tokens whose amax differs from the others' */
    static const struct { hfq_act_quant aq; bool input_scale; } modes[] = {
        {HFQ_ACT_QUANT_DYNAMIC, false}, {HFQ_ACT_QUANT_STATIC, true}, {HFQ_ACT_QUANT_AUTO, true}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        w.input_scale = modes[m].input_scale ? &in_scale : NULL;
        cpu_wkernel k;
        hfq_error err;
        CHECK_MSG(cpu_wkernel_get(&w, modes[m].aq, &k, "test", &err) == 0, "%s", err.msg);
        CHECK(k.act_kind == CPU_ACT_NVFP4);
        void *act = malloc(cpu_matmul_act_bytes(&w, modes[m].aq, T));
        cpu_matmul(2, modes[m].aq, act, y, &w, NULL, x, T);
        for (int64_t t = 0; t < T; t++) {
            const float g_a = w.input_scale ? in_scale : hfq_nvfp4_global_scale(x + t * n_in, n_in);
            hfq_quantize_nvfp4(x + t * n_in, a, 1, n_in, NULL, g_a);
            for (int64_t o = 0; o < n_out; o++) {
                float want = hfq_dot_nvfp4_nvfp4((const char *)sm.data[0] + o * w.row_bytes, a, n_in) * g_a;
                want *= g_w;
                CHECK_MSG(y[t * n_out + o] == want, "nvfp4 mode %zu [%lld][%lld]: %.9g vs %.9g", m, (long long)t,
                          (long long)o, y[t * n_out + o], want);
            }
        }
        /* one token alone gives the same bits */
        cpu_matmul(1, modes[m].aq, act, ya, &w, NULL, x + 3 * n_in, 1);
        CHECK(memcmp(ya, y + 3 * n_out, (size_t)n_out * sizeof *ya) == 0);
        free(act);
    }
    /* none, and the default without an input_scale: Q8_0 activations */
    const hfq_act_quant q8_modes[] = {HFQ_ACT_QUANT_NONE, HFQ_ACT_QUANT_AUTO};
    for (size_t m = 0; m < 2; m++) {
        w.input_scale = m == 0 ? &in_scale : NULL;
        cpu_wkernel k;
        CHECK(cpu_wkernel_get(&w, q8_modes[m], &k, "test", NULL) == 0);
        CHECK(k.act_kind == CPU_ACT_FORMAT && k.act->type == HFQ_QT_Q8_0);
    }
    synth_free(&sm);
}

/* Weight-only NVFP4 / MXFP4 (act_none): under AUTO and NONE the products
 * take the float activations, and equal a double-precision dot of the
 * dequantized weights (times NVFP4's global scale) within float rounding;
 * one token alone and one thread give the same bits as the batch. */
static void test_fp4_float_acts(void) {
    static const uint32_t types[] = {GT_NVFP4, GT_MXFP4};
    static const hfq_act_quant modes[] = {HFQ_ACT_QUANT_AUTO, HFQ_ACT_QUANT_NONE};
    const int64_t n_in = 192, n_out = 9, T = 5;
    for (size_t ty = 0; ty < 2; ty++)
        for (size_t m = 0; m < 2; m++) {
            synth_model sm;
            memset(&sm, 0, sizeof sm);
            uint64_t rng = 77 + ty;
            synth_add(&sm, "w.weight", types[ty], n_in, n_out, 0.0f, 1.0f, &rng);
            const float g_w = 0.75f;
            const bool nvfp4 = types[ty] == GT_NVFP4;
            hfq_tensor w = {.name = "w.weight", .type = types[ty], .ne0 = n_in, .ne1 = n_out,
                            .row_bytes = (size_t)ggml_row_size(types[ty], n_in), .data = sm.data[0],
                            .scale = nvfp4 ? &g_w : NULL, .act_none = true};
            cpu_wkernel k;
            hfq_error err;
            CHECK_MSG(cpu_wkernel_get(&w, modes[m], &k, "test", &err) == 0, "%s", err.msg);
            CHECK(k.act_kind == CPU_ACT_FORMAT && k.act->type == HFQ_QT_F32);
            CHECK(cpu_matmul_act_bytes(&w, modes[m], T) == 0);
            float x[5 * 192], y[5 * 9], y1[9], deq[192];
            for (int64_t i = 0; i < T * n_in; i++) x[i] = 3.0f * synth_uniform(&rng);
            cpu_matmul(2, modes[m], NULL, y, &w, NULL, x, T);
            for (int64_t o = 0; o < n_out; o++) {
                const char *wr = (const char *)sm.data[0] + o * w.row_bytes;
                if (nvfp4) hfq_dequantize_row_nvfp4(wr, deq, n_in);
                else hfq_dequantize_row_mxfp4(wr, deq, n_in);
                for (int64_t t = 0; t < T; t++) {
                    double want = 0.0, mag = 0.0;
                    for (int64_t i = 0; i < n_in; i++) {
                        want += (double)deq[i] * x[t * n_in + i];
                        mag += fabs((double)deq[i] * x[t * n_in + i]);
                    }
                    if (nvfp4) want *= g_w, mag *= g_w;
                    /* float sums of n terms: within n + 2 roundings of the magnitude */
                    const double tol = (double)(n_in + 2) * FLT_EPSILON * mag;
                    CHECK_MSG(fabs(y[t * n_out + o] - want) <= tol, "%s mode %zu [%lld][%lld]: %.9g vs %.9g",
                              ggml_type_get(types[ty])->name, m, (long long)t, (long long)o, y[t * n_out + o], want);
                }
            }
            cpu_matmul(1, modes[m], NULL, y1, &w, NULL, x + 3 * n_in, 1);
            CHECK(memcmp(y1, y + 3 * n_out, sizeof y1) == 0);
            synth_free(&sm);
        }
}

/* The GeGLU kernel of every set this CPU runs against torch's formula in
 * double, relative to |x up| (1 + tanh cancels in float for negative x):
 * both tails, the far ones (+-30) included, and lengths that leave a
 * partial vector. */
static void test_geglu_kernels(void) {
    enum { N = 4099 };
    static float x[N], up[N], g[N];
    uint64_t rng = 5;
    for (int i = 0; i < N; i++) x[i] = (i % 97 == 0 ? 30.0f : 12.0f) * synth_uniform(&rng), up[i] = synth_uniform(&rng);
    int checked = 0;
    for (int isa = CPU_VEC_PORTABLE; isa <= CPU_VEC_AVX512; isa++) {
        cpu_vec_kernels k;
        if (!cpu_vec_kernels_isa((cpu_vec_isa)isa, &k)) continue;
        memcpy(g, x, sizeof g);
        g[N - 1] = 12345.0f;   /* not written past n */
        k.geglu(g, up, N - 1);
        double worst = 0.0;
        for (int i = 0; i < N - 1; i++) {
            const double v = x[i];
            const double want = 0.5 * v * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v))) * up[i];
            const double e = fabs(g[i] - want) / (fabs(v * up[i]) + 1e-30);
            worst = e > worst ? e : worst;
        }
        CHECK_MSG(worst <= 1e-6, "geglu set %d off by %g", isa, worst);
        CHECK(g[N - 1] == 12345.0f);
        checked++;
    }
    CHECK(checked >= 1);
}

/* F16 cache rows (kv_rows.h) bit for bit against their order written out:
 * a key dot sums fused products in 8 lanes (value i in lane i % 8), adds
 * the lanes (l + l4 ... then pairs) and the last hd % 8 products unfused;
 * a value mix sums each value's fused products over the rows in order, the
 * last hd % 8 values unfused. Whichever of the F16C and AVX-512 kernels
 * this CPU takes (both: with and without HFQ_CPU_ISA=avx2; none without
 * F16C, where the portable dots sum as the F16 vec_dot); head sizes
 * past and short of the vectors and passes, row counts past the 8 dots a
 * step. */
static void test_kv_rows_f16(void) {
    enum { MAX_N = 37, MAX_HD = 264 };
    if (!cpu_has(CPU_FEAT_AVX2 | CPU_FEAT_FMA | CPU_FEAT_F16C)) {   /* the portable dots sum as the F16 vec_dot */
        printf("F16 cache kernels: none in this set\n");
        return;
    }
    static uint16_t rows[MAX_N * MAX_HD], q[MAX_HD];
    static float w[MAX_N], s[MAX_N], out[MAX_HD + 1], tmp[MAX_HD];
    const int64_t hds[] = {1, 7, 8, 15, 16, 24, 64, 72, 128, 136, 200, 256, 264};
    uint64_t rng = 77;
    int checked = 0;
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
        for (int64_t n = 1; n <= MAX_N; n += n < 12 ? 1 : 25) {
            const int64_t hd = hds[h], n8 = hd / 8 * 8;
            const size_t stride = (size_t)MAX_HD * sizeof(uint16_t);
            for (int64_t i = 0; i < n * MAX_HD; i++) rows[i] = hfq_f32_to_fp16(3.0f * synth_uniform(&rng));
            for (int64_t d = 0; d < hd; d++) q[d] = hfq_f32_to_fp16(synth_uniform(&rng));
            for (int64_t p = 0; p < n; p++) w[p] = synth_uniform(&rng);
            cpu_kv_rows_dot(HFQ_KV_F16, rows, stride, q, hd, n, s);
            for (int64_t p = 0; p < n; p++) {
                float lane[8] = {0};
                for (int64_t i = 0; i < n8; i++)
                    lane[i % 8] = fmaf(hfq_fp16_to_f32(rows[p * MAX_HD + i]), hfq_fp16_to_f32(q[i]), lane[i % 8]);
                float l4[4];
                for (int j = 0; j < 4; j++) l4[j] = lane[j] + lane[j + 4];
                float want = (l4[0] + l4[2]) + (l4[1] + l4[3]);
                for (int64_t i = n8; i < hd; i++) want += hfq_fp16_to_f32(rows[p * MAX_HD + i]) * hfq_fp16_to_f32(q[i]);
                CHECK_MSG(memcmp(&want, &s[p], sizeof want) == 0, "kv dot hd %lld n %lld row %lld: %.9g vs %.9g",
                          (long long)hd, (long long)n, (long long)p, s[p], want);
            }
            out[hd] = 12345.0f;
            cpu_kv_rows_mix(HFQ_KV_F16, rows, stride, w, n, out, tmp, hd);
            for (int64_t d = 0; d < hd; d++) {
                float want = 0.0f;
                for (int64_t p = 0; p < n; p++) {
                    const float x = hfq_fp16_to_f32(rows[p * MAX_HD + d]);
                    want = d < n8 ? fmaf(w[p], x, want) : want + w[p] * x;
                }
                CHECK_MSG(memcmp(&want, &out[d], sizeof want) == 0, "kv mix hd %lld n %lld value %lld: %.9g vs %.9g",
                          (long long)hd, (long long)n, (long long)d, out[d], want);
            }
            CHECK(out[hd] == 12345.0f);
            checked++;
        }
    printf("%d F16 cache dot and mix calls checked\n", checked);
}

/* Attention's vector kernels (in every set this CPU runs) against a plain double-precision computation within float rounding:
 * scores (and exactly their maximum), softmax and the weighted sums of V,
 * for head sizes that fill vectors and those that don't, and every key
 * count through a few vector widths. */
static void test_attention_kernels(void) {
    enum { N_CTX = 80, MAX_HD = 20 };
    static float kt[MAX_HD * N_CTX], vt[MAX_HD * N_CTX];
    const int64_t hds[] = {1, 3, 8, 12, 20};
    uint64_t rng = 11;
    for (int i = 0; i < MAX_HD * N_CTX; i++) kt[i] = 2.0f * synth_uniform(&rng), vt[i] = synth_uniform(&rng);
    int checked = 0;
    for (int isa = CPU_VEC_PORTABLE; isa <= CPU_VEC_AVX512; isa++) {
        cpu_vec_kernels k;
        if (!cpu_vec_kernels_isa((cpu_vec_isa)isa, &k)) continue;
        for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
            for (int64_t n = 1; n <= N_CTX; n++) {
                const int64_t hd = hds[h];
                float q[MAX_HD], s[N_CTX + 1], out[MAX_HD + 1];
                double want_s[N_CTX], want_out[MAX_HD] = {0}, want_sum = 0.0;
                for (int64_t d = 0; d < hd; d++) q[d] = synth_uniform(&rng);
                s[n] = out[hd] = 12345.0f;   /* nothing written past n_keys or hd */
                const float max = k.scores(q, kt, N_CTX, hd, n, s);
                float s_max = s[0];
                for (int64_t p = 0; p < n; p++) {
                    want_s[p] = 0.0;
                    for (int64_t d = 0; d < hd; d++) want_s[p] += (double)q[d] * kt[d * N_CTX + p];
                    CHECK_MSG(fabs(s[p] - want_s[p]) <= 1e-5 * (1.0 + fabs(want_s[p])), "score hd %lld n %lld p %lld",
                              (long long)hd, (long long)n, (long long)p);
                    s_max = s[p] > s_max ? s[p] : s_max;
                }
                CHECK(max == s_max);
                float scaled[N_CTX];
                for (int64_t p = 0; p < n; p++) scaled[p] = s[p];
                const float sum = k.softmax(s, n, max, 0.5f);
                for (int64_t p = 0; p < n; p++) {
                    const double e = exp(0.5 * ((double)scaled[p] - (double)max));
                    CHECK_MSG(fabs(s[p] - e) <= 1e-6, "softmax n %lld p %lld: %g vs %g", (long long)n, (long long)p,
                              s[p], e);
                    want_sum += e;
                    for (int64_t d = 0; d < hd; d++) want_out[d] += (double)s[p] * vt[d * N_CTX + p];
                }
                CHECK_MSG(fabs(sum - want_sum) <= 1e-5 * want_sum, "softmax sum %g vs %g (n %lld)", sum, want_sum,
                          (long long)n);
                k.mix(s, vt, N_CTX, n, hd, out);
                for (int64_t d = 0; d < hd; d++)
                    CHECK_MSG(fabs(out[d] - want_out[d]) <= 1e-5 * (1.0 + fabs(want_out[d])), "mix hd %lld n %lld d %lld",
                              (long long)hd, (long long)n, (long long)d);
                CHECK(s[n] == 12345.0f && out[hd] == 12345.0f);
                checked++;
            }
    }
    printf("%d attention kernel calls checked\n", checked);
}

/* Activation row v (n values) in format act, as the runner makes it:
 * NVFP4 with a global scale on odd rounds (W4A4 per token), without on even ones. */
static void quantize_act_row(hfq_qtype act, const float *v, void *a, int64_t n, int round) {
    if (act == HFQ_QT_F32) memcpy(a, v, (size_t)n * sizeof *v);
    else if (act == HFQ_QT_NVFP4) hfq_quantize_nvfp4(v, a, 1, n, NULL, round % 2 ? hfq_nvfp4_global_scale(v, n) : 0.0f);
    else if (act == HFQ_QT_MXFP4) hfq_quantize_row_mxfp4_act(v, a, n);   /* W4A4: compressed-tensors' dynamic MX rule */
    else hfq_qtype_get(act)->quantize_row(v, a, n);
}

/* The SIMD twin of reference dot `ref` for weights wt times activations
 * act, and its tiles, in set isa: the same bits on rows of values of very
 * different sizes; tiles of every width up to the kernel's and every row
 * count up to CPU_TILE_ROWS (the rows past nr left alone). */
static int check_simd_kernels(const hfq_qtype_traits *wt, hfq_qtype act, hfq_vec_dot_fn ref, int isa, uint64_t *rng) {
    enum { N = 1024, ROWS = CPU_TILE_ROWS, COLS = 2 * CPU_TILE_COLS_K + 3 };
    static float x[N], v[N], ones[N];
    for (int64_t i = 0; i < N; i++) ones[i] = 1.0f;
    static char w[ROWS][2 * N], a[COLS][4 * N];   /* wider than any row of these formats */
    static float want[COLS][ROWS], got[COLS][ROWS];
    hfq_vec_dot_fn simd = cpu_quant_vec_dot_act_isa(wt->type, act, (cpu_quant_isa)isa);
    int cols = 0, checked = 0;
    cpu_tile_fn tile = cpu_quant_tile_act_isa(wt->type, act, (cpu_quant_isa)isa, &cols);
    CHECK(simd && tile && cols >= 1 && cols <= COLS);
    if (!simd || !tile) return 0;
    const size_t row = (size_t)hfq_qtype_row_size(wt->type, N), arow = (size_t)hfq_qtype_row_size(act, N);
    CHECK(row <= sizeof w[0] && arow <= sizeof a[0]);
    /* at least one round per column count */
    for (int round = 0; round < (cols > 20 ? cols : 20); round++) {
        float scale = ldexpf(1.0f, round % 20 - 10);
        for (int r = 0; r < ROWS; r++) {
            for (int64_t i = 0; i < N; i++) x[i] = scale * synth_uniform(rng) * (i % 97 == 0 ? 50.0f : 1.0f);
            /* formats that refuse no importance (IQ2_XXS, IQ2_XS, IQ1_S) get uniform importance */
            if (!wt->quantize(x, (char *)w + r * row, 1, N, NULL))
                CHECK(wt->quantize(x, (char *)w + r * row, 1, N, ones) == row);
        }
        for (int c = 0; c < COLS; c++) {
            for (int64_t i = 0; i < N; i++) v[i] = synth_uniform(rng) * ((round + c) % 3 ? 1.0f : 1000.0f);
            quantize_act_row(act, v, (char *)a + c * arow, N, round);
        }
        for (int c = 0; c < COLS; c++)
            for (int r = 0; r < ROWS; r++) {
                want[c][r] = ref((char *)w + r * row, (char *)a + c * arow, N);
                float one = simd((char *)w + r * row, (char *)a + c * arow, N);
                CHECK_MSG(memcmp(&want[c][r], &one, sizeof one) == 0, "%s x %s isa %d round %d: %.9g vs %.9g",
                          wt->name, hfq_qtype_get(act)->name, isa, round, one, want[c][r]);
                checked++;
            }
        /* tiles of every row count (AVX512-VNNI's K-quant tiles take rows in
         * pairs: 1 and 3 leave half a pair, 2 a whole one), of nc = round % cols + 1 columns */
        const int nc = round % cols + 1;
        for (int nr = ROWS; nr >= 1; nr--) {
            memset(got, 0, sizeof got);
            for (int c0 = 0; c0 < COLS; c0 += nc) {
                const int n_cols = COLS - c0 < nc ? COLS - c0 : nc;
                tile(N, w, row, nr, (char *)a + c0 * arow, arow, n_cols, &got[c0][0], ROWS);
            }
            bool same = true;
            for (int c = 0; c < COLS; c++)
                for (int r = 0; r < ROWS; r++)
                    same = same && (r < nr ? memcmp(&want[c][r], &got[c][r], sizeof got[c][r]) == 0
                                           : got[c][r] == 0.0f);
            CHECK_MSG(same, "%s x %s isa %d: tile of %d rows x %d columns differs", wt->name,
                      hfq_qtype_get(act)->name, isa, nr, nc);
        }
    }
    return checked;
}

/* Every format's SIMD kernels with its vec_dot_type activations, and every
 * other pair's (W4A4, weight-only), in every set this CPU runs. */
static void test_quant_simd_dots(void) {
    hfq_qtype formats[HFQ_QT_COUNT];
    const size_t n_formats = cpu_quant_tile_formats(formats, HFQ_QT_COUNT);
    cpu_quant_pair pairs[HFQ_QT_COUNT];
    const size_t n_pairs = cpu_quant_tile_pairs(pairs, HFQ_QT_COUNT);
    uint64_t rng = 77;
    int checked = 0, isas = 0;
    for (int isa = CPU_QUANT_ISA_AVX2; isa <= CPU_QUANT_ISA_AVX512VNNI; isa++) {
        if (!cpu_quant_isa_runs((cpu_quant_isa)isa)) continue;
        isas++;
        for (size_t f = 0; f < n_formats; f++) {
            const hfq_qtype_traits *wt = hfq_qtype_get(formats[f]);
            checked += check_simd_kernels(wt, wt->vec_dot_type, wt->vec_dot, isa, &rng);
        }
        for (size_t f = 0; f < n_pairs; f++)
            checked += check_simd_kernels(hfq_qtype_get(pairs[f].w), pairs[f].act, pairs[f].ref, isa, &rng);
    }
    printf("%d SIMD quant dots checked in %d instruction sets (%zu pairs beyond vec_dot_type)\n", checked, isas,
           n_pairs);
}

/* Block b of weight row r of format t with every byte value in every byte
 * position over the rows and blocks (the quantizers write only some: TQ1_0's
 * trit thresholds y = 85 / 86 and 170 / 171, bytes of no valid packing, IQ1's
 * every index, scale and shift sign, as a hostile file has them), the
 * format's float scale set to a finite value. */
static void all_bytes_block(hfq_qtype t, int r, int b, void *blk) {
    uint8_t *p = blk;
    const size_t size = t == HFQ_QT_TQ1_0 ? sizeof(hfq_block_tq1_0) : t == HFQ_QT_IQ1_S ? sizeof(hfq_block_iq1_s)
                                                                                        : sizeof(hfq_block_iq1_m);
    for (size_t j = 0; j < size; j++) p[j] = (uint8_t)(j * 7 + (size_t)b * 5 + (size_t)r * 64 + (j / 64) * 3);
    const uint16_t d = hfq_f32_to_fp16(0.5f + (float)((b + r) % 7));
    if (t == HFQ_QT_TQ1_0) ((hfq_block_tq1_0 *)blk)->d = d;
    else if (t == HFQ_QT_IQ1_S) ((hfq_block_iq1_s *)blk)->d = d;
    else   /* IQ1_M: d's four nibbles are the top nibbles of the four scale words */
        for (int k = 0; k < 4; k++) {
            uint8_t *hi = &((hfq_block_iq1_m *)blk)->scales[2 * k + 1];
            *hi = (uint8_t)((*hi & 0x0F) | ((d >> 4 * k) & 0xF) << 4);
        }
}

/* TQ1_0, IQ1_S and IQ1_M rows of all_bytes_block through the SIMD dot and
 * the tiles of every set (decode's one column, the narrow tiles with their
 * unsigned levels and, from 2 K_GROUP columns, the wide ones that unpack
 * signed levels): the reference's bits. */
static void test_low_bit_all_bytes(void) {
    enum { NB = 64, N = NB * HFQ_QK_K, ROWS = CPU_TILE_ROWS, COLS = CPU_TILE_COLS_K };
    static uint8_t w[ROWS][NB * sizeof(hfq_block_iq1_m)];   /* rows of the largest of the three blocks (checked below) */
    static char a[COLS][2 * N];
    static float want[COLS][ROWS], got[COLS][ROWS];
    static float v[N];
    const hfq_qtype types[] = {HFQ_QT_TQ1_0, HFQ_QT_IQ1_S, HFQ_QT_IQ1_M};
    int checked = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const hfq_qtype t = types[ti];
        const hfq_qtype_traits *wt = hfq_qtype_get(t);
        const size_t bb = (size_t)hfq_qtype_row_size(t, HFQ_QK_K), arow = (size_t)hfq_qtype_row_size(wt->vec_dot_type, N);
        CHECK(NB * bb <= sizeof w[0] && arow <= sizeof a[0]);
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < NB; b++) all_bytes_block(t, r, b, w[r] + (size_t)b * bb);
        uint64_t rng = 99;
        for (int c = 0; c < COLS; c++) {
            for (int64_t i = 0; i < N; i++) v[i] = synth_uniform(&rng) * (c ? 1.0f : 300.0f);
            hfq_qtype_get(wt->vec_dot_type)->quantize_row(v, a[c], N);
        }
        for (int c = 0; c < COLS; c++)
            for (int r = 0; r < ROWS; r++) want[c][r] = wt->vec_dot(w[r], a[c], N);
        for (int isa = CPU_QUANT_ISA_AVX2; isa <= CPU_QUANT_ISA_AVX512VNNI; isa++) {
            if (!cpu_quant_isa_runs((cpu_quant_isa)isa)) continue;
            int cols = 0;
            hfq_vec_dot_fn simd = cpu_quant_vec_dot_act_isa(t, wt->vec_dot_type, (cpu_quant_isa)isa);
            cpu_tile_fn tile = cpu_quant_tile_act_isa(t, wt->vec_dot_type, (cpu_quant_isa)isa, &cols);
            CHECK(simd && tile);
            if (!simd || !tile) continue;
            for (int c = 0; c < COLS; c++)
                for (int r = 0; r < ROWS; r++) {
                    const float one = simd(w[r], a[c], N);
                    CHECK_MSG(memcmp(&one, &want[c][r], sizeof one) == 0, "%s isa %d: dot %.9g vs %.9g", wt->name, isa,
                              one, want[c][r]);
                }
            for (int nc = 1; nc <= COLS && nc <= cols; nc += nc < 3 ? 1 : 5) {   /* 1, 2, 3, 8, 13 */
                memset(got, 0, sizeof got);
                for (int c0 = 0; c0 < COLS; c0 += nc)
                    tile(N, w, sizeof w[0], ROWS, a[c0], sizeof a[0], COLS - c0 < nc ? COLS - c0 : nc, &got[c0][0],
                         ROWS);
                CHECK_MSG(memcmp(got, want, sizeof got) == 0, "%s isa %d: tile of %d columns differs", wt->name, isa, nc);
                checked++;
            }
        }
    }
    printf("tq1_0, iq1_s, iq1_m on every byte: %d tiles checked\n", checked);
}

/* Every scale code of MXFP4 (E8M0) and NVFP4 (UE4M3, 0x7F and bit 7
 * included) weights, and of NVFP4 activations, through the SIMD dots of
 * every set this CPU runs: block by block the reference's bits. */
static void test_fp4_scale_codes(void) {
    enum { NB = 256 };
    static hfq_block_mxfp4 mx[NB];
    static hfq_block_nvfp4 nv[NB], nva[NB];
    static hfq_block_q8_0 q8[2 * NB];
    uint64_t rng = 99;
    for (int b = 0; b < NB; b++) {
        mx[b].e = (uint8_t)b;
        for (int j = 0; j < 4; j++) nv[b].d[j] = (uint8_t)(b + 64 * j), nva[b].d[j] = (uint8_t)(b * 7 + 64 * j + 1);
        for (int j = 0; j < 16; j++) mx[b].qs[j] = (uint8_t)(synth_uniform(&rng) * 1e6f);
        for (int j = 0; j < 32; j++)
            nv[b].qs[j] = (uint8_t)(synth_uniform(&rng) * 1e6f), nva[b].qs[j] = (uint8_t)(synth_uniform(&rng) * 1e6f);
    }
    for (int b = 0; b < 2 * NB; b++) {
        q8[b].d = hfq_f32_to_fp16(ldexpf(1.0f + synth_uniform(&rng), b % 11 - 20));
        for (int j = 0; j < 32; j++) q8[b].qs[j] = (int8_t)(synth_uniform(&rng) * 127.0f);
    }
    int checked = 0;
    for (int isa = CPU_QUANT_ISA_AVX2; isa <= CPU_QUANT_ISA_AVX512VNNI; isa++) {
        hfq_vec_dot_fn dmx = cpu_quant_vec_dot_isa(HFQ_QT_MXFP4, (cpu_quant_isa)isa);
        hfq_vec_dot_fn dnv = cpu_quant_vec_dot_isa(HFQ_QT_NVFP4, (cpu_quant_isa)isa);
        hfq_vec_dot_fn dnn = cpu_quant_vec_dot_act_isa(HFQ_QT_NVFP4, HFQ_QT_NVFP4, (cpu_quant_isa)isa);
        if (!dmx || !dnv || !dnn) continue;
        for (int b = 0; b < NB; b++) {
            const float want[3] = {hfq_dot_mxfp4_q8_0(&mx[b], &q8[b], 32), hfq_dot_nvfp4_q8_0(&nv[b], &q8[2 * b], 64),
                                   hfq_dot_nvfp4_nvfp4(&nv[b], &nva[b], 64)};
            const float got[3] = {dmx(&mx[b], &q8[b], 32), dnv(&nv[b], &q8[2 * b], 64), dnn(&nv[b], &nva[b], 64)};
            CHECK_MSG(memcmp(want, got, sizeof want) == 0, "isa %d scale codes of block %d: %.9g %.9g %.9g vs %.9g %.9g %.9g",
                      isa, b, got[0], got[1], got[2], want[0], want[1], want[2]);
            checked++;
        }
    }
    printf("%d FP4 blocks of every scale code checked\n", checked);
}

/* The same float bits, or both NaN. */
static bool same_bits_or_nans(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }

/* A random FP8 code of format f that is neither NaN nor infinite. */
static uint8_t finite_fp8_code(hfq_fp8_format f, uint64_t *rng) {
    for (;;) {
        const uint8_t c = (uint8_t)(synth_uniform(rng) * 1e6f);
        const float v = hfq_fp8_to_f32(f, c);
        if (v == v && fabsf(v) <= hfq_fp8_max(f)) return c;
    }
}

/* The I8 kernels (i8_kernels.h) against the reference dots one pair at a
 * time, bit for bit: every encoding and granularity, lengths that leave
 * every remainder of the 8 partial sums and of INT8's 32-value steps, codes
 * of every kind (weights without NaN or infinity, FP8 activations with NaN
 * in one round; INT8 weights -128 too), float and code
 * activations, scales and activations of very different sizes; tiles of
 * every row count and width equal to the pair alone. */
static void test_i8_kernels(void) {
    enum { NMAX = 65536 + 40, ROWS = CPU_TILE_ROWS, COLS = 19 };   /* AVX-512: 8 + 8 + 2 + 1 columns */
    /* any_codes: INT8 activations over the whole range, -128 included (hfq.act_quant int8_ct);
     * FP8 groups: block scales expanded */
    static const struct { hfq_qext q; int64_t groups; bool any_codes; } cases[] = {
        {HFQ_QEXT_INT8, 0, false},     {HFQ_QEXT_INT8, 1, false},     {HFQ_QEXT_INT8, 3, false},
        {HFQ_QEXT_FP8_E4M3, 0, false}, {HFQ_QEXT_FP8_E4M3, 1, false}, {HFQ_QEXT_FP8_E5M2, 0, false},
        {HFQ_QEXT_FP8_E5M2, 1, false}, {HFQ_QEXT_FP8_E4M3, 3, false}, {HFQ_QEXT_FP8_E5M2, 3, false},
        {HFQ_QEXT_INT8, 0, true},      {HFQ_QEXT_INT8, 3, true}};
    /* tails of 32..63 after AVX512-VNNI INT8's 64-value steps, and one past a 32-bit lane's chunk of INT8 products */
    static const int64_t lengths[] = {1, 7, 8, 9, 24, 48, 72, 104, 127, 144, 1029, 1040, 65536 + 40};
    static uint8_t codes[ROWS * NMAX], acodes[COLS][NMAX];
    static float x[COLS][NMAX], scales[ROWS * 3];
    float a_scales[COLS], want[COLS][ROWS], got[COLS][ROWS];
    /* FP8 activation codes as the set's tile takes them: widened, or BF16 pairs */
    static float acodes_f32[COLS][NMAX];
    static uint16_t apairs[COLS][NMAX];
    int checked_pairs = 0;
    int cols;
    for (int isa = CPU_FLOAT_AVX2; isa <= CPU_FLOAT_AVX512; isa++) {
        if (!cpu_float_isa_runs((cpu_float_isa)isa)) continue;
        uint64_t rng = 4242;
        int checked = 0;
        for (size_t cs = 0; cs < sizeof cases / sizeof cases[0]; cs++)
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
                const int64_t n = lengths[l], groups = cases[cs].groups;
                if (groups > 1 && n % groups) continue;
                const hfq_fp8_format f = cases[cs].q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
                for (int round = 0; round < 6; round++) {
                    for (int64_t i = 0; i < ROWS * n; i++)
                        codes[i] = cases[cs].q == HFQ_QEXT_INT8 ? (uint8_t)(synth_uniform(&rng) * 1e6f)
                                                                : finite_fp8_code(f, &rng);
                    for (int i = 0; i < ROWS * 3; i++) scales[i] = ldexpf(1.0f + synth_uniform(&rng), round * 7 - 20);
                    for (int c = 0; c < COLS; c++) {
                        a_scales[c] = ldexpf(1.0f, c * 5 - 12);
                        for (int64_t i = 0; i < n; i++) {
                            /* round 5: some past 2^120 (where E4M3's 2^8 cannot move onto them) */
                            x[c][i] = synth_uniform(&rng) * (i % 13 == 0 ? 1e4f : 1.0f) *
                                      (round == 5 && i % 29 == 3 ? 0x1p122f : 1.0f);
                            acodes[c][i] = cases[cs].any_codes          ? (uint8_t)(synth_uniform(&rng) * 1e6f)
                                           : cases[cs].q == HFQ_QEXT_INT8 ? (uint8_t)hfq_int8_round(synth_uniform(&rng) * 200.0f)
                                                                          : finite_fp8_code(f, &rng);
                            /* round 4: NaN activation codes of either sign in some columns: NaN
                             * outputs where the reference's are (their signs follow the order in
                             * which each path adds NaNs, not compared) */
                            if (round == 4 && cases[cs].q != HFQ_QEXT_INT8 && c % 3 == 1 && i % 11 == 4)
                                acodes[c][i] = (uint8_t)((i % 22 == 4 ? 0x80 : 0) | 0x7F);
                        }
                    }
                    const hfq_tensor w = {.name = "w", .type = GT_I8, .ne0 = n, .ne1 = ROWS, .row_bytes = (size_t)n,
                                          .data = codes, .scale = scales, .scale_groups = groups, .qext = cases[cs].q,
                                          .act_int8_ct = cases[cs].any_codes};
                    cpu_i8_act form, ref_form;
                    const cpu_i8_tile_fn ref = cpu_i8_tile(CPU_FLOAT_PORTABLE, &w, &cols, &ref_form);
                    const cpu_i8_tile_fn simd = cpu_i8_tile((cpu_float_isa)isa, &w, &cols, &form);
                    CHECK(ref && simd && ref_form == CPU_I8_ACT_CODES);
                    CHECK(form == CPU_I8_ACT_CODES || cases[cs].q != HFQ_QEXT_INT8);
                    for (int c = 0; form == CPU_I8_ACT_F32 && c < COLS; c++)
                        for (int64_t i = 0; i < n; i++) acodes_f32[c][i] = hfq_fp8_to_f32(f, acodes[c][i]);
                    for (int c = 0; form == CPU_I8_ACT_BF16_PAIRS && c < COLS; c++) {
                        memcpy(apairs[c], acodes[c], (size_t)n);
                        cpu_i8_fp8_pairs(f, apairs[c], n);
                    }
                    for (int codes_act = 0; codes_act < 2; codes_act++) {
                        const void *a = codes_act ? (const void *)acodes : (const void *)x;
                        const size_t as = codes_act ? sizeof acodes[0] : sizeof x[0];
                        const float *asc = codes_act ? a_scales : NULL;
                        ref(&w, 0, ROWS, a, as, asc, COLS, &want[0][0], ROWS);
                        /* the same values, as the set takes them */
                        size_t sas = as;
                        if (codes_act && form == CPU_I8_ACT_F32) a = acodes_f32, sas = sizeof acodes_f32[0];
                        if (codes_act && form == CPU_I8_ACT_BF16_PAIRS) a = apairs, sas = sizeof apairs[0];
                        for (int c = 0; c < COLS; c++)
                            for (int r = 0; r < ROWS; r++) {
                                float one;
                                simd(&w, r, 1, (const char *)a + c * sas, sas, asc ? asc + c : NULL, 1, &one, 1);
                                CHECK_MSG(same_bits_or_nans(one, want[c][r]),
                                          "i8 case %zu n %lld codes %d [%d][%d]: %.9g vs %.9g", cs, (long long)n,
                                          codes_act, c, r, one, want[c][r]);
                                checked++;
                            }
                        /* every row count; one, two (decoding's paths), three and more columns */
                        for (int nr = 1; nr <= ROWS; nr++)
                            for (int nc = 1; nc <= COLS; nc += nc < 3 ? 1 : 8) {
                                memset(got, 0, sizeof got);
                                simd(&w, 0, nr, a, sas, asc, nc, &got[0][0], ROWS);
                                bool same = true;
                                for (int c = 0; c < COLS; c++)
                                    for (int r = 0; r < ROWS; r++)
                                        same = same && (r < nr && c < nc ? same_bits_or_nans(got[c][r], want[c][r])
                                                                         : got[c][r] == 0.0f);
                                CHECK_MSG(same, "i8 case %zu n %lld: tile of %d rows, %d columns differs", cs,
                                          (long long)n, nr, nc);
                                checked_pairs += codes_act && form == CPU_I8_ACT_BF16_PAIRS;
                            }
                    }
                }
            }
        /* every FP8 code, NaNs and infinities included, decoded to the reference's bits */
        for (int fmt = HFQ_QEXT_FP8_E4M3; fmt <= HFQ_QEXT_FP8_E5M2; fmt++)
            for (int len = 8; len <= 32; len *= 4)   /* whole vectors: the 8- and 32-code SIMD decoders */
                for (int c0 = 0; c0 < 256; c0 += ROWS) {
                    static float one[32];
                    for (int i = 0; i < len; i++) one[i] = 1.0f;
                    for (int r = 0; r < ROWS; r++) memset(codes + len * r, c0 + r, (size_t)len);
                    const hfq_tensor w = {.name = "w", .type = GT_I8, .ne0 = len, .ne1 = ROWS, .row_bytes = (size_t)len,
                                          .data = codes, .scale = one, .qext = (hfq_qext)fmt};
                    cpu_i8_act form;   /* float activations: whatever form codes would take */
                    const cpu_i8_tile_fn ref = cpu_i8_tile(CPU_FLOAT_PORTABLE, &w, &cols, &form);
                    const cpu_i8_tile_fn simd = cpu_i8_tile((cpu_float_isa)isa, &w, &cols, &form);
                    float a[ROWS], b[ROWS];
                    ref(&w, 0, ROWS, one, sizeof one, NULL, 1, a, ROWS);
                    simd(&w, 0, ROWS, one, sizeof one, NULL, 1, b, ROWS);
                    CHECK_MSG(memcmp(a, b, sizeof a) == 0, "fp8 codes %d.. of format %d (%d) decode differently", c0, fmt,
                              len);
                }
        printf("%d I8 kernel dots checked (%s)\n", checked, isa == CPU_FLOAT_AVX2 ? "AVX2" : "AVX-512");
    }
    if (checked_pairs) printf("%d FP8 W8A8 tiles on BF16 pairs checked\n", checked_pairs);
    else printf("FP8 W8A8 on BF16 pairs not checked: no AVX512-BF16 here (or HFQ_CPU_ISA caps it)\n");
}

static void expect_refused(uint32_t type, hfq_qext qext, hfq_act_quant aq, int64_t n_in, const char *want) {
    hfq_tensor w = {.name = "blk.0.ffn_up.weight", .type = type, .ne0 = n_in, .ne1 = 4, .qext = qext};
    cpu_wkernel k;
    hfq_error err = {{0}};
    CHECK(cpu_wkernel_get(&w, aq, &k, "m.gguf", &err) == -1);
    CHECK_STR_CONTAINS(err.msg, want);
}

static void test_refused(void) {
    expect_refused(GT_I32, 0, 0, 64, "m.gguf: tensor 'blk.0.ffn_up.weight': type i32 is not supported by the cpu backend");
    expect_refused(GT_Q8_K, 0, 0, 256, "type q8_K is not supported");     /* an activation format */
    expect_refused(GT_Q8_1, 0, 0, 64, "type q8_1 is not supported");      /* Q4_1/Q5_1's activations */
    const char *no_scale = "m.gguf: tensor 'blk.0.ffn_up.weight' has no input_scale for static activation quantization";
    expect_refused(GT_I8, HFQ_QEXT_INT8, HFQ_ACT_QUANT_STATIC, 64, no_scale);
    expect_refused(GT_I8, HFQ_QEXT_FP8_E4M3, HFQ_ACT_QUANT_STATIC, 64, no_scale);
    expect_refused(GT_NVFP4, 0, HFQ_ACT_QUANT_STATIC, 64, no_scale);
    /* formats without activation quantization of their own ignore the mode */
    hfq_tensor q8 = {.name = "w", .type = GT_Q8_0, .ne0 = 64, .ne1 = 4};
    cpu_wkernel k;
    CHECK(cpu_wkernel_get(&q8, HFQ_ACT_QUANT_STATIC, &k, "m.gguf", NULL) == 0 && k.act_kind == CPU_ACT_FORMAT);
}

/* Panel products (panel.h): every result the reference vec_dot's, bit for
 * bit, through cpu_matmul (the batches at a format's threshold and up) and
 * cpu_panel_matmul alone, on row counts past a band and a panel, rows of
 * 896 values (3.5 blocks of 256: the Q8_0-activation formats), token
 * counts past a group of 16, and activations of very different sizes; the
 * W4A4 pairs (MXFP4 and NVFP4 activations, hfq_dot_mxfp4_mxfp4 and
 * hfq_dot_nvfp4_nvfp4; through cpu_matmul with their act_quant modes,
 * NVFP4's per-token global scale after the dot). cpu_panel_matmul in every
 * instruction set this CPU runs (AVX2, AVX-VNNI, AVX512-VNNI: the 256-bit
 * sets' passes of 8 tokens and 4 rows, AVX2's 16-bit pair sums); Q8_0
 * weights with -128 codes too (a file may hold them: AVX2's wide codes),
 * NVFP4 rows of random bytes. */
static void test_panel_products(void) {
    hfq_qtype types[2 * HFQ_QT_COUNT], acts[2 * HFQ_QT_COUNT];
    const size_t n_types = cpu_panel_formats(types, acts, 2 * HFQ_QT_COUNT);
    /* the last shape: constant rows and tokens, codes at their extremes (a + 128 = 255 against
     * Q4_0's -8, Q6_K's -32, Q4_K's 15, TQ's +-1...: AVX2's 16-bit sums at their bound) */
    static const shape shapes[] = {{256, 37, 48}, {768, 70, 53}, {512, 8, 40}, {2560, 9, 49}, {896, 21, 83}, {512, 24, 48}};
    const size_t extreme = sizeof shapes / sizeof shapes[0] - 1;
    uint64_t rng = 901;
    int checked = 0, formats = 0;
    for (size_t ti = 0; ti < n_types; ti++) {
        const hfq_qtype_traits *wt = hfq_qtype_get(types[ti]);
        const hfq_qtype act = acts[ti];
        const bool w4a4 = act != wt->vec_dot_type;
        const cpu_panel_format *f = cpu_panel_format_get(types[ti], act, INT64_MAX);
        if (!f) continue;   /* no AVX2 and BMI2 here */
        formats++;
        const int32_t gt = wt->ggml_type;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const shape sh = shapes[si];
            if (hfq_qtype_row_size(wt->type, sh.n_in) < 0) continue;   /* 896: blocks of 32 only */
            const size_t row = (size_t)hfq_qtype_row_size(wt->type, sh.n_in);
            const size_t arow = (size_t)hfq_qtype_row_size(act, sh.n_in);
            char *w = malloc(row * (size_t)sh.n_out), *a = malloc(arow * (size_t)sh.n_tokens);
            float *x = malloc((size_t)(sh.n_in * sh.n_tokens) * sizeof *x), *ones = malloc((size_t)sh.n_in * sizeof *ones);
            float *y = malloc((size_t)(sh.n_out * sh.n_tokens) * sizeof *y), *y2 = malloc((size_t)(sh.n_out * sh.n_tokens) * sizeof *y2);
            for (int64_t i = 0; i < sh.n_in; i++) ones[i] = 1.0f;
            for (int64_t r = 0; r < sh.n_out; r++) {
                for (int64_t i = 0; i < sh.n_in; i++)
                    x[i] = si == extreme ? (r % 4 == 0 ? 1.0f : r % 4 == 1 ? -1.0f : r % 4 == 2 ? (i % 2 ? 1.0f : -1.0f)
                                                      : (i % 2 ? 1.0f : 0.0f))
                                         : synth_uniform(&rng) * (i % 61 == 0 ? 20.0f : 1.0f);
                if (!wt->quantize(x, w + r * row, 1, sh.n_in, NULL)) CHECK(wt->quantize(x, w + r * row, 1, sh.n_in, ones) == row);
                if (types[ti] == HFQ_QT_Q8_0 && r % 3 == 0)   /* every 7th code -128 (never quantized, still valid) */
                    for (size_t i = 0; i < row; i++)
                        if (i % sizeof(hfq_block_q8_0) >= 2 && i % 7 == 0) w[r * row + i] = (char)0x80;
                /* NVFP4 rows of random bytes: every scale code (0, subnormal, 0x7F, the sign bit set) with
                 * every code, the largest sub-block sums (the panels' exact scaling of them, panel_band.inc) */
                if (types[ti] == HFQ_QT_NVFP4 && si == 1 && r % 2)
                    for (size_t i = 0; i < row; i++) w[r * row + i] = (char)(synth_next(&rng) >> 56);
            }
            for (int64_t t = 0; t < sh.n_tokens; t++)
                for (int64_t i = 0; i < sh.n_in; i++)
                    /* Q8_K gives its first largest value -127, the others of its size and other sign 127 */
                    x[t * sh.n_in + i] = si == extreme ? (t % 2 ? -3.0f : 3.0f) * (i % 256 ? 1.0f : -1.0f)
                                                       : synth_uniform(&rng) * (t % 3 ? 1.0f : 1000.0f) * (i % 41 == 0 ? 30.0f : 1.0f);
            float gs[100];   /* NVFP4 activations: each token's global scale */
            for (int64_t t = 0; t < sh.n_tokens; t++) {
                const float *xt = x + t * sh.n_in;
                char *at = a + t * arow;
                if (!w4a4) hfq_qtype_get(act)->quantize_row(xt, at, sh.n_in);
                else if (act == HFQ_QT_MXFP4) hfq_quantize_row_mxfp4_act(xt, at, sh.n_in);
                else hfq_quantize_nvfp4(xt, at, 1, sh.n_in, NULL, gs[t] = hfq_nvfp4_global_scale(xt, sh.n_in));
            }
            hfq_tensor wten = {.name = "w", .type = (uint32_t)gt, .ne0 = sh.n_in, .ne1 = sh.n_out, .row_bytes = row,
                               .data = w, .act_mxfp4 = w4a4 && act == HFQ_QT_MXFP4};
            const hfq_act_quant aq = w4a4 && act == HFQ_QT_NVFP4 ? HFQ_ACT_QUANT_DYNAMIC : HFQ_ACT_QUANT_AUTO;
            char *scratch = malloc(cpu_matmul_act_bytes(&wten, aq, sh.n_tokens));
            cpu_matmul(1, aq, scratch, y2, &wten, NULL, x, sh.n_tokens);
            static const cpu_quant_isa isas[] = {CPU_QUANT_ISA_AVX2, CPU_QUANT_ISA_AVXVNNI, CPU_QUANT_ISA_AVX512VNNI};
            for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
                if (!cpu_quant_isa_runs(isas[ii])) continue;
                memset(y, 0xff, (size_t)(sh.n_out * sh.n_tokens) * sizeof *y);
                CHECK(cpu_panel_matmul_isa(f, isas[ii], 2, &wten, a, arow, sh.n_tokens, y));
                for (int64_t t = 0; t < sh.n_tokens; t++)
                    for (int64_t r = 0; r < sh.n_out; r++) {
                        const char *wr = w + r * row, *at = a + t * arow;
                        const float want = !w4a4 ? wt->vec_dot(wr, at, sh.n_in)
                                           : act == HFQ_QT_MXFP4 ? hfq_dot_mxfp4_mxfp4(wr, at, sh.n_in)
                                                                  : hfq_dot_nvfp4_nvfp4(wr, at, sh.n_in);
                        const float want2 = w4a4 && act == HFQ_QT_NVFP4 ? want * gs[t] : want;
                        CHECK_MSG(memcmp(&want, &y[t * sh.n_out + r], sizeof want) == 0 &&
                                      memcmp(&want2, &y2[t * sh.n_out + r], sizeof want2) == 0,
                                  "%s x %s panel (set %d) %lld x %lld, token %lld row %lld: %.9g / %.9g vs %.9g",
                                  wt->name, hfq_qtype_get(act)->name, (int)isas[ii], (long long)sh.n_in,
                                  (long long)sh.n_out, (long long)t, (long long)r, y[t * sh.n_out + r],
                                  y2[t * sh.n_out + r], want);
                        checked++;
                    }
            }
            free(w); free(a); free(x); free(ones); free(y); free(y2); free(scratch);
        }
    }
    printf("%d panel products checked in %d format pairs\n", checked, formats);
}

/* FP8 codes in panel_fp8.c against the reference dots one pair at a time,
 * bit for bit (NaN results: both NaN): W8A8 on the BF16 pair form against
 * hfq_dot_fp8_fp8(_groups), weight-only (float activations of very
 * different sizes) against hfq_dot_fp8_f32(_groups); W8A8's products by
 * BF16 pairs and by fused multiply-adds, one and two threads each; both encodings, one
 * scale, one per row or groups of 16 and 128 (finished group by group),
 * rows of 16 and of 32s with and without a last 16,
 * row counts past the 8 rows a decoding step and a panel, token counts on
 * both sides of CPU_PANEL_FP8_MIN_TOKENS and past a group of 16, one and two
 * threads. Every code of 256 appears in the weights of each shape: the
 * finite ones in rows of their own, NaN and infinity in the rest. */
static void test_fp8_w8a8_products(void) {
    static const shape shapes[] = {{16, 9, 1},  {32, 8, 2},   {48, 17, 3},  {144, 37, 15},
                                   {144, 31, 16}, {1040, 70, 33}, {256, 61, 130}};
    uint64_t rng = 77;
    int checked = 0;
    static const int64_t group_sizes[] = {-1, 0, 16, 128};   /* -1 one scale, 0 a row */
    for (int q = HFQ_QEXT_FP8_E4M3; q <= HFQ_QEXT_FP8_E5M2; q++)
        for (size_t gi = 0; gi < sizeof group_sizes / sizeof group_sizes[0]; gi++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                const shape sh = shapes[si];
                const int64_t G = group_sizes[gi];
                if (G > 0 && sh.n_in % G) continue;
                const int64_t sg = G < 0 ? 0 : G == 0 ? 1 : sh.n_in / G, gs = sg > 1 ? G : 0;   /* scale_groups */
                const hfq_fp8_format f = q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
                uint8_t *w = malloc((size_t)(sh.n_in * sh.n_out)), *a = malloc((size_t)(sh.n_in * sh.n_tokens) * 2);
                /* W8A8's results four times: by BF16 pairs, then by fused multiply-adds, each with one and two threads */
                const int64_t nt = sh.n_out * sh.n_tokens;
                float *y = malloc((size_t)(4 * nt) * sizeof *y), a_scales[130];
                float *scales = malloc((size_t)(sg ? sh.n_out * sg : 1) * sizeof *scales);
                float *x = malloc((size_t)(sh.n_in * sh.n_tokens) * sizeof *x), *yf = malloc((size_t)(sh.n_out * sh.n_tokens) * sizeof *yf);
                for (int64_t i = 0; i < sh.n_in * sh.n_tokens; i++)
                    x[i] = synth_uniform(&rng) * (i % 5 ? 1.0f : 1e3f) * ((i / sh.n_in) % 3 ? 1.0f : 1e-4f);
                /* rows but the last two: finite codes, all of them over the rows; the last: any code;
                 * the one before: finite but one infinity (E5M2's 0x7C, an infinite dot) */
                for (int64_t r = 0; r < sh.n_out; r++)
                    for (int64_t i = 0; i < sh.n_in; i++) {
                        uint8_t c = (uint8_t)(r * sh.n_in + i + (int64_t)(synth_uniform(&rng) * 4.0f));
                        const float v = hfq_fp8_to_f32(f, c);
                        if (r < sh.n_out - 1 && !(v == v && fabsf(v) <= hfq_fp8_max(f))) c = finite_fp8_code(f, &rng);
                        if (r == sh.n_out - 2 && i == 3 && f == HFQ_FP8_E5M2) c = 0x7C;
                        if (r == 1 && sh.n_in * sh.n_out >= 512) c = 0;   /* a zero row where the codes still all appear */
                        w[r * sh.n_in + i] = c;
                    }
                /* negative: some, and all of the zero row's (its sums -0, from 0 +0) */
                for (int64_t k = 0; k < (sg ? sh.n_out * sg : 1); k++)
                    scales[k] = ldexpf(1.0f + synth_uniform(&rng), (int)(k % 9) - 4) * (k % 5 == 2 || (sg && k / sg == 1) ? -1.0f : 1.0f);
                for (int64_t t = 0; t < sh.n_tokens; t++) {
                    /* not powers of 2: a product order of the scales shows */
                    a_scales[t] = ldexpf(1.0f + 0.5f * fabsf(synth_uniform(&rng)), (int)(t % 7) * 5 - 15);
                    for (int64_t i = 0; i < sh.n_in; i++) a[t * sh.n_in * 2 + i] = finite_fp8_code(f, &rng);
                }
                uint8_t *codes = malloc((size_t)(sh.n_in * sh.n_tokens));
                for (int64_t t = 0; t < sh.n_tokens; t++) {
                    memcpy(codes + t * sh.n_in, a + t * sh.n_in * 2, (size_t)sh.n_in);
                    cpu_i8_fp8_pairs(f, a + t * sh.n_in * 2, sh.n_in);
                }
                const hfq_tensor wt = {.name = "w", .type = GT_I8, .ne0 = sh.n_in, .ne1 = sh.n_out,
                                       .row_bytes = (size_t)sh.n_in, .data = w, .scale = scales,
                                       .scale_groups = sg, .qext = (hfq_qext)q};
                if (!cpu_panel_fp8_fits(&wt, CPU_FP8_W8A8) || !cpu_panel_fp8_fits(&wt, CPU_FP8_FLOAT)) {
                    free(w), free(a), free(y), free(codes), free(x), free(yf), free(scales);
                    continue;   /* no AVX512-BF16 and VBMI here */
                }
                memset(y, 0xff, (size_t)(4 * nt) * sizeof *y);
                /* both ways of making the products (panel.h), whichever this CPU would take */
                for (int k = 0; k < 4; k++)
                    CHECK(cpu_panel_fp8_matmul_by(k < 2 ? CPU_FP8_BY_BF16 : CPU_FP8_BY_FMA, CPU_FP8_W8A8, 1 + k % 2, &wt, a,
                                                  (size_t)sh.n_in * 2, a_scales, sh.n_tokens, y + k * nt));
                CHECK(cpu_panel_fp8_matmul(CPU_FP8_FLOAT, 1 + (int)(si % 2), &wt, x, (size_t)sh.n_in * 4, NULL,
                                           sh.n_tokens, yf));
                for (int64_t t = 0; t < sh.n_tokens; t++)
                    for (int64_t r = 0; r < sh.n_out; r++) {
                        const float *rs = scales + (sg ? r * sg : 0);
                        const float want = hfq_dot_fp8_fp8_groups(f, w + r * sh.n_in, rs, gs, f, codes + t * sh.n_in,
                                                                  a_scales[t], sh.n_in);
                        for (int k = 0; k < 4; k++) {
                            const float got = y[k * nt + t * sh.n_out + r];
                            CHECK_MSG(same_bits_or_nans(got, want),
                                      "fp8 w8a8 by %s, %d thread(s), %s %lld x %lld, token %lld of %lld, row %lld: %.9g vs %.9g",
                                      k < 2 ? "bf16" : "fma", 1 + k % 2, f == HFQ_FP8_E5M2 ? "e5m2" : "e4m3",
                                      (long long)sh.n_in, (long long)sh.n_out, (long long)t, (long long)sh.n_tokens,
                                      (long long)r, got, want);
                        }
                        const float wantf = hfq_dot_fp8_f32_groups(f, w + r * sh.n_in, rs, gs, x + t * sh.n_in, sh.n_in);
                        CHECK_MSG(same_bits_or_nans(yf[t * sh.n_out + r], wantf),
                                  "fp8 weight-only %s %lld x %lld, token %lld of %lld, row %lld: %.9g vs %.9g",
                                  f == HFQ_FP8_E5M2 ? "e5m2" : "e4m3", (long long)sh.n_in, (long long)sh.n_out,
                                  (long long)t, (long long)sh.n_tokens, (long long)r, yf[t * sh.n_out + r], wantf);
                        checked += 5;   /* four W8A8, one weight-only */
                    }
                free(w), free(a), free(y), free(codes), free(x), free(yf), free(scales);
            }
    printf("%d FP8 W8A8 and weight-only pair-lane products checked (one scale, per row, groups of 16, 128)\n", checked);
}

/* INT8 and FP8 codes times float rows (weight-only, panel_fp8.c's FLOAT
 * products): each product the bits of hfq_dot_int8_f32 /
 * hfq_dot_fp8_f32_groups (NaN: both NaN), by cpu_panel_fp8_matmul (one and
 * two threads) and through cpu_matmul; one scale, one a row, and groups of
 * 16, 32 and 128 (each group's partial sums restart, its scaled sum added
 * to a sum from 0, -0 becoming +0); every INT8 code, -128 included, and
 * every finite FP8 code; a zero row, negative scales; token counts on both
 * sides of the panels' threshold, row counts that leave partial pairs,
 * bands and panels. */
static void test_weight_only_code_products(void) {
    static const shape shapes[] = {{16, 9, 1},   {48, 17, 3},    {144, 37, 15}, {256, 31, 16},
                                   {1040, 70, 33}, {256, 61, 130}, {384, 23, 12}, {1024, 33, 40}};
    static const int64_t group_sizes[] = {-1, 0, 16, 32, 128};   /* -1 one scale, 0 a row */
    static const hfq_qext kinds[] = {HFQ_QEXT_INT8, HFQ_QEXT_FP8_E4M3, HFQ_QEXT_FP8_E5M2};
    uint64_t rng = 4242;
    int checked = 0;
    for (size_t ki = 0; ki < 3; ki++)
        for (size_t gi = 0; gi < sizeof group_sizes / sizeof group_sizes[0]; gi++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                const shape sh = shapes[si];
                const hfq_qext q = kinds[ki];
                const int64_t G = group_sizes[gi], nt = sh.n_out * sh.n_tokens;
                if (G > 0 && sh.n_in % G) continue;
                const int64_t sg = G < 0 ? 0 : G == 0 ? 1 : sh.n_in / G;   /* the tensor's scale_groups */
                const int64_t n_scales = sg ? sh.n_out * sg : 1;
                const hfq_fp8_format f = q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
                uint8_t *w = malloc((size_t)(sh.n_in * sh.n_out));
                float *x = malloc((size_t)(sh.n_in * sh.n_tokens) * sizeof *x), *scales = malloc((size_t)n_scales * sizeof *scales);
                float *y = malloc((size_t)nt * sizeof *y), *y2 = malloc((size_t)nt * sizeof *y2), *y3 = malloc((size_t)nt * sizeof *y3);
                for (int64_t r = 0; r < sh.n_out; r++)
                    for (int64_t i = 0; i < sh.n_in; i++) {
                        uint8_t c = (uint8_t)(r * sh.n_in + i * 7 + r / 3);
                        if (q != HFQ_QEXT_INT8) {
                            const float v = hfq_fp8_to_f32(f, c);
                            if (!(v == v && fabsf(v) <= hfq_fp8_max(f))) c = finite_fp8_code(f, &rng);
                        }
                        w[r * sh.n_in + i] = r == 1 ? 0 : c;
                    }
                /* negative: some, one tensor scale, and all of the zero row's (its sums -0, each then +0) */
                for (int64_t k = 0; k < n_scales; k++)
                    scales[k] = ldexpf(1.0f + synth_uniform(&rng), (int)(k % 9) - 4) *
                                (k % 5 == 2 || n_scales == 1 || (sg && k / sg == 1) ? -1.0f : 1.0f);
                for (int64_t i = 0; i < sh.n_in * sh.n_tokens; i++)
                    x[i] = synth_uniform(&rng) * (i % 5 ? 1.0f : 1e3f) * ((i / sh.n_in) % 3 ? 1.0f : 1e-4f) * (i % 11 ? 1.0f : -0.0f);
                const hfq_tensor wt = {.name = "w", .type = GT_I8, .ne0 = sh.n_in, .ne1 = sh.n_out, .row_bytes = (size_t)sh.n_in,
                                       .data = w, .scale = scales, .scale_groups = sg, .qext = q, .act_none = true};
                if (!cpu_panel_fp8_fits(&wt, CPU_FP8_FLOAT)) {
                    free(w), free(x), free(scales), free(y), free(y2), free(y3);
                    continue;   /* no AVX-512 with VBMI here */
                }
                memset(y, 0xff, (size_t)nt * sizeof *y);
                memset(y2, 0xff, (size_t)nt * sizeof *y2);
                CHECK(cpu_panel_fp8_matmul(CPU_FP8_FLOAT, 1, &wt, x, (size_t)sh.n_in * 4, NULL, sh.n_tokens, y));
                CHECK(cpu_panel_fp8_matmul(CPU_FP8_FLOAT, 2, &wt, x, (size_t)sh.n_in * 4, NULL, sh.n_tokens, y2));
                char *scratch = malloc(cpu_matmul_act_bytes(&wt, HFQ_ACT_QUANT_AUTO, sh.n_tokens) + 1);
                cpu_matmul(2, HFQ_ACT_QUANT_AUTO, scratch, y3, &wt, NULL, x, sh.n_tokens);
                for (int64_t t = 0; t < sh.n_tokens; t++)
                    for (int64_t r = 0; r < sh.n_out; r++) {
                        const float *rs = scales + (sg ? r * sg : 0);
                        const int64_t gs = sg > 1 ? G : 0;
                        const float want = q == HFQ_QEXT_INT8
                                               ? hfq_dot_int8_f32(w + r * sh.n_in, rs, gs, x + t * sh.n_in, sh.n_in)
                                               : hfq_dot_fp8_f32_groups(f, w + r * sh.n_in, rs, gs, x + t * sh.n_in, sh.n_in);
                        const float got = y[t * sh.n_out + r], got2 = y2[t * sh.n_out + r], got3 = y3[t * sh.n_out + r];
                        CHECK_MSG(same_bits_or_nans(got, want) && same_bits_or_nans(got2, want) && same_bits_or_nans(got3, want),
                                  "%s weight-only, groups of %lld, %lld x %lld, token %lld of %lld, row %lld: %.9g / %.9g / %.9g vs %.9g",
                                  q == HFQ_QEXT_INT8 ? "int8" : f == HFQ_FP8_E5M2 ? "e5m2" : "e4m3", (long long)G,
                                  (long long)sh.n_in, (long long)sh.n_out, (long long)t, (long long)sh.n_tokens, (long long)r,
                                  got, got2, got3, want);
                        checked++;
                    }
                free(w), free(x), free(scales), free(y), free(y2), free(y3), free(scratch);
            }
    printf("%d INT8 and FP8 weight-only panel products checked (one scale, per row, groups of 16, 32, 128)\n", checked);
}

/* MXFP4, Q4_0, IQ4_NL and Q5_0 weights times one Q8_0 row (rows_nibbles.c,
 * decoding): each product the bits of the reference vec_dot, by
 * cpu_rows_nibbles_matmul (one and two threads) with any activation codes
 * (-128 and 127 blocks too) and scales, and through cpu_matmul from float
 * rows; every code and fifth bit, every E8M0 byte (rows that cycle them; subnormal
 * scales alone in others), fp16 scales of every size, row counts that
 * leave a last step of fewer than 16 rows. */
static void test_nibble_decode_rows(void) {
    static const shape shapes[] = {{32, 1, 1}, {64, 5, 1}, {1024, 16, 1}, {256, 17, 1}, {2048, 40, 1}, {1024, 70, 1}};
    static const uint32_t types[] = {GT_MXFP4, GT_Q4_0, GT_IQ4_NL, GT_Q5_0};
    uint64_t rng = 6161;
    int checked = 0;
    unsigned sets_seen = 0;
    for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const uint32_t type = types[ty];
            const shape sh = shapes[si];
            const int64_t nb = sh.n_in / HFQ_QK;
            const size_t row_bytes = (size_t)ggml_row_size(type, sh.n_in), block_bytes = row_bytes / (size_t)nb;
            uint8_t *w = malloc(row_bytes * (size_t)sh.n_out);
            hfq_block_q8_0 *a = malloc((size_t)nb * sizeof *a), *aq = malloc((size_t)nb * sizeof *aq);
            float *x = malloc((size_t)sh.n_in * sizeof *x), y[70], y2[70], y3[70];
            for (size_t b = 0; b < row_bytes * (size_t)sh.n_out; b++) w[b] = (uint8_t)(synth_uniform(&rng) * 1e6f);
            for (int64_t r = 0; r < sh.n_out; r++)
                for (int64_t b = 0; b < nb; b++) {
                    uint8_t *blk = w + (size_t)r * row_bytes + (size_t)b * block_bytes;
                    if (type == GT_MXFP4)
                        blk[0] = (uint8_t)(r % 7 == 3 ? b + 64 * (r / 7) : r % 7 == 5 ? (b + r) % 3 : 118 + (b + r) % 16);
                    else   /* fp16 scales, finite, of every size (subnormals in some rows) */
                        memcpy(blk, &(uint16_t){hfq_f32_to_fp16(ldexpf(synth_uniform(&rng), r % 7 == 5 ? -20 : (int)((b + r) % 24) - 16))}, 2);
                }
            for (int64_t b = 0; b < nb; b++) {   /* codes at the extremes in some blocks */
                a[b].d = hfq_f32_to_fp16(ldexpf(1.0f + 0.5f * fabsf(synth_uniform(&rng)), (int)(b % 11) - 12));
                for (int j = 0; j < HFQ_QK; j++)
                    a[b].qs[j] = b % 5 == 1 ? -128 : b % 5 == 2 ? 127 : (int8_t)(synth_uniform(&rng) * 127.0f);
            }
            for (int64_t i = 0; i < sh.n_in; i++) x[i] = synth_uniform(&rng) * (i % 7 ? 1.0f : 50.0f);
            const hfq_tensor wt = {.name = "w", .type = type, .ne0 = sh.n_in, .ne1 = sh.n_out, .row_bytes = row_bytes, .data = w};
            CHECK(!cpu_rows_nibbles_fits(&wt, 2));
            const hfq_qtype_traits *qt = hfq_qtype_get((hfq_qtype)hfq_qtype_from_ggml(type));
            for (int isa = CPU_QUANT_ISA_AVX2; isa <= CPU_QUANT_ISA_AVX512VNNI; isa++) {
                memset(y, 0xff, sizeof y), memset(y2, 0xff, sizeof y2);
                if (!cpu_rows_nibbles_matmul_isa((cpu_quant_isa)isa, 1, &wt, a, y)) continue;   /* not in this set, or CPU */
                CHECK(cpu_rows_nibbles_matmul_isa((cpu_quant_isa)isa, 2, &wt, a, y2));
                for (int64_t r = 0; r < sh.n_out; r++) {
                    const float want = qt->vec_dot(w + (size_t)r * row_bytes, a, sh.n_in);
                    CHECK_MSG(same_bits_or_nans(y[r], want) && same_bits_or_nans(y2[r], want),
                              "%s x q8_0 rows, set %d, %lld x %lld, row %lld: %.9g / %.9g vs %.9g", ggml_type_get(type)->name,
                              isa, (long long)sh.n_in, (long long)sh.n_out, (long long)r, y[r], y2[r], want);
                    checked++;
                }
                sets_seen |= 1u << isa;
            }
            char *scratch = malloc(cpu_matmul_act_bytes(&wt, HFQ_ACT_QUANT_AUTO, 1) + 1);
            cpu_matmul(2, HFQ_ACT_QUANT_AUTO, scratch, y3, &wt, NULL, x, 1);
            hfq_qtype_get(HFQ_QT_Q8_0)->quantize_row(x, aq, sh.n_in);   /* the activations cpu_matmul makes */
            for (int64_t r = 0; r < sh.n_out; r++) {
                const float want3 = qt->vec_dot(w + (size_t)r * row_bytes, aq, sh.n_in);
                CHECK_MSG(same_bits_or_nans(y3[r], want3), "%s x q8_0 through cpu_matmul, %lld x %lld, row %lld: %.9g vs %.9g",
                          ggml_type_get(type)->name, (long long)sh.n_in, (long long)sh.n_out, (long long)r, y3[r], want3);
                checked++;
            }
            free(w), free(a), free(aq), free(x), free(scratch);
        }
    /* every set this CPU runs took some format (AVX2: not IQ4_NL) */
    for (int isa = CPU_QUANT_ISA_AVX2; isa <= CPU_QUANT_ISA_AVX512VNNI; isa++)
        CHECK_MSG(!cpu_quant_isa_runs((cpu_quant_isa)isa) || !cpu_has(CPU_FEAT_F16C) || (sets_seen >> isa & 1),
                  "set %d ran no decoding rows", isa);
    printf("%d MXFP4, Q4_0, IQ4_NL, Q5_0 x Q8_0 decoding rows checked (sets 0x%x)\n", checked, sets_seen);
}

/* Weight-only MXFP4 / NVFP4 rows times float activations (panel_fp8.c's
 * FLOAT products, their blocks decoded): each product the bits of
 * hfq_dot_mxfp4_f32 / hfq_dot_nvfp4_f32 (NaN: both NaN), by
 * cpu_panel_fp8_matmul (one and two threads) and through cpu_matmul (then
 * times NVFP4's tensor scale); every code, every scale byte in the rows
 * that cycle them (infinities and NaN there), zero rows, activations of
 * very different sizes with -0; token counts on both sides of the panels'
 * threshold, row counts that leave partial pairs and panels. */
static void test_fp4_weight_only_products(void) {
    static const shape shapes[] = {{64, 9, 1}, {128, 17, 3}, {192, 37, 12}, {256, 31, 13}, {1024, 70, 33}, {320, 61, 130}};
    static const uint32_t types[] = {GT_MXFP4, GT_NVFP4};
    uint64_t rng = 5151;
    int checked = 0;
    for (size_t ty = 0; ty < 2; ty++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const uint32_t type = types[ty];
            const bool nvfp4 = type == GT_NVFP4;
            const shape sh = shapes[si];
            const size_t row_bytes = (size_t)ggml_row_size(type, sh.n_in);
            const int64_t nt = sh.n_out * sh.n_tokens;
            uint8_t *w = malloc(row_bytes * (size_t)sh.n_out);
            float *x = malloc((size_t)(sh.n_in * sh.n_tokens) * sizeof *x), *y = malloc((size_t)nt * sizeof *y);
            float *y2 = malloc((size_t)nt * sizeof *y2), *y3 = malloc((size_t)nt * sizeof *y3);
            for (size_t b = 0; b < row_bytes * (size_t)sh.n_out; b++) w[b] = (uint8_t)(synth_uniform(&rng) * 1e6f);
            for (int64_t r = 0; r < sh.n_out; r++) {
                uint8_t *row = w + (size_t)r * row_bytes;
                /* every scale byte in turn; or only the smallest (subnormal), whose sums nothing larger hides */
                const bool cycle = r % 7 == 3, tiny = r % 7 == 5;
                if (nvfp4) {
                    hfq_block_nvfp4 *blk = (hfq_block_nvfp4 *)row;
                    for (int64_t b = 0; b < sh.n_in / HFQ_QK_NVFP4; b++)
                        for (int j = 0; j < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; j++) {
                            const int64_t v = b * 4 + j + r;   /* cycle: rows 3, 10 ... of 1024 take all 256 */
                            blk[b].d[j] = (uint8_t)(cycle ? b * 4 + j + 64 * (r / 7) : tiny ? v % 9 : 0x30 + v % 40);
                        }
                } else {
                    hfq_block_mxfp4 *blk = (hfq_block_mxfp4 *)row;
                    for (int64_t b = 0; b < sh.n_in / HFQ_QK_MXFP4; b++)
                        blk[b].e = (uint8_t)(cycle ? b + 32 * (r / 7) : tiny ? (b + r) % 3 : 120 + (b + r) % 12);
                }
                if (r == 1) {   /* codes 0 and 8 (-0) only: zero products */
                    for (size_t b = 0; b < row_bytes; b += 1) row[b] &= 0x88;
                }
            }
            for (int64_t i = 0; i < sh.n_in * sh.n_tokens; i++)
                x[i] = synth_uniform(&rng) * (i % 5 ? 1.0f : 1e3f) * ((i / sh.n_in) % 3 ? 1.0f : 1e-4f) * (i % 11 ? 1.0f : -0.0f);
            const float g_w = 0.625f;
            const hfq_tensor wt = {.name = "w", .type = type, .ne0 = sh.n_in, .ne1 = sh.n_out, .row_bytes = row_bytes,
                                   .data = w, .scale = nvfp4 ? &g_w : NULL, .act_none = true};
            if (!cpu_panel_fp8_fits(&wt, CPU_FP8_FLOAT)) {
                free(w), free(x), free(y), free(y2), free(y3);
                continue;   /* no AVX-512 with VBMI here */
            }
            memset(y, 0xff, (size_t)nt * sizeof *y);
            memset(y2, 0xff, (size_t)nt * sizeof *y2);
            CHECK(cpu_panel_fp8_matmul(CPU_FP8_FLOAT, 1, &wt, x, (size_t)sh.n_in * 4, NULL, sh.n_tokens, y));
            CHECK(cpu_panel_fp8_matmul(CPU_FP8_FLOAT, 2, &wt, x, (size_t)sh.n_in * 4, NULL, sh.n_tokens, y2));
            CHECK(cpu_matmul_act_bytes(&wt, HFQ_ACT_QUANT_AUTO, sh.n_tokens) == 0);
            cpu_matmul(2, HFQ_ACT_QUANT_AUTO, NULL, y3, &wt, NULL, x, sh.n_tokens);
            for (int64_t t = 0; t < sh.n_tokens; t++)
                for (int64_t r = 0; r < sh.n_out; r++) {
                    const void *wr = w + (size_t)r * row_bytes;
                    const float *xt = x + t * sh.n_in;
                    const float want = nvfp4 ? hfq_dot_nvfp4_f32(wr, xt, sh.n_in) : hfq_dot_mxfp4_f32(wr, xt, sh.n_in);
                    const float want3 = nvfp4 ? want * g_w : want;
                    const float got = y[t * sh.n_out + r], got2 = y2[t * sh.n_out + r], got3 = y3[t * sh.n_out + r];
                    CHECK_MSG(same_bits_or_nans(got, want) && same_bits_or_nans(got2, want) && same_bits_or_nans(got3, want3),
                              "%s weight-only %lld x %lld, token %lld of %lld, row %lld: %.9g / %.9g / %.9g vs %.9g",
                              ggml_type_get(type)->name, (long long)sh.n_in, (long long)sh.n_out, (long long)t,
                              (long long)sh.n_tokens, (long long)r, got, got2, got3, want);
                    checked++;
                }
            free(w), free(x), free(y), free(y2), free(y3);
        }
    printf("%d FP4 weight-only panel products checked\n", checked);
}

/* FP8 codes times float rows with each weight scaled first (weights marked
 * act_fp8_group): the bits of their F32 weights code * scale through the
 * SIMD float tile (NaN results: both NaN), by cpu_panel_fp8_matmul
 * alone (one and two threads) and through cpu_matmul, the F32 weights too;
 * per tensor, per row, groups of 32 (the panels) and of 16 (matmul.c's
 * scalar reference); token counts on both sides of the panels' threshold. */
static void test_fp8_scaled_products(void) {
    static const shape shapes[] = {{16, 9, 1}, {48, 17, 3}, {144, 37, 15}, {256, 31, 16}, {1040, 70, 33}, {256, 61, 130}};
    int cols = 0, checked = 0;
    bool act_f32 = false;
    /* the SIMD float tile's bits (the portable tile sums in another order: then cpu_matmul's codes
     * against its F32 weights only, both through matmul.c's scalar reference) */
    const cpu_tile_fn f32_tile = cpu_float_isa_runs(CPU_FLOAT_AVX2) ? cpu_float_tile(GT_F32, CPU_FLOAT_BEST, &cols, &act_f32)
                                                                   : NULL;
    uint64_t rng = 99;
    for (int q = HFQ_QEXT_FP8_E4M3; q <= HFQ_QEXT_FP8_E5M2; q++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int64_t len = 0; len <= 32; len += 16) {   /* 0: per tensor and per row; else groups of len */
                const shape sh = shapes[si];
                const hfq_fp8_format f = q == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
                if (len && sh.n_in % len) continue;
                for (int per_row = 0; per_row < (len ? 1 : 2); per_row++) {
                    const int64_t groups = len ? sh.n_in / len : per_row;
                    uint8_t *w = malloc((size_t)(sh.n_in * sh.n_out));
                    float *wf = malloc((size_t)(sh.n_in * sh.n_out) * sizeof *wf);
                    float *x = malloc((size_t)(sh.n_in * sh.n_tokens) * sizeof *x);
                    float *scales = malloc((size_t)(sh.n_out * (groups ? groups : 1)) * sizeof *scales);
                    float *y = malloc((size_t)(sh.n_out * sh.n_tokens) * sizeof *y), *want = malloc((size_t)(sh.n_out * sh.n_tokens) * sizeof *want);
                    float *y2 = malloc((size_t)(sh.n_out * sh.n_tokens) * sizeof *y2), *y3 = malloc((size_t)(sh.n_out * sh.n_tokens) * sizeof *y3);
                    for (int64_t i = 0; i < sh.n_out * (groups ? groups : 1); i++)
                        scales[i] = ldexpf(1.0f + synth_uniform(&rng), (int)(i % 11) - 5);
                    /* every code over the rows, finite but in the last row */
                    for (int64_t r = 0; r < sh.n_out; r++)
                        for (int64_t i = 0; i < sh.n_in; i++) {
                            uint8_t c = (uint8_t)(r * sh.n_in + i + (int64_t)(synth_uniform(&rng) * 4.0f));
                            const float v = hfq_fp8_to_f32(f, c);
                            if (r < sh.n_out - 1 && !(v == v && fabsf(v) <= hfq_fp8_max(f))) c = finite_fp8_code(f, &rng);
                            w[r * sh.n_in + i] = c;
                            wf[r * sh.n_in + i] = hfq_fp8_to_f32(f, c) * scales[groups ? r * groups + i / (sh.n_in / groups) : 0];
                        }
                    for (int64_t i = 0; i < sh.n_in * sh.n_tokens; i++)
                        x[i] = synth_uniform(&rng) * (i % 7 ? 1.0f : 300.0f) * ((i / sh.n_in) % 3 ? 1.0f : 1e-3f);
                    for (int64_t r0 = 0; f32_tile && r0 < sh.n_out; r0 += CPU_TILE_ROWS)
                        for (int64_t t0 = 0; t0 < sh.n_tokens; t0 += cols) {
                            const int nr = (int)(sh.n_out - r0 < CPU_TILE_ROWS ? sh.n_out - r0 : CPU_TILE_ROWS);
                            const int nc = (int)(sh.n_tokens - t0 < cols ? sh.n_tokens - t0 : cols);
                            f32_tile(sh.n_in, wf + r0 * sh.n_in, (size_t)sh.n_in * 4, nr, x + t0 * sh.n_in,
                                     (size_t)sh.n_in * 4, nc, want + t0 * sh.n_out + r0, (size_t)sh.n_out);
                        }
                    const hfq_tensor wt = {.name = "w", .type = GT_I8, .ne0 = sh.n_in, .ne1 = sh.n_out,
                                           .row_bytes = (size_t)sh.n_in, .data = w, .scale = scales,
                                           .scale_groups = groups, .qext = (hfq_qext)q, .act_fp8_group = 16};
                    const hfq_tensor wft = {.name = "wf", .type = GT_F32, .ne0 = sh.n_in, .ne1 = sh.n_out,
                                            .row_bytes = (size_t)sh.n_in * 4, .data = wf, .act_fp8_group = 16};
                    const int threads = 1 + (int)(si % 2);
                    const bool panels = f32_tile && cpu_panel_fp8_fits(&wt, CPU_FP8_SCALED);
                    if (panels) CHECK(cpu_panel_fp8_matmul(CPU_FP8_SCALED, threads, &wt, x, (size_t)sh.n_in * 4, NULL, sh.n_tokens, y));
                    CHECK(panels || len == 16 || !cpu_has(CPU_FEAT_AVX512VBMI) || !f32_tile);
                    /* through cpu_matmul: activations rounded to FP8 per 16 first, the same rows both ways */
                    char *act = malloc(cpu_matmul_act_bytes(&wt, HFQ_ACT_QUANT_AUTO, sh.n_tokens) + 1);
                    cpu_matmul(threads, HFQ_ACT_QUANT_AUTO, act, y2, &wt, NULL, x, sh.n_tokens);
                    cpu_matmul(3 - threads, HFQ_ACT_QUANT_AUTO, act, y3, &wft, NULL, x, sh.n_tokens);
                    for (int64_t i = 0; i < sh.n_out * sh.n_tokens; i++) {
                        CHECK_MSG(!panels || same_bits_or_nans(y[i], want[i]),
                                  "fp8 scaled %lld x %lld x %lld groups %lld [%lld]: %.9g vs %.9g", (long long)sh.n_in,
                                  (long long)sh.n_out, (long long)sh.n_tokens, (long long)groups, (long long)i, y[i], want[i]);
                        CHECK_MSG(same_bits_or_nans(y2[i], y3[i]),
                                  "fp8 scaled codes vs f32, %lld x %lld x %lld groups %lld [%lld]: %.9g vs %.9g",
                                  (long long)sh.n_in, (long long)sh.n_out, (long long)sh.n_tokens, (long long)groups,
                                  (long long)i, y2[i], y3[i]);
                        checked++;
                    }
                    free(act), free(w), free(wf), free(x), free(scales), free(y), free(want), free(y2), free(y3);
                }
            }
    /* F16 and BF16 weights so marked: the bits of their F32 widening's products, whatever tile runs */
    for (int fmt = 0; fmt < 2; fmt++) {
        enum { N = 272, OUT = 13, T = 5 };
        static uint16_t h[N * OUT];
        static float wf[N * OUT], x[N * T], y[OUT * T], y2[OUT * T];
        for (int64_t i = 0; i < N * OUT; i++) {
            const float v = synth_uniform(&rng) * (i % 9 ? 1.0f : 50.0f);
            h[i] = fmt ? hfq_f32_to_bf16(v) : hfq_f32_to_fp16(v);
            wf[i] = fmt ? hfq_bf16_to_f32(h[i]) : hfq_fp16_to_f32(h[i]);
        }
        for (int64_t i = 0; i < N * T; i++) x[i] = synth_uniform(&rng) * (i % 5 ? 1.0f : 40.0f);
        const hfq_tensor wh = {.name = "wh", .type = fmt ? GT_BF16 : GT_F16, .ne0 = N, .ne1 = OUT, .row_bytes = N * 2,
                               .data = h, .act_fp8_group = 16};
        const hfq_tensor w32 = {.name = "w32", .type = GT_F32, .ne0 = N, .ne1 = OUT, .row_bytes = N * 4, .data = wf,
                                .act_fp8_group = 16};
        char *act = malloc(cpu_matmul_act_bytes(&w32, HFQ_ACT_QUANT_AUTO, T) + 1);
        cpu_matmul(1, HFQ_ACT_QUANT_AUTO, act, y, &wh, NULL, x, T);
        cpu_matmul(2, HFQ_ACT_QUANT_AUTO, act, y2, &w32, NULL, x, T);
        for (int i = 0; i < OUT * T; i++, checked++)
            CHECK_MSG(memcmp(&y[i], &y2[i], sizeof y[i]) == 0, "%s act_fp8_group [%d]: %.9g vs F32 %.9g",
                      fmt ? "bf16" : "f16", i, y[i], y2[i]);
        free(act);
    }
    printf("%d FP8 scaled products checked\n", checked);
}

/* INT8 W8A8 panels (panel_int8.c) against hfq_dot_int8_int8 one pair at a
 * time, bit for bit: any codes (-128 too, in weights and activations), per
 * tensor, per row and groups (of 8, and one group of 2^16 values of
 * extreme codes, the longest the lanes' wrapping sums keep exact), row
 * counts past a band and a panel (a last band short of 8), token counts past
 * a pair of 16-token groups, activation scales of very different sizes, one
 * and two threads. */
static void test_int8_panel_products(void) {
    static const struct { int64_t n_in, n_out, n_tokens, group; } cases[] = {
        {64, 8, 64, 0}, {72, 37, 65, 8}, {1040, 70, 130, 0}, {256, 9, 96, 1}, {65536, 9, 64, 65536}};
    uint64_t rng = 4141;
    int checked = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t n = cases[ci].n_in, n_out = cases[ci].n_out, T = cases[ci].n_tokens, grp = cases[ci].group;
        const int64_t groups = grp == 0 ? 0 : grp == 1 ? 1 : n / grp, glen = grp > 1 ? grp : 0;
        int8_t *w = malloc((size_t)(n * n_out)), *a = malloc((size_t)(n * T));
        float *scales = malloc((size_t)(n_out * (groups ? groups : 1)) * sizeof *scales), *a_scales = malloc((size_t)T * sizeof *a_scales);
        float *y = malloc((size_t)(n_out * T) * sizeof *y);
        const bool extreme = n == 65536;   /* every product -128 * -128 or 127 * 127: the largest sums */
        for (int64_t i = 0; i < n * n_out; i++) w[i] = extreme ? (int8_t)(i % 2 ? -128 : 127) : (int8_t)(synth_uniform(&rng) * 1e6f);
        for (int64_t i = 0; i < n * T; i++) a[i] = extreme ? (int8_t)(i % 2 ? -128 : 127) : (int8_t)(synth_uniform(&rng) * 1e6f);
        for (int64_t i = 0; i < n_out * (groups ? groups : 1); i++) scales[i] = ldexpf(1.0f + synth_uniform(&rng), (int)(i % 13) - 6);
        for (int64_t t = 0; t < T; t++) a_scales[t] = ldexpf(1.0f + synth_uniform(&rng), (int)(t % 9) * 4 - 18);
        const hfq_tensor wt = {.name = "w", .type = GT_I8, .ne0 = n, .ne1 = n_out, .row_bytes = (size_t)n, .data = w,
                               .scale = scales, .scale_groups = groups, .qext = HFQ_QEXT_INT8};
        if (!cpu_panel_int8_fits(&wt, T)) {
            printf("INT8 panels not checked: no AVX512-VNNI here\n");
            free(w), free(a), free(scales), free(a_scales), free(y);
            return;
        }
        for (int threads = 1; threads <= 2; threads++) {
            memset(y, 0xff, (size_t)(n_out * T) * sizeof *y);
            CHECK(cpu_panel_int8_matmul(threads, &wt, a, (size_t)n, a_scales, T, y));
            for (int64_t t = 0; t < T; t++)
                for (int64_t r = 0; r < n_out; r++) {
                    const float want = hfq_dot_int8_int8(w + r * n, scales + (groups ? r * groups : 0), glen, a + t * n,
                                                         a_scales[t], n);
                    CHECK_MSG(memcmp(&want, &y[t * n_out + r], sizeof want) == 0,
                              "int8 panel case %zu, %d threads, token %lld row %lld: %.9g vs %.9g", ci, threads,
                              (long long)t, (long long)r, y[t * n_out + r], want);
                    checked++;
                }
        }
        free(w), free(a), free(scales), free(a_scales), free(y);
    }
    printf("%d INT8 panel products checked\n", checked);
}

int main(void) {
    test_float_formats();
    test_quant_formats();
    test_refused();
    test_qext_products();
    test_nvfp4_w4a4();
    test_fp4_float_acts();
    test_attention_kernels();
    test_kv_rows_f16();
    test_geglu_kernels();
    test_quant_simd_dots();
    test_low_bit_all_bytes();
    test_fp4_scale_codes();
    test_i8_kernels();
    test_panel_products();
    test_fp8_w8a8_products();
    test_fp8_scaled_products();
    test_int8_panel_products();
    test_weight_only_code_products();
    test_fp4_weight_only_products();
    test_nibble_decode_rows();
    test_float_isas();
    return check_exit();
}
