/* driver.c - see src/quantize/driver.h. */
#include "src/quantize/driver.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ggml_type.h"
#include "quant/gptq.h"
#include "src/quantize/codec.h"
#include "src/quantize/fused.h"
#include "src/quantize/tensor_scale.h"

/* Floats decoded at a time by default: bounds memory whatever the tensor's size. */
#define SLAB_FLOATS ((int64_t)1 << 24)

hfq_quantize_opts hfq_quantize_opts_default(hfq_preset preset) {
    hfq_quantize_opts o = {.plan = hfq_plan_opts_default(preset)};
    return o;
}

/* ---- reading the model's hyper-parameters ---- */

/* An integer key, or the first element of an integer array (per-layer values);
 * def when absent and not required. */
static int key_int(const gguf_file *f, const char *key, bool required, int64_t def, int64_t *out,
                   hfq_error *err) {
    int64_t i = gguf_find_key(f, key);
    *out = def;
    if (i < 0) return required ? hfq_fail(err, gguf_path(f), "missing key %s", key) : 0;
    if (gguf_kv_type(f, i) != GGUF_VT_ARRAY) return gguf_get_int(f, i, out, err);
    gguf_vtype t = gguf_arr_type(f, i);
    const void *data = gguf_arr_data(f, i);
    if (gguf_arr_n(f, i) < 1 || !data || (t != GGUF_VT_UINT32 && t != GGUF_VT_INT32))
        return hfq_fail(err, gguf_path(f), "key %s: expected an integer or a non-empty array of 32-bit integers", key);
    if (t == GGUF_VT_UINT32) {
        uint32_t v;
        memcpy(&v, data, 4);
        *out = v;
    } else {
        int32_t v;
        memcpy(&v, data, 4);
        *out = v;
    }
    return 0;
}

int hfq_plan_model_from_gguf(const gguf_file *f, hfq_plan_model *m, hfq_error *err) {
    memset(m, 0, sizeof *m);
    int64_t i = gguf_find_key(f, "general.architecture");
    if (i < 0) return hfq_fail(err, gguf_path(f), "missing key general.architecture");
    uint64_t len = 0;
    const char *arch = gguf_get_str(f, i, &len, err);
    if (!arch) return -1;
    if (len == 0 || len >= sizeof m->arch || strlen(arch) != len)
        return hfq_fail(err, gguf_path(f), "general.architecture: bad value");
    memcpy(m->arch, arch, len + 1);
    char key[160];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, m->arch), key)
    if (key_int(f, KEY("block_count"), true, 0, &m->n_layer, err) < 0 ||
        key_int(f, KEY("attention.head_count"), false, 0, &m->n_head, err) < 0 ||
        key_int(f, KEY("attention.head_count_kv"), false, m->n_head, &m->n_head_kv, err) < 0 ||
        key_int(f, KEY("expert_count"), false, 0, &m->n_expert, err) < 0)
        return -1;
#undef KEY
    if (m->n_layer < 1 || m->n_layer > 100000)
        return hfq_fail(err, gguf_path(f), "%s.block_count: %" PRId64 " is out of range", m->arch, m->n_layer);
    return 0;
}

int hfq_quantize_plan(const gguf_file *f, const hfq_plan_opts *opts, hfq_plan *plan, hfq_error *err) {
    hfq_plan_model model;
    if (hfq_plan_model_from_gguf(f, &model, err) < 0) return -1;
    int64_t n = gguf_n_tensors(f);
    hfq_plan_tensor *ts = calloc((size_t)(n > 0 ? n : 1), sizeof *ts);
    if (!ts) return hfq_fail(err, gguf_path(f), "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor_info *ti = gguf_tensor_at(f, i);
        ts[i].name = ti->name;
        ts[i].type = ti->type;
        memcpy(ts[i].ne, ti->ne, sizeof ts[i].ne);
    }
    int rc = hfq_plan_build(plan, &model, ts, n, opts, err);
    free(ts);
    if (rc < 0) hfq_error_prefix(err, gguf_path(f));
    return rc;
}

/* ---- output metadata ---- */

static bool is_split_key(const char *key) {
    return strcmp(key, "split.no") == 0 || strcmp(key, "split.count") == 0 ||
           strcmp(key, "split.tensors.count") == 0;
}

static bool is_float_type(uint32_t t) { return t == GT_F32 || t == GT_F16 || t == GT_BF16; }

/* Whether key (value str, NULL when not a string) is a per-tensor mark
 * (docs/format-quant-ext.md) that does not hold for the tensor the plan
 * writes: the input's I8 encoding of a tensor it converts (rewritten by
 * set_metadata when the output has one), or the activation mark of one,
 * which holds for the input's type - except FP8_BLOCK's per-group FP8
 * activations (fp8_e4m3_g<G>) of a float weight written as a float. */
static bool is_stale_tensor_mark(const gguf_file *f, const hfq_plan *plan, const char *key, const char *str) {
    static const char qext[] = "hfq.qext.", act[] = "hfq.act_quant.";
    const bool is_qext = strncmp(key, qext, sizeof qext - 1) == 0, is_act = strncmp(key, act, sizeof act - 1) == 0;
    if (!is_qext && !is_act) return false;
    const char *name = key + (is_qext ? sizeof qext : sizeof act) - 1;
    for (int64_t i = 0; i < plan->n; i++) {
        if (!plan->entries[i].convert || strcmp(gguf_tensor_at(f, i)->name, name) != 0) continue;
        const bool group_fp8 = is_act && str && strncmp(str, "fp8_e4m3_g", 10) == 0;
        return !(group_fp8 && is_float_type(gguf_tensor_at(f, i)->type) && is_float_type(plan->entries[i].fmt));
    }
    return false;
}

