/* ct_int4_gptq.h - compressed-tensors' INT4 groups (src/export/ct_int4.h) as
 * a GPTQ codec (quant/gptq_codec.h), so that a calibrated W4A16 export can
 * round its codes with error feedback (quant/gptq.h).
 *
 * header: the group's scale and zero point exactly as ct_int4_row chooses
 * them from the current values (the importance-weighted range shrink
 * included); round: compressed-tensors' code round(clamp(x / s + z, -8, 7))
 * in the weight dtype's arithmetic (ct_int4_code), returning what its
 * decompression into a float32 model gives, (q - z) * s (exact in F32 for
 * F16 / BF16 scales, as a serving engine's GEMM multiplies them; not
 * rounded to the dtype). Without feedback the blocks unpack to
 * ct_int4_row's own codes, scales and zero points.
 */
#ifndef HFQ_SRC_EXPORT_CT_INT4_GPTQ_H
#define HFQ_SRC_EXPORT_CT_INT4_GPTQ_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/safetensors.h"
#include "quant/gptq_codec.h"

/* The one group size the codecs cover: the presets' (W4A16, W4A16_ASYM). */
#define CT_INT4_GPTQ_GROUP 128

/* One encoded group: the codes in ct_int4_row's packing (value i, plus 8,
 * in bits 4 (i % 8) of word i / 8), its scale (a value of the dtype) and
 * zero point. */
typedef struct ct_int4_block {
    uint32_t packed[CT_INT4_GPTQ_GROUP / 8];
    float scale;
    int8_t zero_point;
} ct_int4_block;

/* The codec of groups of `group` values of dtype dt (F32, F16, BF16), or
 * NULL for another group size or dtype. */
const hfq_gptq_codec *ct_int4_gptq_codec(int64_t group, bool symmetric, st_dtype dt);

/* One row of cols / CT_INT4_GPTQ_GROUP blocks as ct_int4_row's outputs. */
void ct_int4_gptq_unpack(const ct_int4_block *blocks, int64_t cols, uint32_t *packed, float *scales,
                         int8_t *zero_points);

#endif
