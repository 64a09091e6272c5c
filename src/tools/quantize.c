/* quantize - convert a GGUF model's tensors to a quantization preset. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "kernels/model.h"
#include "quant/fp4.h"
#include "quant/hadamard.h"
#include "quant/plan.h"
#include "quant/recipe.h"
#include "src/cli/cli.h"
#include "src/common/output.h"
#include "src/export/ct_export.h"
#include "src/quantize/block_rotate.h"
#include "src/quantize/calib_session.h"
#include "src/quantize/codec.h"
#include "src/quantize/driver.h"
#include "src/quantize/mixed_run.h"
#include "src/quantize/rotate.h"

#define MAX_OVERRIDES 64
#define MAX_CANDIDATES 64

static void usage(FILE *out) {
    fprintf(out,
        "usage: quantize IN.gguf OUT.gguf PRESET [options]\n"
        "       quantize IN.gguf PRESET --dry-run [options]\n"
        "       quantize IN.gguf [OUT.gguf] --recipe R.json | --target-bpw B | --target-size S [options]\n"
        "       quantize IN.gguf --calibration-file TEXT --save-stats FILE [calibration options]\n"
        "       quantize IN.gguf --export compressed-tensors OUT_DIR CT_PRESET [options]\n"
        "\n"
        "Converts the tensors of IN.gguf to PRESET, choosing each tensor's format\n"
        "exactly as llama.cpp's llama-quantize does for its presets.\n"
        "\n"
        "presets: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q2_K_S Q3_K_S Q3_K_M (Q3_K) Q3_K_L\n"
        "         Q4_K_S Q4_K_M (Q4_K) Q5_K_S Q5_K_M (Q5_K) Q6_K IQ4_NL IQ4_XS MXFP4_MOE\n"
        "         MXFP4 NVFP4 INT8 FP8_E4M3 FP8_E5M2 IQ3_S IQ3_M IQ3_XS IQ3_XXS IQ2_XXS IQ2_XS\n"
        "         IQ2_S IQ2_M IQ1_S IQ1_M TQ1_0 TQ2_0 Q1_0 Q2_0 (see docs/quantize-tool.md; IQ3_XXS\n"
        "         to IQ1_M need importance data, as in llama-quantize)\n"
        "\n"
        "options:\n"
        "  --dry-run                  print the plan (every tensor and the totals); write nothing\n"
        "  --json                     print the plan and totals as JSON on stdout\n"
        "  --threads N                threads for quantizing (default: all); output is the same for any N\n"
        "  --tensor-type REGEX=FMT    tensors whose name matches REGEX (POSIX extended, case-insensitive)\n"
        "                             get FMT instead; repeatable, the first match wins\n"
        "  --token-embedding-type FMT format of token_embd.weight\n"
        "  --output-tensor-type FMT   format of output.weight (and of a tied token_embd.weight)\n"
        "  --pure                     no per-tensor bumps: the preset's base format everywhere\n"
        "  --leave-output-tensor      do not quantize output.weight\n"
        "  --allow-requantize         accept tensors that are already quantized\n"
        "  --rotate                   first rotate the residual stream by a randomized Hadamard matrix\n"
        "                             folded into the weights (norm weights folded first; the same function\n"
        "                             in F32; F32/F16/BF16 input; llama qwen2 qwen3 qwen3moe phi3 gemma);\n"
        "                             calibration and quantization then read the rotated model; with\n"
        "                             PRESET F32 it writes just the rotated model (docs/calibration.md)\n"
        "  --block-rotate [N]         NVFP4, MXFP4, MXFP4_MOE (and F32/F16/BF16): rotate each linear weight's\n"
        "                             rows by a Walsh-Hadamard matrix per block of N inputs (a power of two;\n"
        "                             default the format's block, 16 NVFP4, 32 MXFP4 and float presets), which\n"
        "                             hfq's runner undoes on its inputs (hfq.block_rotate keys); calibration\n"
        "                             runs the rotated model. Ours only: llama.cpp and --export compute\n"
        "                             another function (docs/calibration.md \"Block rotations\")\n"
        "  --quiet                    no progress lines (on a terminal one redrawn line, elsewhere one\n"
        "                             every 5 s and one at the end of each phase)\n"
        "  -h, --help                 this help\n"
        "  --version                  the tool's version\n"
        "\n"
        "calibration (docs/calibration.md):\n"
        "  --calibration-file TEXT    run IN.gguf over TEXT (plain or gzip) and use the activation statistics\n"
        "  --calib-ctx N              tokens per chunk (default 512); with --calib-lines the most per line\n"
        "  --calib-chunks N           use at most N chunks (lines); default all\n"
        "  --calib-lines              one sample per line, each its own sequence with BOS\n"
        "  --calib-chat               with --calib-lines: each line as a user turn of the chat template\n"
        "  --calib-all-experts        mixtures of experts: every expert's statistics over every token (the\n"
        "                             router still combines the routed ones: the same model)\n"
        "  --calib-samples N          activation rows kept per layer input (--awq, --smoothquant-alpha auto; default 64)\n"
        "  --save-stats FILE          write the statistics (llama.cpp's imatrix GGUF plus our tensors)\n"
        "  --stats FILE               read statistics written before (ours or llama-imatrix's)\n"
        "  uses of the statistics: importance always (unless --no-importance); with no other use named,\n"
        "  also --gptq with --calibration-file for Q2_K, Q3_K_*, Q4_K_*, Q5_K_*, Q6_K, Q4_0, Q4_1, Q5_0,\n"
        "  Q5_1, Q8_0, IQ4_NL, IQ4_XS, NVFP4, MXFP4 and the W4A16 exports, SmoothQuant (alpha searched)\n"
        "  for NVFP4 otherwise (--stats) and --awq for INT8 (where each measured best; docs/calibration.md);\n"
        "  --act-scales alone keeps the --gptq default, not the rescalings\n"
        "  --importance               importance-weighted rounding (llama.cpp's imatrix), scale searches\n"
        "  --no-importance            round without the importance rows\n"
        "  --act-scales               static activation scales <name>.input_scale for INT8, FP8, NVFP4\n"
        "  --act-percentile P         percentile of per-token maxima for --act-scales (default 100)\n"
        "  --no-act-search            NVFP4 W4A4: activation scales max -> 6 per 16 values (NVIDIA's rule)\n"
        "                             instead of the least-error code near max -> 6 ... max -> 4, which\n"
        "                             --act-scales GGUF files ask the runner for (hfq.act_quant nvfp4_search)\n"
        "  --smoothquant              SmoothQuant scales folded into the preceding norm / rows\n"
        "  --smoothquant-alpha A      migration strength in [0, 1] (default 0.5), or auto: searched per layer\n"
        "  --awq                      AWQ activation-aware scales (grid search) folded the same way\n"
        "  --awq-grid N               grid points of the exponent in [0, 1) (default 20)\n"
        "  --awq-format FMT           format AWQ searches with (default: each tensor's planned format)\n"
        "  --kv-scales                static FP8 KV-cache scales (hfq.kv_cache.k_scale / v_scale keys: per\n"
        "                             layer max |K| after rope and max |V| over 448) for --kv-type fp8_*\n"
        "  --calib-kv-type K[,V]      KV cache formats of the calibration run (default f16; ppl-eval's names)\n"
        "  --gptq                     GPTQ: error-feedback rounding with each layer input's Hessian (needs\n"
        "                             --calibration-file; dense weights, not experts nor token_embd)\n"
        "  --gptq-damp F              damping, times the mean of the Hessian's diagonal (default 0.01)\n"
        "  --gptq-block N             columns per lazy batch, rounded up to the format's block (default 128)\n"
        "  --gptq-memory S            Hessian memory per calibration pass (default 4G; suffix K, M, G, T;\n"
        "                             at least one layer's; more layers than fit take more passes)\n"
        "  --gptq-sequential          each layer's Hessians on the model with the earlier layers quantized\n"
        "                             (one calibration pass a layer)\n"
        "  --gptq-act-order           columns in descending Hessian-diagonal order, block scales chosen\n"
        "                             first from the original weights (static groups)\n"
        "  --gptq-quantized-inputs    with --act-scales, GPTQ's target takes in the runner's rounding of\n"
        "                             the inputs: W + W D (H + damping)^-1, D = sum (x - xq) x^T (one more\n"
        "                             calibration pass; paid on the fixtures, not on Gemma 3 270M)\n"
        "\n"
        "export for serving engines (docs/export.md):\n"
        "  --export compressed-tensors OUT_DIR\n"
        "                             write a Hugging Face folder (config.json with quantization_config,\n"
        "                             safetensors) that vLLM, SGLang and transformers load; CT_PRESET:\n"
        "                             FP8 (static activations: --act-scales), FP8_DYNAMIC, FP8_BLOCK,\n"
        "                             W8A8 (INT8; static with --act-scales), NVFP4 (W4A4: --act-scales),\n"
        "                             NVFP4A16, W4A16, W4A16_ASYM (INT4 in groups of 128, quantized by the\n"
        "                             export, importance-weighted with calibration, GPTQ-rounded with\n"
        "                             --calibration-file; docs/export.md);\n"
        "                             or --recipe / a budget instead of CT_PRESET\n"
        "  --tokenizer-from DIR       copy the tokenizer files of DIR into OUT_DIR (without it they are\n"
        "                             rebuilt from the GGUF: byte-level BPE llama-bpe / qwen2, or\n"
        "                             SentencePiece-style BPE with merges; others are refused)\n"
        "  --no-tokenizer             write no tokenizer files\n"
        "  --export-shard-size S      tensor bytes per safetensors file (default 4G; suffix K, M, G, T)\n"
        "\n"
        "mixed precision (docs/mixed.md; these replace PRESET):\n"
        "  --recipe FILE              rules giving tensors formats and granularities (JSON)\n"
        "  --target-bpw B             measured allocation: least measured error within B bits per weight\n"
        "  --target-size S            ... within S bytes of tensor data (suffix K, M, G, T: powers of 1024)\n"
        "  measuring uses the calibration statistics (--calibration-file TEXT or --stats FILE, with\n"
        "  --calib-ctx; --calib-chunks defaults to 64 here), which also serve the rounding as with a\n"
        "  PRESET; --measure-text/-stats/-ctx/-chunks are older names of those four options\n"
        "  --measurements FILE        measured errors saved earlier (no measuring)\n"
        "  --save-measurements FILE   save the errors measured now (alone: measure only, no OUT.gguf)\n"
        "  --measure-kl-chunks N      chunks of the KL probe that calibrates each tensor's error\n"
        "                             (default 4; 0: output errors only)\n"
        "  --candidates LIST          formats to measure and choose from, e.g. q4_K,q6_K,int8:g64\n"
        "                             (default " HFQ_MIXED_DEFAULT_CANDIDATES ")\n"
        "\n"
        "FMT: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs\n"
        "     iq3_xxs iq3_s iq2_xxs iq2_xs iq2_s iq1_s iq1_m tq1_0 tq2_0 q1_0 q2_0 mxfp4 nvfp4 int8\n"
        "     fp8_e4m3 fp8_e5m2\n"
        "exit status: 0 ok, 1 failure, 2 usage (also an output that is, or links to, an input or another\n"
        "             output, a folder, or lies in a missing folder: refused before any work)\n");
    /* (a build lacking a preset's format plans it and refuses the real run) */
    bool any = false;
    for (int p = 0; p < HFQ_PRESET_COUNT; p++)
        if (!hfq_codec_can_encode(hfq_preset_default_fmt((hfq_preset)p))) {
            fprintf(out, "%s %s", any ? "" : "\nplanned only (--dry-run), their formats are not in this build:",
                    hfq_preset_name((hfq_preset)p));
            any = true;
        }
    if (any) fputc('\n', out);
}

