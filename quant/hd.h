/* hd.h - marks functions that compile for both the CPU and CUDA devices.
 * Format decoders and dot kernels are written once as `static inline HFQ_HD`
 * so the CUDA backend and the CPU tests run the very same arithmetic. */
#ifndef HFQ_QUANT_HD_H
#define HFQ_QUANT_HD_H

#ifdef __CUDACC__
#define HFQ_HD __host__ __device__
#else
#define HFQ_HD
#endif

#endif
