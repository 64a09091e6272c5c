/* test_quantize_run.c - the streaming driver: slabs that never cross an
 * expert matrix, importance rows handed to the right matrix, output equal to
 * quantizing each matrix at once, bytes independent of the thread count and
 * slab size, NVFP4's global scale over the whole tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "quant/fp4.h"
#include "quant/qtype.h"
#include "src/quantize/driver.h"
#include "tests/check.h"

#define NE0 256
#define ROWS 12
#define MATS 3

static float experts[MATS * ROWS * NE0];
static float dense[7 * 512];

typedef struct imp_log {
    float rows[MATS * NE0 + 512];
    int calls;
    int64_t last_n_per_row, last_n_mats;
} imp_log;

static const float *importance(void *ctx, const char *name, int64_t n_per_row, int64_t n_mats) {
    imp_log *log = ctx;
    log->calls++;
    log->last_n_per_row = n_per_row;
    log->last_n_mats = n_mats;
    return strcmp(name, "blk.0.ffn_up_exps.weight") == 0 ? log->rows : NULL;
}

static void fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * (1.0f + (float)(i % 97) / 13.0f);
    }
}

static void write_input(const char *path) {
    hfq_error err = {{0}};
    gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.block_count", 1);
    gguf_set_u32(w, "llama.attention.head_count", 4);
    const int64_t ne_e[3] = {NE0, ROWS, MATS}, ne_d[2] = {512, 7}, ne_n[1] = {NE0};
    CHECK(gguf_add_tensor(w, "blk.0.ffn_up_exps.weight", GT_F32, 3, ne_e, &err) == 0);
    CHECK(gguf_add_tensor(w, "blk.0.attn_q.weight", GT_F32, 2, ne_d, &err) == 1);
    CHECK(gguf_add_tensor(w, "blk.0.attn_norm.weight", GT_F32, 1, ne_n, &err) == 2);
    float norm[NE0];
    fill(norm, NE0, 3);
    int rc = gguf_writer_begin(w, path, &err);
    rc |= gguf_writer_write_tensor(w, 0, experts, &err);
    rc |= gguf_writer_write_tensor(w, 1, dense, &err);
    rc |= gguf_writer_write_tensor(w, 2, norm, &err);
    rc |= gguf_writer_finish(w, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    gguf_writer_free(w);
}

/* Quantizes `in` to `out`; returns the output's bytes (malloc'd) and size. */
static unsigned char *quantize(const char *in, const char *out, hfq_quantize_opts *o, size_t *size) {
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(in, &err);
    CHECK_MSG(f != NULL, "%s", err.msg);
    if (!f) exit(check_exit());
    hfq_plan plan = {0};
    int rc = hfq_quantize_plan(f, &o->plan, &plan, &err);
    if (rc == 0) rc = hfq_quantize_write(f, &plan, out, o, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    hfq_plan_free(&plan);
    gguf_close(f);
    FILE *fp = fopen(out, "rb");
    if (!fp) exit(check_exit());
    fseek(fp, 0, SEEK_END);
    *size = (size_t)ftell(fp);
    rewind(fp);
    unsigned char *buf = malloc(*size);
    CHECK(buf && fread(buf, 1, *size, fp) == *size);
    fclose(fp);
    return buf;
}

static void test_importance_and_slabs(const char *dir, const char *in) {
    static imp_log log;
    fill(log.rows, MATS * NE0, 11);
    for (int i = 0; i < MATS * NE0; i++) log.rows[i] = log.rows[i] * log.rows[i] + 0.01f;
    char out1[512], out2[512];
    snprintf(out1, sizeof out1, "%s/a.gguf", dir);
    snprintf(out2, sizeof out2, "%s/b.gguf", dir);

    hfq_quantize_opts o = hfq_quantize_opts_default(HFQ_PRESET_Q4_K_M);
    o.plan.pure = true;
    o.plan.has_imatrix = true;
    o.importance = (hfq_importance_source){.get = importance, .ctx = &log};
    o.n_threads = 3;
    o.slab_floats = 5 * NE0; /* slabs of 5 rows: 5 + 5 + 2 per expert matrix */
    size_t n1, n2;
    unsigned char *a = quantize(in, out1, &o, &n1);
    CHECK(log.calls == 2); /* the two converted tensors */
    o.n_threads = 1;
    o.slab_floats = 0;
    unsigned char *b = quantize(in, out2, &o, &n2);
    CHECK_MSG(n1 == n2 && memcmp(a, b, n1) == 0, "output depends on threads or slab size");
    free(a);
    free(b);

    /* each expert matrix quantized at once with its own importance row */
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(out1, &err);
    CHECK_MSG(f != NULL, "%s", err.msg);
    if (!f) return;
    const hfq_qtype_traits *q4k = hfq_qtype_get(HFQ_QT_Q4_K);
    const gguf_tensor_info *t = gguf_find_tensor(f, "blk.0.ffn_up_exps.weight");
    CHECK(t && t->type == GT_Q4_K);
    size_t mat_bytes = (size_t)hfq_qtype_row_size(HFQ_QT_Q4_K, NE0) * ROWS;
    unsigned char *want = malloc(mat_bytes);
    for (int m = 0; t && m < MATS; m++) {
        q4k->quantize(experts + m * ROWS * NE0, want, ROWS, NE0, log.rows + m * NE0);
        CHECK_MSG(memcmp((const unsigned char *)t->data + m * mat_bytes, want, mat_bytes) == 0,
                  "expert %d differs from quantizing it with its importance row", m);
    }
    /* with the wrong row it would differ: the check above can fail */
    q4k->quantize(experts + ROWS * NE0, want, ROWS, NE0, log.rows);
    CHECK(t && memcmp((const unsigned char *)t->data + mat_bytes, want, mat_bytes) != 0);
    free(want);
    const gguf_tensor_info *norm = gguf_find_tensor(f, "blk.0.attn_norm.weight");
    CHECK(norm && norm->type == GT_F32);
    gguf_close(f);
}

static void test_nvfp4_global_scale(const char *dir, const char *in) {
    char out[512];
    snprintf(out, sizeof out, "%s/n.gguf", dir);
    hfq_quantize_opts o = hfq_quantize_opts_default(HFQ_PRESET_NVFP4);
    o.slab_floats = 2 * NE0;
    size_t n;
    free(quantize(in, out, &o, &n));
    hfq_error err = {{0}};
    gguf_file *f = gguf_open(out, &err);
    if (!f) return;
    const gguf_tensor_info *s = gguf_find_tensor(f, "blk.0.ffn_up_exps.scale");
    const gguf_tensor_info *w = gguf_find_tensor(f, "blk.0.ffn_up_exps.weight");
    /* one global scale per expert ([n_expert], as llama.cpp loads *_exps), over all of its slabs */
    CHECK(s && s->type == GT_F32 && s->n_dims == 1 && s->ne[0] == MATS);
    CHECK(w && w->type == GT_NVFP4);
    if (s && w && s->ne[0] == MATS) {
        const size_t row = (size_t)hfq_qtype_row_size(HFQ_QT_NVFP4, NE0);
        unsigned char *blocks = malloc(row * ROWS);
        for (int m = 0; m < MATS && blocks; m++) {
            float g;
            memcpy(&g, (const float *)s->data + m, 4);
            const float want = hfq_nvfp4_global_scale(experts + m * ROWS * NE0, ROWS * NE0);
            CHECK_MSG(g == want, "expert %d: global scale %g, want %g (its own, over all slabs)", m, g, want);
            hfq_quantize_nvfp4(experts + m * ROWS * NE0, blocks, ROWS, NE0, NULL, want);
            CHECK_MSG(memcmp((const unsigned char *)w->data + m * row * ROWS, blocks, row * ROWS) == 0,
                      "expert %d's blocks differ from quantizing it with its scale", m);
        }
        /* the experts' maxima differ, so one scale for all would not pass the checks above */
        CHECK(hfq_nvfp4_global_scale(experts, ROWS * NE0) != hfq_nvfp4_global_scale(experts, MATS * ROWS * NE0));
        free(blocks);
    }
    gguf_close(f);
}

int main(void) {
    char dir[] = "/tmp/hfq_quantize_run_XXXXXX";
    if (!mkdtemp(dir)) CHECK_SKIP("no temporary directory");
    fill(experts, MATS * ROWS * NE0, 1);
    fill(dense, 7 * 512, 2);
    char in[512];
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    write_input(in);
    test_importance_and_slabs(dir, in);
    test_nvfp4_global_scale(dir, in);
    const char *names[] = {"in.gguf", "a.gguf", "b.gguf", "n.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return check_exit();
}
