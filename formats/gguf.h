/* gguf.h - GGUF v3 reader (mmap, validated) and streaming writer.
 *
 * Byte-compatible with llama.cpp's gguf.cpp: little-endian; magic "GGUF",
 * version 3; int64 counts; strings are u64 length + bytes without NUL;
 * general.alignment (u32, power of two, default 32); tensor infos then data,
 * each tensor's data at an offset (relative to the data section) that is a
 * multiple of the alignment, packed densely in declaration order; names at most
 * 63 bytes; at most 4 dims with ne[0] the row length (contiguous dimension);
 * arrays of arrays are refused.
 *
 * The reader validates everything a hostile file can lie about (counts against
 * the bytes left, string lengths, type ids, duplicate keys and tensor names,
 * dims, block-size divisibility of ne[0], overflow of sizes, offsets inside the
 * file and aligned, overlaps) and fails with a one-line error naming the file
 * and the key or tensor. Like llama.cpp it also refuses: version != 3, empty
 * keys, strings over 1 GiB, arrays over 2^30 elements, and tensor offsets other
 * than the dense packing (each tensor at the previous one's end rounded up to
 * the alignment). Stricter than llama.cpp: keys and tensor names may not be
 * empty or hold NUL bytes, and n_dims must be 1..4.
 *
 * Ownership: every string the reader returns is owned by the gguf_file and
 * tensor data points into its read-only mapping; all stay valid until
 * gguf_close. The writer copies every key, value and name it is given.
 */
#ifndef HFQ_FORMATS_GGUF_H
#define HFQ_FORMATS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 63
#define GGUF_DEFAULT_ALIGNMENT 32

/* Metadata key that holds XXH3-64 of each tensor's bytes, in tensor order
 * (array of UINT64); gguf-info --verify recomputes them. */
#define GGUF_KEY_TENSOR_HASHES "hfq.tensor_xxh3_64"

typedef enum gguf_vtype {
    GGUF_VT_UINT8 = 0, GGUF_VT_INT8 = 1, GGUF_VT_UINT16 = 2, GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4, GGUF_VT_INT32 = 5, GGUF_VT_FLOAT32 = 6, GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8, GGUF_VT_ARRAY = 9, GGUF_VT_UINT64 = 10, GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12, GGUF_VT_COUNT
} gguf_vtype;

const char *gguf_vtype_name(gguf_vtype t);   /* "u32", "str", "arr", ... */
size_t gguf_vtype_size(gguf_vtype t);        /* bytes of a scalar; 0 for STRING/ARRAY */

/* ---- reader ---- */

typedef struct gguf_tensor_info {
    const char *name;           /* NUL-terminated */
    uint32_t type;              /* enum ggml_type_id */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];  /* unused dims are 1 */
    uint64_t offset;            /* relative to the data section */
    uint64_t nbytes;
    const void *data;           /* inside the read-only mapping */
    int file;                   /* which file of a split GGUF holds it (0: the first, the one opened) */
} gguf_tensor_info;

typedef struct gguf_file gguf_file;

/* A split GGUF (llama.cpp's gguf-split, convert_hf_to_gguf.py --split-max-*)
 * is one model in COUNT files named PREFIX-00001-of-COUNT.gguf onwards (5
 * digits each), each with split.no (0-based) and split.count, the first
 * holding the model's metadata. gguf_open of the first opens the others
 * (found by that naming; each checked to say it is that file of that split,
 * and split.tensors.count, when present, against their tensors) and gives
 * every file's tensors in file order, as llama.cpp loads them; keys are the
 * first file's. Opening any other file of a split fails, naming the first. */
gguf_file *gguf_open(const char *path, hfq_error *err);
void gguf_close(gguf_file *f);
const char *gguf_path(const gguf_file *f);      /* the path opened */
uint32_t gguf_version(const gguf_file *f);
uint32_t gguf_alignment(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f);  /* absolute offset of the (first) file's data section */
uint64_t gguf_file_size(const gguf_file *f);    /* bytes of every file of a split */
int gguf_n_files(const gguf_file *f);           /* 1, or the files of a split */
/* The path of file i (0-based) of the split whose first file's path is
 * first: returns the split's file count when first is named like a split's
 * first file (...-00001-of-NNNNN.gguf), 0 when it is not, i is out of
 * range or out (n bytes) is too small. */
int gguf_split_path(const char *first, int i, char *out, size_t n);

/* Keys in file order. gguf_kv_type gives GGUF_VT_ARRAY for arrays;
 * out-of-range i gives NULL / GGUF_VT_COUNT. */
int64_t gguf_n_kv(const gguf_file *f);
const char *gguf_kv_key(const gguf_file *f, int64_t i);
gguf_vtype gguf_kv_type(const gguf_file *f, int64_t i);
int64_t gguf_find_key(const gguf_file *f, const char *key);  /* -1 if absent */

/* Scalar values. Each getter checks the stored type: the integer getter
 * accepts any integer type (and BOOL) whose value fits; the float getter any
 * FLOAT32/FLOAT64. They return 0, or -1 with err filled (naming file and key). */
int gguf_get_int(const gguf_file *f, int64_t i, int64_t *out, hfq_error *err);
int gguf_get_uint64(const gguf_file *f, int64_t i, uint64_t *out, hfq_error *err);
int gguf_get_float(const gguf_file *f, int64_t i, double *out, hfq_error *err);
int gguf_get_bool(const gguf_file *f, int64_t i, bool *out, hfq_error *err);
/* Bytes of a numeric or BOOL scalar (little-endian, possibly unaligned: read
 * with memcpy); NULL for strings, arrays and out-of-range i. */
