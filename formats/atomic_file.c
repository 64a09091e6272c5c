#include "formats/atomic_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void atomic_free(hfq_atomic_file *af) {
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    af->fp = NULL;
}

int hfq_atomic_open(hfq_atomic_file *af, const char *path, hfq_error *err) {
    memset(af, 0, sizeof *af);
    size_t len = strlen(path);
    af->path = strdup(path);
    af->tmp_path = malloc(len + 16);
    if (!af->path || !af->tmp_path) {
        atomic_free(af);
        return hfq_fail(err, path, "out of memory");
    }
    memcpy(af->tmp_path, path, len);
    memcpy(af->tmp_path + len, ".tmp.XXXXXX", 12);
    int fd = mkstemp(af->tmp_path);
    if (fd < 0) {
        int e = errno;
        atomic_free(af);
        return hfq_fail(err, path, "cannot create output: %s", strerror(e));
    }
    /* mkstemp creates 0600; outputs get the usual 0666 minus the umask */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) {
        int e = errno;
        close(fd);
        unlink(af->tmp_path);
        atomic_free(af);
        return hfq_fail(err, path, "cannot set permissions on output: %s", strerror(e));
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int e = errno;
        close(fd);
        unlink(af->tmp_path);
        atomic_free(af);
        return hfq_fail(err, path, "cannot open output: %s", strerror(e));
    }
    return 0;
}

int hfq_atomic_write(hfq_atomic_file *af, const void *buf, size_t n, hfq_error *err) {
    if (n && fwrite(buf, 1, n, af->fp) != n)
        return hfq_fail(err, af->path, "write failed: %s", strerror(errno));
    return 0;
}

int hfq_atomic_commit(hfq_atomic_file *af, hfq_error *err) {
    int rc = 0;
    if (fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0)
        rc = hfq_fail(err, af->path, "write failed: %s", strerror(errno));
    if (fclose(af->fp) != 0 && rc == 0)
        rc = hfq_fail(err, af->path, "close failed: %s", strerror(errno));
    af->fp = NULL;
    if (rc == 0 && rename(af->tmp_path, af->path) != 0)
        rc = hfq_fail(err, af->path, "rename failed: %s", strerror(errno));
    if (rc != 0) unlink(af->tmp_path);
    atomic_free(af);
    return rc;
}

void hfq_atomic_abort(hfq_atomic_file *af) {
    if (af->fp) fclose(af->fp);
    if (af->tmp_path) unlink(af->tmp_path);
    atomic_free(af);
}
