/* plan.h - choose each tensor's target format for a quantization preset.
 *
 * For the llama.cpp presets (Q4_K_M, Q8_0, ...) the choice is exactly the one
 * llama.cpp's llama-quant.cpp makes (llama_tensor_get_type and its helpers):
 * which tensors may be quantized at all, the per-category bumps (attn_v,
 * ffn_down, attn_output, output / tied token_embd) with their counters taken in
 * llama.cpp's tensor order, the 70B rule, the shape fallbacks (Q4_K->Q5_0,
 * Q5_K->Q5_1, Q6_K->Q8_0, Q2_K/Q3_K->Q4_0, then F16), --pure,
 * --leave-output-tensor, --token-embedding-type, --output-tensor-type and
 * --tensor-type overrides (first matching pattern wins). Presets llama.cpp does
 * not have (MXFP4 for dense models, NVFP4, INT8, FP8) follow the rules in
 * docs/quantize-tool.md. Nothing here reads or writes files.
 */
#ifndef HFQ_QUANT_PLAN_H
#define HFQ_QUANT_PLAN_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"

/* A target format: a ggml type id (formats/ggml_type.h) for the ggml formats,
 * or one of these ids for formats stored as I8 codes plus FP32 scales. */
enum {
    HFQ_FMT_INT8 = 0x100,     /* symmetric int8, one FP32 scale per row */
    HFQ_FMT_FP8_E4M3 = 0x101, /* OCP E4M3FN codes, one FP32 scale per row */
    HFQ_FMT_FP8_E5M2 = 0x102, /* OCP E5M2 codes, one FP32 scale per row */
};

/* Name of a format ("q4_K", "fp8_e4m3"); "?" when unknown. */
const char *hfq_fmt_name(uint32_t fmt);
/* Parses a format a tool accepts as a target (case-insensitive); -1 if unknown
 * or not a target (i8, i32, q8_K, ...). */
int hfq_fmt_from_name(const char *name);
/* Bytes one tensor of this format and shape occupies in the file, companion
 * scale tensors included; -1 if ne[0] is not a multiple of the block size. */
int64_t hfq_fmt_nbytes(uint32_t fmt, const int64_t ne[4]);
/* Scale granularity of the formats stored as I8 codes plus FP32 scales
 * (INT8, FP8; docs/format-quant-ext.md): how many values of a row share one
 * scale. Every other format has its own fixed structure and takes
 * HFQ_SCALE_PER_ROW. */
#define HFQ_SCALE_PER_ROW 0       /* one scale per output row (the default) */
#define HFQ_SCALE_PER_TENSOR (-1) /* one scale for the whole tensor */
/* > 0: one scale per group of that many consecutive values of a row (INT8) */
/* FP8 only: one scale per block of HFQ_SCALE_BLOCK x HFQ_SCALE_BLOCK values
 * (DeepSeek's and compressed-tensors' block strategy; edge blocks ragged):
 * scale tensor [ceil(ne0/128), ceil(ne1/128), ne2, ne3]. */
#define HFQ_SCALE_PER_BLOCK (-2)
#define HFQ_SCALE_BLOCK 128
/* Scales of one ne0 x ne1 matrix at granularity g (PER_TENSOR: 1). */
int64_t hfq_scale_count(int64_t g, int64_t ne0, int64_t ne1);

/* A target format with its scale granularity. */
typedef struct hfq_fmt_spec {
    uint32_t fmt;
    int64_t scale_group;  /* HFQ_SCALE_PER_ROW, HFQ_SCALE_PER_TENSOR, HFQ_SCALE_PER_BLOCK or a group size */
} hfq_fmt_spec;

/* Parses "FMT" or "FMT:GRANULARITY" (GRANULARITY: "tensor", "channel",
 * "gN" or "b128", e.g. "int8:g128", "fp8_e4m3:tensor", "fp8_e4m3:b128"); -1 when malformed or when
 * hfq_fmt_spec_problem objects. */
int hfq_fmt_spec_parse(const char *s, hfq_fmt_spec *out);
/* "q4_K", "int8" (per row), "int8:g128", "fp8_e4m3:tensor". */
void hfq_fmt_spec_str(const hfq_fmt_spec *s, char *buf, size_t n);
/* Why the spec cannot be written for rows of ne0 values (ne0 <= 0: any row
 * length), or NULL when it can: granularity on a format that has none, FP8
 * per group (its writers use per tensor or per channel, and the runner
 * refuses it), a group size that does not divide the row. */
const char *hfq_fmt_spec_problem(const hfq_fmt_spec *s, int64_t ne0);
/* hfq_fmt_nbytes with the spec's scale tensor: per tensor one FP32, per row
 * one per row, per group ne0/G per row (NVFP4: one per matrix, ne[2] *
 * ne[3]); -1 when the shape does not fit. */
