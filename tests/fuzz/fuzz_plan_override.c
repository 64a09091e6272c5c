/* libFuzzer target for quantize's --tensor-type REGEX=FORMAT parser
 * (hfq_plan_override_parse) and the plan built with what it accepts. The input
 * holds up to two arguments separated by a NUL byte. A refused argument gives
 * a "--tensor-type: ..." error; accepted ones must give a plan for a
 * small Llama-shaped model (Q4_K_M and NVFP4) whose every entry is a format the
 * plan knows, or a one-line refusal. Built only by tests/fuzz/build.sh. */
#include <stdint.h>

#include "formats/ggml_type.h"
#include "quant/plan.h"
#include "tests/fuzz/fuzz_common.h"

#define MAX_ARG 4096

static const char *const NAMES[] = {
    "token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_norm.weight",
    "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
    "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight",
};
#define N_T 12

static void build_plans(const hfq_plan_override *ov, int n_ov) {
    hfq_plan_tensor t[N_T];
    for (int i = 0; i < N_T; i++) {
        bool norm = strstr(NAMES[i], "norm") != NULL;
        int64_t rows = strstr(NAMES[i], "token_embd") || !strcmp(NAMES[i], "output.weight") ? 320
                       : strstr(NAMES[i], "ffn_gate") || strstr(NAMES[i], "ffn_up") ? 512 : 256;
        int64_t cols = strstr(NAMES[i], "ffn_down") ? 512 : 256;
        t[i] = (hfq_plan_tensor){NAMES[i], {cols, norm ? 1 : rows, 1, 1}, norm ? GT_F32 : GT_F16};
    }
    hfq_plan_model model = {.arch = "llama", .n_layer = 1, .n_head = 4, .n_head_kv = 2};
    static const hfq_preset presets[] = {HFQ_PRESET_Q4_K_M, HFQ_PRESET_NVFP4};
    for (int k = 0; k < 2; k++) {
        hfq_plan_opts o = hfq_plan_opts_default(presets[k]);
        o.overrides = ov;
        o.n_overrides = n_ov;
        hfq_plan plan;
        hfq_error err = {{0}};
        if (hfq_plan_build(&plan, &model, t, N_T, &o, &err) != 0) {
            fuzz_check_error(err.msg, NULL);
            continue;
        }
        for (int64_t i = 0; i < plan.n; i++) {
            const hfq_plan_entry *e = &plan.entries[i];
            if (!strcmp(hfq_fmt_name(e->fmt), "?") || e->nbytes <= 0 || !memchr(e->note, 0, sizeof e->note))
                abort();
        }
        hfq_plan_free(&plan);
    }
}

/* glibc's regcomp copies a repeated subexpression's tree for each bound, so
 * stacked or nested repetitions ("a++++", "((a+)+)+", "(a{999}){999}") grow
 * exponentially in memory: documented in docs/robustness.md, not our parser's
 * bug. Inputs with a repetition of a repetition or of a group, or bounds over
 * two digits, are skipped. */
static bool stacked_repetition(const char *s) {
    char prev = 0;
    for (; *s; prev = *s++) {
        bool dup = *s == '*' || *s == '+' || *s == '?' || *s == '{';
        if (dup && prev && strchr(")}*+?", prev)) return true;
        if (*s == '{' && strspn(s + 1, "0123456789") > 2) return true;
        if (*s == ',' && prev != '{' && strspn(s + 1, "0123456789") > 2) return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_ARG) return 0;   /* a command-line argument, not a file */
    char buf[MAX_ARG + 2];
    memcpy(buf, data, size);
    buf[size] = 0;
    buf[size + 1] = 0;
    const char *args[2] = {buf, buf + strlen(buf) + 1};
    int n_args = (size_t)(args[1] - buf) <= size ? 2 : 1;
    hfq_plan_override ov[2];
    int n_ok = 0;
    for (int i = 0; i < n_args; i++)
        if (stacked_repetition(args[i])) return 0;
    for (int i = 0; i < n_args; i++) {
        hfq_error err = {{0}};
        if (hfq_plan_override_parse(&ov[n_ok], args[i], &err) != 0) {
            /* the message quotes the argument, which may hold any byte */
            if (strncmp(err.msg, "--tensor-type: ", 15) != 0) abort();
            continue;
        }
        n_ok++;
    }
    if (n_ok) build_plans(ov, n_ok);
    for (int i = 0; i < n_ok; i++) hfq_plan_override_free(&ov[i]);
    return 0;
}
