/* test_ct_int4_gptq.c - compressed-tensors' INT4 groups as a GPTQ codec
 * (src/export/ct_int4_gptq.h) against ct_int4_row (src/export/ct_int4.h):
 * - no feedback (a diagonal Hessian): the codes, scales and zero points of
 *   ct_int4_row byte for byte, F32 / F16 / BF16, symmetric and asymmetric,
 *   with and without importance, zero and constant groups, outliers;
 * - round returns the value compressed-tensors' decompression (float32)
 *   gives for the code it wrote, (q - z) * s, also for values moved off the
 *   header's group;
 * - with a correlated Hessian, GPTQ's output error sum ||X (w - q)||^2 is
 *   below ct_int4_row's, and the bytes are the same for 1 and 3 threads;
 * - no codec for other group sizes or dtypes. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quant/gptq.h"
#include "quant_rng.h"
#include "src/export/ct_int4.h"
#include "src/export/ct_int4_gptq.h"
#include "src/hf/ct_read.h"

#define G CT_INT4_GPTQ_GROUP
#define N (3 * G)
#define ROWS 6
#define TOKENS 512

static const st_dtype DTS[] = {ST_F32, ST_F16, ST_BF16};

static void fill(float *w, st_dtype dt) {
    for (int r = 0; r < ROWS; r++)
        for (int k = 0; k < N; k++) {
            float v = 0.05f * rnd_gauss();
            if (r == 1 && rnd_u32() % 23 == 0) v *= 20.0f;
            if (r == 2 && k >= G && k < 2 * G) v = 0.0f;          /* a zero group */
            if (r == 3 && k < G) v = 0.03f;                        /* a constant group */
            if (r == 4) v = fabsf(v) + 0.01f;                      /* all positive */
            w[r * N + k] = hf_ct_round_to(dt, v);
        }
}

/* The decoded weights of one row of blocks. */
static void decode(const ct_int4_block *b, float *y) {
    for (int64_t j = 0; j < N; j++) {
        const ct_int4_block *g = b + j / G;
        const int q = (int)((g->packed[(j % G) / 8] >> (4 * (j % 8))) & 0xF) - 8;
        y[j] = ((float)q - g->zero_point) * g->scale;
    }
}

/* U of a diagonal Hessian: no feedback. */
static void diagonal_u(double *u) {
    memset(u, 0, sizeof(double) * N * N);
    for (int j = 0; j < N; j++) u[j * N + j] = 0.5 + rnd_uniform();
    CHECK(hfq_gptq_prepare(u, N, 0.01, 1) == 0);
}

static void no_feedback(st_dtype dt, bool sym, const float *imp, double *u) {
    float w[ROWS * N];
    fill(w, dt);
    const hfq_gptq_codec *c = ct_int4_gptq_codec(G, sym, dt);
    CHECK(c && c->block == G && c->block_bytes == sizeof(ct_int4_block));
    ct_int4_block out[ROWS * (N / G)];
    diagonal_u(u);
    CHECK(hfq_gptq_encode(c, u, w, ROWS, N, imp, 0.0f, 0, out, 2) == 0);
    for (int r = 0; r < ROWS; r++) {
        uint32_t pk[N / 8], pk_ref[N / 8];
        float sc[N / G], sc_ref[N / G];
        int8_t zp[N / G], zp_ref[N / G];
        ct_int4_gptq_unpack(out + r * (N / G), N, pk, sc, zp);
        ct_int4_row(w + r * N, N, G, sym, dt, imp, pk_ref, sc_ref, zp_ref);
        CHECK_MSG(memcmp(pk, pk_ref, sizeof pk) == 0 && memcmp(sc, sc_ref, sizeof sc) == 0 &&
                      memcmp(zp, zp_ref, sizeof zp) == 0,
                  "dtype %d %s importance %s row %d: not ct_int4_row's bytes", (int)dt, sym ? "sym" : "asym",
                  imp ? "on" : "off", r);
    }
}

/* header from one group, round over moved values: the returned value is the
 * decoded code (in the dtype), and the code is compressed-tensors' rounding. */
