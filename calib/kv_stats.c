/* kv_stats.c - see kv_stats.h. */
#include "calib/kv_stats.h"

#include <math.h>
#include <stdlib.h>

#include "quant/kv_scales.h"

int hfq_calib_kv_add(hfq_calib_stats *s, int64_t layer, int64_t n_layer, const float *k, const float *v,
                     int64_t n_tokens, int64_t n_head_kv, int64_t head_dim, hfq_error *err) {
    if (!s->k_amax) {
        if (n_layer < 1 || n_head_kv < 1) return hfq_fail(err, "calibration", "no KV heads to collect");
        s->k_amax = calloc((size_t)(n_layer * n_head_kv), sizeof *s->k_amax);
        s->v_amax = calloc((size_t)(n_layer * n_head_kv), sizeof *s->v_amax);
        if (!s->k_amax || !s->v_amax) return hfq_fail(err, "calibration", "out of memory for the KV maxima");
        s->kv_layers = n_layer;
        s->kv_heads = n_head_kv;
    }
    if (n_layer != s->kv_layers || n_head_kv != s->kv_heads || layer < 0 || layer >= n_layer)
        return hfq_fail(err, "calibration", "KV maxima of layer %lld of %lld x %lld heads, collected for %lld x %lld",
                        (long long)layer, (long long)n_layer, (long long)n_head_kv, (long long)s->kv_layers,
                        (long long)s->kv_heads);
    float *km = s->k_amax + layer * n_head_kv, *vm = s->v_amax + layer * n_head_kv;
    for (int64_t t = 0; t < n_tokens; t++)
        for (int64_t h = 0; h < n_head_kv; h++) {
            const float *kr = k + (t * n_head_kv + h) * head_dim, *vr = v + (t * n_head_kv + h) * head_dim;
            for (int64_t d = 0; d < head_dim; d++) {
                km[h] = fmaxf(km[h], fabsf(kr[d]));
                vm[h] = fmaxf(vm[h], fabsf(vr[d]));
            }
        }
    return 0;
}

int hfq_calib_kv_check(const hfq_calib_stats *s, int64_t n_layer, int64_t n_head_kv, const char *where,
                       hfq_error *err) {
    if (!s->k_amax)
        return hfq_fail(err, where, "--kv-scales needs K and V maxima, which the statistics lack (files from "
                                    "llama-imatrix and older ones have none: calibrate with --calibration-file)");
    if (s->kv_layers != n_layer || s->kv_heads != n_head_kv)
        return hfq_fail(err, where, "KV maxima for %lld layers of %lld kv heads, the model has %lld of %lld "
                                    "(statistics of another model?)",
                        (long long)s->kv_layers, (long long)s->kv_heads, (long long)n_layer, (long long)n_head_kv);
    return 0;
}

void hfq_calib_kv_scales(const hfq_calib_stats *s, float *k, float *v) {
    for (int64_t il = 0; il < s->kv_layers; il++) {
        float km = 0.0f, vm = 0.0f;
        for (int64_t h = 0; h < s->kv_heads; h++) {
            km = fmaxf(km, s->k_amax[il * s->kv_heads + h]);
            vm = fmaxf(vm, s->v_amax[il * s->kv_heads + h]);
        }
        k[il] = hfq_kv_scale_of_amax(km);
        v[il] = hfq_kv_scale_of_amax(vm);
    }
}