typedef struct args {
    const char *in, *out;
    hfq_quantize_opts q;
    hfq_calib_opts calib;
    bool dry_run, json, calibrate_only, quiet;
    bool rotate;                    /* --rotate (src/quantize/rotate.h) */
    int64_t block_rotate;           /* --block-rotate N (src/quantize/block_rotate.h); -1: none, 0: the format's */
    bool no_importance, uses_named; /* --no-importance; a use named (else the preset's default) */
    bool no_act_search;             /* --no-act-search */
    bool act_scales_only;           /* --act-scales with no rounding use named */
    bool gptq_left_out;             /* the preset's default GPTQ, dropped for a statistics file */
    hfq_progress progress;
    hfq_plan_override overrides[MAX_OVERRIDES];
    const char *override_args[MAX_OVERRIDES];
    /* mixed precision (docs/mixed.md) */
    const char *recipe, *meas_in, *meas_out;
    double target_bpw;
    int64_t target_size, measure_kl_chunks;
    hfq_fmt_spec candidates[MAX_CANDIDATES];
    int n_candidates;
    /* --export (docs/export.md): a.out is then the GGUF made in the folder's temporary folder */
    const char *export_dir, *tokenizer_from;
    bool no_tokenizer;
    const hfq_ct_preset *ct;
    int64_t shard_size;
} args;

/* A usage error: one line on stderr (src/cli/cli.h); -1 for the parser. */
#define bad_usage(...) (hfq_cli_usage("quantize", __VA_ARGS__), -1)

/* Every option, for the nearest one to an unknown one. */
static const char *const known_options[] = {
    "--dry-run", "--json", "--threads", "--tensor-type", "--token-embedding-type", "--output-tensor-type", "--pure",
    "--leave-output-tensor", "--allow-requantize", "--rotate", "--block-rotate", "--quiet", "--help", "--version", "--calibration-file",
    "--calib-ctx", "--calib-chunks", "--calib-lines", "--calib-chat", "--calib-all-experts", "--calib-samples",
    "--save-stats", "--stats", "--kv-scales", "--calib-kv-type", "--gptq", "--gptq-damp", "--gptq-block",
    "--gptq-memory", "--gptq-sequential", "--gptq-act-order", "--gptq-quantized-inputs",
    "--importance", "--no-importance", "--act-scales", "--no-act-search", "--act-percentile", "--smoothquant", "--smoothquant-alpha",
    "--awq", "--awq-grid", "--awq-format", "--recipe", "--target-bpw", "--target-size", "--measurements",
    "--save-measurements", "--measure-kl-chunks", "--candidates", "--measure-text", "--measure-stats",
    "--measure-ctx", "--measure-chunks", "--export", "--tokenizer-from", "--no-tokenizer", "--export-shard-size", NULL};

static int parse_fmt_arg(const char *opt, const char *val, int *out) {
    if (!val) return bad_usage("%s needs a format", opt);
    *out = hfq_fmt_from_name(val);
    return *out < 0 ? bad_usage("unknown format '%s'", val) : 0;
}

/* ---- mixed precision options (docs/mixed.md) ---- */

static bool mixed_mode(const args *a) {
    return a->recipe || a->target_bpw > 0 || a->target_size > 0 || a->meas_out;
}

/* "4.2G" -> bytes (K, M, G, T: powers of 1024); -1 when malformed. */
static int64_t parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, *end) : NULL;
    if (*end && (!u || end[1] != '\0')) return -1;
    if (u) v *= (double)((int64_t)1 << (10 * (u - units + 1)));
    return v >= 1 && v < 9e18 ? (int64_t)v : -1;
}

static int parse_candidates(const char *list, args *a) {
    char buf[1024];
    if (strlen(list) >= sizeof buf) return bad_usage("%s", "--candidates: list too long");
    snprintf(buf, sizeof buf, "%s", list);
    a->n_candidates = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        hfq_fmt_spec *c = &a->candidates[a->n_candidates];
        if (a->n_candidates == MAX_CANDIDATES) return bad_usage("%s", "--candidates: more than 64 formats");
        if (hfq_fmt_spec_parse(tok, c) < 0) return bad_usage("--candidates: bad format '%s' (FMT or FMT:tensor|channel|gN)", tok);
        /* the measure goes row by row, and a block scale spans 128 rows: it could never be chosen */
        if (c->scale_group == HFQ_SCALE_PER_BLOCK)
            return bad_usage("--candidates: '%s': block scales cannot be measured (give them by a recipe rule)", tok);
        if (!hfq_codec_can_encode(c->fmt)) return bad_usage("--candidates: format '%s' is not available in this build", tok);
        a->n_candidates++;
    }
    return a->n_candidates ? 0 : bad_usage("%s", "--candidates needs at least one format");
}

/* How many arguments an option of this block took (1 or 2); 0 when s is
 * none of them; -1 on bad usage. */
static int parse_mixed_arg(const char *s, const char *next, args *a) {
    const char **path = strcmp(s, "--recipe") == 0 ? &a->recipe
                        : strcmp(s, "--measurements") == 0 ? &a->meas_in
                        : strcmp(s, "--save-measurements") == 0 ? &a->meas_out : NULL;
    char *end = NULL;
    if (path) {
        if (!next) return bad_usage("%s needs a file", s);
        *path = next;
    } else if (strcmp(s, "--measure-kl-chunks") == 0) {
        long long v = next ? strtoll(next, &end, 10) : 0;
        if (!next || *end || v < 0 || v > (1 << 24)) return bad_usage("%s needs a count up to 16777216", s);
        a->measure_kl_chunks = v;
    } else if (strcmp(s, "--target-bpw") == 0) {
        double v = next ? strtod(next, &end) : 0;
        if (!next || *end || !(v > 0 && v <= 64)) return bad_usage("--target-bpw needs bits per weight in (0, 64], got '%s'", next ? next : "");
        a->target_bpw = v;
    } else if (strcmp(s, "--target-size") == 0) {
        if (!next || (a->target_size = parse_size(next)) < 0) return bad_usage("--target-size needs a size such as 4.2G, got '%s'", next ? next : "");
    } else if (strcmp(s, "--candidates") == 0) {
        if (!next) return bad_usage("%s needs a list of formats", s);
        if (parse_candidates(next, a) < 0) return -1;
    } else {
        return 0;
    }
    return 2;
}

