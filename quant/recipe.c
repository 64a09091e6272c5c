/* recipe.c - recipes: parsing, layer selectors, resolution; see recipe.h. */
#include "quant/recipe.h"

#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 1024
#define MAX_SPECS 64
#define EXPR_LIMIT ((int64_t)1 << 40) /* |values| in layer expressions */

typedef struct action {
    bool pinned;
    int n_specs;
    hfq_fmt_spec *specs;
} action;

typedef struct rule {
    char *match;        /* NULL: any name */
    regex_t re;
    char *layers;       /* NULL: any tensor (with or without a layer) */
    int output;         /* -1: either, 0: not the output layer, 1: the output layer */
    action act;
} rule;

struct hfq_recipe {
    char where[256];
    char *name;
    int file_type;      /* hfq_preset or -1 */
    int n_rules;
    rule *rules;
    action deflt;       /* n_specs 0: none */
};

/* ---- layer selectors ---- */

typedef struct lexer {
    const char *s;
    size_t pos;
    int64_t n;
    bool uses_n;        /* the current item refers to n */
    const char *why;    /* first problem, NULL while fine */
} lexer;

static void skip_ws(lexer *lx) {
    while (lx->s[lx->pos] == ' ' || lx->s[lx->pos] == '\t') lx->pos++;
}

static bool eat(lexer *lx, const char *tok) {
    skip_ws(lx);
    size_t len = strlen(tok);
    if (strncmp(lx->s + lx->pos, tok, len) != 0) return false;
    lx->pos += len;
    return true;
}

static int64_t fail_expr(lexer *lx, const char *why) {
    if (!lx->why) lx->why = why;
    return 0;
}

static int64_t checked(lexer *lx, int64_t v) {
    return v > EXPR_LIMIT || v < -EXPR_LIMIT ? fail_expr(lx, "value out of range") : v;
}

static int64_t expr(lexer *lx, int depth);

static int64_t factor(lexer *lx, int depth) {
    skip_ws(lx);
    const char c = lx->s[lx->pos];
    if (depth > 32) return fail_expr(lx, "expression nested too deeply");
    if (c == '(') {
        lx->pos++;
        int64_t v = expr(lx, depth + 1);
        return eat(lx, ")") ? v : fail_expr(lx, "missing ')'");
    }
    if (c == '-') {
        lx->pos++;
        return -factor(lx, depth + 1);
    }
    if (c == 'n') {
        lx->pos++;
        lx->uses_n = true;
        return lx->n;
    }
    if (c >= '0' && c <= '9') {
        int64_t v = 0;
        while (lx->s[lx->pos] >= '0' && lx->s[lx->pos] <= '9') {
            v = v * 10 + (lx->s[lx->pos++] - '0');
            if (v > EXPR_LIMIT) return fail_expr(lx, "number too large");
        }
        return v;
    }
    return fail_expr(lx, c ? "expected a number, n or '('" : "unexpected end");
}

static int64_t term(lexer *lx, int depth) {
    int64_t v = factor(lx, depth);
    for (;;) {
        skip_ws(lx);
        const char c = lx->s[lx->pos];
        if (c != '*' && c != '/') return v;
        lx->pos++;
        int64_t w = factor(lx, depth);
        if (lx->why) return 0;
        if (c == '/' && w == 0) return fail_expr(lx, "division by zero");
        /* operands stay within +-2^40, so a product checked against the limit cannot overflow */
        if (c == '*' && v != 0 && (w > EXPR_LIMIT / llabs(v) || w < -EXPR_LIMIT / llabs(v)))
            return fail_expr(lx, "value out of range");
        v = c == '*' ? v * w : v / w;
    }
}

static int64_t expr(lexer *lx, int depth) {
    int64_t v = term(lx, depth);
    for (;;) {
        skip_ws(lx);
        const char c = lx->s[lx->pos];
        /* ".." is the range operator, not a minus or a decimal point */
        if (c != '+' && c != '-') return v;
        lx->pos++;
        int64_t w = term(lx, depth);
        v = checked(lx, c == '+' ? v + w : v - w);
    }
}

/* Evaluates a selector for block count n. mask (n entries) NULL: syntax only
 * (bounds not checked). Returns NULL, or why the selector is bad. */
