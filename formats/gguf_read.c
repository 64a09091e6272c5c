/* gguf_read.c - validating GGUF v3 reader over a read-only mapping. */
#include "formats/gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Smallest possible entries, used to refuse counts the file cannot hold before
 * anything is allocated: key (8-byte length + 1 byte) + type + 1-byte value;
 * name (8 + 1) + n_dims + one ne + type + offset. */
#define MIN_KV_BYTES 14
#define MIN_TENSOR_BYTES 33
#define SHOWN_NAME 200  /* bytes of a key or name quoted in a message */

typedef struct kv_entry {
    char *key;
    gguf_vtype type;     /* GGUF_VT_ARRAY for arrays */
    gguf_vtype elem;     /* element type of an array; the type of a scalar */
    int64_t n;           /* elements (1 for a scalar) */
    uint64_t raw_off;    /* value bytes after the type id (see gguf_kv_raw) */
    uint64_t raw_len;
    uint64_t data_off;   /* first element */
    char *strs;          /* string values: NUL-terminated copies back to back */
    uint64_t *str_at;    /* string arrays: n + 1 offsets into strs */
} kv_entry;

typedef struct name_index {
    const char *name;
    int64_t idx;
} name_index;

struct gguf_file {
    char *path;
    const uint8_t *map;
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    kv_entry *kv;
    int64_t n_kv;
    name_index *kv_sorted;
    gguf_tensor_info *ti;
    char (*ti_names)[GGUF_MAX_NAME + 1];
    int64_t n_tensors;
    name_index *ti_sorted;
    struct gguf_file **others;  /* a split GGUF's files after the first, whose tensors ti holds too */
    int n_files;                /* 1 + the entries of others */
};

/* Parsing position; where names the file and the item being read. */
typedef struct cursor {
    const gguf_file *f;
    uint64_t pos;
    hfq_error *err;
    char where[512];
} cursor;

static void set_where(char *where, size_t n, const char *path, const char *what,
                      const char *name, uint64_t len) {
    char shown[SHOWN_NAME];
    gguf_printable(shown, sizeof shown, name, len);
    snprintf(where, n, "%s: %s '%s'", path, what, shown);
}

static int take(cursor *c, uint64_t n, const char *what, const uint8_t **out) {
    uint64_t left = c->f->size - c->pos;
    if (n > left)
        return hfq_fail(c->err, c->where,
                        "truncated: %s needs %" PRIu64 " bytes at offset %" PRIu64 ", %" PRIu64 " left",
                        what, n, c->pos, left);
    if (out) *out = c->f->map + c->pos;
    c->pos += n;
    return 0;
}

static int rd_u32(cursor *c, const char *what, uint32_t *v) {
    const uint8_t *p = NULL;
    if (take(c, 4, what, &p)) return -1;
    memcpy(v, p, 4);
    return 0;
}

static int rd_u64(cursor *c, const char *what, uint64_t *v) {
    const uint8_t *p = NULL;
    if (take(c, 8, what, &p)) return -1;
    memcpy(v, p, 8);
    return 0;
}

static int rd_str(cursor *c, const char *what, const char **s, uint64_t *len) {
    if (rd_u64(c, what, len)) return -1;
    uint64_t left = c->f->size - c->pos;
    if (*len > GGUF_MAX_STRING_BYTES)
        return hfq_fail(c->err, c->where, "%s length %" PRIu64 " is over the 1 GiB limit", what, *len);
    if (*len > left)
        return hfq_fail(c->err, c->where, "%s length %" PRIu64 " exceeds the %" PRIu64 " bytes left in the file",
                        what, *len, left);
    const uint8_t *p = NULL;
    take(c, *len, what, &p);
    *s = (const char *)p;
    return 0;
}

static char *dup_bytes(const void *p, uint64_t n) {
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    return s;
}

/* Validates the strings of a STRING value or array (after its header) and
 * copies them, each NUL-terminated, into one block. */
