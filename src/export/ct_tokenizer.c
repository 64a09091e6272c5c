#include "src/export/ct_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/strmap.h"
#include "src/export/ct_config.h"
#include "src/tokenizer/pretok.h"
#include "src/tokenizer/vocab.h"

/* The byte-level pre-tokenizers we rebuild: the Split regex of their own
 * tokenizer.json. A GGUF's name for one (any of llama.cpp's aliases) and its
 * NFC and ignore_merges come from src/tokenizer/pretok.h's table. */
typedef struct bl_pre {
    hfq_pretok_kind kind;
    const char *regex;
} bl_pre;

static const bl_pre bl_pres[] = {
    {HFQ_PRETOK_LLAMA3, HFQ_LLAMA3_REGEX},
    {HFQ_PRETOK_QWEN2, HFQ_QWEN2_REGEX},
};

static const bl_pre *find_pre(const char *pre) {
    const hfq_pretok_info *pi = hfq_pretok_find(pre);
    for (size_t i = 0; pi && i < sizeof bl_pres / sizeof bl_pres[0]; i++)
        if (bl_pres[i].kind == pi->kind) return &bl_pres[i];
    return NULL;
}

static bool is_added(const hfq_vocab *v, int64_t i) {
    const int32_t t = v->token_types[i];
    return t == HFQ_TOKEN_CONTROL || t == HFQ_TOKEN_USER_DEFINED || t == HFQ_TOKEN_UNKNOWN;
}

static bool is_special(const hfq_vocab *v, int64_t i) {
    return v->token_types[i] == HFQ_TOKEN_CONTROL || v->token_types[i] == HFQ_TOKEN_UNKNOWN;
}

static cJSON *byte_level(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", false);
    cJSON_AddBoolToObject(o, "trim_offsets", false);
    cJSON_AddBoolToObject(o, "use_regex", false);
    return o;
}

static cJSON *replace(const char *from, const char *to) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "Replace");
    cJSON_AddItemToObject(o, "pattern", cJSON_CreateObject());
    cJSON_AddStringToObject(cJSON_GetObjectItem(o, "pattern"), "String", from);
    cJSON_AddStringToObject(o, "content", to);
    return o;
}

