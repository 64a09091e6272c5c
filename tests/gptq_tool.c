/* gptq_tool.c - raw-file front end to GPTQ for tests/gptq_ref.py:
 *
 *   gptq_tool FMT DAMP BATCH THREADS W ROWS N X T OUT
 *
 * W: ROWS x N float32 weights, X: T x N float32 inputs (raw, little
 * endian). Accumulates H = X^T X (calib/hessian.h), prepares U with DAMP and
 * writes the GPTQ encoding of W in format FMT (quant/gptq_codec.h; BATCH <=
 * 0: the default) to OUT. Exit 0, 1 on failure, 77 when FMT has no codec.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/hessian.h"
#include "quant/gptq.h"

static float *read_f32(const char *path, size_t n) {
    FILE *fp = fopen(path, "rb");
    float *v = malloc(n * sizeof *v);
    if (!fp || !v || fread(v, sizeof *v, n, fp) != n) {
        if (fp) fclose(fp);
        free(v);
        return NULL;
    }
    fclose(fp);
    return v;
}

int main(int argc, char **argv) {
    if (argc != 11) {
        fprintf(stderr, "usage: gptq_tool FMT DAMP BATCH THREADS W ROWS N X T OUT\n");
        return 1;
    }
    const int qt = hfq_qtype_from_name(argv[1]);
    const hfq_gptq_codec *c = qt >= 0 ? hfq_gptq_codec_get((hfq_qtype)qt) : NULL;
    if (!c) {
        printf("SKIP: no GPTQ codec for %s\n", argv[1]);
        return 77;
    }
    const double damp = atof(argv[2]);
    const int64_t batch = atoll(argv[3]), rows = atoll(argv[6]), n = atoll(argv[7]), t = atoll(argv[9]);
    const int threads = atoi(argv[4]);
    float *w = read_f32(argv[5], (size_t)(rows * n)), *x = read_f32(argv[8], (size_t)(t * n));
    hfq_hessian_input in = {.name = "w", .n = n};
    hfq_hessian_set s;
    hfq_error err = {{0}};
    const size_t bytes = (size_t)rows * (size_t)(n / c->block) * c->block_bytes;
    void *out = malloc(bytes);
    if (!w || !x || !out || hfq_hessian_set_init(&s, &in, 1, threads, &err)) {
        fprintf(stderr, "gptq_tool: cannot read the inputs or out of memory\n");
        return 1;
    }
    hfq_hessian_add(&s.e[0], x, t, threads);
    FILE *fp = NULL;
    int rc = hfq_gptq_prepare(s.e[0].h, n, damp, threads) ||
             hfq_gptq_encode(c, s.e[0].h, w, rows, n, NULL, 0.0f, batch, out, threads) ||
             !(fp = fopen(argv[10], "wb")) || fwrite(out, 1, bytes, fp) != bytes;
    if (fp && fclose(fp)) rc = 1;
    if (rc) fprintf(stderr, "gptq_tool: failed\n");
    hfq_hessian_set_free(&s);
    free(w);
    free(x);
    free(out);
    return rc ? 1 : 0;
}
