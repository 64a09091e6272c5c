#include "src/export/ct_export.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "formats/ggml_type.h"
#include "formats/safetensors.h"
#include "quant/fp4.h"
#include "quant/gptq.h"
#include "quant/half.h"
#include "src/common/read_file.h"
#include "src/export/ct_config.h"
#include "src/export/ct_int4.h"
#include "src/export/ct_int4_gptq.h"
#include "src/export/ct_kv.h"
#include "src/export/ct_tokenizer.h"
#include "src/hf/arch.h"

/* ---- presets ---- */

static const hfq_ct_preset presets[] = {
    {"FP8", HFQ_PRESET_FP8_E4M3, HFQ_CT_ACTS_STATIC, 0, false, false},
    {"FP8_DYNAMIC", HFQ_PRESET_FP8_E4M3, HFQ_CT_ACTS_NONE, 0, false, false},
    {"FP8_BLOCK", HFQ_PRESET_FP8_E4M3, HFQ_CT_ACTS_NONE, 0, false, true},
    {"W8A8", HFQ_PRESET_INT8, HFQ_CT_ACTS_EITHER, 0, false, false},
    {"INT8", HFQ_PRESET_INT8, HFQ_CT_ACTS_EITHER, 0, false, false},
    {"NVFP4", HFQ_PRESET_NVFP4, HFQ_CT_ACTS_STATIC, 0, false, false},
    {"NVFP4A16", HFQ_PRESET_NVFP4, HFQ_CT_ACTS_NONE, 0, false, false},
    /* no GGUF format holds INT4 in groups of 128: the export quantizes the BF16 weights */
    {"W4A16", HFQ_PRESET_BF16, HFQ_CT_ACTS_NONE, 128, false, false},
    {"W4A16_ASYM", HFQ_PRESET_BF16, HFQ_CT_ACTS_NONE, 128, true, false},
};

