/* atomic_file.c - see atomic_file.h (temporaries, signals, stale temporaries). */
#include "formats/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_SUFFIX ".tmp."
#define TMP_RANDOM 6 /* the XXXXXX mkstemp replaces */
#define CREATE_TRIES 16

/* ---------------------------------------------------------------- the registry
 *
 * The temporaries in progress, for the signal handler: process-wide because a
 * handler can reach nothing else. reg_busy guards the rest; a thread takes it
 * only with the cleanup signals blocked (reg_lock), so the handler, taking it
 * on whatever thread the signal lands, waits at most for another thread's
 * short critical section, never for its own. */
static atomic_flag reg_busy = ATOMIC_FLAG_INIT;
static char **reg_paths;
static size_t reg_n, reg_cap;
/* The process the list belongs to: a forked child is not it until its reset
 * has run (a signal may land in between). */
static atomic_int reg_owner;

static const int cleanup_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGXFSZ};
#define N_CLEANUP_SIGNALS (sizeof cleanup_signals / sizeof cleanup_signals[0])
static sigset_t cleanup_set;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* Async-signal-safe: atomics, getpid, unlink, memset, sigaction and raise only. */
static void on_signal(int sig) {
    int saved = errno;
    if (atomic_load(&reg_owner) == (int)getpid()) {
        while (atomic_flag_test_and_set_explicit(&reg_busy, memory_order_acquire)) {
        }
        for (size_t i = 0; i < reg_n; i++) unlink(reg_paths[i]);
    }
    /* reg_busy stays taken: a thread still running until the signal ends the
     * process cannot enter a temporary the loop above has missed. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    /* pending until the handler returns (sig is blocked while it runs); then
     * the default action ends the process with sig as its status */
    raise(sig);
    errno = saved;
}

/* A forked child starts with an empty list: the temporaries in it are the
 * parent's, and the parent's other threads (which may have held the flag or
 * been growing the list at the fork) do not exist in the child. */
static void reset_in_child(void) {
    reg_paths = NULL;
    reg_n = reg_cap = 0;
    atomic_flag_clear(&reg_busy);
    atomic_store(&reg_owner, (int)getpid());
}