/* What happens to one tensor: the plan's conversion, or - when calibration
 * rescales a tensor the plan copies - a re-encoding to its own type. */
typedef struct step {
    bool convert;
    bool rows;              /* the importance source has rows for it */
    bool importance;        /* ... and its format's rounding uses them */
    hfq_fmt_spec spec;
    hfq_tensor_adjust adj;
    float amax;             /* NVFP4 of a fused group (fused.h): the group's amax, shared_amax set */
    bool shared_amax;
    float scale_factor;     /* tensor scale = the amax-derived one times this (tensor_scale.h); 0: 1 */
    const hfq_gptq_codec *gptq; /* rounded by GPTQ with this codec (hfq_gptq_source), or NULL */
    int64_t nvfp4_scales;   /* NVFP4: the global scales written (hfq_plan_nvfp4_scales); else 0 */
} step;

/* imp_names: the effect->n_importance tensors rounded with importance */
static int set_metadata(gguf_writer *w, const gguf_file *f, const hfq_plan *plan, const hfq_quantize_opts *o,
                        const hfq_write_effect *effect, const char *const *imp_names) {
    int rc = 0;
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        const char *key = gguf_kv_key(f, i);
        const char *str = gguf_kv_type(f, i) == GGUF_VT_STRING ? gguf_get_str(f, i, NULL, NULL) : NULL;
        if (!is_split_key(key) && !is_stale_tensor_mark(f, plan, key, str)) rc |= gguf_copy_kv(w, f, i);
    }
    const hfq_plan_opts *p = &o->plan;
    rc |= gguf_set_u32(w, "general.quantization_version", 2);
    rc |= gguf_set_u32(w, "general.file_type", hfq_preset_file_type(p->preset));
    rc |= gguf_set_str(w, "hfq.quantize.version", HFQ_VERSION);
    rc |= gguf_set_str(w, "hfq.quantize.preset", hfq_preset_name(p->preset));
    if (o->n_override_args > 0)
        rc |= gguf_set_arr_str(w, "hfq.quantize.tensor_types", o->override_args, NULL, o->n_override_args);
    if (p->pure) rc |= gguf_set_bool(w, "hfq.quantize.pure", true);
    if (p->leave_output) rc |= gguf_set_bool(w, "hfq.quantize.leave_output_tensor", true);
    if (p->token_embd_fmt >= 0)
        rc |= gguf_set_str(w, "hfq.quantize.token_embedding_type", hfq_fmt_name((uint32_t)p->token_embd_fmt));
    if (p->output_fmt >= 0)
        rc |= gguf_set_str(w, "hfq.quantize.output_tensor_type", hfq_fmt_name((uint32_t)p->output_fmt));
    /* what was rounded with importance, not what was offered: Q8_0 or
     * MXFP4 given statistics write the bytes they write without */
    if (effect->n_importance > 0) {
        rc |= gguf_set_bool(w, "hfq.quantize.importance", true);
        rc |= gguf_set_arr_str(w, "hfq.quantize.importance_tensors", imp_names, NULL, effect->n_importance);
    }
    if (effect->n_gptq > 0) {
        rc |= gguf_set_bool(w, "hfq.quantize.gptq", true);
        rc |= gguf_set_f32(w, "hfq.quantize.gptq_damp", (float)o->gptq.damp);
        rc |= gguf_set_u32(w, "hfq.quantize.gptq_block",
                           (uint32_t)(o->gptq.batch > 0 ? o->gptq.batch : HFQ_GPTQ_DEFAULT_BATCH));
        if (o->gptq.encoded) rc |= gguf_set_bool(w, "hfq.quantize.gptq_sequential", true);
        if (o->gptq.perm) rc |= gguf_set_bool(w, "hfq.quantize.gptq_act_order", true);
        if (o->gptq.shift) rc |= gguf_set_bool(w, "hfq.quantize.gptq_quantized_inputs", true);
    }
    if (o->recipe_name) rc |= gguf_set_str(w, "hfq.quantize.recipe", o->recipe_name);
    if (o->target_bytes > 0) rc |= gguf_set_u64(w, "hfq.quantize.target_bytes", (uint64_t)o->target_bytes);
    if (o->adjust.metadata) rc |= o->adjust.metadata(o->adjust.ctx, w, effect);
    /* docs/format-quant-ext.md: the encoding of each I8 weight */
    for (int64_t i = 0; i < plan->n; i++) {
        const char *enc = plan->entries[i].convert ? hfq_codec_qext_encoding(plan->entries[i].fmt) : NULL;
        if (!enc) continue;
        char key[32 + GGUF_MAX_NAME + 1];
        snprintf(key, sizeof key, "hfq.qext.%s", gguf_tensor_at(f, i)->name);
        rc |= gguf_set_u32(w, "hfq.qext.version", 1);
        rc |= gguf_set_str(w, key, enc);
    }
    return rc ? -1 : 0; /* the writer keeps the first failure; begin reports it */
}

/* ---- the tensors ---- */

/* Why st's format takes no importance in this write, or NULL: the codec's
 * reason, except for Q8_0 in the Q8_0 preset, which takes our block-scale
 * search (measured to pay there only; other presets' Q8_0 tensors keep
 * llama-quantize --imatrix's bytes: docs/calibration.md). */
static const char *importance_unused(const hfq_fmt_spec *spec, hfq_preset preset) {
    return spec->fmt == GT_Q8_0 && preset == HFQ_PRESET_Q8_0 ? NULL : hfq_codec_importance_unused(spec);
}

/* The GPTQ codec of tensor t converted by st, when the source has its
 * Hessian: dense matrices only, not the token embedding (driver.h). */
