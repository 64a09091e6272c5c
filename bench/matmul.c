/* bench_matmul - single-thread speed of cpu_matmul (kernels/cpu/matmul.h)
 * on every activation path of the formats outside bench_kernels' table:
 * MXFP4 / NVFP4 with Q8_0 activations, NVFP4 and MXFP4 W4A4, FP4 weights
 * times float rows (weight-only), INT8 (per tensor, channel, group of 128)
 * and FP8 E4M3 / E5M2 (per tensor, channel) times float rows and W8A8, and
 * FP8 in groups of 128 with its activations so rounded (FP8_BLOCK);
 * beside Q8_0 and Q4_K on the same ROWS x N matrix of random values.
 * "decode" is one token (matrix-vector), "prompt" TOKENS (64); both include
 * the activations' quantization, as the runner does. Prints a markdown
 * table of weight bits per value, GB/s and GMAC/s (best of REPS).
 * A benchmark, never a test.
 *
 * usage: bench_matmul [N [ROWS [REPS [PATH [TOKENS]]]]]   (default 2048 4096 3
 * "" 64; PATH: only the paths whose name contains it, e.g. "e4m3", to
 * profile one; TOKENS: the prompt's batch, e.g. 256 for the panels) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "formats/ggml_type.h"
#include "kernels/cpu/matmul.h"
#include "quant/fp4.h"
#include "quant/fp8.h"
#include "quant/int8.h"

/* One weight layout and the activation mode it is timed with. */
typedef struct bench_case {
    const char *name;
    uint32_t type;          /* ggml type, GT_I8 for I8 codes */
    hfq_qext qext;
    int64_t group;          /* INT8: group size, 0 per channel, -1 per tensor; FP8: 0 channel, -1 tensor */
    bool act_none;          /* weight-only FP4 */
    hfq_act_quant aq;
    int64_t act_group;      /* FP8 weights marked act_fp8_group (FP8_BLOCK checkpoints): 128 */
    bool act_mxfp4;         /* MXFP4 weights marked act_mxfp4 (MXFP4 W4A4 checkpoints) */
} bench_case;

static const bench_case cases[] = {
    {"q8_0 x q8_0", GT_Q8_0, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, false},
    {"q4_K x q8_K", GT_Q4_K, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, false},
    {"q4_0 x q8_0", GT_Q4_0, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, false},
    {"iq4_nl x q8_0", GT_IQ4_NL, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, false},
    {"q5_0 x q8_0", GT_Q5_0, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, false},
    {"mxfp4 x q8_0", GT_MXFP4, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, false},
    {"nvfp4 x q8_0", GT_NVFP4, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, false},
    {"nvfp4 x nvfp4 (W4A4)", GT_NVFP4, 0, 0, false, HFQ_ACT_QUANT_DYNAMIC, 0, false},
    {"mxfp4 x mxfp4 (W4A4)", GT_MXFP4, 0, 0, false, HFQ_ACT_QUANT_AUTO, 0, true},
    {"mxfp4 x f32", GT_MXFP4, 0, 0, true, HFQ_ACT_QUANT_AUTO, 0, false},
    {"nvfp4 x f32", GT_NVFP4, 0, 0, true, HFQ_ACT_QUANT_AUTO, 0, false},
    {"int8/tensor x f32", GT_I8, HFQ_QEXT_INT8, -1, false, HFQ_ACT_QUANT_NONE, 0, false},
    {"int8/channel x f32", GT_I8, HFQ_QEXT_INT8, 0, false, HFQ_ACT_QUANT_NONE, 0, false},
    {"int8/g128 x f32", GT_I8, HFQ_QEXT_INT8, 128, false, HFQ_ACT_QUANT_NONE, 0, false},
    {"int8/tensor x int8", GT_I8, HFQ_QEXT_INT8, -1, false, HFQ_ACT_QUANT_DYNAMIC, 0, false},
    {"int8/channel x int8", GT_I8, HFQ_QEXT_INT8, 0, false, HFQ_ACT_QUANT_DYNAMIC, 0, false},
    {"int8/g128 x int8", GT_I8, HFQ_QEXT_INT8, 128, false, HFQ_ACT_QUANT_DYNAMIC, 0, false},
    {"e4m3/tensor x f32", GT_I8, HFQ_QEXT_FP8_E4M3, -1, false, HFQ_ACT_QUANT_NONE, 0, false},
    {"e4m3/channel x f32", GT_I8, HFQ_QEXT_FP8_E4M3, 0, false, HFQ_ACT_QUANT_NONE, 0, false},
    {"e5m2/channel x f32", GT_I8, HFQ_QEXT_FP8_E5M2, 0, false, HFQ_ACT_QUANT_NONE, 0, false},
    {"e4m3/channel x e4m3", GT_I8, HFQ_QEXT_FP8_E4M3, 0, false, HFQ_ACT_QUANT_DYNAMIC, 0, false},
    {"e5m2/channel x e5m2", GT_I8, HFQ_QEXT_FP8_E5M2, 0, false, HFQ_ACT_QUANT_DYNAMIC, 0, false},
    {"e4m3/g128 x e4m3", GT_I8, HFQ_QEXT_FP8_E4M3, 128, false, HFQ_ACT_QUANT_DYNAMIC, 0, false},
    {"e4m3/g128 x f32", GT_I8, HFQ_QEXT_FP8_E4M3, 128, false, HFQ_ACT_QUANT_NONE, 0, false},
    {"e4m3/g128 x fp8 g128 (FP8_BLOCK)", GT_I8, HFQ_QEXT_FP8_E4M3, 128, false, HFQ_ACT_QUANT_AUTO, 128, false},
};