static int read_strings(cursor *c, kv_entry *e, bool is_array) {
    uint64_t start = c->pos, total = 0;
    char what[64] = "string value";
    for (int64_t j = 0; j < e->n; j++) {
        const char *s;
        uint64_t len;
        if (is_array) snprintf(what, sizeof what, "string element %" PRId64, j);
        if (rd_str(c, what, &s, &len)) return -1;
        total += len + 1;  /* bounded by the file size */
    }
    e->strs = malloc((size_t)total + 1);
    if (is_array) e->str_at = malloc(((size_t)e->n + 1) * sizeof *e->str_at);
    if (!e->strs || (is_array && !e->str_at)) return hfq_fail(c->err, c->where, "out of memory");
    uint64_t pos = start, at = 0;
    for (int64_t j = 0; j < e->n; j++) {
        uint64_t len;
        memcpy(&len, c->f->map + pos, 8);
        memcpy(e->strs + at, c->f->map + pos + 8, (size_t)len);
        if (is_array) e->str_at[j] = at;
        at += len;
        e->strs[at++] = '\0';
        pos += 8 + len;
    }
    if (is_array) e->str_at[e->n] = at;
    return 0;
}

static int parse_kv(cursor *c, const char *path, int64_t i, kv_entry *e) {
    snprintf(c->where, sizeof c->where, "%s: key #%" PRId64, path, i);
    const char *key;
    uint64_t klen;
    if (rd_str(c, "key", &key, &klen) || gguf_check_key(key, klen, c->where, c->err)) return -1;
    if (!(e->key = dup_bytes(key, klen))) return hfq_fail(c->err, c->where, "out of memory");
    set_where(c->where, sizeof c->where, path, "key", key, klen);

    uint32_t type;
    if (rd_u32(c, "value type", &type)) return -1;
    if (type >= GGUF_VT_COUNT) return hfq_fail(c->err, c->where, "unknown value type %" PRIu32, type);
    e->raw_off = c->pos;
    e->type = e->elem = (gguf_vtype)type;
    e->n = 1;
    if (type == GGUF_VT_ARRAY) {
        uint32_t elem;
        uint64_t n;
        if (rd_u32(c, "array element type", &elem)) return -1;
        if (elem == GGUF_VT_ARRAY) return hfq_fail(c->err, c->where, "nested arrays are not supported");
        if (elem >= GGUF_VT_COUNT)
            return hfq_fail(c->err, c->where, "unknown array element type %" PRIu32, elem);
        if (rd_u64(c, "array length", &n)) return -1;
        uint64_t left = c->f->size - c->pos;
        if (n > GGUF_MAX_ARRAY_ELEMS)
            return hfq_fail(c->err, c->where, "array of %" PRIu64 " elements is over the 2^30 limit", n);
        if (n > left / gguf_elem_min_size((gguf_vtype)elem))
            return hfq_fail(c->err, c->where,
                            "array of %" PRIu64 " %s elements exceeds the %" PRIu64 " bytes left in the file",
                            n, gguf_vtype_name((gguf_vtype)elem), left);
        e->elem = (gguf_vtype)elem;
        e->n = (int64_t)n;
    }
    e->data_off = c->pos;
    if (e->elem == GGUF_VT_STRING) {
        if (read_strings(c, e, type == GGUF_VT_ARRAY)) return -1;
    } else if (take(c, (uint64_t)e->n * gguf_vtype_size(e->elem), "value", NULL)) {
        return -1;
    }
    e->raw_len = c->pos - e->raw_off;
    return 0;
}

static int parse_tensor(cursor *c, gguf_file *f, int64_t i) {
    snprintf(c->where, sizeof c->where, "%s: tensor #%" PRId64, f->path, i);
    const char *name;
    uint64_t len;
    if (rd_str(c, "tensor name", &name, &len) ||
        gguf_check_tensor_name(name, len, c->where, c->err))
        return -1;
    memcpy(f->ti_names[i], name, (size_t)len);
    f->ti_names[i][len] = '\0';
    set_where(c->where, sizeof c->where, f->path, "tensor", name, len);

    gguf_tensor_info *t = &f->ti[i];
    memset(t, 0, sizeof *t);
    uint32_t n_dims;
    if (rd_u32(c, "n_dims", &n_dims)) return -1;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return hfq_fail(c->err, c->where, "n_dims %" PRIu32 " is outside 1..%d", n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (int d = 0; d < t->n_dims; d++)
        if (rd_u64(c, "ne", (uint64_t *)&t->ne[d])) return -1;
    if (rd_u32(c, "type", &t->type) ||
        gguf_check_tensor(t->type, t->n_dims, t->ne, &t->nbytes, c->where, c->err) ||
        rd_u64(c, "offset", &t->offset))
        return -1;
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const name_index *)a)->name, ((const name_index *)b)->name);
}