static const char *select_layers(const char *sel, int64_t n, bool *mask, char *why, size_t why_size) {
    lexer lx = {.s = sel, .n = n};
    if (mask) memset(mask, 0, (size_t)n * sizeof *mask);
    do {
        lx.uses_n = false;
        size_t start_pos = lx.pos;
        int64_t a = expr(&lx, 0), b = a, step = 1;
        if (!lx.why && eat(&lx, "..")) {
            b = expr(&lx, 0);
            if (!lx.why && eat(&lx, ":")) step = expr(&lx, 0);
        }
        skip_ws(&lx);
        if (!lx.why && lx.s[lx.pos] != ',' && lx.s[lx.pos] != '\0') lx.why = "expected ',', '..' or ':'";
        size_t item_len = lx.pos - start_pos;
        if (lx.why) {
            snprintf(why, why_size, "layers '%s': %s at offset %zu", sel, lx.why, lx.pos);
            return why;
        }
        if (step < 1) {
            snprintf(why, why_size, "layers '%s': step %" PRId64 " is not positive", sel, step);
            return why;
        }
        if (b < a && !lx.uses_n) {
            snprintf(why, why_size, "layers '%s': range '%.*s' is empty", sel, (int)item_len, sel + start_pos);
            return why;
        }
        if (mask && b >= a) {
            if (a < 0 || b >= n) {
                snprintf(why, why_size, "layers '%s': '%.*s' selects %" PRId64 "..%" PRId64
                         ", outside the model's layers 0..%" PRId64, sel, (int)item_len, sel + start_pos, a, b, n - 1);
                return why;
            }
            for (int64_t l = a; l <= b; l += step) mask[l] = true;
        }
    } while (eat(&lx, ","));
    return NULL;
}

/* ---- parsing ---- */

