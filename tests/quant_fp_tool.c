/* quant_fp_tool - test helper: runs the FP4/FP8 codecs over raw files so
 * quant_fp_ref.py can compare them with gguf-py and ml_dtypes.
 *   quant_fp_tool quant mxfp4|nvfp4 N_PER_ROW IN.f32 OUT.bin [GLOBAL_SCALE]
 *   quant_fp_tool dequant mxfp4|nvfp4 IN.bin OUT.f32
 *   quant_fp_tool fp8enc e4m3|e5m2 IN.f32 OUT.u8
 *   quant_fp_tool fp8dec e4m3|e5m2 IN.u8 OUT.f32
 *   quant_fp_tool ue4m3 IN.f32 OUT.u8      (ggml's UE4M3 rounding)
 * Exit 0 on success, 1 on I/O failure, 2 on usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/fp4.h"
#include "quant/fp8.h"

static void *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static int write_all(const char *path, const void *buf, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    const int ok = fwrite(buf, 1, size, f) == size;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static int usage(void) {
    fprintf(stderr, "usage: quant_fp_tool quant|dequant|fp8enc|fp8dec|ue4m3 ... (see source)\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 4) return usage();
    const char *op = argv[1], *fmt = argv[2];
    const int fp4_block = !strcmp(fmt, "mxfp4") ? 32 : !strcmp(fmt, "nvfp4") ? 64 : 0;
    const int fp4_bytes = fp4_block == 32 ? 17 : 36;
    const hfq_fp8_format f8 = !strcmp(fmt, "e5m2") ? HFQ_FP8_E5M2 : HFQ_FP8_E4M3;
    const char *in, *out;
    if (!strcmp(op, "quant") && fp4_block && (argc == 6 || argc == 7)) {
        in = argv[4], out = argv[5];
    } else if (!strcmp(op, "ue4m3") && argc == 4) {
        in = argv[2], out = argv[3];
    } else if (argc == 5 && (fp4_block || !strcmp(fmt, "e4m3") || !strcmp(fmt, "e5m2"))) {
        in = argv[3], out = argv[4];
    } else {
        return usage();
    }
    size_t size;
    unsigned char *src = read_all(in, &size);
    if (!src) {
        fprintf(stderr, "quant_fp_tool: cannot read %s\n", in);
        return 1;
    }
    void *dst = NULL;
    size_t dst_size = 0;
    const size_t nf = size / sizeof(float);
    if (!strcmp(op, "quant")) {
        const int64_t n_per_row = atoll(argv[3]);
        if (n_per_row <= 0 || nf % (size_t)n_per_row) return usage();
        dst_size = nf / (size_t)fp4_block * (size_t)fp4_bytes;
        dst = malloc(dst_size + 1);
        const float g = argc == 7 ? strtof(argv[6], NULL) : 0.0f;
        const int64_t rows = (int64_t)(nf / (size_t)n_per_row);
        const size_t got = dst ? (fp4_block == 32 ? hfq_quantize_mxfp4((float *)src, dst, rows, n_per_row, NULL)
                                                  : hfq_quantize_nvfp4((float *)src, dst, rows, n_per_row, NULL, g))
                               : 0;
        if (got != dst_size) return usage();
    } else if (!strcmp(op, "dequant") && fp4_block) {
        const int64_t n = (int64_t)(size / (size_t)fp4_bytes) * fp4_block;
        dst_size = (size_t)n * sizeof(float);
        if ((dst = malloc(dst_size + 1))) {
            if (fp4_block == 32) hfq_dequantize_row_mxfp4(src, dst, n);
            else hfq_dequantize_row_nvfp4(src, dst, n);
        }
    } else if (!strcmp(op, "fp8enc")) {
        dst_size = nf;
        if ((dst = malloc(dst_size + 1)))
            for (size_t i = 0; i < nf; i++) ((uint8_t *)dst)[i] = hfq_f32_to_fp8(f8, ((float *)src)[i]);
    } else if (!strcmp(op, "fp8dec")) {
        dst_size = size * sizeof(float);
        if ((dst = malloc(dst_size + 1)))
            for (size_t i = 0; i < size; i++) ((float *)dst)[i] = hfq_fp8_to_f32(f8, src[i]);
    } else if (!strcmp(op, "ue4m3")) {
        dst_size = nf;
        if ((dst = malloc(dst_size + 1)))
            for (size_t i = 0; i < nf; i++) ((uint8_t *)dst)[i] = hfq_ue4m3_from_f32_ggml(((float *)src)[i]);
    } else {
        return usage();
    }
    if (!dst || write_all(out, dst, dst_size) != 0) {
        fprintf(stderr, "quant_fp_tool: cannot write %s\n", out);
        return 1;
    }
    free(src);
    free(dst);
    return 0;
}
