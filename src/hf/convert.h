/* convert.h - Hugging Face checkpoint folder -> GGUF v3 (the library behind hfconv).
 *
 * Streams tensor by tensor and, within a tensor, in chunks of rows, so peak
 * memory does not grow with the model: input pages are released after use
 * and output goes straight to the file. Output layout follows llama.cpp's
 * convert_hf_to_gguf.py: same architecture keys, tensor names, q/k row
 * un-permutation, F32 for 1-D tensors and norms, tied embeddings without an
 * output tensor, tokenizer metadata. Non-finite weights are refused. */
#ifndef HFQ_SRC_HF_CONVERT_H
#define HFQ_SRC_HF_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "src/hf/lora.h"

typedef enum hfq_outtype { HFQ_OUT_AUTO, HFQ_OUT_F32, HFQ_OUT_F16, HFQ_OUT_BF16 } hfq_outtype;

/* Called after each chunk: bytes of tensor data written so far, of total. */
typedef void (*hfq_progress_fn)(void *ctx, uint64_t done, uint64_t total, const char *tensor);

typedef struct hfq_convert_opts {
    const char *model_dir;
    const char *out_path;
    hfq_outtype outtype;
    bool outtype_given;           /* --outtype given: quantized checkpoints become floats */
    bool vocab_only;              /* tokenizer metadata only; no weights needed */
    hfq_progress_fn progress;     /* may be NULL */
    void *progress_ctx;
    const hf_lora_spec *loras;    /* merged in this order; may be NULL */
    int n_loras;
    bool adapter_only;            /* out_path gets the one adapter as llama.cpp's LoRA GGUF */
    hf_warn_fn warn;              /* may be NULL */
    void *warn_ctx;
} hfq_convert_opts;

typedef struct hfq_convert_report {
    char gguf_arch[32];
    int64_t n_tensors;
    uint64_t n_params;
    uint64_t data_bytes;          /* tensor bytes written */
    uint32_t file_type;           /* general.file_type */
} hfq_convert_report;

int hfq_convert(const hfq_convert_opts *opts, hfq_convert_report *report, hfq_error *err);

/* Parses "f32", "f16", "bf16", "auto"; -1 if unknown. */
int hfq_outtype_parse(const char *s);

#endif
