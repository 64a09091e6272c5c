/* test_fp8_block.c - FP8 weights with one scale per 128x128 block
 * (docs/format-quant-ext.md): the spec ("fp8_e4m3:b128", recipe granularity
 * "block"), its size, the codec's block scales (block amax / 448, ragged edge
 * blocks included) and error bound, and the driver writing the scale tensor
 * [ceil(ne0/128), ceil(ne1/128), ne2] with the codes each block's scale gives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "quant/fp8.h"
#include "quant/plan.h"
#include "quant/recipe.h"
#include "src/quantize/codec.h"
#include "src/quantize/driver.h"
#include "tests/check.h"
#include <cjson/cJSON.h>

/* ragged in both directions: 3 x 2 blocks, the last 44 values and 72 rows */
#define NE0 300
#define NE1 200
#define NB0 3
#define NB1 2
#define NE2 2 /* experts */

static void fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        /* magnitudes that differ from block to block */
        x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * (1.0f + (float)((i / 100) % 7));
    }
}

/* amax / 448 of block (b0, b1) of matrix x [NE1][NE0] */
static float block_scale(const float *x, int b0, int b1, float max) {
    float m = 0.0f;
    for (int r = b1 * 128; r < NE1 && r < (b1 + 1) * 128; r++)
        for (int c = b0 * 128; c < NE0 && c < (b0 + 1) * 128; c++) m = fmaxf(m, fabsf(x[r * NE0 + c]));
    return m / max;
}

static void test_specs(void) {
    hfq_fmt_spec s;
    char buf[64];
    CHECK(hfq_fmt_spec_parse("fp8_e4m3:b128", &s) == 0 && s.scale_group == HFQ_SCALE_PER_BLOCK);
    hfq_fmt_spec_str(&s, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "fp8_e4m3:b128");
    CHECK(hfq_fmt_spec_parse("fp8_e5m2:b128", &s) == 0);
    CHECK(hfq_fmt_spec_parse("int8:b128", &s) < 0 && hfq_fmt_spec_parse("q8_0:b128", &s) < 0 &&
          hfq_fmt_spec_parse("fp8_e4m3:b64", &s) < 0);
    const int64_t ne[4] = {NE0, NE1, NE2, 1};
    const hfq_fmt_spec b = {HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_BLOCK};
    CHECK(hfq_fmt_spec_nbytes(&b, ne) == NE0 * NE1 * NE2 + NB0 * NB1 * NE2 * 4);
    /* the recipe's granularity "block" */
    hfq_error err = {{0}};
    cJSON *doc = cJSON_Parse("{\"name\": \"b\", \"rules\": [{\"match\": \"ffn_\", \"format\": \"fp8_e4m3\", "
                             "\"granularity\": \"block\"}], \"default\": {\"format\": \"q8_0\"}}");
    hfq_recipe *r = hfq_recipe_from_json(doc, "r.json", &err);
    CHECK_MSG(r, "%s", err.msg);
    hfq_recipe_free(r);
    cJSON_Delete(doc);
    doc = cJSON_Parse("{\"name\": \"b\", \"rules\": [{\"match\": \"ffn_\", \"format\": \"int8\", "
                      "\"granularity\": \"block\"}], \"default\": {\"format\": \"q8_0\"}}");
    CHECK(!hfq_recipe_from_json(doc, "r.json", &err));
    CHECK_STR_CONTAINS(err.msg, "fp8 only");
    cJSON_Delete(doc);
}

/* The codec on one matrix: block scales, and every value within half an
 * E4M3 step of its block's grid. */
static void test_codec(void) {
    static float x[NE0 * NE1], back[NE0], rows[NE1 * NB0], blocks[NB0 * NB1];
    static uint8_t enc[NE0];
    fill(x, NE0 * NE1, 5);
    x[7] = 0.0f; /* an exact zero stays zero */
    const hfq_fmt_spec spec = {HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_BLOCK};
    gguf_tensor_info t = {.name = "w", .type = GT_F32, .n_dims = 2, .ne = {NE0, NE1, 1, 1}};
    hfq_codec_job job;
    hfq_error err = {{0}};
    CHECK_MSG(hfq_codec_begin(&job, &t, &spec, &err) == 0, "%s", err.msg);
    CHECK(hfq_codec_companion(&spec) == HFQ_COMPANION_BLOCK_SCALES && job.n_row_scales == NB0);
    for (int r = 0; r < NE1; r++) hfq_codec_row_group_amax(&job, x + r * NE0, rows + r * NB0);
    hfq_codec_block_scales(&job, NE1, 1, rows, blocks);
    for (int b1 = 0; b1 < NB1; b1++)
        for (int b0 = 0; b0 < NB0; b0++)
            CHECK_MSG(blocks[b1 * NB0 + b0] == block_scale(x, b0, b1, 448.0f), "block %d,%d", b0, b1);
    bool ok = true;
    for (int r = 0; r < NE1; r++) {
        CHECK(memcmp(rows + r * NB0, blocks + r / 128 * NB0, NB0 * sizeof(float)) == 0);
        hfq_codec_encode_row(&job, x + r * NE0, enc, NULL, rows + r * NB0);
        hfq_codec_decode_encoded_row(&job, enc, rows + r * NB0, back);
        for (int c = 0; c < NE0; c++) {
            const float s = blocks[r / 128 * NB0 + c / 128], v = x[r * NE0 + c];
            /* E4M3: 3 mantissa bits (half a step: 1/16 relative), subnormals below 2^-6 */
            ok &= back[c] == s * hfq_fp8_to_f32(HFQ_FP8_E4M3, enc[c]);
            ok &= fabsf(back[c] - v) <= fabsf(v) / 16.0f + s * 0x1p-10f;
        }
    }
    CHECK(ok);
    /* the codec's whole-tensor round trip takes the same block scales */
    static float all[NE0 * NE1];
    CHECK_MSG(hfq_codec_roundtrip(&spec, x, all, NE1, NE0, NULL, &err) == 0, "%s", err.msg);
    CHECK(all[7] == 0.0f && all[(NE1 - 1) * NE0 + NE0 - 1] == back[NE0 - 1]);
    /* block scales ignore importance (checkpoints take the block's amax) */
    CHECK(hfq_codec_importance_unused(&spec) != NULL);
}

