/* hessian.h - the Hessians GPTQ needs (quant/gptq.h): per weight input,
 * H = sum over calibration tokens of x x^T, from the runner's observer.
 *
 * Inputs are planned from the model file: every 2-D weight of a layer
 * ("blk.N.*.weight") that leads its input (calib/names.h: q/k/v share
 * attn_q's, gate/up ffn_gate's) and the output layer "output.weight", in
 * layer order (the output last). The tied token embedding, experts and
 * 1-D tensors get none. A window is a run of whole layers whose Hessians
 * (n^2 doubles each) fit a memory budget, at least one layer: a calibration
 * pass collects one window, so memory is bounded by the budget (or one
 * layer), not by the model.
 *
 * Accumulation is in double over the upper triangle, in tiles of H, the
 * tokens in chunks of HFQ_HESSIAN_CHUNK (copied to double): each element is
 * the plain double sum of its products x_ti x_tj (exact: floats) in token
 * order, with FMA where the CPU has it (quant/dgemm.h: the same bits), and
 * whatever the thread count (threads take tiles, never tokens), so the sums
 * are deterministic and the same on every machine.
 *
 * For GPTQ against quantized inputs (W4A4: src/quantize/calib_gptq.h) a set
 * can also keep, per input, the cross term D = sum of (x - xq) x^T over the
 * tokens (full [n][n]; xq the inputs as the runner quantizes them) beside
 * H, with the same sums, order and determinism.
 */
#ifndef HFQ_CALIB_HESSIAN_H
#define HFQ_CALIB_HESSIAN_H

#include <stdbool.h>
#include <stdint.h>

#include "formats/error.h"
#include "formats/gguf.h"
#include "quant/isa.h"

#define HFQ_HESSIAN_NAME 96
/* Tokens per step of the accumulation. */
#define HFQ_HESSIAN_CHUNK 256

typedef struct hfq_hessian_input {
    char name[HFQ_HESSIAN_NAME]; /* the leading weight */
    int64_t n;                   /* channels (its row length) */
    int64_t layer;               /* its block; the output layer: after the last */
} hfq_hessian_input;

/* The inputs of f in layer order; *out malloc'd (NULL when *n is 0). */
int hfq_hessian_plan(const gguf_file *f, hfq_hessian_input **out, int64_t *n, hfq_error *err);

/* Bytes of one input's Hessian (n^2 doubles). */
int64_t hfq_hessian_bytes(const hfq_hessian_input *in);

/* End of the window starting at inputs[first] (the first input of a
 * layer): the whole layers from there whose Hessians fit budget bytes, at
 * least one. */
int64_t hfq_hessian_window(const hfq_hessian_input *in, int64_t n, int64_t first, int64_t budget);

typedef struct hfq_hessian {
    hfq_hessian_input in;
    double *h;                   /* [n][n], upper triangle */
    double *xd;                  /* a chunk of tokens in double, twice (2 HFQ_HESSIAN_CHUNK n or a little
                                  * more): the set's, shared by its Hessians */
    double *cross;               /* [n][n] D, or NULL (hfq_hessian_set_cross) */
    double *dd;                  /* a chunk of x - xq by channels (the set's), with cross */
    int64_t n_tokens;
} hfq_hessian;

typedef struct hfq_hessian_set {
    hfq_hessian *e;
    int64_t n;
    double *chunk;               /* the Hessians' xd, for the widest input */
    double *dchunk;              /* the Hessians' dd (hfq_hessian_set_cross) */
    int n_threads;               /* <= 0: OpenMP's default */
    bool failed;                 /* an input was seen with another row length */
    hfq_error err;
} hfq_hessian_set;

/* Zeroed Hessians for inputs in[0..n), sharing one chunk buffer: add to
 * them one at a time (as the observer is called). */
int hfq_hessian_set_init(hfq_hessian_set *s, const hfq_hessian_input *in, int64_t n, int n_threads, hfq_error *err);
void hfq_hessian_set_free(hfq_hessian_set *s);
hfq_hessian *hfq_hessian_find(hfq_hessian_set *s, const char *name);
/* Gives every Hessian of s its zeroed cross term (n^2 doubles more each). */
int hfq_hessian_set_cross(hfq_hessian_set *s, hfq_error *err);

/* H += X^T X for x [n_tokens][h->in.n]. */
void hfq_hessian_add(hfq_hessian *h, const float *x, int64_t n_tokens, int n_threads);
/* The same with the kernels of isa (quant/dgemm.h; for tests). */
void hfq_hessian_add_isa(hfq_hessian *h, const float *x, int64_t n_tokens, int n_threads, hfq_isa isa);
/* H += X^T X and, h having a cross term, D += (X - Xq)^T X for the inputs
 * x and their quantized values xq [n_tokens][h->in.n]. */
void hfq_hessian_add_quantized(hfq_hessian *h, const float *x, const float *xq, int64_t n_tokens, int n_threads);
void hfq_hessian_add_quantized_isa(hfq_hessian *h, const float *x, const float *xq, int64_t n_tokens,
                                   int n_threads, hfq_isa isa);

/* An observer (kernels/graph.h's hfq_observer_fn, user = the set): adds x
 * to the Hessian of weight_name when the set has it. */
void hfq_hessian_observe(void *user, const char *weight_name, const float *x, int64_t n_tokens, int64_t n_in);

#endif
