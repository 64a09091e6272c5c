/* tokenizer.c - byte-pair training over a built-in text, and the
 * Hugging Face tokenizer files for synthetic checkpoints. */
#include "src/synth/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/atomic_file.h"

/* Original text written for this project; single spaces, ASCII only. */
static const char training_text[] =
    "Once upon a time there was a little girl who lived in a small house near the edge of a "
    "great forest. Every morning she walked to the river with her dog, and every evening they "
    "came home before the sun went down. One day the dog ran after a red bird and did not come "
    "back. The girl called his name again and again, but the only answer was the wind in the "
    "trees. She was afraid, but she was also brave, so she took a lamp, a piece of bread and "
    "a warm coat, and she went into the forest to find her friend. The path was long and the "
    "night was cold. She saw an old owl sitting on a branch. \"Have you seen my dog?\" she "
    "asked. The owl thought for a moment and said, \"I saw a dog running toward the hill. He "
    "looked happy, not lost.\" The girl thanked the owl and kept walking. At the top of the hill "
    "she found the dog playing with three small foxes under the moon. When he saw her, he "
    "jumped and barked and licked her hands. The foxes were not afraid of the girl, because "
    "she was kind and she shared her bread with them. Then the girl and her dog walked home "
    "together, and from that day on the dog never ran after birds again. "
    "The weather today is mild, with a light breeze from the west and a few clouds in the "
    "afternoon. Tomorrow will be warmer, and rain is expected on Thursday. A good map shows "
    "rivers, roads, towns and mountains, and it tells you how far one place is from another. "
    "People have built bridges for thousands of years: first from wood and rope, later from "
    "stone, and now from steel and concrete. A bridge must carry its own weight as well as "
    "the weight of everything that moves across it. Water boils at 100 degrees and freezes at "
    "0 degrees on the Celsius scale. There are 7 days in a week, 12 months in a year and about "
    "365 days in most years. Numbers such as 2, 3, 5, 7, 11 and 13 are called prime numbers, "
    "because they can only be divided by one and by themselves. "
    "In the kitchen, the baker mixed flour, water, salt and yeast, then left the dough to rest "
    "for an hour. While the dough was rising, she cleaned the table, washed the bowls and "
    "warmed the oven. The bread came out golden and crisp, and the whole street smelled of it. "
    "Children stopped on their way to school to ask for a slice, and she gave each of them a "
    "small piece with butter and honey. The teacher asked the class to write a short story "
    "about something they had learned that week. Some wrote about animals, some about the "
    "stars, and one boy wrote about how his grandfather repaired an old clock, taking it apart "
    "piece by piece and putting it back together until it ticked again. "
    "Learning a new skill takes patience. At first everything feels slow and strange, but with "
    "practice the hands and the mind begin to remember. A musician plays the same notes many "
    "times before they sound right, and a painter mixes many colors before finding the one she "
    "wants. Questions are useful: why does the sky look blue, where do rivers begin, what makes "
    "a seed grow into a tree? Each answer leads to another question, and that is how we learn "
    "more about the world we share.";

/* ------------------------------------------------------------ string map */

typedef struct strmap {
    const char **keys;
    int *ids;
    size_t cap;   /* power of two */
} strmap;

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int strmap_init(strmap *m, size_t n_max) {
    m->cap = 16;
    while (m->cap < 2 * n_max) m->cap *= 2;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->ids = calloc(m->cap, sizeof *m->ids);
    return m->keys && m->ids ? 0 : -1;
}

static void strmap_free(strmap *m) {
    free(m->keys);
    free(m->ids);
}

