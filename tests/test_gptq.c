/* test_gptq.c - GPTQ (quant/gptq.h) and its Hessians (calib/hessian.h) on
 * small random matrices, with a toy codec of this file (symmetric 4-bit
 * codes, one float scale per 32 values) so the algorithm is checked apart
 * from the formats:
 *   - U is the upper Cholesky factor of the damped H's inverse (U^T U H = I);
 *   - a diagonal Hessian (no feedback) gives exactly the plain quantizer's
 *     bytes: the toy's, and every format's with a codec (quant/gptq_codec.h),
 *     with and without importance;
 *   - on correlated inputs the layer's output error ||X W^T - X Q^T||^2 is
 *     below plain rounding's;
 *   - the bytes are the same with 1 and 2 threads, and the Hessian sums too;
 *   - act-order: the order is by descending H_jj and the permuted H is
 *     H[perm][perm]; without feedback the plain bytes again (every format:
 *     static headers are the quantizer's), with it bytes that differ from
 *     column order's, the same for 1 and 2 threads, output error below plain.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "calib/hessian.h"
#include "check.h"
#include "quant/gptq.h"
#include "quant_rng.h"

#define TOY_BLOCK 32
typedef struct toy_block {
    float d;
    int8_t q[TOY_BLOCK];
} toy_block;

static void toy_header(const hfq_gptq_block_in *in, void *blk, void *state) {
    float amax = 0.0f;
    for (int i = 0; i < TOY_BLOCK; i++) amax = fmaxf(amax, fabsf(in->x[i]));
    ((toy_block *)blk)->d = amax / 7.0f;
    memcpy(state, blk, sizeof(float));
}

static float toy_round(const void *state, void *blk, int64_t i, float x) {
    float d;
    memcpy(&d, state, sizeof d);
    float q = d > 0.0f ? roundf(x / d) : 0.0f;
    q = q < -8.0f ? -8.0f : q > 7.0f ? 7.0f : q;
    ((toy_block *)blk)->q[i] = (int8_t)q;
    return q * d;
}

static const hfq_gptq_codec toy = {.type = HFQ_QT_F32, .block = TOY_BLOCK, .block_bytes = sizeof(toy_block),
                                   .state_bytes = sizeof(float), .header = toy_header, .round = toy_round};

/* The plain quantizer: every block rounded to nearest under its own scale. */
static void toy_plain(const float *w, int64_t nrows, int64_t n, toy_block *out) {
    unsigned char state[16];
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t b = 0; b < n / TOY_BLOCK; b++) {
            const float *x = w + r * n + b * TOY_BLOCK;
            toy_block *blk = out + r * (n / TOY_BLOCK) + b;
            toy_header(&(hfq_gptq_block_in){.x = x}, blk, state);
            for (int i = 0; i < TOY_BLOCK; i++) toy_round(state, blk, i, x[i]);
        }
}

static void toy_decode(const toy_block *b, int64_t nrows, int64_t n, float *w) {
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t j = 0; j < n; j++) {
            const toy_block *blk = b + r * (n / TOY_BLOCK) + j / TOY_BLOCK;
            w[r * n + j] = blk->q[j % TOY_BLOCK] * blk->d;
        }
}

/* Correlated inputs: x = z A with a random mixing A (and a few channels much larger). */
static float *correlated_x(int64_t t, int64_t n) {
    float *a = malloc((size_t)(n * n) * sizeof *a), *x = calloc((size_t)(t * n), sizeof *x);
    for (int64_t i = 0; i < n * n; i++) a[i] = rnd_gauss() * (i % (n + 1) == 0 ? 2.0f : 0.3f);
    for (int64_t k = 0; k < t; k++) {
        float z[256];
        for (int64_t i = 0; i < n; i++) z[i] = rnd_gauss();
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int64_t i = 0; i < n; i++) s += z[i] * a[i * n + j];
            x[k * n + j] = s * (j % 16 == 3 ? 4.0f : 1.0f);
        }
    }
    free(a);
    return x;
}

