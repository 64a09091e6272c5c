/* vocab_hf.c - hfq_vocab_from_dir: Hugging Face tokenizer files -> vocabulary
 * (see vocab.h for what is read and what is refused). */
#include "src/tokenizer/vocab.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/common/read_file.h"
#include "src/tokenizer/spm_proto.h"
#include "src/common/strmap.h"

#define MAX_JSON_BYTES ((size_t)1 << 30)

/* The regexes of the Split pre-tokenizers we implement (src/tokenizer/pretok.h). */
const char HFQ_LLAMA3_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char HFQ_QWEN2_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *SPECIAL_TYPES[] = {"bos", "eos", "unk", "sep", "pad"};
#define N_SPECIAL_TYPES 5

/* The files of one folder; absent optional files are NULL. */
typedef struct hf_dir {
    const char *dir;
    char *tok_path, *cfg_path, *config_path;
    cJSON *tok;      /* tokenizer.json */
    cJSON *cfg;      /* tokenizer_config.json */
    cJSON *config;   /* config.json */
    hfq_vocab_spm_rules rules;
} hf_dir;

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Parses path as JSON into *out; an absent file leaves *out NULL. */
static int load_json(const char *path, cJSON **out, hfq_error *err) {
    *out = NULL;
    if (!is_file(path)) return 0;
    char *data;
    size_t len;
    if (hfq_read_file(path, MAX_JSON_BYTES, &data, &len, err)) return -1;
    *out = cJSON_ParseWithLength(data, len);
    free(data);
    if (!*out) return hfq_fail(err, path, "invalid JSON");
    return 0;
}

static const cJSON *get(const cJSON *obj, const char *key) {
    return obj && cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static const char *get_str(const cJSON *obj, const char *key) {
    const cJSON *v = get(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A non-negative integer JSON number below limit, or -1. */
static int64_t as_id(const cJSON *v, int64_t limit) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0) || d >= (double)limit || floor(d) != d) return -1;
    return (int64_t)d;
}

/* tokenizer_config.json's "<typ>_token": a string or {"content": ...}. */
static const char *config_token(const cJSON *cfg, const char *typ) {
    char key[32];
    snprintf(key, sizeof key, "%s_token", typ);
    const cJSON *e = get(cfg, key);
    if (cJSON_IsString(e)) return e->valuestring;
    return get_str(e, "content");
}

static void set_special(hfq_vocab *v, const char *typ, int64_t id) {
    int32_t *slot = !strcmp(typ, "bos") ? &v->bos_id : !strcmp(typ, "eos") ? &v->eos_id :
                    !strcmp(typ, "unk") ? &v->unk_id : !strcmp(typ, "sep") ? &v->sep_id : &v->pad_id;
    if (id >= 0 && id < v->n_tokens && *slot < 0) *slot = (int32_t)id;
}

/* Id of the first added token whose content is text, or -1. */
static int64_t added_token_id(const cJSON *tok, const char *text) {
    const cJSON *added = get(tok, "added_tokens");
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const char *c = get_str(a, "content");
        if (c && !strcmp(c, text)) return as_id(get(a, "id"), INT32_MAX);
    }
    return -1;
}

/* gguf-py SpecialVocab: special ids from tokenizer_config.json (looked up in
 * tokenizer.json's added_tokens) then config.json; add_bos/add_eos from the
 * TemplateProcessing post-processor, overridden by tokenizer_config.json. */
typedef struct add_flags {
    int bos, eos;   /* -1 unknown, else 0/1 */
} add_flags;