/* --export and its options: how many arguments one took (1 to 3), 0 when s
 * is none of them, -1 on bad usage. */
static int parse_export_arg(const char *s, const char *next, const char *next2, args *a) {
    if (strcmp(s, "--export") == 0) {
        if (!next || strcmp(next, "compressed-tensors") != 0)
            return bad_usage("--export needs a format: compressed-tensors, got '%s'", next ? next : "");
        if (!next2) return bad_usage("%s", "--export compressed-tensors needs OUT_DIR");
        a->export_dir = next2;
        return 3;
    }
    if (strcmp(s, "--tokenizer-from") == 0) {
        if (!next) return bad_usage("%s needs a folder", s);
        a->tokenizer_from = next;
        return 2;
    }
    if (strcmp(s, "--no-tokenizer") == 0) {
        a->no_tokenizer = true;
        return 1;
    }
    if (strcmp(s, "--export-shard-size") == 0) {
        if (!next || (a->shard_size = parse_size(next)) < 0)
            return bad_usage("--export-shard-size needs a size such as 4G, got '%s'", next ? next : "");
        return 2;
    }
    return 0;
}

/* Positionals and combinations with --export: IN CT_PRESET, or IN alone
 * with a recipe or budget. */
static int check_export_args(args *a, const char *const *pos, int n_pos) {
    if (!a->export_dir) {
        if (a->tokenizer_from || a->no_tokenizer || a->shard_size)
            return bad_usage("%s", "--tokenizer-from/--no-tokenizer/--export-shard-size need --export");
        return 0;
    }
    if (a->tokenizer_from && a->no_tokenizer) return bad_usage("%s", "--tokenizer-from and --no-tokenizer exclude each other");
    if (a->dry_run || a->json) return bad_usage("%s", "--export writes a folder: no --dry-run or --json");
    if (a->meas_out && !a->recipe && a->target_bpw <= 0 && a->target_size <= 0)
        return bad_usage("%s", "--save-measurements alone only measures: nothing to export");
    if (mixed_mode(a)) {
        if (n_pos != 1) return bad_usage("%s", "expected IN.gguf --export compressed-tensors OUT_DIR (--recipe and "
                                               "--target-* replace CT_PRESET)");
        a->in = pos[0];
        return 0;
    }
    if (n_pos != 2) return bad_usage("%s", "expected IN.gguf --export compressed-tensors OUT_DIR CT_PRESET");
    if (!(a->ct = hfq_ct_preset_find(pos[1])))
        return bad_usage("unknown compressed-tensors preset '%s' (%s)", pos[1], hfq_ct_preset_names());
    a->in = pos[0];
    a->q.plan.preset = a->ct->preset;
    a->q.plan.fp8_scale_group = a->ct->fp8_block ? HFQ_SCALE_PER_BLOCK : HFQ_SCALE_PER_ROW;
    return 0;
}

/* The activation scales a compressed-tensors preset needs, once the uses are settled. */
static int check_export_acts(const args *a) {
    const bool act_scales = a->calib.uses.act_scales;
    if (a->ct->int4_group > 0 && (a->calib.uses.smoothquant || a->calib.uses.awq))
        return bad_usage("%s quantizes in the export, which takes importance rows only (no SmoothQuant or AWQ "
                         "folds yet)", a->ct->name);
    if (a->ct->int4_group > 0 && a->q.plan.n_overrides > 0)
        return bad_usage("%s keeps every weight for the export's INT4: --tensor-type has no effect", a->ct->name);
    if (a->ct->acts == HFQ_CT_ACTS_STATIC && !act_scales)
        return bad_usage("%s quantizes activations with static scales: give --act-scales (with --calibration-file or "
                         "--stats)", a->ct->name);
    if (a->ct->acts == HFQ_CT_ACTS_NONE && act_scales)
        return bad_usage("%s has no static activation scales: drop --act-scales", a->ct->name);
    return 0;
}

/* Positionals and combinations in mixed mode: IN [OUT]. */
static int check_mixed_args(args *a, const char *const *pos, int n_pos) {
    const bool target = a->target_bpw > 0 || a->target_size > 0;
    const bool source = a->calib.text_path || a->calib.stats_path;
    const bool measure_only = !a->recipe && !target;
    if (a->q.plan.n_overrides > 0 || a->q.plan.pure)
        return bad_usage("%s", "with --recipe or a budget, write --tensor-type and --pure as recipe rules");
    if (a->target_bpw > 0 && a->target_size > 0) return bad_usage("%s", "give --target-bpw or --target-size, not both");
    if (n_pos < 1 || n_pos > 2 || (n_pos == 2 && hfq_preset_from_name(pos[1]) >= 0))
        return bad_usage("%s", "expected IN.gguf [OUT.gguf] (--recipe and --target-* replace PRESET)");
    if (n_pos == 1 && !a->dry_run && !measure_only) return bad_usage("%s", "expected IN.gguf OUT.gguf (or --dry-run)");
    if (n_pos == 2 && measure_only) return bad_usage("%s", "--save-measurements alone only measures: no OUT.gguf");
    if ((target || a->meas_out) && !a->meas_in && !source)
        return bad_usage("%s", "a budget needs --measurements FILE, or --calibration-file / --stats to measure now");
    if (a->meas_out && !source) return bad_usage("%s", "--save-measurements needs --calibration-file or --stats");
    if (a->meas_out && a->meas_in) return bad_usage("%s", "--save-measurements saves what is measured now, not --measurements");
    a->in = pos[0];
    a->out = n_pos == 2 ? pos[1] : NULL;
    return 0;
}

/* The calibration options; 1 when s is none of them, -1 for bad usage. */
static int parse_calib_arg(const char *s, const char *next, args *a, int *i) {
    /* the names the mixed-precision options had before calibration was one */
    static const char *const aliases[][2] = {{"--measure-text", "--calibration-file"}, {"--measure-stats", "--stats"},
                                             {"--measure-ctx", "--calib-ctx"}, {"--measure-chunks", "--calib-chunks"}};
    for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
        if (strcmp(s, aliases[k][0]) == 0) s = aliases[k][1];
    hfq_calib_opts *c = &a->calib;
    hfq_calib_uses *u = &c->uses;
    hfq_error err = {{0}};
    int64_t v = 0;
    double d = 0.0;
    int rc = 0;
    if (strcmp(s, "--calib-lines") == 0) return c->text.lines = true, 0;
    if (strcmp(s, "--calib-chat") == 0) return c->text.chat = true, 0;
    if (strcmp(s, "--calib-all-experts") == 0) return c->all_experts = true, 0;
    if (strcmp(s, "--importance") == 0) return u->importance = true, 0;
    if (strcmp(s, "--no-importance") == 0) return a->no_importance = true, 0;
    if (strcmp(s, "--act-scales") == 0) return u->act_scales = true, 0;
    if (strcmp(s, "--no-act-search") == 0) return a->no_act_search = true, 0;
    if (strcmp(s, "--smoothquant") == 0) return u->smoothquant = true, 0;
    if (strcmp(s, "--awq") == 0) return u->awq = true, 0;
    if (strcmp(s, "--kv-scales") == 0) return u->kv_scales = true, 0;
    if (strcmp(s, "--gptq") == 0) return u->gptq = true, 0;
    if (strcmp(s, "--gptq-sequential") == 0) return c->gptq.sequential = true, 0;
    if (strcmp(s, "--gptq-act-order") == 0) return c->gptq.act_order = true, 0;
    if (strcmp(s, "--gptq-quantized-inputs") == 0) return c->gptq.quantized_inputs = true, 0;
    if (strcmp(s, "--calibration-file") == 0 || strcmp(s, "--save-stats") == 0 || strcmp(s, "--stats") == 0) {
        if (!next) return bad_usage("%s needs a file", s);
        *(s[2] == 'c' ? &c->text_path : s[3] == 'a' ? &c->save_path : &c->stats_path) = next;
    } else if (strcmp(s, "--calib-ctx") == 0) {
        if ((rc = hfq_cli_int(s, next, 2, 1 << 20, &v, &err)) == 0) c->text.n_ctx = v;
    } else if (strcmp(s, "--calib-chunks") == 0) {
        if ((rc = hfq_cli_int(s, next, 1, INT64_MAX, &v, &err)) == 0) c->text.max_chunks = v;
    } else if (strcmp(s, "--calib-samples") == 0) {
        if ((rc = hfq_cli_int(s, next, 0, 1 << 16, &v, &err)) == 0) c->sample_rows = v;
    } else if (strcmp(s, "--awq-grid") == 0) {
        if ((rc = hfq_cli_int(s, next, 1, 1000, &v, &err)) == 0) u->awq_grid = (int)v;
    } else if (strcmp(s, "--act-percentile") == 0) {
        if ((rc = hfq_cli_float(s, next, 1e-3, 100.0, &d, &err)) == 0) u->act_percentile = d;
    } else if (strcmp(s, "--smoothquant-alpha") == 0) {
        if (next && strcmp(next, "auto") == 0) u->smoothquant_alpha = -1.0;
        else if ((rc = hfq_cli_float(s, next, 0.0, 1.0, &d, &err)) == 0) u->smoothquant_alpha = d;
    } else if (strcmp(s, "--awq-format") == 0) {
        if (parse_fmt_arg(s, next, &u->awq_fmt) < 0) return -1;
    } else if (strcmp(s, "--gptq-damp") == 0) {
        if ((rc = hfq_cli_float(s, next, 1e-6, 10.0, &d, &err)) == 0) c->gptq.damp = d;
    } else if (strcmp(s, "--gptq-block") == 0) {
        if ((rc = hfq_cli_int(s, next, 1, 1 << 16, &v, &err)) == 0) c->gptq.batch = v;
    } else if (strcmp(s, "--gptq-memory") == 0) {
        if (!next || (c->gptq.memory = parse_size(next)) <= 0)
            return bad_usage("--gptq-memory needs a size such as 4G, got '%s'", next ? next : "");
    } else if (strcmp(s, "--calib-kv-type") == 0) {
        rc = hfq_cli_kv_types(s, next, &c->kv_k, &c->kv_v, &err);
    } else {
        return 1;
    }
    if (rc) return bad_usage("%s", err.msg);
    (*i)++;
    return 0;
}

