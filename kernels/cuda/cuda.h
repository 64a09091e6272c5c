/* cuda.h - the CUDA backend: the ops table of kernels/ops.h on one NVIDIA GPU
 * (device 0 of those CUDA makes visible), and what the machine offers.
 *
 * hfq_cuda_ops()'s create uploads every weight once, in its stored format
 * (kernels/cuda/plan.h), with plain cudaMalloc; buffers are device memory
 * (host_visible false, so no observer). Operations queue work on the device;
 * a failure there is kept and reported by the table's sync (kernels/ops.h).
 * The backend itself is a module loaded on first use (module.h); builds
 * without CUDA, and machines where the module or CUDA's libraries cannot be
 * loaded, get no table and a probe that says why.
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
    bool built;             /* the CUDA backend is loaded: this build has it and the module loads */
    int n_devices;          /* visible devices; 0 when none or no driver */
    char name[256];         /* device 0 */
    int cc_major, cc_minor; /* its compute capability */
    size_t total_bytes;     /* its memory */
    char reason[320];       /* why there is no backend or no device, when n_devices is 0 */
} hfq_cuda_probe;

/* Fills *p; never fails (the reason says what went wrong). */
void hfq_cuda_probe_get(hfq_cuda_probe *p);

/* The backend's table, or NULL when it cannot be loaded (probe says why). */
const hfq_ops *hfq_cuda_ops(void);

#ifdef __cplusplus
}
#endif

#endif
