/* lm.h - a model with its tokenizer, both from one GGUF file (the
 * tokenizer.* keys), as the text tools need them. */
#ifndef HFQ_SRC_EVAL_LM_H
#define HFQ_SRC_EVAL_LM_H

#include "formats/error.h"
#include "kernels/model.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/vocab.h"

typedef struct hfq_lm {
    hfq_model *model;
    hfq_vocab *vocab;
    hfq_tokenizer *tok;
} hfq_lm;

/* Loads all three; -1 with err (naming the file) and *lm emptied on failure. */
int hfq_lm_load(hfq_lm *lm, const char *path, hfq_error *err);
void hfq_lm_free(hfq_lm *lm);

#endif
