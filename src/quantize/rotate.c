/* rotate.c - the residual stream's Hadamard rotation folded into the weights. */
#include "src/quantize/rotate.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/fold.h"
#include "formats/ggml_type.h"

/* What the rotation does to a tensor. */
typedef enum role {
    R_COPY,      /* untouched (q/k/v biases, qwen3's q/k norms, rope factors) */
    R_NORM,      /* an RMSNorm weight: folded into its readers, becomes 1 */
    R_IN,        /* rows of length d: W diag(norm) Q */
    R_VEC,       /* rows of length d without a norm: v Q (token_embd, output-side biases) */
    R_OUT,       /* d rows per matrix: Q^T W */
} role;

typedef struct role_row {
    const char *suffix;
    role r;
    const char *norm;   /* R_IN: the norm whose output the rows read ("blk.N." prefixed in layers) */
} role_row;

static const role_row global_rows[] = {
    {"token_embd.weight", R_VEC, NULL},
    {"output_norm.weight", R_NORM, NULL},
    {"output.weight", R_IN, "output_norm.weight"},
    {"rope_freqs.weight", R_COPY, NULL},
    {"rope_factors_long.weight", R_COPY, NULL},
    {"rope_factors_short.weight", R_COPY, NULL},
};

static const role_row layer_rows[] = {
    {"attn_norm.weight", R_NORM, NULL},
    {"attn_q.weight", R_IN, "attn_norm.weight"},
    {"attn_k.weight", R_IN, "attn_norm.weight"},
    {"attn_v.weight", R_IN, "attn_norm.weight"},
    {"attn_qkv.weight", R_IN, "attn_norm.weight"},
    {"attn_q.bias", R_COPY, NULL},
    {"attn_k.bias", R_COPY, NULL},
    {"attn_v.bias", R_COPY, NULL},
    {"attn_qkv.bias", R_COPY, NULL},
    {"attn_q_norm.weight", R_COPY, NULL},
    {"attn_k_norm.weight", R_COPY, NULL},
    {"attn_output.weight", R_OUT, NULL},
    {"attn_output.bias", R_VEC, NULL},
    {"ffn_norm.weight", R_NORM, NULL},
    {"ffn_gate.weight", R_IN, "ffn_norm.weight"},
    {"ffn_up.weight", R_IN, "ffn_norm.weight"},
    {"ffn_gate_inp.weight", R_IN, "ffn_norm.weight"},
    {"ffn_gate_exps.weight", R_IN, "ffn_norm.weight"},
    {"ffn_up_exps.weight", R_IN, "ffn_norm.weight"},
    {"ffn_down.weight", R_OUT, NULL},
    {"ffn_down_exps.weight", R_OUT, NULL},
    {"ffn_down.bias", R_VEC, NULL},
};

static const char *const families[] = {"llama", "qwen2", "qwen3", "qwen3moe", "phi3", "gemma"};

static const role_row *find_row(const role_row *rows, size_t n, const char *suffix) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].suffix, suffix) == 0) return &rows[i];
    return NULL;
}

/* The row of tensor `name`, and in *norm the full name of its norm ("" when
 * none); NULL when the rotation does not know the tensor. */
static const role_row *classify(const char *name, char *norm, size_t n_norm) {
    norm[0] = '\0';
    const role_row *g = find_row(global_rows, sizeof global_rows / sizeof global_rows[0], name);
    if (g) {
        if (g->norm) snprintf(norm, n_norm, "%s", g->norm);
        return g;
    }
    unsigned layer;
    int used = 0;
    if (sscanf(name, "blk.%u.%n", &layer, &used) != 1 || used == 0) return NULL;
    const role_row *l = find_row(layer_rows, sizeof layer_rows / sizeof layer_rows[0], name + used);
    if (l && l->norm) snprintf(norm, n_norm, "blk.%u.%s", layer, l->norm);
    return l;
}

static bool is_float(uint32_t type) { return type == GT_F32 || type == GT_F16 || type == GT_BF16; }

