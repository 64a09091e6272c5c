/* mixed_plan.c - recipes and measured allocations into plans; see mixed_plan.h. */
#include "src/quantize/mixed_plan.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/alloc.h"
#include "src/quantize/codec.h"
#include "src/quantize/driver.h"

#define MAX_OPTIONS 64

/* What the first planning pass learns about one input tensor. */
typedef struct slot {
    bool reached;              /* the plan may quantize it */
    bool pinned;               /* a recipe rule's (or the default's) "format" decided */
    bool choice;               /* the solver picks among opts */
    hfq_fmt_spec fixed;        /* !choice: its format (before the shape fallback) */
    int rule;                  /* the recipe rule that decided, -1: default or none */
    int n_opts;
    hfq_fmt_spec opts[MAX_OPTIONS];
    hfq_alloc_option cost[MAX_OPTIONS]; /* bytes and measured error of each option */
    int32_t chosen;            /* after solving */
} slot;

typedef struct mixed_ctx {
    const hfq_mixed_opts *mo;
    hfq_recipe_resolver *rs;
    slot *slots;
    bool second_pass;
} mixed_ctx;

static bool same_spec(const hfq_fmt_spec *a, const hfq_fmt_spec *b) {
    return a->fmt == b->fmt && a->scale_group == b->scale_group;
}

/* The measured error of spec for tensor t: 0 with *e set, 1 when the spec
 * cannot hold t, -1 with err. */
static int measured(const mixed_ctx *c, const hfq_plan_tensor *t, const hfq_fmt_spec *spec, double *e, hfq_error *err) {
    const hfq_measurements *m = c->mo->meas;
    const char *where = c->mo->meas_where ? c->mo->meas_where : "measurements";
    const hfq_measured_tensor *mt = hfq_measurements_find(m, t->name);
    int64_t block = hfq_fmt_block_size(spec->fmt);
    if (block < 1 || t->ne[0] % block != 0 || hfq_fmt_spec_problem(spec, t->ne[0]) || !hfq_codec_can_encode(spec->fmt))
        return 1;
    if (!mt) return hfq_fail(err, where, "no measurements for tensor %s (measured on another model?)", t->name);
    if (memcmp(mt->ne, t->ne, sizeof mt->ne) != 0)
        return hfq_fail(err, where, "tensor %s was measured with another shape (measured on another model?)", t->name);
    for (int k = 0; k < m->n_specs; k++)
        if (same_spec(&m->specs[k], spec)) {
            *e = hfq_measured_cost(mt, k);
            return isnan(*e) ? 1 : 0;
        }
    char s[64];
    hfq_fmt_spec_str(spec, s, sizeof s);
    return hfq_fail(err, where, "format %s was not measured (tensor %s): measure it or leave it out of the candidates",
                    s, t->name);
}

/* First pass: what each tensor may become. */
static int learn(mixed_ctx *c, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_error *err) {
    slot *s = &c->slots[index];
    const hfq_mixed_opts *mo = c->mo;
    hfq_recipe_action a = {.rule = -1};
    if (c->rs && hfq_recipe_resolve(c->rs, t, is_output, &a, err) < 0) return -1;
    s->reached = true;
    s->rule = a.rule;
    if (a.pinned) {
        s->pinned = true;
        s->fixed = a.specs[0];
        return 0;
    }
    const hfq_fmt_spec *cands = a.n_specs ? a.specs : mo->candidates ? mo->candidates : mo->meas->specs;
    const int n_cands = a.n_specs ? a.n_specs : mo->candidates ? mo->n_candidates : mo->meas->n_specs;
    s->fixed = cands[0];
    for (int k = 0; k < n_cands && s->n_opts < MAX_OPTIONS; k++) {
        bool dup = false;
        for (int j = 0; j < s->n_opts; j++) dup |= same_spec(&s->opts[j], &cands[k]);
        double e = 0.0;
        int rc = dup ? 1 : measured(c, t, &cands[k], &e, err);
        if (rc < 0) return -1;
        if (rc == 0) {
            s->cost[s->n_opts] = (hfq_alloc_option){hfq_fmt_spec_nbytes(&cands[k], t->ne), e};
            s->opts[s->n_opts++] = cands[k];
        }
    }
    s->choice = s->n_opts > 1;
    if (s->n_opts == 1) s->fixed = s->opts[0];
    return 0;
}

