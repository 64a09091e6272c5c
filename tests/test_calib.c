/* test_calib.c - calib/ on its own: statistics against sums computed here,
 * the histogram and its percentiles, the reservoir, llama.cpp's importance
 * normalisation, statistics files (round trip, expert shapes, hostile files),
 * chat template rendering, text to sequences, fold groups and transforms,
 * SmoothQuant's formula, and the scale search never doing worse than s = 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/awq.h"
#include "calib/calibrate.h"
#include "calib/chat_template.h"
#include "calib/fold.h"
#include "calib/fold_eval.h"
#include "calib/names.h"
#include "calib/smoothquant.h"
#include "calib/stats.h"
#include "calib/stats_file.h"
#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "tests/check.h"

static char tmpdir[] = "/tmp/test_calib_XXXXXX";

static const char *tmp_path(const char *name) {
    static char buf[8][256];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    return p;
}

static uint64_t rng_state = 12345;
static float frand(void) {  /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

/* ---- statistics ---- */

static void test_accumulation(void) {
    enum { T = 50, N = 7 };
    static float x[T][N];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++) x[t][j] = frand() * (float)(j + 1) * (t == 13 ? 100.0f : 1.0f);
    hfq_calib_stats s;
    hfq_calib_stats_init(&s, 0);
    hfq_error err;
    CHECK(hfq_calib_stats_add(&s, "blk.0.attn_output.weight", 0, 1, &x[0][0], 20, N, &err) == 0);
    CHECK(hfq_calib_stats_add(&s, "blk.0.attn_output.weight", 0, 1, &x[20][0], T - 20, N, &err) == 0);
    CHECK(hfq_calib_stats_add(&s, "blk.0.attn_output.weight", 0, 1, &x[0][0], 1, N + 1, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "blk.0.attn_output.weight");
    CHECK(hfq_calib_stats_finish(&s, &err) == 0);
    const hfq_calib_entry *e = hfq_calib_stats_find(&s, "blk.0.attn_output.weight");
    CHECK(e && e->counts[0] == T && e->n_in == N && !e->sample);
    for (int j = 0; e && j < N; j++) {
        double s2 = 0, sa = 0, mx = 0;
        for (int t = 0; t < T; t++) {
            s2 += (double)x[t][j] * x[t][j];
            sa += fabs(x[t][j]);
            mx = fmax(mx, fabs(x[t][j]));
        }
        CHECK(e->in_sum2[j] == (float)s2 && e->in_sum_abs[j] == (float)sa && e->in_max[j] == (float)mx);
    }
    float imp[N];
    hfq_calib_importance(e, 0, imp);
    for (int j = 0; j < N; j++) CHECK(imp[j] == e->in_sum2[j] / (float)T);
    /* every token lands in the bin of its maximum */
    float total = 0;
    for (int b = 0; b < HFQ_CALIB_HIST_BINS; b++) total += e->tok_hist[b];
    CHECK(total == T);
    float tok13 = 0;
    for (int j = 0; j < N; j++) tok13 = fmaxf(tok13, fabsf(x[13][j]));
    CHECK(e->tok_hist[hfq_calib_hist_bin(tok13)] >= 1);
    CHECK(hfq_calib_token_max_percentile(e, 0, 100.0) == hfq_calib_amax(e, 0));
    CHECK(hfq_calib_amax(e, 0) == tok13);
    hfq_calib_stats_free(&s);
}

static void test_histogram(void) {
    CHECK(hfq_calib_hist_bin(0.0f) == 0);
    CHECK(hfq_calib_hist_bin(ldexpf(1.0f, -21)) == 0);
    CHECK(hfq_calib_hist_bin(ldexpf(1.0f, -20)) == 1);
    CHECK(hfq_calib_hist_bin(1.0f) == 1 + 20 * HFQ_CALIB_HIST_PER_OCTAVE);
    CHECK(hfq_calib_hist_bin(1.0f) == hfq_calib_hist_bin(1.08f));    /* 1.08 < 2^(1/8) */
    CHECK(hfq_calib_hist_bin(1.1f) == hfq_calib_hist_bin(1.0f) + 1);  /* 1.1 > 2^(1/8) */
    CHECK(hfq_calib_hist_bin(1e30f) == HFQ_CALIB_HIST_BINS - 1);
    /* tokens whose maxima are 1..100: the median's bin holds 50 */
    hfq_calib_stats s;
    hfq_calib_stats_init(&s, 0);
    hfq_error err;
    for (int t = 1; t <= 100; t++) {
        float row[2] = {(float)t, -0.5f};
        CHECK(hfq_calib_stats_add(&s, "output.weight", 0, 1, row, 1, 2, &err) == 0);
    }
    hfq_calib_stats_finish(&s, &err);
    const hfq_calib_entry *e = &s.entries[0];
    float p50 = hfq_calib_token_max_percentile(e, 0, 50.0);
    CHECK_MSG(p50 >= 50.0f && p50 < 50.0f * 1.0906f, "p50 = %g", p50);
    float p90 = hfq_calib_token_max_percentile(e, 0, 90.0);
    CHECK_MSG(p90 >= 90.0f && p90 <= 100.0f, "p90 = %g", p90);
    CHECK(hfq_calib_token_max_percentile(e, 0, 100.0) == 100.0f);
    hfq_calib_stats_free(&s);
}

