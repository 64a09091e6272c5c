/* strmap.h - read-only hash index from byte strings to their position in an
 * array of strings (open addressing, XXH3 hashes). The index does not copy
 * the strings: the array must outlive it. */
#ifndef HFQ_SRC_COMMON_STRMAP_H
#define HFQ_SRC_COMMON_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct hfq_strmap {
    int32_t *slots;             /* -1 = empty, else index into keys */
    size_t mask;
    char *const *keys;
    const uint32_t *lens;
} hfq_strmap;

/* Indexes keys[0..n) (n < 2^31). Returns 0; 1 when two keys are equal (their
 * indices in *dup_first < *dup_second; the map is then freed); -1 when out of
 * memory. */
int hfq_strmap_build(hfq_strmap *m, char *const *keys, const uint32_t *lens, int64_t n,
                     int64_t *dup_first, int64_t *dup_second);
/* Index of the key equal to s[0..len), or -1. */
int32_t hfq_strmap_get(const hfq_strmap *m, const char *s, size_t len);
void hfq_strmap_free(hfq_strmap *m);

#endif
