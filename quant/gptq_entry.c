/* gptq_entry.c - the table of GPTQ codecs (quant/gptq_codec.h, gptq_entry.h). Formats
 * without a row have no codec yet (the grid i-quants and TQ: see
 * docs/calibration.md). */
#include "quant/gptq_entry.h"

#include <stddef.h>

static const hfq_gptq_entry *const ENTRIES[HFQ_QT_COUNT] = {
    [HFQ_QT_Q8_0] = &hfq_gptq_q8_0,   [HFQ_QT_Q4_0] = &hfq_gptq_q4_0,     [HFQ_QT_Q4_1] = &hfq_gptq_q4_1,
    [HFQ_QT_Q5_0] = &hfq_gptq_q5_0,   [HFQ_QT_Q5_1] = &hfq_gptq_q5_1,     [HFQ_QT_IQ4_NL] = &hfq_gptq_iq4_nl,
    [HFQ_QT_Q2_K] = &hfq_gptq_q2_k,   [HFQ_QT_Q3_K] = &hfq_gptq_q3_k,     [HFQ_QT_Q4_K] = &hfq_gptq_q4_k,
    [HFQ_QT_Q5_K] = &hfq_gptq_q5_k,   [HFQ_QT_Q6_K] = &hfq_gptq_q6_k,     [HFQ_QT_IQ4_XS] = &hfq_gptq_iq4_xs,
    [HFQ_QT_MXFP4] = &hfq_gptq_mxfp4, [HFQ_QT_NVFP4] = &hfq_gptq_nvfp4,
};

const hfq_gptq_entry *hfq_gptq_entry_get(hfq_qtype t) {
    return (unsigned)t < HFQ_QT_COUNT ? ENTRIES[t] : NULL;
}

const hfq_gptq_codec *hfq_gptq_codec_get(hfq_qtype t) {
    const hfq_gptq_entry *e = hfq_gptq_entry_get(t);
    return e ? &e->codec : NULL;
}