static cJSON *typed(const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

/* The gpt2 pre-tokenizer: Split (Isolated) on the family's regex, then ByteLevel. */
static cJSON *bl_pre_tokenizer(const bl_pre *p) {
    cJSON *split = typed("Split");
    cJSON_AddItemToObject(split, "pattern", cJSON_CreateObject());
    cJSON_AddStringToObject(cJSON_GetObjectItem(split, "pattern"), "Regex", p->regex);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", false);
    cJSON *seq = typed("Sequence"), *list = cJSON_AddArrayToObject(seq, "pretokenizers");
    cJSON_AddItemToArray(list, split);
    cJSON_AddItemToArray(list, byte_level());
    return seq;
}

/* SentencePiece-style text, as transformers 5's LlamaTokenizer builds it whatever the
 * source file held: Metaspace, "\u2581" in front of the first piece only when
 * add_space_prefix (legacy false), no split. */
static cJSON *spm_pre_tokenizer(const hfq_vocab *v) {
    cJSON *m = typed("Metaspace");
    cJSON_AddStringToObject(m, "replacement", "\xe2\x96\x81");
    cJSON_AddStringToObject(m, "prepend_scheme", v->add_space_prefix ? "first" : "never");
    cJSON_AddBoolToObject(m, "split", false);
    return m;
}

static cJSON *spm_decoder(const hfq_vocab *v) {
    cJSON *seq = typed("Sequence"), *list = cJSON_AddArrayToObject(seq, "decoders");
    cJSON_AddItemToArray(list, replace("\xe2\x96\x81", " "));
    cJSON_AddItemToArray(list, typed("ByteFallback"));
    cJSON_AddItemToArray(list, typed("Fuse"));
    cJSON *strip = typed("Strip");
    cJSON_AddStringToObject(strip, "content", " ");
    cJSON_AddNumberToObject(strip, "start", v->add_space_prefix ? 1 : 0);
    cJSON_AddNumberToObject(strip, "stop", 0);
    cJSON_AddItemToArray(list, strip);
    return seq;
}

static void template_piece(cJSON *list, const char *kind, const char *id, int type_id) {
    cJSON *inner = cJSON_CreateObject(), *o = cJSON_CreateObject();
    cJSON_AddStringToObject(inner, "id", id);
    cJSON_AddNumberToObject(inner, "type_id", type_id);
    cJSON_AddItemToObject(o, kind, inner);
    cJSON_AddItemToArray(list, o);
}

static void template_seq(const hfq_vocab *v, cJSON *list, const char *seq, int type_id) {
    if (v->add_bos) template_piece(list, "SpecialToken", v->tokens[v->bos_id], type_id);
    template_piece(list, "Sequence", seq, type_id);
    if (v->add_eos) template_piece(list, "SpecialToken", v->tokens[v->eos_id], type_id);
}

static void template_special(cJSON *specials, const hfq_vocab *v, int32_t id) {
    if (cJSON_GetObjectItem(specials, v->tokens[id])) return;   /* BOS = EOS */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", v->tokens[id]);
    cJSON_AddItemToObject(o, "ids", cJSON_CreateIntArray(&id, 1));
    cJSON_AddItemToObject(o, "tokens", cJSON_CreateStringArray((const char *const *)&v->tokens[id], 1));
    cJSON_AddItemToObject(specials, v->tokens[id], o);
}

/* BOS / EOS as add_bos_token / add_eos_token say (Llama 2's TemplateProcessing). */
static cJSON *post_processor(const hfq_vocab *v, bool byte_lvl) {
    if (!v->add_bos && !v->add_eos) return byte_lvl ? byte_level() : cJSON_CreateNull();
    cJSON *t = typed("TemplateProcessing");
    template_seq(v, cJSON_AddArrayToObject(t, "single"), "A", 0);
    cJSON *pair = cJSON_AddArrayToObject(t, "pair");
    template_seq(v, pair, "A", 0);
    template_seq(v, pair, "B", 1);
    cJSON *specials = cJSON_AddObjectToObject(t, "special_tokens");
    if (v->add_bos) template_special(specials, v, v->bos_id);
    if (v->add_eos) template_special(specials, v, v->eos_id);
    return t;
}

static cJSON *added_token(const hfq_vocab *v, int64_t i, bool with_id) {
    cJSON *o = cJSON_CreateObject();
    if (with_id) cJSON_AddNumberToObject(o, "id", (double)i);
    cJSON_AddStringToObject(o, "content", v->tokens[i]);
    cJSON_AddBoolToObject(o, "single_word", false);
    cJSON_AddBoolToObject(o, "lstrip", false);
    cJSON_AddBoolToObject(o, "rstrip", false);
    cJSON_AddBoolToObject(o, "normalized", false);
    cJSON_AddBoolToObject(o, "special", is_special(v, i));
    return o;
}

static void add_merge(cJSON *merges, const char *left, size_t left_len, const char *right) {
    cJSON *pair = cJSON_CreateArray();
    char *l = strndup(left, left_len);
    cJSON_AddItemToArray(pair, cJSON_CreateString(l ? l : ""));
    free(l);
    cJSON_AddItemToArray(pair, cJSON_CreateString(right));
    cJSON_AddItemToArray(merges, pair);
}

/* The merges of a SentencePiece vocabulary without any (from a tokenizer.model),
 * as transformers' generate_merges(vocab) derives them when it converts one: for
 * each token in id order, each split into two tokens, shorter left part first
 * (its sort by (id, len(left), len(right)), lengths in code points). */
static int derive_merges(const hfq_vocab *v, cJSON *merges, hfq_error *err) {
    hfq_strmap map;
    int64_t d0, d1;
    if (hfq_strmap_build(&map, v->tokens, v->token_lens, v->n_tokens, &d0, &d1) != 0)
        return hfq_fail(err, v->source, "out of memory (or duplicate tokens) indexing the vocabulary");
    for (int64_t t = 0; t < v->n_tokens; t++) {
        const char *s = v->tokens[t];
        const size_t n = v->token_lens[t];
        for (size_t i = 1; i < n; i++) {
            if (((unsigned char)s[i] & 0xC0) == 0x80) continue;   /* inside a code point */
            if (hfq_strmap_get(&map, s, i) >= 0 && hfq_strmap_get(&map, s + i, n - i) >= 0)
                add_merge(merges, s, i, s + i);
        }
    }
    hfq_strmap_free(&map);
    return 0;
}

/* model: BPE with vocab and merges ("left right" -> ["left", "right"]). */
static cJSON *bpe_model(const hfq_vocab *v, bool spm, const bl_pre *p, hfq_error *err) {
    cJSON *m = typed("BPE");
    cJSON_AddNullToObject(m, "dropout");
    if (spm && v->unk_id >= 0) cJSON_AddStringToObject(m, "unk_token", v->tokens[v->unk_id]);
    else cJSON_AddNullToObject(m, "unk_token");
    cJSON_AddNullToObject(m, "continuing_subword_prefix");
    cJSON_AddNullToObject(m, "end_of_word_suffix");
    cJSON_AddBoolToObject(m, "fuse_unk", spm);
    cJSON_AddBoolToObject(m, "byte_fallback", spm);
    cJSON_AddBoolToObject(m, "ignore_merges", p && hfq_pretok_find(v->pre)->ignore_merges);
    cJSON *vocab = cJSON_AddObjectToObject(m, "vocab");
    for (int64_t i = 0; i < v->n_tokens; i++)
        if (spm || !is_added(v, i)) cJSON_AddNumberToObject(vocab, v->tokens[i], (double)i);
    cJSON *merges = cJSON_AddArrayToObject(m, "merges");
    for (int64_t i = 0; i < v->n_merges; i++) {
        const char *s = v->merges[i], *sp = strchr(s + 1, ' ');   /* validated: a space after byte 0 */
        add_merge(merges, s, (size_t)(sp - s), sp + 1);
    }
    if (spm && v->n_merges == 0 && derive_merges(v, merges, err)) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

static cJSON *tokenizer_json(const hfq_vocab *v, const bl_pre *p, hfq_error *err) {
    const bool spm = p == NULL;
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "version", "1.0");
    cJSON_AddNullToObject(t, "truncation");
    cJSON_AddNullToObject(t, "padding");
    cJSON *added = cJSON_AddArrayToObject(t, "added_tokens");
    for (int64_t i = 0; i < v->n_tokens; i++)
        if (is_added(v, i)) cJSON_AddItemToArray(added, added_token(v, i, true));
    if (!spm && hfq_pretok_find(v->pre)->nfc) cJSON_AddItemToObject(t, "normalizer", typed("NFC"));
    else cJSON_AddNullToObject(t, "normalizer");
    cJSON_AddItemToObject(t, "pre_tokenizer", spm ? spm_pre_tokenizer(v) : bl_pre_tokenizer(p));
    cJSON_AddItemToObject(t, "post_processor", post_processor(v, !spm));
    cJSON_AddItemToObject(t, "decoder", spm ? spm_decoder(v) : byte_level());
    cJSON *model = bpe_model(v, spm, p, err);
    if (!model) {
        cJSON_Delete(t);
        return NULL;
    }
    cJSON_AddItemToObject(t, "model", model);
    return t;
}

static const char *const special_names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};