static int mixed_choose(void *ctx, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_fmt_spec *spec,
                        char *note, size_t note_size, hfq_error *err) {
    mixed_ctx *c = ctx;
    if (!c->second_pass && learn(c, index, t, is_output, err) < 0) return -1;
    const slot *s = &c->slots[index];
    char rule[32] = "";
    if (s->rule >= 0) snprintf(rule, sizeof rule, "recipe rule %d", s->rule + 1);
    if (!s->choice) {
        *spec = s->fixed;
        snprintf(note, note_size, "%s%s", rule, s->pinned ? "" : rule[0] ? " (no candidate fits)" : "no candidate fits");
        return 0;
    }
    *spec = s->opts[c->second_pass ? s->chosen : 0];
    snprintf(note, note_size, "%s%smeasured: %d options, error %.4g", rule, rule[0] ? ", " : "", s->n_opts,
             s->cost[c->second_pass ? s->chosen : 0].err);
    return 0;
}

/* The preset named for the file type when the recipe names none: llama.cpp's
 * guess, the preset whose base format holds the most weights. */
static hfq_preset guess_preset(const hfq_plan *plan, const gguf_file *f) {
    int64_t best = -1;
    uint32_t fmt = 0;
    for (int64_t i = 0; i < plan->n; i++) {
        const hfq_plan_entry *e = &plan->entries[i];
        if (!e->convert) continue;
        int64_t n = 0;
        for (int64_t j = 0; j < plan->n; j++)
            if (plan->entries[j].convert && plan->entries[j].fmt == e->fmt) {
                const gguf_tensor_info *t = gguf_tensor_at(f, j);
                n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
            }
        if (n > best) best = n, fmt = e->fmt;
    }
    static const char *const skip[] = {"Q3_K_S", "Q4_K_S", "Q5_K_S", "MXFP4_MOE"};
    for (int p = 0; best >= 0 && p < HFQ_PRESET_COUNT; p++) {
        bool skipped = false;
        for (size_t k = 0; k < sizeof skip / sizeof skip[0]; k++) skipped |= strcmp(hfq_preset_name(p), skip[k]) == 0;
        if (!skipped && hfq_preset_default_fmt((hfq_preset)p) == fmt) return (hfq_preset)p;
    }
    return HFQ_PRESET_F16;
}

/* Solves for the tensors with a choice; the others' bytes (after the
 * first pass's fallbacks) are fixed. */
static int allocate(mixed_ctx *c, const hfq_plan *first, hfq_mixed_report *rep, const char *path, hfq_error *err) {
    const int64_t n = first->n;
    hfq_alloc_item *items = calloc((size_t)(n > 0 ? n : 1), sizeof *items);
    int32_t *choice = calloc((size_t)(n > 0 ? n : 1), sizeof *choice);
    int rc = 0;
    if (!items || !choice) {
        rc = hfq_fail(err, path, "out of memory");
        goto done;
    }
    int64_t n_items = 0;
    for (int64_t i = 0; i < n; i++) {
        const slot *s = &c->slots[i];
        if (s->choice) items[n_items++] = (hfq_alloc_item){s->n_opts, s->cost};
        else rep->fixed_bytes += first->entries[i].nbytes;
    }
    hfq_alloc_result res;
    rc = hfq_alloc_solve(items, n_items, c->mo->target_bytes - rep->fixed_bytes, 0, choice, &res, err);
    rep->min_bytes = rep->fixed_bytes + res.min_bytes;
    rep->max_bytes = rep->fixed_bytes + res.max_bytes;
    rep->n_chosen = n_items;
    rep->err = res.err;
    if (rc == 1) {
        rc = hfq_fail(err, path, "the budget of %" PRId64 " bytes is below the smallest plan the candidates allow (%"
                      PRId64 " bytes, %.4f bits per weight)", c->mo->target_bytes, rep->min_bytes,
                      8.0 * (double)rep->min_bytes / (double)first->n_elements);
        goto done;
    }
    for (int64_t i = 0, k = 0; rc == 0 && i < n; i++)
        if (c->slots[i].choice) c->slots[i].chosen = choice[k++];
done:
    free(items);
    free(choice);
    return rc;
}

/* A budget with a recipe that pins every tensor would be ignored: refused. */
static int pinned_fail(const hfq_recipe *r, hfq_error *err) {
    return hfq_fail(err, hfq_recipe_where(r), "every tensor is pinned by a rule's or the default's \"format\" (none "
                    "lists \"candidates\"), so a budget cannot change the plan: drop --target-bpw/--target-size, or "
                    "list \"candidates\" in rules (docs/mixed.md)");
}

/* Whether the recipe left the solver nothing to choose: every tensor the
 * plan may quantize pinned by a "format". */
static bool all_pinned(const mixed_ctx *c, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (c->slots[i].reached && !c->slots[i].pinned) return false;
    return true;
}

