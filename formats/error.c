#include "formats/error.h"

#include <stdio.h>
#include <string.h>

/* Messages quote names and texts from hostile files: control characters
 * (a newline in a tensor name, a merge, a shard name) become '?' so the
 * message stays one line. */
static void one_line(char *msg) {
    for (unsigned char *p = (unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p == 0x7f) *p = '?';
}

int hfq_vfail(hfq_error *err, const char *where, const char *fmt, va_list ap) {
    if (!err) return -1;
    size_t n = 0;
    if (where && *where) {
        int w = snprintf(err->msg, sizeof err->msg, "%s: ", where);
        n = w < 0 ? 0 : ((size_t)w >= sizeof err->msg ? sizeof err->msg - 1 : (size_t)w);
    }
    vsnprintf(err->msg + n, sizeof err->msg - n, fmt, ap);
    one_line(err->msg);
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
    size_t wl = strlen(where), ml = strnlen(err->msg, sizeof err->msg - 1);
    if (wl + 2 >= sizeof err->msg) wl = sizeof err->msg - 3;
    if (wl + 2 + ml >= sizeof err->msg) ml = sizeof err->msg - 1 - wl - 2; /* keep the end cut */
    memmove(err->msg + wl + 2, err->msg, ml);
    memcpy(err->msg, where, wl);
    err->msg[wl] = ':';
    err->msg[wl + 1] = ' ';
    err->msg[wl + 2 + ml] = 0;
    one_line(err->msg);
}
