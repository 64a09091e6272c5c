/* isa.h - which instruction set the integer quantizers' kernels use.
 *
 * The scale searches have a plain C version (the reference, and the
 * fallback) and an AVX2 version chosen at run time. The AVX2 kernels run
 * several groups of values side by side, one group per vector lane, each
 * lane doing exactly the scalar sequence of float operations, so both give
 * the same bytes; tests/test_quant_simd.c checks it. Internal to quant/ and
 * its tests.
 */
#ifndef HFQ_QUANT_ISA_H
#define HFQ_QUANT_ISA_H

typedef enum hfq_isa {
    HFQ_ISA_SCALAR, /* plain C: every machine */
    HFQ_ISA_AVX2,   /* x86-64 with AVX2 */
} hfq_isa;

#if defined(__x86_64__) && defined(__GNUC__)
#define HFQ_HAVE_AVX2_KERNELS 1
#endif

/* The fastest instruction set this CPU runs. */
static inline hfq_isa hfq_isa_best(void) {
#ifdef HFQ_HAVE_AVX2_KERNELS
    return __builtin_cpu_supports("avx2") ? HFQ_ISA_AVX2 : HFQ_ISA_SCALAR;
#else
    return HFQ_ISA_SCALAR;
#endif
}

#endif
