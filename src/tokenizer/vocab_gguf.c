/* vocab_gguf.c - the vocabulary <-> GGUF tokenizer.* keys (see vocab.h). */
#include "src/tokenizer/vocab.h"

#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/pretok.h"

static int32_t *id_slot(const hfq_vocab *v, int k) {
    return (int32_t *)((char *)v + hfq_vocab_id_keys[k].offset);
}

static int set_failed(hfq_error *err, const char *key) {
    return hfq_fail(err, "GGUF writer", "cannot set %s (out of memory?)", key);
}

int hfq_vocab_to_gguf(const hfq_vocab *v, gguf_writer *w, hfq_error *err) {
    if (hfq_vocab_validate(v, err)) return -1;
    if (gguf_set_str(w, HFQ_KEY_TOK_MODEL, v->model)) return set_failed(err, HFQ_KEY_TOK_MODEL);
    if (gguf_set_str(w, HFQ_KEY_TOK_PRE, v->pre)) return set_failed(err, HFQ_KEY_TOK_PRE);
    uint64_t *lens = malloc((size_t)v->n_tokens * sizeof *lens);
    if (!lens) return hfq_fail(err, v->source, "out of memory");
    for (int64_t i = 0; i < v->n_tokens; i++) lens[i] = v->token_lens[i];
    int rc = gguf_set_arr_str(w, HFQ_KEY_TOKENS, (const char *const *)v->tokens, lens, v->n_tokens);
    free(lens);
    if (rc) return set_failed(err, HFQ_KEY_TOKENS);
    if (v->scores && gguf_set_arr(w, HFQ_KEY_SCORES, GGUF_VT_FLOAT32, v->scores, v->n_tokens))
        return set_failed(err, HFQ_KEY_SCORES);
    if (gguf_set_arr(w, HFQ_KEY_TOKEN_TYPE, GGUF_VT_INT32, v->token_types, v->n_tokens))
        return set_failed(err, HFQ_KEY_TOKEN_TYPE);
    if (v->n_merges && gguf_set_arr_str(w, HFQ_KEY_MERGES, (const char *const *)v->merges, NULL, v->n_merges))
        return set_failed(err, HFQ_KEY_MERGES);
    for (int k = 0; k < HFQ_VOCAB_N_ID_KEYS; k++) {
        int32_t id = *id_slot(v, k);
        if (id >= 0 && gguf_set_u32(w, hfq_vocab_id_keys[k].key, (uint32_t)id))
            return set_failed(err, hfq_vocab_id_keys[k].key);
    }
    if (gguf_set_bool(w, HFQ_KEY_ADD_BOS, v->add_bos)) return set_failed(err, HFQ_KEY_ADD_BOS);
    if (gguf_set_bool(w, HFQ_KEY_ADD_EOS, v->add_eos)) return set_failed(err, HFQ_KEY_ADD_EOS);
    if (gguf_set_bool(w, HFQ_KEY_ADD_SPACE_PREFIX, v->add_space_prefix))
        return set_failed(err, HFQ_KEY_ADD_SPACE_PREFIX);
    if (v->chat_template && gguf_set_str(w, HFQ_KEY_CHAT_TEMPLATE, v->chat_template))
        return set_failed(err, HFQ_KEY_CHAT_TEMPLATE);
    return 0;
}

/* Reads an optional string key into a malloc'd copy (*out untouched when absent). */
static int get_str_key(const gguf_file *f, const char *key, char **out, hfq_error *err) {
    int64_t i = gguf_find_key(f, key);
    if (i < 0) return 0;
    if (gguf_kv_type(f, i) != GGUF_VT_STRING)
        return hfq_fail(err, gguf_path(f), "%s: expected a string, found %s", key,
                        gguf_vtype_name(gguf_kv_type(f, i)));
    uint64_t len;
    const char *s = gguf_get_str(f, i, &len, err);
    if (!s) return -1;
    if (strlen(s) != len) return hfq_fail(err, gguf_path(f), "%s: string contains a NUL byte", key);
    char *p = strdup(s);
    if (!p) return hfq_fail(err, gguf_path(f), "out of memory");
    free(*out);
    *out = p;
    return 0;
}

