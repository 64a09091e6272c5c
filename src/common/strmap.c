/* strmap.c - see strmap.h. */
#include "src/common/strmap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int hfq_strmap_build(hfq_strmap *m, char *const *keys, const uint32_t *lens, int64_t n,
                     int64_t *dup_first, int64_t *dup_second) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;   /* load factor <= 1/2 */
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return -1;
    memset(m->slots, 0xFF, cap * sizeof *m->slots);
    m->mask = cap - 1;
    m->keys = keys;
    m->lens = lens;
    for (int64_t i = 0; i < n; i++) {
        size_t h = (size_t)XXH3_64bits(keys[i], lens[i]) & m->mask;
        while (m->slots[h] >= 0) {
            int32_t j = m->slots[h];
            if (lens[j] == lens[i] && memcmp(keys[j], keys[i], lens[i]) == 0) {
                *dup_first = j;
                *dup_second = i;
                hfq_strmap_free(m);
                return 1;
            }
            h = (h + 1) & m->mask;
        }
        m->slots[h] = (int32_t)i;
    }
    return 0;
}

int32_t hfq_strmap_get(const hfq_strmap *m, const char *s, size_t len) {
    size_t h = (size_t)XXH3_64bits(s, len) & m->mask;
    for (;;) {
        int32_t j = m->slots[h];
        if (j < 0) return -1;
        if (m->lens[j] == len && memcmp(m->keys[j], s, len) == 0) return j;
        h = (h + 1) & m->mask;
    }
}

void hfq_strmap_free(hfq_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}
