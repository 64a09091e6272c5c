/* quant_dump FORMAT N_PER_ROW IN.f32 OUT.bin - test helper: quantizes raw
 * little-endian float32 rows with the library (reference path) and writes
 * the raw blocks, for cross-checks against other implementations. */
#include <stdio.h>
#include <stdlib.h>

#include "quant/qtype.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: quant_dump FORMAT N_PER_ROW IN.f32 OUT.bin\n");
        return 2;
    }
    int t = hfq_qtype_from_name(argv[1]);
    long long n_per_row = atoll(argv[2]);
    const hfq_qtype_traits *tr = t < 0 ? NULL : hfq_qtype_get((hfq_qtype)t);
    int64_t row_bytes = tr && tr->quantize ? hfq_qtype_row_size((hfq_qtype)t, n_per_row) : -1;
    if (row_bytes <= 0) {
        fprintf(stderr, "quant_dump: cannot quantize %s rows of %lld\n", argv[1], n_per_row);
        return 2;
    }
    FILE *in = fopen(argv[3], "rb");
    if (!in) {
        perror(argv[3]);
        return 1;
    }
    fseek(in, 0, SEEK_END);
    long bytes = ftell(in);
    rewind(in);
    int64_t nrows = bytes / 4 / n_per_row;
    float *x = malloc((size_t)bytes + 1);
    void *q = malloc((size_t)(nrows * row_bytes) + 1);
    if (!x || !q || fread(x, 1, (size_t)bytes, in) != (size_t)bytes || nrows * n_per_row * 4 != bytes) {
        fprintf(stderr, "quant_dump: %s: cannot read whole rows\n", argv[3]);
        return 1;
    }
    fclose(in);
    size_t written = tr->quantize(x, q, nrows, n_per_row, NULL);
    FILE *out = fopen(argv[4], "wb");
    if (!out || fwrite(q, 1, written, out) != written || fclose(out) != 0) {
        perror(argv[4]);
        return 1;
    }
    free(x);
    free(q);
    return 0;
}
