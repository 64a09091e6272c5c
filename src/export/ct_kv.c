/* ct_kv.c - see ct_kv.h. */
#include "src/export/ct_kv.h"

#include <stdio.h>
#include <stdlib.h>

#include "quant/kv_scales.h"

int ct_kv_read(const gguf_file *f, const char *where, ct_kv *kv, hfq_error *err) {
    *kv = (ct_kv){0};
    if (gguf_find_key(f, HFQ_KV_KEY_K_SCALE) < 0 && gguf_find_key(f, HFQ_KV_KEY_V_SCALE) < 0) return 0;
    const int64_t ia = gguf_find_key(f, "general.architecture");
    const char *arch = ia < 0 ? NULL : gguf_get_str(f, ia, NULL, err);
    char key[128];
    int64_t il = -1, n_layer = 0;
    if (arch) snprintf(key, sizeof key, "%s.block_count", arch);
    if (!arch || (il = gguf_find_key(f, key)) < 0 || gguf_get_int(f, il, &n_layer, err))
        return hfq_fail(err, where, "static KV scales without the model's block_count");
    if (hfq_kv_scales_read(f, n_layer, &kv->k, &kv->v, err)) {
        hfq_error_prefix(err, where);
        return -1;
    }
    kv->n_layer = n_layer;
    return 0;
}

void ct_kv_free(ct_kv *kv) {
    free(kv->k);
    free(kv->v);
    *kv = (ct_kv){0};
}

void ct_kv_tensor_name(char which, int64_t il, char *buf, size_t cap) {
    snprintf(buf, cap, "model.layers.%lld.self_attn.%c_scale", (long long)il, which);
}
