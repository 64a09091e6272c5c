/* safetensors.h - read Hugging Face safetensors checkpoints (one file or shards).
 *
 * Files are mmapped read-only; the JSON header is parsed with cJSON and every
 * field a hostile file can lie about is validated (header length <= 100 MB,
 * dtype, shape products without overflow, data_offsets consistent with
 * dtype x shape, inside the file, no overlaps). Sharded checkpoints are read
 * through model.safetensors.index.json: a shard it names that is missing, a
 * tensor it maps that the shard lacks, or a tensor a shard holds that the index
 * does not map, is an error. Every error is one line naming the file and,
 * where there is one, the tensor.
 */
#ifndef HFQ_FORMATS_SAFETENSORS_H
#define HFQ_FORMATS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "formats/error.h"

typedef enum st_dtype {
    ST_F32, ST_F16, ST_BF16, ST_F8_E4M3, ST_F8_E5M2, ST_I8, ST_U8, ST_I16,
    ST_I32, ST_I64, ST_F64, ST_BOOL, ST_DTYPE_COUNT
} st_dtype;

#define ST_MAX_DIMS 8

typedef struct st_tensor {
    const char *name;
    st_dtype dtype;
    int n_dims;
    int64_t shape[ST_MAX_DIMS];  /* as stored: outermost first (PyTorch order) */
    int64_t n_elements;
    uint64_t nbytes;
    int shard;                   /* index of the shard file holding it */
    uint64_t offset;             /* absolute byte offset of the data in that file */
} st_tensor;

typedef struct st_model st_model;

size_t st_dtype_size(st_dtype dt);
const char *st_dtype_name(st_dtype dt);         /* "F32", "BF16", ... */
st_dtype st_dtype_from_name(const char *name);  /* ST_DTYPE_COUNT if unknown */
/* Element count and byte size of dtype x shape; -1 on a negative dim or overflow. */
int st_shape_bytes(st_dtype dtype, int n_dims, const int64_t *shape, int64_t *n_elements,
                   uint64_t *nbytes);
/* A tensor name fit for a one-line message: control characters become '?',
 * long names are cut with "...". */
void st_printable_name(char *out, size_t out_size, const char *name);

/* Opens one .safetensors file. */
st_model *st_open_file(const char *path, hfq_error *err);
/* Opens a model folder: model.safetensors.index.json when present, else the
 * single model.safetensors (or the only *.safetensors file). */
st_model *st_open_dir(const char *dir, hfq_error *err);
void st_close(st_model *m);

/* Tensors in a deterministic order: shard order, then data offset. */
int64_t st_n_tensors(const st_model *m);
const st_tensor *st_tensor_at(const st_model *m, int64_t i);
const st_tensor *st_find(const st_model *m, const char *name);   /* NULL if absent */
const char *st_shard_path(const st_model *m, int shard);
int st_n_shards(const st_model *m);

/* A value of the "__metadata__" object (string -> string) of any shard, or NULL. */
const char *st_metadata_get(const st_model *m, const char *key);

/* Read-only pointer to a tensor's bytes inside the mapping (little-endian,
 * possibly unaligned: copy with memcpy). st_release tells the kernel the pages
 * are no longer needed, so converting a large model keeps RSS bounded. */
const void *st_data(const st_model *m, const st_tensor *t);
void st_release(const st_model *m, const st_tensor *t);
/* The same for bytes [offset, offset + nbytes) of a tensor (clamped to it), so
 * a tensor larger than memory can be streamed in pieces. */
void st_release_range(const st_model *m, const st_tensor *t, uint64_t offset, uint64_t nbytes);

/* Writing (used by the synthetic checkpoint generator and tests). Tensors are
 * written in the order given; data comes from the callback, which fills buf
 * (nbytes of tensor i) and returns 0, or fills err and returns -1. The file
 * is written atomically. metadata may be NULL (pairs of key, value strings,
 * n_metadata pairs). */
typedef struct st_write_tensor {
    const char *name;
    st_dtype dtype;
    int n_dims;
    int64_t shape[ST_MAX_DIMS];
} st_write_tensor;

typedef int (*st_fill_fn)(void *ctx, int64_t i, void *buf, uint64_t nbytes, hfq_error *err);

int st_write_file(const char *path, const st_write_tensor *tensors, int64_t n_tensors,
                  const char *const *metadata, int n_metadata,
                  st_fill_fn fill, void *ctx, hfq_error *err);

#endif
