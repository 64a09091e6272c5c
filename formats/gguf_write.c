/* gguf_write.c - streaming GGUF v3 writer through an atomic output file. */
#include "formats/gguf_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <xxhash.h>

#include "formats/atomic_file.h"

/* A key and its serialized value: the bytes that follow the type id in the
 * file (for arrays: element type, count, elements). */
typedef struct wkv {
    char *key;
    gguf_vtype type;
    uint8_t *val;
    size_t len;
} wkv;

typedef struct wtensor {
    char name[GGUF_MAX_NAME + 1];
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset;  /* in the data section, set at begin */
    uint64_t hash;    /* XXH3-64 of the data, set when written */
} wtensor;

enum wstate { W_BUILD, W_WRITING, W_DONE, W_FAILED, W_KEPT };  /* W_KEPT: complete, still the temporary */

struct gguf_writer {
    wkv *kv;
    int64_t n_kv, cap_kv;
    wtensor *t;
    int64_t n_t, cap_t;
    int64_t *slots;       /* open addressing: tensor index by name hash, -1 empty */
    uint64_t n_slots;     /* power of two, at least twice n_t */
    enum wstate state;
    bool has_err;
    hfq_error first_err;  /* first failure; later calls repeat it */
    hfq_atomic_file af;
    uint32_t alignment;
    uint64_t pos;         /* bytes written */
    uint64_t hashes_pos;  /* file offset of the hash array's elements */
    int64_t cur;          /* tensor being written */
    uint64_t cur_done;    /* its bytes written so far */
    XXH3_state_t *xs;
};

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    if (w->state == W_WRITING || w->state == W_KEPT) hfq_atomic_abort(&w->af);
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    free(w->kv);
    free(w->t);
    free(w->slots);
    XXH3_freeState(w->xs);
    free(w);
}

/* Records the writer's first failure; after begin it also removes the
 * temporary file, so no partial output survives. Copies the message to err. */
static int vfail(gguf_writer *w, hfq_error *err, const char *where, const char *fmt, va_list ap) {
    if (!w->has_err) {
        hfq_vfail(&w->first_err, where, fmt, ap);
        w->has_err = true;
    }
    if (w->state == W_WRITING) hfq_atomic_abort(&w->af);
    if (w->state != W_BUILD) w->state = W_FAILED;
    if (err) *err = w->first_err;
    return -1;
}