static void template_flags(const hf_dir *d, add_flags *af) {
    const cJSON *pp = get(d->tok, "post_processor");
    if (!pp) return;
    const cJSON *procs = get(pp, "processors");
    int n = procs ? cJSON_GetArraySize(procs) : 1;
    const char *bos = config_token(d->cfg, "bos"), *eos = config_token(d->cfg, "eos");
    const char *cls = config_token(d->cfg, "cls");
    if (!eos) eos = config_token(d->cfg, "sep");
    for (int i = 0; i < n; i++) {
        const cJSON *p = procs ? cJSON_GetArrayItem(procs, i) : pp;
        const char *type = get_str(p, "type");
        if (!type || strcmp(type, "TemplateProcessing") != 0) continue;
        const cJSON *single = get(p, "single");
        int ns = cJSON_GetArraySize(single);
        if (ns <= 1) continue;
        const char *first = get_str(get(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id");
        const char *last = get_str(get(cJSON_GetArrayItem(single, ns - 1), "SpecialToken"), "id");
        /* without tokenizer_config.json the template's tokens are taken as BOS/EOS */
        if (first) af->bos = !d->cfg || (bos && !strcmp(first, bos)) || (cls && !strcmp(first, cls));
        if (last) af->eos = !d->cfg || (eos && !strcmp(last, eos));
    }
}

static int read_chat_template(const hf_dir *d, hfq_vocab *v, hfq_error *err) {
    const cJSON *t = get(d->cfg, "chat_template");
    const char *text = NULL;
    char *file_text = NULL;
    if (cJSON_IsString(t)) {
        text = t->valuestring;
    } else if (cJSON_IsArray(t)) {   /* named templates: keep "default" */
        const cJSON *e;
        cJSON_ArrayForEach(e, t) {
            const char *name = get_str(e, "name");
            if (name && !strcmp(name, "default")) text = get_str(e, "template");
        }
    } else {
        char *path = join(d->dir, "chat_template.jinja");
        if (!path) return hfq_fail(err, d->dir, "out of memory");
        size_t len;
        int rc = is_file(path) ? hfq_read_file(path, MAX_JSON_BYTES, &file_text, &len, err) : 0;
        free(path);
        if (rc) return -1;
        text = file_text;
    }
    if (text) {
        v->chat_template = strdup(text);
        free(file_text);
        if (!v->chat_template) return hfq_fail(err, d->dir, "out of memory");
    }
    return 0;
}

static int special_vocab(const hf_dir *d, hfq_vocab *v, bool *add_bos, bool *add_eos, hfq_error *err) {
    add_flags af = {-1, -1};
    if (d->tok) template_flags(d, &af);
    if (d->cfg) {
        const cJSON *b = get(d->cfg, "add_bos_token"), *e = get(d->cfg, "add_eos_token");
        if (cJSON_IsBool(b)) af.bos = cJSON_IsTrue(b);
        if (cJSON_IsBool(e)) af.eos = cJSON_IsTrue(e);
        for (int k = 0; k < N_SPECIAL_TYPES && d->tok; k++) {
            const char *text = config_token(d->cfg, SPECIAL_TYPES[k]);
            if (!text && !strcmp(SPECIAL_TYPES[k], "bos")) text = config_token(d->cfg, "cls");
            if (!text && !strcmp(SPECIAL_TYPES[k], "eos")) text = config_token(d->cfg, "sep");
            if (text) set_special(v, SPECIAL_TYPES[k], added_token_id(d->tok, text));
        }
        if (read_chat_template(d, v, err)) return -1;
    }
    for (int k = 0; k < N_SPECIAL_TYPES && d->config; k++) {
        char key[32];
        snprintf(key, sizeof key, "%s_token_id", SPECIAL_TYPES[k]);
        const cJSON *id = get(d->config, key);
        if (!id) id = get(get(d->config, "text_config"), key);
        set_special(v, SPECIAL_TYPES[k], as_id(id, v->n_tokens));
    }
    if (af.bos >= 0) *add_bos = af.bos;
    if (af.eos >= 0) *add_eos = af.eos;
    return 0;
}

/* config.json's vocab_size (0 when absent). */
static int64_t config_vocab_size(const hf_dir *d) {
    int64_t n = as_id(get(d->config, "vocab_size"), INT32_MAX);
    if (n < 0) n = as_id(get(get(d->config, "text_config"), "vocab_size"), INT32_MAX);
    return n < 0 ? 0 : n;
}

/* Refuses a vocabulary of n ids of which only n_defined are given: padding
 * (holes, and [PAD] tokens up to config.json's vocab_size) is a small share
 * of real vocabularies, while a lying id or vocab_size (1e8) would make every
 * tool allocate and fill gigabytes of [PAD] tokens. */
static int check_sparse(const char *path, int64_t n, int64_t n_defined, hfq_error *err) {
    if (n <= 2 * n_defined + 65536) return 0;
    return hfq_fail(err, path, "token ids run to %lld but only %lld tokens are defined (an id or config.json's "
                    "vocab_size far beyond the vocabulary)", (long long)n - 1, (long long)n_defined);
}

/* Sets every still-empty token to "[PAD<id>]" (UNUSED), as convert_hf_to_gguf.py. */
static int fill_pad_tokens(hfq_vocab *v, float score, hfq_error *err) {
    for (int64_t i = 0; i < v->n_tokens; i++) {
        if (v->tokens[i]) continue;
        char name[32];
        int n = snprintf(name, sizeof name, "[PAD%lld]", (long long)i);
        if (hfq_vocab_set_token(v, i, name, (size_t)n, HFQ_TOKEN_UNUSED, err)) return -1;
        if (v->scores) v->scores[i] = score;
    }
    return 0;
}

static bool looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    if (n >= 8 && !strncmp(t, "<\xef\xbd\x9c", 4) && !strcmp(t + n - 4, "\xef\xbd\x9c>")) return true;
    return n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>';
}

/* Replaces U+2581 by ' ' (convert_hf_to_gguf.py pre-normalizes user-defined tokens). */
static void unescape_spaces(char *s) {
    char *w = s;
    for (const char *r = s; *r;) {
        if (!strncmp(r, "\xe2\x96\x81", 3)) { *w++ = ' '; r += 3; }
        else *w++ = *r++;
    }
    *w = '\0';
}

/* One added token {content, special} at id over a SentencePiece
 * vocabulary (score -1000); as_written: Phi-3's rules (vocab.h), else
 * Llama's. Entries without content or a valid id are skipped, as before. */
static int spm_added_token(hfq_vocab *v, const cJSON *e, long long id, bool as_written, const char *where,
                           hfq_error *err) {
    const char *content = get_str(e, "content");
    if (!content || id < 0 || id >= v->n_tokens) return 0;
    bool control = cJSON_IsTrue(get(e, "special")) || (!as_written && looks_special(content));
    char *text = strdup(content);
    if (!text) return hfq_fail(err, where, "out of memory");
    if (!control && !as_written) unescape_spaces(text);
    int rc = hfq_vocab_set_token(v, id, text, strlen(text), control ? HFQ_TOKEN_CONTROL : HFQ_TOKEN_USER_DEFINED, err);
    free(text);
    if (rc) return -1;
    v->scores[id] = -1000.0f;
    return 0;
}

/* tokenizer_config.json added_tokens_decoder / added_tokens.json overrides of
 * a SentencePiece vocabulary (as _create_vocab_sentencepiece). */
static int spm_added_tokens(const hf_dir *d, hfq_vocab *v, hfq_error *err) {
    cJSON *added = NULL;
    char *path = join(d->dir, "added_tokens.json");
    if (!path) return hfq_fail(err, d->dir, "out of memory");
    int rc = load_json(path, &added, err);
    free(path);
    const cJSON *e;
    cJSON_ArrayForEach(e, added) {
        int64_t id = as_id(e, v->n_tokens);
        if (rc || id < 0 || !e->string) continue;
        rc = hfq_vocab_set_token(v, id, e->string, strlen(e->string), HFQ_TOKEN_USER_DEFINED, err);
        v->scores[id] = -1000.0f;
    }
    cJSON_Delete(added);
    if (rc) return -1;
    const bool phi3 = d->rules == HFQ_VOCAB_SPM_PHI3;
    cJSON_ArrayForEach(e, get(d->cfg, "added_tokens_decoder")) {
        char *end = NULL;
        long long id = e->string ? strtoll(e->string, &end, 10) : -1;
        if (end && !*end && spm_added_token(v, e, id, phi3, d->cfg_path, err)) return -1;
    }
    /* Phi3MiniModel reads tokenizer.json's added tokens too */
    const cJSON *tok_added = phi3 ? get(d->tok, "added_tokens") : NULL;
    cJSON_ArrayForEach(e, tok_added) {
        if (spm_added_token(v, e, as_id(get(e, "id"), v->n_tokens), true, d->tok_path, err)) return -1;
    }
    return 0;
}

static hfq_vocab *from_spm(hf_dir *d, const char *path, hfq_error *err) {
    hfq_spm_model m;
    if (hfq_spm_load(path, &m, err)) return NULL;
    hfq_vocab *v = NULL;
    const char *why = NULL;
    if (m.model_type != SPM_MODEL_BPE) why = "only BPE models are supported (this is not trainer_spec.model_type BPE)";
    else if (m.precompiled_charsmap_len || (m.normalizer_name[0] && strcmp(m.normalizer_name, "identity") != 0))
        why = "only the identity normalizer is supported";
    else if (m.remove_extra_whitespaces) why = "normalizer_spec.remove_extra_whitespaces is not supported";
    else if (!m.escape_whitespaces) why = "normalizer_spec.escape_whitespaces=false is not supported";
    else if (m.treat_whitespace_as_suffix) why = "trainer_spec.treat_whitespace_as_suffix is not supported";
    if (why) {
        hfq_fail(err, path, "%s", why);
        goto fail;
    }
    v = hfq_vocab_new(path, "llama", "default", err);
    int64_t n = config_vocab_size(d);
    if (!v || check_sparse(d->config_path, n, m.n_pieces, err) ||
        hfq_vocab_resize(v, n > m.n_pieces ? n : m.n_pieces, true, err))
        goto fail;
    for (int64_t i = 0; i < m.n_pieces && i < v->n_tokens; i++) {
        if (hfq_vocab_set_token(v, i, m.pieces[i].text, m.pieces[i].len, m.pieces[i].type, err)) goto fail;
        v->scores[i] = m.pieces[i].score;
    }
    if (fill_pad_tokens(v, -10000.0f, err) || spm_added_tokens(d, v, err)) goto fail;
    v->add_bos = true;
    v->add_space_prefix = m.add_dummy_prefix && d->rules != HFQ_VOCAB_SPM_GEMMA;
    if (special_vocab(d, v, &v->add_bos, &v->add_eos, err)) goto fail;
    set_special(v, "unk", m.unk_id);
    set_special(v, "bos", m.bos_id);
    set_special(v, "eos", m.eos_id);
    set_special(v, "pad", m.pad_id);
    hfq_spm_free(&m);
    return v;
fail:
    hfq_spm_free(&m);
    hfq_vocab_free(v);
    return NULL;
}

/* ---- tokenizer.json ---- */

/* Copies the model's merges ("a b" strings, or ["a", "b"] pairs whose spaces
 * are written as U+0120, as gguf-py does). */
static int read_merges(const hf_dir *d, const cJSON *model, hfq_vocab *v, hfq_error *err) {
    const cJSON *merges = get(model, "merges");
    const cJSON *m;
    int64_t i = 0;
    cJSON_ArrayForEach(m, merges) {
        /* both halves non-empty: "ab" or ["", "ab"] has no split point */
        const char *sp = cJSON_IsString(m) && m->valuestring[0] ? strchr(m->valuestring + 1, ' ') : NULL;
        if (sp && sp[1]) {
            if (hfq_vocab_add_merge(v, m->valuestring, strlen(m->valuestring), err)) return -1;
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 1)) && cJSON_GetArrayItem(m, 0)->valuestring[0] &&
                   cJSON_GetArrayItem(m, 1)->valuestring[0]) {
            const char *parts[2] = {cJSON_GetArrayItem(m, 0)->valuestring, cJSON_GetArrayItem(m, 1)->valuestring};
            size_t cap = 2 * (strlen(parts[0]) + strlen(parts[1])) + 2, n = 0;
            char *buf = malloc(cap);
            if (!buf) return hfq_fail(err, d->tok_path, "out of memory");
            for (int k = 0; k < 2; k++) {
                if (k) buf[n++] = ' ';
                for (const char *c = parts[k]; *c; c++) {
                    if (*c == ' ') { buf[n++] = (char)0xC4; buf[n++] = (char)0xA0; }
                    else buf[n++] = *c;
                }
            }
            int rc = hfq_vocab_add_merge(v, buf, n, err);
            free(buf);
            if (rc) return -1;
        } else {
            return hfq_fail(err, d->tok_path, "model.merges[%lld]: neither \"a b\" nor [\"a\", \"b\"]", (long long)i);
        }
        i++;
    }
    return 0;
}

