#include "src/eval/lm.h"

#include <string.h>

int hfq_lm_load(hfq_lm *lm, const char *path, hfq_error *err) {
    memset(lm, 0, sizeof *lm);
    if ((lm->model = hfq_model_load(path, err)) && (lm->vocab = hfq_vocab_from_gguf(hfq_model_gguf(lm->model), err)) &&
        (lm->tok = hfq_tokenizer_new(lm->vocab, err)))
        return 0;
    hfq_lm_free(lm);
    return -1;
}

void hfq_lm_free(hfq_lm *lm) {
    hfq_tokenizer_free(lm->tok);
    hfq_vocab_free(lm->vocab);
    hfq_model_free(lm->model);
    memset(lm, 0, sizeof *lm);
}