/* Sorted index for lookups; the first duplicate found is reported. */
static name_index *index_names(const gguf_file *f, int64_t n, const char *(*name_of)(const gguf_file *, int64_t),
                               const char *what, hfq_error *err) {
    name_index *ix = malloc(((size_t)n + 1) * sizeof *ix);
    if (!ix) {
        hfq_fail(err, f->path, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) ix[i] = (name_index){name_of(f, i), i};
    qsort(ix, (size_t)n, sizeof *ix, cmp_name);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(ix[i - 1].name, ix[i].name) == 0) {
            char where[512];
            set_where(where, sizeof where, f->path, what, ix[i].name, strlen(ix[i].name));
            hfq_fail(err, where, "duplicate %s", strcmp(what, "key") == 0 ? "key" : "tensor name");
            free(ix);
            return NULL;
        }
    return ix;
}

static int64_t lookup(const name_index *ix, int64_t n, const char *name) {
    if (!ix || !name) return -1;
    name_index probe = {name, 0};
    const name_index *hit = bsearch(&probe, ix, (size_t)n, sizeof *ix, cmp_name);
    return hit ? hit->idx : -1;
}

static const char *kv_name(const gguf_file *f, int64_t i) { return f->kv[i].key; }
static const char *tensor_name(const gguf_file *f, int64_t i) { return f->ti_names[i]; }

static int read_alignment(gguf_file *f, hfq_error *err) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t k = lookup(f->kv_sorted, f->n_kv, GGUF_KEY_ALIGNMENT);
    if (k < 0) return 0;
    char where[512];
    snprintf(where, sizeof where, "%s: key '%s'", f->path, GGUF_KEY_ALIGNMENT);
    const kv_entry *e = &f->kv[k];
    if (e->type != GGUF_VT_UINT32)
        return hfq_fail(err, where, "has type %s, expected u32", gguf_vtype_name(e->type));
    memcpy(&f->alignment, f->map + e->data_off, 4);
    return gguf_check_alignment(f->alignment, where, err);
}

/* Tensor data must be exactly where llama.cpp expects it: each tensor at the
 * previous one's end rounded up to the alignment, all inside the file. */
static int check_layout(gguf_file *f, hfq_error *err) {
    if (f->n_tensors > 0 && f->data_offset > f->size)
        return hfq_fail(err, f->path, "data section starts at %" PRIu64 ", past the end of the %" PRIu64 "-byte file",
                        f->data_offset, f->size);
    uint64_t room = f->n_tensors > 0 ? f->size - f->data_offset : 0, expected = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor_info *t = &f->ti[i];
        char where[512];
        set_where(where, sizeof where, f->path, "tensor", t->name, strlen(t->name));
        if (t->offset % f->alignment != 0)
            return hfq_fail(err, where, "data offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                            t->offset, f->alignment);
        if (t->offset > room || t->nbytes > room - t->offset)
            return hfq_fail(err, where,
                            "data extends past end of file (offset %" PRIu64 " + %" PRIu64 " bytes, data section has %" PRIu64 ")",
                            t->offset, t->nbytes, room);
        if (t->offset < expected)
            return hfq_fail(err, where, "data at offset %" PRIu64 " overlaps tensor '%s' (which ends at %" PRIu64 ")",
                            t->offset, f->ti[i - 1].name, f->ti[i - 1].offset + f->ti[i - 1].nbytes);
        if (t->offset > expected)
            return hfq_fail(err, where,
                            "data offset %" PRIu64 " leaves a gap (expected %" PRIu64 ": tensors must be packed in order)",
                            t->offset, expected);
        t->data = f->map + f->data_offset + t->offset;
        gguf_pad(t->offset + t->nbytes, f->alignment, &expected);  /* cannot overflow: inside the file */
    }
    return 0;
}

