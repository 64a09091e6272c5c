#include "src/export/ct_int4_gptq.h"

#include <string.h>

#include "src/export/ct_int4.h"

typedef struct ct_int4_state {
    float scale, zero_point;
    bool symmetric;
    st_dtype dt;
} ct_int4_state;

static void header(const hfq_gptq_block_in *in, void *blk, void *state, bool symmetric, st_dtype dt) {
    ct_int4_state *st = state;
    ct_int4_block *b = blk;
    ct_int4_group_params(in->x, in->importance, CT_INT4_GPTQ_GROUP, symmetric, dt, &st->scale, &st->zero_point);
    st->symmetric = symmetric;
    st->dt = dt;
    memset(b->packed, 0, sizeof b->packed); /* round writes every code */
    b->scale = st->scale;
    b->zero_point = (int8_t)st->zero_point;
}

static float round_code(const void *state, void *blk, int64_t i, float x) {
    const ct_int4_state *st = state;
    ct_int4_block *b = blk;
    const int q = ct_int4_code(x, st->scale, st->zero_point, st->symmetric, st->dt);
    const int shift = 4 * (int)(i % 8);
    b->packed[i / 8] = (b->packed[i / 8] & ~(0xFu << shift)) | (uint32_t)(q + 8) << shift;
    /* exact in F32 for F16 / BF16 scales (|q - z| <= 15): the value compressed-tensors decompresses into a
     * float32 model, and what a serving engine's GEMM multiplies, unrounded to the dtype */
    return ((float)q - st->zero_point) * st->scale;
}

/* One codec per (symmetric, dtype): header has no other way to know them.
 * The type is a placeholder: no hfq_qtype holds compressed-tensors' INT4. */
#define CT_INT4_CODEC(name, sym, dt)                                                                             \
    static void name##_header(const hfq_gptq_block_in *in, void *blk, void *state) {                          \
        header(in, blk, state, sym, dt);                                                                       \
    }                                                                                                          \
    static const hfq_gptq_codec name = {HFQ_QT_COUNT, CT_INT4_GPTQ_GROUP, sizeof(ct_int4_block),              \
                                        sizeof(ct_int4_state), name##_header, round_code};
#define CT_INT4_CODECS(suffix, dt) CT_INT4_CODEC(sym_##suffix, true, dt) CT_INT4_CODEC(asym_##suffix, false, dt)

CT_INT4_CODECS(f32, ST_F32)
CT_INT4_CODECS(f16, ST_F16)
CT_INT4_CODECS(bf16, ST_BF16)

const hfq_gptq_codec *ct_int4_gptq_codec(int64_t group, bool symmetric, st_dtype dt) {
    if (group != CT_INT4_GPTQ_GROUP) return NULL;
    switch (dt) {
    case ST_F32: return symmetric ? &sym_f32 : &asym_f32;
    case ST_F16: return symmetric ? &sym_f16 : &asym_f16;
    case ST_BF16: return symmetric ? &sym_bf16 : &asym_bf16;
    default: return NULL;
    }
}

void ct_int4_gptq_unpack(const ct_int4_block *blocks, int64_t cols, uint32_t *packed, float *scales,
                         int8_t *zero_points) {
    for (int64_t g = 0; g < cols / CT_INT4_GPTQ_GROUP; g++) {
        memcpy(packed + g * (CT_INT4_GPTQ_GROUP / 8), blocks[g].packed, sizeof blocks[g].packed);
        scales[g] = blocks[g].scale;
        zero_points[g] = blocks[g].zero_point;
    }
}