static int recipe_fail(const hfq_recipe *r, hfq_error *err, int rule_i, const char *fmt, const char *a,
                       const char *b) {
    char ctx[32] = "";
    if (rule_i >= 0) snprintf(ctx, sizeof ctx, "rule %d: ", rule_i + 1);
    else if (rule_i == -2) snprintf(ctx, sizeof ctx, "default: ");
    char msg[768];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    return hfq_fail(err, r->where, "%s%s", ctx, msg);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static bool key_in(const char *key, const char *const *keys) {
    for (; *keys; keys++)
        if (strcmp(key, *keys) == 0) return true;
    return false;
}

/* "format" (+ "granularity", "group_size") or "candidates" of a rule or the default. */
static int parse_action(hfq_recipe *r, const cJSON *o, int ri, action *act, hfq_error *err) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
    const cJSON *gran = cJSON_GetObjectItemCaseSensitive(o, "granularity");
    const cJSON *gsize = cJSON_GetObjectItemCaseSensitive(o, "group_size");
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(o, "candidates");
    if (!fmt == !cands) return recipe_fail(r, err, ri, "needs exactly one of \"format\" and \"candidates\"", 0, 0);
    if (cands) {
        if (gran || gsize)
            return recipe_fail(r, err, ri, "\"granularity\" goes with \"format\"; write candidates as \"int8:g128\"", 0, 0);
        int n = cJSON_IsArray(cands) ? cJSON_GetArraySize(cands) : 0;
        if (n < 1 || n > MAX_SPECS)
            return recipe_fail(r, err, ri, "\"candidates\" must be a list of 1 to 64 formats", 0, 0);
        act->specs = calloc((size_t)n, sizeof *act->specs);
        if (!act->specs) return recipe_fail(r, err, ri, "out of memory", 0, 0);
        const cJSON *c;
        cJSON_ArrayForEach(c, cands) {
            if (!cJSON_IsString(c) || hfq_fmt_spec_parse(c->valuestring, &act->specs[act->n_specs]) < 0)
                return recipe_fail(r, err, ri, "bad candidate '%s' (FMT or FMT:tensor|channel|gN)",
                                   cJSON_IsString(c) ? c->valuestring : "(not a string)", 0);
            /* the measure goes row by row, and a block scale spans 128 rows: never chosen */
            if (act->specs[act->n_specs].scale_group == HFQ_SCALE_PER_BLOCK)
                return recipe_fail(r, err, ri, "candidate '%s': block scales cannot be measured (give them as a format)",
                                   c->valuestring, 0);
            act->n_specs++;
        }
        return 0;
    }
    if (!cJSON_IsString(fmt)) return recipe_fail(r, err, ri, "\"format\" must be a string", 0, 0);
    int f = hfq_fmt_from_name(fmt->valuestring);
    if (f < 0) return recipe_fail(r, err, ri, "unknown format '%s'", fmt->valuestring, 0);
    hfq_fmt_spec spec = {(uint32_t)f, HFQ_SCALE_PER_ROW};
    const char *g = gran ? (cJSON_IsString(gran) ? gran->valuestring : "") : "channel";
    if (strcmp(g, "tensor") == 0) spec.scale_group = HFQ_SCALE_PER_TENSOR;
    else if (strcmp(g, "block") == 0) spec.scale_group = HFQ_SCALE_PER_BLOCK;
    else if (strcmp(g, "group") == 0) {
        if (!cJSON_IsNumber(gsize) || gsize->valuedouble < 1 || gsize->valuedouble > 1e9 ||
            gsize->valuedouble != (double)(int64_t)gsize->valuedouble)
            return recipe_fail(r, err, ri, "granularity \"group\" needs a positive integer \"group_size\"", 0, 0);
        spec.scale_group = (int64_t)gsize->valuedouble;
    } else if (strcmp(g, "channel") != 0) {
        return recipe_fail(r, err, ri, "granularity must be \"tensor\", \"channel\", \"group\" or \"block\", not '%s'", g, 0);
    }
    if (gsize && spec.scale_group <= 0) return recipe_fail(r, err, ri, "\"group_size\" needs granularity \"group\"", 0, 0);
    if (gran && !(spec.fmt >= HFQ_FMT_INT8 && spec.fmt <= HFQ_FMT_FP8_E5M2))
        return recipe_fail(r, err, ri, "%s has a fixed block structure: granularity applies to int8 and fp8 only",
                           hfq_fmt_name(spec.fmt), 0);
    const char *why = hfq_fmt_spec_problem(&spec, 0);
    if (why) return recipe_fail(r, err, ri, "%s", why, 0);
    act->specs = malloc(sizeof *act->specs);
    if (!act->specs) return recipe_fail(r, err, ri, "out of memory", 0, 0);
    act->specs[0] = spec;
    act->n_specs = 1;
    act->pinned = true;
    return 0;
}

static int parse_rule(hfq_recipe *r, const cJSON *o, int ri, hfq_error *err) {
    static const char *const keys[] = {"match", "layers", "output", "format", "granularity", "group_size",
                                       "candidates", "comment", NULL};
    rule *ru = &r->rules[ri];
    ru->output = -1;
    if (!cJSON_IsObject(o)) return recipe_fail(r, err, ri, "must be an object", 0, 0);
    const cJSON *k;
    cJSON_ArrayForEach(k, o)
        if (!key_in(k->string, keys)) return recipe_fail(r, err, ri, "unknown key '%s'", k->string, 0);
    const cJSON *match = cJSON_GetObjectItemCaseSensitive(o, "match");
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(o, "layers");
    const cJSON *output = cJSON_GetObjectItemCaseSensitive(o, "output");
    if (match) {
        if (!cJSON_IsString(match) || !match->valuestring[0])
            return recipe_fail(r, err, ri, "\"match\" must be a non-empty string", 0, 0);
        int rc = regcomp(&ru->re, match->valuestring, REG_EXTENDED | REG_ICASE | REG_NOSUB);
        if (rc != 0) {
            char msg[256];
            regerror(rc, &ru->re, msg, sizeof msg);
            return recipe_fail(r, err, ri, "bad regex '%s': %s", match->valuestring, msg);
        }
        if (!(ru->match = dup_str(match->valuestring))) {
            regfree(&ru->re);
            return recipe_fail(r, err, ri, "out of memory", 0, 0);
        }
    }
    if (layers) {
        char why[512];
        if (!cJSON_IsString(layers)) return recipe_fail(r, err, ri, "\"layers\" must be a string such as \"0..3, n-1\"", 0, 0);
        if (select_layers(layers->valuestring, 1024, NULL, why, sizeof why)) return recipe_fail(r, err, ri, "%s", why, 0);
        if (!(ru->layers = dup_str(layers->valuestring))) return recipe_fail(r, err, ri, "out of memory", 0, 0);
    }
    if (output) {
        if (!cJSON_IsBool(output)) return recipe_fail(r, err, ri, "\"output\" must be true or false", 0, 0);
        ru->output = cJSON_IsTrue(output);
    }
    return parse_action(r, o, ri, &ru->act, err);
}