/* model.vocab's largest id + 1; -1 (err set) when an entry is not a valid id. */
static int64_t base_vocab_end(const hf_dir *d, const cJSON *model, hfq_error *err) {
    const cJSON *vocab = get(model, "vocab");
    if (!cJSON_IsObject(vocab) || !vocab->child) {
        hfq_fail(err, d->tok_path, "model.vocab: missing, empty or not an object");
        return -1;
    }
    int64_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        int64_t id = as_id(e, INT32_MAX);
        if (id < 0 || !e->string) {
            hfq_fail(err, d->tok_path, "model.vocab: bad id for \"%.40s\"", e->string ? e->string : "");
            return -1;
        }
        if (id >= n) n = id + 1;
    }
    return n;
}

/* Sets the base vocabulary (model.vocab) with type NORMAL. */
static int read_base_vocab(const cJSON *model, hfq_vocab *v, hfq_error *err) {
    const cJSON *e;
    cJSON_ArrayForEach(e, get(model, "vocab")) {
        if (hfq_vocab_set_token(v, as_id(e, INT32_MAX), e->string, strlen(e->string), HFQ_TOKEN_NORMAL, err))
            return -1;
    }
    return 0;
}

/* Largest added-token id + 1 (0 when none). */
static int64_t added_end(const cJSON *tok) {
    int64_t end = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, get(tok, "added_tokens")) {
        int64_t id = as_id(get(a, "id"), INT32_MAX);
        if (id >= end) end = id + 1;
    }
    return end;
}