int hfq_mixed_plan(const gguf_file *f, hfq_plan_opts *popts, const hfq_mixed_opts *mo, hfq_plan *plan,
                   hfq_mixed_report *rep, hfq_error *err) {
    memset(rep, 0, sizeof *rep);
    memset(plan, 0, sizeof *plan);
    rep->target_bytes = mo->target_bytes > 0 ? mo->target_bytes : 0;
    if (mo->target_bytes > 0 && !mo->meas) return hfq_fail(err, gguf_path(f), "a budget needs measurements");
    if (!mo->recipe && mo->target_bytes <= 0) return hfq_fail(err, gguf_path(f), "neither a recipe nor a budget");
    const int64_t n = gguf_n_tensors(f);
    mixed_ctx c = {.mo = mo, .slots = calloc((size_t)(n > 0 ? n : 1), sizeof *c.slots)};
    hfq_plan_model model;
    int rc = c.slots ? 0 : hfq_fail(err, gguf_path(f), "out of memory");
    if (rc == 0 && mo->recipe) {
        if ((rc = hfq_plan_model_from_gguf(f, &model, err)) == 0 &&
            !(c.rs = hfq_recipe_resolver_new(mo->recipe, &model, err)))
            rc = -1;
    }
    /* a recipe alone pins every tensor: its own callback says so when a rule lists candidates */
    popts->choose = mo->target_bytes > 0 ? mixed_choose : hfq_recipe_choose;
    popts->choose_ctx = mo->target_bytes > 0 ? (void *)&c : (void *)c.rs;
    if (rc == 0) rc = hfq_quantize_plan(f, popts, plan, err);
    if (rc == 0 && c.rs) rc = hfq_recipe_resolver_finish(c.rs, err);
    if (rc == 0 && mo->target_bytes > 0 && mo->recipe && all_pinned(&c, n)) rc = pinned_fail(mo->recipe, err);
    if (rc == 0 && mo->target_bytes > 0) {
        hfq_plan first = *plan;
        memset(plan, 0, sizeof *plan);
        rc = allocate(&c, &first, rep, gguf_path(f), err);
        c.second_pass = true;
        if (rc == 0) rc = hfq_quantize_plan(f, popts, plan, err);
        int64_t bytes = rep->fixed_bytes;
        for (int64_t i = 0; i < n; i++)
            if (c.slots[i].choice) bytes += c.slots[i].cost[c.slots[i].chosen].bytes;
        if (rc == 0 && bytes != plan->out_nbytes)
            rc = hfq_fail(err, gguf_path(f), "internal: the plan holds %" PRId64 " bytes, the solver counted %" PRId64,
                          plan->out_nbytes, bytes);
        hfq_plan_free(&first);
    }
    popts->choose = NULL;
    popts->choose_ctx = NULL;
    if (rc == 0) {
        int ft = mo->recipe ? hfq_recipe_file_type(mo->recipe) : -1;
        popts->preset = ft >= 0 ? (hfq_preset)ft : guess_preset(plan, f);
    } else {
        hfq_plan_free(plan);
    }
    hfq_recipe_resolver_free(c.rs);
    free(c.slots);
    return rc;
}

typedef struct check_ctx {
    hfq_recipe_resolver *rs;
    bool any_candidates;   /* some tensor's action lists candidates */
} check_ctx;

static int check_choose(void *ctx, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_fmt_spec *spec,
                        char *note, size_t note_size, hfq_error *err) {
    (void)index, (void)note, (void)note_size;
    check_ctx *c = ctx;
    hfq_recipe_action a;
    if (hfq_recipe_resolve(c->rs, t, is_output, &a, err) < 0) return -1;
    c->any_candidates |= !a.pinned;
    *spec = a.pinned ? a.specs[0] : (hfq_fmt_spec){GT_F16, HFQ_SCALE_PER_ROW};
    return 0;
}

int hfq_mixed_check_recipe(const gguf_file *f, const hfq_recipe *r, const hfq_plan_opts *popts, bool budget,
                           hfq_error *err) {
    hfq_plan_model model;
    if (hfq_plan_model_from_gguf(f, &model, err) < 0) return -1;
    hfq_recipe_resolver *rs = hfq_recipe_resolver_new(r, &model, err);
    if (!rs) return -1;
    check_ctx c = {rs, false};
    hfq_plan_opts o = *popts;
    o.choose = check_choose;
    o.choose_ctx = &c;
    hfq_plan plan;
    int rc = hfq_quantize_plan(f, &o, &plan, err);
    if (rc == 0) {
        hfq_plan_free(&plan);
        rc = hfq_recipe_resolver_finish(rs, err);
    }
    if (rc == 0 && budget && !c.any_candidates) rc = pinned_fail(r, err);
    hfq_recipe_resolver_free(rs);
    return rc;
}
