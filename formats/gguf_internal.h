/* gguf_internal.h - what the GGUF reader and writer share (not a public API).
 *
 * One definition of the rules both sides enforce (names, shapes, sizes,
 * alignment, llama.cpp's limits), so a file the writer accepts is exactly a
 * file the reader accepts.
 */
#ifndef HFQ_FORMATS_GGUF_INTERNAL_H
#define HFQ_FORMATS_GGUF_INTERNAL_H

#include <stdint.h>

#include "formats/gguf.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF reader/writer assume a little-endian host"
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3
#define GGUF_KEY_ALIGNMENT "general.alignment"
/* llama.cpp refuses longer strings and arrays (GGUF_MAX_STRING_LENGTH,
 * GGUF_MAX_ARRAY_ELEMENTS). */
#define GGUF_MAX_STRING_BYTES (UINT64_C(1) << 30)
#define GGUF_MAX_ARRAY_ELEMS (UINT64_C(1) << 30)

/* Bytes one element of type t takes in the file at least (8 for a string's
 * length); 0 for ARRAY or an unknown type. */
uint64_t gguf_elem_min_size(gguf_vtype t);

/* Copies s (len bytes) into out (size n) with bytes outside printable ASCII
 * replaced by '?' and long names cut with "...", for one-line messages (n >= 4). */
void gguf_printable(char *out, size_t n, const char *s, uint64_t len);

/* Key or tensor name rules; where names the file/item for the message. */
int gguf_check_key(const char *key, uint64_t len, const char *where, hfq_error *err);
int gguf_check_tensor_name(const char *name, uint64_t len, const char *where, hfq_error *err);

/* Checks a tensor's type and shape (n_dims 1..4, ne >= 0, ne[0] a multiple of
 * the block size, byte size representable) and gives its size in bytes. */
int gguf_check_tensor(uint32_t type, int n_dims, const int64_t *ne, uint64_t *nbytes,
                      const char *where, hfq_error *err);

int gguf_check_alignment(uint64_t alignment, const char *where, hfq_error *err);

/* x rounded up to a multiple of align (a power of two); false on overflow. */
static inline int gguf_pad(uint64_t x, uint64_t align, uint64_t *out) {
    if (x > UINT64_MAX - (align - 1)) return 0;
    *out = (x + align - 1) & ~(align - 1);
    return 1;
}

/* Makes room for need elements in the growing array *arr (capacity *cap,
 * doubled as needed); -1 when out of memory, leaving *arr as it was. */
int gguf_grow(void *arr, int64_t *cap, int64_t need, size_t elem);

/* The serialized value of key i as stored after its type id: for arrays the
 * element type, count and elements; for scalars the value. Points into the
 * mapping; used by gguf_copy_kv. */
const void *gguf_kv_raw(const gguf_file *f, int64_t i, uint64_t *len);

#endif
