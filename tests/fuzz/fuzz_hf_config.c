/* libFuzzer target for config.json (hf_config_load): any file must be
 * refused with a one-line error naming it, or give hyperparameters within the
 * ranges later size arithmetic relies on, and finite floating-point values.
 * Built only by tests/fuzz/build.sh. */
#include <math.h>
#include <stdint.h>

#include "src/hf/arch.h"
#include "src/hf/config.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[320];
    fuzz_put("config.json", data, size, path, sizeof path);
    hf_config cfg;
    hfq_error err = {{0}};
    if (hf_config_load(&cfg, fuzz_dir(), &err) != 0) {
        fuzz_check_error(err.msg, path);
        return 0;
    }
    if (cfg.hidden_size < 1 || cfg.intermediate_size < 1 || cfg.n_layers < 1 || cfg.n_heads < 1 ||
        cfg.n_kv_heads < 1 || cfg.head_dim < 1 || cfg.vocab_size < 1 || cfg.context_length < 0)
        abort();
    if (cfg.n_heads % cfg.n_kv_heads != 0) abort();
    if (!isfinite(cfg.rms_norm_eps) || !isfinite(cfg.rope_theta) || !isfinite(cfg.rope_factor) ||
        !isfinite(cfg.rope_low_freq_factor) || !isfinite(cfg.rope_high_freq_factor))
        fuzz_fail("non-finite value accepted", path);
    if (!memchr(cfg.architecture, 0, sizeof cfg.architecture) || !memchr(cfg.name, 0, sizeof cfg.name))
        abort();
    hfq_error aerr = {{0}};
    if (!hf_arch_find(cfg.architecture, path, &aerr)) fuzz_check_error(aerr.msg, path);
    return 0;
}