static double out_error(const float *x, int64_t t, const float *w, const float *q, int64_t nrows, int64_t n) {
    double e = 0.0;
    for (int64_t k = 0; k < t; k++)
        for (int64_t r = 0; r < nrows; r++) {
            double d = 0.0;
            for (int64_t j = 0; j < n; j++) d += (double)x[k * n + j] * ((double)w[r * n + j] - q[r * n + j]);
            e += d * d;
        }
    return e;
}

/* Every format with a GPTQ codec: with a diagonal Hessian, the bytes of its
 * own quantizer (qtype.h), with and without importance. */
static void plain_formats(void) {
    enum { N = 512, ROWS = 6 };
    float *w = malloc(ROWS * N * sizeof *w), imp[N];
    double *u = calloc(N * N, sizeof *u);
    for (int64_t i = 0; i < ROWS * N; i++) w[i] = rnd_gauss() * (i % 37 == 0 ? 5.0f : 1.0f);
    for (int64_t j = 0; j < N; j++) {
        imp[j] = 0.1f + rnd_uniform() * (j % 7 == 0 ? 10.0f : 1.0f);
        u[j * N + j] = 1.0 + j % 5; /* a diagonal H: no feedback */
    }
    double *ua = malloc(N * N * sizeof *ua);
    int64_t *perm = malloc(N * sizeof *perm);
    memcpy(ua, u, N * N * sizeof *ua);
    CHECK(hfq_gptq_act_order(ua, N, perm) == 0);
    CHECK(perm[0] == 4 && perm[N - 1] == 510); /* H_jj = 1 + j % 5: the 5s first, the 1s last */
    CHECK(hfq_gptq_prepare(ua, N, 0.01, 1) == 0);
    CHECK(hfq_gptq_prepare(u, N, 0.01, 1) == 0);
    int n_codecs = 0;
    for (int t = 0; t < HFQ_QT_COUNT; t++) {
        const hfq_gptq_codec *c = hfq_gptq_codec_get((hfq_qtype)t);
        const hfq_qtype_traits *tr = hfq_qtype_get((hfq_qtype)t);
        if (!c || !tr || N % c->block) continue;
        n_codecs++;
        const size_t bytes = (size_t)ROWS * (N / c->block) * c->block_bytes;
        unsigned char *a = calloc(bytes, 1), *b = calloc(bytes, 1);
        for (int with_imp = 0; with_imp < 2; with_imp++) {
            const float *im = with_imp ? imp : NULL;
            CHECK(tr->quantize(w, a, ROWS, N, im) == bytes);
            CHECK(hfq_gptq_encode(c, u, w, ROWS, N, im, 0.0f, 0, b, 2) == 0);
            CHECK_MSG(memcmp(a, b, bytes) == 0, "%s%s: GPTQ without feedback is not the plain quantizer", tr->name,
                      with_imp ? " with importance" : "");
            memset(b, 0, bytes);
            CHECK(hfq_gptq_encode_perm(c, ua, w, ROWS, N, im, 0.0f, 0, perm, b, 2) == 0);
            CHECK_MSG(memcmp(a, b, bytes) == 0, "%s%s: act-order without feedback is not the plain quantizer",
                      tr->name, with_imp ? " with importance" : "");
        }
        free(a);
        free(b);
    }
    printf("%d formats with a GPTQ codec give their plain bytes without feedback\n", n_codecs);
    CHECK(n_codecs > 0);
    free(w);
    free(u);
    free(ua);
    free(perm);
}

/* Act-order with the toy codec on Hessian h (upper triangle) of inputs x:
 * the order and the permuted H, then the bytes against column order's
 * (colord) and plain rounding's output error ep. */
