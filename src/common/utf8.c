/* utf8.c - see utf8.h. */
#include "src/common/utf8.h"

size_t hfq_utf8_valid_len(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    if (len == 0) return 0;
    unsigned c = u[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;        /* no overlongs */
        else if (c == 0xED) hi = 0x9F;   /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;   /* nothing above U+10FFFF */
    } else return 0;
    if (len < n) return 0;
    if (u[1] < lo || u[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((u[i] & 0xC0) != 0x80) return 0;
    return n;
}