static const hfq_gptq_codec *gptq_codec(const hfq_quantize_opts *o, const gguf_tensor_info *t, const step *st) {
    const int q = st->convert && o->gptq.get ? hfq_qtype_from_ggml(st->spec.fmt) : -1;
    const hfq_gptq_codec *c = q >= 0 ? hfq_gptq_codec_get((hfq_qtype)q) : NULL;
    if (!c || t->ne[2] * t->ne[3] != 1 || t->ne[0] % c->block != 0 || strcmp(t->name, "token_embd.weight") == 0 ||
        !o->gptq.has(o->gptq.ctx, t->name, t->ne[0]))
        return NULL;
    return c;
}

static step *plan_steps(const gguf_file *f, const hfq_plan *plan, const hfq_quantize_opts *o, hfq_error *err) {
    if (plan->n != gguf_n_tensors(f)) {
        hfq_fail(err, gguf_path(f), "the plan is for another file");
        return NULL;
    }
    step *steps = calloc((size_t)(plan->n > 0 ? plan->n : 1), sizeof *steps);
    if (!steps) {
        hfq_fail(err, gguf_path(f), "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < plan->n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const hfq_plan_entry *e = &plan->entries[i];
        step *st = &steps[i];
        st->convert = e->convert;
        st->spec = e->convert ? (hfq_fmt_spec){e->fmt, e->scale_group} : (hfq_fmt_spec){t->type, HFQ_SCALE_PER_ROW};
        st->nvfp4_scales = st->spec.fmt == GT_NVFP4 ? hfq_plan_nvfp4_scales(plan->arch, t->name, t->ne) : 0;
        if (o->adjust.get) o->adjust.get(o->adjust.ctx, t->name, st->spec.fmt, &st->adj);
        if (st->adj.col_scale || st->adj.row_scale) st->convert = true;
        if (!st->convert) st->adj.input_scale = 0.0f;
        const hfq_importance_source *imp = &o->importance;
        st->rows = st->convert && imp->get && (!imp->has || imp->has(imp->ctx, t->name, t->ne[0], t->ne[2] * t->ne[3]));
        st->importance = st->rows && !importance_unused(&st->spec, o->plan.preset);
        st->gptq = gptq_codec(o, t, st);
    }
    return steps;
}

static void count_effect(const hfq_plan *plan, const step *steps, hfq_preset preset, hfq_write_effect *out) {
    memset(out, 0, sizeof *out);
    for (int64_t i = 0; i < plan->n; i++) {
        const step *st = &steps[i];
        out->n_importance += st->importance;
        out->n_rescaled += st->adj.col_scale || st->adj.row_scale;
        out->n_input_scales += st->adj.input_scale > 0.0f;
        out->n_gptq += st->gptq != NULL;
        if (!st->rows || st->importance || !hfq_fmt_is_quantized(st->spec.fmt)) continue;
        int k = 0;
        while (k < out->n_unused && (out->unused[k].spec.fmt != st->spec.fmt ||
                                     out->unused[k].spec.scale_group != st->spec.scale_group))
            k++;
        if (k == HFQ_EFFECT_MAX_UNUSED) continue; /* more formats than any plan has */
        if (k == out->n_unused) {
            out->unused[k].spec = st->spec;
            out->unused[k].why = importance_unused(&st->spec, preset);
            out->n_unused++;
        }
        out->unused[k].n++;
    }
}

static int input_scale_name(const char *weight, char *out, size_t n);

/* The companion written beside a tensor converted by st: NVFP4's global
 * scale only where llama.cpp applies one (hfq_plan_llama_applies_scale);
 * elsewhere (token_embd; the FFN of the architectures whose llama.cpp graph
 * drops its scales) the tensor is encoded without one, its global scale
 * folded into the block scales (ggml's reference NVFP4, which any reader
 * decodes alone). */
static hfq_companion step_companion(const step *st) {
    if (!st->convert || (st->spec.fmt == GT_NVFP4 && st->nvfp4_scales == 0)) return HFQ_COMPANION_NONE;
    return hfq_codec_companion(&st->spec);
}

/* llama-quant.cpp's tensor_requires_imatrix: the formats whose rounding
 * without importance is too poor to use (and Q2_K in a Q2_K_S file),
 * except on the embedding and the LM head (llama-quantize refuses; so do
 * we). */
static bool requires_importance(const char *name, uint32_t fmt, hfq_preset preset) {
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0 ||
        strcmp(name, "output.weight") == 0)
        return false;
    return fmt == GT_IQ3_XXS || fmt == GT_IQ2_XXS || fmt == GT_IQ2_XS || fmt == GT_IQ2_S || fmt == GT_IQ1_M ||
           fmt == GT_IQ1_S || (fmt == GT_Q2_K && preset == HFQ_PRESET_Q2_K_S);
}

/* At write time, once the importance source is known: refuses those
 * formats on tensors it has no rows for. */
static int check_importance(const gguf_file *f, const hfq_plan *plan, const step *steps, hfq_preset preset,
                            hfq_error *err) {
    for (int64_t i = 0; i < plan->n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        if (plan->entries[i].convert && !steps[i].rows && requires_importance(t->name, steps[i].spec.fmt, preset))
            return hfq_fail(err, gguf_path(f),
                            "tensor %s: format %s needs importance data (--stats or --calibration-file), "
                            "as in llama-quantize", t->name, hfq_fmt_name(steps[i].spec.fmt));
    }
    return 0;
}

