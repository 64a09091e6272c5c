/* recipe.h - quantization recipes: ordered rules that give tensors a format
 * (with its scale granularity) or a set of candidate formats for the budget
 * solver (quant/alloc.h). The JSON schema is in docs/mixed.md:
 *
 *   {"name": "...", "file_type": "Q4_K_M",
 *    "rules": [{"match": "attn_v\\.weight", "layers": "0..n/8-1, n/8+2..n-1:3",
 *               "format": "q6_K"},
 *              {"output": true, "format": "int8", "granularity": "group", "group_size": 64},
 *              {"match": "ffn_", "candidates": ["q4_K", "q6_K", "q8_0"]}],
 *    "default": {"format": "q4_K"}}
 *
 * A rule's conditions (all optional): "match", a POSIX extended regex found
 * anywhere in the name, case-insensitively (as --tensor-type); "layers", a
 * layer selector over the blk.N. number; "output", whether the tensor is the
 * output layer (output.weight, or token_embd.weight when the embeddings are
 * tied). The first rule whose conditions all hold decides; tensors no rule
 * takes get "default". Only tensors the plan may quantize reach the rules
 * (norms and the like are copied, as for every preset).
 *
 * Layer selectors: comma-separated items "E", "E..E" or "E..E:S" (every S-th
 * layer from the first), E an integer expression in n (the block count) with
 * + - * / (C's truncating division) and parentheses. An item whose range is
 * empty because of n selects nothing.
 *
 * Recipes resolve into ordinary plans through hfq_plan_opts.choose
 * (quant/plan.h): the quantize driver has one code path. Everything that can
 * be checked without a model is checked when parsing; the rest (layer ranges
 * against the block count, group sizes against row lengths, rules that never
 * fire because earlier rules take every tensor they match) when resolving,
 * still before any tensor is converted.
 */
#ifndef HFQ_QUANT_RECIPE_H
#define HFQ_QUANT_RECIPE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "quant/plan.h"

typedef struct hfq_recipe hfq_recipe;

/* Parses a recipe document; `where` names its source in error messages
 * (the file). Returns NULL with err filled on the first problem. */
hfq_recipe *hfq_recipe_from_json(const cJSON *doc, const char *where, hfq_error *err);
void hfq_recipe_free(hfq_recipe *r);

const char *hfq_recipe_name(const hfq_recipe *r);
/* Where the recipe came from (the `where` it was parsed with), for errors. */
const char *hfq_recipe_where(const hfq_recipe *r);
/* The preset whose general.file_type the output carries ("file_type"), or
 * -1 when the recipe names none. */
int hfq_recipe_file_type(const hfq_recipe *r);

/* The candidate formats the recipe's rules and default list, each once, in
 * the order they first appear (what a budget needs measured); returns how
 * many were stored in out (at most max). */
int hfq_recipe_candidates(const hfq_recipe *r, hfq_fmt_spec *out, int max);

/* What a recipe says about one tensor. */
typedef struct hfq_recipe_action {
    int rule;                   /* the rule that decided (0-based), -1: the default */
    bool pinned;                /* one format (specs[0]); else candidates for the solver */
    int n_specs;                /* 0: no rule and no default took the tensor */
    const hfq_fmt_spec *specs;  /* owned by the recipe */
} hfq_recipe_action;

/* A recipe applied to one model. */
typedef struct hfq_recipe_resolver hfq_recipe_resolver;

/* Evaluates the layer selectors for the model's block count; fails when an
 * item selects layers outside 0..n_layer-1 or divides by zero. */
hfq_recipe_resolver *hfq_recipe_resolver_new(const hfq_recipe *r, const hfq_plan_model *m, hfq_error *err);
void hfq_recipe_resolver_free(hfq_recipe_resolver *rs);

/* The action for tensor t (one the plan may quantize); fails, naming the
 * rule and the tensor, when the rule's granularity does not fit its rows. */
int hfq_recipe_resolve(hfq_recipe_resolver *rs, const hfq_plan_tensor *t, bool is_output, hfq_recipe_action *out,
                       hfq_error *err);

/* hfq_plan_choose_fn for recipes of pinned formats (ctx: the resolver): the
 * note names the rule. Fails when the action is a candidate list (those need
 * the solver) or nothing takes the tensor. */
int hfq_recipe_choose(void *resolver, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_fmt_spec *spec,
                      char *note, size_t note_size, hfq_error *err);

/* After every tensor was resolved: fails when a rule matched tensors but
 * never decided any, every one of them taken by earlier rules. */
int hfq_recipe_resolver_finish(const hfq_recipe_resolver *rs, hfq_error *err);

#endif
