/* ct_scheme.h - the parsed quantization config, internal to the readers
 * that fill it: src/hf/ct_read.c (compressed-tensors) and
 * src/hf/modelopt_read.c (Model Optimizer). Nothing else includes this. */
#ifndef HFQ_SRC_HF_CT_SCHEME_H
#define HFQ_SRC_HF_CT_SCHEME_H

#include <cjson/cJSON.h>
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"

typedef struct hf_ct_config hf_ct_config;   /* as src/hf/ct_read.h names it */

typedef enum ct_fmt { FMT_DENSE, FMT_NAIVE, FMT_INT, FMT_FLOAT, FMT_PACK, FMT_NVFP4, FMT_MXFP4 } ct_fmt;
typedef enum ct_strat { S_TENSOR, S_CHANNEL, S_GROUP, S_BLOCK, S_TENSOR_GROUP, S_TOKEN } ct_strat;
typedef enum ct_dyn { DYN_STATIC, DYN_TRUE, DYN_LOCAL } ct_dyn;
/* GPTQ's activation ordering: "weight" reorders calibration only (the format
 * is unchanged); "group" stores a group index per column (M.weight_g_idx). */
typedef enum ct_actorder { ACTORDER_NONE, ACTORDER_WEIGHT, ACTORDER_GROUP } ct_actorder;

typedef struct ct_args {
    bool present;
    int bits;
    bool is_float, symmetric;
    ct_strat strat;
    int64_t group, br, bc;
    ct_dyn dynamic;
    ct_actorder actorder;
    bool scale_e8m0;    /* scale_dtype torch.uint8: MX power-of-two scales */
} ct_args;

typedef struct ct_group {
    ct_fmt fmt;
    ct_args w, in;
    bool modelopt;      /* Model Optimizer's tensor names and scales (src/hf/modelopt_read.h) */
} ct_group;

typedef struct ct_target {
    const char *text;   /* inside the parsed config */
    int group;          /* -1: an ignore entry */
    bool is_re;
    bool is_glob;       /* an fnmatch pattern (Model Optimizer's exclude_modules) */
    regex_t rx;
} ct_target;

struct hf_ct_config {
    char path[4096];
    cJSON *root, *extra_root;   /* config.json; hf_quant_config.json (Model Optimizer) */
    ct_group *groups;
    int n_groups;
    ct_target *targets, *ignore;
    int n_targets, n_ignore;
    bool kv_scheme;             /* a static FP8 kv_cache_scheme (src/hf/ct_kv.h) */
};

/* Appends a target (group >= 0) or an ignore entry (group -1); in ct_read.c. */
int hf_ct_add_target(hf_ct_config *c, const char *text, int group, bool glob, hfq_error *err);

#endif
