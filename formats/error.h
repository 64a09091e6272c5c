/* error.h - one error type for the whole library.
 *
 * Library code never prints and never exits: a failing function fills a
 * hfq_error with a one-line message "WHERE: REASON" (WHERE names the file, and
 * the tensor or key when there is one) and returns a failure value. Tools print
 * the message and choose the exit code.
 */
#ifndef HFQ_FORMATS_ERROR_H
#define HFQ_FORMATS_ERROR_H

#include <stdarg.h>

typedef struct hfq_error {
    char msg[1024];
} hfq_error;

/* Writes "where: reason" into err (err may be NULL; where may be NULL) and
 * returns -1, so callers can write `return hfq_fail(err, path, "...", ...);`. */
int hfq_fail(hfq_error *err, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hfq_vfail(hfq_error *err, const char *where, const char *fmt, va_list ap);

/* Prefixes an existing message with "where: " (for adding outer context). */
void hfq_error_prefix(hfq_error *err, const char *where);

/* Exit codes shared by every tool; documented in docs/exit-codes.md. */
enum hfq_exit {
    HFQ_EXIT_OK = 0,
    HFQ_EXIT_FAILURE = 1,   /* bad input file, I/O error, unsupported model */
    HFQ_EXIT_USAGE = 2,     /* bad command line */
    HFQ_EXIT_GATE = 3,      /* a quality gate failed (ppl-eval) */
    HFQ_EXIT_VERIFY = 4,    /* integrity check failed (gguf-info --verify) */
};

#endif