/* Rule j never fires when an earlier rule i has no condition that j lacks:
 * i's match and layers are absent or written exactly as j's, and so is its
 * output condition. (Rules that only overlap on a given model are found when
 * resolving.) */
static bool covers(const rule *i, const rule *j) {
    return (!i->match || (j->match && strcmp(i->match, j->match) == 0)) &&
           (!i->layers || (j->layers && strcmp(i->layers, j->layers) == 0)) &&
           (i->output < 0 || i->output == j->output);
}

hfq_recipe *hfq_recipe_from_json(const cJSON *doc, const char *where, hfq_error *err) {
    static const char *const keys[] = {"name", "description", "file_type", "rules", "default", "comment", NULL};
    hfq_recipe *r = calloc(1, sizeof *r);
    if (!r) {
        hfq_fail(err, where, "out of memory");
        return NULL;
    }
    snprintf(r->where, sizeof r->where, "%s", where ? where : "recipe");
    r->file_type = -1;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(doc, "name");
    const cJSON *ft = cJSON_GetObjectItemCaseSensitive(doc, "file_type");
    const cJSON *rules = cJSON_GetObjectItemCaseSensitive(doc, "rules");
    const cJSON *deflt = cJSON_GetObjectItemCaseSensitive(doc, "default");
    const cJSON *k;
    int rc = 0;
    if (!cJSON_IsObject(doc)) {
        rc = recipe_fail(r, err, -1, "a recipe is a JSON object", 0, 0);
        goto done;
    }
    cJSON_ArrayForEach(k, doc)
        if (!key_in(k->string, keys)) {
            rc = recipe_fail(r, err, -1, "unknown key '%s'", k->string, 0);
            goto done;
        }
    if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > 200) {
        rc = recipe_fail(r, err, -1, "\"name\" must be a string of 1 to 200 characters", 0, 0);
        goto done;
    }
    if (!(r->name = dup_str(name->valuestring))) {
        rc = recipe_fail(r, err, -1, "out of memory", 0, 0);
        goto done;
    }
    if (ft && (!cJSON_IsString(ft) || (r->file_type = hfq_preset_from_name(ft->valuestring)) < 0)) {
        rc = recipe_fail(r, err, -1, "\"file_type\" must name a preset (Q4_K_M, Q8_0, NVFP4, ...), not '%s'",
                         cJSON_IsString(ft) ? ft->valuestring : "(not a string)", 0);
        goto done;
    }
    if (rules && (!cJSON_IsArray(rules) || cJSON_GetArraySize(rules) > MAX_RULES)) {
        rc = recipe_fail(r, err, -1, "\"rules\" must be a list of at most 1024 rules", 0, 0);
        goto done;
    }
    if (!rules && !deflt) {
        rc = recipe_fail(r, err, -1, "a recipe needs \"rules\" or a \"default\"", 0, 0);
        goto done;
    }
    r->rules = calloc((size_t)(rules ? cJSON_GetArraySize(rules) : 0) + 1, sizeof *r->rules);
    if (!r->rules) {
        rc = recipe_fail(r, err, -1, "out of memory", 0, 0);
        goto done;
    }
    const cJSON *ro;
    cJSON_ArrayForEach(ro, rules) {
        rc = parse_rule(r, ro, r->n_rules, err);
        r->n_rules++; /* counted even when it failed, so free releases what it holds */
        if (rc < 0) goto done;
    }
    if (deflt) {
        static const char *const dkeys[] = {"format", "granularity", "group_size", "candidates", "comment", NULL};
        if (!cJSON_IsObject(deflt)) {
            rc = recipe_fail(r, err, -2, "must be an object such as {\"format\": \"q4_K\"}", 0, 0);
            goto done;
        }
        cJSON_ArrayForEach(k, deflt)
            if (!key_in(k->string, dkeys)) {
                rc = recipe_fail(r, err, -2, "unknown key '%s'", k->string, 0);
                goto done;
            }
        if ((rc = parse_action(r, deflt, -2, &r->deflt, err)) < 0) goto done;
    }
    for (int j = 0; j < r->n_rules; j++)
        for (int i = 0; i < j; i++)
            if (covers(&r->rules[i], &r->rules[j])) {
                char a[16];
                snprintf(a, sizeof a, "%d", i + 1);
                rc = recipe_fail(r, err, j, "can never fire: rule %s before it takes every tensor it matches", a, 0);
                goto done;
            }
