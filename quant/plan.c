/* plan.c - per-tensor format choice; see plan.h. The llama.cpp rules are
 * re-stated from src/llama-quant.cpp (function names given where they live
 * there); only the branches reachable with our presets are kept. */
#include "quant/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/ggml_type.h"

/* ---- formats ---- */

typedef struct ext_fmt {
    uint32_t id;
    const char *name;
} ext_fmt;

static const ext_fmt ext_fmts[] = {
    {HFQ_FMT_INT8, "int8"},
    {HFQ_FMT_FP8_E4M3, "fp8_e4m3"},
    {HFQ_FMT_FP8_E5M2, "fp8_e5m2"},
};
#define N_EXT (sizeof ext_fmts / sizeof ext_fmts[0])

/* ggml types a tool may ask for as a target */
static const uint32_t ggml_targets[] = {
    GT_F32, GT_F16, GT_BF16, GT_Q4_0, GT_Q4_1, GT_Q5_0, GT_Q5_1, GT_Q8_0,
    GT_Q2_K, GT_Q3_K, GT_Q4_K, GT_Q5_K, GT_Q6_K, GT_IQ4_NL, GT_IQ4_XS, GT_MXFP4, GT_NVFP4,
    GT_IQ3_XXS, GT_IQ3_S, GT_IQ2_XXS, GT_IQ2_XS, GT_IQ2_S, GT_IQ1_S, GT_IQ1_M, GT_TQ1_0, GT_TQ2_0,
    GT_Q1_0, GT_Q2_0,
};

static bool is_ext(uint32_t fmt) { return fmt >= HFQ_FMT_INT8 && fmt <= HFQ_FMT_FP8_E5M2; }

const char *hfq_fmt_name(uint32_t fmt) {
    for (size_t i = 0; i < N_EXT; i++)
        if (ext_fmts[i].id == fmt) return ext_fmts[i].name;
    const ggml_type_info *t = ggml_type_get(fmt);
    return t ? t->name : "?";
}

int hfq_fmt_from_name(const char *name) {
    for (size_t i = 0; i < N_EXT; i++)
        if (strcasecmp(ext_fmts[i].name, name) == 0) return (int)ext_fmts[i].id;
    int id = ggml_type_from_name(name);
    for (size_t i = 0; i < sizeof ggml_targets / sizeof ggml_targets[0]; i++)
        if (id >= 0 && (uint32_t)id == ggml_targets[i]) return id;
    return -1;
}

int64_t hfq_fmt_block_size(uint32_t fmt) {
    if (is_ext(fmt)) return 1;
    const ggml_type_info *t = ggml_type_get(fmt);
    return t ? t->block_size : -1;
}

bool hfq_fmt_is_quantized(uint32_t fmt) {
    return fmt != GT_F32 && fmt != GT_F16 && fmt != GT_BF16;
}

int64_t hfq_fmt_nbytes(uint32_t fmt, const int64_t ne[4]) {
    const hfq_fmt_spec s = {fmt, HFQ_SCALE_PER_ROW};
    return hfq_fmt_spec_nbytes(&s, ne);
}

int64_t hfq_scale_count(int64_t g, int64_t ne0, int64_t ne1) {
    const int64_t b = HFQ_SCALE_BLOCK;
    if (g == HFQ_SCALE_PER_TENSOR) return 1;
    if (g == HFQ_SCALE_PER_BLOCK) return ((ne0 + b - 1) / b) * ((ne1 + b - 1) / b);
    return ne1 * (g > 0 ? ne0 / g : 1);
}

int64_t hfq_fmt_spec_nbytes(const hfq_fmt_spec *s, const int64_t ne[4]) {
    int64_t nrows = ne[1] * ne[2] * ne[3];
    if (hfq_fmt_spec_problem(s, ne[0])) return -1;
    if (is_ext(s->fmt)) { /* I8 codes + FP32 scales */
        int64_t n_scales = s->scale_group == HFQ_SCALE_PER_TENSOR ? 1
                                                                   : hfq_scale_count(s->scale_group, ne[0], ne[1]) *
                                                                         ne[2] * ne[3];
        return nrows * ne[0] + n_scales * 4;
    }
    int64_t row = ggml_row_size(s->fmt, ne[0]);
    if (row < 0) return -1;
    /* NVFP4 carries an FP32 global scale per matrix beside it */
    return nrows * row + (s->fmt == GT_NVFP4 ? 4 * ne[2] * ne[3] : 0);
}

/* the layer weights of hfq_plan_llama_loads_scale, as "blk.N.<these>.weight" */
static const char *const llama_scaled_layer_weights[] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "attn_qkv", "attn_gate", "ffn_gate", "ffn_down", "ffn_up",
    "ffn_gate_shexp", "ffn_down_shexp", "ffn_up_shexp", "ffn_gate_exps", "ffn_down_exps", "ffn_up_exps",
    "ssm_in", "ssm_out", "ssm_alpha", "ssm_beta", "nextn.eh_proj", "nextn.shared_head_head",
};

bool hfq_plan_llama_loads_scale(const char *name) {
    if (strcmp(name, "output.weight") == 0) return true;
    int layer, at = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &at) != 1 || at == 0 || layer < 0) return false;
    const char *base = name + at;
    size_t len = strlen(base);
    if (len < 7 || strcmp(base + len - 7, ".weight") != 0) return false;
    for (size_t i = 0; i < sizeof llama_scaled_layer_weights / sizeof llama_scaled_layer_weights[0]; i++) {
        const char *w = llama_scaled_layer_weights[i];
        if (strlen(w) == len - 7 && strncmp(base, w, len - 7) == 0) return true;
    }
    return false;
}

