/* spm_proto.c - SentencePiece ModelProto reader (see spm_proto.h). */
#include "src/spm_proto.h"

#include <stdlib.h>
#include <string.h>

#include "src/read_file.h"
#include "src/unicode.h"

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

static int parse_piece(pb *b, hfq_spm_piece *out, int64_t index) {
    out->type = SPM_NORMAL;
    out->score = 0.0f;
    bool have_text = false;
    for (;;) {
        uint32_t field = 0;
        int wire = 0;
        int r = pb_key(b, &field, &wire);
        if (r < 0) return -1;
        if (r > 0) break;
        if (field == 1) {
            pb s;
            if (expect_wire(b, wire, WT_LEN, "pieces.piece") || pb_len(b, &s)) return -1;
            size_t n = (size_t)(s.end - s.p);
            if (n == 0 || n > UINT32_MAX) return hfq_fail(b->err, b->path, "piece %lld: empty or oversized text", (long long)index);
            for (size_t i = 0; i < n;) {
                size_t k = hfq_utf8_valid_len((const char *)s.p + i, n - i);
                if (!k) return hfq_fail(b->err, b->path, "piece %lld: text is not valid UTF-8", (long long)index);
                i += k;
            }
            free(out->text);
            out->text = malloc(n + 1);
            if (!out->text) return hfq_fail(b->err, b->path, "out of memory");
            memcpy(out->text, s.p, n);
            out->text[n] = '\0';
            out->len = (uint32_t)n;
            have_text = true;
        } else if (field == 2) {
            if (expect_wire(b, wire, WT_I32, "pieces.score")) return -1;
            if (b->end - b->p < 4) return hfq_fail(b->err, b->path, "truncated score");
            uint32_t bits = (uint32_t)b->p[0] | (uint32_t)b->p[1] << 8 | (uint32_t)b->p[2] << 16 |
                            (uint32_t)b->p[3] << 24;
            memcpy(&out->score, &bits, 4);
            b->p += 4;
        } else if (field == 3) {
            int32_t t;
            if (pb_int32(b, wire, "pieces.type", &t)) return -1;
            if (t < SPM_NORMAL || t > SPM_BYTE)
                return hfq_fail(b->err, b->path, "piece %lld: unknown type %d", (long long)index, t);
            out->type = t;
        } else if (pb_skip(b, wire)) {
            return -1;
        }
    }
    if (!have_text) return hfq_fail(b->err, b->path, "piece %lld has no text", (long long)index);
    return 0;
}

static int parse_trainer(pb *b, hfq_spm_model *m) {
    for (;;) {
        uint32_t field = 0;
        int wire = 0;
        int r = pb_key(b, &field, &wire);
        if (r < 0) return -1;
        if (r > 0) return 0;
        switch (field) {
        case 3: r = pb_int32(b, wire, "trainer_spec.model_type", &m->model_type); break;
        case 24: r = pb_bool(b, wire, "trainer_spec.treat_whitespace_as_suffix", &m->treat_whitespace_as_suffix); break;
        case 35: r = pb_bool(b, wire, "trainer_spec.byte_fallback", &m->byte_fallback); break;
        case 40: r = pb_int32(b, wire, "trainer_spec.unk_id", &m->unk_id); break;
        case 41: r = pb_int32(b, wire, "trainer_spec.bos_id", &m->bos_id); break;
        case 42: r = pb_int32(b, wire, "trainer_spec.eos_id", &m->eos_id); break;
        case 43: r = pb_int32(b, wire, "trainer_spec.pad_id", &m->pad_id); break;
        default: r = pb_skip(b, wire); break;
        }
        if (r) return -1;
    }
}

static int parse_normalizer(pb *b, hfq_spm_model *m) {
    for (;;) {
        uint32_t field = 0;
        int wire = 0;
        int r = pb_key(b, &field, &wire);
        if (r < 0) return -1;
        if (r > 0) return 0;
        pb s;
        switch (field) {
        case 1:
            if (expect_wire(b, wire, WT_LEN, "normalizer_spec.name") || pb_len(b, &s)) return -1;
            free(m->normalizer_name);
            m->normalizer_name = strndup((const char *)s.p, (size_t)(s.end - s.p));
            if (!m->normalizer_name) return hfq_fail(b->err, b->path, "out of memory");
            break;
        case 2:
            if (expect_wire(b, wire, WT_LEN, "normalizer_spec.precompiled_charsmap") || pb_len(b, &s)) return -1;
            m->precompiled_charsmap_len = (uint64_t)(s.end - s.p);
            break;
        case 3: r = pb_bool(b, wire, "normalizer_spec.add_dummy_prefix", &m->add_dummy_prefix); break;
        case 4: r = pb_bool(b, wire, "normalizer_spec.remove_extra_whitespaces", &m->remove_extra_whitespaces); break;
        case 5: r = pb_bool(b, wire, "normalizer_spec.escape_whitespaces", &m->escape_whitespaces); break;
        default: r = pb_skip(b, wire); break;
        }
        if (r) return -1;
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
    int64_t cap = 0;
    for (;;) {
        uint32_t field = 0;
        int wire = 0;
        int r = pb_key(&b, &field, &wire);
        if (r < 0) goto fail;
        if (r > 0) break;
        pb sub;
        if (field >= 1 && field <= 3) {
            if (expect_wire(&b, wire, WT_LEN, field == 1 ? "pieces" : field == 2 ? "trainer_spec" : "normalizer_spec") ||
                pb_len(&b, &sub))
                goto fail;
        }
        if (field == 1) {
            if (m->n_pieces == INT32_MAX) {
                hfq_fail(err, path, "too many pieces");
                goto fail;
            }
            if (m->n_pieces == cap) {
                int64_t ncap = cap ? cap * 2 : 1024;
                hfq_spm_piece *p = realloc(m->pieces, (size_t)ncap * sizeof *p);
                if (!p) {
                    hfq_fail(err, path, "out of memory");
                    goto fail;
                }
                m->pieces = p;
                cap = ncap;
            }
            hfq_spm_piece *pc = &m->pieces[m->n_pieces++];
            memset(pc, 0, sizeof *pc);
            if (parse_piece(&sub, pc, m->n_pieces - 1)) goto fail;
        } else if (field == 2) {
            if (parse_trainer(&sub, m)) goto fail;
        } else if (field == 3) {
            if (parse_normalizer(&sub, m)) goto fail;
        } else if (pb_skip(&b, wire)) {
            goto fail;
        }
    }
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
