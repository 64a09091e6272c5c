/* module.h - the CUDA backend as a loadable module, libhfq_cuda.so.
 *
 * The tools link no CUDA library: loading CUDA's (cuBLAS alone is hundreds of
 * MB) costs ~200 MB of resident pages and fails on machines without them, so
 * the backend lives in a module that kernels/cuda/loader.c opens with dlopen
 * only when a tool asks for a CUDA device (--device cuda|auto). The module
 * exports the three functions below; it takes hfq_fail, hfq_model_hparams and
 * hfq_model_path from the executable that loads it (linked with -rdynamic).
 *
 * HFQ_CUDA_MODULE_ABI changes whenever hfq_ops, hfq_cuda_probe or the model
 * functions the module calls change, so that a module of another build is
 * refused rather than misread. */
#ifndef HFQ_KERNELS_CUDA_MODULE_H
#define HFQ_KERNELS_CUDA_MODULE_H

#include <stddef.h>

#include "kernels/cuda/cuda.h"

#define HFQ_CUDA_MODULE_ABI 1
#define HFQ_CUDA_MODULE_FILE "libhfq_cuda.so"

#ifdef __cplusplus
extern "C" {
#endif

/* HFQ_CUDA_MODULE_ABI; *ops_size and *probe_size get the module's sizeof of
 * hfq_ops and hfq_cuda_probe. */
int hfq_cuda_module_abi(size_t *ops_size, size_t *probe_size);
void hfq_cuda_module_probe(hfq_cuda_probe *p);
const hfq_ops *hfq_cuda_module_ops(void);

#ifdef __cplusplus
}
#endif

#endif
