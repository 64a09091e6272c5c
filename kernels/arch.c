#include "kernels/arch.h"

#include <stdio.h>
#include <string.h>

/* Indexed by id, which is also the order of the error message listing what
 * is supported. */
static const hfq_arch_desc *const families[] = {
    [HFQ_ARCH_LLAMA] = &hfq_arch_llama,
    [HFQ_ARCH_QWEN2] = &hfq_arch_qwen2,
    [HFQ_ARCH_QWEN3] = &hfq_arch_qwen3,
    [HFQ_ARCH_GEMMA] = &hfq_arch_gemma,
    [HFQ_ARCH_GEMMA2] = &hfq_arch_gemma2,
    [HFQ_ARCH_GEMMA3] = &hfq_arch_gemma3,
    [HFQ_ARCH_PHI3] = &hfq_arch_phi3,
    [HFQ_ARCH_QWEN3MOE] = &hfq_arch_qwen3moe,
};
_Static_assert(sizeof families / sizeof families[0] == HFQ_ARCH_COUNT, "one row per hfq_arch id");

const hfq_arch_desc *hfq_arch_get(hfq_arch id) {
    return (unsigned)id < HFQ_ARCH_COUNT ? families[id] : NULL;
}

int hfq_arch_find(const char *name, hfq_arch *id, const char *where, hfq_error *err) {
    char supported[256] = "";
    size_t used = 0;
    for (int i = 0; i < HFQ_ARCH_COUNT; i++) {
        if (strcmp(families[i]->name, name) == 0) {
            *id = (hfq_arch)i;
            return 0;
        }
        snprintf(supported + used, sizeof supported - used, "%s%s", used ? ", " : "", families[i]->name);
        used = strlen(supported);
    }
    return hfq_fail(err, where, "architecture '%s' is not supported (%s)", name, supported);
}

hfq_need hfq_arch_need(const hfq_arch_desc *arch, const char *suffix, hfq_need dflt) {
    for (size_t i = 0; i < arch->n_layer_tensors; i++)
        if (strcmp(arch->layer_tensors[i].suffix, suffix) == 0) return arch->layer_tensors[i].need;
    return dflt;
}