static bool is_byte_token(const char *t) {
    static const char hex[] = "0123456789abcdefABCDEF";
    return strlen(t) == 6 && !strncmp(t, "<0x", 3) && strchr(hex, t[3]) && strchr(hex, t[4]) && t[5] == '>';
}

/* True when text names one of the tokenizer's special tokens (transformers'
 * all_special_tokens: the *_token entries and additional_special_tokens). */
static bool config_special(const hf_dir *d, const char *text) {
    static const char *types[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const char *t = config_token(d->cfg, types[k]);
        if (t && !strcmp(t, text)) return true;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, get(d->cfg, "additional_special_tokens")) {
        const char *t = cJSON_IsString(e) ? e->valuestring : get_str(e, "content");
        if (t && !strcmp(t, text)) return true;
    }
    return false;
}

/* Normalizer / pre-tokenizer of a SentencePiece-style tokenizer.json ->
 * add_space_prefix; NULL or the reason it is not supported. */
static const char *spm_style_prefix(const cJSON *tok, bool *prefix) {
    static const char SPACE_MARK[] = "\xe2\x96\x81";
    const cJSON *norm = get(tok, "normalizer");
    const cJSON *pre = get(tok, "pre_tokenizer");
    bool replace = false, prepend = false;
    if (norm && !cJSON_IsNull(norm)) {
        const char *t = get_str(norm, "type");
        const cJSON *list = t && !strcmp(t, "Sequence") ? get(norm, "normalizers") : NULL;
        int n = list ? cJSON_GetArraySize(list) : 1;
        for (int i = 0; i < n; i++) {
            const cJSON *s = list ? cJSON_GetArrayItem(list, i) : norm;
            const char *st = get_str(s, "type");
            if (st && !strcmp(st, "Prepend") && get_str(s, "prepend") && !strcmp(get_str(s, "prepend"), SPACE_MARK))
                prepend = true;
            else if (st && !strcmp(st, "Replace") && get_str(get(s, "pattern"), "String") &&
                     !strcmp(get_str(get(s, "pattern"), "String"), " ") && get_str(s, "content") &&
                     !strcmp(get_str(s, "content"), SPACE_MARK))
                replace = true;
            else
                return "unsupported normalizer (supported: Prepend \"\xe2\x96\x81\" and Replace \" \" -> "
                       "\"\xe2\x96\x81\")";
        }
        if (!replace) return "the normalizer does not replace spaces by \xe2\x96\x81";
        if (pre && !cJSON_IsNull(pre)) return "a pre-tokenizer after the normalizer is not supported";
        *prefix = prepend;
        return NULL;
    }
    const char *pt = get_str(pre, "type");
    if (!pt || strcmp(pt, "Metaspace") != 0) return "unsupported pre-tokenizer (supported: none, or Metaspace)";
    const char *repl = get_str(pre, "replacement");
    if (repl && strcmp(repl, SPACE_MARK) != 0) return "Metaspace replacement other than \xe2\x96\x81";
    if (cJSON_IsTrue(get(pre, "split"))) return "Metaspace with split=true is not supported";
    const char *scheme = get_str(pre, "prepend_scheme");
    *prefix = scheme ? strcmp(scheme, "never") != 0 : !cJSON_IsFalse(get(pre, "add_prefix_space"));
    return NULL;
}

