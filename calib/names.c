/* names.c - see names.h. */
#include "calib/names.h"

#include <stdio.h>
#include <string.h>

/* Parts that follow another weight of their layer on the same input. */
static const struct {
    const char *part, *leader;
} followers[] = {
    {".attn_k.", ".attn_q."},
    {".attn_v.", ".attn_q."},
    {".ffn_up.", ".ffn_gate."},
    {".ffn_up_exps.", ".ffn_gate_exps."},
};

bool hfq_calib_input_leader(const char *name, char *out, size_t cap) {
    size_t len = strlen(name);
    if (len >= cap) return true;
    memcpy(out, name, len + 1);
    if (strncmp(name, "blk.", 4) != 0) return true;
    for (size_t i = 0; i < sizeof followers / sizeof followers[0]; i++) {
        const char *at = strstr(name, followers[i].part);
        if (!at) continue;
        size_t head = (size_t)(at - name), old = strlen(followers[i].part), rep = strlen(followers[i].leader);
        if (len - old + rep >= cap) return true;
        snprintf(out, cap, "%.*s%s%s", (int)head, name, followers[i].leader, at + old);
        return false;
    }
    return true;
}

int hfq_calib_layer_name(char *out, size_t cap, long il, const char *part, const char *suffix) {
    int w = snprintf(out, cap, "blk.%ld.%s.%s", il, part, suffix);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}
