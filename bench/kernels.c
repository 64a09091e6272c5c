/* bench_kernels - single-thread speed of the CPU runner's quant tiles in
 * every instruction set this CPU runs (kernels/cpu/quant_kernels.h), on a
 * synthetic ROWS x N weight matrix of random values: "decode" is one
 * activation row against all weight rows (matrix-vector, as one decoded
 * token), "prompt" TOKENS activation rows in the kernel's tiles (as prompt
 * processing), and the same batch in the format's panels (kernels/cpu/panel.h,
 * the set's instance; "-" where it has none), the figures behind each
 * format's token thresholds in panel.c. Prints a markdown table of weight
 * GB/s and GMAC/s (best of REPS, in thread CPU time). A benchmark, never a
 * test: bench/run does not assert it.
 *
 * usage: bench_kernels [N [ROWS [REPS [TOKENS]]]]   (default 2048 8192 5 64) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"
#include "kernels/cpu/panel.h"
#include "kernels/cpu/quant_kernels.h"

/* Seconds of the best of reps passes of nc-column tiles over every weight row. */
static double best_pass(cpu_tile_fn tile, int cols, int64_t n, int64_t rows, const char *w, size_t ws, const char *a,
                        size_t as, int n_act, float *out, int reps) {
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        const double t0 = now_s();
        for (int c0 = 0; c0 < n_act; c0 += cols) {
            const int nc = n_act - c0 < cols ? n_act - c0 : cols;
            for (int64_t r0 = 0; r0 < rows; r0 += CPU_TILE_ROWS)
                tile(n, w + r0 * ws, ws, CPU_TILE_ROWS, a + c0 * as, as, nc, out + c0 * rows + r0, (size_t)rows);
        }
        const double t = now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 2048, rows = argc > 2 ? atoll(argv[2]) : 8192;
    const int reps = argc > 3 ? atoi(argv[3]) : 5, n_prompt = argc > 4 ? atoi(argv[4]) : 64;
    static const char *const isa_names[] = {"none", "avx2", "avx-vnni", "avx512-vnni"};
    hfq_qtype formats[HFQ_QT_COUNT];
    const size_t n_formats = cpu_quant_tile_formats(formats, HFQ_QT_COUNT);
    if (n <= 0 || n % 256 || rows <= 0 || rows % CPU_TILE_ROWS || reps <= 0 || n_prompt < 1 || n_prompt > 4096) {
        fprintf(stderr, "usage: bench_kernels [N (a multiple of 256) [ROWS (a multiple of %d) [REPS [TOKENS (1-4096)]]]]\n",
                CPU_TILE_ROWS);
        return 2;
    }
    float *x = malloc((size_t)n * sizeof *x), *out = malloc((size_t)(rows * n_prompt) * sizeof *out);
    char *w = malloc((size_t)(rows * 2 * n)), *a = malloc((size_t)(n_prompt * 2 * n));   /* rows of these formats: < 2n bytes */
    if (!x || !out || !w || !a) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    printf("| format | set | decode GB/s | decode GMAC/s | prompt GMAC/s | panels GMAC/s |\n|---|---|---:|---:|---:|---:|\n");
    uint64_t rng = 1;
    for (size_t f = 0; f < n_formats; f++) {
        const hfq_qtype_traits *wt = hfq_qtype_get(formats[f]), *at = hfq_qtype_get(wt->vec_dot_type);
        const size_t ws = (size_t)hfq_qtype_row_size(wt->type, n), as = (size_t)hfq_qtype_row_size(at->type, n);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t i = 0; i < n; i++) x[i] = uniform(&rng);
            wt->quantize(x, w + r * ws, 1, n, NULL);
        }
        for (int c = 0; c < n_prompt; c++) {
            for (int64_t i = 0; i < n; i++) x[i] = uniform(&rng);
            at->quantize_row(x, a + c * as, n);
        }
        for (int isa = CPU_QUANT_ISA_AVX2; isa <= CPU_QUANT_ISA_AVX512VNNI; isa++) {
            int cols = 0;
            cpu_tile_fn tile = cpu_quant_tile_isa(formats[f], (cpu_quant_isa)isa, &cols);
            if (!tile) continue;
            const double macs = (double)n * (double)rows;
            const double t1 = best_pass(tile, cols, n, rows, w, ws, a, as, 1, out, reps);
            const double tp = best_pass(tile, cols, n, rows, w, ws, a, as, n_prompt, out, reps);
            char panels[32] = "-";
            const cpu_panel_format *pf = cpu_panel_format_get(formats[f], at->type, INT64_MAX);
            const hfq_tensor wten = {.name = "w", .type = (uint32_t)wt->ggml_type, .ne0 = n, .ne1 = rows, .row_bytes = ws, .data = w};
            double tpan = 1e30;
            for (int rep = 0; pf && rep < reps; rep++) {
                const double t0 = now_s();
                if (!cpu_panel_matmul_isa(pf, (cpu_quant_isa)isa, 1, &wten, a, as, n_prompt, out)) break;
                const double t = now_s() - t0;
                if (t < tpan) tpan = t;
            }
            if (tpan < 1e30) snprintf(panels, sizeof panels, "%.2f", macs * n_prompt / tpan * 1e-9);
            printf("| %s | %s | %.1f | %.2f | %.2f | %s |\n", wt->name, isa_names[isa], (double)(rows * (int64_t)ws) / t1 * 1e-9,
                   macs / t1 * 1e-9, macs * n_prompt / tp * 1e-9, panels);
        }
    }
    free(x), free(out), free(w), free(a);
    return 0;
}