const hfq_ct_preset *hfq_ct_preset_find(const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcasecmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

const char *hfq_ct_preset_names(void) { return "FP8, FP8_DYNAMIC, FP8_BLOCK, W8A8 (INT8), NVFP4, NVFP4A16, W4A16, W4A16_ASYM"; }

/* ---- the folder ---- */

int hfq_ct_dir_begin(hfq_ct_dir *d, const char *out_dir, hfq_error *err) {
    *d = (hfq_ct_dir){0};
    struct stat st;
    /* a link would only fail at the final rename, after all the work */
    size_t n = strlen(out_dir);
    while (n > 1 && out_dir[n - 1] == '/') n--;
    char *bare = strndup(out_dir, n);
    if (!bare) return hfq_fail(err, out_dir, "out of memory");
    const bool is_link = lstat(bare, &st) == 0 && S_ISLNK(st.st_mode);
    free(bare);
    if (is_link) return hfq_fail(err, out_dir, "is a symbolic link: give the folder itself");
    if (stat(out_dir, &st) == 0) {
        DIR *dir = S_ISDIR(st.st_mode) ? opendir(out_dir) : NULL;
        if (!dir) return hfq_fail(err, out_dir, "exists and is not a folder");
        struct dirent *e;
        bool empty = true;
        while (empty && (e = readdir(dir))) empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
        closedir(dir);
        if (!empty) return hfq_fail(err, out_dir, "folder is not empty: refusing to overwrite it");
    } else if (errno != ENOENT) {
        return hfq_fail(err, out_dir, "%s", strerror(errno));
    }
    d->out_dir = malloc(n + 1);
    d->tmp_dir = malloc(n + sizeof ".tmp.XXXXXX");
    if (!d->out_dir || !d->tmp_dir) {
        hfq_ct_dir_abort(d);
        return hfq_fail(err, out_dir, "out of memory");
    }
    memcpy(d->out_dir, out_dir, n);
    d->out_dir[n] = '\0';
    snprintf(d->tmp_dir, n + sizeof ".tmp.XXXXXX", "%s.tmp.XXXXXX", d->out_dir);
    if (!mkdtemp(d->tmp_dir)) {
        int e = errno;
        free(d->tmp_dir);
        d->tmp_dir = NULL;
        hfq_ct_dir_abort(d);
        return hfq_fail(err, out_dir, "cannot create a temporary folder beside it: %s", strerror(e));
    }
    return 0;
}

const char *hfq_ct_dir_file(const hfq_ct_dir *d, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", d->tmp_dir, name);
    return buf;
}

int hfq_ct_dir_commit(hfq_ct_dir *d, hfq_error *err) {
    /* rename replaces an empty folder; the permissions are those of a folder
     * made with mkdir (mkdtemp makes it 0700) */
    mode_t mask = umask(0);
    umask(mask);
    int rc = chmod(d->tmp_dir, 0777 & ~mask) || rename(d->tmp_dir, d->out_dir) ? -1 : 0;
    if (rc) {
        hfq_fail(err, d->out_dir, "cannot rename the finished folder into place: %s", strerror(errno));
        hfq_ct_dir_abort(d);
        return -1;
    }
    free(d->tmp_dir);
    d->tmp_dir = NULL;
    hfq_ct_dir_abort(d);
    return 0;
}

void hfq_ct_dir_abort(hfq_ct_dir *d) {
    if (d->tmp_dir) {
        DIR *dir = opendir(d->tmp_dir);
        struct dirent *e;
        char path[4096];
        while (dir && (e = readdir(dir)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlink(hfq_ct_dir_file(d, e->d_name, path, sizeof path));
        if (dir) closedir(dir);
        rmdir(d->tmp_dir);
    }
    free(d->tmp_dir);
    free(d->out_dir);
    *d = (hfq_ct_dir){0};
}

/* ---- tensors ---- */

typedef enum fill_kind {
    FILL_ROWS,          /* the bytes, rows in Hugging Face order */
    FILL_NVFP4_CODES,   /* ggml's nibble order -> pairs */
    FILL_NVFP4_SCALES,  /* the UE4M3 block scale bytes as E4M3 */
    FILL_RECIPROCAL,    /* 1 / the F32 scalar (global scales); 1 without one */
    FILL_INT4_CODES,    /* ct_int4.h of the float rows: packed codes, scales, zero points */
    FILL_INT4_SCALES,
    FILL_INT4_ZERO_POINTS,
    FILL_SHAPE,         /* weight_shape: rows, cols of src as I64 */
    FILL_VALUE,         /* one F32: value (the KV-cache scales, GGUF keys: no src) */
} fill_kind;

typedef struct out_tensor {
    st_write_tensor st;
    const gguf_tensor_info *src;
    fill_kind fill;
    int64_t rows;               /* rows of src (ne1 * ne2 * ne3) */
    int64_t permute_heads;      /* > 0: rows back to rotate-half order */
    uint64_t nbytes;
    int64_t int4_group;         /* FILL_INT4_* */
    bool int4_asymmetric;
    float value;                /* FILL_VALUE */
    const hfq_ct_opts *opts;    /* FILL_INT4_*: the importance rows */
    struct int4_cache *cache;   /* FILL_INT4_*: the plan's last GPTQ result */
} out_tensor;

/* A weight's GPTQ-rounded INT4 groups, kept for its next outputs (codes,
 * scales, zero points are filled one after another): GPTQ runs once. */
typedef struct int4_cache {
    const gguf_tensor_info *src;
    struct ct_int4_block *blocks;
} int4_cache;

typedef struct export_plan {
    out_tensor *out;
    int64_t n_out, cap_out;
    ct_linear *lin;
    int64_t n_lin, cap_lin;
    ct_model_facts facts;
    ct_kv kv;                   /* static KV-cache scales (src/export/ct_kv.h) */
    const char *where;          /* errors name the output folder: the GGUF read is a temporary */
    int4_cache int4;
} export_plan;

static void *grow(void *p, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return p;
    int64_t c = *cap ? *cap * 2 : 64;
    void *q = realloc(p, (size_t)c * size);
    if (q) *cap = c;
    return q;
}

static out_tensor *add_out(export_plan *p, const char *name, st_dtype dt, int64_t d0, int64_t d1,
                           const gguf_tensor_info *src, fill_kind fill, hfq_error *err) {
    out_tensor *o = grow(p->out, &p->cap_out, p->n_out + 1, sizeof *p->out);
    if (!o) return hfq_fail(err, name, "out of memory"), NULL;
    p->out = o;
    o = &p->out[p->n_out++];
    *o = (out_tensor){.src = src, .fill = fill, .rows = src ? src->ne[1] * src->ne[2] * src->ne[3] : 1};
    o->st = (st_write_tensor){.dtype = dt, .n_dims = d1 > 0 ? 2 : 1, .shape = {d0, d1 > 0 ? d1 : 0}};
    char *copy = strdup(name);
    if (!copy) return p->n_out--, hfq_fail(err, name, "out of memory"), NULL;
    o->st.name = copy;
    int64_t ne;
    if (st_shape_bytes(dt, o->st.n_dims, o->st.shape, &ne, &o->nbytes))
        return hfq_fail(err, name, "shape too large"), NULL;
    return o;
}

static void plan_free(export_plan *p) {
    for (int64_t i = 0; i < p->n_out; i++) free((char *)p->out[i].st.name);
    free(p->out);
    free(p->lin);
    free(p->int4.blocks);
    ct_kv_free(&p->kv);
}

/* The row of a GGUF tensor name in the family, and its Hugging Face name. */
static const hf_tensor_row *map_name(const hf_arch *arch, const char *name, char *hf, size_t cap) {
    static const hf_role globals[] = {ROLE_TOKEN_EMBD, ROLE_OUTPUT_NORM, ROLE_OUTPUT};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {
        const hf_tensor_row *row = hf_arch_global_row(globals[i]);
        if (strcmp(row->gguf_name, name) != 0) continue;
        snprintf(hf, cap, "%s", row->hf_name);
        return row;
    }
    int layer, used = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0) return NULL;
    const hf_tensor_row *row;
    for (size_t i = 0; (row = hf_arch_layer_row(arch, i)); i++) {
        if (!row->gguf_name || strcmp(row->gguf_name, name + used) != 0) continue;
        snprintf(hf, cap, "model.layers.%d.%s", layer, row->hf_name);
        return row;
    }
    return NULL;
}

/* "<base>.weight" -> "<base>.<side>" (the scale tensors of docs/format-quant-ext.md). */
static void side_name(const char *weight, const char *side, char *buf, size_t cap) {
    size_t n = strlen(weight);
    const size_t w = sizeof ".weight" - 1;
    if (n >= w && strcmp(weight + n - w, ".weight") == 0) n -= w;
    snprintf(buf, cap, "%.*s.%s", (int)n, weight, side);
}

/* A companion of some weight (".scale", ".input_scale" of "<base>.weight"). */
static bool is_companion(const gguf_file *f, const char *name) {
    static const char *const sides[] = {".input_scale", ".scale"};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        size_t n = strlen(name), s = strlen(sides[i]);
        if (n <= s || strcmp(name + n - s, sides[i]) != 0) continue;
        char weight[256];
        snprintf(weight, sizeof weight, "%.*s.weight", (int)(n - s), name);
        return gguf_find_tensor(f, weight) != NULL;
    }
    return false;
}

static const char *qext_of(const gguf_file *f, const char *name) {
    char key[300];
    snprintf(key, sizeof key, "hfq.qext.%s", name);
    int64_t i = gguf_find_key(f, key);
    return i < 0 || gguf_kv_type(f, i) != GGUF_VT_STRING ? NULL : gguf_get_str(f, i, NULL, NULL);
}

static const char *type_name(uint32_t type) {
    const ggml_type_info *t = ggml_type_get(type);
    return t ? t->name : "?";
}

static int dense_dtype(uint32_t type, st_dtype *dt) {
    *dt = type == GT_F32 ? ST_F32 : type == GT_F16 ? ST_F16 : type == GT_BF16 ? ST_BF16 : ST_DTYPE_COUNT;
    return *dt == ST_DTYPE_COUNT ? -1 : 0;
}

static const gguf_tensor_info *f32_side(const gguf_file *f, const export_plan *p, const gguf_tensor_info *w,
                                        const char *side, hfq_error *err, bool *bad) {
    char name[256];
    side_name(w->name, side, name, sizeof name);
    const gguf_tensor_info *t = gguf_find_tensor(f, name);
    *bad = t && t->type != GT_F32;
    if (*bad) hfq_fail(err, p->where, "tensor '%s' is %s, not F32", name, type_name(t->type));
    return t;
}

/* FP8 with 128x128 block scales (docs/format-quant-ext.md; scale ne
 * [ceil(cols/128), ceil(rows/128)]): `weight` and `weight_scale`
 * [ceil(rows/128), ceil(cols/128)], the same floats. q/k rows go back to
 * rotate-half order within each head, which keeps them in their block only
 * when head_dim divides 128; the block scales then stay as they are. */
static int plan_fp8_block(const gguf_tensor_info *w, const gguf_tensor_info *scale, const gguf_tensor_info *in,
                          const char *base, int64_t heads, ct_scheme *s, export_plan *p, hfq_error *err) {
    const int64_t cols = w->ne[0], rows = w->ne[1], b = HFQ_SCALE_BLOCK;
    if (scale->ne[0] != (cols + b - 1) / b || scale->ne[1] != (rows + b - 1) / b)
        return hfq_fail(err, p->where, "tensor '%s' is not of a scale shape for '%s'", scale->name, w->name);
    if (in) return hfq_fail(err, p->where, "tensor '%s': FP8 block weights take dynamic activations, not an input "
                            "scale", w->name);
    if (heads > 0 && b % (rows / heads) != 0)
        return hfq_fail(err, p->where, "tensor '%s': heads of %" PRId64 " rows cross its 128-row scale blocks once "
                        "back in Hugging Face's order", w->name, rows / heads);
    s->group = CT_GROUP_BLOCK;
    char name[256];
    out_tensor *o;
    snprintf(name, sizeof name, "%s.weight", base);
    if (!(o = add_out(p, name, ST_F8_E4M3, rows, cols, w, FILL_ROWS, err))) return -1;
    o->permute_heads = heads;
    snprintf(name, sizeof name, "%s.weight_scale", base);
    return add_out(p, name, ST_F32, scale->ne[1], scale->ne[0], scale, FILL_ROWS, err) ? 0 : -1;
}

/* The outputs of one quantized linear weight w (HF name hf, module base). */
static int plan_quantized(const gguf_file *f, const gguf_tensor_info *w, const char *base, int64_t heads,
                          ct_scheme *s, export_plan *p, hfq_error *err) {
    const char *where = p->where;
    const int64_t cols = w->ne[0], rows = w->ne[1];
    char name[256];
    bool bad;
    const gguf_tensor_info *scale = f32_side(f, p, w, "scale", err, &bad), *in = NULL;
    if (bad) return -1;
    in = f32_side(f, p, w, "input_scale", err, &bad);
    if (bad) return -1;
    if (in && (in->n_dims != 1 || in->ne[0] != 1)) return hfq_fail(err, where, "tensor '%s' is not of shape [1]", in->name);
    if (w->n_dims != 2) return hfq_fail(err, where, "tensor '%s': a quantized weight of %d dimensions cannot be "
                                                    "exported", w->name, w->n_dims);
    s->static_input = in != NULL;
    out_tensor *o;
    if (s->kind == CT_NVFP4) {
        s->group = 16;
        if (scale && (scale->n_dims != 1 || scale->ne[0] != 1))
            return hfq_fail(err, where, "tensor '%s' is not of shape [1]", scale->name);
        snprintf(name, sizeof name, "%s.weight_packed", base);
        if (!(o = add_out(p, name, ST_U8, rows, cols / 2, w, FILL_NVFP4_CODES, err))) return -1;
        o->permute_heads = heads;
        snprintf(name, sizeof name, "%s.weight_scale", base);
        if (!(o = add_out(p, name, ST_F8_E4M3, rows, cols / 16, w, FILL_NVFP4_SCALES, err))) return -1;
        o->permute_heads = heads;
        snprintf(name, sizeof name, "%s.weight_global_scale", base);
        if (!add_out(p, name, ST_F32, 1, 0, scale, FILL_RECIPROCAL, err)) return -1;
        if (!in) return 0;
        /* W4A4: compressed-tensors' activation global scale is the reciprocal of ours, as for the weight */
        snprintf(name, sizeof name, "%s.input_global_scale", base);
        return add_out(p, name, ST_F32, 1, 0, in, FILL_RECIPROCAL, err) ? 0 : -1;
    }
    if (!scale) return hfq_fail(err, where, "tensor '%s' has no scale tensor", w->name);
    if (s->kind == CT_FP8 && scale->n_dims == 2 && scale->ne[1] < rows) return plan_fp8_block(w, scale, in, base, heads, s, p, err);
    /* docs/format-quant-ext.md: [1] per tensor, [1, rows] per channel, [cols / G, rows] per group */
    const bool per_tensor = scale->n_dims == 1 && scale->ne[0] == 1;
    if (!per_tensor && (scale->n_dims != 2 || scale->ne[1] != rows || scale->ne[0] < 1 || cols % scale->ne[0]))
        return hfq_fail(err, where, "tensor '%s' is not of a scale shape for '%s'", scale->name, w->name);
    s->group = per_tensor ? 0 : scale->ne[0] == 1 ? -1 : cols / scale->ne[0];
    snprintf(name, sizeof name, "%s.weight", base);
    if (!(o = add_out(p, name, s->kind == CT_FP8 ? ST_F8_E4M3 : ST_I8, rows, cols, w, FILL_ROWS, err))) return -1;
    o->permute_heads = heads;
    snprintf(name, sizeof name, "%s.weight_scale", base);
    if (!(o = add_out(p, name, ST_F32, per_tensor ? 1 : rows, per_tensor ? 0 : scale->ne[0], scale, FILL_ROWS, err)))
        return -1;
    o->permute_heads = per_tensor ? 0 : heads;
    snprintf(name, sizeof name, "%s.input_scale", base);
    return !in || add_out(p, name, ST_F32, 1, 0, in, FILL_ROWS, err) ? 0 : -1;
}

/* A float weight as INT4 (ct_int4.h): its outputs. */
static int plan_int4(const gguf_tensor_info *w, const char *base, int64_t heads,
                     const hfq_ct_opts *opts, st_dtype dt, ct_scheme *s, export_plan *p, hfq_error *err) {
    const int64_t cols = w->ne[0], rows = w->ne[1], g = opts->int4_group;
    if (w->n_dims != 2 || cols % g || g % 8)
        return hfq_fail(err, p->where, "tensor '%s': rows of %" PRId64 " are not whole groups of %" PRId64,
                        w->name, cols, g);
    *s = (ct_scheme){.kind = CT_INT4, .group = g, .asymmetric = opts->int4_asymmetric};
    static const struct {
        const char *side;
        fill_kind fill;
    } sides[] = {{"weight_packed", FILL_INT4_CODES}, {"weight_scale", FILL_INT4_SCALES},
                 {"weight_zero_point", FILL_INT4_ZERO_POINTS}, {"weight_shape", FILL_SHAPE}};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        const fill_kind k = sides[i].fill;
        if (k == FILL_INT4_ZERO_POINTS && !s->asymmetric) continue;
        char name[256];
        snprintf(name, sizeof name, "%s.%s", base, sides[i].side);
        out_tensor *o = k == FILL_INT4_CODES    ? add_out(p, name, ST_I32, rows, cols / 8, w, k, err)
                        : k == FILL_INT4_SCALES ? add_out(p, name, dt, rows, cols / g, w, k, err)
                        : k == FILL_SHAPE       ? add_out(p, name, ST_I64, 2, 0, w, k, err)
                                                : add_out(p, name, ST_I32, (rows + 7) / 8, cols / g, w, k, err);
        if (!o) return -1;
        o->permute_heads = heads;
        o->int4_group = g;
        o->int4_asymmetric = s->asymmetric;
        o->opts = opts;
        o->cache = &p->int4;
    }
    return 0;
}