int64_t hfq_fmt_spec_nbytes(const hfq_fmt_spec *s, const int64_t ne[4]);

/* Whether llama.cpp's loader takes an optional per-tensor "<base>.scale"
 * beside weight `name` (llama-model.cpp's generic pass after each
 * architecture's tensors: "blk.N.<attn_q, attn_k, attn_v, attn_output,
 * attn_qkv, attn_gate, ffn_gate, ffn_down, ffn_up, their _shexp and _exps
 * forms, ssm_in, ssm_out, ssm_alpha, ssm_beta, nextn.eh_proj,
 * nextn.shared_head_head>.weight", and "output.weight"). A file with a scale
 * tensor anywhere else (token_embd) does not load there. */
bool hfq_plan_llama_loads_scale(const char *name);
/* Whether llama.cpp's graph of architecture arch also applies that scale:
 * every graph passes the attention's (build_qkv, attn_output) and the
 * output's, but only some pass the FFN's (ffn_gate/up/down, _shexp, _exps):
 * src/models/<arch>.cpp's build_ffn / build_moe_ffn arguments. The FFN
 * scales are taken as applied for llama, qwen3 and qwen3moe (checked there:
 * llama.cpp, qwen3.cpp, qwen3moe.cpp) and as dropped for every other
 * architecture (qwen2, phi3 and gemma* pass NULL; one not checked is taken
 * as dropping them, which is never wrong, only less exact). */
bool hfq_plan_llama_applies_scale(const char *arch, const char *name);
/* NVFP4 global scales written for tensor `name` of shape ne in a model of
 * architecture arch: none where llama.cpp does not apply one
 * (hfq_plan_llama_applies_scale: the global scale is folded into the block
 * scales), else one per matrix (a stacked expert tensor [ne0, ne1,
 * n_expert]: one per expert, the [n_expert] ".scale" llama.cpp's loader
 * takes; otherwise 1). */
int64_t hfq_plan_nvfp4_scales(const char *arch, const char *name, const int64_t ne[4]);
/* Bytes of tensor `name` of a model of architecture arch in the output for
 * spec: hfq_fmt_spec_nbytes, less NVFP4's global scale tensor where
 * llama.cpp applies none (the driver folds the global scale into the block
 * scales there). */
int64_t hfq_fmt_tensor_nbytes(const hfq_fmt_spec *s, const char *arch, const char *name, const int64_t ne[4]);

/* Elements per block of the format (1 for F32/F16/BF16 and the I8 formats). */
int64_t hfq_fmt_block_size(uint32_t fmt);
/* True for the formats that are not plain F32/F16/BF16. */
bool hfq_fmt_is_quantized(uint32_t fmt);

typedef enum hfq_preset {
    HFQ_PRESET_F32, HFQ_PRESET_F16, HFQ_PRESET_BF16,
    HFQ_PRESET_Q4_0, HFQ_PRESET_Q4_1, HFQ_PRESET_Q5_0, HFQ_PRESET_Q5_1, HFQ_PRESET_Q8_0,
    HFQ_PRESET_Q2_K, HFQ_PRESET_Q3_K_S, HFQ_PRESET_Q3_K_M, HFQ_PRESET_Q3_K_L,
    HFQ_PRESET_Q4_K_S, HFQ_PRESET_Q4_K_M, HFQ_PRESET_Q5_K_S, HFQ_PRESET_Q5_K_M, HFQ_PRESET_Q6_K,
    HFQ_PRESET_IQ4_NL, HFQ_PRESET_IQ4_XS,
    HFQ_PRESET_MXFP4_MOE, HFQ_PRESET_MXFP4, HFQ_PRESET_NVFP4,
    HFQ_PRESET_INT8, HFQ_PRESET_FP8_E4M3, HFQ_PRESET_FP8_E5M2,
    HFQ_PRESET_IQ3_S, HFQ_PRESET_IQ3_M, HFQ_PRESET_IQ3_XS, HFQ_PRESET_IQ3_XXS,
    HFQ_PRESET_IQ2_XXS, HFQ_PRESET_IQ2_XS, HFQ_PRESET_IQ2_S, HFQ_PRESET_IQ2_M,
    HFQ_PRESET_IQ1_S, HFQ_PRESET_IQ1_M, HFQ_PRESET_TQ1_0, HFQ_PRESET_TQ2_0, HFQ_PRESET_Q2_K_S,
    HFQ_PRESET_Q1_0, HFQ_PRESET_Q2_0,
    HFQ_PRESET_COUNT
} hfq_preset;

/* Preset by name (case-insensitive; llama.cpp's aliases Q4_K, Q5_K, Q3_K
 * accepted); -1 if unknown. */