static void act_order(const double *h, const float *x, int64_t t, const float *w, int64_t nrows, int64_t n,
                      const toy_block *colord, double ep) {
    double *hp = malloc((size_t)(n * n) * sizeof *hp);
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    memcpy(hp, h, (size_t)(n * n) * sizeof *hp);
    CHECK(hfq_gptq_act_order(hp, n, perm) == 0);
    int ok = 1;
    for (int64_t p = 0; p < n; p++) {
        ok &= p == 0 || h[perm[p - 1] * n + perm[p - 1]] >= h[perm[p] * n + perm[p]];
        for (int64_t q = p; q < n; q++) {
            const int64_t a = perm[p] < perm[q] ? perm[p] : perm[q], b = perm[p] < perm[q] ? perm[q] : perm[p];
            ok &= hp[p * n + q] == h[a * n + b];
        }
    }
    CHECK_MSG(ok, "act-order: the order or the permuted Hessian is wrong");
    CHECK(hfq_gptq_prepare(hp, n, 0.01, 2) == 0);
    const size_t bytes = (size_t)nrows * (size_t)(n / TOY_BLOCK) * sizeof(toy_block);
    toy_block *g1 = calloc(bytes, 1), *g2 = calloc(bytes, 1);
    CHECK(hfq_gptq_encode_perm(&toy, hp, w, nrows, n, NULL, 0.0f, 0, perm, g1, 1) == 0);
    CHECK(hfq_gptq_encode_perm(&toy, hp, w, nrows, n, NULL, 0.0f, 0, perm, g2, 2) == 0);
    CHECK_MSG(memcmp(g1, g2, bytes) == 0, "act-order: bytes differ between 1 and 2 threads");
    CHECK_MSG(memcmp(g1, colord, bytes) != 0, "act-order gives column order's bytes");
    float *q = malloc((size_t)(nrows * n) * sizeof *q);
    toy_decode(g1, nrows, n, q);
    const double ea = out_error(x, t, w, q, nrows, n);
    printf("layer output error: act-order %.6g (%.1f %% of plain)\n", ea, 100.0 * ea / ep);
    CHECK(ea < 0.9 * ep);
    free(hp);
    free(perm);
    free(g1);
    free(g2);
    free(q);
}

