/* The few ggml symbols that ggml-quants.c and ggml-cpu/quants.c need, for the
 * test-only reference library. Sizes and names come from our own type table
 * (formats/ggml_type.h, whose ids are ggml's); the fp16 table that ggml's CPU
 * code reads is filled with quant/half.h's conversion, which agrees with
 * ggml's on every non-NaN value (tests/test_half.c). ggml_row_size is renamed
 * at compile time (see meson.build) so it does not clash with ours. */
#undef ggml_row_size /* the rename is for the ggml sources; ours is declared below */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/ggml_type.h"
#include "quant/half.h"

size_t ggmlref_row_size(int type, int64_t ne);
size_t ggml_type_size(int type);
const char *ggml_type_name(int type);
void ggml_abort(const char *file, int line, const char *fmt, ...);

float ggml_table_f32_f16[1 << 16];

__attribute__((constructor)) static void fill_fp16_table(void) {
    for (uint32_t h = 0; h < (1u << 16); h++) ggml_table_f32_f16[h] = hfq_fp16_to_f32((uint16_t)h);
}

size_t ggmlref_row_size(int type, int64_t ne) {
    const ggml_type_info *t = ggml_type_get((uint32_t)type);
    return t ? (size_t)(ne / t->block_size * t->type_size) : 0;
}

size_t ggml_type_size(int type) {
    const ggml_type_info *t = ggml_type_get((uint32_t)type);
    return t ? (size_t)t->type_size : 0;
}

const char *ggml_type_name(int type) {
    const ggml_type_info *t = ggml_type_get((uint32_t)type);
    return t ? t->name : "?";
}

void ggml_abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ggml reference aborted at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}
