/* check.h - minimal assertions for the C unit tests.
 * A test program counts failed CHECKs and returns check_exit(): 0 when all
 * passed, 1 otherwise; CHECK_SKIP(reason) exits 77, which meson reports as
 * skipped. */
#ifndef HFQ_TESTS_CHECK_H
#define HFQ_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    check_failures++; } } while (0)

#define CHECK_MSG(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); check_failures++; } } while (0)

#define CHECK_STR_CONTAINS(hay, needle) CHECK_MSG(strstr((hay), (needle)) != NULL, \
    "\"%s\" does not contain \"%s\"", (hay), (needle))

#define CHECK_NEAR(a, b, tol) CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), \
    "%.9g vs %.9g (tol %.3g)", (double)(a), (double)(b), (double)(tol))

#define CHECK_SKIP(...) do { fprintf(stdout, "SKIP: "); fprintf(stdout, __VA_ARGS__); \
    fputc('\n', stdout); exit(77); } while (0)

static inline int check_exit(void) {
    if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
    return check_failures ? 1 : 0;
}

#endif