/* Refuses, before anything is written, what cannot be converted. */
static int check_plan(const gguf_file *f, const hfq_plan *plan, const step *steps, const hfq_quantize_opts *o,
                      bool need_encode, hfq_error *err) {
    for (int64_t i = 0; i < plan->n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const hfq_fmt_spec *e = &steps[i].spec;
        char name[GGUF_MAX_NAME + 1];
        if (!steps[i].convert) continue;
        if (!plan->entries[i].convert && hfq_fmt_is_quantized(t->type))
            return hfq_fail(err, gguf_path(f), "tensor %s: calibration cannot rescale a tensor stored as %s",
                            t->name, hfq_fmt_name(t->type));
        if (!hfq_codec_can_decode(t->type))
            return hfq_fail(err, gguf_path(f), "tensor %s: cannot convert from %s to %s", t->name,
                            hfq_fmt_name(t->type), hfq_fmt_name(e->fmt));
        if (hfq_fmt_is_quantized(t->type) && !o->allow_requantize)
            return hfq_fail(err, gguf_path(f), "tensor %s is already %s: requantizing needs --allow-requantize",
                            t->name, hfq_fmt_name(t->type));
        if (need_encode && !hfq_codec_can_encode(e->fmt))
            return hfq_fail(err, gguf_path(f), "tensor %s: format %s is not available in this build",
                            t->name, hfq_fmt_name(e->fmt));
        if ((step_companion(&steps[i]) != HFQ_COMPANION_NONE &&
             hfq_codec_scale_name(t->name, name, sizeof name) < 0) ||
            (steps[i].adj.input_scale > 0.0f && input_scale_name(t->name, name, sizeof name) < 0))
            return hfq_fail(err, gguf_path(f), "tensor %s: the name of its scale tensor would be too long", t->name);
    }
    return 0;
}

int hfq_quantize_check(const gguf_file *f, const hfq_plan *plan, const hfq_quantize_opts *opts, bool need_encode,
                       hfq_error *err) {
    step *steps = plan_steps(f, plan, opts, err);
    int rc = steps ? check_plan(f, plan, steps, opts, need_encode, err) : -1;
    free(steps);
    return rc;
}

int hfq_quantize_effect(const gguf_file *f, const hfq_plan *plan, const hfq_quantize_opts *opts,
                        hfq_write_effect *out, hfq_error *err) {
    step *steps = plan_steps(f, plan, opts, err);
    if (!steps) return -1;
    count_effect(plan, steps, opts->plan.preset, out);
    free(steps);
    return 0;
}

/* Working memory, reused from tensor to tensor. */
typedef struct work {
    float *rows;            /* one decoded row per thread */
    uint8_t *out;           /* the slab encoded */
    float *scales;          /* the companion's values */
    float *slab;            /* GPTQ: the slab's rows decoded, encoded together */
    double *shift_tmp;      /* GPTQ's target shift: n doubles per thread */
    size_t rows_cap, out_cap, scales_cap, slab_cap, shift_cap;
} work;

