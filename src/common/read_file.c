/* read_file.c - see read_file.h. */
#include "src/common/read_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int hfq_read_file(const char *path, size_t max, char **data, size_t *len, hfq_error *err) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return hfq_fail(err, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return hfq_fail(err, path, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return hfq_fail(err, path, "not a regular file");
    }
    if ((unsigned long long)st.st_size > max) {
        fclose(f);
        return hfq_fail(err, path, "file too large (%lld bytes, limit %zu)", (long long)st.st_size, max);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return hfq_fail(err, path, "out of memory reading %zu bytes", n);
    }
    size_t got = fread(buf, 1, n, f);
    int read_err = ferror(f);
    fclose(f);
    if (got != n || read_err) {
        free(buf);
        return hfq_fail(err, path, "read error (got %zu of %zu bytes)", got, n);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}