/* Calibration options that only make sense together; mixed: with a recipe
 * or a budget (where the statistics are also measured on). */
static int check_calib_args(args *a, int n_pos, bool mixed) {
    hfq_calib_opts *c = &a->calib;
    hfq_calib_uses *u = &c->uses;
    const bool any_use =
        u->importance || u->act_scales || u->smoothquant || u->awq || u->kv_scales || u->gptq || a->no_importance;
    const bool gptq_opts = c->gptq.damp >= 0.0 || c->gptq.batch || c->gptq.memory;
    const bool gptq_methods = c->gptq.sequential || c->gptq.act_order;
    if (u->importance && a->no_importance) return bad_usage("%s", "--importance and --no-importance contradict");
    if (a->no_act_search && (!u->act_scales || a->export_dir))
        return bad_usage("%s", "--no-act-search is for --act-scales GGUF outputs (an export's engines round NVFP4 "
                               "activations max -> 6 anyway)");
    /* NVFP4 W4A4's activation scale codes searched: our runner's rule, so GGUF only */
    u->act_search = u->act_scales && !a->export_dir && !a->no_act_search;
    if (c->text_path && c->stats_path) return bad_usage("%s", "--calibration-file and --stats are alternatives");
    if (!c->text_path &&
        (c->text.lines || c->text.chat || c->text.n_ctx || c->text.max_chunks || c->sample_rows >= 0 || c->kv_k))
        return bad_usage("%s", "--calib-* options need --calibration-file");
    if (c->save_path && !c->text_path) return bad_usage("%s", "--save-stats needs --calibration-file");
    if (c->text.chat && !c->text.lines) return bad_usage("%s", "--calib-chat needs --calib-lines");
    if (!c->text_path && !c->stats_path) {
        if (any_use || gptq_opts || gptq_methods || c->gptq.quantized_inputs || u->act_percentile != 100.0 ||
            u->smoothquant_alpha != 0.5 || u->awq_grid || u->awq_fmt >= 0)
            return bad_usage("%s", "calibration uses need --calibration-file or --stats");
        return 0;
    }
    if (u->gptq && !c->text_path)
        return bad_usage("%s", "--gptq needs --calibration-file (statistics files hold no Hessians)");
    if (gptq_opts && !u->gptq) return bad_usage("%s", "--gptq-damp/--gptq-block/--gptq-memory need --gptq");
    if (gptq_methods && !u->gptq) return bad_usage("%s", "--gptq-sequential/--gptq-act-order need --gptq");
    if (gptq_methods && a->export_dir)
        return bad_usage("%s", "--gptq-sequential/--gptq-act-order are for GGUF outputs, not --export");
    if (c->gptq.quantized_inputs && (!u->act_scales || a->export_dir))
        return bad_usage("%s", "--gptq-quantized-inputs is for --act-scales GGUF outputs (their inputs are "
                               "quantized)");
    if (u->smoothquant && u->awq) return bad_usage("%s", "--smoothquant and --awq rescale the same channels: choose one");
    if (u->act_percentile < 100.0 && (u->smoothquant || u->awq))
        return bad_usage("%s", "--act-percentile below 100 cannot follow --smoothquant/--awq (its histogram is of "
                               "the unscaled activations)");
    if (u->act_percentile != 100.0 && !u->act_scales) return bad_usage("%s", "--act-percentile needs --act-scales");
    if (u->smoothquant_alpha != 0.5 && !u->smoothquant) return bad_usage("%s", "--smoothquant-alpha needs --smoothquant");
    if ((u->awq_grid || u->awq_fmt >= 0) && !u->awq) return bad_usage("%s", "--awq-grid/--awq-format need --awq");
    if (!mixed && n_pos == 1 && c->save_path && !a->dry_run) {
        if (any_use) return bad_usage("%s", "calibrating only (no OUT.gguf PRESET): nothing to use the statistics on");
        a->calibrate_only = true;
        return 0;
    }
    if (!mixed && a->dry_run && c->text_path) return bad_usage("%s", "--dry-run does not calibrate: use --stats");
    /* importance is the base every other use adds to (naming --awq must not
     * turn it off); with no use named the preset's default applies, which
     * needs the preset (settle_uses) */
    a->uses_named = u->importance || u->smoothquant || u->awq || u->gptq || (u->act_scales && a->no_importance);
    /* --act-scales says what to write, not how to round: the preset's
     * rounding default (GPTQ) still applies, without the rescalings, which
     * were measured without static activation scales (docs/calibration.md) */
    a->act_scales_only = u->act_scales && !a->uses_named;
    u->importance = !a->no_importance;
    a->q.plan.has_imatrix = u->importance;
    return 0;
}

/* The uses once the preset is known: with none named, the preset's default
 * (src/quantize/calib_session.h) less what --no-importance removes. */
static int settle_uses(args *a) {
    hfq_calib_uses *u = &a->calib.uses;
    if (!a->calib.text_path && !a->calib.stats_path) return 0;
    if (!a->uses_named) {
        hfq_calib_default_uses(a->q.plan.preset, u);
        /* the export's INT4 (W4A16*): GPTQ measured better on both fixtures (docs/calibration.md, "GPTQ") */
        u->gptq |= a->ct && a->ct->int4_group > 0;
        u->importance = !a->no_importance;
        a->gptq_left_out = u->gptq && !a->calib.text_path; /* a statistics file holds no Hessians */
        u->gptq &= !a->gptq_left_out;
        if (a->act_scales_only) u->fold_if_possible = HFQ_CALIB_FOLD_NONE;
    }
    /* the target of inputs as the runner quantizes them needs GPTQ: the
     * preset's default may have dropped it (a statistics file) */
    if (a->calib.gptq.quantized_inputs && !u->gptq)
        return bad_usage("%s", "--gptq-quantized-inputs needs GPTQ (--calibration-file; the preset's default or "
                               "--gptq)");
    if (!u->importance && !u->act_scales && !u->smoothquant && !u->awq && !u->kv_scales && !u->gptq &&
        u->fold_if_possible == HFQ_CALIB_FOLD_NONE)
        return bad_usage("--no-importance leaves no use of the statistics with %s (name --act-scales, --smoothquant "
                         "or --awq)", hfq_preset_name(a->q.plan.preset));
    return 0;
}

/* Returns 0, 1 for --help, -1 for bad usage. */
static int parse_args_inner(int argc, char **argv, args *a);

/* --rotate with the rest of the command line: the rotated model is made
 * here and read by everything after, so what was computed on the unrotated
 * one does not describe it. */
static int check_rotate_args(const args *a) {
    if (!a->rotate) return 0;
    if (a->dry_run) return bad_usage("%s", "--rotate writes the rotated model first: no --dry-run");
    if (a->calib.stats_path)
        return bad_usage("%s", "--rotate: --stats of the unrotated model do not describe the rotated one (give "
                               "--calibration-file)");
    if (a->meas_in) return bad_usage("%s", "--rotate: --measurements of the unrotated model do not describe the "
                                           "rotated one (measure now)");
    if (a->calibrate_only || (mixed_mode(a) && !a->out && !a->export_dir))
        return bad_usage("%s", "--rotate needs an output (OUT.gguf or --export)");
    return 0;
}

/* --block-rotate with the rest of the command line: as --rotate, the rotated
 * model is made first; SmoothQuant / AWQ fold their scales into the norms
 * before the rotation, where the rotated channels are not theirs; serving
 * engines would not rotate the inputs. */
