/* test_runner_ppl.c - perplexity sessions (src/eval/ppl.h) against the
 * double-precision reference forward of test_runner_synth.h, scored as
 * llama.cpp's perplexity tool scores: chunks from an empty cache, BOS first,
 * second half only, PPL and its standard error. */
#include "check.h"
#include "src/eval/ppl.h"
#include "test_runner_synth.h"

#define N_CTX 16
#define N_TEXT (3 * N_CTX + 5)   /* three whole chunks and a rest that is never used */

typedef struct expected {
    double nll[8];               /* per chunk */
    double nll_sum, nll2_sum;
    int64_t count;
} expected;

/* The reference: each chunk from an empty cache, first token BOS, logits at
 * positions N_CTX/2 .. N_CTX-2 scored against the next token. */
static expected reference(const synth_model *sm, const int32_t *text, int n_chunks, bool add_bos, int32_t bos) {
    expected e;
    memset(&e, 0, sizeof e);
    const int64_t V = sm->spec.n_vocab, first = N_CTX / 2;
    double *logits = malloc((size_t)V * sizeof *logits);
    for (int c = 0; c < n_chunks; c++) {
        ref_state r;
        ref_init(&r, sm, N_CTX);
        ref_trace tr = {.logits = logits};
        for (int64_t pos = 0; pos < N_CTX - 1; pos++) {
            int32_t tok = pos == 0 && add_bos ? bos : text[c * N_CTX + pos];
            ref_token(&r, tok, &tr);
            if (pos < first) continue;
            double max = logits[0], sum = 0;
            for (int64_t i = 1; i < V; i++) max = fmax(max, logits[i]);
            for (int64_t i = 0; i < V; i++) sum += exp(logits[i] - max);
            double v = -(logits[text[c * N_CTX + pos + 1]] - max - log(sum));
            e.nll[c] += v;
            e.nll_sum += v;
            e.nll2_sum += v * v;
            e.count++;
        }
        ref_free(&r);
    }
    free(logits);
    return e;
}

static hfq_ppl_result run(const hfq_model *m, const int32_t *text, int64_t n, hfq_ppl_params p, const expected *e,
                          int *chunks_seen) {
    hfq_error err;
    hfq_ppl *s = hfq_ppl_new(m, text, n, &p, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    hfq_ppl_result r = {0};
    if (!s) return r;
    hfq_ppl_chunk c;
    int rc;
    *chunks_seen = 0;
    while ((rc = hfq_ppl_next(s, &c, &err)) == 1) {
        CHECK(c.index == *chunks_seen);
        CHECK(c.n_scored == N_CTX - N_CTX / 2 - 1 && c.n_vocab == 50);
        CHECK(c.targets == text + c.index * N_CTX + N_CTX / 2 + 1);
        if (e) CHECK_NEAR(c.nll, e->nll[c.index], 1e-4 * fabs(e->nll[c.index]));
        (*chunks_seen)++;
    }
    CHECK_MSG(rc == 0, "%s", err.msg);
    r = hfq_ppl_result_get(s);
    hfq_ppl_free(s);
    return r;
}

static void test_against_reference(void) {
    synth_spec spec = synth_default_spec();
    synth_model sm;
    synth_build(&sm, &spec);
    hfq_error err;
    hfq_model *m = synth_bind(&sm, &err);
    int32_t text[N_TEXT];
    uint64_t rng = 42;
    for (int i = 0; i < N_TEXT; i++) text[i] = (int32_t)(synth_next(&rng) % 50);

    for (int bos = 0; bos < 2; bos++) {
        expected e = reference(&sm, text, 3, bos, 1);
        hfq_ppl_params p = {.n_ctx = N_CTX, .n_batch = 5, .n_threads = 2, .add_bos = bos, .bos_id = 1};
        int seen;
        hfq_ppl_result r = run(m, text, N_TEXT, p, &e, &seen);
        CHECK(seen == 3 && r.n_chunks == 3 && r.n_ctx == N_CTX && r.n_scored == e.count);
        double mean = e.nll_sum / (double)e.count, ppl = exp(mean);
        double err_ref = ppl * sqrt((e.nll2_sum / (double)e.count - mean * mean) / (double)(e.count - 1));
        printf("add_bos %d: ppl %.6f (reference %.6f) +/- %.6f (%.6f)\n", bos, r.ppl, ppl, r.ppl_err, err_ref);
        CHECK_NEAR(r.ppl, ppl, 1e-4 * ppl);
        CHECK_NEAR(r.ppl_err, err_ref, 1e-3 * err_ref);
        CHECK_NEAR(r.nll_mean, mean, 1e-4 * mean);

        /* the same bytes on one thread, with other batches, chunks side by side */
        p.n_threads = 1;
        p.n_batch = 0;
        hfq_ppl_result r1 = run(m, text, N_TEXT, p, NULL, &seen);
        CHECK(memcmp(&r, &r1, sizeof r) == 0);
        for (int par = 1; par <= 3; par++) {
            p.n_threads = par == 1 ? 2 : par;
            p.n_parallel = par;
            hfq_ppl_result rp = run(m, text, N_TEXT, p, &e, &seen);
            CHECK_MSG(memcmp(&r, &rp, sizeof r) == 0, "%d chunks side by side", par);
        }
        p.n_parallel = 0;

        /* --chunks limits the chunks */
        p.n_chunks = 2;
        hfq_ppl_result r2 = run(m, text, N_TEXT, p, &e, &seen);
        CHECK(seen == 2 && r2.n_chunks == 2 && r2.n_scored == 2 * (N_CTX - N_CTX / 2 - 1));
    }

    hfq_ppl_params p = {.n_ctx = N_CTX, .add_bos = true, .bos_id = 1};
    CHECK(hfq_ppl_new(m, text, 2 * N_CTX - 1, &p, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "the text has 31 tokens; a context of 16 needs at least 32");
    p.bos_id = 50;
    CHECK(hfq_ppl_new(m, text, N_TEXT, &p, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "BOS id 50 is outside the vocabulary");
    p.bos_id = 1;
    p.n_ctx = 3;
    CHECK(hfq_ppl_new(m, text, N_TEXT, &p, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "too short");
    text[N_CTX + 3] = 77;   /* a token outside the vocabulary in chunk 1 */
    p.n_ctx = N_CTX;
    hfq_ppl *s = hfq_ppl_new(m, text, N_TEXT, &p, &err);
    hfq_ppl_chunk c;
    CHECK(s && hfq_ppl_next(s, &c, &err) == 1);
    CHECK(hfq_ppl_next(s, &c, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "token id 77 at 3 is outside the vocabulary");
    hfq_ppl_free(s);
    hfq_model_free(m);
    synth_free(&sm);
}

int main(void) {
    test_against_reference();
    return check_exit();
}