/* Scores that make score-driven (SentencePiece-style) merging follow the
 * merge ranks: -rank of the first merge producing a token. */
static int scores_from_merges(hfq_vocab *v, hfq_error *err) {
    hfq_strmap map;
    int64_t a, b;
    int rc = hfq_strmap_build(&map, v->tokens, v->token_lens, v->n_tokens, &a, &b);
    if (rc) return rc < 0 ? hfq_fail(err, v->source, "out of memory")
                          : hfq_fail(err, v->source, "tokens %lld and %lld are both \"%.40s\"", (long long)a,
                                     (long long)b, v->tokens[a]);
    for (int64_t i = 0; i < v->n_tokens; i++) {   /* code points in the token */
        size_t n_cp = 0;
        for (uint32_t k = 0; k < v->token_lens[i]; k++) n_cp += ((unsigned char)v->tokens[i][k] & 0xC0) != 0x80;
        v->scores[i] = n_cp > 1 ? -1e9f : 0.0f;
    }
    char *buf = NULL;
    size_t cap = 0;
    for (int64_t r = v->n_merges - 1; r >= 0; r--) {   /* the first (lowest) rank wins */
        const char *m = v->merges[r];
        const char *sp = strchr(m + 1, ' ');
        size_t la = (size_t)(sp - m), lb = strlen(sp + 1);
        if (la + lb > cap) {
            cap = 2 * (la + lb);
            char *p = realloc(buf, cap);
            if (!p) { free(buf); hfq_strmap_free(&map); return hfq_fail(err, v->source, "out of memory"); }
            buf = p;
        }
        memcpy(buf, m, la);
        memcpy(buf + la, sp + 1, lb);
        int32_t id = hfq_strmap_get(&map, buf, la + lb);
        if (id >= 0) v->scores[id] = -(float)r;
    }
    free(buf);
    hfq_strmap_free(&map);
    return 0;
}

