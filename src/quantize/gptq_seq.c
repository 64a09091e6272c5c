/* gptq_seq.c - see src/quantize/gptq_seq.h. */
#include "src/quantize/gptq_seq.h"

#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"

typedef struct seq_tensor {
    char name[GGUF_MAX_NAME + 1];
    int64_t layer, n_rows, n_per_row, rows_done;
    float *data;
} seq_tensor;

struct hfq_gptq_seq {
    seq_tensor *t;
    int64_t n, cap;
};

/* The table a bound model looks tensors up in: the replaced ones, then the file's. */
typedef struct seq_source {
    const gguf_file *f;
    gguf_tensor_info *info;
    int64_t n;
} seq_source;

hfq_gptq_seq *hfq_gptq_seq_new(void) { return calloc(1, sizeof(hfq_gptq_seq)); }

void hfq_gptq_seq_free(hfq_gptq_seq *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n; i++) free(s->t[i].data);
    free(s->t);
    free(s);
}

int hfq_gptq_seq_record(hfq_gptq_seq *s, const char *name, int64_t n_rows, int64_t n_per_row, int64_t r,
                        const float *row) {
    char *end;
    if (strncmp(name, "blk.", 4) != 0 || strlen(name) > GGUF_MAX_NAME) return 0;
    const long long layer = strtoll(name + 4, &end, 10);
    if (end == name + 4 || *end != '.') return 0;
    seq_tensor *t = s->n > 0 && strcmp(s->t[s->n - 1].name, name) == 0 ? &s->t[s->n - 1] : NULL;
    if (!t) {
        if (s->n == s->cap) {
            const int64_t cap = s->cap ? 2 * s->cap : 64;
            seq_tensor *q = realloc(s->t, (size_t)cap * sizeof *q);
            if (!q) return -1;
            s->t = q;
            s->cap = cap;
        }
        t = &s->t[s->n];
        *t = (seq_tensor){.layer = layer, .n_rows = n_rows, .n_per_row = n_per_row};
        strcpy(t->name, name);
        if (!(t->data = malloc((size_t)(n_rows * n_per_row) * sizeof *t->data))) return -1;
        s->n++;
    }
    memcpy(t->data + r * n_per_row, row, (size_t)n_per_row * sizeof *row);
    t->rows_done = r + 1;
    return 0;
}

static const gguf_tensor_info *find(const void *source, const char *name) {
    const seq_source *src = source;
    for (int64_t i = 0; i < src->n; i++)
        if (strcmp(src->info[i].name, name) == 0) return &src->info[i];
    return gguf_find_tensor(src->f, name);
}

hfq_model *hfq_gptq_seq_bind(const hfq_gptq_seq *s, const hfq_model *base, int64_t layer, int64_t *n_replaced,
                             hfq_error *err) {
    const gguf_file *f = hfq_model_gguf(base);
    seq_source src = {f, calloc((size_t)(s->n > 0 ? s->n : 1), sizeof(gguf_tensor_info)), 0};
    if (!src.info) {
        hfq_fail(err, hfq_model_path(base), "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < s->n; i++) {
        const seq_tensor *t = &s->t[i];
        if (t->layer >= layer || t->rows_done < t->n_rows) continue;
        const gguf_tensor_info *orig = gguf_find_tensor(f, t->name);
        if (!orig || orig->ne[0] != t->n_per_row || orig->ne[1] * orig->ne[2] * orig->ne[3] != t->n_rows) {
            free(src.info);
            hfq_fail(err, hfq_model_path(base), "sequential GPTQ: tensor %s is not the model's", t->name);
            return NULL;
        }
        gguf_tensor_info *o = &src.info[src.n++];
        *o = *orig;
        o->type = GT_F32;
        o->data = t->data;
        o->nbytes = (uint64_t)(t->n_rows * t->n_per_row) * sizeof(float);
    }
    const hfq_tensor_source ts = {&src, hfq_model_path(base), find, NULL, NULL, NULL};
    hfq_model *m = hfq_model_bind(hfq_model_hparams(base), &ts, err);
    *n_replaced = src.n;
    free(src.info);
    return m;
}
