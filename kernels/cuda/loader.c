/* loader.c - cuda.h in every build: the CUDA backend's module (module.h)
 * opened on demand.
 *
 * Where the module is looked for, first found wins: $HFQ_CUDA_MODULE; beside
 * the executable (a copied or installed set of tools); the build tree that
 * compiled this file (HFQ_CUDA_MODULE_PATH, defined only in CUDA builds).
 * dlopen counts references, so every call opens it again instead of keeping
 * a handle in global state; it is never closed, as the table lives in it. */
#include "kernels/cuda/cuda.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/module.h"

typedef struct module_fns {
    void (*probe)(hfq_cuda_probe *p);
    const hfq_ops *(*ops)(void);
} module_fns;

#ifdef HFQ_CUDA_MODULE_PATH
/* The module file beside this executable into buf; false when unknown. */
static bool beside_executable(char *buf, size_t size) {
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return false;
    *slash = '\0';
    return snprintf(buf, size, "%s/%s", exe, HFQ_CUDA_MODULE_FILE) < (int)size;
}

/* Opens the module at path and checks that it is of this build. */
static bool open_module(const char *path, module_fns *f, char *why, size_t why_size) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_size, "cannot load the CUDA backend (%s)", e ? e : path);
        return false;
    }
    int (*abi)(size_t *, size_t *);
    *(void **)&abi = dlsym(h, "hfq_cuda_module_abi");
    *(void **)&f->probe = dlsym(h, "hfq_cuda_module_probe");
    *(void **)&f->ops = dlsym(h, "hfq_cuda_module_ops");
    size_t ops_size = 0, probe_size = 0;
    if (!abi || !f->probe || !f->ops || abi(&ops_size, &probe_size) != HFQ_CUDA_MODULE_ABI ||
        ops_size != sizeof(hfq_ops) || probe_size != sizeof(hfq_cuda_probe)) {
        snprintf(why, why_size, "%s is not a CUDA backend module of this build", path);
        dlclose(h);
        return false;
    }
    return true;
}
#endif

/* The module's functions, or false with why. */
static bool load(module_fns *f, char *why, size_t why_size) {
#ifdef HFQ_CUDA_MODULE_PATH
    const char *env = getenv("HFQ_CUDA_MODULE");
    if (env && env[0]) return open_module(env, f, why, why_size);
    char beside[4096];
    if (beside_executable(beside, sizeof beside) && access(beside, F_OK) == 0)
        return open_module(beside, f, why, why_size);
    return open_module(HFQ_CUDA_MODULE_PATH, f, why, why_size);
#else
    (void)f;
    snprintf(why, why_size, "this build has no CUDA backend (configure with -Dcuda=enabled)");
    return false;
#endif
}

void hfq_cuda_probe_get(hfq_cuda_probe *p) {
    module_fns f;
    char why[sizeof p->reason];
    if (load(&f, why, sizeof why)) {
        f.probe(p);
        return;
    }
    memset(p, 0, sizeof *p);
    snprintf(p->reason, sizeof p->reason, "%s", why);
}

const hfq_ops *hfq_cuda_ops(void) {
    module_fns f;
    char why[320];
    return load(&f, why, sizeof why) ? f.ops() : NULL;
}
