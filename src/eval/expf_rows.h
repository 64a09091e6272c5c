/* expf_rows.h - expf of many values at once, bit for bit the C library's.
 *
 * llama-perplexity's log-softmax adds up expf(l_i - max l) over the whole
 * vocabulary (262144 calls a scored token with Gemma's); ppl-eval adds the
 * same floats in the same order, so it must get exactly libm's expf. glibc
 * (2.27 on; expf_rows.c's constants are read from Debian's 2.36) computes
 * it in double: k = round(x 32 / ln 2) by the add of 1.5 2^52, r = x 32 /
 * ln 2 - k, 2^(k/32) from a 32-entry table and k's high bits, times a
 * degree-3 polynomial in r, rounded to float; on a CPU with
 * FMA (every AVX2 one) its multiarch build __expf_fma fuses five of those
 * multiply-adds. hfq_expf_rows runs that build's operations, four lanes of
 * doubles at a time with AVX2 and FMA; lanes at or beyond |x| = 88 (and
 * NaN) go to expf itself. It is used only after a check, once per process,
 * that this C library's expf gives the same bits on probe values spread
 * over every table entry and the whole range (tests/test_expf_rows.c checks
 * every float of [-104, 0] and a sample of the rest); on another library,
 * or without AVX2 and FMA, each value is expf's own. */
#ifndef HFQ_EVAL_EXPF_ROWS_H
#define HFQ_EVAL_EXPF_ROWS_H

#include <stdbool.h>
#include <stdint.h>

/* y[i] = expf(x[i] - shift) for i < n (the difference in float). */
void hfq_expf_rows(const float *x, float shift, int64_t n, float *y);

/* Whether hfq_expf_rows uses its own vector code here (false: expf), for tests. */
bool hfq_expf_rows_vector(void);

#endif