/* A tensor GPTQ rounds: its codec and U (driver.h's hfq_gptq_source). */
typedef struct gptq_job {
    const hfq_gptq_codec *codec;
    const double *u;
    int64_t batch;
    const int64_t *perm;    /* act-order's column order, or NULL */
    const double *shift;    /* the rows' target shift M, or NULL (both passes) */
} gptq_job;

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return 0;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Whether all n values are finite: a branch-free test of the exponent bits,
 * which the compiler vectorizes (the slab's rows are all checked). */
static bool all_finite(const float *x, int64_t n) {
    uint32_t inf_or_nan = 0;
    for (int64_t j = 0; j < n; j++) {
        uint32_t bits;
        memcpy(&bits, x + j, sizeof bits);
        inf_or_nan |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    return !inf_or_nan;
}

/* Row r of the tensor (src: its bytes) decoded and multiplied as adj says. */
static void decode_adjusted_row(const hfq_codec_job *job, const uint8_t *src, const hfq_tensor_adjust *adj,
                                int64_t r, float *row) {
    const int64_t n = job->n_per_row;
    hfq_codec_decode_row(job, src, row);
    if (adj->col_scale || adj->row_scale) {
        const float rs = adj->row_scale ? adj->row_scale[r] : 1.0f;
        for (int64_t j = 0; j < n; j++) row[j] = row[j] * (adj->col_scale ? adj->col_scale[j] : 1.0f) * rs;
    }
}

/* One slab: nrows rows decoded to float, one at a time, multiplied as adj
 * says (row0: the slab's first row in the tensor) and checked; with amax !=
 * NULL only the absolute maximum is taken (block scales: each row's group
 * maxima, into row_scales), else the rows are encoded (row_scales gets one
 * scale per row for the formats that have them, or holds the blocks'). Rows are independent,
 * so any thread count and any order give the same bytes: threads take
 * chunks of about 64Ki values as they come free, which keeps both busy on a
 * loaded machine. With gj the rows are kept in wk->slab and GPTQ encodes
 * them together (encode) after each row's target shift (shift, in either pass). Returns the first row holding NaN/Inf, or -1 (-2: out of
 * memory). */
static int64_t convert_slab(const hfq_codec_job *job, const uint8_t *src, work *wk, int64_t row0, int64_t nrows,
                            const hfq_tensor_adjust *adj, const float *importance, float *row_scales, float *amax,
                            const gptq_job *gj, bool encode, int n_threads) {
    const int64_t n = job->n_per_row;
    const double *shift = gj ? gj->shift : NULL;
    if (!encode) gj = NULL;
    const int64_t chunk = n < 65536 ? 65536 / n : 1;
    int64_t bad = INT64_MAX;
    float max = 0.0f;
#pragma omp parallel for schedule(dynamic, chunk) num_threads(n_threads) reduction(min : bad) reduction(max : max)
    for (int64_t r = 0; r < nrows; r++) {
        float *row = gj ? wk->slab + r * n : wk->rows + omp_get_thread_num() * n; /* in cache until encoded */
        decode_adjusted_row(job, src + r * job->in_row_bytes, adj, row0 + r, row);
        if (shift) hfq_gptq_shift_row(shift, n, row, wk->shift_tmp + omp_get_thread_num() * n);
        if (!all_finite(row, n)) {
            if (r < bad) bad = r;
        } else if (amax && job->scale_group == HFQ_SCALE_PER_BLOCK) {
            hfq_codec_row_group_amax(job, row, row_scales + r * job->n_row_scales);
        } else if (amax) {
            for (int64_t j = 0; j < n; j++)
                if (fabsf(row[j]) > max) max = fabsf(row[j]);
        } else if (!gj) {
            hfq_codec_encode_row(job, row, wk->out + r * job->out_row_bytes, importance,
                                 row_scales ? row_scales + r * job->n_row_scales : NULL);
        }
    }
    if (amax && max > *amax) *amax = max;
    if (bad == INT64_MAX && gj &&
        hfq_gptq_encode_perm(gj->codec, gj->u, wk->slab, nrows, n, importance, job->global_scale, gj->batch, gj->perm,
                             wk->out, n_threads) < 0)
        return -2;
    return bad == INT64_MAX ? -1 : bad;
}

/* Sequential GPTQ: the slab's nr encoded rows from row0, decoded as a reader
 * of the output gets them (multipliers undone), to o->gptq.encoded. */
static int report_encoded(const hfq_quantize_opts *o, const gguf_tensor_info *t, const hfq_codec_job *job,
                          const hfq_tensor_adjust *adj, work *wk, int64_t row0, int64_t nr, const float *row_scales) {
    const int64_t n = job->n_per_row;
    for (int64_t r = 0; r < nr; r++) {
        hfq_codec_decode_encoded_row(job, wk->out + r * job->out_row_bytes,
                                     row_scales ? row_scales + r * job->n_row_scales : NULL, wk->rows);
        const float rs = adj->row_scale ? adj->row_scale[row0 + r] : 1.0f;
        for (int64_t j = 0; (adj->col_scale || adj->row_scale) && j < n; j++)
            wk->rows[j] /= (adj->col_scale ? adj->col_scale[j] : 1.0f) * rs;
        if (o->gptq.encoded(o->gptq.ctx, t->name, t->ne[1], n, row0 + r, wk->rows) < 0) return -1;
    }
    return 0;
}

/* The target shift M GPTQ gives step e of tensor t (driver.h), or NULL;
 * asking for it collects the tensor's Hessians when they are not yet. */
static int gptq_shift(const hfq_quantize_opts *o, const step *e, const gguf_tensor_info *t, const double **shift,
                      hfq_error *err) {
    *shift = NULL;
    if (!e->gptq || !o->gptq.shift) return 0;
    if (!o->gptq.get(o->gptq.ctx, t->name, t->ne[0], err)) return -1;
    *shift = o->gptq.shift(o->gptq.ctx, t->name);
    return 0;
}

/* The tensor scale of step e from the tensor's (or its group's) amax. */
static float step_global_scale(const step *e, float amax) {
    const float g = hfq_codec_global_scale(&e->spec, amax);
    return e->scale_factor > 0.0f ? g * e->scale_factor : g;
}

/* Streams tensor t through the codec in slabs of whole rows that never cross
 * a matrix (expert) boundary: a pass for the absolute maximum when the format
 * needs it (unless the step has its group's), then the encoding pass, written
 * as it goes. NVFP4 experts get a global scale each (hfq_plan_nvfp4_scales),
 * from their own maxima. With amax_only != NULL only the first pass runs: its
 * maximum is stored there and nothing is written. */
static int convert_tensor(gguf_writer *w, const gguf_file *f, const gguf_tensor_info *t, const step *e,
                          const hfq_quantize_opts *o, work *wk, int n_threads, float *amax_only, hfq_error *err) {
    const char *path = gguf_path(f);
    hfq_codec_job job;
    const hfq_fmt_spec spec = e->spec;
    if (hfq_codec_begin(&job, t, &spec, err) < 0) {
        hfq_error_prefix(err, path);
        return -1;
    }
    job.q8_0_search = e->importance; /* plan_steps decided it (importance_unused) */
    const int64_t rows_per_mat = t->ne[1], n_mats = t->ne[2] * t->ne[3], n_rows = rows_per_mat * n_mats;
    int64_t slab_rows = (o->slab_floats > 0 ? o->slab_floats : SLAB_FLOATS) / t->ne[0];
    if (slab_rows < 1) slab_rows = 1;
    if (slab_rows > rows_per_mat) slab_rows = rows_per_mat;
    hfq_companion comp = step_companion(e);
    const bool block = comp == HFQ_COMPANION_BLOCK_SCALES, rows_scaled = block || comp == HFQ_COMPANION_ROW_SCALES;
    /* NVFP4 experts: scales[m] the maximum of matrix m, then its global scale */
    const bool per_mat = comp == HFQ_COMPANION_TENSOR_SCALE && spec.fmt == GT_NVFP4 && e->nvfp4_scales > 1 &&
                         !amax_only;
    /* block scales: the rows' expanded ones, then the blocks' */
    const int64_t n_blocks = block ? hfq_scale_count(HFQ_SCALE_PER_BLOCK, t->ne[0], rows_per_mat) * n_mats : 0;
    if (grow((void **)&wk->rows, &wk->rows_cap, (size_t)n_threads * (size_t)t->ne[0], sizeof(float)) < 0 ||
        grow((void **)&wk->out, &wk->out_cap, (size_t)slab_rows * job.out_row_bytes, 1) < 0 ||
        grow((void **)&wk->scales, &wk->scales_cap,
             rows_scaled ? (size_t)(n_rows * job.n_row_scales + n_blocks) : (size_t)n_mats, sizeof(float)) < 0)
        return hfq_fail(err, path, "tensor %s: out of memory", t->name);
    if (per_mat) memset(wk->scales, 0, (size_t)n_mats * sizeof(float));
    const float *imp_all =
        e->importance && !amax_only ? o->importance.get(o->importance.ctx, t->name, t->ne[0], n_mats) : NULL;
    gptq_job gj = {e->gptq, NULL, o->gptq.batch, NULL, NULL};
    /* the target shift applies to the maximum too, amax_only passes included */
    if (gptq_shift(o, e, t, &gj.shift, err) < 0) return -1;
    if (e->gptq && !amax_only) {
        if (!(gj.u = o->gptq.get(o->gptq.ctx, t->name, t->ne[0], err))) return -1;
        gj.perm = o->gptq.perm ? o->gptq.perm(o->gptq.ctx, t->name) : NULL;
        if (grow((void **)&wk->slab, &wk->slab_cap, (size_t)slab_rows * (size_t)t->ne[0], sizeof(float)) < 0)
            return hfq_fail(err, path, "tensor %s: out of memory", t->name);
    }
    if (gj.shift &&
        grow((void **)&wk->shift_tmp, &wk->shift_cap, (size_t)n_threads * (size_t)t->ne[0], sizeof(double)) < 0)
        return hfq_fail(err, path, "tensor %s: out of memory", t->name);
    const uint8_t *data = t->data;
    float amax = e->shared_amax && !amax_only ? e->amax : 0.0f;
    job.global_scale = step_global_scale(e, amax);
    const int first = (comp == HFQ_COMPANION_TENSOR_SCALE && (amax_only || !e->shared_amax)) || block ? 0 : 1;
    for (int pass = first; pass < (amax_only ? 1 : 2); pass++) {
        for (int64_t row = 0; row < n_rows;) {
            int64_t in_mat = row % rows_per_mat;
            int64_t nr = rows_per_mat - in_mat < slab_rows ? rows_per_mat - in_mat : slab_rows;
            const float *imp = imp_all ? imp_all + row / rows_per_mat * t->ne[0] : NULL;
            float *row_scales = rows_scaled ? wk->scales + row * job.n_row_scales : NULL;
            if (per_mat && pass == 1) job.global_scale = step_global_scale(e, wk->scales[row / rows_per_mat]);
            int64_t bad = convert_slab(&job, data + row * job.in_row_bytes, wk, row, nr, &e->adj, imp, row_scales,
                                       pass == 0 ? per_mat ? &wk->scales[row / rows_per_mat] : &amax : NULL,
                                       gj.u || gj.shift ? &gj : NULL, pass == 1 && gj.u, n_threads);
            if (bad == -2) return hfq_fail(err, path, "tensor %s: out of memory", t->name);
            if (bad >= 0)
                return hfq_fail(err, path, "tensor %s: row %" PRId64 " holds NaN or Inf", t->name, row + bad);
            if (pass == 1 && gguf_writer_write_data(w, wk->out, (uint64_t)nr * job.out_row_bytes, err) < 0)
                return -1;
            if (pass == 1 && o->gptq.encoded && t->n_dims == 2 && comp != HFQ_COMPANION_BLOCK_SCALES &&
                report_encoded(o, t, &job, &e->adj, wk, row, nr, row_scales) < 0)
                return hfq_fail(err, path, "tensor %s: out of memory", t->name);
            gguf_release(f, data + row * job.in_row_bytes, (uint64_t)nr * job.in_row_bytes);
            row += nr;
        }
        job.global_scale = step_global_scale(e, amax);
        if (block && pass == 0) hfq_codec_block_scales(&job, rows_per_mat, n_mats, wk->scales, wk->scales + n_rows * job.n_row_scales);
    }
    if (amax_only) {
        *amax_only = amax;
        return 0;
    }
    if (per_mat)
        for (int64_t m = 0; m < n_mats; m++) wk->scales[m] = step_global_scale(e, wk->scales[m]);
    else if (comp == HFQ_COMPANION_TENSOR_SCALE)
        wk->scales[0] = job.global_scale;
    if (comp != HFQ_COMPANION_NONE &&
        gguf_writer_write_data(w, wk->scales + (block ? n_rows * job.n_row_scales : 0),
                               (block ? (uint64_t)n_blocks
                                : comp == HFQ_COMPANION_ROW_SCALES ? (uint64_t)(n_rows * job.n_row_scales)
                                : per_mat ? (uint64_t)n_mats : 1) * 4,
                               err) < 0)
        return -1;
    if (e->adj.input_scale > 0.0f && gguf_writer_write_data(w, &e->adj.input_scale, 4, err) < 0) return -1;
    return 0;
}

/* Whether step e is NVFP4 with its global scale (fused.h: those share it). */
static bool global_nvfp4(const step *e) {
    return e->convert && e->spec.fmt == GT_NVFP4 && step_companion(e) == HFQ_COMPANION_TENSOR_SCALE;
}

/* Whether tensor t converted by e takes one NVFP4 global scale per expert
 * (hfq_plan_nvfp4_scales): those are neither shared nor searched. */
static bool nvfp4_per_expert(const step *e) {
    return global_nvfp4(e) && e->nvfp4_scales > 1;
}

/* The NVFP4 weights of each fused group (fused.h) get the group's largest
 * amax, so they share one global scale, as llm-compressor writes them and
 * vLLM's fused layers need. Each member's amax pass runs here instead of in
 * convert_tensor: the tensors are read as often as before. */
static int share_fused_amax(const gguf_file *f, step *steps, int64_t n, const hfq_quantize_opts *o, work *wk,
                            int n_threads, hfq_error *err) {
    char key[GGUF_MAX_NAME + 16], other[GGUF_MAX_NAME + 16];
    for (int64_t i = 0; i < n; i++) {
        const char *name = gguf_tensor_at(f, i)->name;
        if (!global_nvfp4(&steps[i]) || nvfp4_per_expert(&steps[i]) ||
            !hfq_fused_group(name, key, sizeof key))
            continue;
        if (convert_tensor(NULL, f, gguf_tensor_at(f, i), &steps[i], o, wk, n_threads, &steps[i].amax, err) < 0)
            return -1;
        steps[i].shared_amax = true;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!steps[i].shared_amax) continue;
        hfq_fused_group(gguf_tensor_at(f, i)->name, key, sizeof key);
        float amax = 0.0f;
        for (int64_t j = 0; j < n; j++)
            if (steps[j].shared_amax && hfq_fused_group(gguf_tensor_at(f, j)->name, other, sizeof other) &&
                strcmp(key, other) == 0 && steps[j].amax > amax)
                amax = steps[j].amax;
        steps[i].amax = amax;
    }
    return 0;
}

/* Floats of evenly spaced rows the tensor-scale search reads at most: enough
 * to price a scale (every row of the fixtures' tensors), and on large tensors
 * 12 NVFP4 candidates cost about a quarter of an 11 Mi-value tensor's
 * encoding. */
#define SEARCH_FLOATS ((int64_t)1 << 18)

/* errs[k] (tensor_scale.h) for step st of tensor t over its sampled rows;
 * *n_factors their count. */
static int tensor_scale_errors(const gguf_file *f, const gguf_tensor_info *t, const step *st,
                               const hfq_quantize_opts *o, int n_threads, double *errs, int *n_factors,
                               hfq_error *err) {
    hfq_codec_job job;
    if (hfq_codec_begin(&job, t, &st->spec, err) < 0) {
        hfq_error_prefix(err, gguf_path(f));
        return -1;
    }
    float factors[HFQ_TENSOR_SCALE_MAX_CANDIDATES];
    *n_factors = hfq_tensor_scale_factors(&st->spec, factors);
    const int64_t ne0 = t->ne[0], per_mat = t->ne[1], n_mats = t->ne[2] * t->ne[3], n_rows = per_mat * n_mats;
    int64_t ns = SEARCH_FLOATS / ne0;
    ns = ns < 1 ? 1 : ns > n_rows ? n_rows : ns;
    const float *imp_all = o->importance.get(o->importance.ctx, t->name, ne0, n_mats);
    const double *shift;
    if (gptq_shift(o, st, t, &shift, err) < 0) return -1;
    float *rows = malloc((size_t)(ns * ne0) * sizeof *rows);
    const float **imp = malloc((size_t)ns * sizeof *imp);
    double *tmp = shift ? malloc((size_t)ne0 * sizeof *tmp) : NULL;
    int rc = rows && imp && imp_all && (tmp || !shift) ? 0
                                                      : hfq_fail(err, gguf_path(f), "tensor %s: out of memory", t->name);
    for (int64_t k = 0; rc == 0 && k < ns; k++) {
        const int64_t r = (int64_t)((double)k * (double)n_rows / (double)ns);
        decode_adjusted_row(&job, (const uint8_t *)t->data + r * job.in_row_bytes, &st->adj, r, rows + k * ne0);
        if (shift) hfq_gptq_shift_row(shift, ne0, rows + k * ne0, tmp); /* priced as it will be rounded */
        imp[k] = imp_all + r / per_mat * ne0;
    }
    if (rc == 0)
        rc = hfq_tensor_scale_errors(&job, hfq_codec_global_scale(&st->spec, st->amax), factors, *n_factors, rows,
                                     imp, ns, n_threads, errs, err);
    gguf_release(f, t->data, t->nbytes); /* and what read-ahead brought in around the rows */
    free(rows);
    free(imp);
    free(tmp);
    return rc;
}

/* With importance, each tensor scale (NVFP4's global scale; INT8/FP8 with one
 * scale per tensor) is the candidate of least importance-weighted error
 * (tensor_scale.h), the errors of a fused group's members summed so that
 * they keep one scale (share_fused_amax); a group any member of which has no
 * importance keeps the reference. */
static int search_tensor_scales(const gguf_file *f, step *steps, int64_t n, const hfq_quantize_opts *o, work *wk,
                                int n_threads, hfq_error *err) {
    enum { M = HFQ_TENSOR_SCALE_MAX_CANDIDATES };
    double *errs = calloc((size_t)(n > 0 ? n : 1) * M, sizeof *errs);
    int *nf = calloc((size_t)(n > 0 ? n : 1), sizeof *nf);
    int rc = errs && nf ? 0 : hfq_fail(err, gguf_path(f), "out of memory");
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        step *st = &steps[i];
        if (!st->importance || step_companion(st) != HFQ_COMPANION_TENSOR_SCALE || nvfp4_per_expert(st))
            continue;
        if (!st->shared_amax) rc = convert_tensor(NULL, f, t, st, o, wk, n_threads, &st->amax, err);
        st->shared_amax = true;
        if (rc == 0) rc = tensor_scale_errors(f, t, st, o, n_threads, errs + i * M, &nf[i], err);
    }
    char key[GGUF_MAX_NAME + 16], other[GGUF_MAX_NAME + 16];
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        if (nf[i] == 0) continue;
        double sum[M];
        for (int k = 0; k < nf[i]; k++) sum[k] = errs[i * M + k];
        bool whole = true;
        if (global_nvfp4(&steps[i]) && hfq_fused_group(gguf_tensor_at(f, i)->name, key, sizeof key))
            for (int64_t j = 0; j < n; j++) {
                if (j == i || !global_nvfp4(&steps[j]) ||
                    !hfq_fused_group(gguf_tensor_at(f, j)->name, other, sizeof other) || strcmp(key, other) != 0)
                    continue;
                whole = whole && nf[j] == nf[i];
                for (int k = 0; whole && k < nf[i]; k++) sum[k] += errs[j * M + k];
            }
        int best = 0;
        for (int k = 1; whole && k < nf[i]; k++)
            if (sum[k] < sum[best]) best = k;
        float factors[M];
        hfq_tensor_scale_factors(&steps[i].spec, factors);
        steps[i].scale_factor = factors[best];
    }
    free(errs);
    free(nf);
    return rc;
}