done:
    if (rc < 0) {
        hfq_recipe_free(r);
        return NULL;
    }
    return r;
}

void hfq_recipe_free(hfq_recipe *r) {
    if (!r) return;
    for (int i = 0; i < r->n_rules; i++) {
        if (r->rules[i].match) regfree(&r->rules[i].re);
        free(r->rules[i].match);
        free(r->rules[i].layers);
        free(r->rules[i].act.specs);
    }
    free(r->rules);
    free(r->deflt.specs);
    free(r->name);
    free(r);
}

/* Adds a's candidates to out[0..*n) that are not there yet. */
static void add_candidates(const action *a, hfq_fmt_spec *out, int max, int *n) {
    for (int k = 0; !a->pinned && k < a->n_specs && *n < max; k++) {
        bool seen = false;
        for (int j = 0; j < *n; j++)
            seen |= out[j].fmt == a->specs[k].fmt && out[j].scale_group == a->specs[k].scale_group;
        if (!seen) out[(*n)++] = a->specs[k];
    }
}

int hfq_recipe_candidates(const hfq_recipe *r, hfq_fmt_spec *out, int max) {
    int n = 0;
    for (int i = 0; i < r->n_rules; i++) add_candidates(&r->rules[i].act, out, max, &n);
    add_candidates(&r->deflt, out, max, &n);
    return n;
}

const char *hfq_recipe_name(const hfq_recipe *r) { return r->name; }
const char *hfq_recipe_where(const hfq_recipe *r) { return r->where; }
int hfq_recipe_file_type(const hfq_recipe *r) { return r->file_type; }

/* ---- resolution ---- */

struct hfq_recipe_resolver {
    const hfq_recipe *r;
    int64_t n_layer;
    bool **masks;         /* per rule: layers selected, NULL without "layers" */
    int64_t *n_matched;   /* per rule: tensors whose conditions held */
    int64_t *n_decided;   /* per rule: tensors it decided */
    int *first_taker;     /* per rule: the earlier rule that took its first undecided match, -1 */
};

hfq_recipe_resolver *hfq_recipe_resolver_new(const hfq_recipe *r, const hfq_plan_model *m, hfq_error *err) {
    hfq_recipe_resolver *rs = calloc(1, sizeof *rs);
    size_t n = (size_t)r->n_rules + 1;
    if (rs) {
        rs->r = r;
        rs->n_layer = m->n_layer;
        rs->masks = calloc(n, sizeof *rs->masks);
        rs->n_matched = calloc(n, sizeof *rs->n_matched);
        rs->n_decided = calloc(n, sizeof *rs->n_decided);
        rs->first_taker = malloc(n * sizeof *rs->first_taker);
    }
    if (!rs || !rs->masks || !rs->n_matched || !rs->n_decided || !rs->first_taker) {
        hfq_recipe_resolver_free(rs);
        hfq_fail(err, r->where, "out of memory");
        return NULL;
    }
    for (int i = 0; i < r->n_rules; i++) {
        rs->first_taker[i] = -1;
        if (!r->rules[i].layers) continue;
        char why[512];
        if (m->n_layer < 1 || !(rs->masks[i] = calloc((size_t)m->n_layer, sizeof(bool)))) {
            hfq_recipe_resolver_free(rs);
            hfq_fail(err, r->where, "rule %d: %s", i + 1, m->n_layer < 1 ? "the model has no layers" : "out of memory");
            return NULL;
        }
        if (select_layers(r->rules[i].layers, m->n_layer, rs->masks[i], why, sizeof why)) {
            hfq_recipe_resolver_free(rs);
            hfq_fail(err, r->where, "rule %d: %s", i + 1, why);
            return NULL;
        }
    }
    return rs;
}