static void test_reservoir(void) {
    enum { T = 300, N = 3, CAP = 16 };
    static float x[T][N];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++) x[t][j] = (float)(t * N + j);
    hfq_calib_stats a, b;
    hfq_error err;
    hfq_calib_stats_init(&a, CAP);
    hfq_calib_stats_init(&b, CAP);
    for (int t = 0; t < T; t += 7) {
        int n = T - t < 7 ? T - t : 7;
        CHECK(hfq_calib_stats_add(&a, "blk.1.attn_q.weight", 0, 1, &x[t][0], n, N, &err) == 0);
        CHECK(hfq_calib_stats_add(&a, "blk.1.attn_k.weight", 0, 1, &x[t][0], n, N, &err) == 0);
    }
    CHECK(hfq_calib_stats_add(&b, "blk.1.attn_q.weight", 0, 1, &x[0][0], T, N, &err) == 0);
    hfq_calib_stats_finish(&a, &err);
    hfq_calib_stats_finish(&b, &err);
    const hfq_calib_entry *q = hfq_calib_stats_find(&a, "blk.1.attn_q.weight");
    const hfq_calib_entry *k = hfq_calib_stats_find(&a, "blk.1.attn_k.weight");
    const hfq_calib_entry *qb = hfq_calib_stats_find(&b, "blk.1.attn_q.weight");
    CHECK(q && k && qb && q->n_sample == CAP && !k->sample && qb->n_sample == CAP);
    /* whole input rows, not all from the start, the same however the rows came in batches */
    int late = 0;
    for (int r = 0; q && r < CAP; r++) {
        const float *row = q->sample + r * N;
        int t = (int)row[0] / N;
        CHECK(row[1] == x[t][1] && row[2] == x[t][2]);
        late += t >= CAP;
    }
    CHECK(late > CAP / 2);
    CHECK(q && qb && memcmp(q->sample, qb->sample, CAP * N * sizeof(float)) == 0);
    hfq_calib_stats_free(&a);
    hfq_calib_stats_free(&b);
}

static void test_names(void) {
    char out[64];
    CHECK(!hfq_calib_input_leader("blk.3.attn_k.weight", out, sizeof out) && strcmp(out, "blk.3.attn_q.weight") == 0);
    CHECK(!hfq_calib_input_leader("blk.3.attn_v.weight", out, sizeof out) && strcmp(out, "blk.3.attn_q.weight") == 0);
    CHECK(!hfq_calib_input_leader("blk.12.ffn_up.weight", out, sizeof out) && strcmp(out, "blk.12.ffn_gate.weight") == 0);
    CHECK(!hfq_calib_input_leader("blk.0.ffn_up_exps.weight", out, sizeof out) &&
          strcmp(out, "blk.0.ffn_gate_exps.weight") == 0);
    CHECK(hfq_calib_input_leader("blk.3.attn_q.weight", out, sizeof out));
    CHECK(hfq_calib_input_leader("blk.3.ffn_down.weight", out, sizeof out));
    CHECK(hfq_calib_input_leader("output.weight", out, sizeof out));
}

/* ---- statistics files ---- */

