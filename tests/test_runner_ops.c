/* test_runner_ops.c - the CPU matmul over F32/F16/BF16 weights against a
 * double-precision product, on shapes that leave SIMD tails and partial
 * tiles; batched == single-token and 1 thread == 2 threads bit for bit; the
 * portable kernels agree with the SIMD ones. */
#include "formats/ggml_type.h"
#include "kernels/cpu/float_kernels.h"
#include "kernels/cpu/matmul.h"
#include "tests/check.h"
#include "tests/test_runner_synth.h"

static const uint32_t types[] = {GT_F32, GT_F16, GT_BF16};

/* The value an activation takes once converted to the weight's format. */
static double act_value(uint32_t type, float x) {
    if (type == GT_F16) return hfq_fp16_to_f32(hfq_f32_to_fp16(x));
    if (type == GT_BF16) return hfq_bf16_to_f32(hfq_f32_to_bf16(x));
    return x;
}

/* Checks y [T][n_out] against the exact product; the bound is float
 * accumulation error, n * 2^-24 * sum |w x|, with headroom. */
static void check_product(const synth_model *sm, uint32_t type, const float *x, const float *bias, const float *y,
                          int64_t n_in, int64_t n_out, int64_t T, const char *what) {
    const double *w = sm->values[0];
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < n_out; o++) {
            double ref = bias ? bias[o] : 0.0, mag = fabs(ref);
            for (int64_t i = 0; i < n_in; i++) {
                double p = w[o * n_in + i] * act_value(type, x[t * n_in + i]);
                ref += p;
                mag += fabs(p);
            }
            double tol = 2.0 * (double)(n_in + 2) * 0x1p-24 * mag + 1e-30;
            CHECK_MSG(fabs(y[t * n_out + o] - ref) <= tol, "%s %s n_in %lld n_out %lld T %lld: [%lld][%lld] %.9g vs %.9g",
                      what, ggml_type_get(type)->name, (long long)n_in, (long long)n_out, (long long)T, (long long)t,
                      (long long)o, y[t * n_out + o], ref);
        }
}

static void test_shape(uint32_t type, int64_t n_in, int64_t n_out, int64_t T, bool with_bias, uint64_t seed) {
    synth_model sm;
    memset(&sm, 0, sizeof sm);
    uint64_t rng = seed;
    synth_add(&sm, "w", type, n_in, n_out, 0.0f, 1.0f, &rng);
    const gguf_tensor_info *ti = &sm.info[0];
    hfq_tensor w = {.name = "w", .type = type, .ne0 = n_in, .ne1 = n_out,
                    .row_bytes = (size_t)ggml_row_size(type, n_in), .data = ti->data};
    float *x = malloc((size_t)(T * n_in) * sizeof *x), *bias = malloc((size_t)n_out * sizeof *bias);
    float *y = malloc((size_t)(T * n_out) * sizeof *y), *y1 = malloc((size_t)(T * n_out) * sizeof *y1);
    float *yt = malloc((size_t)n_out * sizeof *yt);
    /* room for F32 rows too: the portable check below fills it for every type */
    void *act = malloc((size_t)(T * n_in) * sizeof(float));
    for (int64_t i = 0; i < T * n_in; i++) x[i] = 4.0f * synth_uniform(&rng);
    for (int64_t o = 0; o < n_out; o++) bias[o] = synth_uniform(&rng);
    const float *b = with_bias ? bias : NULL;

    cpu_matmul(2, act, y, &w, b, x, T);
    check_product(&sm, type, x, b, y, n_in, n_out, T, "simd");
    cpu_matmul(1, act, y1, &w, b, x, T);
    CHECK_MSG(memcmp(y, y1, (size_t)(T * n_out) * sizeof *y) == 0, "1 vs 2 threads differ");
    for (int64_t t = 0; t < T; t++) {
        cpu_matmul(2, act, yt, &w, b, x + t * n_in, 1);
        CHECK_MSG(memcmp(yt, y + t * n_out, (size_t)n_out * sizeof *yt) == 0,
                  "%s n_in %lld n_out %lld: token %lld alone differs from the batch", ggml_type_get(type)->name,
                  (long long)n_in, (long long)n_out, (long long)t);
    }

    /* the portable kernel, tile by tile, on the same converted activations */
    cpu_wkernel k;
    CHECK(cpu_wkernel_get(type, &k) == 0);
    cpu_tile_fn portable = cpu_float_tile(type, false);
    size_t a_stride = (size_t)ggml_row_size(k.act_type, n_in);
    for (int64_t t = 0; t < T; t++) {
        if (k.act_from_f32) k.act_from_f32(x + t * n_in, (char *)act + t * a_stride, n_in);
        else memcpy((char *)act + t * a_stride, x + t * n_in, a_stride);
    }
    for (int64_t t = 0; t < T; t += CPU_TILE_COLS)
        for (int64_t o = 0; o < n_out; o += CPU_TILE_ROWS) {
            int nr = (int)(n_out - o < CPU_TILE_ROWS ? n_out - o : CPU_TILE_ROWS);
            int nc = (int)(T - t < CPU_TILE_COLS ? T - t : CPU_TILE_COLS);
            portable(n_in, (const char *)ti->data + o * w.row_bytes, w.row_bytes, nr, (char *)act + t * a_stride,
                     a_stride, nc, y1 + t * n_out + o, (size_t)n_out);
        }
    if (b)
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < n_out; o++) y1[t * n_out + o] += b[o];
    check_product(&sm, type, x, b, y1, n_in, n_out, T, "portable");

    /* rows read back as floats are the stored values */
    float *row = malloc((size_t)n_in * sizeof *row);
    k.row_to_f32((const char *)ti->data + (n_out - 1) * w.row_bytes, row, n_in);
    for (int64_t i = 0; i < n_in; i++) CHECK(row[i] == (float)sm.values[0][(n_out - 1) * n_in + i]);
    free(row);
    free(x); free(bias); free(y); free(y1); free(yt); free(act);
    synth_free(&sm);
}

static void test_matmul_shapes(void) {
    const int64_t n_ins[] = {1, 7, 8, 9, 36, 100, 257};
    const int64_t n_outs[] = {1, 3, 4, 5, 13};
    const int64_t Ts[] = {1, 2, 3, 5, 70};   /* 70: two token blocks */
    uint64_t seed = 11;
    for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++)
        for (size_t i = 0; i < sizeof n_ins / sizeof n_ins[0]; i++)
            for (size_t o = 0; o < sizeof n_outs / sizeof n_outs[0]; o++)
                for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
                    test_shape(types[ty], n_ins[i], n_outs[o], Ts[t], (i + o + t) % 2 == 0, seed++);
}

/* A product big enough to run on both threads, with every edge at once. */
static void test_matmul_parallel(void) {
    for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++) test_shape(types[ty], 203, 517, 131, true, 99);
}

int main(void) {
    test_matmul_shapes();
    test_matmul_parallel();
    return check_exit();
}
