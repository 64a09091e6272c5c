/* arch_llama.c - llama.cpp's "llama": interleaved rope pairs (the converter
 * un-permutes q/k rows), the runner's default tensors (q/k/v biases
 * optional, as llama.cpp loads them); experts when expert_count says so
 * (Mixtral). */
#include "kernels/arch.h"

const hfq_arch_desc hfq_arch_llama = {
    .name = "llama",
    .rope_mode = HFQ_ROPE_NORMAL,
    .experts = true,
};