/* d n_rows (rows of length d) or d rows per matrix, as the role needs. */
static int check_shape(const gguf_file *f, const gguf_tensor_info *t, role r, int64_t d, hfq_error *err) {
    const bool ok = r == R_OUT ? t->ne[1] == d && t->ne[3] == 1
                    : r == R_NORM ? t->n_dims == 1 && t->ne[0] == d
                                  : t->ne[0] == d;
    if (ok) return 0;
    return hfq_fail(err, gguf_path(f), "tensor %s: shape [%" PRId64 ", %" PRId64 ", %" PRId64 "] does not match "
                    "n_embd %" PRId64 " for --rotate", t->name, t->ne[0], t->ne[1], t->ne[2], d);
}

/* Every refusal, before anything is written; *info: what the rotation will do. */
static int rotate_check(const gguf_file *f, hfq_rotate_info *info, hfq_error *err) {
    const char *path = gguf_path(f);
    int64_t ki = gguf_find_key(f, "general.architecture");
    const char *arch = ki >= 0 ? gguf_get_str(f, ki, NULL, err) : NULL;
    if (!arch) return ki < 0 ? hfq_fail(err, path, "no general.architecture: --rotate needs the model's family") : -1;
    bool known = false;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) known |= strcmp(arch, families[i]) == 0;
    if (!known && strncmp(arch, "gemma", 5) == 0)
        return hfq_fail(err, path, "general.architecture %s: --rotate cannot keep the function exactly (its "
                        "post-attention / post-FFN norms act on the branch outputs); rotatable: llama, qwen2, "
                        "qwen3, qwen3moe, phi3, gemma", arch);
    if (!known)
        return hfq_fail(err, path, "general.architecture %s: --rotate does not know this family (rotatable: "
                        "llama, qwen2, qwen3, qwen3moe, phi3, gemma)", arch);
    char key[96];
    snprintf(key, sizeof key, "%s.embedding_length", arch);
    int64_t d = 0;
    if ((ki = gguf_find_key(f, key)) < 0) return hfq_fail(err, path, "no %s: --rotate needs n_embd", key);
    if (gguf_get_int(f, ki, &d, err) < 0) return -1;
    if (d < 1) return hfq_fail(err, path, "%s = %" PRId64 ": not a width", key, d);
    int64_t block = d & -d;   /* the largest power of two dividing d */
    if (block < HFQ_ROTATE_MIN_BLOCK)
        return hfq_fail(err, path, "%s = %" PRId64 ": its largest power-of-two factor %" PRId64 " is below %d, "
                        "too small a Hadamard block for --rotate to spread outliers", key, d, block,
                        HFQ_ROTATE_MIN_BLOCK);
    bool has_output = false, has_embd = false;
    int64_t n_rot = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        char norm[GGUF_MAX_NAME + 32];
        const role_row *row = classify(t->name, norm, sizeof norm);
        if (!row)
            return hfq_fail(err, path, "tensor %s: --rotate does not know how this tensor meets the residual "
                            "stream (it could not keep the function exactly)", t->name);
        if (!is_float(t->type))
            return hfq_fail(err, path, "tensor %s is stored as %s: --rotate needs F32/F16/BF16 weights (rotate "
                            "the unquantized model)", t->name, ggml_type_get(t->type) ? ggml_type_get(t->type)->name
                                                                                      : "?");
        if (row->r == R_COPY) continue;
        if (check_shape(f, t, row->r, d, err) < 0) return -1;
        if (norm[0] && !gguf_find_tensor(f, norm))
            return hfq_fail(err, path, "tensor %s: its norm %s is missing (--rotate folds it first)", t->name, norm);
        has_output |= strcmp(t->name, "output.weight") == 0;
        has_embd |= strcmp(t->name, "token_embd.weight") == 0;
        n_rot++;
    }
    if (!has_embd) return hfq_fail(err, path, "no token_embd.weight: --rotate needs the embedding");
    if (!has_output && !gguf_find_tensor(f, "output_norm.weight"))
        return hfq_fail(err, path, "no output_norm.weight: --rotate folds it into the output");
    *info = (hfq_rotate_info){.n_embd = d, .block = block, .n_rotated = n_rot, .untied = !has_output};
    snprintf(info->arch, sizeof info->arch, "%s", arch);
    return 0;
}

/* ---- the transform ---- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* D's signs, d of them (the seed's stream, one draw per channel). */
static double *make_signs(int64_t d, uint64_t seed) {
    double *s = malloc((size_t)d * sizeof *s);
    uint64_t st = seed;
    for (int64_t j = 0; s && j < d; j++) s[j] = (splitmix64(&st) >> 63) ? -1.0 : 1.0;
    return s;
}