/* The architectures whose llama.cpp graph applies the FFN weights' scales
 * (hfq_plan_llama_applies_scale). */
static const char *const llama_ffn_scaled_archs[] = {"llama", "qwen3", "qwen3moe"};

bool hfq_plan_llama_applies_scale(const char *arch, const char *name) {
    if (!hfq_plan_llama_loads_scale(name)) return false;
    if (!strstr(name, ".ffn_")) return true;
    for (size_t i = 0; i < sizeof llama_ffn_scaled_archs / sizeof llama_ffn_scaled_archs[0]; i++)
        if (strcmp(arch, llama_ffn_scaled_archs[i]) == 0) return true;
    return false;
}

int64_t hfq_plan_nvfp4_scales(const char *arch, const char *name, const int64_t ne[4]) {
    return hfq_plan_llama_applies_scale(arch, name) ? ne[2] * ne[3] : 0;
}

int64_t hfq_fmt_tensor_nbytes(const hfq_fmt_spec *s, const char *arch, const char *name, const int64_t ne[4]) {
    int64_t n = hfq_fmt_spec_nbytes(s, ne);
    return n >= 0 && s->fmt == GT_NVFP4 ? n - 4 * (ne[2] * ne[3] - hfq_plan_nvfp4_scales(arch, name, ne)) : n;
}

const char *hfq_fmt_spec_problem(const hfq_fmt_spec *s, int64_t ne0) {
    if (s->scale_group == HFQ_SCALE_PER_ROW) return NULL;
    if (!is_ext(s->fmt)) return "scale granularity applies to int8 and fp8 only";
    if (s->scale_group == HFQ_SCALE_PER_TENSOR) return NULL;
    if (s->scale_group == HFQ_SCALE_PER_BLOCK)
        return s->fmt == HFQ_FMT_INT8 ? "int8 takes no 128x128 block scales (fp8 only)" : NULL;
    if (s->scale_group < 0) return "bad scale granularity";
    if (s->fmt != HFQ_FMT_INT8) return "fp8 takes scales per tensor or per channel, not per group";
    if (ne0 > 0 && ne0 % s->scale_group != 0) return "the group size does not divide the row";
    return NULL;
}

int hfq_fmt_spec_parse(const char *str, hfq_fmt_spec *out) {
    char name[32];
    const char *colon = strchr(str, ':');
    size_t len = colon ? (size_t)(colon - str) : strlen(str);
    if (len == 0 || len >= sizeof name) return -1;
    memcpy(name, str, len);
    name[len] = '\0';
    int fmt = hfq_fmt_from_name(name);
    if (fmt < 0) return -1;
    *out = (hfq_fmt_spec){(uint32_t)fmt, HFQ_SCALE_PER_ROW};
    if (colon) {
        const char *g = colon + 1;
        char *end;
        if (strcmp(g, "tensor") == 0) out->scale_group = HFQ_SCALE_PER_TENSOR;
        else if (strcmp(g, "channel") == 0) out->scale_group = HFQ_SCALE_PER_ROW;
        else if (strcmp(g, "b128") == 0) out->scale_group = HFQ_SCALE_PER_BLOCK;
        else if (g[0] == 'g' && g[1] >= '1' && g[1] <= '9') {
            long long v = strtoll(g + 1, &end, 10);
            if (*end || v > (1LL << 40)) return -1;
            out->scale_group = v;
        } else {
            return -1;
        }
        if (!is_ext(out->fmt)) return -1; /* even ":channel": block formats have no granularity */
    }
    return hfq_fmt_spec_problem(out, 0) ? -1 : 0;
}

void hfq_fmt_spec_str(const hfq_fmt_spec *s, char *buf, size_t n) {
    if (s->scale_group == HFQ_SCALE_PER_TENSOR) snprintf(buf, n, "%s:tensor", hfq_fmt_name(s->fmt));
    else if (s->scale_group == HFQ_SCALE_PER_BLOCK) snprintf(buf, n, "%s:b%d", hfq_fmt_name(s->fmt), HFQ_SCALE_BLOCK);
    else if (s->scale_group > 0) snprintf(buf, n, "%s:g%" PRId64, hfq_fmt_name(s->fmt), s->scale_group);
    else snprintf(buf, n, "%s", hfq_fmt_name(s->fmt));
}

/* ---- presets ---- */

enum family {
    FAM_LLAMA,   /* llama.cpp's own ftype: its rules, exactly */
    FAM_HFQ,     /* ours: every linear weight to the base format */
};

typedef struct preset_info {
    const char *name;
    uint32_t file_type;   /* llama_ftype value (llama.h) or ours */
    uint32_t fmt;         /* base format (llama_ftype_get_default_type) */
    enum family fam;
} preset_info;

/* file_type values without a llama.cpp counterpart: far above llama_ftype's
 * range and with bit 1024 (LLAMA_FTYPE_GUESSED) clear. */
#define FT_HFQ_INT8 512
#define FT_HFQ_FP8_E4M3 513
#define FT_HFQ_FP8_E5M2 514

