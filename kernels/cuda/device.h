/* device.h - which backend a tool computes on: --device cpu|cuda|auto.
 *
 * cpu is the CPU backend; cuda the CUDA backend, failing with one line when
 * the build has none or no device answers; auto the CUDA backend when a
 * device answers, else the CPU with a note saying why. The decision itself
 * (hfq_device_choose) takes the probe as an argument so it is tested
 * without a GPU.
 */
#ifndef HFQ_KERNELS_CUDA_DEVICE_H
#define HFQ_KERNELS_CUDA_DEVICE_H

#include <stddef.h>

#include "formats/error.h"
#include "kernels/cuda/cuda.h"
#include "kernels/ops.h"

typedef enum hfq_device {
    HFQ_DEVICE_CPU,
    HFQ_DEVICE_CUDA,
    HFQ_DEVICE_AUTO,
} hfq_device;

/* "cpu", "cuda" or "auto"; -1 with err naming opt otherwise. */
int hfq_device_parse(const char *opt, const char *s, hfq_device *d, hfq_error *err);

/* The table for `want`, given the probe and the CUDA table (NULL when not
 * built). *note gets a line for stderr ("" when there is nothing to say):
 * auto says which device it took, or why it fell back to the CPU. -1 with
 * err (one line) when cuda is asked for and cannot be had. */
int hfq_device_choose(hfq_device want, const hfq_cuda_probe *probe, const hfq_ops *cuda_ops, const hfq_ops **ops,
                      char *note, size_t note_size, hfq_error *err);

/* hfq_device_choose with this machine's probe and this build's CUDA table. */
int hfq_device_select(hfq_device want, const hfq_ops **ops, char *note, size_t note_size, hfq_error *err);

#endif