/* Fills w (rows x n) from the floats src in the case's layout; scales: its scale tensor. */
static void make_weight(const bench_case *bc, const float *src, int64_t n, int64_t rows, void *data, float *scales,
                        hfq_tensor *w) {
    *w = (hfq_tensor){.name = bc->name, .type = bc->type, .ne0 = n, .ne1 = rows, .qext = bc->qext,
                      .act_none = bc->act_none, .act_mxfp4 = bc->act_mxfp4, .data = data};
    if (bc->qext == HFQ_QEXT_INT8) {
        w->row_bytes = (size_t)n;
        if (bc->group < 0) {
            scales[0] = hfq_int8_scale(src, n * rows);
            hfq_quantize_int8_static(src, data, rows, n, scales[0]);
        } else {
            hfq_quantize_int8(src, data, rows, n, NULL, scales, bc->group);
            w->scale_groups = bc->group ? n / bc->group : 1;
        }
        w->scale = scales;
    } else if (bc->qext) {
        const hfq_fp8_format f = bc->qext == HFQ_QEXT_FP8_E5M2 ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
        w->row_bytes = (size_t)n;
        if (bc->group < 0) {
            scales[0] = hfq_fp8_scale(f, src, n * rows);
            hfq_quantize_fp8_static(f, src, data, rows, n, scales[0]);
        } else {
            hfq_quantize_fp8(f, src, data, rows, n, NULL, scales);
            w->scale_groups = 1;
            if (bc->group > 0) {   /* each row's scale for each of its groups */
                w->scale_groups = n / bc->group;
                for (int64_t r = rows - 1; r >= 0; r--)
                    for (int64_t k = w->scale_groups - 1; k >= 0; k--) scales[r * w->scale_groups + k] = scales[r];
            }
        }
        w->scale = scales;
        w->act_fp8_group = bc->act_group;
    } else {
        const hfq_qtype_traits *t = hfq_qtype_get((hfq_qtype)hfq_qtype_from_ggml(bc->type));
        w->row_bytes = (size_t)hfq_qtype_row_size(t->type, n);
        if (bc->type == GT_NVFP4) {
            scales[0] = hfq_nvfp4_global_scale(src, n * rows);
            hfq_quantize_nvfp4(src, data, rows, n, NULL, scales[0]);
            w->scale = scales;
        } else {
            t->quantize(src, data, rows, n, NULL);
        }
    }
}

/* One cpu_matmul call, as best_of times it. */
typedef struct matmul_call {
    hfq_act_quant aq;
    void *act;
    float *y;
    const hfq_tensor *w;
    const float *x;
    int64_t n_tokens;
} matmul_call;

static void run_matmul(const void *ctx) {
    const matmul_call *m = ctx;
    cpu_matmul(1, m->aq, m->act, m->y, m->w, NULL, m->x, m->n_tokens);
}

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 2048, rows = argc > 2 ? atoll(argv[2]) : 4096;
    const int reps = argc > 3 ? atoi(argv[3]) : 3;
    const char *only = argc > 4 ? argv[4] : "";
    const int64_t n_prompt = argc > 5 ? atoll(argv[5]) : 64;
    if (n <= 0 || n % 256 || rows <= 0 || reps <= 0 || n_prompt <= 0 || n_prompt > 4096) {
        fprintf(stderr, "usage: bench_matmul [N (a multiple of 256) [ROWS [REPS [PATH [TOKENS (1-4096)]]]]]\n");
        return 2;
    }
    float *src = malloc((size_t)(n * rows) * sizeof *src), *x = malloc((size_t)(n * n_prompt) * sizeof *x);
    float *y = malloc((size_t)(rows * n_prompt) * sizeof *y), *scales = malloc((size_t)rows * n * sizeof *scales);
    char *data = malloc((size_t)(rows * n) * 2);
    if (!src || !x || !y || !scales || !data) {
        fprintf(stderr, "bench_matmul: out of memory\n");
        return 1;
    }
    uint64_t rng = 1;
    for (int64_t i = 0; i < n * rows; i++) src[i] = uniform(&rng);
    for (int64_t i = 0; i < n * n_prompt; i++) x[i] = uniform(&rng);
    printf("| path | bits/weight | decode GB/s | decode GMAC/s | prompt GMAC/s |\n|---|---:|---:|---:|---:|\n");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (!strstr(cases[c].name, only)) continue;
        hfq_tensor w;
        make_weight(&cases[c], src, n, rows, data, scales, &w);
        void *act = malloc(cpu_matmul_act_bytes(&w, cases[c].aq, n_prompt) + 1);
        if (!act || cpu_wkernel_get(&w, cases[c].aq, &(cpu_wkernel){0}, "bench_matmul", NULL)) {
            fprintf(stderr, "bench_matmul: %s cannot run\n", cases[c].name);
            return 1;
        }
        const double macs = (double)n * (double)rows;
        const double t1 = best_of(reps, run_matmul, &(matmul_call){cases[c].aq, act, y, &w, x, 1});
        const double tp = best_of(reps, run_matmul, &(matmul_call){cases[c].aq, act, y, &w, x, n_prompt});
        printf("| %s | %.2f | %.1f | %.2f | %.2f |\n", cases[c].name, 8.0 * (double)w.row_bytes / (double)n,
               (double)(rows * (int64_t)w.row_bytes) / t1 * 1e-9, macs / t1 * 1e-9, macs * n_prompt / tp * 1e-9);
        free(act);
    }
    free(src), free(x), free(y), free(scales), free(data);
    return 0;
}