static const preset_info presets[HFQ_PRESET_COUNT] = {
    [HFQ_PRESET_F32] = {"F32", 0, GT_F32, FAM_LLAMA},
    [HFQ_PRESET_F16] = {"F16", 1, GT_F16, FAM_LLAMA},
    [HFQ_PRESET_BF16] = {"BF16", 32, GT_BF16, FAM_LLAMA},
    [HFQ_PRESET_Q4_0] = {"Q4_0", 2, GT_Q4_0, FAM_LLAMA},
    [HFQ_PRESET_Q4_1] = {"Q4_1", 3, GT_Q4_1, FAM_LLAMA},
    [HFQ_PRESET_Q5_0] = {"Q5_0", 8, GT_Q5_0, FAM_LLAMA},
    [HFQ_PRESET_Q5_1] = {"Q5_1", 9, GT_Q5_1, FAM_LLAMA},
    [HFQ_PRESET_Q8_0] = {"Q8_0", 7, GT_Q8_0, FAM_LLAMA},
    [HFQ_PRESET_Q2_K] = {"Q2_K", 10, GT_Q2_K, FAM_LLAMA},
    [HFQ_PRESET_Q3_K_S] = {"Q3_K_S", 11, GT_Q3_K, FAM_LLAMA},
    [HFQ_PRESET_Q3_K_M] = {"Q3_K_M", 12, GT_Q3_K, FAM_LLAMA},
    [HFQ_PRESET_Q3_K_L] = {"Q3_K_L", 13, GT_Q3_K, FAM_LLAMA},
    [HFQ_PRESET_Q4_K_S] = {"Q4_K_S", 14, GT_Q4_K, FAM_LLAMA},
    [HFQ_PRESET_Q4_K_M] = {"Q4_K_M", 15, GT_Q4_K, FAM_LLAMA},
    [HFQ_PRESET_Q5_K_S] = {"Q5_K_S", 16, GT_Q5_K, FAM_LLAMA},
    [HFQ_PRESET_Q5_K_M] = {"Q5_K_M", 17, GT_Q5_K, FAM_LLAMA},
    [HFQ_PRESET_Q6_K] = {"Q6_K", 18, GT_Q6_K, FAM_LLAMA},
    [HFQ_PRESET_IQ4_NL] = {"IQ4_NL", 25, GT_IQ4_NL, FAM_LLAMA},
    [HFQ_PRESET_IQ4_XS] = {"IQ4_XS", 30, GT_IQ4_XS, FAM_LLAMA},
    [HFQ_PRESET_MXFP4_MOE] = {"MXFP4_MOE", 38, GT_MXFP4, FAM_LLAMA},
    [HFQ_PRESET_MXFP4] = {"MXFP4", 38, GT_MXFP4, FAM_HFQ},
    [HFQ_PRESET_NVFP4] = {"NVFP4", 39, GT_NVFP4, FAM_HFQ},
    [HFQ_PRESET_INT8] = {"INT8", FT_HFQ_INT8, HFQ_FMT_INT8, FAM_HFQ},
    [HFQ_PRESET_FP8_E4M3] = {"FP8_E4M3", FT_HFQ_FP8_E4M3, HFQ_FMT_FP8_E4M3, FAM_HFQ},
    [HFQ_PRESET_FP8_E5M2] = {"FP8_E5M2", FT_HFQ_FP8_E5M2, HFQ_FMT_FP8_E5M2, FAM_HFQ},
    [HFQ_PRESET_IQ3_S] = {"IQ3_S", 26, GT_IQ3_S, FAM_LLAMA},
    [HFQ_PRESET_IQ3_M] = {"IQ3_M", 27, GT_IQ3_S, FAM_LLAMA},
    [HFQ_PRESET_IQ3_XS] = {"IQ3_XS", 22, GT_IQ3_S, FAM_LLAMA},
    [HFQ_PRESET_IQ3_XXS] = {"IQ3_XXS", 23, GT_IQ3_XXS, FAM_LLAMA},
    [HFQ_PRESET_IQ2_XXS] = {"IQ2_XXS", 19, GT_IQ2_XXS, FAM_LLAMA},
    [HFQ_PRESET_IQ2_XS] = {"IQ2_XS", 20, GT_IQ2_XS, FAM_LLAMA},
    [HFQ_PRESET_IQ2_S] = {"IQ2_S", 28, GT_IQ2_XS, FAM_LLAMA},
    [HFQ_PRESET_IQ2_M] = {"IQ2_M", 29, GT_IQ2_S, FAM_LLAMA},
    [HFQ_PRESET_IQ1_S] = {"IQ1_S", 24, GT_IQ1_S, FAM_LLAMA},
    [HFQ_PRESET_IQ1_M] = {"IQ1_M", 31, GT_IQ1_M, FAM_LLAMA},
    [HFQ_PRESET_TQ1_0] = {"TQ1_0", 36, GT_TQ1_0, FAM_LLAMA},
    [HFQ_PRESET_TQ2_0] = {"TQ2_0", 37, GT_TQ2_0, FAM_LLAMA},
    [HFQ_PRESET_Q2_K_S] = {"Q2_K_S", 21, GT_Q2_K, FAM_LLAMA},
    [HFQ_PRESET_Q1_0] = {"Q1_0", 40, GT_Q1_0, FAM_LLAMA},
    [HFQ_PRESET_Q2_0] = {"Q2_0", 41, GT_Q2_0, FAM_LLAMA},
};