static int parse(gguf_file *f, hfq_error *err) {
    cursor c = {.f = f, .err = err};
    snprintf(c.where, sizeof c.where, "%s", f->path);
    const uint8_t *magic = NULL;
    if (take(&c, 4, "magic", &magic)) return -1;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) return hfq_fail(err, f->path, "not a GGUF file (bad magic)");
    if (rd_u32(&c, "version", &f->version)) return -1;
    if (f->version != GGUF_VERSION)
        return hfq_fail(err, f->path, "unsupported GGUF version %" PRIu32 " (only %d is supported)",
                        f->version, GGUF_VERSION);
    uint64_t n_tensors, n_kv;
    if (rd_u64(&c, "tensor count", &n_tensors) || rd_u64(&c, "key count", &n_kv)) return -1;
    uint64_t left = f->size - c.pos;
    if (n_tensors > left / MIN_TENSOR_BYTES)
        return hfq_fail(err, f->path, "tensor count %" PRId64 " is impossible with %" PRIu64 " bytes left in the file",
                        (int64_t)n_tensors, left);
    if (n_kv > left / MIN_KV_BYTES)
        return hfq_fail(err, f->path, "key count %" PRId64 " is impossible with %" PRIu64 " bytes left in the file",
                        (int64_t)n_kv, left);

    int64_t cap = 0;
    for (int64_t i = 0; i < (int64_t)n_kv; i++) {
        if (gguf_grow(&f->kv, &cap, i + 1, sizeof *f->kv)) return hfq_fail(err, f->path, "out of memory");
        memset(&f->kv[i], 0, sizeof f->kv[i]);
        f->n_kv = i + 1;
        if (parse_kv(&c, f->path, i, &f->kv[i])) return -1;
    }
    if (!(f->kv_sorted = index_names(f, f->n_kv, kv_name, "key", err)) || read_alignment(f, err)) return -1;

    /* tensor infos: the name array grows apart from the infos, whose name
     * pointers are set once it stops moving */
    int64_t cap_ti = 0, cap_names = 0;
    for (int64_t i = 0; i < (int64_t)n_tensors; i++) {
        if (gguf_grow(&f->ti, &cap_ti, i + 1, sizeof *f->ti) ||
            gguf_grow(&f->ti_names, &cap_names, i + 1, sizeof *f->ti_names))
            return hfq_fail(err, f->path, "out of memory");
        if (parse_tensor(&c, f, i)) return -1;
        f->n_tensors = i + 1;
    }
    for (int64_t i = 0; i < f->n_tensors; i++) f->ti[i].name = f->ti_names[i];
    if (!(f->ti_sorted = index_names(f, f->n_tensors, tensor_name, "tensor", err))) return -1;

    uint64_t data_offset;
    if (!gguf_pad(c.pos, f->alignment, &data_offset)) return hfq_fail(err, f->path, "header size overflows");
    f->data_offset = data_offset;
    return check_layout(f, err);
}

static gguf_file *open_one(const char *path, hfq_error *err) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        hfq_fail(err, path, "out of memory");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc = 0;
    if (fd < 0) {
        rc = hfq_fail(err, path, "cannot open: %s", strerror(errno));
    } else if (fstat(fd, &st) != 0) {
        rc = hfq_fail(err, path, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = hfq_fail(err, path, "not a regular file");
    } else if ((f->size = (uint64_t)st.st_size) > 0) {
        void *map = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) rc = hfq_fail(err, path, "cannot map: %s", strerror(errno));
        else f->map = map;
    }
    if (fd >= 0) close(fd);
    f->n_files = 1;
    if (rc != 0 || parse(f, err) != 0) {
        gguf_close(f);
        return NULL;
    }
    return f;
}

/* ---- split GGUF: one model in files PREFIX-00001-of-NNNNN.gguf ... ---- */

#define SPLIT_NAME "-%05d-of-%05d.gguf" /* llama.cpp's llama_split_path */
#define SPLIT_MAX 65535                 /* split.count is a u16 */

