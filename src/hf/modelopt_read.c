#include "src/hf/modelopt_read.h"

#include <stdlib.h>
#include <string.h>

#include "src/hf/ct_scheme.h"

static bool set(const cJSON *v) { return v && !cJSON_IsNull(v); }

int hf_modelopt_parse(hf_ct_config *c, const cJSON *q, hfq_error *err) {
    static const char *const known[] = {"quant_method", "quant_algo", "kv_cache_quant_algo", "group_size",
                                        "exclude_modules", "ignore", "producer", NULL};
    if (!cJSON_IsObject(q)) return hfq_fail(err, c->path, "field 'quantization' is missing or not an object");
    for (const cJSON *kv = q->child; kv; kv = kv->next) {
        bool ok = false;
        for (const char *const *k = known; *k && !ok; k++) ok = !strcmp(*k, kv->string);
        if (!ok) return hfq_fail(err, c->path, "field '%s' is not read by hfconv", kv->string);
    }
    if (set(cJSON_GetObjectItemCaseSensitive(q, "kv_cache_quant_algo")))
        return hfq_fail(err, c->path, "field 'kv_cache_quant_algo': not implemented");
    const cJSON *algo = cJSON_GetObjectItemCaseSensitive(q, "quant_algo");
    if (!cJSON_IsString(algo)) return hfq_fail(err, c->path, "field 'quant_algo' is missing");
    if (!(c->groups = calloc(1, sizeof *c->groups))) return hfq_fail(err, NULL, "out of memory");
    c->n_groups = 1;
    ct_group *g = &c->groups[0];
    g->modelopt = true;
    g->w = (ct_args){.present = true, .bits = 8, .is_float = true, .symmetric = true, .strat = S_TENSOR};
    g->in = g->w;
    if (!strcmp(algo->valuestring, "FP8")) {
        g->fmt = FMT_FLOAT;
    } else if (!strcmp(algo->valuestring, "FP8_PER_CHANNEL_PER_TOKEN")) {
        g->fmt = FMT_FLOAT;
        g->w.strat = S_CHANNEL;
        g->in.strat = S_TOKEN;
        g->in.dynamic = DYN_TRUE;
    } else if (!strcmp(algo->valuestring, "NVFP4")) {
        const cJSON *gs = cJSON_GetObjectItemCaseSensitive(q, "group_size");
        if (set(gs) && !(cJSON_IsNumber(gs) && gs->valuedouble == 16))
            return hfq_fail(err, c->path, "field 'group_size' is not 16 (NVFP4)");
        g->fmt = FMT_NVFP4;
        g->w = (ct_args){.present = true, .bits = 4, .is_float = true, .symmetric = true, .strat = S_TENSOR_GROUP,
                         .group = 16};
        g->in = g->w;
        g->in.dynamic = DYN_LOCAL;
    } else {
        return hfq_fail(err, c->path, "field 'quant_algo' = '%s': not implemented (FP8, "
                        "FP8_PER_CHANNEL_PER_TOKEN, NVFP4)", algo->valuestring);
    }
    if (hf_ct_add_target(c, "Linear", 0, false, err)) return -1;
    const char *lists[] = {"exclude_modules", "ignore"};
    for (int l = 0; l < 2; l++) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(q, lists[l]);
        if (!set(list)) continue;
        if (!cJSON_IsArray(list)) return hfq_fail(err, c->path, "field '%s' is not a list", lists[l]);
        for (const cJSON *v = list->child; v; v = v->next) {
            if (!cJSON_IsString(v)) return hfq_fail(err, c->path, "field '%s' holds a non-string", lists[l]);
            if (hf_ct_add_target(c, v->valuestring, -1, true, err)) return -1;
        }
    }
    return 0;
}