void hfq_recipe_resolver_free(hfq_recipe_resolver *rs) {
    if (!rs) return;
    if (rs->masks)
        for (int i = 0; i < rs->r->n_rules; i++) free(rs->masks[i]);
    free(rs->masks);
    free(rs->n_matched);
    free(rs->n_decided);
    free(rs->first_taker);
    free(rs);
}

static bool rule_holds(const hfq_recipe_resolver *rs, int i, const hfq_plan_tensor *t, int64_t layer,
                       bool is_output) {
    const rule *ru = &rs->r->rules[i];
    if (ru->output >= 0 && ru->output != (int)is_output) return false;
    if (ru->layers && (layer < 0 || layer >= rs->n_layer || !rs->masks[i][layer])) return false;
    return !ru->match || regexec(&ru->re, t->name, 0, NULL, 0) == 0;
}

int hfq_recipe_resolve(hfq_recipe_resolver *rs, const hfq_plan_tensor *t, bool is_output, hfq_recipe_action *out,
                       hfq_error *err) {
    const hfq_recipe *r = rs->r;
    int layer = -1;
    if (sscanf(t->name, "blk.%d.", &layer) != 1) layer = -1;
    int decider = -1;
    for (int i = 0; i < r->n_rules; i++) {
        if (!rule_holds(rs, i, t, layer, is_output)) continue;
        rs->n_matched[i]++;
        if (decider < 0) {
            decider = i;
            rs->n_decided[i]++;
        } else if (rs->first_taker[i] < 0) {
            rs->first_taker[i] = decider;
        }
    }
    const action *a = decider >= 0 ? &r->rules[decider].act : &r->deflt;
    *out = (hfq_recipe_action){decider, a->pinned, a->n_specs, a->specs};
    const char *why = a->pinned ? hfq_fmt_spec_problem(&a->specs[0], t->ne[0]) : NULL;
    if (why) {
        char spec[48];
        hfq_fmt_spec_str(&a->specs[0], spec, sizeof spec);
        return decider >= 0 ? hfq_fail(err, r->where, "rule %d (%s): tensor %s (rows of %" PRId64 "): %s", decider + 1,
                                       spec, t->name, t->ne[0], why)
                            : hfq_fail(err, r->where, "default (%s): tensor %s (rows of %" PRId64 "): %s", spec,
                                       t->name, t->ne[0], why);
    }
    return 0;
}

int hfq_recipe_choose(void *resolver, int64_t index, const hfq_plan_tensor *t, bool is_output, hfq_fmt_spec *spec,
                      char *note, size_t note_size, hfq_error *err) {
    (void)index;
    hfq_recipe_resolver *rs = resolver;
    hfq_recipe_action a;
    if (hfq_recipe_resolve(rs, t, is_output, &a, err) < 0) return -1;
    if (a.n_specs == 0)
        return hfq_fail(err, rs->r->where, "no rule takes tensor %s and the recipe has no default", t->name);
    if (!a.pinned) {
        if (a.rule >= 0)
            return hfq_fail(err, rs->r->where, "rule %d lists candidates (for tensor %s): they need --target-bpw or "
                            "--target-size", a.rule + 1, t->name);
        return hfq_fail(err, rs->r->where, "the default lists candidates (for tensor %s): they need --target-bpw or "
                        "--target-size", t->name);
    }
    *spec = a.specs[0];
    if (a.rule >= 0) snprintf(note, note_size, "recipe rule %d", a.rule + 1);
    return 0;
}

int hfq_recipe_resolver_finish(const hfq_recipe_resolver *rs, hfq_error *err) {
    for (int i = 0; i < rs->r->n_rules; i++)
        if (rs->n_matched[i] > 0 && rs->n_decided[i] == 0)
            return hfq_fail(err, rs->r->where, "rule %d never fires on this model: the %" PRId64 " tensor(s) it "
                            "matches are taken by earlier rules (first by rule %d)", i + 1, rs->n_matched[i],
                            rs->first_taker[i] + 1);
    return 0;
}
