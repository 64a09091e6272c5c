/* safetensors.c - the safetensors reader: mapping, header validation, shards. */
#include "formats/safetensors.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses headers above 100 MB. */
#define ST_MAX_HEADER 100000000ull
/* cJSON stores numbers as doubles: integers above 2^53 are not exact. */
#define ST_MAX_JSON_INT 9007199254740992.0

static const struct {
    const char *name;
    size_t size;
} dtype_table[ST_DTYPE_COUNT] = {
    [ST_F32] = {"F32", 4},         [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2},
    [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
    [ST_I8] = {"I8", 1},           [ST_U8] = {"U8", 1},     [ST_I16] = {"I16", 2},
    [ST_I32] = {"I32", 4},         [ST_I64] = {"I64", 8},   [ST_F64] = {"F64", 8},
    [ST_BOOL] = {"BOOL", 1},
};

size_t st_dtype_size(st_dtype dt) {
    return (unsigned)dt < ST_DTYPE_COUNT ? dtype_table[dt].size : 0;
}

const char *st_dtype_name(st_dtype dt) {
    return (unsigned)dt < ST_DTYPE_COUNT ? dtype_table[dt].name : "?";
}

st_dtype st_dtype_from_name(const char *name) {
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (strcmp(dtype_table[i].name, name) == 0) return (st_dtype)i;
    return ST_DTYPE_COUNT;
}

int st_shape_bytes(st_dtype dtype, int n_dims, const int64_t *shape, int64_t *n_elements,
                   uint64_t *nbytes) {
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++)
        if (shape[d] < 0 || __builtin_mul_overflow(n, shape[d], &n)) return -1;
    uint64_t b;
    if (__builtin_mul_overflow((uint64_t)n, (uint64_t)st_dtype_size(dtype), &b)) return -1;
    *n_elements = n;
    *nbytes = b;
    return 0;
}

void st_printable_name(char *out, size_t out_size, const char *name) {
    size_t n = 0;
    for (; *name && n + 4 < out_size; name++)
        out[n++] = ((unsigned char)*name < 32 || *name == 127) ? '?' : *name;
    if (*name) out[n++] = '.', out[n++] = '.', out[n++] = '.';
    out[n] = 0;
}

/* Strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF. */
static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (!len || i + len > n) return 0;
        uint32_t cp = len == 1 ? c : c & (0x7fu >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

/* ---------------------------------------------------------------- model */

typedef struct st_shard {
    char *path;
    const uint8_t *map;
    size_t size;
} st_shard;

struct st_model {
    st_shard *shards;
    int n_shards;
    st_tensor *tensors;
    int64_t n_tensors, cap_tensors;
    const st_tensor **by_name;   /* sorted by name, for st_find */
    char **meta;         /* key, value, key, value, ... */
    int n_meta;
    size_t page;
};

void st_close(st_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_shards; i++) {
        if (m->shards[i].map) munmap((void *)m->shards[i].map, m->shards[i].size);
        free(m->shards[i].path);
    }
    for (int64_t i = 0; i < m->n_tensors; i++) free((char *)m->tensors[i].name);
    for (int i = 0; i < 2 * m->n_meta; i++) free(m->meta[i]);
    free(m->shards);
    free(m->tensors);
    free(m->by_name);
    free(m->meta);
    free(m);
}