static void fill_stats(hfq_calib_stats *s) {
    hfq_error err;
    hfq_calib_stats_init(s, 4);
    float x[10 * 8];
    for (int i = 0; i < 80; i++) x[i] = frand();
    /* a dense weight, a follower, and an expert tensor of 3 matrices */
    hfq_calib_stats_add(s, "blk.0.attn_q.weight", 0, 1, x, 10, 8, &err);
    hfq_calib_stats_add(s, "blk.0.attn_k.weight", 0, 1, x, 10, 8, &err);
    for (int m = 0; m < 3; m += 2) hfq_calib_stats_add(s, "blk.0.ffn_up_exps.weight", m, 3, x + m * 8, 5 + m, 8, &err);
    hfq_calib_stats_finish(s, &err);
    hfq_calib_stats_add_dataset(s, "train.txt", &err);
    snprintf(s->mode, sizeof s->mode, "chunks");
    s->n_chunks = 2;
    s->chunk_size = 5;
    s->n_tokens = 10;
    s->text_xxh3 = 0x123456789abcdefull;
    s->has_text_xxh3 = true;
}

static bool same_entry(const hfq_calib_entry *a, const hfq_calib_entry *b) {
    const size_t nv = (size_t)(a->n_in * a->n_mats) * sizeof(float);
    return a->n_in == b->n_in && a->n_mats == b->n_mats && memcmp(a->in_sum2, b->in_sum2, nv) == 0 &&
           memcmp(a->in_sum_abs, b->in_sum_abs, nv) == 0 && memcmp(a->in_max, b->in_max, nv) == 0 &&
           memcmp(a->tok_hist, b->tok_hist, (size_t)(a->n_mats * HFQ_CALIB_HIST_BINS) * sizeof(float)) == 0 &&
           memcmp(a->counts, b->counts, (size_t)a->n_mats * sizeof(int64_t)) == 0 && a->n_sample == b->n_sample &&
           (!a->sample || memcmp(a->sample, b->sample, (size_t)(a->n_sample * a->n_in) * sizeof(float)) == 0);
}

static void test_file_roundtrip(void) {
    hfq_calib_stats s, r;
    hfq_error err;
    fill_stats(&s);
    const char *path = tmp_path("rt.stats");
    CHECK(hfq_calib_stats_save(&s, path, &err) == 0);
    CHECK_MSG(hfq_calib_stats_load(&r, path, &err) == 0, "%s", err.msg);
    CHECK(r.n == s.n && r.n_chunks == 2 && r.chunk_size == 5 && r.n_tokens == 10 && r.has_text_xxh3 &&
          r.text_xxh3 == s.text_xxh3 && strcmp(r.mode, "chunks") == 0 && r.n_datasets == 1 &&
          strcmp(r.datasets[0], "train.txt") == 0);
    for (int64_t i = 0; i < s.n && i < r.n; i++) {
        CHECK(strcmp(s.entries[i].name, r.entries[i].name) == 0);
        CHECK_MSG(same_entry(&s.entries[i], &r.entries[i]), "%s", s.entries[i].name);
    }
    const hfq_calib_entry *x = hfq_calib_stats_find(&r, "blk.0.ffn_up_exps.weight");
    CHECK(x && x->n_mats == 3 && x->counts[0] == 5 && x->counts[1] == 0 && x->counts[2] == 7);
    float imp[24];
    for (int m = 0; x && m < 3; m++) hfq_calib_importance(x, m, imp + 8 * m);
    CHECK(imp[8] == 1.0f && imp[15] == 1.0f);   /* an expert no token reached: all 1, as llama.cpp */
    /* layout: in_sum2 [n_in] for dense, [n_in, n_mats] for experts; counts [1] / [1, n_mats] */
    gguf_file *f = gguf_open(path, &err);
    const gguf_tensor_info *t = f ? gguf_find_tensor(f, "blk.0.attn_q.weight.in_sum2") : NULL;
    CHECK(t && t->n_dims == 1 && t->ne[0] == 8);
    t = f ? gguf_find_tensor(f, "blk.0.ffn_up_exps.weight.in_sum2") : NULL;
    CHECK(t && t->n_dims == 2 && t->ne[0] == 8 && t->ne[1] == 3);
    t = f ? gguf_find_tensor(f, "blk.0.ffn_up_exps.weight.counts") : NULL;
    CHECK(t && t->n_dims == 2 && t->ne[0] == 1 && t->ne[1] == 3);
    CHECK(f && gguf_find_tensor(f, "blk.0.attn_q.weight.in_sample") && !gguf_find_tensor(f, "blk.0.attn_k.weight.in_sample"));
    gguf_close(f);
    hfq_calib_stats_free(&s);
    hfq_calib_stats_free(&r);
}

/* A statistics file from a spec: tensors named, typed and sized as given. */
typedef struct spec_tensor {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne0, ne1;
    float value;
} spec_tensor;

