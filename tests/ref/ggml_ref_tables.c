/* ggml-common.h's format tables, looked up by name for the tests that check
 * ours (quant/iq_grids.h) element by element. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GGML_COMMON_DECL_C
#define GGML_COMMON_IMPL_C
#include "ggml-common.h"

const void *ggml_ref_table(const char *name, size_t *n, size_t *elem_size);

#define TABLE(t) {#t, t, sizeof t / sizeof t[0], sizeof t[0]}

const void *ggml_ref_table(const char *name, size_t *n, size_t *elem_size) {
    static const struct {
        const char *name;
        const void *data;
        size_t n, elem_size;
    } tables[] = {
        TABLE(ksigns_iq2xs), TABLE(kmask_iq2xs), TABLE(iq2xxs_grid), TABLE(iq2xs_grid), TABLE(iq2s_grid),
        TABLE(iq3xxs_grid), TABLE(iq3s_grid), TABLE(iq1s_grid),
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (strcmp(tables[i].name, name) == 0) {
            *n = tables[i].n;
            *elem_size = tables[i].elem_size;
            return tables[i].data;
        }
    return NULL;
}
