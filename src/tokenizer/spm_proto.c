/* spm_proto.c - SentencePiece ModelProto reader (see spm_proto.h). */
#include "src/tokenizer/spm_proto.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/read_file.h"
#include "src/tokenizer/unicode.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A bounded cursor over one message's bytes. */
typedef struct pb {
    const uint8_t *p, *end;
    const char *path;
    hfq_error *err;
} pb;

static int pb_varint(pb *b, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return hfq_fail(b->err, b->path, "truncated varint");
        uint8_t c = *b->p++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) { *out = v; return 0; }
    }
    return hfq_fail(b->err, b->path, "varint longer than 10 bytes");
}

/* Reads a field key; returns 1 at the end of the message, 0 on a key, -1 on error. */
static int pb_key(pb *b, uint32_t *field, int *wire) {
    if (b->p == b->end) return 1;
    uint64_t k = 0;
    if (pb_varint(b, &k)) return -1;
    if ((k >> 3) == 0 || (k >> 3) > 0x1FFFFFFF) return hfq_fail(b->err, b->path, "bad field number");
    *field = (uint32_t)(k >> 3);
    *wire = (int)(k & 7);
    return 0;
}

static int pb_len(pb *b, pb *sub) {
    uint64_t n = 0;
    if (pb_varint(b, &n)) return -1;
    if (n > (uint64_t)(b->end - b->p))
        return hfq_fail(b->err, b->path, "length %llu runs past the end of the data",
                        (unsigned long long)n);
    *sub = (pb){b->p, b->p + n, b->path, b->err};
    b->p += n;
    return 0;
}

static int pb_skip(pb *b, int wire) {
    uint64_t v = 0;
    pb sub;
    switch (wire) {
    case WT_VARINT: return pb_varint(b, &v);
    case WT_LEN: return pb_len(b, &sub);
    case WT_I64:
    case WT_I32: {
        size_t n = wire == WT_I64 ? 8 : 4;
        if ((size_t)(b->end - b->p) < n) return hfq_fail(b->err, b->path, "truncated fixed-size field");
        b->p += n;
        return 0;
    }
    default: return hfq_fail(b->err, b->path, "unsupported protobuf wire type %d", wire);
    }
}

static int expect_wire(pb *b, int wire, int want, const char *field) {
    if (wire != want) return hfq_fail(b->err, b->path, "field %s has wire type %d, expected %d", field, wire, want);
    return 0;
}

/* int32 fields are varints holding the sign-extended 64-bit value. */
static int pb_int32(pb *b, int wire, const char *field, int32_t *out) {
    uint64_t v = 0;
    if (expect_wire(b, wire, WT_VARINT, field) || pb_varint(b, &v)) return -1;
    int64_t s = (int64_t)v;
    if (s < INT32_MIN || s > INT32_MAX) return hfq_fail(b->err, b->path, "field %s out of int32 range", field);
    *out = (int32_t)s;
    return 0;
}

static int pb_bool(pb *b, int wire, const char *field, bool *out) {
    uint64_t v = 0;
    if (expect_wire(b, wire, WT_VARINT, field) || pb_varint(b, &v)) return -1;
    *out = v != 0;
    return 0;
}

/* Calls fn for every field of the message in b; stops at the first failure. */
typedef int (*pb_field_fn)(pb *b, uint32_t field, int wire, void *ctx);
static int pb_walk(pb *b, pb_field_fn fn, void *ctx) {
    for (;;) {
        uint32_t field = 0;
        int wire = 0;
        int r = pb_key(b, &field, &wire);
        if (r) return r < 0 ? -1 : 0;
        if (fn(b, field, wire, ctx)) return -1;
    }
}

/* A length-delimited field's bytes as a sub-cursor. */
static int pb_sub(pb *b, int wire, const char *field, pb *sub) {
    if (expect_wire(b, wire, WT_LEN, field)) return -1;
    return pb_len(b, sub);
}