static int check_block_rotate_args(args *a) {
    if (a->block_rotate < 0) return 0;
    static const hfq_preset ok[] = {HFQ_PRESET_NVFP4, HFQ_PRESET_MXFP4, HFQ_PRESET_MXFP4_MOE,
                                    HFQ_PRESET_F32,   HFQ_PRESET_F16,   HFQ_PRESET_BF16};
    bool known = false;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) known |= a->q.plan.preset == ok[i];
    if (a->export_dir)
        return bad_usage("%s", "--block-rotate: compressed-tensors has no rotations (vLLM would compute another "
                               "function): no --export");
    if (mixed_mode(a) || a->calibrate_only) return bad_usage("%s", "--block-rotate needs IN.gguf OUT.gguf PRESET");
    if (a->dry_run) return bad_usage("%s", "--block-rotate writes the rotated model first: no --dry-run");
    if (!known)
        return bad_usage("--block-rotate is for NVFP4, MXFP4, MXFP4_MOE (and F32, F16, BF16), not %s",
                         hfq_preset_name(a->q.plan.preset));
    if (a->calib.stats_path)
        return bad_usage("%s", "--block-rotate: --stats of the unrotated model do not describe the rotated one "
                               "(give --calibration-file)");
    if (a->calib.uses.smoothquant || a->calib.uses.awq)
        return bad_usage("%s", "--block-rotate: --smoothquant/--awq scale the unrotated channels (folded into the "
                               "norms before the rotation): not with rotations");
    a->calib.uses.fold_if_possible = HFQ_CALIB_FOLD_NONE;   /* the NVFP4 default's SmoothQuant, likewise */
    if (a->block_rotate == 0)
        a->block_rotate = a->q.plan.preset == HFQ_PRESET_NVFP4 ? HFQ_QK_NVFP4_SUB : HFQ_QK_MXFP4;
    return 0;
}

static int parse_args(int argc, char **argv, args *a) {
    int rc = parse_args_inner(argc, argv, a);
    if (rc == 0) rc = check_rotate_args(a);
    return rc == 0 ? check_block_rotate_args(a) : rc;
}

static int parse_args_inner(int argc, char **argv, args *a) {
    const char *pos[3];
    int n_pos = 0, used;
    hfq_plan_opts *p = &a->q.plan;
    p->overrides = a->overrides;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) return 1;
        if (strcmp(s, "--dry-run") == 0) a->dry_run = true;
        else if (strcmp(s, "--json") == 0) a->json = true;
        else if (strcmp(s, "--pure") == 0) p->pure = true;
        else if (strcmp(s, "--leave-output-tensor") == 0) p->leave_output = true;
        else if (strcmp(s, "--allow-requantize") == 0) a->q.allow_requantize = true;
        else if (strcmp(s, "--rotate") == 0) a->rotate = true;
        else if (strcmp(s, "--block-rotate") == 0) {
            a->block_rotate = 0;
            if (next && next[0] >= '0' && next[0] <= '9') {   /* N, never a file or preset name */
                char *end;
                long long v = strtoll(next, &end, 10);
                if (*end || !hfq_hadamard_fits(v, v))
                    return bad_usage("--block-rotate N needs a power of two from 2 to %d, got '%s'",
                                     HFQ_HADAMARD_MAX_BLOCK, next);
                a->block_rotate = v;
                i++;
            }
        }
        else if (strcmp(s, "--threads") == 0) {
            char *end;
            long v = next ? strtol(next, &end, 10) : 0;
            if (!next || *end || v < 1 || v > 4096) return bad_usage("--threads needs a count from 1 to 4096, got '%s'", next ? next : "");
            a->q.n_threads = (int)v;
            i++;
        } else if (strcmp(s, "--token-embedding-type") == 0 || strcmp(s, "--output-tensor-type") == 0) {
            if (parse_fmt_arg(s, next, s[2] == 't' ? &p->token_embd_fmt : &p->output_fmt) < 0) return -1;
            i++;
        } else if (strcmp(s, "--tensor-type") == 0) {
            hfq_error err = {{0}};
            if (!next) return bad_usage("%s needs REGEX=FORMAT", s);
            if (p->n_overrides == MAX_OVERRIDES) return bad_usage("more than %s --tensor-type options", "64");
            if (hfq_plan_override_parse(&a->overrides[p->n_overrides], next, &err) < 0) return bad_usage("%s", err.msg);
            a->override_args[p->n_overrides++] = next;
            i++;
        } else if ((used = parse_export_arg(s, next, i + 2 < argc ? argv[i + 2] : NULL, a)) != 0) {
            if (used < 0) return -1;
            i += used - 1;
        } else if ((used = parse_mixed_arg(s, next, a)) != 0) {
            if (used < 0) return -1;
            i += used - 1;
        } else if (strcmp(s, "--quiet") == 0) {
            a->quiet = true;
        } else if (s[0] == '-' && s[1] != '\0') {
            int c = parse_calib_arg(s, next, a, &i);
            if (c < 0) return -1;
            if (c > 0) return hfq_cli_unknown_option("quantize", s, known_options), -1;
        } else if (n_pos == 3) {
            return bad_usage("unexpected argument '%s'", s);
        } else {
            pos[n_pos++] = s;
        }
    }
    if (a->export_dir) {
        if (check_export_args(a, pos, n_pos) < 0 || check_calib_args(a, 2, mixed_mode(a)) < 0) return -1;
        if (mixed_mode(a)) {
            const char *as_out[2] = {pos[0], a->export_dir}; /* the folder stands for OUT.gguf */
            if (check_mixed_args(a, as_out, 2) < 0) return -1;
            a->out = NULL;
            return 0;
        }
        a->q.override_args = a->override_args;
        a->q.n_override_args = p->n_overrides;
        return settle_uses(a) < 0 ? -1 : check_export_acts(a);
    }
    if (check_export_args(a, pos, n_pos) < 0) return -1;
    if (mixed_mode(a)) return check_calib_args(a, n_pos, true) < 0 ? -1 : check_mixed_args(a, pos, n_pos);
    if (n_pos >= 1 && check_calib_args(a, n_pos, false) < 0) return -1;
    if (a->calibrate_only) {
        a->in = pos[0];
        return 0;
    }
    if (n_pos != 3 && !(a->dry_run && n_pos == 2))
        return bad_usage("%s", a->dry_run ? "expected IN.gguf [OUT.gguf] PRESET" : "expected IN.gguf OUT.gguf PRESET");
    a->in = pos[0];
    a->out = n_pos == 3 ? pos[1] : NULL;
    int preset = hfq_preset_from_name(pos[n_pos - 1]);
    if (preset < 0) return bad_usage("unknown preset '%s'", pos[n_pos - 1]);
    p->preset = (hfq_preset)preset;
    a->q.override_args = a->override_args;
    a->q.n_override_args = p->n_overrides;
    /* llama.cpp consults --tensor-type only when the preset's base format is
     * quantized; refusing beats silently ignoring */
    if (p->n_overrides > 0 && !hfq_fmt_is_quantized(hfq_preset_default_fmt(p->preset)))
        return bad_usage("--tensor-type has no effect with preset %s (as in llama.cpp)", hfq_preset_name(p->preset));
    return settle_uses(a);
}

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }
static double bpw(int64_t bytes, int64_t n) { return n > 0 ? 8.0 * (double)bytes / (double)n : 0.0; }