const void *gguf_get_val_data(const gguf_file *f, int64_t i);
/* STRING value: NUL-terminated copy owned by f; len (may be NULL) gets its
 * length in bytes. */
const char *gguf_get_str(const gguf_file *f, int64_t i, uint64_t *len, hfq_error *err);

/* Arrays. Element type and count; numeric data is a pointer into the mapping
 * (little-endian, possibly unaligned: read with memcpy); string elements are
 * returned one by one (NUL-terminated copies owned by f, made at open).
 * When key i is not an array: gguf_arr_type gives GGUF_VT_COUNT, gguf_arr_n -1,
 * gguf_arr_data NULL (also NULL for string arrays); gguf_arr_str gives NULL
 * when i is not a string array or j is out of range. */
gguf_vtype gguf_arr_type(const gguf_file *f, int64_t i);
int64_t gguf_arr_n(const gguf_file *f, int64_t i);
const void *gguf_arr_data(const gguf_file *f, int64_t i);
const char *gguf_arr_str(const gguf_file *f, int64_t i, int64_t j, uint64_t *len);

/* Tells the kernel that the mapped pages holding [p, p + nbytes) are no
 * longer needed (clamped to the mapping; the data stays readable and is
 * faulted back in from the file), so streaming a large file through memory
 * keeps the resident set bounded. */
void gguf_release(const gguf_file *f, const void *p, uint64_t nbytes);

int64_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor_info *gguf_tensor_at(const gguf_file *f, int64_t i);
const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name);  /* NULL if absent */

/* Integrity hashes (GGUF_KEY_TENSOR_HASHES). gguf_stored_hash returns 1 and
 * sets *out when the file stores hashes, 0 when it has none (files from other
 * writers), -1 with err when the key is malformed (not an array of UINT64 with
 * one element per tensor) or i is out of range. gguf_tensor_hash computes
 * XXH3-64 of a tensor's bytes. */
int gguf_stored_hash(const gguf_file *f, int64_t i, uint64_t *out, hfq_error *err);
uint64_t gguf_tensor_hash(const gguf_tensor_info *t);

/* ---- streaming writer ----
 * Build the metadata and tensor table first, then gguf_writer_begin writes the
 * header to a temporary file beside path; tensor data follows with
 * gguf_writer_write_tensor in declaration order (one tensor in memory at a
 * time, or in pieces with gguf_writer_write_data); gguf_writer_finish pads,
 * patches the GGUF_KEY_TENSOR_HASHES array (reserved at begin) and commits
 * (atomic_file.h: fsynced when it replaces a file, then renamed). Any failure, or gguf_writer_free before finish, removes the
 * temporary file. Setting a key that exists replaces its value in place
 * (keeping its position and possibly changing its type); keys are written in
 * the order they were first set.
 *
 * Setters return 0, or -1 on a bad argument (empty key, STRING/ARRAY element
 * type for gguf_set_arr, n < 0, over llama.cpp's limits of 1 GiB per string
 * and 2^30 elements per array), when out of memory, or after begin; the first
 * such failure is kept and gguf_writer_begin then fails with its message, so
 * callers may check only begin. Changing keys after begin (set or remove) fails
 * the whole writer and removes its temporary file.
 *
 * The writer owns GGUF_KEY_TENSOR_HASHES: begin sets it (in place when it was
 * copied from another file) or removes it when there are no tensors.
 * general.alignment, when set, must be a UINT32 power of two (checked at
 * begin); it is the alignment used for the data. Output is deterministic. */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

int gguf_set_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_set_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_set_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_set_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_set_f32(gguf_writer *w, const char *key, float v);
int gguf_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_set_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_set_f64(gguf_writer *w, const char *key, double v);
int gguf_set_str(gguf_writer *w, const char *key, const char *v);
/* Numeric array (elements of type t, little-endian host layout, n elements). */
int gguf_set_arr(gguf_writer *w, const char *key, gguf_vtype t, const void *data, int64_t n);
/* String array; lens may be NULL (then strlen is used). */
int gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                     const uint64_t *lens, int64_t n);
/* Copies one key (any type, arrays included) from a reader. */
int gguf_copy_kv(gguf_writer *w, const gguf_file *src, int64_t i);
int gguf_remove_key(gguf_writer *w, const char *key);   /* 0, or -1 if absent */

/* Declares a tensor; returns its index (>= 0) or -1 with err filled (bad
 * name, duplicate, dims, ne[0] not a multiple of the type's block size, size
 * overflow, called after begin). ne has n_dims entries; ne[0] is the row length. */
int64_t gguf_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims,
                        const int64_t *ne, hfq_error *err);
uint64_t gguf_tensor_nbytes(const gguf_writer *w, int64_t i);

int gguf_writer_begin(gguf_writer *w, const char *path, hfq_error *err);
/* Writes tensor i's whole data (must be the next tensor in order). Any failure
 * from here on removes the temporary file and fails every later call. */
int gguf_writer_write_tensor(gguf_writer *w, int64_t i, const void *data, hfq_error *err);
/* Writes part of the current tensor's data; pieces must add up to its nbytes
 * (more is an error). A tensor of 0 bytes is completed by writing 0 bytes. */
int gguf_writer_write_data(gguf_writer *w, const void *data, uint64_t n, hfq_error *err);
/* Fails unless every tensor was written completely. */
int gguf_writer_finish(gguf_writer *w, hfq_error *err);
/* Completes the file like gguf_writer_finish but does not rename it: the
 * complete file stays the temporary (registered for removal on signals) and
 * its path is returned (owned by w) for reading back in this process; it is
 * removed by gguf_writer_free. For intermediate files (quantize --rotate). */
const char *gguf_writer_finish_temp(gguf_writer *w, hfq_error *err);

#endif
