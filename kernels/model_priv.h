/* model_priv.h - between model.c and model_gguf.c only.
 * model.c never calls the GGUF reader itself, so a model bound to tensors in
 * memory (tests) links without it. */
#ifndef HFQ_KERNELS_MODEL_PRIV_H
#define HFQ_KERNELS_MODEL_PRIV_H

#include "kernels/model.h"

/* Hands the open file to the model, which closes it in hfq_model_free. */
void hfq_model_adopt_file(hfq_model *m, gguf_file *f, void (*close_gguf)(gguf_file *f));

#endif