static int64_t n_elements(const gguf_tensor_info *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

static void shape_str(const gguf_tensor_info *t, char *buf, size_t n) {
    size_t len = 0;
    for (int d = 0; d < t->n_dims && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, d ? " x " : "", t->ne[d]);
}

static int64_t n_converted(const hfq_plan *plan) {
    int64_t n = 0;
    for (int64_t i = 0; i < plan->n; i++) n += plan->entries[i].convert;
    return n;
}

static void print_text(const gguf_file *f, const hfq_plan *plan, bool table) {
    for (int64_t i = 0; i < plan->n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const hfq_plan_entry *e = &plan->entries[i];
        if (table) {
            char shape[96];
            shape_str(t, shape, sizeof shape);
            char spec[64];
            hfq_fmt_spec_str(&(hfq_fmt_spec){e->fmt, e->scale_group}, spec, sizeof spec);
            printf("%5" PRId64 " %-40s %-22s %8s -> %-8s %10.3f MiB %6.2f bpw%s%s\n", i + 1, t->name,
                   shape, hfq_fmt_name(t->type), spec, mib(e->nbytes),
                   bpw(e->nbytes, n_elements(t)), e->note[0] ? "  " : "", e->note);
        } else if (e->note[0]) {
            printf("%s: %s\n", t->name, e->note);
        }
    }
    printf("input:  %10.2f MiB (%.2f bpw)\noutput: %10.2f MiB (%.2f bpw)\n", mib(plan->in_nbytes),
           bpw(plan->in_nbytes, plan->n_elements), mib(plan->out_nbytes), bpw(plan->out_nbytes, plan->n_elements));
    printf("%" PRId64 " of %" PRId64 " tensors converted, %" PRId64 " fallback(s)\n", n_converted(plan), plan->n,
           plan->n_fallback);
}

/* extra (may be NULL): more members for the top-level object, taken over */
static int print_json(const gguf_file *f, const hfq_plan *plan, const args *a, cJSON *extra) {
    cJSON *root = cJSON_CreateObject(), *list = cJSON_CreateArray(), *tot = cJSON_CreateObject();
    if (!root || !list || !tot) goto oom;
    while (extra && extra->child) {
        cJSON *item = cJSON_DetachItemViaPointer(extra, extra->child);
        cJSON_AddItemToObject(root, item->string, item);
    }
    const hfq_plan_opts *p = &a->q.plan;
    cJSON_AddStringToObject(root, "input", a->in);
    if (a->out) cJSON_AddStringToObject(root, "output", a->out);
    else cJSON_AddNullToObject(root, "output");
    cJSON_AddBoolToObject(root, "dry_run", a->dry_run);
    cJSON_AddStringToObject(root, "preset", hfq_preset_name(p->preset));
    cJSON_AddNumberToObject(root, "file_type", hfq_preset_file_type(p->preset));
    for (int64_t i = 0; i < plan->n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const hfq_plan_entry *e = &plan->entries[i];
        cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateArray();
        if (!o || !shape || !cJSON_AddItemToArray(list, o) || !cJSON_AddItemToObject(o, "shape", shape)) goto oom;
        for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->ne[d]));
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "from", hfq_fmt_name(t->type));
        char spec[64];
        hfq_fmt_spec_str(&(hfq_fmt_spec){e->fmt, e->scale_group}, spec, sizeof spec);
        cJSON_AddStringToObject(o, "to", spec);
        cJSON_AddBoolToObject(o, "convert", e->convert);
        cJSON_AddNumberToObject(o, "bytes", (double)e->nbytes);
        cJSON_AddNumberToObject(o, "bpw", bpw(e->nbytes, n_elements(t)));
        cJSON_AddStringToObject(o, "note", e->note);
    }
    cJSON_AddItemToObject(root, "tensors", list);
    list = NULL;
    cJSON_AddNumberToObject(tot, "n_tensors", (double)plan->n);
    cJSON_AddNumberToObject(tot, "n_converted", (double)n_converted(plan));
    cJSON_AddNumberToObject(tot, "n_fallback", (double)plan->n_fallback);
    cJSON_AddNumberToObject(tot, "n_elements", (double)plan->n_elements);
    cJSON_AddNumberToObject(tot, "in_bytes", (double)plan->in_nbytes);
    cJSON_AddNumberToObject(tot, "out_bytes", (double)plan->out_nbytes);
    cJSON_AddNumberToObject(tot, "in_bpw", bpw(plan->in_nbytes, plan->n_elements));
    cJSON_AddNumberToObject(tot, "out_bpw", bpw(plan->out_nbytes, plan->n_elements));
    cJSON_AddItemToObject(root, "totals", tot);
    tot = NULL;
    char *text = cJSON_Print(root);
    if (!text) goto oom;
    puts(text);
    free(text);
    cJSON_Delete(root);
    cJSON_Delete(extra);
    return 0;
oom:
    cJSON_Delete(root);
    cJSON_Delete(list);
    cJSON_Delete(tot);
    cJSON_Delete(extra);
    fprintf(stderr, "quantize: out of memory\n");
    return -1;
}

/* ---- progress (src/cli/cli.h: also off a terminal, a line every 5 s) ---- */

static void write_progress(void *ctx, int64_t i, int64_t n, const char *name, uint32_t fmt) {
    hfq_progress_report(ctx, i + 1, n, "%s -> %s", name, hfq_fmt_name(fmt));
}

static void measure_progress(void *ctx, int64_t i, int64_t n, const char *name) {
    hfq_progress_report(ctx, i + 1, n, "measuring %s", name);
}

static void calib_progress(void *ctx, int64_t done, int64_t n) {
    hfq_progress_report(ctx, done, n, "calibrating");
}

static void calib_warn(void *ctx, const char *msg) {
    (void)ctx;
    fprintf(stderr, "quantize: warning: %s\n", msg);
}

static void calib_note(void *ctx, const char *msg) {
    if (((hfq_progress *)ctx)->enabled) fprintf(stderr, "quantize: %s\n", msg);
}

/* ---- what calibration cannot change, said once each (docs/calibration.md) ---- */

/* used: the uses as the session settled them; folds_known: prepare ran (the
 * input scales and folds are known, not only the importance). */
static void print_calib_notes(const args *a, const hfq_calib_uses *used, const hfq_write_effect *e, int64_t n_folded,
                              bool folds_known) {
    for (int k = 0; used->importance && k < e->n_unused; k++) {
        char spec[64];
        hfq_fmt_spec_str(&e->unused[k].spec, spec, sizeof spec);
        fprintf(stderr, "quantize: calibration: importance does not change %s (%" PRId64 " tensor%s): %s\n", spec,
                e->unused[k].n, e->unused[k].n == 1 ? "" : "s", e->unused[k].why);
    }
    if (a->gptq_left_out)
        fprintf(stderr, "quantize: calibration: GPTQ, %s's default, is left out: statistics files hold no Hessians "
                        "(calibrate with --calibration-file)\n",
                a->ct && a->ct->int4_group > 0 ? a->ct->name : hfq_preset_name(a->q.plan.preset));
    const hfq_calib_fold fold = a->calib.uses.fold_if_possible;
    if (fold != HFQ_CALIB_FOLD_NONE && !used->awq && !used->smoothquant && !used->gptq) {
        const bool awq = fold == HFQ_CALIB_FOLD_AWQ, searched = awq || a->calib.uses.smoothquant_alpha < 0.0;
        fprintf(stderr, "quantize: calibration: %s, %s's default, is left out: the statistics hold no activation "
                        "maxima%s (llama-imatrix files hold sums of squares only%s)\n", awq ? "AWQ" : "SmoothQuant",
                hfq_preset_name(a->q.plan.preset), searched ? " or samples" : "",
                searched ? "; --calib-samples 0 keeps no samples" : "");
    }
    if (used->gptq && e->n_gptq == 0 && !(a->ct && a->ct->int4_group > 0)) /* the export's INT4 rounds by GPTQ */
        fprintf(stderr, "quantize: calibration: --gptq changes no tensor: no dense weight's format has a GPTQ codec "
                        "(docs/calibration.md, \"GPTQ\")\n");
    if (!folds_known) return;
    if (used->act_scales && e->n_input_scales == 0)
        fprintf(stderr, "quantize: calibration: --act-scales changes no tensor: only INT8, FP8 and NVFP4 weights "
                        "take input scales\n");
    if ((used->awq || used->smoothquant) && n_folded == 0)
        fprintf(stderr, "quantize: calibration: %s folded no group (no scaling beat the unscaled weights on the "
                        "sample)\n", used->awq ? "AWQ" : "SmoothQuant");
}

/* A dry run plans presets whose formats this build lacks (docs/quantize-tool.md);
 * what a real run would refuse then is said, not silently approved. */
static void note_unwritable(const gguf_file *f, const hfq_plan *plan, const hfq_quantize_opts *q) {
    hfq_error err = {{0}};
    if (hfq_quantize_check(f, plan, q, true, &err) < 0)
        fprintf(stderr, "quantize: note: planned only, a real run refuses it: %s\n", err.msg);
}

/* --calib-ctx past {arch}.context_length: positions the model never
 * trained on shape the statistics (the warning ppl-eval gives for --ctx). */
static void warn_calib_ctx(const args *a, const gguf_file *f) {
    hfq_hparams hp;
    hfq_error err = {{0}};
    const int64_t ctx = a->calib.text.n_ctx > 0 ? a->calib.text.n_ctx : HFQ_CALIB_DEFAULT_CTX;
    /* lines are cut to --calib-ctx, not made that long: only a cap asked for is worth a warning */
    if (!a->calib.text_path || (a->calib.text.lines && a->calib.text.n_ctx <= 0)) return;
    if (hfq_hparams_from_gguf(f, &hp, &err) < 0) return; /* the run reports a model the runner cannot load */
    if (hp.n_ctx_train > 0 && ctx > hp.n_ctx_train)
        fprintf(stderr, "quantize: warning: --calib-ctx %" PRId64 " is past the model's trained context (%" PRId64 ")\n",
                ctx, hp.n_ctx_train);
}

/* Every output against every input and the other outputs (src/common/output.h),
 * before any work: a run must never replace what it reads. */
static int check_paths(const args *a) {
    const hfq_path_role outputs[] = {{a->out, "OUT.gguf", false}, {a->calib.save_path, "--save-stats", false},
                                     {a->meas_out, "--save-measurements", false}};
    const hfq_path_role inputs[] = {{a->in, "IN.gguf", false}, {a->calib.stats_path, "--stats", false},
                                    {a->calib.text_path, "--calibration-file", false}, {a->recipe, "--recipe", false},
                                    {a->meas_in, "--measurements", false}};
    hfq_error err = {{0}};
    if (hfq_check_outputs(outputs, 3, inputs, 5, &err) == 0) return 0;
    fprintf(stderr, "quantize: %s\n", err.msg);
    return -1;
}

/* ---- mixed precision run (docs/mixed.md) ---- */

