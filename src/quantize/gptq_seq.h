/* gptq_seq.h - sequential GPTQ's calibration model: the layers quantized so
 * far, as a reader of the output decodes them, in place of the float
 * model's.
 *
 * The driver reports each converted layer tensor's rows after encoding them
 * (driver.h's hfq_gptq_source.encoded); they are kept as F32 copies (memory:
 * the quantized layers' weights in F32). A calibration pass for layer k runs
 * on the base model bound with every completely reported tensor of the
 * layers before k replaced (the tensors of layer k and later, the token
 * embedding, the output and the norms stay the base's), so layer k's
 * Hessians see the activations the quantized earlier layers give.
 */
#ifndef HFQ_SRC_QUANTIZE_GPTQ_SEQ_H
#define HFQ_SRC_QUANTIZE_GPTQ_SEQ_H

#include <stdint.h>

#include "formats/error.h"
#include "kernels/model.h"

typedef struct hfq_gptq_seq hfq_gptq_seq;

hfq_gptq_seq *hfq_gptq_seq_new(void);
void hfq_gptq_seq_free(hfq_gptq_seq *s);

/* Row r (rows come in order) of the n_rows x n_per_row tensor `name`;
 * tensors not of a layer ("blk.N.") are ignored. -1: out of memory. */
int hfq_gptq_seq_record(hfq_gptq_seq *s, const char *name, int64_t n_rows, int64_t n_per_row, int64_t r,
                        const float *row);

/* base (a loaded model) bound with the recorded tensors of the layers before
 * `layer` replaced; *n_replaced says how many. NULL with err on failure (a
 * recorded tensor whose shape is not the base's). Free it before base. */
hfq_model *hfq_gptq_seq_bind(const hfq_gptq_seq *s, const hfq_model *base, int64_t layer, int64_t *n_replaced,
                             hfq_error *err);

#endif