static st_model *model_new(hfq_error *err, const char *where) {
    st_model *m = calloc(1, sizeof *m);
    if (!m) {
        hfq_fail(err, where, "out of memory");
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    m->page = page > 0 ? (size_t)page : 4096;
    return m;
}

/* A failure about one tensor: "PATH: tensor 'NAME': REASON". */
static int tensor_fail(hfq_error *err, const char *path, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int tensor_fail(hfq_error *err, const char *path, const char *name, const char *fmt, ...) {
    char shown[256], reason[512];
    st_printable_name(shown, sizeof shown, name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return hfq_fail(err, path, "tensor '%s': %s", shown, reason);
}

/* A JSON number that is an integer in [0, 2^53]. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= ST_MAX_JSON_INT) || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int add_meta(st_model *m, const char *path, const cJSON *obj, hfq_error *err) {
    if (!cJSON_IsObject(obj)) return hfq_fail(err, path, "__metadata__ is not an object");
    int n = cJSON_GetArraySize(obj);
    char **grown = realloc(m->meta, sizeof *grown * 2 * (size_t)(m->n_meta + n));
    if (!grown && n) return hfq_fail(err, path, "out of memory");
    if (grown) m->meta = grown;
    for (const cJSON *kv = obj->child; kv; kv = kv->next) {
        char shown[256];
        st_printable_name(shown, sizeof shown, kv->string);
        if (!cJSON_IsString(kv))
            return hfq_fail(err, path, "__metadata__ value of '%s' is not a string", shown);
        char *k = strdup(kv->string), *v = strdup(kv->valuestring);
        if (!k || !v) {
            free(k);
            free(v);
            return hfq_fail(err, path, "out of memory");
        }
        m->meta[2 * m->n_meta] = k;
        m->meta[2 * m->n_meta + 1] = v;
        m->n_meta++;
    }
    return 0;
}

/* Validates one header entry and appends it as a tensor of shard `shard`. */
static int add_tensor(st_model *m, int shard, uint64_t data_start, uint64_t data_size,
                      const cJSON *e, hfq_error *err) {
    const char *path = m->shards[shard].path, *name = e->string;
    if (!cJSON_IsObject(e)) return tensor_fail(err, path, name, "entry is not an object");
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd)) return tensor_fail(err, path, name, "dtype missing or not a string");
    st_tensor t = {.shard = shard};
    t.dtype = st_dtype_from_name(jd->valuestring);
    if (t.dtype == ST_DTYPE_COUNT) {
        char shown[64];
        st_printable_name(shown, sizeof shown, jd->valuestring);
        return tensor_fail(err, path, name, "unknown dtype '%s'", shown);
    }
    if (!cJSON_IsArray(js)) return tensor_fail(err, path, name, "shape missing or not an array");
    int n_dims = cJSON_GetArraySize(js);
    if (n_dims > ST_MAX_DIMS)
        return tensor_fail(err, path, name, "too many dims in shape (%d > %d)", n_dims, ST_MAX_DIMS);
    t.n_dims = n_dims;
    int d = 0;
    for (const cJSON *v = js->child; v; v = v->next, d++) {
        uint64_t u;
        if (json_uint(v, &u) != 0)
            return tensor_fail(err, path, name, "shape entry %d is not a non-negative integer", d);
        t.shape[d] = (int64_t)u;
    }
    if (st_shape_bytes(t.dtype, t.n_dims, t.shape, &t.n_elements, &t.nbytes) != 0)
        return tensor_fail(err, path, name, "shape product overflows");
    uint64_t begin, end;
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || json_uint(jo->child, &begin) != 0 ||
        json_uint(jo->child->next, &end) != 0)
        return tensor_fail(err, path, name, "data_offsets is not [begin, end] of integers");
    if (begin > end)
        return tensor_fail(err, path, name, "data_offsets begin %llu > end %llu",
                           (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return tensor_fail(err, path, name,
                           "data_offsets end %llu past the end of the data section (%llu bytes)",
                           (unsigned long long)end, (unsigned long long)data_size);
    if (end - begin != t.nbytes)
        return tensor_fail(err, path, name,
                           "data_offsets span %llu bytes but %s x shape needs %llu",
                           (unsigned long long)(end - begin), st_dtype_name(t.dtype),
                           (unsigned long long)t.nbytes);
    t.offset = data_start + begin;
    if (m->n_tensors == m->cap_tensors) {
        int64_t cap = m->cap_tensors ? 2 * m->cap_tensors : 64;
        st_tensor *grown = realloc(m->tensors, sizeof *grown * (size_t)cap);
        if (!grown) return hfq_fail(err, path, "out of memory");
        m->tensors = grown;
        m->cap_tensors = cap;
    }
    t.name = strdup(name);
    if (!t.name) return hfq_fail(err, path, "out of memory");
    m->tensors[m->n_tensors++] = t;
    return 0;
}

static int parse_header(st_model *m, int shard, const char *json, uint64_t data_start,
                        uint64_t data_size, hfq_error *err) {
    const char *path = m->shards[shard].path;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root)
        return hfq_fail(err, path, "header is not valid JSON (near byte %lld)",
                        end ? (long long)(end - json) : -1LL);
    int rc = 0;
    if (!cJSON_IsObject(root)) rc = hfq_fail(err, path, "header is not a JSON object");
    for (const cJSON *e = root->child; e && rc == 0; e = e->next)
        rc = strcmp(e->string, "__metadata__") == 0
                 ? add_meta(m, path, e, err)
                 : add_tensor(m, shard, data_start, data_size, e, err);
    cJSON_Delete(root);
    return rc;
}

/* Maps one file and appends it as a shard with its tensors. */
static int add_shard(st_model *m, const char *path, hfq_error *err) {
    st_shard *grown = realloc(m->shards, sizeof *grown * (size_t)(m->n_shards + 1));
    if (!grown) return hfq_fail(err, path, "out of memory");
    m->shards = grown;
    int shard = m->n_shards;
    st_shard *s = &m->shards[shard];
    memset(s, 0, sizeof *s);
    if (!(s->path = strdup(path))) return hfq_fail(err, path, "out of memory");
    m->n_shards++;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hfq_fail(err, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return hfq_fail(err, path, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return hfq_fail(err, path, "not a regular file");
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 8) {
        close(fd);
        return hfq_fail(err, path, "file too short (%llu bytes) for a safetensors header",
                        (unsigned long long)fsize);
    }
    if (fsize > SIZE_MAX) {
        close(fd);
        return hfq_fail(err, path, "file too large to map");
    }
    void *map = mmap(NULL, (size_t)fsize, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);   /* the mapping keeps the file */
    if (map == MAP_FAILED) return hfq_fail(err, path, "cannot map: %s", strerror(e));
    s->map = map;
    s->size = (size_t)fsize;

    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | s->map[i];
    if (hlen > ST_MAX_HEADER)
        return hfq_fail(err, path, "header length %llu exceeds the 100 MB limit",
                        (unsigned long long)hlen);
    if (hlen > fsize - 8)
        return hfq_fail(err, path, "header length %llu runs past the end of the file (%llu bytes)",
                        (unsigned long long)hlen, (unsigned long long)fsize);
    const char *hdr = (const char *)s->map + 8;
    if (hlen < 2 || hdr[0] != '{') return hfq_fail(err, path, "header does not start with '{'");
    if (memchr(hdr, 0, (size_t)hlen)) return hfq_fail(err, path, "header contains a NUL byte");
    if (!valid_utf8((const unsigned char *)hdr, (size_t)hlen))
        return hfq_fail(err, path, "header is not valid UTF-8");
    char *json = malloc((size_t)hlen + 1);
    if (!json) return hfq_fail(err, path, "out of memory");
    memcpy(json, hdr, (size_t)hlen);
    json[hlen] = 0;
    int rc = parse_header(m, shard, json, 8 + hlen, fsize - 8 - hlen, err);
    free(json);
    return rc;
}

/* ------------------------------------------------------------- ordering */

static int cmp_position(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

/* Sorts tensors by position, rejects overlaps and duplicate names, builds the name index. */
static int finish(st_model *m, hfq_error *err) {
    if (m->n_tensors > 1) qsort(m->tensors, (size_t)m->n_tensors, sizeof *m->tensors, cmp_position);
    const st_tensor *prev = NULL;   /* the non-empty tensor reaching furthest in this shard */
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        if (prev && prev->shard != t->shard) prev = NULL;
        if (t->nbytes == 0) continue;
        if (prev && t->offset < prev->offset + prev->nbytes) {
            char other[256];
            st_printable_name(other, sizeof other, prev->name);
            return tensor_fail(err, m->shards[t->shard].path, t->name,
                               "data overlaps tensor '%s'", other);
        }
        prev = t;
    }
    m->by_name = malloc(sizeof *m->by_name * (size_t)(m->n_tensors ? m->n_tensors : 1));
    if (!m->by_name) return hfq_fail(err, m->n_shards ? m->shards[0].path : NULL, "out of memory");
    for (int64_t i = 0; i < m->n_tensors; i++) m->by_name[i] = &m->tensors[i];
    if (m->n_tensors > 1) qsort(m->by_name, (size_t)m->n_tensors, sizeof *m->by_name, cmp_by_name);
    for (int64_t i = 1; i < m->n_tensors; i++) {
        const st_tensor *a = m->by_name[i - 1], *b = m->by_name[i];
        if (strcmp(a->name, b->name) == 0)
            return tensor_fail(err, m->shards[b->shard].path, b->name, "appears twice (also in %s)",
                               m->shards[a->shard].path);
    }
    return 0;
}

st_model *st_open_file(const char *path, hfq_error *err) {
    st_model *m = model_new(err, path);
    if (!m) return NULL;
    if (add_shard(m, path, err) != 0 || finish(m, err) != 0) {
        st_close(m);
        return NULL;
    }
    return m;
}

/* ---------------------------------------------------------------- index */

static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Reads a whole small file (at most ST_MAX_HEADER bytes) as a NUL-terminated string. */
static char *read_text(const char *path, hfq_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        hfq_fail(err, path, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat sb;
    char *buf = NULL;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) hfq_fail(err, path, "not a regular file");
    else if ((uint64_t)sb.st_size > ST_MAX_HEADER) hfq_fail(err, path, "larger than 100 MB");
    else if (!(buf = malloc((size_t)sb.st_size + 1))) hfq_fail(err, path, "out of memory");
    else if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        hfq_fail(err, path, "read error");
        free(buf);
        buf = NULL;
    } else {
        buf[sb.st_size] = 0;
    }
    fclose(f);
    return buf;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks that the index and the shards name the same tensors in the same places. */
static int check_index(const st_model *m, const char *index_path, const cJSON *weight_map,
                       char *const *shard_names, hfq_error *err) {
    char *seen = calloc((size_t)m->n_tensors + 1, 1);
    if (!seen) return hfq_fail(err, index_path, "out of memory");
    int rc = 0;
    for (const cJSON *e = weight_map->child; e && rc == 0; e = e->next) {
        const st_tensor *t = st_find(m, e->string);
        char shown[256];
        st_printable_name(shown, sizeof shown, e->string);
        if (!t)
            rc = hfq_fail(err, index_path, "tensor '%s' is mapped to %s, which does not hold it",
                          shown, e->valuestring);
        else if (strcmp(shard_names[t->shard], e->valuestring) != 0)
            rc = hfq_fail(err, index_path, "tensor '%s' is mapped to %s but stored in %s", shown,
                          e->valuestring, shard_names[t->shard]);
        else if (seen[t - m->tensors]++)
            rc = hfq_fail(err, index_path, "tensor '%s' is listed twice", shown);
    }
    for (int64_t i = 0; i < m->n_tensors && rc == 0; i++)
        if (!seen[i])
            rc = tensor_fail(err, m->shards[m->tensors[i].shard].path, m->tensors[i].name,
                             "not listed in %s", index_path);
    free(seen);
    return rc;
}

static int open_index(st_model *m, const char *dir, const char *index_path, hfq_error *err) {
    char *text = read_text(index_path, err);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return hfq_fail(err, index_path, "not valid JSON");
    int rc = 0;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    int n = cJSON_GetArraySize(wm);
    char **names = calloc((size_t)n + 1, sizeof *names);
    if (!cJSON_IsObject(wm)) rc = hfq_fail(err, index_path, "weight_map missing or not an object");
    else if (n == 0) rc = hfq_fail(err, index_path, "weight_map is empty");
    else if (!names) rc = hfq_fail(err, index_path, "out of memory");
    int n_names = 0;
    for (const cJSON *e = wm ? wm->child : NULL; e && rc == 0; e = e->next) {
        char shown[256];
        st_printable_name(shown, sizeof shown, e->string);
        if (!cJSON_IsString(e))
            rc = hfq_fail(err, index_path, "weight_map entry '%s' is not a string", shown);
        else if (!*e->valuestring || strchr(e->valuestring, '/') || !strcmp(e->valuestring, ".") ||
                 !strcmp(e->valuestring, ".."))
            rc = hfq_fail(err, index_path, "weight_map entry '%s' is not a file name in the folder",
                          shown);
        else
            names[n_names++] = e->valuestring;
    }
    /* shards in name order, each once */
    if (rc == 0 && n_names > 1) qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    int n_shards = 0;
    for (int i = 0; i < n_names && rc == 0; i++) {
        if (n_shards && strcmp(names[n_shards - 1], names[i]) == 0) continue;
        names[n_shards++] = names[i];
        char *path = join_path(dir, names[i]);
        rc = path ? add_shard(m, path, err) : hfq_fail(err, index_path, "out of memory");
        free(path);
    }
    if (rc == 0) rc = finish(m, err);
    if (rc == 0) rc = check_index(m, index_path, wm, names, err);
    free(names);
    cJSON_Delete(root);
    return rc;
}

static int has_suffix(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The only *.safetensors file in dir (its name, malloc'ed), or NULL with err filled. */
static char *only_safetensors(const char *dir, hfq_error *err) {
    DIR *d = opendir(dir);
    if (!d) {
        hfq_fail(err, dir, "cannot open folder: %s", strerror(errno));
        return NULL;
    }
    char *found = NULL;
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!has_suffix(de->d_name, ".safetensors")) continue;
        if (n++ == 0) found = strdup(de->d_name);
    }
    closedir(d);
    if (n == 1 && found) return found;
    free(found);
    if (n == 0) hfq_fail(err, dir, "no .safetensors file");
    else if (n > 1) hfq_fail(err, dir, "%d .safetensors files but no model.safetensors.index.json", n);
    else hfq_fail(err, dir, "out of memory");
    return NULL;
}

st_model *st_open_dir(const char *dir, hfq_error *err) {
    struct stat sb;
    char *index_path = join_path(dir, "model.safetensors.index.json");
    char *single = join_path(dir, "model.safetensors");
    st_model *m = NULL;
    if (!index_path || !single) {
        hfq_fail(err, dir, "out of memory");
    } else if (stat(index_path, &sb) == 0) {
        m = model_new(err, dir);
        if (m && open_index(m, dir, index_path, err) != 0) {
            st_close(m);
            m = NULL;
        }
    } else if (stat(single, &sb) == 0) {
        m = st_open_file(single, err);
    } else {
        char *name = only_safetensors(dir, err);
        char *path = name ? join_path(dir, name) : NULL;
        if (name && !path) hfq_fail(err, dir, "out of memory");
        if (path) m = st_open_file(path, err);
        free(name);
        free(path);
    }
    free(index_path);
    free(single);
    return m;
}

/* ------------------------------------------------------------- queries */

int64_t st_n_tensors(const st_model *m) { return m->n_tensors; }

int st_n_shards(const st_model *m) { return m->n_shards; }

const st_tensor *st_tensor_at(const st_model *m, int64_t i) {
    return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}

static int cmp_key_name(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const st_tensor *const *)elem)->name);
}

