/* test_cuda_device.c - choosing the backend (kernels/cuda/device.h) without a
 * GPU: the names --device takes; cpu never needs CUDA; cuda fails with one
 * line when the build has no backend or no device answers; auto takes a
 * device that answers, else the CPU with a note saying why; and this
 * machine's own probe gives answers consistent with the build. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/device.h"

static const hfq_ops fake_cuda = {.name = "fake-cuda"};

static void test_parse(void) {
    static const struct { const char *s; hfq_device d; } good[] = {
        {"cpu", HFQ_DEVICE_CPU}, {"cuda", HFQ_DEVICE_CUDA}, {"auto", HFQ_DEVICE_AUTO}};
    for (size_t i = 0; i < 3; i++) {
        hfq_device d = (hfq_device)-1;
        CHECK(hfq_device_parse("--device", good[i].s, &d, NULL) == 0 && d == good[i].d);
    }
    static const char *const bad[] = {"gpu", "CUDA", "", "cuda0", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hfq_error err = {{0}};
        hfq_device d = HFQ_DEVICE_AUTO;
        CHECK(hfq_device_parse("--device", bad[i], &d, &err) == -1 && d == HFQ_DEVICE_AUTO);
        CHECK_STR_CONTAINS(err.msg, "--device: expects cpu, cuda or auto");
    }
}

/* One call of hfq_device_choose; returns its result. */
static int choose(hfq_device want, const hfq_cuda_probe *probe, const hfq_ops *cuda, const hfq_ops **ops, char *note,
                  hfq_error *err) {
    *ops = NULL;
    return hfq_device_choose(want, probe, cuda, ops, note, 256, err);
}