static int fail(gguf_writer *w, hfq_error *err, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(gguf_writer *w, hfq_error *err, const char *where, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(w, err, where, fmt, ap);
    va_end(ap);
    return -1;
}

static void name_where(char *where, size_t n, const char *path, const char *what, const char *name) {
    char shown[200];
    gguf_printable(shown, sizeof shown, name, strlen(name));
    snprintf(where, n, "%s%s%s '%s'", path ? path : "", path ? ": " : "", what, shown);
}

/* A failure of a metadata call, named by its key. */
static int fail_key(gguf_writer *w, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_key(gguf_writer *w, const char *key, const char *fmt, ...) {
    char where[512];
    name_where(where, sizeof where, NULL, "key", key ? key : "");
    va_list ap;
    va_start(ap, fmt);
    vfail(w, NULL, where, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- metadata ---- */

static int64_t find_kv(const gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) return i;
    return -1;
}

/* Sets key to a serialized value, taking ownership of val (NULL: out of memory). */
static int set_value(gguf_writer *w, const char *key, gguf_vtype type, uint8_t *val, size_t len) {
    int rc = 0;
    if (w->state != W_BUILD) rc = fail_key(w, key, "set after gguf_writer_begin");
    else if (!val) rc = fail_key(w, key, "out of memory");
    else if (!key || !*key) rc = fail_key(w, key, "key is empty");
    if (rc) {
        free(val);
        return rc;
    }
    int64_t i = find_kv(w, key);
    if (i < 0) {
        char *copy = strdup(key);
        if (!copy || gguf_grow(&w->kv, &w->cap_kv, w->n_kv + 1, sizeof *w->kv)) {
            free(copy);
            free(val);
            return fail_key(w, key, "out of memory");
        }
        i = w->n_kv++;
        w->kv[i] = (wkv){.key = copy};
    }
    free(w->kv[i].val);
    w->kv[i].type = type;
    w->kv[i].val = val;
    w->kv[i].len = len;
    return 0;
}

static uint8_t *dup_mem(const void *p, size_t n) {
    uint8_t *d = malloc(n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

#define SCALAR_SETTER(fn, ctype, vt) \
    int fn(gguf_writer *w, const char *key, ctype v) { \
        return set_value(w, key, vt, dup_mem(&v, sizeof v), sizeof v); \
    }
SCALAR_SETTER(gguf_set_u8, uint8_t, GGUF_VT_UINT8)
SCALAR_SETTER(gguf_set_i8, int8_t, GGUF_VT_INT8)
SCALAR_SETTER(gguf_set_u16, uint16_t, GGUF_VT_UINT16)
SCALAR_SETTER(gguf_set_i16, int16_t, GGUF_VT_INT16)
SCALAR_SETTER(gguf_set_u32, uint32_t, GGUF_VT_UINT32)
SCALAR_SETTER(gguf_set_i32, int32_t, GGUF_VT_INT32)
SCALAR_SETTER(gguf_set_f32, float, GGUF_VT_FLOAT32)
SCALAR_SETTER(gguf_set_u64, uint64_t, GGUF_VT_UINT64)
SCALAR_SETTER(gguf_set_i64, int64_t, GGUF_VT_INT64)
SCALAR_SETTER(gguf_set_f64, double, GGUF_VT_FLOAT64)

int gguf_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_value(w, key, GGUF_VT_BOOL, dup_mem(&b, 1), 1);
}

/* Appends a u64-length-prefixed string at p; returns the end. */
static uint8_t *put_str(uint8_t *p, const char *s, uint64_t len) {
    memcpy(p, &len, 8);
    memcpy(p + 8, s, (size_t)len);
    return p + 8 + len;
}

/* The element type and count that start an array value. */
static uint8_t *put_arr_head(uint8_t *p, gguf_vtype t, int64_t n) {
    uint32_t t32 = (uint32_t)t;
    uint64_t n64 = (uint64_t)n;
    memcpy(p, &t32, 4);
    memcpy(p + 4, &n64, 8);
    return p + 12;
}

int gguf_set_str(gguf_writer *w, const char *key, const char *v) {
    if (!v) return fail_key(w, key, "string value is NULL");
    uint64_t len = strlen(v);
    if (len > GGUF_MAX_STRING_BYTES) return fail_key(w, key, "string is over the 1 GiB limit");
    uint8_t *val = malloc(8 + (size_t)len);
    if (val) put_str(val, v, len);
    return set_value(w, key, GGUF_VT_STRING, val, 8 + (size_t)len);
}

/* An array of n elements from data (NULL only when n is 0). */
static int check_count(gguf_writer *w, const char *key, const void *data, int64_t n) {
    if (n < 0 || (uint64_t)n > GGUF_MAX_ARRAY_ELEMS)
        return fail_key(w, key, "array count %" PRId64 " is outside 0..2^30", n);
    if (n > 0 && !data) return fail_key(w, key, "array data is NULL");
    return 0;
}

int gguf_set_arr(gguf_writer *w, const char *key, gguf_vtype t, const void *data, int64_t n) {
    if (t >= GGUF_VT_COUNT || t == GGUF_VT_STRING || t == GGUF_VT_ARRAY)
        return fail_key(w, key, "gguf_set_arr needs a numeric element type, not %s", gguf_vtype_name(t));
    if (check_count(w, key, data, n)) return -1;
    size_t bytes = (size_t)n * gguf_vtype_size(t);
    uint8_t *val = malloc(12 + bytes);
    if (val) {
        uint8_t *p = put_arr_head(val, t, n);
        if (bytes) memcpy(p, data, bytes);
    }
    return set_value(w, key, GGUF_VT_ARRAY, val, 12 + bytes);
}

int gguf_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                     const uint64_t *lens, int64_t n) {
    if (check_count(w, key, strs, n)) return -1;
    size_t total = 12;
    for (int64_t j = 0; j < n; j++) {
        uint64_t len = lens ? lens[j] : strlen(strs[j]);
        if (len > GGUF_MAX_STRING_BYTES)
            return fail_key(w, key, "string element %" PRId64 " is over the 1 GiB limit", j);
        total += 8 + (size_t)len;
    }
    uint8_t *val = malloc(total);
    if (val) {
        uint8_t *p = put_arr_head(val, GGUF_VT_STRING, n);
        for (int64_t j = 0; j < n; j++) p = put_str(p, strs[j], lens ? lens[j] : strlen(strs[j]));
    }
    return set_value(w, key, GGUF_VT_ARRAY, val, total);
}

int gguf_copy_kv(gguf_writer *w, const gguf_file *src, int64_t i) {
    uint64_t len = 0;
    const void *raw = gguf_kv_raw(src, i, &len);
    if (!raw) {
        char where[64];
        snprintf(where, sizeof where, "key #%" PRId64, i);
        return fail(w, NULL, where, "copy from %s: key index out of range", gguf_path(src));
    }
    return set_value(w, gguf_kv_key(src, i), gguf_kv_type(src, i), dup_mem(raw, (size_t)len), (size_t)len);
}

int gguf_remove_key(gguf_writer *w, const char *key) {
    int64_t i = key ? find_kv(w, key) : -1;
    if (i < 0) return -1;
    if (w->state != W_BUILD) return fail_key(w, key, "removed after gguf_writer_begin");
    free(w->kv[i].key);
    free(w->kv[i].val);
    memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    return 0;
}

/* ---- tensor table ---- */

static uint64_t name_hash(const char *name) { return XXH3_64bits(name, strlen(name)); }

/* Slot of name in the table: its tensor's slot, or the empty one where it goes. */
static uint64_t find_slot(const gguf_writer *w, const char *name) {
    uint64_t mask = w->n_slots - 1, s = name_hash(name) & mask;
    while (w->slots[s] >= 0 && strcmp(w->t[w->slots[s]].name, name) != 0) s = (s + 1) & mask;
    return s;
}

/* Keeps the name table at most half full. */
static int reserve_slots(gguf_writer *w, int64_t n) {
    if ((uint64_t)n * 2 <= w->n_slots) return 0;
    uint64_t size = w->n_slots ? w->n_slots * 2 : 64;
    int64_t *slots = malloc(size * sizeof *slots);
    if (!slots) return -1;
    free(w->slots);
    w->slots = slots;
    w->n_slots = size;
    for (uint64_t s = 0; s < size; s++) slots[s] = -1;
    for (int64_t i = 0; i < w->n_t; i++) slots[find_slot(w, w->t[i].name)] = i;
    return 0;
}

int64_t gguf_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims,
                        const int64_t *ne, hfq_error *err) {
    char where[512];
    name_where(where, sizeof where, NULL, "tensor", name ? name : "");
    if (w->state != W_BUILD) return fail(w, err, where, "added after gguf_writer_begin");
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    if (!name || gguf_check_tensor_name(name, strlen(name), where, err) ||
        gguf_check_tensor(type, n_dims, ne, &t.nbytes, where, err))
        return -1;
    memcpy(t.name, name, strlen(name) + 1);
    memcpy(t.ne, ne, (size_t)n_dims * sizeof *ne);
    if (gguf_grow(&w->t, &w->cap_t, w->n_t + 1, sizeof *w->t) || reserve_slots(w, w->n_t + 1))
        return hfq_fail(err, where, "out of memory");
    uint64_t s = find_slot(w, name);
    if (w->slots[s] >= 0) return hfq_fail(err, where, "duplicate tensor name");
    w->slots[s] = w->n_t;
    w->t[w->n_t] = t;
    return w->n_t++;
}

uint64_t gguf_tensor_nbytes(const gguf_writer *w, int64_t i) {
    return i >= 0 && i < w->n_t ? w->t[i].nbytes : 0;
}

/* ---- output ---- */

static int emit(gguf_writer *w, const void *p, size_t n, hfq_error *err) {
    if (hfq_atomic_write(&w->af, p, n, err)) return fail(w, err, NULL, "%s", err->msg);
    w->pos += n;
    return 0;
}

static int emit_u32(gguf_writer *w, uint32_t v, hfq_error *err) { return emit(w, &v, 4, err); }
static int emit_u64(gguf_writer *w, uint64_t v, hfq_error *err) { return emit(w, &v, 8, err); }

static int emit_str(gguf_writer *w, const char *s, hfq_error *err) {
    size_t len = strlen(s);
    return emit_u64(w, len, err) || emit(w, s, len, err) ? -1 : 0;
}

/* Zeros up to the next multiple of the alignment. */
static int emit_pad(gguf_writer *w, hfq_error *err) {
    static const uint8_t zeros[4096];
    uint64_t end = w->pos;
    gguf_pad(w->pos, w->alignment, &end);  /* pos is a real file size: no overflow */
    while (w->pos < end) {
        uint64_t n = end - w->pos < sizeof zeros ? end - w->pos : sizeof zeros;
        if (emit(w, zeros, (size_t)n, err)) return -1;
    }
    return 0;
}

/* Alignment from general.alignment, the hash key, and each tensor's offset. */
static int plan(gguf_writer *w, const char *path, hfq_error *err) {
    char where[512];
    snprintf(where, sizeof where, "%s: key '%s'", path, GGUF_KEY_ALIGNMENT);
    int64_t k = find_kv(w, GGUF_KEY_ALIGNMENT);
    if (k >= 0) {
        if (w->kv[k].type != GGUF_VT_UINT32)
            return fail(w, err, where, "has type %s, expected u32", gguf_vtype_name(w->kv[k].type));
        memcpy(&w->alignment, w->kv[k].val, 4);
        if (gguf_check_alignment(w->alignment, where, err)) return fail(w, err, NULL, "%s", err->msg);
    }
    if (w->n_t == 0) {
        gguf_remove_key(w, GGUF_KEY_TENSOR_HASHES);
    } else {
        size_t len = 12 + 8 * (size_t)w->n_t;
        uint8_t *val = calloc(1, len);
        if (val) put_arr_head(val, GGUF_VT_UINT64, w->n_t);
        if (set_value(w, GGUF_KEY_TENSOR_HASHES, GGUF_VT_ARRAY, val, len)) {
            *err = w->first_err;
            return -1;
        }
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        if (w->t[i].nbytes > UINT64_MAX - off || !gguf_pad(off + w->t[i].nbytes, w->alignment, &off)) {
            name_where(where, sizeof where, path, "tensor", w->t[i].name);
            return fail(w, err, where, "data section size overflows");
        }
    }
    return 0;
}

static int emit_header(gguf_writer *w, hfq_error *err) {
    if (emit(w, GGUF_MAGIC, 4, err) || emit_u32(w, GGUF_VERSION, err) ||
        emit_u64(w, (uint64_t)w->n_t, err) || emit_u64(w, (uint64_t)w->n_kv, err))
        return -1;
    for (int64_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kv[i];
        if (emit_str(w, kv->key, err) || emit_u32(w, kv->type, err)) return -1;
        if (strcmp(kv->key, GGUF_KEY_TENSOR_HASHES) == 0) w->hashes_pos = w->pos + 12;
        if (emit(w, kv->val, kv->len, err)) return -1;
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (emit_str(w, t->name, err) || emit_u32(w, (uint32_t)t->n_dims, err) ||
            emit(w, t->ne, (size_t)t->n_dims * sizeof *t->ne, err) || emit_u32(w, t->type, err) ||
            emit_u64(w, t->offset, err))
            return -1;
    }
    return emit_pad(w, err);
}

/* The message for a call made in the wrong state. */
static int state_error(gguf_writer *w, const char *call, hfq_error *err) {
    if (w->state == W_FAILED) return hfq_fail(err, NULL, "%s", w->first_err.msg);
    return hfq_fail(err, w->af.path, "%s called %s", call,
                    w->state == W_BUILD ? "before gguf_writer_begin" : "after gguf_writer_finish");
}

int gguf_writer_begin(gguf_writer *w, const char *path, hfq_error *err) {
    if (w->state == W_FAILED) return state_error(w, "gguf_writer_begin", err);
    if (w->state != W_BUILD) return hfq_fail(err, path, "gguf_writer_begin called twice");
    if (w->has_err) {
        w->state = W_FAILED;
        hfq_error_prefix(&w->first_err, path);
        *err = w->first_err;
        return -1;
    }
    if (!w->xs && !(w->xs = XXH3_createState())) return fail(w, err, path, "out of memory");
    if (plan(w, path, err)) {
        w->state = W_FAILED;
        return -1;
    }
    if (hfq_atomic_open(&w->af, path, err)) {
        w->state = W_FAILED;
        return fail(w, err, NULL, "%s", err->msg);
    }
    w->state = W_WRITING;
    w->pos = 0;
    w->cur = 0;
    w->cur_done = 0;
    XXH3_64bits_reset(w->xs);
    return emit_header(w, err);
}

int gguf_writer_write_data(gguf_writer *w, const void *data, uint64_t n, hfq_error *err) {
    if (w->state != W_WRITING) return state_error(w, "gguf_writer_write_data", err);
    if (w->cur >= w->n_t)
        return fail(w, err, w->af.path, "%" PRIu64 " bytes written after the last tensor", n);
    wtensor *t = &w->t[w->cur];
    if (n > t->nbytes - w->cur_done) {
        char where[512];
        name_where(where, sizeof where, w->af.path, "tensor", t->name);
        return fail(w, err, where, "%" PRIu64 " bytes written, more than its size %" PRIu64,
                    w->cur_done + n, t->nbytes);
    }
    if (n > 0) {
        if (emit(w, data, (size_t)n, err)) return -1;
        XXH3_64bits_update(w->xs, data, (size_t)n);
        w->cur_done += n;
    }
    if (w->cur_done == t->nbytes) {
        t->hash = XXH3_64bits_digest(w->xs);
        XXH3_64bits_reset(w->xs);
        w->cur++;
        w->cur_done = 0;
        return emit_pad(w, err);
    }
    return 0;
}

int gguf_writer_write_tensor(gguf_writer *w, int64_t i, const void *data, hfq_error *err) {
    if (w->state != W_WRITING) return state_error(w, "gguf_writer_write_tensor", err);
    if (i != w->cur || w->cur_done != 0) {
        char where[512];
        name_where(where, sizeof where, w->af.path, "tensor", i >= 0 && i < w->n_t ? w->t[i].name : "?");
        return fail(w, err, where, "written out of order (next: %s)",
                    w->cur < w->n_t ? w->t[w->cur].name : "none, all written");
    }
    return gguf_writer_write_data(w, data, w->t[i].nbytes, err);
}

/* Every tensor written and the hashes patched in: the file is complete. */
static int complete(gguf_writer *w, const char *op, hfq_error *err) {
    if (w->state != W_WRITING) return state_error(w, op, err);
    if (w->cur < w->n_t) {
        char where[512];
        name_where(where, sizeof where, w->af.path, "tensor", w->t[w->cur].name);
        return fail(w, err, where, "incomplete: %" PRIu64 " of %" PRIu64 " bytes written", w->cur_done,
                    w->t[w->cur].nbytes);
    }
    if (w->n_t > 0) {
        uint64_t *hashes = malloc((size_t)w->n_t * sizeof *hashes);
        if (!hashes) return fail(w, err, w->af.path, "out of memory");
        for (int64_t i = 0; i < w->n_t; i++) hashes[i] = w->t[i].hash;
        FILE *fp = w->af.fp;
        int bad = fflush(fp) != 0 || fseeko(fp, (off_t)w->hashes_pos, SEEK_SET) != 0 ||
                  fwrite(hashes, 8, (size_t)w->n_t, fp) != (size_t)w->n_t;
        free(hashes);
        if (bad) return fail(w, err, w->af.path, "cannot store the tensor hashes: %s", strerror(errno));
    }
    return 0;
}

int gguf_writer_finish(gguf_writer *w, hfq_error *err) {
    if (complete(w, "gguf_writer_finish", err)) return -1;
    w->state = W_DONE;
    if (hfq_atomic_commit(&w->af, err)) {
        w->state = W_FAILED;
        w->has_err = true;
        w->first_err = *err;
        return -1;
    }
    return 0;
}

const char *gguf_writer_finish_temp(gguf_writer *w, hfq_error *err) {
    if (complete(w, "gguf_writer_finish_temp", err)) return NULL;
    if (fflush(w->af.fp) != 0) {
        fail(w, err, w->af.path, "write failed: %s", strerror(errno));
        return NULL;
    }
    w->state = W_KEPT;
    return w->af.tmp_path;
}