static int get_bool_key(const gguf_file *f, const char *key, bool *out, hfq_error *err) {
    int64_t i = gguf_find_key(f, key);
    if (i < 0) return 0;
    if (gguf_kv_type(f, i) != GGUF_VT_BOOL)
        return hfq_fail(err, gguf_path(f), "%s: expected a bool, found %s", key, gguf_vtype_name(gguf_kv_type(f, i)));
    return gguf_get_bool(f, i, out, err);
}

/* Index of an array key whose elements have type t (or t_alt) and count n
 * (n < 0: any); -1 when absent and not required, -2 (err set) when invalid. */
static int64_t find_array(const gguf_file *f, const char *key, gguf_vtype t, gguf_vtype t_alt, int64_t n,
                          bool required, hfq_error *err) {
    int64_t i = gguf_find_key(f, key);
    if (i < 0) {
        if (required) hfq_fail(err, gguf_path(f), "%s: missing", key);
        return required ? -2 : -1;
    }
    if (gguf_kv_type(f, i) != GGUF_VT_ARRAY || (gguf_arr_type(f, i) != t && gguf_arr_type(f, i) != t_alt)) {
        hfq_fail(err, gguf_path(f), "%s: expected an array of %s", key, gguf_vtype_name(t));
        return -2;
    }
    if (n >= 0 && gguf_arr_n(f, i) != n) {
        hfq_fail(err, gguf_path(f), "%s: %lld elements for %lld tokens", key, (long long)gguf_arr_n(f, i),
                 (long long)n);
        return -2;
    }
    return i;
}

static int read_tokens(const gguf_file *f, hfq_vocab *v, hfq_error *err) {
    int64_t ti = find_array(f, HFQ_KEY_TOKENS, GGUF_VT_STRING, GGUF_VT_STRING, -1, true, err);
    if (ti < 0) return -1;
    int64_t n = gguf_arr_n(f, ti);
    if (n <= 0 || n > INT32_MAX)
        return hfq_fail(err, gguf_path(f), "%s: bad token count %lld", HFQ_KEY_TOKENS, (long long)n);
    /* llama.cpp also accepts integer scores */
    int64_t si = find_array(f, HFQ_KEY_SCORES, GGUF_VT_FLOAT32, GGUF_VT_INT32, n, false, err);
    int64_t yi = find_array(f, HFQ_KEY_TOKEN_TYPE, GGUF_VT_INT32, GGUF_VT_INT32, n, false, err);
    if (si == -2 || yi == -2) return -1;
    if (hfq_vocab_resize(v, n, si >= 0, err)) return -1;
    const char *scores = si >= 0 ? gguf_arr_data(f, si) : NULL;
    bool int_scores = si >= 0 && gguf_arr_type(f, si) == GGUF_VT_INT32;
    const char *types = yi >= 0 ? gguf_arr_data(f, yi) : NULL;
    for (int64_t j = 0; j < n; j++) {
        uint64_t len;
        const char *s = gguf_arr_str(f, ti, j, &len);
        if (!s) return hfq_fail(err, gguf_path(f), "%s[%lld]: unreadable", HFQ_KEY_TOKENS, (long long)j);
        int32_t type = HFQ_TOKEN_NORMAL;
        if (types) memcpy(&type, types + 4 * j, 4);
        if (hfq_vocab_set_token(v, j, s, len, type, err)) return -1;
        if (scores && int_scores) {
            int32_t x;
            memcpy(&x, scores + 4 * j, 4);
            v->scores[j] = (float)x;
        } else if (scores) {
            memcpy(&v->scores[j], scores + 4 * j, 4);
        }
    }
    return 0;
}