static int add_linear(export_plan *p, const char *hf_base, const ct_scheme *s, hfq_error *err) {
    ct_linear *l = grow(p->lin, &p->cap_lin, p->n_lin + 1, sizeof *p->lin);
    if (!l) return hfq_fail(err, hf_base, "out of memory");
    p->lin = l;
    l = &p->lin[p->n_lin++];
    snprintf(l->name, sizeof l->name, "%s", hf_base);
    l->scheme = *s;
    return 0;
}

static int plan_tensor(const gguf_file *f, const hf_arch *arch, const gguf_tensor_info *t, const hfq_ct_opts *opts,
                       export_plan *p, hfq_error *err) {
    const char *where = p->where;
    char hf[256];
    const hf_tensor_row *row = map_name(arch, t->name, hf, sizeof hf);
    if (!row) {
        if (strcmp(t->name, "rope_freqs.weight") == 0) return 0; /* config.json's rope_parameters (ct_config.c) */
        if (strncmp(t->name, "rope_factors_", 13) == 0)
            return hfq_fail(err, where, "tensor '%s' (longrope scaling): not exported yet", t->name);
        return hfq_fail(err, where, "tensor '%s' has no Hugging Face name in family '%s'", t->name, arch->gguf_arch);
    }
    if (row->role == ROLE_FFN_GATE_INP || strchr(row->hf_name, '*'))
        return hfq_fail(err, where, "tensor '%s': mixtures of experts are not exported", t->name);
    const bool linear = row->cols != HF_DIM_NONE && row->role != ROLE_TOKEN_EMBD;
    int64_t heads = 0;
    if (arch->permute_qk && (row->role == ROLE_ATTN_Q || row->role == ROLE_ATTN_K)) {
        char key[160];
        snprintf(key, sizeof key, "%s.attention.head_count%s", arch->gguf_arch, row->role == ROLE_ATTN_K ? "_kv" : "");
        int64_t i = gguf_find_key(f, key);
        if (i < 0 && row->role == ROLE_ATTN_K) { /* absent head_count_kv: as many as the query heads */
            snprintf(key, sizeof key, "%s.attention.head_count", arch->gguf_arch);
            i = gguf_find_key(f, key);
        }
        if (i < 0) return hfq_fail(err, where, "key %s is missing", key);
        if (gguf_get_int(f, i, &heads, err)) return -1;
        if (heads <= 0 || t->ne[1] % heads || (t->ne[1] / heads) % 2)
            return hfq_fail(err, where, "tensor '%s': %" PRId64 " rows are not whole heads of even size", t->name,
                            t->ne[1]);
    }
    if (row->role == ROLE_ATTN_Q_BIAS) p->facts.attention_bias = true;
    if (row->role == ROLE_TOKEN_EMBD) p->facts.vocab_size = t->ne[1];
    st_dtype dt;
    if (dense_dtype(t->type, &dt) == 0) {
        if (t->n_dims > 2) return hfq_fail(err, where, "tensor '%s' has %d dimensions", t->name, t->n_dims);
        if (row->role == ROLE_TOKEN_EMBD || (linear && !p->facts.dtype))
            p->facts.dtype = dt == ST_F32 ? "float32" : dt == ST_F16 ? "float16" : "bfloat16";
        if (linear && opts->int4_group > 0 && row->role != ROLE_OUTPUT) {
            ct_scheme s;
            hf[strlen(hf) - strlen(".weight")] = '\0';
            return plan_int4(t, hf, heads, opts, dt, &s, p, err) || add_linear(p, hf, &s, err) ? -1 : 0;
        }
        out_tensor *o = add_out(p, hf, dt, t->n_dims > 1 ? t->ne[1] : t->ne[0], t->n_dims > 1 ? t->ne[0] : 0, t,
                                FILL_ROWS, err);
        if (!o) return -1;
        o->permute_heads = heads;
        if (!linear) return 0;
        hf[strlen(hf) - strlen(".weight")] = '\0';
        return add_linear(p, hf, &(ct_scheme){.kind = CT_DENSE}, err);
    }
    const char *qext = t->type == GT_I8 ? qext_of(f, t->name) : NULL;
    ct_scheme s = {.kind = t->type == GT_NVFP4 ? CT_NVFP4 : !qext ? CT_DENSE
                           : strcmp(qext, "fp8_e4m3") == 0 ? CT_FP8 : strcmp(qext, "int8") == 0 ? CT_INT8 : CT_DENSE};
    if (s.kind == CT_DENSE)
        return hfq_fail(err, where, "tensor '%s' is %s: no compressed-tensors format holds it", t->name,
                        qext ? qext : type_name(t->type));
    if (!linear)
        return hfq_fail(err, where, "tensor '%s' is quantized (%s): serving engines take only linear layers "
                                    "quantized", t->name, qext ? qext : type_name(t->type));
    hf[strlen(hf) - strlen(".weight")] = '\0';
    return plan_quantized(f, t, hf, heads, &s, p, err) || add_linear(p, hf, &s, err) ? -1 : 0;
}