static void install(void) {
    atomic_store(&reg_owner, (int)getpid());
    pthread_atfork(NULL, NULL, reset_in_child);
    sigemptyset(&cleanup_set);
    for (size_t i = 0; i < N_CLEANUP_SIGNALS; i++) sigaddset(&cleanup_set, cleanup_signals[i]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_mask = cleanup_set; /* a second signal waits until the first has cleaned */
    for (size_t i = 0; i < N_CLEANUP_SIGNALS; i++) {
        struct sigaction old;
        /* an ignored signal stays ignored, a program's own handler stays */
        if (sigaction(cleanup_signals[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(cleanup_signals[i], &sa, NULL);
    }
}

static void reg_lock(sigset_t *old) {
    pthread_sigmask(SIG_BLOCK, &cleanup_set, old);
    while (atomic_flag_test_and_set_explicit(&reg_busy, memory_order_acquire)) sched_yield();
}

static void reg_unlock(const sigset_t *old) {
    atomic_flag_clear_explicit(&reg_busy, memory_order_release);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* Room for one more entry, grown outside the lock: the handler may land on a
 * thread inside malloc, and a critical section that waits for the allocator
 * would then never end (the handler spins for it). Returns -1 when out of
 * memory. */
static int reg_grow(void) {
    sigset_t old;
    reg_lock(&old);
    char **cur = reg_paths;
    size_t cap = reg_cap;
    bool full = reg_n == reg_cap;
    reg_unlock(&old);
    if (!full) return 0;
    size_t new_cap = cap ? 2 * cap : 8;
    char **grown = malloc(new_cap * sizeof *grown);
    if (!grown) return -1;
    reg_lock(&old);
    char **unused = grown;
    if (reg_paths == cur && reg_cap == cap) {   /* no other thread grew it meanwhile */
        if (reg_n) memcpy(grown, reg_paths, reg_n * sizeof *grown);
        unused = reg_paths;
        reg_paths = grown;
        reg_cap = new_cap;
    }
    reg_unlock(&old);
    free(unused);
    return 0;
}

/* Called with the registry locked. */
static void reg_remove(const char *path) {
    for (size_t i = 0; i < reg_n; i++)
        if (reg_paths[i] == path) {
            reg_paths[i] = reg_paths[--reg_n];
            return;
        }
}

/* What happens to a temporary together with its registry entry, in one step
 * the handler cannot come between. */
typedef enum { TMP_CREATE, TMP_RENAME, TMP_UNLINK, TMP_FORGET } tmp_step;

/* TMP_CREATE returns the new descriptor (-2: the list has no room, see
 * reg_grow); the others 0, or -1 with errno. */
static int tmp_do(hfq_atomic_file *af, tmp_step step) {
    sigset_t old;
    reg_lock(&old);
    int rc = 0, e = 0;
    switch (step) {
    case TMP_CREATE:
        if (reg_n == reg_cap) {   /* no room: the caller grows the list and comes back */
            rc = -2;
            break;
        }
        rc = mkstemp(af->tmp_path);
        if (rc >= 0) reg_paths[reg_n++] = af->tmp_path;
        break;
    case TMP_RENAME: rc = rename(af->tmp_path, af->path); break;
    case TMP_UNLINK: rc = unlink(af->tmp_path); break;
    case TMP_FORGET: break;
    }
    e = errno;
    if (step != TMP_CREATE && (step != TMP_RENAME || rc == 0)) reg_remove(af->tmp_path);
    reg_unlock(&old);
    errno = e;
    return rc;
}

/* ---------------------------------------------------------------- stale temporaries */

bool hfq_atomic_is_temp_name(const char *name, const char *base) {
    const size_t nb = strlen(base), ns = strlen(TMP_SUFFIX);
    if (nb == 0 || strlen(name) != nb + ns + TMP_RANDOM || memcmp(name, base, nb) != 0 ||
        memcmp(name + nb, TMP_SUFFIX, ns) != 0)
        return false;
    for (const char *c = name + nb + ns; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) return false;
    return true;
}

/* Removes name (in folder dfd) when it is a regular file of ours whose
 * writer is gone: its flock is free. The lock is held while the name is
 * checked to still be the locked file and removed, so a writer that has just
 * created it sees it unlinked once it gets the lock (hfq_atomic_open). */
static void remove_if_stale(int dfd, const char *name) {
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return; /* a symbolic link, gone, unreadable: not provably ours */
    struct stat st, now;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        flock(fd, LOCK_EX | LOCK_NB) == 0 && fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_dev == st.st_dev && now.st_ino == st.st_ino)
        unlinkat(dfd, name, 0);
    close(fd);
}

static void remove_stale(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return;
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    DIR *d = dir ? opendir(dir) : NULL;
    free(dir);
    if (!d) return; /* hfq_atomic_open's mkstemp reports a missing folder */
    for (struct dirent *e; (e = readdir(d));)
        if (hfq_atomic_is_temp_name(e->d_name, base)) remove_if_stale(dirfd(d), e->d_name);
    closedir(d);
}

/* ---------------------------------------------------------------- the file */

static void atomic_free(hfq_atomic_file *af) {
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    af->fp = NULL;
}

/* Creates the temporary, locked and still linked; the descriptor or -1. */
static int create_locked(hfq_atomic_file *af, size_t len) {
    for (int tries = 0; tries < CREATE_TRIES; tries++) {
        memcpy(af->tmp_path + len, TMP_SUFFIX "XXXXXX", strlen(TMP_SUFFIX) + TMP_RANDOM + 1);
        int fd;
        while ((fd = tmp_do(af, TMP_CREATE)) == -2)
            if (reg_grow()) {
                errno = ENOMEM;
                return -1;
            }
        if (fd < 0) return -1;
        /* not inherited by programs a tool may run: their lock would keep a
         * dead writer's temporary looking alive */
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
        struct stat st;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (fstat(fd, &st) == 0 && st.st_nlink > 0) return fd;
        } else if (errno != EWOULDBLOCK) {
            return fd; /* no flock here: no cleaner can lock (and so remove) it either */
        }
        /* a cleaner of stale temporaries of this path took it between mkstemp
         * and flock and removes it (or has): leave the name, take another */
        tmp_do(af, TMP_FORGET);
        close(fd);
    }
    errno = EEXIST;
    return -1;
}

int hfq_atomic_open(hfq_atomic_file *af, const char *path, hfq_error *err) {
    memset(af, 0, sizeof *af);
    pthread_once(&install_once, install);
    size_t len = strlen(path);
    af->path = strdup(path);
    af->tmp_path = malloc(len + strlen(TMP_SUFFIX) + TMP_RANDOM + 1);
    if (!af->path || !af->tmp_path) {
        atomic_free(af);
        return hfq_fail(err, path, "out of memory");
    }
    memcpy(af->tmp_path, path, len);
    remove_stale(path);
    int fd = create_locked(af, len);
    if (fd < 0) {
        int e = errno;
        atomic_free(af);
        return hfq_fail(err, path, "cannot create output: %s", strerror(e));
    }
    /* mkstemp creates 0600; outputs get the usual 0666 minus the umask */
    mode_t mask = umask(0);
    umask(mask);
    const char *what = "cannot set permissions on output";
    if (fchmod(fd, 0666 & ~mask) == 0) {
        what = "cannot open output";
        af->fp = fdopen(fd, "wb");
    }
    if (!af->fp) {
        int e = errno;
        tmp_do(af, TMP_UNLINK);
        close(fd);
        atomic_free(af);
        return hfq_fail(err, path, "%s: %s", what, strerror(e));
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
    /* Replacing a file, the data reaches the disk before the name points at
     * it: a power loss then leaves the old file or the whole new one, never
     * an empty file where the user's was. A new name replaces nothing and
     * does not wait for the disk (most of a quantize's time on a slow disk;
     * llama-quantize never waits). */
    struct stat st;
    const bool replaces = lstat(af->path, &st) == 0;
    if (fflush(af->fp) != 0 || (replaces && fsync(fileno(af->fp)) != 0))
        rc = hfq_fail(err, af->path, "write failed: %s", strerror(errno));
    /* a duplicate keeps the flock (it belongs to the open file, not to one
     * descriptor) from the close, whose error must be seen before the rename,
     * until after the rename: the complete temporary never looks stale */
    int lock_fd = dup(fileno(af->fp));
    if (lock_fd < 0 && rc == 0) rc = hfq_fail(err, af->path, "cannot keep the output locked: %s", strerror(errno));
    if (fclose(af->fp) != 0 && rc == 0) rc = hfq_fail(err, af->path, "close failed: %s", strerror(errno));
    af->fp = NULL;
    if (rc == 0 && tmp_do(af, TMP_RENAME) != 0) rc = hfq_fail(err, af->path, "rename failed: %s", strerror(errno));
    if (rc != 0) tmp_do(af, TMP_UNLINK);
    if (lock_fd >= 0) close(lock_fd);
    atomic_free(af);
    return rc;
}

void hfq_atomic_abort(hfq_atomic_file *af) {
    /* removed while still locked, so no cleaner can mistake it for stale */
    if (af->tmp_path) tmp_do(af, TMP_UNLINK);
    if (af->fp) fclose(af->fp);
    atomic_free(af);
}