int main(void) {
    enum { N = 128, ROWS = 80, T = 512 };
    rnd_seed(21);
    float *x = correlated_x(T, N), *w = malloc(ROWS * N * sizeof *w);
    for (int64_t i = 0; i < ROWS * N; i++) w[i] = rnd_gauss();

    /* Hessian: tiles give the same sums with any thread count, and X^T X */
    hfq_hessian_input in = {.name = "blk.0.attn_q.weight", .n = N, .layer = 0};
    hfq_hessian_set s1, s2;
    CHECK(hfq_hessian_set_init(&s1, &in, 1, 1, &(hfq_error){{0}}) == 0);
    CHECK(hfq_hessian_set_init(&s2, &in, 1, 2, &(hfq_error){{0}}) == 0);
    for (int64_t k = 0; k < T; k += 64) {
        hfq_hessian_observe(&s1, "blk.0.attn_q.weight", x + k * N, 64, N);
        hfq_hessian_observe(&s2, "blk.0.attn_q.weight", x + k * N, 64, N);
        hfq_hessian_observe(&s2, "blk.0.ffn_down.weight", x + k * N, 64, N); /* not in the set: ignored */
    }
    double *h = s1.e[0].h;
    CHECK(memcmp(h, s2.e[0].h, N * N * sizeof *h) == 0);
    CHECK(s1.e[0].n_tokens == T);
    double maxrel = 0.0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = i; j < N; j++) {
            double ref = 0.0;
            for (int64_t k = 0; k < T; k++) ref += (double)x[k * N + i] * x[k * N + j];
            maxrel = fmax(maxrel, fabs(h[i * N + j] - ref) / (fabs(ref) + 1.0));
        }
    CHECK_MSG(maxrel < 1e-12, "H vs X^T X: %g", maxrel);

    /* U^T U (H + damping) = I */
    double *hd = malloc(N * N * sizeof *hd), *u = malloc(N * N * sizeof *u);
    memcpy(u, h, N * N * sizeof *u);
    CHECK(hfq_gptq_prepare(u, N, 0.01, 2) == 0);
    double mean = 0.0;
    for (int64_t i = 0; i < N; i++) mean += h[i * N + i] / N;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++) hd[i * N + j] = (i <= j ? h[i * N + j] : h[j * N + i]) + (i == j ? 0.01 * mean : 0.0);
    double maxerr = 0.0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++) {
            double v = 0.0; /* (U^T U hd)_ij = sum_k (U^T U)_ik hd_kj */
            for (int64_t k = 0; k < N; k++) {
                double utu = 0.0;
                for (int64_t m = 0; m <= (i < k ? i : k); m++) utu += u[m * N + i] * u[m * N + k];
                v += utu * hd[k * N + j];
            }
            maxerr = fmax(maxerr, fabs(v - (i == j)));
            if (i > j) CHECK(u[i * N + j] == 0.0);
        }
    CHECK_MSG(maxerr < 1e-8, "U^T U H - I: %g", maxerr);

    /* a diagonal Hessian: the plain bytes */
    const size_t bytes = ROWS * (N / TOY_BLOCK) * sizeof(toy_block);
    toy_block *plain = malloc(bytes), *g1 = malloc(bytes), *g2 = malloc(bytes);
    double *diag = calloc(N * N, sizeof *diag);
    for (int64_t i = 0; i < N; i++) diag[i * N + i] = h[i * N + i] * (i == 5 ? 0.0 : 1.0); /* one dead column */
    CHECK(hfq_gptq_prepare(diag, N, 0.01, 1) == 0);
    memset(plain, 0, bytes);
    memset(g1, 0, bytes);
    toy_plain(w, ROWS, N, plain);
    CHECK(hfq_gptq_encode(&toy, diag, w, ROWS, N, NULL, 0.0f, 64, g1, 2) == 0);
    CHECK(memcmp(plain, g1, bytes) == 0);

    /* feedback: lower output error, the same bytes for 1 and 2 threads and any lazy batch */
    memset(g2, 0, bytes);
    CHECK(hfq_gptq_encode(&toy, u, w, ROWS, N, NULL, 0.0f, 0, g1, 1) == 0);
    CHECK(hfq_gptq_encode(&toy, u, w, ROWS, N, NULL, 0.0f, 0, g2, 2) == 0);
    CHECK(memcmp(g1, g2, bytes) == 0);
    CHECK(hfq_gptq_encode(&toy, u, w, ROWS, N, NULL, 0.0f, 32, g2, 2) == 0);
    int diff = 0;
    for (int64_t i = 0; i < ROWS * (N / TOY_BLOCK); i++) diff += memcmp(&g1[i], &g2[i], sizeof *g1) != 0;
    CHECK_MSG(diff * 100 < ROWS * (N / TOY_BLOCK), "batch 32 vs 128: %d blocks differ", diff); /* ties only */
    float *qp = malloc(ROWS * N * sizeof *qp), *qg = malloc(ROWS * N * sizeof *qg);
    toy_decode(plain, ROWS, N, qp);
    toy_decode(g1, ROWS, N, qg);
    const double ep = out_error(x, T, w, qp, ROWS, N), eg = out_error(x, T, w, qg, ROWS, N);
    printf("layer output error: plain %.6g, GPTQ %.6g (%.1f %%)\n", ep, eg, 100.0 * eg / ep);
    CHECK(eg < 0.9 * ep);
    act_order(h, x, T, w, ROWS, N, g1, ep);

    /* windows: whole layers within the budget, at least one */
    hfq_hessian_input ins[5] = {{"blk.0.attn_q.weight", 64, 0}, {"blk.0.ffn_down.weight", 128, 0},
                                {"blk.1.attn_q.weight", 64, 1}, {"blk.1.ffn_down.weight", 128, 1},
                                {"output.weight", 64, 2}};
    const int64_t l0 = (64 * 64 + 128 * 128) * 8;
    CHECK(hfq_hessian_window(ins, 5, 0, 1) == 2);
    CHECK(hfq_hessian_window(ins, 5, 0, l0) == 2);
    CHECK(hfq_hessian_window(ins, 5, 0, 2 * l0) == 4);
    CHECK(hfq_hessian_window(ins, 5, 2, 1 << 30) == 5);
    CHECK(hfq_hessian_window(ins, 5, 4, 1) == 5);

    plain_formats();
    hfq_hessian_set_free(&s1);
    hfq_hessian_set_free(&s2);
    free(x); free(w); free(hd); free(u); free(plain); free(g1); free(g2); free(diag); free(qp); free(qg);
    return check_exit();
}