static cJSON *allocation_json(const hfq_mixed_result *res, const args *a) {
    const hfq_mixed_report *r = &res->rep;
    const hfq_plan *plan = &res->plan;
    cJSON *o = cJSON_CreateObject(), *al = cJSON_CreateObject();
    if (!o || !al) {
        cJSON_Delete(o), cJSON_Delete(al);
        return NULL;
    }
    if (a->recipe) cJSON_AddStringToObject(o, "recipe", a->recipe);
    if (r->target_bytes > 0) {
        cJSON_AddNumberToObject(al, "budget_bytes", (double)r->target_bytes);
        cJSON_AddNumberToObject(al, "budget_bpw", bpw(r->target_bytes, plan->n_elements));
        cJSON_AddNumberToObject(al, "predicted_bytes", (double)plan->out_nbytes);
        cJSON_AddNumberToObject(al, "fixed_bytes", (double)r->fixed_bytes);
        cJSON_AddNumberToObject(al, "min_bytes", (double)r->min_bytes);
        cJSON_AddNumberToObject(al, "max_bytes", (double)r->max_bytes);
        cJSON_AddNumberToObject(al, "n_chosen", (double)r->n_chosen);
        cJSON_AddNumberToObject(al, "measured_error", r->err);
        cJSON_AddItemToObject(o, "allocation", al);
    } else {
        cJSON_Delete(al);
    }
    if (res->written_bytes >= 0) {
        cJSON_AddNumberToObject(o, "written_tensor_bytes", (double)res->written_bytes);
        cJSON_AddNumberToObject(o, "written_file_bytes", (double)res->file_size);
    }
    return o;
}

static void print_allocation(const hfq_mixed_result *res, const args *a) {
    const hfq_mixed_report *r = &res->rep;
    const hfq_plan *plan = &res->plan;
    if (a->recipe) printf("recipe: %s\n", a->recipe);
    if (r->target_bytes > 0)
        printf("allocation: budget %" PRId64 " bytes (%.4f bpw), planned %" PRId64 " bytes (%.4f bpw, %+.3f %%); "
               "%" PRId64 " tensors chosen by measured error (total %.6g), %" PRId64 " bytes fixed; the candidates "
               "allow %" PRId64 "..%" PRId64 " bytes\n", r->target_bytes, bpw(r->target_bytes, plan->n_elements),
               plan->out_nbytes, bpw(plan->out_nbytes, plan->n_elements),
               100.0 * (double)(plan->out_nbytes - r->target_bytes) / (double)r->target_bytes, r->n_chosen, r->err,
               r->fixed_bytes, r->min_bytes, r->max_bytes);
    if (res->written_bytes >= 0 && !a->export_dir)
        printf("wrote %s: %" PRId64 " bytes of tensor data (predicted %" PRId64 "), file %" PRIu64 " bytes\n", a->out,
               res->written_bytes, plan->out_nbytes, res->file_size);
}

static int run_mixed(args *a, const gguf_file *f) {
    hfq_error err = {{0}};
    hfq_mixed_job job = {.in = a->in, .out = a->dry_run ? NULL : a->out, .recipe_path = a->recipe,
                         .target_bpw = a->target_bpw, .target_size = a->target_size, .meas_in = a->meas_in,
                         .meas_out = a->meas_out, .kl_chunks = a->measure_kl_chunks,
                         .candidates = a->n_candidates ? a->candidates : NULL, .n_candidates = a->n_candidates,
                         .calib = a->calib, .q = a->q, .measure_progress = measure_progress,
                         .measure_progress_ctx = &a->progress};
    hfq_mixed_result res;
    int rc = -1;
    if (hfq_mixed_run(&job, f, &res, &err) == 0) {
        a->q.plan = job.q.plan; /* the preset the plan settled on, for the JSON */
        if (res.effect_known) print_calib_notes(a, &job.calib.uses, &res.effect, res.n_folded, job.out != NULL);
        if (hfq_mixed_measure_only(&job)) {
            printf("measured %" PRId64 " tensors in %d formats; saved %s\n", res.meas.n_tensors, res.meas.n_specs,
                   a->meas_out);
            rc = 0;
        } else if (a->json) {
            rc = print_json(f, &res.plan, a, allocation_json(&res, a));
        } else {
            print_text(f, &res.plan, a->dry_run);
            print_allocation(&res, a);
            rc = 0;
        }
    }
    if (rc < 0 && err.msg[0]) fprintf(stderr, "quantize: %s\n", err.msg);
    hfq_mixed_result_free(&res);
    return rc < 0 ? HFQ_EXIT_FAILURE : HFQ_EXIT_OK;
}

static int by_value(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* One weight's input in the calibration summary: its range, the per-token
 * maxima's percentiles, and how far its largest channel stands out (max|x|
 * of the largest channel over the median channel's). */
static void add_weight_summary(cJSON *list, const hfq_calib_entry *e) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(list, o)) return;
    float *ch = malloc((size_t)e->n_in * sizeof *ch);
    cJSON_AddStringToObject(o, "name", e->name);
    cJSON_AddNumberToObject(o, "n_in", (double)e->n_in);
    cJSON_AddNumberToObject(o, "tokens", (double)e->counts[0]);
    cJSON_AddNumberToObject(o, "amax", hfq_calib_amax(e, 0));
    cJSON_AddNumberToObject(o, "token_max_p50", hfq_calib_token_max_percentile(e, 0, 50.0));
    cJSON_AddNumberToObject(o, "token_max_p99", hfq_calib_token_max_percentile(e, 0, 99.0));
    if (ch) {
        memcpy(ch, e->in_max, (size_t)e->n_in * sizeof *ch);
        qsort(ch, (size_t)e->n_in, sizeof *ch, by_value);
        const float median = ch[e->n_in / 2];
        cJSON_AddNumberToObject(o, "outlier_ratio", median > 0.0f ? ch[e->n_in - 1] / median : 0.0);
    }
    free(ch);
}

/* Calibration without quantizing: the statistics are written, a summary printed. */
static int calibrate_only(args *a) {
    hfq_error err = {{0}};
    hfq_calib_session *cs = hfq_calib_session_new(a->in, &a->calib, &err);
    if (!cs) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    const hfq_calib_stats *st = hfq_calib_session_stats(cs);
    if (a->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", a->in);
        cJSON_AddStringToObject(j, "text", a->calib.text_path);
        cJSON_AddStringToObject(j, "stats", a->calib.save_path);
        cJSON_AddStringToObject(j, "mode", st->mode);
        cJSON_AddNumberToObject(j, "n_chunks", (double)st->n_chunks);
        cJSON_AddNumberToObject(j, "chunk_size", (double)st->chunk_size);
        cJSON_AddNumberToObject(j, "n_tokens", (double)st->n_tokens);
        cJSON_AddNumberToObject(j, "n_weights", (double)st->n);
        cJSON *ws = cJSON_AddArrayToObject(j, "weights");
        for (int64_t i = 0; ws && i < st->n; i++) add_weight_summary(ws, &st->entries[i]);
        char *text = cJSON_Print(j);
        if (text) puts(text);
        free(text);
        cJSON_Delete(j);
    } else {
        printf("%s: %" PRId64 " tokens in %" PRId64 " %s of at most %" PRId64 ", statistics of %" PRId64
               " weights\nwrote %s\n",
               a->calib.text_path, st->n_tokens, st->n_chunks, strcmp(st->mode, "chunks") ? "lines" : "chunks",
               st->chunk_size, st->n, a->calib.save_path);
    }
    hfq_calib_session_free(cs);
    return HFQ_EXIT_OK;
}

/* A preset: planned and checked as the write will check it (before any
 * calibrating, and in a dry run alike), calibrated, written. keep != NULL:
 * the calibration session is handed there (NULL without one), not freed. */
static int run_preset(args *a, const gguf_file *f, hfq_calib_session **keep) {
    hfq_error err = {{0}};
    hfq_plan plan = {0};
    hfq_calib_session *cs = NULL;
    hfq_write_effect effect;
    int rc = hfq_quantize_plan(f, &a->q.plan, &plan, &err);
    if (rc == 0) rc = hfq_quantize_check(f, &plan, &a->q, !a->dry_run, &err);
    if (rc == 0 && a->dry_run) note_unwritable(f, &plan, &a->q);
    if (rc == 0 && (a->calib.text_path || a->calib.stats_path)) {
        cs = hfq_calib_session_new(a->in, &a->calib, &err);
        rc = !cs || hfq_calib_session_check(cs, f, &err) ? -1 : 0;
        /* a dry run computes no folds: it says what importance cannot change */
        if (rc == 0 && a->dry_run) a->q.importance = hfq_calib_session_importance(cs);
        else if (rc == 0) rc = hfq_calib_session_prepare(cs, f, &plan, &a->q, &err);
        if (rc == 0) rc = hfq_quantize_effect(f, &plan, &a->q, &effect, &err);
        if (rc == 0)
            print_calib_notes(a, hfq_calib_session_uses(cs), &effect, hfq_calib_session_n_folded(cs), !a->dry_run);
    }
    if (rc == 0 && !a->dry_run) rc = hfq_quantize_write(f, &plan, a->out, &a->q, &err);
    if (rc < 0) {
        fprintf(stderr, "quantize: %s\n", err.msg);
    } else if (a->json) {
        rc = print_json(f, &plan, a, NULL);
    } else {
        print_text(f, &plan, a->dry_run);
        if (!a->dry_run && !a->export_dir) printf("wrote %s\n", a->out);
    }
    a->q.importance = (hfq_importance_source){0};
    a->q.adjust = (hfq_adjust_source){0};
    hfq_plan_free(&plan);
    if (keep) *keep = cs;
    else hfq_calib_session_free(cs);
    return rc < 0 ? HFQ_EXIT_FAILURE : HFQ_EXIT_OK;
}

