/* device.c - choosing the backend (device.h). */
#include "kernels/cuda/device.h"

#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

int hfq_device_parse(const char *opt, const char *s, hfq_device *d, hfq_error *err) {
    static const struct { const char *name; hfq_device d; } names[] = {
        {"cpu", HFQ_DEVICE_CPU}, {"cuda", HFQ_DEVICE_CUDA}, {"auto", HFQ_DEVICE_AUTO}};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *d = names[i].d;
            return 0;
        }
    return hfq_fail(err, opt, "expects cpu, cuda or auto, got '%s'", s ? s : "");
}

int hfq_device_choose(hfq_device want, const hfq_cuda_probe *probe, const hfq_ops *cuda_ops, const hfq_ops **ops,
                      char *note, size_t note_size, hfq_error *err) {
    if (note_size) note[0] = '\0';
    *ops = hfq_cpu_ops();
    if (want == HFQ_DEVICE_CPU) return 0;
    const bool usable = probe->built && cuda_ops && probe->n_devices > 0;
    if (usable) {
        *ops = cuda_ops;
        if (want == HFQ_DEVICE_AUTO)
            snprintf(note, note_size, "--device auto: using CUDA device 0 (%s, sm_%d%d)", probe->name,
                     probe->cc_major, probe->cc_minor);
        return 0;
    }
    char why[sizeof probe->reason + 32];
    if (!probe->built || !cuda_ops)   /* the probe says why: no backend in the build, or it does not load */
        snprintf(why, sizeof why, "%s",
                 probe->reason[0] ? probe->reason : "this build has no CUDA backend (configure with -Dcuda=enabled)");
    else snprintf(why, sizeof why, "no CUDA device (%s)", probe->reason);
    if (want == HFQ_DEVICE_CUDA) return hfq_fail(err, "--device cuda", "%s", why);
    snprintf(note, note_size, "--device auto: %s; using the CPU", why);
    return 0;
}

int hfq_device_select(hfq_device want, const hfq_ops **ops, char *note, size_t note_size, hfq_error *err) {
    hfq_cuda_probe probe = {.built = false};
    if (want == HFQ_DEVICE_CPU)   /* the CPU needs no CUDA runtime: the module is not even opened */
        return hfq_device_choose(want, &probe, NULL, ops, note, note_size, err);
    hfq_cuda_probe_get(&probe);
    return hfq_device_choose(want, &probe, hfq_cuda_ops(), ops, note, note_size, err);
}
