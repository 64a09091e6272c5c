/* test_gptq_codec.c - the GPTQ block codecs (quant/gptq_codec.h) against
 * the formats' own quantizers and dequantizers:
 * - header + round over each block, the values unchanged, give the bytes of
 *   the format's quantize (qtype.h; NVFP4 also with a global scale), with
 *   and without importance, for rows of several blocks, scales and shapes,
 *   with outliers, zero and constant blocks;
 * - every value round returns is the dequantized value of the code it wrote,
 *   also for values moved off the header's block (as error feedback moves
 *   them) and far outside it;
 * - round picks the code nearest x among all codes of its position (brute
 *   force through the dequantizer): exactly on the K-quants' and FP4's
 *   stored grids; the legacy formats and IQ4 round on their quantizers'
 *   unrounded grids (quant/gptq_entry.h), checked exactly, and on the decoded
 *   grid up to the distance between the two. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quant/fp4.h"
#include "quant/gptq_entry.h"
#include "quant/qtype.h"
#include "quant_rng.h"

static const hfq_qtype TYPES[] = {HFQ_QT_Q8_0, HFQ_QT_Q4_0, HFQ_QT_Q4_1,   HFQ_QT_Q5_0,  HFQ_QT_Q5_1,
                                  HFQ_QT_IQ4_NL, HFQ_QT_Q2_K, HFQ_QT_Q3_K, HFQ_QT_Q4_K,   HFQ_QT_Q5_K,  HFQ_QT_Q6_K,
                                  HFQ_QT_IQ4_XS, HFQ_QT_MXFP4, HFQ_QT_NVFP4};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static const hfq_qtype NO_CODEC[] = {HFQ_QT_F32,    HFQ_QT_F16,    HFQ_QT_BF16,    HFQ_QT_Q8_1,   HFQ_QT_Q8_K,
                                     HFQ_QT_IQ3_XXS, HFQ_QT_IQ3_S,  HFQ_QT_IQ2_XXS, HFQ_QT_IQ2_XS, HFQ_QT_IQ2_S,
                                     HFQ_QT_IQ1_S,  HFQ_QT_IQ1_M,  HFQ_QT_TQ1_0,   HFQ_QT_TQ2_0,  HFQ_QT_INT8,
                                     HFQ_QT_FP8_E4M3, HFQ_QT_FP8_E5M2, HFQ_QT_Q1_0,  HFQ_QT_Q2_0};

#define MAX_BLOCK 256
#define MAX_BYTES 256

/* One row: gaussian values at scale, kind 1 with outliers, kind 2 shifted
 * positive, kind 3 on a lattice of quarters of a power of two s with 6 s
 * first in every 16 (FP4's scale then exact: its ties between codes, where
 * ggml's nearest and round-to-nearest-even differ, occur); the second block
 * all zero and the third constant when there are enough blocks. */
static void fill_row(float *x, int64_t n, int64_t block, float scale, int kind) {
    const float s = ldexpf(1.0f, ilogbf(scale));
    for (int64_t i = 0; i < n; i++) {
        float v = rnd_gauss() * scale;
        if (kind == 1 && rnd_u32() % 29 == 0) v *= 25.0f;
        if (kind == 2) v = fabsf(v) + 0.5f * scale;
        if (kind == 3) v = i % 16 == 0 ? 6.0f * s : (float)((int)(rnd_u32() % 49) - 24) * 0.25f * s;
        x[i] = v;
    }
    if (n >= 3 * block) {
        memset(x + block, 0, (size_t)block * sizeof *x);
        for (int64_t i = 0; i < block; i++) x[2 * block + i] = 0.75f * scale;
    }
}

/* The tensor values of one block: the dequantizer's, times NVFP4's global scale. */
static void decode(const hfq_qtype_traits *tr, const void *blk, float g, float *y) {
    tr->dequantize(blk, y, tr->block_size);
    if (g > 0.0f)
        for (int64_t i = 0; i < tr->block_size; i++) y[i] *= g;
}