static int choose(void *ctx, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_fmt_spec *spec,
                  char *note, size_t note_size, hfq_error *err) {
    (void)ctx, (void)index, (void)t, (void)is_output, (void)err;
    *spec = (hfq_fmt_spec){HFQ_FMT_FP8_E4M3, HFQ_SCALE_PER_BLOCK};
    snprintf(note, note_size, "block");
    return 0;
}

/* The driver on a 3-D (expert) tensor: the scale tensor's shape and values,
 * codes = encode(x / the block's scale). */
static void test_driver(void) {
    char in[] = "/tmp/hfq_fp8b_in_XXXXXX", out[] = "/tmp/hfq_fp8b_out_XXXXXX";
    int fd1 = mkstemp(in), fd2 = mkstemp(out);
    CHECK(fd1 >= 0 && fd2 >= 0);
    close(fd1), close(fd2);
    static float w[NE0 * NE1 * NE2];
    fill(w, NE0 * NE1 * NE2, 9);
    hfq_error err = {{0}};
    gguf_writer *gw = gguf_writer_new();
    gguf_set_str(gw, "general.architecture", "llama");
    gguf_set_u32(gw, "llama.block_count", 1);
    const int64_t ne[3] = {NE0, NE1, NE2};
    CHECK(gguf_add_tensor(gw, "blk.0.ffn_up_exps.weight", GT_F32, 3, ne, &err) == 0);
    int rc = gguf_writer_begin(gw, in, &err);
    rc |= gguf_writer_write_tensor(gw, 0, w, &err);
    rc |= gguf_writer_finish(gw, &err);
    gguf_writer_free(gw);
    CHECK_MSG(rc == 0, "%s", err.msg);
    gguf_file *f = gguf_open(in, &err);
    CHECK_MSG(f, "%s", err.msg);
    if (!f) return;
    hfq_quantize_opts o = hfq_quantize_opts_default(HFQ_PRESET_FP8_E4M3);
    o.plan.choose = choose;
    o.slab_floats = NE0 * 50; /* slabs that cut through blocks */
    hfq_plan plan;
    CHECK_MSG(hfq_quantize_plan(f, &o.plan, &plan, &err) == 0, "%s", err.msg);
    CHECK(plan.entries[0].nbytes == NE0 * NE1 * NE2 + NB0 * NB1 * NE2 * 4);
    CHECK_MSG(hfq_quantize_write(f, &plan, out, &o, &err) == 0, "%s", err.msg);
    hfq_plan_free(&plan);
    gguf_close(f);
    gguf_file *g = gguf_open(out, &err);
    CHECK_MSG(g, "%s", err.msg);
    if (!g) return;
    const gguf_tensor_info *s = gguf_find_tensor(g, "blk.0.ffn_up_exps.scale");
    const gguf_tensor_info *q = gguf_find_tensor(g, "blk.0.ffn_up_exps.weight");
    CHECK(s && s->type == GT_F32 && s->n_dims == 3 && s->ne[0] == NB0 && s->ne[1] == NB1 && s->ne[2] == NE2);
    CHECK(q && q->type == GT_I8);
    if (s && q) {
        const float *v = s->data;
        const uint8_t *codes = q->data;
        bool ok = true;
        for (int e = 0; e < NE2; e++) {
            const float *x = w + e * NE0 * NE1;
            for (int b1 = 0; b1 < NB1; b1++)
                for (int b0 = 0; b0 < NB0; b0++)
                    ok &= v[(e * NB1 + b1) * NB0 + b0] == block_scale(x, b0, b1, 448.0f);
            for (int i = 0; i < NE0 * NE1; i++) {
                const float sc = v[(e * NB1 + i / NE0 / 128) * NB0 + i % NE0 / 128];
                ok &= codes[e * NE0 * NE1 + i] == hfq_f32_to_fp8(HFQ_FP8_E4M3, x[i] / sc);
            }
        }
        CHECK(ok);
    }
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