static int32_t special_id(const hfq_vocab *v, int k) {
    const int32_t ids[] = {v->bos_id, v->eos_id, v->unk_id, v->pad_id};
    return ids[k];
}

static cJSON *tokenizer_config(const hfq_vocab *v, bool spm) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddBoolToObject(c, "add_bos_token", v->add_bos);
    cJSON_AddBoolToObject(c, "add_eos_token", v->add_eos);
    cJSON *dec = cJSON_AddObjectToObject(c, "added_tokens_decoder");
    for (int64_t i = 0; i < v->n_tokens; i++) {
        if (!is_added(v, i)) continue;
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)i);
        cJSON_AddItemToObject(dec, key, added_token(v, i, false));
    }
    for (int k = 0; k < 4; k++) {
        const int32_t id = special_id(v, k);
        if (id >= 0) cJSON_AddStringToObject(c, special_names[k], v->tokens[id]);
        else cJSON_AddNullToObject(c, special_names[k]);
    }
    if (v->chat_template) cJSON_AddStringToObject(c, "chat_template", v->chat_template);
    cJSON_AddBoolToObject(c, "clean_up_tokenization_spaces", false);
    if (spm) {   /* transformers 5 rebuilds the pipeline of this class: the same as tokenizer.json's */
        cJSON_AddBoolToObject(c, "add_prefix_space", v->add_space_prefix);
        cJSON_AddBoolToObject(c, "legacy", false);
    }
    cJSON_AddStringToObject(c, "tokenizer_class", spm ? "LlamaTokenizer" : "PreTrainedTokenizerFast");
    return c;
}