typedef struct rot {
    int64_t d, block;
    const double *sign;
    double scale;        /* 1 / sqrt(block) */
} rot;

/* x[0..d) <- (x diag(sign)) blockdiag(H_b) / sqrt(b): v Q. */
static void rotate_vec(const rot *q, double *x) {
    for (int64_t j = 0; j < q->d; j++) x[j] *= q->sign[j];
    for (int64_t b0 = 0; b0 < q->d; b0 += q->block)
        for (int64_t h = 1; h < q->block; h *= 2)
            for (int64_t i = b0; i < b0 + q->block; i += 2 * h)
                for (int64_t j = i; j < i + h; j++) {
                    const double a = x[j], b = x[j + h];
                    x[j] = a + b, x[j + h] = a - b;
                }
    for (int64_t j = 0; j < q->d; j++) x[j] *= q->scale;
}

#define COL_TILE 32

/* Q^T M for M of d rows and n columns (row-major): each column c goes
 * through rotate_vec (as the row vector M[:, c]^T), COL_TILE columns at a
 * time so the butterflies run along rows. */
static void rotate_cols_tile(const rot *q, float *m, int64_t n, int64_t c0, double *buf) {
    const int64_t w = n - c0 < COL_TILE ? n - c0 : COL_TILE;
    for (int64_t r = 0; r < q->d; r++)
        for (int64_t c = 0; c < w; c++) buf[r * COL_TILE + c] = (double)m[r * n + c0 + c] * q->sign[r];
    for (int64_t b0 = 0; b0 < q->d; b0 += q->block)
        for (int64_t h = 1; h < q->block; h *= 2)
            for (int64_t i = b0; i < b0 + q->block; i += 2 * h)
                for (int64_t j = i; j < i + h; j++)
                    for (int64_t c = 0; c < w; c++) {
                        double *x = &buf[j * COL_TILE + c], *y = &buf[(j + h) * COL_TILE + c];
                        const double a = *x, b = *y;
                        *x = a + b, *y = a - b;
                    }
    for (int64_t r = 0; r < q->d; r++)
        for (int64_t c = 0; c < w; c++) m[r * n + c0 + c] = (float)(buf[r * COL_TILE + c] * q->scale);
}

/* The rows of w ([rows][d]) times diag(norm) (may be NULL) then Q; or, for
 * R_OUT, each of the n_mats matrices of d rows and cols columns replaced by
 * Q^T M. Threads split rows or column tiles: each is computed alone. */
static int apply(const rot *q, role r, float *w, int64_t rows, int64_t cols, const float *norm, int n_threads) {
    int bad = 0;
    if (r == R_OUT) {
        const int64_t n_mats = rows / q->d, tiles = (cols + COL_TILE - 1) / COL_TILE;
#pragma omp parallel num_threads(n_threads > 0 ? n_threads : omp_get_max_threads()) reduction(| : bad)
        {
            double *buf = malloc((size_t)(q->d * COL_TILE) * sizeof *buf);
            bad |= !buf;
#pragma omp for schedule(static)
            for (int64_t k = 0; k < n_mats * tiles; k++)
                if (buf) rotate_cols_tile(q, w + (k / tiles) * q->d * cols, cols, (k % tiles) * COL_TILE, buf);
            free(buf);
        }
        return bad ? -1 : 0;
    }
#pragma omp parallel num_threads(n_threads > 0 ? n_threads : omp_get_max_threads()) reduction(| : bad)
    {
        double *x = malloc((size_t)q->d * sizeof *x);
        bad |= !x;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < rows; i++) {
            if (!x) continue;
            float *row = w + i * cols;
            for (int64_t j = 0; j < cols; j++) x[j] = (double)row[j] * (norm ? (double)norm[j] : 1.0);
            rotate_vec(q, x);
            for (int64_t j = 0; j < cols; j++) row[j] = (float)x[j];
        }
        free(x);
    }
    return bad ? -1 : 0;
}

