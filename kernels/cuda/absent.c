/* absent.c - the CUDA backend's stand-in for builds without it (cuda.h). */
#include "kernels/cuda/cuda.h"

#include <stdio.h>
#include <string.h>

void hfq_cuda_probe_get(hfq_cuda_probe *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->reason, sizeof p->reason, "this build has no CUDA backend (configure with -Dcuda=enabled)");
}

const hfq_ops *hfq_cuda_ops(void) { return NULL; }