/* Formats whose final pass rounds against the stored scales: their
 * rounding grid is the decoded one. Not NVFP4 under a global scale g: it
 * codes at ue4m3 * g and decodes (code * ue4m3) * g, apart by the
 * products' rounding (far apart where g is subnormal). */
static bool exact_grid(hfq_qtype t, float g) {
    return !(t == HFQ_QT_NVFP4 && g > 0.0f) && t != HFQ_QT_Q8_0 && t != HFQ_QT_Q4_0 && t != HFQ_QT_Q4_1 && t != HFQ_QT_Q5_0 && t != HFQ_QT_Q5_1 &&
           t != HFQ_QT_IQ4_NL && t != HFQ_QT_IQ4_XS;
}

/* Rounds x (block values) under the header in blk/state, checks each
 * returned value against the final block's decode, and at each position,
 * by brute force over all codes: round's code is the nearest x on the
 * codec's rounding grid, and on the decoded grid up to twice the largest
 * distance between the two grids (none for exact_grid formats). */
static void check_round(const hfq_gptq_entry *e, const hfq_qtype_traits *tr, const void *state, uint8_t *blk,
                        const float *x, float g, const char *what) {
    const hfq_gptq_codec *c = &e->codec;
    float v[MAX_BLOCK], y[MAX_BLOCK];
    for (int64_t i = 0; i < c->block; i++) v[i] = c->round(state, blk, i, x[i]);
    decode(tr, blk, g, y);
    int bad = 0;
    for (int64_t i = 0; i < c->block; i++) bad += !(v[i] == y[i]);
    CHECK_MSG(bad == 0, "%s %s: %d returned values differ from the decoded codes", tr->name, what, bad);
    int far = 0, off_grid = 0;
    for (int64_t i = 0; i < c->block; i++) {
        uint8_t tmp[MAX_BYTES];
        memcpy(tmp, blk, c->block_bytes);
        const unsigned chosen = e->get(blk, i);
        double best = INFINITY, best_grid = INFINITY, delta = 0.0, amax = fabs(x[i]);
        for (unsigned code = 0; code < e->n_codes; code++) {
            e->set(tmp, i, code);
            decode(tr, tmp, g, y);
            const float r = e->grid(state, i, code);
            best = fmin(best, fabs((double)x[i] - y[i]));
            best_grid = fmin(best_grid, fabs((double)x[i] - r));
            delta = fmax(delta, fabs((double)r - y[i]));
            amax = fmax(amax, fmax(fabs(r), fabs(y[i])));
        }
        const double ulps = 1e-6 * amax;
        const double err = fabs((double)x[i] - v[i]), err_grid = fabs((double)x[i] - e->grid(state, i, chosen));
        if (exact_grid(tr->type, g) && delta > ulps) off_grid++;
        if (err_grid > best_grid + ulps || err > best + 2 * delta + ulps) {
            if (far == 0)
                fprintf(stderr, "%s %s: x[%lld] = %.9g rounds to %.9g (grid %.9g), the nearest code is %.9g off "
                                "(grid %.9g), grids %.3g apart\n",
                        tr->name, what, (long long)i, x[i], v[i], err_grid, best, best_grid, delta);
            far++;
        }
    }
    CHECK_MSG(far == 0, "%s %s: %d values not rounded to the nearest code", tr->name, what, far);
    CHECK_MSG(off_grid == 0, "%s %s: %d positions round on a grid off the decoded one", tr->name, what, off_grid);
}