/* Which pre-tokenizer a byte-level tokenizer.json uses: "llama-bpe" or
 * "qwen2"; NULL with *why when unsupported. */
static const char *detect_pre(const cJSON *tok, const char **why) {
    const cJSON *pre = get(tok, "pre_tokenizer");
    const char *pt = get_str(pre, "type");
    const cJSON *list = pt && !strcmp(pt, "Sequence") ? get(pre, "pretokenizers") : NULL;
    const cJSON *split = cJSON_GetArrayItem(list, 0), *bl = cJSON_GetArrayItem(list, 1);
    const char *regex = get_str(get(split, "pattern"), "Regex");
    const char *bt = get_str(bl, "type");
    if (cJSON_GetArraySize(list) != 2 || !get_str(split, "type") || strcmp(get_str(split, "type"), "Split") != 0 ||
        !regex || !bt || strcmp(bt, "ByteLevel") != 0) {
        *why = "unsupported pre-tokenizer (supported: Sequence of Split with the Llama 3 or Qwen2 regex, ByteLevel)";
        return NULL;
    }
    const char *behavior = get_str(split, "behavior");
    if ((behavior && strcmp(behavior, "Isolated") != 0) || cJSON_IsTrue(get(split, "invert")) ||
        cJSON_IsTrue(get(bl, "add_prefix_space")) || cJSON_IsTrue(get(bl, "use_regex"))) {
        *why = "unsupported Split/ByteLevel options";
        return NULL;
    }
    const cJSON *norm = get(tok, "normalizer");
    const char *nt = get_str(norm, "type");
    if (!strcmp(regex, HFQ_LLAMA3_REGEX) && (!norm || cJSON_IsNull(norm))) return "llama-bpe";
    if (!strcmp(regex, HFQ_QWEN2_REGEX) && nt && !strcmp(nt, "NFC")) return "qwen2";
    *why = "unsupported pre-tokenizer regex / normalizer combination (supported: Llama 3's regex without "
           "normalizer, Qwen2's regex with NFC)";
    return NULL;
}

