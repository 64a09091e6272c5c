/* tok_vocab_gguf DIR OUT.gguf - test helper: writes the tokenizer of a
 * Hugging Face folder to a vocab-only GGUF (hfq_vocab_from_dir +
 * hfq_vocab_to_gguf), for tokenizer_golden.py's through-GGUF comparison. */
#include <stdio.h>

#include "formats/gguf.h"
#include "src/vocab.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tok_vocab_gguf DIR OUT.gguf\n");
        return HFQ_EXIT_USAGE;
    }
    hfq_error err;
    hfq_vocab *v = hfq_vocab_from_dir(argv[1], &err);
    gguf_writer *w = v ? gguf_writer_new() : NULL;
    int ok = w && gguf_set_str(w, "general.architecture", "llama") == 0 && hfq_vocab_to_gguf(v, w, &err) == 0 &&
             gguf_writer_begin(w, argv[2], &err) == 0 && gguf_writer_finish(w, &err) == 0;
    if (!ok) fprintf(stderr, "%s\n", v && !w ? "out of memory" : err.msg);
    gguf_writer_free(w);
    hfq_vocab_free(v);
    return ok ? HFQ_EXIT_OK : HFQ_EXIT_FAILURE;
}