int gguf_split_path(const char *first, int i, char *out, size_t n) {
    static const char lead[] = "-00001-of-";
    const size_t len = strlen(first), suffix = 20; /* lead, 5 digits, ".gguf" */
    if (len < suffix || memcmp(first + len - suffix, lead, 10) != 0 || strcmp(first + len - 5, ".gguf") != 0) return 0;
    int count = 0;
    for (const char *d = first + len - 10; d < first + len - 5; d++) {
        if (*d < '0' || *d > '9') return 0;
        count = count * 10 + (*d - '0');
    }
    if (count < 1 || i < 0 || i >= count) return 0;
    int w = snprintf(out, n, "%.*s" SPLIT_NAME, (int)(len - suffix), first, i + 1, count);
    return w > 0 && (size_t)w < n ? count : 0;
}

/* Integer key of f, or dflt when absent; -1 with err when not an integer in
 * 0..max. */
static int split_key(const gguf_file *f, const char *key, int64_t dflt, int64_t max, int64_t *v, hfq_error *err) {
    int64_t k = gguf_find_key(f, key);
    *v = dflt;
    if (k < 0) return 0;
    if (gguf_get_int(f, k, v, err)) return -1;
    if (*v < 0 || *v > max) {
        char where[512];
        snprintf(where, sizeof where, "%s: key '%s'", f->path, key);
        return hfq_fail(err, where, "%" PRId64 " is outside 0..%" PRId64, *v, max);
    }
    return 0;
}

/* Opens file no (0-based) of a count-file split and checks that it says so. */
static gguf_file *open_split_file(const gguf_file *first, int no, int count, hfq_error *err) {
    char path[4096];
    if (!gguf_split_path(first->path, no, path, sizeof path)) {
        hfq_fail(err, first->path, "path too long for the names of its split's files");
        return NULL;
    }
    gguf_file *g = open_one(path, err);
    int64_t g_no, g_count;
    if (!g) return NULL;
    if (split_key(g, "split.no", -1, SPLIT_MAX, &g_no, err) || split_key(g, "split.count", -1, SPLIT_MAX, &g_count, err)) {
        gguf_close(g);
        return NULL;
    }
    if (g_no < 0 || g_count < 0) {
        hfq_fail(err, path, "has no split.no or split.count: not file %d of %d of the split GGUF %s", no + 1, count,
                 first->path);
        gguf_close(g);
        return NULL;
    }
    if (g_no != no || g_count != count) {
        hfq_fail(err, path, "says it is file %" PRId64 " of %" PRId64 " of a split GGUF (split.no, split.count), "
                 "expected file %d of %d after %s", g_no + 1, g_count, no + 1, count, first->path);
        gguf_close(g);
        return NULL;
    }
    return g;
}

/* When f is the first file of a split GGUF, opens the others and appends
 * their tensors to f's, in file order (llama.cpp's llama_model_loader). */
