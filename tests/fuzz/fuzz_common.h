/* fuzz_common.h - helpers shared by the libFuzzer targets (tests/fuzz/build.sh).
 *
 * Readers that only take a path get their input through memory, never the
 * disk: a single file through a memfd opened by its /proc/self/fd/N path, a
 * folder through one private folder per process in /dev/shm (tmpfs; removed
 * at exit). Rewriting a file on the disk's file system for every input made
 * the file-based targets wait on the disk most of the time. Every target checks the
 * error contract: a refused input yields a non-empty one-line message that
 * names the file it came from. Violations abort(), which libFuzzer reports
 * as a crash with the input saved. */
#ifndef HFQ_TESTS_FUZZ_COMMON_H
#define HFQ_TESTS_FUZZ_COMMON_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char fuzz_dir_path[64];

static void fuzz_dir_remove(void) {
    DIR *d = opendir(fuzz_dir_path);
    if (d) {
        struct dirent *e;
        char p[320];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(fuzz_dir_path);
}

/* The per-process temporary folder (created on first use). */
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "/dev/shm/hfq_fuzz_XXXXXX");
        if (!mkdtemp(fuzz_dir_path)) abort();
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Writes data to NAME inside the folder (len 0 writes an empty file) and
 * returns the file's path in buf. */
static inline const char *fuzz_put(const char *name, const void *data, size_t len, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", fuzz_dir(), name);
    FILE *fp = fopen(buf, "wb");
    if (!fp) abort();
    if (len && fwrite(data, 1, len, fp) != len) abort();
    if (fclose(fp)) abort();
    return buf;
}

/* Replaces the content of one in-memory file (a memfd, created on first
 * use; no name in any folder) with data and returns the path that opens it,
 * "/proc/self/fd/N", in buf. */
static inline const char *fuzz_put_memfd(const void *data, size_t len, char *buf, size_t cap) {
    static int fd = -1;
    if (fd < 0 && (fd = (int)syscall(SYS_memfd_create, "hfq_fuzz", 0)) < 0) abort();
    if (ftruncate(fd, 0) || (len && pwrite(fd, data, len, 0) != (ssize_t)len)) abort();
    snprintf(buf, cap, "/proc/self/fd/%d", fd);
    return buf;
}

/* Removes NAME from the folder, if present. */
static inline void fuzz_drop(const char *name) {
    char p[320];
    snprintf(p, sizeof p, "%s/%s", fuzz_dir(), name);
    unlink(p);
}

/* Reports a broken contract (shown with the crash) and aborts. */
static inline void fuzz_fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz: %s: [%s]\n", what, detail ? detail : "");
    abort();
}

/* The error contract: non-empty, one line, mentions `must_name`. */
static inline void fuzz_check_error(const char *msg, const char *must_name) {
    if (!msg[0]) fuzz_fail("empty error message", msg);
    if (strchr(msg, '\n') || strchr(msg, '\r')) fuzz_fail("error message is not one line", msg);
    if (must_name && !strstr(msg, must_name)) fuzz_fail("error message does not name the file", msg);
}

#endif