/* The export's INT4 importance rows: the session's, one matrix. */
static const float *export_importance(void *ctx, const char *name, int64_t n_per_row) {
    const hfq_importance_source *imp = ctx;
    if (imp->has && !imp->has(imp->ctx, name, n_per_row, 1)) return NULL;
    return imp->get(imp->ctx, name, n_per_row, 1);
}

/* The export's INT4 GPTQ inverse Hessians: the session's (driver.h). */
static const double *export_gptq(void *ctx, const char *name, int64_t n_per_row, hfq_error *err) {
    const hfq_gptq_source *g = ctx;
    return g->has(g->ctx, name, n_per_row) ? g->get(g->ctx, name, n_per_row, err) : NULL;
}

/* --export: the quantize job writes a GGUF inside the folder's temporary
 * folder, the export reads it, and the folder is renamed into place. */
static int run_export(args *a, const gguf_file *f) {
    hfq_error err = {{0}};
    hfq_ct_dir d;
    char gguf_path_buf[4096];
    if (hfq_ct_dir_begin(&d, a->export_dir, &err) < 0) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    a->out = hfq_ct_dir_file(&d, "quantized.gguf", gguf_path_buf, sizeof gguf_path_buf);
    hfq_calib_session *cs = NULL;
    int rc = mixed_mode(a) ? run_mixed(a, f) : run_preset(a, f, &cs);
    gguf_file *q = rc == HFQ_EXIT_OK ? gguf_open(a->out, &err) : NULL;
    hfq_importance_source imp = cs ? hfq_calib_session_importance(cs) : (hfq_importance_source){0};
    const hfq_ct_opts opts = {.tokenizer_from = a->tokenizer_from, .no_tokenizer = a->no_tokenizer,
                              .max_shard_bytes = (uint64_t)a->shard_size,
                              .int4_group = a->ct ? a->ct->int4_group : 0,
                              .int4_asymmetric = a->ct && a->ct->int4_asymmetric,
                              .importance = imp.get ? export_importance : NULL, .importance_ctx = &imp,
                              .gptq = a->q.gptq.get ? export_gptq : NULL, .gptq_ctx = &a->q.gptq,
                              .gptq_batch = a->q.gptq.batch, .n_threads = a->q.n_threads};
    if (rc == HFQ_EXIT_OK && (!q || hfq_ct_export(q, &d, &opts, &err) < 0 || unlink(a->out) != 0 ||
                              hfq_ct_dir_commit(&d, &err) < 0)) {
        if (!err.msg[0]) snprintf(err.msg, sizeof err.msg, "%s: cannot remove: %s", a->out, strerror(errno));
        fprintf(stderr, "quantize: %s\n", err.msg);
        rc = HFQ_EXIT_FAILURE;
    }
    if (q) gguf_close(q);
    hfq_calib_session_free(cs);
    if (rc == HFQ_EXIT_OK) printf("exported %s (compressed-tensors%s%s)\n", a->export_dir, a->ct ? " " : "",
                                  a->ct ? a->ct->name : "");
    hfq_ct_dir_abort(&d);
    return rc;
}

/* --rotate: IN rotated into a temporary beside the output, which replaces
 * IN for the rest of the run (f is closed); *keep holds it until the end.
 * NULL after saying why. */
static gguf_file *replace_input(args *a, gguf_file *f, gguf_writer *w, const char *path, hfq_error *err,
                                gguf_writer **keep);

static gguf_file *rotate_input(args *a, gguf_file *f, gguf_writer **keep) {
    hfq_error err = {{0}};
    hfq_rotate_info ri;
    const char *path = NULL;
    gguf_writer *w = hfq_rotate_write(f, a->out ? a->out : a->export_dir, HFQ_ROTATE_DEFAULT_SEED, a->q.n_threads,
                                      &path, &ri, &err);
    gguf_file *r = replace_input(a, f, w, path, &err, keep);
    if (!r) return NULL;
    if (!a->quiet)
        fprintf(stderr, "quantize: rotated %" PRId64 " tensors (n_embd %" PRId64 ", Hadamard blocks of %" PRId64
                        ", seed %d)%s\n", ri.n_rotated, ri.n_embd, ri.block, HFQ_ROTATE_DEFAULT_SEED,
                ri.untied ? "; the tied output became its own output.weight" : "");
    if (ri.untied && strcmp(ri.arch, "gemma") == 0)
        fprintf(stderr, "quantize: note: llama.cpp's gemma loads no output.weight: this rotated file runs in hfq's "
                        "runner only\n");
    return r;
}

/* f (closed) replaced as IN by the temporary model w wrote at path (w NULL:
 * err says why it did not); *keep holds it until the end. NULL after
 * saying why. */
static gguf_file *replace_input(args *a, gguf_file *f, gguf_writer *w, const char *path, hfq_error *err,
                                gguf_writer **keep) {
    gguf_close(f);
    gguf_file *r = w ? gguf_open(path, err) : NULL;
    if (!r) {
        fprintf(stderr, "quantize: %s\n", err->msg);
        gguf_writer_free(w);
        return NULL;
    }
    a->in = path;
    *keep = w;
    return r;
}

/* --block-rotate: as rotate_input, with src/quantize/block_rotate.h. */
static gguf_file *block_rotate_input(args *a, gguf_file *f, gguf_writer **keep) {
    hfq_error err = {{0}};
    hfq_block_rotate_info bi;
    const char *path = NULL;
    gguf_writer *w = hfq_block_rotate_write(f, a->out, a->block_rotate, HFQ_BLOCK_ROTATE_SEED, a->q.n_threads, &path,
                                            &bi, &err);
    gguf_file *r = replace_input(a, f, w, path, &err, keep);
    if (r && !a->quiet)
        fprintf(stderr, "quantize: block-rotated %" PRId64 " weights (Hadamard blocks of %" PRId64 ", seed %d; %" PRId64
                        " left whose rows are not whole blocks); the output runs in hfq's runner only\n",
                bi.n_rotated, a->block_rotate, HFQ_BLOCK_ROTATE_SEED, bi.n_left);
    return r;
}

static int run(args *a) {
    hfq_error err = {{0}};
    /* refused outputs are bad command lines, as the same-file check always was */
    if (check_paths(a) < 0) return HFQ_EXIT_USAGE;
    hfq_progress_init(&a->progress, !a->quiet, 0.0);
    a->q.progress = write_progress;
    a->q.progress_ctx = &a->progress;
    a->calib.n_threads = a->q.n_threads;
    a->calib.progress = calib_progress;
    a->calib.progress_ctx = &a->progress;
    a->calib.warn = calib_warn;
    a->calib.gptq.note = calib_note;
    a->calib.gptq.note_ctx = &a->progress;
    gguf_file *f = gguf_open(a->in, &err);
    if (!f) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        return HFQ_EXIT_FAILURE;
    }
    warn_calib_ctx(a, f);
    gguf_writer *rotated = NULL;
    if (a->rotate && !(f = rotate_input(a, f, &rotated))) return HFQ_EXIT_FAILURE;
    gguf_writer *block_rotated = NULL;
    if (a->block_rotate > 0 && !(f = block_rotate_input(a, f, &block_rotated))) {
        gguf_writer_free(rotated);
        return HFQ_EXIT_FAILURE;
    }
    int rc = a->export_dir          ? run_export(a, f)
             : mixed_mode(a)        ? run_mixed(a, f)
             : a->calibrate_only    ? calibrate_only(a)
                                    : run_preset(a, f, NULL);
    gguf_close(f);
    gguf_writer_free(block_rotated);
    gguf_writer_free(rotated); /* removes the rotated temporary */
    return rc;
}

int main(int argc, char **argv) {
    hfq_cli_openmp_env(argv);
    static args a;
    if (hfq_cli_version(argc, argv, "quantize")) return HFQ_EXIT_OK;
    a.q = hfq_quantize_opts_default(HFQ_PRESET_Q8_0);
    a.measure_kl_chunks = 4;
    a.block_rotate = -1;
    a.calib = (hfq_calib_opts){.sample_rows = -1,
                               .uses = {.act_percentile = 100.0, .smoothquant_alpha = 0.5, .awq_fmt = -1},
                               .gptq = {.damp = -1.0}};
    int parsed = parse_args(argc, argv, &a), rc;
    if (parsed == 1) {
        usage(stdout);
        rc = HFQ_EXIT_OK;
    } else {
        rc = parsed == 0 ? run(&a) : HFQ_EXIT_USAGE;
    }
    for (int i = 0; i < a.q.plan.n_overrides; i++) hfq_plan_override_free(&a.overrides[i]);
    return rc;
}
