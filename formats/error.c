#include "formats/error.h"

#include <stdio.h>
#include <string.h>

int hfq_vfail(hfq_error *err, const char *where, const char *fmt, va_list ap) {
    if (!err) return -1;
    size_t n = 0;
    if (where && *where) {
        int w = snprintf(err->msg, sizeof err->msg, "%s: ", where);
        n = w < 0 ? 0 : ((size_t)w >= sizeof err->msg ? sizeof err->msg - 1 : (size_t)w);
    }
    vsnprintf(err->msg + n, sizeof err->msg - n, fmt, ap);
    return -1;
}

int hfq_fail(hfq_error *err, const char *where, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hfq_vfail(err, where, fmt, ap);
    va_end(ap);
    return -1;
}

void hfq_error_prefix(hfq_error *err, const char *where) {
    if (!err || !where || !*where) return;
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", where, old);
}