static cJSON *special_tokens_map(const hfq_vocab *v) {
    cJSON *c = cJSON_CreateObject();
    for (int k = 0; k < 4; k++) {
        const int32_t id = special_id(v, k);
        if (id < 0) continue;
        cJSON *o = added_token(v, id, false);
        cJSON_DeleteItemFromObject(o, "special");
        cJSON_AddItemToObject(c, special_names[k], o);
    }
    return c;
}

/* What the rebuilt files rely on, or a one-line refusal. */
static int check_vocab(const char *where, const hfq_vocab *v, const bl_pre **p, hfq_error *err) {
    const char *how = "give --tokenizer-from HF_DIR or --no-tokenizer";
    *p = NULL;
    if (!strcmp(v->model, "gpt2")) {
        if (!(*p = find_pre(v->pre)))
            return hfq_fail(err, where, "tokenizer.ggml.pre \"%s\" is not rebuilt as tokenizer.json "
                            "(rebuilt: llama-bpe, qwen2 and their aliases): %s", v->pre, how);
    }   /* else "llama": the only other model hfq_vocab_from_gguf reads */
    const char *missing = v->add_bos && v->bos_id < 0 ? "bos" : v->add_eos && v->eos_id < 0 ? "eos" : NULL;
    if (missing) return hfq_fail(err, where, "add_%s_token is set without a %s token id", missing, missing);
    for (int64_t i = 0; i < v->n_tokens; i++)
        if (strlen(v->tokens[i]) != v->token_lens[i])   /* JSON strings here are C strings */
            return hfq_fail(err, where, "token %lld holds a NUL byte: not rebuilt: %s", (long long)i, how);
    return 0;
}

int ct_write_tokenizer(const gguf_file *f, const char *dir, const char *out_dir, hfq_error *err) {
    /* the GGUF read is the export's temporary: messages name OUT_DIR */
    if (gguf_find_key(f, HFQ_KEY_TOK_MODEL) < 0)
        return hfq_fail(err, out_dir, "the GGUF has no tokenizer (%s): give --tokenizer-from HF_DIR or "
                        "--no-tokenizer", HFQ_KEY_TOK_MODEL);
    hfq_vocab *v = hfq_vocab_from_gguf(f, err);
    if (!v) return -1;
    const bl_pre *p;
    int rc = check_vocab(out_dir, v, &p, err);
    char path[4096];
    cJSON *docs[3] = {NULL, NULL, NULL};
    static const char *const names[3] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};
    if (rc == 0) {
        err->msg[0] = '\0';
        docs[0] = tokenizer_json(v, p, err);
        if (!docs[0] && err->msg[0]) rc = -1;
        docs[1] = tokenizer_config(v, p == NULL);
        docs[2] = special_tokens_map(v);
    }
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = !docs[i] ? hfq_fail(err, out_dir, "out of memory")
             : snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path
                 ? hfq_fail(err, out_dir, "path too long")
                 : ct_write_json(docs[i], path, err);
    for (int i = 0; i < 3; i++) cJSON_Delete(docs[i]);
    hfq_vocab_free(v);
    return rc;
}