/* Types and texts of tokenizer.json's added tokens (gpt2: as get_vocab_base). */
static int set_added_tokens(const hf_dir *d, hfq_vocab *v, bool spm_style, hfq_error *err) {
    const cJSON *a;
    cJSON_ArrayForEach(a, get(d->tok, "added_tokens")) {
        const char *content = get_str(a, "content");
        int64_t id = as_id(get(a, "id"), v->n_tokens);
        if (!content || id < 0) return hfq_fail(err, d->tok_path, "added_tokens: entry without content or valid id");
        bool special = cJSON_IsTrue(get(a, "special"));
        int32_t type;
        if (spm_style) {
            if (v->tokens[id] && v->token_types[id] != HFQ_TOKEN_UNUSED && !special) continue;   /* base token */
            type = special || config_special(d, content) ? HFQ_TOKEN_CONTROL : HFQ_TOKEN_USER_DEFINED;
        } else {
            type = special || looks_special(content) ? HFQ_TOKEN_CONTROL : HFQ_TOKEN_USER_DEFINED;
        }
        char *text = strdup(content);
        if (!text) return hfq_fail(err, d->tok_path, "out of memory");
        if (type == HFQ_TOKEN_USER_DEFINED && !spm_style) unescape_spaces(text);
        int rc = hfq_vocab_set_token(v, id, text, strlen(text), type, err);
        free(text);
        if (rc) return -1;
    }
    return 0;
}

