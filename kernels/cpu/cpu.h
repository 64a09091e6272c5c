/* cpu.h - the CPU backend: OpenMP threads, host memory, weights read in
 * place from the file mapping. Weight types: F32, F16, BF16. */
#ifndef HFQ_KERNELS_CPU_CPU_H
#define HFQ_KERNELS_CPU_CPU_H

#include "kernels/ops.h"

const hfq_ops *hfq_cpu_ops(void);

#endif