/* The slot of key (its first n bytes): either holding it or the empty slot for it. */
static size_t strmap_slot(const strmap *m, const char *key, size_t n) {
    size_t i = fnv1a(key, n) & (m->cap - 1);
    while (m->keys[i] && (strlen(m->keys[i]) != n || memcmp(m->keys[i], key, n) != 0))
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int strmap_get(const strmap *m, const char *key, size_t n) {
    size_t i = strmap_slot(m, key, n);
    return m->keys[i] ? m->ids[i] : -1;
}

/* ------------------------------------------------------------ training */

typedef struct trainer {
    synth_vocab *v;
    int target;
    strmap ids;            /* token text -> id */
    int cap_merges;
    int **words;           /* unique words as symbol ids (-1: character not in the vocabulary) */
    int *word_len, *word_count, n_words;
} trainer;

static int add_token(trainer *t, char *text) {
    if (!text) return -1;
    size_t slot = strmap_slot(&t->ids, text, strlen(text));
    t->v->tokens[t->v->n_tokens] = text;
    t->ids.keys[slot] = text;
    t->ids.ids[slot] = t->v->n_tokens;
    return t->v->n_tokens++;
}

static int add_merge(trainer *t, int a, int b) {
    if (t->v->n_merges == t->cap_merges) {
        int cap = t->cap_merges ? 2 * t->cap_merges : 1024;
        char **grown = realloc(t->v->merges, sizeof *grown * (size_t)cap);
        if (!grown) return -1;
        t->v->merges = grown;
        t->cap_merges = cap;
    }
    size_t la = strlen(t->v->tokens[a]), lb = strlen(t->v->tokens[b]);
    char *m = malloc(la + lb + 2);
    if (!m) return -1;
    memcpy(m, t->v->tokens[a], la);
    m[la] = ' ';
    memcpy(m + la + 1, t->v->tokens[b], lb + 1);
    t->v->merges[t->v->n_merges++] = m;
    return 0;
}

/* The id of the token a+b, adding it when new; -1 when out of memory. */
static int join_tokens(trainer *t, int a, int b) {
    size_t la = strlen(t->v->tokens[a]), lb = strlen(t->v->tokens[b]);
    char *s = malloc(la + lb + 1);
    if (!s) return -1;
    memcpy(s, t->v->tokens[a], la);
    memcpy(s + la, t->v->tokens[b], lb + 1);
    int id = strmap_get(&t->ids, s, la + lb);
    if (id >= 0) {
        free(s);
        return id;
    }
    return add_token(t, s);
}

static size_t utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

#define SPACE_MARK "\xe2\x96\x81"   /* U+2581, Llama's stand-in for the space */
#define FIRST_TEXT_TOKEN 259        /* after <unk>, <s>, </s> and the 256 byte tokens */

/* The text as the normalizer sees it: "▁" before it and for every space. */
static char *normalized_text(void) {
    size_t n = 3, len = sizeof training_text - 1;
    for (size_t i = 0; i < len; i++) n += training_text[i] == ' ' ? 3 : 1;
    char *out = malloc(n + 1), *p = out;
    if (!out) return NULL;
    memcpy(p, SPACE_MARK, 3);
    p += 3;
    for (size_t i = 0; i < len; i++) {
        if (training_text[i] == ' ') memcpy(p, SPACE_MARK, 3), p += 3;
        else *p++ = training_text[i];
    }
    *p = 0;
    return out;
}

typedef struct char_count {
    const char *at;   /* first occurrence in the text */
    size_t len;
    long count;
} char_count;

static int cmp_char_count(const void *a, const void *b) {
    const char_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->at, y->at, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Adds the text's characters, most frequent first, as many as fit. */
static int add_alphabet(trainer *t, const char *text) {
    char_count *cc = NULL;
    int n = 0, rc = 0;
    strmap seen;   /* character -> index in cc; keys are NUL-terminated copies */
    if (strmap_init(&seen, strlen(text)) != 0) rc = -1;
    for (const char *p = text; *p && rc == 0; p += utf8_len((unsigned char)*p)) {
        size_t len = utf8_len((unsigned char)*p), slot = strmap_slot(&seen, p, len);
        if (seen.keys[slot]) {
            cc[seen.ids[slot]].count++;
            continue;
        }
        char_count *grown = realloc(cc, sizeof *cc * (size_t)(n + 1));
        char *key = strndup(p, len);
        if (grown) cc = grown;
        if (!grown || !key) {
            free(key);
            rc = -1;
            break;
        }
        cc[n] = (char_count){p, len, 1};
        seen.keys[slot] = key;
        seen.ids[slot] = n++;
    }
    for (size_t i = 0; seen.keys && i < seen.cap; i++) free((char *)seen.keys[i]);
    strmap_free(&seen);
    if (rc == 0) qsort(cc, (size_t)n, sizeof *cc, cmp_char_count);
    for (int i = 0; rc == 0 && i < n && t->v->n_tokens < t->target; i++)
        if (add_token(t, strndup(cc[i].at, cc[i].len)) < 0) rc = -1;
    free(cc);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The unique words of the text (each starts at a "▁") as symbol ids, with counts. */
static int split_words(trainer *t, char *text) {
    int n = 0;
    for (char *p = text; *p; p++) n += strncmp(p, SPACE_MARK, 3) == 0;
    char **starts = malloc(sizeof *starts * (size_t)n);
    t->words = calloc((size_t)n, sizeof *t->words);
    t->word_len = calloc((size_t)n, sizeof *t->word_len);
    t->word_count = calloc((size_t)n, sizeof *t->word_count);
    if (!starts || !t->words || !t->word_len || !t->word_count) {
        free(starts);
        return -1;
    }
    int k = 0;
    for (char *p = text; *p; p++)
        if (strncmp(p, SPACE_MARK, 3) == 0) starts[k++] = p;
    /* copy the words out as strings, sort them and count the repeats */
    char **words = calloc((size_t)n, sizeof *words);
    int rc = words ? 0 : -1;
    for (int i = 0; i < n && rc == 0; i++) {
        size_t len = (i + 1 < n ? (size_t)(starts[i + 1] - starts[i]) : strlen(starts[i]));
        if (!(words[i] = strndup(starts[i], len))) rc = -1;
    }
    free(starts);
    if (rc == 0) qsort(words, (size_t)n, sizeof *words, cmp_str);
    for (int i = 0; i < n && rc == 0; i++) {
        if (t->n_words && strcmp(words[i], words[i - 1]) == 0) {
            t->word_count[t->n_words - 1]++;
            continue;
        }
        int w = t->n_words++, len = 0;
        t->words[w] = malloc(sizeof(int) * strlen(words[i]));
        if (!t->words[w]) rc = -1;
        for (const char *p = words[i]; *p && rc == 0; p += utf8_len((unsigned char)*p))
            t->words[w][len++] = strmap_get(&t->ids, p, utf8_len((unsigned char)*p));
        t->word_len[w] = len;
        t->word_count[w] = 1;
    }
    for (int i = 0; words && i < n; i++) free(words[i]);
    free(words);
    return rc;
}

/* Counts of adjacent symbol pairs: open addressing on the packed pair. */
typedef struct pair_counts {
    uint64_t *keys;   /* UINT64_MAX: empty */
    long *counts;
    size_t cap;
} pair_counts;

/* The most frequent pair (ties: lowest ids); 0 when no pair is left. */
static int best_pair(const trainer *t, pair_counts *pc, int *a, int *b) {
    memset(pc->keys, 0xff, sizeof *pc->keys * pc->cap);
    uint64_t best = UINT64_MAX;
    long best_count = 0;
    for (int w = 0; w < t->n_words; w++) {
        const int *s = t->words[w];
        for (int i = 0; i + 1 < t->word_len[w]; i++) {
            if (s[i] < 0 || s[i + 1] < 0) continue;
            uint64_t key = (uint64_t)s[i] << 32 | (uint32_t)s[i + 1];
            size_t slot = (key * 0x9e3779b97f4a7c15ull >> 20) & (pc->cap - 1);
            while (pc->keys[slot] != UINT64_MAX && pc->keys[slot] != key)
                slot = (slot + 1) & (pc->cap - 1);
            if (pc->keys[slot] == UINT64_MAX) pc->keys[slot] = key, pc->counts[slot] = 0;
            long c = pc->counts[slot] += t->word_count[w];
            if (c > best_count || (c == best_count && key < best)) best = key, best_count = c;
        }
    }
    if (!best_count) return 0;
    *a = (int)(best >> 32);
    *b = (int)(uint32_t)best;
    return 1;
}

static void apply_merge(trainer *t, int a, int b, int id) {
    for (int w = 0; w < t->n_words; w++) {
        int *s = t->words[w], o = 0;
        for (int i = 0; i < t->word_len[w]; i++) {
            if (i + 1 < t->word_len[w] && s[i] == a && s[i + 1] == b) s[o++] = id, i++;
            else s[o++] = s[i];
        }
        t->word_len[w] = o;
    }
}

static int learn_merges(trainer *t) {
    size_t positions = 0;
    for (int w = 0; w < t->n_words; w++) positions += (size_t)t->word_len[w];
    pair_counts pc = {0};
    pc.cap = 16;
    while (pc.cap < 2 * positions) pc.cap *= 2;
    pc.keys = malloc(sizeof *pc.keys * pc.cap);
    pc.counts = malloc(sizeof *pc.counts * pc.cap);
    int rc = pc.keys && pc.counts ? 0 : -1, a, b;
    while (rc == 0 && t->v->n_tokens < t->target && best_pair(t, &pc, &a, &b)) {
        int id = join_tokens(t, a, b);
        if (id < 0 || add_merge(t, a, b) != 0) rc = -1;
        else apply_merge(t, a, b, id);
    }
    free(pc.keys);
    free(pc.counts);
    return rc;
}

/* More merges once the text has none left: word token + continuation token. */
static int fill_merges(trainer *t, hfq_error *err) {
    int first = FIRST_TEXT_TOKEN;
    while (t->v->n_tokens < t->target) {
        int n = t->v->n_tokens, before = n;
        for (int a = first; a < n && t->v->n_tokens < t->target; a++) {
            if (strncmp(t->v->tokens[a], SPACE_MARK, 3) != 0) continue;
            for (int b = first; b < n && t->v->n_tokens < t->target; b++) {
                if (strncmp(t->v->tokens[b], SPACE_MARK, 3) == 0) continue;
                int had = t->v->n_tokens, id = join_tokens(t, a, b);
                if (id < 0 || (id == had && add_merge(t, a, b) != 0))
                    return hfq_fail(err, "tokenizer", "out of memory");
            }
        }
        if (t->v->n_tokens == before)
            return hfq_fail(err, "tokenizer", "cannot reach a vocabulary of %d tokens", t->target);
    }
    return 0;
}

void synth_vocab_free(synth_vocab *v) {
    for (int i = 0; v->tokens && i < v->n_tokens; i++) free(v->tokens[i]);
    for (int i = 0; v->merges && i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->merges);
    memset(v, 0, sizeof *v);
}

int synth_vocab_build(synth_vocab *v, int vocab_size, hfq_error *err) {
    memset(v, 0, sizeof *v);
    if (vocab_size < SYNTH_VOCAB_MIN || vocab_size > SYNTH_VOCAB_MAX)
        return hfq_fail(err, "tokenizer", "vocabulary size %d outside %d..%d", vocab_size,
                        SYNTH_VOCAB_MIN, SYNTH_VOCAB_MAX);
    trainer t = {.v = v, .target = vocab_size};
    v->tokens = calloc((size_t)vocab_size, sizeof *v->tokens);
    char *text = normalized_text();
    int rc = v->tokens && text && strmap_init(&t.ids, (size_t)vocab_size) == 0 ? 0 : -1;
    static const char *const specials[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3 && rc == 0; i++)
        if (add_token(&t, strdup(specials[i])) < 0) rc = -1;
    for (int byte = 0; byte < 256 && rc == 0; byte++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", byte);
        if (add_token(&t, strdup(name)) < 0) rc = -1;
    }
    if (rc == 0) rc = add_alphabet(&t, text);
    if (rc == 0) rc = split_words(&t, text);
    if (rc == 0) rc = learn_merges(&t);
    if (rc != 0) hfq_fail(err, "tokenizer", "out of memory");
    if (rc == 0) rc = fill_merges(&t, err);
    for (int w = 0; w < t.n_words; w++) free(t.words[w]);
    free(t.words);
    free(t.word_len);
    free(t.word_count);
    strmap_free(&t.ids);
    free(text);
    if (rc != 0) synth_vocab_free(v);
    return rc;
}

/* ------------------------------------------------------------- files */

int synth_write_json(const char *path, cJSON *root, hfq_error *err) {
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return hfq_fail(err, path, "out of memory");
    hfq_atomic_file af;
    int rc = hfq_atomic_open(&af, path, err);
    if (rc == 0) {
        rc = hfq_atomic_write(&af, text, strlen(text), err);
        if (rc == 0) rc = hfq_atomic_write(&af, "\n", 1, err);
        if (rc == 0) rc = hfq_atomic_commit(&af, err);
        else hfq_atomic_abort(&af);
    }
    free(text);
    return rc;
}

/* The parts of Llama 2's tokenizer.json that do not depend on the vocabulary. */
static const char tokenizer_template[] =
    "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,"
    " \"added_tokens\": ["
    "  {\"id\": 0, \"content\": \"<unk>\", \"single_word\": false, \"lstrip\": false,"
    "   \"rstrip\": false, \"normalized\": false, \"special\": true},"
    "  {\"id\": 1, \"content\": \"<s>\", \"single_word\": false, \"lstrip\": false,"
    "   \"rstrip\": false, \"normalized\": false, \"special\": true},"
    "  {\"id\": 2, \"content\": \"</s>\", \"single_word\": false, \"lstrip\": false,"
    "   \"rstrip\": false, \"normalized\": false, \"special\": true}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": ["
    "  {\"type\": \"Prepend\", \"prepend\": \"\u2581\"},"
    "  {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\u2581\"}]},"
    " \"pre_tokenizer\": null,"
    " \"post_processor\": {\"type\": \"TemplateProcessing\","
    "  \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
    "   {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],"
    "  \"pair\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
    "   {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}},"
    "   {\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 1}},"
    "   {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}],"
    "  \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": ["
    "  {\"type\": \"Replace\", \"pattern\": {\"String\": \"\u2581\"}, \"content\": \" \"},"
    "  {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
    "  {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\","
    "  \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null,"
    "  \"fuse_unk\": true, \"byte_fallback\": true}}";

static const char tokenizer_config_template[] =
    "{\"add_bos_token\": true, \"add_eos_token\": false,"
    " \"added_tokens_decoder\": {"
    "  \"0\": {\"content\": \"<unk>\", \"lstrip\": false, \"normalized\": false, \"rstrip\": false,"
    "   \"single_word\": false, \"special\": true},"
    "  \"1\": {\"content\": \"<s>\", \"lstrip\": false, \"normalized\": false, \"rstrip\": false,"
    "   \"single_word\": false, \"special\": true},"
    "  \"2\": {\"content\": \"</s>\", \"lstrip\": false, \"normalized\": false, \"rstrip\": false,"
    "   \"single_word\": false, \"special\": true}},"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"unk_token\": \"<unk>\","
    " \"pad_token\": null, \"clean_up_tokenization_spaces\": false, \"legacy\": false,"
    " \"tokenizer_class\": \"LlamaTokenizer\"}";

static const char special_tokens_map[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"unk_token\": \"<unk>\"}";

static int write_in(const char *dir, const char *name, cJSON *root, hfq_error *err) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        cJSON_Delete(root);
        return hfq_fail(err, dir, "path too long");
    }
    return synth_write_json(path, root, err);
}

static cJSON *tokenizer_json(const synth_vocab *v) {
    cJSON *root = cJSON_Parse(tokenizer_template);
    cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    cJSON *vocab = model ? cJSON_AddObjectToObject(model, "vocab") : NULL;
    cJSON *merges = vocab ? cJSON_AddArrayToObject(model, "merges") : NULL;
    int ok = merges != NULL;
    for (int i = 0; ok && i < v->n_tokens; i++)
        ok = cJSON_AddNumberToObject(vocab, v->tokens[i], i) != NULL;
    for (int i = 0; ok && i < v->n_merges; i++) {
        cJSON *m = cJSON_CreateString(v->merges[i]);
        ok = m && cJSON_AddItemToArray(merges, m);
        if (!ok) cJSON_Delete(m);
    }
    if (ok) return root;
    cJSON_Delete(root);
    return NULL;
}

int synth_write_tokenizer(const char *dir, const synth_vocab *v, int model_max_length,
                          hfq_error *err) {
    if (write_in(dir, "tokenizer.json", tokenizer_json(v), err) != 0) return -1;
    cJSON *config = cJSON_Parse(tokenizer_config_template);
    if (config && !cJSON_AddNumberToObject(config, "model_max_length", model_max_length)) {
        cJSON_Delete(config);
        config = NULL;
    }
    if (write_in(dir, "tokenizer_config.json", config, err) != 0) return -1;
    return write_in(dir, "special_tokens_map.json", cJSON_Parse(special_tokens_map), err);
}
