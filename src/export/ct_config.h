/* ct_config.h - config.json of a compressed-tensors export: the family's
 * transformers config rebuilt from the GGUF metadata, plus
 * quantization_config (compressed-tensors' QuantizationConfig, one config
 * group per distinct scheme of the linear layers). */
#ifndef HFQ_SRC_EXPORT_CT_CONFIG_H
#define HFQ_SRC_EXPORT_CT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "src/hf/arch.h"

/* The family (src/hf/arch.h) of the GGUF's general.architecture, or NULL
 * with err naming it. */
const hf_arch *ct_family_find(const gguf_file *f, hfq_error *err);

typedef enum ct_kind { CT_DENSE, CT_FP8, CT_INT8, CT_NVFP4, CT_INT4 } ct_kind;
#define CT_GROUP_BLOCK (-2)

/* How one linear layer is quantized. */
typedef struct ct_scheme {
    ct_kind kind;
    int64_t group;              /* weights: 0 per tensor, -1 per output channel, G > 0 per group of G,
                                 * CT_GROUP_BLOCK per 128x128 block (FP8) */
    bool static_input;          /* an input scale: static per tensor (FP8, INT8), the global scale (NVFP4 W4A4) */
    bool asymmetric;            /* INT4 with zero points */
} ct_scheme;

typedef struct ct_linear {
    char name[128];             /* the module: "model.layers.0.self_attn.q_proj", "lm_head" */
    ct_scheme scheme;
} ct_linear;

/* What config.json says of the model besides its GGUF keys. */
typedef struct ct_model_facts {
    int64_t vocab_size;
    bool tied;                  /* no output.weight: lm_head is the embedding */
    bool attention_bias;        /* q/k/v biases present */
    const char *dtype;          /* "float16", "bfloat16", "float32" */
    bool kv_scales;             /* static FP8 KV-cache scales: kv_cache_scheme (src/export/ct_kv.h) */
} ct_model_facts;

/* Writes root as indented JSON at path (atomically). */
int ct_write_json(cJSON *root, const char *path, hfq_error *err);

/* Writes config.json at path (atomically). Fails on GGUF keys it needs that
 * are missing, or rope scaling it cannot state. */
int ct_write_config(const gguf_file *f, const hf_arch *fam, const ct_model_facts *facts, const ct_linear *lin,
                    int64_t n_lin, const char *path, hfq_error *err);

#endif
