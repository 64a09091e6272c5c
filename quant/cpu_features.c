#include "quant/cpu_features.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* clang 14 (tests/fuzz/build.sh) cannot test "f16c"; every AVX2 CPU has it */
#if defined(__clang__) && __clang_major__ < 15
#define HAS_F16C() __builtin_cpu_supports("avx2")
#else
#define HAS_F16C() __builtin_cpu_supports("f16c")
#endif

static unsigned find(void) {
    /* __builtin_cpu_supports takes a string literal only: one call per name */
    unsigned bits = (__builtin_cpu_supports("avx2") ? CPU_FEAT_AVX2 : 0) | (__builtin_cpu_supports("fma") ? CPU_FEAT_FMA : 0) |
                    (HAS_F16C() ? CPU_FEAT_F16C : 0) |
                    (__builtin_cpu_supports("avx512f") ? CPU_FEAT_AVX512F : 0) |
                    (__builtin_cpu_supports("avx512dq") ? CPU_FEAT_AVX512DQ : 0) |
                    (__builtin_cpu_supports("avx512vl") ? CPU_FEAT_AVX512VL : 0) |
                    (__builtin_cpu_supports("avx512bw") ? CPU_FEAT_AVX512BW : 0) |
                    (__builtin_cpu_supports("avx512vnni") ? CPU_FEAT_AVX512VNNI : 0) |
                    (__builtin_cpu_supports("avx512vbmi") ? CPU_FEAT_AVX512VBMI : 0) |
                    (__builtin_cpu_supports("bmi2") ? CPU_FEAT_BMI2 : 0);
    unsigned a, b, c, d;
    if ((bits & CPU_FEAT_AVX2) && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        if (a >> 4 & 1) bits |= CPU_FEAT_AVXVNNI;
        if ((bits & CPU_FEAT_AVX512F) && (a >> 5 & 1)) bits |= CPU_FEAT_AVX512BF16;
    }
    return bits;
}
#else
static unsigned find(void) { return 0; }
#endif

/* HFQ_CPU_ISA caps what the SIMD code may use (tests run every path on one
 * machine): "portable" none, "avx2" AVX2/FMA/F16C/BMI2 only, "avxvnni"
 * those and AVX-VNNI; unset or anything else, all the CPU has. */
static unsigned capped(unsigned bits) {
    const char *isa = getenv("HFQ_CPU_ISA");
    const unsigned avx2 = CPU_FEAT_AVX2 | CPU_FEAT_FMA | CPU_FEAT_F16C | CPU_FEAT_BMI2;
    if (!isa) return bits;
    if (strcmp(isa, "portable") == 0) return 0;
    if (strcmp(isa, "avx2") == 0) return bits & avx2;
    if (strcmp(isa, "avxvnni") == 0) return bits & (avx2 | CPU_FEAT_AVXVNNI);
    return bits;
}

unsigned cpu_features(void) {
    /* found once; computing it twice at once gives the same value: no lock */
    static _Atomic unsigned cached;   /* bit 31: found */
    unsigned bits = cached;
    if (bits) return bits & ~(1u << 31);
    bits = capped(find());
    cached = bits | 1u << 31;
    return bits;
}