static const char *write_spec(const char *name, const char *type, const spec_tensor *ts, int n, bool hist_keys) {
    const char *path = tmp_path(name);
    hfq_error err;
    gguf_writer *w = gguf_writer_new();
    if (type) gguf_set_str(w, "general.type", type);
    if (hist_keys) gguf_set_i32(w, "hfq.calib.hist.per_octave", 4);
    for (int i = 0; i < n; i++) {
        const int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        gguf_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ne, &err);
    }
    CHECK(gguf_writer_begin(w, path, &err) == 0);
    for (int i = 0; i < n; i++) {
        size_t nb = (size_t)gguf_tensor_nbytes(w, i);
        float *d = malloc(nb + 4);
        for (size_t k = 0; k < nb / 4; k++) d[k] = ts[i].value;
        gguf_writer_write_tensor(w, i, d, &err);
        free(d);
    }
    CHECK(gguf_writer_finish(w, &err) == 0);
    gguf_writer_free(w);
    return path;
}

static void expect_load_error(const char *what, const char *path, const char *says) {
    hfq_calib_stats s;
    hfq_error err = {{0}};
    int rc = hfq_calib_stats_load(&s, path, &err);
    CHECK_MSG(rc < 0, "%s: loaded", what);
    if (rc == 0) hfq_calib_stats_free(&s);
    CHECK_MSG(strstr(err.msg, says) && strstr(err.msg, path) && !strchr(err.msg, '\n'), "%s: %s", what, err.msg);
}

static void test_hostile_files(void) {
    const spec_tensor good[] = {{"w.in_sum2", GT_F32, 1, 4, 1, 2.0f}, {"w.counts", GT_F32, 1, 1, 1, 3.0f}};
    hfq_calib_stats s;
    hfq_error err;
    const char *p = write_spec("llama.stats", "imatrix", good, 2, false);
    CHECK_MSG(hfq_calib_stats_load(&s, p, &err) == 0, "%s", err.msg);
    CHECK(s.n == 1 && s.entries[0].n_in == 4 && s.entries[0].counts[0] == 3 && !s.entries[0].in_max &&
          !s.entries[0].in_sum_abs && !s.entries[0].tok_hist && !s.entries[0].sample);
    hfq_calib_stats_free(&s);

    expect_load_error("not imatrix", write_spec("a", "model", good, 2, false), "not a statistics file");
    expect_load_error("no general.type", write_spec("b", NULL, good, 2, false), "not a statistics file");
    const spec_tensor no_counts[] = {{"w.in_sum2", GT_F32, 1, 4, 1, 2.0f}};
    expect_load_error("no counts", write_spec("c", "imatrix", no_counts, 1, false), "w.counts");
    const spec_tensor orphan[] = {good[0], good[1], {"v.in_max", GT_F32, 1, 4, 1, 1.0f}};
    expect_load_error("orphan", write_spec("d", "imatrix", orphan, 3, false), "v.in_sum2");
    const spec_tensor f16[] = {{"w.in_sum2", GT_F16, 1, 4, 1, 0.0f}, good[1]};
    expect_load_error("F16 sums", write_spec("e", "imatrix", f16, 2, false), "F32");
    const spec_tensor neg[] = {{"w.in_sum2", GT_F32, 1, 4, 1, -1.0f}, good[1]};
    expect_load_error("negative sums", write_spec("f", "imatrix", neg, 2, false), "non-negative");
    const spec_tensor nan[] = {{"w.in_sum2", GT_F32, 1, 4, 1, NAN}, good[1]};
    expect_load_error("NaN sums", write_spec("g", "imatrix", nan, 2, false), "non-negative");
    const spec_tensor frac[] = {good[0], {"w.counts", GT_F32, 1, 1, 1, 2.5f}};
    expect_load_error("fractional count", write_spec("h", "imatrix", frac, 2, false), "whole number");
    const spec_tensor split[] = {{"w.in_sum2", GT_F32, 1, 5, 1, 1.0f}, {"w.counts", GT_F32, 1, 2, 1, 1.0f}};
    expect_load_error("sums not per matrix", write_spec("i", "imatrix", split, 2, false), "do not split");
    const spec_tensor short_max[] = {good[0], good[1], {"w.in_max", GT_F32, 1, 3, 1, 1.0f}};
    expect_load_error("short in_max", write_spec("j", "imatrix", short_max, 3, false), "expected");
    const spec_tensor bad_sample[] = {good[0], good[1], {"w.in_sample", GT_F32, 2, 5, 2, 1.0f}};
    expect_load_error("sample rows", write_spec("k", "imatrix", bad_sample, 3, false), "rows of 5");
    expect_load_error("histogram layout", write_spec("l", "imatrix", good, 2, true), "histogram");
    expect_load_error("no statistics", write_spec("m", "imatrix", NULL, 0, false), "no statistics");
    expect_load_error("missing file", tmp_path("absent.stats"), "absent.stats");
}

