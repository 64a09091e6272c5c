#include "formats/gguf_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "formats/ggml_type.h"

static const struct {
    const char *name;
    uint64_t size;
} vtypes[GGUF_VT_COUNT] = {
    [GGUF_VT_UINT8] = {"u8", 1},    [GGUF_VT_INT8] = {"i8", 1},
    [GGUF_VT_UINT16] = {"u16", 2},  [GGUF_VT_INT16] = {"i16", 2},
    [GGUF_VT_UINT32] = {"u32", 4},  [GGUF_VT_INT32] = {"i32", 4},
    [GGUF_VT_FLOAT32] = {"f32", 4}, [GGUF_VT_BOOL] = {"bool", 1},
    [GGUF_VT_STRING] = {"str", 0},  [GGUF_VT_ARRAY] = {"arr", 0},
    [GGUF_VT_UINT64] = {"u64", 8},  [GGUF_VT_INT64] = {"i64", 8},
    [GGUF_VT_FLOAT64] = {"f64", 8},
};

const char *gguf_vtype_name(gguf_vtype t) {
    return (unsigned)t < GGUF_VT_COUNT ? vtypes[t].name : "?";
}

size_t gguf_vtype_size(gguf_vtype t) {
    return (unsigned)t < GGUF_VT_COUNT ? (size_t)vtypes[t].size : 0;
}

uint64_t gguf_elem_min_size(gguf_vtype t) {
    return t == GGUF_VT_STRING ? 8 : gguf_vtype_size(t);
}

void gguf_printable(char *out, size_t n, const char *s, uint64_t len) {
    size_t keep = len < n ? (size_t)len : n - 4, k;
    for (k = 0; k < keep; k++) {
        unsigned char c = (unsigned char)s[k];
        out[k] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (keep < len) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

int gguf_check_key(const char *key, uint64_t len, const char *where, hfq_error *err) {
    if (len == 0) return hfq_fail(err, where, "key is empty");
    if (len > GGUF_MAX_STRING_BYTES)
        return hfq_fail(err, where, "key of %" PRIu64 " bytes is longer than 1 GiB", len);
    if (memchr(key, 0, (size_t)len)) return hfq_fail(err, where, "key contains a NUL byte");
    return 0;
}

int gguf_check_tensor_name(const char *name, uint64_t len, const char *where, hfq_error *err) {
    if (len == 0) return hfq_fail(err, where, "tensor name is empty");
    if (len > GGUF_MAX_NAME)
        return hfq_fail(err, where, "tensor name of %" PRIu64 " bytes is longer than %d", len,
                        GGUF_MAX_NAME);
    if (memchr(name, 0, (size_t)len)) return hfq_fail(err, where, "tensor name contains a NUL byte");
    return 0;
}

int gguf_check_tensor(uint32_t type, int n_dims, const int64_t *ne, uint64_t *nbytes,
                      const char *where, hfq_error *err) {
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return hfq_fail(err, where, "n_dims %d is outside 1..%d", n_dims, GGUF_MAX_DIMS);
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 0) return hfq_fail(err, where, "ne[%d] = %" PRId64 " is negative", d, ne[d]);
    const ggml_type_info *ti = ggml_type_get(type);
    if (!ti) return hfq_fail(err, where, "unknown ggml type %" PRIu32, type);
    if (ne[0] % ti->block_size != 0)
        return hfq_fail(err, where, "ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64,
                        ne[0], ti->name, ti->block_size);
    for (int d = 0; d < n_dims; d++)
        if (ne[d] == 0) {  /* empty tensors are legal */
            *nbytes = 0;
            return 0;
        }
    /* elements and bytes must both be representable (llama.cpp keeps them in
     * int64_t / size_t) */
    uint64_t elems = 1, bytes = (uint64_t)(ne[0] / ti->block_size);
    int over = __builtin_mul_overflow(bytes, (uint64_t)ti->type_size, &bytes);
    for (int d = 0; d < n_dims; d++) {
        over |= __builtin_mul_overflow(elems, (uint64_t)ne[d], &elems);
        if (d > 0) over |= __builtin_mul_overflow(bytes, (uint64_t)ne[d], &bytes);
    }
    if (over || elems > (uint64_t)INT64_MAX || bytes > (uint64_t)INT64_MAX)
        return hfq_fail(err, where, "shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] overflows",
                        ne[0], n_dims > 1 ? ne[1] : 1, n_dims > 2 ? ne[2] : 1, n_dims > 3 ? ne[3] : 1);
    *nbytes = bytes;
    return 0;
}

int gguf_check_alignment(uint64_t alignment, const char *where, hfq_error *err) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return hfq_fail(err, where, "alignment %" PRIu64 " is not a power of two", alignment);
    return 0;
}

int gguf_grow(void *arr, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t n = *cap ? *cap * 2 : 16;
    if (n < need) n = need;
    void **slot = arr;
    void *p = realloc(*slot, (size_t)n * elem);
    if (!p) return -1;
    *slot = p;
    *cap = n;
    return 0;
}

uint64_t gguf_tensor_hash(const gguf_tensor_info *t) {
    return XXH3_64bits(t->data, (size_t)t->nbytes);
}