int hfq_preset_from_name(const char *name) {
    /* llama.cpp's QUANT_OPTIONS aliases */
    static const struct { const char *alias; hfq_preset p; } aliases[] = {
        {"Q3_K", HFQ_PRESET_Q3_K_M}, {"Q4_K", HFQ_PRESET_Q4_K_M}, {"Q5_K", HFQ_PRESET_Q5_K_M},
    };
    for (int i = 0; i < HFQ_PRESET_COUNT; i++)
        if (strcasecmp(presets[i].name, name) == 0) return i;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(aliases[i].alias, name) == 0) return (int)aliases[i].p;
    return -1;
}

const char *hfq_preset_name(hfq_preset p) { return presets[p].name; }
uint32_t hfq_preset_file_type(hfq_preset p) { return presets[p].file_type; }
uint32_t hfq_preset_default_fmt(hfq_preset p) { return presets[p].fmt; }

hfq_plan_opts hfq_plan_opts_default(hfq_preset preset) {
    hfq_plan_opts o = {.preset = preset, .token_embd_fmt = -1, .output_fmt = -1};
    return o;
}

/* ---- overrides ---- */

int hfq_plan_override_parse(hfq_plan_override *o, const char *arg, hfq_error *err) {
    memset(o, 0, sizeof *o);
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg || eq[1] == '\0')
        return hfq_fail(err, "--tensor-type", "'%s' is not REGEX=FORMAT", arg);
    int fmt = hfq_fmt_from_name(eq + 1);
    if (fmt < 0) return hfq_fail(err, "--tensor-type", "unknown format '%s'", eq + 1);
    size_t len = (size_t)(eq - arg);
    o->pattern = malloc(len + 1);
    if (!o->pattern) return hfq_fail(err, "--tensor-type", "out of memory");
    memcpy(o->pattern, arg, len);
    o->pattern[len] = '\0';
    /* llama.cpp lower-cases the pattern; matching case-insensitively does the
     * same for lower-case tensor names without changing escapes */
    int rc = regcomp(&o->re, o->pattern, REG_EXTENDED | REG_ICASE | REG_NOSUB);
    if (rc != 0) {
        char msg[256];
        regerror(rc, &o->re, msg, sizeof msg);
        free(o->pattern);
        o->pattern = NULL;
        return hfq_fail(err, "--tensor-type", "bad regex '%.*s': %s", (int)len, arg, msg);
    }
    o->fmt = (uint32_t)fmt;
    return 0;
}

void hfq_plan_override_free(hfq_plan_override *o) {
    if (!o->pattern) return;
    regfree(&o->re);
    free(o->pattern);
    o->pattern = NULL;
}

/* ---- llama.cpp's tensor classes (tensor_get_category) ---- */