typedef struct piece_ctx {
    hfq_spm_piece *out;
    int64_t index;
} piece_ctx;

static int piece_field(pb *b, uint32_t field, int wire, void *ctx) {
    piece_ctx *pc = ctx;
    hfq_spm_piece *out = pc->out;
    if (field == 1) {
        pb s;
        if (pb_sub(b, wire, "pieces.piece", &s)) return -1;
        size_t n = (size_t)(s.end - s.p);
        if (n == 0 || n > UINT32_MAX)
            return hfq_fail(b->err, b->path, "piece %lld: empty or oversized text", (long long)pc->index);
        for (size_t i = 0; i < n;) {
            size_t k = hfq_utf8_valid_len((const char *)s.p + i, n - i);
            if (!k) return hfq_fail(b->err, b->path, "piece %lld: text is not valid UTF-8", (long long)pc->index);
            i += k;
        }
        free(out->text);
        out->text = malloc(n + 1);
        if (!out->text) return hfq_fail(b->err, b->path, "out of memory");
        memcpy(out->text, s.p, n);
        out->text[n] = '\0';
        out->len = (uint32_t)n;
        return 0;
    }
    if (field == 2) {
        if (expect_wire(b, wire, WT_I32, "pieces.score")) return -1;
        if (b->end - b->p < 4) return hfq_fail(b->err, b->path, "truncated score");
        uint32_t bits = (uint32_t)b->p[0] | (uint32_t)b->p[1] << 8 | (uint32_t)b->p[2] << 16 | (uint32_t)b->p[3] << 24;
        memcpy(&out->score, &bits, 4);
        b->p += 4;
        return 0;
    }
    if (field == 3) {
        int32_t t;
        if (pb_int32(b, wire, "pieces.type", &t)) return -1;
        if (t < SPM_NORMAL || t > SPM_BYTE)
            return hfq_fail(b->err, b->path, "piece %lld: unknown type %d", (long long)pc->index, t);
        out->type = t;
        return 0;
    }
    return pb_skip(b, wire);
}

static int trainer_field(pb *b, uint32_t field, int wire, void *ctx) {
    hfq_spm_model *m = ctx;
    switch (field) {
    case 3: return pb_int32(b, wire, "trainer_spec.model_type", &m->model_type);
    case 24: return pb_bool(b, wire, "trainer_spec.treat_whitespace_as_suffix", &m->treat_whitespace_as_suffix);
    case 35: return pb_bool(b, wire, "trainer_spec.byte_fallback", &m->byte_fallback);
    case 40: return pb_int32(b, wire, "trainer_spec.unk_id", &m->unk_id);
    case 41: return pb_int32(b, wire, "trainer_spec.bos_id", &m->bos_id);
    case 42: return pb_int32(b, wire, "trainer_spec.eos_id", &m->eos_id);
    case 43: return pb_int32(b, wire, "trainer_spec.pad_id", &m->pad_id);
    default: return pb_skip(b, wire);
    }
}

static int normalizer_field(pb *b, uint32_t field, int wire, void *ctx) {
    hfq_spm_model *m = ctx;
    pb s;
    switch (field) {
    case 1:
        if (pb_sub(b, wire, "normalizer_spec.name", &s)) return -1;
        free(m->normalizer_name);
        m->normalizer_name = strndup((const char *)s.p, (size_t)(s.end - s.p));
        return m->normalizer_name ? 0 : hfq_fail(b->err, b->path, "out of memory");
    case 2:
        if (pb_sub(b, wire, "normalizer_spec.precompiled_charsmap", &s)) return -1;
        m->precompiled_charsmap_len = (uint64_t)(s.end - s.p);
        return 0;
    case 3: return pb_bool(b, wire, "normalizer_spec.add_dummy_prefix", &m->add_dummy_prefix);
    case 4: return pb_bool(b, wire, "normalizer_spec.remove_extra_whitespaces", &m->remove_extra_whitespaces);
    case 5: return pb_bool(b, wire, "normalizer_spec.escape_whitespaces", &m->escape_whitespaces);
    default: return pb_skip(b, wire);
    }
}