static int join_split(gguf_file *f, hfq_error *err) {
    int64_t count, no, n_expected;
    if (split_key(f, "split.count", 1, SPLIT_MAX, &count, err) || split_key(f, "split.no", 0, SPLIT_MAX, &no, err))
        return -1;
    if (count == 0) return hfq_fail(err, f->path, "split.count is 0");
    if (no >= count)
        return hfq_fail(err, f->path, "split.no %" PRId64 " is not below split.count %" PRId64, no, count);
    char name[4096];
    if (no > 0) {
        /* the first file's name, when this one is named as llama.cpp names them */
        char own[32];
        const size_t len = strlen(f->path), own_len = (size_t)snprintf(own, sizeof own, SPLIT_NAME, (int)no + 1, (int)count);
        if (len < own_len || strcmp(f->path + len - own_len, own) != 0 || len >= sizeof name)
            snprintf(name, sizeof name, "named ...-00001-of-%05d.gguf", (int)count);
        else
            snprintf(name, sizeof name, "%.*s" SPLIT_NAME, (int)(len - own_len), f->path, 1, (int)count);
        return hfq_fail(err, f->path, "is file %" PRId64 " of %" PRId64 " of a split GGUF: give the first, %s, "
                        "which holds the model's metadata", no + 1, count, name);
    }
    if (count > 1 && gguf_split_path(f->path, 0, name, sizeof name) != count)
        return hfq_fail(err, f->path, "is the first of %" PRId64 " files of a split GGUF but its name does not end "
                        "in -00001-of-%05" PRId64 ".gguf, so the others cannot be found", count, count);
    if (count > 1 && !(f->others = calloc((size_t)count - 1, sizeof *f->others)))
        return hfq_fail(err, f->path, "out of memory");
    int64_t total = f->n_tensors;
    for (int i = 1; i < count; i++) {
        if (!(f->others[i - 1] = open_split_file(f, i, (int)count, err))) return -1;
        f->n_files = i + 1;
        total += f->others[i - 1]->n_tensors;
    }
    if (split_key(f, "split.tensors.count", total, INT32_MAX, &n_expected, err)) return -1;
    if (n_expected != total)
        return hfq_fail(err, f->path, "split.tensors.count says %" PRId64 " tensors, the %" PRId64 " files hold %" PRId64,
                        n_expected, count, total);
    if (total == f->n_tensors) return 0; /* one file, or the later ones without tensors */
    gguf_tensor_info *ti = realloc(f->ti, (size_t)total * sizeof *ti);
    if (ti) f->ti = ti;
    char(*names)[GGUF_MAX_NAME + 1] = ti ? realloc(f->ti_names, (size_t)total * sizeof *names) : NULL;
    if (!names) return hfq_fail(err, f->path, "out of memory");
    f->ti_names = names;
    for (int i = 1; i < count; i++) {
        const gguf_file *g = f->others[i - 1];
        memcpy(f->ti + f->n_tensors, g->ti, (size_t)g->n_tensors * sizeof *g->ti);
        memcpy(f->ti_names + f->n_tensors, g->ti_names, (size_t)g->n_tensors * sizeof *g->ti_names);
        for (int64_t j = 0; j < g->n_tensors; j++) f->ti[f->n_tensors + j].file = i;
        f->n_tensors += g->n_tensors;
    }
    for (int64_t i = 0; i < f->n_tensors; i++) f->ti[i].name = f->ti_names[i];
    free(f->ti_sorted);
    f->ti_sorted = index_names(f, f->n_tensors, tensor_name, "tensor", err);
    return f->ti_sorted ? 0 : -1;
}

gguf_file *gguf_open(const char *path, hfq_error *err) {
    gguf_file *f = open_one(path, err);
    if (f && join_split(f, err) != 0) {
        gguf_close(f);
        return NULL;
    }
    return f;
}

int gguf_n_files(const gguf_file *f) { return f->n_files; }

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (int i = 0; i + 1 < f->n_files; i++) gguf_close(f->others[i]);
    free(f->others);
    for (int64_t i = 0; i < f->n_kv; i++) {
        free(f->kv[i].key);
        free(f->kv[i].strs);
        free(f->kv[i].str_at);
    }
    free(f->kv);
    free(f->kv_sorted);
    free(f->ti);
    free(f->ti_names);
    free(f->ti_sorted);
    if (f->map) munmap((void *)f->map, (size_t)f->size);
    free(f->path);
    free(f);
}

const char *gguf_path(const gguf_file *f) { return f->path; }
uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint32_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
uint64_t gguf_file_size(const gguf_file *f) {
    uint64_t size = f->size;
    for (int i = 0; i + 1 < f->n_files; i++) size += f->others[i]->size;
    return size;
}
int64_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
int64_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

static const kv_entry *kv_get(const gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_kv ? &f->kv[i] : NULL;
}

const char *gguf_kv_key(const gguf_file *f, int64_t i) {
    const kv_entry *e = kv_get(f, i);
    return e ? e->key : NULL;
}

gguf_vtype gguf_kv_type(const gguf_file *f, int64_t i) {
    const kv_entry *e = kv_get(f, i);
    return e ? e->type : GGUF_VT_COUNT;
}

int64_t gguf_find_key(const gguf_file *f, const char *key) { return lookup(f->kv_sorted, f->n_kv, key); }

const void *gguf_kv_raw(const gguf_file *f, int64_t i, uint64_t *len) {
    const kv_entry *e = kv_get(f, i);
    if (!e) return NULL;
    *len = e->raw_len;
    return f->map + e->raw_off;
}

