/* fused.c - see src/quantize/fused.h. */
#include "src/quantize/fused.h"

#include <stdio.h>
#include <string.h>

/* member -> group, after "blk.N." */
static const char *const groups[][2] = {
    {"attn_q.weight", "attn_qkv"}, {"attn_k.weight", "attn_qkv"}, {"attn_v.weight", "attn_qkv"},
    {"ffn_gate.weight", "ffn_gate_up"}, {"ffn_up.weight", "ffn_gate_up"},
};

bool hfq_fused_group(const char *name, char *key, size_t n) {
    int layer, at = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &at) != 1 || at == 0 || layer < 0) return false;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (strcmp(name + at, groups[i][0]) != 0) continue;
        const int w = snprintf(key, n, "blk.%d.%s", layer, groups[i][1]);
        return w > 0 && (size_t)w < n;
    }
    return false;
}