static int plan_export(const gguf_file *f, const hf_arch *arch, const hfq_ct_opts *opts, export_plan *p,
                       hfq_error *err) {
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        if (!is_companion(f, t->name) && plan_tensor(f, arch, t, opts, p, err)) return -1;
    }
    p->facts.tied = !gguf_find_tensor(f, "output.weight");
    if (p->facts.tied && add_linear(p, "lm_head", &(ct_scheme){.kind = CT_DENSE}, err)) return -1;
    if (!p->facts.dtype) p->facts.dtype = "float16";
    if (p->facts.vocab_size <= 0) return hfq_fail(err, p->where, "no token_embd.weight");
    if (ct_kv_read(f, p->where, &p->kv, err)) return -1;
    for (int64_t i = 0; i < 2 * p->kv.n_layer; i++) {
        char name[64];
        ct_kv_tensor_name(i % 2 ? 'v' : 'k', i / 2, name, sizeof name);
        out_tensor *o = add_out(p, name, ST_F32, 1, 0, NULL, FILL_VALUE, err);
        if (!o) return -1;
        o->value = i % 2 ? p->kv.v[i / 2] : p->kv.k[i / 2];
    }
    p->facts.kv_scales = p->kv.n_layer > 0;
    return 0;
}

/* ---- filling ---- */