/* "<base>.input_scale" for weight "<base>.weight" (or "<name>.input_scale"). */
static int input_scale_name(const char *weight, char *out, size_t n) {
    size_t len = strlen(weight);
    if (len >= 7 && strcmp(weight + len - 7, ".weight") == 0) len -= 7;
    int w = snprintf(out, n, "%.*s.input_scale", (int)len, weight);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* The output's tensors: each input tensor, followed by its scale tensor when
 * its format has one, then its input scale when calibration gives one. */
static int declare_tensors(gguf_writer *w, const gguf_file *f, const hfq_plan *plan, const step *steps,
                           hfq_error *err) {
    const int64_t ne_tensor[1] = {1};
    for (int64_t i = 0; i < plan->n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const hfq_fmt_spec spec = steps[i].spec;
        char name[GGUF_MAX_NAME + 1];
        if (gguf_add_tensor(w, t->name, hfq_codec_storage_type(spec.fmt), t->n_dims, t->ne, err) < 0) return -1;
        hfq_companion comp = step_companion(&steps[i]);
        if (comp != HFQ_COMPANION_NONE) {
            if (hfq_codec_scale_name(t->name, name, sizeof name) < 0) /* check_plan refused it */
                return hfq_fail(err, gguf_path(f), "tensor %s: scale name too long", t->name);
            /* per row: [1, ne1, ...]; per group of G: [ne0 / G, ne1, ...]; per block: [ceil(ne0 / 128), ceil(ne1 / 128), ...] */
            const int64_t b = HFQ_SCALE_BLOCK, per_block = spec.scale_group == HFQ_SCALE_PER_BLOCK;
            const int64_t ne_rows[4] = {per_block ? (t->ne[0] + b - 1) / b
                                        : spec.scale_group > 0 ? t->ne[0] / spec.scale_group : 1,
                                        per_block ? (t->ne[1] + b - 1) / b : t->ne[1], t->ne[2], t->ne[3]};
            const int64_t ne_experts[1] = {t->ne[2] * t->ne[3]};
            if (comp == HFQ_COMPANION_TENSOR_SCALE
                    ? gguf_add_tensor(w, name, GT_F32, 1, nvfp4_per_expert(&steps[i]) ? ne_experts : ne_tensor, err) < 0
                                                   : gguf_add_tensor(w, name, GT_F32, t->n_dims, ne_rows, err) < 0)
                return -1;
        }
        if (steps[i].adj.input_scale > 0.0f) {
            if (input_scale_name(t->name, name, sizeof name) < 0)
                return hfq_fail(err, gguf_path(f), "tensor %s: input scale name too long", t->name);
            if (gguf_add_tensor(w, name, GT_F32, 1, ne_tensor, err) < 0) return -1;
        }
    }
    return 0;
}

int hfq_quantize_write(const gguf_file *f, const hfq_plan *plan, const char *out_path,
                       const hfq_quantize_opts *o, hfq_error *err) {
    step *steps = plan_steps(f, plan, o, err);
    if (!steps || check_plan(f, plan, steps, o, true, err) < 0 || check_importance(f, plan, steps, o->plan.preset, err) < 0) {
        free(steps);
        return -1;
    }
    hfq_write_effect effect;
    count_effect(plan, steps, o->plan.preset, &effect);
    gguf_writer *w = gguf_writer_new();
    const char **imp_names = malloc((size_t)(effect.n_importance > 0 ? effect.n_importance : 1) * sizeof *imp_names);
    if (!w || !imp_names) {
        gguf_writer_free(w);
        free(imp_names);
        free(steps);
        return hfq_fail(err, out_path, "out of memory");
    }
    for (int64_t i = 0, k = 0; i < plan->n; i++)
        if (steps[i].importance) imp_names[k++] = gguf_tensor_at(f, i)->name;
    set_metadata(w, f, plan, o, &effect, imp_names);
    free(imp_names); /* the writer copied the names */
    int n_threads = o->n_threads > 0 ? o->n_threads : omp_get_max_threads();
    work wk = {0};
    int rc = share_fused_amax(f, steps, plan->n, o, &wk, n_threads, err);
    if (rc == 0) rc = search_tensor_scales(f, steps, plan->n, o, &wk, n_threads, err);
    if (rc == 0) rc = declare_tensors(w, f, plan, steps, err);
    if (rc == 0) rc = gguf_writer_begin(w, out_path, err);
    for (int64_t i = 0; rc == 0 && i < plan->n; i++) {
        const gguf_tensor_info *t = gguf_tensor_at(f, i);
        const step *e = &steps[i];
        if (o->progress) o->progress(o->progress_ctx, i, plan->n, t->name, e->spec.fmt);
        if (!e->convert) {
            rc = gguf_writer_write_data(w, t->data, t->nbytes, err);
            gguf_release(f, t->data, t->nbytes);
        } else {
            rc = convert_tensor(w, f, t, e, o, &wk, n_threads, NULL, err);
        }
    }
    if (rc == 0) rc = gguf_writer_finish(w, err);
    gguf_writer_free(w);
    free(steps);
    free(wk.rows);
    free(wk.out);
    free(wk.scales);
    free(wk.slab);
    free(wk.shift_tmp);
    return rc;
}