/* Scalar of key i after checking its type with accept; fills err otherwise. */
static const kv_entry *scalar(const gguf_file *f, int64_t i, bool (*accept)(gguf_vtype),
                              const char *want, hfq_error *err) {
    const kv_entry *e = kv_get(f, i);
    if (!e) {
        hfq_fail(err, f->path, "key index %" PRId64 " out of range", i);
        return NULL;
    }
    if (accept(e->type)) return e;
    char where[512];
    set_where(where, sizeof where, f->path, "key", e->key, strlen(e->key));
    if (e->type == GGUF_VT_ARRAY)
        hfq_fail(err, where, "is an array of %s, expected %s", gguf_vtype_name(e->elem), want);
    else
        hfq_fail(err, where, "has type %s, expected %s", gguf_vtype_name(e->type), want);
    return NULL;
}

static bool is_integer(gguf_vtype t) {
    return t <= GGUF_VT_INT32 || t == GGUF_VT_BOOL || t == GGUF_VT_UINT64 || t == GGUF_VT_INT64;
}
static bool is_float(gguf_vtype t) { return t == GGUF_VT_FLOAT32 || t == GGUF_VT_FLOAT64; }
static bool is_bool(gguf_vtype t) { return t == GGUF_VT_BOOL; }
static bool is_string(gguf_vtype t) { return t == GGUF_VT_STRING; }

/* An integer scalar as 64 bits plus a sign: the value is (int64_t)bits when
 * *neg, else bits. */
static int int_value(const gguf_file *f, int64_t i, uint64_t *bits, bool *neg, hfq_error *err) {
    const kv_entry *e = scalar(f, i, is_integer, "an integer", err);
    if (!e) return -1;
    const uint8_t *p = f->map + e->data_off;
    int64_t s;
    *neg = false;
    switch (e->type) {
    case GGUF_VT_BOOL: *bits = p[0] != 0; return 0;
    case GGUF_VT_UINT8: *bits = p[0]; return 0;
    case GGUF_VT_UINT16: { uint16_t v; memcpy(&v, p, 2); *bits = v; return 0; }
    case GGUF_VT_UINT32: { uint32_t v; memcpy(&v, p, 4); *bits = v; return 0; }
    case GGUF_VT_UINT64: memcpy(bits, p, 8); return 0;
    case GGUF_VT_INT8: s = (int8_t)p[0]; break;
    case GGUF_VT_INT16: { int16_t v; memcpy(&v, p, 2); s = v; break; }
    case GGUF_VT_INT32: { int32_t v; memcpy(&v, p, 4); s = v; break; }
    default: memcpy(&s, p, 8); break;  /* INT64 */
    }
    *bits = (uint64_t)s;
    *neg = s < 0;
    return 0;
}

int gguf_get_int(const gguf_file *f, int64_t i, int64_t *out, hfq_error *err) {
    uint64_t bits;
    bool neg;
    if (int_value(f, i, &bits, &neg, err)) return -1;
    if (!neg && bits > (uint64_t)INT64_MAX) {
        char where[512];
        set_where(where, sizeof where, f->path, "key", f->kv[i].key, strlen(f->kv[i].key));
        return hfq_fail(err, where, "value %" PRIu64 " does not fit int64", bits);
    }
    *out = (int64_t)bits;
    return 0;
}

int gguf_get_uint64(const gguf_file *f, int64_t i, uint64_t *out, hfq_error *err) {
    uint64_t bits;
    bool neg;
    if (int_value(f, i, &bits, &neg, err)) return -1;
    if (neg) {
        char where[512];
        set_where(where, sizeof where, f->path, "key", f->kv[i].key, strlen(f->kv[i].key));
        return hfq_fail(err, where, "value %" PRId64 " is negative", (int64_t)bits);
    }
    *out = bits;
    return 0;
}

int gguf_get_float(const gguf_file *f, int64_t i, double *out, hfq_error *err) {
    const kv_entry *e = scalar(f, i, is_float, "a float", err);
    if (!e) return -1;
    if (e->type == GGUF_VT_FLOAT32) {
        float v;
        memcpy(&v, f->map + e->data_off, 4);
        *out = v;
    } else {
        memcpy(out, f->map + e->data_off, 8);
    }
    return 0;
}