const st_tensor *st_find(const st_model *m, const char *name) {
    if (!m->n_tensors) return NULL;
    const st_tensor *const *hit =
        bsearch(name, m->by_name, (size_t)m->n_tensors, sizeof *m->by_name, cmp_key_name);
    return hit ? *hit : NULL;
}

const char *st_shard_path(const st_model *m, int shard) {
    return shard >= 0 && shard < m->n_shards ? m->shards[shard].path : NULL;
}

const char *st_metadata_get(const st_model *m, const char *key) {
    for (int i = 0; i < m->n_meta; i++)
        if (strcmp(m->meta[2 * i], key) == 0) return m->meta[2 * i + 1];
    return NULL;
}

const void *st_data(const st_model *m, const st_tensor *t) {
    return m->shards[t->shard].map + t->offset;
}

void st_release_range(const st_model *m, const st_tensor *t, uint64_t offset, uint64_t nbytes) {
    if (offset >= t->nbytes) return;
    if (nbytes > t->nbytes - offset) nbytes = t->nbytes - offset;
    if (nbytes == 0) return;
    const st_shard *s = &m->shards[t->shard];
    /* Whole pages around the range: a neighbour sharing an edge page just
     * faults it back in from the file, which is still correct. */
    uint64_t first = t->offset + offset;
    uint64_t begin = first & ~(uint64_t)(m->page - 1);
    uint64_t end = (first + nbytes + m->page - 1) & ~(uint64_t)(m->page - 1);
    madvise((void *)(s->map + begin), (size_t)(end - begin), MADV_DONTNEED);
}

void st_release(const st_model *m, const st_tensor *t) {
    st_release_range(m, t, 0, t->nbytes);
}
