/* ct_int4.h - INT4 weights in groups as compressed-tensors' pack-quantized
 * format computes and stores them (W4A16: schemes W4A16 and W4A16_ASYM).
 *
 * No GGUF format of ours holds them, so the export quantizes a float weight
 * itself, with compressed-tensors' own arithmetic (quantization/utils/
 * helpers.py calculate_qparams, lifecycle/forward_helpers.py _quantize), each
 * step rounded to the weight's dtype as torch computes in it (F32, F16, BF16;
 * ties to even):
 *   per group of G values: min = min(x, 0), max = max(x, 0);
 *   symmetric: s = max(|min|, max) / 7.5, z = 0;
 *   asymmetric: s = (max - min) / 15, z = round(clamp(-8 - min / s, -8, 7));
 *   s = 0 becomes the dtype's epsilon;
 *   q = round(clamp(x / s + z, -8, 7)).
 * Stored: weight_packed I32 [rows, cols / 8] (value i of a row in bits
 * 4 (i % 8) of word i / 8, as q + 8), weight_scale in the weight's dtype
 * [rows, cols / G], weight_zero_point I32 [ceil(rows / 8), cols / G] (the
 * same packing down the rows; asymmetric only), weight_shape I64 [2].
 */
#ifndef HFQ_SRC_EXPORT_CT_INT4_H
#define HFQ_SRC_EXPORT_CT_INT4_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/safetensors.h"

/* One row of cols values (cols a multiple of group, group of 8): codes
 * packed into cols / 8 words, cols / group scales (as floats of dt) and
 * zero points (all 0 when symmetric).
 * importance (cols values, the input's mean squares from calibration; NULL:
 * none): each group's range is also tried shrunk by 1 % to 20 % (scale and
 * zero point from the shrunk min / max by the same steps), keeping the least
 * sum of importance * (x - (q - z) s)^2, the plain min-max on ties. The
 * codes are compressed-tensors' rounding for the scale chosen, so its
 * decompression reads them as written. */
void ct_int4_row(const float *x, int64_t cols, int64_t group, bool symmetric, st_dtype dt, const float *importance,
                 uint32_t *packed, float *scales, int8_t *zero_points);

/* The scale and zero point ct_int4_row chooses for one group of `group`
 * values xg (importance wg, group values, or NULL: min-max). */
void ct_int4_group_params(const float *xg, const float *wg, int64_t group, bool symmetric, st_dtype dt, float *s,
                          float *z);
/* compressed-tensors' code of x (-8 .. 7) under scale s and zero point z:
 * round(clamp(x / s + z, -8, 7)) in dt's arithmetic. */
int ct_int4_code(float x, float s, float z, bool symmetric, st_dtype dt);

#endif