static hfq_vocab *from_tokenizer_json(hf_dir *d, hfq_error *err) {
    const cJSON *model = get(d->tok, "model");
    const char *mtype = get_str(model, "type");
    if (!mtype || strcmp(mtype, "BPE") != 0) {
        hfq_fail(err, d->tok_path, "model.type \"%s\" is not supported (supported: BPE)", mtype ? mtype : "?");
        return NULL;
    }
    bool spm_style = cJSON_IsTrue(get(model, "byte_fallback"));
    const char *why = NULL, *pre = "default";
    bool prefix = false;
    const char *cont = get_str(model, "continuing_subword_prefix"), *suffix = get_str(model, "end_of_word_suffix");
    const cJSON *dropout = get(model, "dropout");
    if ((cont && *cont) || (suffix && *suffix))
        why = "continuing_subword_prefix / end_of_word_suffix are not supported";
    else if (dropout && !cJSON_IsNull(dropout))
        why = "BPE dropout is not supported";
    else if (spm_style && cJSON_IsTrue(get(model, "ignore_merges")))
        why = "ignore_merges with byte_fallback is not supported";
    else if (spm_style) why = spm_style_prefix(d->tok, &prefix);
    else pre = detect_pre(d->tok, &why);
    if (why) {
        hfq_fail(err, d->tok_path, "%s", why);
        return NULL;
    }
    hfq_vocab *v = hfq_vocab_new(d->tok_path, spm_style ? "llama" : "gpt2", pre, err);
    if (!v) return NULL;
    int64_t n_base = base_vocab_end(d, model, err), n_added_end = added_end(d->tok);
    int64_t n = config_vocab_size(d);   /* padded with [PAD<id>] to the embedding rows */
    if (n_base < 0) goto fail;
    if (n_added_end > n) n = n_added_end;
    if (n_base > n) n = n_base;
    const int64_t n_defined = cJSON_GetArraySize(get(model, "vocab")) + cJSON_GetArraySize(get(d->tok, "added_tokens"));
    if (check_sparse(d->tok_path, n, n_defined, err) || hfq_vocab_resize(v, n, spm_style, err) || read_base_vocab(model, v, err) ||
        set_added_tokens(d, v, spm_style, err) || read_merges(d, model, v, err))
        goto fail;
    int64_t n_real = n_base > n_added_end ? n_base : n_added_end;   /* padding follows */
    for (int64_t i = 0; spm_style && i < n_real; i++) {
        if (!v->tokens[i]) {
            hfq_fail(err, d->tok_path, "token id %lld is neither in model.vocab nor in added_tokens", (long long)i);
            goto fail;
        }
        if (v->token_types[i] == HFQ_TOKEN_NORMAL && is_byte_token(v->tokens[i])) v->token_types[i] = HFQ_TOKEN_BYTE;
        else if (v->token_types[i] == HFQ_TOKEN_NORMAL && config_special(d, v->tokens[i]))
            v->token_types[i] = HFQ_TOKEN_CONTROL;
    }
    if (fill_pad_tokens(v, 0.0f, err)) goto fail;
    if (spm_style) {
        const char *unk = get_str(model, "unk_token");
        int64_t unk_id = -1;
        for (int64_t i = 0; unk && unk_id < 0 && i < n_real; i++)
            if (!strcmp(v->tokens[i], unk)) unk_id = i;
        set_special(v, "unk", unk_id);
        if (scores_from_merges(v, err)) goto fail;
    }
    v->add_bos = spm_style || !strcmp(pre, "llama-bpe");   /* llama.cpp's defaults */
    v->add_space_prefix = prefix;
    if (special_vocab(d, v, &v->add_bos, &v->add_eos, err)) goto fail;
    if (v->unk_id >= 0 && spm_style) v->token_types[v->unk_id] = HFQ_TOKEN_UNKNOWN;
    return v;
fail:
    hfq_vocab_free(v);
    return NULL;
}

/* tokenizer_config.json names the GPT-2 tokenizer class (Phi-4). */
static bool gpt2_class(const hf_dir *d) {
    const char *cls = get_str(d->cfg, "tokenizer_class");
    return cls && strcmp(cls, "GPT2Tokenizer") == 0;
}

hfq_vocab *hfq_vocab_from_dir(const char *dir, hfq_error *err) {
    return hfq_vocab_from_dir_as(dir, HFQ_VOCAB_SPM_LLAMA, err);
}

hfq_vocab *hfq_vocab_from_dir_as(const char *dir, hfq_vocab_spm_rules rules, hfq_error *err) {
    hf_dir d = {.dir = dir, .rules = rules};
    hfq_vocab *v = NULL;
    char *spm_path = join(dir, "tokenizer.model");
    d.tok_path = join(dir, "tokenizer.json");
    d.cfg_path = join(dir, "tokenizer_config.json");
    d.config_path = join(dir, "config.json");
    if (!spm_path || !d.tok_path || !d.cfg_path || !d.config_path) {
        hfq_fail(err, dir, "out of memory");
        goto done;
    }
    if (load_json(d.cfg_path, &d.cfg, err) || load_json(d.config_path, &d.config, err)) goto done;
    if (load_json(d.tok_path, &d.tok, err)) goto done;   /* SpecialVocab reads it for both */
    if (is_file(spm_path) && !(rules == HFQ_VOCAB_SPM_PHI3 && d.tok && gpt2_class(&d))) {
        v = from_spm(&d, spm_path, err);
    } else if (d.tok) {
        v = from_tokenizer_json(&d, err);
    } else {
        hfq_fail(err, dir, "no tokenizer.model or tokenizer.json");
        goto done;
    }
    if (v && hfq_vocab_validate(v, err)) {
        hfq_vocab_free(v);
        v = NULL;
    }
done:
    cJSON_Delete(d.tok);
    cJSON_Delete(d.cfg);
    cJSON_Delete(d.config);
    free(spm_path);
    free(d.tok_path);
    free(d.cfg_path);
    free(d.config_path);
    return v;
}