static void test_choose(void) {
    const hfq_cuda_probe none = {.built = true, .reason = "no CUDA-capable device is detected"};
    const hfq_cuda_probe unbuilt = {.built = false, .reason = "this build has no CUDA backend (configure with -Dcuda=enabled)"};
    const hfq_cuda_probe h200 = {.built = true, .n_devices = 1, .name = "NVIDIA H200", .cc_major = 9};
    const hfq_ops *ops;
    char note[256];
    hfq_error err = {{0}};

    /* cpu: always the CPU, nothing to say, whatever the probe */
    const hfq_cuda_probe *probes[] = {&none, &unbuilt, &h200};
    for (size_t i = 0; i < 3; i++) {
        CHECK(choose(HFQ_DEVICE_CPU, probes[i], &fake_cuda, &ops, note, &err) == 0);
        CHECK(ops == hfq_cpu_ops() && note[0] == '\0');
    }

    /* a device that answers */
    CHECK(choose(HFQ_DEVICE_CUDA, &h200, &fake_cuda, &ops, note, &err) == 0 && ops == &fake_cuda && !note[0]);
    CHECK(choose(HFQ_DEVICE_AUTO, &h200, &fake_cuda, &ops, note, &err) == 0 && ops == &fake_cuda);
    CHECK_STR_CONTAINS(note, "--device auto: using CUDA device 0 (NVIDIA H200, sm_90)");

    /* no device: cuda fails in one line, auto falls back and says why */
    CHECK(choose(HFQ_DEVICE_CUDA, &none, &fake_cuda, &ops, note, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--device cuda: no CUDA device (no CUDA-capable device is detected)");
    CHECK(!strchr(err.msg, '\n'));
    CHECK(choose(HFQ_DEVICE_AUTO, &none, &fake_cuda, &ops, note, &err) == 0 && ops == hfq_cpu_ops());
    CHECK_STR_CONTAINS(note, "--device auto: no CUDA device (no CUDA-capable device is detected); using the CPU");

    /* no backend in the build (or a device but no table) */
    const hfq_cuda_probe *unusable[] = {&unbuilt, &h200};
    const hfq_ops *tables[] = {&fake_cuda, NULL};
    for (size_t i = 0; i < 2; i++) {
        CHECK(choose(HFQ_DEVICE_CUDA, unusable[i], tables[i], &ops, note, &err) == -1);
        CHECK_STR_CONTAINS(err.msg, "--device cuda: this build has no CUDA backend");
        CHECK(choose(HFQ_DEVICE_AUTO, unusable[i], tables[i], &ops, note, &err) == 0 && ops == hfq_cpu_ops());
        CHECK_STR_CONTAINS(note, "this build has no CUDA backend");
        CHECK_STR_CONTAINS(note, "; using the CPU");
    }
}

/* This machine: the probe agrees with the build, and selection follows it. */
static void test_this_machine(void) {
    hfq_cuda_probe p;
    hfq_cuda_probe_get(&p);
    CHECK(p.built == (hfq_cuda_ops() != NULL));
    CHECK(p.n_devices > 0 ? p.name[0] != '\0' : p.reason[0] != '\0');
    printf("cuda backend built: %s; devices: %d (%s)\n", p.built ? "yes" : "no", p.n_devices,
           p.n_devices ? p.name : p.reason);
    const hfq_ops *ops;
    char note[512];
    hfq_error err = {{0}};
    CHECK(hfq_device_select(HFQ_DEVICE_CPU, &ops, note, sizeof note, &err) == 0 && ops == hfq_cpu_ops() && !note[0]);
    CHECK(hfq_device_select(HFQ_DEVICE_AUTO, &ops, note, sizeof note, &err) == 0);
    const int rc = hfq_device_select(HFQ_DEVICE_CUDA, &ops, note, sizeof note, &err);
    if (p.built && p.n_devices > 0) {
        CHECK(rc == 0 && ops == hfq_cuda_ops());
    } else {
        CHECK(rc == -1 && strncmp(err.msg, "--device cuda: ", 15) == 0 && !strchr(err.msg, '\n'));
        printf("--device cuda: %s\n", err.msg);
    }
}

/* A build with the backend whose module or CUDA libraries do not load: the
 * probe's reason is the message, and auto falls back to the CPU. */
static void test_unloadable(void) {
    const hfq_cuda_probe unloadable = {.built = false, .reason = "cannot load the CUDA backend (libcublasLt.so.13: "
                                                                 "cannot open shared object file)"};
    const hfq_ops *ops;
    char note[512];
    hfq_error err = {{0}};
    CHECK(hfq_device_choose(HFQ_DEVICE_CUDA, &unloadable, NULL, &ops, note, sizeof note, &err) == -1);
    CHECK_STR_CONTAINS(err.msg, "--device cuda: cannot load the CUDA backend (libcublasLt.so.13");
    CHECK(hfq_device_choose(HFQ_DEVICE_AUTO, &unloadable, NULL, &ops, note, sizeof note, &err) == 0 &&
          ops == hfq_cpu_ops());
    CHECK_STR_CONTAINS(note, "--device auto: cannot load the CUDA backend (libcublasLt.so.13: cannot open shared "
                             "object file); using the CPU");
}

/* --device cpu opens no CUDA module (it maps CUDA's libraries: ~200 MB of
 * resident memory and a tenth of a second): nothing named libhfq_cuda in
 * this process's mappings afterwards. Runs first, before anything loads it. */
static void test_cpu_opens_nothing(void) {
    const hfq_ops *ops = NULL;
    char note[256];
    hfq_error err = {{0}};
    CHECK(hfq_device_select(HFQ_DEVICE_CPU, &ops, note, sizeof note, &err) == 0 && ops == hfq_cpu_ops());
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) {
        printf("no /proc/self/maps: mappings not checked\n");
        return;
    }
    char line[4096];
    bool mapped = false;
    while (fgets(line, sizeof line, maps)) mapped = mapped || strstr(line, "libhfq_cuda") != NULL;
    fclose(maps);
    CHECK_MSG(!mapped, "--device cpu opened the CUDA module");
}

int main(void) {
    test_cpu_opens_nothing();
    test_parse();
    test_choose();
    test_unloadable();
    test_this_machine();
    return check_exit();
}
