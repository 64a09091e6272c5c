/* test_recipe_granularity.c - INT8/FP8 scale granularity (per tensor, per
 * channel, per group) as recipes ask for it: format specs ("int8:g64"),
 * their sizes, the codec's encode/decode of each granularity (scales equal
 * to the group's amax / 127 or the tensor's, errors within half a step), and
 * the driver writing the scale tensors in the shapes
 * docs/format-quant-ext.md gives when a plan's choose callback asks for them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "quant/fp8.h"
#include "quant/plan.h"
#include "quant/qtype.h"
#include "src/quantize/codec.h"
#include "src/quantize/driver.h"
#include "tests/check.h"

#define NE0 256
#define ROWS 6

static void fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        /* magnitudes that differ from group to group, so per-group scales differ */
        x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * (1.0f + (float)((i / 64) % 5));
    }
}

static void test_specs(void) {
    hfq_fmt_spec s;
    char buf[64];
    const char *good[] = {"q4_K", "int8", "int8:g64", "int8:tensor", "fp8_e4m3:tensor", "FP8_E5M2", "nvfp4"};
    const char *want[] = {"q4_K", "int8", "int8:g64", "int8:tensor", "fp8_e4m3:tensor", "fp8_e5m2", "nvfp4"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_MSG(hfq_fmt_spec_parse(good[i], &s) == 0, "%s", good[i]);
        hfq_fmt_spec_str(&s, buf, sizeof buf);
        CHECK_MSG(strcmp(buf, want[i]) == 0, "%s -> %s", good[i], buf);
    }
    CHECK(hfq_fmt_spec_parse("int8:channel", &s) == 0 && s.scale_group == HFQ_SCALE_PER_ROW);
    const char *bad[] = {"", "q4_K:g32", "q8_0:channel", "fp8_e4m3:g32", "int8:g0", "int8:g", "int8:gx",
                         "int8:", "int8:g-4", "bogus", "int8:row", ":g32", "i8", "q8_K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(hfq_fmt_spec_parse(bad[i], &s) < 0, "'%s' accepted", bad[i]);

    const int64_t ne[4] = {NE0, 10, 1, 1};
    hfq_fmt_spec g64 = {HFQ_FMT_INT8, 64}, tensor = {HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_TENSOR},
                 row = {HFQ_FMT_INT8, HFQ_SCALE_PER_ROW}, g48 = {HFQ_FMT_INT8, 48};
    CHECK(hfq_fmt_spec_nbytes(&g64, ne) == NE0 * 10 + 4 * 10 * 4);
    CHECK(hfq_fmt_spec_nbytes(&tensor, ne) == NE0 * 10 + 4);
    CHECK(hfq_fmt_spec_nbytes(&row, ne) == NE0 * 10 + 10 * 4);
    CHECK(hfq_fmt_spec_nbytes(&row, ne) == hfq_fmt_nbytes(HFQ_FMT_INT8, ne));
    CHECK(hfq_fmt_spec_nbytes(&g48, ne) == -1);
    CHECK(hfq_fmt_spec_problem(&g48, NE0) != NULL && hfq_fmt_spec_problem(&g48, 0) == NULL);
}

static float amax_of(const float *x, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

/* Encodes ROWS rows with one spec and decodes them back; checks the scales
 * and the error bound of each element (half a quantization step for INT8;
 * half an E4M3 ulp, relative, for FP8). */
static void roundtrip(const hfq_fmt_spec *spec, const float *x) {
    char name[32];
    hfq_fmt_spec_str(spec, name, sizeof name);
    gguf_tensor_info t = {.name = name, .type = GT_F32, .n_dims = 2, .ne = {NE0, ROWS, 1, 1}};
    hfq_codec_job job;
    hfq_error err = {{0}};
    CHECK_MSG(hfq_codec_begin(&job, &t, spec, &err) == 0, "%s", err.msg);
    job.global_scale = hfq_codec_global_scale(spec, amax_of(x, NE0 * ROWS));
    uint8_t enc[NE0];
    float scales[NE0], back[NE0];
    for (int r = 0; r < ROWS; r++) {
        const float *row = x + r * NE0;
        hfq_codec_encode_row(&job, row, enc, NULL, scales);
        hfq_codec_decode_encoded_row(&job, enc, scales, back);
        int64_t g = spec->scale_group > 0 ? spec->scale_group : NE0;
        for (int64_t j = 0; j < NE0; j++) {
            float s = spec->scale_group == HFQ_SCALE_PER_TENSOR ? job.global_scale : scales[j / g];
            if (spec->fmt == HFQ_FMT_INT8) {
                float want_s = spec->scale_group == HFQ_SCALE_PER_TENSOR ? amax_of(x, NE0 * ROWS) / 127.0f
                                                                        : amax_of(row + j / g * g, g) / 127.0f;
                CHECK_MSG(s == want_s, "%s row %d col %lld: scale %g, want %g", name, r, (long long)j, s, want_s);
                CHECK_MSG(fabsf(back[j] - row[j]) <= 0.5f * s * 1.0001f, "%s: %g vs %g", name, back[j], row[j]);
            } else {
                CHECK_MSG(fabsf(back[j] - row[j]) <= fabsf(row[j]) / 16.0f + s * 0.001f, "%s: %g vs %g", name,
                          back[j], row[j]);
            }
        }
    }
    CHECK(job.n_row_scales == (spec->scale_group == HFQ_SCALE_PER_TENSOR ? 0
                               : spec->scale_group > 0 ? NE0 / spec->scale_group : 1));
}

static void test_codec(void) {
    static float x[NE0 * ROWS];
    fill(x, NE0 * ROWS, 7);
    const hfq_fmt_spec specs[] = {
        {HFQ_FMT_INT8, HFQ_SCALE_PER_ROW}, {HFQ_FMT_INT8, 64}, {HFQ_FMT_INT8, 32}, {HFQ_FMT_INT8, HFQ_SCALE_PER_TENSOR},
        {HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_ROW}, {HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_TENSOR},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) roundtrip(&specs[i], x);
    /* the block formats decode to what their traits' dequantizer gives */
    gguf_tensor_info t = {.name = "q4", .type = GT_F32, .n_dims = 2, .ne = {NE0, 1, 1, 1}};
    hfq_fmt_spec q4 = {GT_Q4_K, HFQ_SCALE_PER_ROW};
    hfq_codec_job job;
    hfq_error err;
    CHECK(hfq_codec_begin(&job, &t, &q4, &err) == 0);
    uint8_t enc[NE0];
    float a[NE0], b[NE0];
    hfq_codec_encode_row(&job, x, enc, NULL, NULL);
    hfq_codec_decode_encoded_row(&job, enc, NULL, a);
    hfq_qtype_get(HFQ_QT_Q4_K)->dequantize(enc, b, NE0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* NVFP4 decodes with its global scale: W = g * ggml-decode(block) */
    hfq_fmt_spec nv = {GT_NVFP4, HFQ_SCALE_PER_ROW};
    CHECK(hfq_codec_begin(&job, &t, &nv, &err) == 0);
    job.global_scale = hfq_codec_global_scale(&nv, amax_of(x, NE0));
    CHECK(job.global_scale == amax_of(x, NE0) / (6.0f * 448.0f) && hfq_codec_needs_amax(&nv));
    hfq_codec_encode_row(&job, x, enc, NULL, NULL);
    hfq_codec_decode_encoded_row(&job, enc, NULL, a);
    hfq_qtype_get(HFQ_QT_NVFP4)->dequantize(enc, b, NE0);
    bool scaled = true;
    for (int j = 0; j < NE0; j++) scaled &= a[j] == b[j] * job.global_scale && fabsf(a[j] - x[j]) <= amax_of(x, NE0) / 4;
    CHECK(scaled);
    /* an all-zero tensor per tensor: scale 0, codes 0, values 0 */
    hfq_fmt_spec zt = {HFQ_FMT_INT8, HFQ_SCALE_PER_TENSOR};
    float zero[NE0] = {0};
    CHECK(hfq_codec_begin(&job, &t, &zt, &err) == 0);
    job.global_scale = hfq_codec_global_scale(&zt, 0.0f);
    hfq_codec_encode_row(&job, zero, enc, NULL, NULL);
    hfq_codec_decode_encoded_row(&job, enc, NULL, a);
    CHECK(job.global_scale == 0.0f && a[0] == 0.0f && a[NE0 - 1] == 0.0f && enc[3] == 0);
    /* a group that does not divide the row is refused naming the tensor */
    hfq_fmt_spec g48 = {HFQ_FMT_INT8, 48};
    CHECK(hfq_codec_begin(&job, &t, &g48, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "q4: the group size does not divide the row");
}

/* tensor 0 per group of 64, tensor 1 FP8 per tensor, tensor 2 INT8 per tensor */
static int choose(void *ctx, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_fmt_spec *spec,
                  char *note, size_t note_size, hfq_error *err) {
    (void)ctx, (void)t, (void)is_output, (void)err;
    static const hfq_fmt_spec specs[] = {
        {HFQ_FMT_INT8, 64}, {HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_TENSOR}, {HFQ_FMT_INT8, HFQ_SCALE_PER_TENSOR}};
    *spec = specs[index];
    snprintf(note, note_size, "test %lld", (long long)index);
    return 0;
}

static void test_driver(void) {
    char in[] = "/tmp/hfq_gran_in_XXXXXX", out[] = "/tmp/hfq_gran_out_XXXXXX";
    int fd1 = mkstemp(in), fd2 = mkstemp(out);
    CHECK(fd1 >= 0 && fd2 >= 0);
    close(fd1), close(fd2);
    static float w[3][NE0 * ROWS];
    hfq_error err = {{0}};
    gguf_writer *gw = gguf_writer_new();
    gguf_set_str(gw, "general.architecture", "llama");
    gguf_set_u32(gw, "llama.block_count", 1);
    const char *names[3] = {"blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"};
    const int64_t ne[2] = {NE0, ROWS};
    for (int k = 0; k < 3; k++) {
        fill(w[k], NE0 * ROWS, 11 + k);
        CHECK(gguf_add_tensor(gw, names[k], GT_F32, 2, ne, &err) == k);
    }
    int rc = gguf_writer_begin(gw, in, &err);
    for (int k = 0; k < 3; k++) rc |= gguf_writer_write_tensor(gw, k, w[k], &err);
    rc |= gguf_writer_finish(gw, &err);
    gguf_writer_free(gw);
    CHECK_MSG(rc == 0, "%s", err.msg);

    gguf_file *f = gguf_open(in, &err);
    CHECK_MSG(f, "%s", err.msg);
    if (!f) return;
    hfq_quantize_opts o = hfq_quantize_opts_default(HFQ_PRESET_INT8);
    o.plan.choose = choose;
    hfq_plan plan;
    CHECK_MSG(hfq_quantize_plan(f, &o.plan, &plan, &err) == 0, "%s", err.msg);
    CHECK(plan.entries[0].scale_group == 64 && plan.entries[1].scale_group == HFQ_SCALE_PER_TENSOR);
    CHECK(plan.entries[0].nbytes == NE0 * ROWS + ROWS * 4 * 4 && plan.entries[1].nbytes == NE0 * ROWS + 4);
    CHECK(strcmp(plan.entries[2].note, "test 2") == 0);
    CHECK_MSG(hfq_quantize_write(f, &plan, out, &o, &err) == 0, "%s", err.msg);
    hfq_plan_free(&plan);
    gguf_close(f);

    gguf_file *g = gguf_open(out, &err);
    CHECK_MSG(g, "%s", err.msg);
    if (!g) return;
    const gguf_tensor_info *s0 = gguf_find_tensor(g, "blk.0.attn_q.scale");
    const gguf_tensor_info *s1 = gguf_find_tensor(g, "blk.0.ffn_up.scale");
    const gguf_tensor_info *s2 = gguf_find_tensor(g, "blk.0.ffn_down.scale");
    CHECK(s0 && s0->n_dims == 2 && s0->ne[0] == NE0 / 64 && s0->ne[1] == ROWS && s0->type == GT_F32);
    CHECK(s1 && s1->n_dims == 1 && s1->ne[0] == 1);
    CHECK(s2 && s2->n_dims == 1 && s2->ne[0] == 1);
    if (s0 && s1 && s2) {
        const float *v0 = s0->data, *v1 = s1->data, *v2 = s2->data;
        for (int r = 0; r < ROWS; r++)
            for (int gi = 0; gi < NE0 / 64; gi++)
                CHECK(v0[r * (NE0 / 64) + gi] == amax_of(w[0] + r * NE0 + gi * 64, 64) / 127.0f);
        CHECK(v1[0] == amax_of(w[1], NE0 * ROWS) / 448.0f);
        CHECK(v2[0] == amax_of(w[2], NE0 * ROWS) / 127.0f);
        /* per-tensor INT8 codes are round(x / s) */
        const int8_t *q = gguf_find_tensor(g, "blk.0.ffn_down.weight")->data;
        for (int j = 0; j < NE0 * ROWS; j++) CHECK(q[j] == (int8_t)roundf(w[2][j] / v2[0]));
    }
    const int64_t k = gguf_find_key(g, "hfq.qext.blk.0.ffn_up.weight");
    CHECK(k >= 0);
    gguf_close(g);
    unlink(in);
    unlink(out);
}

int main(void) {
    test_specs();
    test_codec();
    test_driver();
    return check_exit();
}