int hfq_preset_from_name(const char *name);
const char *hfq_preset_name(hfq_preset p);
/* general.file_type written for the preset: llama.cpp's llama_ftype value
 * where one exists, else a value of ours (see docs/quantize-tool.md). */
uint32_t hfq_preset_file_type(hfq_preset p);
/* The preset's base format (Q4_K for Q4_K_M, ...). */
uint32_t hfq_preset_default_fmt(hfq_preset p);

/* What the plan needs to know about the model (GGUF "{arch}.*" keys). Tied
 * embeddings are not a field: as in llama.cpp, they are "no tensor named
 * output.weight in the list". */
typedef struct hfq_plan_model {
    char arch[64];        /* general.architecture, e.g. "llama" */
    int64_t n_layer;      /* {arch}.block_count */
    int64_t n_head;       /* {arch}.attention.head_count (layer 0) */
    int64_t n_head_kv;    /* {arch}.attention.head_count_kv (layer 0; n_head if absent) */
    int64_t n_expert;     /* {arch}.expert_count (0 if absent) */
} hfq_plan_model;

typedef struct hfq_plan_tensor {
    const char *name;
    int64_t ne[4];        /* unused dims are 1 */
    uint32_t type;        /* current ggml type */
} hfq_plan_tensor;

/* One --tensor-type REGEX=FORMAT rule. */
typedef struct hfq_plan_override {
    char *pattern;
    regex_t re;           /* POSIX extended, case-insensitive, unanchored */
    uint32_t fmt;
} hfq_plan_override;

/* Parses "REGEX=FORMAT" into o (compiles the regex); -1 with err filled when
 * malformed. Free with hfq_plan_override_free. */
int hfq_plan_override_parse(hfq_plan_override *o, const char *arg, hfq_error *err);
void hfq_plan_override_free(hfq_plan_override *o);

/* Chooses the format of one tensor the plan may quantize, in place of the
 * preset's rules and the --tensor-type overrides (recipes and measured
 * allocations use it). index: the tensor's position in the input list;
 * is_output: the tensor is the output layer (output.weight, or
 * token_embd.weight when the embeddings are tied). Sets *spec (block formats
 * whose block does not divide the row still fall back as for the presets)
 * and may write a note; returns 0, or -1 with err filled. */
typedef int (*hfq_plan_choose_fn)(void *ctx, int64_t index, const hfq_plan_tensor *t, bool is_output,
                                  hfq_fmt_spec *spec, char *note, size_t note_size, hfq_error *err);

typedef struct hfq_plan_opts {
    hfq_preset preset;
    bool pure;                 /* no per-category bumps: every quantizable tensor gets the base format */
    bool leave_output;         /* output.weight is not quantized */
    /* granularity of the FP8 tensors the preset's rules plan (not choose's):
     * HFQ_SCALE_PER_ROW (0, the default) or HFQ_SCALE_PER_BLOCK */
    int64_t fp8_scale_group;
    bool has_imatrix;          /* importance data will be supplied (changes a few of llama.cpp's rules) */
    int token_embd_fmt;        /* --token-embedding-type, -1 if unset */
    int output_fmt;            /* --output-tensor-type, -1 if unset */
    const hfq_plan_override *overrides;
    int n_overrides;
    hfq_plan_choose_fn choose; /* NULL: the preset's rules; else it decides (after the two options above) */
    void *choose_ctx;
} hfq_plan_opts;

/* Options with every field at its default for the preset. */
hfq_plan_opts hfq_plan_opts_default(hfq_preset preset);

typedef struct hfq_plan_entry {
    uint32_t fmt;         /* target format; the input type when the tensor is copied */
    int64_t scale_group;  /* INT8/FP8 granularity (HFQ_SCALE_PER_ROW for every other format) */
    bool convert;         /* false: the tensor's bytes are copied unchanged */
    int64_t nbytes;       /* bytes in the output, companion scale tensors included */
    char note[192];       /* override / fallback applied, "" when none */
} hfq_plan_entry;

typedef struct hfq_plan {
    int64_t n;                /* entries, in the order of the input list */
    hfq_plan_entry *entries;
    int64_t n_fallback;       /* tensors whose shape forced a different format */
    int64_t n_elements;       /* total elements of all tensors */
    int64_t in_nbytes;        /* total bytes of the input tensors */
    int64_t out_nbytes;       /* total bytes of the output tensors */
    char arch[64];            /* the model's general.architecture */
} hfq_plan;

/* Chooses every tensor's format. Fails (err filled) for shapes or types the
 * plan cannot handle, e.g. a target no fallback can fit. */
int hfq_plan_build(hfq_plan *plan, const hfq_plan_model *model, const hfq_plan_tensor *tensors,
                   int64_t n_tensors, const hfq_plan_opts *opts, hfq_error *err);
void hfq_plan_free(hfq_plan *plan);

#endif
