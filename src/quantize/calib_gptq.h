/* calib_gptq.h - GPTQ's Hessians for the quantize tool's calibration
 * session (src/quantize/calib_session.h): windows of layers collected by
 * calibration passes as the driver asks for them.
 *
 * The inputs are planned from the model (calib/hessian.h); window 0 (the
 * first layers whose Hessians fit the memory budget) is collected during
 * the statistics' own calibration pass (hfq_calib_gptq_observe). When the
 * driver asks for a tensor outside the current window, that window is
 * dropped and the window starting at the tensor's layer is collected by a
 * new pass over the same sequences (a note line says which layers each pass
 * covers). The model and tokens are the statistics' own, so every pass sees
 * the activations the statistics saw.
 *
 * With sequential, each window is one layer and its pass runs on the model
 * with the earlier layers' tensors replaced by their quantized values as
 * the driver reports them (hfq_gptq_source.encoded). With act_order, U is
 * of the permuted Hessian and the source's perm gives the order.
 *
 * With act_quant (GPTQ against quantized inputs, W4A4) every window is
 * collected by its own pass after the statistics' (the activations'
 * static scales come from them): each observed input x, divided by its
 * column multipliers when it has them, is quantized by act_quant as the
 * runner will quantize it (xq), and the cross term D = sum (x - xq) x^T
 * is kept beside H (twice the memory per input); the source's shift then
 * hands out M = D (H + lambda I)^-1 with U (quant/gptq.h's target).
 *
 * get hands out U (quant/gptq.h) of the tensor's input, made once per input
 * from its Hessian with the input's column multipliers (SmoothQuant / AWQ:
 * the folded input is x / s, so H_ij / (s_i s_j)) and the damping.
 */
#ifndef HFQ_SRC_QUANTIZE_CALIB_GPTQ_H
#define HFQ_SRC_QUANTIZE_CALIB_GPTQ_H

#include <stdbool.h>
#include <stdint.h>

#include "calib/calibrate.h"
#include "calib/fold.h"
#include "formats/error.h"
#include "formats/gguf.h"
#include "src/quantize/driver.h"

#define HFQ_GPTQ_DEFAULT_MEMORY ((int64_t)4 << 30)

typedef struct hfq_calib_gptq_opts {
    double damp;               /* < 0: HFQ_GPTQ_DEFAULT_DAMP */
    int64_t batch;             /* <= 0: HFQ_GPTQ_DEFAULT_BATCH */
    int64_t memory;            /* Hessian bytes per window; <= 0: HFQ_GPTQ_DEFAULT_MEMORY */
    int n_threads;             /* <= 0: all */
    /* Sequential: one layer a pass, each pass on the model with the layers
     * before it as quantized so far (src/quantize/gptq_seq.h); the first
     * layer's Hessians are the float model's. */
    bool sequential;
    bool act_order;            /* columns by descending H_jj, static headers (quant/gptq.h) */
    bool quantized_inputs;     /* asked for (quantize --gptq-quantized-inputs); the session sets act_quant */
    /* The runner's quantization of weight `name`'s input x [rows][cols] in
     * place (left as it is where that input is not quantized); 0, or -1
     * with err set. NULL: float inputs. */
    int (*act_quant)(void *ctx, const char *name, float *x, int64_t rows, int64_t cols, hfq_error *err);
    /* whether weight name's inputs are quantized as those of leader, whose
     * input act_quant was given (only then is leader's shift name's) */
    bool (*act_same)(void *ctx, const char *leader, const char *name);
    void *act_ctx;
    /* one line per calibration pass (may be NULL) */
    void (*note)(void *ctx, const char *msg);
    void *note_ctx;
} hfq_calib_gptq_opts;

typedef struct hfq_calib_gptq hfq_calib_gptq;

/* Plans the inputs of model file f (the model at model_path) and allocates
 * window 0. */
hfq_calib_gptq *hfq_calib_gptq_new(const char *model_path, const gguf_file *f, const hfq_calib_gptq_opts *o,
                                   hfq_error *err);
void hfq_calib_gptq_free(hfq_calib_gptq *g);

/* The observer (calibrate.h's observe, user = g) collecting the current
 * window during a pass; hfq_calib_gptq_pass_done after that pass reports
 * the observer's failure and says the note line. */
void hfq_calib_gptq_observe(void *user, const char *weight_name, const float *x, int64_t n_tokens, int64_t n_in);
int hfq_calib_gptq_pass_done(hfq_calib_gptq *g, hfq_error *err);

/* The driver's source, reading later windows' passes over seqs with run
 * params rp and applying ts's column multipliers; seqs, rp and ts must
 * outlive the write. */
hfq_gptq_source hfq_calib_gptq_source(hfq_calib_gptq *g, const hfq_calib_seqs *seqs, const hfq_calib_run_params *rp,
                                      const hfq_transforms *ts);

#endif