static int add_piece(pb *b, hfq_spm_model *m, pb *sub) {
    if (m->n_pieces == INT32_MAX) return hfq_fail(b->err, b->path, "too many pieces");
    if ((m->n_pieces & (m->n_pieces - 1)) == 0) {   /* grow at powers of two */
        size_t cap = m->n_pieces ? (size_t)m->n_pieces * 2 : 1024;
        hfq_spm_piece *p = realloc(m->pieces, cap * sizeof *p);
        if (!p) return hfq_fail(b->err, b->path, "out of memory");
        m->pieces = p;
    }
    hfq_spm_piece *pc = &m->pieces[m->n_pieces++];
    *pc = (hfq_spm_piece){NULL, 0, 0.0f, SPM_NORMAL};
    piece_ctx ctx = {pc, m->n_pieces - 1};
    if (pb_walk(sub, piece_field, &ctx)) return -1;
    if (!pc->text) return hfq_fail(b->err, b->path, "piece %lld has no text", (long long)ctx.index);
    return 0;
}

static int model_field(pb *b, uint32_t field, int wire, void *ctx) {
    hfq_spm_model *m = ctx;
    pb sub;
    switch (field) {
    case 1: return pb_sub(b, wire, "pieces", &sub) || add_piece(b, m, &sub) ? -1 : 0;
    case 2: return pb_sub(b, wire, "trainer_spec", &sub) || pb_walk(&sub, trainer_field, m) ? -1 : 0;
    case 3: return pb_sub(b, wire, "normalizer_spec", &sub) || pb_walk(&sub, normalizer_field, m) ? -1 : 0;
    default: return pb_skip(b, wire);
    }
}

void hfq_spm_free(hfq_spm_model *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n_pieces; i++) free(m->pieces[i].text);
    free(m->pieces);
    free(m->normalizer_name);
    memset(m, 0, sizeof *m);
}

int hfq_spm_parse(const void *data, size_t len, const char *path, hfq_spm_model *m, hfq_error *err) {
    memset(m, 0, sizeof *m);
    m->model_type = SPM_MODEL_UNIGRAM;
    m->unk_id = 0;
    m->bos_id = 1;
    m->eos_id = 2;
    m->pad_id = -1;
    m->add_dummy_prefix = m->remove_extra_whitespaces = m->escape_whitespaces = true;
    m->normalizer_name = strdup("");
    if (!m->normalizer_name) return hfq_fail(err, path, "out of memory");
    pb b = {(const uint8_t *)data, (const uint8_t *)data + len, path, err};
    if (pb_walk(&b, model_field, m)) goto fail;
    if (m->n_pieces == 0) {
        hfq_fail(err, path, "no pieces: not a SentencePiece model");
        goto fail;
    }
    const int32_t *ids[] = {&m->unk_id, &m->bos_id, &m->eos_id, &m->pad_id};
    const char *names[] = {"unk_id", "bos_id", "eos_id", "pad_id"};
    for (int i = 0; i < 4; i++) {
        if (*ids[i] < -1 || *ids[i] >= m->n_pieces) {
            hfq_fail(err, path, "trainer_spec.%s = %d is outside the %lld pieces", names[i], *ids[i],
                     (long long)m->n_pieces);
            goto fail;
        }
    }
    return 0;
fail:
    hfq_spm_free(m);
    return -1;
}

int hfq_spm_load(const char *path, hfq_spm_model *out, hfq_error *err) {
    char *data;
    size_t len;
    memset(out, 0, sizeof *out);
    if (hfq_read_file(path, (size_t)1 << 30, &data, &len, err)) return -1;
    int rc = hfq_spm_parse(data, len, path, out, err);
    free(data);
    return rc;
}
