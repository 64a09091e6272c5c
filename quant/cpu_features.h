/* cpu_features.h - the x86 instruction-set extensions this CPU runs: the
 * one run-time check behind every SIMD choice of the project (the
 * quantizers' quant/isa.h, and the runner's kernels in kernels/cpu). Found
 * once per process: CPUID traps to the hypervisor in a virtual machine
 * (microseconds), and kernels are looked up for every product. 0 on other
 * architectures. */
#ifndef HFQ_QUANT_CPU_FEATURES_H
#define HFQ_QUANT_CPU_FEATURES_H

enum {
    CPU_FEAT_AVX2 = 1u << 0,
    CPU_FEAT_FMA = 1u << 1,
    CPU_FEAT_F16C = 1u << 2,
    CPU_FEAT_AVX512F = 1u << 3,
    CPU_FEAT_AVX512DQ = 1u << 4,
    CPU_FEAT_AVX512VL = 1u << 5,
    CPU_FEAT_AVX512VNNI = 1u << 6,
    CPU_FEAT_AVXVNNI = 1u << 7,   /* VEX-encoded VNNI (CPUID leaf 7.1; GCC 12's __builtin_cpu_supports lacks it) */
    CPU_FEAT_AVX512BW = 1u << 8,
    CPU_FEAT_AVX512BF16 = 1u << 9,   /* vdpbf16ps (CPUID leaf 7.1) */
    CPU_FEAT_AVX512VBMI = 1u << 10,  /* vpermb, vpermt2b */
    CPU_FEAT_BMI2 = 1u << 11,        /* pdep (the panels' grid decoders) */
};

/* The CPU_FEAT_ bits of this CPU, capped by the environment variable
 * HFQ_CPU_ISA (for tests and comparisons): "portable" (none), "avx2"
 * (AVX2, FMA, F16C, BMI2) or "avxvnni" (those and AVX-VNNI: an Alder Lake's
 * set); any other value, or none, leaves them all. Read once. */
unsigned cpu_features(void);

/* Whether this CPU has every feature in `want`. */
static inline int cpu_has(unsigned want) { return (cpu_features() & want) == want; }

#endif