enum category {
    CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER,
};

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static enum category category_of(const char *name) {
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    if (has(name, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (has(name, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (has(name, "attn_v.weight")) return CAT_ATTN_V;
    if (has(name, "attn_k.weight")) return CAT_ATTN_K;
    if (has(name, "attn_q.weight")) return CAT_ATTN_Q;
    if (has(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (has(name, "ffn_up")) return CAT_FFN_UP;
    if (has(name, "ffn_gate")) return CAT_FFN_GATE;
    if (has(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

/* category_is_attn_v: the tensors that get attn_v's treatment */
static bool cat_is_attn_v(enum category c) {
    return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

/* ggml_n_dims: trailing dims of size 1 do not count */
static int n_dims_of(const int64_t ne[4]) {
    for (int i = 3; i >= 1; i--)
        if (ne[i] > 1) return i + 1;
    return 1;
}

/* tensor_allows_quantization: names llama.cpp never quantizes */
static bool allows_quantization(const char *name, const int64_t ne[4], const char *arch,
                                bool leave_output) {
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    static const char *const never_glm5_next[] = {
        "hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj", "indexer_compressor_gate",
        "indexer_compressor_ape", "ssm_f_a.weight", "ssm_f_b.weight", "ssm_g_a.weight",
        "ssm_g_b.weight", "ssm_beta.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight",
        "attn_v_b.weight",
    };
    if (n_dims_of(ne) < 2) return false;
    size_t len = strlen(name);
    if (len < 6 || strcmp(name + len - 6, "weight") != 0) return false;
    if (leave_output && strcmp(name, "output.weight") == 0) return false;
    /* LLM_TN(arch)(POS_EMBD / TOKEN_TYPES, "weight") name the same for every arch */
    if (strcmp(name, "position_embd.weight") == 0 || strcmp(name, "token_types.weight") == 0)
        return false;
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (has(name, never[i])) return false;
    if (strcmp(arch, "glm5-next") == 0)
        for (size_t i = 0; i < sizeof never_glm5_next / sizeof never_glm5_next[0]; i++)
            if (has(name, never_glm5_next[i])) return false;
    return true;
}

/* ---- llama.cpp's choice (llama_tensor_get_type_impl) ---- */

/* llama_ftype values of the presets the rules below test */
enum {
    FT_Q4_0 = 2, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12,
    FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_M = 17, FT_IQ4_NL = 25,
    FT_IQ4_XS = 30, FT_MXFP4_MOE = 38, FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_IQ3_XS = 22, FT_IQ3_XXS = 23,
    FT_IQ1_S = 24, FT_IQ3_S = 26, FT_IQ3_M = 27, FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ1_M = 31, FT_TQ1_0 = 36,
    FT_TQ2_0 = 37, FT_Q2_K_S = 21, FT_Q2_0 = 41,
};

typedef struct state {
    const hfq_plan_model *model;
    const hfq_plan_opts *opts;
    uint32_t ftype;
    bool tied;              /* no output.weight: token_embd doubles as the output */
    bool is_70b;            /* llama.cpp's LLM_TYPE_70B */
    bool falcon;
    int64_t n_gqa;
    int64_t n_attention_wv, i_attention_wv;
    int64_t n_ffn_down, i_ffn_down;
    int64_t i_ffn_gate, i_ffn_up;  /* n_ffn_gate = n_ffn_up = n_ffn_down */
} state;

/* use_more_bits: the first and last eighth of the layers and every third in between */
static bool use_more_bits(int64_t i_layer, int64_t n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* The model types (load_arch_hparams per arch) for which llama.cpp sets LLM_TYPE_70B */
static bool model_is_70b(const hfq_plan_model *m) {
    if (strcmp(m->arch, "llama") == 0)
        return m->n_expert != 8 && m->n_layer == 80 && m->n_head != m->n_head_kv;
    if (strcmp(m->arch, "qwen2") == 0 || strcmp(m->arch, "deci") == 0 || strcmp(m->arch, "olmo") == 0)
        return m->n_layer == 80;
    if (strcmp(m->arch, "jais2") == 0) return m->n_layer == 68;
    return false;
}

static bool ftype_in(uint32_t ft, const uint32_t *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == ft) return true;
    return false;
}

/* layer_info: with experts, the layer comes from the name ("blk.N."), else
 * from the counter */
static int layer_of(const state *qs, const char *name, int64_t counter, int64_t *i_layer,
                    hfq_error *err) {
    int64_t n_expert = qs->model->n_expert > 1 ? qs->model->n_expert : 1;
    *i_layer = counter;
    if (n_expert > 1) {
        int l;
        if (sscanf(name, "blk.%d.", &l) != 1)
            return hfq_fail(err, name, "cannot tell the layer of this tensor");
        if (l < 0 || l >= qs->n_ffn_down)
            return hfq_fail(err, name, "layer %d out of range [0, %" PRId64 ")", l, qs->n_ffn_down);
        *i_layer = l;
    }
    return 0;
}

/* The ftypes of llama.cpp's 1- and 2-bit branch (IQ1_S/M, IQ2_XXS/XS/S/M). */
static bool ftype_iq12(uint32_t ft) {
    static const uint32_t list[] = {FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M};
    return ftype_in(ft, list, sizeof list / sizeof list[0]);
}

/* That branch, taken before the category rules: a handful of tensors get
 * more bits (IQ3_S for IQ2_S/M, else Q2_K; Q4_K for attn_v of GQA / MoE). */
static int llama_rule_iq12(state *qs, uint32_t t, const hfq_plan_tensor *tensor, enum category cat, uint32_t *out,
                           hfq_error *err) {
    const uint32_t ft = qs->ftype;
    const int64_t n_expert = qs->model->n_expert;
    const uint32_t bump = ft == FT_IQ2_S || ft == FT_IQ2_M ? GT_IQ3_S : GT_Q2_K;
    (void)tensor;
    (void)err;
    if (cat_is_attn_v(cat)) {
        t = qs->n_gqa >= 4 || n_expert >= 4 ? GT_Q4_K : bump;
        qs->i_attention_wv++;
    } else if (n_expert == 8 && cat == CAT_ATTN_K) {
        t = GT_Q4_K;
    } else if (cat == CAT_FFN_DOWN) {
        if (qs->i_ffn_down < qs->n_ffn_down / 8) t = bump;
        qs->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (n_expert == 8) t = GT_Q5_K;
        else if (ft == FT_IQ1_S || ft == FT_IQ1_M) t = GT_IQ2_XXS;
        else if (ft == FT_IQ2_S || ft == FT_IQ2_M) t = GT_IQ3_S;
    }
    *out = t;
    return 0;
}

/* ffn_gate / ffn_up: IQ3_XS takes IQ3_XXS for the middle three quarters of the layers. */
static int llama_rule_gate_up(state *qs, uint32_t t, const hfq_plan_tensor *tensor, int64_t *counter, uint32_t *out,
                              hfq_error *err) {
    int64_t il, nl = qs->n_ffn_down;
    if (layer_of(qs, tensor->name, *counter, &il, err) < 0) return -1;
    if (qs->ftype == FT_IQ3_XS && il >= nl / 8 && il < 7 * nl / 8) t = GT_IQ3_XXS;
    (*counter)++;
    *out = t;
    return 0;
}

static int llama_rule(state *qs, uint32_t t, const hfq_plan_tensor *tensor, enum category cat,
                      uint32_t *out, hfq_error *err) {
    const uint32_t ft = qs->ftype;
    const int64_t n_expert = qs->model->n_expert;
    if (cat == CAT_OUTPUT || (qs->tied && cat == CAT_TOKEN_EMBD)) {
        if (qs->opts->output_fmt >= 0) {
            t = (uint32_t)qs->opts->output_fmt;
        } else if (ft == FT_MXFP4_MOE) {
            t = GT_Q8_0;
        } else if (qs->falcon || tensor->ne[0] % hfq_fmt_block_size(t) != 0) {
            t = GT_Q8_0;
        } else if (ftype_iq12(ft) || ft == FT_IQ3_XXS) {
            t = GT_Q5_K;
        } else if (t != GT_Q8_0) {
            t = GT_Q6_K;
        }
    } else if (ft == FT_MXFP4_MOE) {
        /* experts (3-D) to MXFP4, the rest to Q8_0 */
        bool expert = cat == CAT_FFN_UP || cat == CAT_FFN_GATE || cat == CAT_FFN_DOWN;
        t = tensor->ne[2] > 1 && (strcmp(qs->model->arch, "bailingmoe3") != 0 || expert) ? GT_MXFP4 : GT_Q8_0;
    } else if (cat == CAT_TOKEN_EMBD) {
        /* (--token-embedding-type was taken before the rules) */
        if (ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ1_M) t = GT_Q2_K;
        else if (ft == FT_IQ2_S || ft == FT_IQ2_M || ft == FT_IQ3_XXS) t = GT_IQ3_S;
        else if (ft == FT_TQ1_0 || ft == FT_TQ2_0 || ft == FT_Q2_0) t = GT_Q4_K;
    } else if (ftype_iq12(ft)) {
        return llama_rule_iq12(qs, t, tensor, cat, out, err);
    } else if (cat_is_attn_v(cat)) {
        static const uint32_t more_bits[] = {FT_Q4_K_M, FT_Q5_K_M};
        if (ft == FT_Q2_K) t = qs->n_gqa >= 4 ? GT_Q4_K : GT_Q3_K;
        else if (ft == FT_Q2_K_S && qs->n_gqa >= 4) t = GT_Q4_K;
        else if (ft == FT_IQ3_XXS) t = qs->n_gqa >= 4 ? GT_Q4_K : !qs->opts->has_imatrix ? GT_IQ3_S : GT_IQ3_XXS;
        else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && qs->n_gqa >= 4) t = GT_Q4_K;
        else if (ft == FT_IQ3_M) t = GT_Q4_K;
        else if (ft == FT_Q3_K_M) t = qs->i_attention_wv < 2 ? GT_Q5_K : GT_Q4_K;
        else if (ft == FT_Q3_K_L) t = GT_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && qs->n_gqa >= 4) t = GT_Q5_K;
        else if (ftype_in(ft, more_bits, 2) && use_more_bits(qs->i_attention_wv, qs->n_attention_wv)) t = GT_Q6_K;
        else if (ft == FT_Q4_K_S && qs->i_attention_wv < 4) t = GT_Q5_K;
        /* 70B: attn_v is 8x smaller than attn_q, so more bits are nearly free */
        if (qs->is_70b && (t == GT_Q3_K || t == GT_Q4_K)) t = GT_Q5_K;
        if (n_expert == 8) t = GT_Q8_0;
        qs->i_attention_wv++;
        /* (llama.cpp's separate ATTENTION_QKV branch is never reached: attn_qkv
         * is attn_v-like and taken here first) */
    } else if (cat == CAT_ATTN_K || cat == CAT_ATTN_Q) {
        if (cat == CAT_ATTN_K && n_expert == 8) t = GT_Q8_0;
        else if (ft == FT_IQ3_XS) t = GT_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) t = GT_IQ2_S;
    } else if (cat == CAT_FFN_DOWN) {
        int64_t il, nl = qs->n_ffn_down;
        if (layer_of(qs, tensor->name, qs->i_ffn_down, &il, err) < 0) return -1;
        bool more = use_more_bits(il, nl);
        if (ft == FT_Q2_K) t = GT_Q3_K;
        else if (ft == FT_Q2_K_S) t = il < nl / 8 ? GT_Q4_K : t;
        else if (ft == FT_IQ3_XXS && !qs->opts->has_imatrix) t = il < nl / 8 ? GT_Q4_K : GT_Q3_K;
        else if (ft == FT_Q3_K_M) t = il < nl / 16 ? GT_Q5_K : !qs->falcon || more ? GT_Q4_K : GT_Q3_K;
        else if (ft == FT_IQ3_M && (il < nl / 8 || (n_expert == 8 && more))) t = GT_Q4_K;
        else if (ft == FT_Q3_K_L) t = qs->falcon ? GT_Q4_K : GT_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (qs->falcon) t = il < nl / 16 ? GT_Q6_K : more ? GT_Q5_K : GT_Q4_K;
            else if (more) t = GT_Q6_K;
        } else if (il < nl / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !qs->opts->has_imatrix) t = GT_Q5_K;
        else if (ft == FT_Q5_K_M && more) t = GT_Q6_K;
        else if (ft == FT_Q4_K_S && !qs->falcon && il < nl / 8) t = GT_Q5_K;
        else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && qs->opts->has_imatrix && il < nl / 8)
            t = ft == FT_Q4_0 ? GT_Q4_1 : GT_Q5_1;
        qs->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUTPUT) {
        static const uint32_t moe8[] = {FT_Q2_K, FT_IQ3_XS, FT_IQ3_XXS, FT_Q3_K_S, FT_Q3_K_M, FT_IQ4_NL,
                                        FT_Q4_K_S, FT_Q4_K_M, FT_IQ3_S, FT_IQ3_M, FT_IQ4_XS};
        if (!qs->falcon) {
            if (n_expert == 8) {
                if (ftype_in(ft, moe8, sizeof moe8 / sizeof moe8[0])) t = GT_Q5_K;
            } else if (ft == FT_Q2_K) t = GT_Q3_K;
            else if (ft == FT_IQ3_XXS) t = GT_IQ3_S;
            else if (ft == FT_Q3_K_M) t = GT_Q4_K;
            else if (ft == FT_Q3_K_L) t = GT_Q5_K;
            else if (ft == FT_IQ3_M) t = GT_Q4_K;
        } else if (ft == FT_Q3_K_L) {
            t = GT_Q4_K;
        }
    } else if (cat == CAT_FFN_GATE) {
        return llama_rule_gate_up(qs, t, tensor, &qs->i_ffn_gate, out, err);
    } else if (cat == CAT_FFN_UP) {
        return llama_rule_gate_up(qs, t, tensor, &qs->i_ffn_up, out, err);
    }
    *out = t;
    return 0;
}

/* Our presets (NVFP4, INT8, FP8, MXFP4 for dense models): every linear
 * weight gets the base format; the embedding and the LM head stay at higher
 * precision (docs/quantize-tool.md). */
static uint32_t hfq_rule(const state *qs, uint32_t t, const hfq_plan_tensor *tensor, enum category cat) {
    bool head = cat == CAT_OUTPUT || cat == CAT_TOKEN_EMBD;
    if (cat == CAT_OUTPUT || (qs->tied && cat == CAT_TOKEN_EMBD))
        if (qs->opts->output_fmt >= 0) return (uint32_t)qs->opts->output_fmt;
    if (!head) return t;
    if (t == GT_MXFP4) return GT_Q8_0; /* as llama.cpp's MXFP4_MOE does for non-experts */
    return tensor->type == GT_BF16 ? GT_BF16 : GT_F16;
}

/* tensor_type_fallback: a format whose block does not divide the row length
 * is replaced by the nearest one that fits, or F16; UINT32_MAX for Q1_0,
 * which llama.cpp gives no fallback (it refuses the tensor). */
static uint32_t fallback(const hfq_plan_tensor *tensor, uint32_t t, hfq_plan_entry *e,
                         int64_t *n_fallback) {
    int64_t ncols = tensor->ne[0], qk = hfq_fmt_block_size(t);
    if (ncols % qk == 0) return t;
    uint32_t r;
    switch (t) {
    case GT_IQ1_S: case GT_IQ1_M: case GT_IQ2_XXS: case GT_IQ2_XS: case GT_IQ2_S: case GT_IQ3_XXS: case GT_IQ3_S:
    case GT_IQ4_XS: r = GT_IQ4_NL; break;
    case GT_Q2_0: case GT_Q2_K: case GT_Q3_K: case GT_TQ1_0: case GT_TQ2_0: r = GT_Q4_0; break;
    case GT_Q4_K: r = GT_Q5_0; break;
    case GT_Q5_K: r = GT_Q5_1; break;
    case GT_Q6_K: r = GT_Q8_0; break;
    case GT_NVFP4: r = GT_MXFP4; break; /* ours: the 4-bit format with 32-blocks */
    case GT_Q1_0: return UINT32_MAX;
    default: r = t; break;              /* 32-blocks: only F16 is left */
    }
    bool f16 = ncols % hfq_fmt_block_size(r) != 0;
    if (f16) r = GT_F16;
    size_t len = strlen(e->note);
    snprintf(e->note + len, sizeof e->note - len, "%sne[0]=%" PRId64 " not a multiple of %" PRId64
             " (%s): %s%s", len ? "; " : "", ncols, qk, hfq_fmt_name(t), hfq_fmt_name(r),
             f16 ? " (unusual shape)" : "");
    (*n_fallback)++;
    return r;
}

/* llama_tensor_get_type: options, overrides, then the preset's rule and the fallback */
static int choose(state *qs, int64_t index, const hfq_plan_tensor *tensor, enum category cat,
                  hfq_plan_entry *e, int64_t *n_fallback, hfq_error *err) {
    const hfq_plan_opts *o = qs->opts;
    const preset_info *p = &presets[o->preset];
    uint32_t t = p->fmt;
    size_t nlen = sizeof e->note;
    const hfq_plan_override *match = NULL;
    for (int i = 0; i < o->n_overrides && !match; i++)
        if (regexec(&o->overrides[i].re, tensor->name, 0, NULL, 0) == 0) match = &o->overrides[i];

    if (o->token_embd_fmt >= 0 && cat == CAT_TOKEN_EMBD &&
        !(strcmp(tensor->name, "per_layer_token_embd.weight") == 0 && match)) {
        t = (uint32_t)o->token_embd_fmt;
        snprintf(e->note, nlen, "--token-embedding-type %s", hfq_fmt_name(t));
    } else if (o->output_fmt >= 0 && cat == CAT_OUTPUT) {
        t = (uint32_t)o->output_fmt;
        snprintf(e->note, nlen, "--output-tensor-type %s", hfq_fmt_name(t));
    } else if (o->choose) {
        hfq_fmt_spec spec = {t, HFQ_SCALE_PER_ROW};
        if (o->choose(o->choose_ctx, index, tensor, cat == CAT_OUTPUT || (qs->tied && cat == CAT_TOKEN_EMBD),
                      &spec, e->note, nlen, err) < 0)
            return -1;
        const char *why = hfq_fmt_spec_problem(&spec, tensor->ne[0]);
        if (why) return hfq_fail(err, tensor->name, "%s", why);
        t = spec.fmt;
        e->scale_group = spec.scale_group;
    } else if (hfq_fmt_is_quantized(t)) {
        if (match) {
            snprintf(e->note, nlen, "--tensor-type %s=%s", match->pattern, hfq_fmt_name(match->fmt));
            t = match->fmt;
        } else if (!o->pure) {
            if (p->fam == FAM_LLAMA) {
                if (llama_rule(qs, t, tensor, cat, &t, err) < 0) return -1;
            } else {
                t = hfq_rule(qs, t, tensor, cat);
            }
        }
    }
    /* llama.cpp applies the fallback only to the preset/override path; a type
     * from the two options above that cannot hold the shape would fail there,
     * so it gets the same fallback here (and a note). */
    e->fmt = fallback(tensor, t, e, n_fallback);
    if (e->fmt == UINT32_MAX)
        return hfq_fail(err, tensor->name, "ne[0]=%" PRId64 " is not a multiple of %" PRId64 " and %s has no fallback type "
                        "(llama-quantize refuses it too)", tensor->ne[0], hfq_fmt_block_size(t), hfq_fmt_name(t));
    if (!o->choose && (e->fmt == HFQ_FMT_FP8_E4M3 || e->fmt == HFQ_FMT_FP8_E5M2)) e->scale_group = o->fp8_scale_group;
    return 0;
}

/* weight_name_comparer: llama.cpp visits tensors by layer ("blk.N.", others
 * first), then by name; its counters depend on that order */
typedef struct order_key {
    int layer;
    const char *name;
    int64_t index;
} order_key;

static int cmp_llama_order(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int check_tensor(const hfq_plan_tensor *t, int64_t *in_nbytes, hfq_error *err) {
    if (!t->name) return hfq_fail(err, "plan", "tensor without a name");
    for (int d = 0; d < 4; d++)
        if (t->ne[d] < 1) return hfq_fail(err, t->name, "dimension %d is %" PRId64, d, t->ne[d]);
    int64_t row = ggml_row_size(t->type, t->ne[0]);
    if (row < 0) return hfq_fail(err, t->name, "type %u cannot hold a row of %" PRId64, t->type, t->ne[0]);
    /* every size stays far below INT64_MAX, so totals cannot overflow either */
    const int64_t limit = INT64_MAX / 1024;
    int64_t nrows = 1;
    for (int d = 1; d < 4; d++) {
        if (nrows > limit / t->ne[d]) return hfq_fail(err, t->name, "too large");
        nrows *= t->ne[d];
    }
    if (row > 0 && nrows > limit / row / 8) return hfq_fail(err, t->name, "too large");
    *in_nbytes = nrows * row;
    return 0;
}

static int plan_one(state *qs, const hfq_plan_tensor *tensors, int64_t i, hfq_plan *plan, hfq_error *err) {
    const hfq_plan_tensor *t = &tensors[i];
    hfq_plan_entry *e = &plan->entries[i];
    int64_t in_nbytes = 0;
    if (check_tensor(t, &in_nbytes, err) < 0) return -1;
    e->fmt = t->type;
    if (allows_quantization(t->name, t->ne, qs->model->arch, qs->opts->leave_output) &&
        choose(qs, i, t, category_of(t->name), e, &plan->n_fallback, err) < 0)
        return -1;
    e->convert = e->fmt != t->type;
    const hfq_fmt_spec spec = {e->fmt, e->scale_group};
    e->nbytes = e->convert ? hfq_fmt_tensor_nbytes(&spec, qs->model->arch, t->name, t->ne) : in_nbytes;
    plan->n_elements += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    plan->in_nbytes += in_nbytes;
    plan->out_nbytes += e->nbytes;
    return 0;
}

int hfq_plan_build(hfq_plan *plan, const hfq_plan_model *model, const hfq_plan_tensor *tensors,
                   int64_t n_tensors, const hfq_plan_opts *opts, hfq_error *err) {
    memset(plan, 0, sizeof *plan);
    if ((unsigned)opts->preset >= HFQ_PRESET_COUNT) return hfq_fail(err, "plan", "unknown preset");
    if (model->n_layer < 1) return hfq_fail(err, "plan", "the model has no layers (block_count)");
    if (n_tensors < 0 || (uint64_t)n_tensors > SIZE_MAX / sizeof(order_key))
        return hfq_fail(err, "plan", "bad tensor count");
    state qs = {
        .model = model, .opts = opts, .ftype = presets[opts->preset].file_type, .tied = true,
        .is_70b = model_is_70b(model), .falcon = strcmp(model->arch, "falcon") == 0,
        .n_gqa = model->n_head_kv > 0 ? model->n_head / model->n_head_kv : 0,
        .n_ffn_down = model->n_layer,
    };
    /* init_quantize_state_counters */
    for (int64_t i = 0; i < n_tensors; i++) {
        enum category c = tensors[i].name ? category_of(tensors[i].name) : CAT_OTHER;
        if (c == CAT_OUTPUT) qs.tied = false;
        if (cat_is_attn_v(c)) qs.n_attention_wv++;
    }
    order_key *order = malloc((size_t)(n_tensors ? n_tensors : 1) * sizeof *order);
    plan->entries = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *plan->entries);
    if (!order || !plan->entries) {
        free(order);
        hfq_plan_free(plan);
        return hfq_fail(err, "plan", "out of memory");
    }
    plan->n = n_tensors;
    snprintf(plan->arch, sizeof plan->arch, "%s", model->arch);
    for (int64_t i = 0; i < n_tensors; i++) {
        int l = -1;
        const char *name = tensors[i].name ? tensors[i].name : "";
        if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
        order[i] = (order_key){l, name, i};
    }
    qsort(order, (size_t)n_tensors, sizeof *order, cmp_llama_order);
    for (int64_t k = 0; k < n_tensors; k++) {
        int64_t i = order[k].index;
        if (plan_one(&qs, tensors, i, plan, err) < 0) {
            free(order);
            hfq_plan_free(plan);
            return -1;
        }
    }
    free(order);
    return 0;
}

void hfq_plan_free(hfq_plan *plan) {
    free(plan->entries);
    memset(plan, 0, sizeof *plan);
}