static void round_returns(st_dtype dt, bool sym) {
    const hfq_gptq_codec *c = ct_int4_gptq_codec(G, sym, dt);
    float x[G];
    for (int i = 0; i < G; i++) x[i] = hf_ct_round_to(dt, 0.05f * rnd_gauss());
    ct_int4_block b;
    _Alignas(16) unsigned char state[HFQ_GPTQ_STATE_MAX];
    const hfq_gptq_block_in in = {.x = x, .row = x, .n_per_row = G};
    c->header(&in, &b, state);
    for (int i = 0; i < G; i++) {
        const float v = x[i] * (i % 3 == 0 ? 1.0f : i % 3 == 1 ? 1.37f : -4.0f) + 0.003f * rnd_gauss();
        const float got = c->round(state, &b, i, v);
        const int q = (int)((b.packed[i / 8] >> (4 * (i % 8))) & 0xF) - 8;
        CHECK(q == ct_int4_code(v, b.scale, b.zero_point, sym, dt));
        CHECK_MSG(got == (float)((q - b.zero_point) * (double)b.scale), "dtype %d value %d", (int)dt, i);
    }
}

static double output_error(const float *x, const float *w, const float *q) {
    double e = 0.0;
    for (int t = 0; t < TOKENS; t++) {
        double d = 0.0;
        for (int k = 0; k < N; k++) d += (double)x[t * N + k] * (w[k] - q[k]);
        e += d * d;
    }
    return e;
}

static void feedback(st_dtype dt, bool sym, float *x, double *h, double *u) {
    float w[ROWS * N];
    fill(w, dt);
    memcpy(u, h, sizeof(double) * N * N);
    CHECK(hfq_gptq_prepare(u, N, 0.01, 2) == 0);
    const hfq_gptq_codec *c = ct_int4_gptq_codec(G, sym, dt);
    static ct_int4_block out1[ROWS * (N / G)], out3[ROWS * (N / G)];
    CHECK(hfq_gptq_encode(c, u, w, ROWS, N, NULL, 0.0f, 0, out1, 1) == 0);
    CHECK(hfq_gptq_encode(c, u, w, ROWS, N, NULL, 0.0f, 0, out3, 3) == 0);
    CHECK(memcmp(out1, out3, sizeof out1) == 0);
    double e_gptq = 0.0, e_rtn = 0.0;
    for (int r = 0; r < ROWS; r++) {
        float qg[N], qr[N];
        decode(out1 + r * (N / G), qg);
        uint32_t pk[N / 8];
        float sc[N / G];
        int8_t zp[N / G];
        ct_int4_row(w + r * N, N, G, sym, dt, NULL, pk, sc, zp);
        for (int j = 0; j < N; j++) {
            const int q = (int)((pk[j / 8] >> (4 * (j % 8))) & 0xF) - 8;
            qr[j] = ((float)q - zp[j / G]) * sc[j / G];
        }
        e_gptq += output_error(x, w + r * N, qg);
        e_rtn += output_error(x, w + r * N, qr);
    }
    CHECK_MSG(e_gptq < 0.9 * e_rtn, "dtype %d %s: GPTQ output error %g, plain %g", (int)dt, sym ? "sym" : "asym",
              e_gptq, e_rtn);
}

int main(void) {
    rnd_seed(21);
    double *u = malloc(sizeof(double) * N * N), *h = malloc(sizeof(double) * N * N);
    float *x = malloc(sizeof(float) * TOKENS * N);
    float imp[N];
    if (!u || !h || !x) return 1;
    for (int k = 0; k < N; k++) imp[k] = rnd_uniform() * (k % 17 == 0 ? 30.0f : 1.0f);
    /* correlated inputs: a few shared factors plus noise, columns of several scales */
    for (int t = 0; t < TOKENS; t++) {
        const float f0 = rnd_gauss(), f1 = rnd_gauss();
        for (int k = 0; k < N; k++)
            x[t * N + k] = (1.0f + (float)(k % 5)) * (0.3f * rnd_gauss() + f0 * (k % 2 ? 1.0f : -0.5f) + 0.5f * f1);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int t = 0; t < TOKENS; t++) s += (double)x[t * N + i] * x[t * N + j];
            h[i * N + j] = s;
        }
    for (size_t d = 0; d < sizeof DTS / sizeof DTS[0]; d++)
        for (int sym = 0; sym < 2; sym++) {
            no_feedback(DTS[d], sym, NULL, u);
            no_feedback(DTS[d], sym, imp, u);
            round_returns(DTS[d], sym);
            feedback(DTS[d], sym, x, h, u);
        }
    CHECK(ct_int4_gptq_codec(64, true, ST_BF16) == NULL);
    CHECK(ct_int4_gptq_codec(G, false, ST_I32) == NULL);
    free(u), free(h), free(x);
    return check_exit();
}