/* Output row of GGUF row r: the inverse of hfconv's un-permutation
 * (src/hf/convert.c): GGUF interleaves each head's rotary pairs, Hugging
 * Face keeps [first halves; second halves]. */
static int64_t hf_row(int64_t r, int64_t rows, int64_t heads) {
    if (heads <= 0) return r;
    const int64_t per_head = rows / heads, half = per_head / 2, k = r % per_head;
    return r - k + (k % 2) * half + k / 2;
}

/* A UE4M3 byte of ggml's NVFP4 as the E4M3FN byte of the same value: ggml
 * ignores bit 7 and reads 0x7F (E4M3FN's NaN) as 0. */
static uint8_t e4m3_of_ue4m3(uint8_t x) {
    x &= 0x7F;
    return x == 0x7F ? 0 : x;
}

static void fill_nvfp4_row(const hfq_block_nvfp4 *b, int64_t cols, uint8_t *out, bool scales) {
    for (int64_t blk = 0; blk < cols / HFQ_QK_NVFP4; blk++) {
        for (int s = 0; s < HFQ_QK_NVFP4 / HFQ_QK_NVFP4_SUB; s++) {
            const uint8_t *qs = b[blk].qs + s * (HFQ_QK_NVFP4_SUB / 2);
            if (scales) {
                *out++ = e4m3_of_ue4m3(b[blk].d[s]);
                continue;
            }
            /* ggml: value j in the low nibble of qs[j], value j + 8 in the high one */
            for (int j = 0; j < HFQ_QK_NVFP4_SUB / 2; j++) {
                const int a = 2 * j, c = 2 * j + 1;
                const uint8_t lo = a < 8 ? qs[a] & 0xF : qs[a - 8] >> 4, hi = c < 8 ? qs[c] & 0xF : qs[c - 8] >> 4;
                *out++ = (uint8_t)(lo | hi << 4);
            }
        }
    }
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int b = 0; b < 4; b++) p[b] = (unsigned char)(v >> (8 * b));
}

