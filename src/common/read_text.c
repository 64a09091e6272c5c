#include "src/common/read_text.h"

#include "src/common/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int hfq_read_text(const char *path, size_t max, char **data, size_t *len, hfq_error *err) {
    gzFile f = gzopen(path, "rb");
    if (!f) return hfq_fail(err, path, "cannot open: %s", errno ? strerror(errno) : "out of memory");
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    int rc = -1;
    if (!buf) {
        hfq_fail(err, path, "out of memory");
        goto done;
    }
    for (;;) {
        if (n == cap) {
            if (cap > max) {
                hfq_fail(err, path, "more than %zu bytes of text", max);
                goto done;
            }
            char *grown = realloc(buf, 2 * cap + 1);
            if (!grown) {
                hfq_fail(err, path, "out of memory");
                goto done;
            }
            buf = grown;
            cap *= 2;
        }
        unsigned want = cap - n > (1u << 30) ? 1u << 30 : (unsigned)(cap - n);
        int got = gzread(f, buf + n, want);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            hfq_fail(err, path, "cannot read: %s", zerr == Z_ERRNO ? strerror(errno) : msg);
            goto done;
        }
        if (got == 0) {
            int zerr;
            gzerror(f, &zerr);
            if (zerr == Z_BUF_ERROR) {   /* the compressed stream ended early */
                hfq_fail(err, path, "truncated gzip data");
                goto done;
            }
            break;
        }
        n += (size_t)got;
    }
    if (n > max) {
        hfq_fail(err, path, "more than %zu bytes of text", max);
        goto done;
    }
    if (n == 0) {
        hfq_fail(err, path, "the text is empty");
        goto done;
    }
    for (size_t pos = 0, k; pos < n; pos += k)
        if ((k = hfq_utf8_valid_len(buf + pos, n - pos)) == 0) {
            hfq_fail(err, path, "invalid UTF-8 at byte %zu (not a text file?)", pos);
            goto done;
        }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    buf = NULL;
    rc = 0;
done:
    free(buf);
    gzclose(f);
    return rc;
}