static void run_row(hfq_qtype t, int64_t n, const float *x, const float *imp, float g, const char *what) {
    const hfq_gptq_entry *e = hfq_gptq_entry_get(t);
    const hfq_qtype_traits *tr = hfq_qtype_get(t);
    const hfq_gptq_codec *c = &e->codec;
    CHECK(c->block == tr->block_size && (int64_t)c->block_bytes == tr->type_size);
    CHECK(c->state_bytes <= HFQ_GPTQ_STATE_MAX && c->block_bytes <= MAX_BYTES);
    const int64_t nb = n / c->block;
    uint8_t *ref = malloc((size_t)nb * c->block_bytes);
    if (!ref) abort();
    size_t bytes = t == HFQ_QT_NVFP4 ? hfq_quantize_nvfp4(x, ref, 1, n, imp, g) : tr->quantize(x, ref, 1, n, imp);
    CHECK(bytes == (size_t)nb * c->block_bytes);
    _Alignas(16) uint8_t state[HFQ_GPTQ_STATE_MAX];
    uint8_t blk[MAX_BYTES];
    int mismatched = 0;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t off = b * c->block;
        hfq_gptq_block_in in = {.x = x + off, .importance = imp ? imp + off : NULL, .row = x, .n_per_row = n,
                                .offset = off, .global_scale = g};
        memset(blk, 0xA5, sizeof blk);
        c->header(&in, blk, state);
        for (int64_t i = 0; i < c->block; i++) c->round(state, blk, i, x[off + i]);
        if (memcmp(blk, ref + b * c->block_bytes, c->block_bytes) != 0) mismatched++;
        check_round(e, tr, state, blk, x + off, g, what);

        /* values moved as feedback moves them (up to a few grid steps) and
         * some far outside the block */
        float moved[MAX_BLOCK], amax = 0.0f;
        for (int64_t i = 0; i < c->block; i++) amax = fmaxf(amax, fabsf(x[off + i]));
        for (int64_t i = 0; i < c->block; i++) {
            moved[i] = x[off + i] + (rnd_uniform() - 0.5f) * 0.3f * amax;
            if (rnd_u32() % 17 == 0) moved[i] = (rnd_uniform() - 0.5f) * 8.0f * amax;
        }
        c->header(&in, blk, state);
        check_round(e, tr, state, blk, moved, g, what);
    }
    CHECK_MSG(mismatched == 0, "%s %s n=%lld: %d of %lld blocks differ from the quantizer's bytes", tr->name, what,
              (long long)n, mismatched, (long long)nb);
    free(ref);
}

int main(void) {
    rnd_seed(21);
    for (size_t k = 0; k < sizeof NO_CODEC / sizeof NO_CODEC[0]; k++) CHECK(hfq_gptq_codec_get(NO_CODEC[k]) == NULL);
    CHECK(hfq_gptq_codec_get((hfq_qtype)-1) == NULL && hfq_gptq_codec_get(HFQ_QT_COUNT) == NULL);
    const float scales[] = {3e-40f, 1e-3f, 1.0f, 40.0f}; /* the first underflows the scales */
    for (size_t k = 0; k < N_TYPES; k++) {
        const hfq_qtype t = TYPES[k];
        const hfq_gptq_codec *c = hfq_gptq_codec_get(t);
        CHECK_MSG(c != NULL && c->type == t, "no codec for %s", hfq_qtype_get(t)->name);
        if (!c) continue;
        for (int64_t nblk = 1; nblk <= 9; nblk += 4) {
            const int64_t n = nblk * c->block;
            float *x = malloc((size_t)n * sizeof *x), *imp = malloc((size_t)n * sizeof *imp);
            if (!x || !imp) abort();
            for (int kind = 0; kind < 4; kind++) {
                for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
                    fill_row(x, n, c->block, scales[s], kind);
                    for (int64_t i = 0; i < n; i++) imp[i] = 0.01f + 2.0f * rnd_uniform();
                    run_row(t, n, x, NULL, 0.0f, "reference");
                    run_row(t, n, x, imp, 0.0f, "importance");
                    if (t == HFQ_QT_NVFP4) {
                        const float g = hfq_nvfp4_global_scale(x, n);
                        run_row(t, n, x, NULL, g, "global scale");
                        run_row(t, n, x, imp, g, "global scale, importance");
                    }
                }
            }
            free(x);
            free(imp);
        }
    }
    return check_exit();
}