int gguf_get_bool(const gguf_file *f, int64_t i, bool *out, hfq_error *err) {
    const kv_entry *e = scalar(f, i, is_bool, "bool", err);
    if (!e) return -1;
    *out = f->map[e->data_off] != 0;
    return 0;
}

const char *gguf_get_str(const gguf_file *f, int64_t i, uint64_t *len, hfq_error *err) {
    const kv_entry *e = scalar(f, i, is_string, "str", err);
    if (!e) return NULL;
    if (len) *len = e->raw_len - 8;
    return e->strs;
}

const void *gguf_get_val_data(const gguf_file *f, int64_t i) {
    const kv_entry *e = kv_get(f, i);
    return e && e->type != GGUF_VT_ARRAY && e->type != GGUF_VT_STRING ? f->map + e->data_off : NULL;
}

static const kv_entry *array_get(const gguf_file *f, int64_t i) {
    const kv_entry *e = kv_get(f, i);
    return e && e->type == GGUF_VT_ARRAY ? e : NULL;
}

gguf_vtype gguf_arr_type(const gguf_file *f, int64_t i) {
    const kv_entry *e = array_get(f, i);
    return e ? e->elem : GGUF_VT_COUNT;
}

int64_t gguf_arr_n(const gguf_file *f, int64_t i) {
    const kv_entry *e = array_get(f, i);
    return e ? e->n : -1;
}

const void *gguf_arr_data(const gguf_file *f, int64_t i) {
    const kv_entry *e = array_get(f, i);
    return e && e->elem != GGUF_VT_STRING ? f->map + e->data_off : NULL;
}

const char *gguf_arr_str(const gguf_file *f, int64_t i, int64_t j, uint64_t *len) {
    const kv_entry *e = array_get(f, i);
    if (!e || e->elem != GGUF_VT_STRING || j < 0 || j >= e->n) return NULL;
    if (len) *len = e->str_at[j + 1] - e->str_at[j] - 1;
    return e->strs + e->str_at[j];
}

const gguf_tensor_info *gguf_tensor_at(const gguf_file *f, int64_t i) {
    return i >= 0 && i < f->n_tensors ? &f->ti[i] : NULL;
}

const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name) {
    int64_t i = lookup(f->ti_sorted, f->n_tensors, name);
    return i >= 0 ? &f->ti[i] : NULL;
}

int gguf_stored_hash(const gguf_file *f, int64_t i, uint64_t *out, hfq_error *err) {
    int64_t k = gguf_find_key(f, GGUF_KEY_TENSOR_HASHES);
    if (k < 0) return 0;
    const kv_entry *e = &f->kv[k];
    char where[512];
    snprintf(where, sizeof where, "%s: key '%s'", f->path, GGUF_KEY_TENSOR_HASHES);
    if (e->type != GGUF_VT_ARRAY || e->elem != GGUF_VT_UINT64 || e->n != f->n_tensors)
        return hfq_fail(err, where, "expected an array of %" PRId64 " u64, found %s%s%s of %" PRId64,
                        f->n_tensors, gguf_vtype_name(e->type), e->type == GGUF_VT_ARRAY ? " of " : "",
                        e->type == GGUF_VT_ARRAY ? gguf_vtype_name(e->elem) : "", e->n);
    if (i < 0 || i >= f->n_tensors)
        return hfq_fail(err, where, "tensor index %" PRId64 " out of range", i);
    memcpy(out, f->map + e->data_off + 8 * (uint64_t)i, 8);
    return 1;
}

void gguf_release(const gguf_file *f, const void *p, uint64_t nbytes) {
    const uint8_t *map = f->map, *q = p;
    for (int i = 0; i + 1 < f->n_files; i++) gguf_release(f->others[i], p, nbytes);
    if (!map || q < map || q >= map + f->size || nbytes == 0) return;
    uint64_t begin = (uint64_t)(q - map);
    uint64_t end = nbytes > f->size - begin ? f->size : begin + nbytes;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    /* whole pages around the range: an edge page shared with a neighbour is
     * simply faulted back in from the file */
    begin &= ~(page - 1);
    end = (end + page - 1) & ~(page - 1);
    if (end > f->size) end = f->size;
    madvise((void *)(map + begin), (size_t)(end - begin), MADV_DONTNEED);
}
