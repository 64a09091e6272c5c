/* cuda.h - the CUDA backend: the ops table of kernels/ops.h on one NVIDIA GPU
 * (device 0 of those CUDA makes visible), and what the machine offers.
 *
 * hfq_cuda_ops()'s create uploads every weight once, in its stored format
 * (kernels/cuda/plan.h), with plain cudaMalloc; buffers are device memory
 * (host_visible false, so no observer). Operations queue work on the device;
 * a failure there is kept and reported by the table's sync (kernels/ops.h).
 * Builds without CUDA link a stand-in (absent.c) that says so.
 */
#ifndef HFQ_KERNELS_CUDA_CUDA_H
#define HFQ_KERNELS_CUDA_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hfq_cuda_probe {
    bool built;             /* this build has the CUDA backend */
    int n_devices;          /* visible devices; 0 when none or no driver */
    char name[256];         /* device 0 */
    int cc_major, cc_minor; /* its compute capability */
    size_t total_bytes;     /* its memory */
    char reason[256];       /* why there is no device, when n_devices is 0 */
} hfq_cuda_probe;

/* Fills *p; never fails (the reason says what went wrong). */
void hfq_cuda_probe_get(hfq_cuda_probe *p);

/* The backend's table, or NULL when this build has none. */
const hfq_ops *hfq_cuda_ops(void);

#ifdef __cplusplus
}
#endif

#endif