/* ---- chat templates ---- */

static void expect_render(const char *tmpl, const char *bos, const char *msg, const char *want) {
    hfq_error err;
    size_t len = 0;
    char *got = hfq_chat_render_user(tmpl, bos, msg, strlen(msg), &len, &err);
    CHECK_MSG(got && len == strlen(want) && strcmp(got, want) == 0, "got %s", got ? got : err.msg);
    free(got);
}

static void test_chat_templates(void) {
    /* Qwen3-like: ChatML without a default system message */
    const char *qwen3 = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
                        "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
                        "'<|im_start|>assistant\\n' }}{%- endif %}";
    expect_render(qwen3, "<s>", " Hi there ", "<|im_start|>user\n Hi there <|im_end|>\n<|im_start|>assistant\n");
    /* Qwen2.5-like: a default system message when there is none */
    const char *qwen25 = "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] "
                         "+ '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen. You are a helpful "
                         "assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}...{%- endfor %}";
    expect_render(qwen25, NULL, "Hi",
                  "<|im_start|>system\nYou are Qwen. You are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    const char *llama3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                         "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
                         "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
                         "{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}";
    expect_render(llama3, "<|begin_of_text|>", "  Hi\t",
                  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    const char *llama2 = "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
                         "message['content'].strip() + ' [/INST]' }}{% endif %}{% endfor %}";
    expect_render(llama2, "<s>", " Hi ", "<s>[INST] Hi [/INST]");
    CHECK(hfq_chat_detect("{{ messages }}") == HFQ_CHAT_UNSUPPORTED);
    hfq_error err;
    size_t len;
    CHECK(!hfq_chat_render_user("{% for m in messages %}<start_of_turn>{% endfor %}", NULL, "x", 1, &len, &err));
    CHECK_STR_CONTAINS(err.msg, "unsupported template");
}

/* ---- text to sequences ---- */

/* A tokenizer for tests: one id per byte (+3), BOS = 1 first when asked;
 * with special, "<B>" is the BOS token. */
static int byte_encode(void *ctx, const char *text, size_t len, bool add_special, bool special, int32_t **ids,
                       size_t *n_ids, hfq_error *err) {
    (void)ctx;
    (void)err;
    *ids = malloc((len + 1) * sizeof **ids);
    size_t n = 0;
    if (add_special) (*ids)[n++] = 1;
    for (size_t i = 0; i < len; i++) {
        if (special && i + 3 <= len && memcmp(text + i, "<B>", 3) == 0) {
            (*ids)[n++] = 1;
            i += 2;
            continue;
        }
        (*ids)[n++] = (unsigned char)text[i] + 3;
    }
    *n_ids = n;
    return 0;
}

static void test_sequences(void) {
    hfq_calib_tokenizer tok = {.encode = byte_encode, .bos_id = 1, .add_bos = true, .bos_text = "<B>"};
    hfq_calib_seqs s;
    hfq_error err;
    const char *text = "abcdefghijklmnopqrstuvwxyz";
    hfq_calib_text_opts o = {.n_ctx = 8};
    CHECK(hfq_calib_sequences(text, 26, "t", &o, &tok, &s, &err) == 0);
    /* 27 tokens (BOS + 26): 3 chunks of 8, each with BOS in place of its first token (h, p) */
    CHECK(s.n == 3 && s.n_tokens == 24 && s.max_len == 8 && strcmp(s.mode, "chunks") == 0);
    CHECK(s.tokens[0] == 1 && s.tokens[1] == 'a' + 3 && s.tokens[8] == 1 && s.tokens[9] == 'i' + 3 &&
          s.tokens[16] == 1 && s.tokens[17] == 'q' + 3);
    hfq_calib_seqs_free(&s);
    o.max_chunks = 2;
    CHECK(hfq_calib_sequences(text, 26, "t", &o, &tok, &s, &err) == 0 && s.n == 2);
    hfq_calib_seqs_free(&s);
    o = (hfq_calib_text_opts){.n_ctx = 64};
    CHECK(hfq_calib_sequences(text, 26, "t", &o, &tok, &s, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "fewer than one chunk of 64");
    CHECK(hfq_calib_sequences("", 0, "t", &o, &tok, &s, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "empty");

    const char *lines = "ab\n\n  \t\r\ncdefghijkl\r\nxy";
    o = (hfq_calib_text_opts){.n_ctx = 5, .lines = true};
    CHECK(hfq_calib_sequences(lines, strlen(lines), "t", &o, &tok, &s, &err) == 0);
    CHECK(s.n == 3 && s.start[1] == 3 && s.start[2] == 8 && s.n_tokens == 11 && strcmp(s.mode, "lines") == 0);
    CHECK(s.tokens[3] == 1 && s.tokens[4] == 'c' + 3 && s.tokens[7] == 'f' + 3 && s.tokens[8] == 1);
    hfq_calib_seqs_free(&s);
    o.max_chunks = 1;
    CHECK(hfq_calib_sequences(lines, strlen(lines), "t", &o, &tok, &s, &err) == 0 && s.n == 1);
    hfq_calib_seqs_free(&s);
    CHECK(hfq_calib_sequences("\n \n", 3, "t", &o, &tok, &s, &err) < 0);

    /* chat: the template writes BOS itself (no second one); without bos_token one is put first */
    tok.chat_template = "{{ bos_token }}{% for message in messages %}[INST] {{ message['content'] }} [/INST]{% endfor %}";
    o = (hfq_calib_text_opts){.n_ctx = 100, .lines = true, .chat = true};
    CHECK(hfq_calib_sequences("hi", 2, "t", &o, &tok, &s, &err) == 0);
    CHECK(s.n == 1 && s.n_tokens == 1 + (int64_t)strlen("[INST] hi [/INST]") && s.tokens[0] == 1 &&
          s.tokens[1] == '[' + 3 && strcmp(s.mode, "lines-chat") == 0);
    hfq_calib_seqs_free(&s);
    tok.chat_template = "{% for message in messages %}<|im_start|>{% endfor %}";
    CHECK(hfq_calib_sequences("hi", 2, "t", &o, &tok, &s, &err) == 0);
    CHECK(s.tokens[0] == 1 && s.tokens[1] == '<' + 3);
    hfq_calib_seqs_free(&s);
    tok.chat_template = NULL;
    CHECK(hfq_calib_sequences("hi", 2, "t", &o, &tok, &s, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "chat_template");
    tok.chat_template = "{{ nothing }}";
    CHECK(hfq_calib_sequences("hi", 2, "t", &o, &tok, &s, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "not a shape");
}

/* ---- folds ---- */

enum { E = 8, KV = 4, F = 12 };

/* One llama layer in a GGUF: norms, q/k/v/o, gate/up/down, F32. */
static const char *write_layer(const char *name, int n_head_equal) {
    const char *path = tmp_path(name);
    hfq_error err;
    gguf_writer *w = gguf_writer_new();
    struct { const char *name; int64_t ne0, ne1; } ts[] = {
        {"blk.0.attn_norm.weight", E, 1}, {"blk.0.attn_q.weight", E, E}, {"blk.0.attn_k.weight", E, KV},
        {"blk.0.attn_v.weight", E, n_head_equal ? E : KV}, {"blk.0.attn_output.weight", E, E},
        {"blk.0.ffn_norm.weight", E, 1}, {"blk.0.ffn_gate.weight", E, F}, {"blk.0.ffn_up.weight", E, F},
        {"blk.0.ffn_down.weight", F, E}};
    const int n = sizeof ts / sizeof ts[0];
    for (int i = 0; i < n; i++) {
        const int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        gguf_add_tensor(w, ts[i].name, GT_F32, ts[i].ne1 > 1 ? 2 : 1, ne, &err);
    }
    CHECK(gguf_writer_begin(w, path, &err) == 0);
    for (int i = 0; i < n; i++) {
        float d[F * F];
        for (int k = 0; k < ts[i].ne0 * ts[i].ne1; k++) d[k] = ts[i].ne1 == 1 ? 1.0f + 0.1f * frand() : frand();
        gguf_writer_write_tensor(w, i, d, &err);
    }
    CHECK(gguf_writer_finish(w, &err) == 0);
    gguf_writer_free(w);
    return path;
}

static void test_fold_groups(void) {
    hfq_error err;
    gguf_file *f = gguf_open(write_layer("gqa.gguf", 0), &err);
    hfq_fold_group *g;
    int64_t n;
    CHECK(f && hfq_fold_groups(f, 1, 8, 2, &g, &n, &err) == 0);
    /* GQA: no v -> o group; order down, qkv, gate/up */
    CHECK(n == 3 && g[0].kind == HFQ_FOLD_ROWS && strcmp(g[0].target, "blk.0.ffn_up.weight") == 0 &&
          strcmp(g[0].consumers[0], "blk.0.ffn_down.weight") == 0 && g[0].n_in == F && !g[0].target_bias[0]);
    CHECK(g[1].kind == HFQ_FOLD_NORM && g[1].n_consumers == 3 && strcmp(g[1].target, "blk.0.attn_norm.weight") == 0);
    CHECK(g[2].kind == HFQ_FOLD_NORM && g[2].n_consumers == 2 && strcmp(g[2].consumers[1], "blk.0.ffn_up.weight") == 0);
    free(g);
    gguf_close(f);
    f = gguf_open(write_layer("mha.gguf", 1), &err);
    CHECK(f && hfq_fold_groups(f, 1, 8, 8, &g, &n, &err) == 0);
    CHECK(n == 4 && strcmp(g[1].target, "blk.0.attn_v.weight") == 0 &&
          strcmp(g[1].consumers[0], "blk.0.attn_output.weight") == 0);

    /* folding: consumers' columns times s, the norm divided, the producer's rows divided */
    hfq_transforms ts = {0};
    float s[F];
    for (int j = 0; j < F; j++) s[j] = 0.5f + (float)j;
    CHECK(hfq_transforms_fold(&ts, &g[0], s, &err) == 0);   /* down <- up rows */
    CHECK(hfq_transforms_fold(&ts, &g[3], s, &err) == 0);   /* gate, up <- ffn_norm (E channels) */
    const hfq_transform *up = hfq_transforms_find(&ts, "blk.0.ffn_up.weight");
    const hfq_transform *down = hfq_transforms_find(&ts, "blk.0.ffn_down.weight");
    const hfq_transform *norm = hfq_transforms_find(&ts, "blk.0.ffn_norm.weight");
    CHECK(up && up->row && up->n_row == F && up->col && up->n_col == E && up->row[3] == 1.0f / s[3] &&
          up->col[2] == s[2]);
    CHECK(down && down->col && !down->row && down->col[5] == s[5]);
    CHECK(norm && norm->col && norm->col[1] == 1.0f / s[1]);
    int64_t rows, cols;
    float *w = hfq_fold_read(f, "blk.0.ffn_up.weight", &ts, &rows, &cols, &err);
    const gguf_tensor_info *raw = gguf_find_tensor(f, "blk.0.ffn_up.weight");
    CHECK(w && rows == F && cols == E && w[3 * E + 2] == ((const float *)raw->data)[3 * E + 2] * s[2] * (1.0f / s[3]));
    free(w);
    s[0] = 0.0f;
    CHECK(hfq_transforms_fold(&ts, &g[0], s, &err) < 0);
    hfq_transforms_free(&ts);
    free(g);
    gguf_close(f);
}

/* Statistics for the layer's inputs from random activations with one outlier channel. */
static void layer_stats(hfq_calib_stats *st) {
    enum { T = 40 };
    float xe[T * E], xf[T * F];
    for (int i = 0; i < T * E; i++) xe[i] = frand() * (i % E == 3 ? 20.0f : 1.0f);
    for (int i = 0; i < T * F; i++) xf[i] = frand();
    hfq_error err;
    hfq_calib_stats_init(st, 32);
    const char *e_in[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                          "blk.0.attn_output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"};
    for (int i = 0; i < 6; i++) hfq_calib_stats_add(st, e_in[i], 0, 1, xe, T, E, &err);
    hfq_calib_stats_add(st, "blk.0.ffn_down.weight", 0, 1, xf, T, F, &err);
    hfq_calib_stats_finish(st, &err);
}

/* A coarse round trip: every value to a multiple of 1/4 of the row's maximum. */
static int coarse_rt(void *ctx, const char *name, const float *w, float *out, int64_t rows, int64_t cols,
                     const float *importance, hfq_error *err) {
    (void)ctx, (void)name, (void)importance, (void)err;
    for (int64_t r = 0; r < rows; r++) {
        float m = 0;
        for (int64_t j = 0; j < cols; j++) m = fmaxf(m, fabsf(w[r * cols + j]));
        for (int64_t j = 0; j < cols; j++) out[r * cols + j] = m > 0 ? roundf(w[r * cols + j] / m * 4) * m / 4 : 0;
    }
    return 0;
}

static int exact_rt(void *ctx, const char *name, const float *w, float *out, int64_t rows, int64_t cols,
                    const float *importance, hfq_error *err) {
    (void)ctx, (void)name, (void)w, (void)out, (void)rows, (void)cols, (void)importance, (void)err;
    return 1;
}

static void test_smoothquant_and_search(void) {
    hfq_error err;
    gguf_file *f = gguf_open(write_layer("sq.gguf", 0), &err);
    hfq_fold_group *g;
    int64_t n;
    hfq_calib_stats st;
    layer_stats(&st);
    CHECK(f && hfq_fold_groups(f, 1, 8, 2, &g, &n, &err) == 0 && n == 3);
    float s[E];
    CHECK(hfq_smoothquant_scales(f, &g[1], &st, NULL, 0.5, s, &err) == 0);
    const hfq_calib_entry *e = hfq_calib_stats_find(&st, "blk.0.attn_q.weight");
    for (int j = 0; j < E; j++) {
        float wmax = 0;
        for (int c = 0; c < 3; c++) {
            const gguf_tensor_info *t = gguf_find_tensor(f, g[1].consumers[c]);
            for (int64_t r = 0; r < t->ne[1]; r++) wmax = fmaxf(wmax, fabsf(((const float *)t->data)[r * E + j]));
        }
        CHECK_NEAR(s[j], sqrt(e->in_max[j]) / sqrt(wmax), 1e-6 * s[j]);
    }
    CHECK(s[3] > 3.0f * s[2]);   /* the outlier channel is smoothed most */

    /* the search keeps s = 1 unless a candidate has less error on the sample */
    hfq_fold_eval_params p = {.weight_rt = coarse_rt};
    hfq_awq_result res;
    float sa[E];
    CHECK(hfq_awq_search(f, &g[1], &st, NULL, 10, &p, sa, &res, &err) == 0);
    CHECK(res.search.searched && res.search.err <= res.search.err_unscaled && res.search.err_unscaled > 0);
    hfq_fold_eval *ev = hfq_fold_eval_new(f, &g[1], &st, NULL, &p, "test", &err);
    double e_best, e_one;
    bool q;
    float ones[E];
    for (int j = 0; j < E; j++) ones[j] = 1.0f;
    CHECK(ev && hfq_fold_eval_error(ev, sa, &e_best, &q, &err) == 0 && q && e_best == res.search.err);
    CHECK(hfq_fold_eval_error(ev, ones, &e_one, &q, &err) == 0 && e_one == res.search.err_unscaled);
    hfq_fold_eval_free(ev);
    double alpha;
    hfq_fold_search_result sr;
    CHECK(hfq_smoothquant_search(f, &g[1], &st, NULL, 5, &p, sa, &alpha, &sr, &err) == 0);
    CHECK(sr.searched && sr.err <= sr.err_unscaled && (sr.best == 0) == (alpha < 0));
    /* nothing quantized: nothing searched, s = 1 */
    p.weight_rt = exact_rt;
    CHECK(hfq_awq_search(f, &g[1], &st, NULL, 10, &p, sa, &res, &err) == 0 && !res.search.searched && sa[3] == 1.0f);
    /* statistics without a sample (as from llama-imatrix) are refused, naming the option */
    hfq_calib_stats_free(&st);
    hfq_calib_stats_init(&st, 0);
    float x[E] = {1};
    hfq_calib_stats_add(&st, "blk.0.attn_q.weight", 0, 1, x, 1, E, &err);
    hfq_calib_stats_finish(&st, &err);
    CHECK(hfq_awq_search(f, &g[1], &st, NULL, 10, &p, sa, &res, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "--awq");
    CHECK(hfq_smoothquant_scales(f, &g[2], &st, NULL, 0.5, s, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "no statistics");
    hfq_calib_stats_free(&st);
    free(g);
    gguf_close(f);
}

int main(void) {
    if (!mkdtemp(tmpdir)) CHECK_SKIP("no temporary directory");
    test_accumulation();
    test_histogram();
    test_reservoir();
    test_names();
    test_file_roundtrip();
    test_hostile_files();
    test_chat_templates();
    test_sequences();
    test_fold_groups();
    test_smoothquant_and_search();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_exit();
}
