/* atomic_file.h - write an output file so that it appears only when complete.
 *
 * Data goes to a temporary file in the destination folder, "<path>.tmp.XXXXXX"
 * (the six letters or digits chosen by mkstemp); hfq_atomic_commit flushes
 * it, fsyncs it when <path> exists (so that a power loss cannot leave an
 * empty file where the user's was; a new name has nothing to lose and does
 * not wait for the disk) and renames it over <path>. On any failure, or on hfq_atomic_abort,
 * the temporary file is removed and <path> is untouched. Every file the tools
 * write goes through here (docs/robustness.md), so the two rules below cover
 * them all.
 *
 * Signals. A process stopped by SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE or
 * SIGXFSZ removes its temporaries in progress, then dies of the same signal
 * (the default disposition is restored and the signal raised again, so the
 * exit status still says "killed by SIGINT"). The handler is installed at the
 * first hfq_atomic_open, only for signals whose disposition is still the
 * default: an ignored signal (nohup's SIGHUP) stays ignored and a handler the
 * program installed itself is kept. This needs the one piece of process-wide
 * state in formats/: the list of temporaries in progress, because a signal
 * handler can reach nothing else. Each temporary is entered in it when
 * created and leaves it in the same step as its rename (commit) or removal
 * (abort), so the handler never removes a name that is no longer ours. Threads
 * may open and commit concurrently: the list is guarded by a lock-free flag,
 * taken with these signals blocked in the taking thread, so the handler
 * (which takes the same flag, on whichever thread it runs) never waits on its
 * own thread and never sees the list half-changed. The handler keeps the flag
 * until the process ends, so no thread can create a temporary it would miss.
 * A forked child starts with an empty list (the temporaries are the
 * parent's). Paths are kept as given: a relative path assumes the working
 * folder does not change while the file is in progress.
 *
 * Stale temporaries. SIGKILL or a power loss leaves the temporary behind.
 * A writer holds an exclusive flock() on its temporary while writing (the
 * kernel drops it when the process dies), and hfq_atomic_open first removes
 * the temporaries of the same <path> whose writer is gone: entries beside
 * <path> named exactly "<name of path>.tmp." and six ASCII letters or digits,
 * regular files (not symbolic links) owned by this user, on which
 * flock(LOCK_EX | LOCK_NB) succeeds; the lock is held while the name is
 * checked to still be that file and removed. A temporary another live process
 * is writing stays. A new temporary counts as created only once its writer
 * holds the lock and finds it still linked (a cleaner may have taken it in
 * the instant between mkstemp and flock; the writer then picks another name).
 * Where flock is not supported (some network file systems) nothing is locked
 * and nothing is removed. The cleaning is best effort and silent: a
 * temporary that cannot be removed is left as it was. A file of the user's
 * own that happens to be named like a temporary of <path> and is not locked
 * counts as stale.
 */
#ifndef HFQ_FORMATS_ATOMIC_FILE_H
#define HFQ_FORMATS_ATOMIC_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/error.h"

typedef struct hfq_atomic_file {
    FILE *fp;          /* open for writing while the file is in progress */
    char *path;        /* final destination */
    char *tmp_path;    /* temporary file beside it */
} hfq_atomic_file;

int hfq_atomic_open(hfq_atomic_file *af, const char *path, hfq_error *err);
/* Writes n bytes; on a short write fills err (naming the final path). */
int hfq_atomic_write(hfq_atomic_file *af, const void *buf, size_t n, hfq_error *err);
int hfq_atomic_commit(hfq_atomic_file *af, hfq_error *err);
void hfq_atomic_abort(hfq_atomic_file *af);

/* True when name (a folder entry, no '/') is a temporary hfq_atomic_open
 * would create for an output whose file name is base (no folder). */
bool hfq_atomic_is_temp_name(const char *name, const char *base);

#endif