/* One float value of a scale tensor in its dtype, little-endian. */
static void put_float(unsigned char *p, st_dtype dt, float v) {
    uint32_t bits;
    if (dt == ST_F32) memcpy(&bits, &v, 4), put_u32(p, bits);
    else {
        const uint16_t h = dt == ST_F16 ? hfq_f32_to_fp16(v) : hfq_f32_to_bf16(v);
        p[0] = (unsigned char)h, p[1] = (unsigned char)(h >> 8);
    }
}

static float decode_float(uint32_t type, const unsigned char *p, int64_t i) {
    if (type == GT_F32) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    const uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return type == GT_F16 ? hfq_fp16_to_f32(h) : hfq_bf16_to_f32(h);
}

/* A float weight's INT4 groups rounded by GPTQ (opts->gptq), all rows in
 * GGUF order, into *blocks (o->cache's; left NULL when the weight has no
 * Hessian). Rows are independent, so the q/k rows' permutation to Hugging
 * Face order after does not change them. */
static int gptq_int4(const out_tensor *o, st_dtype dt, int64_t cols, const float *imp, ct_int4_block **blocks,
                     hfq_error *err) {
    const gguf_tensor_info *t = o->src;
    const hfq_ct_opts *op = o->opts;
    if (o->cache->src == t) return *blocks = o->cache->blocks, 0;
    free(o->cache->blocks);
    *o->cache = (int4_cache){0};
    const double *u = op && op->gptq ? op->gptq(op->gptq_ctx, t->name, cols, err) : NULL;
    if (!u) return err->msg[0] ? -1 : 0;
    const hfq_gptq_codec *c = ct_int4_gptq_codec(o->int4_group, !o->int4_asymmetric, dt);
    if (!c) return hfq_fail(err, t->name, "GPTQ rounds INT4 in groups of %d only", CT_INT4_GPTQ_GROUP);
    const int64_t rows = o->rows;
    float *w = malloc((size_t)rows * (size_t)cols * sizeof *w);
    *blocks = malloc((size_t)rows * (size_t)(cols / c->block) * c->block_bytes);
    if (!w || !*blocks) {
        free(w), free(*blocks), *blocks = NULL;
        return hfq_fail(err, t->name, "out of memory");
    }
    for (int64_t r = 0; r < rows; r++) {
        const unsigned char *src = (const unsigned char *)t->data + (uint64_t)r * (t->nbytes / (uint64_t)rows);
        for (int64_t k = 0; k < cols; k++) w[r * cols + k] = decode_float(t->type, src, k);
    }
    const int rc = hfq_gptq_encode(c, u, w, rows, cols, imp, 0.0f, op->gptq_batch, *blocks, op->n_threads);
    free(w);
    if (rc < 0) {
        free(*blocks), *blocks = NULL;
        return hfq_fail(err, t->name, "out of memory");
    }
    *o->cache = (int4_cache){t, *blocks};
    return 0;
}

