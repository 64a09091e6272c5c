/* gptq_fp4.c - GPTQ codecs (quant/gptq_codec.h) of MXFP4 and NVFP4.
 *
 * Headers are the quantizers' (fp4.c): MXFP4's exponent (the reference's,
 * with importance the best of it and its neighbours), NVFP4's four UE4M3
 * sub-block scales (the reference's, with importance the "four over six"
 * search) under the global scale in->global_scale (0: none). round codes the
 * value at the block's decoded scale as the quantizer does: ggml's nearest
 * E2M1 value, or round-to-nearest-even with a global scale. NVFP4's returned
 * value includes the global scale (the tensor's value: the dequantized
 * value times g, as llama.cpp applies it). */
#include "quant/fp4.h"
#include "quant/gptq_entry.h"

static void mxfp4_set(void *blk, int64_t i, unsigned c) {
    hfq_gptq_nibble_set(((hfq_block_mxfp4 *)blk)->qs, HFQ_QK_MXFP4 / 2, i, c);
}
static unsigned mxfp4_get(const void *blk, int64_t i) {
    return hfq_gptq_nibble_get(((const hfq_block_mxfp4 *)blk)->qs, HFQ_QK_MXFP4 / 2, i);
}

/* sub-block s = i / 16 in qs[8 s ..], element i % 16 of its run */
static void nvfp4_set(void *blk, int64_t i, unsigned c) {
    hfq_gptq_nibble_set(((hfq_block_nvfp4 *)blk)->qs + (i / HFQ_QK_NVFP4_SUB) * (HFQ_QK_NVFP4_SUB / 2),
                        HFQ_QK_NVFP4_SUB / 2, i % HFQ_QK_NVFP4_SUB, c);
}
static unsigned nvfp4_get(const void *blk, int64_t i) {
    return hfq_gptq_nibble_get(((const hfq_block_nvfp4 *)blk)->qs + (i / HFQ_QK_NVFP4_SUB) * (HFQ_QK_NVFP4_SUB / 2),
                               HFQ_QK_NVFP4_SUB / 2, i % HFQ_QK_NVFP4_SUB);
}

typedef struct mxfp4_state {
    float d; /* halved scale */
} mxfp4_state;

static void mxfp4_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    hfq_quantize_mxfp4(in->x, blk, 1, HFQ_QK_MXFP4, in->importance);
    ((mxfp4_state *)state)->d = hfq_e8m0_half_to_f32(((const hfq_block_mxfp4 *)blk)->e);
}

static float mxfp4_round(const void *state, void *blk, int64_t i, float x) {
    const float d = ((const mxfp4_state *)state)->d;
    const uint8_t c = hfq_fp4_encode(x, d, 0);
    mxfp4_set(blk, i, c);
    return (float)hfq_e2m1_doubled(c) * d;
}

static float mxfp4_grid(const void *state, int64_t i, unsigned c) {
    (void)i;
    return (float)hfq_e2m1_doubled(c) * ((const mxfp4_state *)state)->d;
}

#define NVFP4_SUBS (HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB)

typedef struct nvfp4_state {
    float code_scale[NVFP4_SUBS]; /* what codes are rounded at: ue4m3 / 2, times g */
    float decoded[NVFP4_SUBS];    /* what the dequantizer multiplies: ue4m3 / 2 */
    float g;                      /* global scale, 0: none */
} nvfp4_state;

static void nvfp4_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    nvfp4_state *st = (nvfp4_state *)state;
    const hfq_block_nvfp4 *b = (const hfq_block_nvfp4 *)blk;
    st->g = in->global_scale > 0.0f ? in->global_scale : 0.0f;
    hfq_quantize_nvfp4(in->x, blk, 1, HFQ_QK_NVFP4, in->importance, st->g);
    for (int s = 0; s < NVFP4_SUBS; s++) {
        st->code_scale[s] = hfq_nvfp4_sub_scale(b->d[s], st->g);
        st->decoded[s] = hfq_ue4m3_half_to_f32(b->d[s]);
    }
}

static float nvfp4_round(const void *state, void *blk, int64_t i, float x) {
    const nvfp4_state *st = (const nvfp4_state *)state;
    const int64_t s = i / HFQ_QK_NVFP4_SUB;
    const uint8_t c = hfq_fp4_encode(x, st->code_scale[s], st->g > 0.0f);
    nvfp4_set(blk, i, c);
    const float v = (float)hfq_e2m1_doubled(c) * st->decoded[s];
    return st->g > 0.0f ? v * st->g : v;
}

static float nvfp4_grid(const void *state, int64_t i, unsigned c) {
    return (float)hfq_e2m1_doubled(c) * ((const nvfp4_state *)state)->code_scale[i / HFQ_QK_NVFP4_SUB];
}

HFQ_GPTQ_ENTRY(mxfp4, HFQ_QT_MXFP4, HFQ_QK_MXFP4, hfq_block_mxfp4, mxfp4_state, mxfp4_header, mxfp4_round, 16,
               mxfp4_grid);
HFQ_GPTQ_ENTRY(nvfp4, HFQ_QT_NVFP4, HFQ_QK_NVFP4, hfq_block_nvfp4, nvfp4_state, nvfp4_header, nvfp4_round, 16,
               nvfp4_grid);