/* Tensor `name` decoded to float, every value finite. */
static float *read_finite(const gguf_file *f, const char *name, int64_t *rows, int64_t *cols, hfq_error *err) {
    float *w = hfq_fold_read(f, name, NULL, rows, cols, err);
    for (int64_t i = 0; w && i < *rows * *cols; i++)
        if (!isfinite(w[i])) {
            hfq_fail(err, gguf_path(f), "tensor %s: NaN or Inf at element %" PRId64 " (cannot rotate)", name, i);
            free(w);
            return NULL;
        }
    return w;
}

/* Tensor `name` rotated as its role says (and written as F32). src names
 * the tensor read (token_embd for a made output.weight). */
static int write_rotated(gguf_writer *w, int64_t idx, const gguf_file *f, const char *src, role r, const char *norm,
                         const rot *q, int n_threads, hfq_error *err) {
    int64_t rows, cols, nr = 0, nc = 0;
    float *g = NULL, *x = NULL;
    int rc = -1;
    if (r == R_NORM) {
        rows = 1, cols = q->d;
        x = malloc((size_t)q->d * sizeof *x);
        for (int64_t j = 0; x && j < q->d; j++) x[j] = 1.0f;
        if (!x) hfq_fail(err, gguf_path(f), "tensor %s: out of memory", src);
    } else {
        x = read_finite(f, src, &rows, &cols, err);
        if (x && norm[0]) g = read_finite(f, norm, &nr, &nc, err);
    }
    if (x && (!norm[0] || g)) {
        if (r != R_NORM && apply(q, r, x, rows, cols, g, n_threads) < 0)
            hfq_fail(err, gguf_path(f), "tensor %s: out of memory", src);
        else
            rc = gguf_writer_write_tensor(w, idx, x, err);
    }
    free(x);
    free(g);
    return rc;
}

static int declare(gguf_writer *w, const gguf_tensor_info *t, const char *name, uint32_t type, hfq_error *err) {
    return gguf_add_tensor(w, name, type, t->n_dims, t->ne, err) < 0 ? -1 : 0;
}

gguf_writer *hfq_rotate_write(const gguf_file *f, const char *near_path, uint64_t seed, int n_threads,
                              const char **path, hfq_rotate_info *info, hfq_error *err) {
    hfq_rotate_info ri;
    if (rotate_check(f, &ri, err) < 0) return NULL;
    double *sign = make_signs(ri.n_embd, seed);
    gguf_writer *w = gguf_writer_new();
    char dest[4096], spec[64];
    if (!sign || !w) {
        hfq_fail(err, near_path, "out of memory");
        goto fail;
    }
    if (snprintf(dest, sizeof dest, "%s.rotated", near_path) >= (int)sizeof dest) {
        hfq_fail(err, near_path, "path too long");
        goto fail;
    }
    const rot q = {.d = ri.n_embd, .block = ri.block, .sign = sign, .scale = 1.0 / sqrt((double)ri.block)};
    int rc = 0;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) rc |= gguf_copy_kv(w, f, i);
    snprintf(spec, sizeof spec, "hadamard:%" PRIu64, seed);
    rc |= gguf_set_str(w, "hfq.quantize.rotate", spec);
    rc |= gguf_set_u32(w, "hfq.quantize.rotate_block", (uint32_t)ri.block);
    const int64_t n = gguf_n_tensors(f);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        char norm[GGUF_MAX_NAME + 32];
        rc = declare(w, t, t->name, classify(t->name, norm, sizeof norm)->r == R_COPY ? t->type : GT_F32, err);
    }
    const gguf_tensor_info *embd = gguf_find_tensor(f, "token_embd.weight");
    if (rc == 0 && ri.untied) rc = declare(w, embd, "output.weight", GT_F32, err);
    if (rc != 0 || gguf_writer_begin(w, dest, err) < 0) goto fail;
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        char norm[GGUF_MAX_NAME + 32];
        const role r = classify(t->name, norm, sizeof norm)->r;
        if (r == R_COPY ? gguf_writer_write_tensor(w, i, t->data, err)
                        : write_rotated(w, i, f, t->name, r, norm, &q, n_threads, err))
            goto fail;
    }
    if (ri.untied && write_rotated(w, n, f, "token_embd.weight", R_IN, "output_norm.weight", &q, n_threads, err))
        goto fail;
    if (!(*path = gguf_writer_finish_temp(w, err))) goto fail;
    free(sign);
    if (info) *info = ri;
    return w;
fail:
    free(sign);
    gguf_writer_free(w);
    return NULL;
}
