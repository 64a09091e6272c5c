/* ggml_ref.h - prototypes of the llama.cpp reference functions the tests
 * compare against (ggml-quants.c, ggml-cpu/quants.c built with
 * GGML_CPU_GENERIC), with block pointers as void * so the tests need no
 * ggml headers. Only available when HFQ_HAVE_GGML_REF is defined. */
#ifndef HFQ_TESTS_GGML_REF_H
#define HFQ_TESTS_GGML_REF_H

#include <stddef.h>
#include <stdint.h>

#define GGML_REF_FORMATS(X)                                                                                   \
    X(q8_0) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q2_K) X(q3_K) X(q4_K) X(q5_K) X(q6_K) X(iq4_nl) X(iq4_xs)  \
        X(iq3_xxs) X(iq3_s) X(iq2_xxs) X(iq2_xs) X(iq2_s)  \
        X(iq1_s) X(iq1_m) X(tq1_0) X(tq2_0) X(q1_0) X(q2_0)

#define GGML_REF_DECLARE(t)                                                              \
    void quantize_row_##t##_ref(const float *x, void *y, int64_t k);                      \
    size_t quantize_##t(const float *src, void *dst, int64_t nrow, int64_t n_per_row,     \
                        const float *imatrix);                                            \
    void dequantize_row_##t(const void *x, float *y, int64_t k);
GGML_REF_FORMATS(GGML_REF_DECLARE)
#undef GGML_REF_DECLARE

void quantize_row_q8_1_ref(const float *x, void *y, int64_t k);
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);
void dequantize_row_q8_K(const void *x, float *y, int64_t k);

typedef void (*ggml_ref_vec_dot)(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                                 int nrc);
void ggml_vec_dot_q8_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q4_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q4_1_q8_1(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q5_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q5_1_q8_1(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q2_K_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q3_K_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q4_K_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q5_K_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q6_K_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_iq4_nl_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                              int nrc);
void ggml_vec_dot_iq4_xs_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                              int nrc);

/* ggml_quantize_init's codebook searches, needed before the grid i-quants */
void iq3xs_init_impl(int grid_size);
void iq2xs_init_impl(int ggml_type);
/* ggml_type values iq2xs_init_impl takes (formats/ggml_type.h has the same) */
enum { GGML_REF_TYPE_IQ2_XXS = 16, GGML_REF_TYPE_IQ2_XS = 17, GGML_REF_TYPE_IQ1_S = 19, GGML_REF_TYPE_IQ2_S = 22,
       GGML_REF_TYPE_IQ1_M = 29 };

void ggml_vec_dot_iq3_xxs_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                               int nrc);
void ggml_vec_dot_iq2_xxs_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                               int nrc);
void ggml_vec_dot_iq2_xs_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                              int nrc);
void ggml_vec_dot_iq2_s_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                             int nrc);
void ggml_vec_dot_iq1_s_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                             int nrc);
void ggml_vec_dot_iq1_m_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                             int nrc);
void ggml_vec_dot_tq1_0_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                             int nrc);
void ggml_vec_dot_q1_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_q2_0_q8_0(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
void ggml_vec_dot_tq2_0_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                             int nrc);
void ggml_vec_dot_iq3_s_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                             int nrc);

/* ggml-common.h's table `name` ("iq3s_grid", "ksigns_iq2xs", ...): its
 * elements and their size in bytes, or NULL when there is none of that name
 * (tests/ref/ggml_ref_tables.c). */
const void *ggml_ref_table(const char *name, size_t *n, size_t *elem_size);

#endif