/* The INT4 outputs of a float weight (ct_int4.h), rows in Hugging Face order. */
static int fill_int4(const out_tensor *o, unsigned char *buf, uint64_t nbytes, hfq_error *err) {
    const gguf_tensor_info *t = o->src;
    const int64_t cols = t->ne[0], rows = o->rows, groups = cols / o->int4_group;
    st_dtype dt;
    dense_dtype(t->type, &dt);
    if (o->fill == FILL_SHAPE) {
        const int64_t shape[2] = {rows, cols};
        for (int d = 0; d < 2; d++) put_u32(buf + 8 * d, (uint32_t)shape[d]), put_u32(buf + 8 * d + 4, (uint32_t)(shape[d] >> 32));
        return 0;
    }
    float *x = malloc((size_t)(cols + groups) * sizeof *x);
    uint32_t *packed = malloc((size_t)(cols / 8) * sizeof *packed);
    int8_t *zp = malloc((size_t)groups);
    if (!x || !packed || !zp) {
        free(x), free(packed), free(zp);
        return hfq_fail(err, o->st.name, "out of memory");
    }
    float *scales = x + cols;
    const hfq_ct_opts *op = o->opts;
    const float *imp = op && op->importance ? op->importance(op->importance_ctx, t->name, cols) : NULL;
    ct_int4_block *blocks = NULL;
    if (gptq_int4(o, dt, cols, imp, &blocks, err) < 0) {
        free(x), free(packed), free(zp);
        return -1;
    }
    memset(buf, 0, nbytes);
    const size_t es = st_dtype_size(o->st.dtype);
    for (int64_t r = 0; r < rows; r++) {
        const unsigned char *src = (const unsigned char *)t->data + (uint64_t)r * (t->nbytes / (uint64_t)rows);
        for (int64_t c = 0; c < cols && !blocks; c++) x[c] = decode_float(t->type, src, c);
        if (blocks) ct_int4_gptq_unpack(blocks + r * groups, cols, packed, scales, zp);
        else ct_int4_row(x, cols, o->int4_group, !o->int4_asymmetric, dt, imp, packed, scales, zp);
        const int64_t hr = hf_row(r, rows, o->permute_heads);
        for (int64_t k = 0; o->fill == FILL_INT4_CODES && k < cols / 8; k++) put_u32(buf + 4 * (hr * (cols / 8) + k), packed[k]);
        for (int64_t g = 0; o->fill == FILL_INT4_SCALES && g < groups; g++) put_float(buf + es * (hr * groups + g), dt, scales[g]);
        for (int64_t g = 0; o->fill == FILL_INT4_ZERO_POINTS && g < groups; g++) {
            unsigned char *word = buf + 4 * ((hr / 8) * groups + g);
            const uint32_t v = (uint32_t)(word[0] | word[1] << 8 | word[2] << 16 | (uint32_t)word[3] << 24);
            put_u32(word, v | (uint32_t)(zp[g] + 8) << (4 * (hr % 8)));
        }
    }
    free(x), free(packed), free(zp);
    return 0;
}

static int fill(void *ctx, int64_t i, void *buf, uint64_t nbytes, hfq_error *err) {
    const out_tensor *o = (const out_tensor *)ctx + i;
    const gguf_tensor_info *t = o->src;
    if (o->fill == FILL_VALUE) return memcpy(buf, &o->value, sizeof o->value), 0;
    if (o->fill >= FILL_INT4_CODES) return fill_int4(o, buf, nbytes, err);
    if (o->fill == FILL_RECIPROCAL) {
        float v = 1.0f;
        if (t) memcpy(&v, t->data, sizeof v);
        if (!(v >= 0.0f) || v > 3.4e38f) return hfq_fail(err, t->name, "holds %g, not a scale", (double)v);
        v = v > 0.0f ? 1.0f / v : 1.0f; /* an all-zero tensor: any scale decodes its zero codes */
        if (!isfinite(v)) return hfq_fail(err, t->name, "holds a scale too small for its reciprocal in F32");
        memcpy(buf, &v, sizeof v);
        return 0;
    }
    const uint64_t in_row = t->nbytes / (uint64_t)o->rows, out_row = nbytes / (uint64_t)o->rows;
    for (int64_t r = 0; r < o->rows; r++) {
        const unsigned char *src = (const unsigned char *)t->data + (uint64_t)r * in_row;
        unsigned char *dst = (unsigned char *)buf + (uint64_t)hf_row(r, o->rows, o->permute_heads) * out_row;
        if (o->fill == FILL_ROWS) memcpy(dst, src, out_row);
        else fill_nvfp4_row((const hfq_block_nvfp4 *)src, t->ne[0], dst, o->fill == FILL_NVFP4_SCALES);
    }
    return 0;
}

/* ---- files ---- */