static int read_merges(const gguf_file *f, hfq_vocab *v, hfq_error *err) {
    int64_t mi = find_array(f, HFQ_KEY_MERGES, GGUF_VT_STRING, GGUF_VT_STRING, -1, false, err);
    if (mi == -2) return -1;
    if (mi < 0) return 0;
    int64_t n = gguf_arr_n(f, mi);
    for (int64_t j = 0; j < n; j++) {
        uint64_t len;
        const char *s = gguf_arr_str(f, mi, j, &len);
        if (!s) return hfq_fail(err, gguf_path(f), "%s[%lld]: unreadable", HFQ_KEY_MERGES, (long long)j);
        if (strlen(s) != len)
            return hfq_fail(err, gguf_path(f), "%s[%lld]: contains a NUL byte", HFQ_KEY_MERGES, (long long)j);
        if (hfq_vocab_add_merge(v, s, len, err)) return -1;
    }
    return 0;
}

static int read_ids(const gguf_file *f, hfq_vocab *v, hfq_error *err) {
    for (int k = 0; k < HFQ_VOCAB_N_ID_KEYS; k++) {
        int64_t i = gguf_find_key(f, hfq_vocab_id_keys[k].key);
        if (i < 0) continue;
        int64_t id;
        if (gguf_get_int(f, i, &id, err)) return -1;
        if (id < 0 || id >= v->n_tokens)
            return hfq_fail(err, gguf_path(f), "%s = %lld is outside the vocabulary of %lld tokens",
                            hfq_vocab_id_keys[k].key, (long long)id, (long long)v->n_tokens);
        *id_slot(v, k) = (int32_t)id;
    }
    return 0;
}

hfq_vocab *hfq_vocab_from_gguf(const gguf_file *f, hfq_error *err) {
    char *model = NULL, *pre = NULL;
    hfq_vocab *v = NULL;
    if (get_str_key(f, HFQ_KEY_TOK_MODEL, &model, err) || get_str_key(f, HFQ_KEY_TOK_PRE, &pre, err)) goto fail;
    if (!model) {
        hfq_fail(err, gguf_path(f), "%s: missing (no tokenizer in this file)", HFQ_KEY_TOK_MODEL);
        goto fail;
    }
    v = hfq_vocab_new(gguf_path(f), model, pre ? pre : "default", err);
    if (!v) goto fail;
    bool spm = strcmp(model, "llama") == 0;
    /* llama.cpp's defaults where a key is absent */
    const hfq_pretok_info *pi = spm ? NULL : hfq_pretok_find(v->pre);
    v->add_bos = spm || (pi && pi->add_bos);
    v->add_space_prefix = spm;
    if (read_tokens(f, v, err) || read_merges(f, v, err) || read_ids(f, v, err)) goto fail;
    if (spm && gguf_find_key(f, HFQ_KEY_BOS_ID) < 0 && v->n_tokens > 1) v->bos_id = 1;
    if (spm && gguf_find_key(f, HFQ_KEY_EOS_ID) < 0 && v->n_tokens > 2) v->eos_id = 2;
    if (spm && gguf_find_key(f, HFQ_KEY_UNK_ID) < 0) v->unk_id = 0;
    if (get_bool_key(f, HFQ_KEY_ADD_BOS, &v->add_bos, err) || get_bool_key(f, HFQ_KEY_ADD_EOS, &v->add_eos, err) ||
        get_bool_key(f, HFQ_KEY_ADD_SPACE_PREFIX, &v->add_space_prefix, err) ||
        get_str_key(f, HFQ_KEY_CHAT_TEMPLATE, &v->chat_template, err))
        goto fail;
    if (hfq_vocab_validate(v, err)) goto fail;
    free(model);
    free(pre);
    return v;
fail:
    free(model);
    free(pre);
    hfq_vocab_free(v);
    return NULL;
}