static int write_index(const hfq_ct_dir *d, const out_tensor *out, int64_t n, const int *shard_of, int n_shards,
                       hfq_error *err) {
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    char path[4096], file[64];
    uint64_t total = 0;
    if (!root || !meta || !map) return cJSON_Delete(root), hfq_fail(err, d->out_dir, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        total += out[i].nbytes;
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", shard_of[i] + 1, n_shards);
        cJSON_AddStringToObject(map, out[i].st.name, file);
    }
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return hfq_fail(err, d->out_dir, "out of memory");
    hfq_atomic_file af;
    int rc = hfq_atomic_open(&af, hfq_ct_dir_file(d, "model.safetensors.index.json", path, sizeof path), err);
    if (rc == 0) rc = hfq_atomic_write(&af, text, strlen(text), err);
    if (rc == 0) rc = hfq_atomic_commit(&af, err);
    else if (af.fp) hfq_atomic_abort(&af);
    free(text);
    return rc;
}

static int write_shards(const hfq_ct_dir *d, out_tensor *out, int64_t n, uint64_t max_bytes, hfq_error *err) {
    int *shard_of = malloc((size_t)(n ? n : 1) * sizeof *shard_of);
    if (!shard_of) return hfq_fail(err, d->out_dir, "out of memory");
    int n_shards = 0;
    uint64_t in_shard = 0;
    for (int64_t i = 0; i < n; i++) {
        if (n_shards == 0 || (in_shard > 0 && in_shard + out[i].nbytes > max_bytes)) n_shards++, in_shard = 0;
        in_shard += out[i].nbytes;
        shard_of[i] = n_shards - 1;
    }
    st_write_tensor *st = malloc((size_t)(n ? n : 1) * sizeof *st);
    static const char *const metadata[] = {"format", "pt"};
    int rc = st ? 0 : hfq_fail(err, d->out_dir, "out of memory");
    for (int64_t i = 0; i < n && rc == 0; i++) st[i] = out[i].st;
    int64_t i0 = 0;
    for (int s = 0; s < n_shards && rc == 0; s++) {
        int64_t i1 = i0;
        while (i1 < n && shard_of[i1] == s) i1++;
        char name[64], path[4096];
        if (n_shards == 1) snprintf(name, sizeof name, "model.safetensors");
        else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        rc = st_write_file(hfq_ct_dir_file(d, name, path, sizeof path), st + i0, i1 - i0, metadata, 1, fill,
                           out + i0, err);
        i0 = i1;
    }
    if (rc == 0 && n_shards > 1) rc = write_index(d, out, n, shard_of, n_shards, err);
    free(st);
    free(shard_of);
    return rc;
}

/* The tokenizer files transformers reads, those the source folder has. */
static int copy_tokenizer(const hfq_ct_dir *d, const char *from, hfq_error *err) {
    static const char *const files[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                        "special_tokens_map.json", "added_tokens.json", "vocab.json",
                                        "merges.txt", "chat_template.jinja"};
    int copied_vocab = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", from, files[i]);
        if (access(src, F_OK) != 0) continue;
        char *data;
        size_t len;
        if (hfq_read_file(src, (size_t)1 << 30, &data, &len, err)) return -1;
        hfq_atomic_file af;
        int rc = hfq_atomic_open(&af, hfq_ct_dir_file(d, files[i], dst, sizeof dst), err);
        if (rc == 0) rc = hfq_atomic_write(&af, data, len, err);
        if (rc == 0) rc = hfq_atomic_commit(&af, err);
        else if (af.fp) hfq_atomic_abort(&af);
        free(data);
        if (rc) return -1;
        copied_vocab += i < 2;
    }
    return copied_vocab ? 0 : hfq_fail(err, from, "has neither tokenizer.json nor tokenizer.model");
}

/* hfq.block_rotate marks (src/quantize/block_rotate.h): rows our runner
 * multiplies by rotated inputs, which no serving engine would rotate. */
static int refuse_block_rotated(const gguf_file *f, hfq_error *err) {
    static const char prefix[] = "hfq.block_rotate.";
    for (int64_t i = 0; i < gguf_n_kv(f); i++)
        if (strncmp(gguf_kv_key(f, i), prefix, sizeof prefix - 1) == 0)
            return hfq_fail(err, gguf_path(f), "tensor %s is block-rotated (%s): compressed-tensors has no such "
                            "rotation, vLLM would compute another function", gguf_kv_key(f, i) + sizeof prefix - 1,
                            gguf_kv_key(f, i));
    return 0;
}

int hfq_ct_export(const gguf_file *f, const hfq_ct_dir *d, const hfq_ct_opts *opts, hfq_error *err) {
    if (refuse_block_rotated(f, err) < 0) return -1;
    const hf_arch *arch = ct_family_find(f, err);
    if (!arch) return -1;
    export_plan p = {.where = d->out_dir};
    char path[4096];
    int rc = plan_export(f, arch, opts, &p, err);
    if (rc == 0)
        rc = ct_write_config(f, arch, &p.facts, p.lin, p.n_lin, hfq_ct_dir_file(d, "config.json", path, sizeof path),
                             err);
    if (rc == 0 && opts->tokenizer_from) rc = copy_tokenizer(d, opts->tokenizer_from, err);
    else if (rc == 0 && !opts->no_tokenizer) rc = ct_write_tokenizer(f, d->tmp_dir, d->out_dir, err);
    if (rc == 0)
        rc = write_shards(d, p.out, p.n_out, opts->max_shard_bytes ? opts->max_shard_bytes : (uint64_t)4 << 30, err);
    plan_free(&p);
    return rc;
}
